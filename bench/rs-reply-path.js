// Where a 64 B rsocket reply's time goes before its socket write, in one process (both ends of
// a connected pair, as bench/rs-pingpong.js): timestamps at the LLP's read callback, its end, the
// rsocket's rrecv and rsend, the QP's ibv_post_send and the LLP's socket write; averages per
// reply (ns, the timestamps' own cost included), median of 5 runs of 20,000 round trips.
//   node bench/rs-reply-path.js                # this package's dist/ (after npm run build)
//   node bench/rs-reply-path.js /path/to/other/package   # another build, for an A/B
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { rsocketPair, rsRecvAll } from './loopback-pair.js';

const dir = pathToFileURL(path.resolve(process.argv[2] ?? new URL('..', import.meta.url).pathname)).href.replace(/\/$/, '');
const { Llp } = await import(dir + '/dist/transport/iwarp/llp.js');
const { IwarpQp } = await import(dir + '/dist/transport/iwarp/iwarp-qp.js');
const rsMod = await import(dir + '/dist/rsocket/index.js');
const { RsConn } = rsMod;
const { performance } = await import('node:perf_hooks');
const now = () => performance.now();
const names = ['decode', 'cb->recv', 'recv->send', 'send->post', 'post->write', 'write'];
let T = [0, 0, 0, 0, 0, 0], acc = new Float64Array(6), cnt = 0, on = false, armed = false;
const rd = Llp.prototype.readDone;
Llp.prototype.readDone = function (b, n) { T[0] = now(); armed = true; const r = rd.call(this, b, n); T[1] = now(); return r; };
const rv = RsConn.prototype.recv;
RsConn.prototype.recv = function (...a) { if (armed) T[2] = now(); return rv.apply(this, a); };
const sd = RsConn.prototype.send;
RsConn.prototype.send = function (...a) { if (armed) T[3] = now(); return sd.apply(this, a); };
const ps = IwarpQp.prototype.postSend;
IwarpQp.prototype.postSend = function (w) { if (armed) T[4] = now(); return ps.call(this, w); };
const wr = Llp.prototype.write;
Llp.prototype.write = function (buf, cb) {
  const t = now();
  const r = wr.call(this, buf, cb);
  if (armed && on) {
    const t2 = now();
    acc[0] += T[1] - T[0]; acc[1] += T[2] - T[1]; acc[2] += T[3] - T[2]; acc[3] += T[4] - T[3]; acc[4] += t - T[4]; acc[5] += t2 - t; cnt++;
  }
  armed = false;
  return r;
};
const ITERS = 20000;
const { c, s } = await rsocketPair(rsMod);
const recvAll = (conn, buf) => rsRecvAll(rsMod, conn, buf);
const a = Buffer.alloc(64, 1), b = Buffer.alloc(64);
async function server(n) { for (let i = 0; i < n; i++) { await recvAll(s, b); s.send(b, 0, 64); } }
async function client(n) { for (let i = 0; i < n; i++) { c.send(a, 0, 64); await recvAll(c, b); } }
const res = [];
for (let r = 0; r < 6; r++) {
  acc.fill(0); cnt = 0; on = r > 0;
  await Promise.all([server(ITERS), client(ITERS)]);
  if (on) res.push(Array.from(acc, (x) => (x / cnt) * 1e6));
}
const med = (k) => res.map((x) => x[k]).sort((x, y) => x - y)[res.length >> 1];
console.log(path.basename(process.argv[2] ?? '.').padEnd(12) + names.map((n, i) => `${n} ${med(i).toFixed(0)}`).join(' | ') + ` | sum-pre-write ${(med(0)+med(1)+med(2)+med(3)+med(4)).toFixed(0)} ns`);
process.exit(0);
