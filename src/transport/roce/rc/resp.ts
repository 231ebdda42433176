/**
 * The RC responder (rxe_resp.c): executes the peer's requests and answers them.
 *
 * Checks, in rxe's order, for each request packet:
 * 1. PSN against the expected PSN (ePSN). Ahead → one "PSN sequence error" NAK carrying the
 *    ePSN until the ePSN arrives (IBTA class B); the packet is dropped. Behind → a duplicate:
 *    SENDs and WRITEs are ACKed again (C9-105), a READ whose PSN lies in a saved READ's PSN
 *    range and whose rkey/va/length lie inside that READ's is answered again from its PSN with
 *    its own va and length (re-reading memory), atomics get their saved ACK
 *    again (never executed twice); a duplicate with no resource left is dropped (class D).
 * 2. Opcode sequence (a MIDDLE/LAST needs its FIRST, a FIRST cannot interrupt a message) and the
 *    QP's `qp_access_flags` for READ, WRITE and atomics → "invalid request" NAK.
 * 3. Resources: a SEND (first or only packet) or a WRITE with immediate takes a receive WQE; none
 *    posted → RNR NAK with `min_rnr_timer` (class B: the requester retries). A READ or atomic with
 *    no responder resources (IRD 0) → invalid request.
 * 4. Lengths: FIRST and MIDDLE payloads exactly the path MTU, LAST 1..MTU, ONLY <= MTU, a RETH
 *    length <= 2^31, WRITE packets consistent with the RETH length → invalid request.
 * 5. R_Key (WRITE, READ, atomic): the MR of that key, in this QP's PD, with the remote right,
 *    covering the whole range, or the memory window of that key (bound, in this QP's PD, type 2
 *    bound through this QP, with the remote right, the range inside the window and its MR) →
 *    "remote access error" NAK; atomics at an address that is not 8-byte aligned → invalid
 *    request. A SEND with Invalidate frees the window or invalidates the MR its IETH names.
 * 6. Execute: data into the receive WQE (a message larger than the buffer: the receive completes
 *    with LOC_LEN_ERR and the requester gets an invalid request NAK) or into the MR; READ and
 *    atomics get a responder resource (a ring of IRD entries, the oldest reused, as rxe).
 * The class C errors (invalid request, remote access, remote operational) send their NAK and move
 * the QP to ERR. MSN counts completed messages; the ACK's credit field is the number of posted
 * receive WQEs (IBTA 9.7.7.2; rxe always says "unknown").
 *
 * Responses leave in PSN order through one queue, as soon as the request is handled: a READ's
 * response packets go out in bursts ({@link READ_RESPONSE_BURST}, then other work runs), and an
 * ACK queued behind them waits; a later ACK replaces one still queued (they acknowledge
 * cumulatively). ACKs answer the packets that ask for one (AckReq: the last packet of each
 * message, and one in 64 of a long one), so one ACK covers many packets.
 *
 * UC (rxe_resp.c with `qp_type` UC, IBTA 9.7.5.1.2 and the class D errors of 9.9.3): the same
 * checks and placement, and no response of any kind.
 * - PSN (`check_psn`): a packet other than the expected PSN starts dropping the message it belongs
 *   to; every packet is dropped until a FIRST or ONLY, which the responder takes as the new
 *   expected PSN (it resynchronises). The sender learns nothing: its WQE completed when sent.
 * - Opcode sequence (`check_op_seq`): a MIDDLE or LAST without its FIRST drops the rest of its
 *   message. A FIRST or ONLY while a message is in progress ends that message unfinished (its
 *   receive WQE is kept, emptied, for the next message: `do_class_d1e_error`) and starts its own.
 *   rxe discards that FIRST/ONLY as well, and, when no receive WQE was in progress (a cut RDMA
 *   WRITE), keeps the cut message open so that every later message is discarded too; here the
 *   new message is taken, as the class D1 rule reads and rxe's comment there says.
 * - Everything an RC QP NAKs as invalid or a remote access error (an RDMA WRITE the QP's access
 *   flags refuse, a bad R_Key or range, a bad length, a message longer than the receive buffer)
 *   and no posted receive WQE drop the message silently (class D, `rcvd_no_recv_wqe_drop` for the
 *   latter); the receive WQE taken for it is kept for the next message. A receive WQE naming
 *   invalid memory is class A as for RC: it completes with LOC_QP_OP_ERR and the QP goes to ERR.
 */
