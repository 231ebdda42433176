// Shared receive queues and memory windows of the native backend over the stand-in addon
// (test/fixtures/native/fake-addon.cjs): what reaches rdma-core's ibv_create_srq / modify / query /
// post_srq_recv / destroy, ibv_create_qp with an SRQ, ibv_alloc_mw / ibv_bind_mw / dealloc and a
// BIND_MW work request, how the SRQ's async events find it, and what is refused before the addon.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

process.env.RDMACM_NATIVE_PATH = fileURLToPath(new URL('../../fixtures/native/fake-addon.cjs', import.meta.url));
delete process.env.RDMACM_NATIVE;
delete process.env.RDMACM_BACKEND;
const m = await import('../../../dist/index.js');
const { W, WR_WORDS } = await import('../../../dist/native/abi.js');
const { getDeviceList, native, QpType, WrOpcode, SendFlags, RdmaError, PostError, Srq, SrqAttrMask, Mw, MwType, Access, AsyncEventType } = m;
const fake = globalThis.__fakeAddon;

const callsOf = (name, since = 0) => fake.calls.slice(since).filter((c) => c.name === name);
const dev = getDeviceList().find((d) => d.provider === native.PROVIDER);
const ctx = dev.open();
const pd = ctx.allocPd();
const cq = ctx.createCq(8);
const buf = Buffer.alloc(256);
const mr = pd.regMr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.MW_BIND);

test('the device reports the kernel device\'s own SRQ and window limits', () => {
  fake.next.queryDevice = undefined;
  const a = ctx.queryDevice();
  // The stand-in reports max_srq 0 / max_mw 0: what the device says is passed on, not invented.
  assert.equal(a.maxSrq, 0);
  assert.equal(a.maxMw, 0);
});

test('ibv_create_srq: the sizes the provider gave are written back; the SRQ is an Srq', () => {
  const before = fake.calls.length;
  fake.next.createSrq = (_pd, wr, sge) => [{ fake: 'srq' }, wr * 2 - 1, sge];
  const init = { attr: { maxWr: 8, maxSge: 2, srqLimit: 3 }, srqContext: 'mine' };
  const srq = pd.createSrq(init);
  delete fake.next.createSrq;
  assert.ok(srq instanceof Srq);
  const [c] = callsOf('createSrq', before);
  assert.deepEqual(c.args.slice(1, 4), [8, 2, 3]);
  assert.equal(typeof c.args[4], 'number', 'a key for its async events');
  assert.deepEqual(init.attr, { maxWr: 15, maxSge: 2, srqLimit: 3 });
  assert.equal(srq.srqContext, 'mine');
  srq.destroy();
  assert.equal(callsOf('destroySrq', before).length, 1);
  assert.throws(() => srq.destroy(), (e) => e instanceof RdmaError && e.code === 'EINVAL');
});

test('ibv_create_srq: malformed attributes and other types never reach the addon', () => {
  const before = fake.calls.length;
  for (const [init, code] of [
    [null, 'EINVAL'],
    [{ attr: { maxWr: -1 } }, 'EINVAL'],
    [{ attr: { maxWr: 4, maxSge: 1.5 } }, 'EINVAL'],
    [{ attr: { maxWr: 4, srqLimit: 2 ** 32 } }, 'EINVAL'],
    [{ attr: { maxWr: 4 }, srqType: 1 }, 'EOPNOTSUPP'],
  ]) {
    assert.throws(() => pd.createSrq(init), (e) => e instanceof RdmaError && e.code === code, JSON.stringify(init));
  }
  assert.equal(callsOf('createSrq', before).length, 0);
  fake.next.createSrq = -95;
  assert.throws(() => pd.createSrq({ attr: { maxWr: 4 } }), (e) => e.code === 'EOPNOTSUPP' && e.op === 'ibv_create_srq', 'the kernel\'s errno');
  delete fake.next.createSrq;
});

