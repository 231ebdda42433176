/**
 * FPDU headers: the MPA length field plus the DDP and RDMAP headers of one iWARP segment
 * (RFC 5044 §4.1, RFC 5041 §4, RFC 5040 §4).
 *
 * - Zero-allocation header writers for the TX path ({@link writeTaggedHdr},
 *   {@link writeUntaggedHdr}, {@link writeReadRequest}): each fills a caller-owned buffer at an
 *   offset, MPA ULPDU_Length included, and returns the offset just past the header.
 * - Header validation shared by the incremental decoder and {@link decodeFpduHeader}, raising the
 *   TERMINATE codes siw uses (siw_qp_rx.c).
 * - Allocating builders for tests and small control messages ({@link encodeFpdu}).
 *
 * Tagged offsets (TO, sink/source TO) are JS numbers: exact up to 2^53 - 1. On receive, a 64-bit
 * value at or above 2^53 cannot be represented and is reported as {@link TO_OVERFLOW} (-1), which
 * fails every `to >= base` bounds check; `raw` keeps the exact bytes.
 *
 * @module
 */
import { TerminateError, TermLayer } from '../../errors.js';
import { crc32cRange } from './crc32c.js';
import { copyOf } from '../bytes.js';
import {
  DDP_ECODE_CATASTROPHIC,
  DDP_TAGGED_HDR_LEN,
  DDP_UNTAGGED_HDR_LEN,
  DDP_VERSION,
  DdpCtrl,
  DdpEtype,
  DdpQn,
  DdpTaggedEcode,
  DdpUntaggedEcode,
  FPDU_OFF_DDP_CTRL,
  FPDU_OFF_MO,
  FPDU_OFF_MSN,
  FPDU_OFF_QN,
  FPDU_OFF_RDMAP_CTRL,
  FPDU_OFF_STAG,
  FPDU_OFF_TO,
} from './ddp.js';
import { MPA_LEN_FIELD, MPA_MAX_ULPDU, fpduPad, writeFpduTrailer } from './mpa.js';
import {
  FPDU_MIN_HDR_LEN,
  IWARP_OPCODES,
  RDMAP_OPCODE_MAX,
  RDMAP_READ_REQ_LEN,
  RDMAP_VERSION,
  READ_REQ_HDR_LEN,
  RdmapCtrl,
  RdmapEcode,
  RdmapEtype,
  RdmapOpcode,
  ReadReqOff,
} from './rdmap.js';

/** Value of a received 64-bit tagged offset that is not exactly representable (>= 2^53). */
export const TO_OVERFLOW = -1;

const TWO_32 = 0x1_0000_0000;
/** Largest high word of a 64-bit value below 2^53. */
const HI_SAFE_MAX = 0x1f_ffff;

/**
 * One parsed FPDU header (RFC 5041 §4.3, §4.4; RFC 5040 §4.4). Fields that do not apply to the opcode are 0.
 *
 * The {@link FpduDecoder} owns **one** instance and overwrites it for every FPDU: read what you
 * need during `onHeader` / `onEnd` and copy `raw` if you keep it (e.g. for a TERMINATE attachment).
 */
