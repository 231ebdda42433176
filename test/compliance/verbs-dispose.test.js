// Verbs objects as `using` meets them, on every device: each one is Disposable, disposal in
// reverse order of creation (ibv order: AH/MW/MR/QP before SRQ/CQ before channel and PD, the PD
// before the context) tears everything down, disposing a destroyed object does nothing, and a
// disposal the verbs refuse (a PD with live children, a CQ a QP still uses) throws as the destroy
// call does and leaves the object alive. A closed context makes nothing more (EBADF) until the
// next open; detached memory does not register (EFAULT).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Access, MwType, QpType, QpExSendOps, QpInitAttrMask, RdmaError, WC_STANDARD_FLAGS, qpToQpEx } from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;

/** What `using` does at the end of a scope: dispose in reverse order, every one even if one throws. */
function endScope(stack) {
  const errors = [];
  for (const r of stack.reverse()) {
    try {
      r[Symbol.dispose]();
    } catch (e) {
      errors.push(e);
    }
  }
  return errors;
}

/** Every kind of verbs object the device makes, in an order `using` declarations could take. */
function makeAll(d, ctx) {
  const made = [];
  const add = (name, o) => {
    made.push(o);
    return o;
  };
  const a = ctx.queryDevice();
  const ch = add('channel', ctx.createCompChannel());
  const cq = add('cq', ctx.createCq(8, ch));
  let cqx = null;
  try {
    cqx = ctx.createCqEx({ cqe: 4, wcFlags: WC_STANDARD_FLAGS });
    add('cqEx', cqx);
  } catch (e) {
    if (e?.code !== 'EOPNOTSUPP') throw e;
  }
  const pd = add('pd', ctx.allocPd());
  const srq = a.maxSrq > 0 ? add('srq', pd.createSrq({ attr: { maxWr: 4 } })) : null;
  const mr = add('mr', pd.regMr(Buffer.alloc(4096), Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.MW_BIND));
  const mw = a.maxMw > 0 ? add('mw', pd.allocMw(MwType.TYPE_2)) : null;
  const type = d.caps.has(Cap.RC) ? QpType.RC : QpType.UD;
  const qp = add('qp', pd.createQp({ qpType: type, sendCq: cq, recvCq: cqx?.cq ?? cq, srq, cap: { maxSendWr: 2, maxRecvWr: 2 } }));
  let qpx = null;
  try {
    const q = ctx.createQpEx({ qpType: type, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 }, compMask: QpInitAttrMask.PD | QpInitAttrMask.SEND_OPS_FLAGS, pd, sendOpsFlags: QpExSendOps.WITH_SEND });
    qpx = add('qpEx', qpToQpEx(q));
  } catch (e) {
    if (e?.code !== 'EOPNOTSUPP') throw e;
  }
  let ah = null;
  if (d.caps.has(Cap.AH)) {
    const grh = { dgid: ctx.queryGid(1, 0), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 };
    ah = add('ah', pd.createAh({ isGlobal: true, portNum: 1, grh }));
  }
  return { made, ch, cq, cqx, pd, srq, mr, mw, qp, qpx, ah };
}

