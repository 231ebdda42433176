/**
 * The shared receive queue (`struct ibv_srq`): `ibv_create_srq`, `ibv_modify_srq`,
 * `ibv_query_srq`, `ibv_post_srq_recv`, `ibv_destroy_srq`, and the SRQ limit event.
 *
 * One queue of receive WQEs that any QP created with it (`srq` in its init attributes) takes
 * from: the QP's own receive queue is unused and `ibv_post_recv` on it is refused (EINVAL, as
 * rxe_post_recv and siw_post_receive refuse it). A WQE a QP takes becomes that QP's: it completes
 * exactly once, on that QP's receive CQ with that QP's number — successfully, with an error, or
 * flushed when that QP goes to ERR (rxe_resp.c check_resource, siw_rq_flush). WQEs no QP has taken
 * stay on the SRQ whatever happens to the QPs.
 *
 * The limit event (IB spec 11.5.2.2, rxe_resp.c get_srq_wqe, siw_qp_rx.c siw_rqe_get): a non-zero
 * `srq_limit` arms the SRQ; when a QP takes a WQE and fewer than `srq_limit` remain, the context's
 * async queue gets SRQ_LIMIT_REACHED for this SRQ once and the SRQ is disarmed until
 * `modify({ srqLimit }, SrqAttrMask.LIMIT)` arms it again.
 *
 * Destroy: EBUSY while a QP uses the SRQ (the kernel's `usecnt`) or events read for it are not
 * acknowledged. WRs still posted are dropped without completions: rxe_srq_cleanup and
 * siw_destroy_srq free the queue, the kernel flushes nothing of an SRQ to a CQ.
 *
 * How a device sizes and limits an SRQ is its provider's declaration ({@link SrqCaps});
 * everything else is the same on every soft device.
 */
import { PostError, err } from '../errors.js';
import { trace, tracing } from '../trace.js';
import { FreeList } from '../util/arrays.js';
import { Ring } from '../util/ring.js';
import type { Context } from './context.js';
import type { Pd } from './pd.js';
import type { QpLike } from './provider.js';
import type { RqWqe } from './qp.js';
import { recvWqe } from './recv-wqe.js';
import { AsyncEventType, QpType, type RecvWr } from './types.js';
import { DEFAULT_WR_CAPS, checkRecvWr, wrRules, type WrRules } from './wr-check.js';

/** `struct ibv_srq_attr`. */
export interface SrqAttr {
  /** `max_wr`: WRs the SRQ holds. */
  maxWr: number;
  /** `max_sge`: SGEs per WR. */
  maxSge: number;
  /** `srq_limit`: 0 disarmed; else the limit event fires when fewer WRs than this remain. */
  srqLimit: number;
}

/** `enum ibv_srq_attr_mask`. */
export const SrqAttrMask = {
  /** IBV_SRQ_MAX_WR: resize (devices with IBV_DEVICE_SRQ_RESIZE only). */
  MAX_WR: 1 << 0,
  /** IBV_SRQ_LIMIT: set (non-zero: arm) the limit. */
  LIMIT: 1 << 1,
} as const;

/** `enum ibv_srq_type`. */
export enum SrqType {
  BASIC = 0,
  XRC = 1,
  TM = 2,
}

/** `struct ibv_srq_init_attr` (and the `srq_type` of `ibv_srq_init_attr_ex`). */
export interface SrqInitAttr {
  /** `attr`: `maxWr` is required; `maxSge` defaults to 1, `srqLimit` to 0. */
  attr: { maxWr: number; maxSge?: number; srqLimit?: number };
  /** `srq_context`: an opaque user value, returned unchanged. */
  srqContext?: unknown;
  /** `srq_type`: only BASIC on the soft devices (XRC, TM: EOPNOTSUPP, as rxe and siw). */
  srqType?: SrqType;
}

