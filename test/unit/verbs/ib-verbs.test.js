// The IB-complete parts of the verbs layer, against a fake provider whose device follows the IB
// rules (a RoCE-like device: transport IB, Ethernet link layer, GID and P_Key tables, AHs,
// multicast, UD QPs) and against the siw-like fake device: GID/P_Key queries, address handles,
// the per-QP-type modify table, UD and immediate fields of work requests and completions,
// multicast attach/detach, provider-driven MR access rights.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LO, dev, code } from '../../lib/fake-provider.js';
import { registerProvider } from '../../../dist/verbs/provider.js';
import { getDeviceList as deviceList, LinkLayer, PortState, Mtu, AtomicCap } from '../../../dist/verbs/device.js';
import { Qp } from '../../../dist/verbs/qp.js';
import { QpAttrMask, qpAttrMaskOf, modifyQpProblem, qpTransitionAllowed, QP_STATE_TABLE } from '../../../dist/verbs/qp-attr.js';
import { Ah } from '../../../dist/verbs/ah.js';
import { siwDeviceAttr, siwPortAttr } from '../../../dist/transport/iwarp/attrs.js';
import { TransportType, QpType, QpState, WrOpcode, WcOpcode, WcFlags, WcStatus, GidType, Access } from '../../../dist/verbs/types.js';
import { PostError, RdmaError } from '../../../dist/errors.js';
const M = QpAttrMask;

/** A minimal software QP: queued sends are taken at once into `sent`. */
class TestQp extends Qp {
  constructor(ctx, pd, qpNum, init, cap) {
    super(ctx, pd, qpNum, init, cap);
    this.sent = [];
  }
  _stateChanged() {}
  _sqKick() {
    for (let w = this.sq.shift(); w !== undefined; w = this.sq.shift()) this.sent.push(w);
  }
  _destroyed() {}
  _checkSendWr(wr) {
    return wr.opcode === WrOpcode.RDMA_READ && !wr.rdma ? 'no rdma' : null;
  }
  _copyInline() {
    return Buffer.alloc(0);
  }
  /** Deliver one receive with `info` (what a transport's receive path does). */
  deliver(len, flags, info) {
    const w = this.rq.shift();
    this.completeRecv(w, WcStatus.SUCCESS, len, flags, 0, false, info);
  }
}

const GID0 = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 77]);
const attached = [];
const destroyedAhs = [];

const IB = {
  name: 'fake_ib0',
  provider: 'fakeib',
  transport: TransportType.IB,
  ifname: 'ib0',
  addresses: [{ address: '192.0.2.77', family: 'IPv4', netmask: '255.255.255.0' }],
  nodeGuid: 0x0200_0000_0077_0000n,
  mtu: 1500,
  mac: '02:00:00:00:00:77',
  caps: { maxAh: 2 },
};

registerProvider({
  name: 'fakeib',
  listDevices: () => [IB],
  queryDevice: (info, part) => ({ ...siwDeviceAttr(info, part), vendorId: 0x1, atomicCap: AtomicCap.HCA, maxAh: 100, maxMcastGrp: 8, maxMcastQpAttach: 4 }),
  queryPort: (info, port) => ({ ...siwPortAttr(info, port), gidTblLen: 2, pkeyTblLen: 1, maxMtu: Mtu.MTU_4096, activeMtu: Mtu.MTU_1024, state: PortState.ACTIVE }),
  queryGid: (_info, _port, index) => (index === 0 ? GID0 : new Uint8Array(16)),
  queryGidType: () => GidType.ROCE_V2,
  queryPkey: () => 0xffff,
  accessMask: () => Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC,
  createQp: (ctx, pd, attr) => new TestQp(ctx, pd, ctx._allocQpNum(), attr, { maxSendWr: 8, maxRecvWr: 8, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 0, ...attr.cap }),
  createAh: (_ctx, _pd, attr) => {
    if (!attr.isGlobal) throw new RdmaError('EINVAL', { op: 'ibv_create_ah', detail: 'no GRH' });
    return { dst: `gid ${attr.grh.dgid[15]}` };
  },
  destroyAh: (_ctx, data) => destroyedAhs.push(data),
  attachMcast: (qp, gid, lid) => attached.push({ qp: qp.qpNum, gid, lid }),
  detachMcast: (qp, gid) => {
    const k = attached.findIndex((a) => a.qp === qp.qpNum && a.gid.every((b, i) => b === gid[i]));
    if (k < 0) throw new RdmaError('EINVAL', { op: 'ibv_detach_mcast', detail: 'not attached' });
    attached.splice(k, 1);
  },
});

