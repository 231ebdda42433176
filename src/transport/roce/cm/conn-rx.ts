/**
 * The IB CM's receive side for connections (cm.c's `cm_*_handler`s): which connection a MAD is
 * for, whether it came from that connection's peer, and the checks a REQ passes before rdma_cm
 * sees it.
 *
 * Every MAD that fits no connection in the state it needs is dropped and counted
 * (`rcvd_mad_unroutable_drop`), except a DREQ for an unknown connection, which gets a DREP (cm.c
 * does so, so the peer stops resending) within the reply budget. A reply (REP, REJ, MRA, RTU,
 * DREQ, DREP) naming a connection of ours is taken only from the address and the GSI QP of that
 * connection's peer; from anywhere else it is dropped and counted (`rcvd_mad_src_drop`).
 *
 * A REQ: the same REQ again goes to its connection (an MRA while the application decides, REJ 10
 * "stale connection" from TIMEWAIT); otherwise a new connection, refused with a REJ when nobody
 * listens to its service in the port spaces of RC ids (8), when its GID is not ours (12) or its
 * path MTU is invalid; else rdma_cm's handler of the listener decides.
 */
import { PortSpace } from '../../../cm/transport.js';
import { Mtu } from '../../../verbs/device.js';
import {
  CmMsgRef,
  CmRejReason,
  GSI_QPN,
  cmaServiceIdParts,
  encodeCmMad,
  type CmMad,
  type CmRej,
  type CmReq,
} from '../../../wire/roce/index.js';
import type { RoceDevice } from '../device.js';
import type { RxMeta } from '../datagram.js';
import { RcConn, connById, connByRemote } from './conn.js';
import { findListener, type Listener } from './listeners.js';
import { dropForeign, dropMad, fromPeer, sendMad } from './mad-agent.js';
import { mayReply } from './reply-limit.js';

/** rdma_cm's handler of a REQ for listener `l` that passed the IB CM's checks: report it or refuse it. */
export type ConnRequestHandler = (c: RcConn, m: CmReq, l: Listener, meta: RxMeta) => void;

function drop(dev: RoceDevice, why: string): void {
  dropMad(dev, dev.name, `MAD dropped: ${why}`);
}

/** A reply naming connection `c` that came from somewhere other than its peer. */
function foreign(dev: RoceDevice, c: RcConn, kind: string, meta: RxMeta, srcQp: number): void {
  dropForeign(dev, c.tag, `${kind} from ${meta.src} QP ${srcQp} dropped: the peer is ${c.remote}`);
}

/** A connection MAD for this process (from the MAD agent); a REQ for a listener goes to `onRequest`. */
export function connectionMad(dev: RoceDevice, mad: CmMad, meta: RxMeta, srcQp: number, onRequest: ConnRequestHandler): void {
  const m = mad.msg;
  switch (m.kind) {
    case 'REQ':
      request(dev, m, mad.hdr.tid, meta, onRequest);
      return;
    case 'DREQ': {
      const c = connById(m.remoteCommId);
      if (c !== undefined && !fromPeer(c.remote, meta, srcQp)) return foreign(dev, c, m.kind, meta, srcQp);
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
      if (c.ep === null) return c.orphanDreqIn();
      c.dreqIn();
      return;
    }
    case 'REJ': {
      const named = connById(m.remoteCommId);
      if (named !== undefined && !fromPeer(named.remote, meta, srcQp)) return foreign(dev, named, m.kind, meta, srcQp);
      const c = rejectedConn(m, meta);
      if (c !== undefined && srcQp !== GSI_QPN) return foreign(dev, c, m.kind, meta, srcQp);
      if (c === undefined) return drop(dev, `REJ (${m.reason}, of message ${m.messageRejected}) for no connection in a state to take it`);
      if (c.ep === null) return drop(dev, 'REJ for a connection without an id');
      c.rejIn(m.reason, m.privateData);
      return;
    }
    case 'REP':
    case 'MRA':
    case 'RTU':
    case 'DREP': {
      const c = connById(m.remoteCommId);
      if (c === undefined) return drop(dev, `${m.kind} for unknown connection 0x${m.remoteCommId.toString(16)}`);
      if (!fromPeer(c.remote, meta, srcQp)) return foreign(dev, c, m.kind, meta, srcQp);
      // Once the peer's ID is known, every message must carry it.
      if (c.remoteCommId !== 0 && m.localCommId !== c.remoteCommId) return drop(dev, `${m.kind} from another connection`);
      if (c.ep === null) return drop(dev, `${m.kind} for a connection without an id`);
      if (m.kind === 'REP') c.repIn(m);
      else if (m.kind === 'MRA') c.mraIn(m.serviceTimeout);
      else if (m.kind === 'RTU') c.rtuIn();
      else c.drepIn();
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
    const r = connByRemote(meta.src, m.localCommId);
    if (r !== undefined) return r;
  }
  const c = connById(m.remoteCommId);
  if (c === undefined || c.remote !== meta.src) return undefined;
  if (m.messageRejected === CmMsgRef.REQ ? c.remoteCommId !== 0 : m.localCommId !== c.remoteCommId) return undefined;
  return c;
}

/** A REQ: its connection if it came before; else the IB CM's checks, then the listener's handler. */
function request(dev: RoceDevice, m: CmReq, tid: bigint, meta: RxMeta, onRequest: ConnRequestHandler): void {
  const dup = connByRemote(meta.src, m.localCommId);
  if (dup !== undefined) {
    dup.reqRepeated();
    return;
  }
  // A connection answers with this side's addresses as the REQ names them.
  let c: RcConn;
  try {
    c = new RcConn(dev, meta.dst, meta.src, meta.family, null, tid);
  } catch {
    return drop(dev, 'no communication ID free');
  }
  c.fromReq(m);
  const { ps } = cmaServiceIdParts(m.serviceId);
  const l = findListener(m.serviceId);
  if (l === undefined || (ps !== PortSpace.TCP && ps !== PortSpace.IB)) return c.refuse(CmRejReason.INVALID_SERVICE_ID, 'nobody listens');
  if (!dev.ownsGid(m.primaryPath.remoteGid)) return c.refuse(CmRejReason.INVALID_GID, 'not a GID of this port', dev.gid(0));
  if (m.pathMtu < Mtu.MTU_256 || m.pathMtu > Mtu.MTU_4096) return c.refuse(CmRejReason.INVALID_MTU, `path MTU ${m.pathMtu}`);
  onRequest(c, m, l, meta);
}
