/**
 * The RoCEv2 Invariant CRC (IBTA vol. 1 annex A17.8; Linux `rxe_icrc.c`) and the IPv4 / IPv6
 * headers it covers.
 *
 * The ICRC is CRC-32 as zlib computes it (IEEE 802.3 polynomial, reflected 0xEDB88320, initial
 * register 0xFFFFFFFF, final XOR 0xFFFFFFFF) over:
 *
 * 1. 8 bytes of 0xFF standing in for the masked InfiniBand LRH (rxe starts its register at
 *    0xDEBB20E3, the state after those 8 bytes);
 * 2. the IP header with the variant fields set to all ones: IPv4 ToS, TTL and header checksum;
 *    IPv6 traffic class, flow label and hop limit. Everything else (IPv4 total length, ID,
 *    flags/fragment offset, protocol, addresses; IPv6 payload length, next header, addresses) is
 *    covered as sent;
 * 3. the UDP header with the checksum set to 0xFFFF (ports and length as sent);
 * 4. the BTH with byte 4 (FECN, BECN, 6 reserved bits) set to 0xFF;
 * 5. the extension headers, payload and pad bytes as sent.
 *
 * The 32-bit result is the last 4 bytes of the UDP payload, **little-endian** (rxe stores the
 * native u32 on x86; every other multi-byte field of RoCE is big-endian). rxe assumes a 20-byte
 * IPv4 header without options.
 *
 * A userspace UDP socket never sees the IP header, so a receiver must supply it from what it
 * knows: addresses and ports (from the socket), lengths (from the datagram size), protocol 17,
 * and assumptions for the rest. The only covered IPv4 field it cannot know is the **ID**: rxe
 * picks it with `__ip_select_ident()` (a hashed per-destination counter, non-zero), see
 * docs/design/roce.md. {@link icrcSolveIpv4Id} recovers it from the ICRC itself: the CRC is
 * linear, so the one 16-bit ID that makes the ICRC match (if any) can be computed directly at the
 * cost of one CRC pass; a packet with a corrupted ICRC or body is still caught with probability
 * 1 - 2^-16.
 *
 * Sending has the mirror problem: the kernel, not the application, picks the IPv4 ID of a UDP
 * datagram (`ip_select_ident_segs()` in include/net/ip.h). It is 0 only for a DF datagram from an
 * unconnected socket whose `IP_MTU_DISCOVER` is `IP_PMTUDISC_DO` or `IP_PMTUDISC_PROBE`; with the
 * default `IP_PMTUDISC_WANT` the socket's packets are marked "may be fragmented locally" and get a
 * hashed counter value, and a connected socket counts from a random start. An IPv4 sender must
 * therefore set `IP_PMTUDISC_PROBE` (or `DO`) and compute its ICRCs with ID 0 (the default here),
 * or rxe drops every packet with a bad ICRC. IPv6 has no ID field.
 *
 * CRC backends: `zlib.crc32` from `node:zlib` (Node >= 20.15; no I/O) when it exists and passes a
 * self-test, for inputs of {@link CRC32_NATIVE_MIN} bytes or more; otherwise a table-driven
 * TypeScript implementation with the same chaining convention. A faster one that works on a range
 * of a buffer (the soft RoCE device installs the netopt addon's carry-less multiplication CRC,
 * three to twenty times zlib's speed by the CPU and the input's length) can be put in front of
 * both with {@link useCrc32Backend}, for inputs of {@link CRC32_FAST_MIN} bytes or more; this
 * module loads no addon itself.
 *
 * @module
 */
import * as zlib from 'node:zlib';
import { err } from '../../errors.js';
import { crcBitwise, sliceBy8Tables, sliceBy8Update } from '../crc.js';
import { BTH_LEN, ICRC_LEN } from './opcodes.js';

