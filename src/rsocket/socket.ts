/**
 * The Node face of a stream rsocket: {@link RSocket} is a `stream.Duplex` shaped like
 * `net.Socket` — `connect()`, `'connect'`/`'ready'`, backpressure both ways, half-close
 * (`end()` is rshutdown(SHUT_WR): the peer reads everything written before it, then EOF),
 * `allowHalfOpen`, `destroy()`, errors as `'error'` events — so `pipeline(file, rsocket)` and
 * `for await (const chunk of rsocket)` work as with TCP.
 *
 * Flow control is rsocket's own: a write completes once its bytes are in the send buffer and
 * posted (credits permitting); reads pull bytes out of the receive buffer only as fast as the
 * consumer takes them, so a slow reader stops the writer through the credits, end to end.
 */
import { Duplex } from 'node:stream';
import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { RsConn, RS_EAGAIN } from './conn.js';
import type { RsConfig } from './tunables.js';
import { SHUT_WR, SOL_SOCKET, SO_KEEPALIVE, IPPROTO_TCP, TCP_KEEPIDLE, TCP_NODELAY } from './options.js';
import { RsState } from './state.js';
import { checkFamily, checkHost, checkPort, checkSignal } from './args.js';
import { AbortError, throwIfAborted } from '../util/abort.js';
import { RdmaError } from '../errors.js';
import type { EventArgs, EventListener } from './events.js';

/** Options of {@link RSocket} (beside Duplex's own). */
export interface RSocketOptions {
  /** As `net.Socket`: keep the write side open after the peer ended (default false). */
  allowHalfOpen?: boolean;
  /**
   * Send buffer bytes (rsocket: SO_SNDBUF × 2). Default 1 MiB for RSocket (librdmacm's rsocket
   * default, kept by {@link RsConn}, is 128 KiB: a window too small for the software device to
   * stream — 1.5 Gb/s against 3 Gb/s with 1 MiB and 4.6 Gb/s with 4 MiB on loopback).
   */
  sendBufferSize?: number;
  /** Receive buffer bytes (SO_RCVBUF × 2; the peer may fill half of it at a time). Default 1 MiB. */
  receiveBufferSize?: number;
  /** RDMA_SQSIZE (default 384). */
  sqSize?: number;
  /** RDMA_RQSIZE: receive credits (default 384). */
  rqSize?: number;
  /** RDMA_INLINE (default 64). */
  inlineSize?: number;
  /** RDMA_IOMAPSIZE: iomap entries the peer may use (default 0). */
  iomapSize?: number;
  /** Duplex highWaterMark of both sides (default Node's). */
  highWaterMark?: number;
  /** @internal An established connection to wrap (RServer). */
  conn?: RsConn;
}

/** `connect()` options, as `net.connect`. */
export interface RSocketConnectOptions {
  port: number | string;
  host?: string;
  localAddress?: string;
  localPort?: number;
  family?: 4 | 6 | 0;
  /**
   * As `net.connect({ signal })`: when it aborts, the socket is destroyed with an AbortError
   * (`'error'`, then `'close'`) — while connecting, the connect stops and leaves nothing behind;
   * already aborted, the socket is destroyed a tick after the call.
   */
  signal?: AbortSignal;
}

/** The events of an {@link RSocket} and their arguments, as `net.Socket`'s. */
export interface RSocketEventMap {
  /** Connected (client side). */
  connect: [];
  /** Connected and ready to use (after `'connect'`). */
  ready: [];
  /** Bytes received. */
  data: [data: Buffer];
  /** The peer ended its write side and every byte was read. */
  end: [];
  /** The write side may take more (after write() returned false). */
  drain: [];
  /** Every write done after end(). */
  finish: [];
  /** Failed (ECONNREFUSED, ECONNRESET, AbortError …); `'close'` follows. */
  error: [err: Error];
  /** Closed; `hadError` when `'error'` came first. */
  close: [hadError: boolean];
  /** setTimeout()'s idle time passed. */
  timeout: [];
  /** Data is ready to read (paused mode). */
  readable: [];
  /** A readable was piped into this socket. */
  pipe: [src: import('node:stream').Readable];
  /** A readable stopped piping into this socket. */
  unpipe: [src: import('node:stream').Readable];
  /** Reading paused. */
  pause: [];
  /** Reading resumed. */
  resume: [];
}

