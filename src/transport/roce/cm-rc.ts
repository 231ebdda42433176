/**
 * The connected half of the RoCE CM: the InfiniBand CM (drivers/infiniband/core/cm.c) as rdma_cm
 * (cma.c) drives it for RDMA_PS_TCP ids over RoCE — REQ, MRA, REJ, REP, RTU, DREQ, DREP MADs on
 * QP1, with the CMA header in the REQ's private data. It plugs into roce-cm.ts (which owns the GSI
 * agent, the MAD routing between processes, listeners and SIDR).
 *
 * Active side: rdma_connect → REQ (service ID `0x0106 << 16 | port`, the QP number, a random
 * starting PSN — the PSN this side expects to receive — IRD as responder resources, ORD as
 * initiator depth, the path: GIDs, flow label from the ports, hop limit 64, the path MTU of the
 * interface, the local ACK timeout; private data = CMA header + up to 56 bytes), resent every
 * {@link RoceRcCmConfig.cmTimeoutMs} up to {@link RoceRcCmConfig.cmRetries} times, then
 * UNREACHABLE -ETIMEDOUT. An MRA stretches the wait by its service timeout. REP → the QP goes
 * INIT (access flags) → RTR → RTS (`rdma_init_qp_attr`'s values), then RTU and ESTABLISHED with
 * the REP's private data; without a QP on the id: CONNECT_RESPONSE, and rdma_establish sends the
 * RTU. A QP transition that fails → REJ "consumer defined" and CONNECT_ERROR. REJ → REJECTED with
 * the REJ reason as status (8 "invalid service ID" when nobody listens, 28 for rdma_reject) and
 * its 148 private bytes.
 *
 * Passive side: a REQ for a listening service whose CMA header fits the listener (IP version,
 * bound address) → CONNECT_REQUEST on the listener (the 56 user bytes; the requester's initiator
 * depth as responder resources and the other way round). No listener → REJ 8; a REQ that does
 * not fit → REJ 28 as cma; a REQ for a GID that is not ours → REJ 12; a REQ while the listener
 * has `backlog` half-open connections → dropped and counted (`rcvd_req_backlog_drop`), no REJ.
 * rdma_accept → QP to RTR and RTS, REP (resent until the RTU, then UNREACHABLE -ETIMEDOUT; to a
 * requester not heard from since its REQ only three times); RTU or the first request on the QP →
 * ESTABLISHED. rdma_reject → REJ 28 with up to 148 private bytes. A repeated REQ is answered with
 * an MRA while the application decides, with the REP again after accept, and with REJ 10 (stale)
 * from TIMEWAIT.
 *
 * Disconnect: rdma_disconnect moves the QP to ERR and sends DREQ (with the peer's QPN), resent
 * until DREP → DISCONNECTED; no DREP → DISCONNECTED -ETIMEDOUT. A DREQ → DISCONNECTED, and the
 * DREP goes out when the application disconnects or destroys the id (or at once when both sides
 * disconnected together). Then TIMEWAIT ({@link RoceRcCmConfig.timewaitMs}) and TIMEWAIT_EXIT.
 * rdma_destroy_id: a pending request is rejected (28), a connection attempt gets REJ 4 (timeout),
 * an established connection a DREQ.
 *
 * Every MAD that fits no connection in the state it needs is dropped and counted
 * (`rcvd_mad_unroutable_drop`), except a DREQ for an unknown connection, which gets a DREP (cm.c
 * does so, so the peer stops resending). Answers no application gave (REJs of refused REQs, that
 * DREP, MRA / RTU / REJ 10 / DREP for repeats) and REP resends go within the device's reply
 * budget (reply-limit.ts). A reply (REP, REJ, MRA, RTU, DREQ, DREP) naming a
 * connection of ours is taken only from the address and the GSI QP of that connection's peer;
 * from anywhere else it is dropped and counted (`rcvd_mad_src_drop`).
 *
 * Values a peer could use to forge traffic are drawn from the CSPRNG (util/random.ts): both
 * sides' starting PSNs (as cma.c draws `seq_num` with get_random_bytes) and the low 18 bits of
 * the communication IDs (and so of our TIDs, which carry them).
 */
import net from 'node:net';
import { err, RdmaError } from '../../errors.js';
import { Errno } from '../../errno.js';
import { trace, tracing } from '../../trace.js';
import { QpAttrMask, type QpAttr } from '../../verbs/qp-attr.js';
import type { Qp } from '../../verbs/qp.js';
import { Access, QpState, QpType } from '../../verbs/types.js';
import { Mtu } from '../../verbs/device.js';
import {
  CmEventType,
  PortSpace,
  serviceId,
  type AcceptRequest,
  type CmEndpoint,
  type CmHost,
  type ConnectRequest,
  type EventConnParam,
} from '../../cm/transport.js';
import {
  CmMsgRef,
  CmRejReason,
  CmTransportType,
  CMA_HDR_LEN,
  CMA_REQ_USER_PD,
  CmPrivateDataLen,
  GSI_QPN,
  cmaRoceFlowLabel,
  cmaServiceIdParts,
  decodeCmaHeader,
  emptyCmPath,
  encodeCmMad,
  encodeCmaPrivateData,
  type CmMad,
  type CmMessage,
  type CmReq,
  type CmRep,
  type CmRej,
} from '../../wire/roce/index.js';
import { C } from './counters.js';
import { mayReply } from './reply-limit.js';
import { RoceDevice, ipBytes } from './device.js';
import { gidFromIp, ipFromGid } from './gid.js';
import type { RxMeta } from './udp.js';
import { RXE_PROVIDER } from './provider.js';
import { ephemeralPort } from './local-port.js';
import { envInt } from '../../util/env.js';
import { StateCell } from '../../util/state.js';
import { randomPsn } from '../../util/random.js';
import { RoceRcQp } from './rc/rc-qp.js';
import {
  ahTo,
  connectedCm,
  devOf,
  familyOf,
  findListener,
  gidFromBytes,
  isAnyAddr,
  newRequestId,
  releaseRequestId,
  sendMad,
  REQ_ID_SHIFT,
  HOP_LIMIT,
} from './roce-cm.js';

// -- constants and tunables -------------------------------------------------------------------

/** CM response timeout code rdma_cm puts in REQs (cma.c `CMA_CM_RESPONSE_TIMEOUT`). */
const CM_RESPONSE_TIMEOUT = 20;
/** Max CM retries code (cma.c `CMA_MAX_CM_RETRIES`). */
const MAX_CM_RETRIES = 15;
/** The service timeout of an MRA (cma.c `CMA_CM_MRA_SETTING`, ≈ 68.7 s). */
const MRA_SERVICE_TIMEOUT = 24;
/** rxe's `local_ca_ack_delay` (RXE_LOCAL_CA_ACK_DELAY): the CA ACK delay cm.c uses for a REQ, sent as the REP's target ACK delay. */
const CA_ACK_DELAY = 15;
/**
 * The packet lifetime rdma_cm puts in RoCE path records (cma.c `CMA_IBOE_PACKET_LIFETIME`: 18 up to
 * Linux 6.1, the kernel of Debian bookworm; 16 from 6.2), unless RDMA_OPTION_ID_ACK_TIMEOUT gives
 * the id a timeout t > 0, which makes it t − 1 (`cma_resolve_iboe_route`).
 */
