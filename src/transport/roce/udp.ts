/**
 * The UDP side of the soft RoCE device: one {@link PortAgent} per process and RoCE UDP port
 * (4791 unless configured otherwise), shared by every soft RoCE device of the process.
 *
 * Several processes on one host use the same UDP port at once (a kernel rxe peer always sends to
 * 4791). docs/design/roce-device.md explains the design; the agent composes its parts and routes
 * each datagram to the process of its QP:
 *
 * - udp-sockets.ts: the UDP sockets — one per local address, bound with SO_REUSEADDR beside the
 *   other processes; one per multicast group received (the kernel copies multicast to each).
 * - qpn-blocks.ts: the abstract Unix names this process holds — its QPN blocks, claimed per user
 *   as `@rdmacm-roce-<port>-u<uid>-qpn-<block>` (unix-names.ts), and its published services.
 * - fwd-tx.ts / fwd-rx.ts: handing datagrams to the other processes of this host over those
 *   names, in frames (fwd-frame.ts), and taking what they hand over.
 * - udp-drops.ts: what the kernel dropped on this process's sockets (/proc).
 *
 * Routing: the kernel hands each unicast datagram to one process; that process reads the
 * destination QPN and, when the QPN is in a block of another process, forwards the datagram to
 * the block's holder, which runs every receive check itself. The design does not depend on which
 * socket the kernel picks. MADs (QPN 1) are routed by content: requests by service ID to the
 * process that listens on that service, replies by the block number carried in the communication
 * or request ID the requester chose. The router is installed by the connection manager part of
 * the transport ({@link PortAgent.gsiRouter}).
 */
import { BTH_LEN, GSI_QPN, IB_MULTICAST_QPN, ROCE_V2_UDP_PORT, SMI_QPN, bthQpn } from '../../wire/roce/index.js';
import { captureOn } from '../../verbs/capture.js';
import { CaptureNote } from './capture.js';
import { FwdRx } from './fwd-rx.js';
import { FwdTx } from './fwd-tx.js';
import { QpnBlocks, blockOfQpn, claimableBlock } from './qpn-blocks.js';
import { udpDrops } from './udp-drops.js';
import { UdpSockets } from './udp-sockets.js';
import { DirectoryView } from './unix-names.js';
import type { RxMeta, RxSink } from './datagram.js';
import type { RoceCounters } from './counters.js';

export type { FwdEvent, RxMeta, RxSink } from './datagram.js';

/** Where the GSI router sends a MAD: this process, another process's QPN block, a service name, or nowhere. */
export type GsiRoute = { to: 'local' } | { to: 'block'; block: number } | { to: 'service'; name: string } | { to: 'drop' };

/** A GSI router: looks at a datagram for QPN 1 (whole UDP payload, BTH first). */
export type GsiRouter = (pkt: Buffer) => GsiRoute;

/** How often {@link PortAgent.settle} looks again whether everything has left (ms). */
const SETTLE_POLL_MS = 5;

const agents = new Map<number, PortAgent>();

/** The UDP port soft RoCE devices use: `RDMACM_ROCE_PORT`, else 4791. */
export function defaultRocePort(): number {
  const v = Number(process.env['RDMACM_ROCE_PORT'] ?? '');
  return Number.isInteger(v) && v > 0 && v < 65536 ? v : ROCE_V2_UDP_PORT;
}

/** The process's agent for UDP port `port`. */
export class PortAgent {
  /** The UDP port (destination port of every datagram sent, and the port bound). */
  readonly port: number;
  /** Routes datagrams for QPN 1; by default they stay in this process. */
  gsiRouter: GsiRouter = () => ({ to: 'local' });
  /** The UDP sockets. */
  readonly sockets: UdpSockets;
  /** The QPN blocks and services this process holds. */
  private readonly blocks: QpnBlocks;
  /** Forwarding to other processes of this host. */
  private readonly fwdTx: FwdTx;
  /** Forwarding from other processes of this host. */
  private readonly fwdRx: FwdRx;

