/**
 * The RC requester (rxe_req.c): turns send WQEs into request packets.
 *
 * A WQE gets its PSNs when its first packet goes out (`firstPsn`..`lastPsn`: one per packet of a
 * SEND or RDMA WRITE, one per expected response packet of an RDMA READ, one for an atomic) and
 * keeps them for life. Everything a packet carries follows from its PSN's position in the WQE,
 * so a retransmission (go-back-N from any PSN, {@link RcRequester.rewind}) rebuilds exactly the
 * packets first sent, re-reading the data from the registered memory as rxe does. A retried
 * READ asks for the rest of the data only (the responder replays from that PSN).
 *
 * Sending stops at the window (128 PSNs past the oldest unacknowledged one), at the initiator
 * depth (ORD) for READs and atomics, at a fenced WQE while reads/atomics are outstanding, at a
 * local operation (LOCAL_INV, BIND_MW) until everything before it has completed, during an RNR
 * wait, and, when the responder advertises no credits, after one outstanding SEND (IBTA
 * 9.7.7.2's limited mode).
 * AckReq is set on the last packet of each message and at least every 64 packets.
 *
 * UC (rxe_req.c with `qp_type` UC): the same packets with the UC opcodes (`next_opcode_uc`;
 * AckReq set as for RC, as rxe does), no window, no retransmission timer; a WQE completes as soon
 * as its last packet is handed to the network (rxe_net.c `rxe_xmit_packet`), whether or not it
 * arrives. After {@link MAX_INFLIGHT_PKTS} packets the requester lets other work run and goes on
 * in the next turn.
 */
import { traceEvent, tracing } from '../../../trace.js';
import type { SqWqe } from '../../../verbs/qp.js';
import { bindMw, invalidateRkey } from '../../../verbs/mw.js';
import { mrCheckStr } from '../../../verbs/mr.js';
import { Ring } from '../../../util/ring.js';
import { SendFlags, WcStatus, WrOpcode, type Sge } from '../../../verbs/types.js';
import {
  Hdr,
  IbOpcode,
  IbTransport,
  psnAdd,
  psnDiff,
  writeAtmeth,
  writeIeth,
  writeImmDt,
  writeReth,
} from '../../../wire/roce/index.js';
import { C } from '../counters.js';
import { MAX_INFLIGHT_PKTS, MAX_PKT_PER_ACK, MAX_UNACKED_PSNS, gatherSges, hdrAt, rcPacket, sgesValid, type RcCore } from './common.js';
import type { RcTimer } from './clock.js';
import { TRAIN_MIN } from '../train.js';
import type { RcCompleter } from './comp.js';

/** What a WQE does on the wire. */
export const WqeKind = {
  SEND: 'send',
  WRITE: 'write',
  READ: 'read',
  ATOMIC: 'atomic',
  /** Executed locally (LOCAL_INV, BIND_MW). */
  LOCAL: 'local',
} as const;
/** One of {@link WqeKind}. */
export type WqeKind = (typeof WqeKind)[keyof typeof WqeKind];

/** A send WQE the requester has taken off the send queue, until it completes. */
export interface RcWqe {
  w: SqWqe;
  kind: WqeKind;
  /** Packets (PSNs) of the message: SEND/WRITE/READ ceil(len / MTU) (at least 1); atomics 1. */
  npkts: number;
  /** Its first packet went out: `firstPsn`/`lastPsn` are assigned. */
  started: boolean;
  firstPsn: number;
  lastPsn: number;
  /** Holds one of the ORD slots (READ, atomic) from its first packet until it completes. */
  rdAtomic: boolean;
  /** The status it completes with when the QP fails on it (set by whoever failed it). */
  errStatus: WcStatus;
}

/** Whether `k` is a READ or atomic (needs an ORD slot and a response). */
export function isRdAtomic(e: RcWqe): boolean {
  return e.kind === WqeKind.READ || e.kind === WqeKind.ATOMIC;
}

/** The requester of one RC QP. */
export class RcRequester {
  /** WQEs taken and not yet completed, oldest first (the completer completes from the head). */
  readonly list = new Ring<RcWqe>(Infinity);
  /** Index in {@link list} of the WQE the next packet belongs to (`list.length`: none yet). */
  cur = 0;
  /** PSN of the next packet. */
  psn = 0;
  /** One past the highest PSN ever sent (responses beyond it are bogus). */
  sentEnd = 0;
  /** READ/atomic WQEs holding an ORD slot. */
  rdAtomicOut = 0;
  /** Waiting for the RNR timer: send nothing. */
  rnrWait = false;
  /** The responder advertised no credits and a SEND is unacknowledged: send no new SEND. */
  creditWait = false;
  private noAck = 0;
  private kicking = false;
  private again = false;
  /** UC: packets sent by this kick, and the deferred kick that goes on after {@link MAX_INFLIGHT_PKTS}. */
  private burst = 0;
  private resume: RcTimer | null = null;
  comp!: RcCompleter;

