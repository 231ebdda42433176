// Shared helpers of the RoCE wire tests.

/** Small seeded PRNG (xorshift32) so failures reproduce. */
export function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

/** Bytes from a hex string (whitespace ignored). */
export function hex(s) {
  const t = s.replace(/\s+/g, '');
  return Uint8Array.from(t.match(/../g) ?? [], (x) => parseInt(x, 16));
}

/** `n` seeded pseudo-random bytes. */
export function randomBytes(next, n) {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = next();
  return b;
}
