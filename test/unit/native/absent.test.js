// The native backend where it cannot be: the addon switched off, missing or broken, and a
// machine without rdma-core's headers at install. The package must work as without it: soft
// devices only, `rdmacm-devices` saying why, the install script exiting 0 with one line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const DEVICES = join(ROOT, 'dist', 'cli', 'rdmacm-devices.js');
const BUILD = join(ROOT, 'native', 'build.mjs');
const ADDON = join(ROOT, 'native', 'build', 'rdmacm.node');

function run(args, env, timeout = 30_000) {
  const e = { ...process.env, ...env };
  for (const k of Object.keys(e)) if (e[k] === undefined) delete e[k];
  return spawnSync(process.execPath, args, { env: e, encoding: 'utf8', timeout });
}

const CLEAN = { RDMACM_NATIVE: undefined, RDMACM_BACKEND: undefined, RDMACM_NATIVE_PATH: undefined };

/** The device list and addon status a fresh process sees under `env`. */
function probe(env) {
  const r = run(
    ['--input-type=module', '-e', `const m = await import(${JSON.stringify(join(ROOT, 'dist', 'index.js'))});
      console.log(JSON.stringify({ st: m.native.addonStatus(), devs: m.getDeviceList().map((d) => [d.name, d.provider]), backend: m.backendSelection() }));`],
    { ...CLEAN, ...env },
  );
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('RDMACM_NATIVE=0: no addon, the soft devices only, with the reason', () => {
  const p = probe({ RDMACM_NATIVE: '0' });
  assert.equal(p.st.loaded, false);
  assert.equal(p.st.reason, 'RDMACM_NATIVE=0');
  assert.ok(p.devs.length > 0);
  assert.ok(p.devs.every(([, prov]) => prov !== 'rdma-core'));
});

test('RDMACM_BACKEND=soft: the addon is not even loaded', () => {
  const p = probe({ RDMACM_BACKEND: 'soft' });
  assert.equal(p.backend, 'soft');
  assert.equal(p.st.loaded, false);
  assert.equal(p.st.reason, 'RDMACM_BACKEND=soft');
  assert.ok(p.devs.length > 0 && p.devs.every(([, prov]) => prov !== 'rdma-core'));
});

test('a missing addon file: not built, with what to install', () => {
  const p = probe({ RDMACM_NATIVE_PATH: join(tmpdir(), 'no-such-rdmacm.node') });
  assert.equal(p.st.loaded, false);
  assert.match(p.st.reason, /^not built .*libibverbs-dev librdmacm-dev/);
  assert.ok(p.devs.every(([, prov]) => prov !== 'rdma-core'));
});

test('an addon that fails to load or speaks another ABI is skipped, not fatal', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-native-'));
  try {
    const broken = join(dir, 'broken.node');
    writeFileSync(broken, 'not an ELF file');
    let p = probe({ RDMACM_NATIVE_PATH: broken });
    assert.equal(p.st.loaded, false);
    assert.match(p.st.reason, /^failed to load /);
    const old = join(dir, 'old.cjs');
    writeFileSync(old, 'module.exports = { abi: 999 };');
    p = probe({ RDMACM_NATIVE_PATH: old });
    assert.equal(p.st.loaded, false);
    assert.match(p.st.reason, /ABI 999, not 3: rebuild it/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('RDMACM_BACKEND=native without the addon: no devices at all (forced, not silently soft)', () => {
  const p = probe({ RDMACM_BACKEND: 'native', RDMACM_NATIVE: '0' });
  assert.deepEqual(p.devs, []);
});

test('rdmacm-devices: lists the soft devices and says why the addon is not loaded', () => {
  const r = run([DEVICES], { ...CLEAN, RDMACM_NATIVE: '0' });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split('\n');
  assert.equal(lines[0], 'native addon: not loaded: RDMACM_NATIVE=0');
  assert.equal(lines[1], 'backend selection: auto (RDMACM_BACKEND)');
  assert.match(lines[2], /^ {4}device\s+\t {3}node GUID\s+\tbackend\ttransport \tnetdev$/);
  assert.match(r.stdout, /\n {4}siw_lo {10}\t[0-9a-f]{16}\tsoft   \tiWARP     \tlo\n/);
  const j = run([DEVICES, '-j'], { ...CLEAN, RDMACM_NATIVE: '0' });
  assert.equal(j.status, 0);
  const o = JSON.parse(j.stdout);
  assert.equal(o.native.loaded, false);
  assert.ok(o.devices.every((d) => d.backend === 'soft'));
  const bad = run([DEVICES, '-x'], { ...CLEAN, RDMACM_NATIVE: '0' });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /invalid option -- 'x'/);
});

/** A compiler that fails as cc does when libibverbs-dev is not installed: the netopt addon (Node's headers only) builds, the rdma-core one does not. */
function fakeCc(dir) {
  const cc = join(dir, 'cc');
  writeFileSync(cc, `#!/bin/sh
[ "$1" = --version ] && { echo "cc (fake) 1.0"; exit 0; }
case "$*" in *netopt.c*)
  while [ $# -gt 0 ]; do [ "$1" = -o ] && { : > "$2"; exit 0; }; shift; done; exit 1;;
esac
echo "native/src/addon.h:18:10: fatal error: infiniband/verbs.h: No such file or directory" >&2
exit 1
`);
  chmodSync(cc, 0o755);
  return cc;
}

const NO_HEADERS = "rdma-core's header infiniband/verbs.h not found: install libibverbs-dev and librdmacm-dev (Debian, Ubuntu) or rdma-core-devel (Fedora, RHEL), then";

test('install script: without rdma-core\'s headers it exits 0 with one line naming the packages, and builds nothing', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-build-'));
  try {
    const cc = fakeCc(dir);
    const out = join(dir, 'rdmacm.node');
    const r = run([BUILD], { CC: cc, RDMACM_NATIVE_OUT: out, RDMACM_NATIVE_VERBOSE: undefined, RDMACM_NATIVE_BUILD: undefined });
    assert.equal(r.status, 0);
    // In the package's own checkout the build is run again with its script.
    assert.equal(r.stdout, `rdmacm: native addon not built (${NO_HEADERS} npm run build:native); the soft devices work as ever\n`);
    assert.equal(r.stderr, '');
    assert.equal(existsSync(out), false);
    assert.equal(existsSync(join(dir, 'netopt.node')), true, 'the netopt addon needs no rdma-core');
    assert.deepEqual(JSON.parse(readFileSync(join(dir, 'build-status.json'), 'utf8')), {
      'netopt.node': { built: true },
      'rdmacm.node': { built: false, reason: `${NO_HEADERS} npm run build:native` },
    });
    rmSync(join(dir, 'netopt.node'));
    const none = run([BUILD], { CC: join(dir, 'no-cc'), RDMACM_NATIVE_OUT: out });
    assert.equal(none.status, 0);
    assert.match(none.stdout, /^rdmacm: native addon not built \(no C compiler .*: install gcc \(Debian: build-essential\), then npm run build:native\); the soft devices work as ever\n$/);
    const off = run([BUILD], { RDMACM_NATIVE_BUILD: '0', RDMACM_NATIVE_OUT: out });
    assert.equal(off.status, 0);
    assert.equal(off.stdout, 'rdmacm: native addon not built (RDMACM_NATIVE_BUILD=0 when it was last built: unset it, then npm run build:native); the soft devices work as ever\n');
    assert.equal(existsSync(out), false);
    assert.equal(existsSync(join(dir, 'netopt.node')), false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a failed build says why on the next rdmacm-devices, and how a dependency is rebuilt (npm rebuild rdmacm)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-build-'));
  try {
    // The package as a dependency: its build script under node_modules/rdmacm/native/.
    const native = join(dir, 'node_modules', 'rdmacm', 'native');
    mkdirSync(native, { recursive: true });
    copyFileSync(BUILD, join(native, 'build.mjs'));
    const out = join(native, 'build', 'rdmacm.node');
    const r = run([join(native, 'build.mjs')], { CC: fakeCc(dir), RDMACM_NATIVE_OUT: undefined, RDMACM_NATIVE_VERBOSE: undefined, RDMACM_NATIVE_BUILD: undefined });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `rdmacm: native addon not built (${NO_HEADERS} npm rebuild rdmacm); the soft devices work as ever\n`);
    assert.equal(existsSync(out), false);
    // The loader finds the reason beside the missing file and rdmacm-devices prints it.
    const d = run([DEVICES], { ...CLEAN, RDMACM_NATIVE_PATH: out });
    assert.equal(d.status, 0, d.stderr);
    assert.equal(d.stdout.split('\n')[0], `native addon: not loaded: not built: ${NO_HEADERS} npm rebuild rdmacm`);
    const j = JSON.parse(run([DEVICES, '-j'], { ...CLEAN, RDMACM_NATIVE_PATH: out }).stdout);
    assert.equal(j.native.reason, `not built: ${NO_HEADERS} npm rebuild rdmacm`);
    // A later successful build clears it: the reason is the file's again.
    writeFileSync(join(native, 'build', 'build-status.json'), JSON.stringify({ 'rdmacm.node': { built: true } }));
    const after = probe({ RDMACM_NATIVE_PATH: out });
    assert.match(after.st.reason, /^not built \(.*rdmacm\.node absent/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Node's headers missing (hidden by a private mount namespace where this machine can make one):
// one line saying where to get them, nothing downloaded.
const canHide = spawnSync('unshare', ['-m', 'true']).status === 0;
test('install script: without Node\'s headers it says how to get them and downloads nothing', { skip: !canHide && 'no mount namespace here (unshare -m)' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-build-'));
  try {
    const empty = join(dir, 'empty');
    mkdirSync(empty);
    const incs = [resolve(dirname(process.execPath), '..', 'include', 'node'), '/usr/include/node', '/usr/local/include/node'].filter((d) => existsSync(d));
    const hide = [...new Set(incs)].map((d) => `mount --bind ${empty} ${d}`).join(' && ') || 'true';
    const gyp = join(dir, 'node-gyp.js');
    writeFileSync(gyp, 'require("fs").writeFileSync(process.env.CALLED, "called"); process.exit(1);');
    const out = join(dir, 'rdmacm.node');
    const e = { ...process.env, HOME: dir, CC: fakeCc(dir), RDMACM_NATIVE_OUT: out, npm_config_node_gyp: gyp, CALLED: join(dir, 'called'), npm_config_nodedir: undefined, NODEDIR: undefined, npm_config_devdir: undefined };
    for (const k of Object.keys(e)) if (e[k] === undefined) delete e[k];
    const r = spawnSync('unshare', ['-m', 'sh', '-c', `${hide} && exec "$0" "$1"`, process.execPath, BUILD], { env: e, encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `rdmacm: native addon not built (Node's headers (node_api.h) not found: set npm_config_nodedir to a Node source or headers directory, or fetch them with node ${gyp} install; then npm run build:native); the soft devices work as ever\n`);
    assert.equal(existsSync(join(dir, 'called')), false, 'node-gyp is named, not run');
    assert.equal(existsSync(out), false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The real addon, where this machine could build it: its own argument checks, below the JS ones,
// answer misuse with -EINVAL instead of crashing (handles of the wrong kind, destroyed or forged
// objects, wrong types). No RDMA device is needed for any of these.
test('the built addon refuses misuse with -EINVAL, never a crash', { skip: !existsSync(ADDON) && 'native/build/rdmacm.node not built here (no rdma-core headers)' }, () => {
  const r = run(
    [
      '-e',
      `const b = require(${JSON.stringify(ADDON)});
      const bad = [{}, null, undefined, 1, 'x', [], () => {}];
      const out = [];
      for (const [name, fn] of Object.entries(b)) {
        if (typeof fn !== 'function' || name === 'setHandlers' || name === 'setScratch' || name === 'deviceList' || name === 'cmInit') continue;
        for (const v of bad) {
          const args = Array.from({ length: 12 }, () => v);
          const res = fn(...args);
          if (res !== -22 && res !== -19) out.push(name + ' -> ' + String(res));
        }
        const none = fn();
        if (none !== -22 && none !== -19) out.push(name + '() -> ' + String(none));
      }
      if (b.setScratch(new ArrayBuffer(4), new ArrayBuffer(4)) !== -22) out.push('setScratch small');
      if (b.setHandlers(1, 2, 3) !== -22) out.push('setHandlers non-functions');
      console.log(JSON.stringify(out));`,
    ],
    CLEAN,
  );
  assert.equal(r.status, 0, `the addon crashed: signal ${r.signal} ${r.stderr}`);
  assert.deepEqual(JSON.parse(r.stdout), []);
});