/** The events of a stream rsocket, typed by {@link RSocketEventMap} (as `net.Socket`'s). */
export interface RSocket {
  /** Add `listener` for `event`; a listener of a mapped event gets its typed arguments. */
  on<K extends string | symbol>(event: K, listener: EventListener<RSocketEventMap, K>): this;
  /** Add `listener` for the next `event` only. */
  once<K extends string | symbol>(event: K, listener: EventListener<RSocketEventMap, K>): this;
  /** Remove `listener` from `event` (alias of removeListener). */
  off<K extends string | symbol>(event: K, listener: EventListener<RSocketEventMap, K>): this;
  /** Add `listener` for `event` (alias of on). */
  addListener<K extends string | symbol>(event: K, listener: EventListener<RSocketEventMap, K>): this;
  /** Remove `listener` from `event`. */
  removeListener<K extends string | symbol>(event: K, listener: EventListener<RSocketEventMap, K>): this;
  /** Add `listener` for `event` before the listeners already there. */
  prependListener<K extends string | symbol>(event: K, listener: EventListener<RSocketEventMap, K>): this;
  /** Add `listener` for the next `event` only, before the listeners already there. */
  prependOnceListener<K extends string | symbol>(event: K, listener: EventListener<RSocketEventMap, K>): this;
  /** Call the listeners of `event` with `args` (typed for a mapped event); true if it had any. */
  emit<K extends string | symbol>(event: K, ...args: EventArgs<RSocketEventMap, K>): boolean;
}

/** Map the public options to an rsocket configuration. */
export function configFrom(o: RSocketOptions): Partial<RsConfig> {
  const c: Partial<RsConfig> = {};
  c.sbufSize = Math.max(4096, o.sendBufferSize ?? DEFAULT_BUFFER);
  c.rbufSize = Math.max(4096, o.receiveBufferSize ?? DEFAULT_BUFFER) & ~1;
  if (o.sqSize !== undefined) c.sqSize = o.sqSize;
  if (o.rqSize !== undefined) c.rqSize = o.rqSize;
  if (o.inlineSize !== undefined) c.sqInline = o.inlineSize;
  if (o.iomapSize !== undefined) c.targetIomapSize = o.iomapSize;
  return c;
}

/** Default send and receive buffer of the Node face. */
const DEFAULT_BUFFER = 1 << 20;

/** Largest Buffer handed to push() at once. */
const READ_CHUNK = 256 * 1024;

/** A stream rsocket as a Duplex. */
export class RSocket extends Duplex {
  /** The rsocket underneath (riomap/riowrite, rsetsockopt ...). */
  readonly conn: RsConn;
  /**
   * Bytes received ([0]) and accepted for sending ([1]) so far, in a typed array: a count that
   * passes 2^31 (after 2 GiB) in a number field would change the field's representation and
   * throw away the code optimised for the socket in the middle of a transfer.
   */
  private readonly byteCounts = new Float64Array(2);
  private _connecting = false;
  private reading = false;
  private pulling = false;
  private readonly wq: { buf: Uint8Array; off: number }[] = [];
  private wcb: ((err?: Error | null) => void) | null = null;
  private ended = false;
  private pendingFinal: (() => void) | null = null;
  private idleMs = 0;
  private idleTimer: NodeJS.Timeout | null = null;
  private timeoutSet = false;
  /** {@link RSocket.unref} was called last. */
  private unrefd = false;
  /** The connect under way or done (one per socket), and what stops it. */
  private connectRun: Promise<void> | null = null;
  private readonly connectAbort = new AbortController();

  constructor(options: RSocketOptions = {}) {
    const dopts: import('node:stream').DuplexOptions = { allowHalfOpen: options.allowHalfOpen ?? false, emitClose: false, autoDestroy: true, decodeStrings: true };
    if (options.highWaterMark !== undefined) dopts.highWaterMark = options.highWaterMark;
    super(dopts);
    this.conn = options.conn ?? new RsConn(configFrom(options));
    this.conn.onNotify = () => this.onConn();
    if (options.conn) this.onConn();
  }

