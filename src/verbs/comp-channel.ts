/**
 * Completion event channel (`ibv_create_comp_channel`, `ibv_get_cq_event`,
 * `ibv_destroy_comp_channel`) — without a file descriptor: reading is a promise.
 *
 * A CQ created on a channel and armed with `cq.reqNotify()` puts one event (the CQ itself) on
 * the channel when its next (or next solicited) completion arrives. Events queue while nobody
 * reads. Each event read must be acknowledged with `cq.ackEvents(n)` before the CQ can be
 * destroyed. Typical loop, as in ibverbs:
 *
 * ```ts
 * cq.reqNotify();
 * for await (const c of channel) {     // or: const c = await channel.getCqEvent();
 *   c.ackEvents(1);
 *   c.reqNotify();                     // re-arm first, then drain, so nothing is missed
 *   for (const wc of c.poll(16)) ...
 * }
 * ```
 *
 * Aborting a read (`getCqEvent(signal)`) rejects it with an `AbortError` (Node's shape: `code`
 * `'ABORT_ERR'`, the signal's reason as `cause`), as every cancellable call of this package does.
 */
import { err } from '../errors.js';
import { AsyncQueue } from '../util/async-queue.js';
import type { Context } from './context.js';
import type { Cq } from './cq.js';

/**
 * The delivery hook of every channel's queue: one function for all of them (a closure per
 * channel would make the queue's call site see a new target with each connection).
 */
const eventReported = (cq: Cq): void => cq._eventReported();

/** @internal Told by a channel each time an event is queued (see {@link CompChannel._sink}). */
export interface CqEventSink {
  cqEventQueued(): void;
}

/** `struct ibv_comp_channel`. Create with `Context.createCompChannel()`. */
export class CompChannel implements AsyncIterable<Cq> {
  /** The owning device context. */
  readonly context: Context;
  /** @internal CQs created on this channel and not destroyed. */
  readonly _cqs = new Set<Cq>();
  private readonly _q = new AsyncQueue<Cq>(eventReported);
  private _destroyed = false;

  /** @internal Use `Context.createCompChannel()`. */
  constructor(context: Context) {
    this.context = context;
    // Set at teardown: mutable from the first channel on (see util/arrays.ts).
    this._destroyed = true;
    this._destroyed = false;
  }

  /** True after {@link destroy}. */
  get destroyed(): boolean {
    return this._destroyed;
  }

  /** Events queued and not yet read. */
  get pending(): number {
    return this._q.length;
  }

  /**
   * `ibv_get_cq_event()`: wait for the next completion event and return its CQ. The event counts
   * as reported; acknowledge it with `cq.ackEvents()`.
   * @param signal abort the wait: the promise rejects with an `AbortError`.
   * @throws RdmaError EBADF if the channel is (or gets) destroyed.
   */
  getCqEvent(signal?: AbortSignal): Promise<Cq> {
    // Not `async`: one promise per wait (the queue's), settled straight by the event.
    if (this._destroyed) return Promise.reject(channelGone());
    return this._q.shiftOrReject(signal, 'ibv_get_cq_event', channelGone);
  }

  /**
   * Non-blocking `ibv_get_cq_event()` (an `O_NONBLOCK` channel fd): the CQ of the next queued
   * event, or `undefined` (EAGAIN) if none.
   * @throws RdmaError EBADF if the channel is destroyed.
   */
  tryGetCqEvent(): Cq | undefined {
    if (this._destroyed) throw err('EBADF', 'ibv_get_cq_event', 'channel destroyed');
    return this._q.tryShift();
  }

  /**
   * `ibv_destroy_comp_channel()`. Pending reads resolve (async iteration ends) or reject with
   * EBADF (`getCqEvent`).
   * @throws RdmaError EBUSY while CQs created on it still exist; EINVAL if already destroyed.
   */
  destroy(): void {
    if (this._destroyed) throw err('EINVAL', 'ibv_destroy_comp_channel', 'already destroyed');
    if (this._cqs.size > 0) throw err('EBUSY', 'ibv_destroy_comp_channel', `${this._cqs.size} CQ(s) still use it`);
    this._destroyed = true;
    this._q.close();
    this.context._compChannelDestroyed(this);
  }

  /**
   * `using` / `await using`: `ibv_destroy_comp_channel()` at the end of the scope; nothing if
   * already destroyed.
   * @throws RdmaError what {@link destroy} throws (EBUSY while CQs use it): disposal reports,
   *   never leaks silently.
   */
  [Symbol.dispose](): void {
    if (!this._destroyed) this.destroy();
  }

  /**
   * Iterate over completion events (each yields the CQ, already counted as reported: ack it).
   * Ends when the channel is destroyed. Leaving the loop (`break`, `return()`, even while a
   * read is pending) does not destroy the channel and does not consume an event.
   */
  [Symbol.asyncIterator](): AsyncIterableIterator<Cq> {
    let ended = false;
    let pending: AbortController | undefined;
    const done: IteratorReturnResult<undefined> = { done: true, value: undefined };
    const it: AsyncIterableIterator<Cq> = {
      next: async (): Promise<IteratorResult<Cq>> => {
        if (ended || this._destroyed) return done;
        const ac = new AbortController();
        pending = ac;
        try {
          const cq = await this._q.shift(ac.signal, 'ibv_get_cq_event');
          if (cq === undefined) {
            ended = true;
            return done;
          }
          return { done: false, value: cq };
        } catch (e) {
          if (ended) return done; // the pending read was cancelled by return()
          throw e;
        } finally {
          if (pending === ac) pending = undefined;
        }
      },
      return: async (): Promise<IteratorResult<Cq>> => {
        ended = true;
        pending?.abort();
        return done;
      },
      [Symbol.asyncIterator]() {
        return it;
      },
    };
    return it;
  }

  /**
   * @internal Told synchronously each time an event is queued (after it is queued), for an
   * owner that drains the channel with {@link tryGetCqEvent} instead of awaiting
   * {@link getCqEvent} (no promise per event). It must not re-enter the transport: it runs
   * inside the completing operation (schedule the work, e.g. as a microtask). An object with a
   * method rather than a closure: the call below then sees one target per owner class, not a
   * new one with each connection (which would throw away the code compiled for the previous).
   */
  _sink: CqEventSink | null = null;

  /** @internal A CQ's armed notification fired. */
  _enqueue(cq: Cq): void {
    this._q.push(cq);
    if (this._sink !== null && this._q.length > 0) this._sink.cqEventQueued();
  }

  /** @internal Drop the unread events of a CQ being destroyed. */
  _purge(cq: Cq): void {
    this._q.remove((c) => c === cq);
  }
}

/** The error of a read on a destroyed channel. */
function channelGone(): Error {
  return err('EBADF', 'ibv_get_cq_event', 'channel destroyed');
}
