/**
 * Incremental, I/O-free FPDU decoder for the byte stream that follows the MPA start frames
 * (RFC 5044 §4): a receive state machine
 * GET_HDR -> DATA -> TRAILER like siw_qp_rx.c `siw_tcp_rx_data()`, fed arbitrary chunks, because
 * TCP segmentation bears no relation to FPDU boundaries (siw_qp_tx.c).
 *
 * The decoder places nothing. It hands the sink each header, then every payload piece as a view
 * into the chunk being pushed, then the trailer verdict, so the caller can copy payload straight
 * into the target memory region (no intermediate copy). Per FPDU it copies only the header
 * (<= 48 bytes) and the pad + trailer (<= 7 bytes), and allocates nothing.
 *
 * @module
 */
import type { FpduHeader } from './fpdu.js';
import { checkFpduCtrl, createFpduHeader, parseFpduHeader } from './fpdu.js';
import { crc32cRange } from './crc32c.js';
import { MPA_CRC_LEN, MPA_LEN_FIELD, fpduPad, readCrcLE } from './mpa.js';
import { DDP_VERSION, DdpCtrl, FPDU_OFF_DDP_CTRL, FPDU_OFF_QN, FPDU_OFF_RDMAP_CTRL } from './ddp.js';
import {
  IWARP_OPCODES,
  RDMAP_OPCODE_MAX,
  RDMAP_VERSION,
  RdmapCtrl,
  RdmapOpcode,
  FPDU_MAX_HDR_LEN,
  FPDU_MIN_HDR_LEN,
  READ_REQ_HDR_LEN,
  SEND_HDR_LEN,
  TAGGED_HDR_LEN,
  TERMINATE_HDR_LEN,
} from './rdmap.js';

/**
 * Receiver of decoded FPDUs. Calls for one FPDU always come in the order
 * `onHeader`, `onPayload`* (in stream order, covering exactly `payloadLen` bytes; none when it is
 * 0), `onEnd`. If any of them throws, the decoder becomes `'dead'` and rethrows.
 */
export interface FpduSink {
  /**
   * The header is complete and valid. `h` is the decoder's reused header object. Throw a
   * `TerminateError` to reject the segment (e.g. unknown STag, bad MSN).
   */
  onHeader(h: FpduHeader): void;
  /**
   * The next in-order payload bytes `src[start, end)`: a view into the chunk passed to `push`,
   * valid only during this call (copy out of it, never keep it). With CRC on, the bytes are
   * delivered *before* the trailer is checked: see `onEnd`.
   */
  onPayload(src: Uint8Array, start: number, end: number): void;
  /**
   * Pad and trailer read. `crcOk` is false when CRC is on and the trailer does not match (the
   * FPDU is corrupt: TERMINATE LLP / MPA / 0x02 and drop, siw_qp_rx.c); always true when CRC is
   * off (the trailer is then not checked, RFC 5044 §4.5).
   */
  onEnd(h: FpduHeader, crcOk: boolean): void;
}

/** Options of {@link FpduDecoder}. */
export interface FpduDecoderOptions {
  /** Whether MPA CRC was negotiated: check every trailer (siw_cm.c: CRC is on iff the reply has C). */
  crc: boolean;
}

/** Receive state: header, payload, pad + trailer, or stopped for good. */
export type FpduDecoderState = 'hdr' | 'payload' | 'trailer' | 'dead';

const S_HDR = 0;
const S_PAYLOAD = 1;
const S_TRAILER = 2;
const S_DEAD = 3;
const STATE_NAMES: readonly FpduDecoderState[] = ['hdr', 'payload', 'trailer', 'dead'];
/** Where the pad + CRC of an FPDU are collected in the decoder's buffer (after the longest header). */
const TRAILER_AT = FPDU_MAX_HDR_LEN;

/** Copy `n` (a header or trailer's worth: <= 48) bytes; unrolled by 4, the usual counts are 16, 4 and 20. */
function copySmall(src: Uint8Array, so: number, dst: Uint8Array, d: number, n: number): void {
  let i = 0;
  for (const e4 = n - 4; i <= e4; i += 4) {
    dst[d + i] = src[so + i]!;
    dst[d + i + 1] = src[so + i + 1]!;
    dst[d + i + 2] = src[so + i + 2]!;
    dst[d + i + 3] = src[so + i + 3]!;
  }
  for (; i < n; i++) dst[d + i] = src[so + i]!;
}

