/**
 * riomap's tables (rsocket.c's `rs_iomap_mr` lists): the local registrations the peer may
 * riowrite into, queued until they are written into the peer's iomap table and then kept, and
 * the reading of our own table, which the peer writes, for riowrite's targets. Posting the
 * entries (rs_send_iomaps) is the connection's send path.
 */
import { Access, type Mr, type Pd } from '../verbs/index.js';
import { PROT_WRITE } from './options.js';
import { RS_IOMAP_SIZE, RS_SGE_SIZE, RS_SGL_SIZE } from './protocol.js';
import { rsErr } from './errors.js';

/** One local riomap registration (`struct rs_iomap_mr`). */
export interface IomapMr {
  offset: number;
  mr: Mr | null;
  buf: Uint8Array | null;
  /** Index in the peer-visible table, or -1 for a local (PROT_NONE) mapping. */
  index: number;
}

/** One entry of the target iomap table: the peer's memory behind `[offset, offset + length)`. */
export interface TargetIomap {
  offset: number;
  addr: number;
  key: number;
  length: number;
}

/** A connection's riomap registrations and the peer's iomap table they are written into. */
export class RsIomap {
  /** The peer's iomap table (from its connection data): where our entries are written. */
  remote = { addr: 0, key: 0, length: 0 };
  /** One slot per entry of the peer's table, made at the first riomap. */
  private slots: IomapMr[] = [];
  /** Registrations written to the peer (and local ones). */
  list: IomapMr[] = [];
  /** Registrations still to be written to the peer, in order. */
  queue: IomapMr[] = [];
  /** Whether {@link queue} holds any: the next send or riowrite writes them first. */
  pending = false;

  /**
   * riomap(): register `buf` for the peer to riowrite into (PROT_WRITE) at `offset` (-1: use the
   * buffer's address), with `pd` (null before connecting: EINVAL). The offset; EINVAL for other
   * protections, ENOMEM when the peer's table is full.
   */
  map(pd: Pd | null, buf: Uint8Array, prot: number, offset: number): number {
    if (!pd || prot & ~PROT_WRITE) throw rsErr('EINVAL', 'riomap');
    let iomr: IomapMr | undefined;
    if (prot & PROT_WRITE) {
      if (this.slots.length === 0) {
        for (let i = 0; i < this.remote.length; i++) this.slots.push({ offset: 0, mr: null, buf: null, index: i });
      }
      iomr = this.slots.find((m) => m.mr === null);
    } else iomr = { offset: 0, mr: null, buf: null, index: -1 };
    if (!iomr) throw rsErr('ENOMEM', 'riomap', 'the peer iomap table is full');
    const mr = pd.regMr(buf, Access.LOCAL_WRITE | (prot & PROT_WRITE ? Access.REMOTE_WRITE : 0));
    iomr.mr = mr;
    iomr.buf = buf;
    iomr.offset = offset === -1 ? mr.addr : offset;
    if (iomr.index >= 0) {
      this.queue.push(iomr);
      this.pending = true;
    } else this.list.push(iomr);
    return iomr.offset;
  }

  /** riounmap(): release the mapping of exactly `buf` (same memory and length). EINVAL if none. */
  unmap(buf: Uint8Array): void {
    for (const list of [this.list, this.queue]) {
      const i = list.findIndex((m) => m.buf !== null && m.buf.buffer === buf.buffer && m.buf.byteOffset === buf.byteOffset && m.buf.byteLength === buf.byteLength);
      if (i >= 0) {
        const m = list[i] as IomapMr;
        list.splice(i, 1);
        if (m.mr?.registered) m.mr.dereg();
        m.mr = null;
        m.buf = null;
        this.pending = this.queue.length > 0;
        return;
      }
    }
    throw rsErr('EINVAL', 'riounmap');
  }

  /** Deregister every registration (the connection is torn down). */
  deregAll(): void {
    for (const m of [...this.list, ...this.queue]) if (m.mr?.registered) m.mr.dereg();
  }
}

/**
 * The entry of our target iomap table covering `offset`: the table of `entries` entries behind
 * the target SGL in `view`, written there by the peer (native byte order). Null when none does.
 */
export function findTargetIomap(view: DataView, entries: number, offset: number): TargetIomap | null {
  const base = RS_SGE_SIZE * RS_SGL_SIZE;
  for (let i = 0; i < entries; i++) {
    const o = base + i * RS_IOMAP_SIZE;
    const eoff = view.getUint32(o, true) + view.getUint32(o + 4, true) * 2 ** 32;
    const addr = view.getUint32(o + 8, true) + view.getUint32(o + 12, true) * 2 ** 32;
    const key = view.getUint32(o + 16, true);
    const length = view.getUint32(o + 20, true);
    if (offset >= eoff && offset < eoff + length) return { offset: eoff, addr, key, length };
  }
  return null;
}
