/**
 * The connected QP of the soft RoCE device, RC or UC: the verbs QP (queues, posting checks,
 * completions, the modify rules of qp-attr.ts for its type) wired to the three engines of rxe's
 * split — requester (req.ts), completer (comp.ts), responder (resp.ts) — and to the device's
 * receive path and sockets. A UC QP runs the same engines with rxe's UC checks (see
 * {@link RcCore.uc}): UC opcodes, no acknowledgements, no retries; its completer never runs.
 *
 * - RTR (`ib_modify_qp` with AV, path MTU, destination QPN, RQ PSN; RC: max_dest_rd_atomic,
 *   min_rnr_timer): the path is resolved (source GID, destination address), the responder starts
 *   at the RQ PSN. RTS (SQ PSN; RC: timeout, retry_cnt, rnr_retry, max_rd_atomic): the requester
 *   and completer start at the SQ PSN.
 * - Packets from the peer reach {@link RoceRcQp._respond} after the device's checks (headers,
 *   ICRC) and this QP's (opcode class, state, source and destination address of the connection);
 *   requests go to the responder, responses to the completer.
 * - ERR: every WQE completes, in order: taken send WQEs (the one a failure happened on with its
 *   status, the others WR_FLUSH_ERR), the send queue, the receive being filled, the receive queue.
 */
import { traceEvent, tracing } from '../../../trace.js';
import type { Context } from '../../../verbs/context.js';
import type { Pd } from '../../../verbs/pd.js';
import type { Cq } from '../../../verbs/cq.js';
import type { QpInitAttr } from '../../../verbs/provider.js';
import { Qp, type RecvInfo, type RqWqe, type SqWqe } from '../../../verbs/qp.js';
import { QpAttrMask, type QpAttr } from '../../../verbs/qp-attr.js';
import { AsyncEventType, QpState, QpType, WcStatus, type QpCap, type Sge } from '../../../verbs/types.js';
import {
  IbTransport,
  OpMask,
  finishRocePacket,
  padRocePacket,
  ibMtuToBytes,
  opcodeFitsQp,
  type RoceIpUdpHeaders,
  type RocePacket,
} from '../../../wire/roce/index.js';
import { C } from '../counters.js';
import { ipBytes, type RoceAv, type RoceDevice } from '../device.js';
import type { RxNet } from '../recv.js';
import type { RxMeta } from '../udp.js';
import { realClock, type RcClock } from './clock.js';
import { ackTimeoutMs, gatherSges, type RcCore } from './common.js';
import { RcCompleter } from './comp.js';
import { RcRequester, type RcWqe } from './req.js';
import { RcResponder } from './resp.js';
import { TRAIN_MAX, trainMiddleOpcode, trainStep } from '../train.js';

/** A link that replaces the device's sockets (tests): gets every packet this QP sends. */
export type RcLink = (pkt: Buffer) => void;


/** An RC or UC QP on a soft RoCE device. */
export class RoceRcQp extends Qp implements RcCore {
  readonly dev: RoceDevice;
  readonly uc: boolean;
  /** The clock of the engines' timers (a virtual one in tests). */
  clock: RcClock = realClock;
  /** Set to carry this QP's packets instead of the device's sockets (tests). */
  link: RcLink | null = null;
  /** Called once when the first request arrives in RTR (the CM's "established on first data"). */
  onCommEstablished: (() => void) | null = null;
  readonly req: RcRequester;
  readonly comp: RcCompleter;
  readonly resp: RcResponder;
  private av: RoceAv | null = null;
  private net: RoceIpUdpHeaders | null = null;
  private peerIp = '';
  private ownIp = '';
  private _mtu = 256;
  /** {@link timeoutMs} of attribute `timeout` {@link timeoutAttr}. */
  private timeoutAttr = -1;
  private timeoutValue = Infinity;

  constructor(context: Context, pd: Pd, qpNum: number, init: QpInitAttr, cap: QpCap, dev: RoceDevice) {
    super(context, pd, qpNum, init, cap);
    this.dev = dev;
    this.uc = init.qpType === QpType.UC;
    this.req = new RcRequester(this);
    this.comp = new RcCompleter(this);
    this.resp = new RcResponder(this);
    this.req.comp = this.comp;
    this.comp.req = this.req;
    for (const cq of [init.sendCq, init.recvCq]) if (!cq.onOverflow) cq.onOverflow = cqOverflowed;
  }