  constructor(private readonly core: RcCore) {}

  /** Start over at `sqPsn` (RTS). */
  reset(sqPsn: number): void {
    this.psn = sqPsn & 0xffffff;
    this.sentEnd = this.psn;
    this.cur = 0;
    this.noAck = 0;
    this.rnrWait = false;
    this.creditWait = false;
  }

  /** Forget every WQE (they were flushed or the QP was reset). */
  clear(): void {
    this.list.clear();
    this.cur = 0;
    this.rdAtomicOut = 0;
    this.stop();
  }

  /** Cancel the deferred kick of a UC burst (QP to ERR, RESET or destroyed). */
  stop(): void {
    this.resume?.cancel();
    this.resume = null;
    this.burst = 0;
  }

  /** Send what may be sent now. Re-entrant calls (from a completion) are folded into the running one. */
  kick(): void {
    if (this.kicking) {
      this.again = true;
      return;
    }
    // UC: each kick (a post, the next turn of a long message) may send a burst.
    if (this.resume === null) this.burst = 0;
    this.kicking = true;
    try {
      do {
        this.again = false;
        this.run();
      } while (this.again);
    } finally {
      this.kicking = false;
    }
  }

  /**
   * Go back to PSN `psn` (the oldest unacknowledged one, or where a NAK points): the next packet
   * is the one with that PSN, and every later WQE is sent again.
   */
  rewind(psn: number): void {
    const head = this.list.peek();
    // Nothing before the oldest WQE is outstanding.
    this.psn = head !== undefined && head.started && psnDiff(psn, head.firstPsn) < 0 ? head.firstPsn : psn;
    this.noAck = 0;
    this.cur = this.indexOf(this.psn);
  }

  /**
   * After acknowledgements removed WQEs from the head: keep {@link cur} on the WQE of
   * {@link psn}, and skip ahead when the acknowledged PSN passed it (a late ACK during a retry).
   */
  resync(compPsn: number): void {
    if (psnDiff(this.psn, compPsn) < 0) {
      this.psn = compPsn;
      this.cur = this.indexOf(compPsn);
    } else if (this.cur > this.list.length) this.cur = this.list.length;
  }

  /** The index of the WQE a packet with PSN `psn` belongs to (or the first unstarted one). */
  private indexOf(psn: number): number {
    const n = this.list.length;
    for (let i = 0; i < n; i++) {
      const e = this.list.at(i) as RcWqe;
      if (!e.started) return i;
      if (psnDiff(e.lastPsn, psn) >= 0 && e.kind !== WqeKind.LOCAL) return i;
    }
    return n;
  }

  /** A WQE left the head of the list (completed). */
  popped(): void {
    if (this.cur > 0) this.cur--;
  }

  private run(): void {
    const core = this.core;
    const comp = this.comp;
    for (;;) {
      if (!core.sendReady() || this.rnrWait) return;
      if (core.uc) {
        // rxe checks the window for RC only; UC yields to other work after a burst instead.
        if (this.resume !== null) return;
        if (this.burst >= MAX_INFLIGHT_PKTS) {
          this.resume = core.clock.defer(() => {
            this.resume = null;
            this.kick();
          });
          return;
        }
      } else if (psnDiff(this.psn, comp.psn) >= MAX_UNACKED_PSNS) return;
      let e = this.list.at(this.cur);
      if (e === undefined) {
        // A WQE leaves the send queue only when it may start (it stays there, with its own copy
        // of the SGEs, behind a fence, the initiator depth or a local operation's wait).
        const w = core.sqPeek();
        if (w === undefined || !this.mayStart(w)) return;
        core.sqTake();
        e = this.admit(w);
        this.list.push(e);
        if (e.kind === WqeKind.LOCAL) {
          this.local(e);
          continue;
        }
        if (isRdAtomic(e)) {
          if (core.ord === 0) {
            this.fail(e, WcStatus.LOC_QP_OP_ERR, `${e.kind} with initiator depth 0`);
            return;
          }
          e.rdAtomic = true;
          this.rdAtomicOut++;
        }
      }
      if (!this.sendPacket(e)) return;
    }
  }