/** `enum ibv_srq_init_attr_mask` (the `comp_mask` of `ibv_srq_init_attr_ex`). */
export const SrqInitAttrMask = {
  TYPE: 1 << 0,
  PD: 1 << 1,
  XRCD: 1 << 2,
  CQ: 1 << 3,
  TM: 1 << 4,
} as const;

/** `IBV_DEVICE_SRQ_RESIZE` of `device_cap_flags`: `IBV_SRQ_MAX_WR` may resize an SRQ. */
export const DEVICE_SRQ_RESIZE = 1 << 13;

/**
 * How a device sizes and checks SRQs (its half of rxe_srq.c / siw_create_srq). A provider
 * without it has no SRQs: `createSrq` is EOPNOTSUPP and the device reports `max_srq` 0.
 */
export interface SrqCaps {
  /** The depth the device gives a request of `n` WRs (rxe: 2^k - 1 ≥ n; siw: 2^k ≥ n). */
  depth(n: number): number;
  /** The least `max_sge` (rxe: RXE_MIN_SRQ_SGE = 1; siw: as asked, 0 included). */
  readonly minSge: number;
  /** `srq_limit` above `max_wr` at create: EINVAL (siw) or taken as given (rxe_srq_chk_init does not look). */
  readonly limitCheckedAtCreate: boolean;
  /** After the limit event, `query()` reports the limit it had (siw: only `armed` drops) or 0 (rxe: `srq->limit = 0`). */
  readonly keepsLimitAfterEvent: boolean;
}

/** `struct ibv_srq`. Create with `pd.createSrq()`. */
export class Srq {
  readonly context: Context;
  readonly pd: Pd;
  /** `srq_context`. */
  srqContext: unknown;
  /** Per-context SRQ number (`handle`), for traces. */
  readonly handle: number;
  /** Trace prefix, `SRQ[n]`. */
  readonly tag: string;
  private readonly caps: SrqCaps;
  private maxWr: number;
  private readonly maxSge: number;
  private limit: number;
  private armed: boolean;
  private readonly q: Ring<RqWqe>;
  private readonly free = new FreeList<RqWqe>(32);
  private readonly rules: WrRules;
  private readonly users = new Set<QpLike>();
  private _destroyed = false;

  /** @internal Use `pd.createSrq()`, which checks `attr` against the device and `caps`. */
  constructor(pd: Pd, handle: number, caps: SrqCaps, attr: SrqAttr, srqContext: unknown) {
    this.context = pd.context;
    this.pd = pd;
    this.handle = handle;
    this.tag = `SRQ[${handle}]`;
    this.caps = caps;
    this.maxWr = attr.maxWr;
    this.maxSge = attr.maxSge;
    this.limit = attr.srqLimit;
    this.armed = attr.srqLimit > 0;
    this.srqContext = srqContext;
    this.q = new Ring<RqWqe>(Infinity, Math.min(Math.max(attr.maxWr, 1), 16));
    this.rules = this.makeRules();
    // Changed at teardown, by modify and by the limit event: mutable from the first SRQ on, so
    // that the first change does not throw away code compiled against them (see util/arrays.ts).
    this._destroyed = true;
    this._destroyed = false;
    this.armed = !this.armed;
    this.armed = !this.armed;
  }

  /** True after {@link destroy}. */
  get destroyed(): boolean {
    return this._destroyed;
  }

  /** Receive WRs posted and not yet taken by a QP. */
  get depth(): number {
    return this.q.length;
  }

  /** QPs created with this SRQ and not destroyed. */
  get qpCount(): number {
    return this.users.size;
  }

  /** `ibv_query_srq()`: `max_wr` and `max_sge` as the device sized them, and the limit. */
  query(): SrqAttr {
    if (this._destroyed) throw err('EINVAL', 'ibv_query_srq', 'SRQ destroyed');
    return { maxWr: this.maxWr, maxSge: this.maxSge, srqLimit: this.limit };
  }

