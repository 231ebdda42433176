/**
 * The datagram rsocket wire (rsocket.c's `ds_*` protocol), pure codecs and constants:
 *
 * - `struct ds_header`: what starts every UD SEND between datagram rsockets — the sender's
 *   address as its application sees it (the IP and UDP port of its rsocket), so the receiver's
 *   rrecvfrom can report it. IPv4: 8 bytes; IPv6: 24.
 * - `struct ds_udp_header`: what starts every datagram on the rsocket's UDP socket (the "UDP
 *   service", rsocket.c `udp_svc_*`): the first datagrams to a peer whose QP is not known yet go
 *   there (op DATA), and the answer names the QP to use from then on (op CTRL). IPv4: 16 bytes;
 *   IPv6: 28.
 *
 * Byte order: every multi-byte field is big-endian (network order), as rsocket.c stores them
 * (`htobe32(DS_UDP_TAG)`, the sockaddr's port and address copied as they are).
 *
 * | off | ds_header (v4 / v6)                   | ds_udp_header (v4 / v6)                     |
 * |-----|---------------------------------------|---------------------------------------------|
 * | 0   | version u8 (4 / 6)                    | tag be32 0x55555555                         |
 * | 1   | length u8 (8 / 24)                    |                                             |
 * | 2   | port be16                             |                                             |
 * | 4   | v4: addr[4]; v6: flowinfo be32        | version u8, op u8, length u8 (16/28), 0 u8  |
 * | 8   | v6: addr[16]                          | qpn be32 (the low 24 bits; the top byte 0)  |
 * | 12  |                                       | addr: v4 [4] / v6 [16] (the sender QP's IP) |
 */
import { formatIpv6Text } from '../../ip-text.js';

/** `DS_IPV4_HDR_LEN` / `DS_IPV6_HDR_LEN`: the ds_header's length by IP version. */
export const DS_IPV4_HDR_LEN = 8;
export const DS_IPV6_HDR_LEN = 24;
/** `DS_UDP_TAG`: the first four bytes of every UDP service datagram. */
export const DS_UDP_TAG = 0x55555555;
/** `DS_UDP_IPV4_HDR_LEN` / `DS_UDP_IPV6_HDR_LEN`. */
export const DS_UDP_IPV4_HDR_LEN = 16;
export const DS_UDP_IPV6_HDR_LEN = 28;
/** `struct ibv_grh`: the 40 bytes a UD receive fills before the message. */
export const GRH_LEN = 40;
/**
 * `RS_SNDLOWAT`: the size of one datagram slot, send and receive alike (a message and its
 * ds_header must fit in it).
 */
export const DS_SLOT_SIZE = 2048;
/** The QP number field's mask (24 bits). */
export const QPN_MASK = 0xffffff;

/** The ds_udp_header ops (rsocket.c's `RS_OP_*` values, unshifted). */
export enum DsUdpOp {
  /** The datagram's payload is application data for the receiver (`RS_OP_DATA`). */
  DATA = 0,
  /** No payload: the header names the sender's QP (`RS_OP_CTRL`). */
  CTRL = 7,
}

/** An IP version as the headers carry it. */
export type IpVersion = 4 | 6;

/** `struct ds_header`, decoded. */
export interface DsHeader {
  version: IpVersion;
  /** 8 (v4) or 24 (v6): where the message starts. */
  length: number;
  /** The sender's UDP port. */
  port: number;
  /** The sender's IP address (dotted quad, or IPv6 text). */
  address: string;
  /** `sin6_flowinfo` (IPv6; 0 for IPv4). */
  flowinfo: number;
}

/** `struct ds_udp_header`, decoded. */
export interface DsUdpHeader {
  version: IpVersion;
  op: number;
  /** 16 (v4) or 28 (v6): where the payload starts. */
  length: number;
  /** The sender's QP number (24 bits). */
  qpn: number;
  /** The IP address of the sender's QP. */
  address: string;
}

/** Why bytes are not a header. */
export type DsDecodeError = 'short' | 'version' | 'tag' | 'family';

/** The ds_header length of an IP version. */
export const dsHeaderLen = (v: IpVersion): number => (v === 4 ? DS_IPV4_HDR_LEN : DS_IPV6_HDR_LEN);
/** The ds_udp_header length of an IP version. */
export const dsUdpHeaderLen = (v: IpVersion): number => (v === 4 ? DS_UDP_IPV4_HDR_LEN : DS_UDP_IPV6_HDR_LEN);

// ------------------------------------------------------------------ IP addresses as bytes

/** An IPv4 dotted quad as 4 bytes; throws on anything else. */
export function ipv4Bytes(s: string): Uint8Array {
  const p = s.split('.');
  const out = new Uint8Array(4);
  if (p.length !== 4) throw new TypeError(`not an IPv4 address: ${s}`);
  for (let i = 0; i < 4; i++) {
    const t = p[i] as string;
    const n = Number(t);
    if (!/^\d{1,3}$/.test(t) || n > 255) throw new TypeError(`not an IPv4 address: ${s}`);
    out[i] = n;
  }
  return out;
}

