// Awaiting completions: cq.waitForCompletions() and cq.completions(). The classic verbs race —
// arming the CQ after the completion is already queued, then waiting for an event that never
// comes — must be impossible here, with or without a completion channel; a completion arriving at
// any moment relative to the wait is seen; events the wait consumes are acknowledged; abort and
// destroy end the wait.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LO, dev, code, aborted, wc } from '../../lib/fake-provider.js';

const tick = () => new Promise((r) => setImmediate(r));
/** Whether `p` has settled after the pending callbacks ran. */
async function settled(p) {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await tick();
  return done;
}

/** A context with a CQ of 16 entries, on a fresh channel when `withChannel`. */
function setup(withChannel) {
  const ctx = dev(LO).open();
  const ch = withChannel ? ctx.createCompChannel() : undefined;
  const cq = ctx.createCq(16, ch);
  const close = () => {
    if (!cq.destroyed) cq.destroy();
    ch?.destroy();
  };
  return { ctx, ch, cq, close };
}

for (const withChannel of [false, true]) {
  const kind = withChannel ? 'with a channel' : 'without a channel';

  test(`waitForCompletions ${kind}: completions already queued resolve at once (the README race)`, async () => {
    const { ch, cq, close } = setup(withChannel);
    cq._push(wc(1), false);
    cq._push(wc(2), false);
    // The completion is in the CQ before anyone armed it: arming now raises no event, and a
    // wait on the channel alone would never return.
    assert.equal(await cq.waitForCompletions(AbortSignal.timeout(2000)), 2);
    assert.deepEqual(cq.poll(4).map((w) => w.wrId), [1, 2]);
    if (ch) assert.equal(ch.pending, 0);
    close();
  });

  test(`waitForCompletions ${kind}: a completion arriving at any moment after the call is seen`, async () => {
    const { ch, cq, close } = setup(withChannel);
    const schedules = [
      (f) => f(), // synchronously, right after the call started
      (f) => queueMicrotask(f),
      (f) => process.nextTick(f),
      (f) => setImmediate(f),
      (f) => setTimeout(f, 5),
    ];
    let id = 0;
    for (const later of schedules) {
      const p = cq.waitForCompletions(AbortSignal.timeout(2000));
      const mine = id++;
      later(() => cq._push(wc(mine), false));
      assert.equal(await p, 1);
      assert.deepEqual(cq.poll(4).map((w) => w.wrId), [mine]);
    }
    if (ch) {
      assert.equal(ch.pending, 0, 'no stray events left on the channel');
      assert.equal(cq.unackedEvents, 0, 'every event the wait took was acknowledged');
      assert.ok(cq.compEventsCompleted >= 1, 'the channel was used');
    }
    close(); // would throw EBUSY with an unacknowledged event
  });

  test(`waitForCompletions ${kind}: several waiters wake on one completion`, async () => {
    const { cq, close } = setup(withChannel);
    const ps = [cq.waitForCompletions(), cq.waitForCompletions(), cq.waitForCompletions()];
    assert.equal(await settled(ps[0]), false);
    cq._push(wc(0), false);
    assert.deepEqual(await Promise.all(ps), [1, 1, 1]);
    close();
  });

  test(`waitForCompletions ${kind}: abort rejects with an AbortError, and the CQ keeps working`, async () => {
    const { cq, close } = setup(withChannel);
    const ac = new AbortController();
    const p = cq.waitForCompletions(ac.signal);
    assert.equal(await settled(p), false);
    ac.abort(new Error('enough'));
    await assert.rejects(p, (e) => aborted()(e) && e.cause.message === 'enough');
    await assert.rejects(cq.waitForCompletions(ac.signal), aborted(), 'already aborted');
    cq._push(wc(7), false);
    assert.equal(await cq.waitForCompletions(), 1);
    // Queued completions win over an aborted signal.
    assert.equal(await cq.waitForCompletions(ac.signal), 1);
    close();
  });

  test(`waitForCompletions ${kind}: destroying the CQ rejects the wait with EINVAL`, async () => {
    const { cq, close } = setup(withChannel);
    const p = cq.waitForCompletions();
    assert.equal(await settled(p), false);
    cq.destroy();
    await assert.rejects(p, code('EINVAL'));
    await assert.rejects(cq.waitForCompletions(), code('EINVAL'));
    close();
  });

  test(`completions() ${kind}: every completion once, in order, as they come; max ends it`, async () => {
    const { cq, close } = setup(withChannel);
    cq._push(wc(0), false);
    const feeder = (async () => {
      for (let i = 1; i < 12; i++) {
        if (i % 3 === 0) await new Promise((r) => setTimeout(r, 2));
        else await tick();
        cq._push(wc(i), false);
        if (i === 5) cq._push(wc(100 + i), false); // two at once
      }
    })();
    const got = [];
    for await (const w of cq.completions({ max: 13, signal: AbortSignal.timeout(3000) })) got.push(w.wrId);
    await feeder;
    assert.deepEqual(got, [0, 1, 2, 3, 4, 5, 105, 6, 7, 8, 9, 10, 11]);
    assert.equal(cq.pending, 0);
    close();
  });

  test(`completions() ${kind}: ends when the CQ is destroyed; abort rejects the pending step`, async () => {
    const { cq, close } = setup(withChannel);
    const got = [];
    const loop = (async () => {
      for await (const w of cq.completions()) got.push(w.wrId);
      return 'ended';
    })();
    cq._push(wc(1), false);
    await tick();
    assert.deepEqual(got, [1]);
    cq.destroy();
    assert.equal(await loop, 'ended');

    const second = setup(withChannel);
    const ac = new AbortController();
    const it = second.cq.completions({ signal: ac.signal });
    const step = it.next();
    assert.equal(await settled(step), false);
    ac.abort();
    await assert.rejects(step, aborted());
    second.close();
    close();
  });
}

