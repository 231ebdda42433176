/**
 * The credits of a stream rsocket, both ways, in rsocket.c's terms:
 *
 * - Sending: a credit-consuming message (DATA, IOMAP_SGL) goes only within the credits the peer
 *   granted — `sseq_no` may not reach `sseq_comp`, which the peer's RS_OP_SGL messages move on —
 *   and with its send WQEs free (`sqe_avail`). Control messages (credit grants, SHUTDOWN,
 *   DISCONNECT, keepalives) take none of those but one of the RS_QP_CTRL_SIZE control slots
 *   (`ctrl_seqno` up to `ctrl_max_seqno`); a completion returns what its message took.
 * - Granting (rs_update_credits → rs_give_credits → rs_send_credits): once half the receive
 *   buffer is free again, or the messages received reach the mark set by the last grant, the
 *   next limit (`rseq_no + rq_size`) goes to the peer in an RS_OP_SGL message — behind an RDMA
 *   WRITE of the free half's SGE into the peer's target SGL when there is a free half.
 *
 * The receive side's counters (what was received and read, what was granted) are rx.ts's; which
 * completion returns what is the connection's dispatch.
 */
import { SendFlags, type Mr, type Sge } from '../verbs/index.js';
import { RS_QP_CTRL_SIZE, RS_SGE_SIZE, RsOp, encodeSge, rsMsgSet, seqDiff16 } from './protocol.js';
import { RS_TRACE, RsState } from './state.js';
import { traceEvent } from '../trace.js';
import type { RsConn } from './conn.js';
import type { RsRx } from './rx.js';
import type { RsTx } from './tx.js';

/** An SGL of the peer's: where, with which key, and how many `rs_sge` entries. */
export type PeerSgl = { addr: number; key: number; length: number };

/** One connection's credits; its send queue is counted from {@link init} (rs_init_bufs). */
export class RsCredits {
  // sending (rsocket.c names)
  /** Credit-consuming messages sent (16-bit). */
  sseqNo = 0;
  /** The peer's credit limit (16-bit): {@link sseqNo} may not reach it. */
  sseqComp = 0;
  /** Send WQEs free for data and iomap messages. */
  sqeAvail = 0;
  /** Control slots taken, and the limit the completions of control messages move on. */
  ctrlSeqno = 0;
  ctrlMaxSeqno = RS_QP_CTRL_SIZE;

  // granting
  /** The peer's target SGL (from its connection data): where our grants' SGEs are written. */
  private remoteSgl: PeerSgl = { addr: 0, key: 0, length: 0 };
  /** The entry of {@link remoteSgl} the next SGE is written to. */
  private remoteSge = 0;

  constructor(
    private readonly c: RsConn,
    private readonly rx: RsRx,
    private readonly tx: RsTx,
  ) {}

  /** A send queue of `sqSize` WQEs: all but the control slots are free for messages. */
  init(sqSize: number): void {
    this.sqeAvail = sqSize - this.ctrlMaxSeqno;
  }

  /**
   * The peer's connection data: its target SGL and its first credits. Its entry 0 holds the
   * first half of our receive buffer already (our connection data granted it), so the next
   * grant goes to entry 1.
   */
  peer(sgl: PeerSgl, credits: number): void {
    this.remoteSgl = { addr: sgl.addr, key: sgl.key, length: sgl.length };
    this.remoteSge = 1;
    this.sseqComp = credits;
  }

  /** The peer moved its credit limit on (RS_OP_SGL). */
  granted(limit: number): void {
    this.sseqComp = limit & 0xffff;
  }

  /** A credit-consuming message may be posted: a credit and its send WQEs are free. */
  canPost(): boolean {
    return this.sqeAvail >= this.tx.wqesPerMsg && this.sseqNo !== this.sseqComp;
  }

  /** One credit-consuming message posted: its credit and send WQEs taken. */
  take(): void {
    this.sseqNo = (this.sseqNo + 1) & 0xffff;
    this.sqeAvail -= this.tx.wqesPerMsg;
  }

  /** One send WQE taken without a credit (riowrite's RDMA WRITE, which no message announces). */
  takeWqe(): void {
    this.sqeAvail--;
  }

  /** The completion of a data, iomap or riowrite WQE: the WQE is free again. */
  wqeDone(): void {
    this.sqeAvail++;
  }