const CMA_IBOE_PACKET_LIFETIME = 18;

/**
 * cm.c `cm_ack_timeout`: the local ACK timeout code for a CA ACK delay and a packet lifetime (all
 * codes of 4.096 µs × 2^n). IBTA 12.7.34 wants 2^ack_delay + 2 × 2^life_time; cm.c takes the
 * larger of the ACK delay and lifetime + 1 and adds one when the other is within a factor of two.
 * rxe (15) with lifetime 18 → 19, which is what a Linux 6.1 rdma_cm sends in its REQs.
 */
export function cmAckTimeout(caAckDelay: number, packetLifeTime: number): number {
  let t = packetLifeTime + 1;
  if (t >= caAckDelay) t += caAckDelay >= t - 1 ? 1 : 0;
  else t = caAckDelay + (t >= caAckDelay - 1 ? 1 : 0);
  return Math.min(31, t);
}
/** Private data of REP and REJ. */
const REP_PD = CmPrivateDataLen.REP;
const REJ_PD = CmPrivateDataLen.REJ;
/** The agent ID Linux puts in the top of a CM TID (the CM's MAD agent on rxe ports). */
const TID_AGENT = 2n;

/** Tunables of the connected CM. */
export interface RoceRcCmConfig {
  /**
   * How long a REQ, REP or DREQ waits for its answer before it is sent again (ms). cm.c for a REQ:
   * 2 × 2^(packet lifetime − 8) + 2^(remote CM response timeout − 8) = 2 × 1024 + 4096 with rdma_cm's
   * RoCE packet lifetime 18 and response timeout 20.
   */
  cmTimeoutMs: number;
  /** Resends before giving up (cma: 15). */
  cmRetries: number;
  /** TIMEWAIT before TIMEWAIT_EXIT (ms): cm.c 2^(ACK timeout − 8), 2048 for the timeout 19 of RoCE paths. */
  timewaitMs: number;
  /**
   * −1 (the default): the local ACK timeout is derived as Linux 6.1 does — the REQ carries
   * {@link cmAckTimeout}(15, packet lifetime 18) = 19, the active QP gets cmAckTimeout(the REP's
   * target ACK delay, 18) (19 against rxe), the passive QP the REQ's value (cm.c: lifetime = REQ
   * value − 1, timeout = lifetime + 1). 0..31: as if every id had RDMA_OPTION_ID_ACK_TIMEOUT set
   * to it (the option of an id wins).
   */
  ackTimeout: number;
}

const config: RoceRcCmConfig = {
  cmTimeoutMs: Math.max(1, envInt('RDMACM_ROCE_CM_TIMEOUT_MS', 6144)),
  cmRetries: envInt('RDMACM_ROCE_CM_RETRIES', MAX_CM_RETRIES),
  timewaitMs: envInt('RDMACM_ROCE_TIMEWAIT_MS', 2048),
  ackTimeout: envInt('RDMACM_ROCE_ACK_TIMEOUT', -1, 31),
};

/**
 * Change the connected CM's tunables (environment defaults: `RDMACM_ROCE_CM_TIMEOUT_MS`,
 * `RDMACM_ROCE_CM_RETRIES`, `RDMACM_ROCE_TIMEWAIT_MS`, `RDMACM_ROCE_ACK_TIMEOUT`).
 */
export function configureRoceRcCm(c: Partial<RoceRcCmConfig>): void {
  if (c.cmTimeoutMs !== undefined) config.cmTimeoutMs = Math.max(1, Math.floor(c.cmTimeoutMs));
  if (c.cmRetries !== undefined) config.cmRetries = Math.max(0, Math.floor(c.cmRetries));
  if (c.timewaitMs !== undefined) config.timewaitMs = Math.max(0, Math.floor(c.timewaitMs));
  if (c.ackTimeout !== undefined) config.ackTimeout = c.ackTimeout < 0 ? -1 : Math.min(31, Math.floor(c.ackTimeout));
}

/** The connected CM's tunables (a copy). */
export function roceRcCmConfig(): RoceRcCmConfig {
  return { ...config };
}

// -- connection states --------------------------------------------------------------------------

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

/** Connections of this process by local communication ID. */
const conns = new Map<number, RcConn>();
/** Passive connections by `remote address/remote comm ID` (to recognise a repeated REQ). */
const byRemote = new Map<string, RcConn>();
/**
 * Half-open connections per listener host: from the REQ to ESTABLISHED (RTU or first request) or
 * the connection's end (reject, destroy, REJ, the REP's resends running out). At most the
 * listener's backlog; see {@link request}.
 */
const halfOpen = new Map<CmHost, number>();

/** The half-open passive connections of this process, over every listener (for tests and tools). */
export function roceRcHalfOpen(): number {
  let n = 0;
  for (const v of halfOpen.values()) n += v;
  return n;
}

// -- peers in other processes of this host --------------------------------------------------------

/**
 * Processes of this host a connection of ours talks to, watched through the socket of the QPN
 * block their communication ID names (it goes away with the process). The kernel's CM sends a DREQ for every
 * connection of a process that dies; a CM inside the process cannot, so its peers on this host
 * act on the socket closing instead, as if that DREQ had come.
 */
const watched = new Map<string, { sock: net.Socket; conns: Set<RcConn> }>();

function watchPeer(c: RcConn): void {
  const agent = c.dev.agent;
  // The peer's communication ID names a QPN block its process holds (`block << 18 | sequence`).
  const block = c.remoteCommId >>> REQ_ID_SHIFT;
  if (c.watch !== '' || !c.dev.ownsIp(c.remote, c.family) || agent.ownedBlocks().includes(block)) return;
  const name = agent.blockHolderName(block);
  let w = watched.get(name);
  if (w === undefined) {
    const sock = net.connect(name);
    const entry = { sock, conns: new Set<RcConn>() };
    w = entry;
    watched.set(name, entry);
    sock.unref();
    sock.on('data', () => {});
    sock.on('error', () => {});
    sock.on('close', () => {
      if (watched.get(name) === entry) watched.delete(name);
      for (const x of entry.conns) x.ep?.peerDied(x);
      entry.conns.clear();
    });
  }
  w.conns.add(c);
  c.watch = name;
}

function unwatchPeer(c: RcConn): void {
  const name = c.watch;
  if (name === '') return;
  c.watch = '';
  const w = watched.get(name);
  if (w === undefined) return;
  w.conns.delete(c);
  if (w.conns.size === 0) {
    watched.delete(name);
    w.sock.destroy();
  }
}