  // -- RcCore -----------------------------------------------------------------------------------

  get counters() {
    return this.dev.counters;
  }
  get mtu(): number {
    return this._mtu;
  }
  get destQpn(): number {
    return this.attr.destQpNum ?? 0;
  }
  get accessFlags(): number {
    return this.attr.qpAccessFlags ?? 0;
  }
  get timeoutMs(): number {
    // Asked for every packet sent and every ACK: computed again only when `timeout` changes.
    const t = this.attr.timeout ?? 0;
    if (t !== this.timeoutAttr) {
      this.timeoutAttr = t;
      this.timeoutValue = ackTimeoutMs(t);
    }
    return this.timeoutValue;
  }
  get retryCnt(): number {
    return this.attr.retryCnt ?? 7;
  }
  get rnrRetry(): number {
    return this.attr.rnrRetry ?? 7;
  }
  get minRnrTimer(): number {
    return this.attr.minRnrTimer ?? 0;
  }
  sendReady(): boolean {
    return this.st.state === QpState.RTS && !this.destroyed;
  }
  sqPeek(): SqWqe | undefined {
    return this.sq.peek();
  }
  sqTake(): SqWqe | undefined {
    return this.sq.shift();
  }
  rqTake(): RqWqe | undefined {
    return this._rqTake();
  }
  rqAvailable(): number {
    // IBA 9.7.5.1.1 (C9-150.2.1): a QP on an SRQ reports no credits — the invalid count.
    return this.srq !== null ? Infinity : this._rqCount();
  }
  inlineCopy(w: SqWqe): Buffer | string {
    return this._copyInline(w.sgList, w.length);
  }
  sendDone(w: SqWqe, status: WcStatus): void {
    this.completeSend(w, status, status !== WcStatus.SUCCESS);
  }
  recvDone(w: RqWqe, status: WcStatus, byteLen: number, flags: number, invalidated: number, solicited: boolean, info?: RecvInfo): void {
    this.completeRecv(w, status, byteLen, flags, invalidated, solicited, info);
  }
  fatal(why: string, event?: AsyncEventType): void {
    if (this.st.state === QpState.ERR || this.destroyed) return;
    if (event !== undefined) this.raiseAsync(event);
    this._transition(QpState.ERR, why);
  }
  commEstablished(): void {
    // The first request of the connection. In RTR it is the COMM_EST async event; rdma_accept
    // moves the QP on to RTS before its REP goes out, so the CM (waiting for an RTU that may be
    // lost) is told in RTS as well.
    const s = this.st.state;
    if (s === QpState.RTR) this.raiseAsync(AsyncEventType.COMM_EST);
    if (s === QpState.RTR || s === QpState.RTS) this.onCommEstablished?.();
  }

  /** Finish (pad, ICRC) and send a packet; dropped unless the QP may send (RTR and later). */
  transmit(buf: Buffer, payloadEnd: number): void {
    const net = this.net;
    const av = this.av;
    if (net === null || av === null || !this.maySend()) return;
    const dev = this.dev;
    // To this host: straight to the QP's owner, in order with the CM's MADs, its ICRC left to
    // the host path when nothing here needs it (fwd-frame.ts `FwdFlag.ICRC_OFFLOAD`).
    const local = this.link === null && dev.ownsIp(av.dst, av.family);
    const offload = local && dev.icrcOffload();
    const len = offload ? padRocePacket(buf, 0, payloadEnd) : finishRocePacket(buf, 0, payloadEnd, net);
    const pkt = len === buf.length ? buf : buf.subarray(0, len);
    if (this.link !== null) {
      dev.counters.inc(C.sent_pkts);
      this.link(pkt);
    } else if (local) dev.deliverLocal(pkt, av.sgid.ip, av.dst, av.family, offload);
    else dev.transmit(pkt, len, av);
  }

  /** RcCore. */
  trainMax(): number {
    const av = this.av;
    if (this.link !== null || av === null || tracing('tx') || !this.dev.icrcOffload() || !this.dev.ownsIp(av.dst, av.family)) return 0;
    return TRAIN_MAX;
  }

