/**
 * One stream rsocket (rsocket.c's `struct rsocket` for SOCK_STREAM): an RC QP over rdma_cm, its
 * state, setup, progress and close, and the protocol of protocol.ts on top. Its parts, one per
 * connection: the posting side ({@link RsTx}, tx.ts), the receive side ({@link RsRx}, rx.ts), the
 * credits both ways ({@link RsCredits}, credits.ts), the target SGL our data writes land by
 * ({@link RsTarget}, target.ts), the coalescing of data writes ({@link RsCoalescer}, coalesce.ts),
 * the bytes staged ahead of the peer's grants ({@link RsEarly}, early.ts), the riomap tables
 * ({@link RsIomap}, iomap.ts) and the option flags ({@link RsSockOpts}, sockopt.ts). Here stay the
 * calls, the dispatch of completions to those parts, and the posting of iomap entries and riowrite.
 *
 * The API is rsocket's, made non-blocking and promise-shaped for Node:
 *
 * - {@link RsConn.connect} / {@link RsListener.accept} (listener.ts) establish the connection;
 * - {@link RsConn.send} / {@link RsConn.recv} never block: they return a byte count, or
 *   {@link RS_EAGAIN} when nothing can move now; {@link RsConn.poll} waits for readiness (rpoll);
 * - {@link RsConn.shutdown} / {@link RsConn.close} are rshutdown / rclose;
 * - {@link RsConn.setsockopt} / {@link RsConn.getsockopt}, {@link RsConn.riomap},
 *   {@link RsConn.riowrite}.
 *
 * Progress: rsocket.c polls its CQ from inside every call; here a completion channel task runs
 * {@link RsConn.progress} whenever completions arrive, and the calls also poll when they would
 * otherwise have to wait. {@link RsConn.onNotify} is called after every progress step (the
 * Duplex face and the poll waiters hang off it).
 *
 * The 32-bit messages travel as rsocket.c sends them on the device's transport:
 * - InfiniBand / RoCE: as the immediate data of an RDMA WRITE WITH IMMEDIATE — alone (a zero-length
 *   write) or with the data / SGL / iomap update they announce — received into receive WQEs
 *   without buffers;
 * - iWARP, which has no immediate data: rsocket.c's RS_OPT_MSG_SEND mode, each message a 4-byte
 *   inline SEND in our (little-endian) byte order, after a plain RDMA WRITE of what it announces
 *   (two send WQEs and, for credit updates, two control slots per message).
 */
import {
  CmEventType,
  PortSpace,
  createEventChannel,
  createId,
  rdmaEventStr,
  type CmEvent,
  type CmId,
  type ConnParam,
  type EventChannel,
  type SockAddr,
} from '../cm/index.js';
import {
  TransportType,
  WcFlags,
  WcStatus,
  WrOpcode,
  getDeviceList,
  type CompChannel,
  type Cq,
  type Mr,
  type Qp,
  type Wc,
} from '../verbs/index.js';
import type { CqEventSink } from '../verbs/comp-channel.js';
import { RdmaError } from '../errors.js';
import { errnoOf, type ErrnoCode } from '../errno.js';
import {
  HOST_IS_BIG_ENDIAN,
  RS_CONN_FLAG_IOMAP,
  RS_CONN_FLAG_NET,
  RS_CONN_VERSION,
  RS_IOMAP_SIZE,
  RS_MSG_SIZE,
  RS_OLAP_START_SIZE,
  RS_QP_MAX_SIZE,
  RS_QP_MIN_SIZE,
  RS_SGE_SIZE,
  RS_SGL_SIZE,
  RS_SNDLOWAT,
  RsCtrl,
  RsOp,
  decodeConnData,
  decodeMsg,
  encodeConnData,
  encodeIomap,
  rsMsgData,
  rsMsgOp,
  rsMsgSet,
  rsMsgStr,
  scaleToValue,
  valueToScale,
  type RsConnData,
} from './protocol.js';
import { POLLERR, POLLHUP, POLLIN, POLLOUT, SHUT_RD, SHUT_RDWR, SHUT_WR, SOL_SOCKET, SO_ERROR, SO_KEEPALIVE, MSG_PEEK, POLLNVAL } from './options.js';
import { abortError, isAbortError } from '../util/abort.js';
import { checkAddrPort } from './args.js';
import { RS_TRACE, RsState, describeState } from './state.js';
import { StateCell } from '../util/state.js';
import { traceEvent } from '../trace.js';
import { microtask } from '../util/microtask.js';
import { PollWaiters } from '../util/poll-waiters.js';
import { RS_EAGAIN, rsErr } from './errors.js';
import {
  EXTRA_RECVS,
  KEEPALIVE_DEFAULT_S,
  MAX_XFER,
  RAMP,
  RIO_MAX_XFER,
  fullConfig,
  type RsConfig,
} from './tunables.js';
import { objectArray } from '../util/arrays.js';
import { RsTx, WR_MSG_SEND, sendWr } from './tx.js';
import { RsRx, WR_RECV, type RecvWr } from './rx.js';
import { RsIomap, findTargetIomap, type IomapMr, type TargetIomap } from './iomap.js';
import { RsSockOpts, applySockopt, type SockOptValue } from './sockopt.js';
import { RsTarget } from './target.js';
import { RsCredits } from './credits.js';
import { RsCoalescer } from './coalesce.js';
import { RsEarly } from './early.js';
import { recvMsg, recvVec, sendMsg, sendVec, type RsMsghdr } from './vec.js';

export { RS_EAGAIN } from './errors.js';

let connSeq = 0;

/** The states rconnect starts from. */
const SETUP_FROM = [RsState.init, RsState.bound] as const;

/**
 * A stream rsocket. Create with `new RsConn()` then {@link connect}, or get one from
 * {@link RsListener.accept}.
 */
export class RsConn implements CqEventSink {
  /** Trace tag `RS[n]`. */
  readonly tag = `RS[${++connSeq}]`;
  /** Sizes; change them with {@link setsockopt} before connecting. */
  readonly cfg: RsConfig;
  /** Called after every progress step (data arrived, credits, state change). */
  onNotify: (() => void) | null = null;

  /** The rsocket state ({@link RsState}), every change traced under `RDMA_TRACE=rs`. */
  private readonly st = new StateCell<number>('rs', () => this.tag, RsState.init, describeState);
  /** SO_ERROR (errno number), cleared when read. */
  private soError = 0;
  /** The error reported once queued data is read (ECONNRESET, EIO, EPROTO ...). */
  private _error: RdmaError | null = null;
  /** The option flags and TCP_KEEPIDLE. */
  private readonly opts = new RsSockOpts();
  private keepaliveTimer: NodeJS.Timeout | null = null;

  // rdma_cm / verbs objects
  /** @internal The cm_id (null before connect/bind). */
  _id: CmId | null = null;
  private ch: EventChannel | null = null;
  private compCh: CompChannel | null = null;
  private cq: Cq | null = null;
  /** @internal The QP (null before the endpoint is built and once torn down). */
  qp: Qp | null = null;
  private cqDead = false;
  private closed = false;
  private closing: Promise<void> | null = null;
  private disconnectRequested = false;

