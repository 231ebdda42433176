/**
 * The out-of-band channel of the multi-process tools (rdma-core's `librdmacm/examples/common.c`,
 * `oob_root_setup` / `oob_leaf_setup` / `oob_sendrecv` / `oob_recvsend`): a star of TCP
 * connections. The first process that can listen on the controller address becomes the root and
 * takes a connection from each other peer (the leaves); the others connect to it. Over the star go
 * one-byte barriers ({@link OobStar.sync}) and whatever records the tool exchanges through the
 * root ({@link OobStar.gather}, {@link OobStar.broadcast}; {@link OobStar.send},
 * {@link OobStar.recv} on a leaf).
 */
import net from 'node:net';
import { Errno, RAI, gaiStrerror, getaddrinfo, strerror, type SockAddr } from './rdma.js';
import { errOut, out } from './c-compat.js';
import { eaiOf } from './addresses.js';

/** A TCP connection of the star, read as a byte stream (recv() of exact sizes). */
class OobSock {
  private buf: Buffer = Buffer.alloc(0);
  private want: { n: number; resolve: (b: Buffer) => void; reject: (e: Error) => void } | null = null;
  private closed: Error | null = null;

  /** `lost`: the connection ended while nothing was being received from it. */
  constructor(
    readonly sock: net.Socket,
    lost: (e: Error) => void,
  ) {
    sock.setNoDelay(true);
    sock.on('data', (d: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      this.pump();
    });
    const gone = (e?: Error): void => {
      if (this.closed) return;
      this.closed = e ?? new Error('connection closed by peer');
      if (this.want) {
        const w = this.want;
        this.want = null;
        w.reject(this.closed);
      } else lost(this.closed);
    };
    sock.on('error', (e) => gone(e));
    sock.on('close', () => gone());
  }

  private pump(): void {
    const w = this.want;
    if (w && this.buf.length >= w.n) {
      this.want = null;
      const b = this.buf.subarray(0, w.n);
      this.buf = this.buf.subarray(w.n);
      w.resolve(b);
    }
  }

  recv(n: number): Promise<Buffer> {
    if (this.closed && this.buf.length < n) return Promise.reject(this.closed);
    return new Promise((resolve, reject) => {
      this.want = { n, resolve, reject };
      this.pump();
    });
  }

  send(b: Buffer): void {
    this.sock.write(b);
  }
}

/** This process's place in the star: the root's connections to the leaves, or a leaf's to the root. */
export class OobStar {
  private closing = false;

  private constructor(
    /** The OOB port as getaddrinfo made it of the service (a tool may listen there too). */
    readonly port: number,
    private readonly leaves: OobSock[],
    private readonly root: OobSock | null,
  ) {}

  /** This process is the root. */
  get isRoot(): boolean {
    return this.root === null;
  }

  /**
   * oob_try_bind + oob_root_setup / oob_leaf_setup. The root binds `ctrlAddr` of any family
   * (AI_PASSIVE), prints `Running as OOB root` and waits for `peers - 1` leaves; whoever finds
   * the address taken (EADDRINUSE, or EADDRNOTAVAIL: not ours) connects to it as a leaf, over
   * IPv4 only (the leaf's getaddrinfo asks for AF_INET). The star, or the failure as common.c
   * reports it (its messages printed; a failed leaf connect only returns -1). `lost` is told of a
   * connection that ends while nothing is received from it, until {@link close}.
   */
  static async setup(ctrlAddr: string | null, service: string, peers: number, lost: (e: Error) => void): Promise<OobStar | number> {
    let star: OobStar | null = null;
    const onLost = (e: Error): void => {
      if (!star?.closing) lost(e);
    };
    let bindAddr: SockAddr;
    try {
      bindAddr = (await getaddrinfo(ctrlAddr, service, { flags: RAI.PASSIVE })).srcAddr as SockAddr;
    } catch (e) {
      errOut(`getaddrinfo error: ${gaiStrerror(eaiOf(e))}\n`);
      return eaiOf(e);
    }
    const port = bindAddr.port;
    const server = net.createServer({ noDelay: true });
    const bound = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
      server.once('error', (e: NodeJS.ErrnoException) => resolve(e));
      server.listen({ host: bindAddr.address, port: bindAddr.port, backlog: 1 }, () => resolve(null));
    });
    if (bound === null) {
      out('Running as OOB root\n');
      const want = peers - 1;
      const leaves = await new Promise<OobSock[]>((resolve) => {
        const socks: OobSock[] = [];
        if (want <= 0) resolve(socks);
        server.on('connection', (s: net.Socket) => {
          // close() comes after the last peer, as oob_root_setup's; anything later is not a peer.
          if (socks.length >= want) {
            s.destroy();
            return;
          }
          socks.push(new OobSock(s, onLost));
          if (socks.length === want) resolve(socks);
        });
      });
      server.close();
      star = new OobStar(port, leaves, null);
      return star;
    }
    const en = bound.errno !== undefined ? Math.abs(bound.errno) : Errno.EIO;
    if (en !== Errno.EADDRINUSE && en !== Errno.EADDRNOTAVAIL) {
      errOut(`unexpected bind error: ${strerror(en)} (${en})\n`);
      errOut(`oob_try_bind: ${strerror(en)}\n`);
      return -en;
    }
    let host: string;
    try {
      host = ((await getaddrinfo(ctrlAddr, service, { family: 'IPv4' })).dstAddr as SockAddr).address;
    } catch (e) {
      out(`getaddrinfo error: ${gaiStrerror(eaiOf(e))}\n`);
      return eaiOf(e);
    }
    // A failed connect(2) is only the return value of oob_leaf_setup: nothing is printed.
    return new Promise<OobStar | number>((resolve) => {
      const s = net.connect({ host, port, noDelay: true });
      s.once('connect', () => {
        star = new OobStar(port, [], new OobSock(s, onLost));
        resolve(star);
      });
      s.once('error', () => resolve(-1));
    });
  }

  /** The root: one record of `size` bytes from each leaf, in the order they connected. */
  async gather(size: number): Promise<Buffer[]> {
    const all: Buffer[] = [];
    for (const s of this.leaves) all.push(await s.recv(size));
    return all;
  }

  /** The root: `b` to every leaf. */
  broadcast(b: Buffer): void {
    for (const s of this.leaves) s.send(b);
  }

  /** A leaf: `b` to the root. */
  send(b: Buffer): void {
    this.root?.send(b);
  }

  /** A leaf: `n` bytes from the root. */
  recv(n: number): Promise<Buffer> {
    return this.root ? this.root.recv(n) : Promise.reject(new Error('the root receives with gather()'));
  }

  /**
   * oob_syncdown / oob_syncup: a one-byte barrier through the root (the root waits for a byte of
   * every leaf, then answers each with `val`). A failure ends the wait and is not reported, as in C.
   */
  async sync(val: number): Promise<void> {
    const b = Buffer.from([val & 0xff]);
    try {
      if (this.root === null) {
        for (const s of this.leaves) await s.recv(1);
        this.broadcast(b);
      } else {
        this.root.send(b);
        await this.root.recv(1);
      }
    } catch {
      /* a barrier's result is not checked */
    }
  }

  /** Close every connection of the star; their ends are no longer reported. */
  close(): void {
    this.closing = true;
    for (const s of this.leaves) s.sock.destroy();
    this.root?.sock.destroy();
  }
}
