// The stream calls of the rsocket API beyond rsend/rrecv/rpoll on one socket, on every device that
// connects RDMA_PS_TCP ids: rwritev/rreadv/rsendmsg/rrecvmsg (rsocket.c rsendv/rrecvv) and rpoll
// and rselect over several sockets at once (rsocket.c rpoll/rselect: events and revents, POLLHUP,
// POLLNVAL, timeouts, several sockets ready together).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  RsConn,
  RS_EAGAIN,
  rpoll,
  rselect,
  POLLIN,
  POLLOUT,
  POLLHUP,
  POLLNVAL,
  POLLERR,
  MSG_PEEK,
} from '../../dist/rsocket/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { withRsPair, rsPair, recvAll, fixed } from '../lib/rs-pair.js';
import { until } from '../lib/wait.js';

const T = { timeout: 30_000 };

/** Close every socket of `pairs` (each gets 2 s). */
async function closeAll(...socks) {
  const quick = (x) => Promise.race([x.close().catch(() => {}), new Promise((r) => setTimeout(r, 2000).unref())]);
  for (const s of socks) await quick(s);
}

/** writev all of `iov`, waiting for POLLOUT on EAGAIN; the counts each call returned. */
async function writevAll(c, iov) {
  const total = iov.reduce((n, v) => n + v.length, 0);
  let sent = 0;
  const counts = [];
  while (sent < total) {
    // Skip what was sent: the vectors from the first byte not yet taken.
    const rest = [];
    let skip = sent;
    for (const v of iov) {
      if (skip >= v.length) {
        skip -= v.length;
        continue;
      }
      rest.push(v.subarray(skip));
      skip = 0;
    }
    const n = c.writev(rest);
    if (n === RS_EAGAIN) await c.poll(POLLOUT);
    else {
      assert.ok(n > 0 && n <= total - sent, `writev returned ${n}`);
      counts.push(n);
      sent += n;
    }
  }
  return counts;
}

