import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { Ring, nextPow2 } from '../../../dist/util/ring.js';
import { AsyncQueue } from '../../../dist/util/async-queue.js';
import { ipKey, isLoopbackIp, parseIpv6, parseIpv4 } from '../../../dist/util/ip.js';
import { code, prng } from '../../lib/fake-provider.js';

test('Ring: FIFO, deque ops, capacity, at()', () => {
  const r = new Ring(5, 2);
  assert.equal(r.capacity, 5);
  assert.equal(r.isEmpty, true);
  assert.equal(r.shift(), undefined);
  assert.equal(r.pop(), undefined);
  assert.equal(r.peek(), undefined);
  for (let i = 1; i <= 5; i++) assert.equal(r.push(i), true);
  assert.equal(r.push(6), false, 'full');
  assert.equal(r.unshift(0), false, 'full');
  assert.equal(r.isFull, true);
  assert.equal(r.length, 5);
  assert.equal(r.at(0), 1);
  assert.equal(r.at(4), 5);
  assert.equal(r.at(-1), 5);
  assert.equal(r.at(-5), 1);
  assert.equal(r.at(5), undefined);
  assert.equal(r.at(-6), undefined);
  assert.equal(r.at(1.5), undefined);
  assert.equal(r.shift(), 1);
  assert.equal(r.pop(), 5);
  assert.equal(r.unshift(10), true);
  assert.deepEqual(r.toArray(), [10, 2, 3, 4]);
  assert.deepEqual([...r], [10, 2, 3, 4]);
  assert.equal(r.peek(), 10);
  assert.equal(r.peekLast(), 4);
  assert.equal(r.removeIf((x) => x % 2 === 0), 3);
  assert.deepEqual(r.toArray(), [3]);
  r.clear();
  assert.equal(r.length, 0);
  assert.equal(nextPow2(1), 1);
  assert.equal(nextPow2(5), 8);
  for (const bad of [0, -1, 1.5, 2 ** 31, NaN]) assert.throws(() => new Ring(bad), code('EINVAL'));
  assert.throws(() => new Ring(4, 0), code('EINVAL'));
});

test('Ring: matches an array model under random operations (growth and wrap-around)', () => {
  const rnd = prng(42);
  for (const cap of [1, 3, 16, 100, Infinity]) {
    const r = new Ring(cap, 1);
    const m = [];
    for (let i = 0; i < 4000; i++) {
      const op = rnd();
      if (op < 0.35) {
        const ok = r.push(i);
        assert.equal(ok, m.length < cap);
        if (ok) m.push(i);
      } else if (op < 0.45) {
        const ok = r.unshift(i);
        assert.equal(ok, m.length < cap);
        if (ok) m.unshift(i);
      } else if (op < 0.7) {
        assert.equal(r.shift(), m.shift());
      } else if (op < 0.8) {
        assert.equal(r.pop(), m.pop());
      } else if (op < 0.95) {
        const k = Math.floor(rnd() * (m.length + 2)) - 1;
        assert.equal(r.at(k), m.at(k));
      } else {
        const mod = 2 + Math.floor(rnd() * 3);
        const removed = r.removeIf((x) => x % mod === 0);
        const keep = m.filter((x) => x % mod !== 0);
        assert.equal(removed, m.length - keep.length);
        m.splice(0, m.length, ...keep);
      }
      assert.equal(r.length, m.length);
    }
    assert.deepEqual(r.toArray(), m);
  }
});

test('AsyncQueue: a signal passed to many waits is listened to once; aborting it cancels only its waits, in order', async () => {
  const { getEventListeners } = await import('node:events');
  const q = new AsyncQueue();
  const ac = new AbortController();
  const other = new AbortController();
  // A consumer loop: the same signal on every wait, each wait satisfied by a push.
  for (let i = 0; i < 50; i++) {
    const p = q.shift(ac.signal, 'op_loop');
    q.push({ i });
    assert.equal((await p).i, i);
  }
  assert.equal(getEventListeners(ac.signal, 'abort').length, 1);
  const w1 = q.shift(ac.signal, 'op_a');
  const w2 = q.shift(other.signal, 'op_b');
  const w3 = q.shift(ac.signal, 'op_c');
  const w4 = q.shift();
  const order = [];
  w1.catch((e) => order.push(e.op));
  w3.catch((e) => order.push(e.op));
  ac.abort('stop');
  await assert.rejects(w1, (e) => e.code === 'ABORT_ERR' && e.name === 'AbortError' && e.op === 'op_a' && e.cause === 'stop');
  await assert.rejects(w3, (e) => e.code === 'ABORT_ERR' && e.name === 'AbortError' && e.op === 'op_c' && e.cause === 'stop');
  assert.deepEqual(order, ['op_a', 'op_c']);
  assert.equal(q.waiting, 2);
  // The remaining waits keep their order: the next item goes to w2, the one after to w4.
  q.push({ n: 'x' });
  q.push({ n: 'y' });
  assert.equal((await w2).n, 'x');
  assert.equal((await w4).n, 'y');
  // An already aborted signal rejects at once, without waiting.
  await assert.rejects(q.shift(ac.signal, 'op_late'), (e) => e.code === 'ABORT_ERR' && e.name === 'AbortError' && e.op === 'op_late');
  assert.equal(q.waiting, 0);
});

