/**
 * {@link RServer}: `net.Server` for rsockets — `listen()`, `'listening'`, `'connection'` with an
 * established {@link RSocket}, `address()`, `close()` (stop accepting; `'close'` once every
 * accepted socket has closed too), `getConnections()`.
 */
import { EventEmitter } from 'node:events';
import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { RdmaError } from '../errors.js';
import { RsListener } from './listener.js';
import type { CmEvent } from '../cm/index.js';
import { RSocket, configFrom, type RSocketOptions } from './socket.js';
import { SOL_SOCKET, SO_REUSEADDR } from './options.js';

/** `listen()` options, as `net.Server.listen`. */
export interface RServerListenOptions {
  port?: number;
  host?: string;
  backlog?: number;
  /** IPV6_V6ONLY for a `::` listener. */
  ipv6Only?: boolean;
}

/** A listening rsocket server. */
export class RServer extends EventEmitter {
  private listener: RsListener | null = null;
  private readonly sockOpts: RSocketOptions;
  private readonly conns = new Set<RSocket>();
  private closing = false;
  private closed = false;
  /** Aborts the handshakes still in progress when the server closes. */
  private readonly handshakes = new AbortController();
  private _listening = false;

  constructor(options: RSocketOptions = {}, connectionListener?: (s: RSocket) => void) {
    super();
    this.sockOpts = options;
    if (connectionListener) this.on('connection', connectionListener);
  }

  /** True once listening. */
  get listening(): boolean {
    return this._listening;
  }

  /** Start listening (as net.Server: port 0 picks one; host default `::` / any). */
  listen(options: RServerListenOptions, cb?: () => void): this;
  listen(port?: number, host?: string, backlog?: number, cb?: () => void): this;
  listen(port?: number, host?: string, cb?: () => void): this;
  listen(port?: number, cb?: () => void): this;
  listen(a?: number | RServerListenOptions, b?: string | number | (() => void), c?: number | (() => void), d?: () => void): this {
    let o: RServerListenOptions;
    let cb: (() => void) | undefined;
    if (typeof a === 'object') {
      o = a;
      cb = typeof b === 'function' ? b : undefined;
    } else {
      o = {};
      if (a !== undefined) o.port = a;
      const rest = [b, c, d];
      for (const r of rest) {
        if (typeof r === 'function') cb = r;
        else if (typeof r === 'string') o.host = r;
        else if (typeof r === 'number') o.backlog = r;
      }
    }
    if (cb) this.once('listening', cb);
    void this.start(o);
    return this;
  }

  private async start(o: RServerListenOptions): Promise<void> {
    const l = new RsListener(configFrom(this.sockOpts));
    this.listener = l;
    try {
      let host = o.host ?? '0.0.0.0';
      if (!isIP(host)) host = (await lookup(host)).address;
      l.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1);
      if (o.ipv6Only !== undefined) l.setsockopt(41, 26, o.ipv6Only);
      l.bind({ address: host, port: o.port ?? 0 });
      await l.listen(o.backlog ?? 511);
    } catch (e) {
      this.listener = null;
      this.emit('error', e);
      return;
    }
    this._listening = true;
    this.emit('listening');
    void this.acceptLoop(l);
  }

  private async acceptLoop(l: RsListener): Promise<void> {
    while (!this.closing) {
      let ev;
      try {
        ev = await l._nextRequest();
      } catch (e) {
        if (this.closing || (e instanceof RdmaError && e.code === 'EBADF')) return;
        this.emit('clientError', e);
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
      if (!this.closing) this.emit('clientError', e);
      return;
    }
    if (this.closing) {
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

  /** Stop accepting. `cb`/`'close'` once the open connections have closed as well. */
  close(cb?: (err?: Error) => void): this {
    if (cb) this.once('close', () => cb());
    if (this.closing) return this;
    this.closing = true;
    this._listening = false;
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

  /** No-op for compatibility with `net.Server` (a listening rsocket server does not hold the event loop by a handle of its own). */
  ref(): this {
    return this;
  }
  /** No-op for compatibility, as {@link RServer.ref}. */
  unref(): this {
    return this;
  }
}

/** `net.createServer()` for rsockets. */
export function createServer(options?: RSocketOptions | ((s: RSocket) => void), connectionListener?: (s: RSocket) => void): RServer {
  if (typeof options === 'function') return new RServer({}, options);
  return new RServer(options ?? {}, connectionListener);
}
