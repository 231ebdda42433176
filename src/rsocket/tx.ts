/**
 * The posting side of a stream rsocket: the send buffer ring that data is staged in, the scratch
 * slots of inline payloads and messages, and the queue of work requests posted together in one
 * ibv_post_send (RDMA WRITEs first, then the messages that announce them). Every send work request
 * is made by {@link sendWr}, in one shape. What to send and when — credits, target SGEs, the
 * coalescing of data writes and the bytes staged early — is the connection's.
 */
import { Access, SendFlags, WrOpcode, type Mr, type Pd, type SendWr, type Sge } from '../verbs/index.js';
import { HOST_IS_BIG_ENDIAN, RS_IOMAP_SIZE, RS_MSG_SIZE, RS_QP_CTRL_SIZE, RS_SGE_SIZE, RS_SNDLOWAT, encodeMsg, rsMsgOp, rsMsgSet } from './protocol.js';
import { rsBuffer } from './errors.js';
import { SBUF_SPAN, type RsConfig } from './tunables.js';
import { copyBytes as copyOut } from '../util/copy.js';
import { objectArray, objectSlots } from '../util/arrays.js';
import type { RsConn } from './conn.js';

/** Send work request ids: the 32-bit message, plus this flag on the SEND of RS_OPT_MSG_SEND. */
export const WR_MSG_SEND = 2 ** 32;

/** A send work request as the rsocket posts it: every field present (see {@link sendWr}). */
export type RsSendWr = SendWr & { sendFlags: number; immData: number; rdma: { remoteAddr: number; rkey: number } };

/**
 * Every send work request the rsocket posts — message SENDs, RDMA WRITEs of data, riowrite's
 * WRITEs, WRITE WITH IMMEDIATE, keepalives — is made here, so all have one shape: the same
 * properties in the same order, whatever the opcode (`immData` and `rdma` are ignored where the
 * opcode has none). ibv_post_send's checks and WQE fill then see one map from the first post on;
 * a kind of request first posted after they were optimised (the 16-byte sync messages of a
 * benchmark between bulk riowrites) no longer throws that code away.
 */
export function sendWr(wrId: number, opcode: WrOpcode, sgList: Sge[], sendFlags: number, immData: number, remoteAddr: number, rkey: number): RsSendWr {
  return { wrId, opcode, sgList, sendFlags, immData, rdma: { remoteAddr, rkey } };
}
/**
 * The first request made fixes the representation of its numeric fields: doubles, as ids,
 * immediate data, addresses and keys reach 2^31 and beyond (a field that starts as a small integer
 * changes representation on the first large value, which deprecates the map). It is kept for the
 * life of the module: V8 holds a hidden class only while an object or compiled code uses it, so a
 * request dropped at once lets a garbage collection forget the doubles, and the requests of the
 * next connection (made with zeros) would start over with small integers.
 */
const SHAPE_ANCHOR: RsSendWr = sendWr(WR_MSG_SEND, WrOpcode.SEND, [], 0, 2 ** 31, 2 ** 32, 2 ** 32 - 1);
/** The anchor of the requests' hidden class (see {@link SHAPE_ANCHOR}), for tests of their shape. */
export function sendWrShape(): RsSendWr { return SHAPE_ANCHOR; }

/** One connection's send buffer, scratch slots and post queue; made by {@link init} (rs_init_bufs). */
export class RsTx {
  /** The send buffer: the ring, then RS_QP_CTRL_SIZE control slots for SGEs written without inline. */
  sbuf = Buffer.alloc(0);
  smr: Mr | null = null;
  sbufPos = 0;
  sbufBytesAvail = 0;
  /** The ring size in use: SO_SNDBUF's buffer, or at most {@link SBUF_SPAN} of it on iWARP. */
  sbufRing = 0;
  /** Inline payloads and messages, one slot per send WQE (copied by the QP at post time). */
  scratch = Buffer.alloc(0);
  scratchMr: Mr | null = null;
  scratchSlot = 0;
  /** RS_OPT_MSG_SEND (iWARP): messages are 4-byte SENDs; else RDMA WRITE WITH IMMEDIATE. */
  msgSendMode = true;
  /** Send WQEs one message takes: 2 in RS_OPT_MSG_SEND mode (WRITE + SEND), else 1. */
  wqesPerMsg = 2;
  scratchSlotSize = 0;
  scratchSlots = 0;
  /** Work requests queued for the next post: RDMA WRITEs, then the message SENDs. */
  readonly posts = objectArray<SendWr>();
  nPosts = 0;
  readonly msgPosts = objectArray<SendWr>();
  nMsgPosts = 0;
  /** The list of the usual post (one write + its message), reused while no post is running. */
  readonly postPair = objectSlots<SendWr>(2);
  posting = false;
  /**
   * Per scratch slot: its SGE, a one-SGE list of it, and the SEND / RDMA WRITE work requests
   * that name it. Reused when the slot comes round again: ibv_post_send copies what it keeps
   * (the verbs QP detaches the SGE lists of WRs still queued when it returns), and the slot's
   * bytes themselves are reused then anyway.
   */
  scratchSges: Sge[] = [];
  scratchSgls: Sge[][] = [];
  scratchMsgWrs: RsSendWr[] = [];
  scratchWriteWrs: RsSendWr[] = [];