  /**
   * `ibv_modify_srq()`: the attributes `mask` names (default: those present in `attr`), all or
   * nothing (rxe_srq_chk_attr, siw_modify_srq).
   * - `SrqAttrMask.MAX_WR`: resize to at least `maxWr` (the device's rounding), on devices with
   *   `IBV_DEVICE_SRQ_RESIZE` only (others: EOPNOTSUPP, as siw). EINVAL for 0, above
   *   `max_srq_wr`, below an armed limit, or fewer than the WRs now posted (rxe_queue_resize).
   * - `SrqAttrMask.LIMIT`: 0 disarms; non-zero arms, EINVAL above the current `max_wr`.
   * @throws RdmaError EINVAL (SRQ destroyed, unknown mask bits, values as above); EOPNOTSUPP.
   */
  modify(attr: Partial<SrqAttr>, mask?: number): void {
    const op = 'ibv_modify_srq';
    if (this._destroyed) throw err('EINVAL', op, 'SRQ destroyed');
    if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no attributes');
    const m = mask ?? (attr.maxWr !== undefined ? SrqAttrMask.MAX_WR : 0) | (attr.srqLimit !== undefined ? SrqAttrMask.LIMIT : 0);
    if (!Number.isInteger(m) || m < 0 || (m & ~(SrqAttrMask.MAX_WR | SrqAttrMask.LIMIT)) !== 0) throw err('EINVAL', op, `attr_mask ${String(mask)}`);
    const dev = this.context._attr;
    let newMax = this.maxWr;
    if (m & SrqAttrMask.MAX_WR) {
      if ((dev.deviceCapFlags & DEVICE_SRQ_RESIZE) === 0) throw err('EOPNOTSUPP', op, `${this.context.device.name} cannot resize an SRQ`);
      const w = attr.maxWr;
      if (!Number.isInteger(w) || (w as number) <= 0 || (w as number) > dev.maxSrqWr) throw err('EINVAL', op, `max_wr ${String(w)} (device max ${dev.maxSrqWr})`);
      if (this.limit > 0 && (w as number) < this.limit) throw err('EINVAL', op, `max_wr ${String(w)} < srq_limit ${this.limit}`);
      newMax = this.caps.depth(w as number);
      if (newMax < this.q.length) throw err('EINVAL', op, `max_wr ${newMax} < ${this.q.length} WRs posted`);
    }
    let newLimit = this.limit;
    if (m & SrqAttrMask.LIMIT) {
      const l = attr.srqLimit;
      // Checked against the size before a resize of the same call, as rxe_srq_chk_attr does.
      if (!Number.isInteger(l) || (l as number) < 0 || (l as number) > this.maxWr) throw err('EINVAL', op, `srq_limit ${String(l)} > max_wr ${this.maxWr}`);
      newLimit = l as number;
    }
    this.maxWr = newMax;
    if (m & SrqAttrMask.LIMIT) {
      this.limit = newLimit;
      this.armed = newLimit > 0;
    }
    if (tracing('qp')) trace('qp', this.tag, `modify max_wr ${this.maxWr} srq_limit ${this.limit}${this.armed ? ' (armed)' : ''}`);
  }

  /**
   * `ibv_post_srq_recv()`. Each WR is checked (wr-check.ts, against `max_sge` and the device's
   * SGE limits) and a private copy queued; the first bad one throws a {@link PostError} naming it,
   * the WRs before it stay posted. ENOMEM when the SRQ holds `max_wr` WRs.
   */
  postRecv(wrs: RecvWr | readonly RecvWr[]): void {
    // A single WR is taken as is: no array is made for it.
    const many = Array.isArray(wrs);
    const n = many ? (wrs as readonly RecvWr[]).length : 1;
    for (let i = 0; i < n; i++) this.queue(many ? ((wrs as readonly RecvWr[])[i] as RecvWr) : (wrs as RecvWr), i);
  }

