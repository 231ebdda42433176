/**
 * The connection manager of the soft RoCE device for datagram ids (RDMA_PS_UDP, RDMA_PS_IPOIB):
 * the parts of the kernel's ib_cm (cm.c) and cma.c that rdma_cm uses over RoCE for UD —
 * service ID resolution (SIDR) over the GSI QP, and multicast joins, which on RoCE never leave the
 * host (cma.c `cma_iboe_join_multicast`: the MGID is the group address, the join is an IGMP join
 * done when the QP attaches).
 *
 * SIDR (cm.c `ib_send_cm_sidr_req` / `cm_sidr_req_handler`, cma.c `cma_resolve_ib_udp`,
 * `cma_sidr_rep_handler`):
 * - rdma_connect on a UD id sends a SIDR_REQ MAD to QP1 of the peer: service ID
 *   `(port space << 16) | port`, P_Key 0xFFFF, private data = the 36-byte CMA header (addresses
 *   and source port) + the user's bytes. It is sent again every `timeoutMs` (cma: 2^(20-8) ms)
 *   up to `retries` times (15), then the id gets UNREACHABLE with -ETIMEDOUT.
 * - The passive side finds the listener of (port space, port) whose address fits the CMA header's
 *   destination; none: SIDR_REP status 1 (unsupported service). Otherwise CONNECT_REQUEST carries
 *   the 180 user bytes and the address handle back to the requester; rdma_accept answers
 *   SIDR_REP status 0 with the QP number and Q_Key 0x01234567, rdma_reject status 2 with the
 *   application's bytes (up to 136).
 * - The active side: status 0 and the Q_Key of the port space → ESTABLISHED with `param.ud`
 *   (QPN, Q_Key, address handle, the 136 private bytes); another Q_Key → ADDR_ERROR -EINVAL
 *   (`cma_set_qkey`); status ≠ 0 → UNREACHABLE with that status and the private bytes.
 *
 * MADs for QP1 reach the right process of the host through the port agent's GSI router: requests
 * by service ID (a listening process publishes `@rdmacm-roce-<port>-svc-<service id>`), replies by
 * the QPN block in the request ID, which this side makes `block << 18 | 18 random bits` (drawn
 * from the CSPRNG, unique among this process's live requests and connections).
 *
 * A SIDR_REP is taken only from the address and the GSI QP its SIDR_REQ went to; one from
 * anywhere else is dropped and counted (`rcvd_mad_src_drop`), so a third host that learns or
 * guesses a request ID cannot point the requester at a QP of its choice.
 */
import { err } from '../../errors.js';
import { Errno } from '../../errno.js';
import { trace, tracing } from '../../trace.js';
import { QpState, QpType } from '../../verbs/types.js';
import { QpAttrMask, type QpAttr } from '../../verbs/qp-attr.js';
import type { AhAttr } from '../../verbs/ah.js';
import type { Context } from '../../verbs/context.js';
import {
  CmEventType,
  PortSpace,
  registerCmTransport,
  RDMA_UDP_QKEY,
  serviceId,
  type AcceptRequest,
  type CmEndpoint,
  type CmHost,
  type CmListener,
  type CmTransport,
  type ConnectRequest,
  type ListenRequest,
  type McJoin,
  type SockAddr,
  type UdParam,
} from '../../cm/transport.js';
import {
  encodeCmMad,
  decodeCmMad,
  cmMadHeaderProblem,
  CmAttrId,
  CmSidrStatus,
  encodeGsiPacket,
  encodeCmaPrivateData,
  decodeCmaHeader,
  cmaServiceIdParts,
  cmaIboeMgid,
  CMA_HDR_LEN,
  CMA_REQ_USER_PD,
  CMA_SIDR_USER_PD,
  CmPrivateDataLen,
  MAD_SIZE,
  MAD_HDR_LEN,
  GSI_MAD_OFF,
  GSI_QPN,
  DETH_LEN,
  dethSrcQp,
  gsiCmAttrId,
  IB_MULTICAST_QPN,
  type CmSidrReq,
  type CmSidrRep,
  type CmMad,
} from '../../wire/roce/index.js';
import { C } from './counters.js';
import { mayReply } from './reply-limit.js';
import { RoceDevice, ipBytes, setGsiHandler } from './device.js';
import { gidFromIp, ipFromGid } from './gid.js';
import { PortAgent, type GsiRoute, type RxMeta } from './udp.js';
import { ephemeralPort } from './local-port.js';
import { envInt } from '../../util/env.js';
import { random } from '../../util/random.js';
import { RXE_PROVIDER, rxeDeviceInfos } from './provider.js';

