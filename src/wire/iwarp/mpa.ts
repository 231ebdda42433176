/**
 * MPA (Marker PDU Aligned framing, RFC 5044; enhanced connection setup, RFC 6581) as Linux siw
 * speaks it (RFC 5044, siw_cm.c): the start frames ("MPA Request" / "MPA Reply") exchanged once per
 * direction at the beginning of the TCP stream, the RFC 6581 IRD/ORD word, the FPDU framing
 * arithmetic (length field, pad, CRC trailer) and the LLP/MPA TERMINATE error codes.
 *
 * Pure: no sockets, no timers. Handshake policy (timeouts, who speaks first, IRD/ORD clamping)
 * belongs to the CM; the two `validate*` functions only apply the per-frame acceptance rules of
 * RFC 5044/6581 as siw applies them (siw_cm.c).
 *
 * @module
 */
import { TerminateError, TermLayer } from '../../errors.js';
import { crc32cRange } from './crc32c.js';
import { copyOf } from '../bytes.js';
import { Errno } from '../../errno.js';

// ---- start frame constants ----------------------------------------------------------------------

/** Key of an MPA Request frame, 16 ASCII bytes, no NUL (RFC 5044 §7.1). */
export const MPA_KEY_REQ = 'MPA ID Req Frame';
/** Key of an MPA Reply frame (RFC 5044 §7.1). */
export const MPA_KEY_REP = 'MPA ID Rep Frame';
/** Length of the key field (RFC 5044 §7.1). */
export const MPA_KEY_LEN = 16;
/** Length of a start frame header: key 16 + flags 1 + rev 1 + PD_Length 2 (RFC 5044 §7.1). */
export const MPA_HDR_LEN = 20;
/**
 * Largest PD_Length we send or accept: Linux `RDMA_MAX_PRIVATE_DATA`, **including** the 4-byte
 * Enhanced IRD/ORD word (RFC 5044 allows 512; siw drops a connection above 256).
 */
export const MPA_MAX_PD = 256;
/** Length of the RFC 6581 IRD/ORD word that starts the private data of an Enhanced frame. */
export const MPA_V2_WORD_LEN = 4;
/** Highest MPA revision understood: 1 = RFC 5044, 2 = RFC 6581 (RFC 5044 §7.1). */
export const MPA_REV_MAX = 2;

/** Start frame flag bits, byte 16 (RFC 5044 §7.1, RFC 6581 §3). */
export const MpaFlag = {
  /** M: markers wanted on the FPDUs the sender of the frame receives. siw refuses it. */
  MARKERS: 0x80,
  /** C: CRC32c in FPDU trailers. */
  CRC: 0x40,
  /** R: reject (reply only). */
  REJECT: 0x20,
  /** Enhanced connection establishment (RFC 6581): IRD/ORD word leads the private data. */
  ENHANCED: 0x10,
  /** siw-private "GSO_EXP" experiment bit, in no RFC; we never send it (siw `iwarp.h`). */
  GSO_EXP: 0x08,
  /** Reserved bits: sent as 0, ignored on receive. */
  RESERVED: 0x07,
} as const;

/** Bits of the RFC 6581 IRD/ORD word, each applied to its own 16-bit BE half (RFC 6581 §3). */
export const MpaV2 = {
  /** IRD half, A: peer-to-peer (RTR) mode. */
  P2P: 0x8000,
  /** IRD half, B: RTR may be a zero-length Send. */
  RTR_SEND: 0x4000,
  /** ORD half, C: RTR may be a zero-length RDMA Write. */
  RTR_WRITE: 0x8000,
  /** ORD half, D: RTR may be a zero-length RDMA Read. */
  RTR_READ: 0x4000,
  /** Either half: the 14-bit IRD / ORD value. */
  IRD_ORD_MASK: 0x3fff,
} as const;

/** LLP TERMINATE error type for MPA (RFC 5044 §8). */
export const LLP_ETYPE_MPA = 0;

