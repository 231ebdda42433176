/**
 * RoCEv2 packets as UDP payloads (IBTA vol. 1 annex A17; Linux rdma_rxe): build and parse
 * `BTH | extension headers | payload | pad | ICRC`, without sockets.
 *
 * - {@link parseRocePacket} fills a caller-owned {@link RocePacket} (no allocation) and returns
 *   `null` or the {@link RoceDrop} reason, applying the checks rxe applies to every packet before
 *   it looks at QP state (rxe_recv.c `rxe_rcv`, `hdr_check`), plus the ICRC.
 * - {@link writeRoceHeaders} + {@link finishRocePacket} build a packet in a caller's buffer;
 *   {@link encodeRocePacket} / {@link decodeRocePacket} are the allocating forms used by tests,
 *   control traffic and tools, and mirror each other ({@link RocePacketSpec}).
 * - {@link roceUdpSrcPort}: the UDP source port rxe uses for a QP; MTU functions.
 *
 * @module
 */
import { err } from '../../errors.js';
import {
  BthMask,
  BTH_DEF_PKEY,
  BTH_TVER,
  GSI_QPN,
  IB_MULTICAST_QPN,
  SMI_QPN,
  bthAckReq,
  bthBecn,
  bthFecn,
  bthMig,
  bthOpcode,
  bthPad,
  bthPkey,
  bthPsn,
  bthQpn,
  bthSe,
  bthTver,
  pkeyMatch,
  writeBth,
} from './bth.js';
import {
  GSI_QKEY,
  aethMsn,
  aethSyndrome,
  atmackOrig,
  atmethCompare,
  atmethRkey,
  atmethSwapAdd,
  atmethVaBig,
  dethQkey,
  dethSrcQp,
  fethPlacementType,
  fethSelectivity,
  iethRkey,
  immDt,
  rdethEecn,
  rethLen,
  rethRkey,
  rethVaBig,
  writeAeth,
  writeAtmack,
  writeAtmeth,
  writeDeth,
  writeFeth,
  writeIeth,
  writeImmDt,
  writeRdeth,
  writeReth,
} from './headers.js';
import {
  icrcCompute,
  icrcSolveIpv4Id,
  readIcrcValue,
  writeIcrcValue,
  type RoceIpUdpHeaders,
} from './icrc.js';
import { BTH_LEN, Hdr, IB_OPCODES, ICRC_LEN, IbTransport, OpMask, type AethSyndrome, type IbOpcodeInfo } from './opcodes.js';

// ---- drop reasons ----------------------------------------------------------------------------

/**
 * Why a received RoCEv2 packet is dropped. rxe drops all of these silently (a rate-limited kernel
 * log line, named below); only P_Key and Q_Key violations are counted, in the port attributes
 * `bad_pkey_cntr` and `qkey_viol_cntr`. A device should count each reason.
 */
export const RoceDrop = {
  /** Shorter than BTH + ICRC (rxe: `skb->len < RXE_BTH_BYTES`). */
  TOO_SHORT: 'too_short',
  /** TVer is not 0 (rxe: "bad tver"). */
  BAD_TVER: 'bad_tver',
  /** Reserved, manufacturer-specific or RD opcode: no QP here can accept it. */
  BAD_OPCODE: 'bad_opcode',
  /** Shorter than the opcode's headers + pad + ICRC (rxe: `skb->len < header_size(pkt)`). */
  TRUNCATED: 'truncated',
  /** Pad count inconsistent with the length: BTH..pad not a multiple of 4, or pad without payload. */
  BAD_PAD: 'bad_pad',
  /** Destination QP 0 (rxe: "QP 0 not supported"). */
  BAD_QPN: 'bad_qpn',
  /** Opcode class does not fit the destination: GSI QP1 and multicast take UD only (rxe: "bad qp type"). */
  BAD_QP_TYPE: 'bad_qp_type',
  /** P_Key does not match the port's (rxe: "bad pkey", counted in `bad_pkey_cntr`). */
  BAD_PKEY: 'bad_pkey',
  /** GSI packet with a Q_Key other than 0x80010000 (rxe: "bad qkey", counted in `qkey_viol_cntr`). */
  BAD_QKEY: 'bad_qkey',
  /** ICRC mismatch (rxe: "bad ICRC from ..."). */
  ICRC_ERROR: 'icrc_error',
} as const;
/** One of {@link RoceDrop}. */
export type RoceDrop = (typeof RoceDrop)[keyof typeof RoceDrop];

