/**
 * The RDMAP Terminate message (RFC 5040 §4.8): encoder,
 * lenient decoder, and human-readable names for layer / error type / error code.
 *
 * Layout after the untagged DDP header (QN 2, MSN, MO 0, L=1):
 * ```
 * +20  control word: byte0 = Layer << 4 | EType, byte1 = ECode,
 *      byte2 = M 0x80 (DDP segment length valid), D 0x40 (DDP header attached),
 *              R 0x20 (RDMAP header attached); other bits reserved
 * +24  [M or D] DDP segment length (2), the terminated DDP header (14 tagged / 18 untagged)
 *      [R]      the terminated 28-byte RDMA Read Request header
 * ```
 * Linux siw on little-endian hosts emits the control word with nibbles and flag bits swapped
 * (`byte0 = EType << 4 | Layer`, flags M 0x01, D 0x02, R 0x04). We always send the RFC layout and
 * detect siw's layout on receive when that is unambiguous, keeping the raw bytes in any case.
 *
 * @module
 */
import { TermLayer } from '../../errors.js';
import {
  DDP_TAGGED_HDR_LEN,
  DDP_UNTAGGED_HDR_LEN,
  DdpCtrl,
  DdpEtype,
  DdpQn,
  FPDU_OFF_DDP_CTRL,
  FPDU_OFF_MO,
  FPDU_OFF_MSN,
  FPDU_OFF_QN,
  FPDU_OFF_RDMAP_CTRL,
} from './ddp.js';
import { crc32cRange } from './crc32c.js';
import { copyOf } from '../bytes.js';
import { LLP_ETYPE_MPA, MPA_LEN_FIELD, fpduPad, writeFpduTrailer } from './mpa.js';
import { RDMAP_READ_REQ_LEN, RdmapCtrl, RdmapEtype, RdmapOpcode, TERMINATE_HDR_LEN } from './rdmap.js';
import { writeUntaggedHdr } from './fpdu.js';

/** Terminate control flag bits as RFC 5040 places them in byte 2 of the control word. */
export const TermFlag = {
  /** M: the DDP segment length field is valid. */
  M: 0x80,
  /** D: the terminated DDP header is attached. */
  D: 0x40,
  /** R: the terminated RDMAP (Read Request) header is attached. */
  R: 0x20,
} as const;

/** The same flags where siw on x86 puts them (siw_qp.c, C bitfields on a little-endian host). */
export const SiwTermFlag = {
  M: 0x01,
  D: 0x02,
  R: 0x04,
} as const;

/** Length of the Terminate control word (RFC 5040 §4.8). */
export const TERM_CTRL_LEN = 4;

/** What to report in a Terminate; a `TerminateError` fits as is. */
export interface TerminateSpec {
  layer: number;
  etype: number;
  ecode: number;
  /**
   * The offending FPDU header as `FpduHeader.raw` gives it (starting with the MPA length field),
   * or undefined to attach nothing. Its first 2 + 14/18 bytes become the DDP attachment (M and D
   * set; the segment length is that FPDU's ULPDU_Length), and for a Read Request the next 28 bytes
   * the RDMAP attachment (R).
   */
  header?: Uint8Array | undefined;
}

/** Options of {@link encodeTerminate}. */
export interface TerminateEncodeOptions {
  /** Whether MPA CRC is on (else the trailer is zero). */
  crc: boolean;
  /** MSN on the Terminate queue (QN 2); default 1, the only value a connection ever uses. */
  msn?: number;
  /** Attach the Read Request header (R); default: when `header` is a whole Read Request header. */
  attachRdmap?: boolean;
  /** Override the DDP segment length written with the attachment. */
  ddpSegLen?: number;
  /** Emit siw's little-endian bitfield layout instead of RFC 5040's (tests, mimicry). */
  siwLayout?: boolean;
}

/**
 * Build a complete Terminate FPDU (RFC 5040 §4.8): untagged header QN 2 / MSN / MO 0
 * / L=1, control word, optional attachments, pad, trailer. A bare Terminate is 28 bytes; with a
 * tagged, untagged or Read Request attachment 44, 48 or 76 (no pad needed).
 */
