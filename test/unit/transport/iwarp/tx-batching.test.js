// The TX path's batching: small FPDUs posted together — or in answer to each other's completions
// within one tick — leave in one socket write, and large
// (zero-copy) WRs queued together are all handed to TCP in one kick (a byte budget, not a drain
// per WR) — with every byte still arriving where it belongs, in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Access, WrOpcode, SendFlags, WcStatus } from '../../../../dist/index.js';
import { rcPair, reap } from '../../../lib/cm-rc-pair.js';

/**
 * Count the writes the QP's socket is handed while `fn` runs and until the tick it runs in is
 * over (staged FPDUs leave at the end of the tick, before the event loop goes on): `fn` may be
 * async, what its microtasks post counts too. Resolves { n, inTick }: `inTick`, the writes made
 * before the next event-loop phase.
 */
async function countWrites(qp, fn) {
  const sock = qp.llp.socket;
  const orig = sock.write;
  let n = 0;
  sock.write = function (...args) {
    n++;
    return orig.apply(this, args);
  };
  let inTick = -1;
  const phase = new Promise((r) =>
    setImmediate(() => {
      inTick = n;
      r();
    }),
  );
  try {
    await fn();
    await phase;
  } finally {
    sock.write = orig;
  }
  return { n, inTick };
}

test('an RDMA WRITE + SEND pair posted together is one socket write, and arrives intact', { timeout: 30000 }, async () => {
  const { a, b, close } = await rcPair({ send: 32, recv: 32, sge: 2 });
  try {
    const src = a.pd.regMr(randomBytes(300), 0);
    const dst = b.pd.regMr(Buffer.alloc(300), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const rmsg = b.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    for (let round = 0; round < 5; round++) {
      b.qp.postRecv({ wrId: round, sgList: [{ addr: rmsg.addr, length: 16, lkey: rmsg.lkey }] });
      const off = round * 60;
      const { n } = await countWrites(a.qp, () =>
        a.qp.postSend([
          { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr + off, length: 60, lkey: src.lkey }], rdma: { remoteAddr: dst.addr + off, rkey: dst.rkey }, sendFlags: SendFlags.SIGNALED },
          { wrId: 2, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr + off, length: 4, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED | SendFlags.INLINE },
        ]),
      );
      assert.equal(n, 1, 'one socket write for both FPDUs');
      const [wc] = await reap(b.recvCq, 1, 10000);
      assert.equal(wc.status, WcStatus.SUCCESS);
      assert.equal(wc.byteLen, 4);
      // The Write's bytes were placed before the Send completed.
      assert.deepEqual(Buffer.from(dst.buf).subarray(off, off + 60), Buffer.from(src.buf).subarray(off, off + 60));
      assert.deepEqual(Buffer.from(rmsg.buf).subarray(0, 4), Buffer.from(src.buf).subarray(off, off + 4));
      const sc = await reap(a.sendCq, 2, 10000);
      assert.deepEqual(sc.map((w) => [w.wrId, w.status]), [[1, WcStatus.SUCCESS], [2, WcStatus.SUCCESS]]);
    }
  } finally {
    await close();
  }
});

test('a SEND posted in answer to an RDMA WRITE completion in the same tick shares its socket write; a lone SEND leaves within its tick', { timeout: 30000 }, async () => {
  const { a, b, close } = await rcPair({ send: 32, recv: 32, sge: 2 });
  try {
    const src = a.pd.regMr(randomBytes(300), 0);
    const dst = b.pd.regMr(Buffer.alloc(300), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const rmsg = b.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    for (let round = 0; round < 3; round++) {
      b.qp.postRecv({ wrId: round, sgList: [{ addr: rmsg.addr, length: 16, lkey: rmsg.lkey }] });
      const off = round * 60;
      // rping's server: post the RDMA WRITE, wait for its completion, then post the SEND.
      const { n, inTick } = await countWrites(a.qp, async () => {
        a.qp.postSend({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr + off, length: 60, lkey: src.lkey }], rdma: { remoteAddr: dst.addr + off, rkey: dst.rkey }, sendFlags: SendFlags.SIGNALED });
        await Promise.resolve();
        const [wc] = a.sendCq.poll(1);
        assert.equal(wc?.wrId, 1, 'the WRITE completed at once');
        a.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr + off, length: 4, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED });
      });
      assert.equal(n, 1, 'WRITE and SEND in one socket write');
      assert.equal(inTick, 1, 'written before the event loop went on');
      const [wc] = await reap(b.recvCq, 1, 10000);
      assert.equal(wc.status, WcStatus.SUCCESS);
      assert.deepEqual(Buffer.from(dst.buf).subarray(off, off + 60), Buffer.from(src.buf).subarray(off, off + 60));
      await reap(a.sendCq, 1, 10000);
    }
    // A lone SEND: nothing follows it, it still leaves in its own tick.
    b.qp.postRecv({ wrId: 9, sgList: [{ addr: rmsg.addr, length: 16, lkey: rmsg.lkey }] });
    const lone = await countWrites(a.qp, () => a.qp.postSend({ wrId: 3, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED }));
    assert.equal(lone.inTick, 1);
    const [wc] = await reap(b.recvCq, 1, 10000);
    assert.equal(wc.byteLen, 8);
    assert.deepEqual(Buffer.from(rmsg.buf).subarray(0, 8), Buffer.from(src.buf).subarray(0, 8));
  } finally {
    await close();
  }
});

