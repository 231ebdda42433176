/**
 * The Base Transport Header (IBTA vol. 1 §9.2; Linux `rxe_hdr.h`), 12 bytes, big-endian:
 *
 * ```
 *  byte 0      OpCode
 *  byte 1      SE (0x80) | M (0x40) | PadCnt (0x30) | TVer (0x0F)
 *  bytes 2-3   P_Key
 *  byte 4      FECN (0x80) | BECN (0x40) | reserved (0x3F)
 *  bytes 5-7   Destination QP
 *  byte 8      AckReq (0x80) | reserved (0x7F)
 *  bytes 9-11  PSN
 * ```
 *
 * Accessors read and write one field of a BTH that starts at `off` inside `b`, in place: no
 * allocation, no DataView. The caller checks that `off + 12 <= b.length`.
 *
 * @module
 */
import { BTH_LEN } from './opcodes.js';

/** Transport header version; rxe drops packets whose TVer is not 0. */
export const BTH_TVER = 0;
/** The default (full member) P_Key, the only one rxe's P_Key table holds and sends. */
export const BTH_DEF_PKEY = 0xffff;
/** Destination QPN of multicast packets (IBTA `IB_MULTICAST_QPN`). */
export const IB_MULTICAST_QPN = 0xffffff;
/** QPN of the General Services Interface QP, which carries CM MADs. */
export const GSI_QPN = 1;
/** QPN 0 (the SMI QP): not available on RoCE; rxe drops packets addressed to it. */
export const SMI_QPN = 0;
/** Mask of a 24-bit QP number. */
export const QPN_MASK = 0xffffff;

/** Byte-1 and byte-4/8 masks of the BTH (rxe_hdr.h `BTH_*_MASK`, per byte). */
export const BthMask = {
  /** Byte 1: solicited event. */
  SE: 0x80,
  /** Byte 1: migration request (rxe sends 0; ignored on receive). */
  MIG: 0x40,
  /** Byte 1: pad count, bits 5..4. */
  PAD: 0x30,
  /** Byte 1: transport header version, bits 3..0. */
  TVER: 0x0f,
  /** Byte 4: forward explicit congestion notification. */
  FECN: 0x80,
  /** Byte 4: backward explicit congestion notification. */
  BECN: 0x40,
  /** Byte 4: reserved bits (the whole byte is masked out of the ICRC). */
  RESV6A: 0x3f,
  /** Byte 8: acknowledge request. */
  ACKREQ: 0x80,
  /** Byte 8: reserved bits. */
  RESV7: 0x7f,
} as const;

/** Byte offsets of BTH fields. */
export const BthOff = {
  OPCODE: 0,
  FLAGS: 1,
  PKEY: 2,
  FECN_BECN: 4,
  DEST_QP: 5,
  ACKREQ: 8,
  PSN: 9,
} as const;

const get24 = (b: Uint8Array, o: number): number => (b[o]! << 16) | (b[o + 1]! << 8) | b[o + 2]!;
const put24 = (b: Uint8Array, o: number, v: number): void => {
  b[o] = v >>> 16;
  b[o + 1] = v >>> 8;
  b[o + 2] = v;
};