/**
 * The incremental FPDU decoder. One per connection and direction, created after the MPA
 * handshake (push the bytes that followed the peer's start frame first).
 *
 * Errors: a malformed header (see `checkFpduCtrl` / `parseFpduHeader` in fpdu.ts) makes `push`
 * throw a `TerminateError` carrying the TERMINATE layer/etype/ecode and a copy of the header bytes
 * read; a sink exception propagates the same way. Either way the decoder is then `'dead'`: later
 * `push` calls return without consuming anything (stray socket data after a protocol error is
 * ignored, never re-reported). {@link stop} kills it deliberately, e.g. after a TERMINATE arrived.
 */
export class FpduDecoder {
  /** The header object handed to the sink, overwritten for every FPDU. */
  readonly header: FpduHeader;
  private readonly sink: FpduSink;
  private readonly crcOn: boolean;
  /**
   * Header bytes of the current FPDU at [0, 48) (backing store of `header.raw`), its pad + CRC
   * at [48, 56): one allocation per decoder.
   */
  private readonly hbuf = new Uint8Array(FPDU_MAX_HDR_LEN + 8);
  /**
   * `header.raw` views of `hbuf` by header length: the tagged and untagged data headers (16, 20)
   * made with the decoder, the TERMINATE and Read Request ones (24, 48) on first use. (Made on
   * first use, the common two would be made in a branch that each new connection's decoder takes
   * once and the code compiled during an earlier connection has no feedback for: it would be
   * thrown away.)
   */
  private readonly raw16: Uint8Array;
  private readonly raw20: Uint8Array;
  private raw24: Uint8Array | null = null;
  private raw48: Uint8Array | null = null;
  private st = S_HDR;
  /** Bytes collected of the current header or trailer. */
  private have = 0;
  /** Bytes wanted of the current header (16, then the opcode's length) or trailer (pad + 4). */
  private need = FPDU_MIN_HDR_LEN;
  /** Payload bytes still to come. */
  private rem = 0;
  private pad = 0;
  private crc = 0;
  /**
   * The FPDUs ([0]) and bytes ([1]) decoded so far. In a typed array rather than two number
   * fields: a connection's byte count passes 2^31 after 2 GiB, and a field that held small integers
   * until then would change representation, which deprecates the decoder's map and throws away
   * every function optimised against it in the middle of a transfer.
   */
  private readonly counts = new Float64Array(2);

  constructor(sink: FpduSink, opts: FpduDecoderOptions) {
    this.sink = sink;
    this.crcOn = opts.crc;
    this.header = createFpduHeader();
    this.raw16 = this.hbuf.subarray(0, TAGGED_HDR_LEN);
    this.raw20 = this.hbuf.subarray(0, SEND_HDR_LEN);
  }

  /** Current receive state. */
  get state(): FpduDecoderState {
    return STATE_NAMES[this.st]!;
  }

  /** FPDUs completed so far (trailer read). */
  get fpdus(): number {
    return this.counts[0] as number;
  }

  /** Bytes consumed so far. */
  get bytes(): number {
    return this.counts[1] as number;
  }

  /** Payload bytes still to come in the current FPDU (0 outside the payload state). */
  get payloadRemaining(): number {
    return this.st === S_PAYLOAD ? this.rem : 0;
  }

  /**
   * How many bytes the next read should take so that it ends on a boundary that lets the payload
   * after it be read in place: the rest of the payload, the rest of the header, or the rest of the
   * trailer plus a tagged header (16 bytes).
   */
  get bytesToBoundary(): number {
    switch (this.st) {
      case S_PAYLOAD:
        return this.rem;
      case S_HDR:
        return this.need - this.have;
      case S_TRAILER:
        return this.need - this.have + FPDU_MIN_HDR_LEN;
      default:
        return 0;
    }
  }

  /**
   * In the payload state, the bytes between the payload's end and the payload of a tagged FPDU
   * right behind it (this FPDU's pad and CRC, then a 16-byte header); 0 in any other state.
   */
  get bytesPastPayload(): number {
    return this.st === S_PAYLOAD ? this.pad + MPA_CRC_LEN + FPDU_MIN_HDR_LEN : 0;
  }

  /**
   * Account for `n` payload bytes of the current FPDU that the caller received straight into their
   * destination, `buf[start, start + n)` (a socket read into the target memory region): the CRC
   * (when on) covers them there; the sink's `onPayload` is not called for them.
   * @throws RangeError unless in the payload state with at least `n` bytes to come.
   */
  placed(buf: Uint8Array, start: number, n: number): void {
    if (this.st !== S_PAYLOAD || n > this.rem || n < 0 || start < 0 || start + n > buf.length) {
      throw new RangeError(`placed(${n}) outside the current payload (${this.payloadRemaining} to come)`);
    }
    if (this.crcOn) this.crc = crc32cRange(buf, start, start + n, this.crc);
    this.counts[1] = (this.counts[1] as number) + n;
    this.rem -= n;
    if (this.rem === 0) this.enterTrailer();
  }