/** SIDR_REP, REP and REJ private data (bytes; a REQ's is CMA_REQ_USER_PD after the CMA header). */
const SIDR_REP_PD = CmPrivateDataLen.SIDR_REP;
const REP_PD = CmPrivateDataLen.REP;
const REJ_PD = CmPrivateDataLen.REJ;
/** The hop limit of RoCEv2 paths and groups (rdma_cm: `IPV6_DEFAULT_HOPLIMIT`). */
export const HOP_LIMIT = 64;
/** Request and communication IDs: `block << 18 | 18 random bits`. */
export const REQ_ID_SHIFT = 18;
/** Random draws for a free ID before the IDs of the block are searched in order. */
const REQ_ID_DRAWS = 32;

/** Tunables of the RoCE CM. */
export interface RoceCmConfig {
  /** SIDR_REQ response timeout before a resend (ms). cma: `1 << (CMA_CM_RESPONSE_TIMEOUT - 8)` = 4096. */
  sidrTimeoutMs: number;
  /** SIDR_REQ resends before UNREACHABLE. cma: `CMA_MAX_CM_RETRIES` = 15. */
  sidrRetries: number;
}

const config: RoceCmConfig = {
  sidrTimeoutMs: Math.max(1, envInt('RDMACM_ROCE_SIDR_TIMEOUT_MS', 4096)),
  sidrRetries: envInt('RDMACM_ROCE_SIDR_RETRIES', 15),
};

/** Change the RoCE CM tunables (environment defaults: `RDMACM_ROCE_SIDR_TIMEOUT_MS`, `RDMACM_ROCE_SIDR_RETRIES`). */
export function configureRoceCm(c: Partial<RoceCmConfig>): void {
  if (c.sidrTimeoutMs !== undefined) config.sidrTimeoutMs = Math.max(1, Math.floor(c.sidrTimeoutMs));
  if (c.sidrRetries !== undefined) config.sidrRetries = Math.max(0, Math.floor(c.sidrRetries));
}

/** The current RoCE CM tunables (a copy). */
export function roceCmConfig(): RoceCmConfig {
  return { ...config };
}

// -- addresses --------------------------------------------------------------------------------

export function familyOf(a: SockAddr): 4 | 6 {
  return a.address.includes(':') ? 6 : 4;
}

export function isAnyAddr(ip: string): boolean {
  return ip === '0.0.0.0' || ip === '::' || ip === '';
}

/** The soft RoCE device of a context. */
export function devOf(ctx: Context | null, op: string): RoceDevice {
  if (!ctx || ctx.device.provider !== RXE_PROVIDER) throw err('EINVAL', op, 'id not on a soft RoCE device');
  return RoceDevice.of(ctx.device.info);
}

/** The address handle attributes from local address `local` to `remote` on `dev`. */
export function ahTo(dev: RoceDevice, local: string, remote: string, family: 4 | 6, tos: number): AhAttr {
  const sg = dev.gidOfIp(local, family) ?? dev.gids.find((e) => e.family === family && e.index > 0) ?? dev.gids[0];
  return {
    isGlobal: true,
    portNum: 1,
    grh: { dgid: gidFromIp(remote) ?? new Uint8Array(16), flowLabel: 0, sgidIndex: sg?.index ?? 0, hopLimit: HOP_LIMIT, trafficClass: tos > 0 ? tos : 0 },
  };
}

// -- GSI: sending MADs ---------------------------------------------------------------------------

/**
 * The BTH PSN of our QP1 datagrams. UD receivers do not check PSNs (rxe neither), so it protects
 * nothing; it counts from 0 as the kernel's GSI QP does (ib_mad.c `IB_MAD_SEND_Q_PSN`).
 */
