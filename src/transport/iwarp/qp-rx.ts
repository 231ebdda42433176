/**
 * iWARP receive path (the role of siw_qp_rx.c): the whole receive side of one connection — the
 * LLP's reader, the FPDU decoder it feeds and that decoder's sink. Every header is checked
 * against the QP's state before a byte of its payload is placed: tagged segments (RDMA Write,
 * Read Response) go straight into the target memory region, untagged Sends into the posted
 * receive buffers, Read Requests are queued for the TX path. A violation throws a
 * {@link TerminateError}; the QP then sends a TERMINATE and closes (first error wins).
 * Nothing is ever written outside a registered region: the bounds check precedes placement.
 */
import { TerminateError, TermLayer } from '../../errors.js';
import { IC, type IwarpCounters } from './counters.js';
import {
  DDP_ECODE_CATASTROPHIC,
  DdpEtype,
  DdpTaggedEcode,
  DdpUntaggedEcode,
  LLP_ETYPE_MPA,
  MpaEcode,
  RdmapEcode,
  RdmapEtype,
  RdmapOpcode,
  RdmapCtrl,
  RDMAP_OPCODE_MAX,
  DdpQn,
  createFpduHeader,
  wholeFpdu,
  FpduDecoder,
  type FpduHeader,
  type FpduSink,
} from '../../wire/iwarp/index.js';
import { ddpTaggedEcode, hex, rdmapProtEcode } from './mem.js';
import { copyBytes } from '../../util/copy.js';
import { Access, WcFlags, WcStatus, type Sge } from '../../verbs/types.js';
import type { RqWqe, SqWqe } from '../../verbs/qp.js';
import type { QpTx } from './qp-tx.js';
import type { LlpReader } from './llp.js';
import { traceEvent, tracing } from '../../trace.js';

/** Where the payload of the FPDU being received goes (constants in the form of {@link RdmapOpcode}). */
const Place = {
  /** No FPDU in progress. */
  NONE: 0,
  /** Into the memory of a tagged target ({@link QpRx.dst}): RDMA Write, Read Response. */
  TAGGED: 1,
  /** Into the SGEs of the receive in progress: a Send. */
  UNTAGGED: 2,
  /** Nowhere: a zero-length segment, a Read Request (its header is the whole message). */
  DISCARD: 3,
  /** Into the TERMINATE buffer, up to its first 128 bytes. */
  TERMINATE: 4,
} as const;
type Place = (typeof Place)[keyof typeof Place];

/**
 * The QP as its receive path sees it (IwarpQp implements it): the memory and receive queue a
 * message is placed into, the TX state a Read touches, and where a message completes or fails.
 */
export interface RxQp {
  /** Trace tag. */
  readonly tag: string;
  /** Inbound Read Requests allowed outstanding. */
  readonly ird: number;
  /** The transmit path: its ORQ (Read Responses), IRQ (Read Requests) and Read RTR state. */
  readonly tx: QpTx;
  remoteTarget(stag: number, to: number, len: number, access: number): { buf: Buffer; off: number } | number;
  localTarget(s: Sge, off: number, len: number): { buf: Buffer; off: number } | number;
  /** As {@link localTarget}, for an SGE of a receive WQE (checked against the SRQ's PD when it came from one). */
  recvTarget(s: Sge, off: number, len: number): { buf: Buffer; off: number } | number;
  rqTake(): RqWqe | undefined;
  rqPeek(): RqWqe | undefined;
  invalidateStag(stag: number): boolean;
  rxRecvDone(w: RqWqe, len: number, flags: number, inv: number, solicited: boolean): void;
  rxRecvFailed(w: RqWqe, status: WcStatus): void;
  sqDone(w: SqWqe, status?: WcStatus): void;
  /** The Read `w`, off the ORQ, completed by its response; the WQE may be reused. */
  readDone(w: SqWqe): void;
  peerTerminated(header: Buffer, attached: Buffer): void;
  /** A TERMINATE was sent or received on the connection. */
  readonly terminated: boolean;
  /** Receiving failed: TERMINATE (first error wins), close, QP to ERR. */
  protocolError(e: unknown): void;
  /** The device's counters. */
  readonly counters: IwarpCounters;
}

/**
 * Receive state of one connection, and its reader: the LLP hands it the stream's bytes, which
 * it decodes ({@link FpduDecoder}, this object its sink) and places, asking the QP only for
 * memory and receives and telling it only what completed or failed.
 */
