/**
 * The UDP side of the soft RoCE device: one {@link PortAgent} per process and RoCE UDP port
 * (4791 unless configured otherwise), shared by every soft RoCE device of the process.
 *
 * Several processes on one host use the same UDP port at once (a kernel rxe peer always sends to
 * 4791). docs/design/roce.md explains the design; in short:
 *
 * - **QPN blocks.** Every process owns blocks of {@link QPN_BLOCK_SIZE} QP numbers. A block is
 *   claimed by listening on the abstract Unix socket `@rdmacm-roce-<port>-u<uid>-qpn-<block>`
 *   (unix-names.ts): the name is unique in the network namespace and goes away with the process,
 *   so a crashed process leaves nothing behind, and each user claims in a namespace of its own.
 *   Node binds a Unix listener synchronously inside `listen()`, so the claim is decided before
 *   `ibv_create_qp` returns. Blocks and the QPNs in them are drawn at random (CSPRNG).
 * - **Unicast.** Every process binds the port on each local address of its devices with
 *   SO_REUSEADDR. Linux hands each unicast datagram to one of those sockets (the most recently
 *   bound one that is still open); whichever process gets a datagram looks at the destination
 *   QPN and, when the QPN belongs to a block of another process, forwards it over that block's
 *   Unix socket. The owner then runs every receive check itself. The design does not depend on
 *   which socket the kernel picks.
 * - **Multicast.** A process with a QP attached to a group binds a socket to the group address
 *   and joins the group on the interface: the kernel gives every such socket its own copy, so
 *   multicast needs no forwarding.
 * - **GSI (QPN 1).** MADs are routed by content: requests by service ID to the process that
 *   listens on that service (`@rdmacm-roce-<port>-svc-<service id>`), replies by the block
 *   number carried in the communication or request ID the requester chose. The router is
 *   installed by the connection manager part of the transport ({@link PortAgent.gsiRouter}).
 *
 * Datagrams handed between processes travel in frames on those Unix sockets (fwd-frame.ts). Who
 * may hand over what: a process of this user or root's, any datagram; a process of another user,
 * only datagrams from this host's own addresses (what it could send over UDP itself), checked by
 * the credentials of its connection (SO_PEERCRED, through the netopt addon; without the addon
 * every connection counts as another user's).
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { endianness, networkInterfaces } from 'node:os';
import { err } from '../../errors.js';
import { trace, tracing } from '../../trace.js';
import { parseIpv4, parseIpv6, formatIpv4 } from '../../util/ip.js';
import { ROCE_V2_UDP_PORT, GSI_QPN, IB_MULTICAST_QPN } from '../../wire/roce/index.js';
import { formatIpv6 } from './gid.js';
import { allowZeroChecksum6, setPmtuProbe } from './sockopt.js';
import { impairedSend, impairing } from './impair.js';
import { random } from '../../util/random.js';
import { FWD_FRAME_HEAD, FwdFrameSplitter, FwdOff, encodeFwdHeader, fwdFamily, fwdSrcPort } from './fwd-frame.js';
import { PROCESS_UID, ROOT_UID, blockSocketName, peerUid, readDirectory, serviceSocketName, trustedUid, uidOfBlockName, type RoceDirectory } from './unix-names.js';

/** QP numbers per block: 1024 (a process claims more blocks when it needs them). */
export const QPN_BLOCK_SHIFT = 10;
/** See {@link QPN_BLOCK_SHIFT}. */
export const QPN_BLOCK_SIZE = 1 << QPN_BLOCK_SHIFT;
/**
 * Blocks a process may claim: 1 .. 16382. Block 0 holds the special QPNs 0 and 1; the last block
 * holds the multicast QPN 0xFFFFFF.
 */
export const FIRST_BLOCK = 1;
/** See {@link FIRST_BLOCK}. */
export const LAST_BLOCK = (1 << (24 - QPN_BLOCK_SHIFT)) - 2;

/** Bytes of the buffer reads of forwarding connections land in (up to 60 frames of 4 KiB). */
const FWD_READ_SIZE = 256 * 1024;
/** How long a Unix name or QPN block that had no holder is not tried again (ms). */
const DEAD_NAME_MS = 1000;
/** Entries of each address cache of the forwarding path before it starts over. */
const ADDR_CACHE_MAX = 1024;
/**
 * Forwarding connections to a QPN block not known to be held that may be tried at once, and
 * how many more a second (a token bucket): past them, a block is looked up in the namespace's
 * directory of held blocks instead (`/proc/net/unix`), so datagrams to random QPNs cost no
 * `connect()` each.
 */
const FWD_CONNECT_BURST = 32;
/** See {@link FWD_CONNECT_BURST}. */
const FWD_CONNECT_RATE_PER_S = 16;
/** How long a snapshot of the held blocks answers lookups (ms). */
const HELD_FRESH_MS = 1000;
/** The shortest time between two reads of the held blocks (ms). */
const HELD_REREAD_MS = 250;
/** How long the list of this host's addresses is kept before it is read again (ms). */
const HOST_ADDRS_MS = 5000;

