// Connection-setup rate and memory of the CM, measured in one run on this machine:
//
//  1. our cmtime (server -L and client as two processes on 127.0.0.1, -c N): connects/s from the
//     "full connect" row of the client's "Connect (N) QPs test" table, twice:
//     - warm (the target row): with `--warmup W` (W untimed connections first, in rounds of N),
//       so that the timed run measures the connection path once V8 has compiled it;
//     - cold (no target): rdma-core's warmup of one connection, so that most of the timed run
//       is interpreted code and the JIT compiling it (a few thousand connections on a 2-CPU machine);
//  2. plain Node TCP beside it, same machine, same run, warmed up the same way: a server process
//     and a client that (a) connects N sockets at once and closes them (the shape of cmtime's
//     table) and (b) loops connect → close one at a time; plus cmtime's own socket baseline
//     (-S, with the same --warmup); and Node's own cold/warm in cmtime's shape (bench/net-connect.js,
//     fresh processes, warm-up W against one connection);
//  3. memory: 10,000 connect/disconnect cycles through one listener in one process (after 2,000
//     warm-up cycles), RSS after a forced GC before, during and after.
//
//   node bench/cmtime.js            (npm run build first)
//   BENCH_CM_CONNS=1000 BENCH_CM_WARMUP=4000 BENCH_CM_CYCLES=10000 BENCH_CM_ROUNDS=3 node bench/cmtime.js
//   (BENCH_CM_ROUNDS=0: the memory run only; BENCH_CM_CYCLES=0: the rates only)
//
// Numbers are noisy (two processes on a small machine): compare within one run. cmtime ends
// with status 1 on iWARP (its "no QPs" run needs IB's CONNECT_RESPONSE, see docs/man/cmtime.1.md);
// the table used here is printed before that.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';

const CMTIME = fileURLToPath(new URL('../dist/cli/cmtime.js', import.meta.url));
const INDEX = fileURLToPath(new URL('../dist/index.js', import.meta.url));
const CONNS = Number(process.env.BENCH_CM_CONNS ?? 1000);
const CYCLES = Number(process.env.BENCH_CM_CYCLES ?? 10_000);
const ROUNDS = Number(process.env.BENCH_CM_ROUNDS ?? 3);
const WARMUP = Number(process.env.BENCH_CM_WARMUP ?? 4000);
let nextPort = 23000 + (process.pid % 5000);

function run(args, { timeoutMs = 180_000 } = {}) {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (err += d));
    const t = setTimeout(() => c.kill('SIGKILL'), timeoutMs);
    c.on('close', (code) => {
      clearTimeout(t);
      resolve({ code, out, err });
    });
  });
}

/** The rows of the first table after `heading` in cmtime's output: { step: { total, usPerConn, ... } }. */
function table(text, heading) {
  const at = text.indexOf(heading);
  if (at < 0) return null;
  const rows = {};
  for (const line of text.slice(at).split('\n').slice(1)) {
    const m = /^(.{13})\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$/.exec(line);
    if (!m) {
      if (Object.keys(rows).length) break;
      continue;
    }
    rows[m[1].trim()] = { avg: +m[2], total: +m[3], usPerConn: +m[4], sum: +m[5], max: +m[6], min: +m[7] };
  }
  return rows;
}

/** Start a server process (`srvArgv`), give it 300 ms to listen, run the client (`cliArgv`); both results. */
async function serverThenClient(srvArgv, cliArgv) {
  const srv = run(srvArgv);
  await new Promise((r) => setTimeout(r, 300));
  const cli = await run(cliArgv);
  return { cli, srv: await srv };
}

function cmtimePair(extra) {
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(nextPort++), '-c', String(CONNS), ...extra];
  return serverThenClient([CMTIME, ...common, '-L'], [CMTIME, ...common]);
}

async function cmtimeRate(extra = []) {
  const { cli, srv } = await cmtimePair(extra);
  const t = table(cli.out, `Connect (${CONNS}) QPs test`);
  const st = table(srv.out, `Accept (${CONNS}) QPs test`);
  if (!t) throw new Error(`cmtime client printed no table (exit ${cli.code}):\n${cli.out}\n${cli.err}`);
  return { rate: CONNS / (t['full connect'].total / 1e6), full: t['full connect'].total, cm: t['cm connect'].total, srvCm: st?.['cm connect']?.total };
}

const NET_CONNECT = fileURLToPath(new URL('./net-connect.js', import.meta.url));
/**
 * Plain Node's connects/s in cmtime's shape (bench/net-connect.js: a fresh server and client
 * process, CONNS connections at once, a 24-byte request and reply on each) after `warmup` untimed
 * connections: 1 is its one-shot run, as cmtime's cold one.
 */
