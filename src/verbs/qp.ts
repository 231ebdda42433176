/**
 * The queue pair (`struct ibv_qp`): the verbs state machine, the send and receive queues, posting,
 * completion generation and flushing, for every QP type (RC, UC, UD). Transport providers
 * subclass {@link Qp} and implement the hooks ({@link Qp._sqKick}, {@link Qp._stateChanged} ...);
 * this file knows nothing of any wire. Work requests are checked once per post against the
 * provider's declared capabilities (wr-check.ts) before they are queued.
 *
 * `modify` applies every attribute the mask names. On devices that follow the IB rules (RoCE,
 * InfiniBand) the mask is checked against the per-QP-type transition table (qp-attr.ts, the
 * kernel's `ib_modify_qp_is_ok`); on iWARP devices only the state graph is checked and the
 * IB-only attributes are recorded without effect, as siw does.
 *
 * Three error channels (docs/errors.md): a bad post throws a {@link PostError} naming the first WR
 * not queued; a failed WR completes with a {@link WcStatus}; wire errors live in the transport.
 */
import { PostError, err } from '../errors.js';
import { Ring } from '../util/ring.js';
import type { Context } from './context.js';
import type { Cq } from './cq.js';
import type { Pd } from './pd.js';
import type { QpInitAttr, VerbsProvider } from './provider.js';
import type { Srq } from './srq.js';
import { ahAttrProblem, copyAhAttr, type Ah, type AhAttr } from './ah.js';
import { QpAttrMask, modifyQpProblem, qpAttrMaskOf, qpTransitionAllowed, type QpAttr } from './qp-attr.js';
import {
  AsyncEventType,
  MwType,
  QpState,
  QpType,
  SendFlags,
  TransportType,
  WcFlags,
  WcOpcode,
  WcStatus,
  WrOpcode,
  type QpCap,
  type RecvWr,
  type SendWr,
  type MwBind,
  type Sge,
  type UdDest,
  type Wc,
  type WrId,
} from './types.js';
import { FreeList } from '../util/arrays.js';
import { StateCell } from '../util/state.js';
import { recvWqe } from './recv-wqe.js';
import { DEFAULT_WR_CAPS, checkRecvWr, checkSendWr, wrRules, type WrRules } from './wr-check.js';
import { PreparedWrs, checkPreparedFor, checkedCopies, copyRecvWr, copySendWr } from './prepared.js';
import { Mw, MwState, type BindWqe } from './mw.js';
import { Mr } from './mr.js';
import { trace, tracing } from '../trace.js';

export { QpAttrMask, qpTransitionAllowed, type QpAttr } from './qp-attr.js';

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
  /** Atomics: the compare value (compare-and-swap) or the addend (fetch-and-add). */
  compareAdd: bigint;
  /** Compare-and-swap: the swap value. */
  swap: bigint;
  /** SEND_WITH_IMM / RDMA_WRITE_WITH_IMM: the immediate data (host order u32), else 0. */
  immData: number;
  /** UD: the destination's address handle (null on connected QPs). */
  ah: Ah | null;
  /** UD: destination QP number. */
  remoteQpn: number;
  /** UD: Q_Key to send with (the QP's own when the WR's has bit 31 set, IB spec 10.2.5). */
  remoteQkey: number;
  /** BIND_MW: the window, MR and binding, as the device executes it (null otherwise). */
  bind: BindWqe | null;
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

/**
 * What a receive completion carries beyond the byte count: the completion opcode (RECV or
 * RECV_RDMA_WITH_IMM), the immediate data (host order; the transport sets `WcFlags.WITH_IMM`),
 * and for UD the sender and path fields of `struct ibv_wc`.
 */
export interface RecvInfo {
  opcode?: WcOpcode;
  immData?: number;
  srcQp?: number;
  pkeyIndex?: number;
  slid?: number;
  sl?: number;
  dlidPathBits?: number;
}

/** How a QP checks `modify`: IB's per-type attribute table, or only the state graph (iWARP). */
export type ModifyRules = 'ib' | 'iwarp';

/** The address vector a QP reports before one is set (all zero). */
function noAv(): AhAttr {
  return { dlid: 0, sl: 0, srcPathBits: 0, staticRate: 0, isGlobal: false, portNum: 0 };
}

let nextQpTrace = 0;
/** Completed WQEs a QP keeps for reuse, per queue. */
const WQE_POOL = 32;

/**
 * The verbs QP. Create with `pd.createQp(attr)` (ibv_create_qp) or `cmId.createQp()`. Which QP
 * types a device offers is its provider's choice (siw: RC only, EOPNOTSUPP otherwise).
 */
