/**
 * The server side of HTTP over rsockets: node:http, node:https and node:http2 servers take their
 * connections from an rsocket server ({@link RServer}) instead of a TCP listener, and otherwise
 * run unchanged — request handlers, keep-alive, `server.timeout`, `headersTimeout`,
 * `requestTimeout`, `keepAliveTimeout`, `maxConnections`, `close()`, `closeAllConnections()`.
 *
 * {@link serve} rebinds one server object: its `listen()` listens on an rsocket server, every
 * accepted {@link RSocket} reaches it as a `'connection'` (the event a `net.Server` emits for each
 * accepted socket, and the one node:http, https and http2 build their sessions on), `close()`
 * stops the rsocket server and emits `'close'` once its connections have closed, as
 * `net.Server.close` does. {@link createHttpServer} and {@link createHttp2Server} are node's
 * factories followed by {@link serve}.
 */
import http from 'node:http';
import http2 from 'node:http2';
import type net from 'node:net';
import { RServer, type RServerListenOptions } from '../rsocket/server.js';
import type { RSocket, RSocketOptions } from '../rsocket/socket.js';

/**
 * The parts of `net.Server` that {@link serve} rebinds and relies on. `_connections` and
 * `_emitCloseIfDrained` are net.Server's own connection count and close gate (net counts its
 * accepted sockets there, and holds a count for pending workers the same way).
 */
interface NetServerInternals {
  _connections: number;
  _emitCloseIfDrained(): void;
  maxConnections?: number;
  allowHalfOpen?: boolean;
}

/** Node's message for a second listen() (net's ERR_SERVER_ALREADY_LISTEN). */
function alreadyListening(): Error {
  return Object.assign(new Error('Listen method has been called more than once without closing.'), { code: 'ERR_SERVER_ALREADY_LISTEN' });
}

/** `listen()` options: net.Server's that apply to an rsocket listener. */
export interface ServeListenOptions extends RServerListenOptions {
  /** As net.Server's: aborting it closes the server. */
  signal?: AbortSignal;
}

/** The arguments of `listen()` as net.Server reads them (port, host, backlog, callback or options). */
function listenArgs(args: unknown[]): { o: RServerListenOptions; cb: (() => void) | undefined; signal: AbortSignal | undefined } {
  const cb = typeof args[args.length - 1] === 'function' ? (args.pop() as () => void) : undefined;
  const [a, b, c] = args;
  if (a !== null && typeof a === 'object') {
    const { port, host, backlog, ipv6Only, signal } = a as ServeListenOptions;
    const o: RServerListenOptions = {};
    if (port !== undefined) o.port = Number(port);
    if (host !== undefined) o.host = host;
    if (backlog !== undefined) o.backlog = backlog;
    if (ipv6Only !== undefined) o.ipv6Only = ipv6Only;
    return { o, cb, signal };
  }
  const o: RServerListenOptions = {};
  if (a !== undefined && a !== null) o.port = Number(a);
  if (typeof b === 'string') {
    o.host = b;
    if (typeof c === 'number') o.backlog = c;
  } else if (typeof b === 'number') o.backlog = b;
  return { o, cb, signal: undefined };
}

/**
 * Serve `server` over rsockets: from now on its `listen()` (net.Server's arguments: port, host,
 * backlog, callback, or {@link ServeListenOptions} with a `signal` that closes it) opens
 * an rsocket listener, `address()`, `listening`, `getConnections()` and `close()` describe that
 * one, and every connection it accepts is emitted as the server's `'connection'`. Accepted
 * sockets get `allowHalfOpen` as the server has it (true for node:http) and `rsocketOptions`.
 * Returns `server`. Calling it on a server that listens on TCP already is refused.
 */
