/**
 * rcopy's messages over the rsocket (librdmacm/examples/rcopy.c): a 16-byte header
 *
 * | offset | size | field | |
 * |---|---|---|---|
 * | 0 | 1 | version | 0 (anything else is refused) |
 * | 1 | 1 | command | {@link RcopyCmd}; a response has {@link CMD_RESP} set |
 * | 2 | 2 | len | bytes of the whole message, header included (at least 16) |
 * | 4 | 4 | data | OPEN: the source's `st_mode`; a response: its status (0 or an errno) |
 * | 8 | 8 | id | copied from the request into its response (rcopy sends 0) |
 *
 * followed by OPEN's destination path (NUL-terminated, zero-padded: `(strlen + 8) & ~7` bytes) or
 * WRITE's 8-byte file size, after which the file's bytes follow as a plain stream. rcopy.c writes
 * the structure in host byte order ("TODO: handle byte swapping"); every peer it meets is
 * little-endian (x86, arm64), so these are little-endian here. Pure: no socket, no file.
 */

/** Commands (rcopy.c's anonymous enum). */
export enum RcopyCmd {
  NOOP = 0,
  OPEN = 1,
  CLOSE = 2,
  WRITE = 3,
}

/** The bit a response sets in the command of its request. */
export const CMD_RESP = 0x80;
/** `sizeof(struct msg_hdr)`. */
export const MSG_HDR_SIZE = 16;
/** `sizeof(struct msg_write)`: the header and the file size. */
export const MSG_WRITE_SIZE = 24;
/** The only version rcopy speaks. */
export const MSG_VERSION = 0;

/** `struct msg_hdr`. */
export interface MsgHdr {
  version: number;
  command: number;
  /** u16: the message's length in bytes. */
  len: number;
  /** u32 (st_mode, or a response's status as the peer's int). */
  data: number;
  id: bigint;
}

/** The 16 header bytes of `h` (fields cut to their sizes, as the C assignments do). */
export function encodeHdr(h: MsgHdr): Uint8Array {
  const b = new Uint8Array(MSG_HDR_SIZE);
  const v = new DataView(b.buffer);
  v.setUint8(0, h.version & 0xff);
  v.setUint8(1, h.command & 0xff);
  v.setUint16(2, h.len & 0xffff, true);
  v.setUint32(4, h.data >>> 0, true);
  v.setBigUint64(8, BigInt.asUintN(64, h.id), true);
  return b;
}

/** The header at `off` of `b` (at least 16 bytes there). */
export function decodeHdr(b: Uint8Array, off = 0): MsgHdr {
  if (b.length - off < MSG_HDR_SIZE) throw new RangeError('rcopy header: 16 bytes needed');
  const v = new DataView(b.buffer, b.byteOffset + off, MSG_HDR_SIZE);
  return { version: v.getUint8(0), command: v.getUint8(1), len: v.getUint16(2, true), data: v.getUint32(4, true), id: v.getBigUint64(8, true) };
}

/** msg_recv_hdr's check: version 0 and a length that covers the header. */
export function hdrValid(h: MsgHdr): boolean {
  return h.version === MSG_VERSION && h.len >= MSG_HDR_SIZE;
}

/** A response's status as rcopy.c's `int` (msg_get_resp returns `msg->data`). */
export function statusOf(h: MsgHdr): number {
  return h.data | 0;
}

/** msg_send_resp: the response to `req` with `status`. */
export function encodeResp(req: MsgHdr, status: number): Uint8Array {
  return encodeHdr({ version: MSG_VERSION, command: req.command | CMD_RESP, len: MSG_HDR_SIZE, data: status, id: req.id });
}

/**
 * client_open's OPEN message for `path` with `mode`: the header and the path, NUL-terminated and
 * zero-padded to `(strlen + 8) & ~7` bytes. `len` is a u16 there, so a message longer than 65535
 * bytes has a truncated `len` and only that many bytes are sent (the returned `send` count).
 */
export function encodeOpen(path: string, mode: number): { msg: Uint8Array; send: number } {
  const name = Buffer.from(path, 'utf8');
  const padded = (name.length + 8) & ~7;
  const msg = new Uint8Array(MSG_HDR_SIZE + padded);
  const len = (MSG_HDR_SIZE + padded) & 0xffff;
  msg.set(encodeHdr({ version: MSG_VERSION, command: RcopyCmd.OPEN, len, data: mode, id: 0n }));
  msg.set(name, MSG_HDR_SIZE);
  return { msg, send: len };
}

/** The path of an OPEN's payload: the bytes up to the first NUL (all of them without one). */
export function decodePath(payload: Uint8Array): string {
  const nul = payload.indexOf(0);
  return Buffer.from(payload.buffer, payload.byteOffset, nul < 0 ? payload.length : nul).toString('utf8');
}

/** client_start_write's WRITE message: the header and the file size. */
export function encodeWrite(size: bigint): Uint8Array {
  const msg = new Uint8Array(MSG_WRITE_SIZE);
  msg.set(encodeHdr({ version: MSG_VERSION, command: RcopyCmd.WRITE, len: MSG_WRITE_SIZE, data: 0, id: 0n }));
  new DataView(msg.buffer).setBigUint64(MSG_HDR_SIZE, BigInt.asUintN(64, size), true);
  return msg;
}

/** The u64 file size of a WRITE (the 8 bytes after its header). */
export function decodeSize(b: Uint8Array, off = 0): bigint {
  if (b.length - off < 8) throw new RangeError('rcopy size: 8 bytes needed');
  return new DataView(b.buffer, b.byteOffset + off, 8).getBigUint64(0, true);
}

/** A CLOSE message. */
export function encodeClose(): Uint8Array {
  return encodeHdr({ version: MSG_VERSION, command: RcopyCmd.CLOSE, len: MSG_HDR_SIZE, data: 0, id: 0n });
}
