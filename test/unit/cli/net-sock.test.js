// rstream's -T s socket (dist/cli/net-sock.js): reads into fixed slabs, zero-copy sends that lend
// the caller's buffer until Node has written it. Loopback only; every test has a timeout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { NetSock, SLABS, SLAB_BYTES } from '../../../dist/cli/net-sock.js';

const POLLIN = 0x001;
const POLLOUT = 0x004;
const EAGAIN = 11;
const opts = { timeout: 60_000 };

/** A connected pair: `a` connected with NetSock.connect, `b` adopted from a paused accept. */
async function pair() {
  const server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise((r) => server.once('connection', r));
  const a = await NetSock.connect({ host: '127.0.0.1', port: server.address().port, allowHalfOpen: true });
  const b = NetSock.adopt(await accepted, true);
  server.close();
  return { a, b };
}

/** Deterministic bytes: byte i of a stream is (i * 7 + (i >> 11)) & 0xff. */
function fill(buf, from) {
  for (let i = 0; i < buf.length; i++) buf[i] = ((from + i) * 7 + ((from + i) >> 11)) & 0xff;
}
function check(buf, n, from) {
  for (let i = 0; i < n; i++) {
    const want = ((from + i) * 7 + ((from + i) >> 11)) & 0xff;
    if (buf[i] !== want) return from + i;
  }
  return -1;
}

/** Send all of `total` bytes in random-sized pieces (copying sends), waiting on POLLOUT. */
async function sendAll(s, total, rnd) {
  let sent = 0;
  while (sent < total) {
    const len = Math.min(total - sent, 1 + Math.floor(rnd() * 200_000));
    const piece = Buffer.alloc(len);
    fill(piece, sent);
    let off = 0;
    while (off < len) {
      const n = s.send(piece, off, len - off, 0);
      if (n > 0) off += n;
      else {
        assert.equal(s.errno, EAGAIN);
        await s.poll(POLLOUT, -1);
      }
    }
    sent += len;
  }
}

/** Receive `total` bytes in random-sized recv() calls into one buffer, checking the pattern. */
async function recvAll(s, total, rnd) {
  const buf = Buffer.alloc(300_000);
  let got = 0;
  while (got < total) {
    const want = Math.min(total - got, 1 + Math.floor(rnd() * buf.length));
    const n = s.recv(buf, 0, want, 0);
    if (n > 0) {
      assert.equal(check(buf, n, got), -1, `bytes intact from ${got}`);
      got += n;
    } else {
      assert.notEqual(n, 0, `early end of stream at ${got} of ${total}`);
      assert.equal(s.errno, EAGAIN);
      await s.poll(POLLIN, -1);
    }
  }
}

function prng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

test('bytes arrive intact and in order, in random pieces, both directions', opts, async () => {
  const { a, b } = await pair();
  const total = 24 << 20;
  await Promise.all([sendAll(a, total, prng(1)), recvAll(b, total, prng(2))]);
  await Promise.all([sendAll(b, total, prng(3)), recvAll(a, total, prng(4))]);
  await a.shutdown();
  await b.poll(POLLIN, -1);
  assert.equal(b.recv(Buffer.alloc(16), 0, 16, 0), 0, 'end of stream after the peer shut down');
  await a.close();
  await b.close();
});

test('a reader that does not read stops reading once its slabs are full; it resumes and loses nothing', opts, async () => {
  const { a, b } = await pair();
  const total = 16 << 20; // far more than the slabs and the kernel's buffers hold
  const sending = sendAll(a, total, prng(5));
  // Let the sender run until it is held up: the reader's slabs fill, then the kernel's buffers,
  // then the sender's queue (send() says EAGAIN).
  await new Promise((r) => setTimeout(r, 300));
  const held = b.sock.readableFlowing === false || b.sock._handle?.reading === false;
  assert.ok(held, 'the reader stopped reading');
  assert.ok(SLABS * SLAB_BYTES < total);
  await Promise.all([sending, recvAll(b, total, prng(6))]);
  await a.close();
  await b.close();
});

test('zero-copy send: the lent buffer is not overwritten by a recv into it until Node has written it', opts, async () => {
  const { a, b } = await pair();
  // One buffer for sending and receiving, as rstream uses. 32 MiB cannot all go to the kernel at
  // once, so part of it stays lent to Node.
  const big = Buffer.alloc(32 << 20);
  fill(big, 0);
  const s = a;
  s.setsockopt(1, 7, 32 << 20); // SO_SNDBUF: room for the whole buffer in the send queue
  assert.equal(s.send(big, 0, big.length, 0), big.length);
  assert.ok(s.sock.writableLength > 0, 'part of the buffer is still queued in Node');
  // The peer answers at once with a few bytes; they must not land in `big` while it is lent.
  const reply = Buffer.from('reply!');
  assert.equal(b.send(reply, 0, reply.length, 0), reply.length);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(s.recv(big, 0, 6, 0), -1, 'recv into lent memory waits');
  assert.equal(s.errno, EAGAIN);
  const pollIn = s.poll(POLLIN, -1);
  // The peer reads everything; only then may the reply be read into `big`.
  await recvAll(b, big.length, prng(7));
  assert.equal(await pollIn, POLLIN);
  assert.equal(s.recv(big, 0, 6, 0), 6);
  assert.equal(big.subarray(0, 6).toString(), 'reply!');
  await a.close();
  await b.close();
});

test('copying send (zeroCopy off): the caller may change the buffer right after send()', opts, async () => {
  const { a, b } = await pair();
  a.zeroCopy = false;
  a.setsockopt(1, 7, 16 << 20);
  const buf = Buffer.alloc(8 << 20);
  fill(buf, 0);
  assert.equal(a.send(buf, 0, buf.length, 0), buf.length);
  buf.fill(0xee); // what a -T v sender does with its next message
  await recvAll(b, 8 << 20, prng(8));
  await a.close();
  await b.close();
});
