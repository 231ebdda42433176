// The soft iWARP data path without the kernel: two connected QPs in this process whose sockets'
// writes are captured and handed straight to the other side's receive path, so each message runs
// post → FPDU encode → (captured write) → FPDU decode → placement → completion → poll in JS only.
// Prints the CPU time per message (ns), the JavaScript cost the syscalls of a real run add to.
//   node bench/verbs-micro.js                      # after npm run build
//   MICRO_MODE=write MICRO_SIZE=64 MICRO_N=200000 node bench/verbs-micro.js
// MICRO_MODE: send (one SEND per message), inline (IBV_SEND_INLINE), write (an RDMA WRITE and a
// 4-byte SEND announcing it, posted together as rsockets do), signaled (send, every WR signaled
// and its send completion polled), rping (one rping iteration, six messages: the client's SEND,
// the server's RDMA READ of the client's buffer and the READ response, the server's SEND, the
// client's second SEND, the server's RDMA WRITE and SEND; every WR signaled, as rping posts them;
// the figure is per iteration). MICRO_DIST: the dist/ directory to measure (default ../dist).
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { loopbackPair } from './loopback-pair.js';

const DIST = process.env.MICRO_DIST ?? new URL('../dist/', import.meta.url).pathname;
const api = await import(pathToFileURL(path.join(DIST, 'index.js')).href);
const { Access, WrOpcode, SendFlags } = api;

const N = Number(process.env.MICRO_N ?? 200000);
const SIZE = Number(process.env.MICRO_SIZE ?? 64);
const REPS = Number(process.env.MICRO_REPS ?? 5);
const MODE = process.env.MICRO_MODE ?? 'send';

const { cli, srv } = await loopbackPair(api);
// Let the connection settle (RTR, first FPDUs) before the sockets are taken over.
await new Promise((r) => setTimeout(r, 100));

/** Capture what `from` writes; hand it to `to`'s receive path when flushed. */
function capture(from, to) {
  const q = [];
  const sock = from.qp.llp.socket;
  sock.write = (b, cb) => {
    q.push(Buffer.from(b));
    if (cb) queueMicrotask(() => cb(null));
    return true;
  };
  sock.cork = () => {};
  sock.uncork = () => {};
  const llp = to.qp.llp;
  return () => {
    while (q.length > 0) {
      const b = q.shift();
      llp.deliver(b, 0, b.length);
    }
  };
}
const flushAB = capture(cli, srv);
const flushBA = capture(srv, cli);

function side(id) {
  const mr = id.pd.regMr(Buffer.alloc(2 * SIZE + 64), Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
  const flags = MODE === 'inline' ? SendFlags.INLINE : MODE === 'signaled' ? SendFlags.SIGNALED : 0;
  const sendWr = { wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: SIZE, lkey: mr.lkey }], sendFlags: flags };
  const recvWr = { wrId: 2, sgList: [{ addr: mr.addr + SIZE, length: SIZE + 64, lkey: mr.lkey }] };
  return { id, qp: id.qp, mr, sendWr, recvWr };
}
const a = side(cli);
const b = side(srv);
const pair = [
  { wrId: 3, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: a.mr.addr, length: SIZE, lkey: a.mr.lkey }], sendFlags: 0, rdma: { remoteAddr: b.mr.addr + SIZE, rkey: b.mr.rkey } },
  { wrId: 4, opcode: WrOpcode.SEND, sgList: [{ addr: a.mr.addr, length: 4, lkey: a.mr.lkey }], sendFlags: 0 },
];
for (let i = 0; i < 8; i++) b.qp.postRecv(b.recvWr);
for (let i = 0; i < 8; i++) a.qp.postRecv(a.recvWr);

// rping: 16-byte SENDs (the buffer advertisement), a READ and a WRITE of SIZE bytes.
const S = SendFlags.SIGNALED;
const info = (x) => ({ wrId: 5, opcode: WrOpcode.SEND, sgList: [{ addr: x.mr.addr, length: 16, lkey: x.mr.lkey }], sendFlags: S });
const rp = {
  cliSend: info(a),
  srvSend: info(b),
  read: { wrId: 6, opcode: WrOpcode.RDMA_READ, sgList: [{ addr: b.mr.addr, length: SIZE, lkey: b.mr.lkey }], sendFlags: S, rdma: { remoteAddr: a.mr.addr, rkey: a.mr.rkey } },
  write: { wrId: 7, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: b.mr.addr, length: SIZE, lkey: b.mr.lkey }], sendFlags: S, rdma: { remoteAddr: a.mr.addr + SIZE, rkey: a.mr.rkey } },
};
const acq = a.id.recvCq;
const bscq = b.id.sendCq;
/** Poll exactly one good completion of `cq`. */
function one(cq) {
  const k = cq.pollInto(wcs, 16);
  if (k !== 1 || wcs[0].status !== 0) throw new Error(`expected one good completion, got ${k}`);
}
/** The client's SEND of its buffer's advert; the server takes it, reposts and posts `op` on it. */
function clientAdvert(op) {
  a.qp.postSend(rp.cliSend);
  flushAB();
  one(rcq);
  b.qp.postRecv(b.recvWr);
  b.qp.postSend(op);
}
/** The server's `op` completes, its SEND goes back; the client takes it and reposts. */
function serverReply() {
  one(bscq);
  b.qp.postSend(rp.srvSend);
  one(bscq);
  flushBA();
  one(acq);
  a.qp.postRecv(a.recvWr);
}
async function rpingOnce() {
  clientAdvert(rp.read);
  flushBA(); // the READ request; the client answers it once this receive processing is over
  await null;
  flushAB();
  serverReply();
  clientAdvert(rp.write);
  serverReply();
  if (scq.pollInto(wcs, 16) !== 2) throw new Error('expected two send completions');
}

const wcs = [];
const rcq = b.id.recvCq;
const scq = a.id.sendCq;
function once() {
  a.qp.postSend(MODE === 'write' ? pair : a.sendWr);
  flushAB();
  one(rcq);
  b.qp.postRecv(b.recvWr);
  if (MODE === 'signaled' && scq.pollInto(wcs, 16) !== 1) throw new Error('no send completion');
}

const res = [];
for (let r = 0; r < REPS + 1; r++) {
  const u0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  if (MODE === 'rping') for (let i = 0; i < N; i++) await rpingOnce();
  else for (let i = 0; i < N; i++) once();
  const ns = Number(process.hrtime.bigint() - t0);
  const u = process.cpuUsage(u0);
  if (r > 0) res.push({ wall: ns / N, cpu: ((u.user + u.system) * 1000) / N });
}
const med = (k) => res.map((x) => x[k]).sort((x, y) => x - y)[res.length >> 1];
console.log(`verbs-micro ${MODE} ${SIZE} B: ${med("wall").toFixed(0)} ns wall, ${med("cpu").toFixed(0)} ns CPU per ${MODE === "rping" ? "iteration" : "message"} (median of ${REPS}, ${N} each)`);
process.exit(0);