test('large WRs queued together go to TCP in one kick (no drain per WR), in order', { timeout: 60000 }, async () => {
  const { a, b, close } = await rcPair({ send: 32, recv: 32, sge: 2 });
  try {
    const K = 64 * 1024;
    const N = 8;
    const src = a.pd.regMr(randomBytes(N * K), 0);
    const dst = b.pd.regMr(Buffer.alloc(N * K), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const rmsg = b.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    b.qp.postRecv({ wrId: 'fin', sgList: [{ addr: rmsg.addr, length: 16, lkey: rmsg.lkey }] });
    const wrs = [];
    // Backwards, so that a reordering would show in the target.
    for (let i = N - 1; i >= 0; i--) {
      wrs.push({ wrId: i, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr + i * K, length: K, lkey: src.lkey }], rdma: { remoteAddr: dst.addr + i * K, rkey: dst.rkey }, sendFlags: SendFlags.SIGNALED });
    }
    wrs.push({ wrId: 'fin', opcode: WrOpcode.SEND, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED });
    a.qp.postSend(wrs);
    assert.equal(a.qp.sqDepth, 0, 'every WR was handed to TCP by the one kick');
    const [wc] = await reap(b.recvCq, 1, 10000);
    assert.equal(wc.status, WcStatus.SUCCESS);
    assert.ok(Buffer.from(dst.buf).equals(Buffer.from(src.buf)), 'all 512 KiB placed');
    const sc = await reap(a.sendCq, N + 1, 10000);
    assert.deepEqual(sc.map((w) => w.wrId), [...wrs.map((w) => w.wrId)]);
    assert.ok(sc.every((w) => w.status === WcStatus.SUCCESS));
  } finally {
    await close();
  }
});

test('small WRs are written before their completions are generated; copied and zero-copy WRs complete once each, in posting order', { timeout: 30000 }, async () => {
  const { a, b, close } = await rcPair({ send: 32, recv: 32, sge: 2 });
  try {
    const K = 64 * 1024;
    const src = a.pd.regMr(randomBytes(K + 256), 0);
    const dst = b.pd.regMr(Buffer.alloc(K + 256), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const rmsg = b.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    const sock = a.qp.llp.socket;
    const orig = sock.write;
    const seen = [];
    sock.write = function (...args) {
      seen.push(a.sendCq.pending);
      return orig.apply(this, args);
    };
    try {
      // A small RDMA WRITE + SEND pair: one write, made before either completion was queued;
      // both completions are there when postSend returns.
      b.qp.postRecv({ wrId: 'r1', sgList: [{ addr: rmsg.addr, length: 16, lkey: rmsg.lkey }] });
      a.qp.postSend([
        { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr, length: 64, lkey: src.lkey }], rdma: { remoteAddr: dst.addr, rkey: dst.rkey }, sendFlags: SendFlags.SIGNALED },
        { wrId: 2, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr, length: 4, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED | SendFlags.INLINE },
      ]);
      assert.deepEqual(seen, [0], 'one socket write, before any completion');
      assert.equal(a.sendCq.pending, 2, 'both completed by the time postSend returned');
      assert.deepEqual(a.sendCq.poll(4).map((w) => [w.wrId, w.status]), [[1, WcStatus.SUCCESS], [2, WcStatus.SUCCESS]]);
      await reap(b.recvCq, 1, 10000);
      // Copied, zero-copy, copied: the last waits for the zero-copy one's write callback.
      b.qp.postRecv({ wrId: 'r2', sgList: [{ addr: rmsg.addr, length: 16, lkey: rmsg.lkey }] });
      a.qp.postSend([
        { wrId: 3, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr, length: 100, lkey: src.lkey }], rdma: { remoteAddr: dst.addr, rkey: dst.rkey }, sendFlags: SendFlags.SIGNALED },
        { wrId: 4, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr + 256, length: K, lkey: src.lkey }], rdma: { remoteAddr: dst.addr + 256, rkey: dst.rkey }, sendFlags: SendFlags.SIGNALED },
        { wrId: 5, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr, length: 8, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED },
      ]);
      const sc = await reap(a.sendCq, 3, 10000);
      assert.deepEqual(sc.map((w) => [w.wrId, w.status]), [[3, WcStatus.SUCCESS], [4, WcStatus.SUCCESS], [5, WcStatus.SUCCESS]]);
      await reap(b.recvCq, 1, 10000);
      assert.ok(Buffer.from(dst.buf).subarray(256).equals(Buffer.from(src.buf).subarray(256)), 'the 64 KiB WRITE placed');
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(a.sendCq.pending, 0, 'no completion twice');
    } finally {
      sock.write = orig;
    }
  } finally {
    await close();
  }
});