/**
 * Bytes kept free in front of every packet from {@link packetBuffer}: a forwarding frame's length
 * word and header, so that a packet for another process of this host is framed in place.
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
 * slab in front of it that belong to it alone: forwarded to another process, the packet is
 * framed there instead of being copied into a frame. Pass it on whole (its first byte first, as
 * `buf` or `buf.subarray(0, n)`).
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
}

/** What a device offers the agent: its receive path and its addresses. */
export interface RxSink {
  /** Device name, for traces. */
  readonly name: string;
  /** Receive one UDP payload (the agent has routed it to this process). */
  rxDatagram(buf: Buffer, meta: RxMeta): void;
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

/** Where the GSI router sends a MAD: this process, another process's QPN block, a service name, or nowhere. */
export type GsiRoute = { to: 'local' } | { to: 'block'; block: number } | { to: 'service'; name: string } | { to: 'drop' };

/** A GSI router: looks at a datagram for QPN 1 (whole UDP payload, BTH first). */
export type GsiRouter = (pkt: Buffer) => GsiRoute;

interface LocalSock {
  sock: dgram.Socket;
  family: 4 | 6;
  ip: string;
  sinks: Set<RxSink>;
  mcastIf: boolean;
  ttl: number;
  mcastTtl: number;
}

interface GroupSock {
  sock: dgram.Socket;
  refs: number;
  sink: RxSink;
}

/** Read the 24-bit destination QPN of a BTH at the head of `b` (no length check). */
function bthDestQpn(b: Buffer): number {
  return ((b[5] ?? 0) << 16) | ((b[6] ?? 0) << 8) | (b[7] ?? 0);
}

/** This host's addresses as hex keys (4 bytes for IPv4, 16 for IPv6; `::1` included). */
function hostAddressKeys(): Set<string> {
  const out = new Set<string>(['00000000000000000000000000000001']);
  const scratch = Buffer.alloc(16);
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      const fam = a.family === 'IPv4' || (a.family as unknown) === 4 ? 4 : 6;
      addrBytes(ipKeyOf(a.address), fam, scratch, 0);
      out.add(scratch.toString('hex', 0, fam === 4 ? 4 : 16));
    }
  }
  return out;
}

/** The order in which holders of a QPN block are tried: this user's, root's, then any other's. */
function rank(uid: number): number {
  return uid === PROCESS_UID ? 0 : uid === ROOT_UID ? 1 : 2;
}

/** 16 bytes of an address (IPv4 in the first four). */
function addrBytes(ip: string, family: 4 | 6, out: Buffer, off: number): void {
  out.fill(0, off, off + 16);
  if (family === 4) {
    const v = parseIpv4(ip) ?? 0;
    out.writeUInt32BE(v >>> 0, off);
    return;
  }
  const w = parseIpv6(ip) ?? [];
  for (let k = 0; k < 8; k++) out.writeUInt16BE(w[k] ?? 0, off + 2 * k);
}

function addrText(b: Buffer, off: number, family: 4 | 6): string {
  if (family === 4) return formatIpv4(b.readUInt32BE(off));
  return formatIpv6(b.subarray(off, off + 16));
}

/** The key under which a local address is known (IPv6 zone dropped, lower case). */
function ipKeyOf(ip: string): string {
  const i = ip.indexOf('%');
  return (i < 0 ? ip : ip.slice(0, i)).toLowerCase();
}

/** Datagrams a socket holds that the kernel has not taken yet (a closed socket: none). */
function sendQueued(s: dgram.Socket): boolean {
  try {
    return s.getSendQueueCount() > 0;
  } catch {
    return false;
  }
}

const agents = new Map<number, PortAgent>();

/**
 * SO_RCVBUF and SO_SNDBUF asked for every RoCE socket: `RDMACM_ROCE_SOCKBUF` bytes, else 4 MiB.
 * Linux's default (about 208 KiB) holds only some 25 datagrams of 4 KiB: a burst of UD sends
 * overflows it and the kernel drops the rest. The kernel caps the request at
 * `net.core.rmem_max` / `wmem_max` (setsockopt SO_RCVBUF / SO_SNDBUF, no error).
 */
export function roceSockBufSize(): number {
  const v = Number(process.env['RDMACM_ROCE_SOCKBUF'] ?? '');
  return Number.isInteger(v) && v > 0 ? v : 4 << 20;
}

/**
 * Datagrams the kernel dropped on this process's UDP sockets of port `port` (receive buffer
 * full, the "drops" column of /proc/net/udp and udp6), by local address (the address each socket
 * is bound to: a local address or a group). Sockets are told apart from other processes' by their
 * inode among this process's descriptors. Empty where /proc cannot be read.
 */
