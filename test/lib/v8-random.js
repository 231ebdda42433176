// An attacker's model of V8's Math.random, to show that a value drawn from it can be foreseen.
//
// V8 (src/numbers/math-random.cc, src/base/utils/random-number-generator.h) keeps a 128-bit
// xorshift128+ state (s0, s1) and a cache of 64 doubles. When the cache is empty it runs the
// generator 64 times, storing ToDouble(s0) after each step in slots 0..63, and Math.random then
// serves the slots in reverse order (63 first). ToDouble(s0) is the double whose mantissa is
// s0 >>> 12, so Math.floor(Math.random() * 2^k) is bits 63..64−k of s0. Every step is linear
// over GF(2), so each output bit is a known XOR of the 128 bits of the state: with enough
// consecutive outputs, Gaussian elimination gives the state (for each guess of where in the cache
// the first output sat), and the state gives every later output.

const STATE_BITS = 128;
const RHS = 1n << BigInt(STATE_BITS);
const CACHE = 64;

/** One xorshift128+ step on a symbolic state (arrays of 64 masks over the 128 unknowns). */
function step(st) {
  const s1 = st.s0;
  const s0 = st.s1;
  const a = new Array(64);
  for (let i = 0; i < 64; i++) a[i] = s1[i] ^ (i >= 23 ? s1[i - 23] : 0n);
  const b = new Array(64);
  for (let i = 0; i < 64; i++) b[i] = a[i] ^ (i + 17 < 64 ? a[i + 17] : 0n);
  for (let i = 0; i < 64; i++) b[i] ^= s0[i] ^ (i + 26 < 64 ? s0[i + 26] : 0n);
  return { s0, s1: b };
}

/** The symbolic s0 after each of the first `n` steps from an unknown state. */
function symbolicOutputs(n) {
  let st = { s0: [], s1: [] };
  for (let i = 0; i < 64; i++) {
    st.s0.push(1n << BigInt(i));
    st.s1.push(1n << BigInt(64 + i));
  }
  const outs = [];
  for (let g = 0; g < n; g++) {
    st = step(st);
    outs.push(st.s0);
  }
  return outs;
}

const SYM = symbolicOutputs(3 * CACHE);

/** The generator step (0-based, from the state before the first cache refill seen) of call `t` when call 0 took slot `k`. */
function stepOfCall(k, t) {
  if (t <= k) return k - t;
  const r = t - k - 1;
  return CACHE * (1 + Math.floor(r / CACHE)) + (CACHE - 1 - (r % CACHE));
}

/** Reduce `row` (coefficients + right-hand side at bit 128) by the pivots; the remainder. */
function reduce(pivots, row) {
  for (let b = STATE_BITS - 1; b >= 0; b--) {
    if (((row >> BigInt(b)) & 1n) === 0n) continue;
    const p = pivots[b];
    if (p === undefined) return row;
    row ^= p;
  }
  return row;
}

/** The candidates for the value after `observed`, all of them consecutive outputs. */
function predictAfterRun(observed, bits) {
  const out = new Set();
  for (let k = 0; k < CACHE; k++) {
    const pivots = new Array(STATE_BITS);
    let consistent = true;
    for (let t = 0; t < observed.length && consistent; t++) {
      const sym = SYM[stepOfCall(k, t)];
      for (let j = 0; j < bits; j++) {
        const rhs = (observed[t] >>> (bits - 1 - j)) & 1 ? RHS : 0n;
        const row = reduce(pivots, sym[63 - j] | rhs);
        if (row === 0n) continue;
        if (row === RHS) {
          consistent = false;
          break;
        }
        let hb = STATE_BITS - 1;
        while (((row >> BigInt(hb)) & 1n) === 0n) hb--;
        pivots[hb] = row;
      }
    }
    if (!consistent) continue;
    // The next output, bit by bit: determined when its row reduces to the right-hand side alone.
    const sym = SYM[stepOfCall(k, observed.length)];
    let next = 0;
    let determined = true;
    for (let j = 0; j < bits; j++) {
      const row = reduce(pivots, sym[63 - j]);
      if ((row & (RHS - 1n)) !== 0n) determined = false;
      next = next * 2 + (row & RHS ? 1 : 0);
    }
    if (determined) out.add(next);
  }
  return [...out];
}

/**
 * What an attacker predicts for the output that follows `observed`, a run of consecutive values
 * of `Math.floor(Math.random() * 2 ** bits)` from one V8 isolate: the distinct values predicted
 * by the cache positions for which the observations fit one xorshift128+ state. Values from
 * Math.random give one or two (a run inside one cache block fits every position that leaves it
 * there; they differ only on whether a refill comes next); values that are not give none.
 * Other Math.random calls of the process may come between the first values (start-up work): the
 * longest run at the end (at least `minRun` values) that fits one state is used.
 */
export function predictNextMathRandom(observed, { bits = 24, minRun = Math.ceil((STATE_BITS + 32) / bits) } = {}) {
  if (observed.length < minRun) throw new Error(`${observed.length} values of ${bits} bits do not determine 128 bits of state`);
  for (let start = 0; start + minRun <= observed.length; start++) {
    const c = predictAfterRun(observed.slice(start), bits);
    if (c.length > 0) return c;
  }
  return [];
}