  // -- net.Socket-like properties -----------------------------------------------------------

  /** True while connect() is in progress. */
  get connecting(): boolean {
    return this._connecting;
  }
  /** True until connected (net.Socket's `pending`). */
  get pending(): boolean {
    return !(this.conn.state & (RsState.connected | RsState.disconnected));
  }
  /** `'opening' | 'open' | 'readOnly' | 'writeOnly' | 'closed'`, as net.Socket. */
  get readyState(): string {
    if (this._connecting) return 'opening';
    const s = this.conn.state;
    const r = this.readable && !!(s & RsState.readable);
    const w = this.writable && !!(s & RsState.writable);
    if (r && w) return 'open';
    if (r) return 'readOnly';
    if (w) return 'writeOnly';
    return 'closed';
  }
  /** The peer's address (net.Socket's `remoteAddress`); undefined before connecting. */
  get remoteAddress(): string | undefined {
    return this.conn.remoteAddress?.address;
  }
  /** The peer's port (net.Socket's `remotePort`). */
  get remotePort(): number | undefined {
    return this.conn.remoteAddress?.port;
  }
  /** `'IPv4'` or `'IPv6'`, the peer address's family (net.Socket's `remoteFamily`). */
  get remoteFamily(): string | undefined {
    const a = this.conn.remoteAddress;
    return a ? (a.family ?? (a.address.includes(':') ? 'IPv6' : 'IPv4')) : undefined;
  }
  /** The local address the connection uses (net.Socket's `localAddress`). */
  get localAddress(): string | undefined {
    return this.conn.localAddress?.address;
  }
  /** The local port (net.Socket's `localPort`). */
  get localPort(): number | undefined {
    return this.conn.localAddress?.port;
  }
  /** Bytes received so far (net.Socket's `bytesRead`). */
  get bytesRead(): number {
    return this.byteCounts[0] as number;
  }
  /** Bytes accepted for sending (net.Socket's `bytesWritten`). */
  get bytesWritten(): number {
    return this.byteCounts[1] as number;
  }
  /** `{ address, family, port }` of the local end. */
  address(): { address: string; family: string; port: number } | Record<string, never> {
    const a = this.conn.localAddress;
    if (!a) return {};
    return { address: a.address, family: a.family ?? (a.address.includes(':') ? 'IPv6' : 'IPv4'), port: a.port };
  }

  /** TCP_NODELAY (rsocket records the flag; messages are never delayed). */
  setNoDelay(noDelay = true): this {
    this.conn.setsockopt(IPPROTO_TCP, TCP_NODELAY, noDelay);
    return this;
  }

  /** SO_KEEPALIVE (+ TCP_KEEPIDLE from `initialDelay` ms): a zero-length write every interval. */
  setKeepAlive(enable = false, initialDelay = 0): this {
    if (initialDelay > 0) this.conn.setsockopt(IPPROTO_TCP, TCP_KEEPIDLE, Math.max(1, Math.round(initialDelay / 1000)));
    this.conn.setsockopt(SOL_SOCKET, SO_KEEPALIVE, enable);
    return this;
  }

  /**
   * As `net.Socket.setTimeout`: emit `'timeout'` after `ms` without data in or out (0 disables);
   * the socket stays open — the listener decides.
   */
  setTimeout(ms: number, cb?: () => void): this {
    if (cb) this.once('timeout', cb);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    this.idleMs = ms > 0 ? ms : 0;
    this.timeoutSet = true;
    this.touch();
    return this;
  }

  /** The idle timeout set by {@link setTimeout} in ms, undefined before any (net.Socket's `timeout`). */
  get timeout(): number | undefined {
    return this.timeoutSet ? this.idleMs : undefined;
  }

  /**
   * As `net.Socket.destroySoon`: end the write side, and destroy once everything written is
   * flushed (at once if it already is). node:http ends a connection it will not reuse this way.
   */
  destroySoon(): void {
    if (this.writable) this.end();
    if (this.writableFinished) this.destroy();
    else this.once('finish', () => this.destroy());
  }

