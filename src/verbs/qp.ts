/**
 * The queue pair (`struct ibv_qp`): the verbs state machine, the send and receive queues, posting,
 * completion generation and flushing. Transport providers subclass {@link Qp} and implement the
 * hooks ({@link Qp._sqKick}, {@link Qp._stateChanged}); this file knows nothing of any wire.
 *
 * Three error channels (docs/errors.md): a bad post throws a {@link PostError} naming the first WR
 * not queued; a failed WR completes with a {@link WcStatus}; wire errors live in the transport.
 */
import { PostError, err } from '../errors.js';
import { Ring } from '../util/ring.js';
import { trace, tracing } from '../trace.js';
import type { Context } from './context.js';
import type { Cq } from './cq.js';
import type { Pd } from './pd.js';
import type { QpInitAttr } from './provider.js';
import {
  AsyncEventType,
  QpState,
  QpType,
  SendFlags,
  WcFlags,
  WcOpcode,
  WcStatus,
  WrOpcode,
  type QpCap,
  type RecvWr,
  type SendWr,
  type Sge,
  type Wc,
  type WrId,
} from './types.js';

/** `enum ibv_qp_attr_mask` bits. */
export const QpAttrMask = {
  STATE: 1 << 0,
  CUR_STATE: 1 << 1,
  EN_SQD_ASYNC_NOTIFY: 1 << 2,
  ACCESS_FLAGS: 1 << 3,
  PKEY_INDEX: 1 << 4,
  PORT: 1 << 5,
  QKEY: 1 << 6,
  AV: 1 << 7,
  PATH_MTU: 1 << 8,
  TIMEOUT: 1 << 9,
  RETRY_CNT: 1 << 10,
  RNR_RETRY: 1 << 11,
  RQ_PSN: 1 << 12,
  MAX_QP_RD_ATOMIC: 1 << 13,
  ALT_PATH: 1 << 14,
  MIN_RNR_TIMER: 1 << 15,
  SQ_PSN: 1 << 16,
  MAX_DEST_RD_ATOMIC: 1 << 17,
  PATH_MIG_STATE: 1 << 18,
  CAP: 1 << 19,
  DEST_QPN: 1 << 20,
} as const;

/** `struct ibv_qp_attr` (the fields a software iWARP/RoCE device uses). */
export interface QpAttr {
  qpState?: QpState;
  curQpState?: QpState;
  qpAccessFlags?: number;
  pkeyIndex?: number;
  portNum?: number;
  qkey?: number;
  pathMtu?: number;
  timeout?: number;
  retryCnt?: number;
  rnrRetry?: number;
  rqPsn?: number;
  sqPsn?: number;
  /** ORD: outstanding RDMA Reads this QP may issue. */
  maxRdAtomic?: number;
  /** IRD: inbound RDMA Reads this QP accepts. */
  maxDestRdAtomic?: number;
  minRnrTimer?: number;
  destQpNum?: number;
  cap?: QpCap;
}

/**
 * Legal `modify_qp` state transitions (IB spec 10.3.1, as siw and rxe implement them):
 * any state may go to RESET or ERR; otherwise only the pairs listed here.
 */
const TRANSITIONS: Readonly<Record<QpState, readonly QpState[]>> = {
  [QpState.RESET]: [QpState.INIT],
  [QpState.INIT]: [QpState.INIT, QpState.RTR],
  [QpState.RTR]: [QpState.RTS],
  [QpState.RTS]: [QpState.RTS, QpState.SQD],
  [QpState.SQD]: [QpState.SQD, QpState.RTS],
  [QpState.SQE]: [QpState.RTS],
  [QpState.ERR]: [],
};

/** Whether `from → to` is a legal modify_qp transition. */
export function qpTransitionAllowed(from: QpState, to: QpState): boolean {
  return to === QpState.RESET || to === QpState.ERR || TRANSITIONS[from].includes(to);
}