  /** Whether a posted WQE may start now (fence, initiator depth, local operation, credits). */
  private mayStart(w: SqWqe): boolean {
    switch (w.opcode) {
      case WrOpcode.LOCAL_INV:
      case WrOpcode.BIND_MW:
        // Local invalidate fence (IBA 10.6.5.1, mandatory in rxe): everything before completes
        // first. rxe runs a bind at once and completes it in its turn; here it waits for the WQEs
        // before it as an invalidation does, which only delays it.
        return this.list.length === 0;
      case WrOpcode.RDMA_READ:
      case WrOpcode.ATOMIC_CMP_AND_SWP:
      case WrOpcode.ATOMIC_FETCH_AND_ADD:
        if (this.core.ord > 0 && this.rdAtomicOut >= this.core.ord) return false;
        break;
      case WrOpcode.SEND:
      case WrOpcode.SEND_WITH_IMM:
      case WrOpcode.SEND_WITH_INV:
        if (this.creditWait) return false;
        break;
      default:
        break;
    }
    // Fence (IBA 10.8.3.3): every earlier READ and atomic completes first.
    return !(w.flags & SendFlags.FENCE && this.rdAtomicOut > 0);
  }

  /** Wrap a WQE taken off the send queue; its SGE list becomes a private copy. */
  private admit(w: SqWqe): RcWqe {
    if (!w.detached) {
      w.detached = true;
      w.sgList = w.sgList.map((s) => ({ addr: s.addr, length: s.length, lkey: s.lkey }));
      if (w.flags & SendFlags.INLINE && w.opcode !== WrOpcode.RDMA_READ && w.inline === null) {
        const c = this.core.inlineCopy(w);
        if (typeof c !== 'string') w.inline = c;
      }
    }
    const mtu = this.core.mtu;
    let kind: WqeKind;
    switch (w.opcode) {
      case WrOpcode.SEND:
      case WrOpcode.SEND_WITH_IMM:
      case WrOpcode.SEND_WITH_INV:
        kind = WqeKind.SEND;
        break;
      case WrOpcode.RDMA_WRITE:
      case WrOpcode.RDMA_WRITE_WITH_IMM:
        kind = WqeKind.WRITE;
        break;
      case WrOpcode.RDMA_READ:
        kind = WqeKind.READ;
        break;
      case WrOpcode.ATOMIC_CMP_AND_SWP:
      case WrOpcode.ATOMIC_FETCH_AND_ADD:
        kind = WqeKind.ATOMIC;
        break;
      default:
        kind = WqeKind.LOCAL;
    }
    const npkts = kind === WqeKind.ATOMIC || kind === WqeKind.LOCAL ? 1 : Math.max(1, Math.ceil(w.length / mtu));
    return { w, kind, npkts, started: false, firstPsn: 0, lastPsn: 0, rdAtomic: false, errStatus: WcStatus.WR_FLUSH_ERR };
  }

  /**
   * LOCAL_INV and BIND_MW (rxe_do_local_ops): done here, completes at once (it is at the head).
   * A failed invalidation completes with LOC_QP_OP_ERR, a failed bind with MW_BIND_ERR; either
   * moves the QP to ERR.
   */
  private local(e: RcWqe): void {
    const core = this.core;
    const w = e.w;
    let why: string | null;
    if (w.opcode === WrOpcode.BIND_MW && w.bind !== null) why = bindMw(core.context._mrs, core, core.pd, w.bind);
    else if (w.opcode === WrOpcode.LOCAL_INV) {
      const r = invalidateRkey(core.context, core.pd, w.invalidateRkey);
      why = r === 0 ? null : `invalidate of rkey 0x${(w.invalidateRkey >>> 0).toString(16)}: ${mrCheckStr(r)}`;
    } else why = `local operation ${w.opcode}`;
    if (why === null) {
      this.list.shift();
      core.sendDone(w, WcStatus.SUCCESS);
      return;
    }
    this.fail(e, w.opcode === WrOpcode.BIND_MW ? WcStatus.MW_BIND_ERR : WcStatus.LOC_QP_OP_ERR, `local operation failed: ${why}`);
  }

  /** A requester error on `e`: it completes with `status` when the QP flushes. */
  private fail(e: RcWqe, status: WcStatus, why: string): void {
    e.errStatus = status;
    this.core.counters.inc(C.send_err);
    this.core.fatal(why);
  }

