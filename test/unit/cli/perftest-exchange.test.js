// perftest's side-channel records (src/cli/perftest/exchange.ts) against bytes the kernel's
// perftest sent: the 108-byte key record of an ib_write_bw server on rxe (the guest 10.77.0.2,
// captured on the reference VM's bridge), and the other records' layouts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ExchangeError,
  KEY_MSG_SIZE,
  KEY_MSG_SIZE_GID,
  decodeDest,
  decodeMtu,
  encodeDest,
  encodeMtu,
  encodeVersion,
  versionNumber,
} from '../../../dist/cli/perftest/exchange.js';

// ib_write_bw -d rxe0 (perftest 6.06), its keys: LID 0, out_reads 1, QPN 0x11, PSN 0xefe96f,
// rkey 0x23a, vaddr 0x55cc6ba61000, GID ::ffff:10.77.0.2, SRQN 0; NUL-terminated, 108 bytes.
const KERNEL_KEYS = Buffer.concat([
  Buffer.from('0000:0001:000011:efe96f:0000023a:000055cc6ba61000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:', 'latin1'),
  Buffer.alloc(1),
]);

test("the kernel's key record decodes to its fields and encodes back to the same bytes", () => {
  assert.equal(KERNEL_KEYS.length, KEY_MSG_SIZE_GID);
  const d = decodeDest(KERNEL_KEYS, true);
  assert.deepEqual({ ...d, gid: [...d.gid] }, {
    lid: 0,
    outReads: 1,
    qpn: 0x11,
    psn: 0xefe96f,
    rkey: 0x23a,
    vaddr: 0x55cc6ba61000n,
    gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2],
    srqn: 0,
  });
  assert.deepEqual(encodeDest(d, true), KERNEL_KEYS);
});

test('KEY_PRINT_FMT without a GID: 59 bytes, seven fields', () => {
  const d = { lid: 0x12, outReads: 16, qpn: 0xabcdef, psn: 1, rkey: 0xdeadbeef, vaddr: 0x7f0000001000n, gid: new Uint8Array(16), srqn: 7 };
  const b = encodeDest(d, false);
  assert.equal(b.length, KEY_MSG_SIZE);
  assert.equal(b.toString('latin1'), '0012:0010:abcdef:000001:deadbeef:00007f0000001000:00000007\0');
  const back = decodeDest(b, false);
  assert.deepEqual({ ...back, gid: [...back.gid] }, { ...d, gid: [...d.gid] });
});

test('records that are not keys are refused with an ExchangeError', () => {
  assert.throws(() => decodeDest(Buffer.alloc(KEY_MSG_SIZE_GID, 'z'), true), (e) => e instanceof ExchangeError && /^Couldn't parse line <z+>$/.test(e.message));
  assert.throws(() => decodeDest(KERNEL_KEYS.subarray(0, 100), true), ExchangeError);
  assert.throws(() => decodeDest(Buffer.alloc(KEY_MSG_SIZE), false), ExchangeError);
});

test('the version record is 16 NUL-padded bytes read as atof reads them; the MTU record 2 bytes of decimal text', () => {
  const v = encodeVersion('6.06');
  assert.equal(v.length, 16);
  assert.deepEqual(v, Buffer.concat([Buffer.from('6.06'), Buffer.alloc(12)]));
  assert.equal(versionNumber(v), 6.06);
  assert.equal(versionNumber(Buffer.from('5.60\0')), 5.6);
  assert.equal(versionNumber(Buffer.alloc(16)), 0);
  assert.deepEqual(encodeMtu(5), Buffer.from('5\0', 'latin1'));
  assert.equal(decodeMtu(Buffer.from('3\0')), 3);
  assert.equal(decodeMtu(Buffer.from('x\0')), 0);
});