/** Every {@link RoceDrop} value, for counter tables. */
export const ROCE_DROP_REASONS: readonly RoceDrop[] = Object.freeze(Object.values(RoceDrop));

// ---- parsed view ------------------------------------------------------------------------------

/**
 * One parsed packet, a view over the caller's buffer. {@link parseRocePacket} overwrites every
 * field; keep one instance per receive loop. Extension headers are read with the accessors of
 * `headers.ts` at {@link RocePacket.hdrOffset}.
 */
export class RocePacket {
  /** The buffer holding the UDP payload. */
  buf: Uint8Array = new Uint8Array(0);
  /** Offset of the BTH in {@link buf}. */
  start = 0;
  /** Offset just past the ICRC (end of the UDP payload). */
  end = 0;
  /** BTH opcode. */
  opcode = 0;
  /** Table row of {@link opcode}. */
  info: IbOpcodeInfo = IB_OPCODES[0]!;
  /** {@link OpMask} bits of the opcode. */
  mask = 0;
  /** Destination QP number. */
  destQp = 0;
  /** PSN. */
  psn = 0;
  /** P_Key. */
  pkey = 0;
  /** Solicited event. */
  se = false;
  /** AckReq. */
  ackReq = false;
  /** FECN (congestion experienced on the way here). */
  fecn = false;
  /** BECN. */
  becn = false;
  /** MigReq (rxe ignores it; so do we). */
  mig = false;
  /** Pad count. */
  pad = 0;
  /** Offset of the payload in {@link buf}. */
  payloadOff = 0;
  /** Payload length in bytes (excludes pad and ICRC). */
  payloadLen = 0;
  /** The ICRC value carried by the packet. */
  icrc = 0;
  /**
   * IPv4 ID used for the ICRC check: the one given in the options, or the one recovered from the
   * ICRC when none was given; -1 when the ICRC was not checked or for IPv6.
   */
  ipId = -1;

  /** Absolute offset in {@link buf} of an extension header ({@link Hdr}), or -1 if absent. */
  hdrOffset(h: Hdr): number {
    const o = this.info.offset[h]!;
    return o < 0 ? -1 : this.start + o;
  }

  /** The payload as a view (allocates the view object). */
  payload(): Uint8Array {
    return this.buf.subarray(this.payloadOff, this.payloadOff + this.payloadLen);
  }
}

/** Options of {@link parseRocePacket}. */
export interface RoceParseOptions {
  /**
   * IP/UDP headers the packet came with, to check the ICRC; without it the ICRC is not checked.
   * IPv4 without `ipId`: the ID is recovered from the ICRC ({@link icrcSolveIpv4Id}).
   */
  net?: RoceIpUdpHeaders;
  /** The port's P_Key (default 0xFFFF, rxe's only one); `null` skips the P_Key check. */
  pkey?: number | null;
}

/**
 * Whether an opcode may be delivered to a QP of transport class `qpClass` ({@link IbTransport}:
 * RC, UC or UD; the GSI QP is UD). rxe checks this with bit tests that let some classes through
 * (e.g. a UC opcode to a UD QP); this is the exact class comparison.
 */
export function opcodeFitsQp(opcode: number, qpClass: number): boolean {
  const info = IB_OPCODES[opcode & 0xff]!;
  return info.valid && (opcode & 0xe0) === qpClass && qpClass !== IbTransport.RD;
}

/**
 * Parse and check the RoCEv2 UDP payload `buf[start, end)` into `out`. Returns `null` when the
 * packet passes every check, else the drop reason (and `out` holds whatever was parsed so far).
 *
 * Checks, in rxe's order: length, TVer, opcode, header length, pad, QPN 0, class for GSI/multicast
 * destinations, P_Key, GSI Q_Key, ICRC. QP existence, state, Q_Keys of other QPs and the RC
 * address check need QP state and belong to the device.
 */