import { trace, traceEvent, tracing } from '../../../trace.js';
import type { RqWqe } from '../../../verbs/qp.js';
import type { Mr } from '../../../verbs/mr.js';
import { invalidateRkey, remoteKeyOffset } from '../../../verbs/mw.js';
import { Access, AsyncEventType, WcFlags, WcOpcode, WcStatus } from '../../../verbs/types.js';
import {
  AethSyndrome,
  Hdr,
  IbOpcode,
  OpMask,
  VA_OVERFLOW,
  aethCreditCode,
  AETH_CREDIT_INVALID,
  ibOpcodeName,
  atmethCompare,
  atmethRkey,
  atmethSwapAdd,
  atmethVa,
  iethRkey,
  immDt,
  psnAdd,
  psnDiff,
  rethLen,
  rethRkey,
  rethVa,
  writeAeth,
  writeAtmack,
  type RocePacket,
} from '../../../wire/roce/index.js';
import { C } from '../counters.js';
import { MAX_RDMA_LEN, READ_RESPONSE_BURST, ScatterFail, hdrAt, rcPacket, scatterSges, type RcCore } from './common.js';
import type { RcTimer } from './clock.js';

/** A responder resource: a READ or atomic the peer may ask again (rxe `struct resp_res`). */
interface RespRes {
  kind: 'read' | 'atomic';
  firstPsn: number;
  lastPsn: number;
  /** READ: the request as first received. */
  va: number;
  rkey: number;
  length: number;
  /** Atomic: the original value, and the MSN its ACK carried. */
  orig: bigint;
  msn: number;
  /** Bumped when a replay supersedes the responses still queued for it. */
  gen: number;
}

/** One queued response. */
type Out =
  | { kind: 'ack'; psn: number; syndrome: number; msn: number; credits: boolean }
  | { kind: 'atomic'; psn: number; orig: bigint; msn: number }
  | { kind: 'read'; res: RespRes; gen: number; psn: number; va: number; length: number; done: number; first: boolean; msn: number };

/** What a class C error NAKs and how the receive in progress completes. */
interface ClassC {
  syndrome: number;
  recvStatus: WcStatus;
  /** The affiliated asynchronous event of the responder's QP (IBTA 11.6.3). */
  event: AsyncEventType;
  why: string;
  /** Class A (a malformed receive WQE): fatal for every QP type, UC included. */
  classA?: true;
}

const INVALID = (why: string, recvStatus: WcStatus = WcStatus.REM_INV_REQ_ERR): ClassC => ({
  syndrome: AethSyndrome.NAK_INVALID_REQUEST,
  recvStatus,
  event: AsyncEventType.QP_REQ_ERR,
  why,
});
const ACCESS = (why: string): ClassC => ({ syndrome: AethSyndrome.NAK_REMOTE_ACCESS_ERROR, recvStatus: WcStatus.REM_ACCESS_ERR, event: AsyncEventType.QP_ACCESS_ERR, why });
const REMOTE_OP = (why: string): ClassC => ({
  syndrome: AethSyndrome.NAK_REMOTE_OPERATIONAL_ERROR,
  recvStatus: WcStatus.LOC_QP_OP_ERR,
  event: AsyncEventType.QP_FATAL,
  why,
  classA: true,
});

/** What {@link RcResponder.sequenceProblem} finds wrong with an opcode following the last one. */
const SeqFault = {
  /** A MIDDLE or LAST with no message in progress. */
  NO_FIRST: 1,
  /** A packet that does not continue the message in progress. */
  IN_MESSAGE: 2,
} as const;
type SeqFault = (typeof SeqFault)[keyof typeof SeqFault];

/** Operation bits (the low five) of the opcodes the sequence checks name; UC's are these | 0x20. */
const OP_MASK = 0x1f;

/** The responder of one RC QP. */
export class RcResponder {
  /** Expected PSN. */
  epsn = 0;
  /** Message sequence number: completed request messages. */
  msn = 0;
  /** Opcode of the last request executed (-1: none), for the sequence checks. */
  private lastOp = -1;
  /** A sequence NAK was sent for the current ePSN. */
  private nakSent = false;
  /** The receive WQE the current SEND message (or WRITE with immediate) fills, and the bytes placed. */
  private recv: RqWqe | null = null;
  private recvOff = 0;
  /** The current multi-packet WRITE: where its next byte goes and how many are left. */
  private wMr: Mr | null = null;
  private wOff = 0;
  private wLeft = 0;
  private wLen = 0;
  /** Responder resources (IRD of them), reused oldest first. */
  private res: RespRes[] = [];
  private resNext = 0;
  private readonly out: Out[] = [];
  private outHead = 0;
  private drainTimer: RcTimer | null = null;
  /** The QP has seen its first request (communication established). */
  private started = false;
  /** UC: the rest of the current message is being dropped (rxe `resp.drop_msg`). */
  private dropMsg = false;

