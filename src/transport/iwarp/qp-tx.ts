/**
 * iWARP transmit path (the role of siw_qp_tx.c): turns send-queue WQEs and inbound Read Requests
 * into FPDUs on the LLP. One message's segments are always written back to back (siw requires
 * it). Payload is segmented so each FPDU fits one MSS. Small messages are built in one buffer
 * (one copy, completed at once); large ones are written zero-copy as views of the registered
 * memory and completed when TCP has taken them (the write callback), so the user may not reuse
 * the buffer before its completion, exactly as with ibverbs.
 */
import {
  RdmapOpcode,
  IWARP_OPCODES,
  DdpQn,
  fpduPad,
  crc32c,
  encodeTerminate,
  writeTaggedHdr,
  writeUntaggedHdr,
  writeReadRequest,
  TAGGED_HDR_LEN,
  SEND_HDR_LEN,
  type TerminateSpec,
  type IwarpOpcodeInfo,
} from '../../wire/iwarp/index.js';
import { WcStatus, WrOpcode, type Sge } from '../../verbs/types.js';
import type { SqWqe } from '../../verbs/qp.js';
import type { Llp } from './llp.js';
import { copyBytes } from '../../util/copy.js';
import { hex } from './mem.js';
import { microtask } from '../../util/microtask.js';
import { traceEvent, tracing } from '../../trace.js';
import { objectArray } from '../../util/arrays.js';
import { Ring } from '../../util/ring.js';
import { IC, type IwarpCounters } from './counters.js';

/**
 * The QP as its transmit path sees it (IwarpQp implements it): the send queue it drains, the
 * memory it reads, and where a WQE completes or fails.
 */
export interface TxQp {
  /** Trace tag. */
  readonly tag: string;
  /** Outbound Read Requests allowed in flight. */
  readonly ord: number;
  txAllowed(): boolean;
  sqHead(): SqWqe | undefined;
  sqShift(): void;
  sqDone(w: SqWqe, status?: WcStatus): void;
  sqDoneRecycle(w: SqWqe, status: WcStatus): void;
  sqFail(w: SqWqe, status: WcStatus, why: string): void;
  gather(w: SqWqe): { bufs: Buffer[]; offs: number[]; lens: number[] } | null;
  localTarget(s: Sge, off: number, len: number): { buf: Buffer; off: number } | number;
  /** The device's counters. */
  readonly counters: IwarpCounters;
}

/** Messages at or above this size go zero-copy (views of the MR + write callback). */
const ZERO_COPY_MIN = 32 * 1024;
/**
 * Bytes one kick may leave queued in the socket's user-space write buffer before it stops and
 * waits for 'drain'. Above the stream's 16 KiB high-water mark on purpose: large (zero-copy)
 * messages are only views, so several go out in one writev instead of one per drain.
 */
const TX_BUDGET = 4 * 1024 * 1024;
/**
 * Small FPDUs (headers, inline and copied payloads, trailers) are built back to back in a staging
 * slab and handed to the socket as one write per kick. Regions handed over are not reused while
 * the socket may still hold them: once it holds nothing (the kernel took every byte), staging
 * starts again at the slab's start; a slab that fills up meanwhile is replaced by a new one,
 * whose size is at least the FPDU being staged. A QP's first slab is small
 * (most connections carry little: an RTR, a few messages) and each next one four times larger, up
 * to SLAB_SIZE: thousands of idle QPs then hold kilobytes, not 64 KiB each.
 */
const SLAB_SIZE = 64 * 1024;
const FIRST_SLAB = 1024;
const NO_SLAB = Buffer.alloc(0);
/** The slab view before any was made: a view of no slab, which no staged write can reuse. */
const NO_VIEW = Buffer.alloc(0);

/** An inbound RDMA Read Request waiting to be answered (siw's IRQ entry). */
export interface IrqEntry {
  sinkStag: number;
  sinkTo: number;
  size: number;
  srcStag: number;
  srcTo: number;
  /** Resolved source memory (validated when the request arrived). */
  buf: Buffer;
  off: number;
}

/** A payload source: pieces of registered memory (or one inline buffer). */
interface Pieces {
  bufs: Buffer[];
  offs: number[];
  lens: number[];
}

/** DDP control byte of a last segment, tagged and untagged (T, L, DV = 1: RFC 5041 §4.2). */
const DDP_TAGGED_LAST = 0xc1;
const DDP_UNTAGGED_LAST = 0x41;
/** RDMAP control byte without the opcode (RV = 1: RFC 5040 §4.2). */
const RDMAP_V1 = 0x40;

