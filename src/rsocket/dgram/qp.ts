/**
 * One QP of a datagram rsocket (rsocket.c's `struct ds_qp`): a UD QP on its own rdma_cm id
 * (`RDMA_PS_UDP`) bound to one local IP address and the rsocket's UDP port, with its CQ and
 * completion channel, its receive buffer (one 2 KiB slot per receive, plus the GRH area every
 * receive fills first) and the registration of the rsocket's send buffer on its device. An rsocket
 * has one such QP per local address it sends from (ds_get_qp); every one of them receives.
 *
 * The QP's own destination (`qp->dest`, ds_add_qp_dest) addresses the QP itself: the UDP service
 * forwards the payload of a UDP datagram to the application through it (udp_svc_forward), so that
 * every datagram the application reads came through a receive of one of its QPs.
 */
import { PortSpace, createId, ipToGid, type CmId, type SockAddr } from '../../cm/index.js';
import { Access, LinkLayer, QpType, type Ah, type AhAttr, type CompChannel, type Cq, type Mr, type Qp, type RecvWr } from '../../verbs/index.js';
import { err } from '../../errors.js';
import { DS_SLOT_SIZE, GRH_LEN, encodeDsHeader } from './protocol.js';
import type { DsDest } from './dest.js';

/** `rs_recv_wr_id()`: the flag marking a receive's work request id (rsocket.c bit 63; here bit 30). */
export const DS_WR_RECV = 0x40000000;

/** The sizes a QP is built with (the rsocket's, after ds_set_qp_size). */
export interface DsQpSizes {
  sqSize: number;
  rqSize: number;
  sqInline: number;
  /** rq_size × 2 KiB. */
  rbufSize: number;
}

export class DsQp {
  /** `qp->hdr`: the ds_header of every message sent from this QP (its address, the rsocket's port). */
  readonly hdr: Uint8Array;
  /** The QP's own destination (`qp->dest`): the forwarding path of the UDP service. */
  readonly dest: DsDest;
  /** Whether the CQ is armed (`qp->cq_armed`). */
  cqArmed = false;

  private constructor(
    readonly id: CmId,
    readonly qp: Qp,
    readonly cq: Cq,
    readonly compCh: CompChannel,
    /** The receive buffer: rq_size slots of 2 KiB, then the GRH area. */
    readonly rbuf: Buffer,
    readonly rmr: Mr,
    /** The rsocket's send buffer, registered on this QP's device. */
    readonly smr: Mr,
    readonly src: SockAddr,
    ownAh: Ah,
  ) {
    this.hdr = encodeDsHeader(src.address, src.port);
    this.dest = { key: '', addr: src, qp: this, ah: ownAh, qpn: qp.qpNum };
  }

  /** The QP's local address (`rdma_get_local_addr(qp->cm_id)`). */
  get localAddr(): SockAddr {
    return this.src;
  }

  /**
   * ds_create_qp: a UD QP bound to `src`, its buffers registered, its CQ armed and every receive
   * posted. Throws the RdmaError of the step that failed (ENODEV / EADDRNOTAVAIL from the bind
   * when no device owns `src`, EOPNOTSUPP from ibv_create_qp on a device without UD, as siw),
   * after releasing what was made.
   */
  static create(src: SockAddr, sizes: DsQpSizes, sbuf: Buffer, sink: { cqEventQueued(): void }): DsQp {
    const id = createId(null, null, PortSpace.UDP);
    const made: (() => void)[] = [];
    try {
      id.bindAddr(src);
      const ctx = id.verbs;
      if (!ctx) throw err('ENODEV', 'rdma_bind_addr', `no RDMA device owns ${src.address}`);
      // rs_create_cq: one CQ of sq + rq entries for both queues, armed at once.
      const compCh = ctx.createCompChannel();
      made.push(() => compCh.destroy());
      const cq = ctx.createCq(sizes.sqSize + sizes.rqSize, compCh);
      made.push(() => cq.destroy());
      const qp = id.createQp(null, {
        qpType: QpType.UD,
        sendCq: cq,
        recvCq: cq,
        sqSigAll: true,
        cap: { maxSendWr: sizes.sqSize, maxRecvWr: sizes.rqSize, maxSendSge: 1, maxRecvSge: 2, maxInlineData: sizes.sqInline },
      });
      made.push(() => id.destroyQp());
      sizes.sqInline = qp.cap.maxInlineData;
      // ds_init_bufs, on the id's PD (rsocket.c registers before creating the QP, on the PD
      // rdma_bind_addr gave the id; here the id has its PD once it has its QP).
      const pd = id.pd;
      if (!pd) throw err('EINVAL', 'rdma_create_qp', 'a QP without a PD');
      const rbuf = Buffer.alloc(sizes.rbufSize + GRH_LEN);
      const smr = pd.regMr(sbuf, Access.LOCAL_WRITE);
      made.push(() => smr.dereg());
      const rmr = pd.regMr(rbuf, Access.LOCAL_WRITE);
      made.push(() => rmr.dereg());
      const own = pd.createAh(ownAhAttr(id));
      const dq = new DsQp(id, qp, cq, compCh, rbuf, rmr, smr, src, own);
      compCh._sink = sink;
      cq.reqNotify();
      dq.cqArmed = true;
      const wrs: RecvWr[] = [];
      for (let i = 0; i < sizes.rqSize; i++) wrs.push(dq.recvWr(i * DS_SLOT_SIZE, sizes.rbufSize));
      qp.postRecv(wrs);
      return dq;
    } catch (e) {
      for (const undo of made.reverse()) {
        try {
          undo();
        } catch {
          /* best effort */
        }
      }
      void id.destroy().catch(() => {});
      throw e;
    }
  }