export interface FpduHeader {
  /** MPA ULPDU_Length: DDP header + RDMAP header + payload bytes (excludes itself, pad, CRC). */
  ulpduLen: number;
  /** RDMAP opcode 0..7 ({@link RdmapOpcode}). */
  opcode: number;
  /** DDP T flag. */
  tagged: boolean;
  /** DDP L flag: last segment of the message. */
  last: boolean;
  /** The DDP control byte as received (FPDU offset 2). */
  ddpCtrl: number;
  /** The RDMAP control byte as received (FPDU offset 3). */
  rdmapCtrl: number;
  /** Header bytes from the FPDU start, MPA length included (16/20/24/48, siw_qp.c iwarp_pktinfo). */
  hdrLen: number;
  /** Tagged: data sink STag. */
  stag: number;
  /** Tagged: tagged offset (or {@link TO_OVERFLOW}). */
  to: number;
  /** Untagged: RsvdULP2, the STag to invalidate for Send with Invalidate (RFC 5040, the Invalidate STag field). */
  invStag: number;
  /** Untagged: queue number. */
  qn: number;
  /** Untagged: message sequence number (first message on a queue is 1). */
  msn: number;
  /** Untagged: message offset of this segment's payload. */
  mo: number;
  /** Read Request: data sink STag (RFC 5040 §4.4). */
  sinkStag: number;
  /** Read Request: data sink TO (or {@link TO_OVERFLOW}). */
  sinkTo: number;
  /** Read Request: RDMA Read Message Size in bytes. */
  readSize: number;
  /** Read Request: data source STag. */
  srcStag: number;
  /** Read Request: data source TO (or {@link TO_OVERFLOW}). */
  srcTo: number;
  /**
   * Payload bytes after the header: `ulpduLen + 2 - hdrLen`. For a Terminate these are the
   * attached DDP/RDMAP headers (the control word is part of the 24-byte header).
   */
  payloadLen: number;
  /**
   * The header bytes, `hdrLen` long, starting with the MPA length field. A decoder-owned view,
   * overwritten by the next FPDU. Its first 16 (tagged), 20 (untagged) or 48 (Read Request) bytes
   * are exactly what a TERMINATE attaches (DDP segment length + DDP header [+ RDMAP header]).
   */
  raw: Uint8Array;
}

const EMPTY = new Uint8Array(0);

/** Concrete header with every field initialised, so all instances share one shape. */
class Header implements FpduHeader {
  ulpduLen = 0;
  opcode = 0;
  tagged = false;
  last = false;
  ddpCtrl = 0;
  rdmapCtrl = 0;
  hdrLen = 0;
  stag = 0;
  to = 0;
  invStag = 0;
  qn = 0;
  msn = 0;
  mo = 0;
  sinkStag = 0;
  sinkTo = 0;
  readSize = 0;
  srcStag = 0;
  srcTo = 0;
  payloadLen = 0;
  raw: Uint8Array = EMPTY;
}

/** A fresh, zeroed {@link FpduHeader}. */
export function createFpduHeader(): FpduHeader {
  return new Header();
}

// ---- byte access (big-endian unless named otherwise) ------------------------------------------

function put16(b: Uint8Array, o: number, v: number): void {
  b[o] = v >>> 8;
  b[o + 1] = v;
}

function put32(b: Uint8Array, o: number, v: number): void {
  b[o] = v >>> 24;
  b[o + 1] = v >>> 16;
  b[o + 2] = v >>> 8;
  b[o + 3] = v;
}

function put64(b: Uint8Array, o: number, v: number): void {
  put32(b, o, Math.floor(v / TWO_32));
  put32(b, o + 4, v >>> 0);
}

function get32(b: Uint8Array, o: number): number {
  return ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0;
}

function get64(b: Uint8Array, o: number): number {
  const hi = get32(b, o);
  return hi <= HI_SAFE_MAX ? hi * TWO_32 + get32(b, o + 4) : TO_OVERFLOW;
}

// ---- writers (TX) ------------------------------------------------------------------------------

function ulpduCheck(ulpdu: number): void {
  if (ulpdu > MPA_MAX_ULPDU) throw new RangeError(`ULPDU of ${ulpdu} bytes exceeds ${MPA_MAX_ULPDU}`);
}

/**
 * Write a tagged FPDU header (Write or Read Response) at `buf[off]`: MPA ULPDU_Length, DDP control
 * (T=1, L, DV=1), RDMAP control (RV=1, opcode), STag, 64-bit TO (RFC 5041 §4.3).
 * 16 bytes, no allocation.
 *
 * @param opcode {@link RdmapOpcode.WRITE} or {@link RdmapOpcode.READ_RESP} (not checked).
 * @param last DDP L flag.
 * @param stag data sink STag (u32).
 * @param to tagged offset of this segment's first payload byte, integer 0..2^53-1.
 * @param payloadLen payload bytes that will follow the header in this FPDU.
 * @returns `off + 16`.
 * @throws RangeError if the ULPDU would exceed 65535 bytes.
 */