/** LLP/MPA TERMINATE error codes (RFC 5044 §8, RFC 6581 §5). */
export const MpaEcode = {
  TCP_LOST: 0x01,
  CRC: 0x02,
  MARKER_LENGTH: 0x03,
  INVALID_REQ_REP: 0x04,
  LOCAL_CATASTROPHIC: 0x05,
  INSUFFICIENT_IRD: 0x06,
  NO_MATCHING_RTR: 0x07,
} as const;

// ---- start frames -------------------------------------------------------------------------------

/**
 * A decoded or to-be-encoded MPA start frame (RFC 5044 §7.1, RFC 6581 §3).
 *
 * The IRD/ORD word is on the wire iff `enhanced && rev === 2` (siw's rule, siw_cm.c); then
 * `ird`, `ord`, `p2p`, `rtrSend`, `rtrWrite` and `rtrRead` describe it and `privateData` holds the
 * user bytes that follow it. For any other frame those six fields are absent and `privateData` is
 * the whole PD. A decoded Rev-2 Enhanced frame whose PD_Length is below 4 has the six fields
 * absent and its short PD in `privateData`; {@link validateMpaRequest} rejects it.
 */
export interface MpaStartFrame {
  /** Request (initiator to responder) or Reply; selects the key. */
  type: 'request' | 'reply';
  /** M flag (0x80). */
  markers: boolean;
  /** C flag (0x40). */
  crc: boolean;
  /** R flag (0x20), meaningful in replies. */
  reject: boolean;
  /** Enhanced flag (0x10). */
  enhanced: boolean;
  /** Revision byte: 0 (pre-RFC drafts), 1 (RFC 5044) or 2 (RFC 6581). */
  rev: number;
  /**
   * siw's GSO_EXP bit (0x08). Decoded frames carry `gso: true` only when the peer set it; the CM
   * echoes it in a reply as siw does (siw_cm.c). Absent means clear.
   */
  gso?: boolean;
  /** IRD of the frame's sender, 0..0x3FFF (enhanced frames). */
  ird?: number;
  /** ORD of the frame's sender, 0..0x3FFF (enhanced frames). */
  ord?: number;
  /** A bit: peer-to-peer mode (enhanced frames). */
  p2p?: boolean;
  /** B bit: zero-length Send RTR (enhanced frames). */
  rtrSend?: boolean;
  /** C bit: zero-length RDMA Write RTR (enhanced frames). */
  rtrWrite?: boolean;
  /** D bit: zero-length RDMA Read RTR (enhanced frames). */
  rtrRead?: boolean;
  /** User private data (after the IRD/ORD word when there is one). */
  privateData: Uint8Array;
}

/** Outcome of {@link decodeMpaStartFrame}: a frame and its byte length, or "need more bytes". */
export type MpaDecodeResult = { frame: MpaStartFrame; length: number } | { needMore: true };

const KEY_REQ_BYTES = asciiBytes(MPA_KEY_REQ);
const KEY_REP_BYTES = asciiBytes(MPA_KEY_REP);

function asciiBytes(s: string): Uint8Array {
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return b;
}

function keyMatches(buf: Uint8Array, key: Uint8Array): boolean {
  for (let i = 0; i < MPA_KEY_LEN; i++) if (buf[i] !== key[i]) return false;
  return true;
}

/**
 * Whether `buf` starts with the key of an MPA Request or Reply: the check of
 * {@link decodeMpaStartFrame} that a caller may need to tell apart from its other refusals
 * (siw answers a bad key, and only that, with TERMINATE 0x04).
 */
export function mpaKeyMatches(buf: Uint8Array, expect: 'request' | 'reply'): boolean {
  return buf.length >= MPA_KEY_LEN && keyMatches(buf, expect === 'request' ? KEY_REQ_BYTES : KEY_REP_BYTES);
}

/** Whether a start frame carries the RFC 6581 IRD/ORD word (siw: Rev 2 and Enhanced). */
export function mpaHasV2Word(f: Pick<MpaStartFrame, 'enhanced' | 'rev'>): boolean {
  return f.enhanced && f.rev === 2;
}

