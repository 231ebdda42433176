/**
 * The target SGL of a stream rsocket (rsocket.c's `target_sgl`, `target_sge`): the table of
 * RS_SGL_SIZE entries the peer writes the areas of its receive buffer into as it grants them (an
 * RDMA WRITE of one `rs_sge` before its RS_OP_SGL message), read as a ring. The entry in use says
 * where the next RDMA WRITE of data lands and how many bytes are left there; a write that uses it
 * up moves on to the next entry. Behind the SGL, in the same registered buffer, the iomap table
 * the peer writes its riomap entries into (read by iomap.ts's findTargetIomap). The peer writes
 * both in our byte order. What is written where, and when, is the connection's.
 */
import { Access, type Mr, type Pd } from '../verbs/index.js';
import { RS_IOMAP_SIZE, RS_SGE_SIZE, RS_SGL_SIZE } from './protocol.js';
import type { RsConn } from './conn.js';

/** One connection's target SGL and iomap table; made by {@link init} (rs_init_bufs). */
export class RsTarget {
  /** The SGL, then the iomap table; registered for the peer to write. */
  buf = Buffer.alloc(0);
  mr: Mr | null = null;
  /** {@link buf}, read and written as 32-bit words. */
  view = new DataView(new ArrayBuffer(0));
  /** The entry the next data write lands in (target_sge). */
  sge = 0;

  constructor(private readonly c: RsConn) {}

  /** The SGL and an iomap table of `iomapEntries` entries, registered with `pd`. */
  init(pd: Pd, iomapEntries: number): void {
    this.buf = Buffer.alloc(RS_SGE_SIZE * RS_SGL_SIZE + RS_IOMAP_SIZE * iomapEntries);
    this.mr = pd.regMr(this.buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }

  /** The address of entry `i` (a double: the peer may write any 64-bit value). */
  addr(i: number): number {
    return this.view.getUint32(i * RS_SGE_SIZE, true) + this.view.getUint32(i * RS_SGE_SIZE + 4, true) * 2 ** 32;
  }

  key(i: number): number {
    return this.view.getUint32(i * RS_SGE_SIZE + 8, true);
  }

  /** The bytes left in entry `i` (0 before the buffers exist). */
  len(i: number): number {
    if (this.view.byteLength === 0) return 0;
    return this.view.getUint32(i * RS_SGE_SIZE + 12, true);
  }

  /** The bytes left in the entry in use: 0 while the peer has granted no room. */
  room(): number {
    return this.len(this.sge);
  }

  /** Write entry `i` (the first one comes with the peer's connection data). */
  set(i: number, addr: number, key: number, length: number): void {
    const o = i * RS_SGE_SIZE;
    // Low word by subtraction: addr % 2 ** 32 on a double above 2^31 is a slow fmod.
    const hi = Math.floor(addr / 2 ** 32);
    this.view.setUint32(o, addr - hi * 2 ** 32, true);
    this.view.setUint32(o + 4, hi, true);
    this.view.setUint32(o + 8, key >>> 0, true);
    this.view.setUint32(o + 12, length >>> 0, true);
  }

  /**
   * Use `len` bytes of entry `ts` (at `addr`, `tlen` bytes left): the next write goes behind
   * them, and to the next entry once this one is used up. Whether it was.
   */
  take(ts: number, addr: number, rkey: number, tlen: number, len: number): boolean {
    this.set(ts, addr + len, rkey, tlen - len);
    if (tlen - len !== 0) return false;
    if (++this.sge === RS_SGL_SIZE) this.sge = 0;
    return true;
  }

  /** Whether an address the peer wrote can be used; the socket fails when it cannot. */
  usable(addr: number): boolean {
    if (Number.isSafeInteger(addr)) return true;
    this.c.fail('EPROTO', 'the peer wrote an unusable target SGE');
    return false;
  }
}
