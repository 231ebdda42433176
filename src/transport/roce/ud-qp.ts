/**
 * The UD QP of the soft RoCE device, with rxe's split:
 *
 * - requester (rxe_req.c): each send WQE becomes one UD SEND ONLY packet (with immediate data:
 *   SEND ONLY WITH IMMEDIATE): BTH with the QP's next PSN, P_Key 0xFFFF and the WR's solicited
 *   flag, DETH with the Q_Key and this QPN, ImmDt, payload gathered from the SGEs (or the inline
 *   copy), pad, ICRC. A message longer than the port MTU is refused when posted (EINVAL) — rxe
 *   instead completes it successfully without sending anything (IBTA C10-93.1.1), which hides the
 *   loss; see docs/design/roce.md. A send completes when its packet is handed to the socket.
 * - a QP created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB (which rxe refuses) sends to a group
 *   without multicast loopback: no QP of this host receives it, the sender's own included.
 * - responder (rxe_resp.c): a packet the receive path accepted takes the oldest receive WQE,
 *   which gets the 40-byte network-header area (the IPv4 header at bytes 20-39 after 20 zero
 *   bytes, or the IPv6 header) and then the payload; the completion carries GRH, the source QP,
 *   the immediate data. A receive buffer too small completes with LOC_LEN_ERR (rxe class D: the
 *   QP stays usable); no posted receive drops the packet.
 *
 * A connected QP (RC) will add a completer and PSN/ACK state on the same skeleton.
 */
import { trace, traceEvent, tracing } from '../../trace.js';
import type { Context } from '../../verbs/context.js';
import type { Pd } from '../../verbs/pd.js';
import { QpCreateFlags, type QpInitAttr } from '../../verbs/provider.js';
import { Qp, type RqWqe, type SqWqe } from '../../verbs/qp.js';
import { localSgeOffset } from '../../verbs/mr.js';
import {
  QpState,
  SendFlags,
  WcFlags,
  WcStatus,
  WrOpcode,
  type QpCap,
  type SendWr,
  type Sge,
} from '../../verbs/types.js';
import {
  IbOpcode,
  writeDeth,
  writeImmDt,
  finishRocePacket,
  padRocePacket,
  rocePacketLength,
  immDt,
  dethSrcQp,
  writeGrhArea,
  Hdr,
  GRH_AREA_LEN,
  DEFAULT_TTL,
  IB_MULTICAST_QPN,
  ROCE_V2_UDP_PORT,
  type RocePacket,
} from '../../wire/roce/index.js';
import { C } from './counters.js';
import type { RoceAv, RoceDevice } from './device.js';
import type { RxNet } from './recv.js';
import type { RxMeta } from './udp.js';
import { hdrAt, rcPacket } from './rc/common.js';
import { impairedSend, impairing } from './impair.js';

/** A UD send packet's headers: BTH + DETH (+ ImmDt). */
const UD_SEND_ONLY = IbOpcode.UD_SEND_ONLY;
const UD_SEND_ONLY_IMM = IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE;

/**
 * Datagrams for this host wait here for a microtask, so a post never re-enters the receive path.
 */
interface Loopback {
  dev: RoceDevice;
  buf: Buffer;
  meta: RxMeta;
}
let loopback: Loopback[] = [];
let loopbackSpare: Loopback[] = [];
let loopbackScheduled = false;
function drainLoopback(): void {
  loopbackScheduled = false;
  const list = loopback;
  loopback = loopbackSpare;
  for (let i = 0; i < list.length; i++) {
    const l = list[i] as Loopback;
    l.dev.agent.route(l.dev, l.buf, l.meta);
  }
  list.length = 0;
  loopbackSpare = list;
}

/** Queue a datagram for this host (drained in a microtask). */
function toLoopback(dev: RoceDevice, buf: Buffer, meta: RxMeta): void {
  loopback.push({ dev, buf, meta });
  if (!loopbackScheduled) {
    loopbackScheduled = true;
    queueMicrotask(drainLoopback);
  }
}

/** A UD QP on a soft RoCE device. */
export class RoceUdQp extends Qp {
  readonly dev: RoceDevice;
  /** Next PSN of the requester (24 bits). */
  private psn = 0;
  /**
   * Whether the QP's group sends loop back to this host: false when it was created with
   * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB.
   */
  private readonly mcastLoop: boolean;

  constructor(context: Context, pd: Pd, qpNum: number, init: QpInitAttr, cap: QpCap, dev: RoceDevice) {
    super(context, pd, qpNum, init, cap);
    this.dev = dev;
    this.mcastLoop = ((init.createFlags ?? 0) & QpCreateFlags.BLOCK_SELF_MCAST_LB) === 0;
  }

  /** The QP's Q_Key (0 until set). */
  get qkey(): number {
    return this.attr.qkey ?? 0;
  }

  // -- verbs hooks ---------------------------------------------------------------------------

  protected _stateChanged(from: QpState, to: QpState, _reason: string): void {
    if (to === QpState.RTS && from === QpState.RTR) this.psn = (this.attr.sqPsn ?? 0) & 0xffffff;
  }