function invalid(message: string): TerminateError {
  return new TerminateError(TermLayer.LLP, LLP_ETYPE_MPA, MpaEcode.INVALID_REQ_REP, message);
}

/**
 * Encode a start frame (RFC 5044 §7.1, RFC 6581 §3). The IRD/ORD word is written iff
 * `enhanced && rev === 2`, from `ird`/`ord`/`p2p`/`rtr*` (absent ones count as 0/false).
 *
 * @throws RangeError if `rev` is not a byte, `ird`/`ord` exceed 0x3FFF, or the PD (with the
 *   IRD/ORD word) exceeds {@link MPA_MAX_PD}. Any other value is encoded as given, so tests can
 *   produce frames a peer must refuse (markers, rev 0, ...).
 */
export function encodeMpaStartFrame(f: MpaStartFrame): Buffer {
  if (!Number.isInteger(f.rev) || f.rev < 0 || f.rev > 0xff) throw new RangeError(`MPA rev ${f.rev}`);
  const v2 = mpaHasV2Word(f);
  const pdLen = f.privateData.length + (v2 ? MPA_V2_WORD_LEN : 0);
  if (pdLen > MPA_MAX_PD) throw new RangeError(`MPA private data ${pdLen} > ${MPA_MAX_PD} bytes`);
  const out = Buffer.alloc(MPA_HDR_LEN + pdLen);
  out.set(f.type === 'request' ? KEY_REQ_BYTES : KEY_REP_BYTES, 0);
  out[16] =
    (f.markers ? MpaFlag.MARKERS : 0) |
    (f.crc ? MpaFlag.CRC : 0) |
    (f.reject ? MpaFlag.REJECT : 0) |
    (f.enhanced ? MpaFlag.ENHANCED : 0) |
    (f.gso === true ? MpaFlag.GSO_EXP : 0);
  out[17] = f.rev;
  out.writeUInt16BE(pdLen, 18);
  let off = MPA_HDR_LEN;
  if (v2) {
    const ird = f.ird ?? 0;
    const ord = f.ord ?? 0;
    if (!Number.isInteger(ird) || ird < 0 || ird > MpaV2.IRD_ORD_MASK) throw new RangeError(`MPA IRD ${ird}`);
    if (!Number.isInteger(ord) || ord < 0 || ord > MpaV2.IRD_ORD_MASK) throw new RangeError(`MPA ORD ${ord}`);
    out.writeUInt16BE(ird | (f.p2p === true ? MpaV2.P2P : 0) | (f.rtrSend === true ? MpaV2.RTR_SEND : 0), off);
    out.writeUInt16BE(
      ord | (f.rtrWrite === true ? MpaV2.RTR_WRITE : 0) | (f.rtrRead === true ? MpaV2.RTR_READ : 0),
      off + 2,
    );
    off += MPA_V2_WORD_LEN;
  }
  out.set(f.privateData, off);
  return out;
}

/**
 * Decode the start frame at the beginning of `buf` (RFC 5044 §7.1).
 *
 * Returns `{ needMore: true }` while the 20-byte header or the private data is incomplete (nothing
 * is validated before the header is complete), else the frame and its total `length`
 * (20 + PD_Length). Bytes beyond `length` are not looked at: the CM decides what data queued behind a
 * start frame means (siw_cm.c `siw_recv_mpa_rr` drops a connection that sends any). `privateData` is a copy.
 *
 * Thrown, as `TerminateError(LLP, MPA, 0x04 invalid request/reply)` — conditions where siw drops
 * the connection without answering a request (siw_cm.c) and where no frame can be trusted:
 * - key is not the key of `expect` (the other key included),
 * - Rev > 2,
 * - PD_Length > {@link MPA_MAX_PD}.
 *
 * Not thrown — the frame is returned and {@link validateMpaRequest} / {@link validateMpaReply}
 * decide (a request may deserve a reply with R set):
 * - M set; Rev 2 + Enhanced with PD_Length < 4; R set; C set.
 */