/** One connection: the IB CM's `cm_id_private`. */
class RcConn {
  /** The connection's state, traced under `cm` as `IBCM[<local comm ID>]`. */
  readonly cell: StateCell<RcCmState> = new StateCell<RcCmState>('cm', () => this.tag, RcCmState.IDLE);
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
  peerHeard = false;
  /** Whether the resend timer keeps the event loop alive. */
  private holdsLoop = false;
  private timer: NodeJS.Timeout | null = null;
  private onGiveUp: (() => void) | null = null;
  /** The listener this half-open connection counts against. */
  backlogOf: CmHost | null = null;
  /** The DREP to resend for a repeated DREQ in TIMEWAIT; the last REP/MRA for a repeated REQ. */
  lastReply: Uint8Array | null = null;
  /** The peer process's socket name this connection is watched through ('' if none). */
  watch = '';
  /** DISCONNECTED was reported for this connection (then, and only then, TIMEWAIT_EXIT is too). */
  disconnectReported = false;

  constructor(
    readonly dev: RoceDevice,
    readonly local: string,
    readonly remote: string,
    readonly family: 4 | 6,
    public ep: RcEndpoint | null,
    tid?: bigint,
  ) {
    this.localCommId = newRequestId(dev.agent);
    this.tid = tid ?? ((TID_AGENT << 32n) | BigInt(bswap32(this.localCommId)));
    conns.set(this.localCommId, this);
  }

  /** The trace prefix of this connection. */
  get tag(): string {
    return `IBCM[0x${this.localCommId.toString(16)}]`;
  }

  /** Go to state `to`, with its entry actions: the peer's process is watched from REP_SENT / ESTABLISHED until TIMEWAIT / IDLE. */
  enter(to: RcCmState, why: string): void {
    this.cell.move(to, why);
    if (to === RcCmState.ESTABLISHED || to === RcCmState.REP_SENT) watchPeer(this);
    else if (to === RcCmState.TIMEWAIT || to === RcCmState.IDLE) unwatchPeer(this);
  }

  /** Send a message of this connection. */
  send(msg: CmMessage): Uint8Array {
    const mad = encodeCmMad(msg, this.tid);
    sendMad(this.dev, mad, this.local, this.remote, this.family);
    if (tracing('cm')) trace('cm', this.tag, `${msg.kind} -> ${this.remote}`);
    return mad;
  }

  /** Send a message and resend it every cmTimeoutMs until {@link stopResend}; then `giveUp`. */
  sendReliably(msg: CmMessage, giveUp: () => void, firstWaitMs = config.cmTimeoutMs): void {
    this.stopResend();
    this.resend = this.send(msg);
    this.resendKind = msg.kind;
    this.resent = 0;
    this.retriesLeft = config.cmRetries;
    this.onGiveUp = giveUp;
    // A REQ or REP awaits the answer an application waits for (its connect or accept), so the
    // resends keep the process alive as a blocked rdma_get_cm_event would; a DREQ's do not (a
    // process that has disconnected may end).
    this.holdsLoop = msg.kind !== 'DREQ';
    this.arm(firstWaitMs);
  }

  /** Wait `ms` more before the next resend (an MRA). */
  stretch(ms: number): void {
    if (this.resend === null) return;
    this.arm(ms);
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
    this.arm(config.cmTimeoutMs);
  }

  stopResend(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.resend = null;
    this.resendKind = null;
    this.onGiveUp = null;
  }

  /** No longer a half-open connection of its listener (established or ended). */
  leaveBacklog(): void {
    const l = this.backlogOf;
    if (l === null) return;
    this.backlogOf = null;
    const n = (halfOpen.get(l) ?? 1) - 1;
    if (n <= 0) halfOpen.delete(l);
    else halfOpen.set(l, n);
  }

  /** TIMEWAIT, then TIMEWAIT_EXIT to the id (if it still wants it) and the connection is forgotten. */
  enterTimewait(): void {
    this.stopResend();
    this.leaveBacklog();
    this.enter(RcCmState.TIMEWAIT, 'timewait');
    const t = setTimeout(() => {
      if (!this.cell.is(RcCmState.TIMEWAIT)) return;
      this.forget();
      const ep = this.ep;
      this.ep = null;
      ep?.timewaitExit(this);
    }, config.timewaitMs);
    t.unref();
  }

  /** Drop every reference to this connection. */
  forget(): void {
    this.stopResend();
    this.leaveBacklog();
    this.enter(RcCmState.IDLE, 'gone');
    if (conns.get(this.localCommId) === this) {
      conns.delete(this.localCommId);
      releaseRequestId(this.localCommId);
    }
    const k = remoteKey(this.remote, this.remoteCommId);
    if (byRemote.get(k) === this) byRemote.delete(k);
  }

  /**
   * Send an answer no application asked for (to a repeated or refused MAD), within the device's
   * reply budget (reply-limit.ts); returns the MAD, or null when it was suppressed.
   */
  sendUnsolicited(msg: CmMessage): Uint8Array | null {
    return mayReply(this.dev) ? this.send(msg) : null;
  }

  /** REJ this connection's exchange with `reason` (and private data); `unsolicited`: within the reply budget. */
  reject(reason: number, privateData: Uint8Array = new Uint8Array(0), ref: number = CmMsgRef.REQ, ari: Uint8Array = new Uint8Array(0), unsolicited = false): void {
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
}

function remoteKey(remote: string, commId: number): string {
  return `${remote}/${commId}`;
}

function bswap32(v: number): number {
  return (((v & 0xff) << 24) | ((v & 0xff00) << 8) | ((v >>> 8) & 0xff00) | (v >>> 24)) >>> 0;
}

function padded(src: Uint8Array, n: number): Uint8Array {
  const out = new Uint8Array(n);
  out.set(src.subarray(0, n));
  return out;
}

/** A GUID as its 8 bytes on the wire. */
function guidBytes(g: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt.asUintN(64, g));
  return out;
}

/** The node GUID of a device (the REQ/REP local CA GUID). */
function caGuid(dev: RoceDevice): bigint {
  return dev.info.nodeGuid ?? 0n;
}

// -- the endpoint of one connected id ------------------------------------------------------------

/** The connected-mode RoCE half of one rdma_cm_id (the kernel's `ib_cm_id` under cma). */
export class RcEndpoint implements CmEndpoint {
  conn: RcConn | null = null;
  private qp: Qp | null = null;
  /** The REQ this passive endpoint answers. */
  private req: CmReq | null = null;
  private dead = false;

  constructor(private readonly host: CmHost) {}

  /** The QP number of the endpoint's QP, if it has one. */
  qpNum(): number | undefined {
    return this.qp?.qpNum;
  }

  /** RDMA_OPTION_ID_ACK_TIMEOUT of the id, else the config's; −1 when neither is set. */
  private get ackTimeoutOption(): number {
    const t = this.host.options.ackTimeout;
    return t >= 0 ? Math.min(31, t) : config.ackTimeout;
  }

