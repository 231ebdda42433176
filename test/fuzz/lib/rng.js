// A small seeded PRNG for the fuzz targets: sfc32 (Chris Doty-Humphrey's Small Fast Counter, 128
// bits of state), seeded through splitmix32 so that nearby seeds give unrelated streams. Every
// case of every target gets its own generator from (run seed, case index), so any single case can
// be replayed without running the ones before it.

/** splitmix32 step: a well-mixed 32-bit value from `x` (used for seeding only). */
export function mix32(x) {
  x = (x + 0x9e3779b9) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x21f0aaad) >>> 0;
  x = Math.imul(x ^ (x >>> 15), 0x735a2d97) >>> 0;
  return (x ^ (x >>> 15)) >>> 0;
}

/** The seed of case `index` of a run seeded with `seed` (both 32-bit unsigned). */
export function caseSeed(seed, index) {
  return mix32((mix32(seed >>> 0) + Math.imul(index >>> 0, 0x632be5ab)) >>> 0);
}

export class Rng {
  constructor(seed) {
    this.seed = seed >>> 0;
    let s = this.seed;
    this.a = (s = mix32(s));
    this.b = (s = mix32(s));
    this.c = (s = mix32(s));
    this.d = 1;
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** Uniform 32-bit unsigned integer. */
  u32() {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = (this.b ^ (this.b >>> 9)) >>> 0;
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** Uniform float in [0, 1). */
  float() {
    return this.u32() / 4294967296;
  }

  /** Uniform integer in [0, n) (n ≤ 2^32). */
  int(n) {
    return Math.floor(this.float() * n);
  }

  /** Uniform integer in [lo, hi]. */
  range(lo, hi) {
    return lo + this.int(hi - lo + 1);
  }

  /** True with probability p. */
  chance(p) {
    return this.float() < p;
  }

  /** One element of `arr`. */
  pick(arr) {
    return arr[this.int(arr.length)];
  }

  /** `n` random bytes. */
  bytes(n) {
    const out = Buffer.allocUnsafe(n);
    let i = 0;
    for (; i + 4 <= n; i += 4) out.writeUInt32LE(this.u32(), i);
    for (; i < n; i++) out[i] = this.u32() & 0xff;
    return out;
  }

  /**
   * A length skewed towards small values and boundaries: 0..max, with extra weight on 0, 1, max
   * and powers of two ± 1 (where length arithmetic goes wrong).
   */
  size(max) {
    const r = this.float();
    if (r < 0.05) return 0;
    if (r < 0.1) return Math.min(1, max);
    if (r < 0.15) return max;
    if (r < 0.3) {
      const p = 1 << this.int(Math.max(1, Math.ceil(Math.log2(max + 1))));
      return Math.max(0, Math.min(max, p + this.range(-1, 1)));
    }
    if (r < 0.75) return this.int(Math.min(max, 64) + 1);
    return this.int(max + 1);
  }

  /** A new generator seeded from this one (for independent sub-streams). */
  fork() {
    return new Rng(this.u32());
  }
}

/** A fresh random 32-bit seed (for runs that were not given one). */
export function randomSeed() {
  return (Math.random() * 4294967296) >>> 0;
}
