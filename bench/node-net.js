// The limit of what Node can do: rstream's test, written directly on Node's `net`, as the baseline
// every row of `npm run bench` is measured against.
//
//   node bench/node-net.js -p PORT [-S size] [-C count] [-I iterations] [--warmup N]            # server
//   node bench/node-net.js -s 127.0.0.1 -p PORT [-S size] [-C count] [-I iterations] [--warmup N]
//
// The test has rstream's shape: each iteration the client sends `count` messages of `size` bytes
// and then receives as many; the server receives them and then sends as many back. `-C 1` is a
// ping-pong (rstream's latency test), a large `-C` a stream each way (its bandwidth test). Both
// ends read with `onread` into one reused buffer (no allocation per read, no copy) and write one
// preallocated buffer (no copy), with TCP_NODELAY; everything happens in the read callback, with
// no promise or timer on the path. `--warmup N`: N untimed messages each way first, in blocks of
// `count`, as rstream --warmup. Before the clock starts, the ends exchange 16 bytes each way, the
// client first, as rstream's sync_test does before every test: the timed block follows the same
// small exchange as the tools' do. `--busy-poll US`: each time this end starts to wait for the other's
// messages, keep the event loop from sleeping for US µs (a chain of immediates), as an rsocket's
// wait does for its `polling_time` (10 µs by default): the baseline for rsockets' latency with the
// same way of waiting. Each end prints one JSON line per test as `rstream --json` does:
// { gbps, usec_per_xfer, usec, role, cpu_user_usec, cpu_sys_usec, ... } (the CPU time of its timed part). Exit 0 on success, 1 on any failure; a 120 s timer ends it.
import net from 'node:net';

