// Verbs objects on every device: device and port attributes that hold together, the GID and P_Key
// tables, PD/MR/CQ life cycles, the MR rights the device enforces against its atomic capability,
// QP creation per the QP types the device offers, address handles where the device has them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Access, AtomicCap, LinkLayer, PortState, QpState, QpType, RdmaError } from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;

forEachDevice([], (d) => {
  test('device and port attributes hold together; queries return copies', () => {
    const ctx = d.device.open();
    const a = ctx.queryDevice();
    for (const k of ['maxQp', 'maxQpWr', 'maxSge', 'maxCq', 'maxCqe', 'maxMr', 'maxPd', 'physPortCnt']) {
      assert.ok(Number.isInteger(a[k]) && a[k] >= 1, `${k} ${a[k]}`);
    }
    assert.equal(a.nodeGuid, d.device.guid);
    assert.ok(a.maxSgeRd >= 1 && a.maxSgeRd <= a.maxSge);
    assert.equal(a.maxAh > 0, d.caps.has(Cap.AH), 'max_ah > 0 exactly when the device has AHs');
    assert.equal(a.maxMcastGrp > 0, d.caps.has(Cap.MCAST), 'max_mcast_grp > 0 exactly when it attaches multicast');
    a.maxQp = 0;
    assert.notEqual(ctx.queryDevice().maxQp, 0);
    for (let port = 1; port <= a.physPortCnt; port++) {
      const p = ctx.queryPort(port);
      assert.equal(p.state, PortState.ACTIVE);
      assert.ok(p.activeMtu >= 1 && p.activeMtu <= p.maxMtu && p.maxMtu <= 5, `MTU enums ${p.activeMtu}/${p.maxMtu}`);
      assert.ok(p.gidTblLen >= 1);
      assert.equal(p.linkLayer, LinkLayer.ETHERNET, 'software devices run over Ethernet interfaces');
      const g = ctx.queryGid(port, 0);
      assert.ok(g instanceof Uint8Array && g.length === 16);
      g.fill(0xaa);
      assert.notDeepEqual([...ctx.queryGid(port, 0)], [...g], 'a copy');
      assert.throws(() => ctx.queryGid(port, p.gidTblLen), code('EINVAL'));
      if (p.pkeyTblLen > 0) assert.equal(ctx.queryPkey(port, 0), 0xffff, 'the default P_Key first');
      assert.throws(() => ctx.queryPkey(port, p.pkeyTblLen), code('EINVAL'));
    }
    assert.throws(() => ctx.queryPort(0), code('EINVAL'));
    assert.throws(() => ctx.queryPort(a.physPortCnt + 1), code('EINVAL'));
  });

  test('PD, MR and CQ life cycles; the MR rights the device enforces', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const rights = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC;
    const mr = pd.regMr(Buffer.alloc(4096), rights);
    assert.equal(mr.access, rights, 'reported as requested');
    const atomics = ctx.queryDevice().atomicCap !== AtomicCap.NONE;
    assert.equal((mr._perms & Access.REMOTE_ATOMIC) !== 0, atomics, 'remote atomics granted only with atomic_cap');
    assert.equal(mr._perms & (Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ), Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
    assert.throws(() => pd.regMr(Buffer.alloc(8), Access.REMOTE_WRITE), code('EINVAL'), 'remote write needs local write');
    assert.throws(() => pd.dealloc(), code('EBUSY'));
    const cq = ctx.createCq(5);
    assert.ok(cq.cqe >= 5);
    assert.deepEqual(cq.poll(4), []);
    mr.dereg();
    cq.destroy();
    pd.dealloc();
    assert.throws(() => pd.dealloc(), code('EINVAL'));
  });

  test('QP creation follows the QP types the device offers; a new QP is in RESET', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4);
    for (const [type, cap] of [
      [QpType.RC, Cap.RC],
      [QpType.UC, Cap.UC],
      [QpType.UD, Cap.UD],
    ]) {
      const make = () => pd.createQp({ qpType: type, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 } });
      if (!d.caps.has(cap)) {
        assert.throws(make, code('EOPNOTSUPP'), `${QpType[type]} not offered`);
        continue;
      }
      const qp = make();
      assert.equal(qp.qpType, type);
      assert.equal(qp.state, QpState.RESET);
      assert.ok(qp.cap.maxSendWr >= 2 && qp.cap.maxRecvWr >= 2);
      assert.equal(ctx._qps.get(qp.qpNum), qp);
      assert.throws(() => qp.postRecv({ wrId: 1, sgList: [] }), code('EINVAL'), 'no receives in RESET');
      qp.destroy();
      assert.equal(ctx._qps.has(qp.qpNum), false);
    }
    cq.destroy();
    pd.dealloc();
  });

  test('address handles: EOPNOTSUPP without them; with them, a GRH to our own GID', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const grh = { dgid: ctx.queryGid(1, 0), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 };
    if (!d.caps.has(Cap.AH)) {
      assert.throws(() => pd.createAh({ isGlobal: true, portNum: 1, grh }), code('EOPNOTSUPP'));
      pd.dealloc();
      return;
    }
    const ah = pd.createAh({ isGlobal: true, portNum: 1, grh });
    assert.equal(ah.pd, pd);
    assert.throws(() => pd.createAh({ isGlobal: true, portNum: 1, grh: { ...grh, dgid: new Uint8Array(8) } }), code('EINVAL'));
    if (ctx.queryPort(1).linkLayer === LinkLayer.ETHERNET) {
      assert.throws(() => pd.createAh({ isGlobal: false, portNum: 1 }), code('EINVAL'), 'RoCE needs a GRH');
    }
    assert.throws(() => pd.dealloc(), code('EBUSY'));
    ah.destroy();
    pd.dealloc();
  });
});