/** An IPv6 address (`::` compression, a dotted IPv4 tail, a zone suffix) as 16 bytes. */
export function ipv6Bytes(input: string): Uint8Array {
  let s = input;
  const z = s.indexOf('%');
  if (z >= 0) s = s.slice(0, z);
  const bad = (): never => {
    throw new TypeError(`not an IPv6 address: ${input}`);
  };
  let tail: number[] = [];
  const dot = s.lastIndexOf(':');
  if (s.includes('.')) {
    if (dot < 0) bad();
    const v4 = ipv4Bytes(s.slice(dot + 1));
    tail = [((v4[0] as number) << 8) | (v4[1] as number), ((v4[2] as number) << 8) | (v4[3] as number)];
    s = s.slice(0, dot + 1);
    if (!s.endsWith('::')) s = s.slice(0, -1);
  }
  const halves = s.split('::');
  if (halves.length > 2) bad();
  const words = (h: string): number[] =>
    h === ''
      ? []
      : h.split(':').map((w) => {
          if (!/^[0-9a-fA-F]{1,4}$/.test(w)) bad();
          return parseInt(w, 16);
        });
  const head = words(halves[0] as string);
  const rest = halves.length === 2 ? [...words(halves[1] as string), ...tail] : [];
  const all = halves.length === 2 ? head : [...head, ...tail];
  const fill = 8 - all.length - rest.length;
  if ((halves.length === 2 && fill < 1) || (halves.length === 1 && fill !== 0)) bad();
  const w = [...all, ...new Array<number>(Math.max(fill, 0)).fill(0), ...rest];
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    out[2 * i] = (w[i] as number) >> 8;
    out[2 * i + 1] = (w[i] as number) & 0xff;
  }
  return out;
}

/** 4 bytes as a dotted quad. */
export function formatIpv4Bytes(b: Uint8Array, off = 0): string {
  return `${b[off] as number}.${b[off + 1] as number}.${b[off + 2] as number}.${b[off + 3] as number}`;
}

/** 16 bytes as IPv6 text (RFC 5952: lower case, the longest run of two or more zero words as `::`). */
export function formatIpv6Bytes(b: Uint8Array, off = 0): string {
  return formatIpv6Text(b, off);
}

/** The IP version of an address text (a `:` makes it IPv6). */
export const ipVersionOf = (address: string): IpVersion => (address.includes(':') ? 6 : 4);

// ------------------------------------------------------------------ ds_header

/** ds_format_hdr: the header announcing `address`:`port` (and IPv6 `flowinfo`). */
export function encodeDsHeader(address: string, port: number, flowinfo = 0): Uint8Array {
  const v = ipVersionOf(address);
  const b = new Uint8Array(dsHeaderLen(v));
  const dv = new DataView(b.buffer);
  b[0] = v;
  b[1] = b.length;
  dv.setUint16(2, port & 0xffff);
  if (v === 4) b.set(ipv4Bytes(address), 4);
  else {
    dv.setUint32(4, flowinfo >>> 0);
    b.set(ipv6Bytes(address), 8);
  }
  return b;
}

/**
 * Decode the ds_header of a received message of `len` bytes at `off` (after the GRH), as
 * rsocket.c's ds_valid_recv accepts it: version 4 with length 8, or version 6 with length 24,
 * and the message at least that long ('short' otherwise; rsocket.c checks only the IPv4 length
 * and would read past an IPv6 message shorter than its header).
 */
export function decodeDsHeader(buf: Uint8Array, off = 0, len = buf.length - off): DsHeader | DsDecodeError {
  if (len < DS_IPV4_HDR_LEN || off + len > buf.length) return 'short';
  const version = buf[off] as number;
  const length = buf[off + 1] as number;
  if (!((version === 4 && length === DS_IPV4_HDR_LEN) || (version === 6 && length === DS_IPV6_HDR_LEN))) return 'version';
  if (len < length) return 'short';
  const dv = new DataView(buf.buffer, buf.byteOffset + off, length);
  const port = dv.getUint16(2);
  if (version === 4) return { version, length, port, address: formatIpv4Bytes(buf, off + 4), flowinfo: 0 };
  return { version, length, port, address: formatIpv6Bytes(buf, off + 8), flowinfo: dv.getUint32(4) };
}

// ------------------------------------------------------------------ ds_udp_header

/** ds_sendv_udp's header: `op` from the QP `qpn` whose IP is `address`. */
export function encodeDsUdpHeader(op: number, qpn: number, address: string): Uint8Array {
  const v = ipVersionOf(address);
  const b = new Uint8Array(dsUdpHeaderLen(v));
  const dv = new DataView(b.buffer);
  dv.setUint32(0, DS_UDP_TAG);
  b[4] = v;
  b[5] = op & 0xff;
  b[6] = b.length;
  b[7] = 0;
  dv.setUint32(8, (qpn & QPN_MASK) >>> 0);
  b.set(v === 4 ? ipv4Bytes(address) : ipv6Bytes(address), 12);
  return b;
}

/**
 * Decode a UDP service datagram's header as udp_svc_process_rs / udp_svc_valid_udp_hdr accept
 * it: at least 16 bytes, the tag, version 4 with length 16 from an IPv4 sender or version 6 with
 * length 28 from an IPv6 one, and the datagram at least that long. `family` is the UDP sender's
 * address family. The QPN's top byte is ignored, as rsocket.c masks it.
 */
export function decodeDsUdpHeader(buf: Uint8Array, family: IpVersion, off = 0, len = buf.length - off): DsUdpHeader | DsDecodeError {
  if (len < DS_UDP_IPV4_HDR_LEN || off + len > buf.length) return 'short';
  const dv = new DataView(buf.buffer, buf.byteOffset + off, len);
  if (dv.getUint32(0) !== DS_UDP_TAG) return 'tag';
  const version = buf[off + 4] as number;
  const op = buf[off + 5] as number;
  const length = buf[off + 6] as number;
  if (!((version === 4 && length === DS_UDP_IPV4_HDR_LEN) || (version === 6 && length === DS_UDP_IPV6_HDR_LEN))) return 'version';
  if (version !== family) return 'family';
  if (len < length) return 'short';
  const qpn = dv.getUint32(8) & QPN_MASK;
  const address = version === 4 ? formatIpv4Bytes(buf, off + 12) : formatIpv6Bytes(buf, off + 12);
  return { version, op, length, qpn, address };
}