  constructor(private readonly core: RcCore) {}

  /** Start over at `rqPsn` (RTR). */
  reset(rqPsn: number): void {
    this.stop();
    this.epsn = rqPsn & 0xffffff;
    this.msn = 0;
    this.lastOp = -1;
    this.nakSent = false;
    this.recv = null;
    this.recvOff = 0;
    this.wMr = null;
    this.res = [];
    this.resNext = 0;
    this.started = false;
    this.dropMsg = false;
  }

  /** Drop queued responses and the deferred drain (QP to ERR, RESET or destroyed). */
  stop(): void {
    this.drainTimer?.cancel();
    this.drainTimer = null;
    this.out.length = 0;
    this.outHead = 0;
  }

  /** The receive WQE a message is being placed into, taken off for flushing (QP to ERR). */
  takeRecvInProgress(): RqWqe | null {
    const w = this.recv;
    this.recv = null;
    return w;
  }

  /** A request packet for this QP (headers, ICRC, state and addresses checked by the device). */
  onRequest(p: RocePacket): void {
    const core = this.core;
    if (core.uc) {
      this.ucRequest(p);
      return;
    }
    const c = core.counters;
    // IBA 9.7.5.1 (rxe `check_psn`): only the expected PSN executes. Up to 2^23 − 1 ahead is the
    // invalid region: one sequence NAK until the expected PSN arrives, nothing else. Up to 2^23
    // behind is the duplicate region: acknowledged again or replayed from the responder
    // resources, never executed again. A spoofed packet must therefore hit the 24-bit ePSN
    // exactly, which the CSPRNG-drawn starting PSN keeps unforeseeable.
    const d = psnDiff(p.psn, this.epsn);
    if (d > 0) {
      c.inc(C.out_of_seq_request);
      if (!this.nakSent) {
        this.nakSent = true;
        this.queueAck(this.epsn, AethSyndrome.NAK_PSN_SEQ_ERROR);
        this.flushNow();
      }
      return;
    }
    if (d < 0) {
      c.inc(C.duplicate_request);
      this.duplicate(p);
      this.flushNow();
      return;
    }
    this.nakSent = false;
    // The first request in sequence establishes the connection (IBA: as an RTU would); one
    // outside the window does not, so a spoofed packet cannot end the passive side's REP resends.
    if (!this.started) {
      this.started = true;
      core.commEstablished();
    }
    const err = this.execute(p);
    if (err !== null) this.classC(p.psn, err);
    else this.flushNow();
  }

  /** A UC request packet (rxe_resp.c `check_psn`, `check_op_seq` for UC, then the common checks). */
  private ucRequest(p: RocePacket): void {
    const m = p.mask;
    const start = (m & OpMask.START) !== 0;
    const inSequence = p.psn === this.epsn;
    if (this.dropMsg || !inSequence) {
      // Only a FIRST or ONLY ends the drop: it is the start of a message to take.
      if (!start) {
        if (!this.dropMsg && tracing('rx')) trace('rx', this.core.tag, `UC psn ${p.psn}, expected ${this.epsn}: message dropped`);
        this.dropMsg = true;
        return;
      }
      this.dropMsg = false;
    }
    const seq = this.sequenceProblem(p.opcode);
    if (seq !== null) {
      this.ucEndMessage(`${ibOpcodeName(p.opcode)} ${seq === SeqFault.NO_FIRST ? 'without its FIRST' : 'inside another message'}`);
      // A FIRST or ONLY starts its own message (class D1); anything else is dropped with the rest of its message.
      if (!start) {
        this.dropMsg = true;
        return;
      }
    }
    // As for RC, only a packet at the expected PSN establishes the connection (a spoofed FIRST or
    // ONLY elsewhere is taken, as UC takes it, but does not end the passive side's REP resends).
    if (!this.started && inSequence) {
      this.started = true;
      this.core.commEstablished();
    }
    const err = this.execute(p);
    if (err === null) return;
    if (err.classA) {
      this.classC(p.psn, err);
      return;
    }
    this.ucEndMessage(err.why);
    this.dropMsg = true;
  }

