/**
 * Ethernet II / IPv4 or IPv6 / UDP or TCP headers for a capture file: the frame a datagram or a
 * TCP segment would have been on a wire, built from its real addresses and ports. Pure: each
 * function returns the header bytes that precede `payload[start, end)`, checksums computed over
 * that payload (RFC 1071 Internet checksum; RFC 768 UDP and RFC 9293 TCP pseudo-headers for IPv4,
 * RFC 8200 §8.1 for IPv6), so a reader that checks them finds them right.
 */

/** EtherTypes. */
export const EtherType = Object.freeze({ IPV4: 0x0800, IPV6: 0x86dd });
/** IP protocol numbers. */
export const IpProto = Object.freeze({ TCP: 6, UDP: 17 });
/** TCP header flags (RFC 9293 §3.1). */
export const TcpFlag = Object.freeze({ FIN: 0x01, SYN: 0x02, RST: 0x04, PSH: 0x08, ACK: 0x10 });

/** Ethernet II header: destination and source MAC, EtherType. */
export const ETH_HEADER_LEN = 14;
/** IPv4 header without options (RFC 791). */
export const IPV4_HEADER_LEN = 20;
/** IPv6 fixed header (RFC 8200). */
export const IPV6_HEADER_LEN = 40;
/** UDP header (RFC 768). */
export const UDP_HEADER_LEN = 8;
/** TCP header without options (RFC 9293). */
export const TCP_HEADER_LEN = 20;

/** Largest transport payload one IPv4 frame holds (total length is 16 bits). */
export const IPV4_MAX_PAYLOAD = 0xffff - IPV4_HEADER_LEN;

/** IPv4 flags/fragment field: don't fragment. */
const IPV4_DF = 0x4000;
/** Version 4, header length 5 words. */
const IPV4_VER_IHL = 0x45;
/** Version 6, in the top nibble. */
const IPV6_VERSION_WORD = 0x60000000;
/** TCP data offset 5 words, in the top nibble of byte 12. */
const TCP_DOFF_5 = 0x50;

/** The two ends of a frame. */
export interface FrameEnds {
  /** 4 or 6. */
  family: 4 | 6;
  /** Source and destination MAC addresses (6 bytes each). */
  srcMac: Uint8Array;
  dstMac: Uint8Array;
  /** Source and destination IP addresses (4 or 16 bytes). */
  src: Uint8Array;
  dst: Uint8Array;
  /** Transport ports. */
  sport: number;
  dport: number;
  /** IPv4 TTL / IPv6 hop limit. */
  hopLimit: number;
  /** IPv4 ToS / IPv6 traffic class; default 0. */
  tos?: number;
  /** IPv4 identification; default a counter of this process's frames. */
  ipId?: number;
  /** UDP: write checksum 0 ("not computed", IPv4 only) instead of computing it. */
  zeroUdpChecksum?: boolean;
}

/** The TCP fields of a segment. */
export interface TcpFields {
  seq: number;
  ack: number;
  /** {@link TcpFlag} bits. */
  flags: number;
  window: number;
}

/** RFC 1071 one's-complement sum of `b[start, end)` added to `sum` (not folded). */
export function onesSum(b: Uint8Array, start: number, end: number, sum = 0): number {
  let i = start;
  // Two words a turn; folded every turn past 2^30 so the sum stays a small integer.
  for (; i + 3 < end; i += 4) {
    sum += (((b[i] as number) << 8) | (b[i + 1] as number)) + (((b[i + 2] as number) << 8) | (b[i + 3] as number));
    if (sum > 0x3fffffff) sum = (sum & 0xffff) + (sum >>> 16);
  }
  for (; i + 1 < end; i += 2) sum += ((b[i] as number) << 8) | (b[i + 1] as number);
  if (i < end) sum += (b[i] as number) << 8;
  return sum;
}

/** Fold a one's-complement sum to 16 bits and complement it. */
export function foldChecksum(sum: number): number {
  while (sum > 0xffff) sum = (sum & 0xffff) + Math.floor(sum / 0x10000);
  return ~sum & 0xffff;
}

let ipv4Id = 0;

function writeEth(h: Uint8Array, v: DataView, e: FrameEnds): void {
  h.set(e.dstMac.subarray(0, 6), 0);
  h.set(e.srcMac.subarray(0, 6), 6);
  v.setUint16(12, e.family === 4 ? EtherType.IPV4 : EtherType.IPV6);
}

