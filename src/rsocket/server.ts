/**
 * {@link RServer}: `net.Server` for rsockets — `listen()`, `'listening'`, `'connection'` with an
 * established {@link RSocket}, `address()`, `close()` (stop accepting; `'close'` once every
 * accepted socket has closed too), `getConnections()`, `await using` ({@link
 * RServer[Symbol.asyncDispose]}: close and wait), events typed by {@link RServerEventMap}.
 *
 * As `net.Server.listen`: bad arguments throw at once (here an {@link RdmaError} EINVAL naming
 * them; `net` throws ERR_SOCKET_BAD_PORT …); a failure to bind or listen is an `'error'` event
 * emitted a tick later, never inside the call, so `once(server, 'listening')` rejects with it;
 * `signal` closes the server when it aborts (already aborted: closed before it listens).
 */
import { EventEmitter } from 'node:events';
import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { RdmaError } from '../errors.js';
import { RsListener } from './listener.js';
import type { CmEvent } from '../cm/index.js';
import { RSocket, configFrom, type RSocketOptions } from './socket.js';
import { SOL_SOCKET, SO_REUSEADDR } from './options.js';
import { badArg, checkBacklog, checkHost, checkPort, checkSignal, describeValue } from './args.js';
import type { EventArgs, EventListener } from './events.js';

/** `listen()` options, as `net.Server.listen`. */
export interface RServerListenOptions {
  port?: number | string;
  host?: string;
  backlog?: number;
  /** IPV6_V6ONLY for a `::` listener. */
  ipv6Only?: boolean;
  /** Closes the server when it aborts (as `net.Server.listen({ signal })`). */
  signal?: AbortSignal;
}

/** The events of an {@link RServer} and their arguments (those of `net.Server`, plus `'clientError'`). */
export interface RServerEventMap {
  /** Listening: `address()` answers. */
  listening: [];
  /** A connection was accepted and established. */
  connection: [socket: RSocket];
  /** listen() failed (EADDRINUSE, EADDRNOTAVAIL, ENODEV …). */
  error: [err: Error];
  /** Closed, and every accepted connection closed too. */
  close: [];
  /** A connect request that failed before it became a connection (the server goes on). */
  clientError: [err: Error];
}

/** The events of a listening rsocket server, typed by {@link RServerEventMap}. */
export interface RServer {
  /** Add `listener` for `event`; a listener of a mapped event gets its typed arguments. */
  on<K extends string | symbol>(event: K, listener: EventListener<RServerEventMap, K>): this;
  /** Add `listener` for the next `event` only. */
  once<K extends string | symbol>(event: K, listener: EventListener<RServerEventMap, K>): this;
  /** Remove `listener` from `event` (alias of removeListener). */
  off<K extends string | symbol>(event: K, listener: EventListener<RServerEventMap, K>): this;
  /** Add `listener` for `event` (alias of on). */
  addListener<K extends string | symbol>(event: K, listener: EventListener<RServerEventMap, K>): this;
  /** Remove `listener` from `event`. */
  removeListener<K extends string | symbol>(event: K, listener: EventListener<RServerEventMap, K>): this;
  /** Add `listener` for `event` before the listeners already there. */
  prependListener<K extends string | symbol>(event: K, listener: EventListener<RServerEventMap, K>): this;
  /** Add `listener` for the next `event` only, before the listeners already there. */
  prependOnceListener<K extends string | symbol>(event: K, listener: EventListener<RServerEventMap, K>): this;
  /** Call the listeners of `event` with `args` (typed for a mapped event); true if it had any. */
  emit<K extends string | symbol>(event: K, ...args: EventArgs<RServerEventMap, K>): boolean;
}
/** A listening rsocket server. */
export class RServer extends EventEmitter {
  private listener: RsListener | null = null;
  private readonly sockOpts: RSocketOptions;
  private readonly conns = new Set<RSocket>();
  private closing = false;
  private closed = false;
  /** Aborts the handshakes still in progress when the server closes (one per listen). */
  private handshakes = new AbortController();
  private _listening = false;
  /** Stops listening to the listen() signal. */
  private unlisten: (() => void) | null = null;

