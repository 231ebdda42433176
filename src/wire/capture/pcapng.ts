/**
 * pcapng (the PCAP Next Generation capture file format, draft-ietf-opsawg-pcapng): the three
 * blocks a capture of the soft devices writes, as pure encoders over Buffers. Little-endian
 * (the byte-order magic of the Section Header tells a reader), every block and option padded to
 * 32 bits, the block's total length repeated at its end.
 *
 * - {@link encodeSectionHeader}: the Section Header Block a file starts with.
 * - {@link encodeInterfaceDescription}: one Interface Description Block per device (link type,
 *   snap length, `if_name`, `if_description`, `if_tsresol`); packets name it by its index in the
 *   section, in the order the blocks were written.
 * - {@link encodeEnhancedPacket}: one Enhanced Packet Block per frame, timestamp in the
 *   interface's resolution (µs here), `epb_flags` (direction) and an `opt_comment`.
 */

/** Block types (pcapng §4, §11.1). */
export const PcapngBlock = Object.freeze({
  SECTION_HEADER: 0x0a0d0d0a,
  INTERFACE_DESCRIPTION: 0x00000001,
  ENHANCED_PACKET: 0x00000006,
});

/** The Section Header's byte-order magic. */
export const PCAPNG_BYTE_ORDER_MAGIC = 0x1a2b3c4d;

/** Option codes used here (pcapng §3.5, §4.1, §4.2, §4.3). */
export const PcapngOpt = Object.freeze({
  END: 0,
  COMMENT: 1,
  SHB_USERAPPL: 4,
  IF_NAME: 2,
  IF_DESCRIPTION: 3,
  IF_TSRESOL: 9,
  EPB_FLAGS: 2,
});

/** LINKTYPE_ETHERNET (the link-type registry). */
export const LINKTYPE_ETHERNET = 1;

/** `epb_flags` bits 0-1: the packet's direction (pcapng §4.3.1). */
export const EpbDirection = Object.freeze({ UNKNOWN: 0, INBOUND: 1, OUTBOUND: 2 });

/** `if_tsresol` 6: timestamps count microseconds (the default a reader assumes without it). */
export const TSRESOL_MICROSECONDS = 6;

const pad4 = (n: number): number => (n + 3) & ~3;

/** One option: code, value. */
type Opt = [code: number, value: Uint8Array];

function optionsLength(opts: readonly Opt[]): number {
  if (opts.length === 0) return 0;
  let n = 4; // opt_endofopt
  for (const [, v] of opts) n += 4 + pad4(v.length);
  return n;
}

function writeOptions(b: Buffer, off: number, opts: readonly Opt[]): number {
  if (opts.length === 0) return off;
  for (const [code, v] of opts) {
    b.writeUInt16LE(code, off);
    b.writeUInt16LE(v.length, off + 2);
    b.set(v, off + 4);
    b.fill(0, off + 4 + v.length, off + 4 + pad4(v.length));
    off += 4 + pad4(v.length);
  }
  b.writeUInt32LE(0, off); // opt_endofopt
  return off + 4;
}

const utf8 = (s: string): Uint8Array => Buffer.from(s, 'utf8');

/** A block of `type` with `body` bytes then options; returns the buffer and the body offset. */
function block(type: number, body: number, opts: readonly Opt[]): { b: Buffer; at: number; optAt: number } {
  const len = 8 + body + optionsLength(opts) + 4;
  const b = Buffer.allocUnsafe(len);
  b.writeUInt32LE(type, 0);
  b.writeUInt32LE(len, 4);
  b.writeUInt32LE(len, len - 4);
  return { b, at: 8, optAt: 8 + body };
}

/** The Section Header Block: version 1.0, section length unknown (-1), `shb_userappl`. */
export function encodeSectionHeader(userAppl?: string): Buffer {
  const opts: Opt[] = userAppl ? [[PcapngOpt.SHB_USERAPPL, utf8(userAppl)]] : [];
  const { b, at, optAt } = block(PcapngBlock.SECTION_HEADER, 16, opts);
  b.writeUInt32LE(PCAPNG_BYTE_ORDER_MAGIC, at);
  b.writeUInt16LE(1, at + 4);
  b.writeUInt16LE(0, at + 6);
  b.writeInt32LE(-1, at + 8);
  b.writeInt32LE(-1, at + 12);
  writeOptions(b, optAt, opts);
  return b;
}

/** What an Interface Description Block says. */
export interface InterfaceDescription {
  /** LINKTYPE_* (Ethernet here). */
  linkType: number;
  /** Longest frame kept (0: no limit). */
  snapLen: number;
  /** `if_name`. */
  name?: string;
  /** `if_description`. */
  description?: string;
  /** `if_tsresol` (a power of ten: 6 µs, 9 ns); omitted means µs. */
  tsresol?: number;
}

