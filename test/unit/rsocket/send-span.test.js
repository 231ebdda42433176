// The send ring of a large SO_SNDBUF on iWARP: at most RDMACM_RS_SBUF_SPAN (1 MiB) of it is used
// as the ring, SO_SNDBUF still reports what was set, and data wrapping round that smaller ring
// many times arrives intact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';

const { RsConn, RsListener, RS_EAGAIN, POLLIN, POLLOUT, SOL_SOCKET, SO_RCVBUF, SO_SNDBUF } = rs;
const T = { timeout: 60_000 };
const MiB = 1024 * 1024;

/** A client with a 4 MiB SO_SNDBUF (an 8 MiB send buffer) and a server with a `rcv`-byte SO_RCVBUF. */
async function pair(rcv) {
  const l = new RsListener();
  l.setsockopt(SOL_SOCKET, SO_RCVBUF, rcv);
  l.bind({ address: '127.0.0.1', port: 0 });
  await l.listen(1);
  const accepted = l.accept();
  const c = new RsConn();
  c.setsockopt(SOL_SOCKET, SO_SNDBUF, 4 * MiB);
  await c.connect({ address: '127.0.0.1', port: l.localAddress.port });
  const s = await accepted;
  return { l, c, s };
}

async function withPair(rcv, fn) {
  const p = await pair(rcv);
  try {
    await fn(p);
  } finally {
    const quick = (x) => Promise.race([x.close().catch(() => {}), new Promise((r) => setTimeout(r, 2000).unref())]);
    await quick(p.c);
    await quick(p.s);
    await p.l.close().catch(() => {});
  }
}

async function sendAll(conn, buf, chunk) {
  let off = 0;
  while (off < buf.length) {
    const n = conn.send(buf, off, Math.min(buf.length - off, chunk));
    if (n === RS_EAGAIN) await conn.poll(POLLOUT);
    else off += n;
  }
}

async function recvAll(conn, max, chunk) {
  const out = Buffer.alloc(max);
  let off = 0;
  while (off < max) {
    const n = conn.recv(out, off, Math.min(max - off, chunk));
    if (n === RS_EAGAIN) await conn.poll(POLLIN);
    else if (n === 0) break;
    else off += n;
  }
  return out.subarray(0, off);
}

test('a 4 MiB SO_SNDBUF reports 8 MiB, but a peer that does not read lets rsend take only about 1 MiB', T, () =>
  withPair(8192, async ({ c, s }) => {
    assert.equal(c.getsockopt(SOL_SOCKET, SO_SNDBUF), 8 * MiB);
    const data = randomBytes(8 * MiB);
    let taken = 0;
    while (taken < data.length) {
      const n = c.send(data, taken, data.length - taken);
      if (n === RS_EAGAIN) break;
      taken += n;
    }
    // The 16 KiB window leaves the ring; the rest waits in the 1 MiB ring.
    assert.ok(taken >= MiB - 4096 && taken <= MiB + 64 * 1024, `${taken} bytes taken`);
    const got = recvAll(s, data.length, 300_000);
    await sendAll(c, data.subarray(taken), 700_000);
    assert.ok((await got).equals(data), 'every byte arrives, in order');
  }));

test('24 MiB in odd-sized sends through the 1 MiB ring (many wraps, with large receive halves)', T, () =>
  withPair(4 * MiB, async ({ c, s }) => {
    const data = randomBytes(24 * MiB);
    const [got] = await Promise.all([recvAll(s, data.length, 777_777), sendAll(c, data, 333_333)]);
    assert.ok(got.equals(data), 'client -> server intact');
  }));
