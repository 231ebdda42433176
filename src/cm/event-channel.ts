/**
 * `struct rdma_event_channel`: the queue of CM events of the ids created on it. Read with
 * {@link EventChannel.getEvent} (rdma_get_cm_event) or `for await (const ev of channel)`; every
 * event must be acknowledged (`ev.ack()`), and destroying an id waits for its events' acks, as
 * librdmacm does.
 */
import { RdmaError, err } from '../errors.js';
import { abortError } from '../util/abort.js';
import '../util/dispose.js';
import type { CmEvent } from './events.js';
import type { CmId } from './cm-id.js';

/** An event as the CM builds it: `_report` runs when the channel hands it to the application. */
type ReportableEvent = CmEvent & { _report?: () => void };

/** The event handed to the application counts as reported (rdma_get_cm_event returned it). */
function reported(e: CmEvent): CmEvent {
  (e as ReportableEvent)._report?.();
  return e;
}

/**
 * rdma_create_event_channel(). Disposable: `using ch = createEventChannel()` destroys it at the
 * end of the scope (declare it before the ids created on it, which are disposed first).
 */
export class EventChannel implements AsyncIterable<CmEvent>, Disposable, AsyncDisposable {
  private readonly queue: CmEvent[] = [];
  private readonly waiters: { resolve: (e: CmEvent) => void; reject: (e: Error) => void; cleanup: (() => void) | null }[] = [];
  private destroyed = false;
  /** Ids created on (or migrated to) this channel. */
  readonly _ids = new Set<CmId>();
  /** Set for the private channel of a synchronous id. */
  readonly _sync: boolean;

  constructor(sync = false) {
    this._sync = sync;
  }

  /** Events queued and not yet retrieved. */
  get pending(): number {
    return this.queue.length;
  }

  /** Internal: queue an event (the CM layer). */
  _post(ev: CmEvent): void {
    if (this.destroyed) return;
    const w = this.waiters.shift();
    if (w) {
      w.cleanup?.();
      w.resolve(reported(ev));
    } else this.queue.push(ev);
  }

  /** Internal: move the queued events of `id` to another channel (rdma_migrate_id). */
  _takeEventsOf(id: CmId): CmEvent[] {
    return this._takeWhere((e) => e.id === id);
  }

  /** Internal: remove and return the queued (not yet retrieved) events matching `pred`, in order. */
  _takeWhere(pred: (e: CmEvent) => boolean): CmEvent[] {
    const out: CmEvent[] = [];
    let j = 0;
    for (let i = 0; i < this.queue.length; i++) {
      const e = this.queue[i] as CmEvent;
      if (pred(e)) out.push(e);
      else this.queue[j++] = e;
    }
    this.queue.length = j;
    return out;
  }

  /** Internal: drop queued events of a destroyed id. */
  _dropEventsOf(id: CmId): void {
    for (const e of this._takeEventsOf(id)) e.ack();
  }

  /**
   * rdma_get_cm_event(): the next event, waiting for one. `signal` aborts the wait: the promise
   * rejects with the package's AbortError (the signal's reason as `cause`) and no event is taken.
   * Rejects with EBADF once the channel is destroyed.
   */
  getEvent(signal?: AbortSignal): Promise<CmEvent> {
    const op = 'rdma_get_cm_event';
    if (this.destroyed) return Promise.reject(err('EBADF', op, 'channel destroyed'));
    if (signal !== undefined && !(signal instanceof AbortSignal)) return Promise.reject(err('EINVAL', op, 'signal must be an AbortSignal'));
    if (signal?.aborted) return Promise.reject(abortError(op, signal));
    const e = this.queue.shift();
    if (e) return Promise.resolve(reported(e));
    if (!signal) return new Promise<CmEvent>((resolve, reject) => void this.waiters.push({ resolve, reject, cleanup: null }));
    return new Promise<CmEvent>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(abortError(op, signal));
      };
      const w = { resolve, reject, cleanup: () => signal.removeEventListener('abort', onAbort) };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(w);
    });
  }

  /** Non-blocking rdma_get_cm_event (O_NONBLOCK fd): the next event or EAGAIN. */
  tryGetEvent(): CmEvent {
    const e = this.queue.shift();
    if (!e) throw err('EAGAIN', 'rdma_get_cm_event');
    return reported(e);
  }

  /** Async iteration over events; ends when the channel is destroyed. */
  async *[Symbol.asyncIterator](): AsyncIterator<CmEvent> {
    for (;;) {
      let e: CmEvent;
      try {
        e = await this.getEvent();
      } catch (x) {
        if (x instanceof RdmaError && x.code === 'EBADF') return;
        throw x;
      }
      yield e;
    }
  }

  /**
   * rdma_destroy_event_channel(). EBUSY while ids still use it (librdmacm requires them to be
   * destroyed first). Pending waiters reject with EBADF.
   */
  destroy(): void {
    if (this.destroyed) return;
    for (const id of this._ids) if (!id.destroyed) throw err('EBUSY', 'rdma_destroy_event_channel', 'ids still use the channel');
    this.destroyed = true;
    for (const w of this.waiters.splice(0)) {
      w.cleanup?.();
      w.reject(err('EBADF', 'rdma_get_cm_event', 'channel destroyed'));
    }
    this.queue.length = 0;
  }

  /** Whether `destroy()` has run (rdma_destroy_event_channel). */
  get isDestroyed(): boolean {
    return this.destroyed;
  }

  /** `using`: {@link destroy} (EBUSY while ids still use the channel); again, nothing. */
  [Symbol.dispose](): void {
    this.destroy();
  }

  /** `await using`: as {@link EventChannel[Symbol.dispose]}. */
  [Symbol.asyncDispose](): Promise<void> {
    try {
      this.destroy();
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }
}

/** rdma_create_event_channel(). */
export function createEventChannel(): EventChannel {
  return new EventChannel();
}