  // -- active side ----------------------------------------------------------------------------

  async connect(req: ConnectRequest): Promise<void> {
    const op = 'rdma_connect';
    const dev = devOf(this.host.context, op);
    const family = familyOf(req.dst);
    const local = isAnyAddr(req.src.address) ? (this.host.localAddr?.address ?? '') : req.src.address;
    if (!local || isAnyAddr(local)) throw err('EINVAL', op, 'no local address');
    const lg = gidFromIp(local);
    const rg = gidFromIp(req.dst.address);
    if (!lg || !rg) throw err('EINVAL', op, 'address is not IPv4 or IPv6');
    if (req.qp !== null && !(req.qp instanceof RoceRcQp)) throw err('EINVAL', op, 'the QP is not an RC QP of a soft RoCE device');
    // Only the id's own QP is moved here (librdmacm's ucma_process_conn_resp); one the
    // application names by number it moves itself after CONNECT_RESPONSE.
    const qp = req.ownQp === false ? null : req.qp;
    const qpn = req.qp?.qpNum ?? req.param.qpNum ?? 0;
    const c = new RcConn(dev, local, req.dst.address, family, this);
    this.conn = c;
    this.qp = qp;
    c.ird = req.responderResources;
    c.ord = req.initiatorDepth;
    c.pathMtu = dev.pathMtu || 1;
    // cma.c `cma_resolve_iboe_route` and cm.c `cm_init_av_by_path` / `cm_format_req`.
    const opt = this.ackTimeoutOption;
    const lifetime = opt > 0 ? opt - 1 : CMA_IBOE_PACKET_LIFETIME;
    c.avTimeout = lifetime + 1;
    c.retryCount = Math.min(7, req.param.retryCount ?? 7);
    c.rnrRetryCount = Math.min(7, req.param.rnrRetryCount ?? 7);
    // An id that did not bind a port gets one here, as the kernel's rdma_resolve_addr binds it.
    const srcPort = req.src.port || this.host.localAddr?.port || ephemeralPort();
    c.localPort = srcPort;
    c.flowLabel = cmaRoceFlowLabel(srcPort, req.dst.port);
    const tos = this.host.options.tos;
    const path = {
      ...emptyCmPath(),
      localLid: 0xffff,
      remoteLid: 0xffff,
      localGid: lg,
      remoteGid: rg,
      flowLabel: c.flowLabel,
      trafficClass: tos > 0 ? tos : 0,
      hopLimit: HOP_LIMIT,
      localAckTimeout: cmAckTimeout(CA_ACK_DELAY, lifetime),
    };
    const pd = encodeCmaPrivateData({ version: 0, ipVersion: family, srcPort, src: ipBytes(local, family), dst: ipBytes(req.dst.address, family) }, req.privateData);
    const msg: CmReq = {
      kind: 'REQ',
      localCommId: c.localCommId,
      vendorId: 0,
      serviceId: serviceId(this.host.portSpace, req.dst.port),
      localCaGuid: caGuid(dev),
      localQkey: 0,
      localQpn: qpn,
      responderResources: c.ird,
      localEecn: 0,
      initiatorDepth: c.ord,
      remoteEecn: 0,
      remoteCmResponseTimeout: CM_RESPONSE_TIMEOUT,
      transportType: CmTransportType.RC,
      e2eFlowControl: (req.param.flowControl ?? 0) !== 0,
      startingPsn: c.rqPsn,
      localCmResponseTimeout: CM_RESPONSE_TIMEOUT,
      retryCount: c.retryCount,
      pkey: 0xffff,
      pathMtu: c.pathMtu,
      rdcExists: false,
      rnrRetryCount: c.rnrRetryCount,
      maxCmRetries: MAX_CM_RETRIES,
      srq: (req.param.srq ?? 0) !== 0,
      extendedTransportType: 0,
      primaryPath: path,
      alternatePath: emptyCmPath(),
      sapSupported: false,
      privateData: pd,
    };
    dev.activate();
    c.enter(RcCmState.REQ_SENT, 'connect');
    c.sendReliably(msg, () => {
      c.forget();
      this.upcall({ event: CmEventType.UNREACHABLE, status: -Errno.ETIMEDOUT });
    });
  }

  /** REP for our REQ. */
  rep(c: RcConn, m: CmRep): void {
    if (c.cell.is(RcCmState.ESTABLISHED) && m.localCommId === c.remoteCommId) {
      // A repeated REP: our RTU was lost.
      c.sendUnsolicited({ kind: 'RTU', localCommId: c.localCommId, remoteCommId: c.remoteCommId, privateData: new Uint8Array(0) });
      return;
    }
    if (!c.cell.in([RcCmState.REQ_SENT, RcCmState.MRA_REQ_RCVD])) {
      c.dev.counters.inc(C.rcvd_mad_unroutable_drop);
      return;
    }
    c.stopResend();
    c.remoteCommId = m.localCommId;
    c.remoteQpn = m.localQpn;
    c.sqPsn = m.startingPsn;
    // This side's ORD is at most what the responder offers, its IRD what the responder will use.
    c.ord = m.responderResources;
    c.ird = m.initiatorDepth;
    c.rnrRetryCount = m.rnrRetryCount;
    // cm.c `cm_rep_handler`: the timeout from the responder's ACK delay and the path's lifetime.
    c.avTimeout = cmAckTimeout(m.targetAckDelay, c.avTimeout - 1);
    const conn: Partial<EventConnParam> = {
      privateData: padded(m.privateData, REP_PD),
      responderResources: m.initiatorDepth,
      initiatorDepth: m.responderResources,
      flowControl: m.e2eFlowControl ? 1 : 0,
      rnrRetryCount: m.rnrRetryCount,
      srq: m.srq ? 1 : 0,
      qpNum: m.localQpn,
    };
    if (this.qp === null) {
      c.enter(RcCmState.REP_RCVD, 'REP, no QP on the id');
      this.upcall({ event: CmEventType.CONNECT_RESPONSE, conn });
      return;
    }
    try {
      this.moveQp(this.qp);
    } catch (e) {
      c.reject(CmRejReason.CONSUMER_DEFINED, new Uint8Array(0), CmMsgRef.REP);
      c.enterTimewait();
      this.upcall({ event: CmEventType.CONNECT_ERROR, status: -(e instanceof RdmaError ? e.errno : Errno.EINVAL) });
      return;
    }
    c.send({ kind: 'RTU', localCommId: c.localCommId, remoteCommId: c.remoteCommId, privateData: new Uint8Array(0) });
    c.enter(RcCmState.ESTABLISHED, 'REP, RTU sent');
    this.upcall({ event: CmEventType.ESTABLISHED, conn, localAddr: { address: c.local, port: c.localPort, family: c.family === 4 ? 'IPv4' : 'IPv6' } });
  }

