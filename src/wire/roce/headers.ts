/**
 * The extension transport headers that follow the BTH (IBTA vol. 1 §9.3; Linux `rxe_hdr.h`), all
 * big-endian. Each accessor takes the buffer and the offset of **that header** (the BTH offset
 * plus `IB_OPCODES[op].offset[Hdr.X]`); reads allocate nothing except the `bigint` variants.
 *
 * | header | bytes | layout |
 * |---|---|---|
 * | RDETH | 4 | reserved(1), EE context(3) |
 * | DETH | 8 | Q_Key(4), reserved(1), source QP(3) |
 * | RETH | 16 | VA(8), R_Key(4), DMA length(4) |
 * | FETH | 4 | reserved(26 bits), selectivity level(2), placement type(4) |
 * | AETH | 4 | syndrome(1), MSN(3) |
 * | AtomicETH | 28 | VA(8), R_Key(4), swap-or-add(8), compare(8) |
 * | AtomicAckETH | 8 | original remote value(8) |
 * | ImmDt | 4 | immediate data, opaque |
 * | IETH | 4 | R_Key to invalidate |
 *
 * 64-bit addresses follow the rest of this package: a JS number, exact below 2^53; a received
 * value at or above 2^53 reads as {@link VA_OVERFLOW} (-1) from the number accessors, and exactly
 * from the `...Big` ones. Atomic operands are `bigint` (every bit matters).
 *
 * @module
 */

/** Value of a received 64-bit address that is not exactly representable as a number (>= 2^53). */
export const VA_OVERFLOW = -1;
/** The Q_Key of the GSI QP1 (IBTA; rxe `GSI_QKEY`); rxe drops GSI packets with any other. */
export const GSI_QKEY = 0x80010000;
/** Q_Keys with this bit set are "controlled"; a UD send with one uses the QP's own Q_Key. */
export const QKEY_CONTROLLED_BIT = 0x80000000;

const TWO_32 = 0x1_0000_0000;
const HI_SAFE_MAX = 0x1f_ffff;

const get32 = (b: Uint8Array, o: number): number =>
  ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0;
const put32 = (b: Uint8Array, o: number, v: number): void => {
  b[o] = v >>> 24;
  b[o + 1] = v >>> 16;
  b[o + 2] = v >>> 8;
  b[o + 3] = v;
};
const get24 = (b: Uint8Array, o: number): number => (b[o]! << 16) | (b[o + 1]! << 8) | b[o + 2]!;

/** Read a big-endian u32. */
export function readU32(b: Uint8Array, o: number): number {
  return get32(b, o);
}
/** Write a big-endian u32. */
export function writeU32(b: Uint8Array, o: number, v: number): void {
  put32(b, o, v);
}
/** Read a big-endian u64 as a number, or {@link VA_OVERFLOW} if it is >= 2^53. */
export function readU64(b: Uint8Array, o: number): number {
  const hi = get32(b, o);
  return hi <= HI_SAFE_MAX ? hi * TWO_32 + get32(b, o + 4) : VA_OVERFLOW;
}
/** Read a big-endian u64 exactly. */
export function readU64Big(b: Uint8Array, o: number): bigint {
  return (BigInt(get32(b, o)) << 32n) | BigInt(get32(b, o + 4));
}
/** Write a big-endian u64 from a number (0 .. 2^53-1) or a bigint (taken mod 2^64). */
export function writeU64(b: Uint8Array, o: number, v: number | bigint): void {
  if (typeof v === 'bigint') {
    const m = BigInt.asUintN(64, v);
    put32(b, o, Number(m >> 32n));
    put32(b, o + 4, Number(m & 0xffffffffn));
  } else {
    put32(b, o, Math.floor(v / TWO_32));
    put32(b, o + 4, v >>> 0);
  }
}

// ---- RDETH ------------------------------------------------------------------------------------

/** RDETH: EE context number (24 bits). */
export function rdethEecn(b: Uint8Array, off: number): number {
  return get24(b, off + 1);
}
/** Write an RDETH (reserved byte zero). */
export function writeRdeth(b: Uint8Array, off: number, eecn: number): void {
  put32(b, off, eecn & 0xffffff);
}

// ---- DETH -------------------------------------------------------------------------------------

/** DETH: Q_Key. */
export function dethQkey(b: Uint8Array, off: number): number {
  return get32(b, off);
}
/** DETH: source QP number (24 bits). */
export function dethSrcQp(b: Uint8Array, off: number): number {
  return get24(b, off + 5);
}
/** Write a DETH (reserved byte zero). */
export function writeDeth(b: Uint8Array, off: number, qkey: number, srcQp: number): void {
  put32(b, off, qkey);
  put32(b, off + 4, srcQp & 0xffffff);
}

// ---- RETH -------------------------------------------------------------------------------------