export class QpRx implements FpduSink, LlpReader {
  /** Set on the first complete FPDU (releases a held TX, completes a P2P accept). */
  onFirstFpdu: (() => void) | null = null;
  private seenFirst = false;
  /** The connection's FPDU decoder, from {@link attach} until {@link stop}; null otherwise. */
  private decoder: FpduDecoder | null = null;
  /** The receive fast path is on (configuration, at attach). */
  private fastPath = false;
  /** MPA CRC was negotiated. */
  private crc = false;
  // Destination of the current FPDU's payload.
  private dst: Buffer | null = null;
  private dstOff = 0;
  /**
   * Direct reads past a payload (see {@link readTarget}): the bytes of the destination that the
   * read may overwrite beyond the payload, saved before it and put back after it ({@link zoneLen}
   * of them, at {@link zoneAt} of {@link zoneDst}), and the stream bytes it brought there.
   */
  private zoneDst: Buffer | null = null;
  private zoneAt = 0;
  private zoneLen = 0;
  private readonly zoneSaved = Buffer.alloc(32);
  /** The stream bytes a direct read brought past the payload ({@link takeZone}). */
  private readonly zoneBytes = Buffer.alloc(32);
  // Untagged (Send) message in progress: the receive it is placed into was taken off the RQ, so
  // it is this object's to complete — on success, on an error, or when the QP is flushed.
  private rqe: RqWqe | null = null;
  /** How {@link rqe} completes if the message fails (siw's wqe->wc_status). */
  private rqeStatus: WcStatus = WcStatus.GENERAL_ERR;
  /** The FPDU being received is a Send (an error in it fails the receive in progress). */
  private inSend = false;
  private rqeSge = 0;
  private rqeSgeOff = 0;
  /** Bytes of the Send in progress placed so far. */
  private sendPlaced = 0;
  private expectSendMsn = 1;
  private expectReadMsn = 1;
  /** The MSN the next Send received must carry. */
  get nextSendMsn(): number {
    return this.expectSendMsn;
  }
  /** The MSN the next Read Request received must carry. */
  get nextReadMsn(): number {
    return this.expectReadMsn;
  }
  // Tagged message in progress: the next segment must continue it.
  private tagStag = 0;
  private tagNextTo = 0;
  private tagOpen = false;
  // Read Response in progress (the head of the ORQ).
  private readPlaced = 0;
  // Terminate payload.
  private term: Buffer | null = null;
  private termHdr: Buffer | null = null;
  private termLen = 0;
  private kind: Place = Place.NONE;
  /** Streaming large tagged messages: size reads so that payloads can be placed directly. */
  private bulk = false;

  /**
   * Tagged payloads at least this large are read by the socket straight into the target memory
   * (`directPlacementMin` of the device's configuration, 8192 by default; Infinity: never): one
   * kernel copy into the MR instead of a copy into the shared read buffer and one from it
   * (docs/design/iwarp.md).
   */
  readonly directMin: number;

  constructor(private readonly qp: RxQp, directMin: number) {
    this.directMin = directMin;
    // Offsets into the destination are differences of 64-bit addresses, which V8 hands over as
    // heap numbers even when small: both fields hold doubles from the first QP on. A field born a
    // small integer changes representation at the first such value (the first large WRITE placed
    // straight into memory), which gives the object a new hidden class and discards the feedback
    // and code compiled against the old one, the fast path's among them (util/arrays.ts).
    this.dstOff = 0.5;
    this.dstOff = 0;
    this.zoneAt = 0.5;
    this.zoneAt = 0;
  }

  /** Start receiving a connection's stream (`crc`: MPA CRC negotiated; `fastPath`: {@link fast} is used). */
  attach(crc: boolean, fastPath: boolean): void {
    this.decoder = new FpduDecoder(this, { crc });
    this.crc = crc;
    this.fastPath = fastPath;
  }

  /** Receiving ends (TERMINATE, close, a later connection): bytes that still arrive are ignored. */
  stop(): void {
    this.decoder = null;
  }

  /** Bytes the connection manager read past the MPA frame: the start of the stream. */
  leftover(buf: Buffer): void {
    const dec = this.decoder;
    if (dec === null) return;
    this.qp.counters.add(IC.mpaInOctets, buf.length);
    try {
      dec.push(buf, 0, buf.length);
    } catch (e) {
      this.fail(e);
    }
  }

  /** LlpReader: stream bytes `buf[start, end)`. */
  bytes(buf: Buffer, start: number, end: number): void {
    const dec = this.decoder;
    if (dec === null) return;
    this.qp.counters.add(IC.mpaInOctets, end - start);
    try {
      if (!this.fastPath) {
        dec.push(buf, start, end);
        return;
      }
      // Whole small messages go through fast(); an FPDU it leaves goes through the decoder,
      // which hands back at the next boundary. (A small SEND read behind the end of a large
      // WRITE, as an rsocket's message after its data, then takes the same path as every other.)
      while (start < end) {
        if (dec.atBoundary) {
          start = this.fast(dec, buf, start, end, this.crc);
          if (start === end) break;
        }
        start = dec.pushFpdu(buf, start, end);
      }
    } catch (e) {
      dec.stop();
      this.fail(e);
    }
  }