  /** The inline data limit of the QP (RDMA_INLINE as the device granted it). */
  sqInline = 0;

  constructor(private readonly c: RsConn) {}

  /** The send buffer ring and the scratch slots with their work requests, registered with `pd`. */
  init(pd: Pd, cfg: RsConfig): void {
    this.sqInline = cfg.sqInline;
    // Send ring plus RS_QP_CTRL_SIZE control slots for SGEs written without inline.
    this.sbufRing = this.msgSendMode && SBUF_SPAN > 0 ? Math.min(cfg.sbufSize, Math.max(SBUF_SPAN, RS_SNDLOWAT << 1)) : cfg.sbufSize;
    this.sbuf = rsBuffer(this.sbufRing + RS_SGE_SIZE * RS_QP_CTRL_SIZE);
    this.smr = pd.regMr(this.sbuf, Access.LOCAL_WRITE);
    this.sbufPos = 0;
    this.sbufBytesAvail = this.sbufRing;
    this.scratchSlotSize = Math.max(RS_IOMAP_SIZE, (cfg.sqInline + 7) & ~7);
    this.scratchSlots = cfg.sqSize;
    this.scratch = Buffer.alloc(this.scratchSlotSize * this.scratchSlots);
    this.scratchMr = pd.regMr(this.scratch, 0);
    this.scratchSges = [];
    this.scratchSgls = [];
    this.scratchMsgWrs = [];
    this.scratchWriteWrs = [];
    for (let i = 0; i < this.scratchSlots; i++) {
      const sg: Sge = { addr: this.scratchMr.addr + i * this.scratchSlotSize, length: 0, lkey: this.scratchMr.lkey };
      const sgl = [sg];
      this.scratchSges.push(sg);
      this.scratchSgls.push(sgl);
      if (this.msgSendMode) {
        this.scratchMsgWrs.push(sendWr(WR_MSG_SEND, WrOpcode.SEND, sgl, SendFlags.INLINE, 0, 0, 0));
        this.scratchWriteWrs.push(sendWr(WR_MSG_SEND, WrOpcode.RDMA_WRITE, sgl, SendFlags.INLINE, 0, 0, 0));
      } else {
        // rs_post_msg: a zero-length RDMA WRITE WITH IMMEDIATE (no SGE, no target).
        this.scratchMsgWrs.push(sendWr(WR_MSG_SEND, WrOpcode.RDMA_WRITE_WITH_IMM, [], 0, 0, 0, 0));
        this.scratchWriteWrs.push(sendWr(WR_MSG_SEND, WrOpcode.RDMA_WRITE_WITH_IMM, sgl, SendFlags.INLINE, 0, 0, 0));
      }
    }
  }

  /** A scratch slot of `len` bytes for inline payloads (copied by the QP at post time). */
  scratchSge(len: number): Sge {
    const i = this.scratchSlot;
    if (++this.scratchSlot === this.scratchSlots) this.scratchSlot = 0;
    const sg = this.scratchSges[i] as Sge;
    sg.length = len;
    return sg;
  }

  /** Copy `len` bytes of `src[off..]` into the next scratch slot (its SGE sized to them): the slot. */
  scratchCopy(src: Uint8Array, off: number, len: number): number {
    const i = this.scratchSlot;
    this.scratchSge(len);
    copyOut(src, off, this.scratch, i * this.scratchSlotSize, len);
    return i;
  }

  /**
   * The work request carrying `msg` alone (rs_post_msg): a 4-byte SEND in our byte order
   * (RS_OPT_MSG_SEND), else a zero-length RDMA WRITE WITH IMMEDIATE.
   */
  msgWr(wrId: number, msg: number): SendWr {
    const i = this.scratchSlot;
    const wr = this.scratchMsgWrs[i] as RsSendWr;
    wr.wrId = wrId;
    if (this.msgSendMode) {
      this.scratchSge(RS_MSG_SIZE);
      encodeMsg(msg, HOST_IS_BIG_ENDIAN, this.scratch, i * this.scratchSlotSize);
    } else {
      if (++this.scratchSlot === this.scratchSlots) this.scratchSlot = 0;
      wr.immData = msg;
    }
    return wr;
  }

  /** Queue a work request for the next post (RDMA WRITEs and other non-message WRs). */
  addPost(wr: SendWr): void {
    this.posts[this.nPosts++] = wr;
  }

