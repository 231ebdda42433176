/**
 * The rsocket wire protocol (librdmacm `rsocket.c`, `docs/rsocket`): pure codecs and constants,
 * no QPs, sockets or timers. See docs/design/rsocket-protocol.md for the full description.
 *
 * Three things travel between two rsockets besides the payload itself:
 *
 * 1. **`rs_conn_data`** (40 bytes, every multi-byte field big-endian), the private data of the
 *    rdma_cm connect request and of the accept reply:
 *
 *    | off | size | field | meaning |
 *    |---|---|---|---|
 *    | 0 | 1 | version | 1 |
 *    | 1 | 1 | flags | bit 0 `RS_CONN_FLAG_NET` = sender is big-endian; bit 1 `RS_CONN_FLAG_IOMAP` |
 *    | 2 | 2 | credits | the sender's receive queue size (messages the peer may send) |
 *    | 4 | 3 | reserved | 0 |
 *    | 7 | 1 | target_iomap_size | the sender's iomap table size, scaled ({@link valueToScale}) |
 *    | 8 | 16 | target_sgl | `rs_sge` {addr u64, key u32, length u32}: where the peer writes SGEs; length = 2 entries |
 *    | 24 | 16 | data_buf | `rs_sge`: the first half of the sender's receive buffer |
 *
 * 2. **32-bit messages** (`imm_data` on IB; on iWARP, which has no immediate data, a separate
 *    4-byte SEND in the *sender's host byte order*, RS_OPT_MSG_SEND): bits 31..29 are the op,
 *    bits 28..0 the data ({@link RsOp}).
 *
 * 3. **SGEs and iomap entries** that a side RDMA-writes into the peer's target buffer list: `rs_sge`
 *    (16 bytes) and `rs_iomap` {offset u64, rs_sge} (24 bytes), written in the *receiver's* byte
 *    order (byte-swapped when the two hosts differ, RS_OPT_SWAP_SGL).
 */

/** The first chunk of one rsend call; chunks double up to {@link RS_MAX_TRANSFER}. */
export const RS_OLAP_START_SIZE = 2048;
/** Largest single RDMA Write of a send call. */
export const RS_MAX_TRANSFER = 65536;
/** A send waits until this many bytes of the send buffer are free. */
export const RS_SNDLOWAT = 2048;
/** Smallest SQ/RQ size. */
export const RS_QP_MIN_SIZE = 16;
/** Largest SQ/RQ size. */
export const RS_QP_MAX_SIZE = 0xfffe;
/** Control messages (credit updates, shutdown) in flight at most. */
export const RS_QP_CTRL_SIZE = 4;
/** Entries of the target SGL (the two halves of the receive buffer). */
export const RS_SGL_SIZE = 2;
/** Size of one message on iWARP (the 4-byte SEND). */
export const RS_MSG_SIZE = 4;
/** `sizeof(struct rs_sge)`. */
export const RS_SGE_SIZE = 16;
/** `sizeof(struct rs_iomap)`. */
export const RS_IOMAP_SIZE = 24;
/** `sizeof(struct rs_conn_data)`. */
export const RS_CONN_DATA_SIZE = 40;
/** `rs_conn_data.version`. */
export const RS_CONN_VERSION = 1;
/** `rs_conn_data.flags`: the sender is big-endian (network order host). */
export const RS_CONN_FLAG_NET = 1 << 0;
/** `rs_conn_data.flags`: the sender understands iomap (set by every current implementation). */
export const RS_CONN_FLAG_IOMAP = 1 << 1;

/** Message ops (bits 31..29). */
export enum RsOp {
  /** Data: `data` = bytes written by the RDMA Write just before. Consumes one credit. */
  DATA = 0,
  /** Reserved (never sent by rsocket.c). */
  RSVD_DATA_MORE = 1,
  /** Local bookkeeping of riowrite; never on the wire. */
  WRITE = 2,
  /** Reserved. */
  RSVD_DRA_MORE = 3,
  /** Credit update: `data` = new absolute credit limit (the peer keeps the low 16 bits). */
  SGL = 4,
  /** Reserved. */
  RSVD = 5,
  /** An iomap entry was written at `data` = index. Consumes one credit. */
  IOMAP_SGL = 6,
  /** Control: `data` = {@link RsCtrl}. */
  CTRL = 7,
}