/** Zero the pad and the (CRC-off) trailer behind the payload ending at `at`. */
function zeroTail(f: Buffer, at: number, pad: number): void {
  const e = at + pad + 4;
  for (let i = at; i < e; i++) f[i] = 0;
}

/**
 * The scratch buffer every QP builds a small FPDU header in: each header is copied to its
 * connection's stage (or a buffer of its own) in the same synchronous call that built it, so
 * one buffer serves every connection (a connection that never sends costs no allocation).
 */
const HDR_SCRATCH = Buffer.alloc(64);

/** Per-connection transmit state. */
export class QpTx {
  llp: Llp | null = null;
  crc = false;
  /** Largest FPDU (bytes on the wire, multiple of 8), from the MSS. */
  fpduMax = 1448 & ~7;
  /** The largest message that is one FPDU whatever its opcode (see {@link stageOne}). */
  private oneMax = ((1448 & ~7) - SEND_HDR_LEN - 4) & ~3;
  /** Hold all FPDUs until released (responder before the initiator's first FPDU). */
  held = false;
  /**
   * Outstanding outbound Read Requests, oldest first (siw's ORQ). Rings, not arrays: an array
   * that a `shift` empties has its store trimmed, and the next `push` allocates a new one (once
   * per Read on each side).
   */
  readonly orq = new Ring<SqWqe>(Infinity, 4);
  /** Inbound Read Requests to answer, oldest first (siw's IRQ). */
  readonly irq = new Ring<IrqEntry>(Infinity, 4);
  /**
   * WQEs handed to TCP and not completed yet, oldest first: zero-copy ones wait for their write
   * callback, copied ones behind them wait their turn (send completions stay in posting order).
   */
  private readonly doneQ = objectArray<{ w: SqWqe; done: boolean; status: WcStatus }>();
  private doneHead = 0;
  /**
   * Copied (staged) WQEs of the current kick, completed once the kick has handed its FPDUs to the
   * socket: the write goes out before the completions are generated (a reply leaves first).
   * Completions stay in posting order: whatever else completes a send WQE (a zero-copy write's
   * callback, a failed WQE, a flush) completes these first (see {@link completeCopied}).
   */
  private readonly copied: (SqWqe | null)[] = [];
  private nCopied = 0;
  private completingCopied = false;
  /** Number of WQEs in {@link doneQ} (counted against max_send_wr). */
  get pendingCb(): number {
    return this.doneQ.length - this.doneHead;
  }
  private sendMsn = 0;
  private readMsn = 0;
  /** The MSN of the last Send sent (untagged queue 0; 0 before the first). */
  get lastSendMsn(): number {
    return this.sendMsn;
  }
  /** The MSN of the last RDMA Read Request sent (queue 1). */
  get lastReadMsn(): number {
    return this.readMsn;
  }
  private termMsn = 0;
  private kicking = false;
  private waitingDrain = false;
  /** Where a header is built before it is copied to the stage (shared: see {@link HDR_SCRATCH}). */
  private readonly hdr = HDR_SCRATCH;
  /** The last WQE staged was a small RDMA WRITE (its SEND usually follows: see flushSoon). */
  private endsWithWrite = false;
  /** Staging slab: [stageStart, slabPos) is built and not yet written. */
  private slab = NO_SLAB;
  private slabPos = 0;
  private stageStart = 0;
  /**
   * The view of the slab's first bytes last handed to the socket (reused by the next write of
   * the same length from the start of the slab: see {@link flushStage}).
   */
  private atStart: Buffer = NO_VIEW;
  /** Writes handed to the LLP in the current kick. */
  private nWrites = 0;

  constructor(private readonly qp: TxQp) {
    // First changed by a reset or a zero-copy completion: mutable from the first QP on (see
    // util/arrays.ts).
    this.held = true;
    this.held = false;
    this.doneHead = 1;
    this.doneHead = 0;
    this.wroteInJob = true;
    this.wroteInJob = false;
  }

  /** Bind to a connection. */
  attach(llp: Llp, crc: boolean, fpduMax: number): void {
    this.llp = llp;
    this.crc = crc;
    this.fpduMax = Math.max(64, fpduMax & ~7);
    this.oneMax = (this.fpduMax - SEND_HDR_LEN - 4) & ~3;
    llp.onDrain = () => {
      this.waitingDrain = false;
      this.kick();
    };
  }

  private kickQueued = false;
  /** Kick once the current receive processing is over (a microtask later). */
  kickSoon(): void {
    if (this.kickQueued) return;
    this.kickQueued = true;
    microtask(this.kickTask);
  }
  private readonly kickTask = (): void => {
    this.kickQueued = false;
    this.kick();
  };

