/**
 * The abstract Unix names this process holds on a RoCE UDP port (unix-names.ts): its QPN blocks,
 * with the QP numbers handed out of them, and the services its connection manager publishes.
 *
 * A process owns blocks of {@link QPN_BLOCK_SIZE} QP numbers. It claims a block by listening on
 * the block's name in its user's namespace (`@rdmacm-roce-<port>-u<uid>-qpn-<block>`): the name is
 * unique in the network namespace and goes away with the process. Node binds a Unix listener
 * synchronously inside `listen()`, so a claim is decided before `ibv_create_qp` returns. Blocks
 * and the QPNs in them are drawn at random (CSPRNG). Whoever connects to a held name hands this
 * process datagrams (fwd-rx.ts).
 */
import net from 'node:net';
import { err } from '../../errors.js';
import { traceEvent, tracing } from '../../trace.js';
import { random } from '../../util/random.js';
import { PROCESS_UID, blockSocketName, serviceSocketName, type DirectoryView } from './unix-names.js';

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

/** Block names kept made ({@link QpnBlocks.blockName}) before the cache starts over. */
const BLOCK_NAMES_MAX = 1024;

/** The block of QP number `qpn`. */
export function blockOfQpn(qpn: number): number {
  return qpn >>> QPN_BLOCK_SHIFT;
}

/** Whether block `b` is one a process can hold ({@link FIRST_BLOCK} .. {@link LAST_BLOCK}). */
export function claimableBlock(b: number): boolean {
  return b >= FIRST_BLOCK && b <= LAST_BLOCK;
}

/** The QPN blocks and published services of this process on one RoCE port. */
export class QpnBlocks {
  private readonly blocks = new Map<number, net.Server>();
  private readonly services = new Map<string, net.Server>();
  private readonly qpnsInUse = new Set<number>();
  /** QPNs in use per owned block (a full block is skipped without a scan). */
  private readonly usedInBlock = new Map<number, number>();
  /** {@link blockName} by block number. */
  private readonly blockNames = new Map<number, string>();

  /**
   * @param port the RoCE UDP port
   * @param directory the namespace's directory, read afresh by every claim
   * @param accept takes each connection another process makes to a held name
   * @param claimed told of each block claimed
   */
  constructor(
    private readonly port: number,
    private readonly directory: DirectoryView,
    private readonly accept: (c: net.Socket) => void,
    private readonly claimed: (block: number) => void,
  ) {}

  /**
   * The abstract socket name of QPN block `block` in this user's namespace (made once per block:
   * routing asks per packet).
   */
  blockName(block: number): string {
    let n = this.blockNames.get(block);
    if (n === undefined) {
      n = blockSocketName(this.port, PROCESS_UID, block);
      if (this.blockNames.size >= BLOCK_NAMES_MAX) this.blockNames.clear();
      this.blockNames.set(block, n);
    }
    return n;
  }

  /** The abstract socket name of a service directory entry. */
  serviceName(key: string): string {
    return serviceSocketName(this.port, key);
  }

  /** Whether this process holds block `block`. */
  owns(block: number): boolean {
    return this.blocks.has(block);
  }

  /** The blocks this process owns. */
  owned(): number[] {
    return [...this.blocks.keys()];
  }

  /** Whether this process publishes service `key`. */
  publishes(key: string): boolean {
    return this.services.has(key);
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

  /** A QPN block of this process (claimed now if it has none). */
  anyBlock(): number {
    for (const b of this.blocks.keys()) return b;
    return this.claimBlock();
  }

  /** Give QP number `qpn` back. */
  releaseQpn(qpn: number): void {
    if (!this.qpnsInUse.delete(qpn)) return;
    const b = blockOfQpn(qpn);
    this.usedInBlock.set(b, (this.usedInBlock.get(b) ?? 1) - 1);
  }

  private take(n: number): number {
    this.qpnsInUse.add(n);
    const b = blockOfQpn(n);
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
    const held = this.directory.read(performance.now()).blocks;
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
          this.claimed(b);
          if (tracing('roce')) traceEvent('roce', `roce:${this.port}`, 'qpn-block', { block: b, firstQpn: b << QPN_BLOCK_SHIFT });
          return b;
        }
      }
    }
    throw err('ENOMEM', 'ibv_create_qp', 'no free QPN block');
  }

  /** Listen on an abstract name; the server when the name was free, else undefined. */
  private listenSync(name: string): net.Server | undefined {
    const srv = net.createServer({ pauseOnConnect: true }, (c) => this.accept(c));
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

  /** Whether published service `key` holds the event loop (`RServer.unref()`: not). */
  holdService(key: string, on: boolean): void {
    const srv = this.services.get(key);
    if (on) srv?.ref();
    else srv?.unref();
  }

  /** Withdraw a published service. */
  withdrawService(key: string): void {
    const srv = this.services.get(key);
    if (!srv) return;
    this.services.delete(key);
    srv.close();
  }

  /** Stop listening on every name; every QPN is free again. */
  close(): void {
    for (const s of this.blocks.values()) s.close();
    for (const s of this.services.values()) s.close();
    this.blocks.clear();
    this.services.clear();
    this.qpnsInUse.clear();
  }
}
