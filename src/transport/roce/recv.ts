/**
 * The receive path of a soft RoCE device, in the order of rxe_recv.c `rxe_rcv`: length, the
 * destination must be one of the port's GIDs (or multicast), the header checks of `hdr_check`
 * (TVer, QPN 0, QP lookup, QP type against the opcode class, QP state, P_Key, Q_Key), the ICRC,
 * then delivery to one QP or to every QP attached to the group. Each reason to drop has its own
 * counter (counters.ts); nothing here throws on any input.
 */
import { traceEvent, tracing } from '../../trace.js';
import { QpState } from '../../verbs/types.js';
import {
  RocePacket,
  RoceDrop,
  parseRocePacket,
  opcodeFitsQp,
  icrcSolveIpv4Id,
  icrcVerify,
  dethQkey,
  Hdr,
  IbTransport,
  GSI_QPN,
  IB_MULTICAST_QPN,
  BTH_DEF_PKEY,
  type RoceIpUdpHeaders,
} from '../../wire/roce/index.js';
import { C } from './counters.js';
import { gidKey } from './gid.js';
import type { RoceDevice, RoceQp } from './device.js';
import { ipBytes } from './ip-addr.js';
import type { RxMeta } from './datagram.js';
import type { RoceUdQp } from './ud-qp.js';
import { trainSegmentLength } from './train.js';

/** What the responder needs about the network headers of a delivered packet. */
export interface RxNet extends RoceIpUdpHeaders {
  /** The recovered IPv4 identification (0 for IPv6). */
  ipId: number;
}

const pkt = new RocePacket();
/** The network headers of the packet being delivered (see {@link rxeReceive}). */
const rxNet: RxNet = { family: 4, src: new Uint8Array(4), dst: new Uint8Array(4), sport: 0, dport: 0, ipId: 0 };

/** Address bytes by text, so a busy peer's address is parsed once. */
const addrCache = new Map<string, Uint8Array>();
function addr(ip: string, family: 4 | 6): Uint8Array {
  let b = addrCache.get(ip);
  if (b === undefined) {
    b = ipBytes(ip, family);
    if (addrCache.size > 1024) addrCache.clear();
    addrCache.set(ip, b);
  }
  return b;
}

/** The counter of a header-check drop reason of wire/roce. */
function dropCounter(d: RoceDrop): number {
  switch (d) {
    case RoceDrop.TOO_SHORT:
      return C.rcvd_truncated_drop;
    case RoceDrop.TRUNCATED:
      return C.rcvd_bad_length_drop;
    case RoceDrop.BAD_TVER:
      return C.rcvd_bad_version_drop;
    case RoceDrop.BAD_PAD:
      return C.rcvd_bad_pad_drop;
    case RoceDrop.BAD_QPN:
      return C.rcvd_unknown_qpn_drop;
    case RoceDrop.ICRC_ERROR:
      return C.rcvd_icrc_err_drop;
    default:
      return C.rcvd_bad_opcode_drop; // BAD_OPCODE, BAD_QP_TYPE
  }
}

/** Whether a QP accepts requests: its responder runs from RTR on (rxe `resp.state` READY). */
function qpReady(qp: RoceUdQp): boolean {
  const s = qp.state;
  return s === QpState.RTR || s === QpState.RTS || s === QpState.SQD;
}

/**
 * rxe `check_type_state` + `check_keys` for a UD QP: opcode class, state, Q_Key (P_Key was
 * checked against the port's only P_Key). The drop counter of the first violation, or -1 when
 * the QP takes the packet; nothing is counted here.
 */
function udRefusal(qp: RoceUdQp, p: RocePacket): number {
  if (!opcodeFitsQp(p.opcode, IbTransport.UD)) return C.rcvd_bad_opcode_drop;
  if (!qpReady(qp)) return C.rcvd_qp_state_drop;
  if (dethQkey(p.buf, p.hdrOffset(Hdr.DETH)) !== qp.qkey) return C.rcvd_bad_qkey_drop;
  return -1;
}