  /** Transmit whatever is ready: read responses first, then the send queue in order. */
  kick(): void {
    const llp = this.llp;
    if (!llp || this.held || this.kicking || this.waitingDrain || llp.isClosed) return;
    // Nothing to send, build or complete (a Read's response came in with the send queue empty):
    // the batch below would do nothing.
    if (this.irq.length === 0 && this.slabPos === this.stageStart && this.nCopied === 0 && this.qp.sqHead() === undefined) return;
    this.kicking = true;
    this.nWrites = 0;
    this.endsWithWrite = false;
    // The first write goes out uncorked (a lone batch of small FPDUs is one write); a zero-copy
    // message corks from its first piece (see sendMessageZc), later writes cork in the LLP.
    llp.beginBatch(false);
    const sock = llp.socket;
    // The socket's buffered bytes change only when this kick writes: read them again only then.
    let buffered = sock.writableLength;
    let writes = 0;
    try {
      for (;;) {
        if (!this.qp.txAllowed()) break;
        if (writes !== this.nWrites) {
          writes = this.nWrites;
          buffered = sock.writableLength;
        }
        if (buffered + (this.slabPos - this.stageStart) >= TX_BUDGET) {
          // Enough queued: wait for 'drain' (the buffered bytes are above the high-water mark,
          // so a write has returned false and 'drain' will come).
          this.flushStage(llp);
          if (llp.needDrain) {
            this.waitingDrain = true;
            break;
          }
        }
        if (this.irq.length > 0) {
          this.endsWithWrite = false;
          this.sendReadResponse(llp, this.irq.shift() as IrqEntry);
          continue;
        }
        const w = this.qp.sqHead();
        if (!w) break;
        if (w.opcode === WrOpcode.RDMA_READ) {
          if (this.orq.length >= this.qp.ord && this.qp.ord > 0) break; // ORD reached: wait for a response
          if (this.qp.ord === 0) {
            this.qp.sqFail(w, WcStatus.LOC_QP_OP_ERR, 'RDMA Read with ORD 0');
            break;
          }
        }
        if (w.flags & 1 /* FENCE */ && this.orq.length > 0) break;
        if (!this.sendWqe(llp, w)) break;
      }
    } finally {
      if (this.llp !== llp) this.dropStage();
      else if (this.nWrites === 0 && (this.endsWithWrite || this.wroteInJob) && this.slabPos !== this.stageStart) this.flushSoon();
      else {
        this.flushStage(llp);
        if (this.nWrites !== 0) this.markJobWrite();
      }
      llp.endBatch();
      this.kicking = false;
      if (this.nCopied !== 0) this.completeCopied();
    }
  }

  /**
   * Complete the copied WQEs of the kick, oldest first. A re-entrant call (from a completion
   * that leads to another) returns: the loop here goes on with whatever was added meanwhile.
   */
  completeCopied(): void {
    if (this.nCopied === 0 || this.completingCopied) return;
    this.completingCopied = true;
    // The slots stay allocated (no array shrink and regrowth per kick); each is cleared when used.
    const q = this.copied;
    for (let i = 0; i < this.nCopied; i++) {
      const w = q[i] as SqWqe;
      q[i] = null;
      this.qp.sqDoneRecycle(w, WcStatus.SUCCESS);
    }
    this.nCopied = 0;
    this.completingCopied = false;
  }

  /** Write what is staged now (the connection is about to end gracefully). */
  flushStaged(): void {
    const llp = this.llp;
    if (llp !== null && !llp.isClosed) this.flushStage(llp);
  }

  /**
   * Whether a kick of the running job (the callback or microtask now running) has written
   * already. The first kick of a job writes at once (a lone message, a reply, pays no wait); what
   * later kicks of the same job stage — a sender posting message after message in one
   * synchronous loop, as rstream's bandwidth rows do with 100,000 sends of 64 bytes — leaves in
   * one write at the end of the tick ({@link flushSoon}): one system call, and one wake-up and
   * read for the peer, for the whole run of small messages instead of one per message, as Node's
   * own stream batches writes that queue behind a pending one. Reset by a microtask queued with
   * the first write (a promise reaction: cheaper than a process.nextTick, which the ping-pong path
   * would pay on every message).
   */
  private wroteInJob = false;
  private markJobWrite(): void {
    if (this.wroteInJob) return;
    this.wroteInJob = true;
    microtask(this.jobOver);
  }
  private readonly jobOver = (): void => {
    this.wroteInJob = false;
  };

