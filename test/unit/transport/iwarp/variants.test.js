// The whole QP data-path suite again under the transport's variants, each in its own process:
// MPA CRC negotiated (RDMACM_IWARP_CRC=1: our initiator sets C, the responder echoes it, every
// FPDU carries a CRC32c the receiver checks) and without direct placement (RDMACM_IWARP_DIRECT=0:
// every read lands in the shared read buffer and payloads are copied into the target MR; the
// default reads large tagged payloads straight into it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const FILE = fileURLToPath(new URL('../../../compliance/qp.test.js', import.meta.url));

function runQpSuite(extraEnv) {
  // The compliance QP suite, on the iWARP device only (these are its variants).
  const env = { ...process.env, RDMACM_COMPLIANCE_DEVICES: 'siw_lo', ...extraEnv };
  delete env.NODE_TEST_CONTEXT; // run as a top-level test runner, reporting on stdout
  return spawnSync(process.execPath, ['--test', '--test-reporter=tap', FILE], { env, encoding: 'utf8', timeout: 90_000 });
}

test('QP data-path tests pass with MPA CRC on', () => {
  const r = runQpSuite({ RDMACM_IWARP_CRC: '1', RDMA_TRACE: 'mpa' });
  assert.equal(r.status, 0, r.stdout.slice(-3000));
  assert.match(r.stdout, /MPA Reply rev 2 flags crc=true/, 'CRC was negotiated');
  assert.match(r.stdout, /# fail 0/);
});

test('QP data-path tests pass without direct placement, with CRC off and on', () => {
  for (const crc of ['0', '1']) {
    const r = runQpSuite({ RDMACM_IWARP_DIRECT: '0', RDMACM_IWARP_CRC: crc });
    assert.equal(r.status, 0, r.stdout.slice(-3000));
    assert.match(r.stdout, /# fail 0/);
  }
});
