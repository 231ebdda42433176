// Waiting in tests: a pause, and a condition polled against a deadline. Every wait has a deadline
// and a failure that says what was awaited.

/** Resolve after `ms` milliseconds. */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Resolve once `pred()` (which may return a promise) holds, polling every `step` ms; fail after
 * `ms` with `what` (a string, or a function read at the failure) or the predicate's source.
 */
export async function until(pred, ms = 3000, what = undefined, step = 5) {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) {
      const said = typeof what === 'function' ? what() : (what ?? String(pred));
      throw new Error(`timed out after ${ms} ms waiting for ${said}`);
    }
    await sleep(step);
  }
}
