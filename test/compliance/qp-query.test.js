// ibv_query_qp on every device that makes RC QPs: every attribute of struct ibv_qp_attr is
// reported (zero for what was never set), as each device's kernel driver fills them — rxe
// (rxe_qp_to_attr) the attributes set and the PSNs its requester and responder are at, siw
// (siw_query_qp) only the state, the queue sizes, the interface's path MTU, its fixed access
// flags and the read queue sizes (IRD as max_rd_atomic, ORD as max_dest_rd_atomic).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QpState, QpAttrMask, TransportType, Access, WrOpcode, SendFlags, WcStatus, RdmaError } from '../../dist/index.js';
import { getProvider } from '../../dist/verbs/provider.js';
import { rcPair, reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;

/** Every field of struct ibv_qp_attr that every device reports. */
const FIELDS = ['qpState', 'curQpState', 'pathMtu', 'pathMigState', 'qkey', 'rqPsn', 'sqPsn', 'destQpNum', 'qpAccessFlags', 'cap', 'ahAttr', 'pkeyIndex', 'enSqdAsyncNotify', 'sqDraining', 'maxRdAtomic', 'maxDestRdAtomic', 'minRnrTimer', 'portNum', 'timeout', 'retryCnt', 'rnrRetry'];

/** `ib_mtu_int_to_enum`. */
const mtuEnum = (mtu) => (mtu >= 4096 ? 5 : mtu >= 2048 ? 4 : mtu >= 1024 ? 3 : mtu >= 512 ? 2 : 1);

forEachDevice([Cap.RC], (d) => {
  const native = getProvider(d.provider)?.native === true;
  const iwarp = d.transportType === TransportType.IWARP;

  test('ibv_query_qp: every attribute present, zero until set; the init attributes; EINVAL once destroyed', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4);
    const qp = pd.createQp({ qpType: 2, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 }, qpContext: 'ctx' });
    let a = qp.query();
    for (const k of FIELDS) assert.notEqual(a[k], undefined, k);
    assert.equal(a.qpState, QpState.RESET);
    assert.equal(a.destQpNum, 0);
    assert.equal(a.sqPsn, 0);
    assert.deepEqual(a.cap.maxSendWr, qp.cap.maxSendWr);
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.REMOTE_WRITE }, QpAttrMask.STATE | QpAttrMask.PKEY_INDEX | QpAttrMask.PORT | QpAttrMask.ACCESS_FLAGS);
    a = qp.query();
    assert.equal(a.qpState, QpState.INIT);
    if (iwarp && !native) {
      // siw_query_qp: its fixed rights, the interface's MTU, no port
      assert.equal(a.qpAccessFlags, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
      assert.equal(a.pathMtu, mtuEnum(d.device.info.mtu));
      assert.equal(a.portNum, 0);
      assert.equal(a.cap.maxInlineData, 80, 'SIW_MAX_INLINE');
    } else {
      assert.equal(a.qpAccessFlags, Access.REMOTE_WRITE);
      assert.equal(a.portNum, 1);
      assert.equal(a.pkeyIndex, 0);
    }
    const init = qp.queryInitAttr();
    assert.deepEqual([init.qpType, init.sendCq, init.recvCq, init.qpContext, init.sqSigAll], [2, cq, cq, 'ctx', false]);
    qp.destroy();
    assert.throws(() => qp.query(), code('EINVAL'));
    cq.destroy();
    pd.dealloc();
  });
});

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  const native = getProvider(d.provider)?.native === true;
  const iwarp = d.transportType === TransportType.IWARP;

  test('ibv_query_qp on a connection: rxe reports the peer QP and the PSNs it is at (one SEND moves each by one); siw its read queue sizes and zeros', async () => {
    const p = await rcPair({ ird: 2, ord: 2 });
    const qa = p.a.qp;
    const qb = p.b.qp;
    const a0 = qa.query();
    const b0 = qb.query();
    assert.equal(a0.qpState, QpState.RTS);
    const mr = p.a.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    const rmr = p.b.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    qb.postRecv({ wrId: 1, sgList: [{ addr: rmr.addr, length: 16, lkey: rmr.lkey }] });
    qa.postSend({ wrId: 2, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: 16, lkey: mr.lkey }] });
    assert.equal((await reap(qa.sendCq, 1))[0].status, WcStatus.SUCCESS);
    assert.equal((await reap(qb.recvCq, 1))[0].status, WcStatus.SUCCESS);
    const a1 = qa.query();
    const b1 = qb.query();
    if (iwarp && !native) {
      assert.deepEqual([a1.destQpNum, a1.sqPsn, a1.rqPsn, a1.portNum, a1.timeout], [0, 0, 0, 0, 0], 'siw fills none of these');
      assert.deepEqual([a1.maxRdAtomic, a1.maxDestRdAtomic], [qa.ird, qa.ord], 'IRD as max_rd_atomic, ORD as max_dest_rd_atomic (siw_query_qp)');
    } else {
      assert.equal(a1.destQpNum, qb.qpNum);
      assert.equal(b1.destQpNum, qa.qpNum);
      assert.equal(a1.sqPsn, (a0.sqPsn + 1) & 0xffffff, 'the requester moved one PSN');
      assert.equal(b1.rqPsn, (b0.rqPsn + 1) & 0xffffff, 'the responder expects the next PSN');
      assert.equal(b1.sqPsn, a1.rqPsn, 'nothing sent the other way: still the first PSN a expects');
      assert.equal(a1.sqPsn, b1.rqPsn, 'what one sends next is what the other expects');
      assert.equal(a1.maxRdAtomic, 2);
      assert.equal(b1.maxDestRdAtomic, 2);
      assert.equal(a1.sqDraining, 0);
    }
    mr.dereg();
    rmr.dereg();
    await p.close();
  });
});