  /** Build and send the packet of PSN {@link psn}, which belongs to `e`. False on an error. */
  private sendPacket(e: RcWqe): boolean {
    const core = this.core;
    const w = e.w;
    if (!e.started) {
      // Local memory is checked before anything goes out (a bad SGE is LOC_PROT_ERR).
      const sink = e.kind === WqeKind.READ || e.kind === WqeKind.ATOMIC;
      if (w.inline === null && !sgesValid(core.context, core.pd, w.sgList, sink)) {
        this.fail(e, WcStatus.LOC_PROT_ERR, `${e.kind}: SGE names no valid local memory`);
        return false;
      }
      e.started = true;
      e.firstPsn = this.psn;
      e.lastPsn = psnAdd(this.psn, e.npkts - 1);
      core.counters.inc(C.rdma_sends);
    }
    const k = psnDiff(this.psn, e.firstPsn);
    if (e.kind === WqeKind.SEND || e.kind === WqeKind.WRITE) {
      const n = this.trainLength(e, k);
      if (n >= TRAIN_MIN) return this.sendTrain(e, k, n);
    }
    const mtu = core.mtu;
    const dest = core.destQpn;
    const psn = this.psn;
    let buf: Buffer;
    let end: number;
    let nextPsn = psnAdd(psn, 1);
    switch (e.kind) {
      case WqeKind.READ: {
        const off = k * mtu;
        buf = rcPacket(IbOpcode.RC_RDMA_READ_REQUEST, 0, dest, psn, true, false);
        writeReth(buf, hdrAt(IbOpcode.RC_RDMA_READ_REQUEST, Hdr.RETH), w.remoteAddr + off, w.rkey, w.length - off);
        end = buf.length - 4;
        nextPsn = psnAdd(e.lastPsn, 1);
        this.noAck = 0;
        break;
      }
      case WqeKind.ATOMIC: {
        const cas = w.opcode === WrOpcode.ATOMIC_CMP_AND_SWP;
        const op = cas ? IbOpcode.RC_COMPARE_SWAP : IbOpcode.RC_FETCH_ADD;
        buf = rcPacket(op, 0, dest, psn, true, false);
        writeAtmeth(buf, hdrAt(op, Hdr.ATMETH), w.remoteAddr, w.rkey, cas ? w.swap : w.compareAdd, cas ? w.compareAdd : 0n);
        end = buf.length - 4;
        this.noAck = 0;
        break;
      }
      default: {
        const off = k * mtu;
        const len = Math.max(0, Math.min(mtu, w.length - off));
        const last = k === e.npkts - 1;
        const rcOp = dataOpcode(w.opcode, k === 0, last);
        const op = core.uc ? ucOpcode(rcOp) : rcOp;
        const ackReq = last || ++this.noAck >= MAX_PKT_PER_ACK;
        if (ackReq) this.noAck = 0;
        const se = last && (w.flags & SendFlags.SOLICITED) !== 0 && (e.kind === WqeKind.SEND || w.opcode === WrOpcode.RDMA_WRITE_WITH_IMM);
        buf = rcPacket(op, len, dest, psn, ackReq, se);
        if (k === 0 && e.kind === WqeKind.WRITE) writeReth(buf, hdrAt(op, Hdr.RETH), w.remoteAddr, w.rkey, w.length);
        if (last && (w.opcode === WrOpcode.SEND_WITH_IMM || w.opcode === WrOpcode.RDMA_WRITE_WITH_IMM)) writeImmDt(buf, hdrAt(op, Hdr.IMMDT), w.immData);
        if (last && w.opcode === WrOpcode.SEND_WITH_INV) writeIeth(buf, hdrAt(op, Hdr.IETH), w.invalidateRkey);
        const at = hdrAt(op, Hdr.PAYLOAD);
        if (w.inline !== null) w.inline.copy(buf, at, off, off + len);
        else if (len > 0 && !gatherSges(core.context, core.pd, w.sgList as Sge[], off, buf, at, len)) {
          this.fail(e, WcStatus.LOC_PROT_ERR, `${e.kind}: SGE names no valid local memory`);
          return false;
        }
        end = at + len;
        if (last && e.kind === WqeKind.SEND && this.comp.credits === 0) this.creditWait = true;
      }
    }
    this.psn = nextPsn;
    if (psnDiff(nextPsn, this.sentEnd) > 0) this.sentEnd = nextPsn;
    if (psnDiff(nextPsn, e.lastPsn) > 0) this.cur++;
    if (tracing('tx')) traceEvent('tx', core.tag, 'packet', { transport: core.uc ? 'UC' : 'RC', opcode: e.kind, psn, index: k + 1, count: e.npkts });
    core.transmit(buf, end);
    if (!core.uc) {
      this.comp.armTimer();
      return true;
    }
    this.burst++;
    if (psnDiff(nextPsn, e.lastPsn) > 0) this.sent(e);
    return true;
  }