async function netConnectRate(warmup) {
  const args = ['-p', String(nextPort++), '-c', String(CONNS), '--warmup', String(warmup)];
  const { cli } = await serverThenClient([NET_CONNECT, 'server', ...args], [NET_CONNECT, 'client', ...args]);
  const line = cli.out.trim().split('\n').filter((l) => l.startsWith('{')).pop();
  if (cli.code !== 0 || !line) throw new Error(`net-connect client failed (exit ${cli.code}):\n${cli.out}\n${cli.err}`);
  return 1e6 / JSON.parse(line).usec_per_conn;
}

async function cmtimeSocketBaseline() {
  const { cli } = await cmtimePair(['-S', '--warmup', String(WARMUP)]);
  const t = table(cli.out, 'Client baseline socket results:');
  return t ? CONNS / (t['full connect'].total / 1e6) : NaN;
}

/** A plain Node TCP server in its own process. */
async function tcpServer() {
  const src = `const net=require('net');const s=net.createServer({noDelay:true},(c)=>{c.on('error',()=>{});c.on('end',()=>c.end());});` +
    `s.listen({port:0,host:'127.0.0.1',backlog:1024},()=>process.stdout.write(s.address().port+'\\n'));`;
  const child = spawn(process.execPath, ['-e', src], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = Number(await new Promise((r) => child.stdout.once('data', (d) => r(String(d).trim()))));
  return { port, close: () => child.kill() };
}

const connectOne = (port) =>
  new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1', noDelay: true }, () => resolve(s));
    s.once('error', reject);
  });
const closeOne = (s) =>
  new Promise((resolve) => {
    s.once('close', resolve);
    s.end();
  });

async function tcpConcurrent(port) {
  const t0 = performance.now();
  const socks = await Promise.all(Array.from({ length: CONNS }, () => connectOne(port)));
  const t1 = performance.now();
  await Promise.all(socks.map(closeOne));
  return CONNS / ((t1 - t0) / 1000);
}

async function tcpLoop(port) {
  const t0 = performance.now();
  for (let i = 0; i < CONNS; i++) await closeOne(await connectOne(port));
  return CONNS / ((performance.now() - t0) / 1000);
}

// -- memory: a child with --expose-gc runs the cycles ---------------------------------------------

const RSS_CHILD = `
const { createId, createEventChannel, PortSpace, CmEventType: E } = await import(${JSON.stringify(INDEX)});
const CYCLES = ${CYCLES}, BATCH = 100;
const sch = createEventChannel();
const listen = createId(sch, null, PortSpace.TCP);
listen.bindAddr({ address: '127.0.0.1', port: 0 });
await listen.listen(0);
(async () => {
  for await (const ev of sch) {
    const id = ev.id, t = ev.event;
    ev.ack();
    if (t === E.CONNECT_REQUEST) { id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } }); await id.accept(); }
    else if (t === E.DISCONNECTED) { id.destroyQp(); await id.destroy(); }
  }
})();
const cch = createEventChannel();
async function batch(n) {
  const ids = [];
  for (let i = 0; i < n; i++) { const id = createId(cch, i, PortSpace.TCP); ids.push(id); await id.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort }); }
  let est = 0;
  while (est < n) {
    const ev = await cch.getEvent(); const id = ev.id, t = ev.event; ev.ack();
    if (t === E.ADDR_RESOLVED) await id.resolveRoute();
    else if (t === E.ROUTE_RESOLVED) { id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } }); await id.connect(); }
    else if (t === E.ESTABLISHED) est++;
    else throw new Error('event ' + t + ' status ' + ev.status);
  }
  for (const id of ids) await id.disconnect();
  let d = 0;
  while (d < n) { const ev = await cch.getEvent(); if (ev.event === E.DISCONNECTED) d++; ev.ack(); }
  for (const id of ids) { id.destroyQp(); await id.destroy(); }
}
const settle = async () => { for (let i = 0; i < 4; i++) { await new Promise((r) => setTimeout(r, 250)); gc(); } return process.memoryUsage(); };
// Warm up (JIT, pools, allocator arenas) before the first sample.
for (let i = 0; i < 2000; i += BATCH) await batch(BATCH);
const before = await settle();
const samples = [];
let secs = 0;
for (let i = 0; i < CYCLES; i += BATCH) {
  const t0 = performance.now();
  await batch(Math.min(BATCH, CYCLES - i));
  secs += (performance.now() - t0) / 1000;
  if ((i + BATCH) % Math.max(BATCH, Math.floor(CYCLES / 4 / BATCH) * BATCH) === 0 && i + BATCH < CYCLES) samples.push([i + BATCH, (await settle()).rss]);
}
const after = await settle();
process.stdout.write(JSON.stringify({ before, after, secs, samples }));
process.exit(0);
`;

async function rss() {
  const r = await run(['--expose-gc', '--input-type=module', '-e', RSS_CHILD], { timeoutMs: 600_000 });
  if (r.code !== 0) throw new Error(`memory run failed (${r.code}): ${r.err}`);
  return JSON.parse(r.out);
}

// -- main ----------------------------------------------------------------------------------------

