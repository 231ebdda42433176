/**
 * The software iWARP QP (siw's role split: this file = siw_qp.c + the verbs entry points; TX in
 * qp-tx.ts, RX in qp-rx.ts). The connection manager attaches an LLP (a TCP connection whose MPA
 * handshake is done) with {@link IwarpQp.attachLlp}; from then on FPDUs flow until the QP leaves
 * RTS. Errors: a receive-side violation sends one TERMINATE (first error wins) and closes the
 * connection; the QP goes to ERR and every outstanding WR is flushed with WR_FLUSH_ERR.
 */
import { TerminateError, TermLayer } from '../../errors.js';
import { DdpEtype, RdmapEcode, RdmapEtype, decodeTerminateMessage, termName } from '../../wire/iwarp/index.js';
import type { Context } from '../../verbs/context.js';
import type { Pd } from '../../verbs/pd.js';
import type { Cq } from '../../verbs/cq.js';
import type { QpInitAttr } from '../../verbs/provider.js';
import { Qp, qpTransitionAllowed, type RqWqe, type SqWqe } from '../../verbs/qp.js';
import { Access, AsyncEventType, QpState, WcStatus, type QpCap, type Sge } from '../../verbs/types.js';
import type { QpAttr } from '../../verbs/qp-attr.js';
import { SIW_LIMITS } from './attrs.js';
import { localSgeTarget, remoteTarget as mrRemoteTarget, invalidateMr } from './mem.js';
import type { Llp } from './llp.js';
import { IC, iwarpDeviceCounters, type IwarpCounters } from './counters.js';
import { QpTx, type TxQp } from './qp-tx.js';
import { QpRx, type RxQp } from './qp-rx.js';
import { iwarpConfig } from './config.js';
import { FpduFaults } from './faults.js';
import { traceEvent, tracing } from '../../trace.js';
import { doubleArray } from '../../util/arrays.js';

/** Negotiated connection parameters handed over by the CM after MPA. */
export interface LlpParams {
  crc: boolean;
  /** Largest FPDU to send (from the path MTU/MSS). */
  fpduMax: number;
  /** Hold TX until the peer's first FPDU (or the grace timer): non-P2P responder. */
  holdTx: boolean;
  /** Grace period after which a held TX is released anyway (ms). */
  holdGraceMs: number;
  /** Initiator in P2P mode: send this RTR first. */
  rtr?: 'write' | 'read';
  /** Called on the first inbound FPDU. */
  onFirstFpdu?: () => void;
}

/** Why the connection under a QP ended, reported to the CM. */
export interface LlpDownInfo {
  /** The peer closed (FIN/RST) rather than us. */
  byPeer: boolean;
  /** A TERMINATE was sent or received. */
  terminate?: TerminateError;
  error?: Error;
}

const NO_PIECE = Buffer.alloc(0);

/** An RC QP on the software iWARP device. */
/** SIW_MAX_INLINE: the inline data siw_query_qp reports whatever the QP was created with. */
const SIW_QP_MAX_INLINE = SIW_LIMITS.maxInline;

/** `ib_mtu_int_to_enum`: the IB MTU enum of an interface MTU (4096 and up: 5, below 512: 1). */
function mtuEnumOf(mtu: number): number {
  if (mtu >= 4096) return 5;
  if (mtu >= 2048) return 4;
  if (mtu >= 1024) return 3;
  if (mtu >= 512) return 2;
  return 1;
}

export class IwarpQp extends Qp implements TxQp, RxQp {
  readonly tx: QpTx;
  rx: QpRx;
  llp: Llp | null = null;
  /** The CM's hook: the connection is gone. */
  onLlpDown: ((info: LlpDownInfo) => void) | null = null;
  /** A TERMINATE was sent or received on the current connection. */
  private ended = false;
  /**
   * {@link gather}'s pieces, one slot per SGE a WR may carry from the start: a first WR with more
   * SGEs than the earlier ones then writes inside the arrays, not past their end (which would
   * throw away the optimised TX path the first time a chunk of the send ring wraps).
   */
  private readonly scratch: { bufs: Buffer[]; offs: number[]; lens: number[] };
  private holdTimer: NodeJS.Timeout | null = null;
  /** {@link rx} has served a connection (a later one gets a new one). */
  private rxUsed = false;
  /** The device's direct-placement threshold (configuration, fixed at QP creation). */
  private readonly directMin: number;
  /** The device's counters (counters.ts). */
  readonly counters: IwarpCounters;

