/**
 * One connection of the IB CM (cm.c's `cm_id_private`) as rdma_cm drives it over RoCE: its
 * state, the MAD it resends until answered, the wait an MRA stretches, TIMEWAIT, and what each
 * message of the peer does to it. The rdma_cm id above it ({@link ConnOwner}, rc-endpoint.ts) is
 * told what it must act on: the REP to move its QP by, establishment, a REJ, DISCONNECTED,
 * TIMEWAIT's end.
 *
 * States (cm.c `enum ib_cm_state`, the ones RC over RoCE uses), one {@link StateCell} traced
 * under `cm` as `IBCM[<local comm ID>]`:
 *
 * ```
 * active:  IDLE → REQ_SENT → (MRA) MRA_REQ_RCVD
 *          REQ_SENT, MRA_REQ_RCVD → (REP, QP moved, RTU sent) ESTABLISHED
 *                                 → (REP, no QP on the id) REP_RCVD → (rdma_establish: RTU) ESTABLISHED
 * passive: IDLE → (REQ) REQ_RCVD → (the REQ again) MRA_REQ_SENT
 *          REQ_RCVD, MRA_REQ_SENT → (rdma_accept: REP) REP_SENT → (RTU, first request) ESTABLISHED
 * either:  ESTABLISHED → (rdma_disconnect: DREQ) DREQ_SENT → (DREP, DREQ, no DREP) TIMEWAIT
 *          ESTABLISHED, REP_SENT → (DREQ) DREQ_RCVD → (DREP sent) TIMEWAIT
 *          TIMEWAIT → (timewaitMs) IDLE; a REJ, a refusal or resends run out → IDLE (or TIMEWAIT)
 * ```
 *
 * A connection in REP_SENT or ESTABLISHED whose peer is a process of this host is watched
 * (peer-watch.ts) until TIMEWAIT or its end.
 *
 * Resends: a REQ, REP or DREQ goes again every `cmTimeoutMs` up to `cmRetries` times, then the
 * connection gives up. A REP to a requester not heard from since its REQ is resent only
 * {@link REP_RESENDS_UNHEARD} times (the REQ may have been forged), and its resends go within the
 * device's reply budget (reply-limit.ts), as every answer no application asked for does.
 */
import { Errno } from '../../../errno.js';
import { trace, traceEvent, tracing } from '../../../trace.js';
import { StateCell } from '../../../util/state.js';
import type { CmHost } from '../../../cm/transport.js';
import { CmMsgRef, CmRejReason, encodeCmMad, type CmMessage, type CmRep, type CmReq } from '../../../wire/roce/index.js';
import { randomPsn } from '../../../util/random.js';
import { C } from '../counters.js';
import type { RoceDevice } from '../device.js';
import { rcConfig } from './config.js';
import { connTid, newRequestId, releaseRequestId } from './ids.js';
import { rcBacklog } from './listeners.js';
import { dropMad, sendMad } from './mad-agent.js';
import { unwatchPeer, watchPeer } from './peer-watch.js';
import { mayReply } from './reply-limit.js';
import { CA_ACK_DELAY, CMA_IBOE_PACKET_LIFETIME, MRA_SERVICE_TIMEOUT, cmAckTimeout, mraWaitMs } from './timing.js';

/** The IB CM states of one connection (cm.c `enum ib_cm_state`, the ones RC over RoCE uses). */
export enum RcCmState {
  IDLE = 'IDLE',
  REQ_SENT = 'REQ_SENT',
  MRA_REQ_RCVD = 'MRA_REQ_RCVD',
  REP_RCVD = 'REP_RCVD',
  REQ_RCVD = 'REQ_RCVD',
  MRA_REQ_SENT = 'MRA_REQ_SENT',
  REP_SENT = 'REP_SENT',
  ESTABLISHED = 'ESTABLISHED',
  DREQ_SENT = 'DREQ_SENT',
  DREQ_RCVD = 'DREQ_RCVD',
  TIMEWAIT = 'TIMEWAIT',
}

const S = RcCmState;

/**
 * REP resends to a requester not heard from since its REQ (the resends of cm.c go on to the
 * REQ's max CM retries, 15 with rdma_cm, whoever sent the REQ). A real requester whose RTU was
 * lost gets the REP three more times, each answered by a fresh RTU; its first request on the QP
 * establishes the connection as well.
 */