forEachDevice([], (d) => {
  test('every verbs object is Disposable; reverse-order disposal tears all down; a second disposal does nothing', () => {
    const ctx = d.device.open();
    const o = makeAll(d, ctx);
    for (const x of [ctx, ...o.made]) assert.equal(typeof x[Symbol.dispose], 'function', x.constructor.name);
    assert.deepEqual(endScope([...o.made]), []);
    assert.ok(o.ch.destroyed && o.cq.destroyed && o.pd.deallocated && !o.mr.registered && o.qp.state !== undefined);
    assert.ok(!ctx._qps.has(o.qp.qpNum), 'the QP left the context');
    if (o.srq) assert.ok(o.srq.destroyed);
    if (o.ah) assert.ok(o.ah.destroyed);
    if (o.cqx) assert.ok(o.cqx.cq.destroyed);
    assert.deepEqual(endScope([...o.made]), [], 'disposing destroyed objects is harmless');
    // Destroyed by hand first, disposed afterwards: nothing happens either.
    const pd = ctx.allocPd();
    pd.dealloc();
    pd[Symbol.dispose]();
  });

  test('a refused disposal throws what the destroy call throws and leaves the object alive', () => {
    const ctx = d.device.open();
    const o = makeAll(d, ctx);
    assert.throws(() => o.pd[Symbol.dispose](), code('EBUSY'), 'ibv_dealloc_pd with live children');
    assert.ok(!o.pd.deallocated);
    assert.throws(() => o.cq[Symbol.dispose](), code('EBUSY'), 'ibv_destroy_cq while a QP uses it');
    assert.ok(!o.cq.destroyed);
    assert.throws(() => o.ch[Symbol.dispose](), code('EBUSY'), 'ibv_destroy_comp_channel while a CQ uses it');
    // The wrong order (creation order) reports every refusal and destroys what it can.
    const errors = endScope([...o.made].reverse());
    assert.ok(errors.length > 0 && errors.every((e) => e instanceof RdmaError && e.code === 'EBUSY'), errors.map((e) => e.message).join('; '));
    assert.ok(o.qp && !ctx._qps.has(o.qp.qpNum), 'the QP is gone');
    assert.deepEqual(endScope([...o.made]), [], 'the rest goes in the right order');
    assert.ok(o.pd.deallocated && o.cq.destroyed && o.ch.destroyed);
  });

  test('a context closed by every opener makes nothing (EBADF) until the next open; its objects can still be destroyed', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(2);
    const a = ctx.queryDevice();
    // Other openers (this process's CM, the harness) hold the singleton too: one close per open.
    const again = d.device.open();
    assert.equal(again, ctx, 'one context per device per process');
    again[Symbol.dispose]();
    assert.equal(ctx.closed, false, 'still open: an open is not matched yet');
    let opens = 0;
    try {
      while (!ctx.closed) {
        ctx[Symbol.dispose]();
        opens++;
      }
      ctx.close();
      assert.equal(ctx.closed, true, 'closing a closed context does nothing');
      const calls = {
        ibv_alloc_pd: () => ctx.allocPd(),
        ibv_create_cq: () => ctx.createCq(1),
        ibv_create_comp_channel: () => ctx.createCompChannel(),
        ibv_create_cq_ex: () => ctx.createCqEx({ cqe: 1 }),
        ibv_create_qp_ex: () => ctx.createQpEx({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: {}, compMask: QpInitAttrMask.PD, pd }),
        ibv_query_device: () => ctx.queryDevice(),
        ibv_query_device_ex: () => ctx.queryDeviceEx(),
        ibv_query_port: () => ctx.queryPort(1),
        ibv_reg_mr: () => pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE),
        ibv_create_qp: () => pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } }),
        ibv_create_srq: () => pd.createSrq({ attr: { maxWr: 1 } }),
        ibv_alloc_mw: () => pd.allocMw(MwType.TYPE_2),
        ibv_create_ah: () => pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: new Uint8Array(16), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } }),
      };
      for (const [op, call] of Object.entries(calls)) {
        if (op === 'ibv_alloc_mw' && a.maxMw === 0) continue;
        if (op === 'ibv_create_srq' && a.maxSrq === 0) continue;
        if (op === 'ibv_create_ah' && !d.caps.has(Cap.AH)) continue;
        assert.throws(call, (e) => e instanceof RdmaError && e.code === 'EBADF' && e.errno === 9 && e.op === op, op);
      }
      cq.destroy();
      pd.dealloc();
    } finally {
      for (let i = 0; i < opens; i++) assert.equal(d.device.open(), ctx, 'the same context, open again');
    }
    assert.equal(ctx.closed, false);
    ctx.allocPd().dealloc();
  });

  test('detached memory does not register (EFAULT); an empty buffer stays EINVAL', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const whole = new ArrayBuffer(64);
    const view = new Uint8Array(new ArrayBuffer(64), 8, 16);
    structuredClone(whole, { transfer: [whole] });
    structuredClone(view.buffer, { transfer: [view.buffer] });
    for (const mem of [whole, view]) {
      assert.throws(() => pd.regMr(mem, Access.LOCAL_WRITE), (e) => e instanceof RdmaError && e.code === 'EFAULT' && e.errno === 14 && /detached/.test(e.message));
    }
    assert.throws(() => pd.regMr(new ArrayBuffer(0), Access.LOCAL_WRITE), code('EINVAL'));
    pd[Symbol.dispose]();
  });
});
