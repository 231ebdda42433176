/**
 * The frames in which the processes sharing a soft RoCE device's UDP port hand each other
 * datagrams over their Unix sockets (fwd-tx.ts writes them, fwd-rx.ts reads them): a pure codec,
 * no sockets.
 *
 * ```
 * u32 length (of what follows) | u8 family (4 or 6) | u8 flags | u16 UDP source port |
 * 16 bytes source address | 16 bytes destination address | the UDP payload
 * ```
 *
 * Addresses are in network order; an IPv4 address fills the first four bytes of its 16. The flags
 * byte: bit 0, {@link FwdFlag.ICRC_OFFLOAD}, marks a packet whose ICRC its sender did not compute;
 * bits 4-7 count the segments of a train (0: one packet; 2 .. 15: a train, train.ts, which always
 * has its ICRC offloaded); bits 1-3 are zero. These frames never leave the host (they are not part of RoCEv2), but they are read from
 * sockets any local process can connect to, so the splitter and the decoders treat them as
 * untrusted input: a length outside {@link FWD_HDR} .. {@link FWD_MAX}, a family other than 4 or
 * 6, or a flag bit not defined here is malformed.
 */

/** Bytes of a frame's header after its length word. */
export const FWD_HDR = 36;
/** Bytes of the length word. */
export const FWD_LEN_BYTES = 4;
/** A frame's whole header, length word included: what {@link encodeFwdHeader} writes. */
export const FWD_FRAME_HEAD = FWD_LEN_BYTES + FWD_HDR;
/** The largest frame length accepted (a datagram of up to 64 KiB and its header). */
export const FWD_MAX = 70_000;

/** Offsets inside a frame, after its length word. */
export const FwdOff = {
  FAMILY: 0,
  FLAGS: 1,
  SRC_PORT: 2,
  SRC: 4,
  DST: 20,
} as const;

/** The bits of a frame's flags byte. */
export const FwdFlag = {
  /**
   * The packet's ICRC field was not computed: a packet of the sending process's own RC or UD
   * engines for a QP of this host, sent with neither a packet capture nor a link impairment
   * running there. Nothing can corrupt it between two processes of one host (a Unix stream
   * socket), so the receiver skips the check, as a NIC that computes and checks the ICRC in
   * hardware spares its driver both. Any other datagram (one read from UDP, a MAD) has its ICRC.
   */
  ICRC_OFFLOAD: 0x01,
} as const;
/** Bits 4-7 of the flags byte: a train's segment count (train.ts); 0 for one packet. */
const FWD_TRAIN_SHIFT = 4;
/** The bits of the flags byte that must be zero. */
const FWD_FLAGS_RESERVED = 0x0e;

/** The flags byte of a frame: `icrcOffload`, and `train` segments (0: one packet). */
export function fwdFlagsByte(icrcOffload: boolean, train: number): number {
  return (icrcOffload ? FwdFlag.ICRC_OFFLOAD : 0) | ((train & 0x0f) << FWD_TRAIN_SHIFT);
}

/** The segment count of a train from a valid flags byte ({@link fwdFlags}); 0 for one packet. */
export function fwdTrain(flags: number): number {
  return flags >>> FWD_TRAIN_SHIFT;
}

/**
 * Write a frame's length word and header at `off` of `out` for a datagram of `payloadLen` bytes
 * that follows it (at `off + FWD_FRAME_HEAD`). `addrs`: 32 bytes, source then destination;
 * `flags`: the flags byte ({@link fwdFlagsByte}; reserved bits are not written).
 */
export function encodeFwdHeader(out: Uint8Array, off: number, family: 4 | 6, srcPort: number, addrs: Uint8Array, payloadLen: number, flags = 0): void {
  const n = FWD_HDR + payloadLen;
  out[off] = n >>> 24;
  out[off + 1] = (n >>> 16) & 0xff;
  out[off + 2] = (n >>> 8) & 0xff;
  out[off + 3] = n & 0xff;
  const h = off + FWD_LEN_BYTES;
  out[h + FwdOff.FAMILY] = family;
  out[h + FwdOff.FLAGS] = flags & ~FWD_FLAGS_RESERVED & 0xff;
  out[h + FwdOff.SRC_PORT] = (srcPort >>> 8) & 0xff;
  out[h + FwdOff.SRC_PORT + 1] = srcPort & 0xff;
  out.set(addrs.subarray(0, 32), h + FwdOff.SRC);
}

