/**
 * The rdma_cm endpoint of a connected id (RDMA_PS_TCP; RDMA_PS_IB RC or UC) over RoCE: cma.c's IB
 * side (`cma_connect_ib`, `cma_ib_handler`, `cma_rep_recv`, `cma_accept_ib`,
 * `rdma_init_qp_attr`) on one IB CM connection (conn.ts).
 *
 * The id's QP type is the connection's (cm.c keeps `qp_type` from `ib_send_cm_req` and from the
 * REQ it receives): the REQ's transport service type says it, a listener takes only REQs of its
 * own type (cma.c `cma_check_req_qp_type`), and `rdma_init_qp_attr` gives a UC connection's QP
 * the attributes UC's modify table takes (cm.c `cm_init_qp_rtr_attr` / `cm_init_qp_rts_attr`: no
 * max_dest_rd_atomic and min_rnr_timer at RTR, only the SQ PSN at RTS). An RDMA_PS_TCP id is RC
 * whatever QP it is given: a UC QP then fails its move to RTR (EINVAL), as with the kernel.
 *
 * Active side: rdma_connect → REQ (service ID `0x0106 << 16 | port`, the QP number, a random
 * starting PSN — the PSN this side expects to receive — IRD as responder resources, ORD as
 * initiator depth, the path: GIDs, flow label from the ports, hop limit 64, the path MTU of the
 * interface, the local ACK timeout; private data = CMA header + up to 56 bytes); no answer →
 * UNREACHABLE -ETIMEDOUT. REP → the QP goes INIT (access flags) → RTR → RTS
 * (`rdma_init_qp_attr`'s values), then RTU and ESTABLISHED with the REP's private data; without
 * a QP on the id: CONNECT_RESPONSE, and rdma_establish sends the RTU. A QP transition that fails
 * → REJ "consumer defined" and CONNECT_ERROR. REJ → REJECTED with the REJ reason as status (8
 * "invalid service ID" when nobody listens, 28 for rdma_reject) and its 148 private bytes.
 *
 * Passive side ({@link rcConnectRequest}): a REQ whose CMA header fits the listener (IP version,
 * bound address) → CONNECT_REQUEST on the listener (the 56 user bytes; the requester's initiator
 * depth as responder resources and the other way round); one that does not fit → REJ 28 as cma;
 * one while the listener has `backlog` half-open connections → dropped and counted
 * (`rcvd_req_backlog_drop`), no REJ. rdma_accept → QP to RTR and RTS, REP (no RTU →
 * UNREACHABLE -ETIMEDOUT); RTU or the first request on the QP → ESTABLISHED. rdma_reject → REJ
 * 28 with up to 148 private bytes.
 *
 * Disconnect: rdma_disconnect moves the QP to ERR and the connection sends DREQ (or the DREP of
 * a DREQ received) → DISCONNECTED, then TIMEWAIT_EXIT. rdma_destroy_id: whatever the connection's
 * state asks of the peer (conn.ts).
 */
import { err, RdmaError } from '../../../errors.js';
import { Errno } from '../../../errno.js';
import { trace, tracing } from '../../../trace.js';
import { QpAttrMask, type QpAttr } from '../../../verbs/qp-attr.js';
import type { Qp } from '../../../verbs/qp.js';
import { Access, AsyncEventType, QpState, QpType } from '../../../verbs/types.js';
import {
  CmEventType,
  serviceId,
  type AcceptRequest,
  type CmEndpoint,
  type CmHost,
  type ConnectRequest,
  type EventConnParam,
  type SaPathRec,
} from '../../../cm/transport.js';
import {
  CMA_HDR_LEN,
  CMA_REQ_USER_PD,
  CmMsgRef,
  CmPrivateDataLen,
  CmRejReason,
  CmTransportType,
  cmaRoceFlowLabel,
  cmaServiceIdParts,
  decodeCmaHeader,
  emptyCmPath,
  type CmRep,
  type CmReq,
} from '../../../wire/roce/index.js';
import { C } from '../counters.js';
import { gidFromIp, ipFromGid } from '../gid.js';
import { ephemeralPort } from '../local-port.js';
import { RXE_PROVIDER } from '../provider.js';
import { RoceRcQp } from '../rc/rc-qp.js';
import type { RxMeta } from '../datagram.js';
import { HOP_LIMIT, ahTo, cmaPrivateData, connectFrom, devOf, familyOf, gidFromBytes, iboePathRec, isAnyAddr } from './addr.js';
import { rcConfig } from './config.js';
import { RcCmState, RcConn, caGuid, type ConnOwner } from './conn.js';
import { rcBacklog, type Listener } from './listeners.js';
import { CA_ACK_DELAY, CMA_IBOE_PACKET_LIFETIME, CM_RESPONSE_TIMEOUT, MAX_CM_RETRIES, cmAckTimeout } from './timing.js';

