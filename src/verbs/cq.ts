/**
 * Completion queue (`ibv_create_cq`, `ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_ack_cq_events`,
 * `ibv_destroy_cq`), after siw_cq.c / siw_qp.c's `siw_sqe_complete()`.
 *
 * - Size: the requested `cqe` (1..maxCqe) is rounded as the device rounds its queue (siw: up to
 *   a power of two; rxe: to one less than the power of two above it); `cqe` reports the actual size.
 * - `poll()` returns the `Wc` objects the transport pushed (not copies), oldest first;
 *   `pollInto(out)` copies each completion into the `Wc` object already at its place in `out`
 *   (as the native provider does) and stores the CQ's own object only where `out` has none. The
 *   CQ reuses the objects whose contents it copied out, so a steady `pollInto` loop with the same
 *   array allocates nothing per completion.
 * - Notification is one-shot: `reqNotify()` arms the CQ; the next completion pushed after that
 *   (with `solicitedOnly`, the next one the transport flags as solicited) disarms it and puts
 *   one event on the completion channel. Arming never fires for completions already queued
 *   (ibverbs and siw: only new CQEs notify), so re-arm *before* the final poll.
 * - Overflow: a push into a full CQ loses that completion, raises the async event CQ_ERR and
 *   calls {@link Cq.onOverflow} (the transport moves the QPs using the CQ to the error state).
 *   The CQ then stays in error (IB spec: a CQ overrun is a CQ catastrophic error) — every later
 *   push fails and is dropped; queued completions can still be polled; only destroying the CQ
 *   clears it. (siw itself only drops the one CQE and keeps accepting once there is room.)
 * - Waiting: {@link Cq.waitForCompletions} and {@link Cq.completions} wait for completions without
 *   the arm-after-the-fact race (arm, poll, then wait; each event acknowledged), on a CQ with or
 *   without a completion channel.
 */
import { err } from '../errors.js';
import { trace, tracing } from '../trace.js';
import { Ring, nextPow2 } from '../util/ring.js';
import { abortError } from '../util/abort.js';
import { AsyncEventType } from './types.js';
import type { Wc } from './types.js';
import type { CompChannel } from './comp-channel.js';
import type { Context } from './context.js';
import { getProvider, type QpLike } from './provider.js';
import { FreeList } from '../util/arrays.js';

/** Arming state (siw_notify_flags without the MISSED_EVENTS bit). */
const enum Arm {
  NONE = 0,
  SOLICITED = 1,
  NEXT = 2,
}

/** Options of {@link Cq.completions}. */
export interface CompletionsOptions {
  /** Ends the iteration: the pending `next()` rejects with an `AbortError`. */
  signal?: AbortSignal;
  /** Stop after this many completions (default: no limit). */
  max?: number;
}

/** The ring a CQ holds for an instant while it is built (see the constructor). */
const NO_RING = new Ring<Wc>(1, 1);

/** A parked {@link Cq.waitForCompletions} call (it re-checks the CQ when woken). */
type CqWaiter = () => void;

/** The CQEs the device gives a CQ asked for `cqe` (its provider's rounding; siw's by default). */
function cqSlots(context: Context, cqe: number): number {
  const round = getProvider(context.device.info.provider)?.cqSlots;
  return round ? round(cqe) : nextPow2(cqe);
}

