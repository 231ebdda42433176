/**
 * The lower-layer protocol adaptor: one TCP connection (`net.Socket`) as the iWARP stack sees it.
 * Reading: every received byte is handed, in order, to the current consumer (the MPA handshake,
 * then the QP's receive path) as a view that is only valid during the call — sockets we create
 * read into one reused buffer (`onread`), so the consumer copies what it keeps (straight into the
 * destination memory region). Writing: batched with cork/uncork, backpressure reported to the TX
 * path through {@link Llp.onDrain}.
 */
import net from 'node:net';
import { trace, tracing } from '../../trace.js';

/** Receives stream bytes `[start, end)` of `buf`; the view is valid only during the call. */
export type LlpConsumer = (buf: Buffer, start: number, end: number) => void;

/** Size of the reused receive buffer of sockets we create (one read). */
const READ_BUF = 1024 * 1024;

let llpIds = 0;

/**
 * Connections closed on our side whose socket is still flushing or waiting for the peer's FIN.
 * The kernel keeps sending what a closed socket holds; a Node process that exits drops it (and a
 * socket closed with the peer's late bytes unread answers with RST, which discards the rest), so
 * a tool waits for these before it exits: {@link llpsSettled}.
 */
const lingering = new Set<Llp>();
let settleWaiters: (() => void)[] = [];

function lingerDone(l: Llp): void {
  if (!lingering.delete(l) || lingering.size > 0) return;
  const w = settleWaiters;
  settleWaiters = [];
  for (const f of w) f();
}

/**
 * Resolves once every connection ended on our side has sent what it had queued and closed, or
 * after `timeoutMs` (a peer that never answers our FIN).
 */
export function llpsSettled(timeoutMs: number): Promise<void> {
  if (lingering.size === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(done, timeoutMs);
    function done(): void {
      clearTimeout(t);
      settleWaiters = settleWaiters.filter((f) => f !== done);
      resolve();
    }
    settleWaiters.push(done);
  });
}

/**
 * The `onread` option of a socket we read ourselves: a buffer function, so that each read can
 * land where {@link Llp.nextReadBuffer} says (the shared buffer, or a view of a memory region).
 */
function reader(): { buf: Buffer; onread: { buffer: () => Buffer; callback: (n: number, b: Buffer) => boolean }; bind(l: Llp): void } {
  const buf = Buffer.allocUnsafe(READ_BUF);
  let self: Llp | null = null;
  return {
    buf,
    onread: {
      buffer: () => (self ? self.nextReadBuffer() : buf),
      callback: (n, b) => {
        self?.readDone(b, n);
        return true;
      },
    },
    bind(l) {
      self = l;
    },
  };
}

/** One TCP connection under an iWARP endpoint. */
export class Llp {
  readonly socket: net.Socket;
  readonly id = ++llpIds;
  /** Called when the write side can take more after a write returned false. */
  onDrain: (() => void) | null = null;
  /** Called once when the connection is gone: `err` undefined for a clean FIN from the peer. */
  onClose: ((err: Error | undefined, byPeer: boolean) => void) | null = null;
  private consumer: LlpConsumer | null = null;
  private closed = false;
  private localEnded = false;
  /** Bytes that arrived while no consumer was set. */
  private stash: Buffer[] = [];
  private lastError: Error | undefined;

  /** The shared read buffer (null: 'data' events). */
  private readonly readBuf: Buffer | null;
  private readonly small = Buffer.allocUnsafeSlow(16 * 1024);
  /**
   * Direct placement (set by the QP in RDMA mode): where the next read should land. Return a view
   * of the target memory to read payload straight into it, a byte count to read just that much
   * into the shared buffer (so a read stops at a payload boundary), or null for a full read.
   */
  readTarget: (() => Buffer | number | null) | null = null;
  /** A read landed in a view `readTarget` returned: `n` bytes at its start. */
  onPlaced: ((view: Buffer, n: number) => void) | null = null;

  private constructor(socket: net.Socket, readBuf: Buffer | null = null) {
    this.socket = socket;
    this.readBuf = readBuf;
    socket.setNoDelay(true);
    socket.on('drain', () => this.onDrain?.());
    socket.on('end', () => {
      if (tracing('llp')) trace('llp', `LLP[${this.id}]`, 'peer FIN');
      // Half-close is not part of iWARP: a FIN ends the connection (siw releases the socket).
      this.finish(undefined, true);
    });
    socket.on('error', (e) => {
      this.lastError = e;
      if (tracing('llp')) trace('llp', `LLP[${this.id}]`, `error ${e.message}`);
    });
    socket.on('close', () => {
      lingerDone(this);
      this.finish(this.lastError, !this.localEnded);
    });
  }

  /** Wrap an accepted socket (reads come as 'data' events). */
  static accepted(socket: net.Socket): Llp {
    // A server socket accepted paused (`pauseOnConnect`) is re-wrapped so that it, too, reads
    // into one reused buffer: net.Server has no `onread` option of its own.
    const handle = (socket as unknown as { _handle?: unknown })._handle;
    if (socket.isPaused() && handle) {
      const r = reader();
      const opts = { handle, onread: r.onread } as unknown as net.SocketConstructorOpts;
      (socket as unknown as { _handle: unknown })._handle = null;
      const s = new net.Socket(opts);
      s.setNoDelay(true);
      const self = new Llp(s, r.buf);
      r.bind(self);
      s.resume();
      return self;
    }
    const l = new Llp(socket);
    socket.on('data', (chunk: Buffer) => l.deliver(chunk, 0, chunk.length));
    return l;
  }