test('modify / query / post_srq_recv go to the kernel; a QP on the SRQ names it; its limit event finds it', async () => {
  const srq = pd.createSrq({ attr: { maxWr: 16, maxSge: 1 } });
  const srqH = callsOf('createSrq').at(-1);
  let before = fake.calls.length;
  srq.modify({ srqLimit: 4 });
  srq.modify({ maxWr: 32, srqLimit: 2 }, SrqAttrMask.MAX_WR);
  assert.deepEqual(callsOf('modifySrq', before).map((c) => c.args.slice(1)), [[SrqAttrMask.LIMIT, 0, 4], [SrqAttrMask.MAX_WR, 32, 2]]);
  assert.throws(() => srq.modify({ srqLimit: -1 }), (e) => e.code === 'EINVAL');
  fake.next.querySrq = [31, 1, 4];
  assert.deepEqual(srq.query(), { maxWr: 31, maxSge: 1, srqLimit: 4 });
  delete fake.next.querySrq;

  before = fake.calls.length;
  const wrs = [0, 1, 2].map((i) => ({ wrId: 10 + i, sgList: [{ addr: mr.addr + i * 16, length: 16, lkey: mr.lkey }] }));
  srq.postRecv(wrs);
  const [p] = callsOf('postSrqRecv', before);
  assert.equal(p.args[1], 3);
  assert.equal(fake.wr[W.NSGE + WR_WORDS * 2], 1);
  // A malformed WR is refused with its index after those before it are posted.
  before = fake.calls.length;
  assert.throws(() => srq.postRecv([wrs[0], { wrId: 1, sgList: [{ addr: -1, length: 1, lkey: 0 }] }]), (e) => e instanceof PostError && e.badWrIndex === 1 && e.code === 'EINVAL');
  assert.equal(callsOf('postSrqRecv', before)[0].args[1], 1);
  fake.next.postSrqRecv = () => {
    fake.wr[fake.wr.length - 4] = 1;
    return -12;
  };
  assert.throws(() => srq.postRecv(wrs), (e) => e instanceof PostError && e.code === 'ENOMEM' && e.badWrIndex === 1 && e.op === 'ibv_post_srq_recv');
  delete fake.next.postSrqRecv;

  before = fake.calls.length;
  const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, srq, cap: { maxSendWr: 4, maxRecvWr: 0 } });
  const [c] = callsOf('createQp', before);
  assert.ok(c.args[11] !== null && c.args[11].fake === 'srq', 'the SRQ handle goes with ibv_create_qp');
  assert.equal(qp.srq, srq);
  // Its own receive queue does not exist: refused before rdma-core (whose siw would crash on it).
  before = fake.calls.length;
  assert.throws(() => qp.postRecv(wrs[0]), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 0);
  assert.equal(callsOf('postRecv', before).length, 0);
  assert.throws(() => srq.destroy(), (e) => e.code === 'EBUSY', 'while a QP uses it');

  // The kernel's SRQ_LIMIT_REACHED for it: the key it was created with.
  const key = srqH.args[4];
  fake.handlers.async(ctx._key, AsyncEventType.SRQ_LIMIT_REACHED, 3, key);
  const ev = await ctx.getAsyncEvent(AbortSignal.timeout(2000));
  assert.equal(ev.type, AsyncEventType.SRQ_LIMIT_REACHED);
  assert.equal(ev.srq, srq);
  qp.destroy();
  assert.throws(() => srq.destroy(), (e) => e.code === 'EBUSY', 'its event not acknowledged');
  ctx.ackAsyncEvent(ev);
  srq.destroy();
  assert.throws(() => srq.postRecv(wrs), (e) => e instanceof PostError && e.code === 'EINVAL');

  // A soft device's SRQ is not the kernel's.
  const soft = getDeviceList().find((d) => d.provider !== native.PROVIDER && d.open().queryDevice().maxSrq > 0);
  const sctx = soft.open();
  const spd = sctx.allocPd();
  const ssrq = spd.createSrq({ attr: { maxWr: 4 } });
  assert.throws(() => pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, srq: ssrq, cap: {} }), (e) => e.code === 'EINVAL');
  ssrq.destroy();
  spd.dealloc();
});