/** `struct ibv_cq`. Create with `Context.createCq()`. */
export class Cq {
  /** The owning device context. */
  readonly context: Context;
  /** The completion channel events go to (`undefined`: no events are delivered). */
  readonly channel: CompChannel | undefined;
  /** `comp_vector` given at creation. */
  readonly compVector: number;
  /** `cq_context`: the opaque user value given at creation. */
  readonly cqContext: unknown;
  /** Actual number of CQEs (the request rounded as the device rounds it; changed by {@link Cq.resize}). */
  get cqe(): number {
    return this._cqe;
  }
  /** Per-context CQ number (`handle`), for traces. */
  readonly handle: number;
  /**
   * Called once, synchronously, when the CQ overflows (after CQ_ERR is raised). The transport
   * sets it to move the QPs in {@link Cq.qps} to the error state.
   */
  onOverflow: ((cq: Cq) => void) | undefined = undefined;
  /** @internal QPs using this CQ (send or receive). */
  readonly _qps = new Set<QpLike>();
  private _ring: Ring<Wc>;
  /** The number of CQEs ({@link cqe}); a subclass whose device sizes the CQ sets it. */
  protected _cqe: number;
  /** `Wc` objects whose contents {@link pollInto} copied out: reused by {@link _wc}. */
  private readonly _free = new FreeList<Wc>(WC_POOL);
  private _arm: Arm = Arm.NONE;
  private _destroyed = false;
  private _overflowed = false;
  private _eventsReported = 0;
  private _eventsAcked = 0;
  /** {@link waitForCompletions} callers of a CQ without a channel: woken by the next push. */
  private _pushWaiters: CqWaiter[] = [];
  /** {@link waitForCompletions} callers of a CQ with a channel: woken by this CQ's next event. */
  private _eventWaiters: CqWaiter[] = [];

  /** @internal Use `Context.createCq()`, which validates the arguments. */
  constructor(context: Context, cqe: number, channel: CompChannel | undefined, compVector: number, cqContext: unknown, handle: number) {
    this.context = context;
    this.channel = channel;
    this.compVector = compVector;
    this.cqContext = cqContext;
    this.handle = handle;
    // Replaced by resize: mutable from the first CQ on (see util/arrays.ts).
    this._cqe = 0;
    this._cqe = cqSlots(context, cqe);
    this._ring = NO_RING;
    this._ring = new Ring<Wc>(this._cqe, 64);
    // Set at teardown: mutable from the first CQ on (see util/arrays.ts).
    this._destroyed = true;
    this._destroyed = false;
    context._cqSet.add(this);
  }

  /** @internal Number of completions queued (`cq_put - cq_get`). */
  get _count(): number {
    return this._ring.length;
  }

  /** Completions queued and not yet polled. */
  get pending(): number {
    return this._ring.length;
  }

  /** True once the CQ has overflowed (CQ_ERR raised; further completions are dropped). */
  get overflowed(): boolean {
    return this._overflowed;
  }

  /** True after {@link destroy}. */
  get destroyed(): boolean {
    return this._destroyed;
  }

  /** QPs currently using this CQ. */
  get qps(): ReadonlySet<QpLike> {
    return this._qps;
  }

  /** `comp_events_completed`: events acknowledged so far. */
  get compEventsCompleted(): number {
    return this._eventsAcked;
  }

  /** Events read from the channel and not yet acknowledged. */
  get unackedEvents(): number {
    return this._eventsReported - this._eventsAcked;
  }

  /**
   * `ibv_resize_cq()`: give the CQ room for at least `cqe` completions (rounded up as at
   * creation; {@link Cq.cqe} reports the new size). Completions already queued stay, in order. The
   * device decides: rxe resizes (`rxe_resize_cq`: EINVAL for `cqe` < 1, above `maxCqe` or below
   * the completions queued); siw has no resize (rdma-core's siw provider leaves `resize_cq` to the
   * default op: EOPNOTSUPP), nor does the native backend's addon.
   * @throws RdmaError EINVAL (destroyed CQ, bad size), EOPNOTSUPP (the device cannot resize).
   */
  resize(cqe: number): void {
    const op = 'ibv_resize_cq';
    if (this._destroyed) throw err('EINVAL', op, 'CQ destroyed');
    const p = this.context.device._provider(op);
    if (!p.resizeCq) throw err('EOPNOTSUPP', op, `${this.context.device.name} cannot resize a CQ`);
    p.resizeCq(this, cqe);
  }

  /**
   * @internal The provider's resize: room for `cqe` completions (rounded as at creation),
   * the queued ones moved over in order. The provider has checked `cqe`.
   */
  _setSize(cqe: number): void {
    const size = cqSlots(this.context, cqe);
    const ring = new Ring<Wc>(size, 64);
    for (let w = this._ring.shift(); w !== undefined; w = this._ring.shift()) ring.push(w);
    this._ring = ring;
    this._cqe = size;
    if (tracing('cq')) trace('cq', `CQ[${this.handle}]`, `resized to ${size}`);
  }

