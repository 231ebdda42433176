// The native backend's objects under `using`, over the stand-in addon
// (test/fixtures/native/fake-addon.cjs): disposal reaches rdma-core's destroy call once, a second
// disposal reaches nothing, a refused disposal (ibv_dealloc_pd with an MR) reaches nothing and
// leaves the PD; a closed context and detached memory are refused before the addon (EBADF,
// EFAULT); the context counts the native PDs, CQs and channels it made.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

process.env.RDMACM_NATIVE_PATH = fileURLToPath(new URL('../../fixtures/native/fake-addon.cjs', import.meta.url));
delete process.env.RDMACM_NATIVE;
delete process.env.RDMACM_BACKEND;
const { getDeviceList, native, QpType, Access, RdmaError } = await import('../../../dist/index.js');
const fake = globalThis.__fakeAddon;

const dev = getDeviceList().find((d) => d.provider === native.PROVIDER);
const callsOf = (name, since) => fake.calls.slice(since).filter((c) => c.name === name).length;
const code = (c) => (e) => e instanceof RdmaError && e.code === c;

test('disposal in reverse order reaches each destroy call once; again, none', () => {
  const ctx = dev.open();
  const ch = ctx.createCompChannel();
  const cq = ctx.createCq(4, ch);
  const pd = ctx.allocPd();
  const mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } });
  assert.deepEqual([ctx._pdCount, ctx._cqCount, ctx._channels.size], [1, 1, 1], 'the context counts what the addon made');
  const made = [ctx, ch, cq, pd, mr, qp];
  const before = fake.calls.length;
  for (const o of [...made].reverse()) o[Symbol.dispose]();
  for (const o of [...made].reverse()) o[Symbol.dispose]();
  assert.deepEqual(['destroyQp', 'deregMr', 'deallocPd', 'destroyCq', 'destroyCompChannel'].map((n) => callsOf(n, before)), [1, 1, 1, 1, 1]);
  assert.deepEqual([ctx._pdCount, ctx._cqCount, ctx._channels.size], [0, 0, 0]);
  assert.ok(pd.deallocated && cq.destroyed && ch.destroyed && !mr.registered);
});

test('a PD disposed with a live MR: EBUSY before the addon, the PD stays', () => {
  const ctx = dev.open();
  const pd = ctx.allocPd();
  const mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  const before = fake.calls.length;
  assert.throws(() => pd[Symbol.dispose](), code('EBUSY'));
  assert.equal(callsOf('deallocPd', before), 0);
  assert.equal(pd.deallocated, false);
  mr[Symbol.dispose]();
  pd[Symbol.dispose]();
  assert.equal(callsOf('deallocPd', before), 1);
  ctx.close();
});

test('a closed context and detached memory are refused before the addon', () => {
  const ctx = dev.open();
  const pd = ctx.allocPd();
  const gone = new ArrayBuffer(64);
  const view = new Uint8Array(new ArrayBuffer(64), 16, 8);
  structuredClone(gone, { transfer: [gone] });
  structuredClone(view.buffer, { transfer: [view.buffer] });
  let before = fake.calls.length;
  assert.throws(() => pd.regMr(gone, Access.LOCAL_WRITE), code('EFAULT'));
  assert.throws(() => pd.regMr(view, Access.LOCAL_WRITE), code('EFAULT'));
  assert.equal(callsOf('regMr', before), 0);
  let opens = 0;
  while (!ctx.closed) {
    ctx.close();
    opens++;
  }
  before = fake.calls.length;
  try {
    for (const [op, call] of [
      ['ibv_alloc_pd', () => ctx.allocPd()],
      ['ibv_create_cq', () => ctx.createCq(1)],
      ['ibv_create_comp_channel', () => ctx.createCompChannel()],
      ['ibv_reg_mr', () => pd.regMr(Buffer.alloc(8), Access.LOCAL_WRITE)],
      ['ibv_alloc_mw', () => pd.allocMw(2)],
      ['ibv_create_srq', () => pd.createSrq({ attr: { maxWr: 1 } })],
    ]) {
      assert.throws(call, (e) => e instanceof RdmaError && e.code === 'EBADF' && e.op === op, op);
    }
    assert.deepEqual(fake.calls.slice(before).map((c) => c.name), [], 'nothing reached the addon');
    pd.dealloc();
  } finally {
    for (let i = 0; i < opens; i++) dev.open();
  }
});
