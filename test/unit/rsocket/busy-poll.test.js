// rpoll's busy-poll (rsocket.c's polling_time): a poll that has to wait keeps the event loop from
// sleeping for `pollingTime` µs from the start of the wait, and no longer than someone waits;
// 0 sleeps at once. The default is rsocket.c's 10 µs, or RDMACM_RS_POLLING_TIME.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import * as rs from '../../../dist/rsocket/index.js';
import { withRsPair } from '../../lib/rs-pair.js';
import { sleep } from '../../lib/wait.js';

const { POLLIN, RS_DEFAULTS, RsConn, RsListener } = rs;
const T = { timeout: 30_000 };

/** A connected pair whose client busy-polls for `us` µs. */
async function withPair(us, fn) {
  return withRsPair({}, async (p) => {
    // The option is read at each wait: set it on the connected client directly.
    p.c.cfg.pollingTime = us;
    await fn(p);
  });
}

/** The event loop's utilisation while `ms` pass: near 1 when it never sleeps, near 0 idle. */
async function utilisation(ms) {
  const e0 = performance.eventLoopUtilization();
  await sleep(ms);
  return performance.eventLoopUtilization(e0).utilization;
}

test('the default is rsocket.c polling_time, 10 µs; a listener passes its own on', T, () => {
  assert.equal(RS_DEFAULTS.pollingTime, 10);
  if (process.env.RDMACM_RS_POLLING_TIME === undefined) assert.equal(new RsConn().cfg.pollingTime, 10);
  assert.equal(new RsConn({ pollingTime: 0 }).cfg.pollingTime, 0);
  assert.equal(new RsListener({ pollingTime: 25 }).cfg.pollingTime, 25);
});

test('RDMACM_RS_POLLING_TIME sets the default; a value that is not a count is ignored', T, () => {
  const code = "import('./dist/rsocket/index.js').then((m) => process.stdout.write(String(new m.RsConn().cfg.pollingTime)))";
  const run = (v) => spawnSync(process.execPath, ['-e', code], { cwd: new URL('../../..', import.meta.url), env: { ...process.env, RDMACM_RS_POLLING_TIME: v }, encoding: 'utf8', timeout: 20_000 }).stdout;
  assert.equal(run('0'), '0');
  assert.equal(run('250'), '250');
  assert.equal(run('-3'), '10');
  assert.equal(run('ten'), '10');
});

test('a waiting poll keeps the loop awake for pollingTime, then lets it sleep; the data still wakes it', T, () =>
  withPair(150_000, async ({ c, s }) => {
    const waiting = c.poll(POLLIN);
    assert.equal(c._busyPolling, true, 'busy-polling from the start of the wait');
    const busy = await utilisation(60);
    assert.ok(busy > 0.5, `loop utilisation while busy-polling: ${busy.toFixed(2)}`);
    await sleep(150);
    assert.equal(c._busyPolling, false, 'stopped after pollingTime');
    const idle = await utilisation(60);
    assert.ok(idle < 0.5, `loop utilisation after pollingTime: ${idle.toFixed(2)}`);
    assert.equal(s.send(Buffer.from('x')), 1);
    assert.equal(await waiting, POLLIN);
  }));

test('the busy-poll ends as soon as nobody waits', T, () =>
  withPair(10_000_000, async ({ c, s }) => {
    const waiting = c.poll(POLLIN);
    assert.equal(c._busyPolling, true);
    await sleep(20);
    assert.equal(s.send(Buffer.from('y')), 1);
    assert.equal(await waiting, POLLIN);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    assert.equal(c._busyPolling, false, 'no waiter left: the loop may sleep');
    const idle = await utilisation(60);
    assert.ok(idle < 0.5, `loop utilisation with nobody waiting: ${idle.toFixed(2)}`);
  }));

test('pollingTime 0: a wait lets the loop sleep at once', T, () =>
  withPair(0, async ({ c, s }) => {
    const waiting = c.poll(POLLIN);
    assert.equal(c._busyPolling, false);
    const idle = await utilisation(60);
    assert.ok(idle < 0.5, `loop utilisation: ${idle.toFixed(2)}`);
    assert.equal(s.send(Buffer.from('z')), 1);
    assert.equal(await waiting, POLLIN);
  }));

test('a poll that finds its events ready does not busy-poll', T, () =>
  withPair(10_000_000, async ({ c, s }) => {
    assert.equal(s.send(Buffer.from('ready')), 5);
    const t0 = Date.now();
    while (!((await c.poll(POLLIN, 0)) & POLLIN)) {
      if (Date.now() - t0 > 5000) throw new Error('timed out');
      await sleep(2);
    }
    assert.equal(await c.poll(POLLIN), POLLIN);
    assert.equal(c._busyPolling, false);
  }));

test("the first busy-poll keeps code optimised against another socket's busy-poll fields (V8)", T, () => {
  const src = `
    const { RsConn } = await import(${JSON.stringify(new URL('../../../dist/rsocket/index.js', import.meta.url).href)});
    const a = new RsConn(), b = new RsConn();
    function use(x) { return (x.spinning ? 1 : 0) + (x.spinUntil > 0 ? 2 : 0); }
    %PrepareFunctionForOptimization(use);
    use(b); use(b);
    %OptimizeFunctionOnNextCall(use);
    use(b);
    const before = (%GetOptimizationStatus(use) & 16) !== 0;
    a.busyPoll(); // the first wait of any socket: the flag set, the deadline a performance.now() value
    const after = (%GetOptimizationStatus(use) & 16) !== 0;
    console.log(JSON.stringify([before, after, use(a), %HaveSameMap(a, b)]));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim()), [true, true, 3, true]);
});
