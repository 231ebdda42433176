/**
 * The plain-socket side of rstream (`-T s`, `-T f`): a TCP connection of Node's `net` with the
 * non-blocking send/recv/poll face of a C socket, built to run at the speed Node itself allows.
 *
 * Receiving. Reads land, with `onread`, in one of a few fixed slabs (no buffer allocated per read,
 * as a socket reading into a reused buffer does); recv() copies from the oldest slab into the
 * caller's buffer, as recv(2) copies from the kernel's. When every slab holds unread bytes the
 * socket stops reading (the kernel's receive buffer then fills and TCP's window holds the peer)
 * and starts again once recv() has emptied the slab the next read goes to.
 *
 * Sending. With {@link NetSock.zeroCopy} (the default) send() hands the caller's bytes to Node
 * without copying them, as Linux's MSG_ZEROCOPY does: Node writes them to the kernel at once when
 * it can and otherwise keeps a reference until it can. Until then the bytes are lent: the caller
 * must not change them (rstream sends one buffer whose contents change only under `-T v`, which
 * turns zero copy off), and recv() into the same memory waits — it reports EAGAIN and poll()
 * withholds POLLIN — until Node has written them. The send buffer is modelled as bytes Node has
 * queued (SO_SNDBUF; send() takes what fits, EAGAIN when full).
 *
 * One buffer view per distinct (buffer, offset, length) is made and reused, so a test sending the
 * same message over and over allocates nothing per message.
 */
import net from 'node:net';
import { once } from 'node:events';
import { Errno } from './api.js';
import {
  PollWaiters,
  POLLERR,
  POLLHUP,
  POLLIN,
  POLLOUT,
  SOL_SOCKET,
  IPPROTO_TCP,
  SO_SNDBUF,
  SO_RCVBUF,
  SO_KEEPALIVE,
  SO_ERROR,
  TCP_NODELAY,
  TCP_KEEPIDLE,
} from './rs-api.js';

const EAGAIN = Errno.EAGAIN;
const EPIPE = Errno.EPIPE;
const ECONNRESET = Errno.ECONNRESET;
const EINVAL = Errno.EINVAL;

/** How many slabs reads land in, and their size: up to 256 KiB per read(2), 1 MiB buffered. */
export const SLABS = 4;
export const SLAB_BYTES = 1 << 18;

/** A connected TCP socket with the non-blocking socket calls rstream makes. */
export class NetSock {
  errno = 0;
  /** Send without copying (see the module comment); off under `-T v`. */
  zeroCopy = true;
  sock!: net.Socket;

  // -- receive queue: a ring of (buffer, start, end) entries, oldest at qHead
  private qBuf: (Buffer | null)[] = new Array<Buffer | null>(8).fill(null);
  private qStart = new Int32Array(8);
  private qEnd = new Int32Array(8);
  private qHead = 0;
  private qLen = 0;
  /** Bytes in the receive queue. */
  private queued = 0;

  // -- slabs (onread mode): which are in the queue, which the next read lands in
  private slabs: Buffer[] | null = null;
  private slabBusy: boolean[] = [];
  private nextSlab = 0;
  private readPaused = false;
  /** 'data' mode (no onread): paused while this many bytes are queued. */
  private dataPauseAt = 1 << 20;

  private eof = false;
  private err: number | null = null;
  private shutWr = false;
  /** poll() callers waiting for readiness. */
  private readonly polls = new PollWaiters(this as NetSock, NetSock.prototype.ready);

  // -- send side
  private sndbuf = 2 * 212992;
  private rcvbuf = 2 * 131072;
  /** The memory of zero-copy sends Node may still read (the first; `lentMore`: others too). */
  private lent: ArrayBufferLike | null = null;
  private lentMore = false;
  private viewBuf: Buffer | null = null;
  private viewOff = 0;
  private viewLen = 0;
  private view: Buffer | null = null;

  private keepIdle = 7200;
  private keepalive = false;
  private nodelay = false;

  private readonly afterWrite = (): void => {
    if (this.sock.writableLength === 0) {
      this.lent = null;
      this.lentMore = false;
    }
    if (this.polls.waiting) this.polls.wake();
  };

  private constructor() {}

  /** Connect to `opts` (reads go to slabs); resolves with the socket or rejects with the error. */
  static async connect(opts: net.NetConnectOpts): Promise<NetSock> {
    const ns = new NetSock();
    const sock = net.connect({ ...opts, onread: ns.onreadOption() } as net.NetConnectOpts);
    ns.attach(sock);
    await new Promise<void>((resolve, reject) => {
      const onErr = (e: Error): void => {
        sock.destroy();
        reject(e);
      };
      sock.once('error', onErr);
      sock.once('connect', () => {
        sock.removeListener('error', onErr);
        resolve();
      });
    });
    return ns;
  }