export abstract class Qp {
  readonly context: Context;
  readonly pd: Pd;
  readonly qpNum: number;
  readonly qpType: QpType;
  readonly sendCq: Cq;
  readonly recvCq: Cq;
  /** The shared receive queue this QP takes its receive WQEs from (`null`: its own RQ). */
  readonly srq: Srq | null;
  readonly sqSigAll: boolean;
  /** The caller's `qp_context`. */
  qpContext: unknown;
  /** Actual capabilities (written back like ibv_create_qp does). */
  readonly cap: QpCap;
  /** Current state. Change it with {@link modify}; the transport uses `_transition`. */
  get state(): QpState {
    return this.st.state;
  }
  /** ORD (max outstanding outbound RDMA Reads) and IRD (inbound), as negotiated. */
  ord = 0;
  ird = 0;
  /** The state, changed only by `_transition` (and by destroy, which ends the QP in RESET). */
  protected readonly st: StateCell<QpState> = new StateCell<QpState>('qp', () => this.tag, QpState.RESET);
  /** Send queue: posted, not yet handed to the transport. Oldest first. */
  protected readonly sq: Ring<SqWqe>;
  /** Receive queue: posted, not yet consumed. */
  protected readonly rq: Ring<RqWqe>;
  protected destroyed = false;
  /** Completed WQEs handed back by the transport, reused by the next posts (no allocation per WR). */
  private readonly sqFree = new FreeList<SqWqe>(WQE_POOL);
  private readonly rqFree = new FreeList<RqWqe>(WQE_POOL);
  /** Trace prefix, `QP[n]`. */
  readonly tag: string;
  /**
   * The attributes set by `modify` (everything but the state, ORD/IRD and cap, which have their
   * own fields): the transport reads its Q_Key, PSNs, path MTU, destination QPN, AV here.
   */
  protected readonly attr: QpAttr = {};
  /** Which modify rules apply: IB's attribute table, or (iWARP devices) the state graph only. */
  protected readonly modifyRules: ModifyRules;
  /** What a work request must be to be posted here: the provider's declared caps for this QP. */
  protected readonly wrRules: WrRules;
  /** The message lengths of a builder batch being posted ({@link _postAll}), reused. */
  private readonly batchLens: number[] = [];

  protected constructor(context: Context, pd: Pd, qpNum: number, init: QpInitAttr, cap: QpCap) {
    this.context = context;
    this.pd = pd;
    this.qpNum = qpNum;
    this.qpType = init.qpType;
    this.sendCq = init.sendCq;
    this.recvCq = init.recvCq;
    this.srq = init.srq ?? null;
    this.sqSigAll = init.sqSigAll ?? false;
    this.qpContext = init.qpContext;
    this.cap = cap;
    // Set at teardown: mutable from the first QP on (see util/arrays.ts).
    this.destroyed = true;
    this.destroyed = false;
    // The rings start at the queue depth (at most 16) and grow past it only for a queue that
    // holds more: a QP of one WR per queue costs one slot each.
    this.sq = new Ring<SqWqe>(Infinity, ringStart(cap.maxSendWr));
    this.rq = new Ring<RqWqe>(Infinity, ringStart(cap.maxRecvWr));
    this.tag = `QP[${qpNum}]`;
    this.modifyRules = context.device.transportType === TransportType.IWARP ? 'iwarp' : 'ib';
    this.wrRules = wrRules(context.device._provider('ibv_create_qp').wrCaps ?? DEFAULT_WR_CAPS, init.qpType, cap);
    nextQpTrace++;
  }

  /**
   * ibv_query_qp: every attribute `struct ibv_qp_attr` holds — the state, ORD/IRD, cap, what
   * `modify` set, and zero for what it never set (the kernel's attribute block starts zeroed) —
   * as the device reports them: rxe (`rxe_qp_to_attr`) gives the PSNs the QP is at, siw
   * (`siw_query_qp`) only a few fields (see the transports). `sq_draining` is 1 while a QP in
   * SQD still has send WRs to finish. `mask` is accepted for ibverbs' signature; every
   * attribute is returned, as the kernel does.
   * @throws RdmaError EINVAL once the QP is destroyed.
   */
  query(_mask?: number): QpAttr {
    if (this.destroyed) throw err('EINVAL', 'ibv_query_qp', 'QP destroyed');
    const t = this.attr;
    const st = this.st.state;
    const a: QpAttr = {
      qpState: st,
      curQpState: st,
      pathMtu: t.pathMtu ?? 0,
      pathMigState: t.pathMigState ?? 0,
      qkey: t.qkey ?? 0,
      rqPsn: t.rqPsn ?? 0,
      sqPsn: t.sqPsn ?? 0,
      destQpNum: t.destQpNum ?? 0,
      qpAccessFlags: t.qpAccessFlags ?? 0,
      cap: { ...this.cap },
      ahAttr: t.ahAttr ? copyAhAttr(t.ahAttr) : noAv(),
      altAhAttr: t.altAhAttr ? copyAhAttr(t.altAhAttr) : noAv(),
      pkeyIndex: t.pkeyIndex ?? 0,
      altPkeyIndex: t.altPkeyIndex ?? 0,
      enSqdAsyncNotify: t.enSqdAsyncNotify ?? 0,
      sqDraining: st === QpState.SQD && (this.sq.length > 0 || this._inflight() > 0) ? 1 : 0,
      maxRdAtomic: this.ord,
      maxDestRdAtomic: this.ird,
      minRnrTimer: t.minRnrTimer ?? 0,
      portNum: t.portNum ?? 0,
      timeout: t.timeout ?? 0,
      retryCnt: t.retryCnt ?? 0,
      rnrRetry: t.rnrRetry ?? 0,
      altPortNum: t.altPortNum ?? 0,
      altTimeout: t.altTimeout ?? 0,
      rateLimit: t.rateLimit ?? 0,
    };
    return this._queryAttr(a);
  }

  /**
   * ibv_query_qp's `init_attr`: the QP type, its CQs, the queue sizes, `sq_sig_all` and the
   * `qp_context` it was created with.
   */
  queryInitAttr(): { qpType: QpType; sendCq: Cq; recvCq: Cq; cap: QpCap; sqSigAll: boolean; qpContext: unknown } {
    return { qpType: this.qpType, sendCq: this.sendCq, recvCq: this.recvCq, cap: { ...this.cap }, sqSigAll: this.sqSigAll, qpContext: this.qpContext };
  }

