// npm run bench: the soft iWARP device beside plain Node TCP, measured in the same run on this
// machine (two processes per test, loopback). Prints absolute figures and the ratios the
// project tracks: RTT(soft)/RTT(net) (target <= 1.15) and BW(soft)/BW(net onread) (target >= 1.0).
// Numbers are noisy: compare ratios within one run, never absolute times across machines.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { createId, PortSpace, Access, WrOpcode, SendFlags } from '../dist/index.js';

const PEER = fileURLToPath(new URL('./peer.js', import.meta.url));
const PP_ITERS = Number(process.env.BENCH_PP_ITERS ?? 20000);
const BW_BYTES = Number(process.env.BENCH_BW_BYTES ?? 2 ** 31);
// Below the kernel's ephemeral range (32768-60999 by default), where a port may be some connection's.
let nextPort = 20000 + (process.pid % 10000);

async function withPeer(kind, fn) {
  const port = nextPort++;
  const child = spawn(process.execPath, [PEER, kind, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
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
  let left = PP_ITERS;
  let have = 0;
  const t0 = process.hrtime.bigint();
  await new Promise((resolve) => {
    s.on('data', (d) => {
      have += d.length;
      while (have >= 64) {
        have -= 64;
        if (--left === 0) return resolve();
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
  const done = new Promise((r) => s.once('data', r));
  const t0 = process.hrtime.bigint();
  s.write(hdr);
  let sent = 0;
  while (sent < BW_BYTES) {
    sent += chunk.length;
    if (!s.write(chunk)) await new Promise((r) => s.once('drain', r));
  }
  await done;
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
  const t0 = process.hrtime.bigint();
  qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sgList: sge, sendFlags: SendFlags.INLINE });
  for (let done = 0; done < PP_ITERS; ) {
    const wcs = await waitCq(id, id.recvCq, id.recvCqChannel);
    for (const wc of wcs) {
      if (wc.status !== 0) throw new Error(`completion status ${wc.status}`);
      done++;
      qp.postRecv({ wrId: 0, sgList: rsge });
      if (done < PP_ITERS) qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sgList: sge, sendFlags: SendFlags.INLINE });
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
  qp.postRecv({ wrId: 'fin', sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
  const n = Math.ceil(BW_BYTES / (1 << 20));
  const depth = 8;
  let posted = 0;
  let completed = 0;
  const post = () => {
    qp.postSend({ wrId: posted++, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr, length: 1 << 20, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: raddr, rkey } });
  };
  const t0 = process.hrtime.bigint();
  while (posted < Math.min(depth, n)) post();
  while (completed < n) {
    const wcs = await waitCq(id, id.sendCq, id.sendCqChannel);
    for (const wc of wcs) {
      if (wc.status !== 0) throw new Error(`write status ${wc.status}`);
      completed++;
      if (posted < n) post();
    }
  }
  // Completion of a Write means "handed to TCP": a final Send/reply pair proves arrival.
  qp.postSend({ wrId: 'fin', opcode: WrOpcode.SEND, sgList: [{ addr: msg.addr, length: 1, lkey: msg.lkey }], sendFlags: SendFlags.SIGNALED });
  await waitCq(id, id.recvCq, id.recvCqChannel);
  const ns = Number(process.hrtime.bigint() - t0);
  await id.disconnect();
  id.destroyQp();
  await id.destroy();
  return (n * (1 << 20)) / ns;
}

const r = {};
r.netRtt = await withPeer('net-pingpong', netPingPong);
r.rdmaRtt = await withPeer('rdma-pingpong', rdmaPingPong);
r.netBw = await withPeer('net-stream', netStream);
r.rdmaBw = await withPeer('rdma-write', rdmaWrite);
const f = (x, d = 2) => x.toFixed(d);
console.log(`64 B ping-pong RTT   net ${f(r.netRtt, 1)} us   soft-iWARP SEND/RECV ${f(r.rdmaRtt, 1)} us   ratio ${f(r.rdmaRtt / r.netRtt)} (target <= 1.15)`);
console.log(`1 MiB stream         net(onread) ${f(r.netBw)} GB/s   soft-iWARP RDMA WRITE ${f(r.rdmaBw)} GB/s   ratio ${f(r.rdmaBw / r.netBw)} (target >= 1.0)`);
if (process.env.BENCH_JSON) console.log(JSON.stringify(r));