function ibDev() {
  const d = deviceList().find((x) => x.name === 'fake_ib0');
  assert.ok(d);
  return d;
}

function setup(qpType = QpType.UD) {
  const ctx = ibDev().open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(16);
  const qp = pd.createQp({ qpType, sendCq: cq, recvCq: cq, cap: { maxSendWr: 8, maxRecvWr: 8 } });
  return { ctx, pd, cq, qp };
}

const grhAh = (dgid = GID0) => ({ isGlobal: true, portNum: 1, grh: { dgid, flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } });

test('GID and P_Key tables: provider values, range checks, copies', () => {
  const ctx = ibDev().open();
  const g = ctx.queryGid(1, 0);
  assert.deepEqual([...g], [...GID0]);
  g[15] = 1;
  assert.equal(ctx.queryGid(1, 0)[15], 77, 'a copy each time');
  assert.deepEqual([...ctx.queryGid(1, 1)], new Array(16).fill(0));
  assert.throws(() => ctx.queryGid(1, 2), code('EINVAL'));
  assert.throws(() => ctx.queryGid(2, 0), code('EINVAL'));
  assert.throws(() => ctx.queryGid(1, -1), code('EINVAL'));
  assert.equal(ctx.queryGidType(1, 0), GidType.ROCE_V2);
  assert.equal(ctx.queryPkey(1, 0), 0xffff);
  assert.throws(() => ctx.queryPkey(1, 1), code('EINVAL'));
  const p = ctx.queryPort(1);
  assert.equal(p.gidTblLen, 2);
  assert.equal(p.pkeyTblLen, 1);
  assert.equal(p.linkLayer, LinkLayer.ETHERNET);
  assert.equal(ctx.queryDevice().maxAh, 2, 'info.caps over the provider attributes');

  // the siw-like device: one GID (the MAC), no P_Key table
  const lo = dev(LO).open();
  assert.equal(lo.queryGid(1, 0).length, 16);
  assert.throws(() => lo.queryGid(1, 1), code('EINVAL'));
  assert.throws(() => lo.queryPkey(1, 0), code('EINVAL'));
  assert.equal(lo.queryGidType(1, 0), GidType.ROCE_V2);
});

test('address handles: shape checks, provider checks, limits, PD busy, destroy', () => {
  const ctx = ibDev().open();
  const pd = ctx.allocPd();
  const bad = [
    { isGlobal: true, portNum: 1 },
    { isGlobal: true, portNum: 1, grh: { ...grhAh().grh, dgid: new Uint8Array(4) } },
    { isGlobal: true, portNum: 1, grh: { ...grhAh().grh, flowLabel: 1 << 20 } },
    { ...grhAh(), portNum: 0 },
    { ...grhAh(), sl: 16 },
    { portNum: 1 },
    null,
  ];
  for (const a of bad) assert.throws(() => pd.createAh(a), code('EINVAL'), JSON.stringify(a));
  assert.throws(() => pd.createAh({ ...grhAh(), portNum: 2 }), code('EINVAL'), 'no port 2');
  assert.throws(() => pd.createAh({ isGlobal: false, portNum: 1, dlid: 3 }), code('EINVAL'), 'the provider refuses: no GRH');

  const dgid = Uint8Array.from(GID0);
  const ah = pd.createAh(grhAh(dgid));
  assert.ok(ah instanceof Ah);
  assert.equal(ah.pd, pd);
  assert.deepEqual(ah._provider, { dst: 'gid 77' });
  dgid[15] = 9;
  assert.equal(ah.attr.grh.dgid[15], 77, 'the AH keeps a copy of the GID');
  const ah2 = pd.createAh(grhAh());
  assert.throws(() => pd.createAh(grhAh()), code('ENOMEM'), 'maxAh 2');
  assert.throws(() => pd.dealloc(), code('EBUSY'));
  ah.destroy();
  assert.deepEqual(destroyedAhs.at(-1), { dst: 'gid 77' });
  assert.throws(() => ah.destroy(), code('EINVAL'));
  ah2.destroy();
  pd.dealloc();
  assert.throws(() => pd.createAh(grhAh()), code('EINVAL'), 'PD deallocated');

  // siw has no address handles
  const lpd = dev(LO).open().allocPd();
  assert.throws(() => lpd.createAh(grhAh()), code('EOPNOTSUPP'));
  lpd.dealloc();
});