  /** Restart the idle timer (activity). */
  private touch(): void {
    if (!this.idleMs || this.destroyed) return;
    if (this.idleTimer) this.idleTimer.refresh();
    else {
      this.idleTimer = setTimeout(() => {
        this.idleTimer = null;
        if (!this.destroyed) this.emit('timeout');
      }, this.idleMs);
      this.idleTimer.unref();
    }
  }

  /**
   * As `net.Socket.ref()`: the connection holds the event loop open again (the default). Undoes
   * {@link RSocket.unref}; may be called before `connect`.
   */
  ref(): this {
    this.unrefd = false;
    this.conn._setHoldsLoop(true);
    return this;
  }
  /**
   * As `net.Socket.unref()`: the connection no longer keeps the process alive by itself — its QP's
   * socket (iWARP) or its share of the device's UDP sockets (RoCE) and its CM state stop holding
   * the event loop; bytes not yet handed to the kernel still hold it. The socket keeps working.
   * node:http's Agent unrefs its idle keep-alive sockets this way.
   */
  unref(): this {
    this.unrefd = true;
    this.holdWhileWriting();
    return this;
  }

  /**
   * Unref'd, the connection still holds the event loop while written bytes wait here for send
   * credits, as `net`'s pending write requests do; idle, it does not.
   */
  private holdWhileWriting(): void {
    this.conn._setHoldsLoop(this.wq.length > 0);
  }

  // -- connect -------------------------------------------------------------------------------

  /**
   * Connect to `port`/`host` (default host `localhost`), as `net.Socket.connect`. Emits
   * `'connect'` and `'ready'`, or `'error'` (ECONNREFUSED …). Throws EINVAL (`rconnect`) where
   * `net` throws: a bad port, host, local address or port, family or signal.
   */
  connect(options: RSocketConnectOptions, listener?: () => void): this;
  connect(port: number | string, host?: string, listener?: () => void): this;
  connect(port: number | string, listener?: () => void): this;
  connect(a: number | string | RSocketConnectOptions, b?: string | (() => void), c?: () => void): this {
    let cb: (() => void) | undefined;
    let raw: Partial<RSocketConnectOptions>;
    if (typeof a === 'object' && a !== null) {
      raw = a;
      cb = typeof b === 'function' ? b : undefined;
    } else {
      raw = { port: a };
      if (typeof b === 'string') {
        raw.host = b;
        cb = c;
      } else cb = b;
    }
    const o = checkConnectOptions(raw);
    if (this._connecting) throw new RdmaError('EALREADY', { op: 'rconnect' });
    if (this.connectRun || !this.pending) throw new RdmaError('EISCONN', { op: 'rconnect' });
    if (cb) this.once('connect', cb);
    this._connecting = true;
    if (o.signal) this.watchSignal(o.signal);
    // Already aborted: nothing is started; the socket is destroyed a tick later (as net).
    if (!o.signal?.aborted) this.connectRun = this.doConnect(o);
    return this;
  }

