/**
 * Random numbers from a CSPRNG (`crypto.randomFillSync`: OpenSSL's generator, seeded from the
 * kernel's `getrandom`), for every value a peer must not be able to predict: STags and region
 * addresses, RC starting PSNs, CM communication and request IDs, ephemeral ports.
 *
 * Words are drawn 256 at a time, so that a draw on a hot path costs no system call. Never
 * `Math.random`: V8's is xorshift128+, whose state a peer recovers from a handful of outputs.
 */
import { randomFillSync } from 'node:crypto';

/** Words drawn from the CSPRNG at once. */
const POOL_WORDS = 256;

/** A pool of random 32-bit words, refilled from the CSPRNG when empty. */
export class RandomPool {
  private readonly words = new Uint32Array(POOL_WORDS);
  private pos = this.words.length;

  /** A uniform 32-bit unsigned integer. */
  next(): number {
    if (this.pos === this.words.length) {
      randomFillSync(this.words);
      this.pos = 0;
    }
    return this.words[this.pos++] as number;
  }

  /** A uniform integer in `[0, n)`, `n` ≤ 2^52 (rejection sampling, no modulo bias). */
  below(n: number): number {
    if (n <= 2 ** 32) {
      const limit = 2 ** 32 - (2 ** 32 % n);
      for (;;) {
        const w = this.next();
        if (w < limit) return w % n;
      }
    }
    const hiRange = Math.ceil(n / 2 ** 32);
    for (;;) {
      const v = this.below(hiRange) * 2 ** 32 + this.next();
      if (v < n) return v;
    }
  }

  /** A uniform integer in `[lo, hi]`. */
  between(lo: number, hi: number): number {
    return lo + this.below(hi - lo + 1);
  }
}

/** The process's pool. */
export const random = new RandomPool();

/** A uniform 24-bit value: a starting PSN (Linux: `get_random_u32() & 0xffffff`). */
export function randomPsn(): number {
  return random.next() & 0xffffff;
}