  /** LlpReader: `n` bytes were read straight into the view {@link readTarget} gave. */
  placed(view: Buffer, n: number): void {
    // First the destination's bytes past the payload are put back (whatever happens next).
    const extra = this.takeZone(view, n);
    const dec = this.decoder;
    if (dec === null) return;
    try {
      const k = n - extra;
      this.qp.counters.add(IC.mpaInOctets, k);
      dec.placed(view, 0, k);
      this.dstOff += k;
      if (extra > 0) this.bytes(this.zoneBytes, 0, extra);
    } catch (e) {
      this.fail(e);
    }
  }

  /** Receiving threw: the message being received fails, then the QP sends its TERMINATE. */
  private fail(e: unknown): void {
    if (!this.qp.terminated) this.failCurrent();
    this.qp.protocolError(e);
  }

  /** The header of the FPDU {@link fast} is decoding (its own: the decoder's is not touched). */
  private readonly fh: FpduHeader = createFpduHeader();

  /**
   * The receive fast path, for the common case of a read that brings whole small messages: from
   * `b[p]`, while the decoder `dec` is between FPDUs and no message is in progress here, each
   * complete, well-formed FPDU (see {@link wholeFpdu}; `crc`: MPA CRC negotiated) that is a
   * single-segment RDMA Write of 1 to {@link directMin} - 1 bytes, or a single-segment Send or
   * Send with Solicited Event, is decoded and placed in one step, with the checks and the state
   * changes of {@link onHeader} + {@link onPayload} + {@link onEnd} for it. Returns the offset
   * it stopped at: the first FPDU that is incomplete, not one of these, or fails a check (bad
   * STag or bounds, wrong MSN or MO, no receive posted, a receive too small or no longer valid,
   * bad CRC) is left, with the rest of the bytes, to `dec.push`, which then reports it (the same
   * TERMINATE, the same completions, the same bytes placed) as it does for every FPDU. Nothing
   * is changed before a check fails except bytes copied into the receive's own memory, which the
   * general path then copies again before it fails at the same place.
   */
  fast(dec: FpduDecoder, b: Buffer, p: number, end: number, crc: boolean): number {
    const h = this.fh;
    const qp = this.qp;
    while (p < end && dec.atBoundary && this.seenFirst && this.rqe === null && !this.tagOpen && this.readPlaced === 0) {
      const n = wholeFpdu(h, b, p, end, crc);
      if (n === 0) break;
      const len = h.payloadLen;
      const at = p + h.hdrLen;
      const op = h.opcode;
      // Read for every FPDU, not in the Send branch alone: code compiled during a run of Writes
      // has feedback for it when the first Send comes.
      const msnOk = h.msn === this.expectSendMsn;
      if (op === RdmapOpcode.WRITE) {
        if (!h.last || len === 0 || len >= this.directMin) break;
        const r = qp.remoteTarget(h.stag, h.to, len, Access.REMOTE_WRITE);
        if (typeof r === 'number') break;
        copyBytes(b, at, r.buf, r.off, len);
        this.bulk = false;
        this.inSend = false;
        this.tagStag = h.stag;
        this.tagNextTo = h.to + len;
        dec.tookWhole(n);
        qp.counters.add(IC.iwInRdmaWrites);
      } else if (op === RdmapOpcode.SEND || op === RdmapOpcode.SEND_SE) {
        if (!h.last || !msnOk || h.mo !== 0) break;
        const w = qp.rqPeek();
        if (w === undefined || len > w.length) break;
        // The general path starts its scatter over (at SGE 0) when it takes the receive.
        this.rqeSge = 0;
        this.rqeSgeOff = 0;
        if (this.scatter(w, b, at, at + len) < at + len) break;
        qp.rqTake();
        this.bulk = false;
        this.inSend = false;
        this.rqeStatus = WcStatus.GENERAL_ERR;
        this.expectSendMsn = (this.expectSendMsn + 1) >>> 0;
        dec.tookWhole(n);
        qp.counters.add(IC.iwInRdmaSends);
        qp.rxRecvDone(w, len, 0, 0, op === RdmapOpcode.SEND_SE);
        if (tracing('rx')) traceEvent('rx', qp.tag, 'recv', { opcode: 'SEND', bytes: len, msn: h.msn });
      } else if (op === RdmapOpcode.READ_REQ) {
        if (!this.fastReadReq(h)) break;
        dec.tookWhole(n);
      } else if (op === RdmapOpcode.READ_RESP) {
        if (len >= this.directMin || !this.fastReadResp(h, dec, b, at, n)) break;
      } else break;
      qp.counters.add(IC.mpaInFpdus);
      p += n;
    }
    return p;
  }

