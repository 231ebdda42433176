// Bounded connect/disconnect churn in one process: a listener and a client on event channels, one
// connection at a time — resolve, connect, one SEND, disconnect, destroy — for CHURN_CYCLES cycles
// (default 5000) or CHURN_SECONDS (default 20), whichever comes first. In a child with --expose-gc:
// after a warm-up, heap (without compiled code) and external memory measured after full GCs must
// stay flat, and the process must hold no more sockets at the end than at the start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from '../lib/tools.js';

const DIST_INDEX = join(REPO_ROOT, 'dist', 'index.js');
const CYCLES = Number(process.env.CHURN_CYCLES ?? 5000);
const SECONDS = Number(process.env.CHURN_SECONDS ?? 20);
/**
 * Cycles before measuring: the heap settles after a couple of thousand connections (compiled code
 * and its feedback, connections lingering until the peer's FIN), then stays flat.
 */
const WARMUP = 2500;
/** Samples are taken every SAMPLE cycles after the warm-up; at least three are needed. */
const SAMPLE = 250;
/** Allowed growth between the first and the last samples (medians of three): ~250 bytes a connection. */
const MAX_GROWTH = 512 * 1024;

const CHILD = `
import { readdirSync, readlinkSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';
const { createId, createEventChannel, PortSpace, CmEventType: E, Access, WrOpcode, SendFlags, WcStatus, settleConnections } = await import(${JSON.stringify(DIST_INDEX)});
const [maxCycles, maxMs, warmup, every] = process.argv.slice(1).map(Number);
const sockets = () => readdirSync('/proc/self/fd').filter((fd) => { try { return readlinkSync('/proc/self/fd/' + fd).startsWith('socket:'); } catch { return false; } }).length;
const deadline = AbortSignal.timeout(maxMs + 30000);
const sch = createEventChannel();
const cch = createEventChannel();
const listen = createId(sch, null, PortSpace.TCP);
listen.bindAddr({ address: '127.0.0.1', port: 0 });
await listen.listen(0);
const port = listen.srcPort;
const baseSockets = sockets();

// Server: accept with one receive posted; on DISCONNECTED check the message and tear down.
let served = 0;
let received = 0;
const serverDone = [];
(async () => {
  for (;;) {
    let ev;
    try { ev = await sch.getEvent(); } catch { return; }
    const id = ev.id;
    const type = ev.event;
    ev.ack();
    if (type === E.CONNECT_REQUEST) {
      id.createQp(null, { cap: { maxSendWr: 2, maxRecvWr: 2 } });
      id.mr = id.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
      id.qp.postRecv({ wrId: 1, sgList: [{ addr: id.mr.addr, length: 16, lkey: id.mr.lkey }] });
      await id.accept();
    } else if (type === E.DISCONNECTED) {
      const wc = id.recvCq.poll(2);
      if (wc.length === 1 && wc[0].status === WcStatus.SUCCESS && wc[0].byteLen === 8) received++;
      id.destroyQp();
      id.mr.dereg();
      await id.destroy();
      served++;
      serverDone.shift()?.();
    } else if (type !== E.ESTABLISHED) throw new Error('server event ' + type + ' status ' + ev.status);
  }
})();

async function next(want) {
  const ev = await cch.getEvent(deadline);
  const type = ev.event;
  const status = ev.status;
  ev.ack();
  if (type !== want) throw new Error('client event ' + type + ' status ' + status + ', expected ' + want);
}

const msg = Buffer.from('churn-01');
async function cycle() {
  const id = createId(cch, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port }, 2000);
  await next(E.ADDR_RESOLVED);
  await id.resolveRoute(2000);
  await next(E.ROUTE_RESOLVED);
  id.createQp(null, { cap: { maxSendWr: 2, maxRecvWr: 2 } });
  await id.connect({ responderResources: 1, initiatorDepth: 1 });
  await next(E.ESTABLISHED);
  const mr = id.pd.regMr(msg, 0);
  id.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] });
  let wc = [];
  while (wc.length === 0) { wc = id.sendCq.poll(1); if (wc.length === 0) await new Promise((r) => setImmediate(r)); }
  if (wc[0].status !== WcStatus.SUCCESS) throw new Error('send status ' + wc[0].status);
  const gone = new Promise((r) => serverDone.push(r));
  await id.disconnect();
  await next(E.DISCONNECTED);
  id.destroyQp();
  mr.dereg();
  await id.destroy();
  await gone;
}

// The heap without its code spaces: functions compiled late in the run are not state kept per
// connection.
function measure() {
  for (let i = 0; i < 4; i++) globalThis.gc();
  const m = process.memoryUsage();
  let heap = 0;
  for (const sp of getHeapSpaceStatistics()) if (!sp.space_name.startsWith('code')) heap += sp.space_used_size;
  return { heap, external: m.external, arrayBuffers: m.arrayBuffers, rss: m.rss };
}

const t0 = Date.now();
let n = 0;
const samples = [];
while (n < maxCycles && (Date.now() - t0 < maxMs || samples.length < 6)) {
  await cycle();
  n++;
  if (n >= warmup && (n - warmup) % every === 0) samples.push(measure());
}
await settleConnections(1000);
const endSockets = sockets();
await listen.destroy();
sch.destroy();
cch.destroy();
process.stdout.write(JSON.stringify({ cycles: n, ms: Date.now() - t0, served, received, samples, baseSockets, endSockets }) + '\\n');
process.exit(0);
`;

