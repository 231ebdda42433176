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
    if (t < 1) {
      this.tokens = t;
      return false;
    }
    this.tokens = t - 1;
    return true;
  }
}