/** The reflected CRC-32 (IEEE 802.3 / zlib) polynomial. */
export const CRC32_POLY = 0xedb88320;
/** RoCEv2 UDP destination port (IANA "roce"). */
export const ROCE_V2_UDP_PORT = 4791;
/** UDP header length. */
export const UDP_HDR_LEN = 8;
/** IPv4 header length without options (the only form rxe sends or accepts for the ICRC). */
export const IPV4_HDR_LEN = 20;
/** IPv6 fixed header length. */
export const IPV6_HDR_LEN = 40;
/** IP protocol number of UDP. */
export { IPPROTO_UDP } from '../../ib-numbers.js';
import { IPPROTO_UDP } from '../../ib-numbers.js';
/** IPv4 flags/fragment-offset word with only Don't Fragment set (what rxe and Linux UDP send). */
export const IPV4_DF = 0x4000;
/** Size of the "GRH area" that precedes the payload in every UD receive buffer. */
export { GRH_AREA_LEN } from '../../ib-numbers.js';
import { GRH_AREA_LEN } from '../../ib-numbers.js';
/** Default TTL / hop limit assumed for a received packet whose IP header was not seen. */
export const DEFAULT_TTL = 64;
/** The CRC register after the 8-byte 0xFF prefix, as rxe seeds it (for reference and tests). */
export const ICRC_SEED = 0xdebb20e3;
/** Inputs shorter than this use the TypeScript tables even when `zlib.crc32` is available. */
export const CRC32_NATIVE_MIN = 256;

// ---- CRC-32 ------------------------------------------------------------------------------------

/** Slice-by-8 tables: `T[k*256 + n]` is the CRC register update for byte n followed by k zeros. */
const T: Int32Array = sliceBy8Tables(CRC32_POLY);

/**
 * Inverse of the top byte of the byte table: `RT[T[i] >>> 24] === i`. For CRC-32 the 256 top
 * bytes are all different, which makes one byte step of the register invertible.
 */
const RT: Uint8Array = (() => {
  const r = new Uint8Array(256);
  const seen = new Uint8Array(256);
  for (let i = 0; i < 256; i++) {
    const top = T[i]! >>> 24;
    if (seen[top]) throw new Error('CRC-32 table top bytes are not a permutation');
    seen[top] = 1;
    r[top] = i;
  }
  return r;
})();

/** Raw register update over `d[start, end)` (no init / final XOR). */
function update(c: number, d: Uint8Array, start: number, end: number): number {
  return sliceBy8Update(T, c, d, start, end);
}

/**
 * CRC-32 of `data` in TypeScript, continuing from `prev` (the final value of an earlier call, 0
 * to start), zlib's convention: `crc32Js(b, crc32Js(a)) === crc32Js(a ++ b)`.
 */
export function crc32Js(data: Uint8Array, prev = 0): number {
  return ~update(~prev, data, 0, data.length) >>> 0;
}

/** Bit-at-a-time CRC-32: the textbook reference the tests check the other backends against. */
export function crc32Bitwise(data: Uint8Array, prev = 0): number {
  return crcBitwise(CRC32_POLY, data, prev);
}

type NativeCrc32 = (data: Uint8Array, value?: number) => number;

/** `zlib.crc32` if this Node has it and it chains as zlib's crc32() does. */
function loadNative(): NativeCrc32 | undefined {
  const fn = (zlib as { crc32?: unknown }).crc32;
  if (typeof fn !== 'function') return undefined;
  const f = fn as NativeCrc32;
  try {
    const digits = new Uint8Array([0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39]);
    if (f(digits) !== 0xcbf43926) return undefined;
    if (f(digits.subarray(4), f(digits.subarray(0, 4))) !== 0xcbf43926) return undefined;
    return f;
  } catch {
    return undefined;
  }
}

const native: NativeCrc32 | undefined = loadNative();

/** `zlib.crc32` when available and verified, else `undefined` (same contract as {@link crc32Js}). */
export const crc32Native: ((data: Uint8Array, prev?: number) => number) | undefined =
  native === undefined ? undefined : (data: Uint8Array, prev = 0): number => native(data, prev);

/**
 * A CRC-32 of `data[start, end)` continuing from `prev`, zlib's convention (the netopt addon's
 * `crc32`).
 */
export type Crc32RangeFn = (data: Uint8Array, start: number, end: number, prev: number) => number;