  /**
   * UC: the message in progress ends unfinished (rxe `do_class_d1e_error` without an SRQ): the
   * receive WQE it was filling is kept, emptied, for the next message; nothing completes.
   */
  private ucEndMessage(why: string): void {
    if (tracing('rx')) trace('rx', this.core.tag, `UC message dropped: ${why}`);
    this.recvOff = 0;
    this.lastOp = -1;
    this.wMr = null;
    this.wLeft = 0;
  }

  /**
   * Send what the request just queued before anything else runs: an ACK leaves before the
   * application can see (and react to) the completion it follows, as rxe's responder task does.
   */
  private flushNow(): void {
    if (this.outHead >= this.out.length) return;
    this.drain(READ_RESPONSE_BURST);
    if (this.out.length > this.outHead && this.drainTimer === null) this.drainTimer = this.core.clock.defer(() => this.onDrain());
  }

  // -- new requests ---------------------------------------------------------------------------

  /** Check and execute the request at the ePSN; a class C error to report, or null. */
  private execute(p: RocePacket): ClassC | null {
    const core = this.core;
    const m = p.mask;
    const op = p.opcode;
    if (tracing('rx')) traceEvent('rx', core.tag, 'request', { transport: core.uc ? 'UC' : 'RC', opcode: ibOpcodeName(op), psn: p.psn, bytes: p.payloadLen });
    if (!core.uc) {
      const seq = this.sequenceProblem(op);
      if (seq !== null) return INVALID(`${ibOpcodeName(op)} ${seq === SeqFault.NO_FIRST ? 'without its FIRST' : 'inside another message'}`);
    }
    const acc = core.accessFlags;
    if (
      (m & OpMask.READ && !(acc & Access.REMOTE_READ)) ||
      (m & OpMask.WRITE && !(acc & Access.REMOTE_WRITE)) ||
      (m & OpMask.ATOMIC && !(acc & Access.REMOTE_ATOMIC))
    ) {
      return INVALID(`${ibOpcodeName(op)} not allowed by the QP's access flags`);
    }
    if (m & (OpMask.FLUSH | OpMask.ATOMIC_WRITE)) return INVALID(`${ibOpcodeName(op)} not supported`);
    if (m & (OpMask.READ | OpMask.ATOMIC)) {
      if (core.ird === 0) return INVALID('READ/atomic with no responder resources');
      return m & OpMask.READ ? this.readRequest(p) : this.atomicRequest(p);
    }
    // SEND or WRITE packet: payload length against the path MTU (rxe_resp_check_length).
    const mtu = core.mtu;
    const len = p.payloadLen;
    if (m & OpMask.START && m & OpMask.END) {
      if (len > mtu) return INVALID(`ONLY packet of ${len} bytes > MTU ${mtu}`);
    } else if (m & (OpMask.START | OpMask.MIDDLE)) {
      if (len !== mtu) return INVALID(`FIRST/MIDDLE packet of ${len} bytes, MTU ${mtu}`);
    } else if (len === 0 || len > mtu) return INVALID(`LAST packet of ${len} bytes`);
    if (m & OpMask.RWR && this.recv === null) {
      const w = core.rqTake();
      if (w === undefined && core.uc) {
        // UC: no RNR NAK, the message is dropped (rxe RESPST_ERR_RNR: "UD/UC - class D").
        core.counters.inc(C.rcvd_no_recv_wqe_drop);
        return INVALID('no receive WQE posted');
      }
      if (w === undefined) {
        core.counters.inc(C.send_rnr_err);
        this.queueAck(p.psn, AethSyndrome.RNR_NAK | (core.minRnrTimer & AethSyndrome.VALUE_MASK));
        // The packets behind it are dropped silently until the requester comes back to this PSN
        // after its RNR wait (a sequence NAK now would cut the wait short).
        this.nakSent = true;
        return null;
      }
      this.recv = w;
      this.recvOff = 0;
    }
    if (m & OpMask.SEND) {
      const w = this.recv;
      if (w === null) return INVALID('SEND without a receive WQE');
      if (len > 0) {
        const r = scatterSges(core.context, core.pd, w.sgList, this.recvOff, p.buf, p.payloadOff, len);
        if (r === ScatterFail.LENGTH) return INVALID(`message longer than the receive buffer (${w.length} bytes)`, WcStatus.LOC_LEN_ERR);
        if (r === ScatterFail.PROT) return REMOTE_OP('receive WQE names no valid local memory');
      }
      this.recvOff += len;
    } else {
      const e = this.writePacket(p);
      if (e !== null) return e;
    }
    let invalidated = 0;
    if (m & OpMask.IETH) {
      invalidated = iethRkey(p.buf, p.hdrOffset(Hdr.IETH));
      if (invalidateRkey(core.context, core.pd, invalidated) !== 0) return INVALID(`SEND with invalidate of rkey 0x${invalidated.toString(16)} that cannot be invalidated`);
    }
    this.epsn = psnAdd(p.psn, 1);
    this.lastOp = op;
    if (m & OpMask.END) {
      this.msn = (this.msn + 1) & 0xffffff;
      if (m & OpMask.WRITE) this.wMr = null;
    }
    if (m & OpMask.COMP) this.completeRecv(p, invalidated);
    if (p.ackReq && !core.uc) this.queueAck(p.psn, AethSyndrome.ACK);
    return null;
  }

