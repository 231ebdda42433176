// The verbs QP on every device that makes RC QPs and connects them: posting rules, completion
// semantics, flush, and the data path (segmentation, zero-copy, scatter/gather, RDMA Read/Write,
// Send with Invalidate, inline, fences, CQ overflow). Expectations that depend on the device come
// from its attributes (immediate data: not on iWARP; atomics: atomic_cap; Read SGEs: max_sge_rd).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  createId, PortSpace, Access, WrOpcode, SendFlags, WcStatus, WcOpcode, WcFlags, QpState, QpAttrMask, TransportType,
  PostError, AsyncEventType, AtomicCap,
} from '../../dist/index.js';
import { rcPair, reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, Cap, recvGrhOf } from '../lib/devices.js';

const pair = rcPair;

/** RESET → INIT with what every device's rules accept (IB rules need P_Key index, port, access). */
function toInit(qp) {
  qp.modify(
    { qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: 0 },
    QpAttrMask.STATE | QpAttrMask.PKEY_INDEX | QpAttrMask.PORT | QpAttrMask.ACCESS_FLAGS,
  );
}

/** The next async event of `type` (other tests share the device's context and its event queue). */
async function asyncEvent(ctx, type, obj, ms = 3000) {
  const t0 = Date.now();
  for (;;) {
    const left = ms - (Date.now() - t0);
    if (left <= 0) throw new Error(`no async event ${type}`);
    const ev = await ctx.getAsyncEvent(AbortSignal.timeout(left));
    ctx.ackAsyncEvent(ev);
    if (ev.type === type && (ev.qp === obj || ev.cq === obj)) return ev;
  }
}

