/**
 * Early staging: bytes rsend copies into the send buffer while the peer has granted no target
 * space (before its first grant, or with its window used up), posted in order — before anything
 * sent later — as soon as a target SGE arrives, from the progress step that receives it, without
 * waiting for the application. rsocket.c returns EAGAIN there instead; here the copy is done and
 * only the RDMA WRITE waits (`RDMACM_RS_EARLY=0` turns this off, see tunables.ts).
 */
import { RS_SNDLOWAT, RsOp, rsMsgSet } from './protocol.js';
import { RsState } from './state.js';
import { EARLY_STAGING, MAX_XFER, POST_ALONE_MIN } from './tunables.js';
import type { RsConn } from './conn.js';
import type { RsCoalescer } from './coalesce.js';
import type { RsCredits } from './credits.js';
import type { RsTarget } from './target.js';
import type { RsTx } from './tx.js';

/** One connection's early-staged bytes. */
export class RsEarly {
  /**
   * Bytes staged and not yet posted. They occupy the send ring from {@link pos} on (ring order)
   * and are already counted out of the send buffer's free bytes.
   */
  bytes = 0;
  private pos = 0;
  /**
   * The last riowrite returned EAGAIN because bytes rsend copied ahead were still unposted
   * (cleared by the next rsend or riowrite): POLLOUT then waits until they are posted, rather
   * than counting room to copy more ahead, which only rsend can use.
   */
  rioBehind = false;

  constructor(
    private readonly c: RsConn,
    private readonly tx: RsTx,
    private readonly target: RsTarget,
    private readonly credits: RsCredits,
    private readonly writes: RsCoalescer,
  ) {
    // Mutable from the first socket on (see util/arrays.ts): the count is first changed when a
    // peer's window is full, the riowrite flag when a riowrite finds bytes staged here.
    this.bytes = 1;
    this.bytes = 0;
    this.rioBehind = true;
    this.rioBehind = false;
  }

  /**
   * Whether rsend may copy into the send buffer now although it cannot post (no target space
   * granted yet), or must queue behind bytes staged that way: the send buffer has room.
   */
  canStage(): boolean {
    // Every field is read whichever way the test goes (no short circuit): the bandwidth rows
    // reach the cases the latency rows never did, and code compiled before has feedback for them.
    const early = this.bytes > 0;
    const noTarget = this.target.room() === 0;
    const room = this.tx.sbufBytesAvail >= RS_SNDLOWAT;
    const connected = (this.c.state & RsState.connected) !== 0;
    return (early || noTarget) && room && connected && EARLY_STAGING;
  }

  /** Copy `len` bytes of `src[off..]` behind the bytes staged already. */
  stage(src: Uint8Array, off: number, len: number): void {
    if (this.bytes === 0) this.pos = this.tx.sbufPos;
    this.tx.stage(src, off, len);
    this.tx.sbufBytesAvail -= len;
    this.bytes += len;
  }

  /**
   * Post staged bytes as far as target space, credits and send queue allow: each chunk one RDMA
   * WRITE of the send buffer region and its DATA message, within one target SGE, exactly as
   * rsend would have posted them.
   */
  drain(): void {
    const s = this.tx.smr;
    if (!s) return;
    const size = this.tx.sbufRing;
    this.writes.flush();
    while (this.bytes > 0 && this.credits.canPost() && this.c.state & RsState.connected) {
      const target = this.target;
      const ts = target.sge;
      const tlen = target.len(ts);
      if (tlen === 0) break;
      const addr = target.addr(ts);
      const rkey = target.key(ts);
      if (!target.usable(addr)) return;
      let len = this.bytes;
      if (len > tlen) len = tlen;
      if (len > MAX_XFER) len = MAX_XFER;
      if (len > size - this.pos) len = size - this.pos;
      target.take(ts, addr, rkey, tlen, len);
      this.credits.take();
      const sg = { addr: s.addr + this.pos, length: len, lkey: s.lkey };
      this.tx.queueWriteMsg([sg], rsMsgSet(RsOp.DATA, len), 0, addr, rkey);
      this.bytes -= len;
      this.pos += len;
      if (this.pos === size) this.pos = 0;
      // A large chunk leaves with its message before the next is queued (see POST_ALONE_MIN).
      if (len >= POST_ALONE_MIN) this.tx.flushPosts();
    }
    this.tx.flushPosts();
  }
}