  /** rdma_establish after CONNECT_RESPONSE: the RTU. */
  establish(): void {
    const c = this.conn;
    if (c === null || !c.cell.is(RcCmState.REP_RCVD)) throw err('EINVAL', 'rdma_establish', `state ${c?.cell.state ?? 'none'}`);
    c.send({ kind: 'RTU', localCommId: c.localCommId, remoteCommId: c.remoteCommId, privateData: new Uint8Array(0) });
    c.enter(RcCmState.ESTABLISHED, 'established by the application');
  }

  mra(c: RcConn, serviceTimeout: number): void {
    if (!c.cell.exch(RcCmState.REQ_SENT, RcCmState.MRA_REQ_RCVD, 'MRA') && !c.cell.in([RcCmState.MRA_REQ_RCVD, RcCmState.REP_SENT])) {
      c.dev.counters.inc(C.rcvd_mad_unroutable_drop);
      return;
    }
    // cm.c: the answer may take the service timeout plus a packet lifetime longer.
    c.stretch(2 ** Math.max(serviceTimeout - 8, 0) + 2 ** Math.max(c.avTimeout - 8, 0));
  }

  // -- passive side -----------------------------------------------------------------------------

  /** Adopt the connection of a REQ (the new id of CONNECT_REQUEST). */
  adopt(c: RcConn, req: CmReq): void {
    this.conn = c;
    c.ep = this;
    this.req = req;
  }

  async accept(a: AcceptRequest): Promise<void> {
    const op = 'rdma_accept';
    const c = this.conn;
    const req = this.req;
    if (c === null || req === null || !c.cell.in([RcCmState.REQ_RCVD, RcCmState.MRA_REQ_SENT])) throw err('EINVAL', op, 'no request to accept');
    if (a.qp !== null && !(a.qp instanceof RoceRcQp)) throw err('EINVAL', op, 'the QP is not an RC QP of a soft RoCE device');
    // As librdmacm's rdma_accept: only the id's own QP is moved to RTR and RTS here.
    const qp = a.ownQp === false ? null : a.qp;
    c.ird = a.responderResources;
    c.ord = a.initiatorDepth;
    // The REP carries the acceptor's RNR retry count for the requester's QP (cma.c
    // `cma_accept_ib`); this side's QP keeps the REQ's (cm.c `cm_req_handler`; `ib_send_cm_rep`
    // does not change it).
    const repRnrRetry = Math.min(7, a.param.rnrRetryCount ?? 7);
    this.qp = qp;
    if (qp !== null) {
      try {
        this.moveQp(qp);
      } catch (e) {
        c.reject(CmRejReason.CONSUMER_DEFINED);
        c.forget();
        throw e;
      }
    }
    const rep: CmRep = {
      kind: 'REP',
      localCommId: c.localCommId,
      remoteCommId: c.remoteCommId,
      localQkey: 0,
      localQpn: a.qp?.qpNum ?? a.param.qpNum ?? 0,
      vendorId: 0,
      localEecn: 0,
      startingPsn: c.rqPsn,
      responderResources: c.ird,
      initiatorDepth: c.ord,
      targetAckDelay: CA_ACK_DELAY,
      failoverAccepted: 0,
      e2eFlowControl: (a.param.flowControl ?? 0) !== 0,
      rnrRetryCount: repRnrRetry,
      srq: (a.param.srq ?? 0) !== 0,
      localCaGuid: caGuid(c.dev),
      privateData: a.privateData,
    };
    c.enter(RcCmState.REP_SENT, 'accept');
    if (qp instanceof RoceRcQp) qp.onCommEstablished = () => this.established(c, 'first request on the QP');
    c.sendReliably(rep, () => {
      c.forget();
      this.upcall({ event: CmEventType.UNREACHABLE, status: -Errno.ETIMEDOUT });
    });
    c.lastReply = null;
  }

  /** RTU (or the first request on the QP): the passive side is established. */
  established(c: RcConn, why: string): void {
    if (!c.cell.is(RcCmState.REP_SENT)) return;
    c.stopResend();
    c.leaveBacklog();
    c.enter(RcCmState.ESTABLISHED, why);
    if (this.qp instanceof RoceRcQp) this.qp.onCommEstablished = null;
    this.upcall({ event: CmEventType.ESTABLISHED });
  }

  reject(privateData: Uint8Array): void {
    const c = this.conn;
    if (c === null || !c.cell.in([RcCmState.REQ_RCVD, RcCmState.MRA_REQ_SENT])) throw err('EINVAL', 'rdma_reject', 'no request to reject');
    if (privateData.length > REJ_PD) throw err('EINVAL', 'rdma_reject', `private data ${privateData.length} > ${REJ_PD}`);
    c.reject(CmRejReason.CONSUMER_DEFINED, privateData);
    c.forget();
    this.conn = null;
  }

  /** REJ for this connection. */
  rejected(c: RcConn, reason: number, privateData: Uint8Array): void {
    if (c.cell.in([RcCmState.REQ_SENT, RcCmState.MRA_REQ_RCVD, RcCmState.REQ_RCVD, RcCmState.MRA_REQ_SENT, RcCmState.REP_SENT])) {
      if (reason === CmRejReason.STALE_CONN) c.enterTimewait();
      else c.forget();
    } else if (c.cell.in([RcCmState.REP_RCVD, RcCmState.DREQ_SENT, RcCmState.ESTABLISHED])) c.enterTimewait();
    else {
      c.dev.counters.inc(C.rcvd_mad_unroutable_drop);
      return;
    }
    this.qpToErr();
    this.upcall({ event: CmEventType.REJECTED, status: reason, conn: { privateData: padded(privateData, REJ_PD) } });
  }

  // -- QP ---------------------------------------------------------------------------------------

  /** INIT (access flags) → RTR → RTS with this connection's attributes (librdmacm's ucma_modify_qp_rtr/rts). */
  private moveQp(qp: Qp): void {
    // From where the QP is: INIT (access flags again, now the connection's) → RTR → RTS.
    const order = [QpState.INIT, QpState.RTR, QpState.RTS];
    const from = order.indexOf(qp.state);
    if (from < 0) throw err('EINVAL', 'rdma_connect', `QP in state ${qp.state}`);
    for (const s of order.slice(from)) {
      const { attr, mask } = this.initQpAttr(s);
      qp.modify(attr, mask);
    }
  }

  private qpToErr(): void {
    const qp = this.qp;
    if (qp !== null && qp.state !== QpState.RESET && qp.state !== QpState.ERR) {
      try {
        qp.modify({ qpState: QpState.ERR }, QpAttrMask.STATE);
      } catch {
        // destroyed by the application
      }
    }
  }