/** The section: connection rates (warm, cold, Node TCP) and the memory run; JSON-ready result. */
export async function cmBench({ rounds = ROUNDS, cycles = CYCLES, log = console.log } = {}) {
  if (!existsSync(CMTIME)) throw new Error(`${CMTIME} is missing: npm run build`);
  const mb = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  const best = (xs) => Math.max(...xs);
  const result = { conns: CONNS, warmup: WARMUP, rounds, unit: 'connects/s' };
  log(`connection setup: ${CONNS} connections per run after ${WARMUP} warm-up connections, best of ${rounds} runs (loopback, this machine)`);
  if (rounds > 0) {
    // Rounds interleave the measurements: every connection closed here leaves a TIME_WAIT
    // socket for a minute, and connect(2)'s port search slows as they pile up, so whatever ran
    // last would be measured on the most crowded port space.
    const cm = [];
    const cold = [];
    const sockBase = [];
    const conc = [];
    const loop = [];
    const netCold = [];
    const netWarm = [];
    const srv = await tcpServer();
    try {
      // The in-process TCP baselines get the same warm-up as cmtime --warmup.
      for (let n = 0; n < WARMUP; n += CONNS) await tcpConcurrent(srv.port);
      for (let n = 0; n < WARMUP; n += CONNS) await tcpLoop(srv.port);
      for (let i = 0; i < rounds; i++) {
        cm.push(await cmtimeRate(['--warmup', String(WARMUP)]));
        cold.push(await cmtimeRate());
        sockBase.push(await cmtimeSocketBaseline());
        conc.push(await tcpConcurrent(srv.port));
        loop.push(await tcpLoop(srv.port));
        netWarm.push(await netConnectRate(WARMUP));
        netCold.push(await netConnectRate(1));
      }
    } finally {
      srv.close();
    }
    const rate = best(cm.map((x) => x.rate));
    const coldRate = best(cold.map((x) => x.rate));
    const fmt = (x) => `${x.toFixed(0).padStart(7)} /s`;
    const runs = (xs) => `runs: ${xs.map((x) => x.rate.toFixed(0)).join(', ')}; cm connect ${xs.map((x) => (x.cm / 1000).toFixed(0)).join(', ')} ms`;
    log(`  cmtime (RDMA CM, QPs), warm       ${fmt(rate)}   ${runs(cm)}`);
    log(`  cmtime -S (its socket baseline)  ${fmt(best(sockBase))}   runs: ${sockBase.map((x) => x.toFixed(0)).join(', ')}`);
    log(`  Node TCP, ${CONNS} at once + close   ${fmt(best(conc))}   runs: ${conc.map((x) => x.toFixed(0)).join(', ')}`);
    log(`  Node TCP, connect+close loop     ${fmt(best(loop))}   runs: ${loop.map((x) => x.toFixed(0)).join(', ')}`);
    log(`  ratio cmtime / TCP at once: ${(rate / best(conc)).toFixed(2)}   / TCP loop: ${(rate / best(loop)).toFixed(2)}   (targets: >= 5000/s, >= 0.5x)`);
    log(`  cold: cmtime with rdma-core's 1-connection warmup ${fmt(coldRate)}   ${runs(cold)}   cold/warm ${(coldRate / rate).toFixed(2)} (target >= 0.8)`);
    const nodeColdVsWarm = best(netCold) / best(netWarm);
    log(`  Node TCP in cmtime's shape, fresh processes: warm ${fmt(best(netWarm))}, one-shot ${fmt(best(netCold))}   its own cold/warm ${nodeColdVsWarm.toFixed(2)}`);
    Object.assign(result, {
      warm: rate,
      cold: coldRate,
      coldVsWarm: coldRate / rate,
      nodeShapeWarm: best(netWarm),
      nodeShapeCold: best(netCold),
      nodeColdVsWarm,
      socketBaseline: best(sockBase),
      nodeConcurrent: best(conc),
      nodeLoop: best(loop),
      vsNodeConcurrent: rate / best(conc),
      vsNodeLoop: rate / best(loop),
      runs: { warm: cm, cold, socketBaseline: sockBase, nodeConcurrent: conc, nodeLoop: loop, nodeShapeWarm: netWarm, nodeShapeCold: netCold },
    });
  }
  if (cycles > 0) {
    const m = await rss();
    log(`memory: ${cycles} connect/disconnect cycles (batches of 100, one process, after GC) in ${m.secs.toFixed(1)} s (${(cycles / m.secs).toFixed(0)} cycles/s)`);
    log(`  rss       ${mb(m.before.rss)} -> ${mb(m.after.rss)}  (${m.after.rss >= m.before.rss ? '+' : ''}${mb(m.after.rss - m.before.rss)}; after ${m.samples.map(([n, r]) => `${n}: ${mb(r)}`).join(', ')})`);
    log(`  heapUsed  ${mb(m.before.heapUsed)} -> ${mb(m.after.heapUsed)}`);
    log(`  external  ${mb(m.before.external)} -> ${mb(m.after.external)}`);
    result.memory = { cycles, secs: m.secs, before: m.before, after: m.after, samples: m.samples };
  }
  return result;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await cmBench();
}