export function decodeMpaStartFrame(buf: Uint8Array, expect: 'request' | 'reply'): MpaDecodeResult {
  if (buf.length < MPA_HDR_LEN) return { needMore: true };
  if (!keyMatches(buf, expect === 'request' ? KEY_REQ_BYTES : KEY_REP_BYTES)) {
    throw invalid(`MPA ${expect} frame with a bad key`);
  }
  const flags = buf[16]!;
  const rev = buf[17]!;
  const pdLen = (buf[18]! << 8) | buf[19]!;
  if (rev > MPA_REV_MAX) throw invalid(`MPA ${expect} frame revision ${rev} > ${MPA_REV_MAX}`);
  if (pdLen > MPA_MAX_PD) throw invalid(`MPA ${expect} frame PD_Length ${pdLen} > ${MPA_MAX_PD}`);
  const length = MPA_HDR_LEN + pdLen;
  if (buf.length < length) return { needMore: true };
  const frame: MpaStartFrame = {
    type: expect,
    markers: (flags & MpaFlag.MARKERS) !== 0,
    crc: (flags & MpaFlag.CRC) !== 0,
    reject: (flags & MpaFlag.REJECT) !== 0,
    enhanced: (flags & MpaFlag.ENHANCED) !== 0,
    rev,
    privateData: new Uint8Array(0),
  };
  if ((flags & MpaFlag.GSO_EXP) !== 0) frame.gso = true;
  let pd = MPA_HDR_LEN;
  if (mpaHasV2Word(frame) && pdLen >= MPA_V2_WORD_LEN) {
    const hi = (buf[20]! << 8) | buf[21]!;
    const lo = (buf[22]! << 8) | buf[23]!;
    frame.ird = hi & MpaV2.IRD_ORD_MASK;
    frame.ord = lo & MpaV2.IRD_ORD_MASK;
    frame.p2p = (hi & MpaV2.P2P) !== 0;
    frame.rtrSend = (hi & MpaV2.RTR_SEND) !== 0;
    frame.rtrWrite = (lo & MpaV2.RTR_WRITE) !== 0;
    frame.rtrRead = (lo & MpaV2.RTR_READ) !== 0;
    pd += MPA_V2_WORD_LEN;
  }
  frame.privateData = copyOf(buf, pd, length);
  return { frame, length };
}

// ---- acceptance rules ---------------------------------------------------------------------------

/** Verdict of {@link validateMpaRequest}. */
export type MpaRequestVerdict =
  | {
      action: 'accept';
      /** CRC is used on the connection iff the request asked for it (siw echoes C). */
      crc: boolean;
      /** Whether RFC 6581 enhanced establishment (IRD/ORD word) is in use. */
      enhanced: boolean;
      /** When the initiator asked for P2P: the single RTR the reply must select, siw's choice. */
      rtr: 'write' | 'read' | null;
    }
  | {
      /** Answer with a reply that has R set (siw clears M in it), then close (siw_cm.c). */
      action: 'reject';
      reason: string;
    };

/**
 * Responder-side checks on a decoded MPA Request, in siw's order (siw_proc_mpareq),
 * after the "drop silently" checks that {@link decodeMpaStartFrame} throws for:
 * - Rev 2 + Enhanced with PD_Length < 4 -> reject;
 * - M set -> reject (markers are never supported);
 * - C set and `opts.crcStrict` (siw's non-default `mpa_crc_strict`) -> reject.
 * R in a request is ignored, like siw. With P2P requested, `rtr` is siw's pick: Write if offered,
 * else Read if offered, else Write (never Send, siw_cm.c).
 */