test(`connect/disconnect churn (${CYCLES} cycles or ${SECONDS} s): heap and external memory stay flat, no socket left`, async (t) => {
  const child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', CHILD, String(CYCLES), String(SECONDS * 1000), String(WARMUP), String(SAMPLE)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const kill = setTimeout(() => child.kill('SIGKILL'), (SECONDS + 60) * 1000);
  const code = await new Promise((r) => child.on('close', r));
  clearTimeout(kill);
  assert.equal(code, 0, `churn child exited ${code}\n${err}\n${out}`);
  const r = JSON.parse(out);
  const kib = (v) => `${(v / 1024).toFixed(0)} KiB`;
  const med3 = (xs, k) => xs.map((x) => x[k]).sort((a, b) => a - b)[1];
  const first = r.samples.slice(0, 3);
  const last = r.samples.slice(-3);
  const base = { heap: med3(first, 'heap'), external: med3(first, 'external'), arrayBuffers: med3(first, 'arrayBuffers') };
  const end = { heap: med3(last, 'heap'), external: med3(last, 'external'), arrayBuffers: med3(last, 'arrayBuffers') };
  const report = `${r.cycles} cycles in ${r.ms} ms; after ${WARMUP}: heap ${kib(base.heap)} -> ${kib(end.heap)}, external ${kib(base.external)} -> ${kib(end.external)}, arrayBuffers ${kib(base.arrayBuffers)} -> ${kib(end.arrayBuffers)}; heap samples every ${SAMPLE} cycles: ${r.samples.map((s) => kib(s.heap)).join(', ')}`;
  assert.ok(r.samples.length >= 6, `too few cycles to measure: ${report}`);
  assert.equal(r.served, r.cycles, 'the server tore down every connection');
  assert.equal(r.received, r.cycles, 'every connection carried its message');
  assert.ok(end.heap - base.heap < MAX_GROWTH, `heap grows: ${report}`);
  assert.ok(end.external - base.external < MAX_GROWTH, `external memory grows: ${report}`);
  assert.ok(end.arrayBuffers - base.arrayBuffers < MAX_GROWTH, `array buffers grow: ${report}`);
  assert.equal(r.endSockets, r.baseSockets, `sockets left open: ${r.baseSockets} at the start, ${r.endSockets} at the end`);
  t.diagnostic(report);
});