  /** ds_post_recv's work request: the GRH into the area after the slots, the message into `offset`. */
  recvWr(offset: number, rbufSize = this.rbuf.length - GRH_LEN): RecvWr {
    return {
      wrId: DS_WR_RECV | offset,
      sgList: [
        { addr: this.rmr.addr + rbufSize, length: GRH_LEN, lkey: this.rmr.lkey },
        { addr: this.rmr.addr + offset, length: DS_SLOT_SIZE, lkey: this.rmr.lkey },
      ],
    };
  }

  /** ds_post_recv: give the slot at `offset` back to the QP. */
  postRecv(offset: number): void {
    this.qp.postRecv(this.recvWr(offset));
  }

  /** ds_free_qp: the QP, its CQ and channel, its registrations and its id. */
  async destroy(): Promise<void> {
    this.compCh._sink = null;
    try {
      this.dest.ah?.destroy();
    } catch {
      /* gone */
    }
    try {
      this.id.destroyQp();
    } catch {
      /* gone */
    }
    try {
      const un = this.cq.unackedEvents;
      if (un > 0) this.cq.ackEvents(un);
      this.cq.destroy();
      this.compCh.destroy();
    } catch {
      /* left to the collector */
    }
    for (const mr of [this.smr, this.rmr]) if (mr.registered) mr.dereg();
    await this.id.destroy().catch(() => {});
  }
}

/**
 * The address handle of a QP's own destination (ds_add_qp_dest). rsocket.c builds it from the
 * port's LID alone (no GRH), which InfiniBand accepts; RoCE requires a GRH, and the kernel refuses
 * that AH with EINVAL — rdma-core 44's datagram rsockets therefore cannot create a QP on rxe (see
 * docs/interop.md). Here a RoCE port gets the GRH of the QP's own GID, which the device routes
 * back to the QP.
 */
function ownAhAttr(id: CmId): AhAttr {
  const ctx = id.verbs;
  if (!ctx) throw err('ENODEV', 'ibv_create_ah', 'no device');
  const portNum = id.portNum || 1;
  const port = ctx.queryPort(portNum);
  if (port.linkLayer !== LinkLayer.ETHERNET) return { isGlobal: false, portNum, dlid: port.lid };
  const sgid = routeSgid(id);
  return { isGlobal: true, portNum, grh: { dgid: sgid, sgidIndex: gidIndex(id, portNum, sgid), hopLimit: 64, flowLabel: 0, trafficClass: 0 } };
}

/**
 * The source GID of an id bound on a RoCE port: its route's, or — where the backend does not
 * expose `id->route` (the native addon: EOPNOTSUPP) — the RoCEv2 GID of its IP address, which is
 * what the kernel's route holds for it.
 */
export function routeSgid(id: CmId): Uint8Array {
  try {
    return id.route.addr.ibaddr.sgid;
  } catch {
    return ipToGid(id.localAddr?.address);
  }
}

/** udp_svc_sgid_index: the index of `gid` among the port's first 16 GIDs (0 when absent). */
export function gidIndex(id: CmId, portNum: number, gid: Uint8Array): number {
  const ctx = id.verbs;
  if (!ctx) return 0;
  const n = Math.min(16, ctx.queryPort(portNum).gidTblLen);
  for (let i = 0; i < n; i++) {
    try {
      if (Buffer.from(ctx.queryGid(portNum, i)).equals(Buffer.from(gid))) return i;
    } catch {
      /* an empty entry */
    }
  }
  return 0;
}
