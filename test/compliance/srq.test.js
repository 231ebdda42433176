// Shared receive queues on every device that has them (max_srq > 0): create, query, modify,
// destroy; posting; QPs on an SRQ (their own receive queue refused); many connections taking
// receives from one SRQ, each receive completing once on the QP that took it; the limit event
// (armed, fired once, re-armed); a receive too small for its message (that QP to ERR, the others
// unaffected); the Last WQE Reached event of IB devices; librdmacm's rdma_create_srq family. A
// device without SRQs must say so (max_srq 0) and refuse them (EOPNOTSUPP).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Access, WrOpcode, WcStatus, WcOpcode, WcFlags, QpState, QpAttrMask, QpType, TransportType, PostError, AsyncEventType,
  SrqAttrMask, SrqInitAttrMask, SrqType, DEVICE_SRQ_RESIZE, QpInitAttrMask, QpExSendOps, postRecv as rdmaPostRecv,
  createId, PortSpace,
} from '../../dist/index.js';
import { reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, Cap, recvGrhOf } from '../lib/devices.js';
import { srqFanIn } from '../lib/srq-fan-in.js';

const sg = (mr, off = 0, len = mr.length - off) => [{ addr: mr.addr + off, length: len, lkey: mr.lkey }];

/** RESET → INIT with what every device's rules accept. */
function toInit(qp) {
  qp.modify(
    { qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: 0 },
    QpAttrMask.STATE | QpAttrMask.PKEY_INDEX | QpAttrMask.PORT | QpAttrMask.ACCESS_FLAGS,
  );
}

/** An abort signal after `ms` whose timer keeps the process alive (AbortSignal.timeout's does not). */
function after(ms) {
  const ac = new AbortController();
  setTimeout(() => ac.abort(), ms);
  return ac.signal;
}

/** Every async event queued for `obj` within `ms` (read and acknowledged; others dropped). */
async function eventsFor(ctx, obj, ms = 200) {
  const out = [];
  const t0 = Date.now();
  for (;;) {
    const left = ms - (Date.now() - t0);
    if (left <= 0) return out;
    let ev;
    try {
      ev = await ctx.getAsyncEvent(after(left));
    } catch (e) {
      if (e?.code === 'ABORT_ERR') return out;
      throw e;
    }
    ctx.ackAsyncEvent(ev);
    if (ev.qp === obj || ev.srq === obj || ev.cq === obj) out.push(ev.type);
  }
}

/** The first async event of `type` for `obj`, within `ms`. */
async function eventOf(ctx, type, obj, ms = 3000) {
  const t0 = Date.now();
  for (;;) {
    const left = ms - (Date.now() - t0);
    if (left <= 0) throw new Error(`no async event ${AsyncEventType[type]}`);
    const ev = await ctx.getAsyncEvent(after(left));
    ctx.ackAsyncEvent(ev);
    if (ev.type === type && (ev.qp === obj || ev.srq === obj)) return ev;
  }
}

