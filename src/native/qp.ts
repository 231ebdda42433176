/**
 * `ibv_qp` of a native device. Every work request is checked by the verbs layer against the
 * native provider's declared caps (what the C structs can hold), encoded into the scratch shared
 * with the addon (abi.ts) and posted in batches of what one addon call carries; the kernel's
 * provider answers the rest with its errno and the index of the first WR it did not post.
 * Attributes cross in the `QA` layout.
 */
import { PostError, err } from '../errors.js';
import { isU32 } from '../util/fields.js';
import { QpAttrMask, type QpAttr } from '../verbs/qp-attr.js';
import { Qp } from '../verbs/qp.js';
import type { QpInitAttr } from '../verbs/provider.js';
import { QpState, WrOpcode, type QpCap, type RecvWr, type SendWr } from '../verbs/types.js';
import { checkRecvWr, checkSendWr } from '../verbs/wr-check.js';
import { ALL_QP_ATTR, QA, WR_COUNT_WORD, WR_SLOT_WORD, decodeQpAttr, encodeQpAttr, encodeRecvWr, encodeSendWr, qpStateOfNum } from './abi.js';
import { check, scratchBuffers, type Handle, type NativeBinding, type QpResult, type Scratch } from './binding.js';
import { cmQpRequests } from './cm-qp.js';
import type { NativeContext } from './context.js';
import { NativeCq } from './cq.js';
import type { NativePd } from './pd.js';
import { encodeChunks, postChunks, postOne, postWrs, type EncodedChunk, type PostPath } from './post.js';
import { checkPreparedFor, type PreparedWrs } from '../verbs/prepared.js';
import { NativeSrq } from './srq.js';
import { newKey, qps } from './registry.js';

const qaBuf = new Float64Array(QA.WORDS);
const qaGid = new Uint8Array(16);

/**
 * `ibv_qp` of a native device. Created by `pd.createQp()` (ibv_create_qp) or by a native cm_id
 * (rdma_create_qp, which also moves it to INIT and lets librdmacm drive RTR/RTS on connect).
 */
export class NativeQp extends Qp {
  /** @internal */
  readonly _h: Handle;
  /** @internal */
  readonly _key: number;
  /** @internal The addon (the data path's calls). */
  private readonly _b: NativeBinding;
  /** @internal The buffers shared with the addon (the data path's). */
  private readonly _s: Scratch;
  /** @internal The QP's slot for the addon's calls by slot. */
  private readonly _slot: number;
  declare readonly context: NativeContext;

  /** @internal Use `pd.createQp()` or `cmId.createQp()`. */
  constructor(ctx: NativeContext, pd: NativePd, init: QpInitAttr, r: QpResult, key: number) {
    const cap: QpCap = { maxSendWr: r[2], maxRecvWr: r[3], maxSendSge: r[4], maxRecvSge: r[5], maxInlineData: r[6] };
    super(ctx, pd, r[1], init, cap);
    this._h = r[0];
    this._key = key;
    this._b = ctx._b;
    this._s = scratchBuffers();
    this._slot = check(this._b.dataSlot(this._h), 'ibv_create_qp');
    qps.set(key, this);
  }

  /** @internal ibv_create_qp / rdma_create_qp for the provider's `createQp`. */
  static _create(ctx: NativeContext, pd: NativePd, attr: QpInitAttr): NativeQp {
    const op = 'ibv_create_qp';
    const c = attr.cap;
    const scq = attr.sendCq as NativeCq;
    const rcq = attr.recvCq as NativeCq;
    if (!(scq instanceof NativeCq) || !(rcq instanceof NativeCq)) throw err('EINVAL', op, 'CQs of another device');
    const srq = attr.srq ?? null;
    if (srq !== null && !(srq instanceof NativeSrq)) throw err('EINVAL', op, 'SRQ of another device');
    const v = [c.maxSendWr ?? 1, c.maxRecvWr ?? 1, c.maxSendSge ?? 1, c.maxRecvSge ?? 1, c.maxInlineData ?? 0];
    if (!v.every(isU32)) throw err('EINVAL', op, 'cap');
    const key = newKey();
    const cmId = cmQpRequests.get(attr);
    const b = ctx._b;
    const sig = attr.sqSigAll === true;
    // Create flags go to the kernel's device through the _ex calls, which answer for it.
    const flags = attr.createFlags ?? 0;
    const r = cmId
      ? check(b.cmCreateQp(cmId, pd._h, scq._h, rcq._h, attr.qpType, v[0] as number, v[1] as number, v[2] as number, v[3] as number, v[4] as number, sig, key, srq?._h ?? null, flags), flags ? 'rdma_create_qp_ex' : 'rdma_create_qp')
      : check(b.createQp(pd._h, scq._h, rcq._h, attr.qpType, v[0] as number, v[1] as number, v[2] as number, v[3] as number, v[4] as number, sig, key, srq?._h ?? null, flags), flags ? 'ibv_create_qp_ex' : op);
    return new NativeQp(ctx, pd, attr, r, key);
  }