  /**
   * {@link fast} for a Read Request (a whole FPDU, queue and CRC checked by {@link wholeFpdu}):
   * what {@link hdrReadReq} + {@link endReadReq} do for a request they accept — the IRQ entry,
   * the MSN, the TX kick after this receive processing. False, with nothing changed, for one
   * they would refuse or a zero-length one (an RTR), which the general path then takes.
   */
  private fastReadReq(h: FpduHeader): boolean {
    const qp = this.qp;
    const irq = qp.tx.irq;
    if (h.msn !== this.expectReadMsn || h.readSize === 0 || irq.length >= qp.ird) return false;
    const r = qp.remoteTarget(h.srcStag, h.srcTo, h.readSize, Access.REMOTE_READ);
    if (typeof r === 'number') return false;
    this.expectReadMsn = (this.expectReadMsn + 1) >>> 0;
    irq.push({ sinkStag: h.sinkStag, sinkTo: h.sinkTo, size: h.readSize, srcStag: h.srcStag, srcTo: h.srcTo, buf: r.buf, off: r.off });
    this.bulk = false;
    this.inSend = false;
    qp.counters.add(IC.iwInRdmaReads);
    qp.tx.kickSoon();
    return true;
  }

  /**
   * {@link fast} for the one and last segment of the response to the Read at the head of the ORQ
   * (payload `b[at, at + payloadLen)`, the FPDU `n` bytes): what {@link hdrReadResp} +
   * {@link onPayload} + {@link endReadResp} do with it — placed into the Read's sink, the Read
   * completed, the TX path kicked. False, with nothing changed, for any other (an RTR's, one of
   * several segments, one that does not match the request), which the general path then takes.
   */
  private fastReadResp(h: FpduHeader, dec: FpduDecoder, b: Buffer, at: number, n: number): boolean {
    const qp = this.qp;
    const tx = qp.tx;
    const w = tx.orq.peek();
    const len = h.payloadLen;
    if (w === undefined || !h.last || len === 0) return false;
    const s = w.sgList[0] as Sge;
    if (h.stag !== s.lkey || h.to !== s.addr || len !== s.length) return false;
    const r = qp.localTarget(s, 0, len);
    if (typeof r === 'number') return false;
    copyBytes(b, at, r.buf, r.off, len);
    this.bulk = false;
    this.inSend = false;
    dec.tookWhole(n);
    tx.orq.shift();
    if (tracing('rx')) traceEvent('rx', qp.tag, 'recv', { opcode: 'READ_RESP', bytes: len });
    qp.readDone(w);
    tx.kick();
    return true;
  }

  onHeader(h: FpduHeader): void {
    // Bulk mode stays on through the short last segment of a large tagged message.
    this.inSend = false;
    // On for a large tagged segment, off for an untagged one or a small tagged one outside a
    // message or Read Response in progress, else unchanged: one store, every field read and
    // compared whichever way it goes, so that code compiled during a run of large tagged messages
    // has feedback for the small one that comes next (a message exchange after bulk data) and is
    // not thrown away there.
    const tagged = h.tagged;
    const large = h.payloadLen >= this.directMin;
    const keep = this.bulk;
    const idle = !this.tagOpen;
    const noRead = this.readPlaced === 0;
    this.bulk = tagged && (large || (keep && !(idle && noRead)));
    (QpRx.hdrOf[h.opcode] as RxHandler).call(this, h);
  }

  private hdrTerminate(h: FpduHeader): void {
    if (h.qn !== DdpQn.TERM) throw new TerminateError(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_QN, 'TERMINATE on wrong queue', h.raw);
    this.kind = Place.TERMINATE;
    this.termHdr = Buffer.from(h.raw);
    this.term = Buffer.alloc(Math.min(h.payloadLen, 128));
    this.termLen = 0;
  }

  /** Opcodes 8..15 (RFC 7306, not implemented by siw); the FPDU decoder rejects them first. */
  private hdrUnexpected(h: FpduHeader): void {
    throw new TerminateError(TermLayer.RDMAP, RdmapEtype.REMOTE_OPERATION, RdmapEcode.UNEXPECTED_OPCODE, `unexpected opcode ${h.opcode}`, h.raw);
  }