  /**
   * What is wrong with `op` following the last executed opcode (rxe `check_op_seq`), or null.
   * RC and UC opcodes are compared by their operation bits (the same for both classes; a QP only
   * receives its own class).
   */
  private sequenceProblem(op: number): SeqFault | null {
    const O = IbOpcode;
    const last = this.lastOp < 0 ? -1 : this.lastOp & OP_MASK;
    const o = op & OP_MASK;
    const inSend = last === O.RC_SEND_FIRST || last === O.RC_SEND_MIDDLE;
    const inWrite = last === O.RC_RDMA_WRITE_FIRST || last === O.RC_RDMA_WRITE_MIDDLE;
    const sendCont = o === O.RC_SEND_MIDDLE || o === O.RC_SEND_LAST || o === O.RC_SEND_LAST_WITH_IMMEDIATE || o === O.RC_SEND_LAST_WITH_INVALIDATE;
    const writeCont = o === O.RC_RDMA_WRITE_MIDDLE || o === O.RC_RDMA_WRITE_LAST || o === O.RC_RDMA_WRITE_LAST_WITH_IMMEDIATE;
    if (inSend) return sendCont ? null : SeqFault.IN_MESSAGE;
    if (inWrite) return writeCont ? null : SeqFault.IN_MESSAGE;
    if (sendCont || writeCont) return SeqFault.NO_FIRST;
    return null;
  }

  /** Place one WRITE packet (the RETH of FIRST/ONLY checked against the MR). */
  private writePacket(p: RocePacket): ClassC | null {
    const core = this.core;
    const m = p.mask;
    const len = p.payloadLen;
    if (m & OpMask.RETH) {
      const o = p.hdrOffset(Hdr.RETH);
      const va = rethVa(p.buf, o);
      const rkey = rethRkey(p.buf, o);
      const total = rethLen(p.buf, o);
      if (total > MAX_RDMA_LEN) return INVALID(`RDMA WRITE of ${total} bytes`);
      this.wLen = total;
      this.wLeft = total;
      this.wMr = null;
      this.wOff = 0;
      if (total > 0) {
        const off = va === VA_OVERFLOW ? -2 : remoteKeyOffset(core.context, core, core.pd, rkey, va, total, Access.REMOTE_WRITE);
        const mr = core.context._mrs.last;
        if (off < 0 || mr === undefined) {
          core.counters.inc(C.rkey_violation_err);
          return ACCESS(`RDMA WRITE to rkey 0x${rkey.toString(16)} va 0x${va.toString(16)} len ${total}: ${off}`);
        }
        this.wMr = mr;
        this.wOff = off;
      }
    }
    // The packet must fit what the RETH announced (rxe check_rkey's length rules).
    const mtu = core.mtu;
    if (this.wLeft > mtu ? len !== mtu : len !== this.wLeft) return INVALID(`RDMA WRITE packet of ${len} bytes, ${this.wLeft} left`);
    if (len > 0) {
      const mr = this.wMr;
      if (mr === null || !mr.stagValid) return ACCESS('RDMA WRITE to a region that went away');
      mr.buf.set(p.buf.subarray(p.payloadOff, p.payloadOff + len), this.wOff);
      this.wOff += len;
      this.wLeft -= len;
    }
    if (m & OpMask.END && this.wLeft !== 0) return INVALID(`RDMA WRITE ended ${this.wLeft} bytes short`);
    return null;
  }

