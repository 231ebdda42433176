// Plain Node's own cold and warm connection rate, in cmtime's shape: a server process and a client
// process, the client opening N TCP connections at once on loopback; on each the client writes a
// 24-byte request and the server answers with a 24-byte reply (the size of an MPA Request and
// Reply without private data), and a connection counts once its reply is read. All N stay open
// until the last reply is in, then the client closes them (the server closes its side on end).
// Before the timed round: `--warmup W` untimed connections in rounds of N (like cmtime's
// `--warmup`), or one connection (rdma-core's warm-up, the cold run).
//
//   node bench/net-connect.js server -p PORT [-c N] [--warmup W]
//   node bench/net-connect.js client -p PORT [-c N] [--warmup W]     (prints {"usec_per_conn":...})
//
// bench/cold.js --tool net runs the pair cold and warm, as it runs cmtime.
import net from 'node:net';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const role = argv[0];
const port = opt('-p', 0);
const conns = opt('-c', 1000);
const warmup = opt('--warmup', 1);
const MSG = 24;
const REQ = Buffer.alloc(MSG, 0x51);
const REP = Buffer.alloc(MSG, 0x52);

/** The sizes of the rounds: the warm-up in rounds of at most `conns`, then the timed one. */
const rounds = [];
for (let left = warmup; left > 0; left -= conns) rounds.push(Math.min(left, conns));
rounds.push(conns);
const total = rounds.reduce((a, b) => a + b, 0);

if (role === 'server') {
  let closed = 0;
  const server = net.createServer({ noDelay: true }, (s) => {
    let got = 0;
    s.on('data', (d) => {
      got += d.length;
      if (got === MSG) s.write(REP);
    });
    s.on('error', () => {});
    s.on('end', () => s.end());
    s.on('close', () => {
      if (++closed === total) server.close();
    });
  });
  server.listen({ port, host: '127.0.0.1', backlog: 1024 });
} else if (role === 'client') {
  const round = (n) =>
    new Promise((resolve, reject) => {
      const socks = [];
      let done = 0;
      for (let i = 0; i < n; i++) {
        const s = net.connect({ port, host: '127.0.0.1', noDelay: true }, () => s.write(REQ));
        let got = 0;
        s.on('data', (d) => {
          got += d.length;
          if (got === MSG && ++done === n) resolve(socks);
        });
        s.on('error', reject);
        socks.push(s);
      }
    });
  const closeAll = (socks) => Promise.all(socks.map((s) => new Promise((r) => (s.on('close', r), s.end()))));
  let usec = 0;
  for (let r = 0; r < rounds.length; r++) {
    const t0 = process.hrtime.bigint();
    const socks = await round(rounds[r]);
    usec = Number(process.hrtime.bigint() - t0) / 1000;
    await closeAll(socks);
  }
  process.stdout.write(`${JSON.stringify({ conns, warmup, usec, usec_per_conn: usec / conns })}\n`);
} else {
  process.stderr.write('usage: net-connect.js server|client -p PORT [-c N] [--warmup W]\n');
  process.exit(2);
}
