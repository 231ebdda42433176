/**
 * The RoCEv2 ICRC of a datagram received on a UDP socket, and the IPv4 identification it implies.
 *
 * The ICRC (IBA annex A17.8, rxe_icrc.c) is CRC-32 (zlib's) over 8 bytes of 0xFF, the IP header
 * with ToS/traffic class, flow label, TTL/hop limit and header checksum set to ones, the UDP header
 * with its checksum set to ones, the BTH with byte 4 set to ones, and the rest of the packet up to
 * the ICRC. A UDP socket hands userspace neither IP header, but every covered IPv6 field and all
 * covered IPv4 fields but two follow from what the socket does report (addresses, ports, length):
 * the IPv4 identification (16 bits) and the DF flag.
 *
 * Both are recovered from the ICRC itself. CRC-32 is affine over GF(2): for messages of one length
 * `crc(M ⊕ Δ) = crc(M) ⊕ lin(Δ)`. With `M0` the header with identification 0 and DF set, the
 * received value `r` must satisfy `lin(id at its place) = r ⊕ crc(M0)`. Moving that syndrome back
 * over the `n` bytes that follow the field (a multiplication by x^(-8n) modulo the CRC polynomial)
 * leaves the register contribution of the two identification bytes alone, which the CRC table
 * inverts byte by byte. Sixteen of the 32 check bits remain a check: a datagram is accepted when
 * some identification makes its ICRC right (a corrupted one slips through with probability 2^-16,
 * 2^-15 counting the DF retry), and the identification found is the one the sender computed the
 * ICRC with — the one on the wire when the sender is rxe or this device in `IP_PMTUDISC_PROBE`
 * mode (sockopt.ts).
 */
import { crc32 as zcrc32 } from 'node:zlib';

/** Reflected CRC-32 polynomial (IEEE 802.3, zlib). */
const POLY = 0xedb88320;

/** Byte table of the reflected CRC-32. */
const T = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** `INV_TOP[b]`: the table index whose entry has `b` as its top byte (a permutation for CRC-32). */
const INV_TOP = (() => {
  const inv = new Uint8Array(256);
  for (let n = 0; n < 256; n++) inv[(T[n] ?? 0) >>> 24] = n;
  return inv;
})();

/** zlib's `crc32(data, prev)` (final value in, final value out). */
export const crc32: (data: Uint8Array, prev?: number) => number =
  typeof zcrc32 === 'function'
    ? (data, prev = 0) => zcrc32(data, prev)
    : (data, prev = 0) => {
        let c = ~prev >>> 0;
        for (let i = 0; i < data.length; i++) c = (c >>> 8) ^ (T[(c ^ (data[i] ?? 0)) & 0xff] ?? 0);
        return ~c >>> 0;
      };

/** `a · b mod P` for polynomials in the reflected representation (bit 31 = x^0). */
function multmodp(a: number, b: number): number {
  let p = 0;
  if (a === 0) return 0;
  let m = 0x80000000;
  for (;;) {
    if ((a & m) !== 0) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ POLY : b >>> 1;
  }
  return p >>> 0;
}

/** x^0 in the reflected representation. */
const ONE = 0x80000000;
/** x^-1 mod P: undo one multiplication by x (bit 31 of x·r is bit 0 of r, as P has x^0). */
const X_INV = (() => {
  const r = ONE;
  const top = r >>> 31;
  return (((((r ^ (top ? POLY : 0)) >>> 0) << 1) | top) >>> 0) >>> 0;
})();

function powmodp(a: number, e: number): number {
  let r = ONE;
  let b = a;
  while (e > 0) {
    if (e & 1) r = multmodp(r, b);
    b = multmodp(b, b);
    e = Math.floor(e / 2);
  }
  return r;
}

/** x^(-8n) mod P by n, cached (a host sees few distinct datagram lengths). */
const backCache = new Map<number, number>();
function backOver(n: number): number {
  let v = backCache.get(n);
  if (v === undefined) {
    v = powmodp(X_INV, 8 * n);
    if (backCache.size > 512) backCache.clear();
    backCache.set(n, v);
  }
  return v;
}

/**
 * The two bytes `[b0, b1]` whose CRC register contribution (from a zero register) is `t`, as the
 * 16-bit value `b0 << 8 | b1`; -1 when no two bytes give `t`.
 */
function invertTwoBytes(t: number): number {
  const i1 = INV_TOP[t >>> 24] ?? 0;
  const u = (t ^ (T[i1] ?? 0)) >>> 0;
  if (u >>> 24 !== 0) return -1;
  const b0 = INV_TOP[(u >>> 16) & 0xff] ?? 0;
  const s1 = T[b0] ?? 0;
  if (s1 >>> 8 !== u) return -1;
  const b1 = i1 ^ (s1 & 0xff);
  return (b0 << 8) | b1;
}

/** Bytes of the pseudo header before the BTH: 8 (masked LRH) + IP header + 8 (UDP). */
const PREFIX = 8;

