// Memory windows (ibv_alloc_mw, ibv_bind_mw, BIND_MW, LOCAL_INV, SEND_WITH_INV) on every device:
// a device whose attributes say it has windows (max_mw > 0) binds, uses and invalidates them as
// rxe does; a device that says it has none refuses them as its kernel counterpart (siw: no
// alloc_mw, EOPNOTSUPP). Remote accesses outside a window or beyond its rights fail with a remote
// access error and leave the memory untouched.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  Access, WrOpcode, SendFlags, WcStatus, WcOpcode, WcFlags, QpState, MwType, MwState, incRkey, PostError, RdmaError,
  DEVICE_MEM_WINDOW, DEVICE_MEM_WINDOW_TYPE_2A, DEVICE_MEM_WINDOW_TYPE_2B,
} from '../../dist/index.js';
import { rcPair, reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;
const sg = (mr, off = 0, len = mr.length - off) => [{ addr: mr.addr + off, length: len, lkey: mr.lkey }];
const MW_BITS = DEVICE_MEM_WINDOW | DEVICE_MEM_WINDOW_TYPE_2A | DEVICE_MEM_WINDOW_TYPE_2B;

/** Whether the device's attributes say it has memory windows. */
const hasWindows = (d) => d.device.open().queryDevice().maxMw > 0;

/** A region of `n` bytes on `id`'s PD that windows may be bound to (and no remote right of its own). */
const bindable = (id, n = 4096, extra = 0) => id.pd.regMr(Buffer.alloc(n), Access.LOCAL_WRITE | Access.MW_BIND | extra);

/** Post `wr` on `id`'s QP, signaled, and return its completion. */
async function run(id, wr) {
  id.qp.postSend({ sendFlags: SendFlags.SIGNALED, ...wr });
  const [wc] = await reap(id.sendCq, 1);
  return wc;
}

/** An RDMA WRITE of `src` to `addr`/`rkey` from `a`; its completion. */
const write = (a, src, addr, rkey, wrId = 'w') => run(a, { wrId, opcode: WrOpcode.RDMA_WRITE, sgList: sg(src), rdma: { remoteAddr: addr, rkey } });

/** Bind type 2 window `mw` through `id`'s QP with a BIND_MW work request; its completion (mw.rkey updated on success). */
async function bind2(id, mw, bindInfo, wrId = 'bind') {
  const rkey = incRkey(mw.rkey);
  const wc = await run(id, { wrId, opcode: WrOpcode.BIND_MW, sgList: [], bindMw: { mw, rkey, bindInfo } });
  if (wc.status === WcStatus.SUCCESS) mw.rkey = rkey;
  return wc;
}

forEachDevice([], (d) => {
  test('memory windows: the attributes say whether the device has them, and allocMw agrees', () => {
    const ctx = d.device.open();
    const a = ctx.queryDevice();
    const pd = ctx.allocPd();
    if (a.maxMw === 0) {
      assert.equal(a.deviceCapFlags & MW_BITS, 0, 'no window capability bits without max_mw');
      for (const t of [MwType.TYPE_1, MwType.TYPE_2]) assert.throws(() => pd.allocMw(t), code('EOPNOTSUPP'), `type ${t}`);
      pd.dealloc();
      return;
    }
    assert.ok(a.deviceCapFlags & DEVICE_MEM_WINDOW, 'IBV_DEVICE_MEM_WINDOW with max_mw > 0');
    const mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.MW_BIND);
    const w1 = pd.allocMw(MwType.TYPE_1);
    assert.equal(w1.state, MwState.VALID, 'a type 1 window is valid, bound to nothing');
    assert.equal(w1.type, MwType.TYPE_1);
    if (a.deviceCapFlags & (DEVICE_MEM_WINDOW_TYPE_2A | DEVICE_MEM_WINDOW_TYPE_2B)) {
      const w2 = pd.allocMw(MwType.TYPE_2);
      assert.equal(w2.state, MwState.FREE, 'a type 2 window starts free');
      assert.notEqual(w2.rkey >>> 8, w1.rkey >>> 8);
      w2.dealloc();
      assert.equal(w2.state, MwState.INVALID);
    }
    assert.notEqual(w1.rkey >>> 8, mr.rkey >>> 8, 'windows and MRs share one rkey index space');
    assert.throws(() => pd.allocMw(3), code('EINVAL'));
    assert.throws(() => pd.dealloc(), code('EBUSY'), 'a PD with a window');
    w1.dealloc();
    assert.throws(() => w1.dealloc(), code('EINVAL'));
    mr.dereg();
    pd.dealloc();
    assert.throws(() => pd.allocMw(MwType.TYPE_1), code('EINVAL'), 'PD deallocated');
  });
});

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  const skip = !hasWindows(d) && 'the device reports max_mw 0';

  test('type 1: ibv_bind_mw, RDMA WRITE and READ through the window, the rkey changes on every bind, unbind', { skip }, async () => {
    const { a, b, close } = await pair();
    const target = bindable(b);
    const mw = b.pd.allocMw(MwType.TYPE_1);
    const before = mw.rkey;
    const rkey = b.qp.bindMw(mw, { wrId: 'bind', sendFlags: SendFlags.SIGNALED, bindInfo: { mr: target, addr: target.addr + 1024, length: 1024, mwAccessFlags: Access.REMOTE_WRITE | Access.REMOTE_READ } });
    assert.equal(rkey, incRkey(before), 'the key byte increased (ibv_inc_rkey)');
    assert.equal(mw.rkey, rkey);
    const [bw] = await reap(b.sendCq, 1);
    assert.deepEqual([bw.wrId, bw.status, bw.opcode], ['bind', WcStatus.SUCCESS, WcOpcode.BIND_MW]);
    assert.deepEqual(mw.binding, { mr: target, addr: target.addr + 1024, length: 1024, access: Access.REMOTE_WRITE | Access.REMOTE_READ });
    assert.throws(() => target.dereg(), code('EINVAL'), 'an MR with a window bound');

    const data = randomBytes(1024);
    const src = a.pd.regMr(Buffer.from(data), 0);
    assert.equal((await write(a, src, target.addr + 1024, rkey)).status, WcStatus.SUCCESS);
    assert.ok(Buffer.from(target.buf.subarray(1024, 2048)).equals(data));
    assert.ok(target.buf.subarray(0, 1024).every((x) => x === 0) && target.buf.subarray(2048).every((x) => x === 0), 'only the window written');
    const back = a.pd.regMr(Buffer.alloc(512), Access.LOCAL_WRITE);
    const rd = await run(a, { wrId: 'r', opcode: WrOpcode.RDMA_READ, sgList: sg(back), rdma: { remoteAddr: target.addr + 1536, rkey } });
    assert.deepEqual([rd.status, rd.opcode, rd.byteLen], [WcStatus.SUCCESS, WcOpcode.RDMA_READ, 512]);
    assert.ok(Buffer.from(back.buf).equals(data.subarray(512)));

    // Bound again (moved to the first 512 bytes): a new rkey, same index.
    const again = b.qp.bindMw(mw, { wrId: 'bind2', bindInfo: { mr: target, addr: target.addr, length: 512, mwAccessFlags: Access.REMOTE_READ } });
    assert.equal(again >>> 8, rkey >>> 8);
    assert.notEqual(again, rkey);
    const rd2 = await run(a, { wrId: 'r2', opcode: WrOpcode.RDMA_READ, sgList: sg(back), rdma: { remoteAddr: target.addr, rkey: again } });
    assert.equal(rd2.status, WcStatus.SUCCESS);
    assert.ok(back.buf.every((x) => x === 0));

    // Unbound (no MR, length 0): the MR is free to go.
    b.qp.bindMw(mw, { wrId: 'unbind', sendFlags: SendFlags.SIGNALED, bindInfo: { mr: null, addr: 0, length: 0, mwAccessFlags: 0 } });
    const [ub] = await reap(b.sendCq, 1);
    assert.deepEqual([ub.wrId, ub.status], ['unbind', WcStatus.SUCCESS]);
    assert.equal(mw.binding.mr, null);
    target.dereg();
    mw.dealloc();
    await close();
  });

  test('ibv_bind_mw refusals: type 2, MR of another PD, address without MR, zero-based type 1', { skip }, async () => {
    const { b, close } = await pair();
    const target = bindable(b);
    const w1 = b.pd.allocMw(MwType.TYPE_1);
    const w2 = b.pd.allocMw(MwType.TYPE_2);
    const info = { mr: target, addr: target.addr, length: 64, mwAccessFlags: Access.REMOTE_READ };
    assert.throws(() => b.qp.bindMw(w2, { wrId: 1, bindInfo: info }), code('EINVAL'), 'type 2 windows are bound by work requests');
    assert.throws(() => b.qp.bindMw(w1, { wrId: 1, bindInfo: { ...info, mr: null } }), code('EINVAL'), 'an address and length without an MR');
    const otherPd = b.verbs.allocPd();
    const foreign = otherPd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.MW_BIND);
    assert.throws(() => b.qp.bindMw(w1, { wrId: 1, bindInfo: { ...info, mr: foreign, addr: foreign.addr } }), code('EPERM'), 'MR of another PD');
    assert.throws(() => b.qp.bindMw(w1, { wrId: 1, bindInfo: { ...info, mwAccessFlags: Access.REMOTE_READ | Access.ZERO_BASED } }), code('EINVAL'), 'zero-based type 1');
    const rkey = w1.rkey;
    assert.equal(w1.rkey, rkey, 'a refused bind leaves the rkey');
    assert.equal(b.sendCq.poll(4).length, 0, 'nothing was posted');
    // A BIND_MW work request carries no SGEs.
    assert.throws(
      () => b.qp.postSend({ wrId: 1, opcode: WrOpcode.BIND_MW, sgList: sg(target, 0, 8), bindMw: { mw: w2, rkey: incRkey(w2.rkey), bindInfo: info } }),
      (e) => e instanceof PostError && e.code === 'EINVAL',
    );
    foreign.dereg();
    otherPd.dealloc();
    w1.dealloc();
    w2.dealloc();
    target.dereg();
    await close();
  });

  test('bind to an MR without MW_BIND: MW_BIND_ERR, the QP to ERR, the window unchanged', { skip }, async () => {
    const { b, close } = await pair();
    const plain = b.pd.regMr(Buffer.alloc(256), Access.LOCAL_WRITE);
    const mw = b.pd.allocMw(MwType.TYPE_1);
    const key = mw.rkey;
    b.qp.bindMw(mw, { wrId: 'bad', bindInfo: { mr: plain, addr: plain.addr, length: 64, mwAccessFlags: Access.REMOTE_READ } });
    b.qp.postSend({ wrId: 'after', opcode: WrOpcode.SEND, sgList: [], sendFlags: SendFlags.SIGNALED });
    const wc = await reap(b.sendCq, 2);
    assert.deepEqual(wc.map((w) => [w.wrId, w.status]), [['bad', WcStatus.MW_BIND_ERR], ['after', WcStatus.WR_FLUSH_ERR]], 'an error completes even unsignaled; the rest flushed');
    assert.equal(wc[0].opcode, WcOpcode.BIND_MW);
    assert.equal(b.qp.state, QpState.ERR);
    assert.equal(mw.binding.mr, null);
    mw.rkey = key; // undo ibv_bind_mw's update after an error completion, as rdma-core asks
    mw.dealloc();
    plain.dereg();
    await close();
  });

  for (const [what, bindAccess, op, off, len] of [
    ['a WRITE one byte past the window', Access.REMOTE_WRITE, WrOpcode.RDMA_WRITE, 1, 256],
    ['a WRITE starting before the window', Access.REMOTE_WRITE, WrOpcode.RDMA_WRITE, -1, 2],
    ['a READ through a write-only window', Access.REMOTE_WRITE, WrOpcode.RDMA_READ, 0, 16],
    ['a WRITE through a read-only window', Access.REMOTE_READ, WrOpcode.RDMA_WRITE, 0, 16],
  ]) {
    test(`${what}: REM_ACCESS_ERR, the memory untouched`, { skip }, async () => {
      const { a, b, close } = await pair();
      const target = bindable(b, 1024, Access.REMOTE_WRITE | Access.REMOTE_READ);
      const mw = b.pd.allocMw(MwType.TYPE_1);
      // The window is [256, 512) of a region whose own rkey would allow all of it.
      const rkey = b.qp.bindMw(mw, { wrId: 'bind', bindInfo: { mr: target, addr: target.addr + 256, length: 256, mwAccessFlags: bindAccess } });
      const src = a.pd.regMr(Buffer.alloc(len, 0xee), Access.LOCAL_WRITE);
      const wc = await run(a, { wrId: 'x', opcode: op, sgList: sg(src), rdma: { remoteAddr: target.addr + 256 + off, rkey } });
      assert.equal(wc.status, WcStatus.REM_ACCESS_ERR);
      assert.ok(target.buf.every((x) => x === 0), 'no byte written');
      if (op === WrOpcode.RDMA_READ) assert.ok(src.buf.every((x) => x === 0xee), 'no byte read');
      await close();
    });
  }

  test('type 2: BIND_MW work request, zero based, SEND_WITH_INV frees it (WITH_INV on the receiver), the rkey then refused', { skip }, async () => {
    const { a, b, close } = await pair();
    const target = bindable(b, 1024);
    const mw = b.pd.allocMw(MwType.TYPE_2);
    const info = { mr: target, addr: target.addr + 256, length: 256, mwAccessFlags: Access.REMOTE_WRITE | Access.ZERO_BASED };
    const bw = await bind2(b, mw, info);
    assert.deepEqual([bw.status, bw.opcode], [WcStatus.SUCCESS, WcOpcode.BIND_MW]);
    assert.equal(mw.state, MwState.VALID);
    const again = await bind2(b, mw, info, 'rebind');
    assert.equal(again.status, WcStatus.MW_BIND_ERR, 'a bound type 2 window is not bound again (o10-37.2.30)');
    await close();

    const p = await pair();
    const t2 = bindable(p.b, 1024);
    const w = p.b.pd.allocMw(MwType.TYPE_2);
    assert.equal((await bind2(p.b, w, { ...info, mr: t2, addr: t2.addr + 256 })).status, WcStatus.SUCCESS);
    const rkey = w.rkey;
    // Zero based: remote addresses are offsets into the window.
    const data = randomBytes(100);
    const src = p.a.pd.regMr(Buffer.from(data), 0);
    assert.equal((await write(p.a, src, 10, rkey)).status, WcStatus.SUCCESS);
    assert.ok(Buffer.from(t2.buf.subarray(266, 366)).equals(data));
    // The peer frees the window with its Send.
    const box = p.b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    p.b.qp.postRecv({ wrId: 'recv', sgList: sg(box) });
    const msg = p.a.pd.regMr(Buffer.from('done'), 0);
    const s = await run(p.a, { wrId: 'inv', opcode: WrOpcode.SEND_WITH_INV, invalidateRkey: rkey, sgList: sg(msg) });
    assert.equal(s.status, WcStatus.SUCCESS);
    const [r] = await reap(p.b.recvCq, 1);
    assert.deepEqual([r.status, r.opcode, r.byteLen], [WcStatus.SUCCESS, WcOpcode.RECV, 4]);
    assert.ok(r.wcFlags & WcFlags.WITH_INV);
    assert.equal(r.invalidatedRkey, rkey);
    assert.equal(w.state, MwState.FREE);
    t2.dereg(); // nothing bound to it any more
    // The invalidated rkey no longer reaches anything.
    const before = Buffer.from(t2.buf);
    const late = await write(p.a, src, 10, rkey, 'late');
    assert.equal(late.status, WcStatus.REM_ACCESS_ERR);
    assert.ok(Buffer.from(t2.buf).equals(before), 'memory untouched');
    await p.close();
  });

  test('LOCAL_INV frees a type 2 window (LOCAL_INV completion); a type 1 window cannot be invalidated (LOC_QP_OP_ERR)', { skip }, async () => {
    const { a, b, close } = await pair();
    const target = bindable(b, 1024);
    const w2 = b.pd.allocMw(MwType.TYPE_2);
    assert.equal((await bind2(b, w2, { mr: target, addr: target.addr, length: 128, mwAccessFlags: Access.REMOTE_WRITE })).status, WcStatus.SUCCESS);
    assert.throws(() => target.dereg(), code('EINVAL'));
    const li = await run(b, { wrId: 'li', opcode: WrOpcode.LOCAL_INV, invalidateRkey: w2.rkey, sgList: [] });
    assert.deepEqual([li.status, li.opcode], [WcStatus.SUCCESS, WcOpcode.LOCAL_INV]);
    assert.equal(w2.state, MwState.FREE);
    // Free again, it binds again, with a new key byte.
    const old = w2.rkey;
    assert.equal((await bind2(b, w2, { mr: target, addr: target.addr, length: 128, mwAccessFlags: Access.REMOTE_WRITE }, 'bind3')).status, WcStatus.SUCCESS);
    assert.notEqual(w2.rkey, old);
    const src = a.pd.regMr(Buffer.alloc(8, 7), 0);
    assert.equal((await write(a, src, target.addr, old)).status, WcStatus.REM_ACCESS_ERR, 'the rkey of the earlier binding is refused');
    assert.ok(target.buf.every((x) => x === 0));
    await close();

    const p = await pair();
    const w1 = p.b.pd.allocMw(MwType.TYPE_1);
    const bad = await run(p.b, { wrId: 'li1', opcode: WrOpcode.LOCAL_INV, invalidateRkey: w1.rkey, sgList: [] });
    assert.equal(bad.status, WcStatus.LOC_QP_OP_ERR);
    assert.equal(p.b.qp.state, QpState.ERR);
    await p.close();
  });
});

/** A connected RC pair whose QPs bind windows and accept remote reads and writes. */
function pair() {
  return rcPair();
}