export function writeTaggedHdr(
  buf: Uint8Array,
  off: number,
  opcode: number,
  last: boolean,
  stag: number,
  to: number,
  payloadLen: number,
): number {
  const ulpdu = DDP_TAGGED_HDR_LEN + payloadLen;
  ulpduCheck(ulpdu);
  put16(buf, off, ulpdu);
  buf[off + FPDU_OFF_DDP_CTRL] = last ? DdpCtrl.TAGGED | DdpCtrl.LAST | DDP_VERSION : DdpCtrl.TAGGED | DDP_VERSION;
  buf[off + FPDU_OFF_RDMAP_CTRL] = (RDMAP_VERSION << 6) | opcode;
  put32(buf, off + FPDU_OFF_STAG, stag);
  put64(buf, off + FPDU_OFF_TO, to);
  return off + MPA_LEN_FIELD + DDP_TAGGED_HDR_LEN;
}

/**
 * Write an untagged FPDU header (Send variants, Terminate, or the first 20 bytes of a Read
 * Request) at `buf[off]`: MPA ULPDU_Length, DDP control (T=0, L, DV=1), RDMAP control, RsvdULP2
 * (`invStag`), QN, MSN, MO (RFC 5041 §4.4). 20 bytes, no allocation.
 *
 * @param ulpBytes bytes of this segment after the 18-byte DDP header: the payload for Sends; the
 *   control word plus attachments for a Terminate; 28 for a Read Request.
 * @returns `off + 20`.
 * @throws RangeError if the ULPDU would exceed 65535 bytes.
 */
export function writeUntaggedHdr(
  buf: Uint8Array,
  off: number,
  opcode: number,
  last: boolean,
  invStag: number,
  qn: number,
  msn: number,
  mo: number,
  ulpBytes: number,
): number {
  const ulpdu = DDP_UNTAGGED_HDR_LEN + ulpBytes;
  ulpduCheck(ulpdu);
  put16(buf, off, ulpdu);
  buf[off + FPDU_OFF_DDP_CTRL] = last ? DdpCtrl.LAST | DDP_VERSION : DDP_VERSION;
  buf[off + FPDU_OFF_RDMAP_CTRL] = (RDMAP_VERSION << 6) | opcode;
  put32(buf, off + FPDU_OFF_STAG, invStag);
  put32(buf, off + FPDU_OFF_QN, qn);
  put32(buf, off + FPDU_OFF_MSN, msn);
  put32(buf, off + FPDU_OFF_MO, mo);
  return off + MPA_LEN_FIELD + DDP_UNTAGGED_HDR_LEN;
}

/**
 * Write a complete RDMA Read Request header at `buf[off]` (RFC 5040 §4.4): QN 1,
 * MO 0, L=1, ULPDU_Length 46, then sink STag/TO, size, source STag/TO. 48 bytes; the request
 * carries no payload, so only the trailer follows.
 *
 * @returns `off + 48`.
 */
export function writeReadRequest(
  buf: Uint8Array,
  off: number,
  msn: number,
  sinkStag: number,
  sinkTo: number,
  size: number,
  srcStag: number,
  srcTo: number,
): number {
  writeUntaggedHdr(buf, off, RdmapOpcode.READ_REQ, true, 0, DdpQn.READ, msn, 0, RDMAP_READ_REQ_LEN);
  put32(buf, off + ReadReqOff.SINK_STAG, sinkStag);
  put64(buf, off + ReadReqOff.SINK_TO, sinkTo);
  put32(buf, off + ReadReqOff.SIZE, size);
  put32(buf, off + ReadReqOff.SRC_STAG, srcStag);
  put64(buf, off + ReadReqOff.SRC_TO, srcTo);
  return off + READ_REQ_HDR_LEN;
}