  /** The posting side: send buffer ring, scratch slots, the queue of work requests. */
  private readonly tx: RsTx = new RsTx(this);
  /** The receive side: buffers, message slots, received data, credit accounting. */
  private readonly rx = new RsRx();
  /** The riomap registrations and the peer's iomap table. */
  private readonly iomap = new RsIomap();
  /** The target SGL: where the peer lets our data writes land. */
  private readonly target = new RsTarget(this);
  /** The credits: what the peer lets us send, what we grant it. */
  private readonly credits = new RsCredits(this, this.rx, this.tx);
  /** The data write being coalesced. */
  private readonly writes = new RsCoalescer(this, this.tx, this.target, this.credits);
  /** Bytes rsend copied ahead of the peer's grants. */
  private readonly early = new RsEarly(this, this.tx, this.target, this.credits, this.writes);

  // progress bookkeeping
  private inPump = false;
  private pumpAgain = false;
  private notifying = false;
  private notifyAgain = false;
  private notifyQueued = false;
  /** rpoll() callers waiting for readiness. */
  private readonly polls = new PollWaiters(this as RsConn, RsConn.prototype.pollEvents);
  private condWaiters = objectArray<{ cond: () => boolean; resolve: () => void }>();
  private readonly wcs = objectArray<Wc>();

  constructor(cfg?: Partial<RsConfig>) {
    this.cfg = fullConfig(cfg);
    // Fields first changed late, mutable from the first socket on (see util/arrays.ts): the
    // teardown flags and timer, the close promise.
    this.closed = this.cqDead = this.disconnectRequested = true;
    this.closed = this.cqDead = this.disconnectRequested = false;
    this.keepaliveTimer = this.closing = undefined as never;
    this.keepaliveTimer = this.closing = null;
    // The busy-poll's flag and deadline, first set by the first wait; the deadline a double from
    // the start (it holds performance.now() values).
    this.spinning = true;
    this.spinning = false;
    this.spinUntil = 0.5;
    this.spinUntil = -Infinity;
  }

  // -- state ---------------------------------------------------------------------------------

  /** The rsocket state bitmask ({@link RsState}). */
  get state(): number {
    return this.st.state;
  }

  /** The sticky error (once the connection failed), else null. */
  get error(): RdmaError | null {
    return this._error;
  }

  /** Connected in both or one direction (the data path is up). */
  get connected(): boolean {
    return (this.st.state & RsState.connected) !== 0;
  }

  /** The local address (rgetsockname). */
  get localAddress(): SockAddr | null {
    return this._id?.localAddr ?? null;
  }

  /** The peer's address (rgetpeername). */
  get remoteAddress(): SockAddr | null {
    return this._id?.peerAddr ?? null;
  }

  /** Bytes received and not yet read. */
  get readableLength(): number {
    return this.rx.queued;
  }

  /** True once the read side has ended: no queued data and no more can come. */
  get readEnded(): boolean {
    return this.rx.queued === 0 && (this.st.state & RsState.readable) === 0 && (this.st.state & RsState.opening) === 0;
  }

  /** rs_can_send (RS_OPT_MSG_SEND form). */
  canSend(): boolean {
    return (
      this.credits.canPost() &&
      this.tx.sbufBytesAvail >= RS_SNDLOWAT &&
      this.target.room() !== 0 &&
      (this.st.state & RsState.connected) !== 0
    );
  }

  /** rs_conn_all_sends_done. */
  private allSendsDone(): boolean {
    return this.credits.allDone() || (this.st.state & RsState.connected) === 0;
  }

  // -- options -------------------------------------------------------------------------------

  /**
   * rsetsockopt(). SOL_SOCKET: SO_REUSEADDR, SO_SNDBUF/SO_RCVBUF (value doubled, before the
   * buffers exist; the send buffer is at least 4096), SO_KEEPALIVE, SO_LINGER and SO_OOBINLINE
   * (flags). IPPROTO_TCP: TCP_NODELAY (flag), TCP_KEEPIDLE (> 0), TCP_KEEPCNT/TCP_KEEPINTVL/
   * TCP_MAXSEG (accepted, ignored). IPPROTO_IPV6: IPV6_V6ONLY. SOL_RDMA (before connecting, else
   * EINVAL): RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE, RDMA_IOMAPSIZE. Anything else: ENOTSUP.
   */
  setsockopt(level: number, name: number, value: SockOptValue): void {
    applySockopt(this, level, name, value);
  }

  /** @internal Option plumbing shared with the listener. */
  _setFlag(level: number, name: number, on: boolean): void {
    this.opts.setFlag(level, name, on);
  }

  /** @internal Whether buffers were created (SO_SNDBUF/SO_RCVBUF no longer apply). */
  get _hasBuffers(): boolean {
    return this.tx.smr !== null;
  }

  /** @internal */
  _setKeepalive(on: boolean): void {
    if (on) {
      this._setFlag(SOL_SOCKET, SO_KEEPALIVE, true);
      if (!this.opts.keepaliveTime) this.opts.keepaliveTime = KEEPALIVE_DEFAULT_S;
      this.armKeepalive();
    } else {
      this._setFlag(SOL_SOCKET, SO_KEEPALIVE, false);
      if (this.keepaliveTimer) clearInterval(this.keepaliveTimer);
      this.keepaliveTimer = null;
    }
  }

  /** @internal */
  _setKeepIdle(secs: number): void {
    this.opts.keepaliveTime = secs;
    if (this.keepaliveTimer) this.armKeepalive();
  }

  /** @internal */
  _ensureId(): CmId {
    if (!this._id) {
      this.ch = createEventChannel();
      this._id = createId(this.ch, this, PortSpace.TCP);
      this.applyHold();
    }
    return this._id;
  }

  private holds = true;

  /**
   * @internal Whether the connection holds the Node event loop (`RSocket.ref()` / `unref()`):
   * its cm_id's transport state and its QP's ({@link Qp._setHoldsLoop}). Not holding it, they
   * still do while data is on its way — staged in the send buffer for a grant of the peer, or
   * posted and not completed — as `net`'s write requests hold it, so a process that ends after a
   * write does not lose its tail. The keepalive timer never holds it. Set before or after the id
   * and QP exist.
   */
  _setHoldsLoop(on: boolean): void {
    if (this.holds === on) return;
    this.holds = on;
    this.applyHold();
  }

  private applyHold(): void {
    // Both: a transport may hold the loop through either (the soft devices through the QP, the
    // native backend through the cm_id's share of the event channel).
    const on = this.holds || this.sending();
    this._id?._setHoldsLoop(on);
    this.qp?._setHoldsLoop(on);
  }

  /** Sends under way: bytes staged for the peer's grant, or send WQEs not completed yet. */
  private sending(): boolean {
    return (this.st.state & RsState.connected) !== 0 && (this.early.bytes > 0 || !this.credits.allDone());
  }

