// npm run bench: the soft iWARP device beside plain Node TCP, measured in the same run on this
// machine (two processes per test, loopback). Prints absolute figures and the ratios the
// project tracks: RTT(soft)/RTT(net) (target <= 1.15) and BW(soft)/BW(net onread) (target >= 1.0).
// Numbers are noisy: compare ratios within one run, never absolute times across machines.
//
// Each test first runs an untimed warm-up as long as its timed part (BENCH_WARMUP=0: none), so
// that both sides measure code V8 has compiled; and the bench process and its peer run on one CPU
// each (bench/common.js; BENCH_PIN=0: not).
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { createId, PortSpace, Access, WrOpcode, SendFlags } from '../dist/index.js';
import { median, pinCpus, pinned, pinSelf } from './common.js';

const PEER = fileURLToPath(new URL('./peer.js', import.meta.url));
const PP_ITERS = Number(process.env.BENCH_PP_ITERS ?? 20000);
const BW_BYTES = Number(process.env.BENCH_BW_BYTES ?? 2 ** 31);
const WARMUP = process.env.BENCH_WARMUP !== '0';
const PIN = pinCpus();
pinSelf(PIN?.[1] ?? null);
// Below the kernel's ephemeral range (32768-60999 by default), where a port may be some connection's.
let nextPort = 20000 + (process.pid % 10000);

async function withPeer(kind, fn) {
  const port = nextPort++;
  const child = spawn(...pinned(PIN?.[0] ?? null, process.execPath, [PEER, kind, String(port)]), { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    child.stdout.once('data', resolve);
    child.once('exit', (c) => reject(new Error(`${kind} peer exited ${c}`)));
  });
  const kill = setTimeout(() => child.kill('SIGKILL'), 120_000);
  try {
    return await fn(port);
  } finally {
    clearTimeout(kill);
    await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
  }
}

async function netPingPong(port) {
  const s = net.connect({ port, host: '127.0.0.1', noDelay: true });
  await new Promise((r) => s.once('connect', r));
  const msg = Buffer.alloc(64, 1);
  let left = PP_ITERS + (WARMUP ? PP_ITERS : 0);
  let have = 0;
  let t0 = process.hrtime.bigint();
  await new Promise((resolve) => {
    s.on('data', (d) => {
      have += d.length;
      while (have >= 64) {
        have -= 64;
        if (--left === 0) return resolve();
        if (left === PP_ITERS) t0 = process.hrtime.bigint();
        s.write(msg);
      }
    });
    s.write(msg);
  });
  const ns = Number(process.hrtime.bigint() - t0);
  s.destroy();
  return ns / PP_ITERS / 1000;
}

async function netStream(port) {
  const s = net.connect({ port, host: '127.0.0.1', noDelay: true });
  await new Promise((r) => s.once('connect', r));
  const chunk = Buffer.alloc(1 << 20, 7);
  const hdr = Buffer.alloc(8);
  hdr.writeBigUInt64BE(BigInt(BW_BYTES));
  // One phase: a header with the byte count, the bytes, the peer's one-byte answer.
  const phase = async () => {
    const done = new Promise((r) => s.once('data', r));
    s.write(hdr);
    let sent = 0;
    while (sent < BW_BYTES) {
      sent += chunk.length;
      if (!s.write(chunk)) await new Promise((r) => s.once('drain', r));
    }
    await done;
  };
  if (WARMUP) await phase();
  const t0 = process.hrtime.bigint();
  await phase();
  const ns = Number(process.hrtime.bigint() - t0);
  s.destroy();
  return (BW_BYTES / ns); // GB/s
}

async function rdmaConnect(port, maxSendWr) {
  const id = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port });
  await id.resolveRoute();
  id.createQp(null, { cap: { maxSendWr, maxRecvWr: 64 } });
  await id.connect();
  return id;
}

async function waitCq(id, cq, ch) {
  for (;;) {
    const wcs = cq.poll(32);
    if (wcs.length) return wcs;
    cq.reqNotify();
    const again = cq.poll(32);
    if (again.length) return again;
    await ch.getCqEvent();
    cq.ackEvents(1);
  }
}