  /**
   * `ibv_poll_cq()`: remove and return up to `max` completions, oldest first (an empty array if
   * none).
   * @throws RdmaError EINVAL if `max` is not a non-negative integer or the CQ is destroyed.
   */
  poll(max = 1): Wc[] {
    this._checkPoll(max);
    const out: Wc[] = [];
    for (let k = 0; k < max; k++) {
      const wc = this._ring.shift();
      if (wc === undefined) break;
      out.push(wc);
    }
    return out;
  }

  /**
   * Allocation-free `ibv_poll_cq()`: up to `max` completions go into `out[0..n)`, and `n` is
   * returned. A `Wc` object already at `out[i]` is filled in place (the one polled there last
   * time, typically: copy what you keep before polling into the same array again); where `out`
   * has none, the CQ's object is stored. Elements of `out` past `n` are left untouched.
   * @throws RdmaError EINVAL if `max` is not a non-negative integer, or the CQ is destroyed.
   */
  pollInto(out: Wc[], max: number = out.length): number {
    this._checkPoll(max);
    let n = 0;
    while (n < max) {
      const wc = this._ring.shift();
      if (wc === undefined) break;
      const to = out[n];
      if (typeof to === 'object' && to !== null && to !== wc) {
        copyWc(wc, to);
        this._free.give(wc);
      } else out[n] = wc;
      n++;
    }
    return n;
  }

  /**
   * @internal Transport side: a `Wc` object to fill and {@link _push} — one this CQ copied out
   * and can reuse, or a new one. Every field must be written.
   */
  _wc(): Wc {
    return this._free.take() ?? newWc();
  }

  /**
   * `ibv_req_notify_cq()`: arm the CQ for one event on its channel — on the next completion, or
   * with `solicitedOnly` on the next solicited one. Completions already queued do not fire.
   * Arming for "next" while armed for "solicited" upgrades; arming for "solicited" while armed
   * for "next" keeps "next" (the more inclusive request wins, as in rxe).
   * @throws RdmaError EINVAL if the CQ is destroyed.
   */
  reqNotify(solicitedOnly = false): void {
    if (this._destroyed) throw err('EINVAL', 'ibv_req_notify_cq', 'CQ destroyed');
    const want = solicitedOnly ? Arm.SOLICITED : Arm.NEXT;
    if (want > this._arm) this._arm = want;
  }

  /** True while armed (a notification is requested and has not fired yet). */
  get armed(): boolean {
    return this._arm !== Arm.NONE;
  }

  /**
   * `ibv_ack_cq_events()`: acknowledge `n` events read from the channel for this CQ.
   * @throws RdmaError EINVAL if `n` is not a non-negative integer or exceeds the unacknowledged
   *   events (ibverbs does not check; acknowledging events never read is a bug).
   */
  ackEvents(n: number): void {
    if (!Number.isInteger(n) || n < 0) throw err('EINVAL', 'ibv_ack_cq_events', `nevents ${n}`);
    if (n > this._eventsReported - this._eventsAcked) {
      throw err('EINVAL', 'ibv_ack_cq_events', `${n} > ${this._eventsReported - this._eventsAcked} unacknowledged`);
    }
    this._eventsAcked += n;
  }

  /**
   * `ibv_destroy_cq()`. Queued completions and unread channel events are discarded.
   * @throws RdmaError EBUSY while QPs use the CQ, while channel events read for it are not
   *   acknowledged, or while async events read for it are not acknowledged; EINVAL if already
   *   destroyed.
   */
  destroy(): void {
    if (this._destroyed) throw err('EINVAL', 'ibv_destroy_cq', 'already destroyed');
    if (this._qps.size > 0) throw err('EBUSY', 'ibv_destroy_cq', `${this._qps.size} QP(s) still attached`);
    if (this._eventsReported !== this._eventsAcked) {
      throw err('EBUSY', 'ibv_destroy_cq', `${this._eventsReported - this._eventsAcked} completion event(s) not acknowledged`);
    }
    if (this.context._async.unacked(this) > 0) throw err('EBUSY', 'ibv_destroy_cq', 'async event(s) not acknowledged');
    this._destroyed = true;
    this._arm = Arm.NONE;
    this._ring.clear();
    this.onOverflow = undefined;
    this._wake(this._pushWaiters);
    this._wake(this._eventWaiters);
    if (this.channel) {
      this.channel._purge(this);
      this.channel._cqs.delete(this);
    }
    this.context._async.purge(this);
    this.context._cqDestroyed(this);
  }

