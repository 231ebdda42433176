import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LO, ETH, SMALL, dev, code, wc, prng } from '../../lib/fake-provider.js';
import { AsyncEventType, QpType } from '../../../dist/verbs/types.js';
import { eventTypeStr } from '../../../dist/verbs/async-event.js';

test('createCq: size rounded up to a power of two, limits checked', () => {
  const ctx = dev(LO).open();
  const sizes = [
    [1, 1],
    [2, 2],
    [3, 4],
    [100, 128],
    [1024, 1024],
    [1025, 2048],
  ];
  for (const [req, got] of sizes) {
    const cq = ctx.createCq(req);
    assert.equal(cq.cqe, got);
    assert.ok(cq.cqe >= req);
    cq.destroy();
  }
  const max = ctx.queryDevice().maxCqe;
  const big = ctx.createCq(max);
  assert.ok(big.cqe >= max);
  big.destroy();
  for (const bad of [0, -1, 1.5, max + 1, NaN, '8', undefined]) {
    assert.throws(() => ctx.createCq(bad), code('EINVAL'), `cqe ${bad}`);
  }
  assert.throws(() => ctx.createCq(4, undefined, -1), code('EINVAL'));
  assert.throws(() => ctx.createCq(4, undefined, ctx.numCompVectors), code('EINVAL'));
  assert.throws(() => ctx.createCq(4, {}), code('EINVAL'));
  const other = dev(ETH).open().createCompChannel();
  assert.throws(() => ctx.createCq(4, other), code('EINVAL'), 'channel of another device');
  other.destroy();
  assert.throws(() => dev(ETH).open().createCq(4, other), code('EINVAL'), 'destroyed channel');
  const cq = ctx.createCq(4, undefined, 0, { mine: 1 });
  assert.deepEqual(cq.cqContext, { mine: 1 });
  assert.equal(cq.compVector, 0);
  cq.destroy();
});

test('createCq: device limits (maxCqe, maxCq)', () => {
  const ctx = dev(SMALL).open();
  assert.throws(() => ctx.createCq(101), code('EINVAL'));
  const cqs = [ctx.createCq(100), ctx.createCq(1), ctx.createCq(1)];
  assert.equal(cqs[0].cqe, 128);
  assert.throws(() => ctx.createCq(1), code('ENOMEM'));
  for (const c of cqs) c.destroy();
});

test('poll returns completions oldest first; poll(max) and default 1', () => {
  const cq = dev(LO).open().createCq(8);
  assert.deepEqual(cq.poll(), []);
  assert.deepEqual(cq.poll(0), []);
  const w = [1, 2, 3, 4, 5].map((i) => wc(i));
  for (const x of w) assert.equal(cq._push(x, false), true);
  assert.equal(cq._count, 5);
  assert.equal(cq.pending, 5);
  assert.deepEqual(cq.poll(), [w[0]]);
  const two = cq.poll(2);
  assert.equal(two[0], w[1], 'the pushed object itself');
  assert.equal(two[1], w[2]);
  assert.deepEqual(cq.poll(10).map((x) => x.wrId), [4, 5]);
  assert.equal(cq._count, 0);
  assert.throws(() => cq.poll(-1), code('EINVAL'));
  assert.throws(() => cq.poll(1.5), code('EINVAL'));
  cq.destroy();
});

test('pollInto fills the caller array without allocating a result', () => {
  const cq = dev(LO).open().createCq(16);
  const out = new Array(4).fill(null);
  assert.equal(cq.pollInto(out), 0);
  for (let i = 0; i < 6; i++) cq._push(wc(i), false);
  assert.equal(cq.pollInto(out), 4);
  assert.deepEqual(out.map((x) => x.wrId), [0, 1, 2, 3]);
  const marker = { marker: true };
  out[1] = marker;
  assert.equal(cq.pollInto(out, 1), 1);
  assert.equal(out[0].wrId, 4);
  assert.equal(out[1], marker, 'untouched past n');
  assert.equal(cq.pollInto(out, 4), 1);
  assert.equal(out[0].wrId, 5);
  assert.throws(() => cq.pollInto(out, -2), code('EINVAL'));
  cq.destroy();
});