  /**
   * Transport hook of {@link query}: the attributes as the device reports them, from the full
   * set (a fresh object the hook may change). Default: unchanged.
   */
  protected _queryAttr(a: QpAttr): QpAttr {
    return a;
  }

  /**
   * @internal What the resource listing (src/stat/) shows of the QP beyond its attributes: the
   * transport's own sequence state and peer (iWARP: MSNs and the TCP peer). Default: nothing.
   */
  _resourceInfo(): Record<string, string | number> {
    return {};
  }

  /**
   * ibv_modify_qp: apply the attributes named in `mask` (default: every attribute present in
   * `attr`), all or nothing. EINVAL for an illegal state move, for attributes the transition
   * does not take or lacks (IB rules: the per-QP-type table of qp-attr.ts), for out-of-range
   * values, and for `cur_qp_state` not matching the QP's state.
   */
  modify(attr: QpAttr, mask?: number): void {
    const op = 'ibv_modify_qp';
    if (this.destroyed) throw err('EINVAL', op, 'QP destroyed');
    const m = mask ?? qpAttrMaskOf(attr);
    const cur = this.st.state;
    const next = m & QpAttrMask.STATE && attr.qpState !== undefined ? this._stateFor(cur, attr.qpState) : cur;
    if (m & QpAttrMask.CUR_STATE && attr.curQpState !== undefined && attr.curQpState !== cur) {
      throw err('EINVAL', op, `cur_qp_state ${attr.curQpState} != ${cur}`);
    }
    if (this.modifyRules === 'ib') {
      const bad = modifyQpProblem(cur, next, this.qpType, m) ?? this.attrProblem(attr, m) ?? this._checkModify(attr, m, next);
      if (bad !== null) throw err('EINVAL', op, bad);
    } else {
      if (next !== cur && !qpTransitionAllowed(cur, next)) throw err('EINVAL', op, `illegal transition ${cur} -> ${next}`);
      const bad = this.rdProblem(attr, m) ?? this._checkModify(attr, m, next);
      if (bad !== null) throw err('EINVAL', op, bad);
    }
    this.applyAttrs(attr, m);
    if (next !== cur) this._modifyState(next);
  }

  /** Record the attributes of `mask` (checked already). */
  private applyAttrs(a: QpAttr, m: number): void {
    const M = QpAttrMask;
    const t = this.attr;
    if (m & M.MAX_QP_RD_ATOMIC && a.maxRdAtomic !== undefined) this.ord = a.maxRdAtomic;
    if (m & M.MAX_DEST_RD_ATOMIC && a.maxDestRdAtomic !== undefined) this.ird = a.maxDestRdAtomic;
    if (m & M.ACCESS_FLAGS && a.qpAccessFlags !== undefined) t.qpAccessFlags = a.qpAccessFlags;
    if (m & M.PKEY_INDEX && a.pkeyIndex !== undefined) t.pkeyIndex = a.pkeyIndex;
    if (m & M.PORT && a.portNum !== undefined) t.portNum = a.portNum;
    if (m & M.QKEY && a.qkey !== undefined) t.qkey = a.qkey >>> 0;
    if (m & M.AV && a.ahAttr !== undefined) t.ahAttr = copyAhAttr(a.ahAttr);
    if (m & M.PATH_MTU && a.pathMtu !== undefined) t.pathMtu = a.pathMtu;
    if (m & M.TIMEOUT && a.timeout !== undefined) t.timeout = a.timeout;
    if (m & M.RETRY_CNT && a.retryCnt !== undefined) t.retryCnt = a.retryCnt;
    if (m & M.RNR_RETRY && a.rnrRetry !== undefined) t.rnrRetry = a.rnrRetry;
    if (m & M.RQ_PSN && a.rqPsn !== undefined) t.rqPsn = a.rqPsn;
    if (m & M.SQ_PSN && a.sqPsn !== undefined) t.sqPsn = a.sqPsn;
    if (m & M.MIN_RNR_TIMER && a.minRnrTimer !== undefined) t.minRnrTimer = a.minRnrTimer;
    if (m & M.DEST_QPN && a.destQpNum !== undefined) t.destQpNum = a.destQpNum;
    if (m & M.EN_SQD_ASYNC_NOTIFY && a.enSqdAsyncNotify !== undefined) t.enSqdAsyncNotify = a.enSqdAsyncNotify;
    if (m & M.PATH_MIG_STATE && a.pathMigState !== undefined) t.pathMigState = a.pathMigState;
    if (m & M.RATE_LIMIT && a.rateLimit !== undefined) t.rateLimit = a.rateLimit;
    if (m & M.ALT_PATH) {
      if (a.altAhAttr !== undefined) t.altAhAttr = copyAhAttr(a.altAhAttr);
      if (a.altPkeyIndex !== undefined) t.altPkeyIndex = a.altPkeyIndex;
      if (a.altPortNum !== undefined) t.altPortNum = a.altPortNum;
      if (a.altTimeout !== undefined) t.altTimeout = a.altTimeout;
    }
  }

  /** ORD/IRD within the device limits (`max_qp_init_rd_atom` / `max_qp_rd_atom`). */
  private rdProblem(a: QpAttr, m: number): string | null {
    const d = this.context._attr;
    const rd = (v: number | undefined, max: number, what: string): string | null =>
      v === undefined || (Number.isInteger(v) && v >= 0 && v <= max) ? null : `${what} ${String(v)} > ${max}`;
    return (
      (m & QpAttrMask.MAX_QP_RD_ATOMIC ? rd(a.maxRdAtomic, d.maxQpInitRdAtom, 'max_rd_atomic') : null) ??
      (m & QpAttrMask.MAX_DEST_RD_ATOMIC ? rd(a.maxDestRdAtomic, d.maxQpRdAtom, 'max_dest_rd_atomic') : null)
    );
  }