  /** Check WR `i` of an ibv_post_srq_recv and queue a private copy of it. */
  private queue(wr: RecvWr, i: number): void {
    const op = 'ibv_post_srq_recv';
    if (this._destroyed) throw new PostError('EINVAL', op, i, 'SRQ destroyed');
    if (this.q.length >= this.maxWr) throw new PostError('ENOMEM', op, i, 'SRQ full');
    const length = checkRecvWr(wr, this.rules);
    if (typeof length === 'string') throw new PostError('EINVAL', op, i, length);
    this.q.push(recvWqe(wr, length, this.free));
  }

  /**
   * `ibv_destroy_srq()`. WRs still posted are dropped without completions (as rxe and siw).
   * @throws RdmaError EBUSY while a QP uses it or events read for it are unacknowledged; EINVAL
   *   if already destroyed.
   */
  destroy(): void {
    const op = 'ibv_destroy_srq';
    if (this._destroyed) throw err('EINVAL', op, 'already destroyed');
    if (this.users.size > 0) throw err('EBUSY', op, `${this.users.size} QP(s) still use it`);
    if (this.context._unackedAsyncEvents(this) > 0) throw err('EBUSY', op, 'async events not acknowledged');
    this._destroyed = true;
    if (tracing('qp') && this.q.length > 0) trace('qp', this.tag, `destroyed with ${this.q.length} WR(s) posted: dropped`);
    this.q.clear();
    this.context._purgeAsyncEvents(this);
    this.pd._srqDestroyed(this);
  }

  /**
   * `using` / `await using`: `ibv_destroy_srq()` at the end of the scope; nothing if already
   * destroyed.
   * @throws RdmaError what {@link destroy} throws (EBUSY while a QP uses it or events read for
   *   it are unacknowledged): disposal reports, never leaks silently.
   */
  [Symbol.dispose](): void {
    if (!this._destroyed) this.destroy();
  }

  // -- the QPs' side ---------------------------------------------------------------------------

  /** @internal A QP was created with this SRQ. */
  _attach(qp: QpLike): void {
    this.users.add(qp);
  }

  /** @internal That QP is destroyed. */
  _detach(qp: QpLike): void {
    this.users.delete(qp);
  }

  /** @internal The oldest WR, left on the SRQ. */
  _peek(): RqWqe | undefined {
    return this.q.peek();
  }

  /**
   * @internal A QP takes the oldest WR (it is that QP's from now on). When the SRQ is armed and
   * fewer than `srq_limit` WRs remain, SRQ_LIMIT_REACHED is raised and the SRQ disarmed
   * (rxe_resp.c get_srq_wqe: `count < srq->limit`; siw_rqe_get: the limit-th WQE after the one
   * taken is not valid — the same test).
   */
  _take(): RqWqe | undefined {
    const w = this.q.shift();
    if (w === undefined) return undefined;
    if (this.armed && this.q.length < this.limit) {
      this.armed = false;
      if (!this.caps.keepsLimitAfterEvent) this.limit = 0;
      if (tracing('qp')) trace('qp', this.tag, `limit reached: ${this.q.length} WR(s) left`);
      this.context._raiseAsyncEvent({ type: AsyncEventType.SRQ_LIMIT_REACHED, srq: this });
    }
    return w;
  }

  /** @internal Posted WRs not yet taken. */
  _count(): number {
    return this.q.length;
  }

  /** @internal A QP completed a WQE it took and keeps no reference to it: a later post may reuse it. */
  _recycle(w: RqWqe): void {
    this.free.give(w);
  }

  private makeRules(): WrRules {
    const caps = this.context.device._provider('ibv_create_srq').wrCaps ?? DEFAULT_WR_CAPS;
    return wrRules(caps, QpType.RC, { maxSendWr: 0, maxRecvWr: this.maxWr, maxSendSge: 0, maxRecvSge: this.maxSge, maxInlineData: 0 });
  }
}
