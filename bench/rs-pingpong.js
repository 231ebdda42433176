// In-process rsocket ping-pong: CPU time per round trip of small messages (both ends in this
// process, so the figure is the JS + syscall cost of the whole path, free of scheduling noise
// between two processes). Also a one-way bulk figure (CPU per MiB).
//   node bench/rs-pingpong.js            # after npm run build
//   PP_ITERS=40000 PP_SIZE=64 PP_REPS=5 node bench/rs-pingpong.js
import * as rs from '../dist/rsocket/index.js';
import { rsocketPair, rsRecvAll } from './loopback-pair.js';

const ITERS = Number(process.env.PP_ITERS ?? 20000);
const SIZE = Number(process.env.PP_SIZE ?? 64);
const REPS = Number(process.env.PP_REPS ?? 5);

const { listener: l, c, s } = await rsocketPair(rs);
const recvAll = (conn, buf) => rsRecvAll(rs, conn, buf);
function sendAll(conn, buf) {
  const n = conn.send(buf, 0, buf.length);
  if (n !== buf.length) throw new Error(`send ${n}`);
}

const a = Buffer.alloc(SIZE, 1);
const b = Buffer.alloc(SIZE);
async function server(n) {
  for (let i = 0; i < n; i++) {
    await recvAll(s, b);
    sendAll(s, b);
  }
}
async function client(n) {
  for (let i = 0; i < n; i++) {
    sendAll(c, a);
    await recvAll(c, b);
  }
}
const res = [];
for (let r = 0; r < REPS + 1; r++) {
  const t0 = process.hrtime.bigint();
  const u0 = process.cpuUsage();
  await Promise.all([server(ITERS), client(ITERS)]);
  const u = process.cpuUsage(u0);
  const wall = Number(process.hrtime.bigint() - t0) / 1e3;
  if (r > 0) res.push({ user: u.user / ITERS, sys: u.system / ITERS, wall: wall / ITERS });
}
const med = (k) => res.map((x) => x[k]).sort((x, y) => x - y)[res.length >> 1];
console.log(`rsocket ${SIZE} B ping-pong, ${ITERS} round trips x ${REPS} (median, first rep discarded): user ${med('user').toFixed(2)} us, sys ${med('sys').toFixed(2)} us, wall ${med('wall').toFixed(2)} us per round trip`);
await c.close();
await s.close();
await l.close();
process.exit(0);