test('modify table: UD RESET->INIT->RTR->RTS needs exactly its attributes', () => {
  const { qp } = setup(QpType.UD);
  assert.throws(() => qp.modify({ qpState: QpState.INIT }), code('EINVAL'), 'PKEY_INDEX|PORT|QKEY required');
  assert.throws(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 0x11, qpAccessFlags: 0 }), code('EINVAL'), 'UD takes no access flags');
  assert.throws(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 1, portNum: 1, qkey: 0x11 }), code('EINVAL'), 'P_Key index beyond the table');
  assert.throws(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 2, qkey: 0x11 }), code('EINVAL'), 'no port 2');
  assert.equal(qp.state, QpState.RESET, 'failed modifies change nothing');
  assert.equal(qp.query().qkey, 0, 'zero until set, as the kernel reports it');
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 0x01234567 });
  assert.equal(qp.state, QpState.INIT);
  assert.equal(qp.query().qkey, 0x01234567);
  qp.modify({ qkey: 0x22 }); // INIT -> INIT may change the Q_Key
  assert.equal(qp.query().qkey, 0x22);
  qp.modify({ qpState: QpState.RTR }, M.STATE);
  assert.throws(() => qp.modify({ qpState: QpState.RTS }, M.STATE), code('EINVAL'), 'SQ_PSN required');
  assert.throws(() => qp.modify({ qpState: QpState.RTS, sqPsn: 1 << 24 }), code('EINVAL'), 'PSN is 24 bits');
  qp.modify({ qpState: QpState.RTS, sqPsn: 0x123456 });
  const a = qp.query();
  assert.equal(a.qpState, QpState.RTS);
  assert.equal(a.sqPsn, 0x123456);
  assert.equal(a.portNum, 1);
  assert.equal(a.pkeyIndex, 0);
  qp.modify({ qpState: QpState.RTS, curQpState: QpState.RTS, qkey: 5 }, M.STATE | M.CUR_STATE | M.QKEY);
  assert.throws(() => qp.modify({ qpState: QpState.RTS, curQpState: QpState.RTR }, M.STATE | M.CUR_STATE), code('EINVAL'), 'wrong cur_qp_state');
  assert.throws(() => qp.modify({ qpState: QpState.INIT }), code('EINVAL'), 'RTS -> INIT');
  qp.modify({ qpState: QpState.ERR });
  qp.modify({ qpState: QpState.RESET });
  assert.equal(qp.state, QpState.RESET);
});

test('modify table: RC needs AV, path MTU, dest QPN, PSNs, RD atomics and timers', () => {
  const { qp } = setup(QpType.RC);
  assert.throws(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 1 }), code('EINVAL'), 'RC takes no Q_Key');
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.REMOTE_READ | Access.REMOTE_WRITE });
  assert.throws(() => qp.modify({ qpState: QpState.INIT, curQpState: QpState.INIT }, M.STATE | M.CUR_STATE), code('EINVAL'), 'CUR_STATE not in INIT');
  const rtr = { qpState: QpState.RTR, ahAttr: grhAh(), pathMtu: Mtu.MTU_1024, destQpNum: 0x77, rqPsn: 100, maxDestRdAtomic: 4, minRnrTimer: 12 };
  for (const k of ['ahAttr', 'pathMtu', 'destQpNum', 'rqPsn', 'maxDestRdAtomic', 'minRnrTimer']) {
    const a = { ...rtr };
    delete a[k];
    assert.throws(() => qp.modify(a), code('EINVAL'), `INIT -> RTR without ${k}`);
  }
  assert.throws(() => qp.modify({ ...rtr, pathMtu: 6 }), code('EINVAL'), 'path MTU enum 1..5');
  assert.throws(() => qp.modify({ ...rtr, maxDestRdAtomic: 129 }), code('EINVAL'), 'IRD above max_qp_rd_atom');
  assert.throws(() => qp.modify({ ...rtr, ahAttr: { ...grhAh(), portNum: 3 } }), code('EINVAL'), 'AV port');
  assert.throws(() => qp.modify({ ...rtr, sqPsn: 1 }), code('EINVAL'), 'SQ_PSN not taken by INIT -> RTR');
  qp.modify(rtr);
  const rts = { qpState: QpState.RTS, timeout: 14, retryCnt: 7, rnrRetry: 7, sqPsn: 200, maxRdAtomic: 4 };
  assert.throws(() => qp.modify({ ...rts, retryCnt: 8 }), code('EINVAL'), 'retry_cnt is 3 bits');
  assert.throws(() => qp.modify({ ...rts, timeout: 32 }), code('EINVAL'), 'timeout is 5 bits');
  qp.modify(rts);
  const a = qp.query();
  assert.equal(a.destQpNum, 0x77);
  assert.equal(a.rqPsn, 100);
  assert.equal(a.sqPsn, 200);
  assert.equal(a.pathMtu, Mtu.MTU_1024);
  assert.equal(a.maxRdAtomic, 4);
  assert.equal(a.maxDestRdAtomic, 4);
  assert.equal(a.timeout, 14);
  assert.deepEqual([...a.ahAttr.grh.dgid], [...GID0]);
  a.ahAttr.grh.dgid[0] = 1;
  assert.equal(qp.query().ahAttr.grh.dgid[0], 0, 'query returns copies');
  qp.modify({ qpState: QpState.SQD });
  qp.modify({ qpState: QpState.SQD, timeout: 3 });
  qp.modify({ qpState: QpState.RTS, minRnrTimer: 1 });
  assert.throws(() => qp.modify({ qpState: QpState.RTS, pathMtu: 3 }), code('EINVAL'), 'RTS -> RTS takes no path MTU');
});