  /**
   * As net's `addAbortSignal` on a socket: for the socket's whole life, an abort destroys it with
   * an AbortError (a tick after the call when already aborted).
   */
  private watchSignal(signal: AbortSignal): void {
    const onAbort = (): void => {
      this.connectAbort.abort(signal.reason);
      if (!this.destroyed) this.destroy(new AbortError(this._connecting ? 'rconnect' : 'rsocket', { cause: signal.reason }));
    };
    if (signal.aborted) {
      this.connectAbort.abort(signal.reason);
      process.nextTick(onAbort);
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    this.once('close', () => signal.removeEventListener('abort', onAbort));
  }

  private async doConnect(o: CheckedConnect): Promise<void> {
    const signal = this.connectAbort.signal;
    try {
      const host = o.host ?? 'localhost';
      let address = host;
      if (!isIP(host)) address = (await lookup(host, o.family ? { family: o.family } : {})).address;
      throwIfAborted(signal, 'rconnect');
      if (o.localAddress !== undefined || o.localPort !== undefined) {
        this.conn.bind({ address: o.localAddress ?? (address.includes(':') ? '::' : '0.0.0.0'), port: o.localPort ?? 0 });
      }
      await this.conn.connect({ address, port: o.port }, signal);
    } catch (e) {
      this._connecting = false;
      this.destroy(e as Error);
      return;
    }
    this._connecting = false;
    if (this.destroyed) {
      void this.conn.destroy();
      return;
    }
    this.emit('connect');
    this.emit('ready');
    this.onConn();
  }

  /**
   * `using socket = connect(...)`: destroy now (Symbol.dispose, which net.Socket lacks; the
   * asynchronous `await using` is stream.Duplex's: destroy and wait for `'close'`).
   */
  [Symbol.dispose](): void {
    if (!this.destroyed) this.destroy();
  }

  // -- Duplex --------------------------------------------------------------------------------

  /** Everything the connection might have changed: data, credits, end of stream, errors. */
  private onConn(): void {
    if (this.destroyed) return;
    if (this.reading) this.pull();
    else if (!this.ended && this.conn.readEnded && !this.conn.error) {
      // End of stream with everything already handed to the stream: end it even if nobody asks
      // for more (net.Socket does the same at EOF), so a socket that is never read still closes.
      this.ended = true;
      this.push(null);
      this.read(0);
    }
    if (this.wq.length > 0) this.flush();
    if (this.pendingFinal && this.conn.connected) {
      const f = this.pendingFinal;
      this.pendingFinal = null;
      f();
    }
    const e = this.conn.error;
    if (e && !this.destroyed) {
      // A peer breaking the protocol: stop at once (what it sent before was delivered if read).
      if (e.code === 'EPROTO' && !this.reading) this.destroy(e);
      // Otherwise (the peer vanished, a failed send) the error follows the data already received,
      // and surfaces even with nobody reading or writing once that data is gone.
      else if (this.conn.readableLength === 0 && !this.reading && this.wq.length === 0 && this.readableFlowing !== false) this.destroy(e);
    }
  }

  /** @internal Readable's `_read`: the stream machinery calls it, not the user. */
  override _read(): void {
    this.reading = true;
    this.pull();
  }

  /**
   * Push what the receive buffer holds while the stream wants more. Not re-entrant: a push may
   * run the consumer, which may read and so call _read() again before push() returns — that
   * call only re-arms {@link reading}, which a full buffer (push() false) must not clear.
   */
  private pull(): void {
    if (this.pulling) return;
    this.pulling = true;
    try {
      this.pullLoop();
    } finally {
      this.pulling = false;
    }
  }

  private pullLoop(): void {
    const c = this.conn;
    if (c.state & RsState.opening || this._connecting) return;
    while (this.reading) {
      let chunk: Buffer | null;
      try {
        chunk = c.readChunk(READ_CHUNK);
      } catch (e) {
        this.destroy(e as Error);
        return;
      }
      if (chunk) {
        this.byteCounts[0] = (this.byteCounts[0] as number) + chunk.length;
        if (this.idleMs) this.touch();
        this.reading = false;
        if (this.push(chunk)) this.reading = true;
        continue;
      }
      if (c.error) {
        this.reading = false;
        this.destroy(c.error);
        return;
      }
      if (c.readEnded && !this.ended) {
        this.ended = true;
        this.reading = false;
        this.push(null);
      }
      return;
    }
  }

  /** @internal Writable's `_writev`. */
  override _writev(chunks: { chunk: unknown; encoding: BufferEncoding }[], cb: (err?: Error | null) => void): void {
    for (const c of chunks) this.wq.push({ buf: c.chunk as Uint8Array, off: 0 });
    this.wcb = cb;
    this.flush();
  }

  /** @internal Writable's `_write`. */
  override _write(chunk: unknown, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.wq.push({ buf: chunk as Uint8Array, off: 0 });
    this.wcb = cb;
    this.flush();
  }

  private flush(): void {
    const c = this.conn;
    if (this._connecting || c.state & RsState.opening || c.state === RsState.init) return;
    try {
      while (this.wq.length > 0) {
        const w = this.wq[0] as { buf: Uint8Array; off: number };
        const left = w.buf.length - w.off;
        if (left === 0) {
          this.wq.shift();
          continue;
        }
        const n = c.send(w.buf, w.off, left, false);
        if (n === RS_EAGAIN) {
          if (this.unrefd) this.holdWhileWriting();
          return;
        }
        w.off += n;
        this.byteCounts[1] = (this.byteCounts[1] as number) + n;
        if (this.idleMs) this.touch();
      }
    } catch (e) {
      this.wq.length = 0;
      const cb = this.wcb;
      this.wcb = null;
      if (cb) cb(e as Error);
      else this.destroy(e as Error);
      return;
    }
    if (this.unrefd) this.holdWhileWriting();
    const cb = this.wcb;
    this.wcb = null;
    cb?.();
  }

  /** @internal Writable's `_final`: sends the shutdown once the queued data is out. */
  override _final(cb: (err?: Error | null) => void): void {
    const go = (): void => {
      if (this.conn.state & RsState.writable) {
        this.conn.shutdown(SHUT_WR).then(
          () => cb(),
          (e: Error) => cb(e),
        );
      } else cb();
    };
    if (this._connecting || this.conn.state & RsState.opening) this.pendingFinal = go;
    else go();
  }

  /** @internal Duplex's `_destroy`. */
  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.reading = false;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    const c = this.conn;
    const e = err ?? null;
    // 'close' carries hadError, as net.Socket's (emitClose is off): after the stream's own
    // 'error' (which destroy() queues when cb() runs), in a later turn of the event loop as net's
    // handle close, so code that awaits 'error' can still wait for 'close'.
    const done = (): void => {
      cb(e);
      setImmediate(() => this.emit('close', e !== null));
    };
    // A connect under way stops at its next step and unwinds first (no QP or MR built after
    // the close): then, as close(2) under net.Socket.destroy(), the peer sees an orderly end
    // (rclose sends the rsocket DISCONNECT) whether or not a local error is reported.
    const run = this._connecting ? this.connectRun : null;
    this._connecting = false;
    if (run) {
      this.connectAbort.abort(e ?? new AbortError('rconnect'));
      run.then(() => c.close()).then(done, done);
    } else c.close().then(done, done);
  }
}