export function encodeTerminate(t: TerminateSpec, opts: TerminateEncodeOptions): Buffer {
  const hdr = t.header;
  let ddpLen = 0;
  let rdmapLen = 0;
  if (hdr !== undefined && hdr.length >= MPA_LEN_FIELD + DDP_TAGGED_HDR_LEN) {
    const tagged = (hdr[FPDU_OFF_DDP_CTRL]! & DdpCtrl.TAGGED) !== 0;
    ddpLen = tagged ? DDP_TAGGED_HDR_LEN : DDP_UNTAGGED_HDR_LEN;
    if (hdr.length < MPA_LEN_FIELD + ddpLen) ddpLen = 0;
    const fullRreq =
      ddpLen === DDP_UNTAGGED_HDR_LEN &&
      (hdr[FPDU_OFF_RDMAP_CTRL]! & RdmapCtrl.OPCODE) === RdmapOpcode.READ_REQ &&
      hdr.length >= MPA_LEN_FIELD + DDP_UNTAGGED_HDR_LEN + RDMAP_READ_REQ_LEN;
    if (fullRreq && (opts.attachRdmap ?? true)) rdmapLen = RDMAP_READ_REQ_LEN;
  }
  const attach = ddpLen === 0 ? 0 : MPA_LEN_FIELD + ddpLen + rdmapLen;
  const ulpBytes = TERM_CTRL_LEN + attach;
  const ulpdu = DDP_UNTAGGED_HDR_LEN + ulpBytes;
  const out = Buffer.alloc(MPA_LEN_FIELD + ulpdu + fpduPad(ulpdu) + 4);
  let o = writeUntaggedHdr(out, 0, RdmapOpcode.TERMINATE, true, 0, DdpQn.TERM, opts.msn ?? 1, 0, ulpBytes);
  const m = ddpLen !== 0;
  const r = rdmapLen !== 0;
  if (opts.siwLayout === true) {
    out[o] = ((t.etype & 0xf) << 4) | (t.layer & 0xf);
    out[o + 2] = (m ? SiwTermFlag.M | SiwTermFlag.D : 0) | (r ? SiwTermFlag.R : 0);
  } else {
    out[o] = ((t.layer & 0xf) << 4) | (t.etype & 0xf);
    out[o + 2] = (m ? TermFlag.M | TermFlag.D : 0) | (r ? TermFlag.R : 0);
  }
  out[o + 1] = t.ecode;
  o += TERM_CTRL_LEN;
  if (hdr !== undefined && m) {
    out.set(hdr.subarray(0, attach), o);
    if (opts.ddpSegLen !== undefined) out.writeUInt16BE(opts.ddpSegLen, o);
  }
  const end = MPA_LEN_FIELD + ulpdu;
  writeFpduTrailer(out, end, ulpdu, opts.crc ? crc32cRange(out, 0, end) : null);
  return out;
}

/** A decoded Terminate control word and attachments. */
export interface TerminateInfo {
  /** Layer: 0 RDMAP, 1 DDP, 2 LLP (after layout normalisation). */
  layer: number;
  /** Error type within the layer. */
  etype: number;
  /** Error code. */
  ecode: number;
  /** M: DDP segment length valid. */
  m: boolean;
  /** D: DDP header attached. */
  d: boolean;
  /** R: RDMAP header attached. */
  r: boolean;
  /** The 4 control bytes exactly as received (a copy). */
  raw: Uint8Array;
  /** Our guess that the sender used siw's swapped bitfield layout (docs/design/iwarp-wire.md). */
  siwLayout: boolean;
  /** True when both layouts read as valid and different: RFC 5040's reading was taken. */
  ambiguous: boolean;
  /** Attached DDP segment length, when an attachment is present. */
  ddpSegLen?: number;
  /** Attached DDP header (14 or 18 bytes, DDP control byte first), when present. */
  ddpHeader?: Uint8Array;
  /** Attached RDMA Read Request header (28 bytes), when present. */
  rdmapHeader?: Uint8Array;
}

/** Whether (layer, etype, ecode) is a combination RFC 5040/5041/5044/6581 defines. */
export function isValidTermCode(layer: number, etype: number, ecode: number): boolean {
  switch (layer) {
    case TermLayer.RDMAP:
      if (etype === RdmapEtype.CATASTROPHIC) return ecode === 0x00 || ecode === 0xff;
      if (etype === RdmapEtype.REMOTE_PROTECTION) return ecode <= 0x04 || ecode === 0x09 || ecode === 0xff;
      if (etype === RdmapEtype.REMOTE_OPERATION) return (ecode >= 0x05 && ecode <= 0x09) || ecode === 0xff;
      return false;
    case TermLayer.DDP:
      if (etype === DdpEtype.CATASTROPHIC) return ecode === 0x00;
      if (etype === DdpEtype.TAGGED) return ecode <= 0x04;
      if (etype === DdpEtype.UNTAGGED) return ecode >= 0x01 && ecode <= 0x06;
      return false;
    case TermLayer.LLP:
      return etype === LLP_ETYPE_MPA && ecode >= 0x01 && ecode <= 0x07;
    default:
      return false;
  }
}

