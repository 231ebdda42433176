/**
 * Handing datagrams to the other processes of this host that share a RoCE port: to the holder of
 * a QPN block, or to the process that publishes a service, each over a connection to the abstract
 * Unix name it listens on (unix-names.ts), in frames (fwd-frame.ts).
 *
 * What a name nobody holds costs is bounded: a name that refused a connection, and a block found
 * without a holder, is remembered for {@link DEAD_NAME_MS} and its datagrams stay in this process
 * meanwhile (where the device drops and counts them, or the CM answers them); a connection to a
 * name not known to be held is opened only while the connect budget lasts
 * ({@link FWD_CONNECT_BURST}, {@link FWD_CONNECT_RATE_PER_S}), and past it the namespace's
 * directory decides. A block's holder must be a process of the user whose namespace the name is
 * in (SO_PEERCRED, where the netopt addon is built): another user's process listening there is a
 * squatter, and its connection fails as a refused one does.
 */
import net from 'node:net';
import { trace, tracing } from '../../trace.js';
import { Ring } from '../../util/ring.js';
import { StateCell } from '../../util/state.js';
import { TokenBucket } from '../../util/token-bucket.js';
import { encodeFwdHeader, fwdFlagsByte } from './fwd-frame.js';
import { writeIpSlot } from './ip-addr.js';
import { PACKET_HEADROOM, releasePacket, withHeadroom } from './packet-buffer.js';
import { LAST_BLOCK, type QpnBlocks } from './qpn-blocks.js';
import { PROCESS_UID, ROOT_UID, blockSocketName, peerUid, uidOfBlockName, type DirectoryView, type RoceDirectory } from './unix-names.js';
import type { RxMeta, RxSink } from './datagram.js';

/**
 * Whether the devices' local queue (device.ts `deliverLocal`) will drain in a microtask already
 * queued; set by the device module when it loads.
 */
let localDrainPending: () => boolean = () => false;

/** Tell the forwarding how to see that the local queue is about to drain ({@link localDrainPending}). */
export function setLocalDrainProbe(probe: () => boolean): void {
  localDrainPending = probe;
}

/** How long a Unix name or QPN block that had no holder is not tried again (ms). */
const DEAD_NAME_MS = 1000;
/** Names remembered as failed before the memory starts over. */
const DEAD_NAMES_MAX = 4096;
/**
 * Forwarding connections to a name not known to be held that may be tried at once, and how many
 * more a second (a token bucket): past them, the namespace's directory of held names is read
 * instead (`/proc/net/unix`), so datagrams to random QPNs cost no `connect()` each.
 */
const FWD_CONNECT_BURST = 32;
/** See {@link FWD_CONNECT_BURST}. */
const FWD_CONNECT_RATE_PER_S = 16;
/** Entries of each address cache of the forwarding path before it starts over. */
const ADDR_CACHE_MAX = 1024;

/** The order in which holders of a QPN block are tried: this user's, root's, then any other's. */
function rank(uid: number): number {
  return uid === PROCESS_UID ? 0 : uid === ROOT_UID ? 1 : 2;
}

/** The life of a forwarding connection. */
export enum FwdConnState {
  /** Being made: what is written is kept until its holder is checked. */
  CONNECTING = 'CONNECTING',
  /** Made and its holder checked: what is written is sent. */
  OPEN = 'OPEN',
  /** Refused, or held by a squatter: what was written while connecting is taken back. */
  FAILED = 'FAILED',
  /** Closed after it was open (or by the agent): what is in flight is lost. */
  CLOSED = 'CLOSED',
}