/** The family of a frame (after its length word), or 0 when it is neither 4 nor 6. */
export function fwdFamily(f: Uint8Array): 0 | 4 | 6 {
  const v = f[FwdOff.FAMILY];
  return v === 4 || v === 6 ? v : 0;
}

/**
 * The flags byte of a frame (after its length word), or -1 when it is malformed: a reserved bit
 * set, a segment count of 1, or a train without {@link FwdFlag.ICRC_OFFLOAD}.
 */
export function fwdFlags(f: Uint8Array): number {
  const v = f[FwdOff.FLAGS] ?? 0;
  const train = v >>> FWD_TRAIN_SHIFT;
  if ((v & FWD_FLAGS_RESERVED) !== 0 || train === 1 || (train !== 0 && (v & FwdFlag.ICRC_OFFLOAD) === 0)) return -1;
  return v;
}

/** The UDP source port of a frame (after its length word). */
export function fwdSrcPort(f: Uint8Array): number {
  return ((f[FwdOff.SRC_PORT] ?? 0) << 8) | (f[FwdOff.SRC_PORT + 1] ?? 0);
}

/** Whether `n` is a frame length the splitter accepts. */
export function fwdLengthOk(n: number): boolean {
  return n >= FWD_HDR && n <= FWD_MAX;
}

/**
 * Cuts a stream of frames, delivered in chunks of any size, into frames: each is handed on
 * (without its length word) as a view valid only during the call — of the chunk it arrived in when
 * it lies inside one, else of the splitter's own buffer, where a frame split across chunks is put
 * together (one buffer per splitter, made on the first split frame and kept: a stream of large
 * frames does not allocate one per frame). After a malformed length it hands on nothing more and
 * {@link push} returns false: the connection is to be closed.
 */
export class FwdFrameSplitter {
  /** Where a frame split across chunks is put together (length word first), once one was. */
  private part: Buffer | null = null;
  /** Bytes of the frame being put together so far (0: none). */
  private partLen = 0;
  /** Its whole size, length word included, once the length word is complete (else 0). */
  private partSize = 0;
  /** A malformed frame was seen. */
  private broken = false;

  constructor(private readonly onFrame: (frame: Buffer) => void) {}

  /** Feed one chunk. False once the stream is malformed. */
  push(chunk: Buffer): boolean {
    if (this.broken) return false;
    let off = 0;
    // First finish the frame an earlier chunk began: its length word, then its bytes.
    if (this.partLen > 0) {
      const part = this.part as Buffer;
      if (this.partLen < FWD_LEN_BYTES) {
        const k = Math.min(FWD_LEN_BYTES - this.partLen, chunk.length);
        chunk.copy(part, this.partLen, 0, k);
        this.partLen += k;
        off = k;
        if (this.partLen < FWD_LEN_BYTES) return true;
        const n = part.readUInt32BE(0);
        if (!fwdLengthOk(n)) return this.fail();
        this.partSize = FWD_LEN_BYTES + n;
      }
      const k = Math.min(this.partSize - this.partLen, chunk.length - off);
      chunk.copy(part, this.partLen, off, off + k);
      this.partLen += k;
      off += k;
      if (this.partLen < this.partSize) return true;
      const size = this.partSize;
      this.partLen = 0;
      this.partSize = 0;
      this.onFrame(part.subarray(FWD_LEN_BYTES, size));
      if (this.broken) return false;
    }
    while (chunk.length - off >= FWD_LEN_BYTES) {
      const n = chunk.readUInt32BE(off);
      if (!fwdLengthOk(n)) return this.fail();
      if (chunk.length - off - FWD_LEN_BYTES < n) break;
      this.onFrame(chunk.subarray(off + FWD_LEN_BYTES, off + FWD_LEN_BYTES + n));
      if (this.broken) return false;
      off += FWD_LEN_BYTES + n;
    }
    const rest = chunk.length - off;
    if (rest > 0) {
      if (rest >= FWD_LEN_BYTES) {
        const n = chunk.readUInt32BE(off);
        if (!fwdLengthOk(n)) return this.fail();
        this.partSize = FWD_LEN_BYTES + n;
      }
      const part = (this.part ??= Buffer.allocUnsafe(FWD_LEN_BYTES + FWD_MAX));
      chunk.copy(part, 0, off);
      this.partLen = rest;
    }
    return true;
  }

  /** Stop: nothing more is handed on (the frame handler may call it too). */
  fail(): false {
    this.broken = true;
    this.part = null;
    this.partLen = 0;
    return false;
  }
}
