/**
 * Buffers for the packets a soft RoCE device sends, each with room in front of it for the header
 * of a forwarding frame (fwd-frame.ts): a packet for a QP of another process of this host is
 * framed in place instead of being copied into a frame.
 *
 * Packets are carved from 64 KiB slabs. A slab whose every packet was handed back with
 * {@link releasePacket} (the forwarding path does once the kernel has the frame, the batched UDP
 * socket once its batch is flushed) is carved again instead of a new one being allocated: an RC
 * WRITE of 1 MiB is 256 packets, and fresh memory for each (first-touch page faults, the garbage
 * collector's pressure from external memory) costs more than building them. A packet nobody
 * hands back keeps its slab to the garbage collector, as any buffer.
 */
import { FWD_FRAME_HEAD } from './fwd-frame.js';

/**
 * Bytes kept free in front of every packet from {@link packetBuffer}: a forwarding frame's length
 * word and header.
 */
export const PACKET_HEADROOM = FWD_FRAME_HEAD;
/** Size of the slabs {@link packetBuffer} carves packets from. */
const SLAB_SIZE = 64 * 1024;
/** Bytes in front of the headroom: the packet's hold mark ({@link Hold}) and alignment. */
const MARK_LEN = 8;
/** Slabs kept for carving again (4 MiB). */
const SPARE_MAX = 64;

/** The hold mark of a carved packet. */
const Hold = {
  /** Handed back: its bytes are the slab's again. */
  FREE: 0,
  /** In use until handed back. */
  HELD: 1,
  /** Kept by something that never hands it back (a duplicate in flight): its slab is not reused. */
  PINNED: 2,
} as const;

/** A slab: its bytes, its packets not handed back, and whether carving has moved past it. */
interface Slab {
  readonly bytes: Uint8Array;
  live: number;
  done: boolean;
}

/** Every buffer {@link packetBuffer} carves from (slabs, and the oversized ones: no slab record). */
const slabs = new WeakMap<ArrayBufferLike, Slab | null>();
const spare: ArrayBufferLike[] = [];
let slab: Slab | null = null;
let slabOff = 0;

/** Stop carving from the current slab; it is reusable once its last packet is handed back. */
function retire(s: Slab): void {
  s.done = true;
  if (s.live === 0 && spare.length < SPARE_MAX) spare.push(s.bytes.buffer);
}

/**
 * A buffer of `len` bytes for an outgoing packet, with {@link PACKET_HEADROOM} bytes of the same
 * slab in front of it that belong to it alone. Pass it on whole (its first byte first, as `buf`
 * or `buf.subarray(0, n)`).
 */
export function packetBuffer(len: number): Buffer {
  const need = (MARK_LEN + PACKET_HEADROOM + len + 7) & ~7;
  if (need > SLAB_SIZE) {
    // allocUnsafeSlow: a fresh, uninitialised ArrayBuffer of exactly this size (not Node's pool).
    const ab = Buffer.allocUnsafeSlow(need).buffer;
    slabs.set(ab, null);
    return Buffer.from(ab, MARK_LEN + PACKET_HEADROOM, len);
  }
  if (slab === null || slabOff + need > SLAB_SIZE) {
    if (slab !== null) retire(slab);
    const ab = spare.pop() ?? Buffer.allocUnsafeSlow(SLAB_SIZE).buffer;
    let s = slabs.get(ab);
    if (s == null) {
      s = { bytes: new Uint8Array(ab), live: 0, done: false };
      slabs.set(ab, s);
    }
    s.done = false;
    slab = s;
    slabOff = 0;
  }
  slab.bytes[slabOff] = Hold.HELD;
  slab.live++;
  const b = Buffer.from(slab.bytes.buffer, slabOff + MARK_LEN + PACKET_HEADROOM, len);
  slabOff += need;
  return b;
}

/** The slab of a packet from {@link packetBuffer} and its mark's offset, or null. */
function slabOf(pkt: Uint8Array): Slab | null {
  const s = slabs.get(pkt.buffer);
  return s == null || pkt.byteOffset < MARK_LEN + PACKET_HEADROOM ? null : s;
}

/**
 * The last holder of packet `pkt` is done with it (its bytes, headroom included, are never read
 * again through any view): its slab may be carved again once all its packets are. Only the
 * first call for a packet counts; a pinned packet, or a buffer not from {@link packetBuffer}, is
 * left alone.
 */
export function releasePacket(pkt: Uint8Array): void {
  const s = slabOf(pkt);
  if (s === null) return;
  const at = pkt.byteOffset - PACKET_HEADROOM - MARK_LEN;
  if (s.bytes[at] !== Hold.HELD) return;
  s.bytes[at] = Hold.FREE;
  if (--s.live === 0 && s.done && spare.length < SPARE_MAX) spare.push(s.bytes.buffer);
}

/**
 * Packet `pkt` may be kept or sent more than once by whoever has it now (a link impairment's
 * duplicate or delayed copy, a capture): {@link releasePacket} will not give its slab back.
 */
export function pinPacket(pkt: Uint8Array): void {
  const s = slabOf(pkt);
  if (s !== null) s.bytes[pkt.byteOffset - PACKET_HEADROOM - MARK_LEN] = Hold.PINNED;
}

/**
 * `msg` with its {@link PACKET_HEADROOM} in front of it, when it was made by {@link packetBuffer};
 * null for any other buffer (a datagram from a socket, a MAD).
 */
export function withHeadroom(msg: Buffer): Buffer | null {
  if (!slabs.has(msg.buffer) || msg.byteOffset < MARK_LEN + PACKET_HEADROOM) return null;
  return Buffer.from(msg.buffer, msg.byteOffset - PACKET_HEADROOM, PACKET_HEADROOM + msg.length);
}
