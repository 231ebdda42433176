/**
 * What the three RC engines (requester, completer, responder; rxe_req.c, rxe_comp.c,
 * rxe_resp.c) share: the constants rxe uses, the view each engine has of its QP
 * ({@link RcCore}), packet construction, and copies between packets and scatter/gather lists
 * under the verbs MR checks.
 */
import type { Context } from '../../../verbs/context.js';
import type { Pd } from '../../../verbs/pd.js';
import type { RqWqe, SqWqe, RecvInfo } from '../../../verbs/qp.js';
import { localSgeOffset } from '../../../verbs/mr.js';
import type { AsyncEventType, Sge, WcStatus } from '../../../verbs/types.js';
import { BthMask, BTH_DEF_PKEY, IB_OPCODES, rocePacketLength } from '../../../wire/roce/index.js';
import type { RoceCounters } from '../counters.js';
import { packetBuffer } from '../packet-buffer.js';
import type { RcClock } from './clock.js';

/** rxe `RXE_MAX_UNACKED_PSNS`: the requester stops this many PSNs past the oldest unacknowledged one. */
export const MAX_UNACKED_PSNS = 128;
/** rxe `RXE_MAX_PKT_PER_ACK`: AckReq is set at least this often within a long message. */
export const MAX_PKT_PER_ACK = 64;
/**
 * rxe `RXE_INFLIGHT_SKBS_PER_QP_HIGH`: packets a UC requester sends before it lets other work run
 * (rxe stops a QP's requester while this many of its packets are still with the network). RC
 * needs no such bound: its window ({@link MAX_UNACKED_PSNS}) stops it first.
 */
export const MAX_INFLIGHT_PKTS = 64;
/** Read response packets the responder sends before letting other work run. */
export const READ_RESPONSE_BURST = 64;
/** The largest RDMA length a RETH may carry (IBTA C9-94; rxe refuses more with an invalid request NAK). */
export const MAX_RDMA_LEN = 2 ** 31;
/** The unit of QP attribute `timeout` (IBTA 9.7.6.1.3): 4.096 µs, in ns. */
export const ACK_TIMEOUT_UNIT_NS = 4096;
/**
 * rxe's timer tick (ms): its retransmission timer counts jiffies, and this is one at HZ=250 (the
 * HZ of the distribution kernels rxe is compared against here).
 */
export const JIFFY_MS = 4;

/**
 * The local ACK timeout of QP attribute `timeout` in ms, as rxe arms its retransmission timer
 * (rxe_qp.c): 4.096 µs × 2^timeout converted to whole jiffies (rounded down, at least one). 0
 * means none (no retransmission timer), as rxe. Timeout 14 (67.1 ms) → 16 jiffies = 64 ms; 19
 * (2.147 s, rdma_cm's default over rxe) → 536 jiffies = 2144 ms.
 */
export function ackTimeoutMs(timeout: number): number {
  if (timeout <= 0) return Infinity;
  const ns = ACK_TIMEOUT_UNIT_NS * 2 ** Math.min(timeout, 31);
  return Math.max(1, Math.floor(ns / (JIFFY_MS * 1e6))) * JIFFY_MS;
}

/**
 * The QP as the engines see it (implemented by the connected QP of the device, RC or UC).
 *
 * A UC QP (`uc`) runs the same engines as rxe does, with its QP-type checks: the requester sends
 * UC opcodes with no window and completes a WQE when its last packet is sent; the responder
 * checks PSNs and opcode sequences the UC way and sends no response; the completer has nothing
 * to do.
 */
export interface RcCore {
  readonly tag: string;
  /** An Unreliable Connected QP (IBTA 9.8.2): no acknowledgements, no retries, no READ or atomics. */
  readonly uc: boolean;
  readonly qpNum: number;
  readonly context: Context;
  readonly pd: Pd;
  readonly clock: RcClock;
  readonly counters: RoceCounters;
  /** Path MTU in bytes (set at RTR). */
  readonly mtu: number;
  /** The connected QP (set at RTR). */
  readonly destQpn: number;
  /** ORD: reads and atomics this QP may have outstanding as requester. */
  readonly ord: number;
  /** IRD: responder resources for the peer's reads and atomics. */
  readonly ird: number;
  /** `qp_access_flags`: the remote operations the responder allows (`Access` bits). */
  readonly accessFlags: number;
  /** Retransmission timeout (ms; Infinity: none). */
  readonly timeoutMs: number;
  /** `retry_cnt` (0..7). */
  readonly retryCnt: number;
  /** `rnr_retry` (0..7, 7 = retry for ever). */
  readonly rnrRetry: number;
  /** `min_rnr_timer` code the responder puts in RNR NAKs. */
  readonly minRnrTimer: number;