  /**
   * How many packets of `e` from its `k`-th on may leave as one train (train.ts): none the last
   * of `e` or one that asks for an ACK, all inside the window (RC) or the burst (UC), at most
   * what the connected QP's path takes (0 off the host path).
   */
  private trainLength(e: RcWqe, k: number): number {
    const n = e.npkts - 1 - k;
    if (n < TRAIN_MIN || e.w.inline !== null) return 0;
    const room = this.core.uc ? MAX_INFLIGHT_PKTS - this.burst : MAX_UNACKED_PSNS - psnDiff(this.psn, this.comp.psn);
    return Math.min(n, MAX_PKT_PER_ACK - 1 - this.noAck, room, this.core.trainMax());
  }

  /**
   * Send packets `k` .. `k + n - 1` of `e` as one train: the headers of the first (its RETH for a
   * WRITE's FIRST), then every segment's payload, copied from the SGEs at once; the PSN, the count
   * towards the next AckReq and the UC burst move on by `n`. False on an SGE error.
   */
  private sendTrain(e: RcWqe, k: number, n: number): boolean {
    const core = this.core;
    const w = e.w;
    const mtu = core.mtu;
    const rcOp = dataOpcode(w.opcode, k === 0, false);
    const op = core.uc ? ucOpcode(rcOp) : rcOp;
    const len = n * mtu;
    const buf = rcPacket(op, len, core.destQpn, this.psn, false, false);
    if (k === 0 && e.kind === WqeKind.WRITE) writeReth(buf, hdrAt(op, Hdr.RETH), w.remoteAddr, w.rkey, w.length);
    const at = hdrAt(op, Hdr.PAYLOAD);
    if (!gatherSges(core.context, core.pd, w.sgList as Sge[], k * mtu, buf, at, len)) {
      this.fail(e, WcStatus.LOC_PROT_ERR, `${e.kind}: SGE names no valid local memory`);
      return false;
    }
    const next = psnAdd(this.psn, n);
    this.psn = next;
    this.noAck += n;
    if (psnDiff(next, this.sentEnd) > 0) this.sentEnd = next;
    core.transmitTrain(buf, at + len, n);
    if (core.uc) this.burst += n;
    else this.comp.armTimer();
    return true;
  }

  /**
   * UC: the last packet of `e` (the head: UC WQEs complete in the order they start) went out, so
   * it completes successfully now (rxe_net.c `rxe_xmit_packet` marks a non-RC WQE done when its
   * last packet is sent). What happens to it on the way is not the sender's to know.
   */
  private sent(e: RcWqe): void {
    if (this.list.peek() !== e) return;
    this.list.shift();
    this.popped();
    this.core.sendDone(e.w, WcStatus.SUCCESS);
  }
}

/**
 * The UC opcode of an RC SEND or RDMA WRITE opcode (rxe `next_opcode_uc`): the same operation
 * (the low five bits, 0x00-0x0B) in the UC class (0x20-0x2B).
 */
export function ucOpcode(rcOp: number): number {
  return IbTransport.UC | (rcOp & 0x1f);
}

/** The opcode of packet `first`/`last` of a SEND or RDMA WRITE WQE (rxe `next_opcode_rc`). */
function dataOpcode(op: WrOpcode, first: boolean, last: boolean): number {
  const O = IbOpcode;
  const only = first && last;
  switch (op) {
    case WrOpcode.RDMA_WRITE:
      return only ? O.RC_RDMA_WRITE_ONLY : first ? O.RC_RDMA_WRITE_FIRST : last ? O.RC_RDMA_WRITE_LAST : O.RC_RDMA_WRITE_MIDDLE;
    case WrOpcode.RDMA_WRITE_WITH_IMM:
      return only
        ? O.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE
        : first
          ? O.RC_RDMA_WRITE_FIRST
          : last
            ? O.RC_RDMA_WRITE_LAST_WITH_IMMEDIATE
            : O.RC_RDMA_WRITE_MIDDLE;
    case WrOpcode.SEND_WITH_IMM:
      return only ? O.RC_SEND_ONLY_WITH_IMMEDIATE : first ? O.RC_SEND_FIRST : last ? O.RC_SEND_LAST_WITH_IMMEDIATE : O.RC_SEND_MIDDLE;
    case WrOpcode.SEND_WITH_INV:
      return only ? O.RC_SEND_ONLY_WITH_INVALIDATE : first ? O.RC_SEND_FIRST : last ? O.RC_SEND_LAST_WITH_INVALIDATE : O.RC_SEND_MIDDLE;
    default:
      return only ? O.RC_SEND_ONLY : first ? O.RC_SEND_FIRST : last ? O.RC_SEND_LAST : O.RC_SEND_MIDDLE;
  }
}
