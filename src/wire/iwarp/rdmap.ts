/**
 * RDMAP (RDMA Protocol, RFC 5040) as siw implements it (RFC 5040 §4): control byte, opcodes, the
 * per-opcode table (siw's `iwarp_pktinfo`), the Read Request header and the RDMAP TERMINATE error
 * types/codes. siw implements none of RFC 7306 (opcodes 8..15 are protocol errors).
 *
 * @module
 */
import { DdpCtrl, DdpQn } from './ddp.js';

/** RDMAP version carried in the RV bits (RFC 5040 §4.2). */
export const RDMAP_VERSION = 1;

/** RDMAP control byte masks (RFC 5040 §4.2). */
export const RdmapCtrl = {
  /** RV: RDMAP version, bits 7..6 (1 = 0x40). */
  VERSION: 0xc0,
  /** Reserved, sent as 0 and ignored on receive. */
  RESERVED: 0x30,
  /** Opcode. */
  OPCODE: 0x0f,
} as const;

/** RDMAP opcodes (RFC 5040 §4.2). */
export const RdmapOpcode = {
  WRITE: 0,
  READ_REQ: 1,
  READ_RESP: 2,
  SEND: 3,
  SEND_INV: 4,
  SEND_SE: 5,
  SEND_SE_INV: 6,
  TERMINATE: 7,
} as const;
/** One of the eight RFC 5040 opcodes. */
export type RdmapOpcode = (typeof RdmapOpcode)[keyof typeof RdmapOpcode];

/** Highest opcode siw (and we) accept; above it: TERMINATE RDMAP/remote op/0x06 (siw_qp_rx.c). */
export const RDMAP_OPCODE_MAX = 7;

/** Static facts about one opcode (siw `iwarp_pktinfo`). */
export interface IwarpOpcodeInfo {
  /** The opcode value (index in {@link IWARP_OPCODES}). */
  readonly opcode: RdmapOpcode;
  /** RFC 5040 message name. */
  readonly name: string;
  /**
   * Header bytes counted from the FPDU start, i.e. including the 2-byte MPA ULPDU_Length:
   * Write/Read Response 16, Send* 20, Read Request 48, Terminate 24 (siw_qp.c iwarp_pktinfo).
   */
  readonly hdrLen: number;
  /** Tagged buffer model (Write, Read Response) vs untagged. */
  readonly tagged: boolean;
  /** Untagged queue number ({@link DdpQn}); -1 for tagged opcodes. */
  readonly qn: number;
  /**
   * The two control bytes as one big-endian 16-bit word for a **last** segment (T, L, DV = 1,
   * RV = 1, opcode): Write 0xC140, Read Request 0x4141, ..., Terminate 0x4147 (RFC 5040 §4.2).
   * A non-last segment clears {@link CTRL_LAST_BIT}.
   */
  readonly ctrl: number;
}

/** The L flag inside {@link IwarpOpcodeInfo.ctrl} (0x40 of the DDP control byte, as a word bit). */
export const CTRL_LAST_BIT = DdpCtrl.LAST << 8;

function info(opcode: RdmapOpcode, name: string, hdrLen: number, tagged: boolean, qn: number): IwarpOpcodeInfo {
  const ddp = (tagged ? DdpCtrl.TAGGED : 0) | DdpCtrl.LAST | 1;
  const rdmap = (RDMAP_VERSION << 6) | opcode;
  return Object.freeze({ opcode, name, hdrLen, tagged, qn, ctrl: (ddp << 8) | rdmap });
}

/** Per-opcode table, indexed by opcode 0..7 (siw_qp.c `iwarp_pktinfo`). */
export const IWARP_OPCODES: readonly IwarpOpcodeInfo[] = Object.freeze([
  info(RdmapOpcode.WRITE, 'RDMA Write', 16, true, -1),
  info(RdmapOpcode.READ_REQ, 'RDMA Read Request', 48, false, DdpQn.READ),
  info(RdmapOpcode.READ_RESP, 'RDMA Read Response', 16, true, -1),
  info(RdmapOpcode.SEND, 'Send', 20, false, DdpQn.SEND),
  info(RdmapOpcode.SEND_INV, 'Send with Invalidate', 20, false, DdpQn.SEND),
  info(RdmapOpcode.SEND_SE, 'Send with Solicited Event', 20, false, DdpQn.SEND),
  info(RdmapOpcode.SEND_SE_INV, 'Send with Solicited Event and Invalidate', 20, false, DdpQn.SEND),
  info(RdmapOpcode.TERMINATE, 'Terminate', 24, false, DdpQn.TERM),
]);

/** Header length (from the FPDU start) of a tagged FPDU: Write / Read Response (siw_qp.c iwarp_pktinfo). */
export const TAGGED_HDR_LEN = 16;
/** Header length of Send variants (siw_qp.c iwarp_pktinfo). */
export const SEND_HDR_LEN = 20;
/** Header length of a Read Request (siw_qp.c iwarp_pktinfo; RFC 5040 §4.4). */
export const READ_REQ_HDR_LEN = 48;
/** Header length of a Terminate, through the 4-byte control word (RFC 5040 §4.8). */
export const TERMINATE_HDR_LEN = 24;
/** Size of the RDMAP Read Request header that follows the untagged DDP header (RFC 5040 §4.4). */
export const RDMAP_READ_REQ_LEN = 28;
/** The longest header of any opcode (Read Request). */
export const FPDU_MAX_HDR_LEN = READ_REQ_HDR_LEN;
/** Bytes the receiver needs before it can validate any header (siw `MIN_DDP_HDR`, a tagged header). */
export const FPDU_MIN_HDR_LEN = TAGGED_HDR_LEN;

/** FPDU offsets of the Read Request fields (RFC 5040 §4.4). */
export const ReadReqOff = {
  SINK_STAG: 20,
  SINK_TO: 24,
  SIZE: 32,
  SRC_STAG: 36,
  SRC_TO: 40,
} as const;

/** Whether an opcode is one of the four Send variants (RFC 5040 §4.2). */
export function isSendOpcode(op: number): boolean {
  return op >= RdmapOpcode.SEND && op <= RdmapOpcode.SEND_SE_INV;
}

/** RDMAP TERMINATE error types (RFC 5040 §7.2). */
export const RdmapEtype = {
  CATASTROPHIC: 0,
  REMOTE_PROTECTION: 1,
  REMOTE_OPERATION: 2,
} as const;

/** RDMAP TERMINATE error codes (RFC 5040 §7.2). */
export const RdmapEcode = {
  INVALID_STAG: 0x00,
  BASE_BOUNDS: 0x01,
  ACCESS_RIGHTS: 0x02,
  STAG_NOT_ASSOCIATED: 0x03,
  TO_WRAP: 0x04,
  VERSION: 0x05,
  UNEXPECTED_OPCODE: 0x06,
  CATASTROPHIC_STREAM: 0x07,
  CATASTROPHIC_GLOBAL: 0x08,
  CANNOT_INVALIDATE: 0x09,
  UNSPECIFIED: 0xff,
} as const;