  /**
   * Between two FPDUs with nothing of the next one read yet: the caller may decode whole FPDUs
   * of the stream itself ({@link wholeFpdu}) and report each with {@link tookWhole}.
   */
  get atBoundary(): boolean {
    return this.st === S_HDR && this.have === 0;
  }

  /**
   * The caller decoded one whole FPDU of `n` bytes (header to trailer) at the current position of
   * the stream itself (only {@link atBoundary}): count it as if it had been pushed. The decoder
   * stays at a boundary.
   */
  tookWhole(n: number): void {
    const c = this.counts;
    c[0] = (c[0] as number) + 1;
    c[1] = (c[1] as number) + n;
  }

  /** Stop for good: state `'dead'`, further input ignored. Safe to call from inside the sink. */
  stop(): void {
    this.st = S_DEAD;
  }

  /**
   * Feed the next bytes of the stream, `chunk[start, end)`. Decodes as far as the bytes go and
   * calls the sink synchronously; partial headers/trailers are kept (copied) for the next call,
   * partial payloads are delivered as they come.
   *
   * @throws TerminateError on a malformed header (the decoder is then dead), or whatever the sink
   *   throws; RangeError if `[start, end)` is not inside `chunk` (decoder state unchanged).
   */
  push(chunk: Uint8Array, start = 0, end: number = chunk.length): void {
    this.feed(chunk, start, end, false);
  }

  /**
   * {@link push} up to the end of the FPDU in progress: decodes `chunk[start, end)` until an FPDU
   * ends (its trailer read) and returns the offset after it, where the decoder is then
   * {@link atBoundary}; or `end` when the bytes run out first (or the decoder is stopped). A
   * caller that decodes whole FPDUs itself ({@link wholeFpdu}) takes over again from there.
   *
   * @throws as {@link push}.
   */
  pushFpdu(chunk: Uint8Array, start: number, end: number): number {
    return this.feed(chunk, start, end, true);
  }

  /** {@link push} (`one` false) and {@link pushFpdu} (`one` true): the offset decoding stopped at. */
  private feed(chunk: Uint8Array, start: number, end: number, one: boolean): number {
    if (!(start >= 0 && start <= end && end <= chunk.length)) {
      throw new RangeError(`push range [${start}, ${end}) outside a chunk of ${chunk.length} bytes`);
    }
    if (this.st === S_DEAD) return end;
    let p = start;
    try {
      while (p < end) {
        const st = this.st;
        if (st === S_PAYLOAD) {
          // `rem` is read before the test: a payload read exactly to its end (direct placement)
          // never takes the branch, and code compiled then would lack feedback for the read in it.
          const rem = this.rem;
          let n = end - p;
          if (n > rem) n = rem;
          const q = p + n;
          if (this.crcOn) this.crc = crc32cRange(chunk, p, q, this.crc);
          this.rem = rem - n;
          if (rem === n) this.enterTrailer();
          this.sink.onPayload(chunk, p, q);
          p = q;
        } else if (st === S_HDR) {
          // Copy header bytes (at most 48 per FPDU) into the decoder's own buffer, then parse there.
          const hb = this.hbuf;
          let have = this.have;
          let n = this.need - have;
          if (n > end - p) n = end - p;
          copySmall(chunk, p, hb, have, n);
          have += n;
          p += n;
          this.have = have;
          if (have < this.need) break;
          if (have === FPDU_MIN_HDR_LEN) {
            const hdrLen = checkFpduCtrl(hb, 0, FPDU_MIN_HDR_LEN);
            if (hdrLen > FPDU_MIN_HDR_LEN) {
              this.need = hdrLen;
              continue;
            }
          }
          this.headerDone();
        } else if (st === S_TRAILER) {
          let have = this.have;
          let n = this.need - have;
          if (n > end - p) n = end - p;
          copySmall(chunk, p, this.hbuf, TRAILER_AT + have, n);
          have += n;
          p += n;
          this.have = have;
          if (have < this.need) break;
          this.trailerDone();
          if (one && this.st === S_HDR) break;
        } else {
          break; // stopped from inside the sink
        }
      }
    } catch (e) {
      this.st = S_DEAD;
      this.counts[1] = (this.counts[1] as number) + (end - start);
      throw e;
    }
    // Every byte handed in counts, also those ignored after a stop from inside the sink.
    const to = one && this.st === S_HDR ? p : end;
    this.counts[1] = (this.counts[1] as number) + (to - start);
    return to;
  }

