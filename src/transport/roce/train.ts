/**
 * Trains: several packets of one message in one forwarding frame, the host path's segmentation
 * offload (as UDP GSO hands the kernel one buffer for many datagrams). A pure codec, no sockets.
 *
 * An RC or UC requester whose peer QP is on this host (and whose packets may leave their ICRC to
 * the host path, fwd-frame.ts `FwdFlag.ICRC_OFFLOAD`) sends consecutive full-MTU packets of a
 * SEND or RDMA WRITE that ask for no acknowledgement as one train: the first packet's headers
 * (BTH, and the RETH of a WRITE's FIRST), then the payload of every segment back to back, then the
 * four bytes of the uncomputed ICRC. The frame's flags byte carries the segment count. Segment
 * `i` is the packet the requester would have sent with PSN `psn + i`: the first keeps its
 * opcode, the others are the MIDDLE of the same operation, none has AckReq, SE or pad, each
 * carries `payloadLen / count` bytes. The receiver runs its checks and its responder on every
 * segment as on a packet of its own, so a train changes nothing a QP can see; it spares the
 * per-packet work of the layers in between (one frame, one copy from the sender's memory, one
 * header parse and QP lookup).
 *
 * A train is never the last packet of a message, never one that asks for an ACK (rxe's AckReq
 * on every last packet and every `RXE_MAX_PKT_PER_ACK`-th), and never sent while a capture, a
 * link impairment or the `tx` trace runs in the sending process, which see packets one by one.
 */
import { BthMask, BTH_LEN, IB_OPCODES, IbOpcode, type RocePacket } from '../../wire/roce/index.js';

/**
 * The most segments a train carries: its count fits the high nibble of the frame's flags byte,
 * and 15 segments of 4096 B with their headers fit one 64 KiB packet buffer.
 */
export const TRAIN_MAX = 15;
/** The fewest segments a train carries (one is a packet). */
export const TRAIN_MIN = 2;
/** The payload sizes a segment may have: the IB path MTUs (256 .. 4096 B). */
const SEGMENT_MIN = 256;
const SEGMENT_MAX = 4096;

/** The operation bits (the low five) of an opcode; its class (RC 0x00, UC 0x20) is the rest. */
const OP_BITS = 0x1f;
const CLASS_BITS = 0xe0;

/**
 * The opcode of a train's segments after the first (`op0`: the first's): the MIDDLE of the same
 * operation and class, or -1 when `op0` cannot start a train (only SEND and RDMA WRITE FIRST and
 * MIDDLE of RC and UC can).
 */
export function trainMiddleOpcode(op0: number): number {
  const cls = op0 & CLASS_BITS;
  if (cls !== 0x00 && cls !== 0x20) return -1;
  switch (op0 & OP_BITS) {
    case IbOpcode.RC_SEND_FIRST:
    case IbOpcode.RC_SEND_MIDDLE:
      return cls | IbOpcode.RC_SEND_MIDDLE;
    case IbOpcode.RC_RDMA_WRITE_FIRST:
    case IbOpcode.RC_RDMA_WRITE_MIDDLE:
      return cls | IbOpcode.RC_RDMA_WRITE_MIDDLE;
    default:
      return -1;
  }
}

/**
 * The payload bytes of each of `count` segments of the train whose first packet was parsed into
 * `p` (its payload being every segment's), or -1 when it is not a train: a count outside
 * {@link TRAIN_MIN} .. {@link TRAIN_MAX}, an opcode that cannot start one, AckReq, SE or pad set,
 * or a payload that does not split into equal segments of an IB MTU.
 */
export function trainSegmentLength(p: RocePacket, count: number): number {
  if (count < TRAIN_MIN || count > TRAIN_MAX || trainMiddleOpcode(p.opcode) < 0) return -1;
  if (p.ackReq || p.se || p.pad !== 0) return -1;
  const seg = p.payloadLen / count;
  if (!Number.isInteger(seg) || seg < SEGMENT_MIN || seg > SEGMENT_MAX || (seg & (seg - 1)) !== 0) return -1;
  return seg;
}

/**
 * Step `p` from segment `i - 1` of a train to segment `i` (`i` ≥ 1): its PSN, opcode (the
 * MIDDLE, `mid`) and payload window move on; everything else stays. `seg`: the segment's bytes;
 * `payload0`: where the first segment's payload starts.
 */
export function trainStep(p: RocePacket, i: number, mid: number, seg: number, payload0: number): void {
  if (i === 1) {
    const info = IB_OPCODES[mid]!;
    p.opcode = mid;
    p.info = info;
    p.mask = info.mask;
  }
  p.psn = (p.psn + 1) & 0xffffff;
  p.payloadOff = payload0 + i * seg;
  p.payloadLen = seg;
}

/**
 * The packets a train stands for, each as the wire would carry it but for its ICRC (four zero
 * bytes): for a packet capture. `p`: the train's first packet, parsed; `count` and `seg` from
 * {@link trainSegmentLength}. Allocates.
 */
export function expandTrain(p: RocePacket, count: number, seg: number): Buffer[] {
  const out: Buffer[] = [];
  const b = p.buf;
  const h0 = p.payloadOff - p.start;
  const mid = trainMiddleOpcode(p.opcode);
  const hMid = IB_OPCODES[mid]!.length;
  for (let i = 0; i < count; i++) {
    const h = i === 0 ? h0 : hMid;
    const pkt = Buffer.alloc(h + seg + 4);
    pkt.set(b.subarray(p.start, p.start + (i === 0 ? h0 : BTH_LEN)), 0);
    if (i > 0) {
      pkt[0] = mid;
      const psn = (p.psn + i) & 0xffffff;
      pkt[9] = psn >>> 16;
      pkt[10] = (psn >>> 8) & 0xff;
      pkt[11] = psn & 0xff;
    }
    pkt[8] = (pkt[8] as number) & ~BthMask.ACKREQ;
    pkt.set(b.subarray(p.payloadOff + i * seg, p.payloadOff + (i + 1) * seg), h);
    out.push(pkt);
  }
  return out;
}
