import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { LO, ETH, dev, code, aborted, wc } from '../../lib/fake-provider.js';
import { RdmaError } from '../../../dist/errors.js';

function setup() {
  const ctx = dev(LO).open();
  const ch = ctx.createCompChannel();
  const cq = ctx.createCq(16, ch);
  return { ctx, ch, cq };
}

function teardown({ ch, cq }) {
  cq.poll(100);
  if (cq.unackedEvents) cq.ackEvents(cq.unackedEvents);
  cq.destroy();
  ch.destroy();
}

test('reqNotify is one-shot: the next completion fires one event', async () => {
  const s = setup();
  const { ch, cq } = s;
  cq._push(wc(1), false);
  assert.equal(ch.pending, 0, 'not armed: no event');
  cq.reqNotify();
  assert.equal(cq.armed, true);
  cq._push(wc(2), false);
  assert.equal(cq.armed, false);
  assert.equal(ch.pending, 1);
  cq._push(wc(3), false);
  assert.equal(ch.pending, 1, 'disarmed after firing');
  assert.equal(await ch.getCqEvent(), cq);
  assert.equal(cq.unackedEvents, 1);
  cq.ackEvents(1);
  assert.equal(cq.compEventsCompleted, 1);
  teardown(s);
});

test('arming with completions already queued does not fire retroactively', () => {
  const s = setup();
  const { ch, cq } = s;
  cq._push(wc(1), false);
  cq._push(wc(2), true);
  cq.reqNotify();
  assert.equal(ch.pending, 0);
  cq.reqNotify(true);
  assert.equal(ch.pending, 0);
  cq._push(wc(3), false);
  assert.equal(ch.pending, 1, 'the next new completion fires');
  assert.equal(ch.tryGetCqEvent(), cq);
  cq.ackEvents(1);
  teardown(s);
});

test('solicited-only arming fires on the next solicited completion only', () => {
  const s = setup();
  const { ch, cq } = s;
  cq.reqNotify(true);
  cq._push(wc(1), false);
  cq._push(wc(2), false);
  assert.equal(ch.pending, 0);
  assert.equal(cq.armed, true);
  cq._push(wc(3), true);
  assert.equal(ch.pending, 1);
  assert.equal(cq.armed, false);
  cq._push(wc(4), true);
  assert.equal(ch.pending, 1, 'one-shot');
  // upgrade: solicited then next -> any completion fires
  cq.reqNotify(true);
  cq.reqNotify(false);
  cq._push(wc(5), false);
  assert.equal(ch.pending, 2);
  // no downgrade: next then solicited -> still any completion
  cq.reqNotify(false);
  cq.reqNotify(true);
  cq._push(wc(6), false);
  assert.equal(ch.pending, 3);
  while (ch.tryGetCqEvent()) cq.ackEvents(1);
  teardown(s);
});

test('a CQ without channel can be armed; firing is harmless', () => {
  const cq = dev(LO).open().createCq(2);
  cq.reqNotify();
  assert.equal(cq._push(wc(1), false), true);
  assert.equal(cq.armed, false);
  cq.poll(2);
  cq.destroy();
});

test('events queue while nobody waits and are read in order; waiters are served FIFO', async () => {
  const ctx = dev(LO).open();
  const ch = ctx.createCompChannel();
  const a = ctx.createCq(4, ch);
  const b = ctx.createCq(4, ch);
  a.reqNotify();
  b.reqNotify();
  b._push(wc(1), false);
  a._push(wc(2), false);
  assert.equal(ch.pending, 2);
  assert.equal(await ch.getCqEvent(), b);
  assert.equal(await ch.getCqEvent(), a);
  // two waiters, then two events
  const p1 = ch.getCqEvent();
  const p2 = ch.getCqEvent();
  await tick();
  a.reqNotify();
  b.reqNotify();
  a._push(wc(3), false);
  b._push(wc(4), false);
  assert.equal(await p1, a);
  assert.equal(await p2, b);
  assert.throws(() => a.destroy(), code('EBUSY'), 'unacknowledged events');
  assert.throws(() => a.ackEvents(3), code('EINVAL'), 'more than read');
  assert.throws(() => a.ackEvents(-1), code('EINVAL'));
  a.ackEvents(2);
  b.ackEvents(1);
  b.ackEvents(1);
  a.poll(4);
  b.poll(4);
  assert.throws(() => ch.destroy(), code('EBUSY'), 'CQs still on the channel');
  a.destroy();
  b.destroy();
  ch.destroy();
});

test('getCqEvent abort: pre-aborted and while waiting reject with an AbortError; the event is not lost', async () => {
  const s = setup();
  const { ch, cq } = s;
  const ac0 = new AbortController();
  ac0.abort(new Error('already'));
  await assert.rejects(ch.getCqEvent(ac0.signal), aborted());

  const ac = new AbortController();
  const p = ch.getCqEvent(ac.signal);
  await tick();
  const reason = new Error('stop');
  ac.abort(reason);
  await assert.rejects(p, (e) => {
    aborted('ibv_get_cq_event', reason)(e);
    return true;
  });
  assert.equal(cq.unackedEvents, 0);
  const later = ch.getCqEvent(new AbortController().signal);
  cq.reqNotify();
  cq._push(wc(1), false);
  assert.equal(await later, cq, 'delivered to the live waiter, not the aborted one');
  cq.ackEvents(1);
  teardown(s);
});