  /**
   * The receive WQE of a SEND or WRITE with immediate completes (its own or the SRQ's). As rxe's
   * `do_complete` for a user CQ, every successful receive carries `IBV_WC_GRH` (RoCE packets
   * always have one), with `WITH_IMM` / `WITH_INV` added; completions in error carry no flag.
   */
  private completeRecv(p: RocePacket, invalidated: number): void {
    const w = this.recv;
    if (w === null) return;
    this.recv = null;
    const m = p.mask;
    let flags = WcFlags.GRH;
    let immData = 0;
    if (m & OpMask.IMMDT) {
      flags |= WcFlags.WITH_IMM;
      immData = immDt(p.buf, p.hdrOffset(Hdr.IMMDT));
    }
    if (m & OpMask.IETH) flags |= WcFlags.WITH_INV;
    const write = (m & OpMask.WRITE) !== 0;
    this.core.counters.inc(C.rdma_recvs);
    this.core.recvDone(w, WcStatus.SUCCESS, write ? this.wLen : this.recvOff, flags, invalidated, p.se, {
      opcode: write ? WcOpcode.RECV_RDMA_WITH_IMM : WcOpcode.RECV,
      immData,
    });
  }

  /** A new RDMA READ request: check it, keep it as a resource, queue its responses. */
  private readRequest(p: RocePacket): ClassC | null {
    const core = this.core;
    const o = p.hdrOffset(Hdr.RETH);
    const va = rethVa(p.buf, o);
    const rkey = rethRkey(p.buf, o);
    const len = rethLen(p.buf, o);
    if (len > MAX_RDMA_LEN) return INVALID(`RDMA READ of ${len} bytes`);
    if (len > 0) {
      const off = va === VA_OVERFLOW ? -2 : remoteKeyOffset(core.context, core, core.pd, rkey, va, len, Access.REMOTE_READ);
      if (off < 0) {
        core.counters.inc(C.rkey_violation_err);
        return ACCESS(`RDMA READ of rkey 0x${rkey.toString(16)} va 0x${va.toString(16)} len ${len}: ${off}`);
      }
    }
    const npkts = Math.max(1, Math.ceil(len / core.mtu));
    this.msn = (this.msn + 1) & 0xffffff; // C9-148: a READ counts when it is received
    const res = this.newRes('read', p.psn, psnAdd(p.psn, npkts - 1));
    res.va = va;
    res.rkey = rkey;
    res.length = len;
    this.epsn = psnAdd(p.psn, npkts);
    this.lastOp = p.opcode;
    this.queue({ kind: 'read', res, gen: res.gen, psn: p.psn, va, length: len, done: 0, first: true, msn: this.msn });
    return null;
  }

  /** A new atomic: check, execute on the 8 bytes (host order), keep the result, queue the ACK. */
  private atomicRequest(p: RocePacket): ClassC | null {
    const core = this.core;
    const o = p.hdrOffset(Hdr.ATMETH);
    const va = atmethVa(p.buf, o);
    const rkey = atmethRkey(p.buf, o);
    const off = va === VA_OVERFLOW ? -2 : remoteKeyOffset(core.context, core, core.pd, rkey, va, 8, Access.REMOTE_ATOMIC);
    const mr = core.context._mrs.last;
    if (off < 0 || mr === undefined) {
      core.counters.inc(C.rkey_violation_err);
      return ACCESS(`atomic on rkey 0x${rkey.toString(16)} va 0x${va.toString(16)}: ${off}`);
    }
    if (va % 8 !== 0) return INVALID(`atomic at misaligned address 0x${va.toString(16)}`);
    const view = Buffer.from(mr.buf.buffer, mr.buf.byteOffset + off, 8);
    const orig = view.readBigUInt64LE(0);
    const operand = atmethSwapAdd(p.buf, o);
    if (p.opcode === IbOpcode.RC_COMPARE_SWAP) {
      if (orig === atmethCompare(p.buf, o)) view.writeBigUInt64LE(operand, 0);
    } else view.writeBigUInt64LE(BigInt.asUintN(64, orig + operand), 0);
    this.msn = (this.msn + 1) & 0xffffff;
    const res = this.newRes('atomic', p.psn, p.psn);
    res.orig = orig;
    res.msn = this.msn;
    this.epsn = psnAdd(p.psn, 1);
    this.lastOp = p.opcode;
    this.queue({ kind: 'atomic', psn: p.psn, orig, msn: this.msn });
    return null;
  }