  private flushQueued = false;
  /**
   * Write the staged FPDUs once the current tick's callbacks and microtasks are over (a
   * process.nextTick queued from here runs after them, before the event loop goes on to I/O).
   * A kick that wrote nothing yet and whose last WQE is a small RDMA WRITE leaves its FPDUs
   * staged, so that what the application posts next in the same tick — typically the SEND that
   * tells the peer about the WRITE, posted once the WRITE completes, as rping does — leaves in
   * the same TCP write: one syscall, and one wake-up and read for the peer, instead of two. A
   * batch that ends with a SEND or a Read goes at once (the peer acts on it; rsockets post the
   * WRITE and its SEND together). Nothing is held past the tick.
   */
  private flushSoon(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    process.nextTick(this.flushTask);
  }
  private readonly flushTask = (): void => {
    this.flushQueued = false;
    const llp = this.llp;
    if (llp === null || this.kicking) return;
    if (llp.isClosed) this.dropStage();
    else this.flushStage(llp);
  };

  /** Room for `n` bytes at the end of the staging slab: its offset there. */
  private stageAlloc(llp: Llp, n: number): number {
    if (this.slabPos + n > this.slab.length) {
      // Bytes staged for the end of the tick (see wroteInJob) move to a larger slab while the
      // slab may still grow, so that a run of small messages leaves in one write, not one per
      // slab's worth.
      const staged = this.slabPos - this.stageStart;
      if (staged !== 0 && this.slab.length < SLAB_SIZE) this.growSlab(staged + n);
      else this.flushStage(llp);
    }
    if (this.slabPos + n > this.slab.length) {
      const next = this.slab.length === 0 ? FIRST_SLAB : Math.min(SLAB_SIZE, this.slab.length * 4);
      // Up to 4 KiB comes from Node's shared pool; larger slabs are their own allocation.
      this.slab = next < n ? Buffer.allocUnsafeSlow(n) : next <= 4096 ? Buffer.allocUnsafe(next) : Buffer.allocUnsafeSlow(next);
      this.slabPos = 0;
      this.stageStart = 0;
      this.atStart = NO_VIEW;
    }
    const at = this.slabPos;
    this.slabPos += n;
    return at;
  }

  /** Move the staged bytes to the start of a new slab with room for `need` bytes. */
  private growSlab(need: number): void {
    const next = Math.max(need, Math.min(SLAB_SIZE, this.slab.length * 4));
    const s = next <= 4096 ? Buffer.allocUnsafe(next) : Buffer.allocUnsafeSlow(next);
    const staged = this.slabPos - this.stageStart;
    copyBytes(this.slab, this.stageStart, s, 0, staged);
    this.slab = s;
    this.stageStart = 0;
    this.slabPos = staged;
    this.atStart = NO_VIEW;
  }

  /**
   * Hand the staged bytes to the LLP as one write. When the socket has taken everything it was
   * handed (nothing left in its user-space buffer: the kernel copied the bytes, and Node keeps no
   * reference to a write completed at once), the slab is free again from its start: staging
   * starts there again, so that the FPDUs of the usual small message are built in the same few
   * cache lines each time and handed over through the same view.
   */
  private flushStage(llp: Llp): void {
    const start = this.stageStart;
    const len = this.slabPos - start;
    if (len === 0) return;
    const s = this.slab;
    let b = this.atStart;
    // Every comparison runs whichever way the test goes: while only the headers of zero-copy
    // messages are staged, the view is never reused and code compiled then would lack feedback
    // for the later ones, and be thrown away at the first small message that reuses it.
    const fromStart = start === 0;
    const sameLen = b.length === len;
    const sameBuf = b.buffer === s.buffer;
    const sameOff = b.byteOffset === s.byteOffset;
    if (!(fromStart && sameLen && sameBuf && sameOff)) {
      // A view of the staged bytes; Buffer.from(arrayBuffer, ...) builds it in about 60% of the
      // time of Buffer#subarray (which goes through the species constructor).
      b = Buffer.from(s.buffer, s.byteOffset + start, len);
      if (start === 0) this.atStart = b;
    }
    this.stageStart = this.slabPos;
    this.nWrites++;
    this.qp.counters.add(IC.mpaOutOctets, len);
    llp.write(b);
    if (llp.socket.writableLength === 0) {
      this.slabPos = 0;
      this.stageStart = 0;
    }
  }

  /** Forget staged bytes (the connection went away while building them). */
  private dropStage(): void {
    this.stageStart = this.slabPos;
  }

  /** A write of a piece that is not staged (zero-copy views), in stream order. */
  private writeDirect(llp: Llp, b: Uint8Array, cb?: (err?: Error | null) => void): void {
    this.flushStage(llp);
    if (this.nWrites === 0) llp.beginBatch(true); // several pieces follow: cork from the first
    this.nWrites++;
    this.qp.counters.add(IC.mpaOutOctets, b.length);
    llp.write(b, cb);
  }