  /** A control slot is free. */
  ctrlAvail(): boolean {
    return this.ctrlSeqno !== this.ctrlMaxSeqno;
  }

  /** rs_2ctrl_avail: two control slots free (MSG_SEND credit updates need a WRITE and a SEND). */
  ctrl2Avail(): boolean {
    return this.ctrlSeqno + 1 - this.ctrlMaxSeqno < 0;
  }

  /** One control slot taken (a control message or a keepalive). */
  takeCtrl(): void {
    this.ctrlSeqno++;
  }

  /** The completion of a control message: its slot is free again. */
  ctrlDone(): void {
    this.ctrlMaxSeqno++;
  }

  /** rs_conn_all_sends_done, while connected: every send WQE and control slot is back. */
  allDone(): boolean {
    return this.ctrlMaxSeqno - this.ctrlSeqno + this.sqeAvail === this.c.cfg.sqSize;
  }

  /** rs_update_credits: give credits when they are due and slots are free for the grant. */
  update(): void {
    const rx = this.rx;
    const half = this.c.cfg.rbufSize >> 1;
    if (
      (rx.rbufBytesAvail >= half || seqDiff16(rx.rseqNo, rx.rseqComp) >= 0) &&
      (this.tx.msgSendMode ? this.ctrl2Avail() : this.ctrlAvail()) &&
      this.c.state & RsState.connected &&
      this.c.qp
    ) {
      this.give();
    }
  }

  /**
   * rs_send_credits: the next limit in an RS_OP_SGL message, behind the SGE of the free half of
   * the receive buffer when there is one (written in the peer's byte order: rsocket.c's
   * RS_OPT_SWAP_SGL), then posted.
   */
  private give(): void {
    const cfg = this.c.cfg;
    const rx = this.rx;
    const tx = this.tx;
    const half = cfg.rbufSize >> 1;
    this.ctrlSeqno++;
    rx.rseqComp = (rx.rseqNo + (cfg.rqSize >> 1)) & 0xffff;
    const limit = rx.rseqNo + cfg.rqSize;
    rx.grantSeq = limit & 0xffff;
    const msg = rsMsgSet(RsOp.SGL, limit);
    if (rx.rbufBytesAvail >= half) {
      // RS_OPT_MSG_SEND: the WRITE and the SEND each take a control slot.
      if (tx.msgSendMode) this.ctrlSeqno++;
      const r = rx.rmr as Mr;
      const sge = { addr: r.addr + rx.rbufFreeOffset, key: r.rkey, length: half };
      let sg: Sge;
      let flags = 0;
      if (cfg.sqInline >= RS_SGE_SIZE) {
        sg = tx.scratchSge(RS_SGE_SIZE);
        encodeSge(sge, !rx.peerBigEndian, tx.scratch, sg.addr - (tx.scratchMr as Mr).addr);
        flags = SendFlags.INLINE;
      } else {
        const off = tx.sbufRing + RS_SGE_SIZE * (this.ctrlSeqno & (RS_QP_CTRL_SIZE - 1));
        encodeSge(sge, !rx.peerBigEndian, tx.sbuf, off);
        const s = tx.smr as Mr;
        sg = { addr: s.addr + off, length: RS_SGE_SIZE, lkey: s.lkey };
      }
      if (RS_TRACE) traceEvent('rs', this.c.tag, 'rs-send', { message: `SGL ${limit & 0xffff} + SGE ${sge.addr.toString(16)}+${half} -> slot ${this.remoteSge}` });
      tx.queueWriteMsg([sg], msg, flags, this.remoteSgl.addr + this.remoteSge * RS_SGE_SIZE, this.remoteSgl.key);
      rx.window += half;
      rx.rbufBytesAvail -= half;
      rx.rbufFreeOffset += half;
      if (rx.rbufFreeOffset >= cfg.rbufSize) rx.rbufFreeOffset = 0;
      if (++this.remoteSge === this.remoteSgl.length) this.remoteSge = 0;
    } else {
      if (RS_TRACE) traceEvent('rs', this.c.tag, 'rs-send', { message: `SGL ${limit & 0xffff}` });
      this.c._queueMsg(msg);
    }
    tx.flushPosts();
  }
}
