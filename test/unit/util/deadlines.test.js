import test from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnSync } from 'node:child_process';
import { armDeadline, cancelDeadline } from '../../../dist/util/deadlines.js';

const DEADLINES_URL = new URL('../../../dist/util/deadlines.js', import.meta.url).href;

function recorder(log, name) {
  return { deadlineExpired: (d) => log.push({ name, late: performance.now() - d.at }) };
}

test('deadlines of one duration expire in the order they were armed, each once and not early', async () => {
  const log = [];
  const ds = [];
  for (let i = 0; i < 5; i++) {
    ds.push(armDeadline(40, recorder(log, `a${i}`)));
    await sleep(5);
  }
  await sleep(120);
  assert.deepEqual(log.map((e) => e.name), ['a0', 'a1', 'a2', 'a3', 'a4']);
  for (const e of log) assert.ok(e.late >= -1, `reported ${-e.late} ms before its deadline`);
  for (const d of ds) assert.equal(d.target, null, 'an expired deadline keeps no target');
  await sleep(60);
  assert.equal(log.length, 5, 'nothing is reported twice');
});

test('a cancelled deadline is never reported, and the ones behind it still are', async () => {
  const log = [];
  const a = armDeadline(30, recorder(log, 'a'));
  const b = armDeadline(30, recorder(log, 'b'));
  const c = armDeadline(30, recorder(log, 'c'));
  cancelDeadline(a);
  cancelDeadline(c);
  await sleep(90);
  assert.deepEqual(log.map((e) => e.name), ['b']);
  assert.equal(a.target, null);
  cancelDeadline(b); // after expiry: nothing happens
  assert.equal(log.length, 1);
});

test('a deadline cancelled between its timer and the pass of socket reads after it is not reported', async () => {
  const log = [];
  const d = armDeadline(20, recorder(log, 'x'));
  // Node runs timers of one duration in the order they were set, all before the loop's check
  // phase: a timer of the same duration set just after the deadline runs between the two.
  await new Promise((resolve) => {
    setTimeout(() => {
      cancelDeadline(d);
      resolve();
    }, 20);
  });
  await sleep(40);
  assert.deepEqual(log, []);
});

test('durations are independent: a short deadline armed after a long one is reported first', async () => {
  const log = [];
  armDeadline(80, recorder(log, 'long'));
  armDeadline(15, recorder(log, 'short'));
  await sleep(150);
  assert.deepEqual(log.map((e) => e.name), ['short', 'long']);
});

test('an armed deadline does not keep the process alive', async () => {
  const t0 = Date.now();
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `import { armDeadline } from '${DEADLINES_URL}'; armDeadline(60000, { deadlineExpired() { process.exitCode = 3; } });`], { timeout: 20000 });
  assert.equal(r.status, 0, String(r.stderr));
  assert.ok(Date.now() - t0 < 15000);
});

test('cancelled deadlines are let go long before their duration: the queue holds about twice those still armed', async () => {
  // 20000 deadlines of a minute, each cancelled at once (the awaited message came), 100 kept armed;
  // after a full GC, count the cancelled ones something still holds.
  const child = `
    import { armDeadline, cancelDeadline } from '${DEADLINES_URL}';
    const target = { deadlineExpired() { process.exitCode = 3; } };
    const refs = [];
    const kept = [];
    for (let i = 0; i < 20000; i++) {
      const d = armDeadline(60000, target);
      if (i % 200 === 0) kept.push(d);
      else { cancelDeadline(d); refs.push(new WeakRef(d)); }
    }
    await new Promise((r) => setImmediate(r));
    globalThis.gc();
    process.stdout.write(JSON.stringify({ held: refs.filter((r) => r.deref() !== undefined).length, cancelled: refs.length, armed: kept.length }));`;
  const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', child], { timeout: 20000, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const { held, cancelled, armed } = JSON.parse(r.stdout);
  assert.equal(cancelled, 19900);
  assert.equal(armed, 100);
  assert.ok(held <= 2048, `${held} of ${cancelled} cancelled deadlines still held`);
});

test('deadlines still armed when cancelled ones are swept out expire in order, each once', async () => {
  const log = [];
  const kept = [];
  // 5000 of one duration: the queue is swept several times while they are armed.
  for (let i = 0; i < 5000; i++) {
    const d = armDeadline(50, recorder(log, `k${i}`));
    if (i % 500 === 499) kept.push(`k${i}`);
    else cancelDeadline(d);
  }
  await sleep(200);
  assert.deepEqual(log.map((e) => e.name), kept);
  for (const e of log) assert.ok(e.late >= -1, `reported ${-e.late} ms before its deadline`);
});

test('a timer that expires most of a long queue keeps the rest, in order', async () => {
  const log = [];
  // 2000 due first (more than half of the queue, and past the sweep's minimum), then 100 later ones
  // of the same duration, every tenth of those cancelled.
  for (let i = 0; i < 2000; i++) armDeadline(30, recorder(log, 'early'));
  await sleep(10);
  const late = [];
  for (let i = 0; i < 100; i++) {
    const d = armDeadline(30, recorder(log, `late${i}`));
    if (i % 10 === 0) cancelDeadline(d);
    else late.push(`late${i}`);
  }
  await sleep(120);
  assert.equal(log.filter((e) => e.name === 'early').length, 2000);
  assert.deepEqual(log.filter((e) => e.name !== 'early').map((e) => e.name), late);
  for (const e of log) assert.ok(e.late >= -1, `reported ${-e.late} ms before its deadline`);
});