  /**
   * `using` / `await using`: `ibv_destroy_cq()` at the end of the scope; nothing if already
   * destroyed.
   * @throws RdmaError what {@link destroy} throws (EBUSY while QPs use it or events read for it
   *   are unacknowledged): disposal reports, never leaks silently.
   */
  [Symbol.dispose](): void {
    if (!this._destroyed) this.destroy();
  }

  /**
   * @internal Transport side: queue a completion (the object is stored, not copied: do not
   * reuse it). `solicited` marks a completion that satisfies a solicited-only arming (the
   * transport decides: e.g. a receive completion of a message with the SE bit).
   * @returns false if the completion was lost: CQ full (overflow: CQ_ERR is raised and
   *   {@link onOverflow} called), already overflowed, or destroyed.
   */
  _push(wc: Wc, solicited: boolean): boolean {
    if (this._destroyed || this._overflowed) return false;
    if (!this._ring.push(wc)) {
      this._overflow();
      return false;
    }
    const arm = this._arm;
    if (arm === Arm.NEXT || (arm === Arm.SOLICITED && solicited)) {
      this._arm = Arm.NONE;
      if (this._eventWaiters.length > 0) {
        // The event goes to the waitForCompletions callers, which read and acknowledge it at once.
        this._eventsReported++;
        this._eventsAcked++;
        this._wake(this._eventWaiters);
      } else if (this.channel !== undefined && !this.channel.destroyed) this.channel._enqueue(this);
    }
    if (this._pushWaiters.length > 0) this._wake(this._pushWaiters);
    return true;
  }

  /**
   * Wait until completions are queued, and resolve with how many can be polled now (at least 1).
   * Cannot miss a completion, whenever it arrives: with a completion channel it re-arms the CQ,
   * polls (counts what is queued), and only then waits for this CQ's event, which it
   * acknowledges — the `ibv_req_notify_cq` / `ibv_poll_cq` / `ibv_get_cq_event` /
   * `ibv_ack_cq_events` loop done right; without a channel it waits for the next completion.
   * Completions queued already resolve it at once. The completions stay queued: poll them.
   *
   * With a channel, this CQ's events are consumed here: do not also read them with
   * `getCqEvent()`. Other CQs' events on a shared channel are left alone.
   * @param signal abort the wait: rejects with `AbortError` (`code` `'ABORT_ERR'`, the reason as `cause`).
   * @throws RdmaError EINVAL if the CQ is (or gets) destroyed; EOVERFLOW if it overflowed and
   *   its queued completions are all polled (no completion can come any more).
   */
  async waitForCompletions(signal?: AbortSignal): Promise<number> {
    const op = 'ibv_get_cq_event';
    for (;;) {
      if (this._destroyed) throw err('EINVAL', op, 'CQ destroyed');
      if (this._ring.length > 0) return this._ring.length;
      if (this._overflowed) throw err('EOVERFLOW', op, 'the CQ overflowed: no completion can come any more');
      if (signal?.aborted) throw abortError(op, signal);
      let list = this._pushWaiters;
      if (this.channel !== undefined) {
        // Arm, then poll again: a completion that came before the arm would not raise an event.
        this.reqNotify();
        if (this._ring.length > 0) return this._ring.length;
        list = this._eventWaiters;
      }
      await this._waitOn(list, signal, op);
    }
  }