  /**
   * rgetsockopt(). Returns the value as a number (booleans as 0/1); SO_ERROR returns and
   * clears the pending error. ENOTSUP for anything rsocket does not answer.
   */
  getsockopt(level: number, name: number): number {
    if (level === SOL_SOCKET && name === SO_ERROR) {
      const e = this.soError;
      this.soError = 0;
      return e;
    }
    return this.opts.get(this.cfg, level, name);
  }

  // -- connection establishment -----------------------------------------------------------------

  /** rbind(): bind the cm_id to a local address (port 0 picks one at connect). */
  bind(addr: SockAddr): void {
    if (!this.st.is(RsState.init)) throw rsErr('EINVAL', 'rbind', describeState(this.st.state));
    checkAddrPort(addr, 'rbind');
    const id = this._ensureId();
    try {
      id.bindAddr(addr);
    } catch (e) {
      throw e instanceof RdmaError ? new RdmaError(e.code, { op: 'rbind', cause: e }) : e;
    }
    this.st.move(RsState.bound, 'bind');
  }

  /**
   * rconnect(): resolve the address and route (1 s each, as rsocket.c), create the QP and
   * buffers, connect with our rs_conn_data, check and store the peer's. Rejects with the errno
   * of the failure (ECONNREFUSED, ETIMEDOUT, ENOTSUP for a peer speaking another version ...);
   * the socket is then in the connect_error state and SO_ERROR holds the errno. Once `signal`
   * aborts, the next step rejects with an AbortError (ECANCELED in SO_ERROR); close the socket then.
   */
  async connect(dst: SockAddr, signal?: AbortSignal): Promise<void> {
    const op = 'rconnect';
    if (this.st.state & RsState.opening) throw rsErr('EALREADY', op);
    if (this.st.state & RsState.connected || this.st.state & RsState.disconnected) throw rsErr('EISCONN', op);
    if (!this.st.in(SETUP_FROM)) throw rsErr('EINVAL', op, describeState(this.st.state));
    checkAddrPort(dst, op);
    noDevices(op);
    const id = this._ensureId();
    const ch = this.ch as EventChannel;
    try {
      this.st.move(RsState.resolvingAddr, 'connect');
      await id.resolveAddr(null, dst, 1000);
      await this.expectEvent(ch, CmEventType.ADDR_RESOLVED, op, true, signal);
      this.st.move(RsState.resolvingRoute, 'address resolved');
      await id.resolveRoute(1000);
      await this.expectEvent(ch, CmEventType.ROUTE_RESOLVED, op, true, signal);
      this.st.move(RsState.connecting, 'route resolved');
      this.createEp(op);
      const param: ConnParam = {
        privateData: this.formatConnData(),
        flowControl: 1,
        retryCount: 7,
        rnrRetryCount: 7,
        responderResources: 0,
        // rsocket.c: "work-around: iWarp issues RDMA read during connection"
        initiatorDepth: this.tx.msgSendMode ? 1 : 0,
      };
      await id.connect(param);
      const ev = await this.expectEvent(ch, CmEventType.ESTABLISHED, op, false, signal);
      const cd = decodeConnData(ev.param.conn.privateData);
      ev.ack();
      if (typeof cd === 'string') throw rsErr(cd === 'version' ? 'EOPNOTSUPP' : 'EPROTO', op, `peer connection data: ${cd}`);
      this.saveConnData(cd, op);
      this.established('connected');
    } catch (e) {
      const re = signal?.aborted || isAbortError(e) ? abortError(op, signal ?? new AbortController().signal) : e instanceof RdmaError ? new RdmaError(e.code, { op, cause: e }) : rsErr('EIO', op, String(e));
      this.soError = re.errno;
      this.st.move(RsState.connectError, re.message);
      if (this._id && this.qp) void this._id.disconnect().catch(() => {});
      // An rpoll waiting on the connect (a non-blocking rconnect) learns of it: POLLERR.
      this.notify();
      throw re;
    }
  }

  /** Wait for the next CM event of the setup phase; map error events like ucma_complete(). */
  private async expectEvent(ch: EventChannel, want: CmEventType, op: string, ack = true, signal?: AbortSignal): Promise<CmEvent> {
    if (signal?.aborted) throw abortError(op, signal);
    const ev = await ch.getEvent(signal);
    if (ev.event === want && ev.status === 0) {
      if (ack) ev.ack();
      return ev;
    }
    const st = ev.status;
    const what = rdmaEventStr(ev.event);
    ev.ack();
    if (ev.event === CmEventType.REJECTED) throw rsErr('ECONNREFUSED', op, what);
    if (ev.event === CmEventType.UNREACHABLE) throw rsErr('ETIMEDOUT', op, what);
    throw st !== 0 ? RdmaError.fromErrno(Math.abs(st), { op, detail: what }) : rsErr('EIO', op, what);
  }

  /**
   * @internal The passive side (raccept): take over the id of a CONNECT_REQUEST, build the
   * endpoint, answer with our connection data and wait for ESTABLISHED (abandoned, the endpoint
   * torn down, when `signal` aborts first).
   */
  async _acceptRequest(ev: CmEvent, signal?: AbortSignal): Promise<void> {
    const op = 'raccept';
    const id = ev.id;
    this._id = id;
    id.context = this;
    this.applyHold();
    // The request's data is all we need from the event: acknowledge it (rdma_migrate_id waits
    // for the acknowledgement of events already handed out), then move the id to its own channel.
    const req = { ...ev.param.conn };
    ev.ack();
    this.ch = createEventChannel();
    try {
      await id.migrate(this.ch);
      const cd = decodeConnData(req.privateData);
      if (typeof cd === 'string') throw rsErr(cd === 'version' ? 'EOPNOTSUPP' : 'EPROTO', op, `peer connection data: ${cd}`);
      this.st.move(RsState.accepting, 'connect request');
      this.createEp(op);
      this.saveConnData(cd, op);
      const param: ConnParam = {
        privateData: this.formatConnData(),
        responderResources: req.responderResources,
        initiatorDepth: req.initiatorDepth,
        flowControl: req.flowControl,
        retryCount: req.retryCount,
        rnrRetryCount: req.rnrRetryCount,
      };
      await id.accept(param);
      await this.expectEvent(this.ch, CmEventType.ESTABLISHED, op, true, signal);
      this.established('accepted');
    } catch (e) {
      const re = e instanceof RdmaError ? new RdmaError(e.code, { op, cause: e }) : rsErr('EIO', op, String(e));
      if (this.st.is(RsState.init)) {
        // Refused before anything was built: tell the requester (rdma_reject).
        try {
          id.reject();
        } catch {
          /* the requester is gone */
        }
      }
      this.st.move(RsState.connectError, re.message);
      await this.teardown();
      throw re;
    }
  }

  private established(why: string): void {
    this.st.move(RsState.connectRdwr, why);
    void this.cmLoop();
    this.startCqEvents();
    if (this.opts.so & (1 << SO_KEEPALIVE)) this.armKeepalive();
    this.progress();
  }