  /** The device's sockets hold the event loop while this QP holds it (device.ts). */
  protected override _holdsLoopChanged(on: boolean): void {
    this.dev._qpHoldsLoop(this, on);
  }

  protected _destroyed(): void {
    this.dev._removeQp(this);
  }

  /**
   * The one post-time check of a UD send that depends on the device's state (the verbs layer
   * checked the rest, wr-check.ts): the message fits the port's active MTU, which follows the
   * interface's.
   */
  protected override _checkSendWr(_wr: SendWr, length: number): string | null {
    const mtu = this.dev.mtuBytes;
    return length > mtu ? `UD message of ${length} bytes > port MTU ${mtu}` : null;
  }

  protected _copyInline(sgList: readonly Sge[], length: number): Buffer | string {
    const out = Buffer.allocUnsafe(length);
    const n = this.gather(sgList, out, 0);
    return n < 0 ? 'inline SGE: invalid lkey or bounds' : out;
  }

  /** Requester: every queued WQE goes out now (UD has no flow control). */
  protected _sqKick(): void {
    if (this.st.state !== QpState.RTS && this.st.state !== QpState.SQD) return;
    for (let w = this.sq.shift(); w !== undefined; w = this.sq.shift()) {
      if (!this.sendOne(w)) return;
    }
  }

  // -- requester -------------------------------------------------------------------------------

  /**
   * Copy the bytes of `sgList` into `out` at `off` (local read access). Returns the bytes copied,
   * or -1 for an SGE that names no valid MR of this PD or lies outside it.
   */
  private gather(sgList: readonly Sge[], out: Buffer, off: number): number {
    let at = off;
    const ctx = this.context;
    for (const s of sgList) {
      if (s.length === 0) continue;
      const o = localSgeOffset(ctx, this.pd, s, false);
      const mr = ctx._mrs.last;
      if (o < 0 || mr === undefined) return -1;
      out.set(mr.buf.subarray(o, o + s.length), at);
      at += s.length;
    }
    return at - off;
  }

  /** Build and send the packet of `w`; false when the QP went to ERR instead. */
  private sendOne(w: SqWqe): boolean {
    const dev = this.dev;
    const ah = w.ah;
    const av = ah?._provider as RoceAv | undefined;
    if (!ah || !av) {
      this.requesterError(w, WcStatus.LOC_QP_OP_ERR, 'no address vector');
      return false;
    }
    const imm = w.opcode === WrOpcode.SEND_WITH_IMM;
    const opcode = imm ? UD_SEND_ONLY_IMM : UD_SEND_ONLY;
    const len = rocePacketLength(opcode, w.length);
    // BTH (P_Key 0xFFFF, pad for the payload, the WR's solicited flag), DETH, ImmDt: written in
    // place, the opcode table giving their offsets.
    const buf = rcPacket(opcode, w.length, w.remoteQpn, this.psn, false, (w.flags & SendFlags.SOLICITED) !== 0);
    writeDeth(buf, hdrAt(opcode, Hdr.DETH), w.remoteQkey, this.qpNum);
    if (imm) writeImmDt(buf, hdrAt(opcode, Hdr.IMMDT), w.immData >>> 0);
    const p = hdrAt(opcode, Hdr.PAYLOAD);
    if (w.inline) w.inline.copy(buf, p, 0, w.length);
    else if (this.gather(w.sgList, buf, p) < 0) {
      this.requesterError(w, WcStatus.LOC_PROT_ERR, 'bad SGE');
      return false;
    }
    // A packet for this device's own address leaves its ICRC to the host path when nothing here
    // needs it (fwd-frame.ts `FwdFlag.ICRC_OFFLOAD`).
    const local = !av.multicast && w.remoteQpn !== IB_MULTICAST_QPN && dev.ownsIp(av.dst, av.family);
    const offload = local && dev.icrcOffload();
    if (offload) padRocePacket(buf, 0, p + w.length);
    else finishRocePacket(buf, 0, p + w.length, av.net);
    this.psn = (this.psn + 1) & 0xffffff;
    dev.counters.inc(C.rdma_sends);
    if (!dev.portUp) {
      // A port that is down sends nothing (RoceDevice.transmit): the WR fails as a send with no
      // way out does (rxe: init_req_packet fails, LOC_QP_OP_ERR).
      dev.counters.inc(C.send_err);
      this.requesterError(w, WcStatus.LOC_QP_OP_ERR, 'port down');
      return false;
    }
    if (local) {
      // rxe_loopback: a packet for this device's own address skips the network; it goes to the
      // process owning the destination QP (this one, or another over its Unix socket), not to
      // whichever process the kernel would pick.
      dev.counters.inc(C.sent_pkts);
      const meta: RxMeta = { family: av.family, src: av.sgid.ip, dst: av.dst, srcPort: dev.agent.port, forwarded: false, icrcOffload: offload, train: 0 };
      if (impairing()) impairedSend(buf, (b) => toLoopback(dev, b ?? buf, meta), dev.counters);
      else toLoopback(dev, buf, meta);
    } else if (!dev.transmit(buf, len, av, this.mcastLoop)) {
      this.requesterError(w, WcStatus.LOC_QP_OP_ERR, `no socket for source ${av.sgid.ip}`);
      return false;
    }
    if (tracing('tx')) traceEvent('tx', this.tag, 'datagram', { opcode: imm ? 'SEND_IMM' : 'SEND', bytes: w.length, to: av.dst, remoteQpn: w.remoteQpn });
    this.completeSend(w, WcStatus.SUCCESS);
    return true;
  }