test('the table as data: ib_modify_qp_is_ok examples', () => {
  assert.equal(modifyQpProblem(QpState.RESET, QpState.INIT, QpType.UC, M.STATE | M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS), null);
  assert.match(modifyQpProblem(QpState.RESET, QpState.RTR, QpType.RC, M.STATE), /illegal/);
  assert.match(modifyQpProblem(QpState.INIT, QpState.RTR, QpType.UC, M.STATE | M.AV | M.PATH_MTU | M.DEST_QPN), /RQ_PSN/);
  assert.equal(modifyQpProblem(QpState.RTS, QpState.RTS, QpType.UD, M.QKEY), null, 'no STATE bit: the same state');
  assert.equal(modifyQpProblem(QpState.SQE, QpState.RTS, QpType.UD, M.STATE | M.CUR_STATE), null);
  assert.match(modifyQpProblem(QpState.SQE, QpState.RTS, QpType.RC, M.STATE | M.ACCESS_FLAGS), /does not take/);
  for (const s of Object.values(QpState)) {
    assert.equal(modifyQpProblem(s, QpState.ERR, QpType.RC, M.STATE), null, `${s} -> ERR`);
    assert.equal(modifyQpProblem(s, QpState.RESET, QpType.UD, M.STATE), null, `${s} -> RESET`);
  }
  assert.equal(qpAttrMaskOf({ qpState: QpState.RTR, ahAttr: {}, rqPsn: 0, altPortNum: 1 }), M.STATE | M.AV | M.RQ_PSN | M.ALT_PATH);
});

test('the siw-like device keeps the state-graph rules (no attribute table)', () => {
  // The fake siw provider's QPs are not Qp subclasses: check the rule choice on a TestQp made on
  // the siw-like (iWARP) device directly.
  const ctx = dev(LO).open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(4);
  const qp = new TestQp(ctx, pd, 999_001, { qpType: QpType.RC, sendCq: cq, recvCq: cq }, { maxSendWr: 1, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 0 });
  qp.modify({ qpState: QpState.INIT });
  qp.modify({ qpState: QpState.RTR });
  assert.throws(() => qp.modify({ qpState: QpState.INIT }), code('EINVAL'), 'RTR -> INIT');
  qp.modify({ qpState: QpState.RTS });
  assert.throws(() => qp.modify({ maxRdAtomic: 129 }), code('EINVAL'));
});

test('UD send WRs: destination checks, Q_Key selection, immediate data in the queued WQE', () => {
  const { ctx, pd, qp } = setup(QpType.UD);
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 0x01234567 });
  qp.modify({ qpState: QpState.RTR });
  qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
  const ah = pd.createAh(grhAh());
  const other = ctx.allocPd();
  const foreign = other.createAh(grhAh());
  const send = (extra) => ({ wrId: 1, opcode: WrOpcode.SEND, sgList: [], ...extra });
  const ud = { ah, remoteQpn: 0x42, remoteQkey: 0x1111 };
  const badWrs = [
    send({}),
    send({ ud: { ...ud, ah: foreign } }),
    send({ ud: { ...ud, remoteQpn: 1 << 24 } }),
    send({ ud: { ...ud, remoteQkey: -1 } }),
    send({ ud, opcode: WrOpcode.RDMA_WRITE, rdma: { remoteAddr: 0, rkey: 1 } }),
    send({ ud: { ...ud, ah: { attr: {}, pd } } }),
  ];
  for (const wr of badWrs) {
    assert.throws(
      () => qp.postSend([send({ ud }), wr]),
      (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1,
    );
  }
  qp.sent.length = 0;
  qp.postSend([send({ ud, opcode: WrOpcode.SEND_WITH_IMM, immData: 0xdeadbeef }), send({ ud: { ...ud, remoteQkey: 0x80000000 } })]);
  assert.equal(qp.sent.length, 2);
  const [a, b] = qp.sent;
  assert.equal(a.ah, ah);
  assert.equal(a.remoteQpn, 0x42);
  assert.equal(a.remoteQkey, 0x1111);
  assert.equal(a.immData, 0xdeadbeef);
  assert.equal(b.remoteQkey, 0x01234567, 'bit 31: the QP Q_Key');
  assert.equal(b.immData, 0);
  ah.destroy();
  assert.throws(() => qp.postSend(send({ ud })), (e) => e instanceof PostError && e.badWrIndex === 0, 'destroyed AH');
  foreign.destroy();
});

