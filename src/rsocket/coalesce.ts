/**
 * The coalescing of data writes (rsocket.c's rs_write_data, one chunk per RDMA WRITE): a chunk
 * that continues the previous one — same target SGE, the next address there and the next bytes
 * of the send buffer — is merged into it until the chunk is posted, in the next event-loop turn
 * or as soon as anything must follow it (a message, another chunk, a wait or a poll: every wait
 * goes through the connection's progress step, which posts it). One RDMA WRITE and one DATA
 * message then carry what several send calls wrote; the receiver sees only a longer DATA message
 * within the SGE it advertised. Credits and send WQEs are taken when a chunk starts. Inline-sized
 * chunks are never merged (and post what is pending first, to keep DATA messages in data order).
 */
import type { Sge } from '../verbs/index.js';
import { RsOp, rsMsgSet } from './protocol.js';
import { RsState } from './state.js';
import { MAX_XFER, POST_ALONE_MIN } from './tunables.js';
import { objectArray } from '../util/arrays.js';
import type { RsConn } from './conn.js';
import type { RsCredits } from './credits.js';
import type { RsTarget } from './target.js';
import type { RsTx } from './tx.js';

/** A data write being coalesced: its send-buffer SGEs, length and target. */
type Chunk = { sgl: Sge[]; len: number; addr: number; rkey: number; tsge: number };

/** One connection's data write being coalesced, and its posting. */
export class RsCoalescer {
  /** The chunk not yet queued for posting. */
  private pend: Chunk | null = null;
  /** Whether {@link task} is scheduled. */
  private queued = false;

  constructor(
    private readonly c: RsConn,
    private readonly tx: RsTx,
    private readonly target: RsTarget,
    private readonly credits: RsCredits,
  ) {
    // Mutable from the first socket on (see util/arrays.ts): the chunk is first made by a size
    // above the inline limit, long after the code of the small sizes was compiled.
    this.pend = { sgl: objectArray<Sge>(), len: 0, addr: 2 ** 32, rkey: 2 ** 32 - 1, tsge: 0 };
    this.pend = null;
  }

  /**
   * rs_write_data of `len` bytes of `src[off..]` into the target SGE in use (the caller has
   * checked the credit, the WQEs, the send buffer and the target room): inline from a scratch
   * slot when small enough, else copied into the send buffer and merged into the pending chunk
   * where it continues it.
   */
  write(src: Uint8Array, off: number, len: number): void {
    const target = this.target;
    const ts = target.sge;
    const addr = target.addr(ts);
    const rkey = target.key(ts);
    const tlen = target.len(ts);
    if (!target.usable(addr)) return;
    this.tx.sbufBytesAvail -= len;
    const exhausted = target.take(ts, addr, rkey, tlen, len);
    if (len <= this.c.cfg.sqInline) {
      this.flush();
      this.credits.take();
      this.tx.queueInlineWriteMsg(src, off, len, rsMsgSet(RsOp.DATA, len), addr, rkey);
      return;
    }
    const sgl = this.tx.stage(src, off, len);
    const p = this.pend;
    if (p && p.tsge === ts && p.addr + p.len === addr && p.rkey === rkey && sgl.length === 1 && p.len + len <= MAX_XFER) {
      const last = p.sgl[p.sgl.length - 1] as Sge;
      const next = sgl[0] as Sge;
      if (last.addr + last.length === next.addr) {
        last.length += len;
        p.len += len;
        if (exhausted) this.flush();
        return;
      }
    }
    this.flush();
    this.credits.take();
    // `len` grows as later writes merge: stored twice, it is mutable from the first chunk on (see
    // util/arrays.ts; the first merge would otherwise throw away the code compiled before it).
    const chunk = { sgl, len: 0, addr, rkey, tsge: ts };
    chunk.len = len;
    this.pend = chunk;
    if (exhausted) this.flush();
    else if (!this.queued) {
      this.queued = true;
      setImmediate(this.task);
    }
  }

  /** Post the pending chunk in the next event-loop turn (one function per socket, not per chunk). */
  private readonly task = (): void => {
    this.queued = false;
    this.flush();
    this.tx.flushPosts();
  };

  /** Queue the pending chunk's RDMA WRITE and its DATA message; post them if large. */
  flush(): void {
    const p = this.pend;
    if (!p) return;
    this.pend = null;
    if (!(this.c.state & RsState.connected)) return;
    this.tx.queueWriteMsg(p.sgl, rsMsgSet(RsOp.DATA, p.len), 0, p.addr, p.rkey);
    if (p.len >= POST_ALONE_MIN) this.tx.flushPosts();
  }
}
