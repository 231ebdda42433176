// The extended verbs allocate nothing per work request or completion once warmed up: the builder
// refills the work-request objects of its earlier batches (and their SGE and operand objects),
// and an extended CQ copies every completion into the one Wc object it keeps. Run on the soft
// RoCE device's loopback UD QPs (the extended verbs are transport-neutral).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lib, loDevice, udQp, ahTo, v4GidIndex } from '../../lib/roce.js';

const { Access, SendFlags, QpType, QpState, Errno, WC_STANDARD_FLAGS, QpExSendOps, QpInitAttrMask, qpToQpEx } = lib;

test('the builder reuses its work requests and the extended CQ its completion object', async () => {
  const ctx = loDevice().open();
  const pd = ctx.allocPd();
  const cqx = ctx.createCqEx({ cqe: 64, wcFlags: WC_STANDARD_FLAGS });
  const rx = udQp(pd, cqx.cq, 0x22);
  const tx = ctx.createQpEx({ qpType: QpType.UD, sendCq: cqx.cq, recvCq: cqx.cq, cap: { maxSendWr: 8, maxRecvWr: 8, maxSendSge: 2, maxRecvSge: 2 }, pd,
    compMask: QpInitAttrMask.PD | QpInitAttrMask.SEND_OPS_FLAGS, sendOpsFlags: QpExSendOps.WITH_SEND });
  tx.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 0x22 });
  tx.modify({ qpState: QpState.RTR });
  tx.modify({ qpState: QpState.RTS, sqPsn: 0 });
  const gi = v4GidIndex(ctx);
  const ah = ahTo(pd, ctx.queryGid(1, gi), gi);
  const mr = pd.regMr(Buffer.alloc(1024), Access.LOCAL_WRITE);
  const x = qpToQpEx(tx);
  const batch = (n, base) => {
    x.wrStart();
    x.wrFlags = SendFlags.SIGNALED;
    for (let i = 0; i < n; i++) {
      x.wrId = base + i;
      x.wrSend();
      x.wrSetUdAddr(ah, rx.qpNum, 0x22);
      x.wrSetSgeList([{ addr: mr.addr, length: 4, lkey: mr.lkey }]);
    }
    return x.wrComplete();
  };
  const seen = new Set();
  const drain = async (n) => {
    const ids = [];
    const end = Date.now() + 3000;
    while (ids.length < n && Date.now() < end) {
      if (cqx.startPoll() === 0) {
        do {
          ids.push(cqx.wrId);
          seen.add(cqx._wc);
        } while (cqx.nextPoll() === 0);
        cqx.endPoll();
      } else await new Promise((r) => setTimeout(r, 2));
    }
    return ids;
  };
  for (let round = 0; round < 3; round++) {
    rx.postRecv([0, 1, 2].map((i) => ({ wrId: 100 + i, sgList: [{ addr: mr.addr + 64 + i * 128, length: 128, lkey: mr.lkey }] })));
    assert.equal(batch(3, round * 10), 0, x.lastError?.message);
    const ids = await drain(6);
    assert.deepEqual(ids.filter((id) => id < 100).sort((p, q) => p - q), [round * 10, round * 10 + 1, round * 10 + 2]);
  }
  const wrs = x._wrs;
  const objs = wrs.map((w) => [w, w.own[0], w.udOp]);
  assert.equal(wrs.length, 3, 'as many work-request objects as the largest batch');
  assert.equal(seen.size, 1, 'one completion object for every completion');
  assert.equal(batch(2, 50), 0);
  assert.equal(x._wrs.length, 3);
  x._wrs.forEach((w, i) => assert.deepEqual([w, w.own[0], w.udOp], objs[i], 'the same objects refilled'));
  await drain(2);
  // A UD QP built for SEND only: SEND_WITH_IMM is EOPNOTSUPP, sticky until wrStart.
  x.wrStart();
  x.wrSendImm(1);
  x.wrSend();
  assert.equal(x.wrComplete(), Errno.EOPNOTSUPP);
  assert.equal(x.lastError.badWrIndex, 0);
  assert.equal(x.wrComplete(), Errno.EINVAL, 'wr_complete without wr_start');
  tx.destroy();
  rx.destroy();
  ah.destroy();
  mr.dereg();
  cqx.destroy();
  pd.dealloc();
});
