// Small (inline) sends: each one an RDMA WRITE from a scratch slot plus its message SEND, with
// credit updates (their SGEs written inline from scratch slots too) in between. No slot may be
// reused while a work request still names it: every byte must arrive, in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';

const { RsConn, RsListener, RS_EAGAIN, POLLIN, POLLOUT, SOL_SOCKET, SO_RCVBUF } = rs;
const T = { timeout: 60_000 };

async function pair() {
  const l = new RsListener();
  // Small receive buffers: frequent grants (inline SGE writes) between the small messages.
  l.setsockopt(SOL_SOCKET, SO_RCVBUF, 4096);
  l.bind({ address: '127.0.0.1', port: 0 });
  await l.listen(1);
  const accepted = l.accept();
  const c = new RsConn();
  c.setsockopt(SOL_SOCKET, SO_RCVBUF, 4096);
  await c.connect({ address: '127.0.0.1', port: l.localAddress.port });
  return { l, c, s: await accepted };
}

/** Send `buf` in sends of 1..`max` bytes (awaiting POLLOUT on EAGAIN). */
async function sendAll(conn, buf, max) {
  let off = 0;
  while (off < buf.length) {
    const n = conn.send(buf, off, Math.min(buf.length - off, 1 + Math.floor(Math.random() * max)));
    if (n === RS_EAGAIN) await conn.poll(POLLOUT);
    else off += n;
  }
}

async function recvAll(conn, len) {
  const out = Buffer.alloc(len);
  let off = 0;
  while (off < len) {
    const n = conn.recv(out, off, Math.min(len - off, 1 + Math.floor(Math.random() * 200)));
    if (n === RS_EAGAIN) await conn.poll(POLLIN);
    else if (n === 0) break;
    else off += n;
  }
  return out.subarray(0, off);
}

test('thousands of 1..96-byte sends both ways at once arrive intact and in order', T, async () => {
  const { l, c, s } = await pair();
  try {
    const a = randomBytes(200_000);
    const b = randomBytes(150_000);
    const [gotA, gotB] = await Promise.all([recvAll(s, a.length), recvAll(c, b.length), sendAll(c, a, 96), sendAll(s, b, 96)]);
    assert.ok(gotA.equals(a), 'client -> server intact');
    assert.ok(gotB.equals(b), 'server -> client intact');
  } finally {
    await c.close().catch(() => {});
    await s.close().catch(() => {});
    await l.close().catch(() => {});
  }
});

test('a ping-pong of small messages with a burst of them now and then', T, async () => {
  const { l, c, s } = await pair();
  try {
    for (let i = 0; i < 300; i++) {
      const k = i % 50 === 0 ? 40 : 1;
      const msgs = Array.from({ length: k }, () => randomBytes(1 + Math.floor(Math.random() * 64)));
      const all = Buffer.concat(msgs);
      for (const m of msgs) await sendAll(c, m, m.length);
      const got = await recvAll(s, all.length);
      assert.ok(got.equals(all), `round ${i}: server got what was sent`);
      await sendAll(s, got, 64);
      assert.ok((await recvAll(c, all.length)).equals(all), `round ${i}: echoed back intact`);
    }
  } finally {
    await c.close().catch(() => {});
    await s.close().catch(() => {});
    await l.close().catch(() => {});
  }
});
