// The token bucket (src/util/token-bucket.ts): a burst back to back, then the refill rate, never
// more than the burst however long it rested.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBucket } from '../../../dist/util/token-bucket.js';

test('a full bucket gives its burst at once, then nothing until time refills it', () => {
  const b = new TokenBucket(4, 10);
  const t0 = performance.now();
  let n = 0;
  while (b.take(t0)) n++;
  assert.equal(n, 4);
  assert.equal(b.take(t0 + 50), false, 'half a token after 50 ms at 10 a second');
  assert.equal(b.take(t0 + 100), true, 'one token after 100 ms');
  assert.equal(b.take(t0 + 100), false);
});

test('a bucket that rested long holds no more than its burst', () => {
  const b = new TokenBucket(3, 1000);
  const t0 = performance.now();
  let n = 0;
  while (b.take(t0 + 60_000)) n++;
  assert.equal(n, 3);
});

test('a refill of exactly one token is one token whatever the clock reads (no rounding short of it)', () => {
  // clock readings where (t0 + 100) - (t0 + 50) + (t0 + 50) - t0 sums to a hair under 100 ms
  for (const t0 of [2097102.3766076446, 262103.27643908738, 524244.2041005302]) {
    const b = new TokenBucket(4, 10);
    while (b.take(t0));
    assert.equal(b.take(t0 + 50), false, `half a token at ${t0} + 50`);
    assert.equal(b.take(t0 + 100), true, `one token at ${t0} + 100`);
    assert.equal(b.take(t0 + 100), false, `and no more at ${t0} + 100`);
  }
});