test('AsyncQueue: queueing, waiters, abort, close, remove', async () => {
  const delivered = [];
  const q = new AsyncQueue((x) => delivered.push(x));
  const a = { n: 1 };
  const b = { n: 2 };
  q.push(a);
  assert.equal(q.length, 1);
  assert.equal(await q.shift(), a);
  const p = q.shift();
  assert.equal(q.waiting, 1);
  q.push(b);
  assert.equal(await p, b);
  assert.deepEqual(delivered, [a, b]);
  const ac = new AbortController();
  const aborted = q.shift(ac.signal, 'op_x');
  ac.abort('why');
  await assert.rejects(aborted, (e) => e.code === 'ABORT_ERR' && e.name === 'AbortError' && e.op === 'op_x' && e.cause === 'why');
  assert.equal(q.waiting, 0);
  q.push({ n: 3 });
  q.push({ n: 4 });
  assert.equal(q.remove((x) => x.n === 3), 1);
  assert.equal(q.tryShift().n, 4);
  assert.equal(q.tryShift(), undefined);
  const pending = q.shift();
  await tick();
  q.close();
  assert.equal(await pending, undefined);
  assert.equal(await q.shift(), undefined);
  assert.equal(q.push({ n: 5 }), false);
  assert.equal(q.closed, true);
});

test('ip functions: canonical keys and loopback detection', () => {
  assert.equal(parseIpv4('1.2.3.4'), 0x01020304);
  assert.equal(parseIpv4('256.1.1.1'), undefined);
  assert.equal(parseIpv4('1.2.3'), undefined);
  assert.equal(parseIpv4('1.2.3.4.5'), undefined);
  assert.equal(parseIpv4('255.255.255.255'), 0xffffffff);
  assert.equal(parseIpv4('010.0.0.1'), 0x0a000001, 'leading zeros are decimal');
  for (const bad of ['', '1..2.3', '.1.2.3', '1.2.3.', '1.2.3.4 ', ' 1.2.3.4', '1.2.3.0004', '1.2.3.256', '1.2.3.-1', '1.2.3.x', '１.2.3.4']) {
    assert.equal(parseIpv4(bad), undefined, JSON.stringify(bad));
  }
  assert.deepEqual(parseIpv6('::'), [0, 0, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual(parseIpv6('1::'), [1, 0, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual(parseIpv6('::ffff:1.2.3.4'), [0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304]);
  assert.deepEqual(parseIpv6('1:2:3:4:5:6:7:8'), [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(parseIpv6('1:2:3:4:5:6:1.2.3.4'), [1, 2, 3, 4, 5, 6, 0x102, 0x304]);
  assert.equal(parseIpv6('1:2:3:4:5:6:7'), undefined);
  assert.equal(parseIpv6('1::2::3'), undefined);
  assert.equal(parseIpv6(':::'), undefined);
  assert.equal(parseIpv6('1:2:3:4:5:6:7:8::'), undefined);
  assert.equal(parseIpv6('12345::'), undefined);
  assert.equal(parseIpv6('g::'), undefined);
  assert.equal(ipKey('::ffff:10.0.0.1'), '10.0.0.1');
  assert.equal(ipKey('::FFFF:a00:1'), '10.0.0.1');
  assert.equal(ipKey('fe80:0::1%eth0'), 'fe80:0:0:0:0:0:0:1');
  assert.equal(ipKey('[::1]'), '0:0:0:0:0:0:0:1');
  assert.equal(ipKey('host.example'), undefined);
  assert.equal(isLoopbackIp('127.1.2.3'), true);
  assert.equal(isLoopbackIp('::1'), true);
  assert.equal(isLoopbackIp('::ffff:127.0.0.1'), true);
  assert.equal(isLoopbackIp('128.0.0.1'), false);
  assert.equal(isLoopbackIp('::2'), false);
  assert.equal(isLoopbackIp('nope'), false);
});