  /** rs_create_ep: QP sizes, CQ, QP, buffers, all receives posted. */
  private createEp(op: string): void {
    const id = this._id as CmId;
    const ctx = id.verbs;
    if (!ctx) throw rsErr('ENODEV', op, 'no device');
    // rs_create_ep: iWARP has no immediate data, so messages are SENDs there.
    this.tx.msgSendMode = ctx.device.transportType === TransportType.IWARP;
    this.tx.wqesPerMsg = this.tx.msgSendMode ? 2 : 1;
    const dev = ctx.queryDevice();
    const cfg = this.cfg;
    const maxSize = Math.min(dev.maxQpWr, RS_QP_MAX_SIZE);
    cfg.sqSize = Math.max(RS_QP_MIN_SIZE, Math.min(cfg.sqSize, maxSize));
    cfg.rqSize = Math.max(RS_QP_MIN_SIZE, Math.min(cfg.rqSize, maxSize));
    // RS_OPT_MSG_SEND needs inline sends of the 4-byte messages (rdma-core fc82b150b). A request
    // above what the device can do goes to ibv_create_qp as is, which refuses it (EINVAL), as
    // rsocket.c's rs_create_ep does on siw.
    if (this.tx.msgSendMode) cfg.sqInline = Math.max(cfg.sqInline, RS_MSG_SIZE);
    const nrecv = cfg.rqSize + EXTRA_RECVS;
    const compCh = ctx.createCompChannel();
    const cq = ctx.createCq(cfg.sqSize + nrecv, compCh);
    this.compCh = compCh;
    this.cq = cq;
    this.qp = id.createQp(null, {
      sendCq: cq,
      recvCq: cq,
      sqSigAll: true,
      cap: { maxSendWr: cfg.sqSize, maxRecvWr: nrecv, maxSendSge: 2, maxRecvSge: 1, maxInlineData: cfg.sqInline },
      qpContext: this,
    });
    cfg.sqInline = this.qp.cap.maxInlineData;
    this.applyHold();
    cq.reqNotify();
    this.initBufs(nrecv);
    this.qp.postRecv(this.rx.recvWrs);
  }

  /** rs_init_bufs. */
  private initBufs(nrecv: number): void {
    const pd = (this._id as CmId).pd;
    if (!pd) throw rsErr('EINVAL', 'rsocket', 'no PD');
    const cfg = this.cfg;
    this.tx.init(pd, cfg);
    this.target.init(pd, cfg.targetIomapSize);
    this.rx.init(pd, cfg, nrecv, this.tx.msgSendMode);
    this.credits.init(cfg.sqSize);
  }

  /** rs_format_conn_data. */
  private formatConnData(): Uint8Array {
    const cfg = this.cfg;
    const tgt = this.target.mr as Mr;
    const r = this.rx.rmr as Mr;
    return encodeConnData({
      version: RS_CONN_VERSION,
      flags: RS_CONN_FLAG_IOMAP | (HOST_IS_BIG_ENDIAN ? RS_CONN_FLAG_NET : 0),
      credits: cfg.rqSize,
      targetIomapSize: valueToScale(cfg.targetIomapSize, 8) & 0xff,
      targetSgl: { addr: tgt.addr, key: tgt.rkey, length: RS_SGL_SIZE },
      dataBuf: { addr: r.addr, key: r.rkey, length: cfg.rbufSize >> 1 },
    });
  }

  /** rs_save_conn_data (with sanity checks a hostile peer could otherwise abuse). */
  private saveConnData(c: RsConnData, op: string): void {
    if (c.targetSgl.length < 1 || c.targetSgl.length > 0xffff) throw rsErr('EPROTO', op, `peer target SGL of ${c.targetSgl.length} entries`);
    if (c.dataBuf.length === 0) throw rsErr('EPROTO', op, 'peer advertises an empty receive buffer');
    this.rx.peerBigEndian = (c.flags & RS_CONN_FLAG_NET) !== 0;
    if (c.flags & RS_CONN_FLAG_IOMAP) {
      this.iomap.remote = {
        addr: c.targetSgl.addr + RS_SGE_SIZE * c.targetSgl.length,
        length: scaleToValue(c.targetIomapSize, 8),
        key: c.targetSgl.key,
      };
    }
    this.target.set(0, c.dataBuf.addr, c.dataBuf.key, c.dataBuf.length);
    this.credits.peer(c.targetSgl, c.credits);
  }

  // -- progress ------------------------------------------------------------------------------

  /**
   * Completion-channel handling: every CQ event runs {@link progress}. The channel is ours alone,
   * so instead of a promise per event (ibv_get_cq_event in a loop) its hook schedules one
   * microtask that drains the queued events, re-arms the CQ and makes progress — the same order
   * as the loop (ack, re-arm, then poll), a few allocations and microtask hops less per message.
   */
  private startCqEvents(): void {
    const ch = this.compCh;
    if (!ch || !this.cq) return;
    ch._sink = this;
    if (ch.pending > 0) this.cqEventQueued();
  }
  private cqTaskQueued = false;
  /** @internal The channel's {@link CqEventSink}: an event was queued. */
  cqEventQueued(): void {
    if (this.cqTaskQueued) return;
    this.cqTaskQueued = true;
    microtask(this.cqTask);
  }
  private readonly cqTask = (): void => {
    this.cqTaskQueued = false;
    const ch = this.compCh;
    const cq = this.cq;
    if (!ch || !cq || this.cqDead || ch.destroyed) return;
    // Nothing left when a pump since the event took it (see takeCqEvents): no progress to make.
    if (this.takeCqEvents(ch, cq) === 0) return;
    this.progress();
  };
  /** Read, acknowledge the queued channel events and re-arm the CQ; the number of events. */
  private takeCqEvents(ch: CompChannel, cq: Cq): number {
    let n = 0;
    while (ch.tryGetCqEvent() !== undefined) n++;
    if (n === 0) return 0;
    cq.ackEvents(n);
    cq.reqNotify();
    return n;
  }

  /** CM event task after establishment: DISCONNECTED and device removal. */
  private async cmLoop(): Promise<void> {
    const ch = this.ch;
    if (!ch) return;
    for (;;) {
      let ev: CmEvent;
      try {
        ev = await ch.getEvent();
      } catch {
        return;
      }
      const type = ev.event;
      ev.ack();
      if (this.closed) continue;
      if (type === CmEventType.DISCONNECTED || type === CmEventType.DEVICE_REMOVAL) this.peerGone(type);
    }
  }

  /** The connection under us is gone (TCP closed): drain what arrived, then judge. */
  private peerGone(type: CmEventType): void {
    this.pump();
    if (this.st.state & RsState.connected && !this.disconnectRequested) {
      // A peer closes after an rsocket DISCONNECT; without one, data may have been lost.
      this.fail('ECONNRESET', type === CmEventType.DEVICE_REMOVAL ? 'device removed' : 'the peer closed the connection without an rsocket DISCONNECT');
    } else if (this.st.state & RsState.connected) {
      this.st.move(RsState.disconnected, 'connection closed');
    }
    this.notify();
  }