  private hdrWrite(h: FpduHeader): void {
    const qp = this.qp;
    if (this.tagOpen && (h.stag !== this.tagStag || h.to !== this.tagNextTo)) {
      throw new TerminateError(TermLayer.DDP, DdpEtype.TAGGED, h.stag !== this.tagStag ? DdpTaggedEcode.INVALID_STAG : DdpTaggedEcode.BASE_BOUNDS, 'tagged segment does not continue its message', h.raw);
    }
    if (h.payloadLen === 0) {
      // A zero-length Write (the RFC 6581 RTR, siw uses STag 1) is accepted with any STag.
      this.kind = Place.DISCARD;
      this.tagOpen = !h.last;
      if (this.tagOpen) {
        this.tagStag = h.stag;
        this.tagNextTo = h.to;
      }
      return;
    }
    const r = qp.remoteTarget(h.stag, h.to, h.payloadLen, Access.REMOTE_WRITE);
    if (typeof r === 'number') throw new TerminateError(TermLayer.DDP, DdpEtype.TAGGED, ddpTaggedEcode(r), `RDMA Write to ${hex(h.stag)}@${h.to.toString(16)}+${h.payloadLen} refused`, h.raw);
    this.dst = r.buf;
    this.dstOff = r.off;
    this.kind = Place.TAGGED;
    this.tagOpen = !h.last;
    this.tagStag = h.stag;
    this.tagNextTo = h.to + h.payloadLen;
  }

  private hdrReadResp(h: FpduHeader): void {
    const qp = this.qp;
    const tx = qp.tx;
    if (tx.rtrReadPending && tx.orq.length === 0) {
      // Response to our zero-length Read RTR.
      if (h.payloadLen !== 0 || !h.last) throw new TerminateError(TermLayer.DDP, DdpEtype.TAGGED, DdpTaggedEcode.BASE_BOUNDS, 'bad RTR read response', h.raw);
      tx.rtrReadPending = false;
      this.kind = Place.DISCARD;
      return;
    }
    const w = tx.orq.peek();
    if (!w) throw new TerminateError(TermLayer.DDP, DdpEtype.CATASTROPHIC, DDP_ECODE_CATASTROPHIC, 'Read Response without an outstanding Read', h.raw);
    const s = w.sgList[0] as Sge;
    if (h.stag !== s.lkey) throw new TerminateError(TermLayer.DDP, DdpEtype.TAGGED, DdpTaggedEcode.INVALID_STAG, 'Read Response STag mismatch', h.raw);
    if (h.to !== s.addr + this.readPlaced || this.readPlaced + h.payloadLen > s.length) {
      throw new TerminateError(TermLayer.DDP, DdpEtype.TAGGED, DdpTaggedEcode.BASE_BOUNDS, 'Read Response outside the requested sink', h.raw);
    }
    if (h.last && this.readPlaced + h.payloadLen !== s.length) {
      throw new TerminateError(TermLayer.DDP, DdpEtype.TAGGED, DdpTaggedEcode.BASE_BOUNDS, 'Read Response shorter than requested', h.raw);
    }
    if (h.payloadLen > 0) {
      const r = qp.localTarget(s, this.readPlaced, h.payloadLen);
      if (typeof r === 'number') throw new TerminateError(TermLayer.DDP, DdpEtype.TAGGED, DdpTaggedEcode.INVALID_STAG, 'Read sink no longer valid', h.raw);
      this.dst = r.buf;
      this.dstOff = r.off;
      this.kind = Place.TAGGED;
    } else this.kind = Place.DISCARD;
  }

  private hdrSend(h: FpduHeader): void {
    this.inSend = true;
    if (h.qn !== DdpQn.SEND) throw new TerminateError(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_QN, `Send on queue ${h.qn}`, h.raw);
    if (h.msn !== this.expectSendMsn) throw new TerminateError(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_MSN_RANGE, `Send MSN ${h.msn}, expected ${this.expectSendMsn}`, h.raw);
    if (h.mo !== this.sendPlaced) throw new TerminateError(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_MO, `Send MO ${h.mo}, expected ${this.sendPlaced}`, h.raw);
    if (this.rqe === null) {
      const r = this.qp.rqTake();
      if (!r) throw new TerminateError(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_MSN_NO_BUFFER, 'Send with no receive posted', h.raw);
      this.rqe = r;
      this.rqeStatus = WcStatus.GENERAL_ERR;
      this.rqeSge = 0;
      this.rqeSgeOff = 0;
    }
    if (this.sendPlaced + h.payloadLen > this.rqe.length) {
      // The receive is too small for the message: it completes with LOC_LEN_ERR (as siw).
      this.rqeStatus = WcStatus.LOC_LEN_ERR;
      throw new TerminateError(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_MSN_NO_BUFFER, `Send of ${this.sendPlaced + h.payloadLen}+ bytes into a ${this.rqe.length}-byte receive`, h.raw);
    }
    this.kind = Place.UNTAGGED;
  }

