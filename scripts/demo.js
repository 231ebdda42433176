// npm start: run the tools end to end over the software iWARP device on this machine — each as a
// server and a client process, as a user would run them from two terminals — and show their
// output. Exits non-zero if any run fails. Every process has a timeout.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

const tool = (name) => fileURLToPath(new URL(`../dist/cli/${name}.js`, import.meta.url));

function run(name, args, timeoutMs = 60_000) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [tool(name), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code, sig) => {
      clearTimeout(t);
      resolve({ code: code ?? (sig === 'SIGKILL' ? 137 : 143), out });
    });
  });
}

async function freePort(host) {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, host, r));
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return String(p);
}

/** A server process and, once it listens, a client process; both must exit 0. */
async function pair(title, name, { host = '127.0.0.1', server, client, clientTool = name }) {
  process.stdout.write(`\n=== ${title}\n`);
  const port = await freePort(host);
  const srv = run(name, server(host, port));
  await new Promise((r) => setTimeout(r, 500));
  const cli = await run(clientTool, client(host, port));
  const s = await srv;
  process.stdout.write(`--- client: ${clientTool} ${client(host, port).join(' ')} (exit ${cli.code})\n${cli.out}`);
  process.stdout.write(`--- server: ${name} ${server(host, port).join(' ')} (exit ${s.code})\n${s.out}`);
  return cli.code === 0 && s.code === 0;
}

const runs = [
  ['rping -v -V, IPv4', 'rping', { server: (h, p) => ['-s', '-a', h, '-p', p, '-C', '5', '-v', '-V'], client: (h, p) => ['-c', '-a', h, '-p', p, '-C', '5', '-v', '-V'] }],
  ['rping -S 100, IPv6', 'rping', { host: '::1', server: (h, p) => ['-s', '-a', h, '-p', p, '-S', '100', '-V'], client: (h, p) => ['-c', '-a', h, '-p', p, '-C', '50', '-S', '100', '-V'] }],
  ['ucmatose, 10 connections x 10 messages', 'ucmatose', { server: (h, p) => ['-b', h, '-p', p, '-c', '10', '-C', '10'], client: (h, p) => ['-s', h, '-p', p, '-c', '10', '-C', '10'] }],
  ['rdma_server / rdma_client', 'rdma_server', { clientTool: 'rdma_client', server: (h, p) => ['-s', h, '-p', p], client: (h, p) => ['-s', h, '-p', p] }],
  ['rstream over rsockets, 64 KiB x 100 x 10, verified', 'rstream', { server: (h, p) => ['-b', h, '-p', p, '-S', '65536', '-C', '100', '-I', '10', '-T', 'v'], client: (h, p) => ['-s', h, '-p', p, '-S', '65536', '-C', '100', '-I', '10', '-T', 'v'] }],
  ['riostream over rsockets (riomap/riowrite), verified', 'riostream', { server: (h, p) => ['-b', h, '-p', p, '-S', '4096', '-C', '100', '-I', '5', '-T', 'v'], client: (h, p) => ['-s', h, '-p', p, '-S', '4096', '-C', '100', '-I', '5', '-T', 'v'] }],
];

let failed = 0;
for (const [title, name, opts] of runs) if (!(await pair(title, name, opts))) failed++;
process.stdout.write(failed ? `\n${failed} run(s) FAILED\n` : `\nall ${runs.length} runs passed\n`);
process.exitCode = failed ? 1 : 0;
