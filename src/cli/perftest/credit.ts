/**
 * Receive credits of SEND bandwidth over iWARP (send_bw.c `send_rcredit`; perftest_resources.c
 * `ctx_alloc_credit`, `ctx_set_credit_wqes`, and their uses in `run_iter_bw` and
 * `run_iter_bw_server`). An iWARP QP has no RNR retry: a SEND that finds no receive posted breaks
 * the connection. So on an iWARP device the receiver tells the sender how many messages it has
 * taken, by an RDMA WRITE of its count (a 32-bit integer in the machine's byte order, as perftest
 * writes it) into the sender's credit word, every `rx_depth / 3` messages; the sender keeps fewer
 * than `rx_depth` messages beyond the last count it was told.
 *
 * The keys each side sends for its QPs then name its credit words instead of its buffer: a small
 * region of its own, `2 * -q` words (first the counts this side writes from, then the words the
 * peer writes into), registered for local and remote writes.
 */
import { endianness } from 'node:os';
import { Access, SendFlags, WrOpcode, type Pd, type Mr, type SendWr } from '../api.js';
import { errOut } from '../c-compat.js';
import type { PerfDest } from './exchange.js';

const WORD = 4;
const LE = endianness() === 'LE';

export class Credits {
  /** `ctrl_buf`: words 0 .. q-1 hold the counts this side sends; q .. 2q-1 (`credit_buf`) the peer's. */
  private readonly buf: Buffer;
  readonly mr: Mr;
  /** `credit_cnt`: a count is sent every this many messages (at least 1: perftest divides by it). */
  readonly every: number;
  /** `ctrl_wr`: per QP, the WRITE of its count into the peer's credit word. */
  private wrs: SendWr[] = [];

  private constructor(private readonly numQps: number, pd: Pd, rxDepth: number) {
    this.buf = Buffer.alloc(2 * numQps * WORD);
    this.mr = pd.regMr(this.buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    this.every = Math.max(1, Math.floor(rxDepth / 3));
  }

  /** `ctx_alloc_credit`; null after perftest's message. */
  static alloc(numQps: number, pd: Pd, rxDepth: number): Credits | null {
    try {
      return new Credits(numQps, pd, rxDepth);
    } catch {
      errOut("Couldn't allocate MR\n");
      return null;
    }
  }

  /** QP `i`'s keys name its credit word (`my_dest[i].rkey`, `.vaddr`). */
  advertise(dest: PerfDest, i: number): void {
    dest.rkey = this.mr.rkey;
    dest.vaddr = BigInt(this.mr.addr + (this.numQps + i) * WORD);
  }

  /** `ctx_set_credit_wqes`, once the peer's keys (naming its credit words) are known. */
  setWrs(rem: PerfDest[]): void {
    this.wrs = rem.map((d, i) => ({
      wrId: i,
      opcode: WrOpcode.RDMA_WRITE,
      sgList: [{ addr: this.mr.addr + i * WORD, length: WORD, lkey: this.mr.lkey }],
      sendFlags: SendFlags.SIGNALED,
      rdma: { remoteAddr: Number(d.vaddr), rkey: d.rkey },
    }));
  }

  /** The count the peer last wrote for QP `q` (`credit_buf[q]`). */
  peer(q: number): number {
    const off = (this.numQps + q) * WORD;
    return LE ? this.buf.readUInt32LE(off) : this.buf.readUInt32BE(off);
  }

  /** Forget the peer's counts before the next message size (send_bw.c, per size). */
  reset(): void {
    this.buf.fill(0, this.numQps * WORD);
  }

  /**
   * Whether the sender may post its next message on QP `q` after `scnt` (`swindow < rx_depth`,
   * unsigned as perftest computes it).
   */
  open(q: number, scnt: number, rxDepth: number): boolean {
    return ((scnt + 1 - this.peer(q)) >>> 0) < rxDepth;
  }

  /** Whether the receiver sends its count after taking its `rcnt`th message on a QP. */
  due(rcnt: number, rxDepth: number): boolean {
    return (rcnt % rxDepth) % this.every === 0;
  }

  /** The WRITE that tells the peer QP `q` has taken `rcnt` messages. */
  wr(q: number, rcnt: number): SendWr {
    const off = q * WORD;
    if (LE) this.buf.writeUInt32LE(rcnt >>> 0, off);
    else this.buf.writeUInt32BE(rcnt >>> 0, off);
    return this.wrs[q] as SendWr;
  }
}
