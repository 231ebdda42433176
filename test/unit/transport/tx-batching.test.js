// The TX path's batching: small FPDUs posted together leave in one socket write, and large
// (zero-copy) WRs queued together are all handed to TCP in one kick (a byte budget, not a drain
// per WR) — with every byte still arriving where it belongs, in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createId, PortSpace, Access, WrOpcode, SendFlags, WcStatus } from '../../../dist/index.js';

async function pair(cap) {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const srv = (async () => {
    const child = await listen.getRequest();
    child.createQp(null, { cap });
    await child.accept({});
    return child;
  })();
  const a = createId(null, null, PortSpace.TCP);
  await a.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
  await a.resolveRoute();
  a.createQp(null, { cap });
  await a.connect({});
  const b = await srv;
  const close = async () => {
    for (const x of [a, b]) {
      x.destroyQp();
      await x.destroy();
    }
    await listen.destroy();
  };
  return { a, b, close };
}

async function reap(cq, n, ms = 10000) {
  const out = [];
  const t0 = Date.now();
  while (out.length < n) {
    out.push(...cq.poll(n - out.length));
    if (out.length >= n) break;
    if (Date.now() - t0 > ms) throw new Error(`only ${out.length}/${n} completions`);
    await new Promise((r) => setImmediate(r));
  }
  return out;
}

/** Count the writes the QP's socket is handed while `fn` runs. */
function countWrites(qp, fn) {
  const sock = qp.llp.socket;
  const orig = sock.write;
  let n = 0;
  sock.write = function (...args) {
    n++;
    return orig.apply(this, args);
  };
  try {
    fn();
  } finally {
    sock.write = orig;
  }
  return n;
}

test('an RDMA WRITE + SEND pair posted together is one socket write, and arrives intact', { timeout: 30000 }, async () => {
  const cap = { maxSendWr: 32, maxRecvWr: 32, maxSendSge: 2, maxRecvSge: 2, maxInlineData: 64 };
  const { a, b, close } = await pair(cap);
  try {
    const src = a.pd.regMr(randomBytes(300), 0);
    const dst = b.pd.regMr(Buffer.alloc(300), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const rmsg = b.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    for (let round = 0; round < 5; round++) {
      b.qp.postRecv({ wrId: round, sgList: [{ addr: rmsg.addr, length: 16, lkey: rmsg.lkey }] });
      const off = round * 60;
      const n = countWrites(a.qp, () =>
        a.qp.postSend([
          { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr + off, length: 60, lkey: src.lkey }], rdma: { remoteAddr: dst.addr + off, rkey: dst.rkey }, sendFlags: SendFlags.SIGNALED },
          { wrId: 2, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr + off, length: 4, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED | SendFlags.INLINE },
        ]),
      );
      assert.equal(n, 1, 'one socket write for both FPDUs');
      const [wc] = await reap(b.recvCq, 1);
      assert.equal(wc.status, WcStatus.SUCCESS);
      assert.equal(wc.byteLen, 4);
      // The Write's bytes were placed before the Send completed.
      assert.deepEqual(Buffer.from(dst.buf).subarray(off, off + 60), Buffer.from(src.buf).subarray(off, off + 60));
      assert.deepEqual(Buffer.from(rmsg.buf).subarray(0, 4), Buffer.from(src.buf).subarray(off, off + 4));
      const sc = await reap(a.sendCq, 2);
      assert.deepEqual(sc.map((w) => [w.wrId, w.status]), [[1, WcStatus.SUCCESS], [2, WcStatus.SUCCESS]]);
    }
  } finally {
    await close();
  }
});

test('large WRs queued together go to TCP in one kick (no drain per WR), in order', { timeout: 60000 }, async () => {
  const cap = { maxSendWr: 32, maxRecvWr: 32, maxSendSge: 2, maxRecvSge: 2, maxInlineData: 64 };
  const { a, b, close } = await pair(cap);
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
    const [wc] = await reap(b.recvCq, 1);
    assert.equal(wc.status, WcStatus.SUCCESS);
    assert.ok(Buffer.from(dst.buf).equals(Buffer.from(src.buf)), 'all 512 KiB placed');
    const sc = await reap(a.sendCq, N + 1);
    assert.deepEqual(sc.map((w) => w.wrId), [...wrs.map((w) => w.wrId)]);
    assert.ok(sc.every((w) => w.status === WcStatus.SUCCESS));
  } finally {
    await close();
  }
});