let gsiPsn = 0;
/** The request IDs (SIDR) and communication IDs (connected CM) this process holds. */
const liveIds = new Set<number>();

/**
 * A new request or communication ID: the QPN block of this process in the high bits (the GSI
 * router of the host finds the process by it) and 18 bits from the CSPRNG, none of them an ID
 * this process still holds, so a peer cannot foresee the next one from those it has seen
 * (Linux's cm.c XORs a cyclic counter with one word drawn at boot, `random_id_operand`: hidden
 * from a peer until it has seen one ID, sequential after). Held until {@link releaseRequestId}.
 */
export function newRequestId(agent: PortAgent): number {
  const hi = agent.anyBlock() << REQ_ID_SHIFT;
  const span = 1 << REQ_ID_SHIFT;
  for (let i = 0; i < REQ_ID_DRAWS; i++) {
    const id = (hi | random.below(span)) >>> 0;
    if (!liveIds.has(id)) {
      liveIds.add(id);
      return id;
    }
  }
  const start = random.below(span);
  for (let i = 0; i < span; i++) {
    const id = (hi | ((start + i) % span)) >>> 0;
    if (!liveIds.has(id)) {
      liveIds.add(id);
      return id;
    }
  }
  throw err('ENOMEM', 'rdma_connect', 'every request ID of the QPN block is in use');
}

/** An ID from {@link newRequestId} is no longer in use. */
export function releaseRequestId(id: number): void {
  liveIds.delete(id);
}

/** Send MAD `mad` from QP1 of `dev` at local address `src` to QP1 at `dst`. */
export function sendMad(dev: RoceDevice, mad: Uint8Array, src: string, dst: string, family: 4 | 6): void {
  const agent = dev.agent;
  const pkt = encodeGsiPacket(mad, { family, src: ipBytes(src, family), dst: ipBytes(dst, family), sport: agent.port, dport: agent.port }, { psn: gsiPsn });
  gsiPsn = (gsiPsn + 1) & 0xffffff;
  dev.transmitFrom(Buffer.from(pkt.buffer, pkt.byteOffset, pkt.byteLength), src, dst, family, HOP_LIMIT);
}

/** Answer `req`; an answer no application gave (`unsolicited`) goes within the reply budget (reply-limit.ts). */
function sendSidrRep(dev: RoceDevice, req: PendingRequest, rep: Omit<CmSidrRep, 'kind' | 'requestId' | 'addInfoLength' | 'vendorId' | 'addInfo' | 'serviceId'>, unsolicited = false): void {
  const msg: CmSidrRep = {
    kind: 'SIDR_REP',
    requestId: req.requestId,
    addInfoLength: 0,
    vendorId: 0,
    addInfo: new Uint8Array(72),
    serviceId: req.serviceId,
    ...rep,
  };
  leaveSidrBacklog(req);
  req.lastRep = encodeCmMad(msg, req.tid);
  if (!unsolicited || mayReply(dev)) sendMad(dev, req.lastRep, req.local, req.remote, req.family);
}

// -- state of this process ---------------------------------------------------------------------

/** A SIDR_REQ this side received, until answered (and kept a while to answer duplicates). */
interface PendingRequest {
  requestId: number;
  tid: bigint;
  serviceId: bigint;
  /** Our address the request reached, the requester's address. */
  local: string;
  remote: string;
  family: 4 | 6;
  dev: RoceDevice;
  /** The SIDR_REP sent, resent for a duplicate request. */
  lastRep: Uint8Array | null;
  /** The listener whose backlog this unanswered request holds a place of. */
  backlogOf?: CmHost | null;
}

/**
 * SIDR_REQs reported to a listener and not answered yet (accept, reject, destroy), per listener
 * host: at most its backlog, as the connected CM's half-open connections (cm-rc.ts).
 */
const sidrUnanswered = new Map<CmHost, number>();

/** `req` is answered (or dropped): its place in the listener's backlog is free again. */
function leaveSidrBacklog(req: PendingRequest): void {
  const h = req.backlogOf;
  if (!h) return;
  req.backlogOf = null;
  const n = (sidrUnanswered.get(h) ?? 1) - 1;
  if (n <= 0) sidrUnanswered.delete(h);
  else sidrUnanswered.set(h, n);
}

