/**
 * What the UDP side of the soft RoCE device (udp.ts and its parts) hands a device: a received
 * datagram with where it came from, and the events of the forwarding between processes it counts.
 */

/** Where a received datagram came from and went to. */
export interface RxMeta {
  /** 4 or 6. */
  family: 4 | 6;
  /** Source IP (dotted quad or IPv6 text). */
  src: string;
  /** Destination IP: the local address of the socket it arrived on, or the multicast group. */
  dst: string;
  /** UDP source port. */
  srcPort: number;
  /** Handed over by another process of this host. */
  forwarded: boolean;
  /**
   * The packet's ICRC was not computed (fwd-frame.ts `FwdFlag.ICRC_OFFLOAD`): set only on the
   * host path (a packet of this process's engines for a QP of this host, or a forwarding frame
   * carrying the flag), never for a datagram read from UDP. The receive path skips the check.
   */
  icrcOffload: boolean;
  /**
   * A train's segment count (train.ts), 0 for one packet: set only on the host path, as
   * {@link icrcOffload}.
   */
  train: number;
}

/** What a device offers the port agent: its receive path and its counters. */
export interface RxSink {
  /** Device name, for traces. */
  readonly name: string;
  /** Receive one UDP payload (the agent has routed it to this process). */
  rxDatagram(buf: Buffer, meta: RxMeta): void;
  /** A datagram for this host, read from UDP here, for a running packet capture (`note`: its comment). */
  captureIn(buf: Buffer, meta: RxMeta, note?: string): void;
  /** One event of the forwarding between processes, counted in the device's `fwd_*` counter of that name. */
  fwdCount(e: FwdEvent): void;
}

/** What the forwarding between processes counts (the device counters of the same names). */
export type FwdEvent =
  /** A datagram handed to another process's socket (connected, verified). */
  | 'fwd_sent'
  /** A datagram written to a connection that then failed: lost. */
  | 'fwd_failed_drop'
  /** A datagram handed over by another process arrived. */
  | 'fwd_rcvd'
  /** A forwarding connection was opened (the cost of routing to another process). */
  | 'fwd_connect'
  /** A datagram from a process of another user that named a source address not of this host: dropped. */
  | 'fwd_forged_drop';
