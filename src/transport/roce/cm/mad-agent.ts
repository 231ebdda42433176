/**
 * The CM's MAD agent on QP1 of every soft RoCE device (the part of the kernel's mad.c the CM
 * uses, with cm.c's receive entry `cm_recv_handler`):
 *
 * - **Sending.** A MAD goes from QP1 at one local address to QP1 at the peer, in a RoCEv2 UD
 *   datagram whose PSN counts from 0 as the kernel's GSI QP does.
 * - **Routing between processes.** The processes of a host share UDP port 4791; the port agent
 *   asks {@link route} where a datagram for QP1 belongs: a request (REQ, SIDR_REQ) to the process
 *   that publishes its service ID, every reply to the process whose QPN block the ID it names
 *   carries (ids.ts).
 * - **Receiving.** A datagram too short for a MAD, one that does not decode, or whose header is
 *   not a CM MAD rdma_cm sends is dropped and counted (`rcvd_mad_unroutable_drop`); the others
 *   go by message to the handlers the CM was composed with ({@link MadHandlers}).
 * - **Source checks.** A reply naming a transaction of ours is taken only from the address and
 *   the GSI QP its peer has ({@link fromPeer}); one from elsewhere is dropped and counted
 *   (`rcvd_mad_src_drop`, {@link dropForeign}), one that fits no transaction in the state it
 *   needs likewise (`rcvd_mad_unroutable_drop`, {@link dropMad}).
 */
import { trace, tracing } from '../../../trace.js';
import {
  CmAttrId,
  DETH_LEN,
  GSI_MAD_OFF,
  GSI_QPN,
  MAD_HDR_LEN,
  MAD_SIZE,
  cmMadHeaderProblem,
  decodeCmMad,
  dethSrcQp,
  encodeGsiPacket,
  gsiCmAttrId,
  type CmMad,
  type CmSidrRep,
  type CmSidrReq,
} from '../../../wire/roce/index.js';
import { C } from '../counters.js';
import type { RxMeta } from '../datagram.js';
import { setGsiHandler, type RoceDevice } from '../device.js';
import { ipBytes } from '../ip-addr.js';
import { PortAgent, type GsiRoute } from '../udp.js';
import { HOP_LIMIT } from './addr.js';
import { blockOfId, sidKey } from './ids.js';

/** What the CM does with the MADs the agent takes: one handler per class of message. */
export interface MadHandlers {
  /** A SIDR_REQ (the SIDR responder). */
  sidrRequest(dev: RoceDevice, m: CmSidrReq, tid: bigint, meta: RxMeta): void;
  /** A SIDR_REP (the SIDR requester). */
  sidrReply(dev: RoceDevice, m: CmSidrRep, meta: RxMeta, srcQp: number): void;
  /** Every other CM MAD: REQ, MRA, REJ, REP, RTU, DREQ, DREP (the connections). */
  connection(dev: RoceDevice, mad: CmMad, meta: RxMeta, srcQp: number): void;
}

/**
 * Become the GSI agent of every soft RoCE device of this process, present and future, handing
 * what arrives to `handlers`, and the GSI router of the port agent.
 */
export function installMadAgent(handlers: MadHandlers): void {
  setGsiHandler((buf, meta, dev) => receive(buf, meta, dev, handlers));
  PortAgent.get().gsiRouter = route;
}

// -- sending --------------------------------------------------------------------------------------

/**
 * The BTH PSN of our QP1 datagrams. UD receivers do not check PSNs (rxe neither), so it protects
 * nothing; it counts from 0 as the kernel's GSI QP does (ib_mad.c `IB_MAD_SEND_Q_PSN`).
 */
let gsiPsn = 0;

/** Send MAD `mad` from QP1 of `dev` at local address `src` to QP1 at `dst`. */
export function sendMad(dev: RoceDevice, mad: Uint8Array, src: string, dst: string, family: 4 | 6): void {
  const agent = dev.agent;
  const pkt = encodeGsiPacket(mad, { family, src: ipBytes(src, family), dst: ipBytes(dst, family), sport: agent.port, dport: agent.port }, { psn: gsiPsn });
  gsiPsn = (gsiPsn + 1) & 0xffffff;
  dev.transmitFrom(Buffer.from(pkt.buffer, pkt.byteOffset, pkt.byteLength), src, dst, family, HOP_LIMIT);
}

// -- routing between the processes of the host ----------------------------------------------------

/** Where in a MAD's body the router finds its destination: a service ID, or an ID naming a QPN block. */
interface RouteField {
  by: 'service' | 'block';
  /** Offset in the MAD body (after the MAD header). */
  off: number;
}

/** The destination field of each CM message the router sends anywhere but here. */
const ROUTE_FIELDS: ReadonlyMap<number, RouteField> = new Map([
  [CmAttrId.SIDR_REQ, { by: 'service', off: 8 }],
  [CmAttrId.REQ, { by: 'service', off: 8 }],
  // The request ID.
  [CmAttrId.SIDR_REP, { by: 'block', off: 0 }],
  // The remote communication ID: ours.
  [CmAttrId.REP, { by: 'block', off: 4 }],
  [CmAttrId.REJ, { by: 'block', off: 4 }],
  [CmAttrId.MRA, { by: 'block', off: 4 }],
  [CmAttrId.RTU, { by: 'block', off: 4 }],
  [CmAttrId.DREQ, { by: 'block', off: 4 }],
  [CmAttrId.DREP, { by: 'block', off: 4 }],
]);

/** Route a QP1 datagram to the process it is for (the port agent's GSI router). */
function route(pkt: Buffer): GsiRoute {
  const attr = gsiCmAttrId(pkt);
  const f = attr < 0 ? undefined : ROUTE_FIELDS.get(attr);
  if (f === undefined) return { to: 'local' };
  const at = GSI_MAD_OFF + MAD_HDR_LEN + f.off;
  if (f.by === 'service') return { to: 'service', name: sidKey(pkt.readBigUInt64BE(at)) };
  return { to: 'block', block: blockOfId(pkt.readUInt32BE(at)) };
}

// -- receiving ------------------------------------------------------------------------------------

/** A datagram for QP1 of `dev` in this process. */
function receive(buf: Buffer, meta: RxMeta, dev: RoceDevice, handlers: MadHandlers): void {
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
  if (m.kind === 'SIDR_REQ') handlers.sidrRequest(dev, m, mad.hdr.tid, meta);
  else if (m.kind === 'SIDR_REP') handlers.sidrReply(dev, m, meta, srcQp);
  else handlers.connection(dev, mad, meta, srcQp);
}

// -- source checks and drops ----------------------------------------------------------------------

/** Whether a MAD came from the peer at `peer`: its address, its GSI QP. */
export function fromPeer(peer: string, meta: RxMeta, srcQp: number): boolean {
  return peer === meta.src && srcQp === GSI_QPN;
}

/**
 * A MAD that fits no transaction in the state it needs: counted (`rcvd_mad_unroutable_drop`)
 * and, with a reason, traced under `tag`.
 */
export function dropMad(dev: RoceDevice, tag?: string, why?: string): void {
  dev.counters.inc(C.rcvd_mad_unroutable_drop);
  if (why !== undefined && tracing('cm')) trace('cm', tag ?? dev.name, why);
}

/** A reply naming a transaction of ours that came from somewhere other than its peer: counted (`rcvd_mad_src_drop`) and traced under `tag`. */
export function dropForeign(dev: RoceDevice, tag: string, why: string): void {
  dev.counters.inc(C.rcvd_mad_src_drop);
  if (tracing('cm')) trace('cm', tag, why);
}