/** RETH: virtual address as a number ({@link VA_OVERFLOW} if >= 2^53). */
export function rethVa(b: Uint8Array, off: number): number {
  return readU64(b, off);
}
/** RETH: virtual address, exact. */
export function rethVaBig(b: Uint8Array, off: number): bigint {
  return readU64Big(b, off);
}
/** RETH: R_Key. */
export function rethRkey(b: Uint8Array, off: number): number {
  return get32(b, off + 8);
}
/** RETH: DMA length of the whole message. */
export function rethLen(b: Uint8Array, off: number): number {
  return get32(b, off + 12);
}
/** Write a RETH. */
export function writeReth(b: Uint8Array, off: number, va: number | bigint, rkey: number, len: number): void {
  writeU64(b, off, va);
  put32(b, off + 8, rkey);
  put32(b, off + 12, len);
}

// ---- FETH -------------------------------------------------------------------------------------

/** FETH masks (rxe_hdr.h `FETH_PLT_MASK`, `FETH_SEL_MASK`). */
export const FethMask = {
  /** Placement type, bits 3..0 of the last byte. */
  PLT: 0x0f,
  /** Selectivity level, bits 5..4 of the last byte. */
  SEL: 0x30,
} as const;

/** FETH: placement type (4 bits). */
export function fethPlacementType(b: Uint8Array, off: number): number {
  return b[off + 3]! & FethMask.PLT;
}
/** FETH: selectivity level (2 bits). */
export function fethSelectivity(b: Uint8Array, off: number): number {
  return (b[off + 3]! & FethMask.SEL) >>> 4;
}
/** Write a FETH. */
export function writeFeth(b: Uint8Array, off: number, placementType: number, selectivity: number): void {
  put32(b, off, ((selectivity << 4) & FethMask.SEL) | (placementType & FethMask.PLT));
}

// ---- AETH -------------------------------------------------------------------------------------

/** AETH: syndrome byte ({@link AethSyndrome}). */
export function aethSyndrome(b: Uint8Array, off: number): number {
  return b[off]!;
}
/** AETH: message sequence number (24 bits). */
export function aethMsn(b: Uint8Array, off: number): number {
  return get24(b, off + 1);
}
/** Write an AETH. */
export function writeAeth(b: Uint8Array, off: number, syndrome: number, msn: number): void {
  put32(b, off, ((syndrome & 0xff) << 24) | (msn & 0xffffff));
}

// ---- AtomicETH --------------------------------------------------------------------------------

/** AtomicETH: virtual address as a number ({@link VA_OVERFLOW} if >= 2^53). */
export function atmethVa(b: Uint8Array, off: number): number {
  return readU64(b, off);
}
/** AtomicETH: virtual address, exact. */
export function atmethVaBig(b: Uint8Array, off: number): bigint {
  return readU64Big(b, off);
}
/** AtomicETH: R_Key. */
export function atmethRkey(b: Uint8Array, off: number): number {
  return get32(b, off + 8);
}
/** AtomicETH: swap (compare-and-swap) or add (fetch-and-add) operand. */
export function atmethSwapAdd(b: Uint8Array, off: number): bigint {
  return readU64Big(b, off + 12);
}
/** AtomicETH: compare operand (compare-and-swap only). */
export function atmethCompare(b: Uint8Array, off: number): bigint {
  return readU64Big(b, off + 20);
}
/** Write an AtomicETH. */
export function writeAtmeth(
  b: Uint8Array,
  off: number,
  va: number | bigint,
  rkey: number,
  swapAdd: bigint,
  compare: bigint,
): void {
  writeU64(b, off, va);
  put32(b, off + 8, rkey);
  writeU64(b, off + 12, swapAdd);
  writeU64(b, off + 20, compare);
}

// ---- AtomicAckETH -----------------------------------------------------------------------------

/** AtomicAckETH: the original remote value. */
export function atmackOrig(b: Uint8Array, off: number): bigint {
  return readU64Big(b, off);
}
/** Write an AtomicAckETH. */
export function writeAtmack(b: Uint8Array, off: number, orig: bigint): void {
  writeU64(b, off, orig);
}

// ---- ImmDt, IETH ------------------------------------------------------------------------------

/**
 * ImmDt: the immediate value, the unsigned u32 read big-endian from the wire. This is the number
 * the verbs layer reports as `immData` (the wire carries it big-endian).
 */
export function immDt(b: Uint8Array, off: number): number {
  return get32(b, off);
}
/** Write an ImmDt (big-endian). */
export function writeImmDt(b: Uint8Array, off: number, imm: number): void {
  put32(b, off, imm);
}
/** IETH: the R_Key to invalidate. */
export function iethRkey(b: Uint8Array, off: number): number {
  return get32(b, off);
}
/** Write an IETH. */
export function writeIeth(b: Uint8Array, off: number, rkey: number): void {
  put32(b, off, rkey);
}