export function validateMpaRequest(req: MpaStartFrame, opts: { crcStrict?: boolean } = {}): MpaRequestVerdict {
  const enhanced = mpaHasV2Word(req);
  if (enhanced && req.ird === undefined) {
    return { action: 'reject', reason: 'Enhanced MPA request without the IRD/ORD word (PD_Length < 4)' };
  }
  if (req.markers) return { action: 'reject', reason: 'MPA markers requested (not supported)' };
  if (req.crc && opts.crcStrict === true) return { action: 'reject', reason: 'MPA CRC requested (crcStrict)' };
  let rtr: 'write' | 'read' | null = null;
  if (enhanced && req.p2p === true) rtr = req.rtrWrite === true ? 'write' : req.rtrRead === true ? 'read' : 'write';
  return { action: 'accept', crc: req.crc, enhanced, rtr };
}

/** Verdict of {@link validateMpaReply}. */
export type MpaReplyVerdict =
  | {
      action: 'accept';
      /** CRC is used iff the reply's C bit is set (siw's default rule, siw_cm.c). */
      crc: boolean;
      /** Enhanced: our IRD becomes the reply's ORD (else undefined: keep the local value). */
      ird: number | undefined;
      /** Enhanced: our ORD becomes the reply's IRD. */
      ord: number | undefined;
      /** RTR the initiator must send now (P2P), Write preferred; null when none. */
      rtr: 'write' | 'read' | null;
    }
  | {
      /** The responder rejected (R set); `frame.privateData` is the ULP's reason. ECONNREFUSED. */
      action: 'rejected';
    }
  | {
      /**
       * Protocol failure: close the connection, after sending `terminate` when present
       * (siw sends TERMINATE only for the 0x06 / 0x07 cases).
       */
      action: 'fail';
      reason: string;
      terminate: TerminateError | undefined;
      /**
       * The status Linux siw gives the CM for it (negative errno): -111 (markers asked for) and
       * -104 (not Rev 2 + Enhanced) arrive as REJECTED, -22 (after a TERMINATE) as CONNECT_ERROR.
       */
      status: number;
    };

/**
 * Initiator-side checks on a decoded MPA Reply against the request we sent, in siw's order
 * (siw_proc_mpareply): R -> rejected; M -> fail; request Enhanced but reply not
 * Rev 2 + Enhanced (or missing its IRD/ORD word) -> fail; reply ORD > `opts.maxIrd` (default 128,
 * siw's relaxed negotiation) -> fail with TERMINATE LLP/MPA/0x06; P2P requested with Write/Read RTR
 * and the reply selecting neither -> fail with TERMINATE LLP/MPA/0x07.
 */
export function validateMpaReply(
  rep: MpaStartFrame,
  req: MpaStartFrame,
  opts: { maxIrd?: number } = {},
): MpaReplyVerdict {
  if (rep.reject) return { action: 'rejected' };
  if (rep.markers) return { action: 'fail', reason: 'MPA reply asks for markers', terminate: undefined, status: -Errno.ECONNREFUSED };
  if (!mpaHasV2Word(req)) return { action: 'accept', crc: rep.crc, ird: undefined, ord: undefined, rtr: null };
  if (!mpaHasV2Word(rep) || rep.ird === undefined || rep.ord === undefined) {
    return { action: 'fail', reason: 'MPA reply to an Enhanced request is not Rev 2 + Enhanced', terminate: undefined, status: -Errno.ECONNRESET };
  }
  const maxIrd = opts.maxIrd ?? 128;
  if (rep.ord > maxIrd) {
    return {
      action: 'fail',
      reason: `MPA reply ORD ${rep.ord} exceeds our maximum IRD ${maxIrd}`,
      terminate: new TerminateError(TermLayer.LLP, LLP_ETYPE_MPA, MpaEcode.INSUFFICIENT_IRD, 'insufficient IRD'),
      status: -Errno.EINVAL,
    };
  }
  let rtr: 'write' | 'read' | null = null;
  if (req.p2p === true && (req.rtrWrite === true || req.rtrRead === true)) {
    const write = req.rtrWrite === true && rep.rtrWrite === true;
    const read = req.rtrRead === true && rep.rtrRead === true;
    if (!write && !read) {
      return {
        action: 'fail',
        reason: 'MPA reply selects no RTR type we offered',
        terminate: new TerminateError(TermLayer.LLP, LLP_ETYPE_MPA, MpaEcode.NO_MATCHING_RTR, 'no matching RTR'),
        status: -Errno.EINVAL,
      };
    }
    rtr = write ? 'write' : 'read';
  }
  return { action: 'accept', crc: rep.crc, ird: rep.ord, ord: rep.ird, rtr };
}