/** A queued send work request, as the transport sees it (a private copy of the caller's WR). */
export interface SqWqe {
  wrId: WrId;
  opcode: WrOpcode;
  sgList: Sge[];
  flags: number;
  signaled: boolean;
  /** Total bytes of the SGE list (or of the inline copy). */
  length: number;
  /** Inline payload, copied at post time (ibverbs: the buffer may be reused on return). */
  inline: Buffer | null;
  remoteAddr: number;
  rkey: number;
  invalidateRkey: number;
  /** Transport progress: bytes already handed to the wire. */
  sent: number;
  /** The SGE list is a private copy (inline data copied too). */
  detached: boolean;
}

/** A queued receive work request. */
export interface RqWqe {
  wrId: WrId;
  sgList: Sge[];
  length: number;
}

let nextQpTrace = 0;

/**
 * The verbs QP. Create with `pd.createQp(attr)` (ibv_create_qp) or `cmId.createQp()`.
 * RC only on iWARP, as siw.
 */
export abstract class Qp {
  readonly context: Context;
  readonly pd: Pd;
  readonly qpNum: number;
  readonly qpType: QpType;
  readonly sendCq: Cq;
  readonly recvCq: Cq;
  readonly sqSigAll: boolean;
  /** The caller's `qp_context`. */
  qpContext: unknown;
  /** Actual capabilities (written back like ibv_create_qp does). */
  readonly cap: QpCap;
  /** Current state. Change it with {@link modify}; the transport uses {@link _transition}. */
  get state(): QpState {
    return this._state;
  }
  /** ORD (max outstanding outbound RDMA Reads) and IRD (inbound), as negotiated. */
  ord = 0;
  ird = 0;
  protected _state: QpState = QpState.RESET;
  /** Send queue: posted, not yet handed to the transport. Oldest first. */
  protected readonly sq = new Ring<SqWqe>(Infinity);
  /** Receive queue: posted, not yet consumed. */
  protected readonly rq = new Ring<RqWqe>(Infinity);
  protected destroyed = false;
  /** Trace prefix, `QP[n]`. */
  readonly tag: string;
  private readonly attr: QpAttr = {};

  protected constructor(context: Context, pd: Pd, qpNum: number, init: QpInitAttr, cap: QpCap) {
    this.context = context;
    this.pd = pd;
    this.qpNum = qpNum;
    this.qpType = init.qpType;
    this.sendCq = init.sendCq;
    this.recvCq = init.recvCq;
    this.sqSigAll = init.sqSigAll ?? false;
    this.qpContext = init.qpContext;
    this.cap = cap;
    this.tag = `QP[${qpNum}]`;
    nextQpTrace++;
  }

  /** ibv_query_qp: current attributes (state, ORD/IRD, cap). */
  query(): QpAttr {
    return { ...this.attr, qpState: this._state, maxRdAtomic: this.ord, maxDestRdAtomic: this.ird, cap: { ...this.cap } };
  }

  /**
   * ibv_modify_qp. Validates the transition (EINVAL for an illegal one, as the kernel does) and
   * applies the attributes named in `mask` (default: every attribute present in `attr`).
   */
  modify(attr: QpAttr, mask?: number): void {
    if (this.destroyed) throw err('EINVAL', 'ibv_modify_qp', 'QP destroyed');
    const m = mask ?? maskOf(attr);
    if (m & QpAttrMask.CUR_STATE && attr.curQpState !== undefined && attr.curQpState !== this._state) {
      throw err('EINVAL', 'ibv_modify_qp', `cur_qp_state ${attr.curQpState} != ${this._state}`);
    }
    if (m & QpAttrMask.MAX_QP_RD_ATOMIC && attr.maxRdAtomic !== undefined) {
      this.checkRd(attr.maxRdAtomic, 'max_rd_atomic');
      this.ord = attr.maxRdAtomic;
    }
    if (m & QpAttrMask.MAX_DEST_RD_ATOMIC && attr.maxDestRdAtomic !== undefined) {
      this.checkRd(attr.maxDestRdAtomic, 'max_dest_rd_atomic');
      this.ird = attr.maxDestRdAtomic;
    }
    if (m & QpAttrMask.ACCESS_FLAGS && attr.qpAccessFlags !== undefined) this.attr.qpAccessFlags = attr.qpAccessFlags;
    if (m & QpAttrMask.STATE && attr.qpState !== undefined && attr.qpState !== this._state) {
      const to = attr.qpState;
      if (!qpTransitionAllowed(this._state, to)) {
        throw err('EINVAL', 'ibv_modify_qp', `illegal transition ${this._state} -> ${to}`);
      }
      this._modifyState(to);
    }
  }

