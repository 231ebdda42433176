/**
 * The RC completer (rxe_comp.c): handles the responses to this QP's requests and completes send
 * WQEs, in order.
 *
 * - An ACK with PSN p acknowledges every request packet up to p (ACK coalescing): SENDs and
 *   WRITEs whose last PSN is <= p complete. A READ or atomic whose response should have come
 *   before p is an implied NAK: its responses were lost, so the requester goes back to it.
 * - Read responses must arrive in PSN order: each is placed at its offset in the read's local
 *   SGEs; a gap starts a retry at the first missing PSN. Atomic ACKs write the original value
 *   (8 bytes, host order) to the local SGE.
 * - NAKs (AETH syndromes): PSN sequence error → go back to its PSN (a retry); RNR NAK → wait the
 *   advertised RNR time, then go back (`rnr_retry`, 7 = for ever); invalid request, remote access
 *   error, remote operational error → the WQE completes with REM_INV_REQ_ERR, REM_ACCESS_ERR,
 *   REM_OP_ERR and the QP moves to ERR (the rest flushes).
 * - The retransmission timer (`timeout`: 4.096 µs × 2^timeout in whole 4 ms jiffies, as rxe arms
 *   it; common.ts `ackTimeoutMs`) runs while requests are unacknowledged and restarts on
 *   progress; when it expires the requester goes back to the oldest unacknowledged PSN. `retry_cnt` bounds the retries (timeouts, sequence NAKs, implied
 *   NAKs) without progress; then the oldest WQE completes with RETRY_EXC_ERR. IBTA counts
 *   `retry_cnt` 7 as seven retries (only `rnr_retry` 7 means for ever); rxe treats both as
 *   infinite, which lets a silent peer hang the QP for ever: this follows IBTA.
 * - Responses with a PSN never sent, or that do not fit what was asked (wrong opcode for the
 *   WQE, wrong length), are dropped and counted (`rcvd_bad_resp_drop`); a lost connection shows as
 *   a timeout, never as a crash.
 */
import { traceEvent, tracing } from '../../../trace.js';
import { WcStatus } from '../../../verbs/types.js';
import {
  AethSyndrome,
  AETH_CREDIT_INVALID,
  Hdr,
  IbOpcode,
  OpMask,
  RNR_TIMER_USEC,
  aethCredits,
  aethSyndrome,
  atmackOrig,
  psnAdd,
  psnDiff,
  type RocePacket,
} from '../../../wire/roce/index.js';
import { C } from '../counters.js';
import { ScatterFail, scatterSges, type RcCore } from './common.js';
import type { RcTimer } from './clock.js';
import { WqeKind, isRdAtomic, type RcRequester, type RcWqe } from './req.js';

/** The completer of one RC QP. */
export class RcCompleter {
  /** The oldest PSN not yet acknowledged (rxe `comp.psn`). */
  psn = 0;
  /** Credits the responder last advertised (Infinity: unknown / unlimited, as rxe sends). */
  credits = Infinity;
  private retryLeft = 0;
  private rnrLeft = 0;
  /** A retry is under way since the last progress: NAKs do not start another (rxe `started_retry`). */
  private retrying = false;
  private timer: RcTimer | null = null;
  private deadline = 0;
  private rnrTimer: RcTimer | null = null;
  req!: RcRequester;

  constructor(private readonly core: RcCore) {}

  /** Start over (RTS): the first PSN to be acknowledged and fresh retry counters. */
  reset(sqPsn: number): void {
    this.stop();
    this.psn = sqPsn & 0xffffff;
    this.credits = Infinity;
    this.refill();
  }

  /** Stop every timer (QP to ERR, RESET or destroyed). */
  stop(): void {
    this.timer?.cancel();
    this.timer = null;
    this.rnrTimer?.cancel();
    this.rnrTimer = null;
    this.retrying = false;
  }

  private refill(): void {
    this.retryLeft = this.core.retryCnt;
    this.rnrLeft = this.core.rnrRetry;
    this.retrying = false;
  }