/** `RS_OP_CTRL` data values. */
export enum RsCtrl {
  DISCONNECT = 0,
  /** Local only (the keepalive write's work request id); never sent as a message. */
  KEEPALIVE = 1,
  SHUTDOWN = 2,
}

/** Largest value of the 29-bit message data field. */
export const RS_MSG_DATA_MASK = 0x1fffffff;

/** `rs_msg_set(op, data)`: the 32-bit message (unsigned). */
export function rsMsgSet(op: RsOp, data: number): number {
  return ((op << 29) | (data & RS_MSG_DATA_MASK)) >>> 0;
}
/** `rs_msg_op(msg)`. */
export function rsMsgOp(msg: number): RsOp {
  return (msg >>> 29) as RsOp;
}
/** `rs_msg_data(msg)`. */
export function rsMsgData(msg: number): number {
  return msg & RS_MSG_DATA_MASK;
}

/** Human-readable form of a message, for traces and errors: `DATA 4096`, `CTRL SHUTDOWN`. */
export function rsMsgStr(msg: number): string {
  const op = rsMsgOp(msg);
  const data = rsMsgData(msg);
  if (op === RsOp.CTRL) return `CTRL ${RsCtrl[data] ?? data}`;
  return `${RsOp[op]} ${data}`;
}

/**
 * Encode a message as the 4-byte payload of the iWARP SEND: the sender's host order, which is
 * little-endian here (x86 and every host Node runs on in practice); `bigEndian` writes the other
 * order (for tests, or to imitate a big-endian sender).
 */
export function encodeMsg(msg: number, bigEndian = false, out: Uint8Array = new Uint8Array(RS_MSG_SIZE), off = 0): Uint8Array {
  const v = msg >>> 0;
  if (bigEndian) {
    out[off] = v >>> 24;
    out[off + 1] = (v >>> 16) & 0xff;
    out[off + 2] = (v >>> 8) & 0xff;
    out[off + 3] = v & 0xff;
  } else {
    out[off] = v & 0xff;
    out[off + 1] = (v >>> 8) & 0xff;
    out[off + 2] = (v >>> 16) & 0xff;
    out[off + 3] = v >>> 24;
  }
  return out;
}

/** Decode a 4-byte message written by a sender of the given byte order. */
export function decodeMsg(buf: Uint8Array, off = 0, bigEndian = false): number {
  const a = buf[off] as number;
  const b = buf[off + 1] as number;
  const c = buf[off + 2] as number;
  const d = buf[off + 3] as number;
  return (bigEndian ? (a << 24) | (b << 16) | (c << 8) | d : (d << 24) | (c << 16) | (b << 8) | a) >>> 0;
}

/** `struct rs_sge`: a remote buffer. `addr` must be a safe integer (< 2^53). */
export interface RsSge {
  addr: number;
  key: number;
  length: number;
}

/** `struct rs_iomap`: an iomap table entry. */
export interface RsIomap {
  offset: number;
  sge: RsSge;
}

/** `struct rs_conn_data`. */
export interface RsConnData {
  version: number;
  flags: number;
  /** Receive credits (the sender's RQ size). */
  credits: number;
  /** Scaled iomap size (see {@link scaleToValue}). */
  targetIomapSize: number;
  targetSgl: RsSge;
  dataBuf: RsSge;
}

function readU64(dv: DataView, off: number, le: boolean): number {
  const v = dv.getBigUint64(off, le);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) return Number.NaN;
  return Number(v);
}

function writeU64(dv: DataView, off: number, v: number, le: boolean): void {
  dv.setBigUint64(off, BigInt(v), le);
}

