// The http section of `npm run bench`: node:http over rsockets (rdmacm/http) beside node:http over
// Node TCP, the same server and client code (bench/http-peer.js) in the same run:
//
//   requests/s   sequential GETs of a 64 B body over one keep-alive connection, after as many
//                untimed ones (Node's HTTP parser and streams on both sides: what an unchanged
//                HTTP program gets from the transport under it);
//   64 MiB PUT   one request body of 64 MiB to a server that reads and counts it;
//   64 MiB GET   one response body of 64 MiB.
//
// Ratios are rsockets over TCP, the median of the rounds' ratios (higher is better for every row).
// Server and client are two processes pinned to one CPU each (bench/lib.js). The rsocket runs use
// the soft iWARP device (RDMACM_DEVICE=siw_lo) unless RDMACM_DEVICE says otherwise.
import { spawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fmtSpread, fx, lastJson, median, pinned, run, PIN, spread } from './lib.js';

const PEER = fileURLToPath(new URL('./http-peer.js', import.meta.url));
const NODE = process.execPath;
const TRANSPORTS = [
  { id: 'rs', label: 'rsockets' },
  { id: 'tcp', label: 'Node TCP' },
];
const ROWS = [
  { id: 'rps', name: 'requests/s', unit: 'req/s', digits: 0 },
  { id: 'putGbps', name: '64 MiB PUT', unit: 'Gb/s', digits: 2 },
  { id: 'getGbps', name: '64 MiB GET', unit: 'Gb/s', digits: 2 },
];

/** Start a server on PIN[0]; resolves `{ port, stop() }` once it prints its port. */
function startServer(transport, env) {
  return new Promise((resolve, reject) => {
    const [cmd, args] = pinned(PIN?.[0] ?? null, NODE, [PEER, 'server', '--transport', transport]);
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
    let out = '';
    let err = '';
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`http-peer server (${transport}) did not listen within 20 s\n${err}`));
    }, 20_000);
    const exited = new Promise((r) => child.once('close', r));
    child.stderr.on('data', (d) => (err += d));
    child.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (!line) return;
      clearTimeout(t);
      resolve({
        port: JSON.parse(line).port,
        async stop() {
          child.stdin.end();
          const k = setTimeout(() => child.kill('SIGKILL'), 10_000);
          await exited;
          clearTimeout(k);
        },
      });
    });
    child.once('close', (code) => {
      clearTimeout(t);
      reject(new Error(`http-peer server (${transport}) exited ${code}\n${err}`));
    });
  });
}

async function once(transport, { requests, bytes }) {
  const env = { ...process.env };
  if (transport === 'rs' && !env.RDMACM_DEVICE) env.RDMACM_DEVICE = 'siw_lo';
  const srv = await startServer(transport, env);
  try {
    const cli = await run(NODE, [PEER, 'client', '--transport', transport, '--port', String(srv.port), '--requests', String(requests), '--warmup', String(requests), '--bytes', String(bytes)], { side: 1, timeoutMs: 300_000, env });
    if (cli.code !== 0) throw new Error(`http-peer client (${transport}) exit ${cli.code}\n${cli.err}`);
    return lastJson(cli.out);
  } finally {
    await srv.stop();
  }
}

export async function httpBench({ reps = 3, scale = 1, log = console.log } = {}) {
  const requests = Math.max(100, Math.round(Number(process.env.BENCH_HTTP_REQUESTS ?? 5000) * scale));
  const bytes = Number(process.env.BENCH_HTTP_BYTES ?? 64 << 20);
  const runs = Object.fromEntries(TRANSPORTS.map((t) => [t.id, []]));
  for (let i = 0; i < reps; i++) for (const t of TRANSPORTS) runs[t.id].push(await once(t.id, { requests, bytes }));
  const rows = ROWS.map((row) => {
    const m = Object.fromEntries(TRANSPORTS.map((t) => [t.id, median(runs[t.id].map((x) => x[row.id]))]));
    const ratios = spread(runs.rs.map((x, k) => x[row.id] / runs.tcp[k][row.id]));
    const rounds = Object.fromEntries(TRANSPORTS.map((t) => [t.id, spread(runs[t.id].map((x) => x[row.id]))]));
    return { ...row, median: m, ratio: ratios?.median ?? null, ratioRange: ratios ? [ratios.min, ratios.max] : null, rounds };
  });
  const r = { reps, requests, bytes, device: process.env.RDMACM_DEVICE ?? 'siw_lo', rows, runs };
  log(`http: node:http over rsockets (rdmacm/http, ${r.device}) and over Node TCP, the same server and client, ${reps} run(s) each, median${PIN ? `; server on CPU ${PIN[0]}, client on CPU ${PIN[1]}` : '; unpinned'}`);
  log(`  requests/s: ${requests} sequential GETs (64 B body) on one keep-alive connection after ${requests} untimed; PUT / GET: one ${bytes >> 20} MiB body`);
  const w = 12;
  log(`${'test'.padEnd(14)}${'unit'.padEnd(8)}${TRANSPORTS.map((t) => t.label.padStart(w)).join('')}   rsockets / TCP (median of the rounds' ratios, higher is better)`);
  for (const row of rows) {
    log(`${row.name.padEnd(14)}${row.unit.padEnd(8)}${TRANSPORTS.map((t) => fx(row.median[t.id], row.digits).padStart(w)).join('')}   ${fx(row.ratio)}`);
    log(`      rounds ${TRANSPORTS.map((t) => `${t.label} ${fmtSpread(row.rounds[t.id], row.digits)}`).join('  ')}`);
  }
  return r;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await httpBench({ reps: Number(process.env.BENCH_REPS ?? 3) });
}