export interface Listener {
  host: CmHost;
  addr: SockAddr;
  ps: PortSpace;
  port: number;
  /** rdma_listen's backlog: the half-open connections the listener may have (cm-rc.ts). */
  backlog: number;
}

/** Listeners by service ID (hex). */
const listeners = new Map<string, Listener>();

/** The listener of service ID `sid` in this process, if any. */
export function findListener(sid: bigint): Listener | undefined {
  return listeners.get(sidKey(sid));
}

/**
 * The connected-mode half of the IB CM (REQ/REP/RTU/DREQ/DREP for RDMA_PS_TCP ids, cm-rc.ts)
 * plugs in here: it makes the endpoints of connected ids and takes the MADs other than SIDR.
 */
export const connectedCm: {
  createEndpoint: ((host: CmHost) => CmEndpoint) | null;
  mad: ((dev: RoceDevice, mad: CmMad, meta: RxMeta, srcQp: number) => void) | null;
} = { createEndpoint: null, mad: null };
/** Active endpoints waiting for a SIDR_REP, by request ID. */
const waiting = new Map<number, RoceEndpoint>();
/** Requests received, by `remote/requestId`, to answer duplicates. */
const received = new Map<string, PendingRequest>();
/** How long an answered request is remembered for duplicates (ms). */
const RECEIVED_KEEP_MS = 30_000;

export function sidKey(sid: bigint): string {
  return BigInt.asUintN(64, sid).toString(16).padStart(16, '0');
}

// -- GSI: receiving MADs -----------------------------------------------------------------------

/** Route a QP1 datagram to the process it is for (installed as the port agent's GSI router). */
function gsiRoute(pkt: Buffer): GsiRoute {
  const attr = gsiCmAttrId(pkt);
  if (attr < 0) return { to: 'local' };
  const body = GSI_MAD_OFF + MAD_HDR_LEN;
  switch (attr) {
    case CmAttrId.SIDR_REQ:
    case CmAttrId.REQ:
      return { to: 'service', name: sidKey(pkt.readBigUInt64BE(body + 8)) };
    case CmAttrId.SIDR_REP:
      return { to: 'block', block: pkt.readUInt32BE(body) >>> REQ_ID_SHIFT };
    case CmAttrId.REP:
    case CmAttrId.REJ:
    case CmAttrId.MRA:
    case CmAttrId.RTU:
    case CmAttrId.DREQ:
    case CmAttrId.DREP:
      return { to: 'block', block: pkt.readUInt32BE(body + 4) >>> REQ_ID_SHIFT };
    default:
      return { to: 'local' };
  }
}

/** The GSI agent of every device: a MAD for this process. */
function gsiReceive(buf: Buffer, meta: RxMeta, dev: RoceDevice): void {
  if (buf.length < GSI_MAD_OFF + MAD_SIZE) {
    dev.counters.inc(C.rcvd_mad_unroutable_drop);
    return;
  }
  let mad;
  try {
    mad = decodeCmMad(buf, GSI_MAD_OFF);
  } catch {
    dev.counters.inc(C.rcvd_mad_unroutable_drop);
    return;
  }
  if (cmMadHeaderProblem(mad.hdr) !== null) {
    dev.counters.inc(C.rcvd_mad_unroutable_drop);
    return;
  }
  const m = mad.msg;
  const srcQp = dethSrcQp(buf, GSI_MAD_OFF - DETH_LEN);
  if (m.kind === 'SIDR_REQ') sidrRequest(dev, m, mad.hdr.tid, meta);
  else if (m.kind === 'SIDR_REP') sidrReplyIn(dev, m, meta, srcQp);
  else if (connectedCm.mad !== null) connectedCm.mad(dev, mad, meta, srcQp);
  else {
    dev.counters.inc(C.rcvd_mad_unroutable_drop);
    if (tracing('cm')) trace('cm', dev.name, `${m.kind} ignored: connected ids are not served`);
  }
}