/**
 * Decode the Terminate control word at `buf[off]` and any attachment up to `end` (RFC 5040
 * §4.8). Lenient: never throws for odd contents, only needs 4 bytes.
 *
 * Layout detection: the RFC reading (layer = high nibble, flags in 0xE0 of byte 2, 0x1F clear)
 * and siw's reading (layer = low nibble, flags in 0x07, 0xF8 clear) are each checked for a valid
 * (layer, etype, ecode) triple ({@link isValidTermCode}). If exactly one is valid it wins; if both
 * are (and differ) the RFC reading is used and `ambiguous` is set; if neither, the RFC reading is
 * reported. Example: siw's "LLP / MPA / CRC error" `02 02 01 00` decodes as layer 2, etype 0,
 * ecode 2, M, siwLayout.
 *
 * The attachment (segment length + DDP header [+ Read Request header]) is parsed whenever its
 * bytes are present, whatever the flags say; `ddpHeader` length follows its own T bit.
 *
 * @throws RangeError if fewer than 4 bytes are available.
 */
export function decodeTerminate(buf: Uint8Array, off = 0, end: number = buf.length): TerminateInfo {
  if (end - off < TERM_CTRL_LEN) throw new RangeError('Terminate control word truncated');
  const b0 = buf[off]!;
  const ecode = buf[off + 1]!;
  const b2 = buf[off + 2]!;
  const hi = b0 >>> 4;
  const lo = b0 & 0xf;
  const rfcOk = isValidTermCode(hi, lo, ecode) && (b2 & 0x1f) === 0;
  const siwOk = isValidTermCode(lo, hi, ecode) && (b2 & 0xf8) === 0;
  const same = hi === lo && (b2 & 0xff) === 0;
  const siw = siwOk && !rfcOk;
  const info: TerminateInfo = siw
    ? {
        layer: lo,
        etype: hi,
        ecode,
        m: (b2 & SiwTermFlag.M) !== 0,
        d: (b2 & SiwTermFlag.D) !== 0,
        r: (b2 & SiwTermFlag.R) !== 0,
        raw: copyOf(buf, off, off + TERM_CTRL_LEN),
        siwLayout: true,
        ambiguous: false,
      }
    : {
        layer: hi,
        etype: lo,
        ecode,
        m: (b2 & TermFlag.M) !== 0,
        d: (b2 & TermFlag.D) !== 0,
        r: (b2 & TermFlag.R) !== 0,
        raw: copyOf(buf, off, off + TERM_CTRL_LEN),
        siwLayout: false,
        ambiguous: rfcOk && siwOk && !same,
      };
  let o = off + TERM_CTRL_LEN;
  if (end - o >= MPA_LEN_FIELD + DDP_TAGGED_HDR_LEN) {
    const ddpLen = (buf[o + 2]! & DdpCtrl.TAGGED) !== 0 ? DDP_TAGGED_HDR_LEN : DDP_UNTAGGED_HDR_LEN;
    if (end - o >= MPA_LEN_FIELD + ddpLen) {
      info.ddpSegLen = (buf[o]! << 8) | buf[o + 1]!;
      info.ddpHeader = copyOf(buf, o + MPA_LEN_FIELD, o + MPA_LEN_FIELD + ddpLen);
      o += MPA_LEN_FIELD + ddpLen;
      if (end - o >= RDMAP_READ_REQ_LEN) info.rdmapHeader = copyOf(buf, o, o + RDMAP_READ_REQ_LEN);
    }
  }
  return info;
}

/**
 * Decode a whole Terminate FPDU (`fpdu[off]` = its MPA length field): checks the control bytes
 * name a Terminate, reads MSN, and decodes the control word and attachments. Trailer not checked.
 *
 * @throws RangeError if the bytes are not a Terminate FPDU header.
 */
export function decodeTerminateFpdu(fpdu: Uint8Array, off = 0): TerminateInfo & { msn: number; qn: number; mo: number } {
  if (fpdu.length - off < TERMINATE_HDR_LEN) throw new RangeError('Terminate FPDU truncated');
  if ((fpdu[off + FPDU_OFF_RDMAP_CTRL]! & RdmapCtrl.OPCODE) !== RdmapOpcode.TERMINATE || (fpdu[off + FPDU_OFF_DDP_CTRL]! & DdpCtrl.TAGGED) !== 0) {
    throw new RangeError('not a Terminate FPDU');
  }
  const ulpdu = (fpdu[off]! << 8) | fpdu[off + 1]!;
  const end = Math.min(fpdu.length, off + MPA_LEN_FIELD + ulpdu);
  const u32 = (o: number): number =>
    ((fpdu[o]! << 24) | (fpdu[o + 1]! << 16) | (fpdu[o + 2]! << 8) | fpdu[o + 3]!) >>> 0;
  const info = decodeTerminate(fpdu, off + MPA_LEN_FIELD + DDP_UNTAGGED_HDR_LEN, end);
  return Object.assign(info, { qn: u32(off + FPDU_OFF_QN), msn: u32(off + FPDU_OFF_MSN), mo: u32(off + FPDU_OFF_MO) });
}