  private hdrReadReq(h: FpduHeader): void {
    const qp = this.qp;
    if (h.qn !== DdpQn.READ) throw new TerminateError(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_QN, `Read Request on queue ${h.qn}`, h.raw);
    if (h.msn !== this.expectReadMsn) throw new TerminateError(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_MSN_RANGE, `Read Request MSN ${h.msn}, expected ${this.expectReadMsn}`, h.raw);
    this.expectReadMsn = (this.expectReadMsn + 1) >>> 0;
    // Zero-length Reads count against the IRD like any other (siw's IRQ; an initiator's Read RTR
    // takes one of its ORD), else a peer that reads nothing grows the queue without bound. One
    // always fits: a Read RTR to a responder with IRD 0.
    const ird = h.readSize === 0 ? Math.max(qp.ird, 1) : qp.ird;
    if (ird <= 0 || qp.tx.irq.length >= ird) {
      throw new TerminateError(TermLayer.RDMAP, RdmapEtype.REMOTE_OPERATION, RdmapEcode.CATASTROPHIC_STREAM, `more than IRD ${qp.ird} outstanding Read Requests`, h.raw);
    }
    if (h.readSize === 0) {
      // Zero-length read (an RTR): answered with a zero-length response, any STag.
      qp.tx.irq.push({ sinkStag: h.sinkStag, sinkTo: h.sinkTo, size: 0, srcStag: h.srcStag, srcTo: h.srcTo, buf: EMPTY, off: 0 });
      this.kind = Place.DISCARD;
      return;
    }
    const r = qp.remoteTarget(h.srcStag, h.srcTo, h.readSize, Access.REMOTE_READ);
    if (typeof r === 'number') {
      // RDMAP remote protection error with the Read Request header attached (siw).
      throw new TerminateError(TermLayer.RDMAP, RdmapEtype.REMOTE_PROTECTION, rdmapProtEcode(r), `RDMA Read of ${hex(h.srcStag)}@${h.srcTo.toString(16)}+${h.readSize} refused`, h.raw);
    }
    qp.tx.irq.push({ sinkStag: h.sinkStag, sinkTo: h.sinkTo, size: h.readSize, srcStag: h.srcStag, srcTo: h.srcTo, buf: r.buf, off: r.off });
    this.kind = Place.DISCARD;
  }

  /**
   * LlpReader: where the socket should read next. Inside a large tagged payload, a view of the
   * destination memory (the kernel copies the bytes straight into the MR, as siw places them);
   * while streaming large tagged messages, the byte count up to the next payload, so that the
   * read stops there; otherwise (and once receiving stopped) null: one full read into the
   * shared buffer.
   */
  readTarget(): Buffer | number | null {
    const dec = this.decoder;
    if (dec === null) return null;
    this.zoneLen = 0;
    if (this.kind === Place.TAGGED) {
      const rem = dec.payloadRemaining;
      if (rem >= this.directMin) {
        const dst = this.dst as Buffer;
        const end = this.dstOff + rem;
        // Let the read also take the trailer and the next FPDU's header (one read per FPDU
        // instead of two). They land in the destination right after the payload (where the next
        // segment's payload goes, or past the message): the bytes there are saved here and put
        // back by takeZone, in the read's callback, before any other code of this thread runs.
        // Memory another thread can see (a SharedArrayBuffer) is never written past the payload.
        if (!(dst.buffer instanceof SharedArrayBuffer)) {
          const z = dec.bytesPastPayload;
          if (end + z <= dst.length) {
            copyBytes(dst, end, this.zoneSaved, 0, z);
            this.zoneDst = dst;
            this.zoneAt = end;
            this.zoneLen = z;
            return dst.subarray(this.dstOff, end + z);
          }
        }
        return dst.subarray(this.dstOff, end);
      }
    }
    return this.bulk ? dec.bytesToBoundary : null;
  }

  /**
   * A read into the view {@link readTarget} gave took `n` bytes: of those past the payload, copy
   * the stream bytes to {@link zoneBytes} and put the destination's own bytes back. Returns how
   * many stream bytes there were past the payload (0 when the read ended within it).
   */
  private takeZone(view: Buffer, n: number): number {
    const z = this.zoneLen;
    if (z === 0) return 0;
    this.zoneLen = 0;
    const payload = view.length - z;
    const extra = n - payload;
    if (extra <= 0) return 0;
    const dst = this.zoneDst as Buffer;
    copyBytes(dst, this.zoneAt, this.zoneBytes, 0, extra);
    copyBytes(this.zoneSaved, 0, dst, this.zoneAt, extra);
    this.zoneDst = null;
    return extra;
  }