  constructor(context: Context, pd: Pd, qpNum: number, init: QpInitAttr, cap: QpCap) {
    super(context, pd, qpNum, init, cap);
    this.counters = iwarpDeviceCounters(context.device.name);
    const n = Math.max(1, cap.maxSendSge);
    // The holder's fields get null first, then their arrays: their field type is then "any" from
    // the first QP on. Holding an array first, V8 would record the array's hidden class as the
    // field type while that class stays stable; the class all new arrays share stops being
    // stable at some point, and the next QP's store would then generalize the field and throw
    // away the TX path compiled against it (see util/arrays.ts).
    const g: { bufs: Buffer[] | null; offs: number[] | null; lens: number[] | null } = { bufs: null, offs: null, lens: null };
    g.bufs = new Array<Buffer>(n).fill(NO_PIECE);
    g.offs = doubleArray(n);
    g.lens = new Array<number>(n).fill(0);
    this.scratch = g as { bufs: Buffer[]; offs: number[]; lens: number[] };
    this.tx = new QpTx(this);
    this.directMin = iwarpConfig(context.device.name).directPlacementMin;
    this.rx = new QpRx(this, this.directMin);
    for (const cq of [init.sendCq, init.recvCq]) if (!cq.onOverflow) cq.onOverflow = cqOverflowed;
  }

  /**
   * ibv_query_qp as siw (siw_verbs.c `siw_query_qp`): the state, the queue sizes (inline data
   * SIW_MAX_INLINE), the path MTU of the interface (`ib_mtu_int_to_enum`), local write, remote
   * write and remote read access, and the read queue sizes — `max_rd_atomic` from the inbound
   * read queue (`irq_size`, the IRD) and `max_dest_rd_atomic` from the outbound one (`orq_size`,
   * the ORD), the other way round from the IB names, as siw fills them. Every other attribute is
   * zero (`cur_qp_state` too, RESET): siw fills no more.
   */
  protected override _queryAttr(a: QpAttr): QpAttr {
    return {
      qpState: a.qpState as QpState,
      curQpState: QpState.RESET,
      pathMtu: mtuEnumOf(this.context.device.info.mtu),
      pathMigState: 0,
      qkey: 0,
      rqPsn: 0,
      sqPsn: 0,
      destQpNum: 0,
      qpAccessFlags: Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ,
      cap: { ...this.cap, maxInlineData: SIW_QP_MAX_INLINE },
      ahAttr: { dlid: 0, sl: 0, srcPathBits: 0, staticRate: 0, isGlobal: false, portNum: 0 },
      altAhAttr: { dlid: 0, sl: 0, srcPathBits: 0, staticRate: 0, isGlobal: false, portNum: 0 },
      pkeyIndex: 0,
      altPkeyIndex: 0,
      enSqdAsyncNotify: 0,
      sqDraining: 0,
      maxRdAtomic: this.ird,
      maxDestRdAtomic: this.ord,
      minRnrTimer: 0,
      portNum: 0,
      timeout: 0,
      retryCnt: 0,
      rnrRetry: 0,
      altPortNum: 0,
      altTimeout: 0,
      rateLimit: 0,
    };
  }

  // -- connection ---------------------------------------------------------------------------

