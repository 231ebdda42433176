/**
 * The rdma_cm endpoint of a datagram id (RDMA_PS_UDP, RDMA_PS_IPOIB) over RoCE: cma.c's UD side
 * (`cma_resolve_ib_udp`, `cma_sidr_rep_handler`, `cma_ib_req_handler` for SIDR, `cma_set_qkey`)
 * on top of the IB CM's SIDR exchange (sidr.ts).
 *
 * - rdma_connect sends a SIDR query: private data = the 36-byte CMA header (addresses and source
 *   port) + the user's bytes. Its SIDR_REP with status 0 and the Q_Key of the port space →
 *   ESTABLISHED with `param.ud` (QPN, Q_Key, address handle, the 136 private bytes); another
 *   Q_Key → ADDR_ERROR -EINVAL; status ≠ 0 → UNREACHABLE with that status and the private bytes;
 *   no answer → UNREACHABLE -ETIMEDOUT.
 * - A SIDR_REQ for a listener ({@link udConnectRequest}) whose address fits the CMA header's
 *   destination → CONNECT_REQUEST with the 180 user bytes and the address handle back to the
 *   requester; otherwise status 1 (unsupported service). rdma_accept answers status 0 with the
 *   QP number and Q_Key 0x01234567, rdma_reject status 2 with the application's bytes (up to 136).
 * - Multicast joins: multicast.ts.
 */
import { err } from '../../../errors.js';
import { Errno } from '../../../errno.js';
import { trace, tracing } from '../../../trace.js';
import { QpState } from '../../../verbs/types.js';
import { QpAttrMask, type QpAttr } from '../../../verbs/qp-attr.js';
import {
  CmEventType,
  PortSpace,
  RDMA_UDP_QKEY,
  serviceId,
  type AcceptRequest,
  type CmEndpoint,
  type CmHost,
  type ConnectRequest,
  type McJoin,
  type SaPathRec,
  type SockAddr,
  type UdParam,
} from '../../../cm/transport.js';
import {
  CMA_HDR_LEN,
  CMA_SIDR_USER_PD,
  CmPrivateDataLen,
  CmSidrStatus,
  cmaRoceFlowLabel,
  cmaServiceIdParts,
  decodeCmaHeader,
  type CmSidrRep,
  type CmSidrReq,
} from '../../../wire/roce/index.js';
import { C } from '../counters.js';
import { ipFromGid } from '../gid.js';
import { ephemeralPort } from '../local-port.js';
import { RXE_PROVIDER } from '../provider.js';
import type { RxMeta } from '../datagram.js';
import { ahTo, cmaPrivateData, connectFrom, devOf, familyOf, gidFromBytes, iboePathRec, isAnyAddr } from './addr.js';
import { CMA_IBOE_PACKET_LIFETIME } from './timing.js';
import { sidrBacklog, type Listener } from './listeners.js';
import { joinMulticast } from './multicast.js';
import { SidrQuery, answerSidr, holdSidr, refuseSidr, releaseSidr, type SidrRequest } from './sidr.js';

/** SIDR_REP private data (bytes). */
const SIDR_REP_PD = CmPrivateDataLen.SIDR_REP;