  /** The next responder resource (the oldest is reused once IRD of them exist). */
  private newRes(kind: 'read' | 'atomic', firstPsn: number, lastPsn: number): RespRes {
    const ird = Math.max(1, this.core.ird);
    let r = this.res[this.resNext];
    if (r === undefined) {
      r = { kind, firstPsn, lastPsn, va: 0, rkey: 0, length: 0, orig: 0n, msn: 0, gen: 0 };
      this.res[this.resNext] = r;
    } else {
      r.kind = kind;
      r.firstPsn = firstPsn;
      r.lastPsn = lastPsn;
      r.gen++;
    }
    this.resNext = (this.resNext + 1) % ird;
    return r;
  }

  // -- duplicates ---------------------------------------------------------------------------------

  private duplicate(p: RocePacket): void {
    const m = p.mask;
    if (m & (OpMask.SEND | OpMask.WRITE)) {
      // C9-105: acknowledge it again (with the last PSN executed).
      if (p.ackReq) this.queueAck(psnAdd(this.epsn, -1), AethSyndrome.ACK);
      return;
    }
    const r = this.res.find((x) => psnDiff(p.psn, x.firstPsn) >= 0 && psnDiff(p.psn, x.lastPsn) <= 0);
    if (r === undefined) return; // class D: nothing to replay
    if (m & OpMask.READ && r.kind === 'read') {
      const o = p.hdrOffset(Hdr.RETH);
      const va = rethVa(p.buf, o);
      const len = rethLen(p.buf, o);
      // As rxe_resp.c duplicate_request: the retry names the original's rkey and bytes inside the
      // original's range (any part of it); its responses start at this PSN with the new va and
      // length, FIRST/ONLY when it is the original's first PSN, else MIDDLE/LAST. Anything else
      // is dropped (class D; counted in duplicate_request). The region is checked again as each
      // response packet is read.
      if (rethRkey(p.buf, o) !== r.rkey || va === VA_OVERFLOW || va < r.va || len > r.length || va + len > r.va + r.length) return;
      r.gen++; // responses still queued for the earlier request stop
      this.queue({ kind: 'read', res: r, gen: r.gen, psn: p.psn, va, length: len, done: 0, first: p.psn === r.firstPsn, msn: this.msn });
      return;
    }
    if (m & OpMask.ATOMIC && r.kind === 'atomic' && p.psn === r.firstPsn) {
      this.queue({ kind: 'atomic', psn: r.firstPsn, orig: r.orig, msn: r.msn });
    }
  }

  // -- errors -------------------------------------------------------------------------------------

  /**
   * A class C error at PSN `psn` (class A too): the receive in progress (if any) completes with
   * the error, the NAK goes out after the responses queued before it (RC), and the QP moves to ERR.
   */
  private classC(psn: number, e: ClassC): void {
    const core = this.core;
    if (tracing('qp')) traceEvent('qp', core.tag, 'responder-error', { psn, why: e.why });
    const w = this.recv;
    this.recv = null;
    if (w !== null) core.recvDone(w, e.recvStatus, 0, 0, 0, false);
    if (!core.uc) {
      this.queue({ kind: 'ack', psn, syndrome: e.syndrome, msn: this.msn, credits: false });
      this.drain(Infinity);
    }
    core.fatal(e.why, e.event);
  }

  // -- responses ----------------------------------------------------------------------------------

  /** Queue an ACK or NAK; an ACK replaces one still queued at the tail (cumulative). */
  private queueAck(psn: number, syndrome: number): void {
    const isAck = syndrome === AethSyndrome.ACK;
    const tail = this.out.length > this.outHead ? this.out[this.out.length - 1] : undefined;
    if (isAck && tail !== undefined && tail.kind === 'ack' && tail.credits) {
      tail.psn = psn;
      tail.msn = this.msn;
      return;
    }
    this.queue({ kind: 'ack', psn, syndrome, msn: this.msn, credits: isAck });
  }

  /** Queue a response; the request's handler sends it ({@link flushNow}) unless READs are ahead of it. */
  private queue(o: Out): void {
    this.out.push(o);
  }

