/**
 * The receive side of a stream rsocket: the receive buffer the peer writes its data into, the
 * message slots of the receive WQEs, the queue of DATA messages received and not yet read
 * (rsocket.c's `rmsg` ring), the reads out of it (rrecv's copy loop, MSG_PEEK), and the
 * accounting of what was granted to the peer: credits and receive-buffer bytes, which a peer may
 * not exceed (rsocket.c trusts its peer; here going beyond them fails the socket). Dispatching a
 * received message, and sending the grants, is the connection's.
 */
import { Access, type Mr, type Pd, type Sge } from '../verbs/index.js';
import { RS_MSG_SIZE, seqDiff16 } from './protocol.js';
import { rsBuffer } from './errors.js';
import { copyBytes as copyOut } from '../util/copy.js';
import type { RsConfig } from './tunables.js';

/** Receive work request ids: this flag plus the message slot. */
export const WR_RECV = 2 ** 40;

/** A receive work request as the rsocket posts it, one per message slot. */
export type RecvWr = { wrId: number; sgList: Sge[] };

/** One connection's receive side; its buffers are made by {@link init} (rs_init_bufs). */
export class RsRx {
  /** The receive buffer: two halves, granted to the peer in turn. */
  rbuf = Buffer.alloc(0);
  rmr: Mr | null = null;
  /** RS_OPT_MSG_SEND: the 4-byte message of each receive WQE. */
  msgBuf = Buffer.alloc(0);
  msgMr: Mr | null = null;
  /** One receive work request per message slot, posted again when its message is taken. */
  recvWrs: RecvWr[] = [];

  // received DATA messages not yet consumed (rmsg ring), and their total
  rmsg = new Int32Array(1);
  rmsgHead = 0;
  rmsgTail = 0;
  rmsgCount = 0;
  queued = 0;

  // rsocket.c's counters of the receive side
  rseqNo = 0;
  rseqComp = 0;
  rbufBytesAvail = 0;
  rbufFreeOffset = 0;
  rbufOffset = 0;
  /** The peer writes its messages big-endian (RS_CONN_FLAG_NET). */
  peerBigEndian = false;

  // checks of the peer's behaviour (not in rsocket.c, which trusts its peer)
  /** Credit-consuming messages received (16-bit sequence). */
  rcvdSeq = 0;
  /** The credit limit we last granted (16-bit). */
  grantSeq = 0;
  /** Receive-buffer bytes advertised to the peer and not yet filled. */
  window = 0;

  /**
   * The receive buffer (`cfg.rbufSize`), `nrecv` message slots (registered with `pd`; their
   * buffer is used in RS_OPT_MSG_SEND mode only) and their work requests; the first half of the
   * buffer and `cfg.rqSize` credits count as granted (the connection data grants them).
   */
  init(pd: Pd, cfg: RsConfig, nrecv: number, msgSendMode: boolean): void {
    this.rbuf = rsBuffer(cfg.rbufSize);
    this.rmr = pd.regMr(this.rbuf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    this.msgBuf = Buffer.alloc(RS_MSG_SIZE * nrecv);
    this.msgMr = pd.regMr(this.msgBuf, Access.LOCAL_WRITE);
    this.rmsg = new Int32Array(nrecv + 1);
    this.rbufFreeOffset = cfg.rbufSize >> 1;
    this.rbufBytesAvail = cfg.rbufSize >> 1;
    this.rseqComp = cfg.rqSize >> 1;
    this.grantSeq = cfg.rqSize & 0xffff;
    this.window = cfg.rbufSize >> 1;
    for (let i = 0; i < nrecv; i++) this.recvWrs.push(this.recvWr(i, msgSendMode));
  }

  private recvWr(slot: number, msgSendMode: boolean): RecvWr {
    // With immediate data the message needs no buffer (rs_post_recv: no SGE).
    if (!msgSendMode) return { wrId: WR_RECV + slot, sgList: [] };
    const m = this.msgMr as Mr;
    return { wrId: WR_RECV + slot, sgList: [{ addr: m.addr + slot * RS_MSG_SIZE, length: RS_MSG_SIZE, lkey: m.lkey }] };
  }

  /** A credit-consuming message arrived: whether it is within what we granted (it is counted). */
  takeCredit(): boolean {
    if (seqDiff16(this.grantSeq, this.rcvdSeq) <= 0) return false;
    this.rcvdSeq = (this.rcvdSeq + 1) & 0xffff;
    return true;
  }

  /** A DATA message of `data` bytes arrived: queued, unless it is beyond the buffer granted. */
  takeData(data: number): boolean {
    if (data > this.window) return false;
    this.window -= data;
    this.rmsg[this.rmsgTail] = data;
    if (++this.rmsgTail === this.rmsg.length) this.rmsgTail = 0;
    this.rmsgCount++;
    this.queued += data;
    return true;
  }

  /** The rrecv copy loop: consume messages (rseq_no++ per finished one), free buffer space. */
  consume(dst: Uint8Array, off: number, len: number): number {
    const size = this.rbuf.length;
    let left = len;
    let at = off;
    while (left > 0 && this.rmsgCount > 0) {
      const m = this.rmsg[this.rmsgHead] as number;
      // One path for a whole and a partial message (what is left of it stays in its slot): a
      // receive that takes part of a message first happens in a bandwidth row, and code compiled
      // in the latency rows then has every step of it already.
      let rsize = left < m ? left : m;
      this.rmsg[this.rmsgHead] = m - rsize;
      if (rsize === m) {
        this.rseqNo = (this.rseqNo + 1) & 0xffff;
        if (++this.rmsgHead === this.rmsg.length) this.rmsgHead = 0;
        this.rmsgCount--;
      }
      this.queued -= rsize;
      left -= rsize;
      const end = size - this.rbufOffset;
      if (rsize > end) {
        copyOut(this.rbuf, this.rbufOffset, dst, at, end);
        at += end;
        rsize -= end;
        this.rbufOffset = 0;
        this.rbufBytesAvail += end;
      }
      copyOut(this.rbuf, this.rbufOffset, dst, at, rsize);
      at += rsize;
      this.rbufOffset += rsize;
      this.rbufBytesAvail += rsize;
    }
    return len - left;
  }

  /** The MSG_PEEK copy: as {@link consume}, the data staying queued. */
  peek(dst: Uint8Array, off: number, len: number): number {
    const size = this.rbuf.length;
    let head = this.rmsgHead;
    let count = this.rmsgCount;
    let ro = this.rbufOffset;
    let left = len;
    let at = off;
    while (left > 0 && count > 0) {
      const m = this.rmsg[head] as number;
      let rsize = left < m ? left : m;
      if (left >= m) {
        if (++head === this.rmsg.length) head = 0;
        count--;
      }
      left -= rsize;
      const end = size - ro;
      if (rsize > end) {
        this.rbuf.copy(dst, at, ro, size);
        at += end;
        rsize -= end;
        ro = 0;
      }
      this.rbuf.copy(dst, at, ro, ro + rsize);
      at += rsize;
      ro += rsize;
    }
    return len - left;
  }
}
