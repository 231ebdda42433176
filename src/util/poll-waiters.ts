/**
 * The poll() waiters of a socket (an rsocket, or the plain TCP socket of the tools): callers
 * waiting for readiness, resolved with their revents when the socket says they are ready.
 *
 * A transfer loop waits once per message with no timeout, so that wait is two fields and a reused
 * promise executor — no waiter object, closure or array operation; waits with a timeout, or more
 * than one at a time, go in a list.
 *
 * @module
 */

import { objectArray } from './arrays.js';

interface Waiter {
  events: number;
  resolve: (revents: number) => void;
  timer: NodeJS.Timeout | null;
}

export class PollWaiters<T> {
  private oneEvents = 0;
  private oneResolve: ((revents: number) => void) | null = null;
  private readonly list = objectArray<Waiter>();
  private readonly setOne = (resolve: (revents: number) => void): void => {
    this.oneResolve = resolve;
  };

  /**
   * `ready.call(owner, events)`: the socket's revents of `events` now (0: not ready). A method of
   * the socket's class and the socket, not a closure per socket: every socket's wake then calls
   * the one function its optimised code was compiled against.
   */
  constructor(
    private readonly owner: T,
    private readonly ready: (this: T, events: number) => number,
  ) {}

  /** Whether anyone waits. */
  get waiting(): boolean {
    return this.oneResolve !== null || this.list.length > 0;
  }

  /**
   * Wait for `events` (the caller found them not ready): resolves with the revents once
   * {@link wake} finds them ready, with 0 after `timeoutMs` (negative: no timeout) or once
   * `signal` aborts (the wait is then forgotten: a multi-socket rpoll that found another socket
   * ready leaves nothing behind on this one).
   */
  wait(events: number, timeoutMs: number, signal?: AbortSignal): Promise<number> {
    if (signal === undefined && timeoutMs < 0 && this.oneResolve === null && this.list.length === 0) {
      this.oneEvents = events;
      return new Promise<number>(this.setOne);
    }
    if (signal?.aborted) return Promise.resolve(0);
    return new Promise<number>((resolve) => {
      const w: Waiter = { events, resolve, timer: null };
      const forget = (): void => {
        const i = this.list.indexOf(w);
        if (i >= 0) this.list.splice(i, 1);
        if (w.timer) clearTimeout(w.timer);
        resolve(0);
      };
      if (timeoutMs > 0) w.timer = setTimeout(forget, timeoutMs);
      if (signal) {
        signal.addEventListener('abort', forget, { once: true });
        w.resolve = (revents: number): void => {
          signal.removeEventListener('abort', forget);
          resolve(revents);
        };
      }
      this.list.push(w);
    });
  }

  /** Resolve the waiters whose events are ready, in the order they came; every one when `all`. */
  wake(all = false): void {
    const one = this.oneResolve;
    if (one !== null) {
      const r = this.ready.call(this.owner, this.oneEvents);
      if (r !== 0 || all) {
        this.oneResolve = null;
        one(r);
      }
    }
    const ws = this.list;
    for (let i = 0; i < ws.length; ) {
      const w = ws[i] as Waiter;
      const r = this.ready.call(this.owner, w.events);
      if (r !== 0 || all) {
        // Remove in place, order kept (splice would build an array of the removed waiter).
        for (let j = i + 1; j < ws.length; j++) ws[j - 1] = ws[j] as Waiter;
        ws.pop();
        if (w.timer) clearTimeout(w.timer);
        w.resolve(r);
      } else i++;
    }
  }

  /** Resolve every waiter with `revents` (the socket is closed). */
  release(revents: number): void {
    const one = this.oneResolve;
    this.oneResolve = null;
    if (one !== null) one(revents);
    for (const w of this.list.splice(0)) {
      if (w.timer) clearTimeout(w.timer);
      w.resolve(revents);
    }
  }
}