  /**
   * Process completions and credits, then tell the owner ({@link onNotify}) and the poll
   * waiters. Safe to call at any time.
   */
  progress(): void {
    // notify() follows at once: completions found by the pump need no queued notification.
    this.inProgress = true;
    try {
      this.pump();
    } finally {
      this.inProgress = false;
    }
    this.notify();
  }
  private inProgress = false;

  /** rs_process_cq without waiting: credits, poll, credits. */
  private pump(): void {
    if (this.inPump) {
      this.pumpAgain = true;
      return;
    }
    this.inPump = true;
    // Events that fired since the last pump are taken here, as the event task would (read, ack,
    // re-arm, then poll): the completions are polled now, so that task has nothing left to do.
    const ch = this.compCh;
    if (this.cqTaskQueued && ch !== null && ch.pending > 0 && this.cq !== null && !this.cqDead && !ch.destroyed) this.takeCqEvents(ch, this.cq);
    this.writes.flush();
    try {
      do {
        this.pumpAgain = false;
        this.credits.update();
        this.pollCq();
        if (this.early.bytes > 0) this.early.drain();
        this.credits.update();
      } while (this.pumpAgain);
    } finally {
      this.inPump = false;
    }
    if (!this.holds) this.applyHold();
  }

  private notifySoon(): void {
    if (this.notifyQueued) return;
    this.notifyQueued = true;
    microtask(this.notifyTask);
  }
  private readonly notifyTask = (): void => {
    this.notifyQueued = false;
    this.notify();
  };

  private notify(): void {
    if (this.notifying) {
      this.notifyAgain = true;
      return;
    }
    this.notifying = true;
    try {
      do {
        this.notifyAgain = false;
        this.onNotify?.();
        if (this.polls.waiting) this.polls.wake(this.closed);
        if (this.condWaiters.length > 0) {
          for (const w of this.condWaiters.splice(0)) {
            if (w.cond() || this.closed) w.resolve();
            else this.condWaiters.push(w);
          }
        }
      } while (this.notifyAgain);
    } finally {
      this.notifying = false;
    }
  }

  private pollCq(): void {
    const cq = this.cq;
    if (!cq || this.cqDead) return;
    const wcs = this.wcs;
    let any = false;
    for (;;) {
      const n = cq.pollInto(wcs, 32);
      for (let i = 0; i < n; i++) {
        const wc = wcs[i] as Wc;
        const id = Number(wc.wrId);
        if (id >= WR_RECV) this.recvDone(wc, id - WR_RECV);
        else this.sendDone(wc, id);
      }
      if (n > 0) any = true;
      if (n < 32) break;
    }
    this.tx.flushPosts();
    // Completions polled from inside a call (rrecv, rpoll, ...) are told to whoever listens, a
    // microtask later. With no one listening there is nothing to tell: a poll or wait that
    // starts later looks at the state itself before it waits.
    if (any && !this.notifying && !this.inProgress && (this.onNotify !== null || this.polls.waiting || this.condWaiters.length > 0)) this.notifySoon();
  }

  /** A send completion (rs_poll_cq's send branch). */
  private sendDone(wc: Wc, id: number): void {
    const msg = id % WR_MSG_SEND;
    const msgSend = id >= WR_MSG_SEND;
    switch (rsMsgOp(msg)) {
      case RsOp.SGL:
        this.credits.ctrlDone();
        break;
      case RsOp.CTRL:
        this.credits.ctrlDone();
        if (rsMsgData(msg) === RsCtrl.DISCONNECT && !msgSend && this.st.state & RsState.connected) {
          this.st.move(RsState.disconnected, 'DISCONNECT sent');
        }
        break;
      case RsOp.IOMAP_SGL:
        this.credits.wqeDone();
        if (!msgSend) this.tx.sbufBytesAvail += RS_IOMAP_SIZE;
        break;
      default:
        this.credits.wqeDone();
        this.tx.sbufBytesAvail += rsMsgData(msg);
        break;
    }
    if (wc.status !== WcStatus.SUCCESS && this.st.state & RsState.connected) {
      this.fail('EIO', `send completion status ${wc.status}`);
    }
  }

  /** A receive completion: one 4-byte message (rs_poll_cq's receive branch). */
  private recvDone(wc: Wc, slot: number): void {
    if (wc.status !== WcStatus.SUCCESS) return;
    if (this.st.state & RsState.error) return;
    let msg: number;
    if (!this.tx.msgSendMode) {
      if (!(wc.wcFlags & WcFlags.WITH_IMM)) {
        this.fail('EPROTO', 'a receive completion without immediate data');
        return;
      }
      msg = wc.immData >>> 0;
    } else {
      if (wc.byteLen !== RS_MSG_SIZE) {
        this.fail('EPROTO', `a ${wc.byteLen}-byte message (rsocket messages are ${RS_MSG_SIZE} bytes)`);
        return;
      }
      msg = decodeMsg(this.rx.msgBuf, slot * RS_MSG_SIZE, this.rx.peerBigEndian);
    }
    if (RS_TRACE) traceEvent('rs', this.tag, 'rs-recv', { message: rsMsgStr(msg) });
    const data = rsMsgData(msg);
    switch (rsMsgOp(msg)) {
      case RsOp.SGL:
        this.credits.granted(data);
        break;
      case RsOp.IOMAP_SGL:
        if (!this.takeCredit('IOMAP_SGL')) return;
        if (data >= this.cfg.targetIomapSize) {
          this.fail('EPROTO', `IOMAP_SGL for entry ${data} of a ${this.cfg.targetIomapSize}-entry table`);
          return;
        }
        break;
      case RsOp.CTRL:
        if (data === RsCtrl.DISCONNECT) {
          this.st.move(RsState.disconnected, 'DISCONNECT received');
        } else if (data === RsCtrl.SHUTDOWN) {
          if (this.st.state & RsState.writable) this.st.move(this.st.state & ~RsState.readable, 'SHUTDOWN received');
          else this.st.move(RsState.disconnected, 'SHUTDOWN received');
        } else if (data !== RsCtrl.KEEPALIVE) {
          this.fail('EPROTO', `unknown control message ${data}`);
          return;
        }
        break;
      case RsOp.DATA: {
        if (!this.takeCredit('DATA')) return;
        if (!this.rx.takeData(data)) {
          this.fail('EPROTO', `${data} bytes of data with ${this.rx.window} bytes of receive buffer advertised`);
          return;
        }
        break;
      }
      default:
        this.fail('EPROTO', `unknown message type ${rsMsgOp(msg)} (0x${msg.toString(16).padStart(8, '0')})`);
        return;
    }
    if (this.st.state & RsState.connected && this.qp) this.qp.postRecv(this.rx.recvWrs[slot] as RecvWr);
  }

  /** A credit-consuming message arrived: it must be within what we granted, else the socket fails. */
  private takeCredit(what: string): boolean {
    if (this.rx.takeCredit()) return true;
    this.fail('EPROTO', `${what} message beyond the ${this.cfg.rqSize} credits granted`);
    return false;
  }

