/**
 * The UDP service of a datagram rsocket (rsocket.c's `udp_svc_*`, a thread there, the socket's
 * `'message'` handler here): the rsocket's UDP socket receives the datagrams peers send before
 * they know our QP.
 *
 * For each datagram (udp_svc_process_rs), in arrival order, one at a time:
 * 1. drop it unless its ds_udp_header is valid for the sender's address family;
 * 2. find or make the destination of the sender (ds_get_dest: the local QP that talks to it);
 * 3. for DATA, answer the sender with a CTRL header naming that QP (so it switches to UD);
 * 4. when the sender's QP is new to us, resolve the route to the sender and build the address
 *    handle of its QP (udp_svc_create_ah);
 * 5. for DATA, pass the payload to the application through our own QP (udp_svc_forward), with a
 *    ds_header naming the UDP sender.
 * Failures drop the datagram silently, as rsocket.c does.
 */
import { createId, ipToGid, PortSpace, type CmId, type SaPathRec, type SockAddr } from '../../cm/index.js';
import { LinkLayer, type AhAttr } from '../../verbs/index.js';
import { trace } from '../../trace.js';
import { DS_SLOT_SIZE, DsUdpOp, decodeDsUdpHeader, encodeDsHeader, type DsUdpHeader } from './protocol.js';
import { gidIndex } from './qp.js';
import type { DsDest } from './dest.js';

/** rdma_resolve_addr / rdma_resolve_route's timeouts in udp_svc_create_ah. */
const RESOLVE_TIMEOUT_MS = 2000;

/** What the service needs of its rsocket. */
export interface DsSvcHost {
  readonly tag: string;
  /** ds_get_dest. */
  getDest(addr: SockAddr): Promise<DsDest>;
  /** ds_send_udp to `dest`: a header-only datagram of `op`. */
  sendUdp(dest: DsDest, op: number, payload: Uint8Array | null): Promise<number>;
  /** Post `payload` with `hdr` as one UD SEND to `dest` once a send slot is free (udp_svc_forward). */
  forward(dest: DsDest, hdr: Uint8Array, payload: Uint8Array): Promise<void>;
  /** Whether the rsocket still runs its service (not closed). */
  readonly serving: boolean;
}

/** The service's queue of datagrams of one rsocket. */
export class DsUdpService {
  private chain: Promise<void> = Promise.resolve();
  /** Datagrams dropped (bad header, no destination), for traces and tests. */
  dropped = 0;

  constructor(private readonly host: DsSvcHost) {}

  /** A datagram from `from` arrived on the UDP socket. */
  receive(data: Buffer, from: SockAddr): void {
    // udp_svc_process_rs reads into a RS_SNDLOWAT buffer: the rest of a longer datagram is cut.
    const buf = data.length > DS_SLOT_SIZE ? data.subarray(0, DS_SLOT_SIZE) : data;
    const hdr = decodeDsUdpHeader(buf, from.family === 'IPv6' ? 6 : 4);
    if (typeof hdr === 'string') {
      this.dropped++;
      trace('rs', this.host.tag, `udp svc: dropped a datagram from ${from.address}:${from.port} (${hdr})`);
      return;
    }
    this.chain = this.chain.then(() => this.process(hdr, buf.subarray(hdr.length), from)).catch(() => {});
  }

  /** Resolves when every datagram received so far has been processed. */
  drain(): Promise<void> {
    return this.chain;
  }

  private async process(hdr: DsUdpHeader, payload: Buffer, from: SockAddr): Promise<void> {
    const h = this.host;
    if (!h.serving) return;
    let dest: DsDest;
    try {
      dest = await h.getDest(from);
    } catch (e) {
      this.dropped++;
      trace('rs', h.tag, `udp svc: no destination for ${from.address}:${from.port}: ${(e as Error).message}`);
      return;
    }
    if (hdr.op === DsUdpOp.DATA) await h.sendUdp(dest, DsUdpOp.CTRL, null).catch(() => 0);
    if (!dest.ah || dest.qpn !== hdr.qpn) await createAh(dest, hdr.qpn, h.tag);
    if (hdr.op === DsUdpOp.DATA && h.serving) {
      await h.forward(dest.qp.dest, encodeDsHeader(from.address, from.port), payload);
    }
  }
}