  /**
   * Start RDMA mode over `llp` (the CM calls this once MPA is negotiated, with the QP in RTR or
   * RTS). `leftover`: bytes already read past the MPA frame.
   */
  attachLlp(llp: Llp, p: LlpParams, leftover?: Buffer): void {
    this.llp = llp;
    this.ended = false;
    const faults = FpduFaults.forConnection(llp.faultSink(), p.crc, this.counters);
    if (faults !== null) llp.setFaults(faults);
    this.tx.attach(llp, p.crc, p.fpduMax);
    // The receive state of the QP's first connection is the one made with the QP; a later one
    // gets its own, and the earlier one takes no more bytes.
    if (this.rxUsed) {
      this.rx.stop();
      this.rx = new QpRx(this, this.directMin);
    }
    this.rxUsed = true;
    const rx = this.rx;
    rx.attach(p.crc, iwarpConfig(this.context.device.name).rxFastPath);
    rx.onFirstFpdu = () => {
      this.releaseHold();
      p.onFirstFpdu?.();
    };
    if (p.holdTx) {
      this.tx.held = true;
      this.holdTimer = setTimeout(() => this.releaseHold(), p.holdGraceMs);
      this.holdTimer.unref();
    }
    llp.onClose = (e, byPeer) => this.llpClosed(e, byPeer);
    if (!this._holdsLoop) llp.holdLoop(false);
    // Direct placement: large tagged payloads are read by the socket straight into the MR. When
    // it is off, readTarget would answer null for every read: the LLP does not ask.
    llp.setReader(rx, this.directMin !== Infinity);
    if (this.st.state !== QpState.RTS) this._transition(QpState.RTS, 'connection established');
    if (p.rtr) this.tx.sendRtr(p.rtr);
    if (leftover && leftover.length > 0) rx.leftover(leftover);
    this.tx.kick();
  }

  /** The connection's TCP socket holds the event loop while the QP does (llp.ts {@link Llp.holdLoop}). */
  protected override _holdsLoopChanged(on: boolean): void {
    this.llp?.holdLoop(on);
  }

  private releaseHold(): void {
    if (this.holdTimer) clearTimeout(this.holdTimer);
    this.holdTimer = null;
    if (this.tx.held) {
      this.tx.held = false;
      this.tx.kick();
    }
  }

  /** A TERMINATE was sent or received on the current connection. */
  get terminated(): boolean {
    return this.ended;
  }

  /** A receive-side violation: TERMINATE (first error wins), close, QP to ERR. */
  protocolError(e: unknown): void {
    const t = e instanceof TerminateError ? e : new TerminateError(TermLayer.RDMAP, RdmapEtype.CATASTROPHIC, RdmapEcode.UNSPECIFIED, `internal error: ${(e as Error)?.message ?? e}`);
    if (this.ended) return;
    this.ended = true;
    this.counters.add(t.layer === TermLayer.RDMAP ? IC.rdmapErrors : t.layer === TermLayer.DDP ? IC.ddpErrors : IC.llpErrors);
    if (tracing('qp')) traceEvent('qp', this.tag, 'terminate', { direction: 'sent', layer: t.layer, etype: t.etype, ecode: t.ecode, reason: t.message });
    this.rx.stop();
    this.tx.sendTerminate({ layer: t.layer, etype: t.etype, ecode: t.ecode, header: t.header });
    const access = (t.layer === TermLayer.RDMAP && t.etype === RdmapEtype.REMOTE_PROTECTION) || (t.layer === TermLayer.DDP && t.etype === DdpEtype.TAGGED);
    const fatal = access ? AsyncEventType.QP_ACCESS_ERR : AsyncEventType.QP_FATAL;
    this.raiseAsync(fatal);
    this.down({ byPeer: false, terminate: t }, true);
  }

  /**
   * The resource listing's view (src/stat/): the last MSNs sent on the Send and Read queues,
   * the next ones expected from the peer, and the connection's TCP addresses.
   */
  override _resourceInfo(): Record<string, string | number> {
    const out: Record<string, string | number> = {
      'sq-msn': this.tx.lastSendMsn,
      'rq-msn': this.rx.nextSendMsn,
      'read-msn': this.tx.lastReadMsn,
      'ird-msn': this.rx.nextReadMsn,
    };
    const s = this.llp?.socket;
    if (s?.remoteAddress !== undefined) out['dst-addr'] = `${s.remoteAddress}:${s.remotePort ?? 0}`;
    if (s?.localAddress !== undefined) out['src-addr'] = `${s.localAddress}:${s.localPort ?? 0}`;
    return out;
  }

