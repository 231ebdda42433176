// CRC-32C backends: the standard vectors (RFC 3720 §B.4 parameters), zlib-style chaining, agreement between backends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  CRC32C_NATIVE_MIN,
  crc32c,
  crc32cBackend,
  crc32cBitwise,
  crc32cJs,
  crc32cNative,
  crc32cRange,
} from '../../../dist/wire/iwarp/crc32c.js';
import { prng } from '../../lib/prng.js';

const seq = (n, f) => Uint8Array.from({ length: n }, (_, i) => f(i));

/** Standard CRC-32C vectors (docs/design/iwarp-wire.md). */
const VECTORS = [
  ['"123456789"', new TextEncoder().encode('123456789'), 0xe3069283],
  ['32 x 0x00', new Uint8Array(32), 0x8a9136aa],
  ['32 x 0xFF', new Uint8Array(32).fill(0xff), 0x62a8ab43],
  ['0x00..0x1F', seq(32, (i) => i), 0x46dd794e],
  ['0x1F..0x00', seq(32, (i) => 31 - i), 0x113fdb5c],
  ['empty', new Uint8Array(0), 0],
];

const BACKENDS = [
  ['crc32c (active)', crc32c],
  ['table (crc32cJs)', crc32cJs],
  ['bitwise', crc32cBitwise],
];
if (crc32cNative) BACKENDS.push(['native', crc32cNative]);

test('backend is reported', () => {
  assert.ok(crc32cBackend === 'native' || crc32cBackend === 'js');
  assert.equal(crc32cBackend === 'native', crc32cNative !== undefined);
});

for (const [name, fn] of BACKENDS) {
  test(`${name}: standard vectors`, () => {
    for (const [label, data, want] of VECTORS) {
      assert.equal(fn(data), want, label);
    }
  });

  test(`${name}: zlib-style chaining at every split point`, () => {
    const data = seq(300, (i) => (i * 37 + 11) & 0xff);
    const whole = crc32cBitwise(data);
    for (let cut = 0; cut <= data.length; cut += 7) {
      assert.equal(fn(data.subarray(cut), fn(data.subarray(0, cut))), whole, `cut ${cut}`);
    }
    // three-way chain, and an empty piece in the middle is neutral
    assert.equal(fn(data.subarray(200), fn(new Uint8Array(0), fn(data.subarray(100, 200), fn(data.subarray(0, 100))))), whole);
  });

  test(`${name}: returns unsigned 32-bit values`, () => {
    const v = fn(new TextEncoder().encode('123456789'));
    assert.ok(Number.isInteger(v) && v >= 0 && v <= 0xffffffff);
  });
}

test('table and native backends agree with the bitwise reference on random data, all lengths and offsets', () => {
  const rnd = prng(7);
  const big = seq(5000, () => (rnd() * 256) | 0);
  for (let len = 0; len < 700; len += len < 64 ? 1 : 13) {
    const off = (rnd() * 64) | 0;
    const d = big.subarray(off, off + len);
    const prev = (rnd() * 0x100000000) >>> 0;
    const want = crc32cBitwise(d, prev);
    assert.equal(crc32cJs(d, prev), want, `js len ${len}`);
    assert.equal(crc32c(d, prev), want, `active len ${len}`);
    assert.equal(crc32cRange(big, off, off + len, prev), want, `range len ${len}`);
    if (crc32cNative) assert.equal(crc32cNative(d, prev), want, `native len ${len}`);
  }
  assert.ok(CRC32C_NATIVE_MIN > 0);
});

test('large buffer: all backends agree (1 MiB)', () => {
  const rnd = prng(99);
  const d = seq(1 << 20, () => (rnd() * 256) | 0);
  const js = crc32cJs(d);
  assert.equal(crc32c(d), js);
  if (crc32cNative) assert.equal(crc32cNative(d), js);
  // chaining across a large and a small piece
  assert.equal(crc32c(d.subarray(1000), crc32c(d.subarray(0, 1000))), js);
});

test('RDMA_CRC32C=js forces the table backend', () => {
  const r = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', "import('./dist/wire/iwarp/crc32c.js').then(m => console.log(m.crc32cBackend, m.crc32c(new TextEncoder().encode('123456789')).toString(16)))"],
    { env: { ...process.env, RDMA_CRC32C: 'js' }, cwd: new URL('../../../', import.meta.url), encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'js e3069283');
});
