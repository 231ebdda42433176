/**
 * Buffers for the packets a soft RoCE device sends, each with room in front of it for the header
 * of a forwarding frame (fwd-frame.ts): a packet for a QP of another process of this host is
 * framed in place instead of being copied into a frame.
 */
import { FWD_FRAME_HEAD } from './fwd-frame.js';

/**
 * Bytes kept free in front of every packet from {@link packetBuffer}: a forwarding frame's length
 * word and header.
 */
export const PACKET_HEADROOM = FWD_FRAME_HEAD;
/** Size of the slabs {@link packetBuffer} carves packets from. */
const SLAB_SIZE = 64 * 1024;
/** Every slab of {@link packetBuffer}: a view of one of them has its headroom in front of it. */
const slabs = new WeakSet<ArrayBufferLike>();
let slab: ArrayBufferLike | null = null;
let slabOff = 0;

/**
 * A buffer of `len` bytes for an outgoing packet, with {@link PACKET_HEADROOM} bytes of the same
 * slab in front of it that belong to it alone. Pass it on whole (its first byte first, as `buf`
 * or `buf.subarray(0, n)`).
 */
export function packetBuffer(len: number): Buffer {
  const need = (PACKET_HEADROOM + len + 7) & ~7;
  // allocUnsafeSlow: a fresh, uninitialised ArrayBuffer of exactly this size (not Node's pool).
  if (need > SLAB_SIZE) {
    const ab = Buffer.allocUnsafeSlow(need).buffer;
    slabs.add(ab);
    return Buffer.from(ab, PACKET_HEADROOM, len);
  }
  if (slab === null || slabOff + need > SLAB_SIZE) {
    slab = Buffer.allocUnsafeSlow(SLAB_SIZE).buffer;
    slabs.add(slab);
    slabOff = 0;
  }
  const b = Buffer.from(slab, slabOff + PACKET_HEADROOM, len);
  slabOff += need;
  return b;
}

/**
 * `msg` with its {@link PACKET_HEADROOM} in front of it, when it was made by {@link packetBuffer};
 * null for any other buffer (a datagram from a socket, a MAD).
 */
export function withHeadroom(msg: Buffer): Buffer | null {
  if (!slabs.has(msg.buffer) || msg.byteOffset < PACKET_HEADROOM) return null;
  return Buffer.from(msg.buffer, msg.byteOffset - PACKET_HEADROOM, PACKET_HEADROOM + msg.length);
}