function view(buf: Uint8Array): DataView {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** Encode `rs_conn_data` (40 bytes, big-endian fields). */
export function encodeConnData(c: RsConnData, out: Uint8Array = new Uint8Array(RS_CONN_DATA_SIZE), off = 0): Uint8Array {
  const dv = view(out);
  out[off] = c.version & 0xff;
  out[off + 1] = c.flags & 0xff;
  dv.setUint16(off + 2, c.credits & 0xffff, false);
  out[off + 4] = 0;
  out[off + 5] = 0;
  out[off + 6] = 0;
  out[off + 7] = c.targetIomapSize & 0xff;
  encodeSge(c.targetSgl, false, out, off + 8);
  encodeSge(c.dataBuf, false, out, off + 24);
  return out;
}

/** Why {@link decodeConnData} refused a buffer. */
export type ConnDataError = 'short' | 'version' | 'address';

/**
 * Decode `rs_conn_data`. Returns the structure, or an error string: `'short'` (fewer than 40
 * bytes), `'version'` (not 1: rsocket.c answers ENOTSUP), `'address'` (an address above 2^53,
 * which no real host hands out).
 */
export function decodeConnData(buf: Uint8Array, off = 0): RsConnData | ConnDataError {
  if (buf.length - off < RS_CONN_DATA_SIZE) return 'short';
  const dv = view(buf);
  const version = buf[off] as number;
  if (version !== RS_CONN_VERSION) return 'version';
  const targetSgl = decodeSge(buf, off + 8, false);
  const dataBuf = decodeSge(buf, off + 24, false);
  if (Number.isNaN(targetSgl.addr) || Number.isNaN(dataBuf.addr)) return 'address';
  return {
    version,
    flags: buf[off + 1] as number,
    credits: dv.getUint16(off + 2, false),
    targetIomapSize: buf[off + 7] as number,
    targetSgl,
    dataBuf,
  };
}

/** Encode an `rs_sge` in the given byte order (big-endian in conn data; the receiver's order in RDMA writes). */
export function encodeSge(s: RsSge, littleEndian: boolean, out: Uint8Array = new Uint8Array(RS_SGE_SIZE), off = 0): Uint8Array {
  const dv = view(out);
  writeU64(dv, off, s.addr, littleEndian);
  dv.setUint32(off + 8, s.key >>> 0, littleEndian);
  dv.setUint32(off + 12, s.length >>> 0, littleEndian);
  return out;
}

/** Decode an `rs_sge`; an address above 2^53 decodes as NaN. */
export function decodeSge(buf: Uint8Array, off: number, littleEndian: boolean): RsSge {
  const dv = view(buf);
  return { addr: readU64(dv, off, littleEndian), key: dv.getUint32(off + 8, littleEndian), length: dv.getUint32(off + 12, littleEndian) };
}

/** Encode an `rs_iomap` (24 bytes) in the given byte order. */
export function encodeIomap(m: RsIomap, littleEndian: boolean, out: Uint8Array = new Uint8Array(RS_IOMAP_SIZE), off = 0): Uint8Array {
  writeU64(view(out), off, m.offset, littleEndian);
  encodeSge(m.sge, littleEndian, out, off + 8);
  return out;
}

/** Decode an `rs_iomap`; addresses/offsets above 2^53 decode as NaN. */
export function decodeIomap(buf: Uint8Array, off: number, littleEndian: boolean): RsIomap {
  return { offset: readU64(view(buf), off, littleEndian), sge: decodeSge(buf, off + 8, littleEndian) };
}

/**
 * `rs_value_to_scale(value, 8)`: the 8-bit encoding of an iomap size. Values up to 128 are
 * exact; larger ones become `0x80 | (value >> 8)` (so they decode to a multiple of 256).
 */
export function valueToScale(value: number, bits = 8): number {
  const half = 1 << (bits - 1);
  return value <= half ? value : half | (value >> bits);
}

/** `rs_scale_to_value(scale, 8)`. */
export function scaleToValue(scale: number, bits = 8): number {
  const half = 1 << (bits - 1);
  return scale <= half ? scale : (scale & ~half) << bits;
}

/** The iomap size an RDMA_IOMAPSIZE request rounds to (what rsetsockopt stores). */
export function roundIomapSize(value: number): number {
  return scaleToValue(valueToScale(value, 8) & 0xff, 8) & 0xffff;
}

/** 16-bit sequence difference `(int16)(a - b)`, as rsocket.c compares its credit counters. */
export function seqDiff16(a: number, b: number): number {
  return (((a - b) & 0xffff) << 16) >> 16;
}

/** This host's byte order (what RS_CONN_FLAG_NET reports about us). */
export const HOST_IS_BIG_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 0;