/** A connection to the process listening on one abstract name. */
class FwdConn {
  readonly state: StateCell<FwdConnState>;
  /** The datagrams written while {@link FwdConnState.CONNECTING} (copies), with where they were going. */
  pending: [Buffer, RxMeta][] = [];
  /**
   * Packets of packetBuffer() framed in place whose frames the socket has not yet handed to the
   * kernel, oldest first: each such frame is written with {@link written} as its callback, and
   * the socket calls back in the order of the writes (once each, with an error too when it is
   * destroyed with the frame unsent), so the callback hands back the oldest.
   */
  readonly inflight = new Ring<Buffer>(Infinity);
  /**
   * The socket is done with the oldest packet of {@link inflight}: its slab may be carved again
   * (packet-buffer.ts). A frame leaves its slab as soon as the kernel has it, not when the whole
   * backlog of the connection has drained: a long burst to a slower reader reuses the slabs of
   * what is already written instead of taking fresh memory for every packet.
   */
  readonly written = (): void => {
    const p = this.inflight.shift();
    if (p !== undefined) releasePacket(p);
  };

  constructor(
    readonly sock: net.Socket,
    readonly name: string,
  ) {
    this.state = new StateCell<FwdConnState>('roce', () => `fwd:${name.slice(1)}`, FwdConnState.CONNECTING);
  }
}

/** The sending side of the forwarding of one RoCE port. */
export class FwdTx {
  private readonly conns = new Map<string, FwdConn>();
  /** Abstract names that refused a connection lately, with the time they may be tried again. */
  private readonly deadNames = new Map<string, number>();
  /** Per QPN block, the time until which it is known to have no holder (0: not known). */
  private readonly deadBlocks = new Float64Array(LAST_BLOCK + 1);
  /** The name each QPN block's holder is reached through while a forwarding connection to it is open (by block). */
  private readonly blockRoutes = new Map<number, string>();
  /** The connect budget for names not known to be held. */
  private readonly connectBudget = new TokenBucket(FWD_CONNECT_BURST, FWD_CONNECT_RATE_PER_S);
  /** Frame address bytes by source and destination text ({@link frameAddrs}). */
  private readonly fwdAddrs = new Map<string, Map<string, Buffer>>();
  /** Connections corked since the last {@link uncorkAll} (one writev per burst). */
  private corked: FwdConn[] = [];
  /** The current burst's uncork already waited once for the local queue. */
  private waited = false;
  private readonly uncorkAll = (): void => {
    // The local queue drains in a microtask queued after this one (an application answering, in
    // this same turn, the message whose ACK is corked here): wait for it once, so the ACK and the
    // answer leave in one writev.
    if (!this.waited && localDrainPending()) {
      this.waited = true;
      queueMicrotask(this.uncorkAll);
      return;
    }
    this.waited = false;
    // A new list first: a connection corked while these are uncorked gets its own microtask.
    const list = this.corked;
    this.corked = [];
    for (let i = 0; i < list.length; i++) (list[i] as FwdConn).sock.uncork();
  };

  /**
   * @param port the RoCE UDP port (for traces and the names of other users' blocks)
   * @param blocks this process's names (this user's name of a block, a service's name)
   * @param directory the namespace's directory of held names
   */
  constructor(
    private readonly port: number,
    private readonly blocks: QpnBlocks,
    private readonly directory: DirectoryView,
  ) {}

  /**
   * The abstract name through which the holder of QPN block `block` is reached: the one a
   * forwarding connection to it was made to, else this user's name for it.
   */
  holderName(block: number): string {
    return this.blockRoutes.get(block) ?? this.blocks.blockName(block);
  }

  /** Block `block` is held by this process now: forget that it had no holder. */
  forgetDeadBlock(block: number): void {
    this.deadBlocks[block] = 0;
  }

