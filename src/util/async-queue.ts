/**
 * An unbounded FIFO of items with promise-based consumers: the shape of a kernel event file
 * (`ibv_get_cq_event`, `ibv_get_async_event`, `rdma_get_cm_event`) without a file descriptor.
 *
 * Items queue while nobody waits; waiters queue while no item is available; each item goes to
 * exactly one consumer, oldest waiter first. A consumer can give up with an `AbortSignal`: its
 * promise then rejects with an {@link AbortError} (`code === 'ABORT_ERR'`) whose `cause` is the
 * signal's reason. {@link AsyncQueue.close} ends the queue: pending and later `shift()`s
 * resolve to `undefined`.
 */
import { abortError } from './abort.js';
import { Ring } from './ring.js';

interface Waiter<T> {
  resolve(v: T | undefined): void;
  reject(e: unknown): void;
  signal: AbortSignal | undefined;
  op: string;
  /** Set: a close rejects this wait with what it returns, instead of resolving `undefined`. */
  closed: (() => unknown) | undefined;
}


/** See the module comment. `T` excludes `undefined`, which `shift()` uses for "closed". */
export class AsyncQueue<T extends object> {
  private readonly _items = new Ring<T>(Infinity);
  private readonly _waiters = new Ring<Waiter<T>>(Infinity, 4);
  private _closed = false;
  /**
   * The signals this queue listens to: one 'abort' listener per signal, added by the first wait
   * that passes it and kept (a consumer that waits in a loop passes the same signal every time,
   * and adding and removing an EventTarget listener per wait costs more than the wait itself).
   */
  private readonly _listened = new WeakSet<AbortSignal>();

  /**
   * @param _onDeliver called synchronously each time an item is handed to a consumer (by `shift`,
   *   `tryShift` or a `push` that finds a waiter) — the moment ibverbs counts an event as reported.
   */
  constructor(private readonly _onDeliver?: (item: T) => void) {
    // Set when the queue closes: mutable from the first queue on (see util/arrays.ts).
    this._closed = true;
    this._closed = false;
  }

  /** Items queued and not yet delivered. */
  get length(): number {
    return this._items.length;
  }

  /** Consumers currently waiting. */
  get waiting(): number {
    return this._waiters.length;
  }

  /** True after {@link close}. */
  get closed(): boolean {
    return this._closed;
  }

  /** Queue an item, or hand it to the oldest waiter. Returns false (item dropped) once closed. */
  push(item: T): boolean {
    if (this._closed) return false;
    const w = this._waiters.shift();
    if (w === undefined) {
      this._items.push(item);
      return true;
    }
    this._onDeliver?.(item);
    w.resolve(item);
    return true;
  }

  /** Take the oldest queued item without waiting (`undefined` if none). */
  tryShift(): T | undefined {
    const item = this._items.shift();
    if (item !== undefined) this._onDeliver?.(item);
    return item;
  }

  /**
   * Wait for the next item. Resolves to `undefined` if the queue is (or gets) closed.
   * @param signal aborting it rejects the promise with an AbortError (also if already aborted).
   * @param op operation name used in the abort error (`'ibv_get_cq_event'`).
   */
  shift(signal?: AbortSignal, op = 'shift'): Promise<T | undefined> {
    return this._shift(signal, op, undefined);
  }

  /**
   * Wait for the next item; a closed queue rejects with `closed()` (e.g. EBADF for a destroyed
   * channel). One promise per wait: what an `async` wrapper that awaits {@link shift} and maps
   * `undefined` to an error would cost twice, plus its hops through the microtask queue.
   */
  shiftOrReject(signal: AbortSignal | undefined, op: string, closed: () => unknown): Promise<T> {
    return this._shift(signal, op, closed) as Promise<T>;
  }

  private _shift(signal: AbortSignal | undefined, op: string, closed: (() => unknown) | undefined): Promise<T | undefined> {
    const item = this.tryShift();
    if (item !== undefined) return Promise.resolve(item);
    if (this._closed) return closed === undefined ? Promise.resolve(undefined) : Promise.reject(closed());
    if (signal?.aborted) return Promise.reject(abortError(op, signal));
    if (signal && !this._listened.has(signal)) {
      this._listened.add(signal);
      signal.addEventListener('abort', () => this._abort(signal), { once: true });
    }
    return new Promise<T | undefined>((resolve, reject) => {
      this._waiters.push({ resolve, reject, signal, op, closed });
    });
  }

  /** `signal` fired: every wait that passed it rejects with an AbortError, in order. */
  private _abort(signal: AbortSignal): void {
    const gone: Waiter<T>[] = [];
    this._waiters.removeIf((w) => {
      if (w.signal !== signal) return false;
      gone.push(w);
      return true;
    });
    for (const w of gone) w.reject(abortError(w.op, signal));
  }

  /**
   * Drop queued (undelivered) items matching `pred`, e.g. the events of a destroyed object.
   * @returns how many were dropped.
   */
  remove(pred: (item: T) => boolean): number {
    return this._items.removeIf(pred);
  }

  /** Close: drop queued items, resolve every waiter with `undefined`, refuse later pushes. */
  close(): void {
    if (this._closed) return;
    this._closed = true;
    this._items.clear();
    for (let w = this._waiters.shift(); w !== undefined; w = this._waiters.shift()) {
      if (w.closed === undefined) w.resolve(undefined);
      else w.reject(w.closed());
    }
  }
}
