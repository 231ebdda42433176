// npm start: run the tools end to end over the software iWARP device on this machine —
// an rping server and client on 127.0.0.1 and on ::1, with data validation — and show their output.
// Exits non-zero if any run fails. Every process has a timeout.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

const RPING = fileURLToPath(new URL('../dist/cli/rping.js', import.meta.url));

function run(args, timeoutMs = 20000) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [RPING, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let errOut = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (errOut += d));
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code, sig) => {
      clearTimeout(t);
      resolve({ code: code ?? 128 + (sig === 'SIGKILL' ? 9 : 15), out, err: errOut });
    });
  });
}

async function freePort(host) {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, host, r));
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return p;
}

async function pingPair(host, extra) {
  const port = String(await freePort(host));
  const server = run(['-s', '-a', host, '-p', port, ...extra]);
  await new Promise((r) => setTimeout(r, 300));
  const client = await run(['-c', '-a', host, '-p', port, ...extra]);
  const srv = await server;
  return { client, srv };
}

let failed = 0;
for (const [host, extra] of [
  ['127.0.0.1', ['-C', '5', '-v', '-V']],
  ['::1', ['-C', '5', '-v', '-V', '-S', '100']],
  ['127.0.0.1', ['-C', '200', '-V', '-S', '65535']],
]) {
  const title = `rping ${extra.join(' ')} over siw on ${host}`;
  process.stdout.write(`\n=== ${title}\n`);
  const { client, srv } = await pingPair(host, extra);
  process.stdout.write(`--- client (exit ${client.code})\n${client.out}${client.err}`);
  process.stdout.write(`--- server (exit ${srv.code})\n${srv.out}${srv.err}`);
  if (client.code !== 0 || srv.code !== 0) failed++;
}
process.stdout.write(failed ? `\n${failed} run(s) FAILED\n` : '\nall runs passed\n');
process.exitCode = failed ? 1 : 0;