  /**
   * Open a TCP connection to `host:port` (from `localAddress:localPort` when given), reading into
   * one reused buffer. `onConnect` runs once connected; errors arrive through {@link onClose}.
   */
  static connect(opts: { host: string; port: number; localAddress?: string; localPort?: number; family?: number }, onConnect: () => void): Llp {
    const r = reader();
    const o: net.NetConnectOpts & { onread: ReturnType<typeof reader>['onread'] } = {
      host: opts.host,
      port: opts.port,
      noDelay: true,
      onread: r.onread,
    };
    if (opts.localAddress !== undefined) o.localAddress = opts.localAddress;
    if (opts.localPort !== undefined && opts.localPort !== 0) o.localPort = opts.localPort;
    if (opts.family !== undefined) o.family = opts.family;
    const sock = net.connect(o);
    const self = new Llp(sock, r.buf);
    r.bind(self);
    sock.once('connect', onConnect);
    return self;
  }

  /** The buffer the next read goes into (the `onread` buffer function). */
  nextReadBuffer(): Buffer {
    const buf = this.readBuf as Buffer;
    const t = this.readTarget?.() ?? null;
    if (t === null) return buf;
    if (typeof t === 'number') return t > 0 && t <= this.small.length ? this.small.subarray(0, t) : buf;
    return t;
  }

  /** A read of `n` bytes completed into `b`. */
  readDone(b: Buffer, n: number): void {
    if (b === this.readBuf || b.buffer === this.small.buffer) this.deliver(b, 0, n);
    else if (!this.closed) this.onPlaced?.(b, n);
  }

  /** Local and remote addresses of the connection. */
  get localAddress(): string | undefined {
    return this.socket.localAddress;
  }
  get localPort(): number | undefined {
    return this.socket.localPort;
  }
  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }
  get remotePort(): number | undefined {
    return this.socket.remotePort;
  }
  get isClosed(): boolean {
    return this.closed;
  }

  /** Route received bytes to `c` from now on (bytes received meanwhile are delivered first). */
  setConsumer(c: LlpConsumer | null): void {
    this.consumer = c;
    if (c) {
      while (this.stash.length > 0 && this.consumer === c) {
        const b = this.stash.shift() as Buffer;
        c(b, 0, b.length);
      }
    }
  }

  /** Hand bytes that were read ahead by the previous consumer back for the next one. */
  unshift(buf: Buffer): void {
    if (buf.length > 0) this.stash.unshift(buf);
  }

  private deliver(buf: Buffer, start: number, end: number): void {
    if (this.closed) return;
    const c = this.consumer;
    if (c) c(buf, start, end);
    else this.stash.push(Buffer.from(buf.subarray(start, end)));
  }

  /** Write bytes; returns false when the caller should wait for {@link onDrain}. */
  write(buf: Uint8Array, cb?: (err?: Error | null) => void): boolean {
    if (this.closed || this.localEnded) {
      cb?.(new Error('connection closed'));
      return false;
    }
    if (this.batching === 1) this.batching = 1.5;
    else if (this.batching === 1.5) {
      this.socket.cork();
      this.batching = 2;
    }
    return this.socket.write(buf, cb);
  }

  /** Whether the socket's write buffer is above its high-water mark. */
  get needDrain(): boolean {
    return this.socket.writableNeedDrain;
  }

  /**
   * Start a batch: the first write goes straight to the socket (a lone small message pays no
   * buffering), later ones are corked and leave as one writev at {@link endBatch}; `corkNow`
   * corks from the first write, when the caller knows several writes follow.
   */
  beginBatch(corkNow = false): void {
    if (corkNow) {
      this.socket.cork();
      this.batching = 2;
    } else this.batching = 1;
  }
  /** End a batch started with {@link beginBatch}. */
  endBatch(): void {
    if (this.batching === 2) this.socket.uncork();
    this.batching = 0;
  }
  /** 0: not batching; 1: batching, nothing written yet; 2: corked. */
  private batching: 0 | 1 | 1.5 | 2 = 0;

  /** Graceful close: everything written so far is sent, then FIN. */
  end(): void {
    if (this.localEnded || this.closed) return;
    this.localEnded = true;
    if (!this.socket.destroyed) lingering.add(this);
    this.socket.end();
    // A peer that never answers the FIN must not keep us open forever.
    const t = setTimeout(() => this.socket.destroy(), 3000);
    t.unref();
  }

  /** Abortive close (RST when unread data is pending, as Linux close() does). */
  abort(): void {
    this.localEnded = true;
    this.socket.destroy();
  }

  /** The connection is over (peer FIN, error or close): close our side too, tell the owner once. */
  private finish(e: Error | undefined, byPeer: boolean): void {
    if (this.closed) return;
    this.closed = true;
    this.consumer = null;
    this.stash = [];
    if (!this.socket.destroyed) {
      this.localEnded = true;
      lingering.add(this);
      this.socket.end();
      const t = setTimeout(() => this.socket.destroy(), 1000);
      t.unref();
    }
    const cb = this.onClose;
    this.onClose = null;
    cb?.(e, byPeer);
  }
}
