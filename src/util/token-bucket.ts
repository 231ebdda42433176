/**
 * How far short of a whole token still counts as one: elapsed times are differences of large
 * floating-point millisecond clocks, so a refill of exactly one token can come out a few ulps short.
 */
const WHOLE = 1 - 1e-9;

/**
 * A token bucket: up to `burst` actions back to back, then `ratePerS` a second. It starts full.
 */
export class TokenBucket {
  private tokens: number;
  /** When the tokens were last counted (performance.now() ms). */
  private at = performance.now();

  constructor(
    private readonly burst: number,
    private readonly ratePerS: number,
  ) {
    this.tokens = burst;
  }

  /** Take one token at time `now` (performance.now() ms); false when none is left. */
  take(now = performance.now()): boolean {
    const t = Math.min(this.burst, this.tokens + ((now - this.at) * this.ratePerS) / 1000);
    this.at = now;
    if (t < WHOLE) {
      this.tokens = t;
      return false;
    }
    this.tokens = Math.max(0, t - 1);
    return true;
  }
}