  /**
   * Hand a datagram to the holder of QPN block `block`: over the connection made to it before,
   * else to the first of {@link blockCandidate} (the rest are tried if it fails). A block no
   * process is found to hold is remembered for a second ({@link DEAD_NAME_MS}); its datagrams
   * stay here meanwhile, where the device drops and counts them as for an unknown QPN (or the CM
   * answers them).
   */
  toBlock(sink: RxSink, block: number, msg: Buffer, meta: RxMeta): void {
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
   * Hand a MAD to the process that publishes service `key`. A service not known to be published
   * costs a connection attempt while the connect budget lasts; past it the namespace's directory
   * decides (read at most so often), so requests for random services cost no `connect()` each:
   * one nobody publishes is answered here.
   */
  toService(sink: RxSink, key: string, msg: Buffer, meta: RxMeta): void {
    const name = this.blocks.serviceName(key);
    if (!this.conns.has(name)) {
      const now = performance.now();
      // A name that failed lately costs nothing (and spends no connect token).
      if (this.liveName(name, now) === null) {
        sink.rxDatagram(msg, meta);
        return;
      }
      const known = this.directory.fresh(now)?.services.has(key) === true;
      if (!known && !this.connectBudget.take(now) && !(this.directory.reread(now)?.services.has(key) ?? false)) {
        sink.rxDatagram(msg, meta);
        return;
      }
    }
    this.forward(sink, name, msg, meta, -1);
  }

  /**
   * The name to try for QPN block `block`, or null when no process is known to hold it:
   * - the holders of the directory's last read (when it is fresh), this user's first, then
   *   root's, then any other user's (a process of this host sending to another user's QP);
   * - else, while the connect budget lasts, this user's name, then root's;
   * - else the directory, read again (at most so often).
   * Names that failed lately ({@link deadNames}) are skipped.
   */
  private blockCandidate(block: number, now: number): string | null {
    const fresh = this.directory.fresh(now);
    let name = fresh !== null ? this.heldName(fresh, block, now) : null;
    if (name !== null) return name;
    if (this.connectBudget.take(now)) {
      name = this.liveName(this.blocks.blockName(block), now);
      if (name === null && PROCESS_UID !== ROOT_UID) name = this.liveName(blockSocketName(this.port, ROOT_UID, block), now);
      if (name !== null) return name;
    }
    const again = this.directory.reread(now);
    return again !== null ? this.heldName(again, block, now) : null;
  }

  /** The first name of `dir`'s holders of `block` not failed lately (this user, root, others). */
  private heldName(dir: RoceDirectory, block: number, now: number): string | null {
    const uids = dir.blocks.get(block);
    if (uids === undefined) return null;
    const order = [...uids].sort((a, b) => rank(a) - rank(b));
    for (const uid of order) {
      const n = this.liveName(uid === PROCESS_UID ? this.blocks.blockName(block) : blockSocketName(this.port, uid, block), now);
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

  /**
   * Hand a datagram to the process listening on abstract name `name` (the holder of QPN block
   * `block`, or a service when `block` is -1). A name nobody listens on (a QPN block of a process
   * that is gone, or of none; a service nobody publishes) is remembered for a second; datagrams
   * for it meanwhile stay here and this process's device takes them: an unknown QPN is dropped and
   * counted, a request for an unpublished service is answered by this process's CM as the
   * kernel's CM answers a request nobody listens for. The datagrams written while the connection
   * was still being made are taken back when it fails — and go to the block's next candidate, or
   * stay here — so each is delivered, answered or dropped and counted once, never lost unseen.
   */
  private forward(sink: RxSink, name: string, msg: Buffer, meta: RxMeta, block: number): void {
    let c = this.conns.get(name);
    if (!c) {
      if (this.liveName(name, performance.now()) === null) {
        sink.rxDatagram(msg, meta);
        return;
      }
      c = this.connect(sink, name, block);
    }
    // A packet built in a packetBuffer() is framed in the headroom in front of it; any other
    // datagram (from a socket, a MAD) is copied into a frame.
    let frame = withHeadroom(msg);
    const inPlace = frame !== null;
    if (frame === null) {
      frame = Buffer.allocUnsafe(PACKET_HEADROOM + msg.length);
      msg.copy(frame, PACKET_HEADROOM);
    }
    encodeFwdHeader(frame, 0, meta.family, meta.srcPort, this.frameAddrs(meta.src, meta.dst, meta.family), msg.length, fwdFlagsByte(meta.icrcOffload, meta.train));
    // Kept until the connection is made and its holder checked (a copy: the sender may reuse its
    // buffer before then), and counted as sent then.
    const connecting = c.state.is(FwdConnState.CONNECTING);
    if (connecting) c.pending.push([Buffer.from(msg), meta]);
    // The frames of one burst (the datagrams of a drain, the packets of one turn of the engines)
    // leave in one writev: corked here, uncorked once the current task is done.
    const sock = c.sock;
    if (sock.writableCorked === 0) {
      sock.cork();
      if (this.corked.push(c) === 1) queueMicrotask(this.uncorkAll);
    }
    if (inPlace) {
      c.inflight.push(msg);
      sock.write(frame, c.written);
    } else sock.write(frame);
    if (!connecting) sink.fwdCount('fwd_sent');
  }

  /** Open the forwarding connection to `name` (see {@link forward}). */
  private connect(sink: RxSink, name: string, block: number): FwdConn {
    const c = new FwdConn(net.connect(name), name);
    const sock = c.sock;
    this.conns.set(name, c);
    if (block >= 0) this.blockRoutes.set(block, name);
    sink.fwdCount('fwd_connect');
    // Forget this connection (not a newer one made to the same name since).
    const drop = (): void => {
      if (this.conns.get(name) !== c) return;
      this.conns.delete(name);
      if (block >= 0 && this.blockRoutes.get(block) === name) this.blockRoutes.delete(block);
    };
    const fail = (why: string): void => {
      drop();
      if (this.deadNames.size > DEAD_NAMES_MAX) this.deadNames.clear();
      this.deadNames.set(name, performance.now() + DEAD_NAME_MS);
      if (!c.state.exch(FwdConnState.CONNECTING, FwdConnState.FAILED, why)) {
        sink.fwdCount('fwd_failed_drop');
        return;
      }
      const back = c.pending;
      c.pending = [];
      // Each one again: the block's next candidate, or this process's device.
      for (const [m, mm] of back) {
        if (block >= 0) this.toBlock(sink, block, m, mm);
        else sink.rxDatagram(m, mm);
      }
    };
    sock.on('connect', () => {
      if (block >= 0) {
        const holder = peerUid(sock);
        if (holder !== null && holder !== uidOfBlockName(name)) {
          if (tracing('roce')) trace('roce', `roce:${this.port}`, `${name.slice(1)} is held by uid ${holder}: not used`);
          sock.destroy();
          fail(`held by uid ${holder}`);
          return;
        }
      }
      if (!c.state.exch(FwdConnState.CONNECTING, FwdConnState.OPEN, 'connected')) return;
      const sent = c.pending.length;
      c.pending = [];
      for (let i = 0; i < sent; i++) sink.fwdCount('fwd_sent');
    });
    sock.on('error', (e) => {
      if (c.state.is(FwdConnState.CONNECTING)) fail(e.message);
      else {
        drop();
        c.state.move(FwdConnState.CLOSED, e.message);
        sink.fwdCount('fwd_failed_drop');
      }
    });
    sock.on('close', () => {
      drop();
      c.state.exch(FwdConnState.OPEN, FwdConnState.CLOSED, 'closed');
    });
    sock.on('data', () => {
      // nothing flows back
    });
    sock.unref();
    return c;
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
      writeIpSlot(src, family, b, 0);
      writeIpSlot(dst, family, b, 16);
      if (bySrc.size >= ADDR_CACHE_MAX) bySrc.clear();
      bySrc.set(dst, b);
    }
    return b;
  }

  /** Whether a datagram handed over is still in this process (a connection being made, or not yet written). */
  unsent(): boolean {
    for (const c of this.conns.values()) if (c.sock.connecting || c.sock.writableLength > 0) return true;
    return false;
  }

  /** Close every connection; what they still hold is lost. */
  close(): void {
    for (const c of this.conns.values()) {
      c.sock.destroy();
      c.pending = [];
      c.state.move(FwdConnState.CLOSED, 'port agent closed');
    }
    this.conns.clear();
    this.blockRoutes.clear();
  }
}
