/**
 * Settings from the environment: a non-negative integer variable, or the default when it is
 * unset, blank, not an integer or above `max`.
 */
export function envInt(name: string, dflt: number, max: number = Number.MAX_SAFE_INTEGER): number {
  const s = process.env[name];
  if (s === undefined || s.trim() === '') return dflt;
  const v = Number(s);
  return Number.isSafeInteger(v) && v >= 0 && v <= max ? v : dflt;
}

/**
 * A non-negative number variable (a duration in milliseconds, say: fractions allowed), or the
 * default when it is unset, blank or not such a number.
 */
export function envNumber(name: string, dflt: number): number {
  const s = process.env[name];
  if (s === undefined || s.trim() === '') return dflt;
  const v = Number(s);
  return Number.isFinite(v) && v >= 0 ? v : dflt;
}