  /** The value checks of IB-rule devices: every attribute of the mask present and in range. */
  private attrProblem(a: QpAttr, m: number): string | null {
    const M = QpAttrMask;
    const ctx = this.context;
    const need = (bit: number, v: unknown, ok: boolean, what: string): string | null =>
      !(m & bit) ? null : v === undefined ? `${what} missing` : ok ? null : `${what} ${String(v)}`;
    const uint = (v: number | undefined, bits: number): boolean => Number.isInteger(v) && (v as number) >= 0 && (v as number) < 2 ** bits;
    const portOk = (p: number | undefined): boolean => Number.isInteger(p) && (p as number) >= 1 && (p as number) <= ctx._attr.physPortCnt;
    const pkeyOk = (i: number | undefined, port: number): boolean => Number.isInteger(i) && (i as number) >= 0 && (i as number) < ctx.queryPort(port).pkeyTblLen;
    const ahBad = (ah: QpAttr['ahAttr'], what: string): string | null => {
      if (ah === undefined) return `${what} missing`;
      const p = ahAttrProblem(ah);
      if (p !== null) return `${what}: ${p}`;
      return portOk(ah.portNum) ? null : `${what}: port_num ${ah.portNum}`;
    };
    const port = m & M.PORT && portOk(a.portNum) ? (a.portNum as number) : (this.attr.portNum ?? 1);
    return (
      this.rdProblem(a, m) ??
      need(M.PORT, a.portNum, portOk(a.portNum), 'port_num') ??
      need(M.PKEY_INDEX, a.pkeyIndex, pkeyOk(a.pkeyIndex, port), 'pkey_index') ??
      need(M.QKEY, a.qkey, uint(a.qkey, 32), 'qkey') ??
      need(M.PATH_MTU, a.pathMtu, uint(a.pathMtu, 3) && (a.pathMtu as number) >= 1 && (a.pathMtu as number) <= 5, 'path_mtu') ??
      need(M.TIMEOUT, a.timeout, uint(a.timeout, 5), 'timeout') ??
      need(M.RETRY_CNT, a.retryCnt, uint(a.retryCnt, 3), 'retry_cnt') ??
      need(M.RNR_RETRY, a.rnrRetry, uint(a.rnrRetry, 3), 'rnr_retry') ??
      need(M.MIN_RNR_TIMER, a.minRnrTimer, uint(a.minRnrTimer, 5), 'min_rnr_timer') ??
      need(M.RQ_PSN, a.rqPsn, uint(a.rqPsn, 24), 'rq_psn') ??
      need(M.SQ_PSN, a.sqPsn, uint(a.sqPsn, 24), 'sq_psn') ??
      need(M.DEST_QPN, a.destQpNum, uint(a.destQpNum, 24), 'dest_qp_num') ??
      need(M.ACCESS_FLAGS, a.qpAccessFlags, uint(a.qpAccessFlags, 8), 'qp_access_flags') ??
      need(M.PATH_MIG_STATE, a.pathMigState, uint(a.pathMigState, 2) && (a.pathMigState as number) <= 2, 'path_mig_state') ??
      (m & M.AV ? ahBad(a.ahAttr, 'ah_attr') : null) ??
      (m & M.ALT_PATH && a.altAhAttr !== undefined ? ahBad(a.altAhAttr, 'alt_ah_attr') : null) ??
      (m & M.CAP ? 'changing cap is not supported' : null)
    );
  }

  /**
   * Transport hook: device-specific checks of a modify (after the generic ones), e.g. a path
   * MTU above the port's or an AV without GRH on RoCE. Return a reason to refuse (EINVAL).
   */
  protected _checkModify(_attr: QpAttr, _mask: number, _next: QpState): string | null {
    return null;
  }

  /**
   * Transport hook: the state a modify asking for `asked` moves the QP to from `cur` (by default
   * `asked`; a device may leave the state alone for requests it ignores, as siw does).
   */
  protected _stateFor(_cur: QpState, asked: QpState): QpState {
    return asked;
  }

  /**
   * @internal The device moves the QP to ERR by itself (siw_netdev_down; a device removed): as a
   * modify to ERR, so the transport also tears down a connection. Its WRs are flushed.
   */
  _deviceError(why: string): void {
    if (this.destroyed || this.st.state === QpState.ERR) return;
    if (tracing('qp')) trace('qp', `QP[${this.qpNum}]`, `to ERR: ${why}`);
    this._modifyState(QpState.ERR);
  }

  /** Hook for the transport to veto or act on a user modify (e.g. RTS needs a connection). */
  protected _modifyState(to: QpState): void {
    this._transition(to, 'modify_qp');
  }