/**
 * udp_svc_create_ah: resolve the address and route from the QP's address to the peer's (a
 * private id of the QP's port space), then build the address handle of the peer's QP `qpn` on
 * the QP's PD: a GRH when the path's hop limit is above 1 (RoCE), the LIDs, SL and rate of the
 * path. A failure leaves the destination without an address handle.
 */
export async function createAh(dest: DsDest, qpn: number, tag: string): Promise<void> {
  if (dest.ah) {
    try {
      dest.ah.destroy();
    } catch {
      /* gone */
    }
    dest.ah = null;
  }
  const local = dest.qp.localAddr;
  const id = createId(null, null, PortSpace.UDP);
  try {
    await id.resolveAddr({ address: local.address, port: 0 }, dest.addr, RESOLVE_TIMEOUT_MS);
    await id.resolveRoute(RESOLVE_TIMEOUT_MS);
    const portNum = id.portNum || 1;
    const attr = pathAhAttr(id, dest, portNum);
    const pd = dest.qp.id.pd;
    if (!pd) return;
    dest.qpn = qpn;
    dest.ah = pd.createAh(attr);
    trace('rs', tag, `udp svc: ${dest.addr.address}:${dest.addr.port} is QP ${qpn}`);
  } catch (e) {
    trace('rs', tag, `udp svc: no address handle for ${dest.addr.address}:${dest.addr.port}: ${(e as Error).message}`);
  } finally {
    await id.destroy().catch(() => {});
  }
}

/**
 * The address handle attributes of the path `id` resolved (udp_svc_create_ah): a GRH when the
 * path's hop limit is above 1 (RoCE), the LIDs, SL and rate of the path. Where the backend does
 * not expose the path (the native addon), a RoCE port's GRH is built as cma_resolve_iboe_route
 * builds the path: the RoCEv2 GIDs of the two IP addresses, hop limit 64.
 */
function pathAhAttr(id: CmId, dest: DsDest, portNum: number): AhAttr {
  const attr: AhAttr = { isGlobal: false, portNum };
  let path: SaPathRec | undefined;
  try {
    path = id.route.pathRec[0];
  } catch {
    const port = dest.qp.id.verbs?.queryPort(portNum);
    if (port?.linkLayer !== LinkLayer.ETHERNET) return attr;
    const sgid = ipToGid(dest.qp.localAddr.address);
    attr.isGlobal = true;
    attr.grh = { dgid: ipToGid(dest.addr.address), flowLabel: 0, sgidIndex: gidIndex(dest.qp.id, portNum, sgid), hopLimit: 64, trafficClass: 0 };
    return attr;
  }
  if (!path) return attr;
  if (path.hopLimit > 1) {
    attr.isGlobal = true;
    attr.grh = {
      dgid: path.dgid,
      flowLabel: path.flowLabel,
      sgidIndex: gidIndex(dest.qp.id, portNum, path.sgid),
      hopLimit: path.hopLimit,
      trafficClass: path.trafficClass,
    };
  }
  attr.dlid = path.dlid;
  attr.sl = path.sl;
  attr.srcPathBits = path.slid & pathBits(dest, portNum);
  attr.staticRate = path.rate;
  return attr;
}

/** udp_svc_path_bits: the port's LMC mask. */
function pathBits(dest: DsDest, portNum: number): number {
  try {
    const lmc = dest.qp.id.verbs?.queryPort(portNum).lmc ?? 0;
    return (1 << lmc) - 1;
  } catch {
    return 0x7f;
  }
}