test('receive completions carry immediate data and the UD sender', () => {
  const { cq, qp } = setup(QpType.UD);
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 1 });
  qp.postRecv([
    { wrId: 1, sgList: [] },
    { wrId: 2, sgList: [] },
  ]);
  qp.deliver(40 + 8, WcFlags.GRH | WcFlags.WITH_IMM, { immData: 0x01020304, srcQp: 0x99, pkeyIndex: 0 });
  qp.deliver(48, WcFlags.GRH, { srcQp: 0x98, immData: 7 });
  const [w1, w2] = cq.poll(2);
  assert.equal(w1.opcode, WcOpcode.RECV);
  assert.equal(w1.wcFlags, WcFlags.GRH | WcFlags.WITH_IMM);
  assert.equal(w1.immData, 0x01020304);
  assert.equal(w1.srcQp, 0x99);
  assert.equal(w1.byteLen, 48);
  assert.equal(w1.slid, 0);
  assert.equal(w1.dlidPathBits, 0);
  assert.equal(w2.immData, 0, 'no WITH_IMM flag: no immediate');
  assert.equal(w2.srcQp, 0x98);
});

test('multicast attach/detach: UD only, 16-byte GID, provider hook', () => {
  const { qp } = setup(QpType.UD);
  const gid = new Uint8Array(16);
  gid[0] = 0xff;
  qp.attachMcast(gid, 0);
  assert.equal(attached.length, 1);
  assert.equal(attached[0].qp, qp.qpNum);
  assert.throws(() => qp.attachMcast(new Uint8Array(4), 0), code('EINVAL'));
  assert.throws(() => qp.attachMcast(gid, 1 << 16), code('EINVAL'));
  qp.detachMcast(gid, 0);
  assert.equal(attached.length, 0);
  assert.throws(() => qp.detachMcast(gid, 0), code('EINVAL'), 'not attached');
  const rc = setup(QpType.RC).qp;
  assert.throws(() => rc.attachMcast(gid, 0), code('EINVAL'), 'RC QP');
});

test('MR access rights come from the provider (atomics only where supported)', () => {
  const atomic = Access.LOCAL_WRITE | Access.REMOTE_ATOMIC | Access.REMOTE_READ;
  const ibPd = ibDev().open().allocPd();
  const a = ibPd.regMr(Buffer.alloc(64), atomic);
  assert.equal(a._perms, atomic);
  const loPd = dev(LO).open().allocPd();
  const b = loPd.regMr(Buffer.alloc(64), atomic);
  assert.equal(b._perms, Access.LOCAL_WRITE | Access.REMOTE_READ, 'siw grants no atomics');
  assert.equal(b.access, atomic, 'the requested rights are reported as given');
  a.dereg();
  b.dereg();
});

test('the legal state moves (IB spec 10.3.1 graph): qpTransitionAllowed', () => {
  const legal = new Set(['RESET>INIT', 'INIT>INIT', 'INIT>RTR', 'RTR>RTS', 'RTS>RTS', 'RTS>SQD', 'SQD>SQD', 'SQD>RTS', 'SQE>RTS']);
  const S = Object.values(QpState);
  for (const from of S) {
    for (const to of S) {
      const want = to === 'RESET' || to === 'ERR' || legal.has(`${from}>${to}`);
      assert.equal(qpTransitionAllowed(from, to), want, `${from} -> ${to}`);
      // The IB table allows exactly the same moves (it adds attribute rules).
      assert.equal(QP_STATE_TABLE[from][to] !== undefined, want, `table ${from} -> ${to}`);
    }
  }
});
