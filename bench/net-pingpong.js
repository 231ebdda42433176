// In-process Node `net` ping-pong: the counterpart of bench/rs-pingpong.js (both ends in this
// process, so the figure is the CPU of the whole path, free of scheduling noise between two
// processes). The client reads with `onread` into a reused buffer; the server echoes.
//   node bench/net-pingpong.js
//   PP_ITERS=40000 PP_REPS=5 node bench/net-pingpong.js
import net from 'node:net';

const ITERS = Number(process.env.PP_ITERS ?? 20000);
const REPS = Number(process.env.PP_REPS ?? 5);
const SIZE = Number(process.env.PP_SIZE ?? 64);
const msg = Buffer.alloc(SIZE, 1);
const rbuf = Buffer.allocUnsafe(1 << 20);
let got = 0;
let want = 0;
let done = null;
let cli = null;
let srvSock = null;
const srv = net.createServer({ noDelay: true }, (s) => {
  srvSock = s;
  s.on('data', () => s.write(msg));
});
await new Promise((r) => srv.listen(0, '127.0.0.1', r));
await new Promise((resolve) => {
  cli = net.connect({
    port: srv.address().port,
    host: '127.0.0.1',
    noDelay: true,
    onread: {
      buffer: rbuf,
      callback: (n) => {
        got += n;
        if (got < SIZE) return true;
        got = 0;
        if (--want > 0) cli.write(msg);
        else done?.();
        return true;
      },
    },
  });
  cli.on('connect', resolve);
});
while (srvSock === null) await new Promise((r) => setImmediate(r));
const res = [];
for (let r = 0; r < REPS + 1; r++) {
  const t0 = process.hrtime.bigint();
  const u0 = process.cpuUsage();
  await new Promise((resolve) => {
    done = resolve;
    want = ITERS;
    cli.write(msg);
  });
  const u = process.cpuUsage(u0);
  const wall = Number(process.hrtime.bigint() - t0) / 1e3;
  if (r > 0) res.push({ user: u.user / ITERS, sys: u.system / ITERS, wall: wall / ITERS });
}
const med = (k) => res.map((x) => x[k]).sort((x, y) => x - y)[res.length >> 1];
console.log(`Node net ${SIZE} B ping-pong, ${ITERS} round trips x ${REPS} (median, first rep discarded): user ${med('user').toFixed(2)} us, sys ${med('sys').toFixed(2)} us, wall ${med('wall').toFixed(2)} us per round trip`);
cli.destroy();
srvSock.destroy();
srv.close();