  /** rs_post_msg (the connection posts a pending data write first). */
  queueMsg(msg: number): void {
    this.msgPosts[this.nMsgPosts++] = this.msgWr(msg, msg);
  }

  /**
   * rs_post_write_msg: an RDMA WRITE, then the SEND with the message (RS_OPT_MSG_SEND); else one
   * RDMA WRITE WITH IMMEDIATE carrying both, in message order.
   */
  queueWriteMsg(sgl: Sge[], msg: number, flags: number, addr: number, rkey: number): void {
    if (!this.msgSendMode) {
      this.msgPosts[this.nMsgPosts++] = sendWr(msg, WrOpcode.RDMA_WRITE_WITH_IMM, sgl, flags, msg, addr, rkey);
      return;
    }
    this.addPost(sendWr(msg, WrOpcode.RDMA_WRITE, sgl, flags, 0, addr, rkey));
    this.queueWriteMsgSend(msg);
  }

  /** The SEND carrying the message of an RDMA WRITE just queued (its completion id marks it). */
  queueWriteMsgSend(msg: number): void {
    this.msgPosts[this.nMsgPosts++] = this.msgWr(rsMsgSet(rsMsgOp(msg), 0) + WR_MSG_SEND, msg);
  }

  /** rs_post_write_msg of `len <= sqInline` bytes of `src[off..]`, inline from a scratch slot. */
  queueInlineWriteMsg(src: Uint8Array, off: number, len: number, msg: number, addr: number, rkey: number): void {
    const i = this.scratchCopy(src, off, len);
    const wr = this.scratchWriteWrs[i] as RsSendWr;
    wr.wrId = msg;
    wr.rdma.remoteAddr = addr;
    wr.rdma.rkey = rkey;
    if (!this.msgSendMode) {
      wr.immData = msg;
      this.msgPosts[this.nMsgPosts++] = wr;
      return;
    }
    this.addPost(wr);
    this.queueWriteMsgSend(msg);
  }

  /**
   * Post everything queued in one ibv_post_send: the RDMA WRITEs of the batch first, then the
   * messages, in order. Each message still follows its own write, as the protocol requires;
   * batching the small SENDs behind the large WRITEs lets the QP hand them to TCP together.
   */
  flushPosts(): void {
    const np = this.nPosts;
    const nm = this.nMsgPosts;
    if (np === 0 && nm === 0) return;
    this.nPosts = 0;
    this.nMsgPosts = 0;
    const qp = this.c.qp;
    if (!qp) return;
    const p = this.posts;
    const m = this.msgPosts;
    // Writes first, then the messages. The usual write + message pair goes in one reused list
    // (ibv_post_send copies what it queues); a post from inside a post gets a list of its own.
    let list: SendWr[];
    if (np === 1 && nm === 1 && !this.posting) {
      list = this.postPair as SendWr[];
      list[0] = p[0] as SendWr;
      list[1] = m[0] as SendWr;
    } else {
      // Filled by push, as an array of objects like the pair's list: a preallocated `new
      // Array(n)` has holey elements, another hidden class, which would make ibv_post_send see
      // two kinds of list and throw away code compiled while it saw one.
      list = objectArray<SendWr>();
      for (let i = 0; i < np; i++) list.push(p[i] as SendWr);
      for (let i = 0; i < nm; i++) list.push(m[i] as SendWr);
    }
    const was = this.posting;
    this.posting = true;
    try {
      qp.postSend(list);
    } catch (e) {
      this.c.fail('EIO', `ibv_post_send: ${(e as Error).message}`);
    } finally {
      this.posting = was;
    }
  }

  /** Copy `len` bytes into the send buffer ring; the SGEs that name them (1, or 2 on wrap). */
  stage(src: Uint8Array, off: number, len: number): Sge[] {
    const s = this.smr as Mr;
    const size = this.sbufRing;
    const pos = this.sbufPos;
    // One path for both cases (the part behind the wrap is empty when there is none): a chunk
    // that wraps for the first time long after this was compiled does not throw the code away.
    const left = size - pos;
    const first = len < left ? len : left;
    copyOut(src, off, this.sbuf, pos, first);
    copyOut(src, off + first, this.sbuf, 0, len - first);
    const end = pos + len;
    this.sbufPos = end < size ? end : end - size;
    const a = { addr: s.addr + pos, length: first, lkey: s.lkey };
    return first === len ? [a] : [a, { addr: s.addr, length: len - first, lkey: s.lkey }];
  }

  /** The payload SGEs of a write: inline from scratch, else staged in the send buffer. */
  payload(src: Uint8Array, off: number, len: number): { sgl: Sge[]; flags: number } {
    if (len <= this.sqInline) {
      const i = this.scratchCopy(src, off, len);
      return { sgl: [this.scratchSges[i] as Sge], flags: SendFlags.INLINE };
    }
    return { sgl: this.stage(src, off, len), flags: 0 };
  }
}