  /** Build and write every FPDU of one WQE; false when the QP failed. */
  private sendWqe(llp: Llp, w: SqWqe): boolean {
    const qp = this.qp;
    switch (w.opcode) {
      case WrOpcode.RDMA_READ: {
        const s = w.sgList[0] as Sge;
        // The sink must be writable local memory before the request goes out (siw checks the
        // SGE when it processes the WQE: a bad one completes with LOC_PROT_ERR).
        if (typeof qp.localTarget(s, 0, s.length) === 'number') {
          qp.sqFail(w, WcStatus.LOC_PROT_ERR, `RDMA Read sink lkey ${s.lkey} addr ${s.addr} len ${s.length} invalid`);
          return false;
        }
        this.qp.sqShift();
        // The sink is needed until the response is in: keep a private copy of the SGE.
        if (!w.detached) w.sgList = [{ addr: s.addr, length: s.length, lkey: s.lkey }];
        this.orq.push(w);
        this.readMsn = (this.readMsn + 1) >>> 0;
        const h = this.hdr;
        const len = writeReadRequest(h, 0, this.readMsn, s.lkey, s.addr, s.length, w.rkey, w.remoteAddr);
        this.writeSmall(llp, h, len, null, 0);
        qp.counters.add(IC.iwOutRdmaReads);
        this.endsWithWrite = false;
        if (tracing('tx')) traceEvent('tx', qp.tag, 'send', { opcode: 'READ_REQ', bytes: s.length, msn: this.readMsn, source: `${hex(w.rkey)}@${w.remoteAddr.toString(16)}` });
        return true;
      }
      case WrOpcode.RDMA_WRITE:
      case WrOpcode.SEND:
      case WrOpcode.SEND_WITH_INV: {
        const pieces = qp.gather(w);
        if (!pieces) return false;
        qp.sqShift();
        let op: RdmapOpcode;
        let msn = 0;
        if (w.opcode === WrOpcode.RDMA_WRITE) op = RdmapOpcode.WRITE;
        else {
          const se = (w.flags & 4) /* SOLICITED */ !== 0;
          if (w.opcode === WrOpcode.SEND_WITH_INV) op = se ? RdmapOpcode.SEND_SE_INV : RdmapOpcode.SEND_INV;
          else op = se ? RdmapOpcode.SEND_SE : RdmapOpcode.SEND;
          this.sendMsn = (this.sendMsn + 1) >>> 0;
          msn = this.sendMsn;
        }
        qp.counters.add(op === RdmapOpcode.WRITE ? IC.iwOutRdmaWrites : IC.iwOutRdmaSends);
        const zc = w.length >= ZERO_COPY_MIN && w.inline === null;
        if (zc) {
          const e = { w, done: false, status: WcStatus.SUCCESS };
          this.doneQ.push(e);
          this.sendMessageZc(llp, op, w, msn, pieces, e);
        } else {
          if (w.length <= this.oneMax) this.stageOne(llp, op, w, msn, pieces);
          else this.sendMessage(llp, op, w, msn, pieces);
          // Copied: done as far as the QP goes. Completed after the kick's write (see copied)
          // when nothing handed over zero-copy is pending before it.
          if (this.doneHead === this.doneQ.length) this.copied[this.nCopied++] = w;
          else this.doneQ.push({ w, done: true, status: WcStatus.SUCCESS });
        }
        // A batch that ends with an RDMA WRITE may wait for the end of the tick (see flushSoon).
        this.endsWithWrite = op === RdmapOpcode.WRITE && !zc;
        return true;
      }
      default:
        qp.sqFail(w, WcStatus.LOC_QP_OP_ERR, `opcode ${w.opcode} not supported`);
        return false;
    }
  }