/** {@link udRefusal} for a datagram to one QP: counts the violation and returns false. */
function qpAccepts(dev: RoceDevice, qp: RoceUdQp, p: RocePacket): boolean {
  const r = udRefusal(qp, p);
  if (r < 0) return true;
  if (r === C.rcvd_bad_qkey_drop) dev.counters.badQkey();
  else dev.counters.inc(r);
  return false;
}

/**
 * Deliver a multicast datagram to every QP of its group that takes it (rxe `rxe_rcv_mcast_pkt`:
 * each QP is checked on its own, and a Q_Key violation counts in the port's `qkey_viol_cntr` for
 * each QP that refuses). The datagram counts once: in `rcvd_pkts` (and `rcvd_mcast_pkts`) when at
 * least one QP placed it in a receive WQE, otherwise in the drop counter of the first QP's
 * reason (no receive WQE included).
 */
function deliverMcast(dev: RoceDevice, group: Set<RoceUdQp>, p: RocePacket, net: RxNet): void {
  const c = dev.counters;
  let taken = false;
  let reason = -1;
  // A QP may detach (or be destroyed) while the packet is delivered: iterate over a copy (of
  // more than one).
  const members = group.size === 1 ? group : [...group];
  for (const q of members) {
    const r = udRefusal(q, p);
    if (r < 0) {
      if (q._take(p, net)) taken = true;
      else if (reason < 0) reason = C.rcvd_no_recv_wqe_drop;
      continue;
    }
    if (r === C.rcvd_bad_qkey_drop) c.qkeyViolation();
    if (reason < 0) reason = r;
  }
  if (taken) {
    c.inc(C.rcvd_pkts);
    c.inc(C.rcvd_mcast_pkts);
  } else c.inc(reason < 0 ? C.rcvd_mcast_no_group_drop : reason);
}

/** Receive one UDP payload for `dev`. */
export function rxeReceive(dev: RoceDevice, buf: Buffer, meta: RxMeta): void {
  const c = dev.counters;
  const multicastDst = meta.dst !== '' && isMulticastIp(meta.dst, meta.family);
  if (!multicastDst && !dev.ownsIp(meta.dst, meta.family)) {
    c.inc(C.rcvd_dgid_mismatch_drop);
    return;
  }
  const p = pkt;
  const drop = parseRocePacket(buf, 0, buf.length, p, { pkey: BTH_DEF_PKEY });
  if (drop !== null) {
    if (drop === RoceDrop.BAD_PKEY) c.badPkey();
    else if (drop === RoceDrop.BAD_QKEY) c.badQkey();
    else c.inc(dropCounter(drop));
    if (tracing('roce')) traceEvent('roce', dev.name, 'drop', { reason: drop, from: meta.src });
    return;
  }
  const qpn = p.destQp;
  let qp: RoceQp | undefined;
  let group: Set<RoceUdQp> | undefined;
  if (qpn === IB_MULTICAST_QPN) {
    if (!multicastDst) {
      c.inc(C.rcvd_mcast_no_group_drop);
      return;
    }
    group = dev.mcast.get(groupKey(meta.dst, meta.family));
    if (!group || group.size === 0) {
      c.inc(C.rcvd_mcast_no_group_drop);
      return;
    }
  } else if (qpn === GSI_QPN) {
    if (dev.gsi === null) {
      c.inc(C.rcvd_unknown_qpn_drop);
      return;
    }
  } else {
    qp = dev.qps.get(qpn);
    if (qp === undefined) {
      c.inc(C.rcvd_unknown_qpn_drop);
      if (tracing('roce')) traceEvent('roce', dev.name, 'drop', { reason: 'unknown QPN', from: meta.src, qpn });
      return;
    }
    if (!(qp._accepts !== undefined ? qp._accepts(p, meta) : qpAccepts(dev, qp as RoceUdQp, p))) return;
  }
  // ICRC over the IP/UDP headers the socket reported (IPv4: identification recovered); not for
  // a packet of the host path whose sender left it uncomputed (fwd-frame.ts
  // `FwdFlag.ICRC_OFFLOAD`). One object for every packet: the responders read it while they run
  // and keep nothing.
  const net = rxNet;
  net.family = meta.family;
  net.src = addr(meta.src, meta.family);
  net.dst = addr(meta.dst, meta.family);
  net.sport = meta.srcPort;
  net.dport = dev.agent.port;
  net.ipId = 0;
  if (!meta.icrcOffload) {
    const id = meta.family === 4 ? icrcSolveIpv4Id(net, buf, 0, buf.length) : icrcVerify(net, buf, 0, buf.length) ? 0 : -1;
    if (id < 0) {
      c.inc(C.rcvd_icrc_err_drop);
      return;
    }
    net.ipId = id;
  }
  if (meta.train > 0) {
    receiveTrain(dev, qp, p, meta);
    return;
  }
  if (group !== undefined) {
    deliverMcast(dev, group, p, net);
    return;
  }
  // The responder, the completer and the GSI agent drop (and count) what does not fit their
  // state: such a datagram is not also counted as received.
  const dropped = c.drops();
  if (qp !== undefined) qp._respond(p, net);
  else dev.gsi?.(buf, meta, dev);
  if (c.drops() === dropped) c.inc(C.rcvd_pkts);
}