  /** Whether request packets are out and unacknowledged. */
  private outstanding(): boolean {
    return psnDiff(this.req.sentEnd, this.psn) > 0;
  }

  /**
   * A request packet went out: make sure the retransmission timer runs. It holds the event loop
   * while pending, so sends of a QP that does not hold it (an unref'd rsocket) are still
   * acknowledged or retried before the process ends; once nothing is outstanding it stops.
   */
  armTimer(): void {
    if (this.timer !== null) return;
    const t = this.core.timeoutMs;
    if (t === Infinity) return;
    this.deadline = this.core.clock.now() + t;
    this.timer = this.core.clock.after(t, () => this.onTimer(), true);
  }

  private onTimer(): void {
    this.timer = null;
    if (!this.outstanding() || this.req.rnrWait) return;
    const left = this.deadline - this.core.clock.now();
    if (left > 0.5) {
      this.timer = this.core.clock.after(left, () => this.onTimer(), true);
      return;
    }
    // Timers run before the event loop reads its sockets: when the loop was busy past the
    // deadline, the ACKs that did come in time are still queued. Read them first, then decide.
    this.timer = this.core.clock.defer(() => this.onTimerAfterIo());
  }

  private onTimerAfterIo(): void {
    this.timer = null;
    if (!this.outstanding() || this.req.rnrWait) return;
    const left = this.deadline - this.core.clock.now();
    if (left > 0.5) {
      this.timer = this.core.clock.after(left, () => this.onTimer(), true);
      return;
    }
    if (tracing('qp')) traceEvent('qp', this.core.tag, 'ack-timeout', { psn: this.psn });
    this.retry(true);
  }

  /** Acknowledged progress: fresh retry counters, the timer pushed back. */
  private progress(): void {
    this.refill();
    this.deadline = this.core.clock.now() + this.core.timeoutMs;
  }

  /**
   * Go back to {@link psn} (timeout, sequence NAK, implied NAK, gap in read responses), or fail
   * the oldest WQE with RETRY_EXC_ERR when the retries are used up.
   */
  private retry(timeout: boolean): void {
    if (this.retrying && !timeout) return;
    const head = this.req.list.peek();
    if (head === undefined || !head.started) return;
    const c = this.core.counters;
    if (this.retryLeft <= 0) {
      c.inc(C.retry_exceeded_err);
      this.fail(head, WcStatus.RETRY_EXC_ERR, 'transport retry counter exceeded');
      return;
    }
    this.retryLeft--;
    this.retrying = true;
    c.inc(C.completer_retry_err);
    if (tracing('qp')) traceEvent('qp', this.core.tag, 'retry', { psn: this.psn, cause: timeout ? 'timeout' : 'NAK', left: this.retryLeft });
    this.deadline = this.core.clock.now() + this.core.timeoutMs;
    this.req.rewind(this.psn);
    this.req.kick();
    this.armTimer();
  }

  /** `e` fails the QP: it completes with `status`, everything after it flushes. */
  private fail(e: RcWqe, status: WcStatus, why: string): void {
    e.errStatus = status;
    this.stop();
    this.core.fatal(why);
  }

  /** Complete the head WQE successfully. */
  private completeHead(): void {
    const req = this.req;
    const e = req.list.shift() as RcWqe;
    req.popped();
    if (e.rdAtomic) req.rdAtomicOut--;
    this.core.sendDone(e.w, WcStatus.SUCCESS);
  }

