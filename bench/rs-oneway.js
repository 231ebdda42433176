// A one-way rsocket stream between two processes, each reporting its own CPU per MiB and how busy
// it was: which side of a bulk transfer does the work, and whether the two overlap.
//   taskset -c 0 node bench/rs-oneway.js server 7471 &  taskset -c 1 node bench/rs-oneway.js client 7471
//   RS_ONEWAY_N=2000 RS_ONEWAY_BUF=4194304 ...   (MiB sent after as many warm-up ones / 2; SO_SNDBUF and SO_RCVBUF)
import { RsConn, RsListener, RS_EAGAIN } from '../dist/rsocket/index.js';

const [role, portArg] = process.argv.slice(2);
if ((role !== 'server' && role !== 'client') || !portArg) throw new Error('usage: rs-oneway.js server|client PORT');
const SIZE = 1 << 20;
const N = Number(process.env.RS_ONEWAY_N ?? 2000);
const BUF = Number(process.env.RS_ONEWAY_BUF ?? 1 << 19);
const SOL_SOCKET = 1;
const SO_SNDBUF = 7;
const SO_RCVBUF = 8;
const POLLIN = 1;
const POLLOUT = 4;
setTimeout(() => {
  process.stderr.write('rs-oneway: timed out\n');
  process.exit(1);
}, 120_000).unref();

const buf = Buffer.alloc(SIZE, 1);
let conn;
if (role === 'server') {
  const l = new RsListener();
  l.setsockopt(SOL_SOCKET, SO_SNDBUF, BUF);
  l.setsockopt(SOL_SOCKET, SO_RCVBUF, BUF);
  l.bind({ address: '127.0.0.1', port: Number(portArg) });
  await l.listen(1);
  conn = await l.accept();
} else {
  conn = new RsConn();
  conn.setsockopt(SOL_SOCKET, SO_SNDBUF, BUF);
  conn.setsockopt(SOL_SOCKET, SO_RCVBUF, BUF);
  await conn.connect({ address: '127.0.0.1', port: Number(portArg) });
}

/** `n` MiB from the client to the server, then one byte back (the end of the phase). */
async function phase(n) {
  if (role === 'server') {
    for (let left = n * SIZE; left > 0; ) {
      const k = conn.recv(buf, 0, Math.min(SIZE, left));
      if (k === RS_EAGAIN) await conn.poll(POLLIN);
      else if (k <= 0) throw new Error(`recv ${k}`);
      else left -= k;
    }
    while (conn.send(buf, 0, 1) !== 1) await conn.poll(POLLOUT);
    return;
  }
  for (let i = 0; i < n; i++) {
    for (let off = 0; off < SIZE; ) {
      const k = conn.send(buf, off, SIZE - off);
      if (k === RS_EAGAIN) await conn.poll(POLLOUT);
      else off += k;
    }
  }
  const one = Buffer.alloc(1);
  while (conn.recv(one, 0, 1) !== 1) await conn.poll(POLLIN);
}

await phase(Math.max(1, N >> 1));
const u0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
await phase(N);
const u = process.cpuUsage(u0);
const us = Number(process.hrtime.bigint() - t0) / 1e3;
console.log(
  `${role}: ${((N * SIZE * 8) / us / 1e3).toFixed(2)} Gb/s, busy user ${((u.user / us) * 100).toFixed(0)} % sys ${((u.system / us) * 100).toFixed(0)} %, per MiB user ${(u.user / N).toFixed(0)} us sys ${(u.system / N).toFixed(0)} us`,
);
await conn.close();
process.exit(0);