// ---- validation (RX) ---------------------------------------------------------------------------

function termErr(layer: number, etype: number, ecode: number, msg: string, b: Uint8Array, o: number, n: number) {
  return new TerminateError(layer, etype, ecode, msg, copyOf(b, o, o + n));
}

/**
 * Check the control bytes of the FPDU header at `b[o]` and return its header length (RFC 5041 §4,
 * RFC 5040 §4), in siw's order (siw_get_hdr), then the checks siw leaves out:
 * 1. DDP version != 1 -> DDP / tagged 0x04, or DDP / untagged 0x06 (by the T bit);
 * 2. RDMAP version != 1 -> RDMAP / remote operation / 0x05;
 * 3. opcode > 7 -> RDMAP / remote operation / 0x06;
 * 4. T set on an untagged opcode -> DDP / tagged / 0x00 (the DDP layer, which dispatches on T
 *    before RDMAP sees the opcode, finds no valid STag); T clear on a tagged opcode -> DDP /
 *    untagged / 0x01 (no such queue for this opcode);
 * 5. ULPDU_Length shorter than the opcode's headers -> DDP / catastrophic / 0x00 (the segment
 *    cannot hold its own header; nothing beyond it can be trusted).
 *
 * Needs 4 bytes; `n` is how many bytes at `b[o]` to attach to the error (the header bytes read).
 */
export function checkFpduCtrl(b: Uint8Array, o: number, n: number): number {
  const ddp = b[o + FPDU_OFF_DDP_CTRL]!;
  const rdmap = b[o + FPDU_OFF_RDMAP_CTRL]!;
  if ((ddp & DdpCtrl.VERSION) !== DDP_VERSION) {
    const tagged = (ddp & DdpCtrl.TAGGED) !== 0;
    throw termErr(
      TermLayer.DDP,
      tagged ? DdpEtype.TAGGED : DdpEtype.UNTAGGED,
      tagged ? DdpTaggedEcode.VERSION : DdpUntaggedEcode.VERSION,
      `DDP version ${ddp & DdpCtrl.VERSION}`,
      b,
      o,
      n,
    );
  }
  if (rdmap >>> 6 !== RDMAP_VERSION) {
    const why = `RDMAP version ${rdmap >>> 6}`;
    throw termErr(TermLayer.RDMAP, RdmapEtype.REMOTE_OPERATION, RdmapEcode.VERSION, why, b, o, n);
  }
  const op = rdmap & RdmapCtrl.OPCODE;
  if (op > RDMAP_OPCODE_MAX) {
    const why = `RDMAP opcode ${op}`;
    throw termErr(TermLayer.RDMAP, RdmapEtype.REMOTE_OPERATION, RdmapEcode.UNEXPECTED_OPCODE, why, b, o, n);
  }
  const info = IWARP_OPCODES[op]!;
  const tagged = (ddp & DdpCtrl.TAGGED) !== 0;
  if (tagged !== info.tagged) {
    const why = `${tagged ? 'tagged' : 'untagged'} segment with opcode ${info.name}`;
    if (tagged) throw termErr(TermLayer.DDP, DdpEtype.TAGGED, DdpTaggedEcode.INVALID_STAG, why, b, o, n);
    throw termErr(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_QN, why, b, o, n);
  }
  const ulpdu = (b[o]! << 8) | b[o + 1]!;
  if (ulpdu + MPA_LEN_FIELD < info.hdrLen) {
    throw termErr(
      TermLayer.DDP,
      DdpEtype.CATASTROPHIC,
      DDP_ECODE_CATASTROPHIC,
      `ULPDU_Length ${ulpdu} shorter than the ${info.name} header`,
      b,
      o,
      n,
    );
  }
  return info.hdrLen;
}

