// The per-process endpoint of the listing (src/stat/service.ts) and the kernel's records
// (kernelResources): the endpoint opens only once a soft device's context is opened, not with
// RDMACM_STAT=0, and never keeps its process alive; `rdma -j resource show KIND` is parsed where
// the tool answers JSON and is null where it is missing or answers anything else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kernelResources } from '../../../dist/index.js';

const PKG = new URL('../../../dist/index.js', import.meta.url).href;

/** Run a child that imports the package, runs `body`, then reports whether its stat name is listed; it must end by itself. */
function child(body, env = {}) {
  const code = `
    const pkg = await import(${JSON.stringify(PKG)});
    const { readFileSync } = await import('node:fs');
    ${body}
    const listed = readFileSync('/proc/net/unix', 'latin1').includes('@rdmacm-stat/' + process.pid);
    process.stdout.write(JSON.stringify({ listed }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, RDMACM_BACKEND: 'soft', ...env } });
  assert.equal(r.status, 0, `child: ${r.stderr}${r.error ?? ''}`);
  return JSON.parse(r.stdout);
}

test('the endpoint opens with the first soft device context, not before, and never holds the process', () => {
  assert.deepEqual(child('pkg.getDeviceList();'), { listed: false }, 'listing devices opens nothing');
  // The child ends by itself (spawnSync would time out otherwise) with its endpoint open.
  assert.deepEqual(child("const c = pkg.getDeviceList().find((d) => d.name === 'siw_lo').open(); c.allocPd();"), { listed: true });
  assert.deepEqual(child("pkg.getDeviceList().find((d) => d.name === 'rxe_lo').open();", { RDMACM_STAT: '0' }), { listed: false }, 'RDMACM_STAT=0');
});

test('kernelResources: rdma -j parsed; null without the tool or for output that is not a JSON list', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rdmacm-stat-'));
  const saved = process.env.PATH;
  t.after(() => {
    process.env.PATH = saved;
    rmSync(dir, { recursive: true, force: true });
  });
  const fake = (out, status = 0) => {
    writeFileSync(join(dir, 'rdma'), `#!/bin/sh\n[ "$1 $2 $3 $4" = "-j resource show qp" ] || exit 3\nprintf '%s' '${out}'\nexit ${status}\n`);
    chmodSync(join(dir, 'rdma'), 0o755);
  };
  process.env.PATH = dir;
  assert.equal(await kernelResources('qp'), null, 'no rdma on PATH');
  fake('[{"ifname":"siw0","lqpn":7,"type":"RC","state":"RTS"}]');
  assert.deepEqual(await kernelResources('qp'), [{ ifname: 'siw0', lqpn: 7, type: 'RC', state: 'RTS' }]);
  fake('{"not":"a list"}');
  assert.equal(await kernelResources('qp'), null);
  fake('Failed to open NETLINK_RDMA socket', 1);
  assert.equal(await kernelResources('qp'), null);
});