  /** @internal Fatal error: remember it (SO_ERROR), stop the data path, close the connection. */
  fail(code: ErrnoCode, detail: string): void {
    if (this.st.state & RsState.error || this.closed) return;
    this._error = rsErr(code, 'rsocket', detail);
    this.soError = errnoOf(code);
    this.st.move(RsState.error, detail);
    this.disconnectRequested = true;
    const id = this._id;
    if (id) void id.disconnect().catch(() => {});
    this.notifySoon();
  }

  // -- posting -------------------------------------------------------------------------------

  /** @internal rs_post_msg, behind the pending data write. */
  _queueMsg(msg: number): void {
    this.writes.flush();
    this.tx.queueMsg(msg);
  }

  /**
   * Whether early-staged bytes are still waiting for target space after a pump: iomap writes and
   * riowrite must not overtake them.
   */
  private earlyStillQueued(): boolean {
    if (this.early.bytes === 0) return false;
    this.pump();
    return this.early.bytes > 0;
  }

  // -- data ----------------------------------------------------------------------------------

  private checkSend(op: string): void {
    if (this._error) throw this._error;
    const s = this.st.state;
    if (s & RsState.opening) throw rsErr('EAGAIN', op);
    if (!(s & RsState.connected)) throw rsErr(s & RsState.disconnected ? 'ECONNRESET' : 'ENOTCONN', op);
    if (!(s & RsState.writable)) throw rsErr('ECONNRESET', op, 'not writable');
  }

  /**
   * rsend(): copy up to `len` bytes of `src[off..]` into the send buffer and post them, in chunks
   * of up to 512 KiB (with `ramp`, as rsocket.c: 2 KiB doubling up to the maximum), each limited by
   * the free send buffer and the current target SGE. Returns the bytes taken (> 0), or {@link RS_EAGAIN} when no credits, send
   * queue or buffer space are available now. Throws ECONNRESET once the peer disconnected or
   * the write side is shut down, or the connection's error.
   */
  send(src: Uint8Array, off = 0, len = src.length - off, ramp = RAMP): number {
    this.checkSend('rsend');
    this.early.rioBehind = false;
    if (len === 0) return 0;
    if (this.iomap.pending) {
      const r = this.sendIomaps();
      if (r !== 0) return r;
    }
    let olen = ramp ? RS_OLAP_START_SIZE : MAX_XFER;
    let done = 0;
    if (this.early.bytes > 0) this.early.drain();
    while (done < len) {
      if (this.early.bytes > 0 || !this.canSend()) {
        if (this.early.bytes === 0) {
          this.tx.flushPosts();
          this.pump();
        }
        if (this.early.bytes > 0 || !this.canSend()) {
          // No target space yet: copy ahead into the send buffer (posted when the grant comes).
          if (!this.early.canStage() || !(this.st.state & RsState.writable)) break;
          const n = Math.min(len - done, this.tx.sbufBytesAvail);
          this.early.stage(src, off + done, n);
          done += n;
          continue;
        }
      }
      if (!(this.st.state & RsState.writable)) break;
      const left = len - done;
      let xfer: number;
      if (olen < left) {
        xfer = olen;
        if (olen < MAX_XFER) olen <<= 1;
      } else xfer = left;
      if (xfer > this.tx.sbufBytesAvail) xfer = this.tx.sbufBytesAvail;
      const tl = this.target.room();
      if (xfer > tl) xfer = tl;
      this.writes.write(src, off + done, xfer);
      done += xfer;
    }
    this.tx.flushPosts();
    if (!this.holds) this.applyHold();
    if (done > 0) return done;
    if (this._error) throw this._error;
    if (!(this.st.state & RsState.writable)) throw rsErr('ECONNRESET', 'rsend');
    return RS_EAGAIN;
  }

  /**
   * rrecv(): copy up to `len` received bytes into `dst[off..]`. Returns the count (> 0), 0 at
   * end of stream (the peer shut down its write side or disconnected, and everything queued was
   * read), or {@link RS_EAGAIN}. With MSG_PEEK the data stays queued. After a connection error
   * the queued data is still returned first, then the error is thrown.
   */
  recv(dst: Uint8Array, off = 0, len = dst.length - off, flags = 0): number {
    const s = this.st.state;
    if (s & RsState.opening) return RS_EAGAIN;
    if (s === RsState.init || s & RsState.listening || s & RsState.connectError) throw rsErr('ENOTCONN', 'rrecv');
    if (this.rx.rmsgCount === 0) {
      this.pump();
      if (this.rx.rmsgCount === 0) {
        if (this._error) throw this._error;
        if (!(this.st.state & RsState.readable)) return 0;
        return RS_EAGAIN;
      }
    }
    if (len === 0) return 0;
    if (flags & MSG_PEEK) return this.rx.peek(dst, off, len);
    const n = this.rx.consume(dst, off, len);
    this.credits.update();
    return n;
  }

  /** rwritev(): {@link send} of the vectors' bytes in order, gathered (vec.ts). */
  writev(iov: readonly Uint8Array[]): number {
    return sendVec(this, iov);
  }

  /** rreadv(): {@link recv} scattered over the vectors in order (vec.ts). */
  readv(iov: readonly Uint8Array[]): number {
    return recvVec(this, iov, 0);
  }

  /** rsendmsg() of a stream socket: {@link writev} of `msg.iov`; EOPNOTSUPP with control data. */
  sendmsg(msg: RsMsghdr, flags = 0): number {
    return sendMsg(this, msg, flags);
  }

  /** rrecvmsg() of a stream socket: {@link readv} of `msg.iov` with `flags` (MSG_PEEK). */
  recvmsg(msg: RsMsghdr, flags = 0): number {
    return recvMsg(this, msg, flags);
  }

  /** Take up to `max` queued bytes as a new Buffer (null if none): the Duplex read path. */
  readChunk(max: number): Buffer | null {
    if (this.rx.rmsgCount === 0) this.pump();
    const n = Math.min(max, this.rx.queued);
    if (n === 0) return null;
    const out = Buffer.allocUnsafe(n);
    this.rx.consume(out, 0, n);
    this.credits.update();
    return out;
  }

  // -- poll ----------------------------------------------------------------------------------

  /** rs_poll_rs for a stream socket: the revents of `events` now. */
  pollEvents(events: number): number {
    const s = this.st.state;
    if (s & RsState.opening) return 0;
    if (s === RsState.connectError) return (events & (POLLIN | POLLOUT)) | POLLERR;
    if (!(s & (RsState.connected | RsState.disconnected | RsState.error))) return 0;
    let r = 0;
    if (events & POLLIN && (this.rx.rmsgCount > 0 || !(s & RsState.readable))) r |= POLLIN;
    // Writable: bytes can be copied ahead (with bytes staged early, only that; not for a riowrite
    // that found early bytes in its way), or posted. Worked out whether or not POLLOUT was asked,
    // and by one expression whichever case holds: the latency rows never ask for it, and code
    // compiled there then has feedback for every step when a bandwidth row's first EAGAIN asks
    // and the first early bytes appear.
    const ahead = this.early.canStage();
    const notRio = !this.early.rioBehind;
    const writable = (ahead && notRio) || (this.early.bytes === 0 && this.canSend());
    r |= writable ? events & POLLOUT : 0;
    if (!(s & RsState.connected)) {
      // rsocket.c raises POLLHUP as soon as it has processed the peer's DISCONNECT, even with data
      // that came before it still unread; a caller that treats POLLHUP as the end then loses that
      // data (rstream -T a: its last receive finds the server's data and DISCONNECT processed
      // together, and gives up). Here, as TCP ends a stream after its data, a poll for POLLIN
      // reports the hangup once the data received before it has been read.
      if (s & RsState.disconnected) {
        if (!(events & POLLIN && this.rx.rmsgCount > 0)) r |= POLLHUP;
      } else r |= POLLERR;
    }
    return r;
  }