/**
 * Fill `h` from the complete header at `b[o]` (its control bytes already passed
 * {@link checkFpduCtrl}), then apply the checks that need the whole header:
 * untagged QN not the opcode's queue -> DDP / untagged / 0x01 (siw: Send with QN != 0);
 * Read Request with payload -> DDP / untagged / 0x05 "message too long" (siw silently drops the
 * connection instead; the caller may choose not to send this TERMINATE). `h.raw` is not touched.
 */
export function parseFpduHeader(h: FpduHeader, b: Uint8Array, o: number, hdrLen: number): void {
  const ddp = b[o + FPDU_OFF_DDP_CTRL]!;
  const rdmap = b[o + FPDU_OFF_RDMAP_CTRL]!;
  const op = rdmap & RdmapCtrl.OPCODE;
  const ulpdu = (b[o]! << 8) | b[o + 1]!;
  h.ulpduLen = ulpdu;
  h.opcode = op;
  h.ddpCtrl = ddp;
  h.rdmapCtrl = rdmap;
  h.last = (ddp & DdpCtrl.LAST) !== 0;
  h.hdrLen = hdrLen;
  h.payloadLen = ulpdu + MPA_LEN_FIELD - hdrLen;
  if ((ddp & DdpCtrl.TAGGED) !== 0) {
    h.tagged = true;
    h.stag = get32(b, o + FPDU_OFF_STAG);
    h.to = get64(b, o + FPDU_OFF_TO);
    h.invStag = 0;
    h.qn = 0;
    h.msn = 0;
    h.mo = 0;
  } else {
    h.tagged = false;
    h.stag = 0;
    h.to = 0;
    h.invStag = get32(b, o + FPDU_OFF_STAG);
    h.qn = get32(b, o + FPDU_OFF_QN);
    h.msn = get32(b, o + FPDU_OFF_MSN);
    h.mo = get32(b, o + FPDU_OFF_MO);
    const info = IWARP_OPCODES[op]!;
    if (h.qn !== info.qn) {
      const why = `QN ${h.qn} for ${info.name}`;
      throw termErr(TermLayer.DDP, DdpEtype.UNTAGGED, DdpUntaggedEcode.INVALID_QN, why, b, o, hdrLen);
    }
  }
  if (op === RdmapOpcode.READ_REQ) {
    if (h.payloadLen !== 0) {
      throw termErr(
        TermLayer.DDP,
        DdpEtype.UNTAGGED,
        DdpUntaggedEcode.MSG_TOO_LONG,
        `Read Request with ${h.payloadLen} payload bytes`,
        b,
        o,
        hdrLen,
      );
    }
    h.sinkStag = get32(b, o + ReadReqOff.SINK_STAG);
    h.sinkTo = get64(b, o + ReadReqOff.SINK_TO);
    h.readSize = get32(b, o + ReadReqOff.SIZE);
    h.srcStag = get32(b, o + ReadReqOff.SRC_STAG);
    h.srcTo = get64(b, o + ReadReqOff.SRC_TO);
  } else {
    h.sinkStag = 0;
    h.sinkTo = 0;
    h.readSize = 0;
    h.srcStag = 0;
    h.srcTo = 0;
  }
}

/**
 * Decode and validate the FPDU header at `buf[off]` in one go (not incremental; for tests, tools
 * and TERMINATE attachments). Returns `null` if `buf` ends before the header does. `raw` is a
 * copy. Throws `TerminateError` exactly like {@link FpduDecoder} (see {@link checkFpduCtrl} and
 * {@link parseFpduHeader}).
 */
export function decodeFpduHeader(buf: Uint8Array, off = 0): FpduHeader | null {
  const avail = buf.length - off;
  if (avail < FPDU_MIN_HDR_LEN) return null;
  const hdrLen = checkFpduCtrl(buf, off, FPDU_MIN_HDR_LEN);
  if (avail < hdrLen) return null;
  const h = new Header();
  parseFpduHeader(h, buf, off, hdrLen);
  h.raw = copyOf(buf, off, off + hdrLen);
  return h;
}

// ---- builders ----------------------------------------------------------------------------------