// ---- FPDU framing -------------------------------------------------------------------------------

/** Size of the FPDU ULPDU_Length field (RFC 5044 §4.1). */
export const MPA_LEN_FIELD = 2;
/** Size of the FPDU CRC trailer, present even when CRC is off (RFC 5044 §4). */
export const MPA_CRC_LEN = 4;
/** Largest ULPDU: ULPDU_Length is 16 bits (RFC 5044 §4). */
export const MPA_MAX_ULPDU = 0xffff;

/** Zero bytes that pad an FPDU; private, never handed out, so never written. */
const ZERO_PAD = new Uint8Array(4);

/** Pad bytes after the ULPDU so that 2 + ULPDU + pad is a multiple of 4 (RFC 5044 §4.1). */
export function fpduPad(ulpduLen: number): number {
  return -(ulpduLen + MPA_LEN_FIELD) & 3;
}

/** Total FPDU bytes on the wire: 2 + ULPDU + pad + 4 (RFC 5044 §4); always a multiple of 4. */
export function fpduLength(ulpduLen: number): number {
  return (ulpduLen + MPA_LEN_FIELD + 3 + MPA_CRC_LEN) & ~3;
}

/**
 * Payload bytes that fit in a non-last FPDU of `tcpSegLen` bytes (siw_update_tcpseg /
 * siw_prepare_fpdu): the segment is rounded down to a multiple of 8, then the header
 * (`hdrLen`, counted from the FPDU start) and the CRC are taken off. E.g. MSS 1448: 1428 for
 * Write / Read Response (hdrLen 16), 1424 for Send (hdrLen 20). Never more than the ULPDU limit.
 */
export function fpduMaxPayload(tcpSegLen: number, hdrLen: number): number {
  const seg = tcpSegLen & ~7;
  return Math.max(0, Math.min(seg - hdrLen - MPA_CRC_LEN, MPA_MAX_ULPDU + MPA_LEN_FIELD - hdrLen));
}

/**
 * Write the pad (zeros) and the 4-byte trailer of an FPDU whose ULPDU is `ulpduLen` bytes at
 * `buf[off]` (RFC 5044 §4.1, §4.5). `crc` is the running CRC-32C over the length field and the
 * ULPDU (pad excluded: this function folds the zero pad in), or `null` when CRC is off, in which
 * case the trailer is four zero bytes as siw sends it (RFC 5044 §4). Returns the bytes written
 * (pad + 4).
 */
export function writeFpduTrailer(buf: Uint8Array, off: number, ulpduLen: number, crc: number | null): number {
  const pad = fpduPad(ulpduLen);
  for (let i = 0; i < pad; i++) buf[off + i] = 0;
  let v = 0;
  if (crc !== null) {
    v = crc;
    if (pad !== 0) v = crc32cRange(ZERO_PAD, 0, pad, v);
  }
  writeU32LE(buf, off + pad, v);
  return pad + MPA_CRC_LEN;
}

/** Read a CRC trailer value: 4 bytes little-endian (docs/design/iwarp-wire.md). */
export function readCrcLE(buf: Uint8Array, off: number): number {
  return (buf[off]! | (buf[off + 1]! << 8) | (buf[off + 2]! << 16) | (buf[off + 3]! << 24)) >>> 0;
}

function writeU32LE(buf: Uint8Array, off: number, v: number): void {
  buf[off] = v & 0xff;
  buf[off + 1] = (v >>> 8) & 0xff;
  buf[off + 2] = (v >>> 16) & 0xff;
  buf[off + 3] = v >>> 24;
}