async function rdmaPingPong(port) {
  const id = await rdmaConnect(port, 64);
  const qp = id.qp;
  const mr = id.pd.regMr(Buffer.alloc(128), Access.LOCAL_WRITE);
  const sge = [{ addr: mr.addr, length: 64, lkey: mr.lkey }];
  const rsge = [{ addr: mr.addr + 64, length: 64, lkey: mr.lkey }];
  qp.postRecv({ wrId: 0, sgList: rsge });
  const warm = WARMUP ? PP_ITERS : 0;
  const total = warm + PP_ITERS;
  let t0 = process.hrtime.bigint();
  qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sgList: sge, sendFlags: SendFlags.INLINE });
  for (let done = 0; done < total; ) {
    const wcs = await waitCq(id, id.recvCq, id.recvCqChannel);
    for (const wc of wcs) {
      if (wc.status !== 0) throw new Error(`completion status ${wc.status}`);
      done++;
      qp.postRecv({ wrId: 0, sgList: rsge });
      if (done === warm) t0 = process.hrtime.bigint();
      if (done < total) qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sgList: sge, sendFlags: SendFlags.INLINE });
    }
  }
  const ns = Number(process.hrtime.bigint() - t0);
  id.sendCq.poll(64);
  await id.disconnect();
  id.destroyQp();
  await id.destroy();
  return ns / PP_ITERS / 1000;
}

async function rdmaWrite(port) {
  const id = await rdmaConnect(port, 16);
  const pd = Buffer.from(id.event.param.conn.privateData);
  const raddr = Number(pd.readBigUInt64BE(0));
  const rkey = pd.readUInt32BE(8);
  const qp = id.qp;
  const src = id.pd.regMr(Buffer.alloc(1 << 20, 9), 0);
  const msg = id.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
  const n = Math.ceil(BW_BYTES / (1 << 20));
  const depth = 8;
  // One phase: n 1 MiB Writes, 8 in flight, then a Send/reply pair (the completion of a Write
  // means "handed to TCP": the reply proves arrival).
  const phase = async () => {
    qp.postRecv({ wrId: 'fin', sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
    let posted = 0;
    let completed = 0;
    const post = () => {
      qp.postSend({ wrId: posted++, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr, length: 1 << 20, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: raddr, rkey } });
    };
    while (posted < Math.min(depth, n)) post();
    while (completed < n) {
      const wcs = await waitCq(id, id.sendCq, id.sendCqChannel);
      for (const wc of wcs) {
        if (wc.status !== 0) throw new Error(`write status ${wc.status}`);
        if (wc.wrId === 'fin') continue; // the previous phase's Send
        completed++;
        if (posted < n) post();
      }
    }
    qp.postSend({ wrId: 'fin', opcode: WrOpcode.SEND, sgList: [{ addr: msg.addr, length: 1, lkey: msg.lkey }], sendFlags: SendFlags.SIGNALED });
    await waitCq(id, id.recvCq, id.recvCqChannel);
  };
  if (WARMUP) await phase();
  const t0 = process.hrtime.bigint();
  await phase();
  const ns = Number(process.hrtime.bigint() - t0);
  await id.disconnect();
  id.destroyQp();
  await id.destroy();
  return (n * (1 << 20)) / ns;
}

// BENCH_REPS interleaved rounds of the four tests; each figure is the median of its runs.
const REPS = Number(process.env.BENCH_REPS ?? 3);
const runs = { netRtt: [], rdmaRtt: [], netBw: [], rdmaBw: [] };
for (let i = 0; i < REPS; i++) {
  runs.netRtt.push(await withPeer('net-pingpong', netPingPong));
  runs.rdmaRtt.push(await withPeer('rdma-pingpong', rdmaPingPong));
  runs.netBw.push(await withPeer('net-stream', netStream));
  runs.rdmaBw.push(await withPeer('rdma-write', rdmaWrite));
}
const r = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]));
const f = (x, d = 2) => x.toFixed(d);
console.log(`verbs bench: ${REPS} run(s) each, median; ${PP_ITERS} round trips, ${BW_BYTES} bytes${WARMUP ? ', each after as long an untimed warm-up' : ', no warm-up'}${PIN ? `; peer on CPU ${PIN[0]}, this process on CPU ${PIN[1]}` : '; unpinned'}`);
console.log(`64 B ping-pong RTT   net ${f(r.netRtt, 1)} us   soft-iWARP SEND/RECV ${f(r.rdmaRtt, 1)} us   ratio ${f(r.rdmaRtt / r.netRtt)} (target <= 1.15)`);
console.log(`1 MiB stream         net(onread) ${f(r.netBw)} GB/s   soft-iWARP RDMA WRITE ${f(r.rdmaBw)} GB/s   ratio ${f(r.rdmaBw / r.netBw)} (target >= 1.0)`);
if (process.env.BENCH_JSON) console.log(JSON.stringify({ ...r, runs }));