/** Write the IP header at 14 for `l4Len` bytes of protocol `proto`; returns the pseudo-header sum. */
function writeIp(h: Uint8Array, v: DataView, e: FrameEnds, proto: number, l4Len: number): number {
  const o = ETH_HEADER_LEN;
  if (e.family === 4) {
    h[o] = IPV4_VER_IHL;
    h[o + 1] = (e.tos ?? 0) & 0xff;
    v.setUint16(o + 2, IPV4_HEADER_LEN + l4Len);
    v.setUint16(o + 4, e.ipId !== undefined ? e.ipId & 0xffff : (ipv4Id = (ipv4Id + 1) & 0xffff));
    v.setUint16(o + 6, IPV4_DF);
    h[o + 8] = e.hopLimit & 0xff;
    h[o + 9] = proto;
    v.setUint16(o + 10, 0);
    h.set(e.src.subarray(0, 4), o + 12);
    h.set(e.dst.subarray(0, 4), o + 16);
    v.setUint16(o + 10, foldChecksum(onesSum(h, o, o + IPV4_HEADER_LEN)));
    return onesSum(h, o + 12, o + 20, proto + l4Len);
  }
  v.setUint32(o, (IPV6_VERSION_WORD | (((e.tos ?? 0) & 0xff) << 20)) >>> 0);
  v.setUint16(o + 4, l4Len);
  h[o + 6] = proto;
  h[o + 7] = e.hopLimit & 0xff;
  h.set(e.src.subarray(0, 16), o + 8);
  h.set(e.dst.subarray(0, 16), o + 24);
  return onesSum(h, o + 8, o + 40, proto + l4Len);
}

const ipLen = (family: 4 | 6): number => (family === 4 ? IPV4_HEADER_LEN : IPV6_HEADER_LEN);

/** The Ethernet/IP/UDP headers of a datagram whose UDP payload is `payload[start, end)`. */
export function udpFrameHeaders(e: FrameEnds, payload: Uint8Array, start: number, end: number): Uint8Array {
  const l4 = ETH_HEADER_LEN + ipLen(e.family);
  const h = new Uint8Array(l4 + UDP_HEADER_LEN);
  const v = new DataView(h.buffer);
  const len = UDP_HEADER_LEN + end - start;
  writeEth(h, v, e);
  const pseudo = writeIp(h, v, e, IpProto.UDP, len);
  v.setUint16(l4, e.sport);
  v.setUint16(l4 + 2, e.dport);
  v.setUint16(l4 + 4, len);
  v.setUint16(l4 + 6, 0);
  if (e.zeroUdpChecksum === true && e.family === 4) return h;
  let c = foldChecksum(onesSum(payload, start, end, onesSum(h, l4, l4 + UDP_HEADER_LEN, pseudo)));
  if (c === 0) c = 0xffff; // RFC 768: a computed zero is sent as all ones
  v.setUint16(l4 + 6, c);
  return h;
}

/** The Ethernet/IP/TCP headers (no options) of a segment carrying `payload[start, end)`. */
export function tcpFrameHeaders(e: FrameEnds, t: TcpFields, payload: Uint8Array, start: number, end: number): Uint8Array {
  const l4 = ETH_HEADER_LEN + ipLen(e.family);
  const h = new Uint8Array(l4 + TCP_HEADER_LEN);
  const v = new DataView(h.buffer);
  const len = TCP_HEADER_LEN + end - start;
  writeEth(h, v, e);
  const pseudo = writeIp(h, v, e, IpProto.TCP, len);
  v.setUint16(l4, e.sport);
  v.setUint16(l4 + 2, e.dport);
  v.setUint32(l4 + 4, t.seq >>> 0);
  v.setUint32(l4 + 8, t.ack >>> 0);
  h[l4 + 12] = TCP_DOFF_5;
  h[l4 + 13] = t.flags & 0xff;
  v.setUint16(l4 + 14, t.window & 0xffff);
  v.setUint16(l4 + 16, 0);
  v.setUint16(l4 + 18, 0);
  v.setUint16(l4 + 16, foldChecksum(onesSum(payload, start, end, onesSum(h, l4, l4 + TCP_HEADER_LEN, pseudo))));
  return h;
}