  private constructor(port: number) {
    this.port = port;
    const directory = new DirectoryView(port);
    this.sockets = new UdpSockets(port, (sink, msg, meta) => {
      // A datagram read here for another process: captured here, as that process captures it
      // as forwarded to it (the device's own receive entry captures what stays).
      if (captureOn && this.leavesProcess(msg)) sink.captureIn(msg, meta, CaptureNote.FORWARDED_OUT);
      this.route(sink, msg, meta);
    });
    this.fwdRx = new FwdRx((key) => this.sockets.sinkOf(key));
    this.blocks = new QpnBlocks(
      port,
      directory,
      (c) => this.fwdRx.accept(c),
      (b) => this.fwdTx.forgetDeadBlock(b),
    );
    this.fwdTx = new FwdTx(port, this.blocks, directory);
  }

  /** The agent of `port` (created on first use). */
  static get(port = defaultRocePort()): PortAgent {
    let a = agents.get(port);
    if (a === undefined) {
      a = new PortAgent(port);
      agents.set(port, a);
    }
    return a;
  }

  // -- QPN blocks and services -------------------------------------------------------------------

  /** The abstract socket name of QPN block `block` in this user's namespace. */
  blockName(block: number): string {
    return this.blocks.blockName(block);
  }

  /**
   * The abstract name through which the holder of QPN block `block` is reached: the one a
   * forwarding connection to it was made to, else this user's name for it.
   */
  blockHolderName(block: number): string {
    return this.fwdTx.holderName(block);
  }

  /** The blocks this process owns. */
  ownedBlocks(): number[] {
    return this.blocks.owned();
  }

  /** Whether QPN `qpn` is in a block of this process. */
  ownsQpn(qpn: number): boolean {
    return this.blocks.owns(blockOfQpn(qpn));
  }

  /**
   * A free QP number of this process (claiming a block when none has room).
   * @throws RdmaError ENOMEM when no block can be claimed.
   */
  allocQpn(): number {
    return this.blocks.allocQpn();
  }

  /** A QPN block of this process (claimed now if it has none): CM request IDs carry it. */
  anyBlock(): number {
    return this.blocks.anyBlock();
  }

  /** Give QP number `qpn` back. */
  releaseQpn(qpn: number): void {
    this.blocks.releaseQpn(qpn);
  }

  /**
   * Publish service `key` so GSI requests for it are forwarded here; false when another process
   * already publishes it (qpn-blocks.ts).
   */
  publishService(key: string): boolean {
    return this.blocks.publishService(key);
  }

  /** Withdraw a published service. */
  withdrawService(key: string): void {
    this.blocks.withdrawService(key);
  }

  /** Whether published service `key` holds the event loop (qpn-blocks.ts). */
  holdService(key: string, on: boolean): void {
    this.blocks.holdService(key, on);
  }

  // -- sockets -----------------------------------------------------------------------------------

  /** A QP was created (`+1`) or destroyed (`-1`): while QPs exist the sockets hold the event loop open. */
  holdQp(delta: 1 | -1): void {
    this.sockets.holdQp(delta);
  }

  /** Receive datagrams for `sink` on local address `ip` (udp-sockets.ts). */
  bindLocal(sink: RxSink, ip: string, family: 4 | 6, zone: string): void {
    this.sockets.bindLocal(sink, ip, family, zone);
  }

  /** Stop receiving for `sink`. */
  unbindSink(sink: RxSink): void {
    this.sockets.unbindSink(sink);
  }

  /**
   * Send one datagram from local address `src` to `dst` (port {@link port}); a group datagram
   * with `loop` false is not looped back to this host (udp-sockets.ts).
   * @returns false when `src` is not a bound local address of this process.
   */
  send(buf: Buffer, len: number, src: string, dst: string, ttl: number, multicast: boolean, loop = true, ctr?: RoceCounters): boolean {
    return this.sockets.send(buf, len, src, dst, ttl, multicast, loop, ctr);
  }

  /** Whether local address `src` is bound here (a send from it would go out). */
  bound(src: string): boolean {
    return this.sockets.bound(src);
  }

  /**
   * Receive multicast group `group` for `sink`, joined on the interface of `ifaceIp`.
   * @throws Error (Node's) when the group's socket cannot be opened, bound or joined.
   */
  joinGroup(sink: RxSink, group: string, family: 4 | 6, ifaceIp: string): void {
    this.sockets.joinGroup(sink, group, family, ifaceIp);
  }