  /**
   * The revents of `events` now, after taking what completed (rsocket.c's rs_poll_rs with
   * nonblock set, as rpoll's first pass calls it); POLLNVAL once the socket is closed, as poll(2)
   * reports a descriptor that is no longer open.
   */
  pollNow(events: number): number {
    if (this.closed) return POLLNVAL;
    this.pump();
    return this.pollEvents(events);
  }

  /**
   * rpoll() on this socket: resolves with the revents once any of `events` (POLLIN, POLLOUT) is
   * ready, or POLLHUP/POLLERR; with 0 after `timeoutMs` (negative: no timeout; 0: check once) or
   * once `signal` aborts. Several sockets at once: {@link rpoll} (rpoll.ts).
   */
  poll(events: number, timeoutMs = -1, signal?: AbortSignal): Promise<number> {
    this.pump();
    const now = this.pollEvents(events);
    if (now !== 0 || timeoutMs === 0) return Promise.resolve(now);
    const p = this.polls.wait(events, timeoutMs, signal);
    if (this.cfg.pollingTime > 0) this.busyPoll();
    return p;
  }

  /**
   * rsocket.c spins for `polling_time` µs, polling its CQ, before it blocks in poll(): a reply
   * that comes within that time is taken without the thread going to sleep and being woken. The
   * equivalent here is to keep the event loop from sleeping: a chain of immediates for
   * {@link RsConfig.pollingTime} µs from the start of the wait, while anyone waits, makes each
   * turn of the loop look at the sockets without blocking. Completions still arrive as they
   * always do (socket read, CQ event, progress); only the sleep is put off.
   */
  private busyPoll(): void {
    this.spinUntil = performance.now() + this.cfg.pollingTime / 1000;
    if (this.spinning) return;
    this.spinning = true;
    setImmediate(this.spinTask);
  }
  private spinUntil = -Infinity;
  private spinning = false;
  private readonly spinTask = (): void => {
    if (this.polls.waiting && performance.now() < this.spinUntil) setImmediate(this.spinTask);
    else this.spinning = false;
  };
  /** @internal Whether a wait is busy-polling now (see {@link busyPoll}). */
  get _busyPolling(): boolean {
    return this.spinning;
  }

  // -- shutdown / close ----------------------------------------------------------------------

  /**
   * rshutdown(). SHUT_WR sends SHUTDOWN (or DISCONNECT when the read side is already shut),
   * SHUT_RD only shuts reading (DISCONNECT when writing is shut too), SHUT_RDWR sends
   * DISCONNECT. Everything sent before is delivered first; resolves once our sends are done.
   */
  async shutdown(how: number): Promise<void> {
    if (how !== SHUT_RD && how !== SHUT_WR && how !== SHUT_RDWR) throw rsErr('EINVAL', 'rshutdown', `how ${how}`);
    if (this.st.state & RsState.connected) {
      let ctrl: RsCtrl;
      if (how === SHUT_RDWR) {
        ctrl = RsCtrl.DISCONNECT;
        this.st.move(this.st.state & ~(RsState.readable | RsState.writable), 'shutdown(RDWR)');
      } else if (how === SHUT_WR) {
        this.st.move(this.st.state & ~RsState.writable, 'shutdown(WR)');
        ctrl = this.st.state & RsState.readable ? RsCtrl.SHUTDOWN : RsCtrl.DISCONNECT;
      } else {
        this.st.move(this.st.state & ~RsState.readable, 'shutdown(RD)');
        if (this.st.state & RsState.writable) {
          this.notify();
          return;
        }
        ctrl = RsCtrl.DISCONNECT;
      }
      // Bytes staged ahead of the peer's grants go before the SHUTDOWN/DISCONNECT.
      if (this.early.bytes > 0) await this.until(() => this.early.bytes === 0 || !(this.st.state & RsState.connected));
      const credits = this.credits;
      if (!credits.ctrlAvail()) await this.until(() => credits.ctrlAvail() || !(this.st.state & RsState.connected));
      if (this.st.state & RsState.connected && credits.ctrlAvail()) {
        credits.takeCtrl();
        if (RS_TRACE) traceEvent('rs', this.tag, 'rs-send', { message: `CTRL ${RsCtrl[ctrl]}` });
        this._queueMsg(rsMsgSet(RsOp.CTRL, ctrl));
        this.tx.flushPosts();
        this.pump();
      }
    }
    if (this.st.state & RsState.connected) await this.until(() => this.allSendsDone());
    this.notify();
  }

  /** Wait (through progress steps: completions arrive as CQ events) until `cond` holds or the socket is closed. */
  private until(cond: () => boolean): Promise<void> {
    this.pump();
    if (cond() || this.closed) return Promise.resolve();
    return new Promise<void>((resolve) => this.condWaiters.push({ cond, resolve }));
  }

  /**
   * rclose(): a graceful rshutdown(SHUT_RDWR) if still connected, then the connection is closed
   * (queued sends go out, then FIN) and every resource is released. Idempotent.
   */
  close(): Promise<void> {
    if (!this.closing) this.closing = this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    if (this.st.state & RsState.connected && !(this.st.state & RsState.error)) {
      try {
        await this.shutdown(SHUT_RDWR);
      } catch {
        /* best effort */
      }
    }
    await this.teardown();
  }

  /** Abortive close: no DISCONNECT, the connection is closed at once. */
  destroy(): Promise<void> {
    if (!this.closing) this.closing = this.teardown();
    return this.closing;
  }

