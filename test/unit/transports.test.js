// The transport manifest (src/transports.ts): each entry's folder, loader and policy agree; the
// per-transport policies add up to the tools' loading rule, written out whole here (iWARP always;
// RoCE when RDMACM_DEVICE pins a device that is not siw_*, or with the native backend, else
// deferred; the native backend when the backend selection admits kernel devices and
// nativeWanted()); every package entry point registers the transports in manifest order and
// exports each one's settings as a namespace of its name; the tools' loader loads what the plan
// says. Registries are per process: the entry points are loaded in child processes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { TRANSPORTS, loadPlan } from '../../dist/transports.js';

const DIST = new URL('../../dist/', import.meta.url);
const names = (ts) => ts.map((t) => t.name);

test('each manifest entry: a unique name, its folder holds its policy, and load() imports its index', async () => {
  assert.deepEqual(names(TRANSPORTS), ['iwarp', 'roce', 'native']);
  assert.equal(new Set(names(TRANSPORTS)).size, TRANSPORTS.length);
  for (const t of TRANSPORTS) {
    const policy = await import(new URL(`${t.dir}/policy.js`, DIST).href);
    assert.equal(t.when, policy.when, t.name);
    assert.equal(await t.load(), await import(new URL(`${t.dir}/index.js`, DIST).href), t.name);
  }
});

/** The tools' loading rule as one function: what src/cli/rdma.ts must do in every case. */
function reference(env, backend) {
  const nativeWanted = existsSync('/sys/class/infiniband') || Boolean(env.RDMACM_NATIVE_PATH);
  const pin = env.RDMACM_DEVICE;
  if (backend !== 'soft' && nativeWanted) return { now: ['iwarp', 'roce', 'native'], deferred: [] };
  if (pin !== undefined && pin !== '' && !pin.startsWith('siw_')) return { now: ['iwarp', 'roce'], deferred: [] };
  return { now: ['iwarp'], deferred: ['roce'] };
}

test('loadPlan: what a tool loads at start and what it defers, for every backend, pin and addon path', () => {
  for (const backend of ['auto', 'soft', 'native']) {
    for (const pin of [undefined, '', 'siw_lo', 'rxe_lo', 'mlx5_0']) {
      for (const path of [undefined, '/opt/rdmacm.node']) {
        const env = { ...(pin === undefined ? {} : { RDMACM_DEVICE: pin }), ...(path === undefined ? {} : { RDMACM_NATIVE_PATH: path }) };
        const plan = loadPlan({ env, backend });
        assert.deepEqual({ now: names(plan.now), deferred: names(plan.deferred) }, reference(env, backend), JSON.stringify({ backend, env }));
      }
    }
  }
});

test('loadPlan: a transport loaded at start brings forward the deferred ones before it, in manifest order', () => {
  const plan = loadPlan({ env: { RDMACM_NATIVE_PATH: '/opt/rdmacm.node' }, backend: 'auto' });
  assert.deepEqual(names(plan.now), names(TRANSPORTS));
});

test('loadPlan: a transport a tool needs loads at start unless its policy says never, in manifest order', () => {
  for (const backend of ['auto', 'soft', 'native']) {
    for (const pin of [undefined, 'siw_lo', 'rxe_lo']) {
      const env = pin === undefined ? {} : { RDMACM_DEVICE: pin };
      const plan = loadPlan({ env, backend }, ['roce']);
      const ref = reference(env, backend);
      assert.deepEqual(names(plan.now), names(TRANSPORTS).filter((n) => ref.now.includes(n) || n === 'roce'), JSON.stringify({ backend, env }));
      assert.deepEqual(names(plan.deferred), [], JSON.stringify({ backend, env }));
    }
  }
  // A transport whose policy says never stays out, needed or not.
  assert.deepEqual(names(loadPlan({ env: {}, backend: 'soft' }, ['native']).now), ['iwarp']);
});

/** Run `script` (an ES module body) in a child under `env` and parse the JSON it prints last. */
function child(script, env = {}) {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out.trim().split('\n').pop());
}

/** Providers and CM transports registered once `entry` is loaded (`ns`: the settings namespaces it exports). */
function registered(entry, env) {
  return child(`
    const m = await import(${JSON.stringify(new URL(entry, DIST).href)});
    const { listProviders } = await import(${JSON.stringify(new URL('verbs/provider.js', DIST).href)});
    const { listCmTransports, transportsDeferred } = await import(${JSON.stringify(new URL('cm/transport.js', DIST).href)});
    const ns = Object.fromEntries(${JSON.stringify(names(TRANSPORTS))}.filter((n) => n in m).map((n) => [n, m[n].PROVIDER]));
    console.log(JSON.stringify({ ns, providers: listProviders().map((p) => p.name), cm: listCmTransports().map((t) => t.provider), deferred: transportsDeferred() }));`, env);
}

test('every package entry point registers the transports in manifest order', async () => {
  const settings = await import(new URL('transport-settings.js', DIST).href);
  const order = TRANSPORTS.map((t) => settings[t.name].PROVIDER);
  const soft = order.filter((p) => p !== settings.native.PROVIDER);
  for (const entry of ['index.js', 'verbs.js', 'cm.js', 'rsocket/index.js']) {
    const r = registered(entry, { RDMACM_BACKEND: 'soft' });
    assert.deepEqual(r.providers, soft, entry);
    assert.deepEqual(r.cm, soft, entry);
    assert.equal(r.deferred, false, entry);
  }
});

test('rdmacm, rdmacm/verbs and rdmacm/cm export each transport\'s settings as the namespace of its name', () => {
  for (const entry of ['index.js', 'verbs.js', 'cm.js']) {
    const r = registered(entry, { RDMACM_BACKEND: 'soft' });
    assert.deepEqual(Object.keys(r.ns), names(TRANSPORTS), entry);
    assert.deepEqual(Object.values(r.ns), ['siw', 'rxe', 'rdma-core'], entry);
  }
});

test('the tools\' loader loads what the plan says now and leaves the deferred transports to the CM', () => {
  const rdma = 'cli/rdma.js';
  assert.deepEqual(registered(rdma, { RDMACM_BACKEND: 'soft', RDMACM_DEVICE: '' }), { ns: {}, providers: ['siw'], cm: ['siw'], deferred: true });
  assert.deepEqual(registered(rdma, { RDMACM_BACKEND: 'soft', RDMACM_DEVICE: 'siw_lo' }), { ns: {}, providers: ['siw'], cm: ['siw'], deferred: true });
  assert.deepEqual(registered(rdma, { RDMACM_BACKEND: 'soft', RDMACM_DEVICE: 'rxe_lo' }), { ns: {}, providers: ['siw', 'rxe'], cm: ['siw', 'rxe'], deferred: false });
});