  /** All `need` header bytes are in `hbuf`: parse, validate, hand to the sink. */
  private headerDone(): void {
    const hdrLen = this.need;
    const h = this.header;
    const hb = this.hbuf;
    parseFpduHeader(h, hb, 0, hdrLen);
    h.raw =
      hdrLen === TAGGED_HDR_LEN
        ? this.raw16
        : hdrLen === SEND_HDR_LEN
          ? this.raw20
          : hdrLen === TERMINATE_HDR_LEN
            ? (this.raw24 ??= hb.subarray(0, TERMINATE_HDR_LEN))
            : (this.raw48 ??= hb.subarray(0, READ_REQ_HDR_LEN));
    if (this.crcOn) this.crc = crc32cRange(hb, 0, hdrLen, 0);
    this.pad = fpduPad(h.ulpduLen);
    if (h.payloadLen > 0) {
      this.st = S_PAYLOAD;
      this.rem = h.payloadLen;
    } else {
      this.enterTrailer();
    }
    this.sink.onHeader(h);
  }

  private enterTrailer(): void {
    this.st = S_TRAILER;
    this.have = 0;
    this.need = this.pad + MPA_CRC_LEN;
  }

  /** Pad + CRC complete: verify (CRC on) and close the FPDU. */
  private trailerDone(): void {
    let ok = true;
    if (this.crcOn) {
      const pad = this.pad;
      const c = pad === 0 ? this.crc : crc32cRange(this.hbuf, TRAILER_AT, TRAILER_AT + pad, this.crc);
      ok = c === readCrcLE(this.hbuf, TRAILER_AT + pad);
    }
    this.st = S_HDR;
    this.have = 0;
    this.need = FPDU_MIN_HDR_LEN;
    this.counts[0] = (this.counts[0] as number) + 1;
    this.sink.onEnd(this.header, ok);
  }
}

/**
 * One whole FPDU at `b[p]`, decoded in one step (no state kept between chunks): when `[p, end)`
 * holds a complete FPDU (header, payload, pad and CRC) whose header passes every check of
 * {@link FpduDecoder} (the control bytes, ULPDU_Length against the opcode's header, the untagged
 * queue number, a Read Request without payload) and whose CRC matches (`crc`: MPA CRC was
 * negotiated), fills `h` (`h.raw` is left as it was) and returns the FPDU's length on the wire;
 * otherwise returns 0 and the caller leaves these bytes to {@link FpduDecoder.push}, which
 * reports what is wrong exactly as it always does. Allocates nothing.
 */
export function wholeFpdu(h: FpduHeader, b: Uint8Array, p: number, end: number, crc: boolean): number {
  if (end - p < FPDU_MIN_HDR_LEN) return 0;
  const ddp = b[p + FPDU_OFF_DDP_CTRL]!;
  const rdmap = b[p + FPDU_OFF_RDMAP_CTRL]!;
  if ((ddp & DdpCtrl.VERSION) !== DDP_VERSION || rdmap >>> 6 !== RDMAP_VERSION) return 0;
  const op = rdmap & RdmapCtrl.OPCODE;
  if (op > RDMAP_OPCODE_MAX) return 0;
  const info = IWARP_OPCODES[op]!;
  if (((ddp & DdpCtrl.TAGGED) !== 0) !== info.tagged) return 0;
  const ulpdu = (b[p]! << 8) | b[p + 1]!;
  const hdrLen = info.hdrLen;
  const body = ulpdu + MPA_LEN_FIELD;
  if (body < hdrLen) return 0;
  const total = body + fpduPad(ulpdu) + MPA_CRC_LEN;
  if (total > end - p) return 0;
  const q = p + FPDU_OFF_QN;
  if (!info.tagged && ((b[q]! << 24) | (b[q + 1]! << 16) | (b[q + 2]! << 8) | b[q + 3]!) >>> 0 !== info.qn) return 0;
  if (op === RdmapOpcode.READ_REQ && body !== hdrLen) return 0;
  if (crc && crc32cRange(b, p, p + total - MPA_CRC_LEN, 0) !== readCrcLE(b, p + total - MPA_CRC_LEN)) return 0;
  parseFpduHeader(h, b, p, hdrLen);
  return total;
}