  /**
   * Everything up to PSN `p` is acknowledged. False when that revealed lost read or atomic
   * responses (a retry started) or the QP failed: the caller stops.
   */
  private ackThrough(p: number): boolean {
    if (psnDiff(p, this.psn) < 0) return true;
    const req = this.req;
    for (let e = req.list.peek(); e !== undefined && e.started && psnDiff(e.firstPsn, p) <= 0; e = req.list.peek()) {
      if (isRdAtomic(e)) {
        // Its response precedes p: lost (implied NAK, IBTA 9.7.5.1.5).
        this.retry(false);
        return false;
      }
      if (psnDiff(e.lastPsn, p) > 0 || psnDiff(req.sentEnd, e.lastPsn) <= 0) break;
      this.completeHead();
      // Everything before the next WQE is acknowledged, whatever comes next.
      const after = psnAdd(e.lastPsn, 1);
      if (psnDiff(after, this.psn) > 0) {
        this.psn = after;
        this.progress();
      }
    }
    const next = psnAdd(p, 1);
    if (psnDiff(next, this.psn) > 0) {
      this.psn = next;
      this.progress();
    }
    return true;
  }

  /** A response packet for this QP (the device checked headers, ICRC, state and addresses). */
  onResponse(p: RocePacket): void {
    const req = this.req;
    const c = this.core.counters;
    const psn = p.psn;
    // A response to a PSN never sent is not ours.
    if (psnDiff(psn, req.sentEnd) >= 0) {
      c.inc(C.rcvd_bad_resp_drop);
      return;
    }
    const aethOff = p.hdrOffset(Hdr.AETH);
    const syn = aethOff >= 0 ? aethSyndrome(p.buf, aethOff) : AethSyndrome.ACK_UNLIMITED;
    req.creditWait = false;
    if ((syn & AethSyndrome.TYPE_MASK) === AethSyndrome.ACK && aethOff >= 0) {
      const code = syn & AethSyndrome.VALUE_MASK;
      this.credits = code === AETH_CREDIT_INVALID ? Infinity : aethCredits(code);
    }
    if (psnDiff(psn, this.psn) < 0) {
      // Older than anything unacknowledged: a duplicate (the responder re-ACKs retried requests).
      return;
    }
    switch (p.opcode) {
      case IbOpcode.RC_ACKNOWLEDGE:
        this.ack(p, psn, syn);
        break;
      case IbOpcode.RC_RDMA_READ_RESPONSE_FIRST:
      case IbOpcode.RC_RDMA_READ_RESPONSE_MIDDLE:
      case IbOpcode.RC_RDMA_READ_RESPONSE_LAST:
      case IbOpcode.RC_RDMA_READ_RESPONSE_ONLY:
        if ((syn & AethSyndrome.TYPE_MASK) !== AethSyndrome.ACK) {
          c.inc(C.rcvd_bad_resp_drop);
          return;
        }
        if (this.ackThrough(psnAdd(psn, -1))) this.readResponse(p, psn);
        break;
      case IbOpcode.RC_ATOMIC_ACKNOWLEDGE:
        if ((syn & AethSyndrome.TYPE_MASK) !== AethSyndrome.ACK) {
          c.inc(C.rcvd_bad_resp_drop);
          return;
        }
        if (this.ackThrough(psnAdd(psn, -1))) this.atomicAck(p, psn);
        break;
      default:
        c.inc(C.rcvd_bad_resp_drop);
        return;
    }
    req.resync(this.psn);
    if (!this.outstanding()) {
      this.timer?.cancel();
      this.timer = null;
    }
    req.kick();
  }