  /** The state the kernel reports (ibv_query_qp). */
  override get state(): QpState {
    if (this.destroyed) return QpState.RESET;
    const n = this.context._b.qpState(this._h);
    return n < 0 ? QpState.ERR : qpStateOfNum(n);
  }

  /** `ibv_query_qp()`: the attributes in `mask` (default: all). */
  override query(mask: number = ALL_QP_ATTR): QpAttr {
    const op = 'ibv_query_qp';
    if (this.destroyed) throw err('EINVAL', op, 'QP destroyed');
    if (!isU32(mask)) throw err('EINVAL', op, 'mask');
    check(this.context._b.queryQp(this._h, mask, qaBuf, qaGid), op);
    // Everything the addon's attribute block carries from the kernel's answer. It carries no
    // alternate path (alt_ah_attr, alt_pkey_index, alt_port_num, alt_timeout) nor rate_limit:
    // those stay absent rather than reported as zero.
    const a: QpAttr = {
      ...decodeQpAttr(qaBuf, qaGid),
      curQpState: qpStateOfNum(qaBuf[QA.CUR_STATE] as number),
      pathMigState: qaBuf[QA.PATH_MIG_STATE] as number,
      enSqdAsyncNotify: qaBuf[QA.EN_SQD_ASYNC] as number,
      sqDraining: qaBuf[QA.SQ_DRAINING] as number,
      cap: {
        maxSendWr: qaBuf[QA.MAX_SEND_WR] as number,
        maxRecvWr: qaBuf[QA.MAX_RECV_WR] as number,
        maxSendSge: qaBuf[QA.MAX_SEND_SGE] as number,
        maxRecvSge: qaBuf[QA.MAX_RECV_SGE] as number,
        maxInlineData: qaBuf[QA.MAX_INLINE] as number,
      },
    };
    return a;
  }

  /**
   * `ibv_modify_qp()`: `mask` (default: every attribute present in `attr`) names the attributes
   * applied; the provider checks the transition and the attributes (EINVAL as the kernel's
   * `ib_modify_qp_is_ok`).
   */
  override modify(attr: QpAttr, mask?: number): void {
    const op = 'ibv_modify_qp';
    if (this.destroyed) throw err('EINVAL', op, 'QP destroyed');
    if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no attributes');
    const m = encodeQpAttr(attr, qaBuf, qaGid);
    if (typeof m === 'string') throw err('EINVAL', op, m);
    const useMask = mask ?? m;
    if (!isU32(useMask)) throw err('EINVAL', op, `mask ${String(mask)}`);
    check(this.context._b.modifyQp(this._h, useMask, qaBuf, m & QpAttrMask.AV ? qaGid : null), op);
    if (attr.qpState !== undefined && (useMask & QpAttrMask.STATE) !== 0) this.st.move(attr.qpState, 'modify_qp');
  }

  /**
   * `ibv_post_send()`. Each WR is checked first (PostError EINVAL naming it), then handed to the
   * provider; WRs before the failing one are posted.
   */
  override postSend(wrs: SendWr | readonly SendWr[]): void {
    if (this.destroyed || Array.isArray(wrs)) this.post(SEND_PATH, wrs);
    else postOne(this._b, this._slot, SEND_PATH, this.wrRules, this.pd, wrs as SendWr, this._s);
  }

  /**
   * @internal The `ibv_wr_*` builder's post: every WR of `wrs[0..n)` checked first (wr-check.ts,
   * once), none posted if one is refused; then handed to the provider as `postSend` does. The
   * kernel's post may still refuse part of a batch (its queue full: ENOMEM), which this cannot
   * know beforehand; the error names the first WR it did not post.
   */
  override _postAll(wrs: readonly SendWr[], n: number): PostError | null {
    const op = 'ibv_wr_complete';
    if (this.destroyed) return new PostError('EINVAL', op, 0, 'QP destroyed');
    for (let i = 0; i < n; i++) {
      const bad = checkSendWr(wrs[i] as SendWr, this.wrRules, this.pd);
      if (typeof bad === 'string') return new PostError('EINVAL', op, i, bad);
    }
    try {
      this.post(SEND_PATH, wrs, true, n);
    } catch (e) {
      if (e instanceof PostError) return e;
      throw e;
    }
    return null;
  }