export function parseRocePacket(
  buf: Uint8Array,
  start: number,
  end: number,
  out: RocePacket,
  opts: RoceParseOptions = {},
): RoceDrop | null {
  out.buf = buf;
  out.start = start;
  out.end = end;
  out.ipId = -1;
  const len = end - start;
  if (start < 0 || end > buf.length || len < BTH_LEN + ICRC_LEN) {
    out.opcode = out.mask = out.destQp = out.psn = out.pkey = out.pad = out.payloadLen = out.icrc = 0;
    out.info = IB_OPCODES[0]!;
    out.payloadOff = start;
    out.se = out.ackReq = out.fecn = out.becn = out.mig = false;
    return RoceDrop.TOO_SHORT;
  }
  const op = bthOpcode(buf, start);
  const info = IB_OPCODES[op]!;
  out.opcode = op;
  out.info = info;
  out.mask = info.mask;
  out.destQp = bthQpn(buf, start);
  out.psn = bthPsn(buf, start);
  out.pkey = bthPkey(buf, start);
  out.se = bthSe(buf, start);
  out.mig = bthMig(buf, start);
  out.ackReq = bthAckReq(buf, start);
  out.fecn = bthFecn(buf, start);
  out.becn = bthBecn(buf, start);
  out.pad = bthPad(buf, start);
  out.icrc = readIcrcValue(buf, end - ICRC_LEN);
  out.payloadOff = start + info.length;
  out.payloadLen = 0;
  if (bthTver(buf, start) !== BTH_TVER) return RoceDrop.BAD_TVER;
  const cls = op & 0xe0;
  if (!info.valid || cls === IbTransport.RD) return RoceDrop.BAD_OPCODE;
  if (len < info.length + ICRC_LEN) return RoceDrop.TRUNCATED;
  const body = len - info.length - ICRC_LEN; // payload + pad
  if ((body & 3) !== 0) return RoceDrop.BAD_PAD;
  if (info.mask & OpMask.PAYLOAD) {
    if (out.pad > body) return RoceDrop.BAD_PAD;
  } else if (body !== 0 || out.pad !== 0) {
    return RoceDrop.BAD_PAD;
  }
  out.payloadLen = body - out.pad;
  if (out.destQp === SMI_QPN) return RoceDrop.BAD_QPN;
  const ud = cls === IbTransport.UD;
  if ((out.destQp === GSI_QPN || out.destQp === IB_MULTICAST_QPN) && !ud) return RoceDrop.BAD_QP_TYPE;
  const pkey = opts.pkey === undefined ? BTH_DEF_PKEY : opts.pkey;
  if (pkey !== null && !pkeyMatch(out.pkey, pkey)) return RoceDrop.BAD_PKEY;
  if (out.destQp === GSI_QPN && dethQkey(buf, start + info.offset[Hdr.DETH]!) !== GSI_QKEY) return RoceDrop.BAD_QKEY;
  const net = opts.net;
  if (net !== undefined) {
    if (net.family === 4 && net.ipId === undefined) {
      const id = icrcSolveIpv4Id(net, buf, start, end);
      if (id < 0) return RoceDrop.ICRC_ERROR;
      out.ipId = id;
    } else {
      if (icrcCompute(net, buf, start, end - ICRC_LEN) !== out.icrc) return RoceDrop.ICRC_ERROR;
      if (net.family === 4) out.ipId = net.ipId ?? 0;
    }
  }
  return null;
}

// ---- building ---------------------------------------------------------------------------------