  /** Drop one reference to group `group`; the last one leaves it. */
  leaveGroup(group: string): void {
    this.sockets.leaveGroup(group);
  }

  // -- routing -----------------------------------------------------------------------------------

  /**
   * Whether a datagram (UDP payload, BTH first) for this host goes to another process: its
   * destination QPN is in a block this process does not own. MADs (QPN 1, routed by content),
   * multicast and anything too short to route count as staying here.
   */
  leavesProcess(buf: Buffer): boolean {
    if (buf.length < BTH_LEN) return false;
    const qpn = bthQpn(buf, 0);
    if (qpn === IB_MULTICAST_QPN || qpn === SMI_QPN || qpn === GSI_QPN) return false;
    const block = blockOfQpn(qpn);
    return claimableBlock(block) && !this.blocks.owns(block);
  }

  /**
   * Deliver a datagram to the process it is for: this one (to `sink`) or, by destination QPN
   * (and MAD contents for QPN 1), another process of this host. Used for datagrams the kernel
   * handed to this process and for datagrams this process sends to its own host, which go
   * straight to their owner instead of through the kernel's choice of socket.
   */
  route(sink: RxSink, msg: Buffer, meta: RxMeta): void {
    if (msg.length < BTH_LEN) {
      sink.rxDatagram(msg, meta); // too short to route: the device drops and counts it
      return;
    }
    const qpn = bthQpn(msg, 0);
    if (qpn === IB_MULTICAST_QPN || qpn === SMI_QPN) {
      sink.rxDatagram(msg, meta);
      return;
    }
    if (qpn === GSI_QPN) {
      this.routeMad(sink, msg, meta);
      return;
    }
    const block = blockOfQpn(qpn);
    if (!claimableBlock(block) || this.blocks.owns(block)) {
      sink.rxDatagram(msg, meta);
      return;
    }
    this.fwdTx.toBlock(sink, block, msg, meta);
  }

  /** {@link route} for a MAD: where the GSI router says. */
  private routeMad(sink: RxSink, msg: Buffer, meta: RxMeta): void {
    let r: GsiRoute;
    try {
      r = this.gsiRouter(msg);
    } catch {
      r = { to: 'local' };
    }
    if (r.to === 'local' || r.to === 'drop') sink.rxDatagram(msg, meta);
    else if (r.to === 'block') {
      // A communication ID that names no QPN block any process can hold is answered here.
      if (this.blocks.owns(r.block) || !claimableBlock(r.block)) sink.rxDatagram(msg, meta);
      else this.fwdTx.toBlock(sink, r.block, msg, meta);
    } else if (this.blocks.publishes(r.name)) sink.rxDatagram(msg, meta);
    else this.fwdTx.toService(sink, r.name, msg, meta);
  }

  // -- the process's end, statistics ------------------------------------------------------------

  /**
   * Resolves once every datagram posted so far has left this process, or after `timeoutMs` (for
   * `settleConnections` before `process.exit()`): first one turn of the event loop (datagrams to
   * this host's own addresses are handed over in a microtask), then until no UDP socket holds
   * datagrams the kernel could not take yet and every datagram handed to another process has
   * been written to its Unix socket. A datagram a UDP socket sent is the kernel's: it survives
   * the process.
   */
  async settle(timeoutMs: number): Promise<void> {
    const end = Date.now() + timeoutMs;
    await new Promise((r) => setImmediate(r));
    while (Date.now() < end && (this.fwdTx.unsent() || this.sockets.unsent())) await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
  }

  /**
   * Datagrams the kernel dropped for `sink` because a receive buffer of this process was full
   * (its unicast sockets and its groups' sockets; see udp-sockets.ts `roceSockBufSize`).
   */
  socketDrops(sink: RxSink): number {
    const drops = udpDrops(this.port);
    if (drops.size === 0) return 0;
    let n = 0;
    for (const a of this.sockets.addressesOf(sink)) n += drops.get(a) ?? 0;
    return n;
  }

  /** Close every socket and listener of this agent (tests; a process normally keeps them). */
  close(): void {
    this.sockets.close();
    this.blocks.close();
    this.fwdTx.close();
    agents.delete(this.port);
  }
}