/** Send `msgs` (Buffers) from client id `c`, signaled, and wait for their completions. */
async function sendAll(c, msgs) {
  const pd = c.pd;
  const mrs = msgs.map((m) => pd.regMr(Buffer.from(m), Access.LOCAL_WRITE));
  c.qp.postSend(mrs.map((mr, i) => ({ wrId: i + 1, opcode: WrOpcode.SEND, sgList: sg(mr), sendFlags: 2 })));
  const wcs = await reap(c.sendCq, msgs.length);
  for (const mr of mrs) mr.dereg();
  return wcs;
}

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  const attr = d.device.open().queryDevice();
  const has = attr.maxSrq > 0;
  const noSrq = has ? 'the device has SRQs' : false;
  const skip = has ? false : 'max_srq 0';

  test('a device without SRQs refuses them', { skip: noSrq }, () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    assert.equal(attr.maxSrqWr, 0);
    assert.throws(() => pd.createSrq({ attr: { maxWr: 4 } }), { code: 'EOPNOTSUPP' });
    pd.dealloc();
  });

  test('create, query, modify, post, destroy; the device limits', { skip }, () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const init = { attr: { maxWr: 10, maxSge: 2 }, srqContext: 'ctx' };
    const srq = pd.createSrq(init);
    const q = srq.query();
    // The device's rounding (rxe: 2^k - 1, siw: 2^k), written back into the init attributes.
    assert.ok(q.maxWr >= 10 && q.maxWr <= 16, `max_wr ${q.maxWr}`);
    assert.equal(init.attr.maxWr, q.maxWr);
    assert.equal(q.maxSge, 2);
    assert.equal(q.srqLimit, 0);
    assert.equal(srq.srqContext, 'ctx');
    assert.throws(() => pd.createSrq({ attr: { maxWr: 0 } }), { code: 'EINVAL' });
    assert.throws(() => pd.createSrq({ attr: { maxWr: attr.maxSrqWr + 1 } }), { code: 'EINVAL' });
    assert.throws(() => pd.createSrq({ attr: { maxWr: 4, maxSge: attr.maxSrqSge + 1 } }), { code: 'EINVAL' });
    assert.throws(() => pd.createSrq({ attr: { maxWr: 4 }, srqType: SrqType.XRC }), { code: 'EOPNOTSUPP' });

    // The limit: above max_wr refused, else armed as given.
    assert.throws(() => srq.modify({ srqLimit: q.maxWr + 1 }, SrqAttrMask.LIMIT), { code: 'EINVAL' });
    srq.modify({ srqLimit: 3 }, SrqAttrMask.LIMIT);
    assert.equal(srq.query().srqLimit, 3);
    assert.throws(() => srq.modify({ srqLimit: 1 }, 0x80), { code: 'EINVAL' }, 'unknown mask bit');

    // Posting: SGEs against max_sge, the queue against max_wr; the WRs before a bad one stay.
    const mr = pd.regMr(Buffer.alloc(256), Access.LOCAL_WRITE);
    const three = [sg(mr, 0, 8)[0], sg(mr, 8, 8)[0], sg(mr, 16, 8)[0]];
    assert.throws(
      () => srq.postRecv([{ wrId: 1, sgList: sg(mr, 0, 8) }, { wrId: 2, sgList: three }]),
      (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1,
    );
    assert.equal(srq.depth, 1);
    srq.postRecv(Array.from({ length: q.maxWr - 1 }, (_, i) => ({ wrId: 10 + i, sgList: sg(mr, 0, 8) })));
    assert.throws(() => srq.postRecv({ wrId: 99, sgList: sg(mr) }), (e) => e instanceof PostError && e.code === 'ENOMEM' && e.badWrIndex === 0);

    // Resize where the device can (rxe: IBV_DEVICE_SRQ_RESIZE), EOPNOTSUPP where not (siw).
    if (attr.deviceCapFlags & DEVICE_SRQ_RESIZE) {
      assert.throws(() => srq.modify({ maxWr: 2 }, SrqAttrMask.MAX_WR), { code: 'EINVAL' }, 'below the limit / the WRs posted');
      srq.modify({ maxWr: 40 }, SrqAttrMask.MAX_WR);
      assert.ok(srq.query().maxWr >= 40);
      srq.postRecv({ wrId: 99, sgList: sg(mr) });
    } else {
      assert.throws(() => srq.modify({ maxWr: 40 }, SrqAttrMask.MAX_WR), { code: 'EOPNOTSUPP' });
    }

    // A QP on the SRQ: no receive queue of its own; the SRQ busy while it lives.
    const cq = ctx.createCq(8);
    const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, srq, cap: { maxSendWr: 1 } });
    assert.equal(qp.srq, srq);
    toInit(qp);
    assert.throws(() => qp.postRecv({ wrId: 1, sgList: sg(mr) }), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 0);
    assert.throws(() => srq.destroy(), { code: 'EBUSY' });
    // Its move to ERR flushes nothing of the SRQ's.
    const posted = srq.depth;
    qp.modify({ qpState: QpState.ERR });
    assert.equal(srq.depth, posted);
    assert.equal(cq.poll(8).length, 0);
    qp.destroy();
    mr.dereg();
    assert.throws(() => pd.dealloc(), { code: 'EBUSY' }, 'the SRQ is in the PD');
    // Destroyed with WRs posted: dropped, no completion anywhere (as rxe and siw).
    srq.destroy();
    assert.equal(cq.poll(8).length, 0);
    assert.throws(() => srq.destroy(), { code: 'EINVAL' });
    assert.throws(() => srq.postRecv({ wrId: 1, sgList: [] }), { code: 'EINVAL' });
    assert.throws(() => pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, srq, cap: {} }), { code: 'EINVAL' }, 'a destroyed SRQ');
    cq.destroy();
    pd.dealloc();
  });

  test('Last WQE Reached: a QP on an SRQ moved to ERR (IB devices; iWARP has no such event)', { skip }, async () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const srq = pd.createSrq({ attr: { maxWr: 4 } });
    const cq = ctx.createCq(4);
    const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, srq, cap: { maxSendWr: 1 } });
    toInit(qp);
    await eventsFor(ctx, qp, 20);
    qp.modify({ qpState: QpState.ERR });
    const evs = await eventsFor(ctx, qp);
    assert.deepEqual(evs, d.transportType === TransportType.IWARP ? [] : [AsyncEventType.QP_LAST_WQE_REACHED]);
    qp.destroy();
    srq.destroy();
    cq.destroy();
    pd.dealloc();
  });

  test('many connections on one SRQ: each receive completes once, on the QP that took it', { skip }, async () => {
    const n = 4;
    const per = 5;
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const recvCq = ctx.createCq(64);
    const srq = pd.createSrq({ attr: { maxWr: n * per } });
    const buf = Buffer.alloc(n * per * 32);
    const mr = pd.regMr(buf, Access.LOCAL_WRITE);
    srq.postRecv(Array.from({ length: n * per }, (_, i) => ({ wrId: 1000 + i, sgList: sg(mr, i * 32, 32) })));
    const f = await srqFanIn({ n, pd, srq, recvCq, sendCq: ctx.createCq(16) });
    try {
      const sends = f.clients.map((c, ci) => sendAll(c, Array.from({ length: per }, (_, k) => `client ${ci} msg ${k}`)));
      for (const wcs of await Promise.all(sends)) for (const wc of wcs) assert.equal(wc.status, WcStatus.SUCCESS);
      const wcs = await reap(recvCq, n * per);
      const qpNums = f.servers.map((s) => s.qp.qpNum);
      const seen = new Set();
      const perClient = new Map();
      const grh = recvGrhOf(d);
      for (const wc of wcs) {
        assert.equal(wc.status, WcStatus.SUCCESS);
        assert.equal(wc.opcode, WcOpcode.RECV);
        if (grh !== null) assert.equal(wc.wcFlags, grh ? WcFlags.GRH : 0, 'IBV_WC_GRH on RoCE (rxe do_complete, SRQ receives too), none on iWARP');
        assert.ok(!seen.has(wc.wrId), `wr ${wc.wrId} completed twice`);
        seen.add(wc.wrId);
        const i = Number(wc.wrId) - 1000;
        const text = buf.toString('latin1', i * 32, i * 32 + wc.byteLen);
        const ci = qpNums.indexOf(wc.qpNum);
        assert.ok(ci >= 0, `qp_num ${wc.qpNum} is a server QP`);
        // The message came over the connection of the QP the completion names, in order.
        const k = perClient.get(ci) ?? 0;
        assert.equal(text, `client ${ci} msg ${k}`);
        perClient.set(ci, k + 1);
      }
      assert.equal(seen.size, n * per);
      assert.equal(srq.depth, 0);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(recvCq.poll(8).length, 0, 'nothing completes twice');
    } finally {
      await f.close();
    }
    // The server QPs went to ERR when their connections closed: the SRQ had nothing left to lose,
    // and every QP is gone, so it can go.
    reapAll(recvCq);
    srq.destroy();
    mr.dereg();
  });

  test('the limit event: armed, fired once when fewer WRs than the limit remain, re-armed', { skip }, async () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const recvCq = ctx.createCq(32);
    const srq = pd.createSrq({ attr: { maxWr: 8 } });
    const mr = pd.regMr(Buffer.alloc(8 * 64), Access.LOCAL_WRITE);
    srq.postRecv(Array.from({ length: 8 }, (_, i) => ({ wrId: i + 1, sgList: sg(mr, i * 64, 64) })));
    srq.modify({ srqLimit: 4 }, SrqAttrMask.LIMIT);
    const f = await srqFanIn({ n: 2, pd, srq, recvCq, sendCq: ctx.createCq(16) });
    try {
      await eventsFor(ctx, srq, 20);
      const [c0, c1] = f.clients;
      await sendAll(c0, ['a', 'b', 'c', 'd']);
      await reap(recvCq, 4);
      assert.deepEqual(await eventsFor(ctx, srq), [], '4 left: not below the limit of 4');
      await sendAll(c1, ['e']);
      await reap(recvCq, 1);
      await eventOf(ctx, AsyncEventType.SRQ_LIMIT_REACHED, srq);
      // rxe sets the limit back to 0, siw keeps it but disarms.
      assert.ok([0, 4].includes(srq.query().srqLimit));
      await sendAll(c0, ['f']);
      await reap(recvCq, 1);
      assert.deepEqual(await eventsFor(ctx, srq), [], 'fired once');
      // Re-armed with 2 left and a limit of 2: the next take leaves 1.
      srq.modify({ srqLimit: 2 }, SrqAttrMask.LIMIT);
      await sendAll(c1, ['g']);
      await reap(recvCq, 1);
      await eventOf(ctx, AsyncEventType.SRQ_LIMIT_REACHED, srq);
      assert.equal(srq.depth, 1);
    } finally {
      await f.close();
    }
    reapAll(recvCq);
    srq.destroy();
    mr.dereg();
  });

  test('a receive too small for its message: that QP to ERR, the others on the SRQ keep working', { skip }, async () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const recvCq = ctx.createCq(32);
    const srq = pd.createSrq({ attr: { maxWr: 8 } });
    const mr = pd.regMr(Buffer.alloc(8 * 64), Access.LOCAL_WRITE);
    // The first receive holds 8 bytes; the others 64.
    srq.postRecv({ wrId: 1, sgList: sg(mr, 0, 8) });
    srq.postRecv(Array.from({ length: 5 }, (_, i) => ({ wrId: 2 + i, sgList: sg(mr, (i + 1) * 64, 64) })));
    const f = await srqFanIn({ n: 2, pd, srq, recvCq, sendCq: ctx.createCq(16) });
    try {
      await eventsFor(ctx, null, 20);
      const [c0, c1] = f.clients;
      const [s0, s1] = f.servers;
      const big = c0.pd.regMr(Buffer.alloc(32, 7), Access.LOCAL_WRITE);
      c0.qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: sg(big), sendFlags: 2 });
      const [bad] = await reap(recvCq, 1);
      assert.deepEqual([bad.wrId, bad.status, bad.qpNum], [1, WcStatus.LOC_LEN_ERR, s0.qp.qpNum]);
      // The sender learns of it: IB, an invalid request NAK fails the Send; iWARP, the Send
      // completed when TCP took it, and the TERMINATE that follows ends the connection.
      const [sent] = await reap(c0.sendCq, 1);
      if (d.transportType !== TransportType.IWARP) assert.equal(sent.status, WcStatus.REM_INV_REQ_ERR);
      for (let t = 0; (s0.qp.state !== QpState.ERR || c0.qp.state !== QpState.ERR) && t < 200; t++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(s0.qp.state, QpState.ERR);
      assert.equal(c0.qp.state, QpState.ERR);
      assert.equal(s1.qp.state, QpState.RTS);
      const evs = await eventsFor(ctx, s0.qp);
      if (d.transportType !== TransportType.IWARP) assert.ok(evs.includes(AsyncEventType.QP_LAST_WQE_REACHED), `events ${evs}`);
      else assert.ok(!evs.includes(AsyncEventType.QP_LAST_WQE_REACHED));
      // The SRQ's other receives are untouched and serve the other connection.
      assert.equal(srq.depth, 5);
      await sendAll(c1, ['one', 'two']);
      const ok = await reap(recvCq, 2);
      assert.deepEqual(ok.map((w) => [w.wrId, w.status, w.qpNum, w.byteLen]), [
        [2, WcStatus.SUCCESS, s1.qp.qpNum, 3],
        [3, WcStatus.SUCCESS, s1.qp.qpNum, 3],
      ]);
      assert.equal(srq.depth, 3);
      big.dereg();
    } finally {
      await f.close();
    }
    reapAll(recvCq);
    srq.destroy();
    mr.dereg();
  });

  test('librdmacm: rdma_create_srq, id.srq, rdma_create_qp on it, rdma_post_recv to it, rdma_destroy_srq', { skip }, async () => {
    const id = createId(null, null, PortSpace.TCP);
    try {
      id.bindAddr({ address: '127.0.0.1', port: 0 });
      assert.equal(id.srq, null);
      assert.throws(() => id.createSrqEx({ compMask: SrqInitAttrMask.PD, attr: { maxWr: 4 } }), { code: 'EINVAL' }, 'no TYPE in comp_mask');
      assert.throws(() => id.createSrqEx({ compMask: SrqInitAttrMask.TYPE | SrqInitAttrMask.CQ, attr: { maxWr: 4 } }), { code: 'EOPNOTSUPP' });
      const init = { attr: { maxWr: 6 } };
      const srq = id.createSrq(null, init);
      assert.equal(id.srq, srq);
      assert.ok(init.attr.maxWr >= 6, 'written back');
      assert.throws(() => id.createSrq(null, { attr: { maxWr: 4 } }), { code: 'EINVAL' }, 'one SRQ per id');
      assert.throws(() => id.createQpEx({ compMask: QpInitAttrMask.PD | QpInitAttrMask.CREATE_FLAGS, createFlags: 1, cap: {} }), { code: 'EOPNOTSUPP' });
      assert.throws(() => id.createQpEx({ compMask: QpInitAttrMask.SEND_OPS_FLAGS, sendOpsFlags: QpExSendOps.WITH_FLUSH, cap: {} }), { code: 'EOPNOTSUPP' }, 'no device has FLUSH');
      const qp = id.createQpEx({ compMask: QpInitAttrMask.PD, pd: srq.pd, cap: { maxSendWr: 2, maxRecvWr: 2 } });
      assert.equal(qp.srq, srq, 'the id\'s SRQ');
      const mr = srq.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
      rdmaPostRecv(id, 5, mr.addr, 16, mr);
      assert.equal(srq.depth, 1, 'rdma_post_recv goes to the SRQ');
      assert.throws(() => id.destroySrq(), { code: 'EBUSY' });
      assert.equal(id.srq, srq);
      id.destroyQp();
      id.destroySrq();
      assert.equal(id.srq, null);
      mr.dereg();
    } finally {
      await id.destroy();
    }
  });
});

/** Drop whatever completions the teardown left on `cq`. */
function reapAll(cq) {
  while (cq.poll(16).length > 0);
}
