// In-process verbs ping-pong over the soft iWARP device: CPU time per round trip of small
// messages through the verbs API alone (both ends in this process, so the figure is the JS +
// syscall cost of post → FPDU encode → socket write and socket read → decode → placement →
// completion → poll, free of scheduling noise between two processes). The counterpart of
// bench/net-pingpong.js (Node net) and bench/rs-pingpong.js (the same path under rsockets).
//   node bench/verbs-pingpong.js                   # after npm run build
//   PP_MODE=write PP_ITERS=40000 PP_REPS=5 node bench/verbs-pingpong.js
// PP_MODE: send (a SEND each way; the receiver reposts its receive), write (each way an RDMA
// WRITE of PP_SIZE bytes and a 4-byte SEND announcing it, posted together, as rsockets do),
// inline (send with IBV_SEND_INLINE).
import * as api from '../dist/index.js';
import { loopbackPair } from './loopback-pair.js';

const { Access, WrOpcode, SendFlags } = api;

const ITERS = Number(process.env.PP_ITERS ?? 20000);
const SIZE = Number(process.env.PP_SIZE ?? 64);
const REPS = Number(process.env.PP_REPS ?? 5);
const MODE = process.env.PP_MODE ?? 'send';

const { cli, srv } = await loopbackPair(api);

/** One side: a ring buffer MR, its receive posted, its peer's buffer as WRITE target. */
function side(id) {
  const mr = id.pd.regMr(Buffer.alloc(2 * SIZE + 64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const sendWr = MODE === 'write'
    ? null
    : { wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: SIZE, lkey: mr.lkey }], sendFlags: MODE === 'inline' ? SendFlags.INLINE : 0 };
  const recvWr = { wrId: 2, sgList: [{ addr: mr.addr + SIZE, length: SIZE + 64, lkey: mr.lkey }] };
  return { id, qp: id.qp, mr, sendWr, recvWr, pair: null };
}
const a = side(cli);
const b = side(srv);
for (const [x, y] of [[a, b], [b, a]]) {
  x.pair = [
    { wrId: 3, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: x.mr.addr, length: SIZE, lkey: x.mr.lkey }], sendFlags: 0, rdma: { remoteAddr: y.mr.addr + SIZE, rkey: y.mr.rkey } },
    { wrId: 4, opcode: WrOpcode.SEND, sgList: [{ addr: x.mr.addr, length: 4, lkey: x.mr.lkey }], sendFlags: 0 },
  ];
}
for (const x of [a, b]) for (let i = 0; i < 8; i++) x.qp.postRecv(x.recvWr);

function send(x) {
  x.qp.postSend(MODE === 'write' ? x.pair : x.sendWr);
}

/** Drive one side: on each receive completion, repost and answer (or count down). */
function run(x, n, initiator) {
  const cq = x.id.recvCq;
  const scq = x.id.sendCq;
  const ch = x.id.recvCqChannel;
  const wcs = [];
  return new Promise((resolve, reject) => {
    let left = n;
    const loop = async () => {
      cq.reqNotify();
      for (;;) {
        let k = cq.pollInto(wcs, 16);
        if (k === 0) {
          cq.reqNotify();
          k = cq.pollInto(wcs, 16);
          if (k === 0) {
            await ch.getCqEvent();
            cq.ackEvents(1);
            continue;
          }
        }
        for (let i = 0; i < k; i++) {
          if (wcs[i].status !== 0) return reject(new Error(`status ${wcs[i].status}`));
          x.qp.postRecv(x.recvWr);
          if (scq.pending > 32) scq.pollInto(wcs, 64);
          if (--left === 0) {
            if (!initiator) send(x);
            return resolve();
          }
          send(x);
        }
      }
    };
    loop().catch(reject);
    if (initiator) send(x);
  });
}

const res = [];
for (let r = 0; r < REPS + 1; r++) {
  const t0 = process.hrtime.bigint();
  const u0 = process.cpuUsage();
  await Promise.all([run(b, ITERS, false), run(a, ITERS, true)]);
  const u = process.cpuUsage(u0);
  const wall = Number(process.hrtime.bigint() - t0) / 1e3;
  if (r > 0) res.push({ user: u.user / ITERS, sys: u.system / ITERS, wall: wall / ITERS });
}
const med = (k) => res.map((x) => x[k]).sort((x, y) => x - y)[res.length >> 1];
console.log(`verbs ${MODE} ${SIZE} B ping-pong, ${ITERS} round trips x ${REPS} (median, first rep discarded): user ${med('user').toFixed(2)} us, sys ${med('sys').toFixed(2)} us, wall ${med('wall').toFixed(2)} us per round trip`);
process.exit(0);