/** `net.connect()` for rsockets (EINVAL thrown for bad arguments, as net throws). */
export function connect(options: RSocketConnectOptions & RSocketOptions, listener?: () => void): RSocket;
export function connect(port: number | string, host?: string, listener?: () => void): RSocket;
export function connect(port: number | string, listener?: () => void): RSocket;
export function connect(a: number | string | (RSocketConnectOptions & RSocketOptions), b?: string | (() => void), c?: () => void): RSocket {
  if (typeof a === 'object' && a !== null) {
    checkConnectOptions(a);
    const s = new RSocket(a);
    return s.connect(a, typeof b === 'function' ? b : undefined);
  }
  checkPort(a, 'rconnect');
  const s = new RSocket();
  if (typeof b === 'string') return s.connect(a, b, c);
  return s.connect(a, b);
}

/** Connect options after {@link checkConnectOptions}. */
interface CheckedConnect {
  port: number;
  host: string | undefined;
  localAddress: string | undefined;
  localPort: number | undefined;
  family: 0 | 4 | 6 | undefined;
  signal: AbortSignal | undefined;
}

/** The checks net.Socket.connect makes, as EINVAL of `rconnect`. */
function checkConnectOptions(o: Partial<RSocketConnectOptions>): CheckedConnect {
  const op = 'rconnect';
  const localPort = o.localPort === undefined ? undefined : checkPort(o.localPort, op, 'options.localPort');
  return {
    port: checkPort(o.port, op, 'options.port'),
    host: checkHost(o.host, op, 'options.host'),
    localAddress: checkHost(o.localAddress, op, 'options.localAddress'),
    localPort,
    family: checkFamily(o.family, op),
    signal: checkSignal(o.signal, op),
  };
}

/** Alias of {@link connect}, as `net.createConnection`. */
export const createConnection = connect;