/** RDETH fields. */
export interface RdethSpec {
  /** EE context number (24 bits). */
  eecn: number;
}
/** DETH fields. */
export interface DethSpec {
  /** Q_Key (GSI: 0x80010000). */
  qkey: number;
  /** Source QP number (24 bits). */
  srcQp: number;
}
/** FETH fields. */
export interface FethSpec {
  /** Placement type (4 bits). */
  placementType: number;
  /** Selectivity level (2 bits). */
  selectivity: number;
}
/** RETH fields. */
export interface RethSpec {
  /** Remote virtual address (number below 2^53, or bigint). */
  va: number | bigint;
  /** Remote key. */
  rkey: number;
  /** DMA length of the whole message. */
  len: number;
}
/** AtomicETH fields. */
export interface AtmethSpec {
  /** Remote virtual address (8-byte aligned). */
  va: number | bigint;
  /** Remote key. */
  rkey: number;
  /** Swap value (compare-and-swap) or addend (fetch-and-add). */
  swapAdd: bigint;
  /** Compare value (compare-and-swap). */
  compare: bigint;
}
/** AETH fields. */
export interface AethSpec {
  /** Syndrome byte ({@link AethSyndrome}). */
  syndrome: number;
  /** Message sequence number (24 bits). */
  msn: number;
}

/**
 * Everything in a RoCEv2 packet above UDP, as plain values. Extension headers the opcode does not
 * carry are ignored when encoding and absent when decoding; the ones it carries are required.
 */
export interface RocePacketSpec {
  /** BTH opcode ({@link IbOpcode}). */
  opcode: number;
  /** Destination QP number. */
  destQp: number;
  /** PSN (24 bits). */
  psn: number;
  /** Solicited event; default false. */
  se?: boolean;
  /** MigReq; default false (rxe sends 0). */
  mig?: boolean;
  /** P_Key; default 0xFFFF. */
  pkey?: number;
  /** AckReq; default false. */
  ackReq?: boolean;
  /** FECN; default false. */
  fecn?: boolean;
  /** BECN; default false. */
  becn?: boolean;
  /** Transport header version; default 0 (anything else is dropped by rxe). */
  tver?: number;
  /** RDETH (RD opcodes). */
  rdeth?: RdethSpec;
  /** DETH (UD and RD requests). */
  deth?: DethSpec;
  /** FETH (FLUSH). */
  feth?: FethSpec;
  /** RETH (Write FIRST/ONLY, Read Request, FLUSH, ATOMIC WRITE). */
  reth?: RethSpec;
  /** AtomicETH (compare-swap, fetch-add). */
  atmeth?: AtmethSpec;
  /** AETH (ACK, read response FIRST/LAST/ONLY, atomic ACK). */
  aeth?: AethSpec;
  /** AtomicAckETH: the original value. */
  atmack?: bigint;
  /** Immediate data (opcodes WITH_IMMEDIATE), the u32 read big-endian from the wire. */
  immDt?: number;
  /** IETH: R_Key to invalidate (SEND_*_WITH_INVALIDATE). */
  ieth?: number;
  /** Payload bytes (opcodes that carry payload); default empty. */
  payload?: Uint8Array;
}

/** Pad bytes after a payload of `n` bytes: `(-n) & 3`. */
export function rocePad(payloadLen: number): number {
  return -payloadLen & 3;
}

/** UDP payload length of a packet: headers + payload + pad + ICRC. */
export function rocePacketLength(opcode: number, payloadLen: number): number {
  return IB_OPCODES[opcode & 0xff]!.length + payloadLen + rocePad(payloadLen) + ICRC_LEN;
}

function need<T>(v: T | undefined, what: string, info: IbOpcodeInfo): T {
  if (v === undefined) throw err('EINVAL', 'writeRoceHeaders', `${info.name} needs ${what}`);
  return v;
}

/**
 * Write the BTH and extension headers of `spec` at `buf[off]` for a payload of `payloadLen`
 * bytes (the pad count is derived from it). Returns the payload offset. Throws `EINVAL` for an
 * invalid opcode or a missing extension header.
 */