/** Private data of REP and REJ. */
const REP_PD = CmPrivateDataLen.REP;
const REJ_PD = CmPrivateDataLen.REJ;
const S = RcCmState;

function padded(src: Uint8Array, n: number): Uint8Array {
  const out = new Uint8Array(n);
  out.set(src.subarray(0, n));
  return out;
}

/** The connected-mode RoCE half of one rdma_cm_id (the kernel's `ib_cm_id` under cma). */
export class RcEndpoint implements CmEndpoint, ConnOwner {
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
    return t >= 0 ? Math.min(31, t) : rcConfig.ackTimeout;
  }

  // -- active side ----------------------------------------------------------------------------

  async connect(req: ConnectRequest): Promise<void> {
    const op = 'rdma_connect';
    const from = connectFrom(this.host, req, op);
    const { dev, family, local } = from;
    const lg = gidFromIp(local);
    const rg = gidFromIp(req.dst.address);
    if (!lg || !rg) throw err('EINVAL', op, 'address is not IPv4 or IPv6');
    if (req.qp !== null && !(req.qp instanceof RoceRcQp)) throw err('EINVAL', op, 'the QP is not a connected QP of a soft RoCE device');
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
    const pd = cmaPrivateData(from, req.dst.address, srcPort, req.privateData);
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
      transportType: cmTransportOf(this.host.qpType),
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
    c.sendReq(msg, () => {
      c.forget();
      this.upcall({ event: CmEventType.UNREACHABLE, status: -Errno.ETIMEDOUT });
    });
  }

  /** The REP for our REQ (cma.c `cma_rep_recv`): the QP to RTS and the RTU, or CONNECT_RESPONSE without a QP. */
  repReceived(c: RcConn, m: CmRep): void {
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
      c.holdRep();
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
    c.establish('REP, RTU sent');
    this.upcall({ event: CmEventType.ESTABLISHED, conn, localAddr: { address: c.local, port: c.localPort, family: c.family === 4 ? 'IPv4' : 'IPv6' } });
  }

  /** rdma_establish after CONNECT_RESPONSE: the RTU. */
  establish(): void {
    const c = this.conn;
    if (c === null || !c.cell.is(S.REP_RCVD)) throw err('EINVAL', 'rdma_establish', `state ${c?.cell.state ?? 'none'}`);
    c.establish('established by the application');
  }

  /**
   * `id->route.path_rec`: the connection's path (its GIDs, flow label, traffic class and MTU; a
   * passive id's from the REQ, as cm.c `cm_format_paths_from_req`), or once the route is
   * resolved the one `cma_resolve_iboe_route` makes for the id's addresses; none before.
   */
  routePaths(resolved: boolean): SaPathRec[] {
    const c = this.conn;
    const tos = this.host.options.tos;
    const activeLifetime = (): number => {
      const opt = this.ackTimeoutOption;
      return opt > 0 ? opt - 1 : CMA_IBOE_PACKET_LIFETIME;
    };
    if (c !== null) {
      return [
        iboePathRec({
          local: c.local,
          remote: c.remote,
          flowLabel: c.flowLabel,
          trafficClass: c.trafficClass >= 0 ? c.trafficClass : Math.max(tos, 0),
          mtu: c.pathMtu,
          packetLifeTime: this.req !== null ? Math.max(c.avTimeout - 1, 0) : activeLifetime(),
        }),
      ];
    }
    const local = this.host.localAddr;
    const remote = this.host.peerAddr;
    if (!resolved || local === null || remote === null) return [];
    const dev = devOf(this.host.context, 'rdma_route');
    return [
      iboePathRec({
        local: local.address,
        remote: remote.address,
        flowLabel: cmaRoceFlowLabel(local.port, remote.port),
        trafficClass: Math.max(tos, 0),
        mtu: dev.pathMtu || 1,
        packetLifeTime: activeLifetime(),
      }),
    ];
  }

  /**
   * rdma_notify → cm.c `ib_cm_notify`: COMM_EST is `cm_establish` (REP_SENT: established as by
   * the RTU, ESTABLISHED follows; ESTABLISHED: EISCONN; other states EINVAL), LID_CHANGE is
   * `cm_migrate` (taken on an established connection, which has no alternate path to load here),
   * every other event EINVAL. No connection (no `ib_cm_id`): EINVAL, as cma.c.
   */
  notify(event: number): void {
    const op = 'rdma_notify';
    const c = this.conn;
    if (c === null) throw err('EINVAL', op, 'no IB CM connection');
    switch (event) {
      case AsyncEventType.COMM_EST:
        if (c.cell.is(S.ESTABLISHED)) throw err('EISCONN', op, 'already established');
        if (!c.cell.is(S.REP_SENT)) throw err('EINVAL', op, `state ${c.cell.state}`);
        c.establishedIn('rdma_notify COMM_EST');
        return;
      case AsyncEventType.LID_CHANGE:
        if (!c.cell.is(S.ESTABLISHED)) throw err('EINVAL', op, `state ${c.cell.state}`);
        return;
      default:
        throw err('EINVAL', op, `event ${event}`);
    }
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
    if (c === null || req === null || !c.cell.in([S.REQ_RCVD, S.MRA_REQ_SENT])) throw err('EINVAL', op, 'no request to accept');
    if (a.qp !== null && !(a.qp instanceof RoceRcQp)) throw err('EINVAL', op, 'the QP is not a connected QP of a soft RoCE device');
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
    if (qp instanceof RoceRcQp) qp.onCommEstablished = () => c.establishedIn('first request on the QP');
    c.sendRep(rep, () => {
      c.forget();
      this.upcall({ event: CmEventType.UNREACHABLE, status: -Errno.ETIMEDOUT });
    });
  }

  /** The passive side is established: no more watching the QP's first request. */
  established(_c: RcConn): void {
    if (this.qp instanceof RoceRcQp) this.qp.onCommEstablished = null;
    this.upcall({ event: CmEventType.ESTABLISHED });
  }

  reject(privateData: Uint8Array): void {
    const c = this.conn;
    if (c === null || !c.cell.in([S.REQ_RCVD, S.MRA_REQ_SENT])) throw err('EINVAL', 'rdma_reject', 'no request to reject');
    if (privateData.length > REJ_PD) throw err('EINVAL', 'rdma_reject', `private data ${privateData.length} > ${REJ_PD}`);
    c.reject(CmRejReason.CONSUMER_DEFINED, privateData);
    c.forget();
    this.conn = null;
  }

  /** A REJ ended the exchange. */
  rejected(_c: RcConn, reason: number, privateData: Uint8Array): void {
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
        if (c === null || (c.remoteQpn === 0 && !c.cell.in([S.REQ_RCVD, S.MRA_REQ_SENT, S.REP_RCVD]))) {
          throw err('EINVAL', 'rdma_init_qp_attr', 'no connection');
        }
        const ah = ahTo(c.dev, c.local, c.remote, c.family, this.host.options.tos);
        if (ah.grh) {
          ah.grh.flowLabel = c.flowLabel;
          if (c.trafficClass >= 0) ah.grh.trafficClass = c.trafficClass;
        }
        const base = M.STATE | M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN;
        if (this.host.qpType === QpType.UC) {
          return { attr: { qpState: QpState.RTR, ahAttr: ah, pathMtu: c.pathMtu, destQpNum: c.remoteQpn, rqPsn: c.rqPsn }, mask: base };
        }
        return {
          attr: { qpState: QpState.RTR, ahAttr: ah, pathMtu: c.pathMtu, destQpNum: c.remoteQpn, rqPsn: c.rqPsn, maxDestRdAtomic: c.ird, minRnrTimer: 0 },
          mask: base | M.MAX_DEST_RD_ATOMIC | M.MIN_RNR_TIMER,
        };
      }
      case QpState.RTS: {
        if (c === null) throw err('EINVAL', 'rdma_init_qp_attr', 'no connection');
        if (this.host.qpType === QpType.UC) return { attr: { qpState: QpState.RTS, sqPsn: c.sqPsn }, mask: M.STATE | M.SQ_PSN };
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
    // A DREQ already sent leaves the QP as it is; otherwise it goes to ERR first.
    if (!c.cell.is(S.DREQ_SENT)) this.qpToErr();
    return c.disconnect();
  }

  /** DISCONNECTED for connection `c`. */
  disconnected(_c: RcConn, status: number): void {
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
    c.destroy();
    if (this.qp instanceof RoceRcQp) this.qp.onCommEstablished = null;
  }

  private upcall(ev: Parameters<CmHost['upcall']>[0]): void {
    if (!this.dead) this.host.upcall(ev);
  }
}

