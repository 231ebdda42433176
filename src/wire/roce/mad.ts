/**
 * Management Datagrams (IBTA vol. 1 §13.4; Linux `include/rdma/ib_mad.h`): the 24-byte common
 * header every MAD starts with, and the GSI wrapping that carries CM MADs over RoCEv2: a UD
 * SEND_ONLY from QP1 to QP1 with Q_Key 0x80010000, P_Key 0xFFFF, the 256-byte MAD as payload.
 *
 * ```
 *  0  BaseVersion (1)      1  MgmtClass (0x07 CM)   2  ClassVersion (CM: 2)  3  Method (0x03 Send)
 *  4  Status (16)                                   6  ClassSpecific (16)
 *  8  TransactionID (64)
 * 16  AttributeID (16)                             18  reserved (16)
 * 20  AttributeModifier (32)
 * 24  class data (232 bytes)
 * ```
 *
 * @module
 */
import { err } from '../../errors.js';
import { GSI_QPN } from './bth.js';
import { GSI_QKEY, dethSrcQp, readU32, readU64Big, writeU32, writeU64 } from './headers.js';
import { type RoceIpUdpHeaders } from './icrc.js';
import { BTH_LEN, DETH_LEN, Hdr, IbOpcode } from './opcodes.js';
import { RoceDrop, RocePacket, encodeRocePacket, parseRocePacket, roceUdpSrcPort, type RoceParseOptions } from './packet.js';

/** Size of every MAD on the wire (IB_MGMT_MAD_SIZE). */
export const MAD_SIZE = 256;
/** Size of the common MAD header. */
export const MAD_HDR_LEN = 24;
/** Bytes of class data after the header (IB_MGMT_MAD_DATA). */
export const MAD_DATA_LEN = 232;
/** BaseVersion of every IB MAD (IB_MGMT_BASE_VERSION). */
export const MAD_BASE_VERSION = 1;

/** Management classes (ib_mad.h `IB_MGMT_CLASS_*`). */
export const MgmtClass = {
  /** Subnet management, LID routed (SMP; not on RoCE). */
  SUBN_LID_ROUTED: 0x01,
  /** Subnet administration (the SA; not on RoCE). */
  SUBN_ADM: 0x03,
  /** Performance management. */
  PERF_MGMT: 0x04,
  /** Baseboard management. */
  BM: 0x05,
  /** Device management. */
  DEVICE_MGMT: 0x06,
  /** Communication management: the IB CM. */
  CM: 0x07,
  /** SNMP tunnelling. */
  SNMP: 0x08,
  /** Subnet management, directed route. */
  SUBN_DIRECTED_ROUTE: 0x81,
} as const;

/** Methods (ib_mad.h `IB_MGMT_METHOD_*`). Every CM message uses SEND. */
export const MadMethod = {
  GET: 0x01,
  SET: 0x02,
  SEND: 0x03,
  TRAP: 0x05,
  REPORT: 0x06,
  TRAP_REPRESS: 0x07,
  /** Response bit, or-ed into the request method. */
  RESP: 0x80,
  GET_RESP: 0x81,
  REPORT_RESP: 0x86,
} as const;

/** The 24-byte common MAD header. */
export interface MadHeader {
  /** BaseVersion, 1. */
  baseVersion: number;
  /** Management class ({@link MgmtClass}). */
  mgmtClass: number;
  /** Class version (the CM uses 2). */
  classVersion: number;
  /** Method ({@link MadMethod}). */
  method: number;
  /** Status (16 bits; 0 in CM messages). */
  status: number;
  /** Class-specific word (16 bits; 0 in CM messages). */
  classSpecific: number;
  /**
   * Transaction ID. Linux's CM forms it once per connection from its MAD agent's id (upper 32
   * bits) and the active side's local communication ID as it sits in memory (lower 32 bits, so
   * byte-swapped on x86); every message of the connection, both directions, carries it.
   */
  tid: bigint;
  /** Attribute ID (for the CM: the message type, {@link CmAttrId}). */
  attrId: number;
  /** The reserved 16 bits after the attribute ID (0). */
  reserved: number;
  /** Attribute modifier (0; the ECE option of newer kernels may use it). */
  attrMod: number;
}

/** MAD header byte offsets. */
export const MadOff = {
  BASE_VERSION: 0,
  MGMT_CLASS: 1,
  CLASS_VERSION: 2,
  METHOD: 3,
  STATUS: 4,
  CLASS_SPECIFIC: 6,
  TID: 8,
  ATTR_ID: 16,
  RESERVED: 18,
  ATTR_MOD: 20,
} as const;

/** Write a MAD header at `b[off]`; returns `off + 24`. */
export function writeMadHeader(b: Uint8Array, off: number, h: MadHeader): number {
  b[off] = h.baseVersion;
  b[off + 1] = h.mgmtClass;
  b[off + 2] = h.classVersion;
  b[off + 3] = h.method;
  b[off + 4] = h.status >>> 8;
  b[off + 5] = h.status;
  b[off + 6] = h.classSpecific >>> 8;
  b[off + 7] = h.classSpecific;
  writeU64(b, off + MadOff.TID, h.tid);
  b[off + 16] = h.attrId >>> 8;
  b[off + 17] = h.attrId;
  b[off + 18] = h.reserved >>> 8;
  b[off + 19] = h.reserved;
  writeU32(b, off + MadOff.ATTR_MOD, h.attrMod);
  return off + MAD_HDR_LEN;
}

/**
 * Read the MAD header at `b[off]`. Throws `RdmaError` `EBADMSG` if fewer than 24 bytes are there.
 */