  constructor(options: RSocketOptions = {}, connectionListener?: (s: RSocket) => void) {
    super();
    this.sockOpts = options;
    if (connectionListener) this.on('connection', connectionListener);
  }

  /** True once listening. */
  get listening(): boolean {
    return this._listening;
  }

  /**
   * Start listening (as net.Server: port 0 picks one; host default the IPv4 wildcard; a closed
   * server may listen again). Throws EINVAL for a bad port, host, backlog or signal, or when
   * already listening; errors of the bind and listen themselves come as `'error'`, a tick later
   * at the earliest.
   */
  listen(options: RServerListenOptions, cb?: () => void): this;
  listen(port?: number | string, host?: string, backlog?: number, cb?: () => void): this;
  listen(port?: number | string, host?: string, cb?: () => void): this;
  listen(port?: number | string, backlog?: number, cb?: () => void): this;
  listen(port?: number | string, cb?: () => void): this;
  listen(cb?: () => void): this;
  listen(...args: unknown[]): this {
    const op = 'rbind';
    let o: RServerListenOptions;
    const cb = typeof args[args.length - 1] === 'function' ? (args.pop() as () => void) : undefined;
    const a = args[0];
    if (typeof a === 'object' && a !== null) {
      o = a as RServerListenOptions;
      if ((o as { path?: unknown }).path !== undefined) throw badArg(op, 'rsockets listen on ports, not paths');
      // As net: an options object names its port (undefined: pick one).
      if (!('port' in o)) throw badArg(op, 'options should have a port property');
    } else {
      o = {};
      if (a !== undefined && a !== null) o.port = a as number;
      // (port, host, backlog) or (port, backlog), as net.Server.listen
      for (const r of args.slice(1)) {
        if (typeof r === 'string') o.host = r;
        else if (typeof r === 'number') o.backlog = r;
        else if (r !== undefined && r !== null) throw badArg(op, `listen() argument ${describeValue(r)}`);
      }
    }
    const port = o.port === undefined ? 0 : checkPort(o.port, op, typeof a === 'object' ? 'options.port' : 'port');
    const host = checkHost(o.host, op, 'options.host');
    const backlog = checkBacklog(o.backlog, 'rlisten');
    const signal = checkSignal(o.signal, op);
    if (this.listener || this._listening) throw badArg(op, 'the server is already listening');
    // As net.Server: a closed server may listen again (its old connections stay counted).
    if (this.closing) {
      this.closing = false;
      this.closed = false;
      this.handshakes = new AbortController();
    }
    if (cb) this.once('listening', cb);
    if (signal) {
      const onAbort = (): void => void this.close();
      // As net: an aborted signal closes the server a tick later, before it listens.
      if (signal.aborted) process.nextTick(onAbort);
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        this.unlisten = () => signal.removeEventListener('abort', onAbort);
      }
    }
    // Already aborted: nothing is bound; the server closes a tick later.
    if (signal?.aborted) return this;
    const l = new RsListener(configFrom(this.sockOpts));
    l._setHoldsLoop(this.holds);
    this.listener = l;
    void this.start(l, { port, host, backlog, ipv6Only: o.ipv6Only });
    return this;
  }

  private async start(l: RsListener, o: { port: number; host: string | undefined; backlog: number | undefined; ipv6Only: boolean | undefined }): Promise<void> {
    try {
      let host = o.host ?? '0.0.0.0';
      if (!isIP(host)) host = (await lookup(host)).address;
      // Closed (and perhaps listening again with another listener) during the lookup.
      if (this.listener !== l) return;
      l.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1);
      if (o.ipv6Only !== undefined) l.setsockopt(41, 26, o.ipv6Only);
      l.bind({ address: host, port: o.port });
      await l.listen(o.backlog ?? 511);
    } catch (e) {
      const current = this.listener === l;
      if (current) this.listener = null;
      void l.close();
      // As net.Server (emitErrorNT): never inside listen(), so once(server, 'listening') sees it.
      if (current) process.nextTick(() => this.emit('error', e as Error));
      return;
    }
    // Closed while the listen was under way (close(), the signal): no 'listening'.
    if (this.listener !== l) {
      void l.close();
      return;
    }
    this._listening = true;
    this.emit('listening');
    void this.acceptLoop(l);
  }

  private async acceptLoop(l: RsListener): Promise<void> {
    while (this.listener === l) {
      let ev;
      try {
        ev = await l._nextRequest();
      } catch (e) {
        if (this.listener !== l || (e instanceof RdmaError && e.code === 'EBADF')) return;
        this.emit('clientError', e as Error);
        continue;
      }
      // Each request finishes its handshake on its own: a requester that stops half-way (no RTR,
      // a partial FPDU) holds up nobody else.
      void this.establish(l, ev);
    }
  }

  /** Accept one request; 'connection' once established, 'clientError' if it fails. */
  private async establish(l: RsListener, ev: CmEvent): Promise<void> {
    let c;
    try {
      c = await l._acceptOne(ev, this.handshakes.signal);
    } catch (e) {
      // One bad request (another protocol version, a requester that went away) does not stop the server.
      if (this.listener === l) this.emit('clientError', e as Error);
      return;
    }
    if (this.listener !== l) {
      void c.close();
      return;
    }
    const s = new RSocket({ ...this.sockOpts, conn: c });
    this.conns.add(s);
    s.once('close', () => {
      this.conns.delete(s);
      this.maybeClosed();
    });
    this.emit('connection', s);
  }

  /** `{ address, family, port }` while listening, else null. */
  address(): { address: string; family: string; port: number } | null {
    const a = this.listener?.localAddress;
    if (!a) return null;
    return { address: a.address, family: a.family ?? (a.address.includes(':') ? 'IPv6' : 'IPv4'), port: a.port };
  }

  /**
   * Stop accepting. `cb`/`'close'` once the open connections have closed as well; as net, `cb`
   * gets ERR_SERVER_NOT_RUNNING's counterpart (EBADF) when the server was not listening.
   */
  close(cb?: (err?: Error) => void): this {
    if (cb) {
      const running = this.listener !== null && !this.closing;
      this.once('close', () => (running ? cb() : cb(new RdmaError('EBADF', { op: 'rclose', detail: 'the server is not running' }))));
    }
    if (this.closing) return this;
    this.closing = true;
    this._listening = false;
    this.unlisten?.();
    this.unlisten = null;
    this.handshakes.abort();
    const l = this.listener;
    this.listener = null;
    void (l ? l.close() : Promise.resolve()).then(() => this.maybeClosed());
    return this;
  }

  private maybeClosed(): void {
    if (!this.closing || this.closed || this.conns.size > 0) return;
    this.closed = true;
    setImmediate(() => this.emit('close'));
  }

  /** Number of open connections. */
  getConnections(cb: (err: Error | null, count: number) => void): void {
    cb(null, this.conns.size);
  }

  private holds = true;

  /** As `net.Server.ref()`: listening holds the event loop open again (the default). */
  ref(): this {
    this.holds = true;
    this.listener?._setHoldsLoop(true);
    return this;
  }
  /**
   * As `net.Server.unref()`: a listening server no longer keeps the process alive by itself
   * (its listener's socket or published service stops holding the event loop); it still accepts.
   * Its accepted sockets hold the loop each until they are unref'd themselves. May be called
   * before `listen`.
   */
  unref(): this {
    this.holds = false;
    this.listener?._setHoldsLoop(false);
    return this;
  }

  /**
   * `await using server = createServer(...)`: close and wait for `'close'` (every connection
   * closed), as `net.Server[Symbol.asyncDispose]`; nothing to do for a server that never listened.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.closed || (!this.listener && !this.closing)) return;
    await new Promise<void>((resolve) => {
      this.once('close', resolve);
      this.close();
    });
  }
}

/** `net.createServer()` for rsockets. */
export function createServer(options?: RSocketOptions | ((s: RSocket) => void), connectionListener?: (s: RSocket) => void): RServer {
  if (typeof options === 'function') return new RServer({}, options);
  return new RServer(options ?? {}, connectionListener);
}
