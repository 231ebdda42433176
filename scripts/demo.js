// npm start: run the tools end to end over the software devices on this machine (the connected
// tools over iWARP, then over RoCE pinned with RDMACM_DEVICE=rxe_lo; udaddy and mckey over RoCE) — each as a server and a client process, as a user
// would run them from two terminals — and show their output. Exits non-zero if any run fails.
// Every process has a timeout.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

const tool = (name) => fileURLToPath(new URL(`../dist/cli/${name}.js`, import.meta.url));

function run(name, args, env = {}, timeoutMs = 60_000) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [tool(name), ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
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
async function pair(title, name, { host = '127.0.0.1', server, client, clientTool = name, settleMs = 500, env = {} }) {
  process.stdout.write(`\n=== ${title}\n`);
  const port = await freePort(host);
  const srv = run(name, server(host, port), env);
  await new Promise((r) => setTimeout(r, settleMs));
  const cli = await run(clientTool, client(host, port), env);
  const s = await srv;
  const pre = Object.entries(env).map(([k, v]) => `${k}=${v} `).join('');
  process.stdout.write(`--- client: ${pre}${clientTool} ${client(host, port).join(' ')} (exit ${cli.code})\n${cli.out}`);
  process.stdout.write(`--- server: ${pre}${name} ${server(host, port).join(' ')} (exit ${s.code})\n${s.out}`);
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

/**
 * mckey: `receivers` receiver processes join the group first (they print `mckey: joined ...`),
 * then one sender; all must exit 0. The group traffic stays on the loopback interface.
 */
async function mcGroup(title, { receivers, args }) {
  process.stdout.write(`\n=== ${title}\n`);
  const recv = [];
  for (let i = 0; i < receivers; i++) {
    const p = spawn(process.execPath, [tool('mckey'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    const t = setTimeout(() => p.kill('SIGKILL'), 60_000);
    const done = new Promise((resolve) => p.on('exit', (code, sig) => (clearTimeout(t), resolve({ code: code ?? (sig === 'SIGKILL' ? 137 : 143), out }))));
    recv.push({ out: () => out, done, exited: () => p.exitCode !== null || p.signalCode !== null });
  }
  const t0 = Date.now();
  while (recv.some((r) => !r.out().includes('mckey: joined') && !r.exited()) && Date.now() - t0 < 15_000) await new Promise((r) => setTimeout(r, 50));
  const snd = await run('mckey', [...args, '-s']);
  process.stdout.write(`--- sender: mckey ${[...args, '-s'].join(' ')} (exit ${snd.code})\n${snd.out}`);
  let ok = snd.code === 0;
  for (const [i, r] of recv.entries()) {
    const res = await r.done;
    process.stdout.write(`--- receiver ${i + 1}: mckey ${args.join(' ')} (exit ${res.code})\n${res.out}`);
    ok &&= res.code === 0;
  }
  return ok;
}

// The same connected tools over the soft RoCEv2 device: RC through the IB CM.
const ROCE = { RDMACM_DEVICE: 'rxe_lo' };
const rcRuns = [
  ['RoCE: rping -v -V over rxe_lo', 'rping', { env: ROCE, server: (h, p) => ['-s', '-a', h, '-p', p, '-C', '5', '-v', '-V'], client: (h, p) => ['-c', '-a', h, '-p', p, '-C', '5', '-v', '-V'] }],
  ['RoCE: ucmatose, 10 connections x 10 messages over rxe_lo', 'ucmatose', { env: ROCE, server: (h, p) => ['-b', h, '-p', p, '-c', '10', '-C', '10'], client: (h, p) => ['-s', h, '-p', p, '-c', '10', '-C', '10'] }],
  ['RoCE: rstream over rsockets on rxe_lo, 64 KiB x 100 x 10, verified', 'rstream', { env: ROCE, server: (h, p) => ['-b', h, '-p', p, '-S', '65536', '-C', '100', '-I', '10', '-T', 'v'], client: (h, p) => ['-s', h, '-p', p, '-S', '65536', '-C', '100', '-I', '10', '-T', 'v'] }],
];

const udRuns = [
  ['udaddy: 4 UD paths (SIDR) x 10 datagrams with immediate data', 'udaddy', { settleMs: 1000, server: (h) => ['-b', h, '-c', '4'], client: (h) => ['-s', h, '-c', '4'] }],
];

let failed = 0;
for (const [title, name, opts] of runs) if (!(await pair(title, name, opts))) failed++;
for (const [title, name, opts] of rcRuns) if (!(await pair(title, name, opts))) failed++;
for (const [title, name, opts] of udRuns) if (!(await pair(title, name, opts))) failed++;
if (!(await mcGroup('mckey: one sender, two receivers on group 239.255.0.1', { receivers: 2, args: ['-m', '239.255.0.1', '-b', '127.0.0.1'] }))) failed++;
const total = runs.length + rcRuns.length + udRuns.length + 1;
process.stdout.write(failed ? `\n${failed} run(s) FAILED\n` : `\nall ${total} runs passed\n`);
process.exitCode = failed ? 1 : 0;
