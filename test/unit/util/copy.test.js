// copyBytes: the data path's copy (a loop for small regions, memcpy above 128 bytes) must match
// Buffer#copy for every length, offset and overlap-free placement.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { copyBytes } from '../../../dist/util/copy.js';

test('copyBytes matches Buffer#copy for lengths 0..300 at random offsets', () => {
  const src = randomBytes(1024);
  for (let n = 0; n <= 300; n++) {
    for (let k = 0; k < 4; k++) {
      const so = randomInt(0, 1024 - n + 1);
      const d = randomInt(0, 512 - n + 1);
      const got = Buffer.alloc(512, 0xee);
      const want = Buffer.alloc(512, 0xee);
      copyBytes(src, so, got, d, n);
      src.copy(want, d, so, so + n);
      assert.deepEqual(got, want, `n ${n} so ${so} d ${d}`);
    }
  }
});

test('copyBytes into a plain Uint8Array view', () => {
  const src = Uint8Array.from({ length: 40 }, (_, i) => i);
  const backing = new Uint8Array(64);
  const view = backing.subarray(8, 56);
  copyBytes(src, 3, view, 5, 33);
  assert.deepEqual([...backing.subarray(13, 46)], [...src.subarray(3, 36)]);
  assert.equal(backing[12], 0);
  assert.equal(backing[46], 0);
});