/** OpCode byte. */
export function bthOpcode(b: Uint8Array, off: number): number {
  return b[off]!;
}
/** Set the OpCode byte. */
export function setBthOpcode(b: Uint8Array, off: number, opcode: number): void {
  b[off] = opcode;
}
/** Solicited Event bit. */
export function bthSe(b: Uint8Array, off: number): boolean {
  return (b[off + 1]! & BthMask.SE) !== 0;
}
/** Set or clear the Solicited Event bit. */
export function setBthSe(b: Uint8Array, off: number, se: boolean): void {
  b[off + 1] = se ? b[off + 1]! | BthMask.SE : b[off + 1]! & ~BthMask.SE;
}
/** MigReq bit. */
export function bthMig(b: Uint8Array, off: number): boolean {
  return (b[off + 1]! & BthMask.MIG) !== 0;
}
/** Set or clear the MigReq bit. */
export function setBthMig(b: Uint8Array, off: number, mig: boolean): void {
  b[off + 1] = mig ? b[off + 1]! | BthMask.MIG : b[off + 1]! & ~BthMask.MIG;
}
/** Pad count 0..3: bytes of zero padding between payload and ICRC. */
export function bthPad(b: Uint8Array, off: number): number {
  return (b[off + 1]! & BthMask.PAD) >>> 4;
}
/** Set the pad count (0..3). */
export function setBthPad(b: Uint8Array, off: number, pad: number): void {
  b[off + 1] = (b[off + 1]! & ~BthMask.PAD) | ((pad << 4) & BthMask.PAD);
}
/** Transport header version (must be {@link BTH_TVER}). */
export function bthTver(b: Uint8Array, off: number): number {
  return b[off + 1]! & BthMask.TVER;
}
/** Set the transport header version. */
export function setBthTver(b: Uint8Array, off: number, tver: number): void {
  b[off + 1] = (b[off + 1]! & ~BthMask.TVER) | (tver & BthMask.TVER);
}
/** P_Key (16 bits). */
export function bthPkey(b: Uint8Array, off: number): number {
  return (b[off + 2]! << 8) | b[off + 3]!;
}
/** Set the P_Key. */
export function setBthPkey(b: Uint8Array, off: number, pkey: number): void {
  b[off + 2] = pkey >>> 8;
  b[off + 3] = pkey;
}
/** FECN bit. */
export function bthFecn(b: Uint8Array, off: number): boolean {
  return (b[off + 4]! & BthMask.FECN) !== 0;
}
/** Set or clear FECN. */
export function setBthFecn(b: Uint8Array, off: number, fecn: boolean): void {
  b[off + 4] = fecn ? b[off + 4]! | BthMask.FECN : b[off + 4]! & ~BthMask.FECN;
}
/** BECN bit. */
export function bthBecn(b: Uint8Array, off: number): boolean {
  return (b[off + 4]! & BthMask.BECN) !== 0;
}
/** Set or clear BECN. */
export function setBthBecn(b: Uint8Array, off: number, becn: boolean): void {
  b[off + 4] = becn ? b[off + 4]! | BthMask.BECN : b[off + 4]! & ~BthMask.BECN;
}
/** Destination QP number (24 bits). */
export function bthQpn(b: Uint8Array, off: number): number {
  return get24(b, off + BthOff.DEST_QP);
}
/** Set the destination QP number (masked to 24 bits). */
export function setBthQpn(b: Uint8Array, off: number, qpn: number): void {
  put24(b, off + BthOff.DEST_QP, qpn & QPN_MASK);
}
/** AckReq bit. */
export function bthAckReq(b: Uint8Array, off: number): boolean {
  return (b[off + 8]! & BthMask.ACKREQ) !== 0;
}
/** Set or clear AckReq. */
export function setBthAckReq(b: Uint8Array, off: number, ackReq: boolean): void {
  b[off + 8] = ackReq ? b[off + 8]! | BthMask.ACKREQ : b[off + 8]! & ~BthMask.ACKREQ;
}
/** Packet sequence number (24 bits). */
export function bthPsn(b: Uint8Array, off: number): number {
  return get24(b, off + BthOff.PSN);
}
/** Set the PSN (masked to 24 bits). */
export function setBthPsn(b: Uint8Array, off: number, psn: number): void {
  put24(b, off + BthOff.PSN, psn & QPN_MASK);
}

/** All BTH fields as plain values (for building and for tests; the data path uses the accessors). */
export interface Bth {
  /** OpCode ({@link IbOpcode}). */
  opcode: number;
  /** Solicited event. */
  se: boolean;
  /** Migration request. */
  mig: boolean;
  /** Pad count 0..3. */
  pad: number;
  /** Transport header version (0). */
  tver: number;
  /** P_Key. */
  pkey: number;
  /** Forward ECN. */
  fecn: boolean;
  /** Backward ECN. */
  becn: boolean;
  /** Destination QP number. */
  destQp: number;
  /** Acknowledge request. */
  ackReq: boolean;
  /** Packet sequence number. */
  psn: number;
}

/**
 * Write a whole BTH at `off` (rxe `bth_init`): reserved bits zero. Returns `off + 12`.
 */
export function writeBth(b: Uint8Array, off: number, h: Bth): number {
  b[off] = h.opcode;
  b[off + 1] =
    (h.se ? BthMask.SE : 0) | (h.mig ? BthMask.MIG : 0) | ((h.pad << 4) & BthMask.PAD) | (h.tver & BthMask.TVER);
  b[off + 2] = h.pkey >>> 8;
  b[off + 3] = h.pkey;
  b[off + 4] = (h.fecn ? BthMask.FECN : 0) | (h.becn ? BthMask.BECN : 0);
  put24(b, off + BthOff.DEST_QP, h.destQp & QPN_MASK);
  b[off + 8] = h.ackReq ? BthMask.ACKREQ : 0;
  put24(b, off + BthOff.PSN, h.psn & QPN_MASK);
  return off + BTH_LEN;
}

/** Read a whole BTH into a new object (allocates; use the accessors on the data path). */
export function readBth(b: Uint8Array, off: number): Bth {
  return {
    opcode: bthOpcode(b, off),
    se: bthSe(b, off),
    mig: bthMig(b, off),
    pad: bthPad(b, off),
    tver: bthTver(b, off),
    pkey: bthPkey(b, off),
    fecn: bthFecn(b, off),
    becn: bthBecn(b, off),
    destQp: bthQpn(b, off),
    ackReq: bthAckReq(b, off),
    psn: bthPsn(b, off),
  };
}

/**
 * rxe's P_Key match (rxe_recv.c `pkey_match`): the low 15 bits must be equal and at least one of
 * the two keys must be a full member (bit 15 set). 0xFFFF and 0x7FFF both match 0xFFFF.
 */
export function pkeyMatch(a: number, b: number): boolean {
  if ((a & 0x7fff) === 0 || (b & 0x7fff) === 0) return false;
  return (a & 0x7fff) === (b & 0x7fff) && ((a | b) & 0x8000) !== 0;
}