/** Inputs shorter than this use the TypeScript tables even with a {@link useCrc32Backend} backend. */
export const CRC32_FAST_MIN = 64;

let fast: Crc32RangeFn | undefined;

/**
 * Which implementation {@link crc32} uses for large inputs: `zlib.crc32`, the tables, or a backend
 * installed with {@link useCrc32Backend} (`range`).
 */
export let crc32Backend: 'native' | 'js' | 'range' = native === undefined ? 'js' : 'native';

/**
 * Use `fn` for inputs of {@link CRC32_FAST_MIN} bytes or more, once it has given the table
 * implementation's results on a test set (every length up to 300 bytes at several offsets, chained and
 * not). Returns whether it did; a backend that throws or errs is not used.
 */
export function useCrc32Backend(fn: Crc32RangeFn): boolean {
  try {
    const d = new Uint8Array(320);
    let x = 0x9e3779b9;
    for (let i = 0; i < d.length; i++) {
      x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
      d[i] = x >>> 24;
    }
    for (let n = 0; n <= 300; n++) {
      const at = n % 17;
      const prev = n & 1 ? 0 : Math.imul(n, 0x01000193) >>> 0;
      if (fn(d, at, at + n, prev) !== ~update(~prev, d, at, at + n) >>> 0) return false;
    }
  } catch {
    return false;
  }
  fast = fn;
  crc32Backend = 'range';
  return true;
}

/** CRC-32 of `data` continuing from `prev` (zlib convention); the fastest backend available. */
export function crc32(data: Uint8Array, prev = 0): number {
  if (fast !== undefined && data.length >= CRC32_FAST_MIN) return fast(data, 0, data.length, prev);
  if (native !== undefined && data.length >= CRC32_NATIVE_MIN) return native(data, prev);
  return ~update(~prev, data, 0, data.length) >>> 0;
}

/** CRC-32 of `data[start, end)` continuing from `prev`, without a subarray for short ranges. */
export function crc32Range(data: Uint8Array, start: number, end: number, prev = 0): number {
  if (fast !== undefined && end - start >= CRC32_FAST_MIN) return fast(data, start, end, prev);
  if (native !== undefined && end - start >= CRC32_NATIVE_MIN) return native(data.subarray(start, end), prev);
  return ~update(~prev, data, start, end) >>> 0;
}

// ---- GF(2) arithmetic for the IPv4 ID solver --------------------------------------------------

/** Product of two polynomials modulo the CRC polynomial, reflected representation (bit 31 = x^0). */
function mulModP(a: number, b: number): number {
  let m = 0x80000000;
  let p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    if (m === 0) break;
    b = b & 1 ? (b >>> 1) ^ CRC32_POLY : b >>> 1;
  }
  return p >>> 0;
}

/** Undo one zero-byte register step (`c -> (c >>> 8) ^ T[c & 0xff]`). */
function unstepZero(c: number): number {
  const i = RT[c >>> 24]!;
  return (((c ^ T[i]!) << 8) | i) >>> 0;
}

/** `XINV[j]` = x^(-8 * 2^j) mod P: moves a register difference back by 2^j zero bytes. */
const XINV: Uint32Array = (() => {
  const t = new Uint32Array(17);
  t[0] = unstepZero(0x80000000);
  for (let j = 1; j < t.length; j++) t[j] = mulModP(t[j - 1]!, t[j - 1]!);
  return t;
})();

/** A register difference as it was `n` bytes earlier (n < 2^17). */
function backZeros(diff: number, n: number): number {
  let r = diff >>> 0;
  for (let j = 0; n !== 0; j++, n >>>= 1) if (n & 1) r = mulModP(XINV[j]!, r);
  return r;
}

// ---- IP / UDP description ----------------------------------------------------------------------

/**
 * The IP and UDP headers around one RoCEv2 packet, as far as a userspace endpoint knows them.
 * Lengths are not part of it: they follow from the UDP payload.
 */