  /**
   * Segment one message into FPDUs. Tagged (Write): STag = rkey, TO advancing; untagged (Send):
   * QN 0, the MSN, MO advancing. The FPDUs are staged (copied) and leave with the kick's write.
   */
  private sendMessage(llp: Llp, op: RdmapOpcode, w: SqWqe, msn: number, p: Pieces): void {
    const info = IWARP_OPCODES[op] as IwarpOpcodeInfo;
    const hdrLen = info.hdrLen;
    const maxPayload = (this.fpduMax - hdrLen - 4) & ~3;
    const total = w.length;
    let sent = 0;
    let pi = 0;
    let poff = 0;
    do {
      const n = Math.min(maxPayload, total - sent);
      const last = sent + n >= total;
      const pad = fpduPad(hdrLen - 2 + n);
      // One staged FPDU: header + payload + pad + CRC.
      const at0 = this.stageAlloc(llp, hdrLen + n + pad + 4);
      const f = this.slab;
      if (info.tagged) writeTaggedHdr(f, at0, op, last, w.rkey, w.remoteAddr + sent, n);
      else writeUntaggedHdr(f, at0, op, last, w.invalidateRkey, DdpQn.SEND, msn, sent, n);
      let at = at0 + hdrLen;
      let need = n;
      while (need > 0) {
        const avail = (p.lens[pi] as number) - poff;
        const k = avail < need ? avail : need;
        copyBytes(p.bufs[pi] as Buffer, (p.offs[pi] as number) + poff, f, at, k);
        at += k;
        need -= k;
        poff += k;
        if (poff === p.lens[pi]) {
          pi++;
          poff = 0;
        }
      }
      zeroTail(f, at, pad);
      if (this.crc) f.writeUInt32LE(crc32c(f.subarray(at0, at + pad)), at + pad);
      sent += n;
      this.qp.counters.add(IC.mpaOutFpdus);
    } while (sent < total);
    if (tracing('tx')) traceEvent('tx', this.qp.tag, 'send', { opcode: info.name, bytes: total, ...(msn ? { msn } : { stag: hex(w.rkey) }) });
  }

  /**
   * A message that fits one FPDU (of any opcode: {@link oneMax} is the payload limit of the
   * longest header, a Send's), staged in one step: the same bytes as {@link sendMessage} builds
   * for it (header, payload, zero pad, CRC or zeros), without its segmentation loop.
   */
  private stageOne(llp: Llp, op: RdmapOpcode, w: SqWqe, msn: number, p: Pieces): void {
    const n = w.length;
    const tagged = op === RdmapOpcode.WRITE;
    const hdrLen = tagged ? TAGGED_HDR_LEN : SEND_HDR_LEN;
    const pad = -(hdrLen + n) & 3;
    const at0 = this.stageAlloc(llp, hdrLen + n + pad + 4);
    const f = this.slab;
    const ulpdu = hdrLen - 2 + n;
    f[at0] = ulpdu >>> 8;
    f[at0 + 1] = ulpdu;
    // DDP control: T for a Write, L, DV 1; RDMAP control: RV 1, the opcode (RFC 5041 §4.2, RFC 5040 §4.2).
    f[at0 + 2] = tagged ? DDP_TAGGED_LAST : DDP_UNTAGGED_LAST;
    f[at0 + 3] = RDMAP_V1 | op;
    if (tagged) {
      const stag = w.rkey;
      f[at0 + 4] = stag >>> 24;
      f[at0 + 5] = stag >>> 16;
      f[at0 + 6] = stag >>> 8;
      f[at0 + 7] = stag;
      const to = w.remoteAddr;
      const hi = Math.floor(to / 0x1_0000_0000);
      f[at0 + 8] = hi >>> 24;
      f[at0 + 9] = hi >>> 16;
      f[at0 + 10] = hi >>> 8;
      f[at0 + 11] = hi;
      f[at0 + 12] = to >>> 24;
      f[at0 + 13] = to >>> 16;
      f[at0 + 14] = to >>> 8;
      f[at0 + 15] = to;
    } else {
      const inv = w.invalidateRkey;
      f[at0 + 4] = inv >>> 24;
      f[at0 + 5] = inv >>> 16;
      f[at0 + 6] = inv >>> 8;
      f[at0 + 7] = inv;
      // QN 0 (Send), the MSN, MO 0.
      for (let i = 8; i < 12; i++) f[at0 + i] = 0;
      f[at0 + 12] = msn >>> 24;
      f[at0 + 13] = msn >>> 16;
      f[at0 + 14] = msn >>> 8;
      f[at0 + 15] = msn;
      for (let i = 16; i < 20; i++) f[at0 + i] = 0;
    }
    let at = at0 + hdrLen;
    for (let i = 0, need = n; need > 0; i++) {
      const l = p.lens[i] as number;
      const k = l < need ? l : need;
      copyBytes(p.bufs[i] as Buffer, p.offs[i] as number, f, at, k);
      at += k;
      need -= k;
    }
    zeroTail(f, at, pad);
    if (this.crc) f.writeUInt32LE(crc32c(f.subarray(at0, at + pad)), at + pad);
    this.qp.counters.add(IC.mpaOutFpdus);
    if (tracing('tx')) traceEvent('tx', this.qp.tag, 'send', { opcode: String(IWARP_OPCODES[op]?.name), bytes: n, ...(msn ? { msn } : { stag: hex(w.rkey) }) });
  }