  private async teardown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.disconnectRequested = true;
    if (this.keepaliveTimer) clearInterval(this.keepaliveTimer);
    this.keepaliveTimer = null;
    const id = this._id;
    if (id && !id.destroyed) {
      try {
        if (this.qp) await id.disconnect();
      } catch {
        /* not connected */
      }
    }
    this.cqDead = true;
    if (this.compCh) this.compCh._sink = null;
    if (id && !id.destroyed) {
      try {
        id.destroyQp();
      } catch {
        /* gone */
      }
    }
    this.qp = null;
    if (this.cq) {
      try {
        const un = this.cq.unackedEvents;
        if (un > 0) this.cq.ackEvents(un);
        this.cq.destroy();
      } catch {
        /* leave it to the GC */
      }
    }
    try {
      this.compCh?.destroy();
    } catch {
      /* still has a CQ */
    }
    for (const mr of [this.tx.smr, this.tx.scratchMr, this.rx.rmr, this.rx.msgMr, this.target.mr]) {
      if (mr?.registered) mr.dereg();
    }
    this.iomap.deregAll();
    if (id && !id.destroyed) {
      // Events nobody will read (no CM task runs before establishment) must not block destroy.
      const ch = this.ch;
      while (ch && !ch.isDestroyed && ch.pending > 0) ch.tryGetEvent().ack();
      try {
        await id.destroy();
      } catch {
        /* already */
      }
    }
    try {
      this.ch?.destroy();
    } catch {
      /* ids left */
    }
    if (this.st.state & RsState.connected) this.st.move(RsState.disconnected, 'closed');
    this.notify();
    this.polls.release(POLLHUP);
    for (const w of this.condWaiters.splice(0)) w.resolve();
  }

  /** Whether {@link close} or {@link destroy} ran. */
  get isClosed(): boolean {
    return this.closed;
  }

  // -- keepalive -----------------------------------------------------------------------------

  private armKeepalive(): void {
    if (this.keepaliveTimer) clearInterval(this.keepaliveTimer);
    this.keepaliveTimer = null;
    if (!(this.opts.so & (1 << SO_KEEPALIVE)) || !this.qp) return;
    const t = setInterval(() => this.keepalive(), Math.max(1, this.opts.keepaliveTime) * 1000);
    t.unref();
    this.keepaliveTimer = t;
  }

  /** A zero-length RDMA WRITE (rsocket.c's keepalive): fails, and fails the socket, if the peer is gone. */
  private keepalive(): void {
    if (!this.credits.ctrlAvail() || !(this.st.state & RsState.connected) || !this.qp) return;
    this.credits.takeCtrl();
    this.tx.addPost(sendWr(rsMsgSet(RsOp.CTRL, RsCtrl.KEEPALIVE), WrOpcode.RDMA_WRITE, [], 0, 0, 0, 0));
    this.tx.flushPosts();
    this.progress();
  }

  // -- iomap ---------------------------------------------------------------------------------

  /**
   * riomap(): register `buf` for the peer to riowrite into (PROT_WRITE) at `offset` (-1: use the
   * buffer's address). The entry is sent to the peer before the next send/riowrite. Returns the
   * offset. EINVAL before connecting or for other protections, ENOMEM when the peer's table
   * (its RDMA_IOMAPSIZE) is full.
   */
  riomap(buf: Uint8Array, prot: number, offset: number): number {
    return this.iomap.map(this._id?.pd ?? null, buf, prot, offset);
  }

  /** riounmap(): release the mapping of exactly `buf` (same memory and length). EINVAL if none. */
  riounmap(buf: Uint8Array): void {
    this.iomap.unmap(buf);
  }

  /** rs_send_iomaps: write queued iomap entries into the peer's table. 0, or RS_EAGAIN. */
  private sendIomaps(): number {
    if (this.earlyStillQueued()) return RS_EAGAIN;
    this.writes.flush();
    const iomap = this.iomap;
    while (iomap.queue.length > 0) {
      if (!this.canSend()) {
        this.tx.flushPosts();
        this.pump();
        if (!this.canSend()) {
          if (this._error) throw this._error;
          if (!(this.st.state & RsState.writable)) throw rsErr('ECONNRESET', 'rsend');
          return RS_EAGAIN;
        }
      }
      const m = iomap.queue[0] as IomapMr;
      const mr = m.mr as Mr;
      const entry = encodeIomap({ offset: m.offset, sge: { addr: mr.addr, key: mr.rkey, length: mr.length } }, !this.rx.peerBigEndian);
      this.credits.take();
      this.tx.sbufBytesAvail -= RS_IOMAP_SIZE;
      const p = this.tx.payload(entry, 0, RS_IOMAP_SIZE);
      if (RS_TRACE) traceEvent('rs', this.tag, 'rs-send', { message: `IOMAP_SGL ${m.index} offset ${m.offset}` });
      this.tx.queueWriteMsg(p.sgl, rsMsgSet(RsOp.IOMAP_SGL, m.index), p.flags, iomap.remote.addr + m.index * RS_IOMAP_SIZE, iomap.remote.key);
      iomap.queue.shift();
      iomap.list.push(m);
    }
    this.tx.flushPosts();
    iomap.pending = false;
    return 0;
  }

  /**
   * riowrite(): RDMA-write `count` bytes of `src[off..]` into the peer's mapping at `offset`
   * (no message, no credit: the peer is not told). Returns bytes written (> 0), 0 when no
   * peer mapping covers `offset`, or {@link RS_EAGAIN}.
   */
  riowrite(src: Uint8Array, off: number, count: number, offset: number): number {
    this.checkSend('riowrite');
    // Bytes rsend copied ahead go first; until they are posted, POLLOUT is not reported for this.
    this.early.rioBehind = this.earlyStillQueued();
    if (this.early.rioBehind) return RS_EAGAIN;
    this.writes.flush();
    if (this.iomap.pending) {
      const r = this.sendIomaps();
      if (r !== 0) return r;
    }
    let iom: TargetIomap | null = null;
    let olen = RAMP ? RS_OLAP_START_SIZE : RIO_MAX_XFER;
    let done = 0;
    while (done < count) {
      const at = offset + done;
      // A mapping covers [offset, offset + length): at its end the next one is looked up. Going on
      // with the used-up one would post zero-length writes without end.
      if (!iom || at >= iom.offset + iom.length) {
        iom = findTargetIomap(this.target.view, this.cfg.targetIomapSize, at);
        if (!iom) break;
      }
      if (!this.canSend()) {
        this.tx.flushPosts();
        this.pump();
        if (!this.canSend()) break;
      }
      const left = count - done;
      let xfer: number;
      if (olen < left) {
        xfer = olen;
        if (olen < RIO_MAX_XFER) olen <<= 1;
      } else xfer = left;
      if (xfer > this.tx.sbufBytesAvail) xfer = this.tx.sbufBytesAvail;
      if (xfer > iom.offset + iom.length - at) xfer = iom.offset + iom.length - at;
      // rs_write_direct
      this.credits.takeWqe();
      this.tx.sbufBytesAvail -= xfer;
      const p = this.tx.payload(src, off + done, xfer);
      this.tx.addPost(sendWr(rsMsgSet(RsOp.WRITE, xfer), WrOpcode.RDMA_WRITE, p.sgl, p.flags, 0, iom.addr + at - iom.offset, iom.key));
      done += xfer;
    }
    this.tx.flushPosts();
    if (done > 0 || !iom) return done;
    if (this._error) throw this._error;
    if (!(this.st.state & RsState.writable)) throw rsErr('ECONNRESET', 'riowrite');
    return RS_EAGAIN;
  }
}

/** ENODEV when there is no RDMA device at all (rsocket() fails the same way). */
export function noDevices(op: string): void {
  if (getDeviceList().length === 0) throw rsErr('ENODEV', op, 'No RDMA devices were detected');
}



