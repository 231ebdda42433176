/**
 * Asynchronous events (`ibv_get_async_event` / `ibv_ack_async_event` / `ibv_event_type_str`):
 * errors and state changes not tied to a work request — CQ overrun (CQ_ERR), QP fatal errors
 * (QP_FATAL, QP_ACCESS_ERR, QP_REQ_ERR), SQ_DRAINED, COMM_EST, port changes.
 *
 * Each context has one {@link AsyncEventQueue}. Events queue until read; every event read must
 * be acknowledged, and an object (CQ, QP) cannot be destroyed while events read for it are
 * unacknowledged (ibverbs blocks in that case; we refuse with EBUSY). Events still queued when
 * their object is destroyed are dropped, as the kernel does.
 */
import { err } from '../errors.js';
import { AsyncQueue } from '../util/async-queue.js';
import { trace, tracing } from '../trace.js';
import { AsyncEventType } from './types.js';
import type { Cq } from './cq.js';
import type { QpLike } from './provider.js';

/** `struct ibv_async_event`: the type and the one object it concerns. */
export interface AsyncEvent {
  /** `event_type`. */
  readonly type: AsyncEventType;
  /** The QP, for QP events. */
  readonly qp?: QpLike;
  /** The CQ, for CQ_ERR. */
  readonly cq?: Cq;
  /** The SRQ, for SRQ events. */
  readonly srq?: unknown;
  /** The port number, for port events. */
  readonly portNum?: number;
}

/** `ibv_event_type_str()`: libibverbs' text for an event type. */
export function eventTypeStr(type: AsyncEventType): string {
  return EVENT_TYPE_STR[type] ?? 'unknown';
}

const EVENT_TYPE_STR: Record<number, string> = {
  [AsyncEventType.CQ_ERR]: 'CQ error',
  [AsyncEventType.QP_FATAL]: 'local work queue catastrophic error',
  [AsyncEventType.QP_REQ_ERR]: 'invalid request local work queue error',
  [AsyncEventType.QP_ACCESS_ERR]: 'local access violation work queue error',
  [AsyncEventType.COMM_EST]: 'communication established',
  [AsyncEventType.SQ_DRAINED]: 'send queue drained',
  [AsyncEventType.PATH_MIG]: 'path migrated',
  [AsyncEventType.PATH_MIG_ERR]: 'path migration request error',
  [AsyncEventType.DEVICE_FATAL]: 'local catastrophic error',
  [AsyncEventType.PORT_ACTIVE]: 'port active',
  [AsyncEventType.PORT_ERR]: 'port error',
  [AsyncEventType.LID_CHANGE]: 'LID change',
  [AsyncEventType.PKEY_CHANGE]: 'P_Key change',
  [AsyncEventType.SM_CHANGE]: 'SM change',
  [AsyncEventType.SRQ_ERR]: 'SRQ catastrophic error',
  [AsyncEventType.SRQ_LIMIT_REACHED]: 'SRQ limit reached',
  [AsyncEventType.QP_LAST_WQE_REACHED]: 'last WQE reached',
  [AsyncEventType.CLIENT_REREGISTER]: 'client reregistration',
  [AsyncEventType.GID_CHANGE]: 'GID table change',
};

/** The object an event concerns (QP, CQ or SRQ), or `undefined` for device/port events. */
export function eventObject(ev: AsyncEvent): object | undefined {
  const o = ev.qp ?? ev.cq ?? ev.srq;
  return typeof o === 'object' && o !== null ? o : undefined;
}

/**
 * A context's async event queue (the kernel's async event file). Reading hands out events in
 * the order raised; aborting a read rejects it with an `AbortError`.
 */
export class AsyncEventQueue {
  private readonly _q: AsyncQueue<AsyncEvent>;
  /** Events read and not yet acknowledged. */
  private readonly _unacked = new Set<AsyncEvent>();
  /** Per object: events read and not yet acknowledged. */
  private readonly _perObject = new Map<object, number>();

  constructor() {
    this._q = new AsyncQueue<AsyncEvent>((ev) => this._delivered(ev));
  }

  /** Events raised and not yet read. */
  get pending(): number {
    return this._q.length;
  }

  /**
   * Queue a copy of `ev` (driver side).
   * @throws RdmaError EINVAL for an unknown event type.
   */
  raise(ev: AsyncEvent): void {
    if (EVENT_TYPE_STR[ev.type] === undefined) throw err('EINVAL', 'async event', `type ${String(ev.type)}`);
    if (tracing('qp')) trace('qp', 'ASYNC', `${AsyncEventType[ev.type]}${ev.qp ? ` QP[${ev.qp.qpNum}]` : ''}`);
    // A fresh object per event: acknowledgement is tracked by identity.
    this._q.push({ ...ev });
  }

  /**
   * `ibv_get_async_event()`: the next event, waiting if none is queued.
   * @throws AbortError (`code` `'ABORT_ERR'`, the reason as `cause`) when `signal` aborts.
   */
  async get(signal?: AbortSignal): Promise<AsyncEvent> {
    const ev = await this._q.shift(signal, 'ibv_get_async_event');
    if (ev === undefined) throw err('EBADF', 'ibv_get_async_event', 'event queue closed');
    return ev;
  }

  /** Non-blocking read (an `O_NONBLOCK` async fd): the next event or `undefined`. */
  tryGet(): AsyncEvent | undefined {
    return this._q.tryShift();
  }

  /**
   * `ibv_ack_async_event()`.
   * @throws RdmaError EINVAL if `ev` was not read from this queue or is already acknowledged.
   */
  ack(ev: AsyncEvent): void {
    if (!this._unacked.delete(ev)) throw err('EINVAL', 'ibv_ack_async_event', 'event not outstanding');
    const o = eventObject(ev);
    if (o === undefined) return;
    const n = (this._perObject.get(o) ?? 1) - 1;
    if (n <= 0) this._perObject.delete(o);
    else this._perObject.set(o, n);
  }

  /** Events read for `obj` and not yet acknowledged (destroy must refuse while non-zero). */
  unacked(obj: object): number {
    return this._perObject.get(obj) ?? 0;
  }

  /** Drop the still-queued (unread) events of a destroyed object. */
  purge(obj: object): void {
    this._q.remove((ev) => eventObject(ev) === obj);
  }

  private _delivered(ev: AsyncEvent): void {
    this._unacked.add(ev);
    const o = eventObject(ev);
    if (o !== undefined) this._perObject.set(o, (this._perObject.get(o) ?? 0) + 1);
  }
}