export interface RoceIpUdpHeaders {
  /** IP version: 4 or 6. */
  family: 4 | 6;
  /** Source address: 4 bytes (IPv4) or 16 bytes (IPv6). */
  src: Uint8Array;
  /** Destination address: 4 or 16 bytes, as `src`. */
  dst: Uint8Array;
  /** UDP source port (rxe: {@link roceUdpSrcPort} of the sending QP). */
  sport: number;
  /** UDP destination port; default {@link ROCE_V2_UDP_PORT}. */
  dport?: number;
  /** IPv4 ToS or IPv6 traffic class (masked out of the ICRC); default 0. */
  tos?: number;
  /** IPv4 TTL or IPv6 hop limit (masked out of the ICRC); default {@link DEFAULT_TTL}. */
  ttl?: number;
  /** IPv4 identification (covered by the ICRC); default 0. */
  ipId?: number;
  /** IPv4 flags and fragment offset word (covered by the ICRC); default {@link IPV4_DF}. */
  ipFlags?: number;
  /** IPv6 flow label (masked out of the ICRC); default 0. */
  flowLabel?: number;
}

/** Pseudo-header scratch: 8 x 0xFF + IP (masked) + UDP + BTH (masked). Reused; no allocation. */
const scratch = new Uint8Array(8 + IPV6_HDR_LEN + UDP_HDR_LEN + BTH_LEN);
scratch.fill(0xff, 0, 8);

function checkAddr(h: RoceIpUdpHeaders): void {
  const n = h.family === 4 ? 4 : 16;
  if (h.src.length !== n || h.dst.length !== n) {
    throw err('EINVAL', 'RoceIpUdpHeaders', `IPv${h.family} addresses must be ${n} bytes (got ${h.src.length} and ${h.dst.length})`);
  }
}

/**
 * Fill the scratch with the masked pseudo headers for a packet whose BTH is at `b[bth]` and
 * whose UDP payload is `udpPayloadLen` bytes long. Returns the number of scratch bytes used.
 */
function pseudo(h: RoceIpUdpHeaders, udpPayloadLen: number, b: Uint8Array, bth: number): number {
  checkAddr(h);
  const s = scratch;
  const udpLen = UDP_HDR_LEN + udpPayloadLen;
  let o = 8;
  if (h.family === 4) {
    const total = IPV4_HDR_LEN + udpLen;
    const id = h.ipId ?? 0;
    const fl = h.ipFlags ?? IPV4_DF;
    s[o] = 0x45;
    s[o + 1] = 0xff; // ToS masked
    s[o + 2] = total >>> 8;
    s[o + 3] = total;
    s[o + 4] = id >>> 8;
    s[o + 5] = id;
    s[o + 6] = fl >>> 8;
    s[o + 7] = fl;
    s[o + 8] = 0xff; // TTL masked
    s[o + 9] = IPPROTO_UDP;
    s[o + 10] = 0xff; // header checksum masked
    s[o + 11] = 0xff;
    s.set(h.src, o + 12);
    s.set(h.dst, o + 16);
    o += IPV4_HDR_LEN;
  } else {
    s[o] = 0x6f; // version 6, traffic class masked
    s[o + 1] = 0xff; // traffic class low nibble + flow label masked
    s[o + 2] = 0xff;
    s[o + 3] = 0xff;
    s[o + 4] = udpLen >>> 8;
    s[o + 5] = udpLen;
    s[o + 6] = IPPROTO_UDP;
    s[o + 7] = 0xff; // hop limit masked
    s.set(h.src, o + 8);
    s.set(h.dst, o + 24);
    o += IPV6_HDR_LEN;
  }
  const sport = h.sport;
  const dport = h.dport ?? ROCE_V2_UDP_PORT;
  s[o] = sport >>> 8;
  s[o + 1] = sport;
  s[o + 2] = dport >>> 8;
  s[o + 3] = dport;
  s[o + 4] = udpLen >>> 8;
  s[o + 5] = udpLen;
  s[o + 6] = 0xff; // UDP checksum masked
  s[o + 7] = 0xff;
  o += UDP_HDR_LEN;
  for (let i = 0; i < BTH_LEN; i++) s[o + i] = b[bth + i]!;
  s[o + 4] = 0xff; // FECN, BECN, resv6a masked
  return o + BTH_LEN;
}