/**
 * rdma_cm's handler of a REQ for listener `l` (cma.c `cma_ib_req_handler`, `cma_check_req_qp_type`,
 * the CMA header against the listener's address): REJ 28 when it does not fit; dropped (no REJ,
 * counted) past the listener's backlog; otherwise a half-open connection and CONNECT_REQUEST,
 * whose new id answers it.
 */
export function rcConnectRequest(c: RcConn, m: CmReq, l: Listener, meta: RxMeta): void {
  const dev = c.dev;
  const { port } = cmaServiceIdParts(m.serviceId);
  let hdr;
  try {
    hdr = decodeCmaHeader(m.privateData);
  } catch {
    return c.refuse(CmRejReason.CONSUMER_DEFINED, 'no CMA header');
  }
  if (hdr.version !== 0) return c.refuse(CmRejReason.CONSUMER_DEFINED, 'not a request of rdma_cm');
  if (l.host.qpType === QpType.UD || m.transportType !== cmTransportOf(l.host.qpType)) return c.refuse(CmRejReason.CONSUMER_DEFINED, 'a request for another QP type');
  const dstText = ipFromGid(gidFromBytes(hdr.dst)).ip;
  const la = l.addr.address;
  const fits = isAnyAddr(la) ? la !== '0.0.0.0' || hdr.ipVersion === 4 : familyOf(l.addr) === hdr.ipVersion && la === dstText;
  if (!fits) return c.refuse(CmRejReason.CONSUMER_DEFINED, 'the CMA header does not fit the listener');
  const ldev = l.host.deviceFor(meta.dst);
  if (ldev === undefined || ldev.provider !== RXE_PROVIDER) return c.refuse(CmRejReason.CONSUMER_DEFINED, 'the listener does not serve this device');
  const open = rcBacklog.of(l.host);
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
  // The requester's resources in this side's perspective until rdma_accept gives its own
  // (cm.c cm_req_handler): rdma_init_qp_attr answers with them before the accept.
  c.ord = m.responderResources;
  c.ird = m.initiatorDepth;
  c.holdRequest(l.host);
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
        if (!adopted && c.cell.is(S.REQ_RCVD)) c.refuse(CmRejReason.CONSUMER_DEFINED, 'the listener is gone');
      },
    },
  });
  if (!adopted && c.cell.is(S.REQ_RCVD)) c.refuse(CmRejReason.CONSUMER_DEFINED, 'not taken');
}

/** The REQ's transport service type of a connected id's QP type (cm.c `cm_req_set_qp_type`). */
function cmTransportOf(t: QpType): number {
  return t === QpType.UC ? CmTransportType.UC : CmTransportType.RC;
}