  initQpAttr(state: QpState): { attr: QpAttr; mask: number } {
    const M = QpAttrMask;
    const c = this.conn;
    switch (state) {
      case QpState.INIT: {
        // Before a connection: no remote access (cma_ib_init_qp_attr); then as cm.c: remote
        // write, plus read and atomics when this side gives responder resources.
        const access = c === null ? 0 : Access.REMOTE_WRITE | (c.ird > 0 ? Access.REMOTE_READ | Access.REMOTE_ATOMIC : 0);
        return { attr: { qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: access }, mask: M.STATE | M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS };
      }
      case QpState.RTR: {
        if (c === null || (c.remoteQpn === 0 && !c.cell.in([RcCmState.REQ_RCVD, RcCmState.MRA_REQ_SENT, RcCmState.REP_RCVD]))) {
          throw err('EINVAL', 'rdma_init_qp_attr', 'no connection');
        }
        const ah = ahTo(c.dev, c.local, c.remote, c.family, this.host.options.tos);
        if (ah.grh) {
          ah.grh.flowLabel = c.flowLabel;
          if (c.trafficClass >= 0) ah.grh.trafficClass = c.trafficClass;
        }
        return {
          attr: { qpState: QpState.RTR, ahAttr: ah, pathMtu: c.pathMtu, destQpNum: c.remoteQpn, rqPsn: c.rqPsn, maxDestRdAtomic: c.ird, minRnrTimer: 0 },
          mask: M.STATE | M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN | M.MAX_DEST_RD_ATOMIC | M.MIN_RNR_TIMER,
        };
      }
      case QpState.RTS: {
        if (c === null) throw err('EINVAL', 'rdma_init_qp_attr', 'no connection');
        // cm.c `cm_init_qp_rts_attr` (av.timeout), then cma.c `rdma_init_qp_attr` (the id's option).
        const opt = this.ackTimeoutOption;
        return {
          attr: { qpState: QpState.RTS, sqPsn: c.sqPsn, timeout: opt >= 0 ? opt : c.avTimeout, retryCnt: c.retryCount, rnrRetry: c.rnrRetryCount, maxRdAtomic: c.ord },
          mask: M.STATE | M.SQ_PSN | M.TIMEOUT | M.RETRY_CNT | M.RNR_RETRY | M.MAX_QP_RD_ATOMIC,
        };
      }
      default:
        throw err('EINVAL', 'rdma_init_qp_attr', `state ${state}`);
    }
  }

  // -- disconnect ---------------------------------------------------------------------------------

  disconnect(): boolean {
    const c = this.conn;
    if (c === null) return false;
    switch (c.cell.state) {
      case RcCmState.ESTABLISHED:
        this.qpToErr();
        c.enter(RcCmState.DREQ_SENT, 'disconnect');
        c.sendReliably({ kind: 'DREQ', localCommId: c.localCommId, remoteCommId: c.remoteCommId, remoteQpn: c.remoteQpn, privateData: new Uint8Array(0) }, () => {
          // No DREP: cm.c's DREQ_ERROR, cma reports DISCONNECTED -ETIMEDOUT.
          c.enterTimewait();
          this.disconnected(c, -Errno.ETIMEDOUT);
        });
        return true;
      case RcCmState.DREQ_RCVD:
        this.qpToErr();
        c.lastReply = c.send({ kind: 'DREP', localCommId: c.localCommId, remoteCommId: c.remoteCommId, privateData: new Uint8Array(0) });
        c.enterTimewait();
        return false;
      case RcCmState.DREQ_SENT:
        return true;
      default:
        this.qpToErr();
        return false;
    }
  }

  /** DREQ for this connection (its QPN checked by the caller). */
  dreq(c: RcConn): void {
    switch (c.cell.state) {
      case RcCmState.ESTABLISHED:
      case RcCmState.REP_SENT:
        c.stopResend();
        c.leaveBacklog();
        c.enter(RcCmState.DREQ_RCVD, 'DREQ');
        this.disconnected(c);
        return;
      case RcCmState.DREQ_SENT:
        // Both sides disconnected together: answer and finish.
        c.stopResend();
        c.lastReply = c.send({ kind: 'DREP', localCommId: c.localCommId, remoteCommId: c.remoteCommId, privateData: new Uint8Array(0) });
        c.enterTimewait();
        this.disconnected(c);
        return;
      case RcCmState.TIMEWAIT:
        c.sendUnsolicited({ kind: 'DREP', localCommId: c.localCommId, remoteCommId: c.remoteCommId, privateData: new Uint8Array(0) });
        return;
      default:
        c.dev.counters.inc(C.rcvd_mad_unroutable_drop);
    }
  }

  /** The peer's process on this host is gone: as the DREQ its kernel would have sent. */
  peerDied(c: RcConn): void {
    if (tracing('cm')) trace('cm', c.tag, 'the peer process is gone');
    if (c.cell.in([RcCmState.ESTABLISHED, RcCmState.REP_SENT, RcCmState.DREQ_SENT])) {
      if (c.cell.is(RcCmState.DREQ_SENT)) {
        c.enterTimewait();
        this.disconnected(c);
        return;
      }
      this.dreq(c);
    }
  }

  /** DREP for our DREQ. */
  drep(c: RcConn): void {
    if (!c.cell.is(RcCmState.DREQ_SENT)) {
      c.dev.counters.inc(C.rcvd_mad_unroutable_drop);
      return;
    }
    c.enterTimewait();
    this.disconnected(c);
  }

  /** DISCONNECTED for connection `c`. */
  private disconnected(c: RcConn, status = 0): void {
    c.disconnectReported = true;
    this.upcall(status === 0 ? { event: CmEventType.DISCONNECTED } : { event: CmEventType.DISCONNECTED, status });
  }

  /**
   * The connection left TIMEWAIT. cma.c passes IB_CM_TIMEWAIT_EXIT on only to an id in
   * RDMA_CM_DISCONNECT: one that reported DISCONNECTED. A connection that entered TIMEWAIT
   * through a REJ (stale connection, or a REJ after the REP) ends silently.
   */
  timewaitExit(c: RcConn): void {
    if (this.conn === c) this.conn = null;
    if (c.disconnectReported) this.upcall({ event: CmEventType.TIMEWAIT_EXIT });
  }