/** Header fields for {@link encodeFpdu}; fields that do not apply to the opcode are ignored. */
export interface FpduFields {
  /** RDMAP opcode 0..7. */
  opcode: number;
  /** DDP L flag (default true). */
  last?: boolean;
  /** Tagged: STag (default 0). */
  stag?: number;
  /** Tagged: TO (default 0). */
  to?: number;
  /** Untagged: STag to invalidate, RsvdULP2 (default 0). */
  invStag?: number;
  /** Untagged: QN (default: the opcode's queue). */
  qn?: number;
  /** Untagged: MSN (default 1). */
  msn?: number;
  /** Untagged: MO (default 0). */
  mo?: number;
  /** Read Request fields (default 0). */
  sinkStag?: number;
  sinkTo?: number;
  readSize?: number;
  srcStag?: number;
  srcTo?: number;
}

/**
 * Build one complete FPDU: header, `payload`, pad and trailer (the CRC-32C when `opts.crc`, else
 * zeros). For a Terminate, `payload` is everything after the DDP header (the 4-byte control word
 * and any attachment; prefer {@link encodeTerminate}); a Read Request takes no payload.
 * Allocates: meant for tests and small control messages, not the data path.
 */
export function encodeFpdu(f: FpduFields, payload: Uint8Array = EMPTY, opts: { crc: boolean } = { crc: false }): Buffer {
  const op = f.opcode;
  const info = IWARP_OPCODES[op];
  if (info === undefined) throw new RangeError(`RDMAP opcode ${op}`);
  const last = f.last ?? true;
  let hdrEnd: number;
  let ulpdu: number;
  if (info.tagged) {
    ulpdu = DDP_TAGGED_HDR_LEN + payload.length;
  } else if (op === RdmapOpcode.READ_REQ) {
    if (payload.length !== 0) throw new RangeError('a Read Request carries no payload');
    ulpdu = READ_REQ_HDR_LEN - MPA_LEN_FIELD;
  } else {
    ulpdu = DDP_UNTAGGED_HDR_LEN + payload.length;
  }
  ulpduCheck(ulpdu);
  const out = Buffer.alloc(MPA_LEN_FIELD + ulpdu + fpduPad(ulpdu) + 4);
  if (info.tagged) {
    hdrEnd = writeTaggedHdr(out, 0, op, last, f.stag ?? 0, f.to ?? 0, payload.length);
  } else if (op === RdmapOpcode.READ_REQ) {
    const { sinkStag = 0, sinkTo = 0, readSize = 0, srcStag = 0, srcTo = 0 } = f;
    hdrEnd = writeReadRequest(out, 0, f.msn ?? 1, sinkStag, sinkTo, readSize, srcStag, srcTo);
    if (!last) out[2] = out[2]! & ~DdpCtrl.LAST;
    if (f.qn !== undefined) put32(out, 8, f.qn);
    if (f.mo !== undefined) put32(out, 16, f.mo);
    if (f.invStag !== undefined) put32(out, 4, f.invStag);
  } else {
    hdrEnd = writeUntaggedHdr(out, 0, op, last, f.invStag ?? 0, f.qn ?? info.qn, f.msn ?? 1, f.mo ?? 0, payload.length);
  }
  out.set(payload, hdrEnd);
  const end = MPA_LEN_FIELD + ulpdu;
  writeFpduTrailer(out, end, ulpdu, opts.crc ? crc32cRange(out, 0, end) : null);
  return out;
}

/**
 * CRC-32C of the FPDU at `buf[off]` as it should appear in its trailer: over the length field,
 * the ULPDU and the pad (RFC 5044 §4.5). Reads ULPDU_Length from the buffer.
 */
export function fpduCrc(buf: Uint8Array, off = 0): number {
  const ulpdu = (buf[off]! << 8) | buf[off + 1]!;
  return crc32cRange(buf, off, off + MPA_LEN_FIELD + ulpdu + fpduPad(ulpdu));
}