export function writeRoceHeaders(buf: Uint8Array, off: number, spec: RocePacketSpec, payloadLen: number): number {
  const info = IB_OPCODES[spec.opcode & 0xff]!;
  if (!info.valid) throw err('EINVAL', 'writeRoceHeaders', `opcode 0x${spec.opcode.toString(16)} is reserved`);
  if (payloadLen !== 0 && !(info.mask & OpMask.PAYLOAD)) {
    throw err('EINVAL', 'writeRoceHeaders', `${info.name} carries no payload`);
  }
  writeBth(buf, off, {
    opcode: spec.opcode,
    se: spec.se ?? false,
    mig: spec.mig ?? false,
    pad: rocePad(payloadLen),
    tver: spec.tver ?? BTH_TVER,
    pkey: spec.pkey ?? BTH_DEF_PKEY,
    fecn: spec.fecn ?? false,
    becn: spec.becn ?? false,
    destQp: spec.destQp,
    ackReq: spec.ackReq ?? false,
    psn: spec.psn,
  });
  const o = info.offset;
  const m = info.mask;
  if (m & OpMask.RDETH) writeRdeth(buf, off + o[Hdr.RDETH]!, need(spec.rdeth, 'rdeth', info).eecn);
  if (m & OpMask.DETH) {
    const d = need(spec.deth, 'deth', info);
    writeDeth(buf, off + o[Hdr.DETH]!, d.qkey, d.srcQp);
  }
  if (m & OpMask.FETH) {
    const f = need(spec.feth, 'feth', info);
    writeFeth(buf, off + o[Hdr.FETH]!, f.placementType, f.selectivity);
  }
  if (m & OpMask.RETH) {
    const r = need(spec.reth, 'reth', info);
    writeReth(buf, off + o[Hdr.RETH]!, r.va, r.rkey, r.len);
  }
  if (m & OpMask.ATMETH) {
    const a = need(spec.atmeth, 'atmeth', info);
    writeAtmeth(buf, off + o[Hdr.ATMETH]!, a.va, a.rkey, a.swapAdd, a.compare);
  }
  if (m & OpMask.AETH) {
    const a = need(spec.aeth, 'aeth', info);
    writeAeth(buf, off + o[Hdr.AETH]!, a.syndrome, a.msn);
  }
  if (m & OpMask.ATMACK) writeAtmack(buf, off + o[Hdr.ATMACK]!, need(spec.atmack, 'atmack', info));
  if (m & OpMask.IMMDT) writeImmDt(buf, off + o[Hdr.IMMDT]!, need(spec.immDt, 'immDt', info));
  if (m & OpMask.IETH) writeIeth(buf, off + o[Hdr.IETH]!, need(spec.ieth, 'ieth', info));
  if (m & OpMask.CNP_RSVD) buf.fill(0, off + o[Hdr.CNP_RSVD]!, off + info.length);
  return off + info.length;
}

/**
 * Complete a packet whose BTH is at `buf[start]` and whose payload ends at `payloadEnd`: write the
 * zero pad bytes (count taken from the BTH) and the ICRC for `net`. Returns the packet end.
 */
export function finishRocePacket(buf: Uint8Array, start: number, payloadEnd: number, net: RoceIpUdpHeaders): number {
  const pad = (buf[start + 1]! & BthMask.PAD) >>> 4;
  buf.fill(0, payloadEnd, payloadEnd + pad);
  const body = payloadEnd + pad;
  writeIcrcValue(buf, body, icrcCompute(net, buf, start, body));
  return body + ICRC_LEN;
}

/**
 * Complete a packet as {@link finishRocePacket} does but leave its ICRC uncomputed (four zero
 * bytes): for a path that checks no ICRC (a NIC's offload; the soft device's host path,
 * fwd-frame.ts `FwdFlag.ICRC_OFFLOAD`). Returns the packet end.
 */
export function padRocePacket(buf: Uint8Array, start: number, payloadEnd: number): number {
  const pad = (buf[start + 1]! & BthMask.PAD) >>> 4;
  const end = payloadEnd + pad + ICRC_LEN;
  buf.fill(0, payloadEnd, end);
  return end;
}

/** Build a whole UDP payload (allocates). `net` describes the IP/UDP headers the ICRC covers. */
export function encodeRocePacket(spec: RocePacketSpec, net: RoceIpUdpHeaders): Uint8Array {
  const payload = spec.payload ?? new Uint8Array(0);
  const out = new Uint8Array(rocePacketLength(spec.opcode, payload.length));
  const p = writeRoceHeaders(out, 0, spec, payload.length);
  out.set(payload, p);
  finishRocePacket(out, 0, p + payload.length, net);
  return out;
}