test('destroying a CQ drops its unread events; destroying the channel ends reads', async () => {
  const ctx = dev(ETH).open();
  const ch = ctx.createCompChannel();
  const cq = ctx.createCq(4, ch);
  cq.reqNotify();
  cq._push(wc(1), false);
  assert.equal(ch.pending, 1);
  cq.destroy(); // the event was never read: not counted, so destroy is allowed
  assert.equal(ch.pending, 0);
  const waiting = ch.getCqEvent();
  ch.destroy();
  await assert.rejects(waiting, code('EBADF'));
  await assert.rejects(ch.getCqEvent(), code('EBADF'));
  assert.throws(() => ch.tryGetCqEvent(), code('EBADF'));
  assert.throws(() => ch.destroy(), code('EINVAL'));
  assert.equal(ch.destroyed, true);
});

test('async iteration yields CQs and ends when the channel is destroyed', async () => {
  const ctx = dev(LO).open();
  const ch = ctx.createCompChannel();
  const cq = ctx.createCq(64, ch);
  const got = [];
  const loop = (async () => {
    for await (const c of ch) {
      got.push(c);
      c.ackEvents(1);
      c.poll(64);
      if (got.length < 3) c.reqNotify();
    }
    return 'ended';
  })();
  cq.reqNotify();
  for (let i = 0; i < 3; i++) {
    await tick();
    cq._push(wc(i), false);
  }
  await tick();
  assert.deepEqual(got, [cq, cq, cq]);
  cq.destroy();
  ch.destroy();
  assert.equal(await loop, 'ended');

  // break out early: the channel stays usable
  const ch2 = ctx.createCompChannel();
  const cq2 = ctx.createCq(4, ch2);
  cq2.reqNotify();
  cq2._push(wc(1), false);
  for await (const c of ch2) {
    assert.equal(c, cq2);
    break;
  }
  assert.equal(ch2.destroyed, false);
  cq2.ackEvents(1);
  cq2.reqNotify();
  cq2._push(wc(2), false);
  assert.equal(await ch2.getCqEvent(), cq2);
  cq2.ackEvents(1);
  cq2.poll(4);
  cq2.destroy();
  ch2.destroy();
});

test('async events: wait, abort, ack, unknown types', async () => {
  const ctx = dev(LO).open();
  const cq = ctx.createCq(1);
  const p = ctx.getAsyncEvent();
  await tick();
  ctx._raiseAsyncEvent({ type: 4, cq });
  const ev = await p;
  assert.equal(ev.type, 4);
  assert.throws(() => cq.destroy(), code('EBUSY'));
  ctx.ackAsyncEvent(ev);
  assert.throws(() => ctx.ackAsyncEvent(ev), code('EINVAL'));
  assert.throws(() => ctx.ackAsyncEvent({ type: 0 }), code('EINVAL'));
  assert.throws(() => ctx._raiseAsyncEvent({ type: 99 }), code('EINVAL'));
  const ac = new AbortController();
  const q = ctx.getAsyncEvent(ac.signal);
  ac.abort();
  await assert.rejects(q, aborted());
  ctx._raiseAsyncEvent({ type: 9, portNum: 1 });
  const port = ctx.tryGetAsyncEvent();
  assert.equal(port.portNum, 1);
  ctx.ackAsyncEvent(port);
  cq.destroy();
});

test('returning from the iterator while a read is pending does not consume an event', async () => {
  const ctx = dev(LO).open();
  const ch = ctx.createCompChannel();
  const cq = ctx.createCq(4, ch);
  const it = ch[Symbol.asyncIterator]();
  const next = it.next();
  await tick();
  assert.deepEqual(await it.return(), { done: true, value: undefined });
  assert.deepEqual(await next, { done: true, value: undefined });
  assert.deepEqual(await it.next(), { done: true, value: undefined });
  cq.reqNotify();
  cq._push(wc(1), false);
  assert.equal(ch.pending, 1, 'the event stayed on the channel');
  assert.equal(cq.unackedEvents, 0);
  assert.equal(ch.tryGetCqEvent(), cq);
  cq.ackEvents(1);
  cq.poll(4);
  cq.destroy();
  // createCq accepts null for "no channel"
  const plain = ctx.createCq(1, null);
  assert.equal(plain.channel, undefined);
  plain.destroy();
  ch.destroy();
});

test('the internal _sink is told once per queued event, after it is queued; a waiting reader still gets it', { timeout: 5000 }, async () => {
  const s = setup();
  const { ch, cq } = s;
  const seen = [];
  ch._sink = { cqEventQueued: () => seen.push(ch.pending) };
  cq.reqNotify();
  cq._push(wc(1), false);
  assert.deepEqual(seen, [1], 'called with the event already queued');
  cq._push(wc(2), false);
  assert.deepEqual(seen, [1], 'not armed: no event, no call');
  assert.equal(ch.tryGetCqEvent(), cq);
  cq.ackEvents(1);
  // A pending getCqEvent() takes the event at once: nothing is queued, the hook is not called.
  const p = ch.getCqEvent();
  cq.reqNotify();
  cq._push(wc(3), false);
  assert.equal(await p, cq);
  assert.deepEqual(seen, [1]);
  cq.ackEvents(1);
  ch._sink = null;
  teardown(s);
});