/** An Interface Description Block. */
export function encodeInterfaceDescription(d: InterfaceDescription): Buffer {
  const opts: Opt[] = [];
  if (d.name !== undefined) opts.push([PcapngOpt.IF_NAME, utf8(d.name)]);
  if (d.description !== undefined) opts.push([PcapngOpt.IF_DESCRIPTION, utf8(d.description)]);
  if (d.tsresol !== undefined) opts.push([PcapngOpt.IF_TSRESOL, Uint8Array.of(d.tsresol)]);
  const { b, at, optAt } = block(PcapngBlock.INTERFACE_DESCRIPTION, 8, opts);
  b.writeUInt16LE(d.linkType, at);
  b.writeUInt16LE(0, at + 2);
  b.writeUInt32LE(d.snapLen >>> 0, at + 4);
  writeOptions(b, optAt, opts);
  return b;
}

/** What an Enhanced Packet Block carries. */
export interface EnhancedPacket {
  /** Index of the interface's description block in the section. */
  interfaceId: number;
  /** Timestamp in the interface's units (µs since the epoch here); below 2^53. */
  timestamp: number;
  /** The frame, as consecutive parts (headers, then payload). */
  parts: readonly Uint8Array[];
  /** Length of the frame on the wire when the parts hold less; default: their length. */
  originalLength?: number;
  /** `epb_flags` (direction in bits 0-1, {@link EpbDirection}); omitted when undefined. */
  flags?: number;
  /** `opt_comment`. */
  comment?: string;
}

const TWO_32 = 0x1_0000_0000;

/** UTF-8 of the comments met lately (a capture repeats a few). */
const commentBytes = new Map<string, Buffer>();
const COMMENT_CACHE_MAX = 64;
function utf8Comment(c: string): Buffer {
  let b = commentBytes.get(c);
  if (b === undefined) {
    if (commentBytes.size >= COMMENT_CACHE_MAX) commentBytes.clear();
    b = Buffer.from(c, 'utf8');
    commentBytes.set(c, b);
  }
  return b;
}

/** Bytes of the captured data of `p` (its parts together). */
function capturedLength(p: EnhancedPacket): number {
  let n = 0;
  for (let i = 0; i < p.parts.length; i++) n += (p.parts[i] as Uint8Array).length;
  return n;
}

/** Bytes of the options of `p` (0 without any). */
function epbOptionsLength(p: EnhancedPacket): number {
  let n = 0;
  if (p.comment !== undefined) n += 4 + pad4(utf8Comment(p.comment).length);
  if (p.flags !== undefined) n += 8;
  return n === 0 ? 0 : n + 4;
}

/** Length of the Enhanced Packet Block of `p`. */
export function enhancedPacketLength(p: EnhancedPacket): number {
  return 8 + 20 + pad4(capturedLength(p)) + epbOptionsLength(p) + 4;
}

/** Write the Enhanced Packet Block of `p` at `b[off]` ({@link enhancedPacketLength} bytes); returns the offset after it. */
export function writeEnhancedPacket(b: Buffer, off: number, p: EnhancedPacket): number {
  const capLen = capturedLength(p);
  const len = 8 + 20 + pad4(capLen) + epbOptionsLength(p) + 4;
  b.writeUInt32LE(PcapngBlock.ENHANCED_PACKET, off);
  b.writeUInt32LE(len, off + 4);
  const hi = Math.floor(p.timestamp / TWO_32);
  b.writeUInt32LE(p.interfaceId >>> 0, off + 8);
  b.writeUInt32LE(hi >>> 0, off + 12);
  b.writeUInt32LE(p.timestamp - hi * TWO_32, off + 16);
  b.writeUInt32LE(capLen, off + 20);
  b.writeUInt32LE(p.originalLength ?? capLen, off + 24);
  let o = off + 28;
  for (let i = 0; i < p.parts.length; i++) {
    const x = p.parts[i] as Uint8Array;
    b.set(x, o);
    o += x.length;
  }
  const dataEnd = off + 28 + pad4(capLen);
  b.fill(0, o, dataEnd);
  o = dataEnd;
  const hasOpts = p.comment !== undefined || p.flags !== undefined;
  if (p.comment !== undefined) {
    const c = utf8Comment(p.comment);
    b.writeUInt16LE(PcapngOpt.COMMENT, o);
    b.writeUInt16LE(c.length, o + 2);
    c.copy(b, o + 4);
    b.fill(0, o + 4 + c.length, o + 4 + pad4(c.length));
    o += 4 + pad4(c.length);
  }
  if (p.flags !== undefined) {
    b.writeUInt16LE(PcapngOpt.EPB_FLAGS, o);
    b.writeUInt16LE(4, o + 2);
    b.writeUInt32LE(p.flags >>> 0, o + 4);
    o += 8;
  }
  if (hasOpts) {
    b.writeUInt32LE(0, o); // opt_endofopt
    o += 4;
  }
  b.writeUInt32LE(len, o);
  return o + 4;
}

/** An Enhanced Packet Block. */
export function encodeEnhancedPacket(p: EnhancedPacket): Buffer {
  const b = Buffer.allocUnsafe(enhancedPacketLength(p));
  writeEnhancedPacket(b, 0, p);
  return b;
}