/** Result of {@link decodeRocePacket}. */
export type RoceDecoded =
  | {
      /** The packet passed every check. */
      ok: true;
      /** Its fields; `encodeRocePacket(spec, net)` reproduces the bytes. */
      spec: RocePacketSpec;
      /** The ICRC it carried. */
      icrc: number;
      /** IPv4 ID used or recovered for the ICRC check (-1 if unchecked or IPv6). */
      ipId: number;
    }
  | {
      /** The packet was dropped. */
      ok: false;
      /** Why. */
      drop: RoceDrop;
    };

/** Parse and copy out every field (allocates; for tests, tools and control traffic). */
export function decodeRocePacket(buf: Uint8Array, opts: RoceParseOptions = {}): RoceDecoded {
  const p = new RocePacket();
  const drop = parseRocePacket(buf, 0, buf.length, p, opts);
  if (drop !== null) return { ok: false, drop };
  const b = buf;
  const m = p.mask;
  const spec: RocePacketSpec = {
    opcode: p.opcode,
    destQp: p.destQp,
    psn: p.psn,
    se: p.se,
    mig: p.mig,
    pkey: p.pkey,
    ackReq: p.ackReq,
    fecn: p.fecn,
    becn: p.becn,
    tver: bthTver(b, 0),
  };
  if (m & OpMask.RDETH) spec.rdeth = { eecn: rdethEecn(b, p.hdrOffset(Hdr.RDETH)) };
  if (m & OpMask.DETH) {
    const o = p.hdrOffset(Hdr.DETH);
    spec.deth = { qkey: dethQkey(b, o), srcQp: dethSrcQp(b, o) };
  }
  if (m & OpMask.FETH) {
    const o = p.hdrOffset(Hdr.FETH);
    spec.feth = { placementType: fethPlacementType(b, o), selectivity: fethSelectivity(b, o) };
  }
  if (m & OpMask.RETH) {
    const o = p.hdrOffset(Hdr.RETH);
    spec.reth = { va: rethVaBig(b, o), rkey: rethRkey(b, o), len: rethLen(b, o) };
  }
  if (m & OpMask.ATMETH) {
    const o = p.hdrOffset(Hdr.ATMETH);
    spec.atmeth = { va: atmethVaBig(b, o), rkey: atmethRkey(b, o), swapAdd: atmethSwapAdd(b, o), compare: atmethCompare(b, o) };
  }
  if (m & OpMask.AETH) {
    const o = p.hdrOffset(Hdr.AETH);
    spec.aeth = { syndrome: aethSyndrome(b, o), msn: aethMsn(b, o) };
  }
  if (m & OpMask.ATMACK) spec.atmack = atmackOrig(b, p.hdrOffset(Hdr.ATMACK));
  if (m & OpMask.IMMDT) spec.immDt = immDt(b, p.hdrOffset(Hdr.IMMDT));
  if (m & OpMask.IETH) spec.ieth = iethRkey(b, p.hdrOffset(Hdr.IETH));
  if (m & OpMask.PAYLOAD) spec.payload = new Uint8Array(p.payload());
  return { ok: true, spec, icrc: p.icrc, ipId: p.ipId };
}

// ---- UDP source port ----------------------------------------------------------------------------

/** First UDP source port rxe uses (start of the IANA dynamic range). */
export const ROCE_UDP_SPORT_BASE = 0xc000;
/** Linux `GOLDEN_RATIO_32`, the multiplier of `hash_32()` (include/linux/hash.h). */
export const GOLDEN_RATIO_32 = 0x61c88647;

/** Linux `hash_32(val, bits)`: the top `bits` bits of `val * GOLDEN_RATIO_32 mod 2^32`. */
export function hash32(val: number, bits: number): number {
  return Math.imul(val, GOLDEN_RATIO_32) >>> (32 - bits);
}

/**
 * UDP source port rxe gives a new QP (rxe_qp.c `rxe_qp_init_req`):
 * `0xC000 + (hash_32(qpn, 14) & 0x3FFF)`. QPN 1 → 55410. UD and GSI QPs keep it for life;
 * an RC/UC QP moved to RTR with a GRH address vector switches to
 * {@link rdmaGetUdpSport}(flow label, own QPN, remote QPN) (rxe_verbs.c `rxe_modify_qp`, Linux
 * 5.15 and later).
 */