/**
 * A train (train.ts) from the host path, its first packet parsed into `p` and its QP's checks
 * passed: every segment to the QP as a packet of its own, each counted. One that is not a
 * well-formed train, or for a QP that takes none (UD, QP1, multicast), is dropped and counted
 * as a bad length.
 */
function receiveTrain(dev: RoceDevice, qp: RoceQp | undefined, p: RocePacket, meta: RxMeta): void {
  const c = dev.counters;
  const seg = qp?._respondTrain !== undefined ? trainSegmentLength(p, meta.train) : -1;
  if (seg < 0) {
    c.inc(C.rcvd_bad_length_drop);
    return;
  }
  const dropped = c.drops();
  qp!._respondTrain!(p, meta, seg);
  c.add(C.rcvd_pkts, Math.max(0, meta.train - (c.drops() - dropped)));
}

/** Whether an address text is multicast (IPv4 224-239.x.x.x, IPv6 ff00::/8), from its first characters. */
function isMulticastIp(ip: string, family: 4 | 6): boolean {
  if (family === 4) {
    // A first octet of 224..239 is three digits "22[4-9]" or "23[0-9]" followed by a dot.
    if (ip.length < 4 || ip.charCodeAt(3) !== 0x2e || ip.charCodeAt(0) !== 0x32) return false;
    const d1 = ip.charCodeAt(1);
    const d2 = ip.charCodeAt(2);
    return (d1 === 0x32 && d2 >= 0x34 && d2 <= 0x39) || (d1 === 0x33 && d2 >= 0x30 && d2 <= 0x39);
  }
  const a = ip.charCodeAt(0) | 0x20;
  const b = ip.charCodeAt(1) | 0x20;
  return a === 0x66 && b === 0x66;
}

/** Group keys (the GID keys of `dev.mcast`) by group address text, so a busy group's is made once. */
const groupKeys = new Map<string, string>();
function groupKey(ip: string, family: 4 | 6): string {
  let k = groupKeys.get(ip);
  if (k === undefined) {
    k = gidKey(mcastGid(ip, family));
    if (groupKeys.size > 1024) groupKeys.clear();
    groupKeys.set(ip, k);
  }
  return k;
}

function mcastGid(ip: string, family: 4 | 6): Uint8Array {
  const g = new Uint8Array(16);
  const b = addr(ip, family);
  if (family === 4) {
    g[10] = 0xff;
    g[11] = 0xff;
    g.set(b, 12);
  } else g.set(b);
  return g;
}