  /**
   * Take over an accepted socket. One accepted with `pauseOnConnect` (nothing read yet) is
   * re-wrapped on its handle so that its reads land in slabs; any other is read with 'data'
   * events (one buffer from Node per read).
   */
  static adopt(s: net.Socket, fresh: boolean): NetSock {
    const ns = new NetSock();
    const handle = (s as unknown as { _handle?: object | null })._handle;
    if (fresh && handle && !s.destroyed) {
      const w = new net.Socket({ handle, onread: ns.onreadOption(), allowHalfOpen: s.allowHalfOpen } as net.SocketConstructorOpts);
      ns.attach(w);
      w.resume();
      return ns;
    }
    ns.attach(s);
    s.on('data', (d: Buffer) => {
      ns.enqueue(d, 0, d.length);
      if (ns.queued >= ns.dataPauseAt && !ns.readPaused) {
        ns.readPaused = true;
        s.pause();
      }
      if (ns.polls.waiting) ns.polls.wake();
    });
    s.resume();
    return ns;
  }

  private onreadOption(): { buffer: () => Buffer; callback: (n: number, b: Buffer) => boolean } {
    const slabs: Buffer[] = [];
    for (let i = 0; i < SLABS; i++) {
      slabs.push(Buffer.allocUnsafe(SLAB_BYTES));
      this.slabBusy.push(false);
    }
    this.slabs = slabs;
    // Node asks for the next buffer right after each callback (and once at the start).
    return { buffer: () => slabs[this.nextSlab] as Buffer, callback: (n) => this.onRead(n) };
  }

  /** A read of `n` bytes landed in slab nextSlab: queue it; pick the next slab, or stop reading. */
  private onRead(n: number): boolean {
    const slabs = this.slabs as Buffer[];
    const i = this.nextSlab;
    this.slabBusy[i] = true;
    this.enqueue(slabs[i] as Buffer, 0, n);
    let next = -1;
    for (let k = 1; k <= SLABS; k++) {
      const j = (i + k) % SLABS;
      if (!this.slabBusy[j]) {
        next = j;
        break;
      }
    }
    if (this.polls.waiting) this.polls.wake();
    if (next >= 0) {
      this.nextSlab = next;
      return true;
    }
    // Every slab holds unread bytes: stop reading; the oldest is the next to be emptied.
    this.nextSlab = this.slabIndex(this.qBuf[this.qHead] as Buffer);
    this.readPaused = true;
    return false;
  }

  private slabIndex(b: Buffer): number {
    const slabs = this.slabs as Buffer[];
    for (let i = 0; i < SLABS; i++) if (slabs[i] === b) return i;
    return -1;
  }

  private enqueue(b: Buffer, start: number, end: number): void {
    if (this.qLen === this.qBuf.length) this.growQueue();
    const at = (this.qHead + this.qLen) % this.qBuf.length;
    this.qBuf[at] = b;
    this.qStart[at] = start;
    this.qEnd[at] = end;
    this.qLen++;
    this.queued += end - start;
  }

  private growQueue(): void {
    const n = this.qBuf.length;
    const b: (Buffer | null)[] = new Array<Buffer | null>(n * 2).fill(null);
    const s = new Int32Array(n * 2);
    const e = new Int32Array(n * 2);
    for (let k = 0; k < n; k++) {
      const at = (this.qHead + k) % n;
      b[k] = this.qBuf[at] as Buffer | null;
      s[k] = this.qStart[at] as number;
      e[k] = this.qEnd[at] as number;
    }
    this.qBuf = b;
    this.qStart = s;
    this.qEnd = e;
    this.qHead = 0;
  }

  private attach(sock: net.Socket): void {
    this.sock = sock;
    sock.on('end', () => {
      this.eof = true;
      this.polls.wake();
    });
    sock.on('error', (e: NodeJS.ErrnoException) => {
      this.err = e.errno !== undefined ? Math.abs(e.errno) : ECONNRESET;
      this.polls.wake();
    });
    sock.on('close', () => {
      this.eof = true;
      this.lent = null;
      this.lentMore = false;
      this.polls.wake();
    });
    sock.on('drain', () => this.polls.wake());
  }

  private ready(events: number): number {
    let r = 0;
    if (events & POLLIN && (this.eof || this.err !== null || (this.queued > 0 && this.lent === null))) r |= POLLIN;
    if (events & POLLOUT && this.sock.writableLength < this.sndbuf && !this.sock.destroyed) r |= POLLOUT;
    if (this.err !== null) r |= POLLERR;
    // poll(2) reports POLLHUP for TCP only once both directions are shut down.
    if (this.eof && this.shutWr) r |= POLLHUP;
    return r;
  }