/**
 * ICRC of a RoCEv2 packet: `b[start, end)` is the UDP payload **without** its ICRC (BTH, extension
 * headers, payload, pad). The UDP length used is `end - start + 4 + 8`. Returns the u32 value that
 * goes on the wire little-endian.
 */
export function icrcCompute(h: RoceIpUdpHeaders, b: Uint8Array, start: number, end: number): number {
  const n = pseudo(h, end - start + ICRC_LEN, b, start);
  const c = update(0xffffffff, scratch, 0, n);
  return crc32Range(b, start + BTH_LEN, end, ~c >>> 0);
}

/** Compute the ICRC of `b[start, end)` and store it little-endian at `end`; returns `end + 4`. */
export function icrcWrite(h: RoceIpUdpHeaders, b: Uint8Array, start: number, end: number): number {
  writeIcrcValue(b, end, icrcCompute(h, b, start, end));
  return end + ICRC_LEN;
}

/** The ICRC value stored little-endian at `b[pos]`. */
export function readIcrcValue(b: Uint8Array, pos: number): number {
  return (b[pos]! | (b[pos + 1]! << 8) | (b[pos + 2]! << 16) | (b[pos + 3]! << 24)) >>> 0;
}

/** Store an ICRC value little-endian at `b[pos]`. */
export function writeIcrcValue(b: Uint8Array, pos: number, icrc: number): void {
  b[pos] = icrc;
  b[pos + 1] = icrc >>> 8;
  b[pos + 2] = icrc >>> 16;
  b[pos + 3] = icrc >>> 24;
}

/**
 * Whether the ICRC at the end of the UDP payload `b[start, end)` (ICRC included) matches the
 * headers described by `h`.
 */
export function icrcVerify(h: RoceIpUdpHeaders, b: Uint8Array, start: number, end: number): boolean {
  if (end - start < BTH_LEN + ICRC_LEN) return false;
  return icrcCompute(h, b, start, end - ICRC_LEN) === readIcrcValue(b, end - ICRC_LEN);
}

/**
 * The IPv4 identification that makes the ICRC of `b[start, end)` (ICRC included) match, or -1 if
 * no 16-bit value does (a corrupted packet, wrong addresses/ports/flags, or not IPv4). `h.ipId` is
 * ignored. Costs one CRC pass plus a few dozen GF(2) multiplications.
 */
export function icrcSolveIpv4Id(h: RoceIpUdpHeaders, b: Uint8Array, start: number, end: number): number {
  if (h.family !== 4 || end - start < BTH_LEN + ICRC_LEN) return -1;
  const body = end - ICRC_LEN;
  const withZero: RoceIpUdpHeaders = h.ipId === 0 || h.ipId === undefined ? h : { ...h, ipId: 0 };
  const diff = (icrcCompute(withZero, b, start, body) ^ readIcrcValue(b, body)) >>> 0;
  if (diff === 0) return 0;
  // The ID occupies pseudo-header bytes 12 and 13 (after the 8-byte prefix); every covered byte
  // after them only carries the difference forward like a zero byte.
  const after = 8 + IPV4_HDR_LEN - 14 + UDP_HDR_LEN + (body - start);
  const s = backZeros(diff, after);
  // s = register difference right after the two ID bytes, which from a zero state is
  // s = (T[b0] >>> 8) ^ T[(T[b0] ^ b1) & 0xff]; invert the second then the first step.
  const i1 = RT[s >>> 24]!;
  const hi24 = (s ^ T[i1]!) >>> 0; // = T[b0] >>> 8
  const b0 = RT[(hi24 >>> 16) & 0xff]!;
  if (T[b0]! >>> 8 !== hi24) return -1;
  const b1 = (i1 ^ T[b0]!) & 0xff;
  return (b0 << 8) | b1;
}

// ---- IP headers for the UD "GRH area" and for tests ------------------------------------------