  /**
   * The completions of this CQ as they come, oldest first (each one once; the same `Wc` objects
   * {@link poll} returns). Waits with {@link waitForCompletions}, so none is missed. Ends after
   * `max` completions or when the CQ is destroyed; aborting `signal` rejects the pending step with
   * `AbortError`. Errors as {@link waitForCompletions}.
   *
   * ```ts
   * for await (const wc of cq.completions({ signal: AbortSignal.timeout(5000) })) {
   *   if (wc.status !== WcStatus.SUCCESS) throw new Error(`wr ${wc.wrId}: ${wcStatusStr(wc.status)}`);
   * }
   * ```
   * @throws RdmaError EINVAL if `max` is not a non-negative integer (or Infinity).
   */
  completions(opts: CompletionsOptions = {}): AsyncIterableIterator<Wc> {
    const { signal, max = Infinity } = opts;
    if (max !== Infinity && (!Number.isInteger(max) || max < 0)) throw err('EINVAL', 'ibv_poll_cq', `max ${max}`);
    return this._completions(signal, max);
  }

  private async *_completions(signal: AbortSignal | undefined, max: number): AsyncGenerator<Wc, void, undefined> {
    for (let left = max; left > 0; left--) {
      if (this._destroyed) return;
      if (this._ring.length === 0) {
        try {
          await this.waitForCompletions(signal);
        } catch (e) {
          if (this._destroyed) return;
          throw e;
        }
      }
      yield this._ring.shift() as Wc;
    }
  }

  /** Park on `list` until woken (resolve) or aborted (reject). */
  private _waitOn(list: CqWaiter[], signal: AbortSignal | undefined, op: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let onAbort: (() => void) | undefined;
      const w: CqWaiter = () => {
        if (onAbort) signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      if (signal) {
        onAbort = () => {
          const i = list.indexOf(w);
          if (i >= 0) list.splice(i, 1);
          reject(abortError(op, signal));
        };
        signal.addEventListener('abort', onAbort, { once: true });
      }
      list.push(w);
    });
  }

  /** Wake every waiter parked on `list`. */
  private _wake(list: CqWaiter[]): void {
    const ws = list.splice(0);
    for (const w of ws) w();
  }

  /** @internal A QP starts using this CQ. */
  _attachQp(qp: QpLike): void {
    this._qps.add(qp);
  }

  /** @internal A QP stops using this CQ. */
  _detachQp(qp: QpLike): void {
    this._qps.delete(qp);
  }

  /** @internal The channel handed one of this CQ's events to a reader. */
  _eventReported(): void {
    this._eventsReported++;
  }

  private _overflow(): void {
    this._overflowed = true;
    this._arm = Arm.NONE;
    if (tracing('cq')) trace('cq', `CQ[${this.handle}]`, `overflow: ${this.cqe} CQEs queued, completion lost, CQ in error`);
    this.context._raiseAsyncEvent({ type: AsyncEventType.CQ_ERR, cq: this });
    this.onOverflow?.(this);
  }

  private _checkPoll(max: number): void {
    if (this._destroyed) throw err('EINVAL', 'ibv_poll_cq', 'CQ destroyed');
    if (!Number.isInteger(max) || max < 0) throw err('EINVAL', 'ibv_poll_cq', `num_entries ${max}`);
  }
}

/** `Wc` objects a CQ keeps for reuse. */
const WC_POOL = 64;

/** A zeroed `Wc` (every field present: one object shape for all completions). */
export function newWc(): Wc {
  return { wrId: 0, status: 0, opcode: 0, vendorErr: 0, byteLen: 0, qpNum: 0, srcQp: 0, wcFlags: 0, immData: 0, invalidatedRkey: 0, pkeyIndex: 0, slid: 0, sl: 0, dlidPathBits: 0 };
}

function copyWc(f: Wc, t: Wc): void {
  t.wrId = f.wrId;
  t.status = f.status;
  t.opcode = f.opcode;
  t.vendorErr = f.vendorErr;
  t.byteLen = f.byteLen;
  t.qpNum = f.qpNum;
  t.srcQp = f.srcQp;
  t.wcFlags = f.wcFlags;
  t.immData = f.immData;
  t.invalidatedRkey = f.invalidatedRkey;
  t.pkeyIndex = f.pkeyIndex;
  t.slid = f.slid;
  t.sl = f.sl;
  t.dlidPathBits = f.dlidPathBits;
}