  /** A requester error (rxe: the WQE completes in error and the QP moves to ERR). */
  private requesterError(w: SqWqe, status: WcStatus, why: string): void {
    if (tracing('qp')) trace('qp', this.tag, `send error: ${why}`);
    this.dev.counters.inc(C.send_err);
    this.completeSend(w, status, true);
    this._transition(QpState.ERR, why);
  }

  // -- responder -------------------------------------------------------------------------------

  /**
   * @internal A packet the receive path accepted for this QP: place it in the oldest receive WQE
   * (none: dropped and counted, as rxe does for UD).
   */
  _respond(p: RocePacket, net: RxNet): void {
    if (!this._take(p, net)) this.dev.counters.inc(C.rcvd_no_recv_wqe_drop);
  }

  /**
   * @internal {@link _respond} without the count: false when no receive WQE was posted (the
   * multicast path counts a datagram once for all the QPs of its group).
   */
  _take(p: RocePacket, net: RxNet): boolean {
    const dev = this.dev;
    const w = this._rqTake();
    if (w === undefined) return false;
    const need = GRH_AREA_LEN + p.payloadLen;
    if (need > w.length) {
      // rxe check_length: class D error for UD, the QP stays usable.
      this.completeRecv(w, WcStatus.LOC_LEN_ERR, 0, 0, 0);
      return true;
    }
    const grh = scratchGrh;
    const h = grhHeaders;
    h.family = net.family;
    h.src = net.src;
    h.dst = net.dst;
    h.sport = net.sport;
    h.dport = net.dport ?? ROCE_V2_UDP_PORT;
    h.ipId = net.ipId;
    writeGrhArea(h, p.end - p.start, grh, 0);
    if (!this.scatter(w, grh, p.buf as Buffer, p.payloadOff, p.payloadLen)) {
      // rxe: a receive WQE naming bad memory is a malformed WQE (class A): error, QP to ERR.
      this.completeRecv(w, WcStatus.LOC_QP_OP_ERR, 0, 0, 0);
      this._transition(QpState.ERR, 'receive WQE with a bad SGE');
      return true;
    }
    dev.counters.inc(C.rdma_recvs);
    const imm = p.opcode === UD_SEND_ONLY_IMM;
    const flags = WcFlags.GRH | (imm ? WcFlags.WITH_IMM : 0);
    const info = {
      srcQp: dethSrcQp(p.buf, p.hdrOffset(Hdr.DETH)),
      immData: imm ? immDt(p.buf, p.hdrOffset(Hdr.IMMDT)) : 0,
      pkeyIndex: this.attr.pkeyIndex ?? 0,
    };
    this.completeRecv(w, WcStatus.SUCCESS, need, flags, 0, p.se, info);
    return true;
  }

  /** Write the GRH area then the payload across the SGEs of `w`; false on a bad SGE. */
  private scatter(w: RqWqe, grh: Uint8Array, src: Buffer, off: number, len: number): boolean {
    const ctx = this.context;
    let gi = 0; // bytes of the GRH area written
    let pi = 0; // payload bytes written
    const total = GRH_AREA_LEN + len;
    let done = 0;
    for (const s of w.sgList) {
      if (done >= total) break;
      if (s.length === 0) continue;
      const n = Math.min(s.length, total - done);
      const o = localSgeOffset(ctx, this.pd, { addr: s.addr, length: n, lkey: s.lkey }, true);
      const mr = ctx._mrs.last;
      if (o < 0 || mr === undefined) return false;
      let at = o;
      let left = n;
      if (gi < GRH_AREA_LEN) {
        const k = Math.min(left, GRH_AREA_LEN - gi);
        mr.buf.set(grh.subarray(gi, gi + k), at);
        gi += k;
        at += k;
        left -= k;
      }
      if (left > 0) {
        mr.buf.set(src.subarray(off + pi, off + pi + left), at);
        pi += left;
      }
      done += n;
    }
    return true;
  }
}

const scratchGrh = new Uint8Array(GRH_AREA_LEN);
/** The headers {@link RoceUdQp._respond} writes into the GRH area (one object, refilled per packet). */
const grhHeaders: RxNet & { ttl: number; tos: number } = { family: 4, src: new Uint8Array(4), dst: new Uint8Array(4), sport: 0, dport: 0, ipId: 0, ttl: DEFAULT_TTL, tos: 0 };