  destroy(): void {
    this.dead = true;
    const c = this.conn;
    this.conn = null;
    if (c === null) return;
    c.ep = null;
    switch (c.cell.state) {
      case RcCmState.REQ_SENT:
      case RcCmState.MRA_REQ_RCVD:
        // cm.c: REJ "timeout" with this CA's GUID as ARI (the responder finds its request by it).
        c.reject(CmRejReason.TIMEOUT, new Uint8Array(0), CmMsgRef.REQ, guidBytes(caGuid(c.dev)));
        c.forget();
        break;
      case RcCmState.REQ_RCVD:
      case RcCmState.MRA_REQ_SENT:
      case RcCmState.REP_SENT:
        c.reject(CmRejReason.CONSUMER_DEFINED, new Uint8Array(0), c.cell.is(RcCmState.REP_SENT) ? CmMsgRef.REP : CmMsgRef.REQ);
        c.forget();
        break;
      case RcCmState.REP_RCVD:
        c.reject(CmRejReason.CONSUMER_DEFINED, new Uint8Array(0), CmMsgRef.REP);
        c.enterTimewait();
        break;
      case RcCmState.ESTABLISHED:
        c.send({ kind: 'DREQ', localCommId: c.localCommId, remoteCommId: c.remoteCommId, remoteQpn: c.remoteQpn, privateData: new Uint8Array(0) });
        c.enterTimewait();
        break;
      case RcCmState.DREQ_SENT:
        c.enterTimewait();
        break;
      case RcCmState.DREQ_RCVD:
        c.send({ kind: 'DREP', localCommId: c.localCommId, remoteCommId: c.remoteCommId, privateData: new Uint8Array(0) });
        c.enterTimewait();
        break;
      default:
        break;
    }
    if (this.qp instanceof RoceRcQp) this.qp.onCommEstablished = null;
  }

  private upcall(ev: Parameters<CmHost['upcall']>[0]): void {
    if (!this.dead) this.host.upcall(ev);
  }
}

// -- incoming MADs ---------------------------------------------------------------------------

function drop(dev: RoceDevice, why: string): void {
  dev.counters.inc(C.rcvd_mad_unroutable_drop);
  if (tracing('cm')) trace('cm', dev.name, `MAD dropped: ${why}`);
}

/** A reply naming connection `c` that came from somewhere other than its peer. */
function dropForeign(dev: RoceDevice, c: RcConn, kind: string, meta: RxMeta, srcQp: number): void {
  dev.counters.inc(C.rcvd_mad_src_drop);
  if (tracing('cm')) trace('cm', c.tag, `${kind} from ${meta.src} QP ${srcQp} dropped: the peer is ${c.remote}`);
}

/** Whether a MAD came from the peer of connection `c`: its address, its GSI QP. */
function fromPeer(c: RcConn, meta: RxMeta, srcQp: number): boolean {
  return c.remote === meta.src && srcQp === GSI_QPN;
}

/** A connected-mode MAD for this process (called by roce-cm.ts's GSI agent). */
function receive(dev: RoceDevice, mad: CmMad, meta: RxMeta, srcQp: number): void {
  const m = mad.msg;
  switch (m.kind) {
    case 'REQ':
      request(dev, m, mad.hdr.tid, meta);
      return;
    case 'DREQ': {
      const c = conns.get(m.remoteCommId);
      if (c !== undefined && !fromPeer(c, meta, srcQp)) return dropForeign(dev, c, m.kind, meta, srcQp);
      if (c === undefined) {
        // cm.c answers a DREQ for no connection with a DREP, so the peer stops resending.
        if (!mayReply(dev)) return;
        const drep = encodeCmMad({ kind: 'DREP', localCommId: m.remoteCommId, remoteCommId: m.localCommId, privateData: new Uint8Array(0) }, mad.hdr.tid);
        sendMad(dev, drep, meta.dst, meta.src, meta.family);
        return;
      }
      if (m.localCommId !== c.remoteCommId) return drop(dev, 'DREQ from another connection');
      const qpn = c.ep?.qpNum();
      if (qpn !== undefined && qpn !== m.remoteQpn) return drop(dev, `DREQ for QPN 0x${m.remoteQpn.toString(16)}`);
      if (c.ep === null) {
        if (c.cell.is(RcCmState.TIMEWAIT)) c.sendUnsolicited({ kind: 'DREP', localCommId: c.localCommId, remoteCommId: c.remoteCommId, privateData: new Uint8Array(0) });
        return;
      }
      c.ep.dreq(c);
      return;
    }
    case 'REJ': {
      const named = conns.get(m.remoteCommId);
      if (named !== undefined && !fromPeer(named, meta, srcQp)) return dropForeign(dev, named, m.kind, meta, srcQp);
      const c = rejectedConn(m, meta);
      if (c !== undefined && srcQp !== GSI_QPN) return dropForeign(dev, c, m.kind, meta, srcQp);
      if (c === undefined) return drop(dev, `REJ (${m.reason}, of message ${m.messageRejected}) for no connection in a state to take it`);
      if (c.ep === null) return drop(dev, 'REJ for a connection without an id');
      c.ep.rejected(c, m.reason, m.privateData);
      return;
    }
    case 'REP':
    case 'MRA':
    case 'RTU':
    case 'DREP': {
      const c = conns.get(m.remoteCommId);
      if (c === undefined) return drop(dev, `${m.kind} for unknown connection 0x${m.remoteCommId.toString(16)}`);
      if (!fromPeer(c, meta, srcQp)) return dropForeign(dev, c, m.kind, meta, srcQp);
      // Once the peer's ID is known, every message must carry it.
      if (c.remoteCommId !== 0 && m.localCommId !== c.remoteCommId) return drop(dev, `${m.kind} from another connection`);
      const ep = c.ep;
      if (ep === null) return drop(dev, `${m.kind} for a connection without an id`);
      if (m.kind === 'REP') ep.rep(c, m);
      else if (m.kind === 'MRA') ep.mra(c, m.serviceTimeout);
      else if (m.kind === 'RTU') {
        if (c.cell.is(RcCmState.REP_SENT)) ep.established(c, 'RTU');
        else if (!c.cell.is(RcCmState.ESTABLISHED)) drop(dev, `RTU in ${c.cell.state}`);
      } else ep.drep(c);
      return;
    }
    default:
      drop(dev, `${m.kind} not handled`);
  }
}

/**
 * The connection a REJ is for, as cm.c's `cm_acquire_rejected_id` finds it: a REJ of a REQ
 * names only our ID (and fits only a connection that has not learnt the peer's yet); a REJ of
 * any other message both IDs; a REJ "timeout" (the requester gave up) the requester's ID, with
 * its CA GUID as ARI, for a request we hold.
 */
function rejectedConn(m: CmRej, meta: RxMeta): RcConn | undefined {
  if (m.reason === CmRejReason.TIMEOUT) {
    const r = byRemote.get(remoteKey(meta.src, m.localCommId));
    if (r !== undefined) return r;
  }
  const c = conns.get(m.remoteCommId);
  if (c === undefined || c.remote !== meta.src) return undefined;
  if (m.messageRejected === CmMsgRef.REQ ? c.remoteCommId !== 0 : m.localCommId !== c.remoteCommId) return undefined;
  return c;
}