/** A SIDR_REP: for the request it names, and only from where that request went. */
function sidrReplyIn(dev: RoceDevice, m: CmSidrRep, meta: RxMeta, srcQp: number): void {
  const ep = waiting.get(m.requestId);
  if (ep === undefined) {
    dev.counters.inc(C.rcvd_mad_unroutable_drop);
    if (tracing('cm')) trace('cm', dev.name, `SIDR_REP for unknown request 0x${m.requestId.toString(16)}`);
    return;
  }
  if (!ep.askedOf(meta.src, srcQp)) {
    dev.counters.inc(C.rcvd_mad_src_drop);
    if (tracing('cm')) trace('cm', dev.name, `SIDR_REP 0x${m.requestId.toString(16)} from ${meta.src} QP ${srcQp}: not where the request went`);
    return;
  }
  ep.sidrReply(m);
}

function sidrRequest(dev: RoceDevice, m: CmSidrReq, tid: bigint, meta: RxMeta): void {
  const key = `${meta.src}/${m.requestId}`;
  const dup = received.get(key);
  if (dup) {
    if (dup.lastRep && mayReply(dev)) sendMad(dev, dup.lastRep, dup.local, dup.remote, dup.family);
    return;
  }
  const req: PendingRequest = { requestId: m.requestId, tid, serviceId: m.serviceId, local: meta.dst, remote: meta.src, family: meta.family, dev, lastRep: null };
  // A refusal is not remembered: a duplicate is refused again the same way, and forged requests
  // for unknown services leave nothing behind.
  const refuse = (status: number): void => {
    sendSidrRep(dev, req, { status, qpn: 0, qkey: 0, privateData: new Uint8Array(0) }, true);
  };
  let hdr;
  try {
    hdr = decodeCmaHeader(m.privateData);
  } catch {
    refuse(CmSidrStatus.UNSUPPORTED);
    return;
  }
  const { ps, port } = cmaServiceIdParts(m.serviceId);
  const l = listeners.get(sidKey(m.serviceId));
  const hdrFamily = hdr.ipVersion;
  const dstText = ipFromGid(gidFromBytes(hdr.dst)).ip;
  const fits =
    l !== undefined &&
    (ps === PortSpace.UDP || ps === PortSpace.IPOIB || ps === PortSpace.IB) &&
    (isAnyAddr(l.addr.address) ? l.addr.address !== '0.0.0.0' || hdrFamily === 4 : familyOf(l.addr) === hdrFamily && l.addr.address === dstText);
  if (!l || !fits) {
    refuse(CmSidrStatus.UNSUPPORTED);
    return;
  }
  const ctx = l.host.deviceFor(meta.dst)?.open() ?? null;
  if (!ctx || ctx.device.provider !== RXE_PROVIDER) {
    refuse(CmSidrStatus.UNSUPPORTED);
    return;
  }
  const waitingFor = sidrUnanswered.get(l.host) ?? 0;
  if (waitingFor >= l.backlog) {
    // As a REQ past a connected listener's backlog: dropped, no answer, so the requester's
    // resend finds room later.
    dev.counters.inc(C.rcvd_req_backlog_drop);
    if (tracing('cm')) trace('cm', dev.name, `SIDR_REQ from ${meta.src} dropped: ${waitingFor} unanswered (backlog ${l.backlog})`);
    return;
  }
  req.backlogOf = l.host;
  sidrUnanswered.set(l.host, waitingFor + 1);
  remember(key, req);
  const user = new Uint8Array(CMA_SIDR_USER_PD);
  user.set(m.privateData.subarray(CMA_HDR_LEN, CMA_HDR_LEN + CMA_SIDR_USER_PD));
  const srcText = ipFromGid(gidFromBytes(hdr.src)).ip;
  let adopted = false;
  l.host.upcall({
    event: CmEventType.CONNECT_REQUEST,
    request: {
      context: ctx,
      portNum: 1,
      local: { address: meta.dst, port },
      remote: { address: srcText, port: hdr.srcPort },
      ud: { privateData: user, ahAttr: ahTo(dev, meta.dst, meta.src, meta.family, -1), qpNum: 0, qkey: 0 },
      adopt: (host) => {
        adopted = true;
        const ep = new RoceEndpoint(host);
        ep.pending = req;
        return ep;
      },
      refuse: () => {
        if (!adopted) sendSidrRep(dev, req, { status: CmSidrStatus.REJECT, qpn: 0, qkey: 0, privateData: new Uint8Array(0) });
      },
    },
  });
  if (!adopted) leaveSidrBacklog(req);
  if (tracing('cm')) trace('cm', dev.name, `SIDR_REQ 0x${m.requestId.toString(16)} from ${meta.src} for port ${port}`);
}