  /** Hook for the transport to veto or act on a user modify (e.g. RTS needs a connection). */
  protected _modifyState(to: QpState): void {
    this._transition(to, 'modify_qp');
  }

  private checkRd(v: number, what: string): void {
    const max = this.context._attr.maxQpRdAtom;
    if (!Number.isInteger(v) || v < 0 || v > max) throw err('EINVAL', 'ibv_modify_qp', `${what} ${v} > ${max}`);
  }

  /**
   * Move to `to`, run its entry actions (ERR: flush both queues with WR_FLUSH_ERR; RESET: empty
   * them) and tell the transport. The single place state changes: every move is traced.
   */
  _transition(to: QpState, reason: string): void {
    const from = this._state;
    if (from === to) return;
    this._state = to;
    if (tracing('qp')) trace('qp', this.tag, `${from} -> ${to} (${reason})`);
    if (to === QpState.ERR) this.flush();
    else if (to === QpState.RESET) {
      this.sq.clear();
      this.rq.clear();
    }
    this._stateChanged(from, to, reason);
  }

  /** Transport hook: state changed (after entry actions). */
  protected abstract _stateChanged(from: QpState, to: QpState, reason: string): void;
  /** Transport hook: new send WRs are queued; start transmitting if possible. */
  protected abstract _sqKick(): void;
  /** Transport hook: the QP is being destroyed. */
  protected abstract _destroyed(): void;

  /**
   * ibv_post_send. Each WR is validated and copied into the send queue; on the first invalid one
   * a {@link PostError} is thrown whose `badWrIndex` names it (WRs before it stay queued).
   * In ERR state WRs are accepted and complete with WR_FLUSH_ERR.
   */
  postSend(wrs: SendWr | readonly SendWr[]): void {
    const list = Array.isArray(wrs) ? (wrs as readonly SendWr[]) : [wrs as SendWr];
    const op = 'ibv_post_send';
    let queued = 0;
    // Nothing runs between the WRs of one call (the transport is kicked after the loop), so the
    // state and the in-flight count are those of the first WR for every WR.
    const st = this._state;
    const stateOk = !this.destroyed && (st === QpState.RTS || st === QpState.SQD || st === QpState.ERR);
    const room = this.cap.maxSendWr - (stateOk ? this._inflight() : 0);
    const maxInline = this.cap.maxInlineData;
    const sigAll = this.sqSigAll;
    for (let i = 0; i < list.length; i++) {
      const wr = list[i] as SendWr;
      if (!stateOk) {
        this.kickIf(queued);
        throw new PostError('EINVAL', op, i, `QP in state ${st}`);
      }
      if (this.sq.length >= room) {
        this.kickIf(queued);
        throw new PostError('ENOMEM', op, i, 'send queue full');
      }
      const bad = this._checkSendWr(wr);
      if (bad) {
        this.kickIf(queued);
        throw new PostError('EINVAL', op, i, bad);
      }
      const flags = wr.sendFlags ?? 0;
      let length = 0;
      for (let j = 0; j < wr.sgList.length; j++) length += (wr.sgList[j] as Sge).length;
      if (flags & SendFlags.INLINE && wr.opcode !== WrOpcode.RDMA_READ && length > maxInline) {
        this.kickIf(queued);
        throw new PostError('EINVAL', op, i, `inline ${length} > max_inline_data ${maxInline}`);
      }
      // The caller's SGE list is used as is while postSend runs; whatever is still queued when it
      // returns gets private copies (see detachQueued) — most WRs are on the wire by then.
      this.sq.push({
        wrId: wr.wrId,
        opcode: wr.opcode,
        sgList: wr.sgList as Sge[],
        flags,
        signaled: sigAll || (flags & SendFlags.SIGNALED) !== 0,
        length,
        inline: null,
        remoteAddr: wr.rdma?.remoteAddr ?? 0,
        rkey: wr.rdma?.rkey ?? 0,
        invalidateRkey: wr.invalidateRkey ?? 0,
        sent: 0,
        detached: false,
      });
      queued++;
    }
    this.kickIf(queued);
  }