const REP_RESENDS_UNHEARD = 3;

/** What the rdma_cm id of a connection is told (cma.c `cma_ib_handler`'s events). */
export interface ConnOwner {
  /** The QP number of the id's QP, if it has one (a DREQ must name it). */
  qpNum(): number | undefined;
  /** The REP for our REQ, recorded: move the QP and send the RTU, or report CONNECT_RESPONSE. */
  repReceived(c: RcConn, m: CmRep): void;
  /** The passive side is established (RTU, or the first request on the QP). */
  established(c: RcConn): void;
  /** A REJ ended the exchange, with its reason and private data. */
  rejected(c: RcConn, reason: number, privateData: Uint8Array): void;
  /** DISCONNECTED: 0, or −ETIMEDOUT when our DREQ got no DREP. */
  disconnected(c: RcConn, status: number): void;
  /** The connection left TIMEWAIT and is forgotten. */
  timewaitExit(c: RcConn): void;
}

/** Connections of this process by local communication ID. */
const conns = new Map<number, RcConn>();
/** Passive connections by `remote address/remote comm ID` (to recognise a repeated REQ). */
const byRemote = new Map<string, RcConn>();

/** The connection whose local communication ID is `commId`. */
export function connById(commId: number): RcConn | undefined {
  return conns.get(commId);
}

/** The passive connection of the REQ `commId` from `remote` sent. */
export function connByRemote(remote: string, commId: number): RcConn | undefined {
  return byRemote.get(remoteKey(remote, commId));
}

function remoteKey(remote: string, commId: number): string {
  return `${remote}/${commId}`;
}

const EMPTY = new Uint8Array(0);

/** One connection: the IB CM's `cm_id_private`. */
export class RcConn {
  readonly cell: StateCell<RcCmState>;
  localCommId: number;
  remoteCommId = 0;
  tid: bigint;
  remoteQpn = 0;
  /**
   * The PSN this side expects to receive first (sent as our starting PSN): 24 bits from the
   * CSPRNG, as cma.c's `seq_num` of every id (`get_random_bytes`, masked to 24 bits). A peer that
   * could foresee it could inject into the connection with spoofed packets.
   */
  rqPsn = randomPsn();
  /** The PSN this side sends first (the peer's starting PSN). */
  sqPsn = 0;
  pathMtu = 3;
  /** cm.c's `av.timeout`: the QP timeout unless the id (or `ackTimeout` of the config) sets one. */
  avTimeout = cmAckTimeout(CA_ACK_DELAY, CMA_IBOE_PACKET_LIFETIME);
  retryCount = 7;
  rnrRetryCount = 7;
  /** This side's IRD and ORD. */
  ird = 0;
  ord = 0;
  flowLabel = 0;
  /** The local port of the active side (the CMA header's source port). */
  localPort = 0;
  /** Passive side: the REQ's traffic class, for this side's QP (cm.c builds its AV from the REQ's path); −1: the id's ToS. */
  trafficClass = -1;
  /** The message resent on timeout, and how often it may still be. */
  private resend: Uint8Array | null = null;
  private resendKind: CmMessage['kind'] | null = null;
  private retriesLeft = 0;
  /** Resends of the current message so far. */
  private resent = 0;
  /**
   * Passive side: the requester has sent something since its REQ (a repeated REQ), so it is
   * there; until then the REP is resent only {@link REP_RESENDS_UNHEARD} times.
   */
  private peerHeard = false;
  /** Whether the resend timer keeps the event loop alive. */
  private holdsLoop = false;
  private timer: NodeJS.Timeout | null = null;
  private onGiveUp: (() => void) | null = null;
  /** The listener this half-open connection counts against. */
  private backlogOf: CmHost | null = null;
  /** The peer process's socket name this connection is watched through ('' if none). */
  watch = '';
  /** DISCONNECTED was reported for this connection (then, and only then, TIMEWAIT_EXIT is too). */
  disconnectReported = false;