function remember(key: string, req: PendingRequest): void {
  received.set(key, req);
  setTimeout(() => {
    if (received.get(key) === req) received.delete(key);
  }, RECEIVED_KEEP_MS).unref();
}

/** 16 address bytes, or 4 for IPv4, as a GID. */
export function gidFromBytes(b: Uint8Array): Uint8Array {
  if (b.length === 16) return Uint8Array.from(b);
  const g = new Uint8Array(16);
  g[10] = 0xff;
  g[11] = 0xff;
  g.set(b, 12);
  return g;
}

// -- the endpoint of one id ----------------------------------------------------------------------

/** The RoCE half of one datagram rdma_cm_id. */
class RoceEndpoint implements CmEndpoint {
  /** Passive side: the SIDR_REQ to answer. */
  pending: PendingRequest | null = null;
  /** Active side: the request in flight. */
  private requestId = -1;
  private timer: NodeJS.Timeout | null = null;
  private dead = false;
  private dev: RoceDevice | null = null;
  private peer: { local: string; remote: string; family: 4 | 6 } | null = null;

  constructor(private readonly host: CmHost) {}

  /**
   * The Q_Key of this id's port space (cma.c `cma_set_qkey`): RDMA_UDP_QKEY for UDP ids. An
   * RDMA_PS_IPOIB id takes the Q_Key of the port's IPoIB broadcast group from the SA multicast
   * client (`ib_sa_get_mcmember_rec`), which serves no RoCE port: ENODEV, so such an id gets no
   * QP (`rdma_init_qp_attr` fails) and completes no SIDR exchange.
   */
  private qkeyOf(op: string): number {
    if (this.host.portSpace === PortSpace.IPOIB) throw err('ENODEV', op, 'no IPoIB broadcast group (Q_Key) on a RoCE port');
    return RDMA_UDP_QKEY;
  }

  async connect(req: ConnectRequest): Promise<void> {
    const op = 'rdma_connect';
    const dev = devOf(this.host.context, op);
    const family = familyOf(req.dst);
    const local = isAnyAddr(req.src.address) ? (this.host.localAddr?.address ?? '') : req.src.address;
    if (!local || isAnyAddr(local)) throw err('EINVAL', op, 'no local address');
    this.dev = dev;
    this.peer = { local, remote: req.dst.address, family };
    const requestId = newRequestId(dev.agent);
    this.requestId = requestId;
    const sid = serviceId(this.host.portSpace, req.dst.port);
    const pd = encodeCmaPrivateData(
      { version: 0, ipVersion: family, srcPort: req.src.port || this.host.localAddr?.port || ephemeralPort(), src: ipBytes(local, family), dst: ipBytes(req.dst.address, family) },
      req.privateData,
    );
    const mad = encodeCmMad({ kind: 'SIDR_REQ', requestId, pkey: 0xffff, reserved: 0, serviceId: sid, privateData: pd }, (BigInt(dev.agent.anyBlock()) << 32n) | BigInt(requestId));
    waiting.set(requestId, this);
    let tries = 0;
    const sendOnce = (): void => {
      if (this.dead || this.requestId !== requestId) return;
      if (tries > config.sidrRetries) {
        this.finish();
        this.host.upcall({ event: CmEventType.UNREACHABLE, status: -Errno.ETIMEDOUT });
        return;
      }
      tries++;
      sendMad(dev, mad, local, req.dst.address, family);
      this.timer = setTimeout(sendOnce, config.sidrTimeoutMs);
    };
    sendOnce();
    if (tracing('cm')) trace('cm', this.host.tag, `SIDR_REQ 0x${requestId.toString(16)} to ${req.dst.address} port ${req.dst.port}`);
  }

  /** Whether the request in flight went to QP `qpn` at `addr` (only its SIDR_REP is taken). */
  askedOf(addr: string, qpn: number): boolean {
    return this.peer !== null && this.peer.remote === addr && qpn === GSI_QPN;
  }