  private kickIf(queued: number): void {
    if (queued === 0) return;
    if (this._state === QpState.ERR) this.flush();
    else this._sqKick();
    this.detachQueued();
  }

  /**
   * ibverbs semantics for WRs that stay queued after post_send returns: the caller may reuse its
   * WR and SGE objects at once, and the buffers of INLINE ones too. Give those WRs private copies
   * of their SGE lists and copy their inline data now. (A WR the transport has already taken is
   * not in the queue; the transport copies what it keeps, e.g. a Read's sink SGE.)
   */
  private detachQueued(): void {
    if (this.sq.length === 0) return; // the usual case: the transport took everything
    for (const w of this.sq) {
      if (w.detached) continue;
      w.detached = true;
      w.sgList = w.sgList.map((s) => ({ addr: s.addr, length: s.length, lkey: s.lkey }));
      if (w.flags & SendFlags.INLINE && w.opcode !== WrOpcode.RDMA_READ) {
        const copied = this._copyInline(w.sgList, w.length);
        // A bad SGE surfaces when the WR is processed (LOC_PROT_ERR), as for non-inline WRs.
        if (typeof copied !== 'string') w.inline = copied;
      }
    }
  }

  /** Send WRs taken off the queue but not yet completed (counted against max_send_wr). */
  protected _inflight(): number {
    return 0;
  }

  /** Transport-specific WR validation; return a reason string to refuse (EINVAL). */
  protected abstract _checkSendWr(wr: SendWr): string | null;
  /** Copy inline data out of the registered memory the SGEs name; a string is an error reason. */
  protected abstract _copyInline(sgList: readonly Sge[], length: number): Buffer | string;

  /**
   * ibv_post_recv. Allowed from INIT on (EINVAL in RESET); in ERR the WRs complete with
   * WR_FLUSH_ERR.
   */
  postRecv(wrs: RecvWr | readonly RecvWr[]): void {
    if (Array.isArray(wrs)) {
      const list = wrs as readonly RecvWr[];
      for (let i = 0; i < list.length; i++) this.queueRecv(list[i] as RecvWr, i);
    } else this.queueRecv(wrs as RecvWr, 0);
    if (this._state === QpState.ERR) this.flush();
  }

  /** Validate receive WR `i` of an ibv_post_recv and queue a private copy of it. */
  private queueRecv(wr: RecvWr, i: number): void {
    const op = 'ibv_post_recv';
    if (this.destroyed || this._state === QpState.RESET) throw new PostError('EINVAL', op, i, `QP in state ${this._state}`);
    if (this.rq.length >= this.cap.maxRecvWr) throw new PostError('ENOMEM', op, i, 'receive queue full');
    const n = wr.sgList.length;
    if (n > this.cap.maxRecvSge) throw new PostError('EINVAL', op, i, 'too many SGEs');
    let length = 0;
    const sgList: Sge[] = [];
    for (let j = 0; j < n; j++) {
      const s = wr.sgList[j] as Sge;
      if (!validSge(s)) throw new PostError('EINVAL', op, i, 'bad SGE');
      sgList.push({ addr: s.addr, length: s.length, lkey: s.lkey });
      length += s.length;
    }
    this.rq.push({ wrId: wr.wrId, sgList, length });
  }

  /** Complete every queued WR with WR_FLUSH_ERR (send queue first, then receive queue). */
  protected flush(): void {
    for (let w = this.sq.shift(); w !== undefined; w = this.sq.shift()) {
      this._flushedSend(w);
      this.completeSend(w, WcStatus.WR_FLUSH_ERR, true);
    }
    for (let r = this.rq.shift(); r !== undefined; r = this.rq.shift()) this.completeRecv(r, WcStatus.WR_FLUSH_ERR, 0, 0, 0);
  }

  /** Transport hook: a send WQE is being flushed (drop per-WQE transport state). */
  protected _flushedSend(_w: SqWqe): void {}