  /** send(): bytes taken (> 0) or -1 with {@link errno}. */
  send(buf: Buffer, off: number, len: number): number {
    const s = this.sock;
    if (this.err !== null) {
      this.errno = this.err;
      return -1;
    }
    if (s.destroyed || !s.writable) {
      this.errno = EPIPE;
      return -1;
    }
    const room = this.sndbuf - s.writableLength;
    if (room <= 0) {
      this.errno = EAGAIN;
      return -1;
    }
    const n = room < len ? room : len;
    if (!this.zeroCopy) {
      s.write(Buffer.from(buf.subarray(off, off + n)), this.afterWrite);
      return n;
    }
    let v = this.view;
    if (v === null || this.viewBuf !== buf || this.viewOff !== off || this.viewLen !== n) {
      v = off === 0 && n === buf.length ? buf : buf.subarray(off, off + n);
      this.view = v;
      this.viewBuf = buf;
      this.viewOff = off;
      this.viewLen = n;
    }
    s.write(v, this.afterWrite);
    // Written to the kernel at once, or (in part) still referenced by Node: lent.
    if (s.writableLength > 0) {
      if (this.lent === null) this.lent = buf.buffer;
      else if (this.lent !== buf.buffer) this.lentMore = true;
    }
    return n;
  }

  /** recv(): bytes (> 0), 0 at EOF, or -1 with {@link errno}. */
  recv(buf: Buffer, off: number, len: number): number {
    if (this.queued === 0) {
      if (this.err !== null) {
        this.errno = this.err;
        return -1;
      }
      if (this.eof) return 0;
      this.errno = EAGAIN;
      return -1;
    }
    if (this.lent !== null && (this.lent === buf.buffer || this.lentMore)) {
      // Node has not yet written bytes we were lent from this memory.
      this.errno = EAGAIN;
      return -1;
    }
    let at = off;
    let left = len;
    while (left > 0 && this.qLen > 0) {
      const h = this.qHead;
      const b = this.qBuf[h] as Buffer;
      const start = this.qStart[h] as number;
      const end = this.qEnd[h] as number;
      const k = end - start < left ? end - start : left;
      b.copy(buf, at, start, start + k);
      at += k;
      left -= k;
      if (start + k === end) this.pop(b);
      else this.qStart[h] = start + k;
    }
    const n = len - left;
    this.queued -= n;
    if (this.readPaused && this.slabs === null && this.queued < this.dataPauseAt) {
      this.readPaused = false;
      this.sock.resume();
    }
    return n;
  }

  /** Drop the queue's oldest entry (all read); free its slab, and read again if that was the wait. */
  private pop(b: Buffer): void {
    const h = this.qHead;
    this.qBuf[h] = null;
    this.qHead = (h + 1) % this.qBuf.length;
    this.qLen--;
    if (this.slabs === null) return;
    const i = this.slabIndex(b);
    this.slabBusy[i] = false;
    if (this.readPaused && i === this.nextSlab) {
      this.readPaused = false;
      this.sock.resume();
    }
  }

  /** poll() this socket: revents (0 on timeout). */
  poll(events: number, timeoutMs: number): Promise<number> {
    const r = this.ready(events);
    if (r !== 0 || timeoutMs === 0) return Promise.resolve(r);
    return this.polls.wait(events, timeoutMs);
  }

  setsockopt(level: number, name: number, value: number): number {
    if (level === SOL_SOCKET && name === SO_SNDBUF) this.sndbuf = Math.max(4608, 2 * value);
    else if (level === SOL_SOCKET && name === SO_RCVBUF) {
      this.rcvbuf = Math.max(2304, 2 * value);
      this.dataPauseAt = Math.max(this.rcvbuf, 1 << 16);
    } else if (level === IPPROTO_TCP && name === TCP_NODELAY) {
      this.nodelay = value !== 0;
      this.sock.setNoDelay(this.nodelay);
    } else if (level === SOL_SOCKET && name === SO_KEEPALIVE) {
      this.keepalive = value !== 0;
      this.sock.setKeepAlive(this.keepalive, this.keepIdle * 1000);
    } else if (level === IPPROTO_TCP && name === TCP_KEEPIDLE) {
      if (value <= 0) {
        this.errno = EINVAL;
        return -1;
      }
      this.keepIdle = value;
      if (this.keepalive) this.sock.setKeepAlive(true, value * 1000);
    }
    return 0;
  }

  getsockopt(level: number, name: number): number | null {
    if (level === SOL_SOCKET && name === SO_KEEPALIVE) return this.keepalive ? 1 : 0;
    if (level === IPPROTO_TCP && name === TCP_KEEPIDLE) return this.keepIdle;
    if (level === SOL_SOCKET && name === SO_ERROR) return 0;
    if (level === SOL_SOCKET && name === SO_SNDBUF) return this.sndbuf;
    if (level === SOL_SOCKET && name === SO_RCVBUF) return this.rcvbuf;
    return 0;
  }

  async shutdown(): Promise<void> {
    this.shutWr = true;
    if (!this.sock.destroyed && this.sock.writable) this.sock.end();
  }

  async close(): Promise<void> {
    const s = this.sock;
    if (s.destroyed) return;
    if (s.writable) s.end();
    // close(2) hands what is queued to the kernel: wait for our queue to be written, then go.
    if (s.writableLength > 0 && !s.writableFinished) await Promise.race([once(s, 'finish'), once(s, 'close'), once(s, 'error')]).catch(() => {});
    s.destroy();
  }
}