export function roceUdpSrcPort(qpn: number): number {
  return ROCE_UDP_SPORT_BASE + (hash32(qpn & 0xffffff, 14) & 0x3fff);
}

/** Mask of a 20-bit GRH / IPv6 flow label. */
export const FLOW_LABEL_MASK = 0xfffff;

/**
 * Linux `rdma_flow_label_to_udp_sport` (ib_verbs.h): fold the 20-bit flow label into 14 bits and
 * put it in the 0xC000-0xFFFF range.
 */
export function rdmaFlowLabelToUdpSport(flowLabel: number): number {
  const fl = flowLabel & FLOW_LABEL_MASK;
  return ((fl & 0x3fff) ^ (fl >>> 14)) | ROCE_UDP_SPORT_BASE;
}

/** Linux `rdma_calc_flow_label(lqpn, rqpn)`: a flow label from the two QP numbers. */
export function rdmaCalcFlowLabel(lqpn: number, rqpn: number): number {
  let v = BigInt(lqpn >>> 0) * BigInt(rqpn >>> 0);
  v ^= v >> 20n;
  v ^= v >> 40n;
  return Number(v & BigInt(FLOW_LABEL_MASK));
}

/**
 * Linux `rdma_get_udp_sport(fl, lqpn, rqpn)`: the source port of a connected QP from its path's
 * flow label, or from the QP numbers when the flow label is 0.
 */
export function rdmaGetUdpSport(flowLabel: number, lqpn: number, rqpn: number): number {
  const fl = flowLabel & FLOW_LABEL_MASK;
  return rdmaFlowLabelToUdpSport(fl === 0 ? rdmaCalcFlowLabel(lqpn, rqpn) : fl);
}

// ---- MTU ----------------------------------------------------------------------------------------

/** IB MTU enumeration (`enum ib_mtu`; `ibv_mtu`). */
export const IbMtu = {
  MTU_256: 1,
  MTU_512: 2,
  MTU_1024: 3,
  MTU_2048: 4,
  MTU_4096: 5,
} as const;

/** Bytes of an {@link IbMtu} value (1 → 256 ... 5 → 4096); 0 for anything else. */
export function ibMtuToBytes(mtu: number): number {
  return mtu >= IbMtu.MTU_256 && mtu <= IbMtu.MTU_4096 ? 128 << mtu : 0;
}

/** Largest {@link IbMtu} whose size is <= `bytes`; 0 when `bytes` < 256. */
export function ibMtuFromBytes(bytes: number): number {
  for (let m: number = IbMtu.MTU_4096; m >= IbMtu.MTU_256; m--) if (128 << m <= bytes) return m;
  return 0;
}

/** Per-packet overhead rxe subtracts from the netdev MTU for its port MTU (`RXE_MAX_HDR_LENGTH`). */
export const RXE_MAX_HDR_LENGTH = 80;
/** Overhead rdma_cm subtracts for a RoCE path MTU (`iboe_get_mtu`: GRH+UDP+BTH+XRC+AtomicETH+ICRC). */
export const IBOE_MTU_OVERHEAD = 96;

/**
 * rxe's port active MTU for a netdev MTU (rxe.c `rxe_set_mtu`): the largest IB MTU <= netdev MTU
 * - 80, at least 256. 1500 → 1024, 9000 and 65536 → 4096.
 */
export function rxePortMtu(netdevMtu: number): number {
  return ibMtuFromBytes(netdevMtu - RXE_MAX_HDR_LENGTH) || IbMtu.MTU_256;
}

/**
 * rdma_cm's path MTU over RoCE for a netdev MTU (ib_addr.h `iboe_get_mtu`): the largest IB MTU
 * <= netdev MTU - 96, or 0 (invalid) below 256. 1500 → 1024.
 */
export function iboePathMtu(netdevMtu: number): number {
  return ibMtuFromBytes(netdevMtu - IBOE_MTU_OVERHEAD);
}