  /** The peer sent a TERMINATE: fail the WR it concerns, then tear down. */
  peerTerminated(header: Buffer, attached: Buffer): void {
    let t: TerminateError;
    try {
      const d = decodeTerminateMessage(header, attached);
      t = new TerminateError(d.layer, d.etype, d.ecode, `peer TERMINATE: ${termName(d.layer, d.etype, d.ecode)}`);
    } catch {
      t = new TerminateError(TermLayer.RDMAP, RdmapEtype.CATASTROPHIC, RdmapEcode.UNSPECIFIED, 'peer TERMINATE (undecodable)');
    }
    if (tracing('qp')) traceEvent('qp', this.tag, 'terminate', { direction: 'received', layer: t.layer, etype: t.etype, ecode: t.ecode, reason: t.message });
    this.ended = true;
    this.rx.stop();
    const head = this.tx.orq.shift();
    if (head) {
      // An RDMAP remote protection error or any DDP error fails the WR as an access error; the rest
      // (RDMAP catastrophic or remote operation, LLP) as a remote operation error.
      const st = t.layer === TermLayer.LLP ? WcStatus.REM_OP_ERR : t.etype === RdmapEtype.REMOTE_PROTECTION || t.layer === TermLayer.DDP ? WcStatus.REM_ACCESS_ERR : WcStatus.REM_OP_ERR;
      this.completeSend(head, st, true);
    }
    this.raiseAsync(t.layer === TermLayer.RDMAP && t.etype === RdmapEtype.REMOTE_PROTECTION ? AsyncEventType.QP_ACCESS_ERR : AsyncEventType.QP_FATAL);
    this.down({ byPeer: true, terminate: t }, true);
  }

  private llpClosed(e: Error | undefined, byPeer: boolean): void {
    if (this.llp === null) return;
    const info: LlpDownInfo = { byPeer };
    if (e) info.error = e;
    this.down(info, false);
  }

  /** Leave RDMA mode: QP to ERR (flush), connection closed, CM told once. */
  private down(info: LlpDownInfo, closeLlp: boolean): void {
    const llp = this.llp;
    if (!llp) return;
    this.llp = null;
    this.rx.stop();
    if (this.holdTimer) clearTimeout(this.holdTimer);
    this.holdTimer = null;
    llp.onClose = null;
    if (closeLlp) {
      // FPDUs staged for the end of this tick (e.g. the message posted just before a
      // disconnect) go out before the FIN.
      this.tx.flushStaged();
      llp.end();
    }
    this.tx.llp = null;
    if (this.st.state !== QpState.ERR && this.st.state !== QpState.RESET) this._transition(QpState.ERR, info.terminate ? 'terminate' : info.byPeer ? 'peer closed' : 'closed');
    const cb = this.onLlpDown;
    this.onLlpDown = null;
    cb?.(info);
  }

  /** Graceful disconnect (rdma_disconnect): pending TX is sent, then FIN; QP to ERR. */
  disconnect(): void {
    this.down({ byPeer: false }, true);
  }

  /** Abortive disconnect. */
  abort(): void {
    const llp = this.llp;
    // What completed was handed to TCP: staged FPDUs leave before the socket is closed.
    this.tx.flushStaged();
    this.down({ byPeer: false }, false);
    llp?.abort();
  }

  // -- Qp hooks ----------------------------------------------------------------------------------

  /**
   * siw acts on a request for RTS, CLOSING, TERMINATE or ERROR; a request for INIT or RTR that
   * the state graph does not take (RTR asked for again or after RTS, a connected QP asked back to
   * INIT) leaves the state as it is and the modify succeeds (siw_qp_nextstate_from_idle and
   * siw_qp_nextstate_from_rts ignore them). rdma_init_qp_attr's INIT and RTR answers on a
   * connected id are such requests.
   */
  protected override _stateFor(cur: QpState, asked: QpState): QpState {
    if ((asked === QpState.INIT || asked === QpState.RTR) && !qpTransitionAllowed(cur, asked)) return cur;
    return asked;
  }

  /**
   * A QP reaches RTS through its connection (the CM hands it the socket with the move): a modify
   * to RTS of a QP without one is refused, as siw_qp_nextstate_from_idle refuses RTS without
   * SIW_QP_ATTR_LLP_HANDLE ("no socket", EINVAL). rdma-core's ibv_rc_pingpong fails there on siw.
   */
  protected override _checkModify(_attr: QpAttr, _mask: number, next: QpState): string | null {
    if (next === QpState.RTS && this.st.state !== QpState.RTS && this.llp === null) return 'RTS without a connection (no socket)';
    return null;
  }

