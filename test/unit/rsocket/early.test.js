// rsend copies ahead into the send buffer while the peer has granted no target space (RsConn's
// early staging): the bytes are posted, in order, when the grant arrives. Checked here: more than
// the peer's receive window is accepted while the peer does not read, nothing is lost, reordered
// or duplicated across many grants, and a shutdown/close sends the staged bytes before the
// SHUTDOWN/DISCONNECT.
import test from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';

const { RsConn, RsListener, RS_EAGAIN, POLLIN, POLLOUT, SOL_SOCKET, SO_RCVBUF, SO_SNDBUF, SHUT_WR } = rs;
const T = { timeout: 30_000 };

/** A connected pair: client with a 64 KiB send buffer, server with a 16 KiB receive buffer (8 KiB halves). */
async function pair() {
  const l = new RsListener();
  l.setsockopt(SOL_SOCKET, SO_RCVBUF, 8192);
  l.bind({ address: '127.0.0.1', port: 0 });
  await l.listen(1);
  const accepted = l.accept();
  const c = new RsConn();
  c.setsockopt(SOL_SOCKET, SO_SNDBUF, 32768);
  await c.connect({ address: '127.0.0.1', port: l.localAddress.port });
  const s = await accepted;
  return { l, c, s };
}

/** Run `fn` on a fresh pair; the sockets are closed (abortively if `fn` failed) either way. */
async function withPair(fn) {
  const p = await pair();
  try {
    await fn(p);
  } finally {
    const quick = (x) => Promise.race([x.close().catch(() => {}), new Promise((r) => setTimeout(r, 2000).unref())]);
    await quick(p.c);
    await quick(p.s);
    await p.l.close().catch(() => {});
  }
}

/** Send all of `buf` (awaiting POLLOUT on EAGAIN). */
async function sendAll(conn, buf) {
  let off = 0;
  while (off < buf.length) {
    const n = conn.send(buf, off, Math.min(buf.length - off, 1 + Math.floor(Math.random() * 20000)));
    if (n === RS_EAGAIN) await conn.poll(POLLOUT);
    else off += n;
  }
}

/** Receive until EOF (recv returns 0) or `max` bytes. */
async function recvAll(conn, max) {
  const out = Buffer.alloc(max);
  let off = 0;
  while (off < max) {
    const n = conn.recv(out, off, Math.min(max - off, 1 + Math.floor(Math.random() * 30000)));
    if (n === RS_EAGAIN) await conn.poll(POLLIN);
    else if (n === 0) break;
    else off += n;
  }
  return out.subarray(0, off);
}

test('with no target space left, rsend still takes bytes up to the send buffer; all arrive in order', T, () =>
  withPair(async ({ c, s }) => {
    const data = randomBytes(48 * 1024);
    // The server does not read: its window is 16 KiB (8 KiB granted at first), yet the client's 64 KiB send buffer takes more.
    let taken = 0;
    for (;;) {
      const n = c.send(data, taken, data.length - taken);
      if (n === RS_EAGAIN) break;
      taken += n;
      if (taken === data.length) break;
    }
    assert.ok(taken > 16 * 1024, `${taken} bytes taken with a 16 KiB window`);
    const got = recvAll(s, data.length);
    await sendAll(c, data.subarray(taken));
    assert.ok((await got).equals(data), 'the receiver gets every byte, in order');
  }));

test('many grants: 2 MiB in random-sized sends and receives through a 16 KiB window, both ways', T, () =>
  withPair(async ({ c, s }) => {
    const a = randomBytes(2 * 1024 * 1024);
    const b = randomBytes(512 * 1024);
    const [gotA, gotB] = await Promise.all([recvAll(s, a.length), recvAll(c, b.length), sendAll(c, a), sendAll(s, b)]);
    assert.ok(gotA.equals(a), 'client -> server intact');
    assert.ok(gotB.equals(b), 'server -> client intact');
  }));

test('shutdown(SHUT_WR) and close() send the early-staged bytes first, then the end of stream', T, () =>
  withPair(async ({ c, s }) => {
    const data = randomBytes(40 * 1024);
    let taken = 0;
    while (taken < data.length) {
      const n = c.send(data, taken, data.length - taken);
      if (n === RS_EAGAIN) break;
      taken += n;
    }
    assert.ok(taken > 16 * 1024, 'more than the window is staged');
    const got = recvAll(s, 1024 * 1024);
    const shut = c.shutdown(SHUT_WR);
    const all = await got;
    await shut;
    assert.ok(all.equals(data.subarray(0, taken)), 'every staged byte, then EOF');
  }));
