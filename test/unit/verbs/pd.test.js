import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LO, ETH, SMALL, fake, dev, code, SelfCleaningQp, FakeQp } from '../../lib/fake-provider.js';
import { QpType } from '../../../dist/verbs/types.js';
import { RdmaError } from '../../../dist/errors.js';

function setup(info = LO) {
  const ctx = dev(info).open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(8);
  const attr = (extra = {}) => ({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: 4 }, ...extra });
  return { ctx, pd, cq, attr };
}

test('createQp delegates to the provider and registers the QP', () => {
  const { ctx, pd, cq, attr } = setup();
  const before = fake.created;
  const a = pd.createQp(attr({ qpContext: 'ctx-a', sqSigAll: true }));
  const b = pd.createQp(attr());
  assert.equal(fake.created, before + 2);
  assert.ok(a instanceof FakeQp);
  assert.equal(a.attr.qpContext, 'ctx-a');
  assert.ok(a.qpNum >= 1);
  assert.ok(b.qpNum > a.qpNum);
  assert.equal(ctx._qps.get(a.qpNum), a);
  assert.equal(ctx._qps.get(b.qpNum), b);
  assert.equal(pd.qpCount, 2);
  assert.equal(cq.qps.size, 2);
  a.destroy();
  a.destroy(); // fake QP: _releaseQp is idempotent
  assert.equal(ctx._qps.has(a.qpNum), false);
  const c = pd.createQp(attr());
  assert.notEqual(c.qpNum, a.qpNum, 'numbers are not reused at once');
  assert.notEqual(c.qpNum, b.qpNum);
  b.destroy();
  c.destroy();
  cq.destroy();
  pd.dealloc();
});

test('createQp validates attributes against the device (EINVAL)', () => {
  const { ctx, pd, cq, attr } = setup();
  const bad = [
    attr({ qpType: 99 }),
    attr({ qpType: 'RC' }),
    attr({ sendCq: undefined }),
    attr({ recvCq: {} }),
    attr({ cap: undefined }),
    attr({ cap: { maxSendWr: 32769 } }),
    attr({ cap: { maxRecvWr: 32769 } }),
    attr({ cap: { maxSendSge: 7 } }),
    attr({ cap: { maxRecvSge: 7 } }),
    attr({ cap: { maxInlineData: 81 } }),
    attr({ cap: { maxSendWr: -1 } }),
    attr({ cap: { maxSendWr: 1.5 } }),
    attr({ cap: { maxSendWr: '4' } }),
  ];
  for (const a of bad) assert.throws(() => pd.createQp(a), code('EINVAL'), JSON.stringify(a.cap));
  assert.throws(() => pd.createQp(null), code('EINVAL'));
  const ok = pd.createQp(attr({ cap: { maxSendWr: 32768, maxRecvWr: 32768, maxSendSge: 6, maxRecvSge: 6, maxInlineData: 80 } }));
  ok.destroy();
  // CQ of another device, destroyed CQ
  const foreign = dev(ETH).open().createCq(4);
  assert.throws(() => pd.createQp(attr({ recvCq: foreign })), code('EINVAL'));
  foreign.destroy();
  const dead = ctx.createCq(4);
  dead.destroy();
  assert.throws(() => pd.createQp(attr({ sendCq: dead })), code('EINVAL'));
  // provider errors come through unchanged
  assert.throws(() => pd.createQp(attr({ qpType: QpType.UD })), code('EOPNOTSUPP'));
  assert.equal(cq.qps.size, 0);
  cq.destroy();
  pd.dealloc();
  assert.throws(() => pd.createQp(attr()), code('EINVAL'), 'PD deallocated');
});

test('a provider failure after allocating a QP number does not leak it', () => {
  const { ctx, pd, cq, attr } = setup(SMALL); // maxQp 2
  for (let i = 0; i < 5; i++) {
    fake.failNext = new RdmaError('ENOMEM', { op: 'ibv_create_qp' });
    assert.throws(() => pd.createQp(attr()), code('ENOMEM'));
  }
  const a = pd.createQp(attr());
  const b = pd.createQp(attr());
  assert.throws(() => pd.createQp(attr()), code('ENOMEM'), 'maxQp reached');
  a.destroy();
  const c = pd.createQp(attr());
  assert.equal(ctx._qps.size, 2);
  b.destroy();
  c.destroy();
  cq.destroy();
  pd.dealloc();
});

test('PD dealloc: EBUSY while QPs exist; a QP that unregisters itself is forgotten too', () => {
  const { ctx, pd, cq, attr } = setup(ETH);
  const qp = pd.createQp(attr());
  assert.throws(() => pd.dealloc(), code('EBUSY'));
  qp.destroy();
  fake.QpClass = SelfCleaningQp;
  try {
    const q2 = pd.createQp(attr());
    assert.ok(q2 instanceof SelfCleaningQp);
    assert.throws(() => pd.dealloc(), code('EBUSY'));
    q2.destroy();
    assert.equal(ctx._qps.has(q2.qpNum), false);
    assert.equal(cq.qps.size, 0);
  } finally {
    fake.QpClass = FakeQp;
  }
  cq.destroy();
  pd.dealloc();
});

test('allocPd: maxPd limit (ENOMEM); handles are distinct', () => {
  const ctx = dev(SMALL).open();
  const a = ctx.allocPd();
  const b = ctx.allocPd();
  assert.notEqual(a.handle, b.handle);
  assert.throws(() => ctx.allocPd(), code('ENOMEM'));
  a.dealloc();
  const c = ctx.allocPd();
  b.dealloc();
  c.dealloc();
});