  protected override _modifyState(to: QpState): void {
    if (to === QpState.ERR && this.llp) {
      // User moved the QP to ERR: flush and close the connection (iw_cm does the same).
      this.down({ byPeer: false }, true);
      return;
    }
    this._transition(to, 'modify_qp');
  }

  protected _stateChanged(_from: QpState, to: QpState): void {
    if (to === QpState.ERR || to === QpState.RESET) {
      this.tx.orq.clear();
      this.tx.reset();
    }
    if (to === QpState.RTS) this.tx.kick();
  }

  protected _sqKick(): void {
    this.tx.kick();
  }

  protected _destroyed(): void {
    if (this.llp) this.abort();
  }

  protected override flush(): void {
    // Send completions keep posting order: the copied WQEs of a kick that has not completed
    // them yet go first (see QpTx.completeCopied); the same in sqDone and sqFail.
    this.tx.completeCopied();
    // Outstanding reads first (they were posted before anything still in the SQ), and the receive
    // a Send was being placed into before the ones still queued (siw_sq_flush, siw_rq_flush).
    const orq = this.tx.orq.toArray();
    this.tx.orq.clear();
    for (const w of orq) this.completeSend(w, WcStatus.WR_FLUSH_ERR, true);
    this.rx.flushRecv();
    // Sends handed to TCP zero-copy complete when the socket is done with their memory (its write
    // callback, which a closed socket still makes); the WRs queued behind them complete after
    // them, in posting order.
    if (this.tx.pendingCb > 0) for (let w = this.sq.shift(); w !== undefined; w = this.sq.shift()) this.tx.completeInTurn(w, WcStatus.WR_FLUSH_ERR);
    super.flush();
  }

  protected _copyInline(sgList: readonly Sge[], length: number): Buffer | string {
    const out = Buffer.allocUnsafe(length);
    let at = 0;
    for (const s of sgList) {
      if (s.length === 0) continue;
      const r = localSgeTarget(this.context, this.pd, s, 0, s.length, false);
      if (typeof r === 'number') return `inline SGE lkey ${s.lkey}: invalid`;
      r.buf.copy(out, at, r.off, r.off + s.length);
      at += s.length;
    }
    return out;
  }

  // -- shared by TX/RX -----------------------------------------------------------------------