  /**
   * Copy `src[at, end)` into the SGEs of receive `w` from ({@link rqeSge}, {@link rqeSgeOff})
   * on, advancing them. Returns where it stopped: `end`, or earlier at an SGE whose memory is no
   * longer valid (nothing of the rest is copied).
   */
  private scatter(w: RqWqe, src: Uint8Array, at: number, end: number): number {
    while (at < end) {
      const s = w.sgList[this.rqeSge] as Sge;
      const room = s.length - this.rqeSgeOff;
      if (room === 0) {
        this.rqeSge++;
        this.rqeSgeOff = 0;
        continue;
      }
      const k = room < end - at ? room : end - at;
      const r = this.qp.recvTarget(s, this.rqeSgeOff, k);
      if (typeof r === 'number') return at;
      copyBytes(src, at, r.buf, r.off, k);
      at += k;
      this.rqeSgeOff += k;
    }
    return at;
  }

  onPayload(src: Uint8Array, start: number, end: number): void {
    const n = end - start;
    switch (this.kind) {
      case Place.TAGGED: {
        copyBytes(src, start, this.dst as Buffer, this.dstOff, n);
        this.dstOff += n;
        return;
      }
      case Place.UNTAGGED: {
        if (this.scatter(this.rqe as RqWqe, src, start, end) < end) {
          this.rqeStatus = WcStatus.LOC_PROT_ERR;
          throw new TerminateError(TermLayer.RDMAP, RdmapEtype.CATASTROPHIC, RdmapEcode.UNSPECIFIED, 'receive buffer no longer valid');
        }
        this.sendPlaced += n;
        return;
      }
      case Place.TERMINATE: {
        const t = this.term as Buffer;
        const k = Math.min(n, t.length - this.termLen);
        if (k > 0) copyBytes(src, start, t, this.termLen, k);
        this.termLen += k;
        return;
      }
      default:
        return;
    }
  }

  onEnd(h: FpduHeader, crcOk: boolean): void {
    const c = this.qp.counters;
    c.add(IC.mpaInFpdus);
    if (!crcOk) c.add(IC.mpaCrcErrors);
    if (!crcOk) throw new TerminateError(TermLayer.LLP, LLP_ETYPE_MPA, MpaEcode.CRC, 'MPA CRC error', h.raw);
    // A Write message received; not the RFC 6581 RTR, a zero-length Write before anything else.
    if (h.opcode === RdmapOpcode.WRITE && h.last && (this.seenFirst || h.payloadLen !== 0)) c.add(IC.iwInRdmaWrites);
    if (!this.seenFirst) {
      this.seenFirst = true;
      const f = this.onFirstFpdu;
      this.onFirstFpdu = null;
      f?.();
    }
    (QpRx.endOf[h.opcode] as RxHandler).call(this, h);
    this.kind = Place.NONE;
    this.dst = null;
    this.inSend = false;
  }

  /**
   * What the receive path does at an FPDU's header, by its 4-bit RDMAP opcode (siw's
   * `iwarp_pktinfo[].rx_data`; the wire's facts per opcode are {@link IWARP_OPCODES}): the
   * checks, and where the payload goes. Opcodes 8..15 (RFC 7306) are unexpected.
   */
  private static readonly hdrOf = byOpcode(
    {
      [RdmapOpcode.WRITE]: QpRx.prototype.hdrWrite,
      [RdmapOpcode.READ_REQ]: QpRx.prototype.hdrReadReq,
      [RdmapOpcode.READ_RESP]: QpRx.prototype.hdrReadResp,
      [RdmapOpcode.SEND]: QpRx.prototype.hdrSend,
      [RdmapOpcode.SEND_INV]: QpRx.prototype.hdrSend,
      [RdmapOpcode.SEND_SE]: QpRx.prototype.hdrSend,
      [RdmapOpcode.SEND_SE_INV]: QpRx.prototype.hdrSend,
      [RdmapOpcode.TERMINATE]: QpRx.prototype.hdrTerminate,
    },
    QpRx.prototype.hdrUnexpected,
  );

  /** What the receive path does at an FPDU's end (its CRC checked), by opcode: the completions. */
  private static readonly endOf = byOpcode(
    {
      [RdmapOpcode.WRITE]: QpRx.prototype.endNone,
      [RdmapOpcode.READ_REQ]: QpRx.prototype.endReadReq,
      [RdmapOpcode.READ_RESP]: QpRx.prototype.endReadResp,
      [RdmapOpcode.SEND]: QpRx.prototype.endSend,
      [RdmapOpcode.SEND_INV]: QpRx.prototype.endSend,
      [RdmapOpcode.SEND_SE]: QpRx.prototype.endSend,
      [RdmapOpcode.SEND_SE_INV]: QpRx.prototype.endSend,
      [RdmapOpcode.TERMINATE]: QpRx.prototype.endTerminate,
    },
    QpRx.prototype.endNone,
  );

