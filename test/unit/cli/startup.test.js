// cli/startup.js, loaded first by every tool: V8's background threads at a lower priority
// (RDMACM_JIT_NICE, default 5), the main thread untouched. Checked in a child process that loads
// the module and reports the nice value of each of its threads (Linux: /proc/self/task/*/stat).
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';

const STARTUP = new URL('../../../dist/cli/startup.js', import.meta.url).href;
const linux = existsSync('/proc/self/task');
/** The nice value this test runs at (a child starts with it; startup.js never raises priority). */
const base = os.getPriority();
const at = (n) => Math.max(base, n);

/** This process's environment without `name` (the child then sees the tool's default), plus `env`. */
function childEnv(name, env) {
  const e = { ...process.env, ...env };
  if (!(name in env)) delete e[name];
  return e;
}

/** { main, others: [nice...] } of a fresh process that imported startup.js under `env`. */
function nices(env) {
  const script = `
    await import(${JSON.stringify(STARTUP)});
    const fs = await import('node:fs');
    const nice = (t) => Number(fs.readFileSync('/proc/self/task/' + t + '/stat', 'utf8').split(') ')[1].split(' ')[16]);
    const tids = fs.readdirSync('/proc/self/task').map(Number);
    console.log(JSON.stringify({ main: nice(process.pid), others: tids.filter((t) => t !== process.pid).map(nice) }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: childEnv('RDMACM_JIT_NICE', env), encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out.trim().split('\n').pop());
}

test('by default every thread but the main one runs at nice 5; the main thread keeps its own', { skip: !linux && 'no /proc/self/task' }, () => {
  const r = nices({});
  assert.equal(r.main, base);
  assert.ok(r.others.length > 0, 'V8 has worker threads');
  for (const n of r.others) assert.equal(n, at(5));
});

test('RDMACM_JIT_NICE chooses the value; 0 and a bad value fall back as documented', { skip: !linux && 'no /proc/self/task' }, () => {
  assert.deepEqual(new Set(nices({ RDMACM_JIT_NICE: '12' }).others), new Set([at(12)]));
  assert.deepEqual(new Set(nices({ RDMACM_JIT_NICE: '0' }).others), new Set([base]));
  assert.deepEqual(new Set(nices({ RDMACM_JIT_NICE: 'x' }).others), new Set([at(5)]));
  assert.equal(nices({ RDMACM_JIT_NICE: '12' }).main, base);
});

const hasChrt = linux && ['/usr/bin/chrt', '/bin/chrt', '/usr/sbin/chrt'].some((p) => existsSync(p));
/** SCHED_IDLE, as /proc/<tid>/stat field 41 (policy) shows it. */
const SCHED_IDLE = 5;

/**
 * The scheduling policy of every thread of a fresh process that imported startup.js and called
 * idleBackgroundThreads() under `env`, once they are all SCHED_IDLE or after `waitMs`.
 */
function policies(env, waitMs) {
  const script = `
    const m = await import(${JSON.stringify(STARTUP)});
    await m.idleBackgroundThreads();
    const fs = await import('node:fs');
    const policy = (t) => Number(fs.readFileSync('/proc/self/task/' + t + '/stat', 'utf8').split(') ')[1].split(' ')[38]);
    const others = () => fs.readdirSync('/proc/self/task').map(Number).filter((t) => t !== process.pid);
    const t0 = Date.now();
    while (Date.now() - t0 < ${waitMs} && !others().every((t) => policy(t) === ${SCHED_IDLE})) await new Promise((r) => setTimeout(r, 20));
    console.log(JSON.stringify({ main: policy(process.pid), others: others().map(policy) }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: childEnv('RDMACM_JIT_IDLE', env), encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out.trim().split('\n').pop());
}

test('idleBackgroundThreads: every thread but the main one goes under SCHED_IDLE; the main thread stays SCHED_OTHER', { skip: !hasChrt && 'no chrt' }, () => {
  const r = policies({}, 10_000);
  assert.equal(r.main, 0);
  assert.ok(r.others.length > 0);
  assert.deepEqual(new Set(r.others), new Set([SCHED_IDLE]));
});

test('idleBackgroundThreads: RDMACM_JIT_IDLE=0 leaves every thread SCHED_OTHER', { skip: !hasChrt && 'no chrt' }, () => {
  const r = policies({ RDMACM_JIT_IDLE: '0' }, 500);
  assert.deepEqual(new Set([r.main, ...r.others]), new Set([0]));
});

/**
 * deferOptimization in a fresh process (natives syntax is a command-line flag; compile jobs on the
 * main thread, so a function is optimised before the next statement): whether a hot function is
 * TurboFan code after each of `ticks` (the units passed to the returned function, `null` for a
 * run of the hot loop with no tick before it).
 */
function deferred(units, ticks, env = {}, { cpus = null } = {}) {
  const script = `
    const m = await import(${JSON.stringify(STARTUP)});
    const done = m.deferOptimization(${units});
    function hot(a, b) { return (a * 31 + b) | 0; }
    const TURBOFANNED = 64;
    const seen = [];
    for (const t of ${JSON.stringify(ticks)}) {
      if (t !== null) done(t);
      let s = 0;
      for (let i = 0; i < 200000; i++) s = hot(s, i);
      seen.push((%GetOptimizationStatus(hot) & TURBOFANNED) !== 0);
    }
    console.log(JSON.stringify(seen));`;
  const node = [process.execPath, '--allow-natives-syntax', '--no-concurrent-recompilation', '--input-type=module', '-e', script];
  // `cpus`: the child runs on that list of CPUs only (what os.availableParallelism() counts).
  const [cmd, ...args] = cpus === null ? node : ['taskset', '-c', cpus, ...node];
  const r = spawnSync(cmd, args, { env: childEnv('RDMACM_JIT_DEFER', env), encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const hasTaskset = linux && ['/usr/bin/taskset', '/bin/taskset'].some((p) => existsSync(p));
const oneCpu = { cpus: '0' };

test('deferOptimization, on one CPU: no TurboFan code until the units are done, then a hot function gets it', { skip: !hasTaskset && 'no taskset' }, () => {
  // A hot loop before any unit, after 1 and 2 of 3, then after the third.
  assert.deepEqual(deferred(3, [null, 1, 1, 1], {}, oneCpu), [false, false, false, true]);
  // Units counted together: 2 then 5 of 6.
  assert.deepEqual(deferred(6, [2, 5], {}, oneCpu), [false, true]);
  // A value of RDMACM_JIT_DEFER that is not a count falls back to the tool's.
  assert.deepEqual(deferred(2, [null, 1, 1], { RDMACM_JIT_DEFER: 'x' }, oneCpu), [false, false, true]);
});

test('deferOptimization: RDMACM_JIT_DEFER chooses the count whatever the CPUs; 0 (or no units) keeps TurboFan on', () => {
  assert.deepEqual(deferred(1000, [null, 1], { RDMACM_JIT_DEFER: '1' }), [false, true]);
  assert.deepEqual(deferred(1000, [null, 1], { RDMACM_JIT_DEFER: '0' }), [true, true]);
  assert.deepEqual(deferred(0, [null]), [true]);
});

// 4: startup.js FEW_CPUS (not imported here: importing it renices this process's threads).
test('deferOptimization: with 4 CPUs or more, TurboFan stays on unless RDMACM_JIT_DEFER says otherwise', { skip: os.availableParallelism() < 4 && 'fewer than 4 CPUs here' }, () => {
  assert.deepEqual(deferred(3, [null, 1, 1, 1]), [true, true, true, true]);
});
