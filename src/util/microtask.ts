/**
 * Microtasks for the data path.
 *
 * @module
 */

const RESOLVED = Promise.resolve();

/**
 * Run `fn` as a microtask: a reaction of one settled promise, not queueMicrotask(), which Node
 * wraps in an AsyncResource (async_hooks bookkeeping) that costs more than the work it schedules
 * on the per-message path.
 */
export function microtask(fn: () => void): void {
  void RESOLVED.then(fn);
}
