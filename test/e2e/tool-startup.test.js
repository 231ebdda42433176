// Which modules a connection tool loads (src/cli/rdma.ts): over the soft iWARP device neither the
// soft RoCE transport nor the native backend (nor rsockets), each checked on both processes of a
// real rping run through a module loader hook (test/fixtures/module-log) that logs every module a
// process loads; the RoCE transport when the run needs it: a RoCE-pinned client from the start,
// and a wildcard server before it listens — which then takes a connection over RoCE. The rsocket
// tools alike: rstream and riostream over iWARP load neither RoCE nor the native backend, and
// `rstream -T s` (plain sockets) no transport at all. And rping's V8 background threads under
// SCHED_IDLE (cli/startup.ts idleBackgroundThreads); and TurboFan held back for the first pings of
// an rping run and the first connections of a cmtime run (cli/startup.ts deferOptimization), seen
// through V8's --trace-opt.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT, RPING, startCli, runCli, describeRun, rpingLines, waitListening } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { assertOk, assertTable, pair } from '../lib/stream-tools.js';
import { sleep } from '../lib/wait.js';

const HOOK = pathToFileURL(join(REPO_ROOT, 'test', 'fixtures', 'module-log', 'register.mjs')).href;
const DIST = pathToFileURL(join(REPO_ROOT, 'dist')).href;
const dir = mkdtempSync(join(tmpdir(), 'rdmacm-modules-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
const ROCE_PORT = String(40000 + Math.floor(Math.random() * 20000));

let logs = 0;
/** Environment that logs the process's modules to a new file; `read()` gives dist-relative paths. */
function traced(env = {}) {
  const file = join(dir, `modules-${++logs}.log`);
  const base = { ...env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${HOOK}`, MODULE_LOG: file };
  for (const k of ['RDMACM_DEVICE', 'RDMACM_NATIVE_PATH', 'RDMACM_BACKEND']) if (!(k in env)) base[k] = '';
  return {
    env: base,
    read: () => readFileSync(file, 'utf8').split('\n').filter((u) => u.startsWith(`${DIST}/`)).map((u) => u.slice(DIST.length + 1)),
  };
}

// A transport's policy module (policy.js: when the tools load it) is asked, not the transport.
const ROCE = /^(transport\/roce\/(?!policy\.js$)|wire\/roce\/)/;
const NATIVE = /^native\/(?!policy\.js$)/;
const RSOCKET = /^rsocket\//;
const matching = (mods, re) => mods.filter((m) => re.test(m));

/** Resolve once a process listens for RDMA_PS_TCP `port` on the soft RoCE device (its service name in /proc/net/unix). */
async function waitRoceListening(port, exited, ms = 10_000) {
  const name = `@rdmacm-roce-${ROCE_PORT}-svc-${(0x01060000 + port).toString(16).padStart(16, '0')}`;
  let gone = false;
  exited.then(() => (gone = true));
  for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(20)) {
    if (gone) throw new Error(`the server exited before listening on ${port}`);
    if (readFileSync('/proc/net/unix', 'utf8').includes(name)) return;
  }
  throw new Error(`nothing listens on RoCE port ${port}`);
}

async function rpingPair(srvEnv, cliEnv, { serverAddr = '127.0.0.1', roce = false } = {}) {
  const port = await freePort();
  const args = ['-p', String(port), '-C', '3', '-v'];
  const srv = startCli(RPING, ['-s', '-a', serverAddr, ...args], { env: srvEnv, timeoutMs: 30_000 });
  try {
    if (roce) await waitRoceListening(port, srv.done);
    else await waitListening(port, { exited: srv.done });
    const c = await runCli(RPING, ['-c', '-a', '127.0.0.1', ...args], { env: cliEnv, timeoutMs: 30_000 });
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    assert.equal(c.code, 0, both);
    assert.equal(s.code, 0, both);
    assert.equal(c.stdout, rpingLines({ count: 3, role: 'client' }), both);
    assert.equal(s.stdout, rpingLines({ count: 3, role: 'server' }), both);
  } finally {
    srv.kill('SIGKILL');
  }
}

test('rping over iWARP (RDMACM_BACKEND=soft): neither process loads RoCE, the native backend or rsockets', async () => {
  const [s, c] = [traced({ RDMACM_BACKEND: 'soft' }), traced({ RDMACM_BACKEND: 'soft' })];
  await rpingPair(s.env, c.env);
  for (const [who, mods] of [['server', s.read()], ['client', c.read()]]) {
    assert.ok(mods.includes('transport/iwarp/iwarp-cm.js') && mods.includes('cli/rping.js'), `${who}: ${mods.join(' ')}`);
    assert.deepEqual(matching(mods, ROCE), [], who);
    assert.deepEqual(matching(mods, NATIVE), [], who);
    assert.deepEqual(matching(mods, RSOCKET), [], who);
  }
});

test('by default the native backend (and RoCE with it) loads exactly when the kernel has RDMA devices', async () => {
  const wanted = existsSync('/sys/class/infiniband');
  const [s, c] = [traced(), traced()];
  await rpingPair(s.env, c.env);
  for (const mods of [s.read(), c.read()]) {
    assert.equal(matching(mods, NATIVE).length > 0, wanted);
    assert.equal(matching(mods, ROCE).length > 0, wanted);
  }
});

test('a wildcard rping server loads RoCE before it listens and takes a RoCE-pinned client', { skip: !existsSync('/proc/net/unix') && 'no /proc/net/unix' }, async () => {
  const s = traced({ RDMACM_BACKEND: 'soft', RDMACM_ROCE_PORT: ROCE_PORT });
  const c = traced({ RDMACM_BACKEND: 'soft', RDMACM_ROCE_PORT: ROCE_PORT, RDMACM_DEVICE: 'rxe_lo' });
  await rpingPair(s.env, c.env, { serverAddr: '0.0.0.0', roce: true });
  for (const mods of [s.read(), c.read()]) assert.ok(mods.includes('transport/roce/cm/rc-endpoint.js'), mods.join(' '));
});

test('rping pinned to a soft iWARP device loads no RoCE', async () => {
  const [s, c] = [traced({ RDMACM_BACKEND: 'soft', RDMACM_DEVICE: 'siw_lo' }), traced({ RDMACM_BACKEND: 'soft', RDMACM_DEVICE: 'siw_lo' })];
  await rpingPair(s.env, c.env);
  for (const mods of [s.read(), c.read()]) assert.deepEqual(matching(mods, ROCE), []);
});

const RSTREAM = join(REPO_ROOT, 'dist', 'cli', 'rstream.js');
const RIOSTREAM = join(REPO_ROOT, 'dist', 'cli', 'riostream.js');
const TRANSPORT = /^(transport|wire|native)\//;

for (const [name, tool] of [['rstream', RSTREAM], ['riostream', RIOSTREAM]]) {
  test(`${name} over iWARP (RDMACM_BACKEND=soft, server bound to 127.0.0.1): neither process loads RoCE or the native backend`, async () => {
    const [s, c] = [traced({ RDMACM_BACKEND: 'soft' }), traced({ RDMACM_BACKEND: 'soft' })];
    const r = await pair(tool, ['-S', '64', '-C', '10', '-I', '3'], { serverArgs: ['-b', '127.0.0.1'], srvEnv: s.env, cliEnv: c.env });
    assertOk(r);
    assertTable(r.cli.stdout, [['custom', 64, 10, 3]], 'client');
    for (const [who, mods] of [['server', s.read()], ['client', c.read()]]) {
      assert.ok(mods.includes('transport/iwarp/iwarp-cm.js') && mods.includes('rsocket/conn.js') && mods.includes(`cli/${name}.js`), `${who}: ${mods.join(' ')}`);
      assert.deepEqual(matching(mods, ROCE), [], who);
      assert.deepEqual(matching(mods, NATIVE), [], who);
    }
  });
}

test('rstream -T s (plain TCP sockets) loads no transport, wire codec or native backend module', async () => {
  const [s, c] = [traced(), traced()];
  const r = await pair(RSTREAM, ['-T', 's', '-S', '64', '-C', '10', '-I', '3'], { srvEnv: s.env, cliEnv: c.env });
  assertOk(r);
  assertTable(r.cli.stdout, [['custom', 64, 10, 3]], 'client');
  for (const [who, mods] of [['server', s.read()], ['client', c.read()]]) {
    assert.ok(mods.includes('cli/net-sock.js'), `${who}: ${mods.join(' ')}`);
    assert.deepEqual(matching(mods, TRANSPORT), [], who);
  }
});

const hasChrt = ['/usr/bin/chrt', '/bin/chrt', '/usr/sbin/chrt'].some((p) => existsSync(p));
/** Scheduling policy of every thread of process `pid` (/proc/<pid>/task/<tid>/stat field 41), main first. */
function threadPolicies(pid) {
  const tids = readdirSync(`/proc/${pid}/task`).map(Number).sort((a, b) => (a === pid ? -1 : b === pid ? 1 : a - b));
  return tids.map((t) => Number(readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8').split(') ')[1].split(' ')[38]));
}

test('rping runs V8\'s background threads under SCHED_IDLE, its main thread under SCHED_OTHER', { skip: !hasChrt && 'no chrt' }, async () => {
  const port = await freePort();
  const srv = startCli(RPING, ['-s', '-a', '127.0.0.1', '-p', String(port)], { env: { RDMACM_BACKEND: 'soft', RDMACM_JIT_IDLE: '' }, timeoutMs: 30_000 });
  try {
    await waitListening(port, { exited: srv.done });
    let p = threadPolicies(srv.child.pid);
    for (const t0 = Date.now(); Date.now() - t0 < 10_000 && !p.slice(1).every((x) => x === 5); await sleep(20)) p = threadPolicies(srv.child.pid);
    assert.equal(p[0], 0, `main thread: ${p}`);
    assert.ok(p.length > 1 && p.slice(1).every((x) => x === 5), `background threads: ${p}`);
  } finally {
    srv.kill('SIGKILL');
    await srv.done;
  }
});

const CMTIME = join(REPO_ROOT, 'dist', 'cli', 'cmtime.js');
/** Some functions of rping's ping path (rping itself, the verbs layer, the iWARP transport). */
const PING_PATH = ['semTake', 'formatSend', 'postSend', 'pollInto', 'kick', 'stageOne', 'fast', 'wholeFpdu', 'parseFpduHeader'];
/** Some functions cmtime runs per connection (its timing, the CM's events and QP attributes). */
const CONNECT_PATH = ['startPerf', 'endPerf', 'gettimeUs', 'PostedEvent', 'keyMatches', 'qpAttrMaskOf'];

/**
 * The names of the functions V8 chose to compile with TurboFan (hot enough, and TurboFan on: the
 * jobs need not have finished before the process ends) in the server and the client of a run of
 * `tool` (the server started with `serverArgs`, the client then run with `clientArgs`, both with
 * `-p` and a free port: rping's listening port, cmtime's out-of-band one) under `env`.
 */
async function markedForTurbofan(tool, serverArgs, clientArgs, env, { exitOk = true } = {}) {
  const port = await freePort();
  const opts = { env: { RDMACM_BACKEND: 'soft', RDMACM_JIT_DEFER: '', ...env }, nodeArgs: ['--trace-opt'], timeoutMs: 60_000 };
  const srv = startCli(tool, [...serverArgs, '-p', String(port)], opts);
  try {
    await waitListening(port, { exited: srv.done });
    const c = await runCli(tool, [...clientArgs, '-p', String(port)], opts);
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    if (exitOk) {
      assert.equal(c.code, 0, both);
      assert.equal(s.code, 0, both);
    } else assert.match(c.stdout, /\nfull connect +\d+/, both);
    const names = new Set();
    for (const m of `${c.stdout}${s.stdout}`.matchAll(/\[marking 0x[0-9a-f]+ <JSFunction (\S+) .* for optimization to TURBOFAN/g)) names.add(m[1]);
    return names;
  } finally {
    srv.kill('SIGKILL');
  }
}

const rpingRun = (count, env) => markedForTurbofan(RPING, ['-s', '-a', '127.0.0.1'], ['-c', '-a', '127.0.0.1', '-C', String(count)], env);
// Over iWARP cmtime's second test (no QPs) fails in rdma_connect (exit 1) after the first one's
// table: the first test is the one-shot run looked at.
const cmtimeRun = (env) => {
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-c', '500'];
  return markedForTurbofan(CMTIME, [...common, '-L'], common, env, { exitOk: false });
};

/** Whether the tools hold TurboFan back by default here (fewer than startup.js FEW_CPUS, 4). */
const fewCpus = os.availableParallelism() < 4;

test('a short rping run does without TurboFan on its ping path; RDMACM_JIT_DEFER=0 compiles it', { skip: !fewCpus && '4 CPUs or more: TurboFan from the start' }, async () => {
  const on = await rpingRun(300, { RDMACM_JIT_DEFER: '0' });
  assert.ok(PING_PATH.some((f) => on.has(f)), `TurboFan from the start chose none of ${PING_PATH}: ${[...on]}`);
  const deferred = await rpingRun(300, {});
  assert.deepEqual(PING_PATH.filter((f) => deferred.has(f)), [], `compiled: ${[...deferred]}`);
});

test('rping turns TurboFan on after RDMACM_JIT_DEFER pings', async () => {
  const after = await rpingRun(300, { RDMACM_JIT_DEFER: '50' });
  assert.ok(PING_PATH.some((f) => after.has(f)), `compiled: ${[...after]}`);
});

test('a one-shot cmtime run does without TurboFan on its connection path; RDMACM_JIT_DEFER=0 compiles it', { skip: !fewCpus && '4 CPUs or more: TurboFan from the start' }, async () => {
  const on = await cmtimeRun({ RDMACM_JIT_DEFER: '0' });
  assert.ok(CONNECT_PATH.some((f) => on.has(f)), `TurboFan from the start chose none of ${CONNECT_PATH}: ${[...on]}`);
  const deferred = await cmtimeRun({});
  assert.deepEqual(CONNECT_PATH.filter((f) => deferred.has(f)), [], `compiled: ${[...deferred]}`);
});
