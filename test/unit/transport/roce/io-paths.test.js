// The soft RoCE device has two UDP I/O paths (udp-endpoint.ts): the netopt addon's batched
// sockets (recvmmsg/sendmmsg) and Node's dgram. A test run uses one (RDMACM_ROCE_IO, by default
// mmsg where the addon is built); this file runs the suites that move datagrams through the
// device's sockets — the hostile senders, the RC hostile peer, multicast, the UDP endpoints, the
// SIDR exchange, impairment, IPv4 identification, several processes on one port, mckey and the
// fuzz targets of the RoCE receive path — again under the other path, so `npm test` covers both.
// Skipped (with the reason) where the other path is mmsg and the addon is not built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const { roceIoKind } = await import('../../../../dist/transport/roce/udp-endpoint.js');
const { mmsgAvailable } = await import('../../../../dist/transport/roce/udp-mmsg.js');

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const other = roceIoKind() === 'mmsg' ? 'dgram' : 'mmsg';
const skip = other === 'mmsg' && !mmsgAvailable() ? 'the netopt addon with batched UDP sockets is not built' : false;

const SUITES = [
  'test/unit/transport/roce/udp-io.test.js',
  'test/unit/transport/roce/hostile-sender.test.js',
  'test/unit/transport/roce/rc-hostile.test.js',
  'test/unit/transport/roce/mcast-attach.test.js',
  'test/unit/transport/roce/multiprocess.test.js',
  'test/unit/transport/roce/ipid.test.js',
  'test/unit/transport/roce/impair.test.js',
  'test/unit/transport/roce/cm/ud.test.js',
  'test/e2e/mckey.test.js',
];
const FUZZ = 'roce-udp-batch,roce-rx,roce-rc-rx,roce-cm-rx,roce-packet';

/** Run `args` under RDMACM_ROCE_IO=`other`; fails with the tail of the output. */
function runUnder(args, timeout) {
  const env = { ...process.env, RDMACM_ROCE_IO: other, FUZZ_TARGETS: FUZZ, FUZZ_SECONDS: '2' };
  delete env.NODE_TEST_CONTEXT; // a run of its own, not a child of this one's runner
  const r = spawnSync(process.execPath, args, { cwd: ROOT, env, encoding: 'utf8', timeout });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  assert.equal(r.status, 0, `${r.error ?? ''}\n${out.slice(-4000)}`);
  return out;
}

test(`the RoCE suites that use the device's UDP sockets pass under RDMACM_ROCE_IO=${other}`, { skip, timeout: 600_000 }, () => {
  const out = runUnder(['--test', '--test-reporter=tap', '--test-concurrency=1', '--test-timeout=120000', ...SUITES], 590_000);
  const pass = Number(/# pass (\d+)/.exec(out)?.[1] ?? 0);
  assert.ok(pass > 20, `the suites ran (${pass} passed)`);
  assert.match(out, /# fail 0/);
});

test(`the fuzz targets of the RoCE receive path pass under RDMACM_ROCE_IO=${other}`, { skip, timeout: 120_000 }, () => {
  const out = runUnder(['test/fuzz/run.js'], 110_000);
  assert.match(out, /all targets passed/);
  assert.match(out, /roce-udp-batch: \d+ cases/);
});