/** A REQ: match a listener, or REJ. */
function request(dev: RoceDevice, m: CmReq, tid: bigint, meta: RxMeta): void {
  const dup = byRemote.get(remoteKey(meta.src, m.localCommId));
  if (dup !== undefined) {
    repeatedRequest(dup);
    return;
  }
  // A connection answers with this side's addresses as the REQ names them.
  let c: RcConn;
  try {
    c = new RcConn(dev, meta.dst, meta.src, meta.family, null, tid);
  } catch {
    return drop(dev, 'no communication ID free');
  }
  c.remoteCommId = m.localCommId;
  c.remoteQpn = m.localQpn;
  c.sqPsn = m.startingPsn;
  c.retryCount = m.retryCount;
  c.rnrRetryCount = m.rnrRetryCount;
  // cm.c `cm_format_paths_from_req` + `cm_init_av_by_path`: lifetime = the REQ's value − 1 (not
  // below 0), av.timeout = lifetime + 1.
  c.avTimeout = Math.max(m.primaryPath.localAckTimeout - 1, 0) + 1;
  c.flowLabel = m.primaryPath.flowLabel;
  c.trafficClass = m.primaryPath.trafficClass;
  const refuse = (reason: number, why: string, ari?: Uint8Array): void => {
    if (tracing('cm')) trace('cm', dev.name, `REQ from ${meta.src} refused (${reason}): ${why}`);
    c.reject(reason, new Uint8Array(0), CmMsgRef.REQ, ari, true);
    c.forget();
  };
  const sid = m.serviceId;
  const { ps, port } = cmaServiceIdParts(sid);
  const l = findListener(sid);
  if (l === undefined || (ps !== PortSpace.TCP && ps !== PortSpace.IB)) return refuse(CmRejReason.INVALID_SERVICE_ID, 'nobody listens');
  if (!dev.ownsGid(m.primaryPath.remoteGid)) return refuse(CmRejReason.INVALID_GID, 'not a GID of this port', dev.gid(0));
  if (m.pathMtu < Mtu.MTU_256 || m.pathMtu > Mtu.MTU_4096) return refuse(CmRejReason.INVALID_MTU, `path MTU ${m.pathMtu}`);
  let hdr;
  try {
    hdr = decodeCmaHeader(m.privateData);
  } catch {
    return refuse(CmRejReason.CONSUMER_DEFINED, 'no CMA header');
  }
  if (hdr.version !== 0 || m.transportType !== CmTransportType.RC || l.host.qpType !== QpType.RC) return refuse(CmRejReason.CONSUMER_DEFINED, 'not an RC request of rdma_cm');
  const dstText = ipFromGid(gidFromBytes(hdr.dst)).ip;
  const la = l.addr.address;
  const fits = isAnyAddr(la) ? la !== '0.0.0.0' || hdr.ipVersion === 4 : familyOf(l.addr) === hdr.ipVersion && la === dstText;
  if (!fits) return refuse(CmRejReason.CONSUMER_DEFINED, 'the CMA header does not fit the listener');
  const ldev = l.host.deviceFor(meta.dst);
  if (ldev === undefined || ldev.provider !== RXE_PROVIDER) return refuse(CmRejReason.CONSUMER_DEFINED, 'the listener does not serve this device');
  const open = halfOpen.get(l.host) ?? 0;
  if (open >= l.backlog) {
    // The kernel's rdma_cm refuses a CONNECT_REQUEST past the backlog with -ENOMEM, on which
    // cm.c drops the REQ without a REJ ("to allow future retries"): the requester's resends
    // find room once a half-open connection ends.
    dev.counters.inc(C.rcvd_req_backlog_drop);
    if (tracing('cm')) trace('cm', dev.name, `REQ from ${meta.src} dropped: ${open} half-open connections (backlog ${l.backlog})`);
    c.forget();
    return;
  }
  c.pathMtu = Math.min(m.pathMtu, dev.pathMtu || m.pathMtu);
  c.backlogOf = l.host;
  halfOpen.set(l.host, open + 1);
  byRemote.set(remoteKey(meta.src, m.localCommId), c);
  c.enter(RcCmState.REQ_RCVD, 'REQ');
  const user = padded(m.privateData.subarray(CMA_HDR_LEN), CMA_REQ_USER_PD);
  const srcText = ipFromGid(gidFromBytes(hdr.src)).ip;
  let adopted = false;
  l.host.upcall({
    event: CmEventType.CONNECT_REQUEST,
    request: {
      context: ldev.open(),
      portNum: 1,
      local: { address: meta.dst, port, family: meta.family === 4 ? 'IPv4' : 'IPv6' },
      remote: { address: srcText, port: hdr.srcPort, family: hdr.ipVersion === 4 ? 'IPv4' : 'IPv6' },
      conn: {
        privateData: user,
        responderResources: m.initiatorDepth,
        initiatorDepth: m.responderResources,
        flowControl: m.e2eFlowControl ? 1 : 0,
        retryCount: m.retryCount,
        rnrRetryCount: m.rnrRetryCount,
        srq: m.srq ? 1 : 0,
        qpNum: m.localQpn,
      },
      adopt: (host) => {
        adopted = true;
        const ep = new RcEndpoint(host);
        ep.adopt(c, m);
        return ep;
      },
      refuse: () => {
        if (!adopted && c.cell.is(RcCmState.REQ_RCVD)) refuse(CmRejReason.CONSUMER_DEFINED, 'the listener is gone');
      },
    },
  });
  if (!adopted && c.cell.is(RcCmState.REQ_RCVD)) refuse(CmRejReason.CONSUMER_DEFINED, 'not taken');
}

/**
 * REP resends to a requester not heard from since its REQ (the resends of cm.c go on to the
 * REQ's max CM retries, 15 with rdma_cm, whoever sent the REQ). A real requester whose RTU was
 * lost gets the REP three more times, each answered by a fresh RTU; its first request on the QP
 * establishes the connection as well.
 */
const REP_RESENDS_UNHEARD = 3;

/** The same REQ again (cm.c `cm_dup_req_handler` with rdma_cm's prepared MRA). */
function repeatedRequest(c: RcConn): void {
  switch (c.cell.state) {
    case RcCmState.REQ_RCVD:
    case RcCmState.MRA_REQ_SENT:
      c.cell.exch(RcCmState.REQ_RCVD, RcCmState.MRA_REQ_SENT, 'repeated REQ');
      c.sendUnsolicited({ kind: 'MRA', localCommId: c.localCommId, remoteCommId: c.remoteCommId, messageMraed: CmMsgRef.REQ, serviceTimeout: MRA_SERVICE_TIMEOUT, privateData: new Uint8Array(0) });
      return;
    case RcCmState.TIMEWAIT:
      c.reject(CmRejReason.STALE_CONN, undefined, undefined, undefined, true);
      return;
    case RcCmState.REP_SENT:
      // The requester is there (its REQ came again: our REP was lost); the REP's own resend
      // answers it, and may now go on until the retries run out.
      c.peerHeard = true;
      c.dev.counters.inc(C.rcvd_mad_unroutable_drop);
      return;
    default:
      // REP_SENT: the REP is being resent anyway; ESTABLISHED: nothing to do.
      c.dev.counters.inc(C.rcvd_mad_unroutable_drop);
  }
}

connectedCm.createEndpoint = (host) => new RcEndpoint(host);
connectedCm.mad = receive;