  /**
   * Zero-copy segmentation: the payload goes out as views of the registered memory. The small
   * pieces between two payloads — the trailer of one FPDU and the header of the next — share one
   * buffer, and all of them are cut from one allocation per message, so an FPDU costs two iovecs.
   * The WQE completes on the write callback of the last trailer.
   */
  private sendMessageZc(llp: Llp, op: RdmapOpcode, w: SqWqe, msn: number, p: Pieces, entry: { done: boolean; status: WcStatus }): void {
    const info = IWARP_OPCODES[op] as IwarpOpcodeInfo;
    const hdrLen = info.hdrLen;
    const maxPayload = (this.fpduMax - hdrLen - 4) & ~3;
    const total = w.length;
    const nf = Math.max(1, Math.ceil(total / maxPayload));
    // Each glue piece: trailer (pad ≤ 3 + CRC 4) + header; the first has no trailer, the last no header.
    // One writev per zero-copy message (with the small FPDUs that follow it): its completion (the
    // write callback) then comes as soon as TCP has taken it, not the whole batch. What was written
    // before it in this kick leaves first. Done for every zero-copy message, the first of a kick
    // too, so that the code is the same whatever came before: optimised code compiled while each
    // kick held one such message is not thrown away when one holds several.
    this.flushStage(llp);
    llp.endBatch();
    llp.beginBatch(false);
    this.nWrites = 0;
    this.qp.counters.add(IC.mpaOutFpdus, nf);
    const meta = Buffer.allocUnsafe(nf * (hdrLen + 8) + 8);
    let mo = 0; // where the current glue piece starts in `meta`
    let me = 0; // where it ends
    let sent = 0;
    let pi = 0;
    let poff = 0;
    let c = 0;
    for (let f = 0; f < nf; f++) {
      const n = Math.min(maxPayload, total - sent);
      const last = f === nf - 1;
      const hs = me;
      if (info.tagged) me = writeTaggedHdr(meta, hs, op, last, w.rkey, w.remoteAddr + sent, n);
      else me = writeUntaggedHdr(meta, hs, op, last, w.invalidateRkey, DdpQn.SEND, msn, sent, n);
      if (this.crc) c = crc32c(meta.subarray(hs, me));
      this.writeDirect(llp, meta.subarray(mo, me));
      let need = n;
      while (need > 0) {
        const avail = (p.lens[pi] as number) - poff;
        const k = avail < need ? avail : need;
        const st = (p.offs[pi] as number) + poff;
        const v = (p.bufs[pi] as Buffer).subarray(st, st + k);
        if (this.crc) c = crc32c(v, c);
        this.writeDirect(llp, v);
        need -= k;
        poff += k;
        if (poff === p.lens[pi]) {
          pi++;
          poff = 0;
        }
      }
      const pad = fpduPad(hdrLen - 2 + n);
      mo = me;
      for (let i = 0; i < pad; i++) meta[me + i] = 0;
      if (this.crc && pad > 0) c = crc32c(meta.subarray(me, me + pad), c);
      meta.writeUInt32LE(this.crc ? c : 0, me + pad);
      me += pad + 4;
      sent += n;
    }
    // A write the socket reports done after it was destroyed did not necessarily leave (Node
    // reports an in-flight write of a destroyed socket as done): that message is flushed.
    this.writeDirect(llp, meta.subarray(mo, me), (e) => this.zcDone(entry, e || llp.socket.destroyed ? WcStatus.WR_FLUSH_ERR : WcStatus.SUCCESS));
    if (tracing('tx')) traceEvent('tx', this.qp.tag, 'send', { opcode: info.name, bytes: total, ...(msn ? { msn } : { stag: hex(w.rkey) }), zeroCopy: true, fpdus: nf });
  }

  /**
   * Complete `w` with `status` once every WQE handed to TCP before it has completed (at once if
   * none is pending): keeps send completions in posting order when the QP is flushed.
   */
  completeInTurn(w: SqWqe, status: WcStatus): void {
    // Nothing pending: `w` completes now and nothing here refers to it afterwards.
    if (this.doneHead === this.doneQ.length) this.qp.sqDoneRecycle(w, status);
    else this.doneQ.push({ w, done: true, status });
  }

  private zcDone(entry: { done: boolean; status: WcStatus }, status: WcStatus): void {
    entry.done = true;
    entry.status = status;
    // Complete from the oldest on, as far as everything is done.
    const q = this.doneQ;
    while (this.doneHead < q.length) {
      const h = q[this.doneHead] as { w: SqWqe; done: boolean; status: WcStatus };
      if (!h.done) break;
      q[this.doneHead++] = undefined as never;
      this.qp.sqDone(h.w, h.status);
    }
    if (this.doneHead === q.length) {
      q.length = 0;
      this.doneHead = 0;
    }
  }