test('copied messages posted faster than TCP takes them (buffered writes) and after it caught up arrive intact', { timeout: 60000 }, async () => {
  const N = 1000;
  const K = 30 * 1024; // copied (below the zero-copy size): staged in the slab
  const { a, b, close } = await rcPair({ send: N + 8, recv: N + 8, sge: 2 });
  try {
    const srcBytes = randomBytes(N * K);
    const src = a.pd.regMr(srcBytes, 0);
    const dst = b.pd.regMr(Buffer.alloc(N * K), Access.LOCAL_WRITE);
    const got = Buffer.from(dst.buf.buffer, dst.buf.byteOffset, dst.buf.byteLength);
    for (let i = 0; i < N; i++) b.qp.postRecv({ wrId: i, sgList: [{ addr: dst.addr + i * K, length: K, lkey: dst.lkey }] });
    const sock = a.qp.llp.socket;
    let buffered = 0;
    const sent = [];
    for (let i = 0; i < N; i++) {
      const n = K - ((i * 7919) % 4096);
      sent.push(srcBytes.subarray(i * K, i * K + n));
      a.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr + i * K, length: n, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED });
      if (sock.writableLength > 0) buffered++;
      if (i === N / 2) await new Promise((r) => setTimeout(r, 20)); // let TCP catch up halfway
    }
    assert.ok(buffered > 0, 'some writes were left buffered in the socket');
    const wcs = await reap(b.recvCq, N, 30000);
    for (let i = 0; i < N; i++) {
      const wc = wcs[i];
      assert.equal(wc.wrId, i);
      assert.equal(wc.status, WcStatus.SUCCESS);
      assert.equal(wc.byteLen, sent[i].length);
      assert.ok(got.subarray(i * K, i * K + wc.byteLen).equals(sent[i]), `message ${i} intact`);
    }
    const sc = await reap(a.sendCq, N, 30000);
    assert.deepEqual(sc.map((w) => w.wrId), sent.map((_, i) => i));
  } finally {
    await close();
  }
});

test('small SENDs posted one by one in one tick: the first is written at once, the rest together at the end of the tick, intact and in order', { timeout: 30000 }, async () => {
  const N = 50;
  const { a, b, close } = await rcPair({ send: N + 8, recv: N + 8, sge: 2 });
  try {
    const src = a.pd.regMr(randomBytes(N * 64), 0);
    const dst = b.pd.regMr(Buffer.alloc(N * 64), Access.LOCAL_WRITE);
    for (let i = 0; i < N; i++) b.qp.postRecv({ wrId: i, sgList: [{ addr: dst.addr + i * 64, length: 64, lkey: dst.lkey }] });
    for (let round = 0; round < 2; round++) {
      let afterFirst = -1;
      const { n, inTick } = await countWrites(a.qp, () => {
        for (let i = 0; i < N; i++) {
          a.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr + i * 64, length: 64 - (i % 5), lkey: src.lkey }], sendFlags: SendFlags.SIGNALED });
          if (i === 0) afterFirst = a.qp.llp.socket.bytesWritten;
        }
      });
      assert.ok(afterFirst > 0, 'the first SEND was written by its own postSend');
      assert.equal(n, 2, 'the other SENDs of the tick left in one write');
      assert.equal(inTick, 2, 'both before the event loop went on');
      const wcs = await reap(b.recvCq, N, 10000);
      for (let i = 0; i < N; i++) {
        assert.equal(wcs[i].wrId, i);
        assert.equal(wcs[i].status, WcStatus.SUCCESS);
        assert.equal(wcs[i].byteLen, 64 - (i % 5));
        assert.deepEqual(Buffer.from(dst.buf).subarray(i * 64, i * 64 + wcs[i].byteLen), Buffer.from(src.buf).subarray(i * 64, i * 64 + wcs[i].byteLen));
      }
      const sc = await reap(a.sendCq, N, 10000);
      assert.deepEqual(sc.map((w) => w.wrId), [...Array(N).keys()]);
      for (let i = 0; i < N; i++) b.qp.postRecv({ wrId: i, sgList: [{ addr: dst.addr + i * 64, length: 64, lkey: dst.lkey }] });
    }
  } finally {
    await close();
  }
});