  /** RcCore: a train (train.ts) to the connected QP on this host; dropped unless the QP may send. */
  transmitTrain(buf: Buffer, payloadEnd: number, count: number): void {
    const av = this.av;
    if (av === null || !this.maySend()) return;
    const len = padRocePacket(buf, 0, payloadEnd);
    this.dev.deliverLocal(len === buf.length ? buf : buf.subarray(0, len), av.sgid.ip, av.dst, av.family, true, count);
  }

  /**
   * Whether the QP may send a packet now (RTR and later, not destroyed). A port that is down sends
   * nothing (counted): the requester's retry timer sees the loss.
   */
  private maySend(): boolean {
    const s = this.st.state;
    if (this.destroyed || s === QpState.RESET || s === QpState.INIT || s === QpState.ERR) return false;
    if (!this.dev.portUp) {
      this.dev.counters.inc(C.send_err);
      return false;
    }
    return true;
  }

  // -- receive path -------------------------------------------------------------------------------

  /**
   * @internal The device's QP-level checks for a packet to this QP (rxe `check_type_state`,
   * `check_addr`): an opcode of the QP's class (RC, UC: requests only), a state that takes it
   * (requests from RTR, responses from RTS), and the connection's addresses. Counts and returns
   * false to drop.
   */
  _accepts(p: RocePacket, meta: RxMeta): boolean {
    const c = this.dev.counters;
    if (!opcodeFitsQp(p.opcode, this.uc ? IbTransport.UC : IbTransport.RC)) {
      c.inc(C.rcvd_bad_opcode_drop);
      return false;
    }
    const s = this.st.state;
    const ok = p.mask & OpMask.REQ ? s === QpState.RTR || s === QpState.RTS || s === QpState.SQD : s === QpState.RTS || s === QpState.SQD;
    if (!ok) {
      c.inc(C.rcvd_qp_state_drop);
      return false;
    }
    if (!this.samePeer(meta)) {
      c.inc(C.rcvd_rc_addr_drop);
      return false;
    }
    return true;
  }

  /** The resource listing's view (src/stat/): the peer's and this QP's IP addresses once in RTR. */
  override _resourceInfo(): Record<string, string | number> {
    const av = this.av;
    return av === null ? {} : { 'dst-addr': av.dst, 'src-addr': av.sgid.ip };
  }

  /** Whether a datagram came from the connected peer's address to this QP's source address. */
  private samePeer(meta: RxMeta): boolean {
    const av = this.av;
    if (av === null || meta.family !== av.family) return false;
    if (meta.src === this.peerIp && meta.dst === this.ownIp) return true;
    const src = ipBytes(meta.src, meta.family);
    const dst = ipBytes(meta.dst, meta.family);
    if (!sameBytes(src, av.dstBytes) || !sameBytes(dst, av.srcBytes)) return false;
    this.peerIp = meta.src;
    this.ownIp = meta.dst;
    return true;
  }

  /** @internal A packet for this QP that passed every check: to the responder or the completer. */
  _respond(p: RocePacket, _net: RxNet): void {
    if (p.mask & OpMask.REQ) this.resp.onRequest(p);
    else this.comp.onResponse(p);
  }

  /**
   * @internal A train (train.ts) whose first packet `p` passed every check: each segment to the
   * responder in PSN order, the later ones checked as packets of their own first (the QP may
   * have left RTS on the way).
   */
  _respondTrain(p: RocePacket, meta: RxMeta, seg: number): void {
    const mid = trainMiddleOpcode(p.opcode);
    const payload0 = p.payloadOff;
    p.payloadLen = seg;
    this.resp.onRequest(p);
    for (let i = 1; i < meta.train; i++) {
      trainStep(p, i, mid, seg, payload0);
      if (this._accepts(p, meta)) this.resp.onRequest(p);
    }
  }

  // -- verbs hooks ---------------------------------------------------------------------------

  protected override _checkModify(attr: QpAttr, mask: number, next: QpState): string | null {
    if (mask & QpAttrMask.AV && attr.ahAttr !== undefined) {
      try {
        this.dev.resolveAv(attr.ahAttr, 'ibv_modify_qp');
      } catch (e) {
        return (e as Error).message;
      }
    }
    if (mask & QpAttrMask.PATH_MTU && attr.pathMtu !== undefined && attr.pathMtu > 5) return `path_mtu ${attr.pathMtu}`;
    void next;
    return null;
  }