  /**
   * `ibv_post_recv()`, checked and posted as {@link postSend}. A QP on an SRQ has no receive
   * queue of its own: EINVAL, as rxe and the kernel's siw_post_receive answer — and before
   * rdma-core, whose siw provider indexes the QP's (absent) receive queue and crashes.
   */
  override postRecv(wrs: RecvWr | readonly RecvWr[]): void {
    if (this.srq !== null && !this.destroyed) throw new PostError('EINVAL', RECV_PATH.op, 0, `QP uses ${this.srq.tag}: post to the SRQ`);
    if (this.destroyed || Array.isArray(wrs)) this.post(RECV_PATH, wrs);
    else postOne(this._b, this._slot, RECV_PATH, this.wrRules, this.pd, wrs as RecvWr, this._s);
  }

  /**
   * Post `wrs` on this QP's queue of `path` ({@link postWrs}): the first `limit` of them, each
   * checked unless `checked` (the builder's batch, checked already).
   */
  private post<T extends SendWr | RecvWr>(path: PostPath<T, number>, wrs: T | readonly T[], checked = false, limit = Infinity): void {
    if (this.destroyed) throw new PostError('EINVAL', path.op, 0, 'QP destroyed');
    postWrs(this._b, this._slot, path, this.wrRules, this.pd, wrs, checked, limit);
  }

  /**
   * Keep a prepared list as the addon's words too (post.ts `encodeChunks`): posting it is then
   * a copy into the scratch and the addon call, with no work per WR in JavaScript. Lists with a
   * UD destination or a window bind stay as objects (their AH or window, which may be destroyed
   * meanwhile, is looked up at every post).
   */
  protected override _prepared<T extends SendWr | RecvWr>(p: PreparedWrs<T>): PreparedWrs<T> {
    const wrs = p.wrs as readonly SendWr[];
    if (p.kind === 'send' && wrs.some((wr) => wr.ud !== undefined || wr.opcode === WrOpcode.BIND_MW)) return p;
    p._provider = p.kind === 'send' ? encodeChunks(SEND_PATH, wrs, this._s) : encodeChunks(RECV_PATH, p.wrs as readonly RecvWr[], this._s);
    return p;
  }

  /** A prepared list: its encoded words posted as they are (see {@link _prepared}); else as {@link postSend} / {@link postRecv}. */
  override postPrepared(p: PreparedWrs): void {
    checkPreparedFor(p, this);
    const chunks = p._provider as EncodedChunk[] | null;
    if (chunks === null || this.destroyed || (p.kind === 'recv' && this.srq !== null)) {
      super.postPrepared(p);
      return;
    }
    if (p.kind === 'send') postChunks(this._b, this._slot, SEND_PATH, chunks, this._s);
    else postChunks(this._b, this._slot, RECV_PATH, chunks, this._s);
  }

  /** `ibv_destroy_qp()`. */
  override destroy(): void {
    const op = 'ibv_destroy_qp';
    if (this.destroyed) throw err('EINVAL', op, 'already destroyed');
    check(this.context._b.destroyQp(this._h), op);
    qps.delete(this._key);
    super.destroy();
  }

  protected _stateChanged(): void {}
  protected _sqKick(): void {}
  protected _destroyed(): void {}
  protected _copyInline(): Buffer | string {
    return 'not used';
  }
}

// A QP's queues are posted by the QP's slot (see binding.ts `dataSlot`): the cheapest addon call.
const SEND_PATH: PostPath<SendWr, number> = {
  op: 'ibv_post_send',
  check: checkSendWr,
  encode: encodeSendWr,
  post: (b, slot, n) => {
    const w = scratchBuffers().wr;
    w[WR_SLOT_WORD] = slot;
    w[WR_COUNT_WORD] = n;
    return b.postSendSlot();
  },
};

const RECV_PATH: PostPath<RecvWr, number> = {
  op: 'ibv_post_recv',
  check: (wr, rules) => checkRecvWr(wr, rules),
  encode: encodeRecvWr,
  post: (b, slot, n) => {
    const w = scratchBuffers().wr;
    w[WR_SLOT_WORD] = slot;
    w[WR_COUNT_WORD] = n;
    return b.postRecvSlot();
  },
};
