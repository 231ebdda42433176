/**
 * Time for the RC engines: the retransmission and RNR timers and the deferred work of the
 * responder (long read responses go out in bursts). Injected, so the requester, responder and
 * completer run under a virtual clock in tests, deterministically.
 */

/** A pending timer or deferred call. */
export interface RcTimer {
  /** Do not run it (no effect once it ran). */
  cancel(): void;
}

/** What the RC engines need of time. */
export interface RcClock {
  /** Milliseconds, monotonic. */
  now(): number;
  /**
   * Run `fn` after `ms` milliseconds. `holdsLoop`: the timer keeps the event loop alive while it
   * is pending (a retransmission of unacknowledged requests, which must run even when no QP holds
   * the device's sockets); otherwise it does not.
   */
  after(ms: number, fn: () => void, holdsLoop?: boolean): RcTimer;
  /** Run `fn` soon, after pending I/O (the socket's queued datagrams get their turn first). */
  defer(fn: () => void): RcTimer;
}

/** The event loop's clock: `performance.now()`, timers (unreferenced unless asked), `setImmediate`. */
export const realClock: RcClock = {
  now: () => performance.now(),
  after(ms, fn, holdsLoop = false) {
    const t = setTimeout(fn, Math.max(0, ms));
    if (!holdsLoop) t.unref();
    return { cancel: () => clearTimeout(t) };
  },
  defer(fn) {
    const t = setImmediate(fn);
    return { cancel: () => clearImmediate(t) };
  },
};