/** Where a datagram came from and went to, as the ICRC needs it. */
export interface IcrcAddr {
  family: 4 | 6;
  /** Source and destination address, 4 (IPv4) or 16 bytes. */
  src: Uint8Array;
  dst: Uint8Array;
  srcPort: number;
  dstPort: number;
}

const scratch = Buffer.alloc(PREFIX + 40 + 8 + 12);

/**
 * Fill `scratch` with the masked prefix + IP + UDP + BTH of packet `pkt` (length `len`, ICRC
 * included) and return how many bytes it holds.
 */
function fillPseudo(a: IcrcAddr, pkt: Uint8Array, len: number, ipId: number, df: boolean): number {
  const s = scratch;
  s.fill(0xff, 0, PREFIX);
  let o = PREFIX;
  if (a.family === 4) {
    s[o] = 0x45;
    s[o + 1] = 0xff;
    s.writeUInt16BE(20 + 8 + len, o + 2);
    s.writeUInt16BE(ipId & 0xffff, o + 4);
    s.writeUInt16BE(df ? 0x4000 : 0, o + 6);
    s[o + 8] = 0xff;
    s[o + 9] = 17;
    s[o + 10] = 0xff;
    s[o + 11] = 0xff;
    s.set(a.src.subarray(0, 4), o + 12);
    s.set(a.dst.subarray(0, 4), o + 16);
    o += 20;
  } else {
    s[o] = 0x6f;
    s[o + 1] = 0xff;
    s[o + 2] = 0xff;
    s[o + 3] = 0xff;
    s.writeUInt16BE(8 + len, o + 4);
    s[o + 6] = 17;
    s[o + 7] = 0xff;
    s.set(a.src.subarray(0, 16), o + 8);
    s.set(a.dst.subarray(0, 16), o + 24);
    o += 40;
  }
  s.writeUInt16BE(a.srcPort, o);
  s.writeUInt16BE(a.dstPort, o + 2);
  s.writeUInt16BE(8 + len, o + 4);
  s[o + 6] = 0xff;
  s[o + 7] = 0xff;
  o += 8;
  for (let k = 0; k < 12; k++) s[o + k] = pkt[k] ?? 0;
  s[o + 4] = 0xff;
  return o + 12;
}

/**
 * The ICRC of packet `pkt[0, len)` (BTH first, ICRC last, `len >= 16`) as sent with IPv4
 * identification `ipId` and DF (`df`), or over IPv6 (`ipId`/`df` unused).
 */
export function roceIcrc(a: IcrcAddr, pkt: Uint8Array, len: number, ipId = 0, df = true): number {
  const n = fillPseudo(a, pkt, len, ipId, df);
  const c = crc32(scratch.subarray(0, n));
  return crc32(pkt.subarray(12, len - 4), c);
}

/** The ICRC stored in a packet (the last four bytes, little-endian). */
export function storedIcrc(pkt: Uint8Array, len: number): number {
  return ((pkt[len - 4] ?? 0) | ((pkt[len - 3] ?? 0) << 8) | ((pkt[len - 2] ?? 0) << 16) | ((pkt[len - 1] ?? 0) << 24)) >>> 0;
}

/** Write the ICRC of `pkt[0, len)` into its last four bytes (little-endian, as rxe on x86). */
export function writeIcrc(a: IcrcAddr, pkt: Uint8Array, len: number, ipId = 0, df = true): void {
  const c = roceIcrc(a, pkt, len, ipId, df);
  pkt[len - 4] = c & 0xff;
  pkt[len - 3] = (c >>> 8) & 0xff;
  pkt[len - 2] = (c >>> 16) & 0xff;
  pkt[len - 1] = c >>> 24;
}

/** What {@link checkIcrc} found. */
export interface IcrcCheck {
  ok: boolean;
  /** IPv4 only: the identification and DF flag the ICRC was computed with. */
  ipId: number;
  df: boolean;
}

/**
 * Check the ICRC of a received packet. IPv6: exact. IPv4: accepted when an identification exists
 * that makes the ICRC right (DF set tried first, then clear); `out.ipId`/`out.df` tell which.
 */
export function checkIcrc(a: IcrcAddr, pkt: Uint8Array, len: number, out: IcrcCheck): boolean {
  const r = storedIcrc(pkt, len);
  out.ipId = 0;
  out.df = true;
  if (a.family === 6) {
    out.ok = roceIcrc(a, pkt, len) === r;
    return out.ok;
  }
  // Bytes of the covered stream after the identification field: the rest of the IPv4 header
  // (14), the UDP header (8) and the packet without its ICRC.
  const after = 14 + 8 + len - 4;
  const back = backOver(after);
  for (const df of [true, false]) {
    const syn = (r ^ roceIcrc(a, pkt, len, 0, df)) >>> 0;
    const v = syn === 0 ? 0 : invertTwoBytes(multmodp(back, syn));
    if (v >= 0) {
      out.ok = true;
      out.ipId = v;
      out.df = df;
      return true;
    }
  }
  out.ok = false;
  return false;
}