test('completions(): max 0 yields nothing; bad max is EINVAL', async () => {
  const { cq, close } = setup(false);
  cq._push(wc(1), false);
  const got = [];
  for await (const w of cq.completions({ max: 0 })) got.push(w);
  assert.deepEqual(got, []);
  assert.equal(cq.pending, 1);
  for (const max of [-1, 1.5, NaN, '3']) assert.throws(() => cq.completions({ max }), code('EINVAL'), `max ${max}`);
  close();
});

test('with a shared channel, waiting on one CQ leaves the other CQ\'s events on the channel', async () => {
  const ctx = dev(LO).open();
  const ch = ctx.createCompChannel();
  const a = ctx.createCq(4, ch);
  const b = ctx.createCq(4, ch);
  b.reqNotify();
  const p = a.waitForCompletions(AbortSignal.timeout(2000));
  b._push(wc(9), false);
  assert.equal(await settled(p), false, 'b\'s completion does not wake a');
  assert.equal(ch.pending, 1, 'b\'s event is on the channel for its reader');
  assert.equal(await ch.getCqEvent(), b);
  b.ackEvents(1);
  a._push(wc(1), false);
  assert.equal(await p, 1);
  assert.equal(ch.pending, 0);
  assert.equal(a.unackedEvents, 0);
  a.destroy();
  b.destroy();
  ch.destroy();
});

test('an event queued before the wait (the user armed earlier) is left for its reader; the wait still works', async () => {
  const { ch, cq, close } = setup(true);
  cq.reqNotify();
  cq._push(wc(1), false);
  assert.equal(ch.pending, 1);
  assert.deepEqual(cq.poll(1).map((w) => w.wrId), [1]);
  const p = cq.waitForCompletions(AbortSignal.timeout(2000));
  assert.equal(await settled(p), false, 'a stale event does not count as a completion');
  cq._push(wc(2), false);
  assert.equal(await p, 1);
  assert.equal(ch.pending, 1, 'the stale event is still there');
  assert.equal(await ch.getCqEvent(), cq);
  cq.ackEvents(1);
  close();
});

test('an overflowed CQ: queued completions are still returned, then EOVERFLOW instead of a wait forever', async () => {
  const ctx = dev(LO).open();
  const cq = ctx.createCq(2);
  cq._push(wc(0), false);
  cq._push(wc(1), false);
  cq._push(wc(2), false); // lost: CQ_ERR
  const got = [];
  await assert.rejects(
    (async () => {
      for await (const w of cq.completions()) got.push(w.wrId);
    })(),
    code('EOVERFLOW'),
  );
  assert.deepEqual(got, [0, 1]);
  ctx.ackAsyncEvent(ctx.tryGetAsyncEvent());
  cq.destroy();
});