export function serve<S extends net.Server>(server: S, rsocketOptions: RSocketOptions = {}): S {
  if (server.listening) throw alreadyListening();
  const srv = server as S & NetServerInternals;
  const originalClose = server.close;
  let rserver: RServer | null = null;
  let closing = false;
  /** `server.unref()` was called last (net.Server's ref/unref, kept for a later listen). */
  let unrefd = false;

  const listen = (...args: unknown[]): S => {
    if (rserver) throw alreadyListening();
    const { o, cb, signal } = listenArgs(args);
    const rs = new RServer({ allowHalfOpen: srv.allowHalfOpen ?? false, ...rsocketOptions });
    rserver = rs;
    closing = false;
    if (unrefd) rs.unref();
    if (cb) server.once('listening', cb);
    rs.on('listening', () => server.emit('listening'));
    rs.on('error', (e: Error) => {
      if (rserver === rs) rserver = null;
      // net.Server reports a failed listen on a later tick, never inside listen(): a handler
      // attached after the call still gets it.
      process.nextTick(() => server.emit('error', e));
    });
    rs.on('clientError', (e: Error) => server.emit('rsocketError', e));
    rs.on('connection', (s: RSocket) => {
      if (srv.maxConnections !== undefined && srv.maxConnections > 0 && srv._connections >= srv.maxConnections) {
        // As net.Server: over maxConnections, the new connection is closed at once.
        s.destroy();
        return;
      }
      srv._connections++;
      s.once('close', () => {
        srv._connections--;
        if (closing) srv._emitCloseIfDrained();
      });
      server.emit('connection', s);
    });
    rs.listen(o);
    if (signal) {
      // As net.Server: an aborted signal closes the server (at once if aborted already).
      const onAbort = (): void => {
        if (rserver === rs) server.close();
      };
      if (signal.aborted) process.nextTick(onAbort);
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        server.once('close', () => signal.removeEventListener('abort', onAbort));
      }
    }
    return server;
  };

  const close = (cb?: (err?: Error) => void): S => {
    const rs = rserver;
    // Not listening: node's own close() says so (ERR_SERVER_NOT_RUNNING to the callback).
    if (!rs || closing) return originalClose.call(server, cb) as S;
    closing = true;
    if (cb) server.once('close', () => cb());
    // The rsocket listener holds one count until it has closed (net.Server holds one for its
    // workers the same way), so node's close() below — which for http drops idle keep-alive
    // connections and stops the timeout checks — emits 'close' only after it and every connection.
    srv._connections++;
    originalClose.call(server);
    rs.close(() => {
      if (rserver === rs) rserver = null;
      srv._connections--;
      srv._emitCloseIfDrained();
    });
    return server;
  };

  // As net.Server.ref()/unref(): the rsocket listener holds the event loop or not (RServer's).
  const holdLoop = (on: boolean): S => {
    unrefd = !on;
    if (on) rserver?.ref();
    else rserver?.unref();
    return server;
  };

  Object.defineProperties(server, {
    listen: { value: listen, configurable: true, writable: true },
    close: { value: close, configurable: true, writable: true },
    address: { value: () => (closing ? null : (rserver?.address() ?? null)), configurable: true, writable: true },
    listening: { get: () => !closing && (rserver?.listening ?? false), configurable: true },
    ref: { value: () => holdLoop(true), configurable: true, writable: true },
    unref: { value: () => holdLoop(false), configurable: true, writable: true },
  });
  return server;
}

/** `http.createServer()` whose `listen()` serves over rsockets (see {@link serve}). */
export function createHttpServer(requestListener?: http.RequestListener): http.Server;
export function createHttpServer(options: http.ServerOptions & { rsocket?: RSocketOptions }, requestListener?: http.RequestListener): http.Server;
export function createHttpServer(a?: (http.ServerOptions & { rsocket?: RSocketOptions }) | http.RequestListener, b?: http.RequestListener): http.Server {
  if (typeof a === 'function') return serve(http.createServer(a));
  const { rsocket, ...options } = a ?? {};
  return serve(b ? http.createServer(options, b) : http.createServer(options), rsocket);
}

/** `http2.createServer()` (cleartext HTTP/2, h2c) whose `listen()` serves over rsockets (see {@link serve}). */
export function createHttp2Server(onRequestHandler?: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void): http2.Http2Server;
export function createHttp2Server(options: http2.ServerOptions & { rsocket?: RSocketOptions }, onRequestHandler?: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void): http2.Http2Server;
export function createHttp2Server(
  a?: (http2.ServerOptions & { rsocket?: RSocketOptions }) | ((req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void),
  b?: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
): http2.Http2Server {
  if (typeof a === 'function') return serve(http2.createServer(a));
  const { rsocket, ...options } = a ?? {};
  return serve(b ? http2.createServer(options, b) : http2.createServer(options), rsocket);
}