forEachDevice([Cap.CM_TCP], () => {
  test('rwritev: the vectors arrive as one stream, in order (empty, inline-sized and large ones)', T, async () => {
    await withRsPair({}, async ({ c, s }) => {
      const iov = [Buffer.alloc(0), randomBytes(7), randomBytes(300_000), Buffer.alloc(0), randomBytes(33), randomBytes(70_001)];
      const want = Buffer.concat(iov);
      const got = recvAll(s, want.length, fixed(65536));
      await writevAll(c, iov);
      assert.ok((await got).equals(want));
    });
  });

  test('rreadv: received bytes fill the first vector, then the next, in order', T, async () => {
    await withRsPair({}, async ({ c, s }) => {
      const data = randomBytes(100);
      assert.equal(c.send(data), 100);
      await until(() => (s.pollNow(POLLIN), s.readableLength >= 100), 5000, '100 bytes queued');
      const a = Buffer.alloc(8);
      const b = Buffer.alloc(16);
      const d = Buffer.alloc(200);
      assert.equal(s.readv([a, Buffer.alloc(0), b, d]), 100);
      assert.ok(a.equals(data.subarray(0, 8)));
      assert.ok(b.equals(data.subarray(8, 24)));
      assert.ok(d.subarray(0, 76).equals(data.subarray(24)));
      assert.equal(s.readv([a]), RS_EAGAIN, 'nothing left: EAGAIN');
    });
  });

  test('rsendmsg / rrecvmsg: iov as writev/readv, MSG_PEEK leaves the data, control data EOPNOTSUPP', T, async () => {
    await withRsPair({}, async ({ c, s }) => {
      assert.throws(() => c.sendmsg({ iov: [Buffer.from('x')], control: Buffer.alloc(16) }), { code: 'EOPNOTSUPP', errno: 95 });
      assert.throws(() => s.recvmsg({ iov: [Buffer.alloc(4)], control: Buffer.alloc(16) }), { code: 'EOPNOTSUPP' });
      assert.equal(c.sendmsg({ iov: [Buffer.from('hello '), Buffer.from('world')], control: null }), 11);
      await until(() => (s.pollNow(POLLIN), s.readableLength >= 11), 5000, '11 bytes queued');
      const p1 = Buffer.alloc(3);
      const p2 = Buffer.alloc(20);
      assert.equal(s.recvmsg({ iov: [p1, p2] }, MSG_PEEK), 11);
      assert.equal(`${p1}${p2.subarray(0, 8)}`, 'hello world');
      const q1 = Buffer.alloc(5);
      const q2 = Buffer.alloc(6);
      assert.equal(s.recvmsg({ iov: [q1, q2] }), 11, 'the peeked bytes are still there');
      assert.equal(`${q1}|${q2}`, 'hello| world');
    });
  });

  test('rreadv at the end of the stream returns 0; rwritev after the peer left fails', T, async () => {
    const { l, c, s } = await rsPair();
    try {
      await c.close();
      await until(() => s.pollNow(POLLIN) & POLLIN, 5000, 'the hangup');
      assert.equal(s.readv([Buffer.alloc(4), Buffer.alloc(4)]), 0);
      assert.throws(() => s.writev([Buffer.from('late')]), { code: 'ECONNRESET' });
    } finally {
      await closeAll(s);
      await l.close();
    }
  });

  test('rpoll over two connections: nothing ready times out with 0, then both ready at once count 2', T, async () => {
    const A = await rsPair();
    const B = await rsPair();
    try {
      const fds = [
        { fd: A.s, events: POLLIN, revents: -1 },
        { fd: null, events: POLLIN, revents: -1 },
        { fd: B.s, events: POLLIN, revents: -1 },
      ];
      const t0 = Date.now();
      assert.equal(await rpoll(fds, 150), 0);
      assert.ok(Date.now() - t0 >= 140, `waited ${Date.now() - t0} ms`);
      assert.deepEqual(fds.map((f) => f.revents), [0, 0, 0]);
      assert.equal(await rpoll(fds, 0), 0, 'timeout 0: one check');
      A.c.send(Buffer.from('a'));
      B.c.send(Buffer.from('b'));
      await until(async () => (await rpoll(fds, 1000)) === 2, 5000, 'both sockets readable');
      assert.deepEqual(fds.map((f) => f.revents), [POLLIN, 0, POLLIN]);
      // POLLOUT is asked for and ready on both at once; POLLIN only where asked.
      const w = [
        { fd: A.c, events: POLLOUT, revents: 0 },
        { fd: B.c, events: POLLIN | POLLOUT, revents: 0 },
      ];
      assert.equal(await rpoll(w, -1), 2);
      assert.deepEqual(w.map((f) => f.revents), [POLLOUT, POLLOUT]);
    } finally {
      await closeAll(A.c, A.s, B.c, B.s);
      await A.l.close();
      await B.l.close();
    }
  });

  test('rpoll waits until one of several sockets is ready, and only that one is reported', T, async () => {
    const A = await rsPair();
    const B = await rsPair();
    try {
      const fds = [
        { fd: A.s, events: POLLIN, revents: 0 },
        { fd: B.s, events: POLLIN, revents: 0 },
      ];
      const waiting = rpoll(fds, -1);
      setTimeout(() => B.c.send(Buffer.from('wake')), 50);
      assert.equal(await waiting, 1);
      assert.deepEqual(fds.map((f) => f.revents), [0, POLLIN]);
      // Repeated waits answered by one socket leave nothing behind on the other: A still answers
      // a later rpoll at once when its data comes.
      for (let i = 0; i < 20; i++) {
        const buf = Buffer.alloc(64);
        while (B.s.recv(buf) > 0);
        const p = rpoll(fds, 5000);
        B.c.send(Buffer.from('again'));
        assert.equal(await p, 1);
      }
      A.c.send(Buffer.from('late'));
      assert.ok((await rpoll([fds[0]], 5000)) === 1);
    } finally {
      await closeAll(A.c, A.s, B.c, B.s);
      await A.l.close();
      await B.l.close();
    }
  });

  test('rpoll: a listener reports POLLIN for a connect request; POLLHUP whatever events; POLLNVAL once closed', T, async () => {
    const { l, c, s } = await rsPair();
    let c2;
    let s2;
    try {
      const fds = [
        { fd: l, events: POLLIN, revents: 0 },
        { fd: s, events: 0, revents: 0 },
      ];
      const waiting = rpoll(fds, 5000);
      c2 = new RsConn();
      const connecting = c2.connect({ address: '127.0.0.1', port: l.localAddress.port });
      assert.equal(await waiting, 1);
      assert.deepEqual(fds.map((f) => f.revents), [POLLIN, 0]);
      s2 = await l.accept();
      await connecting;
      // The peer leaves: POLLHUP although no event was asked for.
      await c.close();
      await until(async () => (await rpoll([fds[1]], 500)) === 1, 5000, 'POLLHUP');
      assert.equal(fds[1].revents, POLLHUP);
      await s.close();
      assert.equal(await rpoll([fds[1]], -1), 1);
      assert.equal(fds[1].revents, POLLNVAL);
    } finally {
      await closeAll(c, s, ...(c2 ? [c2] : []), ...(s2 ? [s2] : []));
      await l.close();
    }
  });

  test('rpoll on a listener beside a waiting raccept: the connect request wakes both, raccept takes it', T, async () => {
    const { l, c, s } = await rsPair();
    let c2;
    let s2;
    try {
      const fds = [{ fd: l, events: POLLIN, revents: 0 }];
      // The rpoll waits first; the raccept behind it must not sleep on with the request queued.
      // Whether the rpoll still sees the request depends on who looks first (as with poll(2)
      // beside a blocking accept in another thread): 1 with POLLIN, or 0 once its timeout ends.
      const polled = rpoll(fds, 1000);
      const accepted = l.accept();
      c2 = new RsConn();
      await c2.connect({ address: '127.0.0.1', port: l.localAddress.port });
      const n = await polled;
      assert.deepEqual([n, fds[0].revents], n === 1 ? [1, POLLIN] : [0, 0]);
      s2 = await Promise.race([accepted, new Promise((_, rej) => setTimeout(() => rej(new Error('raccept still asleep')), 10_000).unref())]);
      assert.ok(s2 instanceof RsConn);
    } finally {
      await closeAll(c, s, ...(c2 ? [c2] : []), ...(s2 ? [s2] : []));
      await l.close();
    }
  });

  test('rpoll on a connect in progress: POLLOUT once connected; POLLOUT|POLLERR when refused', T, async () => {
    const { l, c, s } = await rsPair();
    const c2 = new RsConn();
    const c3 = new RsConn();
    let s2;
    try {
      const connecting = c2.connect({ address: '127.0.0.1', port: l.localAddress.port });
      const fds = [{ fd: c2, events: POLLOUT, revents: 0 }];
      const accepted = l.accept();
      assert.equal(await rpoll(fds, 10_000), 1);
      assert.equal(fds[0].revents, POLLOUT);
      await connecting;
      s2 = await accepted;
      // A port nobody listens on (the listener's, once closed).
      const dead = l.localAddress.port;
      await l.close();
      const refused = c3.connect({ address: '127.0.0.1', port: dead }).catch((e) => e);
      const f3 = [{ fd: c3, events: POLLIN | POLLOUT, revents: 0 }];
      assert.equal(await rpoll(f3, 10_000), 1);
      assert.equal(f3[0].revents, POLLIN | POLLOUT | POLLERR);
      assert.equal((await refused).code, 'ECONNREFUSED');
    } finally {
      await closeAll(c, s, c2, c3, ...(s2 ? [s2] : []));
      await l.close();
    }
  });

  test('rselect: read, write and except sets kept to the ready sockets, cleared on timeout', T, async () => {
    const A = await rsPair();
    const B = await rsPair();
    try {
      let rd = new Set([A.s, B.s]);
      let wr = new Set();
      let ex = new Set([A.s, B.s]);
      const t0 = Date.now();
      assert.equal(await rselect(rd, wr, ex, { sec: 0, usec: 120_000 }), 0);
      assert.ok(Date.now() - t0 >= 110);
      assert.equal(rd.size + wr.size + ex.size, 0, 'sets cleared on timeout');
      A.c.send(Buffer.from('x'));
      rd = new Set([A.s, B.s]);
      wr = new Set([B.c]);
      ex = new Set([A.s]);
      const n = await rselect(rd, wr, ex, null);
      assert.ok(n >= 1);
      // B.c is writable at once, so the first answer may come before A.s's byte; A.s follows.
      assert.deepEqual([...wr], [B.c]);
      assert.equal(ex.size, 0);
      await until(async () => {
        rd = new Set([A.s, B.s]);
        return (await rselect(rd, null, null, { sec: 1, usec: 0 })) === 1;
      }, 5000, 'A.s readable');
      assert.deepEqual([...rd], [A.s]);
      // A hangup: in the read set and in the except set.
      await B.c.close();
      await until(async () => {
        rd = new Set([B.s]);
        ex = new Set([B.s]);
        return (await rselect(rd, null, ex, { sec: 0, usec: 200_000 })) === 2;
      }, 5000, 'B.s hung up');
      assert.deepEqual([[...rd], [...ex]], [[B.s], [B.s]]);
    } finally {
      await closeAll(A.c, A.s, B.c, B.s);
      await A.l.close();
      await B.l.close();
    }
  });
});
