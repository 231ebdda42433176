// PollWaiters: the poll() waiters shared by RsConn and the tools' TCP socket.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PollWaiters } from '../../../dist/util/poll-waiters.js';

const POLLIN = 1;
const POLLOUT = 4;

/** Waiters over a socket whose readiness is `state.ready` (a revents mask). */
function make() {
  const state = { ready: 0, calls: 0 };
  // The readiness check is a method called on its owner (as RsConn#pollEvents on the socket).
  const w = new PollWaiters(state, function (events) {
    assert.equal(this, state, 'called on its owner');
    this.calls++;
    return events & this.ready;
  });
  return { state, w };
}

/** Whether `p` has settled (after the microtasks queued so far), and with what. */
async function settled(p) {
  let v = 'pending';
  p.then((x) => (v = x));
  await Promise.resolve();
  await Promise.resolve();
  return v;
}

test('one untimed waiter: resolved with its revents once ready, not before', async () => {
  const { state, w } = make();
  assert.equal(w.waiting, false);
  const p = w.wait(POLLIN, -1);
  assert.equal(w.waiting, true);
  w.wake();
  assert.equal(await settled(p), 'pending');
  state.ready = POLLOUT;
  w.wake();
  assert.equal(await settled(p), 'pending', 'POLLOUT does not answer a POLLIN wait');
  state.ready = POLLIN | POLLOUT;
  w.wake();
  assert.equal(await p, POLLIN);
  assert.equal(w.waiting, false);
  // The single-waiter slot is free again for the next wait.
  const q = w.wait(POLLOUT, -1);
  w.wake();
  assert.equal(await q, POLLOUT);
});

test('several waiters are resolved in the order they came, each with its own events', async () => {
  const { state, w } = make();
  const order = [];
  const a = w.wait(POLLIN, -1).then((r) => order.push(['a', r]));
  const b = w.wait(POLLOUT, -1).then((r) => order.push(['b', r]));
  const c = w.wait(POLLIN, -1).then((r) => order.push(['c', r]));
  state.ready = POLLIN;
  w.wake();
  await Promise.all([a, c]);
  assert.deepEqual(order, [
    ['a', POLLIN],
    ['c', POLLIN],
  ]);
  assert.equal(w.waiting, true, 'the POLLOUT waiter still waits');
  state.ready = POLLOUT;
  w.wake();
  await b;
  assert.deepEqual(order[2], ['b', POLLOUT]);
  assert.equal(w.waiting, false);
});

test('a wait with a timeout resolves with 0 when it expires and is then gone', async () => {
  const { state, w } = make();
  const t0 = Date.now();
  assert.equal(await w.wait(POLLIN, 30), 0);
  assert.ok(Date.now() - t0 >= 25);
  assert.equal(w.waiting, false);
  state.ready = POLLIN;
  const p = w.wait(POLLIN, 10_000);
  w.wake();
  assert.equal(await p, POLLIN, 'a timed wait is woken like any other (and its timer cleared)');
});

test('wake(true) resolves every waiter, ready or not; release() resolves them all with the given revents', async () => {
  const { w } = make();
  const a = w.wait(POLLIN, -1);
  const b = w.wait(POLLOUT, 5000);
  w.wake(true);
  assert.deepEqual(await Promise.all([a, b]), [0, 0]);
  const c = w.wait(POLLIN, -1);
  const d = w.wait(POLLIN, 5000);
  w.release(16);
  assert.deepEqual(await Promise.all([c, d]), [16, 16]);
  assert.equal(w.waiting, false);
});

test('a wait with an AbortSignal: resolved with 0 and forgotten once aborted, and never after', async () => {
  const { state, w } = make();
  const ac = new AbortController();
  const p = w.wait(POLLIN, -1, ac.signal);
  assert.equal(w.waiting, true);
  ac.abort();
  assert.equal(await p, 0);
  assert.equal(w.waiting, false, 'nothing left behind on this socket');
  state.ready = POLLIN;
  w.wake();
  // An already aborted signal does not wait at all.
  assert.equal(await w.wait(POLLIN, -1, ac.signal), 0);
  assert.equal(w.waiting, false);
  // Not aborted: answered as any other wait, and the signal's later abort changes nothing.
  const ac2 = new AbortController();
  state.ready = 0;
  const q = w.wait(POLLIN, 5000, ac2.signal);
  state.ready = POLLIN;
  w.wake();
  assert.equal(await q, POLLIN);
  ac2.abort();
  assert.equal(w.waiting, false);
});
