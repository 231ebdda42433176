// Privileged ports: a process without CAP_NET_BIND_SERVICE gets EACCES from rdma_bind_addr (and
// so rdma_listen) for a port below net.ipv4.ip_unprivileged_port_start, on the soft RoCE device
// for every port space and on the soft iWARP device, as the kernel's inet_bind and rdma_cm
// refuse it; a port at or above the start works. The ids live in a child process running as
// `nobody` (child_process `uid`), which needs a runner that may switch users (root).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const DIST_INDEX = fileURLToPath(new URL('../../../dist/index.js', import.meta.url));
const NOBODY = 65534;
const canSwitch = typeof process.getuid === 'function' && process.getuid() === 0;
const START = (() => {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'latin1').trim());
  } catch {
    return 1024;
  }
})();
const LOW = 80;
const HIGH = Math.max(START, 1024) + 1000 + Math.floor(Math.random() * 20000);

// Binds and listens with one id per case and prints {case: 'ok' | errno code}.
const CHILD = `
const lib = await import(${JSON.stringify(DIST_INDEX)});
const cases = JSON.parse(process.argv[1]);
const out = {};
for (const c of cases) {
  const ch = lib.createEventChannel();
  const id = lib.createId(ch, null, lib.PortSpace[c.ps], { device: c.device });
  try {
    id.bindAddr({ address: '127.0.0.1', port: c.port });
    await id.listen(1);
    out[c.name] = 'ok';
  } catch (e) {
    out[c.name] = e.code ?? String(e);
  }
  await id.destroy();
  ch.destroy();
}
process.stdout.write(JSON.stringify(out));
process.exit(0);
`;

function runAsNobody(cases) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, RDMACM_ROCE_PORT: String(20000 + Math.floor(Math.random() * 30000)) };
    const p = spawn(process.execPath, ['--input-type=module', '-e', CHILD, JSON.stringify(cases)], { uid: NOBODY, gid: NOBODY, env, cwd: '/', stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let errText = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (errText += d));
    const t = setTimeout(() => p.kill('SIGKILL'), 20000);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(t);
      if (code !== 0) reject(new Error(`child exited ${code}: ${errText}`));
      else resolve(JSON.parse(out));
    });
  });
}

test('as nobody: port 80 is EACCES on rxe_lo (TCP, UDP, IPOIB) and siw_lo; a port above the unprivileged start listens', { skip: canSwitch ? false : 'the runner cannot switch to another user (not root)', timeout: 30000 }, async () => {
  const cases = [];
  for (const [device, spaces] of [
    ['rxe_lo', ['TCP', 'UDP', 'IPOIB']],
    ['siw_lo', ['TCP']],
  ]) {
    for (const ps of spaces) {
      cases.push({ name: `${device}/${ps}/low`, device, ps, port: LOW });
      cases.push({ name: `${device}/${ps}/high`, device, ps, port: HIGH + cases.length });
    }
  }
  const got = await runAsNobody(cases);
  const want = Object.fromEntries(cases.map((c) => [c.name, c.port === LOW ? 'EACCES' : 'ok']));
  assert.deepEqual(got, want);
});

test('with CAP_NET_BIND_SERVICE (root): port 80 listens on rxe_lo', { skip: canSwitch ? false : 'the runner is not root', timeout: 30000 }, async () => {
  const lib = await import(DIST_INDEX);
  const ch = lib.createEventChannel();
  const id = lib.createId(ch, null, lib.PortSpace.TCP, { device: 'rxe_lo' });
  try {
    id.bindAddr({ address: '127.0.0.1', port: LOW });
    await id.listen(1);
  } finally {
    await id.destroy();
    ch.destroy();
  }
});