export function decodeMadHeader(b: Uint8Array, off = 0): MadHeader {
  if (off < 0 || b.length - off < MAD_HDR_LEN) throw err('EBADMSG', 'decodeMadHeader', `${b.length - off} bytes, need 24`);
  return {
    baseVersion: b[off]!,
    mgmtClass: b[off + 1]!,
    classVersion: b[off + 2]!,
    method: b[off + 3]!,
    status: (b[off + 4]! << 8) | b[off + 5]!,
    classSpecific: (b[off + 6]! << 8) | b[off + 7]!,
    tid: readU64Big(b, off + MadOff.TID),
    attrId: (b[off + 16]! << 8) | b[off + 17]!,
    reserved: (b[off + 18]! << 8) | b[off + 19]!,
    attrMod: readU32(b, off + MadOff.ATTR_MOD),
  };
}

// ---- GSI over RoCEv2 ---------------------------------------------------------------------------

/** Offset of the MAD in a GSI datagram (BTH first): after the BTH (12 bytes) and the DETH (8). */
export const GSI_MAD_OFF = BTH_LEN + DETH_LEN;

/**
 * The attribute ID (for the CM: the message type, `CmAttrId`) of the CM MAD in the GSI datagram
 * `pkt` (BTH first; its opcode and QP are the caller's to check), or -1 when `pkt` holds no whole
 * MAD of the CM class at {@link GSI_MAD_OFF}.
 */
export function gsiCmAttrId(pkt: Uint8Array): number {
  if (pkt.length < GSI_MAD_OFF + MAD_SIZE || pkt[GSI_MAD_OFF + MadOff.MGMT_CLASS] !== MgmtClass.CM) return -1;
  return (pkt[GSI_MAD_OFF + MadOff.ATTR_ID]! << 8) | pkt[GSI_MAD_OFF + MadOff.ATTR_ID + 1]!;
}

/** UDP source port of rxe's GSI QP (QPN 1): {@link roceUdpSrcPort}(1) = 55410. */
export const GSI_UDP_SPORT = roceUdpSrcPort(GSI_QPN);

/** BTH/DETH fields of a GSI datagram that vary per packet. */
export interface GsiSendOptions {
  /** PSN of the GSI QP's send queue (rxe starts at 0 and counts). */
  psn: number;
  /** P_Key; default 0xFFFF. */
  pkey?: number;
  /** AckReq: rxe sets it on the MADs its GSI QP sends (seen in captures); default true. */
  ackReq?: boolean;
}

/**
 * Wrap a 256-byte MAD into a RoCEv2 UDP payload for the peer's GSI QP: UD SEND_ONLY, destination
 * QP 1, DETH Q_Key 0x80010000 and source QP 1. `net` describes the IP/UDP headers (source port
 * usually {@link GSI_UDP_SPORT}, destination 4791).
 */
export function encodeGsiPacket(mad: Uint8Array, net: RoceIpUdpHeaders, opts: GsiSendOptions): Uint8Array {
  if (mad.length !== MAD_SIZE) throw err('EINVAL', 'encodeGsiPacket', `MAD is ${mad.length} bytes, must be ${MAD_SIZE}`);
  return encodeRocePacket(
    {
      opcode: IbOpcode.UD_SEND_ONLY,
      destQp: GSI_QPN,
      psn: opts.psn,
      pkey: opts.pkey ?? 0xffff,
      ackReq: opts.ackReq ?? true,
      deth: { qkey: GSI_QKEY, srcQp: GSI_QPN },
      payload: mad,
    },
    net,
  );
}

/** A received GSI datagram: the MAD and who sent it. */
export interface GsiDatagram {
  /** The 256-byte MAD (a view into the packet buffer). */
  mad: Uint8Array;
  /** DETH source QP (1 for a CM peer). */
  srcQp: number;
  /** BTH PSN. */
  psn: number;
  /** BTH P_Key. */
  pkey: number;
}

/** Why {@link decodeGsiPacket} refused a packet: a {@link RoceDrop}, or a valid packet that is not a MAD for QP1. */
export type GsiDrop = RoceDrop | 'not_gsi' | 'bad_mad_length';

/** Result of {@link decodeGsiPacket}: the datagram, or why the packet is not one. */
export type GsiDecoded =
  | {
      /** A MAD for our GSI QP. */
      ok: true;
      /** The datagram. */
      gsi: GsiDatagram;
    }
  | {
      /** Not a usable GSI datagram. */
      ok: false;
      /** Why: a packet drop reason, not addressed to QP1 as a UD send, or not 256 bytes of MAD. */
      drop: GsiDrop;
    };

/**
 * Parse a RoCEv2 UDP payload expected to be a MAD for our GSI QP: every {@link parseRocePacket}
 * check (GSI Q_Key included), then destination QP 1, a UD SEND_ONLY opcode and a 256-byte payload.
 */
export function decodeGsiPacket(buf: Uint8Array, opts: RoceParseOptions = {}): GsiDecoded {
  const p = new RocePacket();
  const drop = parseRocePacket(buf, 0, buf.length, p, opts);
  if (drop !== null) return { ok: false, drop };
  if (p.destQp !== GSI_QPN || (p.opcode !== IbOpcode.UD_SEND_ONLY && p.opcode !== IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE)) {
    return { ok: false, drop: 'not_gsi' };
  }
  if (p.payloadLen !== MAD_SIZE) return { ok: false, drop: 'bad_mad_length' };
  const srcQp = dethSrcQp(buf, p.hdrOffset(Hdr.DETH));
  return { ok: true, gsi: { mad: p.payload(), srcQp, psn: p.psn, pkey: p.pkey } };
}