const sg = (mr, off = 0, len = mr.length - off) => [{ addr: mr.addr + off, length: len, lkey: mr.lkey }];

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  test('posting rules: state, queue depth, SGE count, opcodes the device refuses', async () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(8);
    const qp = pd.createQp({ qpType: 2, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 } });
    const mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    assert.throws(() => qp.postRecv({ wrId: 1, sgList: sg(mr) }), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 0, 'RESET');
    toInit(qp);
    // The queue holds at least what was asked for (rxe rounds up to 2^k - 1): fill it.
    const depth = qp.cap.maxRecvWr;
    assert.ok(depth >= 2 && depth <= 7);
    qp.postRecv(Array.from({ length: depth }, (_, i) => ({ wrId: i + 1, sgList: sg(mr) })));
    assert.throws(() => qp.postRecv({ wrId: depth + 1, sgList: sg(mr) }), { code: 'ENOMEM' });
    assert.throws(() => qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: sg(mr) }), { code: 'EINVAL' }, 'send in INIT');
    assert.throws(() => qp.modify({ qpState: QpState.RTS }), { code: 'EINVAL' }, 'INIT -> RTS');
    if (!d.caps.has(Cap.UD)) assert.throws(() => pd.createQp({ qpType: 4, sendCq: cq, recvCq: cq, cap: {} }), { code: 'EOPNOTSUPP' }, 'UD where the device has none');
    qp.modify({ qpState: QpState.ERR });
    const wc = cq.poll(8);
    assert.deepEqual(wc.map((w) => [w.wrId, w.status, w.opcode]), Array.from({ length: depth }, (_, i) => [i + 1, WcStatus.WR_FLUSH_ERR, WcOpcode.RECV]));
    qp.postSend({ wrId: 9, opcode: WrOpcode.SEND, sgList: sg(mr) });
    assert.deepEqual(cq.poll(1).map((w) => [w.wrId, w.status]), [[9, WcStatus.WR_FLUSH_ERR]], 'posting in ERR flushes at once');
    qp.destroy();
    cq.destroy();
    mr.dereg();
    pd.dealloc();

    const { a, close } = await pair({ send: 2, sge: 2 });
    const m = a.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    const attr = a.verbs.queryDevice();
    // One SGE more than the QP holds (rxe's send WQE holds max(SGEs, inline bytes), so its
    // max_send_sge may exceed what was asked for).
    const tooMany = Array.from({ length: a.qp.cap.maxSendSge + 1 }, (_, i) => sg(m, i, 1)[0]);
    const bad = [
      { wrId: 1, opcode: WrOpcode.SEND, sgList: tooMany },
      { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: sg(m) },
    ];
    // iWARP (RFC 5040) has no immediate data: siw refuses those opcodes.
    if (d.transportType === TransportType.IWARP) {
      bad.push({ wrId: 1, opcode: WrOpcode.SEND_WITH_IMM, sgList: sg(m), immData: 1 });
      bad.push({ wrId: 1, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, sgList: sg(m), rdma: { remoteAddr: 0, rkey: 1 } });
    }
    if (attr.atomicCap === AtomicCap.NONE) bad.push({ wrId: 1, opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: sg(m), rdma: { remoteAddr: 0, rkey: 1 } });
    if (attr.maxSgeRd < 2) bad.push({ wrId: 1, opcode: WrOpcode.RDMA_READ, sgList: [...sg(m, 0, 8), ...sg(m, 8, 8)], rdma: { remoteAddr: 0, rkey: 1 } });
    for (const wr of bad) assert.throws(() => a.qp.postSend(wr), (e) => e instanceof PostError && e.code === 'EINVAL', WrOpcode[wr.opcode]);
    // The first bad WR of a list stops it; the ones before are queued.
    assert.throws(() => a.qp.postSend([{ wrId: 1, opcode: WrOpcode.SEND, sgList: [] }, bad[1]]), (e) => e.badWrIndex === 1);
    await close();
  });

  test('SEND segmented across packets (FPDUs, MTU-sized packets), multi-SGE gather and scatter, solicited flag', async () => {
    const { a, b, close } = await pair();
    const data = randomBytes(200_000);
    const src1 = a.pd.regMr(Buffer.from(data.subarray(0, 70_000)), 0);
    const src2 = a.pd.regMr(Buffer.from(data.subarray(70_000)), 0);
    const dst = b.pd.regMr(Buffer.alloc(300_000), Access.LOCAL_WRITE);
    b.qp.postRecv({ wrId: 'r', sgList: [...sg(dst, 0, 100_000), ...sg(dst, 150_000, 150_000)] });
    a.qp.postSend({ wrId: 's', opcode: WrOpcode.SEND, sgList: [...sg(src1), ...sg(src2)], sendFlags: SendFlags.SIGNALED | SendFlags.SOLICITED });
    const [r] = await reap(b.recvCq, 1);
    assert.equal(r.status, WcStatus.SUCCESS);
    assert.equal(r.byteLen, 200_000);
    const got = Buffer.concat([Buffer.from(dst.buf.subarray(0, 100_000)), Buffer.from(dst.buf.subarray(150_000, 250_000))]);
    assert.ok(got.equals(data));
    const [s] = await reap(a.sendCq, 1);
    assert.deepEqual([s.wrId, s.status, s.opcode], ['s', WcStatus.SUCCESS, WcOpcode.SEND]);
    await close();
  });

  test('RDMA WRITE of 1 MiB (zero-copy path) and RDMA READ back, several reads beyond ORD queue in order', async () => {
    const { a, b, close } = await pair({ ord: 1, ird: 1 });
    const data = randomBytes(1 << 20);
    const src = a.pd.regMr(Buffer.from(data), 0);
    const target = b.pd.regMr(Buffer.alloc(1 << 20), Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
    a.qp.postSend({ wrId: 'w', opcode: WrOpcode.RDMA_WRITE, sgList: sg(src), sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: target.addr, rkey: target.rkey } });
    const [w] = await reap(a.sendCq, 1);
    assert.equal(w.status, WcStatus.SUCCESS);
    assert.equal(w.opcode, WcOpcode.RDMA_WRITE);
    const back = a.pd.regMr(Buffer.alloc(1 << 20), Access.LOCAL_WRITE);
    const q = 1 << 18;
    for (let i = 0; i < 4; i++) {
      a.qp.postSend({ wrId: i, opcode: WrOpcode.RDMA_READ, sgList: sg(back, i * q, q), sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: target.addr + i * q, rkey: target.rkey } });
    }
    const rd = await reap(a.sendCq, 4);
    assert.deepEqual(rd.map((x) => [x.wrId, x.status, x.opcode, x.byteLen]), [0, 1, 2, 3].map((i) => [i, WcStatus.SUCCESS, WcOpcode.RDMA_READ, q]));
    assert.ok(Buffer.from(back.buf).equals(data));
    await close();
  });

  test('inline data is copied at post time; unsignaled sends complete silently', async () => {
    const { a, b, close } = await pair();
    const buf = Buffer.from('inline-payload!!');
    const src = a.pd.regMr(buf, 0);
    const dst = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    b.qp.postRecv({ wrId: 1, sgList: sg(dst) });
    b.qp.postRecv({ wrId: 2, sgList: sg(dst) });
    a.qp.postSend({ wrId: 'u', opcode: WrOpcode.SEND, sgList: sg(src), sendFlags: SendFlags.INLINE });
    buf.fill(0x58); // reuse at once: inline semantics
    a.qp.postSend({ wrId: 'x', opcode: WrOpcode.SEND, sgList: sg(src, 0, 4), sendFlags: SendFlags.SIGNALED });
    const r = await reap(b.recvCq, 2);
    assert.equal(r[0].byteLen, 16);
    const s = await reap(a.sendCq, 1);
    assert.equal(s[0].wrId, 'x', 'the unsignaled send produced no completion');
    assert.equal(Buffer.from(dst.buf.subarray(0, 4)).toString(), 'XXXX');
    const big = a.pd.regMr(Buffer.alloc(200), 0);
    assert.throws(() => a.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: sg(big), sendFlags: SendFlags.INLINE }), { code: 'EINVAL' });
    await close();
  });

  test('bad lkey: LOC_PROT_ERR completion, QP to ERR, the rest flushed', async () => {
    const { a, close } = await pair();
    const m = a.pd.regMr(Buffer.alloc(64), 0);
    a.qp.postSend([
      { wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: m.addr, length: 8, lkey: (m.lkey + 0x100) >>> 0 }], sendFlags: SendFlags.SIGNALED },
      { wrId: 2, opcode: WrOpcode.SEND, sgList: sg(m), sendFlags: SendFlags.SIGNALED },
    ]);
    const wc = await reap(a.sendCq, 2);
    assert.deepEqual(wc.map((w) => [w.wrId, w.status]), [[1, WcStatus.LOC_PROT_ERR], [2, WcStatus.WR_FLUSH_ERR]]);
    assert.equal(a.qp.state, QpState.ERR);
    await close();
  });

  test('RDMA READ of a region without REMOTE_READ: REM_ACCESS_ERR on the requester, an access error event', async () => {
    const { a, b, close } = await pair();
    const target = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const sink = a.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    a.qp.postSend({ wrId: 'r', opcode: WrOpcode.RDMA_READ, sgList: sg(sink), sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: target.addr, rkey: target.rkey } });
    const [wc] = await reap(a.sendCq, 1);
    assert.equal(wc.status, WcStatus.REM_ACCESS_ERR);
    // siw reports the TERMINATE it receives on the requester's QP; on IB the responder that found
    // the violation raises "local access violation work queue error" on its QP (IBTA 11.6.3.2).
    const side = d.transportType === TransportType.IWARP ? a : b;
    const ev = await asyncEvent(side.verbs, AsyncEventType.QP_ACCESS_ERR, side.qp);
    assert.equal(ev.qp, side.qp);
    await close();
  });

  test('Send with Invalidate invalidates the receiver STag; WITH_INV reported', async () => {
    const { a, b, close } = await pair();
    const victim = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const dst = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    b.qp.postRecv({ wrId: 1, sgList: sg(dst) });
    const src = a.pd.regMr(Buffer.from('bye'), 0);
    a.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND_WITH_INV, invalidateRkey: victim.rkey, sgList: sg(src), sendFlags: SendFlags.SIGNALED });
    const [r] = await reap(b.recvCq, 1);
    assert.equal(r.status, WcStatus.SUCCESS);
    assert.ok(r.wcFlags & WcFlags.WITH_INV);
    assert.equal(r.invalidatedRkey, victim.rkey);
    // A Write to the invalidated STag is now refused (the QP terminates).
    a.qp.postSend({ wrId: 2, opcode: WrOpcode.RDMA_WRITE, sgList: sg(src), rdma: { remoteAddr: victim.addr, rkey: victim.rkey } });
    const ev = await asyncEvent(b.verbs, AsyncEventType.QP_ACCESS_ERR, b.qp);
    assert.equal(ev.qp, b.qp);
    assert.ok(victim.buf.every((x) => x === 0));
    await close();
  });

  test('CQ overflow raises CQ_ERR and does not crash the data path', async () => {
    const { a, b, close } = await pair();
    const ctx = b.verbs;
    const small = ctx.createCq(1);
    const pd = b.pd;
    // Not connected QPs are enough: flushes complete into the tiny CQ.
    const qp = pd.createQp({ qpType: 2, sendCq: small, recvCq: small, cap: { maxSendWr: 4, maxRecvWr: 4 } });
    toInit(qp);
    const m = pd.regMr(Buffer.alloc(8), Access.LOCAL_WRITE);
    for (let i = 0; i < 3; i++) qp.postRecv({ wrId: i, sgList: sg(m) });
    qp.modify({ qpState: QpState.ERR });
    const ev = await asyncEvent(ctx, AsyncEventType.CQ_ERR, small);
    assert.equal(ev.cq, small);
    qp.destroy();
    small.destroy();
    m.dereg();
    void a;
    await close();
  });

  test('a send CQ overflowing on the data path moves its QP to ERR with QP_FATAL', async () => {
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(1);
    const srv = (async () => {
      const child = await listen.getRequest();
      child.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 8 } });
      const m = child.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
      for (let i = 0; i < 8; i++) child.qp.postRecv({ wrId: i, sgList: sg(m) });
      await child.accept();
      return child;
    })();
    const a = createId(null, null, PortSpace.TCP);
    await a.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
    await a.resolveRoute();
    const tiny = a.verbs.createCq(1);
    a.createQp(null, { sendCq: tiny, cap: { maxSendWr: 4, maxRecvWr: 4 } });
    await a.connect();
    const b = await srv;
    const m = a.pd.regMr(Buffer.alloc(8), 0);
    for (let i = 0; i < 3; i++) a.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: sg(m), sendFlags: SendFlags.SIGNALED });
    await asyncEvent(a.verbs, AsyncEventType.CQ_ERR, tiny);
    await asyncEvent(a.verbs, AsyncEventType.QP_FATAL, a.qp);
    assert.equal(a.qp.state, QpState.ERR);
    a.destroyQp();
    tiny.destroy();
    await a.destroy();
    b.destroyQp();
    await b.destroy();
    await listen.destroy();
  });

  test('a WR still queued when postSend returns keeps its own SGEs and inline data (fenced behind a Read)', async () => {
    const { a, b, close } = await pair();
    const target = b.pd.regMr(Buffer.alloc(1 << 20, 1), Access.LOCAL_WRITE | Access.REMOTE_READ);
    const dst = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    b.qp.postRecv({ wrId: 'r', sgList: sg(dst) });
    const sink = a.pd.regMr(Buffer.alloc(1 << 20), Access.LOCAL_WRITE);
    const payload = Buffer.from('fenced-inline');
    const src = a.pd.regMr(payload, 0);
    const sgl = [{ addr: src.addr, length: payload.length, lkey: src.lkey }];
    a.qp.postSend([
      { wrId: 'read', opcode: WrOpcode.RDMA_READ, sgList: sg(sink), sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: target.addr, rkey: target.rkey } },
      { wrId: 'send', opcode: WrOpcode.SEND, sgList: sgl, sendFlags: SendFlags.SIGNALED | SendFlags.INLINE | SendFlags.FENCE },
    ]);
    assert.equal(a.qp.sqDepth, 1, 'the fenced send is still queued');
    payload.fill(0x5a); // inline: the buffer may be reused at once
    sgl[0].length = 1; // and the SGE objects too
    const [r] = await reap(b.recvCq, 1);
    assert.equal(r.byteLen, 13);
    assert.equal(Buffer.from(dst.buf.subarray(0, 13)).toString(), 'fenced-inline');
    const wc = await reap(a.sendCq, 2);
    assert.deepEqual(wc.map((w) => [w.wrId, w.status]), [['read', WcStatus.SUCCESS], ['send', WcStatus.SUCCESS]]);
    await close();
  });

  test('atomics as atomic_cap says: fetch-and-add and compare-and-swap on 8 aligned bytes, the old value returned', async (t) => {
    const { a, b, close } = await pair({ ord: 2, ird: 2 });
    t.after(close); // also when an assertion fails: the QPs would keep the process alive
    if (a.verbs.queryDevice().atomicCap === AtomicCap.NONE) {
      t.skip('the device has no atomics (posting them is refused: see the posting rules)');
      return;
    }
    const word = Buffer.alloc(16);
    word.writeBigUInt64LE(40n, 8);
    const target = b.pd.regMr(word, Access.LOCAL_WRITE | Access.REMOTE_ATOMIC);
    const out = Buffer.alloc(16);
    const res = a.pd.regMr(out, Access.LOCAL_WRITE);
    const at = { remoteAddr: target.addr + 8, rkey: target.rkey };
    a.qp.postSend([
      { wrId: 'faa', opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: sg(res, 0, 8), sendFlags: SendFlags.SIGNALED, atomic: { ...at, compareAdd: 2n } },
      { wrId: 'cas-miss', opcode: WrOpcode.ATOMIC_CMP_AND_SWP, sgList: sg(res, 8, 8), sendFlags: SendFlags.SIGNALED, atomic: { ...at, compareAdd: 40n, swap: 7n } },
    ]);
    const wc = await reap(a.sendCq, 2);
    assert.deepEqual(wc.map((w) => [w.wrId, w.status, w.opcode, w.byteLen]), [
      ['faa', WcStatus.SUCCESS, WcOpcode.FETCH_ADD, 8],
      ['cas-miss', WcStatus.SUCCESS, WcOpcode.COMP_SWAP, 8],
    ]);
    assert.deepEqual([out.readBigUInt64LE(0), out.readBigUInt64LE(8)], [40n, 42n], 'each returns the value it found');
    assert.equal(word.readBigUInt64LE(8), 42n, 'the compare failed: no swap');
    a.qp.postSend({ wrId: 'cas-hit', opcode: WrOpcode.ATOMIC_CMP_AND_SWP, sgList: sg(res, 0, 8), sendFlags: SendFlags.SIGNALED, atomic: { ...at, compareAdd: 42n, swap: 0xfedcba9876543210n } });
    const [c] = await reap(a.sendCq, 1);
    assert.equal(c.status, WcStatus.SUCCESS);
    assert.equal(out.readBigUInt64LE(0), 42n);
    assert.equal(word.readBigUInt64LE(8), 0xfedcba9876543210n);
    assert.equal(word.readBigUInt64LE(0), 0n, 'the bytes before are untouched');
  });

  test('RDMA WRITE running past the end of the remote region: nothing written; IB: REM_ACCESS_ERR, the rest flushed; iWARP: the peer terminates', async (t) => {
    const { a, b, close } = await pair();
    t.after(close);
    const whole = Buffer.alloc(192, 0xee);
    const region = whole.subarray(64, 128);
    region.fill(0x5a);
    const target = b.pd.regMr(region, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const src = a.pd.regMr(Buffer.alloc(64, 0x11), 0);
    a.qp.postSend([
      { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: sg(src, 0, 48), sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: target.addr + 32, rkey: target.rkey } },
      { wrId: 2, opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED },
    ]);
    const wc = await reap(a.sendCq, 2);
    if (d.transportType === TransportType.IWARP) {
      // An RDMA Write is unacknowledged on iWARP (RFC 5040): it completes once sent; the peer's
      // TERMINATE then moves the QP to ERR.
      assert.equal(wc[0].wrId, 1);
      const t0 = Date.now();
      while (a.qp.state !== QpState.ERR && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 5));
    } else {
      assert.deepEqual(wc.map((w) => [w.wrId, w.status]), [[1, WcStatus.REM_ACCESS_ERR], [2, WcStatus.WR_FLUSH_ERR]]);
    }
    assert.equal(a.qp.state, QpState.ERR);
    assert.equal(b.qp.state, QpState.ERR, 'the responder that found the violation is in ERR too');
    assert.ok(region.every((x) => x === 0x5a), 'no byte of the region written');
    assert.ok(whole.subarray(0, 64).every((x) => x === 0xee) && whole.subarray(128).every((x) => x === 0xee), 'nor around it');
  });

  test('RDMA WRITE with immediate: the data placed, the receive consumed with the immediate and the length (not on iWARP)', async (t) => {
    if (d.transportType === TransportType.IWARP) {
      t.skip('iWARP has no immediate data (RFC 5040)');
      return;
    }
    const { a, b, close } = await pair();
    t.after(close);
    const target = b.pd.regMr(Buffer.alloc(4096), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const data = randomBytes(3000);
    const src = a.pd.regMr(Buffer.from(data), 0);
    b.qp.postRecv({ wrId: 'r', sgList: [] });
    a.qp.postSend({ wrId: 'w', opcode: WrOpcode.RDMA_WRITE_WITH_IMM, sgList: sg(src), sendFlags: SendFlags.SIGNALED, immData: 0x12345678, rdma: { remoteAddr: target.addr + 100, rkey: target.rkey } });
    const [r] = await reap(b.recvCq, 1);
    assert.deepEqual([r.wrId, r.status, r.opcode, r.byteLen, r.immData, (r.wcFlags & WcFlags.WITH_IMM) !== 0], ['r', WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, 3000, 0x12345678, true]);
    assert.ok(Buffer.from(target.buf.subarray(100, 3100)).equals(data));
    const [w] = await reap(a.sendCq, 1);
    assert.deepEqual([w.status, w.opcode], [WcStatus.SUCCESS, WcOpcode.RDMA_WRITE]);
  });

  test('receive completions: IBV_WC_GRH on every successful one on RoCE (rxe do_complete), none on iWARP (siw), none when flushed', async (t) => {
    const grh = recvGrhOf(d);
    if (grh === null) {
      t.skip('InfiniBand link: the flag follows whether the sender added a GRH');
      return;
    }
    const { a, b, close } = await pair();
    t.after(close);
    const iwarp = d.transportType === TransportType.IWARP;
    const dst = b.pd.regMr(Buffer.alloc(4096), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const src = a.pd.regMr(Buffer.from(randomBytes(2048)), 0);
    const wrs = [
      { wrId: 1, opcode: WrOpcode.SEND, sgList: sg(src, 0, 1500) },
      ...(iwarp ? [] : [
        { wrId: 2, opcode: WrOpcode.SEND_WITH_IMM, immData: 7, sgList: sg(src, 0, 10) },
        { wrId: 3, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, immData: 8, sgList: sg(src, 0, 100), rdma: { remoteAddr: dst.addr + 3000, rkey: dst.rkey } },
      ]),
    ];
    const recvAt = { 1: [0, 1536], 2: [1536, 512], 3: [2048, 512] };
    b.qp.postRecv(wrs.map((w) => ({ wrId: 10 + w.wrId, sgList: sg(dst, ...recvAt[w.wrId]) })));
    a.qp.postSend(wrs.map((w) => ({ ...w, sendFlags: SendFlags.SIGNALED })));
    const r = await reap(b.recvCq, wrs.length);
    const want = (extra) => (grh ? WcFlags.GRH : 0) | extra;
    assert.deepEqual(r.map((w) => [w.wrId, w.status, w.wcFlags]), [
      [11, WcStatus.SUCCESS, want(0)],
      ...(iwarp ? [] : [[12, WcStatus.SUCCESS, want(WcFlags.WITH_IMM)], [13, WcStatus.SUCCESS, want(WcFlags.WITH_IMM)]]),
    ]);
    assert.equal((await reap(a.sendCq, wrs.length)).length, wrs.length);
    b.qp.postRecv({ wrId: 20, sgList: sg(dst, 0, 64) });
    await Promise.all([a.disconnect(), b.disconnect()]);
    const [f] = await reap(b.recvCq, 1);
    assert.deepEqual([f.wrId, f.status, f.wcFlags], [20, WcStatus.WR_FLUSH_ERR, 0], 'a flushed receive carries no flag');
  });

  test('a disconnect: the receives still posted complete WR_FLUSH_ERR, in order, each once', async (t) => {
    const { a, b, close } = await pair();
    t.after(close);
    const m = b.pd.regMr(Buffer.alloc(256), Access.LOCAL_WRITE);
    b.qp.postRecv([1, 2, 3].map((i) => ({ wrId: i, sgList: sg(m, 64 * i, 64) })));
    // One side disconnects; the other answers with its own rdma_disconnect, which on IB is what
    // moves its QP to ERR (a DREQ alone does not touch the QP; iWARP's close already did). Sync
    // ids: each call returns with its DISCONNECTED (on IB the DREQ side's once the DREP is back).
    await Promise.all([a.disconnect(), b.disconnect()]);
    const wc = await reap(b.recvCq, 3);
    assert.deepEqual(wc.map((w) => [w.wrId, w.status]), [[1, WcStatus.WR_FLUSH_ERR], [2, WcStatus.WR_FLUSH_ERR], [3, WcStatus.WR_FLUSH_ERR]]);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(b.recvCq.poll(4).length, 0, 'no completion twice');
  });
});