  /** The TX path may run (RTS with a connection, not errored). */
  txAllowed(): boolean {
    return this.st.state === QpState.RTS && this.llp !== null && !this.ended;
  }
  /** Oldest WQE not yet transmitted. */
  sqHead(): SqWqe | undefined {
    return this.sq.peek();
  }
  sqShift(): void {
    this.sq.shift();
  }
  /** A WQE is done (handed to TCP, or its Read Response arrived). */
  sqDone(w: SqWqe, status: WcStatus = WcStatus.SUCCESS): void {
    if (this.destroyed) return; // a write callback after ibv_destroy_qp: no completions any more
    this.tx.completeCopied();
    this.completeSend(w, status);
  }
  /**
   * An RDMA Read's response is all placed: complete it (after the copied WQEs of a kick in
   * progress, as {@link sqDone}) and keep the WQE for a later post. Its SGE list is the private
   * copy the TX path made when the request went out: nothing of the caller's is reachable from it.
   */
  readDone(w: SqWqe): void {
    if (this.destroyed) return;
    this.tx.completeCopied();
    this.completeSend(w, WcStatus.SUCCESS);
    this._recycleSqWqe(w);
  }
  /** As {@link sqDone}, for a WQE the TX path holds no reference to any more (reused by a later post). */
  sqDoneRecycle(w: SqWqe, status: WcStatus): void {
    if (this.destroyed) return;
    this.completeSend(w, status);
    this._recycleSqWqe(w);
  }
  /** A WQE failed locally: complete it with `status`, QP to ERR. */
  sqFail(w: SqWqe, status: WcStatus, why: string): void {
    this.tx.completeCopied();
    this.sq.removeIf((x) => x === w);
    if (tracing('qp')) traceEvent('qp', this.tag, 'wr-error', { why });
    this.completeSend(w, status, true);
    this.protocolError(new TerminateError(TermLayer.RDMAP, RdmapEtype.CATASTROPHIC, RdmapEcode.UNSPECIFIED, why));
  }
  /** Resolve a WQE's SGEs to memory pieces; on a bad SGE the WQE fails with LOC_PROT_ERR. */
  gather(w: SqWqe): { bufs: Buffer[]; offs: number[]; lens: number[] } | null {
    // One scratch set per QP: the TX path consumes it before the next gather.
    // Entries past the ones written stay stale: the TX path walks them by byte count only.
    const g = this.scratch;
    const { bufs, offs, lens } = g;
    if (w.inline) {
      bufs[0] = w.inline;
      offs[0] = 0;
      lens[0] = w.inline.length;
      return g;
    }
    let k = 0;
    // An indexed loop: `for...of` runs the iterator protocol (an iterator object and a call per
    // element) in baseline code, which a short run executes throughout.
    const sgl = w.sgList;
    for (let i = 0; i < sgl.length; i++) {
      const s = sgl[i] as Sge;
      if (s.length === 0) continue;
      const r = localSgeTarget(this.context, this.pd, s, 0, s.length, false);
      if (typeof r === 'number') {
        this.sqFail(w, WcStatus.LOC_PROT_ERR, `SGE lkey ${s.lkey} addr ${s.addr} len ${s.length} invalid`);
        return null;
      }
      bufs[k] = r.buf;
      offs[k] = r.off;
      lens[k] = s.length;
      k++;
    }
    return g;
  }
  /** Local placement target inside SGE `s` at `off` for `len` bytes (LOCAL_WRITE required). */
  localTarget(s: Sge, off: number, len: number): { buf: Buffer; off: number } | number {
    return localSgeTarget(this.context, this.pd, s, off, len, true);
  }
  /**
   * Placement target inside receive SGE `s`: checked against the SRQ's PD when the QP takes its
   * receives from an SRQ, else the QP's (siw_proc_send).
   */
  recvTarget(s: Sge, off: number, len: number): { buf: Buffer; off: number } | number {
    return localSgeTarget(this.context, this.srq !== null ? this.srq.pd : this.pd, s, off, len, true);
  }
  /** Remote access to our memory: returns the target or a TERMINATE ecode. */
  remoteTarget(stag: number, to: number, len: number, access: number): { buf: Buffer; off: number } | number {
    return mrRemoteTarget(this.context, this.pd, stag, to, len, access);
  }
  /** Next posted receive (the QP's RQ, or its SRQ: siw_rqe_get). */
  rqTake(): RqWqe | undefined {
    return this._rqTake();
  }
  /** Next posted receive, left where it is. */
  rqPeek(): RqWqe | undefined {
    return this._rqPeek();
  }
  /** A Send was placed into `w` (taken off the RQ; the RX path holds it no longer): complete it. */
  rxRecvDone(w: RqWqe, len: number, flags: number, inv: number, solicited: boolean): void {
    this.completeRecv(w, WcStatus.SUCCESS, len, flags, inv, solicited);
    this._recycleRqWqe(w);
  }
  /** A receive taken off the RQ for a Send failed or was flushed. */
  rxRecvFailed(w: RqWqe, status: WcStatus): void {
    this.completeRecv(w, status, 0, 0, 0);
  }
  invalidateStag(stag: number): boolean {
    return invalidateMr(this.context, this.pd, stag);
  }
  /** Raise QP_FATAL (used when its CQ overflows). */
  raiseFatal(): void {
    this.raiseAsync(AsyncEventType.QP_FATAL);
  }

  /** Send WRs in flight (counted against max_send_wr). */
  protected override _inflight(): number {
    return this.tx.orq.length + this.tx.pendingCb;
  }
}

/** A CQ overflowed (CQ_ERR already raised): every QP using it is fatally broken (IB spec 11.6.2). */
function cqOverflowed(cq: Cq): void {
  for (const qp of cq.qps) {
    if (qp instanceof IwarpQp && qp.state !== QpState.ERR && qp.state !== QpState.RESET) {
      qp.raiseFatal();
      qp.modify({ qpState: QpState.ERR });
    }
  }
}