  /** The SIDR_REP for our request. */
  sidrReply(rep: CmSidrRep): void {
    if (this.dead || rep.requestId !== this.requestId || !this.dev || !this.peer) return;
    this.finish();
    const pd = new Uint8Array(SIDR_REP_PD);
    pd.set(rep.privateData.subarray(0, SIDR_REP_PD));
    const ud: UdParam = {
      privateData: pd,
      ahAttr: ahTo(this.dev, this.peer.local, this.peer.remote, this.peer.family, this.host.options.tos),
      qpNum: rep.qpn,
      qkey: rep.qkey,
    };
    if (rep.status !== CmSidrStatus.SUCCESS) {
      this.host.upcall({ event: CmEventType.UNREACHABLE, status: rep.status, ud });
      return;
    }
    let qkey: number;
    try {
      qkey = this.qkeyOf('rdma_connect');
    } catch {
      this.host.upcall({ event: CmEventType.ADDR_ERROR, status: -Errno.ENODEV });
      return;
    }
    if (rep.qkey !== qkey) {
      this.host.upcall({ event: CmEventType.ADDR_ERROR, status: -Errno.EINVAL });
      return;
    }
    this.host.upcall({ event: CmEventType.ESTABLISHED, ud });
  }

  private finish(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (waiting.get(this.requestId) === this) {
      waiting.delete(this.requestId);
      releaseRequestId(this.requestId);
    }
    this.requestId = -1;
  }

  async accept(req: AcceptRequest): Promise<void> {
    const op = 'rdma_accept';
    const p = this.pending;
    if (!p) throw err('EINVAL', op, 'no request to accept');
    const qpn = req.qp?.qpNum ?? req.param.qpNum;
    if (qpn === undefined) throw err('EINVAL', op, 'no QP');
    if (req.privateData.length > SIDR_REP_PD) throw err('EINVAL', op, `private data ${req.privateData.length} > ${SIDR_REP_PD}`);
    const qkey = this.qkeyOf(op);
    this.pending = null;
    sendSidrRep(p.dev, p, { status: CmSidrStatus.SUCCESS, qpn, qkey, privateData: req.privateData });
  }

  reject(privateData: Uint8Array): void {
    const op = 'rdma_reject';
    const p = this.pending;
    if (!p) throw err('EINVAL', op, 'no request to reject');
    if (privateData.length > SIDR_REP_PD) throw err('EINVAL', op, `private data ${privateData.length} > ${SIDR_REP_PD}`);
    this.pending = null;
    sendSidrRep(p.dev, p, { status: CmSidrStatus.REJECT, qpn: 0, qkey: 0, privateData });
  }

  disconnect(): boolean {
    return false;
  }

  initQpAttr(state: QpState): { attr: QpAttr; mask: number } {
    const M = QpAttrMask;
    switch (state) {
      case QpState.INIT:
        return { attr: { qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: this.qkeyOf('rdma_init_qp_attr') }, mask: M.STATE | M.PKEY_INDEX | M.PORT | M.QKEY };
      case QpState.RTR:
        return { attr: { qpState: QpState.RTR }, mask: M.STATE };
      case QpState.RTS:
        return { attr: { qpState: QpState.RTS, sqPsn: 0 }, mask: M.STATE | M.SQ_PSN };
      default:
        throw err('EINVAL', 'rdma_init_qp_attr', `state ${state}`);
    }
  }