/** The RoCE half of one datagram rdma_cm_id. */
export class UdEndpoint implements CmEndpoint {
  /** Passive side: the SIDR_REQ to answer. */
  pending: SidrRequest | null = null;
  /** Active side: the query in flight. */
  private query: SidrQuery | null = null;
  /** The id was made for a SIDR_REQ (cma.c `cma_new_udp_id` gives it no path record). */
  passive = false;
  private dead = false;

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
    const from = connectFrom(this.host, req, 'rdma_connect');
    this.query?.cancel();
    this.query = null;
    const pd = cmaPrivateData(from, req.dst.address, req.src.port || this.host.localAddr?.port || ephemeralPort(), req.privateData);
    const q = new SidrQuery(from.dev, from.local, req.dst.address, from.family, serviceId(this.host.portSpace, req.dst.port), pd, {
      reply: (rep) => this.sidrReply(q, rep),
      timeout: () => this.host.upcall({ event: CmEventType.UNREACHABLE, status: -Errno.ETIMEDOUT }),
    });
    this.query = q;
    if (tracing('cm')) trace('cm', this.host.tag, `SIDR_REQ 0x${q.requestId.toString(16)} to ${req.dst.address} port ${req.dst.port}`);
  }

  /** The SIDR_REP of query `q` (cma.c `cma_sidr_rep_handler`). */
  private sidrReply(q: SidrQuery, rep: CmSidrRep): void {
    if (this.dead) return;
    const pd = new Uint8Array(SIDR_REP_PD);
    pd.set(rep.privateData.subarray(0, SIDR_REP_PD));
    const ud: UdParam = {
      privateData: pd,
      ahAttr: ahTo(q.dev, q.local, q.remote, q.family, this.host.options.tos),
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

  async accept(req: AcceptRequest): Promise<void> {
    const op = 'rdma_accept';
    const p = this.pending;
    if (!p) throw err('EINVAL', op, 'no request to accept');
    const qpn = req.qp?.qpNum ?? req.param.qpNum;
    if (qpn === undefined) throw err('EINVAL', op, 'no QP');
    if (req.privateData.length > SIDR_REP_PD) throw err('EINVAL', op, `private data ${req.privateData.length} > ${SIDR_REP_PD}`);
    const qkey = this.qkeyOf(op);
    this.pending = null;
    answerSidr(p, { status: CmSidrStatus.SUCCESS, qpn, qkey, privateData: req.privateData });
  }

  reject(privateData: Uint8Array): void {
    const op = 'rdma_reject';
    const p = this.pending;
    if (!p) throw err('EINVAL', op, 'no request to reject');
    if (privateData.length > SIDR_REP_PD) throw err('EINVAL', op, `private data ${privateData.length} > ${SIDR_REP_PD}`);
    this.pending = null;
    answerSidr(p, { status: CmSidrStatus.REJECT, qpn: 0, qkey: 0, privateData });
  }

  disconnect(): boolean {
    return false;
  }

  /**
   * `id->route.path_rec`: once resolved, the record `cma_resolve_iboe_route` makes for the id's
   * addresses (flow label from the rdma_cm ports, traffic class from RDMA_OPTION_ID_TOS, the
   * port's MTU, lifetime CMA_IBOE_PACKET_LIFETIME); none before, and none for the id of a
   * SIDR_REQ.
   */
  routePaths(resolved: boolean): SaPathRec[] {
    const local = this.host.localAddr;
    const remote = this.host.peerAddr;
    if (!resolved || this.passive || local === null || remote === null) return [];
    const dev = devOf(this.host.context, 'rdma_route');
    return [
      iboePathRec({
        local: local.address,
        remote: remote.address,
        flowLabel: cmaRoceFlowLabel(local.port, remote.port),
        trafficClass: Math.max(this.host.options.tos, 0),
        mtu: dev.pathMtu || 1,
        packetLifeTime: CMA_IBOE_PACKET_LIFETIME,
      }),
    ];
  }

  /**
   * rdma_notify: a UD id has at most a SIDR exchange, which `ib_cm_notify` cannot establish
   * (`cm_establish` in a SIDR state), and before one no `ib_cm_id` (cma.c): EINVAL either way.
   */
  notify(event: number): void {
    throw err('EINVAL', 'rdma_notify', `event ${event} on a UD id`);
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
    joinMulticast(this.host, join, () => !this.dead);
  }

  leaveMulticast(_addr: SockAddr): void {
    // On RoCE the group membership follows the QP attachment, which the CM id undoes.
  }

  destroy(): void {
    this.dead = true;
    this.query?.cancel();
    this.query = null;
    const p = this.pending;
    this.pending = null;
    if (p) answerSidr(p, { status: CmSidrStatus.REJECT, qpn: 0, qkey: 0, privateData: new Uint8Array(0) });
  }
}

/**
 * rdma_cm's handler of a SIDR_REQ for listener `l` (cma.c `cma_ib_req_handler` for SIDR): the
 * CMA header must fit the listener's port space and address, the listener must serve the device
 * the request reached, and the listener's backlog must have room (else the request is dropped
 * unanswered, and counted); then CONNECT_REQUEST, whose new id answers it.
 */
export function udConnectRequest(req: SidrRequest, m: CmSidrReq, l: Listener, meta: RxMeta): void {
  const dev = req.dev;
  let hdr;
  try {
    hdr = decodeCmaHeader(m.privateData);
  } catch {
    refuseSidr(req, CmSidrStatus.UNSUPPORTED);
    return;
  }
  const { ps, port } = cmaServiceIdParts(m.serviceId);
  const hdrFamily = hdr.ipVersion;
  const dstText = ipFromGid(gidFromBytes(hdr.dst)).ip;
  const fits =
    (ps === PortSpace.UDP || ps === PortSpace.IPOIB || ps === PortSpace.IB) &&
    (isAnyAddr(l.addr.address) ? l.addr.address !== '0.0.0.0' || hdrFamily === 4 : familyOf(l.addr) === hdrFamily && l.addr.address === dstText);
  if (!fits) {
    refuseSidr(req, CmSidrStatus.UNSUPPORTED);
    return;
  }
  const ctx = l.host.deviceFor(meta.dst)?.open() ?? null;
  if (!ctx || ctx.device.provider !== RXE_PROVIDER) {
    refuseSidr(req, CmSidrStatus.UNSUPPORTED);
    return;
  }
  const held = sidrBacklog.of(l.host);
  if (held >= l.backlog) {
    // As a REQ past a connected listener's backlog: dropped, no answer, so the requester's
    // resend finds room later.
    dev.counters.inc(C.rcvd_req_backlog_drop);
    if (tracing('cm')) trace('cm', dev.name, `SIDR_REQ from ${meta.src} dropped: ${held} unanswered (backlog ${l.backlog})`);
    return;
  }
  holdSidr(req, l.host);
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
        const ep = new UdEndpoint(host);
        ep.pending = req;
        ep.passive = true;
        return ep;
      },
      refuse: () => {
        if (!adopted) answerSidr(req, { status: CmSidrStatus.REJECT, qpn: 0, qkey: 0, privateData: new Uint8Array(0) });
      },
    },
  });
  if (!adopted) releaseSidr(req);
  if (tracing('cm')) trace('cm', dev.name, `SIDR_REQ 0x${m.requestId.toString(16)} from ${meta.src} for port ${port}`);
}
