/**
 * `ibv_srq` of a native device: the kernel's shared receive queue through rdma-core
 * (ibv_create_srq, ibv_modify_srq, ibv_query_srq, ibv_post_srq_recv, ibv_destroy_srq). The queue,
 * its sizes, its limit and which QP takes which receive are the kernel device's; this object
 * carries the handle, checks what the C structs cannot hold, and is the `srq` of the
 * SRQ_LIMIT_REACHED / SRQ_ERR async events the kernel raises for it (its `srq_context` is the key
 * the addon reports them with).
 */
import { PostError, err } from '../errors.js';
import { isU32 } from '../util/fields.js';
import { Srq, SrqAttrMask, type SrqAttr, type SrqCaps } from '../verbs/srq.js';
import { QpType, type RecvWr } from '../verbs/types.js';
import { wrRules, type WrRules } from '../verbs/wr-check.js';
import { check, type Handle, type NativeBinding } from './binding.js';
import type { NativeContext } from './context.js';
import type { NativePd } from './pd.js';
import { NATIVE_WR_CAPS } from './wr-caps.js';
import { SRQ_RECV_PATH, postWrs } from './post.js';
import { srqs } from './registry.js';

/**
 * The verbs layer's sizing rules for a native SRQ: none of its own — the kernel's provider sizes
 * the queue and ibv_create_srq reports what it gave (rxe: 2^k - 1 WRs, siw: 2^k).
 */
export const NATIVE_SRQ_CAPS: SrqCaps = { depth: (n) => n, minSge: 0, limitCheckedAtCreate: false, keepsLimitAfterEvent: false };

/** `ibv_srq` of a native device. Create with `pd.createSrq()`. */
export class NativeSrq extends Srq {
  /** @internal */
  readonly _h: Handle;
  /** @internal The key of its async events. */
  readonly _key: number;
  private readonly _b: NativeBinding;
  private readonly _rules: WrRules;
  declare readonly context: NativeContext;

  /** @internal Use `pd.createSrq()`. */
  constructor(pd: NativePd, handle: number, attr: SrqAttr, srqContext: unknown, h: Handle, key: number) {
    super(pd, handle, NATIVE_SRQ_CAPS, attr, srqContext);
    this._h = h;
    this._key = key;
    this._b = pd.context._b;
    this._rules = wrRules(NATIVE_WR_CAPS, QpType.RC, { maxSendWr: 0, maxRecvWr: attr.maxWr, maxSendSge: 0, maxRecvSge: attr.maxSge, maxInlineData: 0 });
    srqs.set(key, this);
  }

  /** Receive WRs posted and not yet taken: the kernel does not say (no rdma-core call reads it), so NaN. */
  override get depth(): number {
    return Number.NaN;
  }

  /** `ibv_query_srq()`: the kernel's `max_wr`, `max_sge` and `srq_limit`. */
  override query(): SrqAttr {
    const op = 'ibv_query_srq';
    if (this.destroyed) throw err('EINVAL', op, 'SRQ destroyed');
    const [maxWr, maxSge, srqLimit] = check(this._b.querySrq(this._h), op);
    return { maxWr, maxSge, srqLimit };
  }

  /**
   * `ibv_modify_srq()`: the attributes `mask` names (default: those present in `attr`); the
   * kernel's provider checks them (EINVAL, EOPNOTSUPP for a resize siw cannot do).
   */
  override modify(attr: Partial<SrqAttr>, mask?: number): void {
    const op = 'ibv_modify_srq';
    if (this.destroyed) throw err('EINVAL', op, 'SRQ destroyed');
    if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no attributes');
    const m = mask ?? (attr.maxWr !== undefined ? SrqAttrMask.MAX_WR : 0) | (attr.srqLimit !== undefined ? SrqAttrMask.LIMIT : 0);
    const wr = attr.maxWr ?? 0;
    const limit = attr.srqLimit ?? 0;
    if (!isU32(m) || !isU32(wr) || !isU32(limit)) throw err('EINVAL', op, `attr_mask ${String(mask)} max_wr ${String(attr.maxWr)} srq_limit ${String(attr.srqLimit)}`);
    check(this._b.modifySrq(this._h, m, wr, limit), op);
  }

  /**
   * `ibv_post_srq_recv()`: each WR checked for what the C struct holds, then posted in batches; a
   * `PostError` names the first WR not posted (the provider's errno: ENOMEM when full ...).
   */
  override postRecv(wrs: RecvWr | readonly RecvWr[]): void {
    if (this.destroyed) throw new PostError('EINVAL', SRQ_RECV_PATH.op, 0, 'SRQ destroyed');
    postWrs(this._b, this._h, SRQ_RECV_PATH, this._rules, this.pd, wrs);
  }

  /**
   * `ibv_destroy_srq()`. EBUSY while a QP uses it (the kernel's `usecnt`) or events read for it
   * are not acknowledged (where libibverbs would wait for them).
   */
  override destroy(): void {
    const op = 'ibv_destroy_srq';
    if (this.destroyed) throw err('EINVAL', op, 'already destroyed');
    if (this.qpCount > 0) throw err('EBUSY', op, `${this.qpCount} QP(s) still use it`);
    if (this.context._unackedAsyncEvents(this) > 0) throw err('EBUSY', op, 'async events not acknowledged');
    check(this._b.destroySrq(this._h), op);
    srqs.delete(this._key);
    super.destroy();
  }
}