/** Internet checksum (RFC 1071) of `b[off, off + len)`. */
export function ipChecksum(b: Uint8Array, off: number, len: number): number {
  let sum = 0;
  let i = off;
  const end = off + len;
  for (; i + 1 < end; i += 2) sum += (b[i]! << 8) | b[i + 1]!;
  if (i < end) sum += b[i]! << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

/**
 * Write the 20-byte IPv4 header of a RoCEv2 packet whose UDP payload is `udpPayloadLen` bytes
 * (total length = 20 + 8 + udpPayloadLen), with a correct header checksum. Returns `off + 20`.
 */
export function writeIpv4Header(h: RoceIpUdpHeaders, udpPayloadLen: number, out: Uint8Array, off: number): number {
  checkAddr(h);
  const total = IPV4_HDR_LEN + UDP_HDR_LEN + udpPayloadLen;
  const id = h.ipId ?? 0;
  const fl = h.ipFlags ?? IPV4_DF;
  out[off] = 0x45;
  out[off + 1] = h.tos ?? 0;
  out[off + 2] = total >>> 8;
  out[off + 3] = total;
  out[off + 4] = id >>> 8;
  out[off + 5] = id;
  out[off + 6] = fl >>> 8;
  out[off + 7] = fl;
  out[off + 8] = h.ttl ?? DEFAULT_TTL;
  out[off + 9] = IPPROTO_UDP;
  out[off + 10] = 0;
  out[off + 11] = 0;
  out.set(h.src, off + 12);
  out.set(h.dst, off + 16);
  const ck = ipChecksum(out, off, IPV4_HDR_LEN);
  out[off + 10] = ck >>> 8;
  out[off + 11] = ck;
  return off + IPV4_HDR_LEN;
}

/**
 * Write the 40-byte IPv6 header of a RoCEv2 packet whose UDP payload is `udpPayloadLen` bytes
 * (payload length = 8 + udpPayloadLen). Returns `off + 40`.
 */
export function writeIpv6Header(h: RoceIpUdpHeaders, udpPayloadLen: number, out: Uint8Array, off: number): number {
  checkAddr(h);
  const tc = h.tos ?? 0;
  const fl = h.flowLabel ?? 0;
  const plen = UDP_HDR_LEN + udpPayloadLen;
  out[off] = 0x60 | (tc >>> 4);
  out[off + 1] = ((tc & 0x0f) << 4) | ((fl >>> 16) & 0x0f);
  out[off + 2] = fl >>> 8;
  out[off + 3] = fl;
  out[off + 4] = plen >>> 8;
  out[off + 5] = plen;
  out[off + 6] = IPPROTO_UDP;
  out[off + 7] = h.ttl ?? DEFAULT_TTL;
  out.set(h.src, off + 8);
  out.set(h.dst, off + 24);
  return off + IPV6_HDR_LEN;
}

/** Write the 8-byte UDP header (checksum 0, as rxe sends it). Returns `off + 8`. */
export function writeUdpHeader(h: RoceIpUdpHeaders, udpPayloadLen: number, out: Uint8Array, off: number): number {
  const dport = h.dport ?? ROCE_V2_UDP_PORT;
  const len = UDP_HDR_LEN + udpPayloadLen;
  out[off] = h.sport >>> 8;
  out[off + 1] = h.sport;
  out[off + 2] = dport >>> 8;
  out[off + 3] = dport;
  out[off + 4] = len >>> 8;
  out[off + 5] = len;
  out[off + 6] = 0;
  out[off + 7] = 0;
  return off + UDP_HDR_LEN;
}

/**
 * Write the 40-byte "GRH area" rxe places in front of the payload of every UD receive (rxe_resp.c
 * `execute`): IPv4 → 20 zero bytes then the 20-byte IPv4 header; IPv6 → the IPv6 header. Returns
 * `off + 40`.
 */
export function writeGrhArea(h: RoceIpUdpHeaders, udpPayloadLen: number, out: Uint8Array, off: number): number {
  if (h.family === 4) {
    out.fill(0, off, off + GRH_AREA_LEN - IPV4_HDR_LEN);
    return writeIpv4Header(h, udpPayloadLen, out, off + GRH_AREA_LEN - IPV4_HDR_LEN);
  }
  return writeIpv6Header(h, udpPayloadLen, out, off);
}