  private onDrain(): void {
    this.drainTimer = null;
    this.drain(READ_RESPONSE_BURST);
    if (this.out.length > this.outHead && this.drainTimer === null) this.drainTimer = this.core.clock.defer(() => this.onDrain());
  }

  /** Send queued responses, at most `budget` read response packets. */
  private drain(budget: number): void {
    let left = budget;
    while (this.outHead < this.out.length) {
      const o = this.out[this.outHead] as Out;
      if (o.kind === 'read') {
        if (o.gen !== o.res.gen) {
          this.outHead++;
          continue;
        }
        if (left <= 0) break;
        left -= this.readPackets(o, left);
        if (o.done < o.length || (o.length === 0 && o.first)) {
          if (this.outHead >= this.out.length) return; // the QP failed
          continue;
        }
        this.outHead++;
        continue;
      }
      this.outHead++;
      if (o.kind === 'ack') this.sendAck(o.psn, o.credits ? this.ackSyndrome() : o.syndrome, o.msn);
      else this.sendAtomicAck(o.psn, o.orig, o.msn);
    }
    if (this.outHead === this.out.length) {
      this.out.length = 0;
      this.outHead = 0;
    }
  }

  /** ACK syndrome with the credit count: receive WQEs posted and not taken (a QP on an SRQ: the invalid count). */
  private ackSyndrome(): number {
    const n = this.core.rqAvailable();
    return AethSyndrome.ACK | (n === Infinity ? AETH_CREDIT_INVALID : aethCreditCode(n));
  }

  private sendAck(psn: number, syndrome: number, msn: number): void {
    const op = IbOpcode.RC_ACKNOWLEDGE;
    const buf = rcPacket(op, 0, this.core.destQpn, psn, false, false);
    writeAeth(buf, hdrAt(op, Hdr.AETH), syndrome, msn);
    this.core.transmit(buf, buf.length - 4);
  }

  private sendAtomicAck(psn: number, orig: bigint, msn: number): void {
    const op = IbOpcode.RC_ATOMIC_ACKNOWLEDGE;
    const buf = rcPacket(op, 0, this.core.destQpn, psn, false, false);
    writeAeth(buf, hdrAt(op, Hdr.AETH), this.ackSyndrome(), msn);
    writeAtmack(buf, hdrAt(op, Hdr.ATMACK), orig);
    this.core.transmit(buf, buf.length - 4);
  }

  /** Send up to `max` response packets of a READ; returns how many went out. */
  private readPackets(o: Out & { kind: 'read' }, max: number): number {
    const core = this.core;
    const mtu = core.mtu;
    let n = 0;
    while (n < max && (o.done < o.length || (o.length === 0 && o.first))) {
      const left = o.length - o.done;
      const len = Math.min(mtu, left);
      const last = left <= mtu;
      const op = o.first
        ? last
          ? IbOpcode.RC_RDMA_READ_RESPONSE_ONLY
          : IbOpcode.RC_RDMA_READ_RESPONSE_FIRST
        : last
          ? IbOpcode.RC_RDMA_READ_RESPONSE_LAST
          : IbOpcode.RC_RDMA_READ_RESPONSE_MIDDLE;
      const buf = rcPacket(op, len, core.destQpn, o.psn, false, false);
      const aeth = hdrAt(op, Hdr.AETH);
      if (aeth >= 0) writeAeth(buf, aeth, this.ackSyndrome(), o.msn);
      if (len > 0) {
        const va = o.va + o.done;
        // Each packet looks the key up again (rxe_recheck_mr): the region, or the window, may
        // have gone away since the request.
        const off = remoteKeyOffset(core.context, core, core.pd, o.res.rkey, va, len, Access.REMOTE_READ);
        const mr = core.context._mrs.last;
        if (off < 0 || mr === undefined) {
          // The region went away while its READ was answered.
          this.out.length = 0;
          this.outHead = 0;
          this.sendAck(o.psn, AethSyndrome.NAK_REMOTE_ACCESS_ERROR, this.msn);
          core.fatal('RDMA READ source region went away', AsyncEventType.QP_ACCESS_ERR);
          return n;
        }
        buf.set(mr.buf.subarray(off, off + len), hdrAt(op, Hdr.PAYLOAD));
      }
      o.first = false;
      o.done += len;
      o.psn = psnAdd(o.psn, 1);
      core.transmit(buf, hdrAt(op, Hdr.PAYLOAD) + len);
      n++;
      if (len === 0) break;
    }
    return n;
  }
}