  /**
   * Move to `to`, run its entry actions (ERR: flush both queues with WR_FLUSH_ERR — of an SRQ
   * only the WQE this QP took, the SRQ's own stay posted — then, on an IB device, the Last WQE
   * Reached event of a QP on an SRQ; RESET: empty them) and tell the transport. The single place
   * state changes: every move is traced.
   */
  _transition(to: QpState, reason: string): void {
    const from = this.st.move(to, reason);
    if (from === to) return;
    if (to === QpState.ERR) {
      this.flush();
      // IB spec 11.6.3.1 / rxe_resp.c flush_recv_queue: a QP on an SRQ that went to ERR has
      // completed its last receive WQE. iWARP verbs have no such event (siw raises none).
      if (this.srq !== null && this.context.device.transportType !== TransportType.IWARP) this.raiseAsync(AsyncEventType.QP_LAST_WQE_REACHED);
    } else if (to === QpState.RESET) {
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

  private holds = true;

  /**
   * Whether this QP's own resources (its connection's socket, the device's sockets it receives
   * on) keep the Node event loop alive: true from creation. Not an ibverbs call: the hook behind
   * `RSocket.unref()` (as `net.Socket.unref()` on the socket's handle). A QP that does not hold
   * the loop still works; the process may just end while it is idle. Work in flight on the wire
   * (bytes the kernel has not sent yet) may still hold it, as a pending write does for `net`.
   * @internal
   */
  get _holdsLoop(): boolean {
    return this.holds;
  }

  /** @internal Set {@link Qp._holdsLoop}; the transport applies it ({@link Qp._holdsLoopChanged}). */
  _setHoldsLoop(on: boolean): void {
    if (this.holds === on) return;
    this.holds = on;
    this._holdsLoopChanged(on);
  }

  /** Transport hook: {@link Qp._holdsLoop} changed. Default: the transport holds nothing per QP. */
  protected _holdsLoopChanged(_on: boolean): void {}

  /**
   * ibv_post_send. Each WR is validated and copied into the send queue; on the first invalid one
   * a {@link PostError} is thrown whose `badWrIndex` names it (WRs before it stay queued).
   * In ERR state WRs are accepted and complete with WR_FLUSH_ERR.
   */
  postSend(wrs: SendWr | readonly SendWr[]): void {
    // A single WR is taken as is: no array is made for it.
    const many = Array.isArray(wrs);
    const n = many ? (wrs as readonly SendWr[]).length : 1;
    const op = 'ibv_post_send';
    let queued = 0;
    // Nothing runs between the WRs of one call (the transport is kicked after the loop), so the
    // state and the in-flight count are those of the first WR for every WR.
    const st = this.st.state;
    const stateOk = !this.destroyed && (st === QpState.RTS || st === QpState.SQD || st === QpState.ERR);
    const room = this.cap.maxSendWr - (stateOk ? this._inflight() : 0);
    const rules = this.wrRules;
    const pd = this.pd;
    const sigAll = this.sqSigAll;
    const ud = this.qpType === QpType.UD;
    for (let i = 0; i < n; i++) {
      const wr = many ? ((wrs as readonly SendWr[])[i] as SendWr) : (wrs as SendWr);
      if (!stateOk) {
        this.kickIf(queued);
        throw new PostError('EINVAL', op, i, `QP in state ${st}`);
      }
      if (this.sq.length >= room) {
        this.kickIf(queued);
        throw new PostError('ENOMEM', op, i, 'send queue full');
      }
      const length = checkSendWr(wr, rules, pd);
      const bad = typeof length === 'string' ? length : this._checkSendWr(wr, length);
      if (bad !== null) {
        this.kickIf(queued);
        throw new PostError('EINVAL', op, i, bad);
      }
      const flags = wr.sendFlags ?? 0;
      const sgl = wr.sgList;
      // The caller's SGE list is used as is while postSend runs; whatever is still queued when it
      // returns gets private copies (see detachQueued) — most WRs are on the wire by then.
      this.sq.push(this.makeSqWqe(wr, sgl as Sge[], flags, sigAll || (flags & SendFlags.SIGNALED) !== 0, length as number, ud));
      queued++;
    }
    this.kickIf(queued);
  }

  /**
   * @internal The `ibv_wr_*` builder's post (qp-ex.ts): `wrs[0..n)` are all queued, or none is.
   * The QP's state and the room for all `n` are checked first, then every WR once (wr-check.ts
   * and the device's `_checkSendWr`), and only then are they queued, as `postSend` queues them.
   * @returns null, or the PostError naming the WR refused (EINVAL; ENOSPC: no room for the batch).
   */
  _postAll(wrs: readonly SendWr[], n: number): PostError | null {
    const op = 'ibv_wr_complete';
    const st = this.st.state;
    if (this.destroyed || (st !== QpState.RTS && st !== QpState.SQD && st !== QpState.ERR)) return new PostError('EINVAL', op, 0, `QP in state ${st}`);
    const room = this.cap.maxSendWr - this._inflight() - this.sq.length;
    // rxe's builder (check_qp_queue_full): ENOSPC.
    if (n > room) return new PostError('ENOSPC', op, Math.max(0, room), `send queue full (room for ${Math.max(0, room)} of ${n})`);
    const rules = this.wrRules;
    const pd = this.pd;
    const lens = this.batchLens;
    for (let i = 0; i < n; i++) {
      const wr = wrs[i] as SendWr;
      const length = checkSendWr(wr, rules, pd);
      const bad = typeof length === 'string' ? length : this._checkSendWr(wr, length);
      if (bad !== null) return new PostError('EINVAL', op, i, bad);
      lens[i] = length as number;
    }
    const sigAll = this.sqSigAll;
    const ud = this.qpType === QpType.UD;
    for (let i = 0; i < n; i++) {
      const wr = wrs[i] as SendWr;
      const flags = wr.sendFlags ?? 0;
      this.sq.push(this.makeSqWqe(wr, wr.sgList as Sge[], flags, sigAll || (flags & SendFlags.SIGNALED) !== 0, lens[i] as number, ud));
    }
    this.kickIf(n);
    return null;
  }

  /**
   * The queued copy of a checked send WR: a WQE the transport handed back (see
   * {@link _recycleSqWqe}) or a new one, every field written (every WQE has the same shape).
   */
  private makeSqWqe(wr: SendWr, sgList: Sge[], flags: number, signaled: boolean, length: number, ud: boolean): SqWqe {
    const at = wr.atomic;
    const rd = wr.rdma;
    const imm = wr.immData;
    const d = ud ? (wr.ud as UdDest) : null;
    const w = this.sqFree.take() ?? newSqWqe();
    w.wrId = wr.wrId;
    w.opcode = wr.opcode;
    w.sgList = sgList;
    w.flags = flags;
    w.signaled = signaled;
    w.length = length;
    w.inline = null;
    w.remoteAddr = at?.remoteAddr ?? rd?.remoteAddr ?? 0;
    w.rkey = at?.rkey ?? rd?.rkey ?? 0;
    w.invalidateRkey = wr.invalidateRkey ?? 0;
    w.compareAdd = at ? u64(at.compareAdd) : 0n;
    w.swap = at?.swap !== undefined ? u64(at.swap) : 0n;
    w.immData = imm === undefined ? 0 : imm >>> 0;
    w.ah = d !== null ? d.ah : null;
    w.remoteQpn = d !== null ? d.remoteQpn : 0;
    w.remoteQkey = d !== null ? this.udQkey(d) : 0;
    w.bind = wr.opcode === WrOpcode.BIND_MW ? bindWqe(wr) : null;
    w.sent = 0;
    w.detached = false;
    return w;
  }

  /**
   * Transport side: send WQE `w` has completed (its completion, if any, is generated) and the
   * transport keeps no reference to it: a later post may reuse the object. Only for WQEs the
   * caller's objects are not reachable from any more (a completion copies what it reports).
   */
  protected _recycleSqWqe(w: SqWqe): void {
    this.sqFree.give(w);
  }

  /** Transport side: as {@link _recycleSqWqe}, for a receive WQE whose completion is generated. */
  protected _recycleRqWqe(w: RqWqe): void {
    if (this.srq !== null) this.srq._recycle(w);
    else this.rqFree.give(w);
  }

  /**
   * Transport side: take the next receive WQE — off this QP's receive queue, or off its SRQ
   * (which raises the SRQ limit event when it is due). The WQE is this QP's from now on: it
   * completes on this QP, or is flushed with it.
   */
  protected _rqTake(): RqWqe | undefined {
    const s = this.srq;
    return s === null ? this.rq.shift() : s._take();
  }

  /** Transport side: the WQE {@link _rqTake} would take, left where it is. */
  protected _rqPeek(): RqWqe | undefined {
    const s = this.srq;
    return s === null ? this.rq.peek() : s._peek();
  }

  /** Transport side: receive WQEs available to this QP (its RQ's, or its SRQ's). */
  protected _rqCount(): number {
    const s = this.srq;
    return s === null ? this.rq.length : s._count();
  }

  /** The Q_Key a UD WR sends with: bit 31 set means the QP's own Q_Key (IB spec 10.2.5). */
  private udQkey(d: UdDest): number {
    return d.remoteQkey & 0x80000000 ? (this.attr.qkey ?? 0) : d.remoteQkey >>> 0;
  }

  /**
   * `ibv_bind_mw()`: bind type 1 window `mw` to `bind.bindInfo` (an MR of the window's PD, an
   * address range inside it, the window's access rights) through this QP, or unbind it (no MR,
   * address and length 0). The device posts the bind as a BIND_MW work request: it completes on
   * the send CQ (opcode BIND_MW; on failure MW_BIND_ERR and the QP to ERR, as any failed WR).
   * `mw.rkey` becomes the rkey the bind gives the window (its key byte increased, ibv_inc_rkey)
   * as soon as it is posted; the old rkey stops working when the bind executes.
   * @returns the window's new rkey.
   * @throws RdmaError EINVAL (a type 2 window — those are bound by BIND_MW work requests —, an
   *   address or length without an MR, a window deallocated, a malformed argument; what the
   *   device refuses: rxe refuses zero-based type 1 windows, the post's EINVAL/ENOMEM); EPERM
   *   (the MR in another PD than the window); EOPNOTSUPP (a device without windows).
   */
  bindMw(mw: Mw, bind: MwBind): number {
    const op = 'ibv_bind_mw';
    if (!(mw instanceof Mw)) throw err('EINVAL', op, 'not a memory window');
    if (typeof bind !== 'object' || bind === null || typeof bind.bindInfo !== 'object' || bind.bindInfo === null) throw err('EINVAL', op, 'no bind_info');
    const info = bind.bindInfo;
    // libibverbs' ibv_bind_mw.
    if (mw.type !== MwType.TYPE_1) throw err('EINVAL', op, 'only type 1 windows are bound by ibv_bind_mw');
    // `mr` may be left out as well as null (NULL in C).
    const mr = info.mr as Mr | null | undefined;
    if ((mr === null || mr === undefined) && (info.addr !== 0 || info.length !== 0)) throw err('EINVAL', op, 'address or length without an MR');
    if (mr !== null && mr !== undefined && (!(mr instanceof Mr) || mr.pd !== mw.pd)) throw err('EPERM', op, 'MR of another PD than the window');
    if (mw.state === MwState.INVALID) throw err('EINVAL', op, 'MW deallocated');
    const p = this.context.device._provider(op);
    if (p.bindMw === undefined) throw err('EOPNOTSUPP', op, `${this.context.device.name} has no memory windows`);
    const rkey = p.bindMw(this, mw, bind);
    mw.rkey = rkey;
    return rkey;
  }

  /**
   * ibv_attach_mcast: receive the datagrams sent to multicast group `gid` (16 bytes; `lid` 0 on
   * RoCE). UD QPs only (EINVAL otherwise); EOPNOTSUPP on a device without multicast.
   */
  attachMcast(gid: Uint8Array, lid: number): void {
    const op = 'ibv_attach_mcast';
    const p = this.mcastProvider(op, gid, lid);
    if (p.attachMcast === undefined) throw err('EOPNOTSUPP', op, `${this.context.device.name} has no multicast`);
    p.attachMcast(this, Uint8Array.from(gid), lid);
  }

  /** ibv_detach_mcast: undo {@link attachMcast}. EINVAL if not attached (the provider says). */
  detachMcast(gid: Uint8Array, lid: number): void {
    const op = 'ibv_detach_mcast';
    const p = this.mcastProvider(op, gid, lid);
    if (p.detachMcast === undefined) throw err('EOPNOTSUPP', op, `${this.context.device.name} has no multicast`);
    p.detachMcast(this, Uint8Array.from(gid), lid);
  }

  /** The checks both multicast calls share; returns the device's provider. */
  private mcastProvider(op: string, gid: Uint8Array, lid: number): VerbsProvider {
    if (this.destroyed) throw err('EINVAL', op, 'QP destroyed');
    if (this.qpType !== QpType.UD) throw err('EINVAL', op, 'multicast needs a UD QP');
    if (!(gid instanceof Uint8Array) || gid.length !== 16) throw err('EINVAL', op, 'gid must be 16 bytes');
    if (!Number.isInteger(lid) || lid < 0 || lid > 0xffff) throw err('EINVAL', op, `lid ${String(lid)}`);
    return this.context.device._provider(op);
  }

  private kickIf(queued: number): void {
    if (queued === 0) return;
    if (this.st.state === QpState.ERR) this.flush();
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

  /**
   * Transport hook: checks of a send WR that depend on the device's live state, made after the
   * declared ones of wr-check.ts (RoCE UD: the message against the port's MTU). A reason refuses
   * it (EINVAL).
   */
  protected _checkSendWr(_wr: SendWr, _length: number): string | null {
    return null;
  }
  /** Copy inline data out of the registered memory the SGEs name; a string is an error reason. */
  protected abstract _copyInline(sgList: readonly Sge[], length: number): Buffer | string;

  /**
   * ibv_post_recv. Allowed from INIT on (EINVAL in RESET); in ERR the WRs complete with
   * WR_FLUSH_ERR — those queued before a bad one too. A QP on an SRQ has no receive queue of its
   * own: EINVAL for the first WR (rxe_post_recv, siw_post_receive); post to the SRQ instead.
   */
  postRecv(wrs: RecvWr | readonly RecvWr[]): void {
    if (this.srq !== null && !this.destroyed && this.st.state !== QpState.RESET) throw new PostError('EINVAL', 'ibv_post_recv', 0, `QP uses ${this.srq.tag}: post to the SRQ`);
    let bad: PostError | null = null;
    if (Array.isArray(wrs)) {
      const list = wrs as readonly RecvWr[];
      for (let i = 0; i < list.length && bad === null; i++) bad = this.queueRecv(list[i] as RecvWr, i);
    } else bad = this.queueRecv(wrs as RecvWr, 0);
    if (this.st.state === QpState.ERR) this.flush();
    if (bad !== null) throw bad;
  }

  /**
   * Check send WRs once for this QP and keep private copies of them (prepared.ts), to post with
   * {@link postPrepared} as often as needed. A WR refused here is the PostError (EINVAL, its
   * index) `postSend` would throw for it; nothing is prepared then.
   */
  prepareSend(wrs: SendWr | readonly SendWr[]): PreparedWrs<SendWr> {
    const rules = this.wrRules;
    const pd = this.pd;
    const check = (wr: SendWr): string | null => {
      const length = checkSendWr(wr, rules, pd);
      return typeof length === 'string' ? length : this._checkSendWr(wr, length);
    };
    return this._prepared(new PreparedWrs<SendWr>(this, 'send', checkedCopies('send', wrs, check, copySendWr)));
  }

  /** Receive WRs checked once for this QP, as {@link prepareSend}. */
  prepareRecv(wrs: RecvWr | readonly RecvWr[]): PreparedWrs<RecvWr> {
    const rules = this.wrRules;
    const check = (wr: RecvWr): string | null => {
      const length = checkRecvWr(wr, rules);
      return typeof length === 'string' ? length : null;
    };
    return this._prepared(new PreparedWrs<RecvWr>(this, 'recv', checkedCopies('recv', wrs, check, copyRecvWr)));
  }

  /**
   * Post a prepared list: what `postSend(p.wrs)` or `postRecv(p.wrs)` does (the queue's room,
   * the QP's state, the errors and their indexes). A list prepared for another QP: EINVAL.
   */
  postPrepared(p: PreparedWrs): void {
    checkPreparedFor(p, this);
    if (p.kind === 'send') this.postSend(p.wrs as readonly SendWr[]);
    else this.postRecv(p.wrs as readonly RecvWr[]);
  }

  /** Provider hook: keep a prepared list in the provider's own form too (`p._provider`). */
  protected _prepared<T extends SendWr | RecvWr>(p: PreparedWrs<T>): PreparedWrs<T> {
    return p;
  }

  /** Validate receive WR `i` of an ibv_post_recv and queue a private copy of it; or why not. */
  private queueRecv(wr: RecvWr, i: number): PostError | null {
    const op = 'ibv_post_recv';
    if (this.destroyed || this.st.state === QpState.RESET) return new PostError('EINVAL', op, i, `QP in state ${this.st.state}`);
    if (this.rq.length >= this.cap.maxRecvWr) return new PostError('ENOMEM', op, i, 'receive queue full');
    const length = checkRecvWr(wr, this.wrRules);
    if (typeof length === 'string') return new PostError('EINVAL', op, i, length);
    this.rq.push(recvWqe(wr, length, this.rqFree));
    return null;
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
    const cq = this.sendCq;
    const ok = status === WcStatus.SUCCESS;
    cq._push(fillWc(cq._wc(), w.wrId, status, sendWcOpcode(w.opcode), ok && BYTE_LEN_OPS.has(w.opcode) ? w.length : 0, this.qpNum, 0, 0), false);
  }

  /**
   * Generate a receive completion. `info` carries the immediate data and, on UD, the sender
   * (srcQp, pkeyIndex ...); `flags` are the `WcFlags` (GRH, WITH_IMM, WITH_INV).
   */
  protected completeRecv(w: RqWqe, status: WcStatus, byteLen: number, flags: number, invalidated: number, solicited = false, info?: RecvInfo): void {
    const cq = this.recvCq;
    const wc = fillWc(cq._wc(), w.wrId, status, info?.opcode ?? WcOpcode.RECV, status === WcStatus.SUCCESS ? byteLen : 0, this.qpNum, flags, invalidated);
    if (info !== undefined && status === WcStatus.SUCCESS) {
      if (flags & WcFlags.WITH_IMM) wc.immData = (info.immData ?? 0) >>> 0;
      wc.srcQp = info.srcQp ?? 0;
      wc.pkeyIndex = info.pkeyIndex ?? 0;
      wc.slid = info.slid ?? 0;
      wc.sl = info.sl ?? 0;
      wc.dlidPathBits = info.dlidPathBits ?? 0;
    }
    cq._push(wc, solicited);
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
    this.st.move(QpState.RESET, 'destroyed');
    this.pd._releaseQp(this);
  }

  /**
   * `using` / `await using`: `ibv_destroy_qp()` at the end of the scope; nothing if already
   * destroyed.
   * @throws RdmaError what {@link destroy} throws (the device's errno): disposal reports, never
   *   leaks silently.
   */
  [Symbol.dispose](): void {
    if (!this.destroyed) this.destroy();
  }
}

/** An atomic operand as an unsigned 64-bit bigint (a number is accepted; the transport checked it). */
function u64(v: bigint | number): bigint {
  return BigInt.asUintN(64, typeof v === 'bigint' ? v : BigInt(Math.trunc(v)));
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

/** Send-side opcodes whose completion reports `byte_len` (ibv_poll_cq(3): RDMA Read and atomics). */
/** The initial backing size of a queue of `depth` WRs. */
function ringStart(depth: number): number {
  return Number.isInteger(depth) && depth >= 1 ? Math.min(depth, 16) : 16;
}

const BYTE_LEN_OPS = new Set<WrOpcode>([WrOpcode.RDMA_READ, WrOpcode.ATOMIC_CMP_AND_SWP, WrOpcode.ATOMIC_FETCH_AND_ADD]);

/** A zeroed send WQE (the one shape every WQE has; {@link Qp.makeSqWqe} writes every field). */
function newSqWqe(): SqWqe {
  return { wrId: 0, opcode: WrOpcode.SEND, sgList: [], flags: 0, signaled: false, length: 0, inline: null, remoteAddr: 0, rkey: 0, invalidateRkey: 0, compareAdd: 0n, swap: 0n, immData: 0, ah: null, remoteQpn: 0, remoteQkey: 0, bind: null, sent: 0, detached: false };
}

/**
 * A checked BIND_MW WR's operands as the device executes them (rdma-core's rxe `convert_send_wr`:
 * the window by its rkey as the application has it now, the MR by its lkey).
 */
function bindWqe(wr: SendWr): BindWqe {
  const b = wr.bindMw as NonNullable<SendWr['bindMw']>;
  const i = b.bindInfo;
  return { mwRkey: b.mw.rkey >>> 0, rkey: b.rkey >>> 0, mrLkey: i.mr?.lkey ?? 0, addr: i.addr, length: i.length, access: i.mwAccessFlags };
}

/** Write every field of a completion into `wc` (a CQ's reused object or a new one). */
function fillWc(wc: Wc, wrId: WrId, status: WcStatus, opcode: WcOpcode, byteLen: number, qpNum: number, wcFlags: number, inv: number): Wc {
  wc.wrId = wrId;
  wc.status = status;
  wc.opcode = opcode;
  wc.vendorErr = 0;
  wc.byteLen = byteLen;
  wc.qpNum = qpNum;
  wc.srcQp = 0;
  wc.wcFlags = wcFlags;
  wc.immData = 0;
  wc.invalidatedRkey = wcFlags & WcFlags.WITH_INV ? inv : 0;
  wc.pkeyIndex = 0;
  wc.slid = 0;
  wc.sl = 0;
  wc.dlidPathBits = 0;
  return wc;
}