function udpDrops(port: number): Map<string, number> {
  const out = new Map<string, number>();
  let mine: Set<string>;
  try {
    mine = new Set();
    for (const fd of readdirSync('/proc/self/fd')) {
      try {
        const l = readlinkSync(`/proc/self/fd/${fd}`);
        if (l.startsWith('socket:[')) mine.add(l.slice(8, -1));
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    return out;
  }
  const little = endianness() === 'LE';
  for (const [file, family] of [['/proc/net/udp', 4], ['/proc/net/udp6', 6]] as const) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      const local = f[1];
      const inode = f[9];
      const drops = Number(f[12]);
      if (!local || !inode || !mine.has(inode) || !Number.isFinite(drops)) continue;
      const [hex, portHex] = local.split(':');
      if (!hex || parseInt(portHex ?? '', 16) !== port) continue;
      const b = Buffer.alloc(hex.length / 2);
      for (let w = 0; w < b.length / 4; w++) {
        for (let k = 0; k < 4; k++) b[w * 4 + k] = parseInt(hex.slice(w * 8 + (little ? 6 - 2 * k : 2 * k), w * 8 + (little ? 8 - 2 * k : 2 * k + 2)), 16);
      }
      const key = addrText(b.length === 4 ? Buffer.concat([b, Buffer.alloc(12)]) : b, 0, family);
      out.set(key, (out.get(key) ?? 0) + drops);
    }
  }
  return out;
}

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
  /** Whether the sockets send IPv4 datagrams with IP ID 0 (see sockopt.ts). */
  ipIdZero = false;
  private readonly blocks = new Map<number, net.Server>();
  private readonly services = new Map<string, net.Server>();
  private readonly qpnsInUse = new Set<number>();
  /** QPNs in use per owned block (a full block is skipped without a scan). */
  private readonly usedInBlock = new Map<number, number>();
  private readonly locals = new Map<string, LocalSock>();
  private readonly groups = new Map<string, GroupSock>();
  private readonly fwd = new Map<string, net.Socket>();
  /** Datagrams written to a service's connection still being made, taken here if it fails. */
  private readonly unconfirmed = new Map<net.Socket, [Buffer, RxMeta][]>();
  private readonly sinksByIp = new Map<string, RxSink>();
  /** Abstract names that refused a connection lately, with the time they may be tried again. */
  private readonly deadNames = new Map<string, number>();
  /** Per QPN block, the time until which it is known to have no holder (0: not known). */
  private readonly deadBlocks = new Float64Array(LAST_BLOCK + 1);
  /** The name each QPN block's holder is reached through while a forwarding connection to it is open (by block). */
  private readonly blockRoutes = new Map<number, string>();
  /** What the namespace's processes hold: QPN blocks and their holders' user IDs, services ({@link readDirectory}). */
  private held: RoceDirectory = { blocks: new Map(), services: new Set() };
  /** When {@link held} was read (performance.now() ms; -Infinity: never). */
  private heldAt = -Infinity;
  /** Tokens left for connections to blocks not known to be held ({@link FWD_CONNECT_BURST}). */
  private connectTokens = FWD_CONNECT_BURST;
  /** When the tokens were last refilled (performance.now() ms). */
  private tokensAt = performance.now();
  /** This host's addresses, as 16-byte keys ({@link isHostAddress}), and when they were read. */
  private hostAddrs = new Set<string>();
  private hostAddrsAt = -Infinity;
  /** Live QPs of this process: while there are some, the sockets keep the process alive. */
  private liveQps = 0;
  /** Frame address bytes by source and destination text ({@link frameAddrs}). */
  private readonly fwdAddrs = new Map<string, Map<string, Buffer>>();
  /** IPv4 address texts by value ({@link frameAddrText}). */
  private readonly v4Text = new Map<number, string>();
  /** {@link blockName} by block number. */
  private readonly blockNames = new Map<number, string>();
  /** The buffer every read of a forwarding connection lands in ({@link acceptForward}). */
  private fwdRead: Buffer | null = null;
  /** Forwarding connections corked since the last {@link uncorkAll} (one writev per burst). */
  private corked: net.Socket[] = [];
  private readonly uncorkAll = (): void => {
    // A new list first: a connection corked while these are uncorked gets its own microtask.
    const list = this.corked;
    this.corked = [];
    for (let i = 0; i < list.length; i++) (list[i] as net.Socket).uncork();
  };

  private constructor(port: number) {
    this.port = port;
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

  // -- QPN blocks ----------------------------------------------------------------------------

  /**
   * The abstract socket name of QPN block `block` in this user's namespace (made once per block:
   * routing asks per packet).
   */
  blockName(block: number): string {
    let n = this.blockNames.get(block);
    if (n === undefined) {
      n = blockSocketName(this.port, PROCESS_UID, block);
      if (this.blockNames.size >= ADDR_CACHE_MAX) this.blockNames.clear();
      this.blockNames.set(block, n);
    }
    return n;
  }

  /**
   * The abstract name through which the holder of QPN block `block` is reached: the one a
   * forwarding connection to it was made to, else this user's name for it.
   */
  blockHolderName(block: number): string {
    return this.blockRoutes.get(block) ?? this.blockName(block);
  }

  /** The abstract socket name of a service directory entry. */
  serviceName(key: string): string {
    return serviceSocketName(this.port, key);
  }

  /** The blocks this process owns. */
  ownedBlocks(): number[] {
    return [...this.blocks.keys()];
  }

  /**
   * Whether a datagram (UDP payload, BTH first) for this host goes to another process: its
   * destination QPN is in a block this process does not own. MADs (QPN 1, routed by content),
   * multicast and anything too short to route count as staying here.
   */
  leavesProcess(buf: Buffer): boolean {
    if (buf.length < 12) return false;
    const qpn = bthDestQpn(buf);
    if (qpn === IB_MULTICAST_QPN || qpn === 0 || qpn === GSI_QPN) return false;
    const block = qpn >>> QPN_BLOCK_SHIFT;
    return block >= FIRST_BLOCK && block <= LAST_BLOCK && !this.blocks.has(block);
  }

  /** Whether QPN `qpn` is in a block of this process. */
  ownsQpn(qpn: number): boolean {
    return this.blocks.has(qpn >>> QPN_BLOCK_SHIFT);
  }

  /**
   * A free QP number of this process (claiming a block when none has room).
   * @throws RdmaError ENOMEM when no block can be claimed.
   */
  allocQpn(): number {
    for (const b of this.blocks.keys()) {
      const n = this.freeIn(b);
      if (n >= 0) return this.take(n);
    }
    const b = this.claimBlock();
    return this.take(this.freeIn(b));
  }

  /** A QPN block of this process (claimed now if it has none): CM request IDs carry it. */
  anyBlock(): number {
    for (const b of this.blocks.keys()) return b;
    return this.claimBlock();
  }

  /** Give QP number `qpn` back. */
  releaseQpn(qpn: number): void {
    if (!this.qpnsInUse.delete(qpn)) return;
    const b = qpn >>> QPN_BLOCK_SHIFT;
    this.usedInBlock.set(b, (this.usedInBlock.get(b) ?? 1) - 1);
  }

  /**
   * A QP was created (`+1`) or destroyed (`-1`). While QPs exist the UDP sockets hold the event
   * loop open, as a connection does for iWARP; without any the process may end.
   */
  holdQp(delta: 1 | -1): void {
    const before = this.liveQps;
    this.liveQps = Math.max(0, before + delta);
    if ((before === 0) === (this.liveQps === 0)) return;
    for (const ls of this.locals.values()) this.applyRef(ls.sock);
    for (const g of this.groups.values()) this.applyRef(g.sock);
  }

  private applyRef(s: dgram.Socket): void {
    try {
      if (this.liveQps > 0) s.ref();
      else s.unref();
    } catch {
      // closed socket
    }
  }

  private take(n: number): number {
    this.qpnsInUse.add(n);
    const b = n >>> QPN_BLOCK_SHIFT;
    this.usedInBlock.set(b, (this.usedInBlock.get(b) ?? 0) + 1);
    return n;
  }

  /**
   * A free QPN of block `b` drawn at random (CSPRNG), or -1 when the block is full. Block 1..
   * never hands out QPN 0 or 1 (they are in block 0, which no process claims). rxe hands QPNs out
   * in sequence; ours are part of what an off-path sender must guess.
   */
  private freeIn(b: number): number {
    if ((this.usedInBlock.get(b) ?? 0) >= QPN_BLOCK_SIZE) return -1;
    const base = b << QPN_BLOCK_SHIFT;
    const start = random.below(QPN_BLOCK_SIZE);
    for (let k = 0; k < QPN_BLOCK_SIZE; k++) {
      const n = base + ((start + k) & (QPN_BLOCK_SIZE - 1));
      if (!this.qpnsInUse.has(n)) return n;
    }
    return -1;
  }

  /**
   * Claim a free block: listen on its name in this user's namespace, trying blocks from a random
   * one (CSPRNG) on, and skipping those any user's process of the namespace holds (the held
   * blocks are read once, from /proc/net/unix), so that the QPN space stays one mapping from QPN
   * to process. A name of this user's that another user's process listens on (a squatter) is
   * busy: the next block is tried.
   */
  private claimBlock(): number {
    this.held = readDirectory(this.port);
    this.heldAt = performance.now();
    const held = this.held.blocks;
    const span = LAST_BLOCK - FIRST_BLOCK + 1;
    const start = random.below(span);
    for (let pass = 0; pass < 2; pass++) {
      for (let k = 0; k < span; k++) {
        const b = FIRST_BLOCK + ((start + k) % span);
        if (this.blocks.has(b)) continue;
        // First pass: blocks nobody holds; second: any this user's namespace has free.
        if (pass === 0 && held.has(b)) continue;
        const srv = this.listenSync(this.blockName(b));
        if (srv) {
          this.blocks.set(b, srv);
          this.usedInBlock.set(b, 0);
          this.deadBlocks[b] = 0;
          if (tracing('qp')) trace('qp', `roce:${this.port}`, `claimed QPN block ${b} (0x${(b << QPN_BLOCK_SHIFT).toString(16)}..)`);
          return b;
        }
      }
    }
    throw err('ENOMEM', 'ibv_create_qp', 'no free QPN block');
  }

  /** Listen on an abstract name; the server when the name was free, else undefined. */
  private listenSync(name: string): net.Server | undefined {
    const srv = net.createServer({ pauseOnConnect: true }, (c) => this.acceptForward(c));
    srv.on('error', () => {
      // A name in use is reported here on the next tick; the caller already saw `listening` false.
    });
    srv.listen(name);
    if (!srv.listening) {
      srv.close(() => {});
      return undefined;
    }
    srv.unref();
    return srv;
  }

  /**
   * Publish service `key` (a hex service ID, maybe with an address) so GSI requests for it are
   * forwarded here. Returns false when another process already publishes it. The published name
   * holds the event loop open, as a listening TCP server does, until {@link withdrawService}.
   */
  publishService(key: string): boolean {
    if (this.services.has(key)) return true;
    const srv = this.listenSync(this.serviceName(key));
    if (!srv) return false;
    srv.ref();
    this.services.set(key, srv);
    return true;
  }

  /** Withdraw a published service. */
  withdrawService(key: string): void {
    const srv = this.services.get(key);
    if (!srv) return;
    this.services.delete(key);
    srv.close();
  }

  // -- sockets ---------------------------------------------------------------------------------

  /**
   * A UDP socket sharing the port (SO_REUSEADDR). Addresses here are always IP literals, so the
   * socket's lookup answers at once: Node's default (`dns.lookup`) answers an IP literal on the
   * next tick, which would make every bind and every send wait for it — a process posting a send
   * and exiting at once would lose the datagram. With it, `bind` completes and `send` reaches the
   * kernel (libuv sends at once when nothing is queued) before `ibv_post_send` returns.
   */
  private socket(family: 4 | 6): dgram.Socket {
    const lookup = (address: string, _opts: unknown, cb: (e: Error | null, address: string, family: number) => void): void => cb(null, address, family);
    const size = roceSockBufSize();
    return dgram.createSocket({
      type: family === 4 ? 'udp4' : 'udp6',
      reuseAddr: true,
      ipv6Only: family === 6,
      lookup: lookup as never,
      recvBufferSize: size,
      sendBufferSize: size,
    });
  }

  /**
   * Receive datagrams for `sink` on local address `ip` (binds the port on it unless this process
   * already has). The bind completes before this returns (see {@link socket}); a failure is traced,
   * not thrown (the address may have gone away).
   */
  bindLocal(sink: RxSink, ip: string, family: 4 | 6, zone: string): void {
    const key = ipKeyOf(ip);
    this.sinksByIp.set(key, sink);
    let ls = this.locals.get(key);
    if (ls) {
      ls.sinks.add(sink);
      return;
    }
    const sock = this.socket(family);
    ls = { sock, family, ip: key, sinks: new Set([sink]), mcastIf: false, ttl: 64, mcastTtl: 1 };
    this.locals.set(key, ls);
    const bindIp = family === 6 && zone !== '' ? `${key}%${zone}` : key;
    sock.on('message', (msg, rinfo) => this.onUnicast(msg, rinfo, key, family));
    sock.on('error', (e) => {
      if (tracing('rx')) trace('rx', `roce:${this.port}`, `socket ${bindIp}: ${e.message}`);
    });
    const bound = ls;
    sock.bind({ port: this.port, address: bindIp, exclusive: false }, () => {
      if (family === 4 && setPmtuProbe(sock)) this.ipIdZero = true;
      if (family === 6) allowZeroChecksum6(sock);
      // Multicast leaves by this address's interface, and loops back to this host's other
      // receivers; set before any send queued during the bind goes out.
      try {
        sock.setMulticastInterface(family === 4 ? key : `::%${zone || 'lo'}`);
        sock.setMulticastLoopback(true);
        bound.mcastIf = true;
      } catch {
        // an interface without multicast: group sends fail, unicast is unaffected
      }
    });
    this.applyRef(sock);
  }

  /** Stop receiving for `sink` (sockets no other device uses are closed). */
  unbindSink(sink: RxSink): void {
    for (const [key, ls] of this.locals) {
      ls.sinks.delete(sink);
      if (ls.sinks.size === 0) {
        this.locals.delete(key);
        ls.sock.close();
      }
    }
    for (const [k, s] of this.sinksByIp) if (s === sink) this.sinksByIp.delete(k);
  }

  /**
   * Send one datagram from local address `src` to `dst` (port {@link port}). `ttl` is the IP TTL
   * / hop limit; for a multicast destination the multicast TTL, on the interface of `src`.
   * @returns false when `src` is not a bound local address of this process.
   */
  send(buf: Buffer, len: number, src: string, dst: string, ttl: number, multicast: boolean): boolean {
    const ls = this.locals.get(ipKeyOf(src));
    if (!ls) return false;
    const sock = ls.sock;
    if (multicast) {
      if (!ls.mcastIf && sock.listenerCount('listening') === 0) return false;
      if (ls.mcastTtl !== ttl) {
        try {
          sock.setMulticastTTL(ttl);
          ls.mcastTtl = ttl;
        } catch {
          // before bind: keep the default
        }
      }
    } else if (ls.ttl !== ttl) {
      try {
        sock.setTTL(ttl);
        ls.ttl = ttl;
      } catch {
        // before bind: keep the default
      }
    }
    if (impairing()) impairedSend(buf, () => sock.send(buf, 0, len, this.port, dst));
    else sock.send(buf, 0, len, this.port, dst);
    return true;
  }

  /**
   * Receive the multicast group `group` (dotted quad or IPv6 text) for `sink`, joined on the
   * interface of local address `ifaceIp`. Reference counted with {@link leaveGroup}.
   *
   * The group's socket is opened, bound and joined before this returns: its lookup answers at
   * once (see {@link socket}), so Node runs the bind — where libuv creates the socket — and the
   * `listening` callback within `bind()`, and reports a failure there as an `error` event.
   * @throws Error (Node's, with the errno name in `code`: EMFILE, ENFILE, ENOMEM, ENOBUFS,
   *   EADDRNOTAVAIL, …) when the socket cannot be opened, bound or joined to the group; the socket
   *   is closed and nothing of the group is kept.
   */
  joinGroup(sink: RxSink, group: string, family: 4 | 6, ifaceIp: string): void {
    const key = ipKeyOf(group);
    const g = this.groups.get(key);
    if (g) {
      g.refs++;
      return;
    }
    const sock = this.socket(family);
    let failure: Error | null = null;
    let joined = false;
    const onBindError = (e: Error): void => {
      failure ??= e;
    };
    sock.on('error', onBindError);
    try {
      sock.bind({ port: this.port, address: key, exclusive: false }, () => {
        if (family === 6) allowZeroChecksum6(sock);
        try {
          sock.addMembership(key, family === 4 ? ifaceIp : undefined);
          joined = true;
        } catch (e) {
          failure ??= e as Error;
        }
      });
    } catch (e) {
      // Node throws (rather than emits) for some failures of the socket's options at bind.
      failure ??= e as Error;
    }
    sock.off('error', onBindError);
    if (!joined) {
      try {
        sock.close();
      } catch {
        // never bound: nothing to close
      }
      const e = failure ?? Object.assign(new Error(`join ${key}: the bind did not complete`), { code: 'EIO' });
      if (tracing('rx')) trace('rx', `roce:${this.port}`, `join ${key}: ${e.message}`);
      throw e;
    }
    this.groups.set(key, { sock, refs: 1, sink });
    sock.on('message', (msg, rinfo) => {
      sink.rxDatagram(msg, { family, src: rinfo.address, dst: key, srcPort: rinfo.port, forwarded: false });
    });
    sock.on('error', (e) => {
      if (tracing('rx')) trace('rx', `roce:${this.port}`, `group ${key}: ${e.message}`);
    });
    this.applyRef(sock);
  }

  /** Drop one reference to group `group`; the last one leaves it (closing its socket). */
  leaveGroup(group: string): void {
    const key = ipKeyOf(group);
    const g = this.groups.get(key);
    if (!g) return;
    if (--g.refs > 0) return;
    this.groups.delete(key);
    try {
      g.sock.close();
    } catch {
      // closed already
    }
  }

  // -- routing -----------------------------------------------------------------------------------

  private onUnicast(msg: Buffer, rinfo: dgram.RemoteInfo, localKey: string, family: 4 | 6): void {
    const sink = this.sinksByIp.get(localKey);
    if (!sink) return;
    const meta: RxMeta = { family, src: ipKeyOf(rinfo.address), dst: localKey, srcPort: rinfo.port, forwarded: false };
    this.route(sink, msg, meta);
  }

  /**
   * Deliver a datagram to the process it is for: this one (to `sink`) or, by destination QPN
   * (and MAD contents for QPN 1), another process of this host. Used for datagrams the kernel
   * handed to this process and for datagrams this process sends to its own host, which go
   * straight to their owner instead of through the kernel's choice of socket.
   */
  route(sink: RxSink, msg: Buffer, meta: RxMeta): void {
    if (msg.length < 12) {
      sink.rxDatagram(msg, meta); // too short to route: the device drops and counts it
      return;
    }
    const qpn = bthDestQpn(msg);
    if (qpn === IB_MULTICAST_QPN || qpn === 0) {
      sink.rxDatagram(msg, meta);
      return;
    }
    if (qpn === GSI_QPN) {
      let r: GsiRoute;
      try {
        r = this.gsiRouter(msg);
      } catch {
        r = { to: 'local' };
      }
      if (r.to === 'local' || r.to === 'drop') sink.rxDatagram(msg, meta);
      else if (r.to === 'block') {
        // A communication ID that names no QPN block any process can hold is answered here.
        if (this.blocks.has(r.block) || r.block < FIRST_BLOCK || r.block > LAST_BLOCK) sink.rxDatagram(msg, meta);
        else this.forwardToBlock(sink, r.block, msg, meta);
      } else if (this.services.has(r.name)) sink.rxDatagram(msg, meta);
      else this.forwardToService(sink, r.name, msg, meta);
      return;
    }
    const block = qpn >>> QPN_BLOCK_SHIFT;
    if (block < FIRST_BLOCK || block > LAST_BLOCK || this.blocks.has(block)) {
      sink.rxDatagram(msg, meta);
      return;
    }
    this.forwardToBlock(sink, block, msg, meta);
  }

  /**
   * Hand a datagram to the holder of QPN block `block`: over the connection made to it before,
   * else to the first of {@link blockCandidates} (the rest are tried if it fails). A block no
   * process is found to hold is remembered for a second ({@link DEAD_NAME_MS}); its datagrams
   * stay here meanwhile, where the device drops and counts them as for an unknown QPN (or the CM
   * answers them).
   */
  private forwardToBlock(sink: RxSink, block: number, msg: Buffer, meta: RxMeta): void {
    const routed = this.blockRoutes.get(block);
    if (routed !== undefined) {
      this.forward(sink, routed, msg, meta, block);
      return;
    }
    const now = performance.now();
    if ((this.deadBlocks[block] as number) > now) {
      sink.rxDatagram(msg, meta);
      return;
    }
    const name = this.blockCandidate(block, now);
    if (name === null) {
      this.deadBlocks[block] = now + DEAD_NAME_MS;
      sink.rxDatagram(msg, meta);
      return;
    }
    this.forward(sink, name, msg, meta, block);
  }

  /**
   * The name to try for QPN block `block`, or null when no process is known to hold it:
   * - the holders of the held-block snapshot (when it is fresh), this user's first, then root's,
   *   then any other user's (a process of this host sending to another user's QP);
   * - else, while the connect budget lasts, this user's name, then root's;
   * - else the snapshot, read again (at most every {@link HELD_REREAD_MS}).
   * Names that failed lately ({@link deadNames}) are skipped.
   */
  private blockCandidate(block: number, now: number): string | null {
    let name = now - this.heldAt < HELD_FRESH_MS ? this.heldName(block, now) : null;
    if (name !== null) return name;
    if (this.takeConnectToken(now)) {
      name = this.liveName(this.blockName(block), now);
      if (name === null && PROCESS_UID !== ROOT_UID) name = this.liveName(blockSocketName(this.port, ROOT_UID, block), now);
      if (name !== null) return name;
    }
    if (this.rereadDirectory(now)) return this.heldName(block, now);
    return null;
  }

  /** Read the namespace's directory again unless it was read in the last {@link HELD_REREAD_MS}. */
  private rereadDirectory(now: number): boolean {
    if (now - this.heldAt < HELD_REREAD_MS) return false;
    this.held = readDirectory(this.port);
    this.heldAt = now;
    return true;
  }

  /**
   * Hand a MAD to the process that publishes service `key`. A service not known to be published
   * costs a connection attempt while the connect budget lasts; past it the namespace's directory
   * decides (read at most every {@link HELD_REREAD_MS}), so requests for random services cost no
   * `connect()` each: one nobody publishes is answered here.
   */
  private forwardToService(sink: RxSink, key: string, msg: Buffer, meta: RxMeta): void {
    const name = this.serviceName(key);
    if (!this.fwd.has(name)) {
      const now = performance.now();
      // A name that failed lately costs nothing (and spends no connect token).
      if (this.liveName(name, now) === null) {
        sink.rxDatagram(msg, meta);
        return;
      }
      const known = now - this.heldAt < HELD_FRESH_MS && this.held.services.has(key);
      if (!known && !this.takeConnectToken(now) && !(this.rereadDirectory(now) && this.held.services.has(key))) {
        sink.rxDatagram(msg, meta);
        return;
      }
    }
    this.forward(sink, name, msg, meta, -1);
  }

  /** The first name of {@link held}'s holders of `block` not failed lately (this user, root, others). */
  private heldName(block: number, now: number): string | null {
    const uids = this.held.blocks.get(block);
    if (uids === undefined) return null;
    const order = [...uids].sort((a, b) => rank(a) - rank(b));
    for (const uid of order) {
      const n = this.liveName(uid === PROCESS_UID ? this.blockName(block) : blockSocketName(this.port, uid, block), now);
      if (n !== null) return n;
    }
    return null;
  }

  /** `name` unless it failed lately. */
  private liveName(name: string, now: number): string | null {
    const dead = this.deadNames.get(name);
    if (dead === undefined) return name;
    if (now < dead) return null;
    this.deadNames.delete(name);
    return name;
  }

  /** Take one of the {@link FWD_CONNECT_BURST} tokens (refilled at {@link FWD_CONNECT_RATE_PER_S}). */
  private takeConnectToken(now: number): boolean {
    const t = Math.min(FWD_CONNECT_BURST, this.connectTokens + ((now - this.tokensAt) * FWD_CONNECT_RATE_PER_S) / 1000);
    this.tokensAt = now;
    if (t < 1) {
      this.connectTokens = t;
      return false;
    }
    this.connectTokens = t - 1;
    return true;
  }

  /**
   * Hand a datagram to the process listening on abstract name `name` (the holder of QPN block
   * `block`, or a service when `block` is -1). A name nobody listens on (a QPN block of a process
   * that is gone, or of none; a service nobody publishes) is remembered for a second; datagrams
   * for it meanwhile stay here and this process's device takes them: an unknown QPN is dropped and
   * counted, a request for an unpublished service is answered by this process's CM as the
   * kernel's CM answers a request nobody listens for. The datagrams written while the connection
   * was still being made are taken back when it fails — and go to the block's next candidate, or
   * stay here — so each is delivered, answered or dropped and counted once, never lost unseen.
   * A block's holder must be a process of the user whose namespace the name is in (SO_PEERCRED,
   * where the addon is built): another user's process listening there is a squatter, and its
   * connection fails as a refused one does.
   */
  private forward(sink: RxSink, name: string, msg: Buffer, meta: RxMeta, block: number): void {
    let c = this.fwd.get(name);
    if (!c) {
      const dead = this.deadNames.get(name);
      if (dead !== undefined) {
        if (performance.now() < dead) {
          sink.rxDatagram(msg, meta);
          return;
        }
        this.deadNames.delete(name);
      }
      c = this.connectForward(sink, name, block);
    }
    // A packet built in a packetBuffer() is framed in the headroom in front of it; any other
    // datagram (from a socket, a MAD) is copied into a frame.
    let frame: Buffer;
    if (slabs.has(msg.buffer) && msg.byteOffset >= PACKET_HEADROOM) {
      frame = Buffer.from(msg.buffer, msg.byteOffset - PACKET_HEADROOM, PACKET_HEADROOM + msg.length);
    } else {
      frame = Buffer.allocUnsafe(PACKET_HEADROOM + msg.length);
      msg.copy(frame, PACKET_HEADROOM);
    }
    encodeFwdHeader(frame, 0, meta.family, meta.srcPort, this.frameAddrs(meta.src, meta.dst, meta.family), msg.length);
    // Kept until the connection is made and its holder checked (a copy: the sender may reuse its
    // buffer before then), and counted as sent then.
    const pending = c.connecting || this.unconfirmed.has(c) ? this.unconfirmed.get(c) : undefined;
    if (pending !== undefined) pending.push([Buffer.from(msg), meta]);
    // The frames of one burst (the datagrams of a drain, the packets of one turn of the engines)
    // leave in one writev: corked here, uncorked once the current task is done.
    if (c.writableCorked === 0) {
      c.cork();
      if (this.corked.push(c) === 1) queueMicrotask(this.uncorkAll);
    }
    c.write(frame);
    if (pending === undefined) sink.fwdCount('fwd_sent');
  }

  /** Open the forwarding connection to `name` (see {@link forward}). */
  private connectForward(sink: RxSink, name: string, block: number): net.Socket {
    const conn = net.connect(name);
    this.fwd.set(name, conn);
    this.unconfirmed.set(conn, []);
    if (block >= 0) this.blockRoutes.set(block, name);
    sink.fwdCount('fwd_connect');
    // Forget this connection (not a newer one made to the same name since).
    const drop = (): void => {
      if (this.fwd.get(name) !== conn) return;
      this.fwd.delete(name);
      if (block >= 0 && this.blockRoutes.get(block) === name) this.blockRoutes.delete(block);
    };
    const fail = (): void => {
      drop();
      if (this.deadNames.size > 4096) this.deadNames.clear();
      this.deadNames.set(name, performance.now() + DEAD_NAME_MS);
      const back = this.unconfirmed.get(conn);
      this.unconfirmed.delete(conn);
      if (back === undefined) {
        sink.fwdCount('fwd_failed_drop');
        return;
      }
      // Each one again: the block's next candidate, or this process's device.
      for (const [m, mm] of back) {
        if (block >= 0) this.forwardToBlock(sink, block, m, mm);
        else sink.rxDatagram(m, mm);
      }
    };
    conn.on('connect', () => {
      if (block >= 0) {
        const holder = peerUid(conn);
        if (holder !== null && holder !== uidOfBlockName(name)) {
          if (tracing('rx')) trace('rx', `roce:${this.port}`, `${name.slice(1)} is held by uid ${holder}: not used`);
          conn.destroy();
          fail();
          return;
        }
      }
      const sent = this.unconfirmed.get(conn);
      this.unconfirmed.delete(conn);
      if (sent !== undefined) for (let i = 0; i < sent.length; i++) sink.fwdCount('fwd_sent');
    });
    conn.on('error', () => {
      if (this.unconfirmed.has(conn)) fail();
      else {
        drop();
        sink.fwdCount('fwd_failed_drop');
      }
    });
    conn.on('close', drop);
    conn.on('data', () => {
      // nothing flows back
    });
    conn.unref();
    return conn;
  }

  /**
   * The 32 address bytes of a forwarding frame from `src` to `dst`, kept per pair so that a busy
   * pair's addresses are not parsed for every datagram.
   */
  private frameAddrs(src: string, dst: string, family: 4 | 6): Buffer {
    let bySrc = this.fwdAddrs.get(src);
    if (bySrc === undefined) {
      if (this.fwdAddrs.size >= ADDR_CACHE_MAX) this.fwdAddrs.clear();
      bySrc = new Map();
      this.fwdAddrs.set(src, bySrc);
    }
    let b = bySrc.get(dst);
    if (b === undefined) {
      b = Buffer.alloc(32);
      addrBytes(src, family, b, 0);
      addrBytes(dst, family, b, 16);
      if (bySrc.size >= ADDR_CACHE_MAX) bySrc.clear();
      bySrc.set(dst, b);
    }
    return b;
  }

  /**
   * A connection from another process carrying forwarded datagrams. Accepted paused, it is
   * re-wrapped on its handle so that every read lands in one buffer of the agent
   * ({@link FWD_READ_SIZE}, `onread`) instead of a new buffer per read. Frames are delivered from
   * the read they arrived in (the receive path keeps nothing of a data packet; a MAD is copied);
   * only a frame split across reads is put together in a buffer of its own (fwd-frame.ts). A
   * malformed frame closes the connection. Who is at the other end decides what it may hand over
   * ({@link trustedUid}): a process of this user or root's, anything; any other (or anyone, where
   * SO_PEERCRED cannot be read), only datagrams from this host's own addresses.
   */
  private acceptForward(c0: net.Socket): void {
    const uid = peerUid(c0);
    const trusted = uid !== null && trustedUid(uid);
    let c = c0;
    const splitter = new FwdFrameSplitter((f, own) => {
      if (!this.deliverForwarded(f, own, trusted)) splitter.fail();
    });
    const onChunk = (chunk: Buffer): void => {
      if (!splitter.push(chunk)) c.destroy();
    };
    const handle = (c0 as unknown as { _handle?: object | null })._handle;
    if (handle && !c0.destroyed) {
      const rx = (this.fwdRead ??= Buffer.allocUnsafe(FWD_READ_SIZE));
      c = new net.Socket({ handle, onread: { buffer: rx, callback: (n: number, b: Buffer) => (onChunk(b.subarray(0, n)), true) } } as net.SocketConstructorOpts);
    } else c0.on('data', onChunk);
    c.unref();
    c.on('error', () => {});
    c.resume();
  }

  /**
   * One forwarded frame (after its length word); `own`: `f` is a buffer of its own; `trusted`:
   * from a process that may name any source address. False for a frame that is malformed (the
   * connection is closed).
   */
  private deliverForwarded(f: Buffer, own: boolean, trusted: boolean): boolean {
    const family = fwdFamily(f);
    if (family === 0) return false;
    const dst = this.frameAddrText(f, FwdOff.DST, family);
    const sink = this.sinksByIp.get(dst);
    if (!sink) return true;
    sink.fwdCount('fwd_rcvd');
    if (!trusted && !this.isHostAddress(f, FwdOff.SRC, family)) {
      sink.fwdCount('fwd_forged_drop');
      return true;
    }
    const src = this.frameAddrText(f, FwdOff.SRC, family);
    // The receive path reads a data packet while it runs and keeps nothing, so it gets a view of
    // the chunk; a MAD (QPN 1) may be kept by the connection manager, so it gets its own copy
    // rather than holding the whole chunk.
    let pkt = f.subarray(FWD_FRAME_HEAD - 4);
    if (!own && pkt.length >= 8 && bthDestQpn(pkt) === GSI_QPN) pkt = Buffer.from(pkt);
    sink.rxDatagram(pkt, { family, src, dst, srcPort: fwdSrcPort(f), forwarded: true });
    return true;
  }

  /**
   * Whether the 16 address bytes at `off` of `b` are one of this host's addresses (any
   * interface, loopback included: 127.0.0.0/8, ::1), which any local process could send from
   * over UDP itself. The host's addresses are read again every {@link HOST_ADDRS_MS}.
   */
  private isHostAddress(b: Buffer, off: number, family: 4 | 6): boolean {
    if (family === 4 && b[off] === 127) return true;
    const key = b.toString('hex', off, off + (family === 4 ? 4 : 16));
    const now = performance.now();
    if (now - this.hostAddrsAt >= HOST_ADDRS_MS || (!this.hostAddrs.has(key) && now - this.hostAddrsAt >= HELD_REREAD_MS)) {
      this.hostAddrs = hostAddressKeys();
      this.hostAddrsAt = now;
    }
    return this.hostAddrs.has(key);
  }

  /** The text of a frame's address, IPv4 ones kept by value (a busy peer's is formatted once). */
  private frameAddrText(b: Buffer, off: number, family: 4 | 6): string {
    if (family === 6) return addrText(b, off, 6);
    const v = b.readUInt32BE(off);
    let t = this.v4Text.get(v);
    if (t === undefined) {
      t = formatIpv4(v);
      if (this.v4Text.size >= ADDR_CACHE_MAX) this.v4Text.clear();
      this.v4Text.set(v, t);
    }
    return t;
  }

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
    while (Date.now() < end && this.unsent()) await new Promise((r) => setTimeout(r, 5));
  }

  /**
   * Datagrams the kernel dropped for `sink` because a receive buffer of this process was full
   * (its unicast sockets and its groups' sockets; see {@link roceSockBufSize}).
   */
  socketDrops(sink: RxSink): number {
    const drops = udpDrops(this.port);
    if (drops.size === 0) return 0;
    let n = 0;
    for (const ls of this.locals.values()) if (ls.sinks.has(sink)) n += drops.get(ls.ip) ?? 0;
    for (const [key, g] of this.groups) if (g.sink === sink) n += drops.get(key) ?? 0;
    return n;
  }

  /** Whether some datagram is still queued in this process (UDP send queues, forwarding). */
  private unsent(): boolean {
    for (const c of this.fwd.values()) if (c.connecting || c.writableLength > 0) return true;
    for (const ls of this.locals.values()) if (sendQueued(ls.sock)) return true;
    for (const g of this.groups.values()) if (sendQueued(g.sock)) return true;
    return false;
  }

  /** Close every socket and listener of this agent (tests; a process normally keeps them). */
  close(): void {
    for (const ls of this.locals.values()) ls.sock.close();
    for (const g of this.groups.values()) g.sock.close();
    for (const s of this.blocks.values()) s.close();
    for (const s of this.services.values()) s.close();
    for (const c of this.fwd.values()) c.destroy();
    this.unconfirmed.clear();
    this.locals.clear();
    this.groups.clear();
    this.blocks.clear();
    this.services.clear();
    this.fwd.clear();
    this.blockRoutes.clear();
    this.sinksByIp.clear();
    this.qpnsInUse.clear();
    agents.delete(this.port);
  }
}