test('memory windows: alloc, ibv_bind_mw, a BIND_MW work request naming window and MR, dealloc', () => {
  let before = fake.calls.length;
  const mw = pd.allocMw(MwType.TYPE_1);
  assert.ok(mw instanceof Mw);
  assert.equal(mw.rkey, 0x2201);
  assert.throws(() => pd.dealloc(), (e) => e.code === 'EBUSY', 'a window holds its PD');
  const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: 4 } });
  const rkey = qp.bindMw(mw, { wrId: 7, sendFlags: SendFlags.SIGNALED, bindInfo: { mr, addr: mr.addr + 16, length: 64, mwAccessFlags: Access.REMOTE_WRITE } });
  const [b] = callsOf('bindMw', before);
  assert.equal(b.args[3].fake, 'mr', 'the MR handle');
  // The window's current rkey, the range, the rights, wr_id 7 (a number: bit 63 set), the flags.
  assert.deepEqual(b.args.slice(4), [mr.addr + 16, 64, Access.REMOTE_WRITE, 7, 0x8000_0000, SendFlags.SIGNALED]);
  assert.equal(b.args[2], 0x2201);
  assert.equal(rkey, 0x2202, 'the rkey the provider gave');
  assert.equal(mw.rkey, 0x2202);
  // An unbind (no MR) is not handed to rdma-core (its rxe would read the MR).
  before = fake.calls.length;
  assert.throws(() => qp.bindMw(mw, { wrId: 8, bindInfo: { mr: null, addr: 0, length: 0, mwAccessFlags: 0 } }), (e) => e.code === 'EINVAL');
  assert.equal(callsOf('bindMw', before).length, 0);

  const mw2 = pd.allocMw(MwType.TYPE_2);
  before = fake.calls.length;
  qp.postSend({ wrId: 9, opcode: WrOpcode.BIND_MW, sgList: [], sendFlags: SendFlags.SIGNALED, bindMw: { mw: mw2, rkey: (mw2.rkey & ~0xff) | 0x33, bindInfo: { mr, addr: mr.addr, length: 128, mwAccessFlags: Access.REMOTE_WRITE | Access.REMOTE_READ } } });
  assert.equal(callsOf('postSend', before).length, 1);
  const w = fake.wr;
  const f = new Float64Array(w.buffer);
  assert.equal(w[W.OPCODE], WrOpcode.BIND_MW);
  assert.equal(w[W.AH], mw2._slot, 'the window by its key-table slot');
  assert.equal(w[W.RQPN], mr._slot, 'the MR by its slot');
  assert.equal(w[W.MW_RKEY], mw2.rkey, 'the rkey the application has for the window');
  assert.equal(w[W.RKEY], (mw2.rkey & ~0xff) | 0x33);
  assert.equal(w[W.MW_ACCESS], Access.REMOTE_WRITE | Access.REMOTE_READ);
  assert.equal(f[W.RADDR >> 1], mr.addr);
  assert.equal(f[W.CMP_LO >> 1], 128);
  // LOCAL_INV and SEND_WITH_INV carry the rkey to invalidate.
  qp.postSend({ wrId: 10, opcode: WrOpcode.LOCAL_INV, sgList: [], invalidateRkey: 0x2233 });
  assert.equal(w[W.INV], 0x2233);
  before = fake.calls.length;
  assert.throws(() => qp.postSend({ wrId: 11, opcode: WrOpcode.BIND_MW, sgList: [], bindMw: { mw: mw2, rkey: 1.5, bindInfo: { mr, addr: 0, length: 1, mwAccessFlags: 0 } } }), (e) => e instanceof PostError && e.code === 'EINVAL');
  assert.equal(callsOf('postSend', before).length, 0);

  mw.dealloc();
  mw2.dealloc();
  assert.throws(() => mw.dealloc(), (e) => e.code === 'EINVAL');
  assert.throws(() => qp.bindMw(mw, { wrId: 1, bindInfo: { mr, addr: mr.addr, length: 8, mwAccessFlags: 0 } }), (e) => e.code === 'EINVAL', 'deallocated');
  assert.equal(callsOf('deallocMw').length, 2);
  fake.next.allocMw = -95;
  assert.throws(() => pd.allocMw(MwType.TYPE_1), (e) => e.code === 'EOPNOTSUPP', 'a device without windows: the kernel\'s errno');
  delete fake.next.allocMw;
  qp.destroy();
});