  /** The end of a Send segment: the last one completes the receive. */
  private endSend(h: FpduHeader): void {
    if (this.kind !== Place.UNTAGGED) return;
    if (!h.last) return;
    const qp = this.qp;
    let flags = 0;
    let inv = 0;
    if (h.opcode === RdmapOpcode.SEND_INV || h.opcode === RdmapOpcode.SEND_SE_INV) {
      if (!qp.invalidateStag(h.invStag)) {
        // The receive stays in progress: failCurrent() completes it with this status, as
        // siw_rdmap_complete completes it with REM_INV_REQ_ERR.
        this.rqeStatus = WcStatus.REM_INV_REQ_ERR;
        throw new TerminateError(TermLayer.RDMAP, RdmapEtype.REMOTE_OPERATION, RdmapEcode.CANNOT_INVALIDATE, `STag ${hex(h.invStag)} cannot be invalidated`, h.raw);
      }
      flags |= WcFlags.WITH_INV;
      inv = h.invStag;
      qp.counters.add(IC.iwRdmaInv);
    }
    const w = this.rqe as RqWqe;
    const len = this.sendPlaced;
    this.rqe = null;
    this.sendPlaced = 0;
    this.expectSendMsn = (this.expectSendMsn + 1) >>> 0;
    qp.counters.add(IC.iwInRdmaSends);
    const se = h.opcode === RdmapOpcode.SEND_SE || h.opcode === RdmapOpcode.SEND_SE_INV;
    qp.rxRecvDone(w, len, flags, inv, se);
    if (tracing('rx')) traceEvent('rx', qp.tag, 'recv', { opcode: 'SEND', bytes: len, msn: h.msn });
  }

  /** The end of a Read Response segment: the last one completes the Read at the head of the ORQ. */
  private endReadResp(h: FpduHeader): void {
    const qp = this.qp;
    if (this.kind === Place.DISCARD && qp.tx.orq.length === 0) return; // RTR response
    this.readPlaced += h.payloadLen;
    if (h.last) {
      this.readPlaced = 0;
      const w = qp.tx.orq.shift() as SqWqe;
      if (tracing('rx')) traceEvent('rx', qp.tag, 'recv', { opcode: 'READ_RESP', bytes: w.length });
      qp.readDone(w);
      qp.tx.kick();
    }
  }

  /**
   * The end of a Read Request: answered after the whole received chunk is processed (siw's TX
   * runs apart from RX), so a burst of Read Requests beyond the IRD is seen as such.
   */
  private endReadReq(_h: FpduHeader): void {
    this.qp.counters.add(IC.iwInRdmaReads);
    this.qp.tx.kickSoon();
  }

  /** The end of a TERMINATE: the QP fails with what it reports. */
  private endTerminate(_h: FpduHeader): void {
    this.qp.counters.add(IC.iwTerminatesRcvd);
    this.qp.peerTerminated(this.termHdr as Buffer, (this.term as Buffer).subarray(0, this.termLen));
  }

  /** The end of an RDMA Write, or of opcodes 8..15 (never reached: rejected at their header). */
  private endNone(_h: FpduHeader): void {}

  /**
   * Receiving failed (the decoder threw): if the failing FPDU is a Send, the receive it is placed
   * into completes now with the message's error status (LOC_LEN_ERR for a receive too small,
   * LOC_PROT_ERR for a receive buffer gone, GENERAL_ERR otherwise), as siw_rdmap_complete does
   * on an error. A receive in progress under any other failure is left for {@link flushRecv}.
   */
  private failCurrent(): void {
    if (this.inSend) this.endRecv(this.rqeStatus);
  }

  /** The QP is flushed: the receive in progress completes with WR_FLUSH_ERR (siw_rq_flush). */
  flushRecv(): void {
    this.endRecv(WcStatus.WR_FLUSH_ERR);
  }

  private endRecv(status: WcStatus): void {
    const w = this.rqe;
    this.inSend = false;
    if (w === null) return;
    this.rqe = null;
    this.sendPlaced = 0;
    this.kind = Place.NONE;
    this.qp.rxRecvFailed(w, status);
  }
}

const EMPTY = Buffer.alloc(0);

/** A per-opcode step of the receive path, called with the QpRx as `this`. */
type RxHandler = (this: QpRx, h: FpduHeader) => void;

/** A table of all 16 values of the 4-bit RDMAP opcode: the handler given for it, else `rest`. */
function byOpcode(of: { readonly [op in RdmapOpcode]: RxHandler }, rest: RxHandler): readonly RxHandler[] {
  const t: RxHandler[] = [];
  for (let op = 0; op <= RdmapCtrl.OPCODE; op++) t.push(op <= RDMAP_OPCODE_MAX ? of[op as RdmapOpcode] : rest);
  return Object.freeze(t);
}