  /**
   * Generate the send completion of `w` (if it is signaled, or always on error, as ibverbs
   * requires). `force` generates it regardless of the signaled flag.
   */
  protected completeSend(w: SqWqe, status: WcStatus, force = false): void {
    if (!w.signaled && status === WcStatus.SUCCESS && !force) return;
    this.sendCq._push(
      makeWc(w.wrId, status, sendWcOpcode(w.opcode), status === WcStatus.SUCCESS && w.opcode === WrOpcode.RDMA_READ ? w.length : 0, this.qpNum, 0, 0),
      false,
    );
  }

  /** Generate a receive completion. */
  protected completeRecv(w: RqWqe, status: WcStatus, byteLen: number, flags: number, invalidated: number, solicited = false): void {
    const wc = makeWc(w.wrId, status, WcOpcode.RECV, status === WcStatus.SUCCESS ? byteLen : 0, this.qpNum, flags, invalidated);
    this.recvCq._push(wc, solicited);
  }

  /** Raise an affiliated async event for this QP. */
  protected raiseAsync(type: AsyncEventType): void {
    this.context._raiseAsyncEvent({ type, qp: this });
  }

  /** Number of send WRs queued and not yet completed. */
  get sqDepth(): number {
    return this.sq.length;
  }
  /** Number of receive WRs posted and not yet consumed. */
  get rqDepth(): number {
    return this.rq.length;
  }

  /** ibv_destroy_qp. Outstanding WRs are dropped without completions, as in ibverbs. */
  destroy(): void {
    if (this.destroyed) throw err('EINVAL', 'ibv_destroy_qp', 'already destroyed');
    this.destroyed = true;
    this._destroyed();
    this.sq.clear();
    this.rq.clear();
    this._state = QpState.RESET;
    this.pd._releaseQp(this);
  }
}

function maskOf(a: QpAttr): number {
  let m = 0;
  if (a.qpState !== undefined) m |= QpAttrMask.STATE;
  if (a.curQpState !== undefined) m |= QpAttrMask.CUR_STATE;
  if (a.qpAccessFlags !== undefined) m |= QpAttrMask.ACCESS_FLAGS;
  if (a.maxRdAtomic !== undefined) m |= QpAttrMask.MAX_QP_RD_ATOMIC;
  if (a.maxDestRdAtomic !== undefined) m |= QpAttrMask.MAX_DEST_RD_ATOMIC;
  return m;
}

/** An SGE is well formed: non-negative safe integers. */
export function validSge(s: Sge): boolean {
  return (
    Number.isSafeInteger(s.addr) && s.addr >= 0 && Number.isInteger(s.length) && s.length >= 0 && s.length <= 0x7fffffff &&
    Number.isInteger(s.lkey) && s.lkey >= 0 && s.lkey <= 0xffffffff
  );
}

/** The completion opcode of a send WR. */
export function sendWcOpcode(op: WrOpcode): WcOpcode {
  switch (op) {
    case WrOpcode.RDMA_WRITE:
    case WrOpcode.RDMA_WRITE_WITH_IMM:
      return WcOpcode.RDMA_WRITE;
    case WrOpcode.RDMA_READ:
      return WcOpcode.RDMA_READ;
    case WrOpcode.ATOMIC_CMP_AND_SWP:
      return WcOpcode.COMP_SWAP;
    case WrOpcode.ATOMIC_FETCH_AND_ADD:
      return WcOpcode.FETCH_ADD;
    case WrOpcode.LOCAL_INV:
      return WcOpcode.LOCAL_INV;
    case WrOpcode.BIND_MW:
      return WcOpcode.BIND_MW;
    default:
      return WcOpcode.SEND;
  }
}

function makeWc(wrId: WrId, status: WcStatus, opcode: WcOpcode, byteLen: number, qpNum: number, wcFlags: number, inv: number): Wc {
  return { wrId, status, opcode, vendorErr: 0, byteLen, qpNum, srcQp: 0, wcFlags, immData: 0, invalidatedRkey: wcFlags & WcFlags.WITH_INV ? inv : 0 };
}