  joinMulticast(join: McJoin): void {
    const op = 'rdma_join_multicast';
    const dev = devOf(this.host.context, op);
    const family = familyOf(join.addr);
    // cma_iboe_join_multicast: the zero address is refused first, then an IPv6 group on a RoCEv2
    // port (the only GID type here) with the kernel's ENOTSUPP; both before anything is queued.
    if (isAnyAddr(join.addr.address)) throw err('EINVAL', op, 'zero multicast address');
    if (family === 6) throw err('ENOTSUPP', op, 'IPv6 multicast groups on a RoCEv2 port');
    const first = Number(join.addr.address.split('.')[0]);
    const host = this.host;
    const local = host.localAddr?.address;
    if (!(first >= 224 && first <= 239)) {
      setImmediate(() => host.upcall({ event: CmEventType.MULTICAST_ERROR, status: -Errno.EINVAL, mcContext: join.context }));
      return;
    }
    const mgid = cmaIboeMgid(ipBytes(join.addr.address, 4));
    const sg = (local && !isAnyAddr(local) ? dev.gidOfIp(local, 4) : undefined) ?? dev.gids.find((e) => e.family === 4 && e.index > 0);
    if (!sg) throw err('EADDRNOTAVAIL', op, `${dev.name} has no IPv4 address`);
    const tos = host.options.tos;
    const ud: UdParam = {
      privateData: new Uint8Array(0),
      ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: mgid, flowLabel: 0, sgidIndex: sg.index, hopLimit: HOP_LIMIT, trafficClass: tos > 0 ? tos : 0 } },
      qpNum: IB_MULTICAST_QPN,
      qkey: RDMA_UDP_QKEY,
    };
    dev.activate();
    setImmediate(() => {
      if (!this.dead) host.upcall({ event: CmEventType.MULTICAST_JOIN, ud, mcContext: join.context });
    });
  }

  leaveMulticast(_addr: SockAddr): void {
    // On RoCE the group membership follows the QP attachment, which the CM id undoes.
  }

  destroy(): void {
    this.dead = true;
    this.finish();
    const p = this.pending;
    this.pending = null;
    if (p) sendSidrRep(p.dev, p, { status: CmSidrStatus.REJECT, qpn: 0, qkey: 0, privateData: new Uint8Array(0) });
  }
}

// -- listening ---------------------------------------------------------------------------------

async function listen(host: CmHost, req: ListenRequest): Promise<CmListener> {
  const op = 'rdma_listen';
  const agent = PortAgent.get();
  const ps = host.portSpace;
  let port = req.addr.port;
  let key = '';
  for (let tries = 0; ; tries++) {
    if (port === 0) port = 32768 + random.below(28000);
    key = sidKey(serviceId(ps, port));
    if (!listeners.has(key) && agent.publishService(key)) break;
    if (req.addr.port !== 0 || tries > 64) throw err('EADDRINUSE', op, `${req.addr.address}:${port}`);
    port = 0;
  }
  const l: Listener = { host, addr: { ...req.addr }, ps, port, backlog: req.backlog };
  listeners.set(key, l);
  // Start receiving on the devices the listener covers, so requests arrive: from other hosts,
  // and those other processes of this host hand over (they go to the device of the address they
  // reached). A wildcard listener covers every soft RoCE device of the host, opened now if this
  // process has not used it yet (only the pinned one with a pin).
  if (isAnyAddr(req.addr.address)) {
    for (const info of rxeDeviceInfos()) {
      const served = info.addresses.some((a) => host.deviceFor(a.address.split('%')[0] ?? a.address)?.info.name === info.name);
      if (served) RoceDevice.of(info).activate();
    }
  }
  else {
    const d = host.deviceFor(req.addr.address);
    if (d && d.provider === RXE_PROVIDER) RoceDevice.of(d.info).activate();
  }
  return {
    port,
    close: () => {
      if (listeners.get(key) === l) listeners.delete(key);
      agent.withdrawService(key);
    },
  };
}

/** The RoCE CM (the kernel's ib_cm as rdma_cm drives it), for UD ids. */
export const roceCmTransport: CmTransport = {
  name: 'ibcm',
  provider: RXE_PROVIDER,
  get portSpaces(): readonly PortSpace[] {
    return connectedCm.createEndpoint !== null ? [PortSpace.UDP, PortSpace.IPOIB, PortSpace.TCP] : [PortSpace.UDP, PortSpace.IPOIB];
  },
  privateDataLimits: { connect: CMA_REQ_USER_PD, accept: REP_PD, reject: REJ_PD, udConnect: CMA_SIDR_USER_PD, udAccept: SIDR_REP_PD },
  createEndpoint: (host) => (host.qpType !== QpType.UD && connectedCm.createEndpoint !== null ? connectedCm.createEndpoint(host) : new RoceEndpoint(host)),
  listen,
};

registerCmTransport(roceCmTransport);
setGsiHandler(gsiReceive);
PortAgent.get().gsiRouter = gsiRoute;