  private ack(p: RocePacket, psn: number, syn: number): void {
    const c = this.core.counters;
    switch (syn & AethSyndrome.TYPE_MASK) {
      case AethSyndrome.ACK:
        this.ackThrough(psn);
        return;
      case AethSyndrome.RNR_NAK: {
        c.inc(C.rcvd_rnr_err);
        if (!this.ackThrough(psnAdd(psn, -1))) return;
        const head = this.req.list.peek();
        if (head === undefined) return;
        if (this.rnrLeft <= 0) {
          c.inc(C.retry_rnr_exceeded_err);
          this.fail(head, WcStatus.RNR_RETRY_EXC_ERR, 'RNR retry counter exceeded');
          return;
        }
        if (this.core.rnrRetry !== 7) this.rnrLeft--;
        const ms = (RNR_TIMER_USEC[syn & AethSyndrome.VALUE_MASK] as number) / 1000;
        if (tracing('qp')) traceEvent('qp', this.core.tag, 'rnr-nak', { psn, delayMs: ms });
        this.req.rnrWait = true;
        this.timer?.cancel();
        this.timer = null;
        this.rnrTimer?.cancel();
        this.rnrTimer = this.core.clock.after(ms, () => {
          this.rnrTimer = null;
          this.req.rnrWait = false;
          this.req.rewind(this.psn);
          this.req.kick();
        });
        return;
      }
      case AethSyndrome.NAK: {
        if (syn === AethSyndrome.NAK_PSN_SEQ_ERROR) {
          c.inc(C.rcvd_seq_err);
          if (!this.ackThrough(psnAdd(psn, -1))) return;
          // During an RNR wait the requester goes back when the wait ends anyway.
          if (!this.req.rnrWait) this.retry(false);
          return;
        }
        if (!this.ackThrough(psnAdd(psn, -1))) return;
        const head = this.req.list.peek();
        if (head === undefined || !head.started) return;
        const status =
          syn === AethSyndrome.NAK_INVALID_REQUEST
            ? WcStatus.REM_INV_REQ_ERR
            : syn === AethSyndrome.NAK_REMOTE_ACCESS_ERROR
              ? WcStatus.REM_ACCESS_ERR
              : WcStatus.REM_OP_ERR;
        this.fail(head, status, `NAK 0x${syn.toString(16)} at psn ${psn}`);
        return;
      }
      default:
        // reserved syndrome type
        c.inc(C.rcvd_bad_resp_drop);
    }
  }

  private readResponse(p: RocePacket, psn: number): void {
    const core = this.core;
    const c = core.counters;
    const e = this.req.list.peek();
    if (e === undefined || e.kind !== WqeKind.READ || !e.started || psnDiff(psn, e.firstPsn) < 0 || psnDiff(psn, e.lastPsn) > 0) {
      c.inc(C.rcvd_bad_resp_drop);
      return;
    }
    if (psn !== this.psn) {
      // Responses come in order: the ones before this were lost.
      this.retry(false);
      return;
    }
    const k = psnDiff(psn, e.firstPsn);
    const off = k * core.mtu;
    const want = Math.max(0, Math.min(core.mtu, e.w.length - off));
    const last = k === e.npkts - 1;
    if (p.payloadLen !== want || ((p.mask & OpMask.END) !== 0) !== last) {
      c.inc(C.rcvd_bad_resp_drop);
      return;
    }
    if (want > 0) {
      const r = scatterSges(core.context, core.pd, e.w.sgList, off, p.buf, p.payloadOff, want);
      if (r < 0) {
        this.fail(e, r === ScatterFail.PROT ? WcStatus.LOC_PROT_ERR : WcStatus.LOC_LEN_ERR, 'RDMA READ sink SGE invalid');
        return;
      }
    }
    this.psn = psnAdd(psn, 1);
    this.progress();
    if (last) this.completeHead();
  }

  private atomicAck(p: RocePacket, psn: number): void {
    const core = this.core;
    const e = this.req.list.peek();
    if (e === undefined || e.kind !== WqeKind.ATOMIC || !e.started || psn !== e.firstPsn || psn !== this.psn) {
      core.counters.inc(C.rcvd_bad_resp_drop);
      return;
    }
    const orig = Buffer.allocUnsafe(8);
    orig.writeBigUInt64LE(atmackOrig(p.buf, p.hdrOffset(Hdr.ATMACK)));
    const r = scatterSges(core.context, core.pd, e.w.sgList, 0, orig, 0, 8);
    if (r < 0) {
      this.fail(e, WcStatus.LOC_PROT_ERR, 'atomic result SGE invalid');
      return;
    }
    this.psn = psnAdd(psn, 1);
    this.progress();
    this.completeHead();
  }
}