  /** The requester may start WQEs (RTS). */
  sendReady(): boolean;
  /** The next posted send WQE, left on the queue. */
  sqPeek(): SqWqe | undefined;
  /** Take the next posted send WQE, if any. */
  sqTake(): SqWqe | undefined;
  /** Take the next posted receive WQE, if any. */
  rqTake(): RqWqe | undefined;
  /** Posted receive WQEs not yet taken. */
  rqAvailable(): number;
  /** Copy the inline data of `w` out of registered memory now (the buffer may be reused). */
  inlineCopy(w: SqWqe): Buffer | string;
  /** Generate the send completion of `w` (errors always; success if signaled). */
  sendDone(w: SqWqe, status: WcStatus): void;
  /** Generate a receive completion. */
  recvDone(w: RqWqe, status: WcStatus, byteLen: number, flags: number, invalidated: number, solicited: boolean, info?: RecvInfo): void;
  /** Hand a packet (`buf[0, payloadEnd)`, BTH first, space for pad and ICRC after) to the wire. */
  transmit(buf: Buffer, payloadEnd: number): void;
  /**
   * The most segments a train (train.ts) to the connected QP may carry now: 0 when the QP's
   * packets do not take the host path with their ICRC offloaded, or the `tx` trace runs.
   */
  trainMax(): number;
  /** Hand a train of `count` segments (`buf[0, payloadEnd)`, space for the ICRC after) to the host path. */
  transmitTrain(buf: Buffer, payloadEnd: number, count: number): void;
  /**
   * A fatal error of the QP (IBTA class A/C/J): move it to ERR, which flushes what is left, after
   * raising the affiliated asynchronous event `event` when given (QP_REQ_ERR, QP_ACCESS_ERR,
   * QP_FATAL).
   */
  fatal(why: string, event?: AsyncEventType): void;
  /** The first request arrived while the QP is in RTR (IBTA communication established). */
  commEstablished(): void;
}

/**
 * A packet of `opcode` with room for `payloadLen` bytes: the BTH written (P_Key 0xFFFF, TVer 0,
 * pad for the payload, SE and AckReq as given); extension headers and payload are the caller's.
 * Returns the buffer; the payload starts at `IB_OPCODES[opcode].length`.
 */
export function rcPacket(opcode: number, payloadLen: number, destQp: number, psn: number, ackReq: boolean, se: boolean): Buffer {
  const buf = packetBuffer(rocePacketLength(opcode, payloadLen));
  buf[0] = opcode;
  buf[1] = (se ? BthMask.SE : 0) | (((-payloadLen & 3) << 4) & BthMask.PAD);
  buf[2] = BTH_DEF_PKEY >>> 8;
  buf[3] = BTH_DEF_PKEY & 0xff;
  buf[4] = 0;
  buf[5] = (destQp >>> 16) & 0xff;
  buf[6] = (destQp >>> 8) & 0xff;
  buf[7] = destQp & 0xff;
  buf[8] = ackReq ? BthMask.ACKREQ : 0;
  buf[9] = (psn >>> 16) & 0xff;
  buf[10] = (psn >>> 8) & 0xff;
  buf[11] = psn & 0xff;
  return buf;
}

/** Offset of header `h` in a packet of `opcode` built by {@link rcPacket}. */
export function hdrAt(opcode: number, h: number): number {
  return (IB_OPCODES[opcode] as { offset: readonly number[] }).offset[h] as number;
}

/** Result of {@link scatterSges}: bytes placed, or one of these. */
export const ScatterFail = {
  /** An SGE names no valid local memory (lkey, bounds, PD, LOCAL_WRITE). */
  PROT: -1,
  /** The data does not fit the SGE list. */
  LENGTH: -2,
} as const;

/**
 * Copy `len` bytes of the message described by `sgList`, from message offset `offset`, into
 * `out[outOff..]` (local read; each SGE checked with the MR rules). Returns false for an SGE that
 * names no valid memory or a range beyond the list.
 */
export function gatherSges(ctx: Context, pd: Pd, sgList: readonly Sge[], offset: number, out: Uint8Array, outOff: number, len: number): boolean {
  let skip = offset;
  let left = len;
  let at = outOff;
  for (let i = 0; i < sgList.length && left > 0; i++) {
    const s = sgList[i] as Sge;
    if (s.length === 0) continue;
    if (skip >= s.length) {
      skip -= s.length;
      continue;
    }
    const o = localSgeOffset(ctx, pd, s, false);
    const mr = ctx._mrs.last;
    if (o < 0 || mr === undefined) return false;
    const n = Math.min(s.length - skip, left);
    out.set(mr.buf.subarray(o + skip, o + skip + n), at);
    at += n;
    left -= n;
    skip = 0;
  }
  return left === 0;
}

/**
 * Copy `src[srcOff, srcOff+len)` into the memory of `sgList` at message offset `offset` (local
 * write access required). Returns the bytes placed, or a {@link ScatterFail} code.
 */
export function scatterSges(ctx: Context, pd: Pd, sgList: readonly Sge[], offset: number, src: Uint8Array, srcOff: number, len: number): number {
  let skip = offset;
  let left = len;
  let from = srcOff;
  for (let i = 0; i < sgList.length && left > 0; i++) {
    const s = sgList[i] as Sge;
    if (s.length === 0) continue;
    if (skip >= s.length) {
      skip -= s.length;
      continue;
    }
    const o = localSgeOffset(ctx, pd, s, true);
    const mr = ctx._mrs.last;
    if (o < 0 || mr === undefined) return ScatterFail.PROT;
    const n = Math.min(s.length - skip, left);
    mr.buf.set(src.subarray(from, from + n), o + skip);
    from += n;
    left -= n;
    skip = 0;
  }
  return left === 0 ? len : ScatterFail.LENGTH;
}

/** Whether every non-empty SGE of `sgList` names valid local memory (`write`: LOCAL_WRITE too). */
export function sgesValid(ctx: Context, pd: Pd, sgList: readonly Sge[], write: boolean): boolean {
  for (const s of sgList) {
    if (s.length !== 0 && localSgeOffset(ctx, pd, s, write) < 0) return false;
  }
  return true;
}
