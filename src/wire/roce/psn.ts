/**
 * 24-bit packet sequence number arithmetic (IBTA vol. 1 §9.7.1; rxe `psn_compare`): PSNs wrap
 * at 2^24 and compare by the sign of their 24-bit difference, so "a before b" holds when b is
 * less than 2^23 ahead of a.
 *
 * @module
 */

/** Mask of a PSN. */
export const PSN_MASK = 0xffffff;
/** Number of distinct PSNs (2^24). */
export const PSN_MODULUS = 0x1000000;
/** Half the PSN space: the largest forward distance that still compares as "after". */
export const PSN_HALF = 0x800000;

/** `(psn + n) mod 2^24`; `n` may be negative. */
export function psnAdd(psn: number, n: number): number {
  return (psn + n) & PSN_MASK;
}

/** `(psn + 1) mod 2^24`. */
export function psnNext(psn: number): number {
  return (psn + 1) & PSN_MASK;
}

/**
 * Signed distance from `b` to `a` in the 24-bit ring, in [-2^23, 2^23): positive when `a` is
 * after `b` (rxe `psn_compare(a, b)` has the same sign).
 */
export function psnDiff(a: number, b: number): number {
  return ((a - b) << 8) >> 8;
}

/** -1, 0 or 1 as `a` is before, equal to or after `b`. */
export function psnCompare(a: number, b: number): number {
  const d = psnDiff(a, b);
  return d < 0 ? -1 : d > 0 ? 1 : 0;
}

/** Whether `a` comes strictly before `b`. */
export function psnBefore(a: number, b: number): boolean {
  return psnDiff(a, b) < 0;
}

/** Whether `a` comes strictly after `b`. */
export function psnAfter(a: number, b: number): boolean {
  return psnDiff(a, b) > 0;
}