test('pollInto fills the Wc objects already in the array and the CQ reuses its own', () => {
  const cq = dev(LO).open().createCq(16);
  const out = [];
  const pushed = [];
  for (let i = 0; i < 3; i++) {
    const w = cq._wc();
    Object.assign(w, wc(i));
    pushed.push(w);
    cq._push(w, false);
  }
  assert.equal(cq.pollInto(out, 2), 2);
  assert.equal(out[0], pushed[0], 'no object in the array: the CQ stores its own');
  assert.equal(out[1], pushed[1]);
  const [a0, a1] = out;
  // The next poll copies into the objects the array holds; the CQ's object becomes reusable.
  assert.equal(cq.pollInto(out, 2), 1);
  assert.equal(out[0], a0, 'filled in place');
  assert.equal(out[1], a1, 'untouched past n');
  assert.deepEqual({ ...out[0] }, { ...wc(2) }, 'every field copied');
  const again = cq._wc();
  assert.equal(again, pushed[2], 'the copied-out object is handed out again');
  // A steady loop: one push, one pollInto into the same array, no new Wc objects.
  Object.assign(again, wc(7));
  cq._push(again, false);
  for (let i = 0; i < 20; i++) {
    assert.equal(cq.pollInto(out, 1), 1);
    assert.equal(out[0], a0);
    assert.equal(out[0].wrId, i === 0 ? 7 : 100 + i - 1);
    const w = cq._wc();
    assert.equal(w, pushed[2], 'the same object goes round');
    Object.assign(w, wc(100 + i));
    cq._push(w, false);
  }
  cq.poll(1);
  cq.destroy();
});

test('ring order survives wrap-around and interleaving (random model check)', () => {
  const cq = dev(LO).open().createCq(32);
  const model = [];
  const rnd = prng(7);
  let id = 0;
  for (let i = 0; i < 5000; i++) {
    if (rnd() < 0.55 && model.length < 32) {
      const x = wc(id++);
      assert.equal(cq._push(x, false), true);
      model.push(x);
    } else {
      const n = Math.floor(rnd() * 5);
      const got = cq.poll(n);
      assert.deepEqual(got, model.splice(0, n));
    }
  }
  cq.poll(100);
  cq.destroy();
});

test('overflow: completion lost, CQ_ERR async event, onOverflow hook, CQ stays in error, no crash', async () => {
  const ctx = dev(ETH).open();
  const cq = ctx.createCq(4);
  const seen = [];
  cq.onOverflow = (c) => seen.push(c);
  for (let i = 0; i < 4; i++) assert.equal(cq._push(wc(i), false), true);
  assert.equal(cq._push(wc(4), false), false, 'overflowing push fails');
  assert.equal(cq.overflowed, true);
  assert.deepEqual(seen, [cq]);
  const ev = await ctx.getAsyncEvent();
  assert.equal(ev.type, AsyncEventType.CQ_ERR);
  assert.equal(ev.cq, cq);
  assert.equal(eventTypeStr(ev.type), 'CQ error');
  assert.equal(cq._push(wc(5), false), false, 'later pushes fail too');
  assert.equal(seen.length, 1, 'hook called once');
  assert.deepEqual(cq.poll(10).map((x) => x.wrId), [0, 1, 2, 3], 'queued completions still pollable');
  assert.equal(cq._push(wc(6), false), false, 'still in error after draining');
  assert.throws(() => cq.destroy(), code('EBUSY'), 'async event not acknowledged');
  ctx.ackAsyncEvent(ev);
  assert.throws(() => ctx.ackAsyncEvent(ev), code('EINVAL'));
  cq.destroy();

  // no hook, nobody reading async events: still no crash
  const cq2 = ctx.createCq(1);
  assert.equal(cq2._push(wc(0), false), true);
  assert.equal(cq2._push(wc(1), false), false);
  assert.equal(ctx.tryGetAsyncEvent()?.cq, cq2);
});

test('an overflow with unread CQ_ERR event: destroy drops the unread event', () => {
  const ctx = dev(LO).open();
  const cq = ctx.createCq(1);
  cq._push(wc(0), false);
  cq._push(wc(1), false);
  cq.destroy();
  assert.equal(ctx.tryGetAsyncEvent(), undefined);
});

test('destroy: EBUSY with QPs attached, EINVAL twice; use after destroy', () => {
  const ctx = dev(LO).open();
  const pd = ctx.allocPd();
  const scq = ctx.createCq(4);
  const rcq = ctx.createCq(4);
  const qp = pd.createQp({ qpType: QpType.RC, sendCq: scq, recvCq: rcq, cap: { maxSendWr: 4 } });
  assert.ok(scq.qps.has(qp));
  assert.ok(rcq.qps.has(qp));
  assert.throws(() => scq.destroy(), code('EBUSY'));
  assert.throws(() => rcq.destroy(), code('EBUSY'));
  qp.destroy();
  assert.equal(scq.qps.size, 0);
  scq.destroy();
  rcq.destroy();
  assert.equal(scq.destroyed, true);
  assert.throws(() => scq.destroy(), code('EINVAL'));
  assert.throws(() => scq.poll(), code('EINVAL'));
  assert.throws(() => scq.pollInto([]), code('EINVAL'));
  assert.throws(() => scq.reqNotify(), code('EINVAL'));
  assert.equal(scq._push(wc(1), false), false);
  pd.dealloc();
});