  constructor(
    readonly dev: RoceDevice,
    readonly local: string,
    readonly remote: string,
    readonly family: 4 | 6,
    public ep: ConnOwner | null,
    tid?: bigint,
  ) {
    this.localCommId = newRequestId(dev.agent);
    this.tid = tid ?? connTid(this.localCommId);
    this.cell = new StateCell<RcCmState>('cm', () => this.tag, S.IDLE);
    conns.set(this.localCommId, this);
  }

  /** The trace prefix of this connection. */
  get tag(): string {
    return `IBCM[0x${this.localCommId.toString(16)}]`;
  }

  /** Go to state `to`, with its entry actions: the peer's process is watched from REP_SENT / ESTABLISHED until TIMEWAIT / IDLE. */
  private enter(to: RcCmState, why: string): void {
    this.cell.move(to, why);
    if (to === S.ESTABLISHED || to === S.REP_SENT) watchPeer(this);
    else if (to === S.TIMEWAIT || to === S.IDLE) unwatchPeer(this);
  }

  // -- sending --------------------------------------------------------------------------------

  /** Send a message of this connection. */
  send(msg: CmMessage): Uint8Array {
    const mad = encodeCmMad(msg, this.tid);
    sendMad(this.dev, mad, this.local, this.remote, this.family);
    if (tracing('cm')) traceEvent('cm', this.tag, 'mad', { kind: msg.kind, to: this.remote });
    return mad;
  }

  /**
   * Send an answer no application asked for (to a repeated or refused MAD), within the device's
   * reply budget (reply-limit.ts); returns the MAD, or null when it was suppressed.
   */
  private sendUnsolicited(msg: CmMessage): Uint8Array | null {
    return mayReply(this.dev) ? this.send(msg) : null;
  }

  /** Send a message and resend it every cmTimeoutMs until {@link stopResend}; then `giveUp`. */
  private sendReliably(msg: CmMessage, giveUp: () => void): void {
    this.stopResend();
    this.resend = this.send(msg);
    this.resendKind = msg.kind;
    this.resent = 0;
    this.retriesLeft = rcConfig.cmRetries;
    this.onGiveUp = giveUp;
    // A REQ or REP awaits the answer an application waits for (its connect or accept), so the
    // resends keep the process alive as a blocked rdma_get_cm_event would; a DREQ's do not (a
    // process that has disconnected may end).
    this.holdsLoop = msg.kind !== 'DREQ';
    this.arm(rcConfig.cmTimeoutMs);
  }