  /** Answer one inbound Read Request with tagged Read Response segments. */
  private sendReadResponse(llp: Llp, rr: IrqEntry): void {
    const info = IWARP_OPCODES[RdmapOpcode.READ_RESP] as IwarpOpcodeInfo;
    const maxPayload = (this.fpduMax - info.hdrLen - 4) & ~3;
    let sent = 0;
    do {
      const n = Math.min(maxPayload, rr.size - sent);
      const last = sent + n >= rr.size;
      const h = this.hdr;
      const hdrLen = writeTaggedHdr(h, 0, RdmapOpcode.READ_RESP, last, rr.sinkStag, rr.sinkTo + sent, n);
      this.writeSmall(llp, h, hdrLen, rr.buf, rr.off + sent, n);
      sent += n;
    } while (sent < rr.size);
    if (tracing('tx')) traceEvent('tx', this.qp.tag, 'send', { opcode: 'READ_RESP', bytes: rr.size, stag: hex(rr.sinkStag) });
  }

  /**
   * Write one FPDU whose header is in `h[0, hdrLen)` and payload (if any) is `src[off, off+n)`:
   * copied into one buffer when small, header + view + trailer otherwise. (Read responses are
   * answered from the responder's memory at once, like siw; the peer's MR stays registered.)
   */
  private writeSmall(llp: Llp, h: Buffer, hdrLen: number, src: Buffer | null, off: number, n = 0): void {
    const pad = fpduPad(hdrLen - 2 + n);
    this.qp.counters.add(IC.mpaOutFpdus);
    if (n < ZERO_COPY_MIN || !src) {
      const at = this.stageAlloc(llp, hdrLen + n + pad + 4);
      const f = this.slab;
      copyBytes(h, 0, f, at, hdrLen); // a header (≤ 48 bytes): Buffer#copy would cost a view and a native call
      if (src && n > 0) copyBytes(src, off, f, at + hdrLen, n);
      zeroTail(f, at + hdrLen + n, pad);
      if (this.crc) f.writeUInt32LE(crc32c(f.subarray(at, at + hdrLen + n + pad)), at + hdrLen + n + pad);
      return;
    }
    const hb = Buffer.allocUnsafe(hdrLen);
    copyBytes(h, 0, hb, 0, hdrLen);
    const v = src.subarray(off, off + n);
    const t = Buffer.alloc(pad + 4);
    if (this.crc) {
      let c = crc32c(hb);
      c = crc32c(v, c);
      if (pad) c = crc32c(t.subarray(0, pad), c);
      t.writeUInt32LE(c, pad);
    }
    this.writeDirect(llp, hb);
    this.writeDirect(llp, v);
    this.writeDirect(llp, t);
  }

  /** The RFC 6581 RTR as the initiator: a zero-length RDMA Write (STag 1, as siw) or Read. */
  sendRtr(kind: 'write' | 'read'): void {
    const llp = this.llp;
    if (!llp) return;
    const h = this.hdr;
    let len: number;
    if (kind === 'write') {
      len = writeTaggedHdr(h, 0, RdmapOpcode.WRITE, true, 1, 0, 0);
    } else {
      this.readMsn = (this.readMsn + 1) >>> 0;
      this.rtrReadPending = true;
      len = writeReadRequest(h, 0, this.readMsn, 0, 0, 0, 1, 0);
    }
    this.writeSmall(llp, h, len, null, 0);
    if (!this.kicking) this.flushStage(llp);
  }
  /** A zero-length Read RTR is outstanding (its response is consumed by the RX path). */
  rtrReadPending = false;

  /** Send a TERMINATE (best effort) describing `t`. */
  sendTerminate(t: TerminateSpec): void {
    const llp = this.llp;
    if (!llp || llp.isClosed) return;
    this.termMsn = (this.termMsn + 1) >>> 0;
    this.flushStage(llp); // what was built before the error goes first
    const b = encodeTerminate(t, { crc: this.crc, msn: this.termMsn });
    const c = this.qp.counters;
    c.add(IC.iwTerminatesSent);
    c.add(IC.mpaOutFpdus);
    c.add(IC.mpaOutOctets, b.length);
    llp.write(b);
  }

  /** Drop per-connection state (QP to ERR or destroyed). */
  reset(): void {
    this.irq.clear();
    this.dropStage();
    this.held = false;
  }
}