  /**
   * ibv_query_qp as rxe (`rxe_qp_to_attr`): `rq_psn` is the PSN the responder expects next
   * (`qp->resp.psn`), `sq_psn` the one the requester sends next (`qp->req.psn`), once they run.
   */
  protected override _queryAttr(a: QpAttr): QpAttr {
    const st = this.state;
    if (this.av !== null && st !== QpState.RESET && st !== QpState.INIT) a.rqPsn = this.resp.epsn;
    if (st === QpState.RTS || st === QpState.SQD || st === QpState.SQE || (st === QpState.ERR && this.av !== null)) a.sqPsn = this.req.psn;
    return a;
  }

  protected _stateChanged(from: QpState, to: QpState, _reason: string): void {
    switch (to) {
      case QpState.RTR:
        if (from === QpState.INIT) this.setupPath();
        break;
      case QpState.RTS:
        if (from === QpState.RTR) {
          this.req.reset(this.attr.sqPsn ?? 0);
          this.comp.reset(this.attr.sqPsn ?? 0);
        }
        this.req.kick();
        break;
      case QpState.ERR:
        this.comp.stop();
        this.resp.stop();
        this.req.stop();
        break;
      case QpState.RESET:
        this.comp.stop();
        this.resp.stop();
        this.req.clear();
        this.resp.takeRecvInProgress();
        this.av = null;
        this.net = null;
        break;
      default:
        break;
    }
  }

  /** RTR: resolve the path and start the responder. */
  private setupPath(): void {
    const a = this.attr;
    if (a.ahAttr === undefined) return;
    const av = this.dev.resolveAv(a.ahAttr, 'ibv_modify_qp');
    this.av = av;
    this.net = { family: av.family, src: av.srcBytes, dst: av.dstBytes, sport: this.dev.agent.port, dport: this.dev.agent.port };
    this.peerIp = av.dst;
    this.ownIp = av.sgid.ip;
    this._mtu = ibMtuToBytes(a.pathMtu ?? 1) || 256;
    this.resp.reset(a.rqPsn ?? 0);
    this.dev.activate();
    if (tracing('qp')) traceEvent('qp', this.tag, 'rtr', { sgid: av.sgid.ip, dst: av.dst, destQpn: this.destQpn, mtu: this._mtu, rqPsn: a.rqPsn ?? 0 });
  }

  /** The device's sockets hold the event loop while this QP holds it (device.ts). */
  protected override _holdsLoopChanged(on: boolean): void {
    this.dev._qpHoldsLoop(this, on);
  }

  protected _destroyed(): void {
    this.comp.stop();
    this.resp.stop();
    this.req.stop();
    this.dev._removeQp(this);
  }

  protected override _inflight(): number {
    return this.req.list.length;
  }

  protected _sqKick(): void {
    this.req.kick();
  }

  /** Completes, in order, the WQEs the engines hold, then the queues. */
  protected override flush(): void {
    const list = this.req.list;
    for (let e = list.shift(); e !== undefined; e = list.shift()) {
      const x = e as RcWqe;
      this.completeSend(x.w, x.errStatus, true);
    }
    this.req.clear();
    for (let w = this.sq.shift(); w !== undefined; w = this.sq.shift()) this.completeSend(w, WcStatus.WR_FLUSH_ERR, true);
    const r = this.resp.takeRecvInProgress();
    if (r !== null) this.completeRecv(r, WcStatus.WR_FLUSH_ERR, 0, 0, 0);
    for (let w = this.rq.shift(); w !== undefined; w = this.rq.shift()) this.completeRecv(w, WcStatus.WR_FLUSH_ERR, 0, 0, 0);
  }

  protected _copyInline(sgList: readonly Sge[], length: number): Buffer | string {
    const out = Buffer.allocUnsafe(length);
    return gatherSges(this.context, this.pd, sgList, 0, out, 0, length) ? out : 'inline SGE: invalid lkey or bounds';
  }
}

/** A CQ overflowed (CQ_ERR already raised): every RC or UC QP using it is fatally broken (IB spec 11.6.2). */
function cqOverflowed(cq: Cq): void {
  for (const qp of cq.qps) if (qp instanceof RoceRcQp) qp.fatal('completion queue overflow', AsyncEventType.QP_FATAL);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