  private arm(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.onTimeout(), ms);
    if (!this.holdsLoop) this.timer.unref();
  }

  private onTimeout(): void {
    this.timer = null;
    if (this.resend === null) return;
    if (this.retriesLeft <= 0) {
      const g = this.onGiveUp;
      this.stopResend();
      g?.();
      return;
    }
    this.retriesLeft--;
    this.resent++;
    if (this.resendKind !== 'REP') sendMad(this.dev, this.resend, this.local, this.remote, this.family);
    else if (!this.peerHeard && this.resent > REP_RESENDS_UNHEARD) {
      // The REQ may have been forged: an address that never answers gets no more than the REP
      // and its first resends. The timer still runs, so the id ends as it would.
      this.dev.counters.inc(C.cm_reply_suppressed);
      if (tracing('cm')) trace('cm', this.tag, `REP resend ${this.resent} suppressed: nothing heard from ${this.remote}`);
    } else if (mayReply(this.dev)) sendMad(this.dev, this.resend, this.local, this.remote, this.family);
    this.arm(rcConfig.cmTimeoutMs);
  }

  private stopResend(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.resend = null;
    this.resendKind = null;
    this.onGiveUp = null;
  }

  /** REJ this connection's exchange with `reason` (and private data); `unsolicited`: within the reply budget. */
  reject(reason: number, privateData: Uint8Array = EMPTY, ref: number = CmMsgRef.REQ, ari: Uint8Array = EMPTY, unsolicited = false): void {
    const rej: CmMessage = {
      kind: 'REJ',
      localCommId: this.localCommId,
      remoteCommId: this.remoteCommId,
      messageRejected: ref,
      ariLength: ari.length,
      reason,
      ari,
      privateData,
    };
    if (unsolicited) this.sendUnsolicited(rej);
    else this.send(rej);
  }

  private rtu(): CmMessage {
    return { kind: 'RTU', localCommId: this.localCommId, remoteCommId: this.remoteCommId, privateData: EMPTY };
  }

  private dreq(): CmMessage {
    return { kind: 'DREQ', localCommId: this.localCommId, remoteCommId: this.remoteCommId, remoteQpn: this.remoteQpn, privateData: EMPTY };
  }

  private drep(): CmMessage {
    return { kind: 'DREP', localCommId: this.localCommId, remoteCommId: this.remoteCommId, privateData: EMPTY };
  }

  // -- the life of the connection ---------------------------------------------------------------

  /** No longer a half-open connection of its listener (established or ended). */
  private leaveBacklog(): void {
    const l = this.backlogOf;
    if (l === null) return;
    this.backlogOf = null;
    rcBacklog.leave(l);
  }

  /** TIMEWAIT, then TIMEWAIT_EXIT to the id (if it still wants it) and the connection is forgotten. */
  enterTimewait(): void {
    this.stopResend();
    this.leaveBacklog();
    this.enter(S.TIMEWAIT, 'timewait');
    const t = setTimeout(() => {
      if (!this.cell.is(S.TIMEWAIT)) return;
      this.forget();
      const ep = this.ep;
      this.ep = null;
      ep?.timewaitExit(this);
    }, rcConfig.timewaitMs);
    t.unref();
  }

  /** Drop every reference to this connection. */
  forget(): void {
    this.stopResend();
    this.leaveBacklog();
    this.enter(S.IDLE, 'gone');
    if (conns.get(this.localCommId) === this) {
      conns.delete(this.localCommId);
      releaseRequestId(this.localCommId);
    }
    const k = remoteKey(this.remote, this.remoteCommId);
    if (byRemote.get(k) === this) byRemote.delete(k);
  }

  /** DISCONNECTED for this connection (TIMEWAIT_EXIT will follow). */
  private reportDisconnected(status = 0): void {
    this.disconnectReported = true;
    this.ep?.disconnected(this, status);
  }

  // -- active side ------------------------------------------------------------------------------

  /** Send the REQ (resent until answered; then `giveUp`). */
  sendReq(req: CmReq, giveUp: () => void): void {
    this.enter(S.REQ_SENT, 'connect');
    this.sendReliably(req, giveUp);
  }

  /** The REP for our REQ (cm.c `cm_rep_handler`): recorded, then the id acts on it. */
  repIn(m: CmRep): void {
    if (this.cell.is(S.ESTABLISHED) && m.localCommId === this.remoteCommId) {
      // A repeated REP: our RTU was lost.
      this.sendUnsolicited(this.rtu());
      return;
    }
    if (!this.cell.in([S.REQ_SENT, S.MRA_REQ_RCVD])) return dropMad(this.dev);
    this.stopResend();
    this.remoteCommId = m.localCommId;
    this.remoteQpn = m.localQpn;
    this.sqPsn = m.startingPsn;
    // This side's ORD is at most what the responder offers, its IRD what the responder will use.
    this.ord = m.responderResources;
    this.ird = m.initiatorDepth;
    this.rnrRetryCount = m.rnrRetryCount;
    // cm.c `cm_rep_handler`: the timeout from the responder's ACK delay and the path's lifetime.
    this.avTimeout = cmAckTimeout(m.targetAckDelay, this.avTimeout - 1);
    this.ep?.repReceived(this, m);
  }

  /** The REP is taken without a QP to move: the application sends the RTU (rdma_establish). */
  holdRep(): void {
    this.enter(S.REP_RCVD, 'REP, no QP on the id');
  }

  /** Send the RTU: established. */
  establish(why: string): void {
    this.send(this.rtu());
    this.enter(S.ESTABLISHED, why);
  }

  /** An MRA: the answer may take its service timeout longer. */
  mraIn(serviceTimeout: number): void {
    if (!this.cell.exch(S.REQ_SENT, S.MRA_REQ_RCVD, 'MRA') && !this.cell.in([S.MRA_REQ_RCVD, S.REP_SENT])) return dropMad(this.dev);
    // cm.c: the answer may take the service timeout plus a packet lifetime longer.
    if (this.resend !== null) this.arm(mraWaitMs(serviceTimeout, this.avTimeout));
  }

  // -- passive side -----------------------------------------------------------------------------

  /** Take the fields of the REQ that made this connection (cm.c `cm_req_handler`). */
  fromReq(m: CmReq): void {
    this.remoteCommId = m.localCommId;
    this.remoteQpn = m.localQpn;
    this.sqPsn = m.startingPsn;
    this.retryCount = m.retryCount;
    this.rnrRetryCount = m.rnrRetryCount;
    // cm.c `cm_format_paths_from_req` + `cm_init_av_by_path`: lifetime = the REQ's value − 1 (not
    // below 0), av.timeout = lifetime + 1.
    this.avTimeout = Math.max(m.primaryPath.localAckTimeout - 1, 0) + 1;
    this.flowLabel = m.primaryPath.flowLabel;
    this.trafficClass = m.primaryPath.trafficClass;
  }

  /** Refuse the REQ with `reason` (within the reply budget) and forget the connection. */
  refuse(reason: number, why: string, ari?: Uint8Array): void {
    if (tracing('cm')) trace('cm', this.dev.name, `REQ from ${this.remote} refused (${reason}): ${why}`);
    this.reject(reason, EMPTY, CmMsgRef.REQ, ari, true);
    this.forget();
  }

  /** The REQ is reported to listener `host`: a half-open connection of its backlog, known by the requester's ID. */
  holdRequest(host: CmHost): void {
    this.backlogOf = host;
    rcBacklog.take(host);
    byRemote.set(remoteKey(this.remote, this.remoteCommId), this);
    this.enter(S.REQ_RCVD, 'REQ');
  }

  /** The same REQ again (cm.c `cm_dup_req_handler` with rdma_cm's prepared MRA). */
  reqRepeated(): void {
    switch (this.cell.state) {
      case S.REQ_RCVD:
      case S.MRA_REQ_SENT:
        this.cell.exch(S.REQ_RCVD, S.MRA_REQ_SENT, 'repeated REQ');
        this.sendUnsolicited({ kind: 'MRA', localCommId: this.localCommId, remoteCommId: this.remoteCommId, messageMraed: CmMsgRef.REQ, serviceTimeout: MRA_SERVICE_TIMEOUT, privateData: EMPTY });
        return;
      case S.TIMEWAIT:
        this.reject(CmRejReason.STALE_CONN, undefined, undefined, undefined, true);
        return;
      case S.REP_SENT:
        // The requester is there (its REQ came again: our REP was lost); the REP's own resend
        // answers it, and may now go on until the retries run out.
        this.peerHeard = true;
        dropMad(this.dev);
        return;
      default:
        // ESTABLISHED: nothing to do.
        dropMad(this.dev);
    }
  }

  /** Send the REP of rdma_accept (resent until the RTU; then `giveUp`). */
  sendRep(rep: CmRep, giveUp: () => void): void {
    this.enter(S.REP_SENT, 'accept');
    this.sendReliably(rep, giveUp);
  }

  /** The RTU or the first request on the QP: the passive side is established. */
  establishedIn(why: string): void {
    if (!this.cell.is(S.REP_SENT)) return;
    this.stopResend();
    this.leaveBacklog();
    this.enter(S.ESTABLISHED, why);
    this.ep?.established(this);
  }

  /** An RTU. */
  rtuIn(): void {
    if (this.cell.is(S.REP_SENT)) this.establishedIn('RTU');
    else if (!this.cell.is(S.ESTABLISHED)) dropMad(this.dev, this.dev.name, `MAD dropped: RTU in ${this.cell.state}`);
  }

  // -- either side ------------------------------------------------------------------------------

  /** A REJ for this connection. */
  rejIn(reason: number, privateData: Uint8Array): void {
    if (this.cell.in([S.REQ_SENT, S.MRA_REQ_RCVD, S.REQ_RCVD, S.MRA_REQ_SENT, S.REP_SENT])) {
      if (reason === CmRejReason.STALE_CONN) this.enterTimewait();
      else this.forget();
    } else if (this.cell.in([S.REP_RCVD, S.DREQ_SENT, S.ESTABLISHED])) this.enterTimewait();
    else return dropMad(this.dev);
    this.ep?.rejected(this, reason, privateData);
  }

  /**
   * rdma_disconnect (the QP already moved to ERR by the id): a DREQ from ESTABLISHED, resent until
   * the DREP (none: DISCONNECTED −ETIMEDOUT); the DREP for a DREQ received. Whether DISCONNECTED
   * follows (or already came).
   */
  disconnect(): boolean {
    switch (this.cell.state) {
      case S.ESTABLISHED:
        this.enter(S.DREQ_SENT, 'disconnect');
        this.sendReliably(this.dreq(), () => {
          // No DREP: cm.c's DREQ_ERROR, cma reports DISCONNECTED -ETIMEDOUT.
          this.enterTimewait();
          this.reportDisconnected(-Errno.ETIMEDOUT);
        });
        return true;
      case S.DREQ_RCVD:
        this.send(this.drep());
        this.enterTimewait();
        return false;
      case S.DREQ_SENT:
        return true;
      default:
        return false;
    }
  }

  /** A DREQ for this connection (its QPN checked by the caller). */
  dreqIn(): void {
    switch (this.cell.state) {
      case S.ESTABLISHED:
      case S.REP_SENT:
        this.stopResend();
        this.leaveBacklog();
        this.enter(S.DREQ_RCVD, 'DREQ');
        this.reportDisconnected();
        return;
      case S.DREQ_SENT:
        // Both sides disconnected together: answer and finish.
        this.stopResend();
        this.send(this.drep());
        this.enterTimewait();
        this.reportDisconnected();
        return;
      case S.TIMEWAIT:
        this.sendUnsolicited(this.drep());
        return;
      default:
        dropMad(this.dev);
    }
  }

  /** A DREQ for this connection after its id is gone: only TIMEWAIT answers it again. */
  orphanDreqIn(): void {
    if (this.cell.is(S.TIMEWAIT)) this.sendUnsolicited(this.drep());
  }

  /** The DREP for our DREQ. */
  drepIn(): void {
    if (!this.cell.is(S.DREQ_SENT)) return dropMad(this.dev);
    this.enterTimewait();
    this.reportDisconnected();
  }

  /** The peer's process on this host is gone: as the DREQ its kernel would have sent. */
  peerDied(): void {
    if (this.ep === null) return;
    if (tracing('cm')) trace('cm', this.tag, 'the peer process is gone');
    if (this.cell.is(S.DREQ_SENT)) {
      this.enterTimewait();
      this.reportDisconnected();
    } else if (this.cell.in([S.ESTABLISHED, S.REP_SENT])) this.dreqIn();
  }

  /** The id is destroyed (cm.c `cm_destroy_id`): whatever the state asks of the peer. */
  destroy(): void {
    this.ep = null;
    switch (this.cell.state) {
      case S.REQ_SENT:
      case S.MRA_REQ_RCVD:
        // cm.c: REJ "timeout" with this CA's GUID as ARI (the responder finds its request by it).
        this.reject(CmRejReason.TIMEOUT, EMPTY, CmMsgRef.REQ, guidBytes(caGuid(this.dev)));
        this.forget();
        break;
      case S.REQ_RCVD:
      case S.MRA_REQ_SENT:
      case S.REP_SENT:
        this.reject(CmRejReason.CONSUMER_DEFINED, EMPTY, this.cell.is(S.REP_SENT) ? CmMsgRef.REP : CmMsgRef.REQ);
        this.forget();
        break;
      case S.REP_RCVD:
        this.reject(CmRejReason.CONSUMER_DEFINED, EMPTY, CmMsgRef.REP);
        this.enterTimewait();
        break;
      case S.ESTABLISHED:
        this.send(this.dreq());
        this.enterTimewait();
        break;
      case S.DREQ_SENT:
        this.enterTimewait();
        break;
      case S.DREQ_RCVD:
        this.send(this.drep());
        this.enterTimewait();
        break;
      default:
        break;
    }
  }
}

/** A GUID as its 8 bytes on the wire. */
function guidBytes(g: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt.asUintN(64, g));
  return out;
}

/** The node GUID of a device (the REQ/REP local CA GUID). */
export function caGuid(dev: RoceDevice): bigint {
  return dev.info.nodeGuid ?? 0n;
}