function args(argv) {
  const o = { host: null, port: 7471, size: 64, count: 1, iters: 1, warmup: 0, series: false, busyPoll: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '-s') o.host = v();
    else if (a === '-p') o.port = Number(v());
    else if (a === '-S') o.size = Number(v());
    else if (a === '-C') o.count = Number(v());
    else if (a === '-I') o.iters = Number(v());
    else if (a === '--warmup') o.warmup = Number(v());
    else if (a === '--series') o.series = true;
    else if (a === '--busy-poll') o.busyPoll = Number(v());
    else if (a === '--json') continue; // the output is always JSON
    else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

const o = args(process.argv.slice(2));
const client = o.host !== null;
setTimeout(() => {
  process.stderr.write('node-net: timed out\n');
  process.exit(1);
}, 120_000).unref();

/** rstream's default series (size_to_count: 100000 below 1 KiB, 10000, 1000 from 64 KiB, 100 from 1 MiB). */
const sizeToCount = (n) => (n >= 1 << 20 ? 100 : n >= 1 << 16 ? 1000 : n >= 1 << 10 ? 10000 : 100000);
const SERIES_SIZES = [[64, '64'], [4096, '4k'], [65536, '64k'], [1 << 20, '1m']];
const tests = o.series
  ? [
      ...SERIES_SIZES.map(([size, n]) => ({ name: `${n}_lat`, size, count: 1, iters: sizeToCount(size), warmup: 0 })),
      ...SERIES_SIZES.map(([size, n]) => ({ name: `${n}_bw`, size, count: sizeToCount(size), iters: 1, warmup: 0 })),
    ]
  : [{ name: 'custom', size: o.size, count: o.count, iters: o.iters, warmup: o.warmup }];

// --busy-poll: immediates from the start of a wait for `o.busyPoll` µs, while data is awaited.
let spinUntil = 0;
let spinning = false;
let awaiting = () => false;
const spinTask = () => {
  if (awaiting() && performance.now() < spinUntil) setImmediate(spinTask);
  else spinning = false;
};
function busyPoll() {
  if (o.busyPoll <= 0) return;
  spinUntil = performance.now() + o.busyPoll / 1000;
  if (spinning) return;
  spinning = true;
  setImmediate(spinTask);
}

const msg = Buffer.alloc(Math.max(...tests.map((t) => t.size)), 0x5a);
const rbuf = Buffer.allocUnsafe(1 << 20);

/** rstream's sync_test: 16 bytes each way before the clock starts. */
const SYNC_BYTES = 16;
const syncMsg = Buffer.alloc(SYNC_BYTES, 0x73);

/**
 * One test on a connected socket: its warm-up blocks, the sync, then `iters` timed iterations;
 * each is `k` messages one way then `k` back, this end sending first when `first`. Returns the
 * read handler; `done(usec, cpu)` is called at the end.
 */
function drive(sock, first, t, done) {
  const ks = [];
  for (let left = t.warmup; left > 0; left -= t.count) ks.push(Math.min(left, t.count));
  const timedFrom = ks.length;
  for (let i = 0; i < t.iters; i++) ks.push(t.count);
  const m = msg.subarray(0, t.size);
  let p = 0;
  let sending = false;
  let want = 0; // bytes still to receive in this half (or of the sync)
  let syncing = false;
  let t0 = 0n;
  let cpu = null;
  let waiting = false;
  awaiting = () => !sending && want > 0;

  const sendHalf = (k) => {
    // write() keeps a reference to the message, copies nothing; 'drain': Node's queue emptied.
    let i = 0;
    const more = () => {
      while (i < k) {
        i++;
        if (!sock.write(m) && i < k) {
          waiting = true;
          sock.once('drain', () => {
            waiting = false;
            more();
          });
          return;
        }
      }
      halfDone();
    };
    more();
  };
  // One half of block p: this end sends its messages (`send`) or waits for the other's.
  const startHalf = (send) => {
    sending = send;
    want = ks[p] * t.size;
    if (send) sendHalf(ks[p]);
    else busyPoll();
  };
  // The sync (the client sends first, the server answers), then the clock, then the timed blocks.
  const syncThenTimed = () => {
    syncing = true;
    sending = false;
    want = SYNC_BYTES;
    if (first) sock.write(syncMsg);
    busyPoll();
  };
  const synced = () => {
    syncing = false;
    if (!first) sock.write(syncMsg);
    cpu = process.cpuUsage();
    t0 = process.hrtime.bigint();
    startHalf(first);
  };
  const halfDone = () => {
    if (sending === first) {
      // first half done: now the other direction
      startHalf(!first);
      return;
    }
    // phase done
    p++;
    if (p === ks.length) {
      done(Number((process.hrtime.bigint() - t0) / 1000n), process.cpuUsage(cpu));
      return;
    }
    if (p === timedFrom) syncThenTimed();
    else startHalf(first);
  };
  const onData = (n) => {
    if (sending || waiting || n > want) {
      process.stderr.write('node-net: data out of turn\n');
      process.exit(1);
    }
    want -= n;
    if (want === 0) (syncing ? synced : halfDone)();
  };
  if (timedFrom === 0) syncThenTimed();
  else startHalf(first);
  return onData;
}

/** Run the tests in order on `sock`; `report(test, usec, cpu)` after each; then `end()`. */
function runTests(sock, first, report, end) {
  let i = 0;
  let handler = null;
  const next = () => {
    if (i === tests.length) return end();
    const t = tests[i++];
    handler = drive(sock, first, t, (usec, cpu) => {
      report(t, usec, cpu);
      // Let the last write's callback run before the next test starts.
      setImmediate(next);
    });
  };
  next();
  return (n) => handler(n);
}

const sockOpts = (onread) => ({ noDelay: true, onread: { buffer: rbuf, callback: (n) => (onread(n), true) } });

function row(t, usec, used, role) {
  const bytes = t.iters * t.count * t.size * 2;
  return JSON.stringify({
    name: t.name,
    bytes: t.size,
    xfers: t.count,
    iters: t.iters,
    total: bytes,
    usec,
    time_s: usec / 1e6,
    gbps: (bytes * 8) / (1000 * usec),
    usec_per_xfer: usec / t.iters / (t.count * 2),
    role,
    transport: 'node-net',
    tool: 'node-net',
    cpu_user_usec: used.user,
    cpu_sys_usec: used.system,
  });
}

if (client) {
  let onData = null;
  const s = net.connect({ host: o.host, port: o.port, ...sockOpts((n) => onData(n)) });
  s.setNoDelay(true);
  s.on('error', (e) => {
    process.stderr.write(`node-net: ${e.message}\n`);
    process.exit(1);
  });
  s.once('connect', () => {
    onData = runTests(
      s,
      true,
      (t, usec, used) => process.stdout.write(row(t, usec, used, 'client') + '\n'),
      () => {
        s.end();
        s.once('close', () => process.exit(0));
      },
    );
  });
} else {
  const server = net.createServer({ pauseOnConnect: true }, (raw) => {
    server.close();
    // Re-wrap the accepted handle so that its reads land in one reused buffer (onread).
    let onData = null;
    const s = new net.Socket({ handle: raw._handle, ...sockOpts((n) => onData(n)) });
    s.setNoDelay(true);
    s.on('error', () => process.exit(1));
    s.on('end', () => s.end());
    s.on('close', () => process.exit(0));
    onData = runTests(s, false, (t, usec, used) => process.stdout.write(row(t, usec, used, 'server') + '\n'), () => {});
    s.resume();
  });
  server.listen({ port: o.port, host: '127.0.0.1', backlog: 1, exclusive: true });
}
