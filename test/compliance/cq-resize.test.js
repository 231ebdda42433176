// ibv_resize_cq on every device that makes RC QPs, as the device's kernel driver answers it: the
// soft RoCE device resizes (rxe_resize_cq: EINVAL below one entry, above max_cqe or below the
// completions queued; the queued ones kept in order, room for more afterwards); siw has no resize
// (EOPNOTSUPP, rdma-core's default op), nor has the native backend's addon.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QpState, QpAttrMask, WcStatus, TransportType, Access, RdmaError, WrOpcode } from '../../dist/index.js';
import { getProvider } from '../../dist/verbs/provider.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;

/** Whether the device under test resizes CQs: the soft devices of IB transport (rxe) do. */
const resizes = (d) => d.transportType === TransportType.IB && getProvider(d.provider)?.native !== true;

forEachDevice([Cap.RC], (d) => {
  test('ibv_resize_cq: the device resizes as its kernel driver, or refuses with EOPNOTSUPP and keeps the CQ', async () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4);
    const size = cq.cqe;
    if (!resizes(d)) {
      assert.throws(() => cq.resize(64), code('EOPNOTSUPP'));
      assert.equal(cq.cqe, size, 'unchanged');
      cq.destroy();
      pd.dealloc();
      return;
    }
    assert.throws(() => cq.resize(0), code('EINVAL'), 'no entries');
    assert.throws(() => cq.resize(ctx.queryDevice().maxCqe + 1), code('EINVAL'), 'above max_cqe');
    // Three completions queued: receives flushed by the QP's move to ERR.
    const qp = pd.createQp({ qpType: 2, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 3 } });
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: 0 }, QpAttrMask.STATE | QpAttrMask.PKEY_INDEX | QpAttrMask.PORT | QpAttrMask.ACCESS_FLAGS);
    const mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    for (let i = 1; i <= 3; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
    qp.modify({ qpState: QpState.ERR });
    assert.equal(cq.pending, 3);
    assert.throws(() => cq.resize(2), code('EINVAL'), 'below the completions queued');
    assert.equal(cq.cqe, size, 'a refused resize changes nothing');
    cq.resize(3);
    assert.ok(cq.cqe >= 3, `cqe ${cq.cqe}`);
    cq.resize(40);
    assert.ok(cq.cqe >= 40, `cqe ${cq.cqe}`);
    // Room beyond the old size: 20 sends posted in ERR flush at once into the CQ, no overflow.
    for (let i = 0; i < 20; i++) qp.postSend({ wrId: 100 + i, opcode: WrOpcode.SEND, sgList: [] });
    assert.equal(cq.overflowed, false);
    const wc = cq.poll(64);
    assert.deepEqual(wc.slice(0, 3).map((w) => [w.wrId, w.status]), [[1, WcStatus.WR_FLUSH_ERR], [2, WcStatus.WR_FLUSH_ERR], [3, WcStatus.WR_FLUSH_ERR]], 'the queued completions kept, in order');
    assert.equal(wc.length, 23);
    assert.deepEqual(wc.slice(3).map((w) => w.wrId), Array.from({ length: 20 }, (_, i) => 100 + i));
    qp.destroy();
    mr.dereg();
    cq.destroy();
    assert.throws(() => cq.resize(8), code('EINVAL'), 'destroyed');
    pd.dealloc();
  });
});

forEachDevice([Cap.RC], (d) => {
  test('a CQ asked for n entries holds every completion of a QP asked for n WRs: the device rounds both queues alike (siw: to a power of two; rxe: one less than the power of two above)', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    for (let n = 1; n <= 33; n++) {
      const cq = ctx.createCq(n);
      const qp = pd.createQp({ qpType: 2, sendCq: cq, recvCq: cq, cap: { maxSendWr: n, maxRecvWr: n } });
      assert.ok(cq.cqe >= qp.cap.maxSendWr && cq.cqe >= qp.cap.maxRecvWr, `n ${n}: cqe ${cq.cqe}, QP ${qp.cap.maxSendWr} send / ${qp.cap.maxRecvWr} recv WRs`);
      qp.destroy();
      cq.destroy();
    }
    pd.dealloc();
  });
});
