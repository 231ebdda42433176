// The whole QP data-path suite again with MPA CRC negotiated (RDMACM_IWARP_CRC=1 makes our
// initiator set C; the responder echoes it): every FPDU then carries a CRC32c that the receiver
// checks, on the copy path and on the zero-copy path alike.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

test('QP data-path tests pass with MPA CRC on', () => {
  const file = fileURLToPath(new URL('../verbs/qp.test.js', import.meta.url));
  const env = { ...process.env, RDMACM_IWARP_CRC: '1', RDMA_TRACE: 'mpa' };
  delete env.NODE_TEST_CONTEXT; // run as a top-level test runner, reporting on stdout
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', file], {
    env,
    encoding: 'utf8',
    timeout: 90_000,
  });
  assert.equal(r.status, 0, r.stdout.slice(-3000));
  assert.match(r.stdout, /MPA Reply rev 2 flags crc=true/, 'CRC was negotiated');
  assert.match(r.stdout, /# fail 0/);
});