/**
 * Decode a Terminate as the FPDU decoder delivers it: `raw` is the 24-byte `FpduHeader.raw` of
 * the Terminate FPDU (its control word is the last 4 header bytes) and `attached` the payload
 * bytes collected from `onPayload` (the attachments, possibly empty). Same result as
 * {@link decodeTerminateFpdu} on the whole FPDU.
 *
 * @throws RangeError if `raw` is not a Terminate FPDU header.
 */
export function decodeTerminateMessage(
  raw: Uint8Array,
  attached: Uint8Array = new Uint8Array(0),
): TerminateInfo & { msn: number; qn: number; mo: number } {
  const whole = new Uint8Array(raw.length + attached.length);
  whole.set(raw, 0);
  whole.set(attached, raw.length);
  return decodeTerminateFpdu(whole);
}

// ---- names --------------------------------------------------------------------------------------

const LAYER_NAMES = ['RDMAP', 'DDP', 'LLP'];
const RDMAP_ETYPES = ['local catastrophic', 'remote protection', 'remote operation'];
const DDP_ETYPES = ['catastrophic', 'tagged buffer', 'untagged buffer'];
const RDMAP_ECODES: Record<number, string> = {
  0x00: 'invalid STag',
  0x01: 'base or bounds violation',
  0x02: 'access rights violation',
  0x03: 'STag not associated with RDMAP stream',
  0x04: 'TO wrap',
  0x05: 'invalid RDMAP version',
  0x06: 'unexpected opcode',
  0x07: 'catastrophic error, localized to RDMAP stream',
  0x08: 'catastrophic error, global',
  0x09: 'STag cannot be invalidated',
  0xff: 'unspecified error',
};
const DDP_TAGGED_ECODES = [
  'invalid STag',
  'base or bounds violation',
  'STag not associated with DDP stream',
  'TO wrap',
  'invalid DDP version',
];
const DDP_UNTAGGED_ECODES = [
  '',
  'invalid QN',
  'invalid MSN, no buffer available',
  'invalid MSN, MSN range',
  'invalid MO',
  'DDP message too long for available buffer',
  'invalid DDP version',
];
const MPA_ECODES = [
  '',
  'TCP connection lost',
  'MPA CRC error',
  'MPA marker and ULPDU length mismatch',
  'invalid MPA request or reply frame',
  'local catastrophic error',
  'insufficient IRD',
  'no matching RTR',
];

/**
 * Human-readable text for a TERMINATE triple (RFC 5040 §7.2, RFC 5041 §7.2, RFC 5044 §8,
 * RFC 6581 §5), e.g. `termName(2, 0, 2)` = `'LLP/MPA: MPA CRC error'`. Unknown
 * values are shown in hex rather than rejected.
 */
export function termName(layer: number, etype: number, ecode: number): string {
  const hex = (v: number): string => `0x${v.toString(16).padStart(2, '0')}`;
  const lname = LAYER_NAMES[layer] ?? `layer ${layer}`;
  let ename: string | undefined;
  let cname: string | undefined;
  if (layer === TermLayer.RDMAP) {
    ename = RDMAP_ETYPES[etype];
    cname = RDMAP_ECODES[ecode];
  } else if (layer === TermLayer.DDP) {
    ename = DDP_ETYPES[etype];
    if (etype === DdpEtype.CATASTROPHIC) cname = ecode === 0 ? 'local catastrophic error' : undefined;
    else if (etype === DdpEtype.TAGGED) cname = DDP_TAGGED_ECODES[ecode];
    else if (etype === DdpEtype.UNTAGGED) cname = DDP_UNTAGGED_ECODES[ecode] || undefined;
  } else if (layer === TermLayer.LLP) {
    ename = etype === LLP_ETYPE_MPA ? 'MPA' : undefined;
    cname = etype === LLP_ETYPE_MPA ? MPA_ECODES[ecode] || undefined : undefined;
  }
  return `${lname}/${ename ?? `etype ${etype}`}: ${cname ?? `ecode ${hex(ecode)}`}`;
}
