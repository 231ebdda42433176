/**
 * The client side of HTTP over rsockets: the connection factories node:http, node:http2 and
 * undici take, so their clients run unchanged over RDMA — what rdma-core's librspreload does for
 * a C program's `socket()`/`connect()` (preload.c intercepts them and calls rsocket/rconnect),
 * done here through the hooks each client offers instead of by interposition.
 *
 * - {@link createHttpConnection}: `http.request({ createConnection: createHttpConnection })`, an
 *   `http.Agent` whose `createConnection` it is, and `http2.connect(url, { createConnection })`;
 * - {@link RAgent}: an `http.Agent` (keep-alive pooling and all) whose connections are rsockets;
 * - {@link RHttpsAgent}: the same for node:https, TLS over each rsocket;
 * - {@link rsConnector} / {@link buildConnector}: undici's connector, `new Agent({ connect:
 *   rsConnector })` / `new Client(url, { connect: rsConnector })` (also `fetch(url, { dispatcher })`); `https:` origins with
 *   `buildConnector({ tls })`.
 */
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import { isIP } from 'node:net';
import { RdmaError } from '../errors.js';
import { RSocket, type RSocketOptions, type RSocketConnectOptions } from '../rsocket/socket.js';

/** Default port of an `http:` origin. */
const HTTP_PORT = 80;
/** Default port of an `https:` origin. */
const HTTPS_PORT = 443;

/** What the connection factories read from node:http's request options (and http2's URL). */
export interface HttpConnectionOptions {
  /** Host name or address (default `localhost`); `hostname` wins over `host`, as in node:http. */
  host?: string | null | undefined;
  hostname?: string | null | undefined;
  /** Port (default 80). */
  port?: number | string | null | undefined;
  localAddress?: string | undefined;
  localPort?: number | undefined;
  family?: number | undefined;
  /** Idle timeout of the socket in ms (node:http's `timeout`): `'timeout'` after that long idle. */
  timeout?: number | undefined;
}

/** The rsocket the request options name, not yet connected. */
function connectOptionsOf(o: HttpConnectionOptions): RSocketConnectOptions {
  const port = o.port === undefined || o.port === null || o.port === '' ? HTTP_PORT : Number(o.port);
  const host = o.hostname ?? o.host ?? 'localhost';
  // node:http keeps an IPv6 literal of a URL in brackets.
  const c: RSocketConnectOptions = { port, host: host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host };
  if (o.localAddress !== undefined) c.localAddress = o.localAddress;
  if (o.localPort !== undefined) c.localPort = o.localPort;
  if (o.family === 4 || o.family === 6) c.family = o.family;
  return c;
}

/** Refuse an origin a factory does not serve (`https:` only where TLS options were given). */
function checkProtocol(protocol: string | null | undefined, op: string, tlsToo = false): void {
  if (protocol === undefined || protocol === null || protocol === '' || protocol === 'http:') return;
  if (tlsToo && protocol === 'https:') return;
  const how = tlsToo ? 'http: and https:' : 'cleartext http: (TLS: buildConnector({ tls }), RHttpsAgent, or tls.connect({ socket }))';
  throw new RdmaError('EPROTONOSUPPORT', { op, detail: `${protocol} over rsockets: only ${how}` });
}

/**
 * A new rsocket connecting to the host and port of `options` (node:http's request options, or the
 * authority URL http2 passes), as `net.createConnection`: returned at once, `'connect'` once
 * established, `'error'` (ECONNREFUSED ...) if not.
 *
 * As node:http's `createConnection` (`http.request({ createConnection })`, an Agent's): the
 * second argument is node's completion callback, ignored (the socket is returned), or
 * {@link RSocketOptions} sizing the rsocket's buffers and queues when called directly. As
 * http2's (`http2.connect(url, { createConnection })`): the session's options, ignored.
 */
export function createHttpConnection(options: HttpConnectionOptions, rsocketOptions?: RSocketOptions | ((...args: never[]) => void)): RSocket;
export function createHttpConnection(authority: URL, sessionOptions?: object): RSocket;
export function createHttpConnection(options: HttpConnectionOptions | URL, rsocketOptions?: unknown): RSocket {
  let o: HttpConnectionOptions;
  if (options instanceof URL) {
    checkProtocol(options.protocol, 'createHttpConnection');
    o = { hostname: options.hostname, port: options.port };
  } else o = options;
  const rsOpts = rsocketOptions !== null && typeof rsocketOptions === 'object' && !(options instanceof URL) ? (rsocketOptions as RSocketOptions) : {};
  const s = new RSocket(rsOpts);
  if (o.timeout !== undefined && o.timeout > 0) s.setTimeout(o.timeout);
  return s.connect(connectOptionsOf(o));
}

/** Options of {@link RAgent}: `http.Agent`'s, and the rsockets' own. */
export interface RAgentOptions extends http.AgentOptions {
  /** Buffer and queue sizes of every connection the agent opens. */
  rsocket?: RSocketOptions;
}

/**
 * An `http.Agent` over rsockets: pooling, `keepAlive`, `maxSockets`, `maxFreeSockets`, `timeout`
 * and `scheduling` as node:http's, every connection an {@link RSocket}.
 */
export class RAgent extends http.Agent {
  private readonly rsocketOptions: RSocketOptions;

  constructor(options: RAgentOptions = {}) {
    const { rsocket, ...agentOptions } = options;
    super(agentOptions);
    this.rsocketOptions = rsocket ?? {};
  }

  /** The agent's connection factory: a new rsocket to the request's host and port. */
  override createConnection(options: HttpConnectionOptions): RSocket {
    return createHttpConnection(options, this.rsocketOptions);
  }
}

/** Options of {@link RHttpsAgent}: `https.Agent`'s (TLS options included), and the rsockets' own. */
export interface RHttpsAgentOptions extends https.AgentOptions {
  /** Buffer and queue sizes of every connection the agent opens. */
  rsocket?: RSocketOptions;
}

/**
 * An `https.Agent` over rsockets: each connection a TLS session (the agent's and the request's
 * TLS options: `ca`, `cert`, `key`, `servername`, `rejectUnauthorized` …) over an {@link RSocket};
 * pooling and keep-alive as node:https's.
 */
export class RHttpsAgent extends https.Agent {
  private readonly rsocketOptions: RSocketOptions;

  constructor(options: RHttpsAgentOptions = {}) {
    const { rsocket, ...agentOptions } = options;
    super(agentOptions);
    this.rsocketOptions = rsocket ?? {};
  }

  /** TLS over a new rsocket to the request's host and port (default port 443). */
  override createConnection(options: HttpConnectionOptions & tls.ConnectionOptions): tls.TLSSocket {
    const { port, ...rest } = options;
    const s = createHttpConnection({ ...rest, port: port ?? HTTPS_PORT }, this.rsocketOptions);
    return tls.connect({ ...tlsOptionsOf(rest), socket: s });
  }
}

/** The TLS options among request options (node:https passes both kinds in one object). */
function tlsOptionsOf(o: tls.ConnectionOptions & { hostname?: string | null | undefined }): tls.ConnectionOptions {
  const { port: _port, socket: _socket, path: _path, timeout: _timeout, ...t } = o;
  const host = o.hostname ?? o.host ?? 'localhost';
  // SNI names a host, never an address (RFC 6066, 3); the certificate check uses `host` either way.
  if (t.servername === undefined && !isIP(host)) t.servername = host;
  t.host = host;
  return t;
}

/** What undici passes its connector (`buildConnector.Options`). */
export interface UndiciConnectOptions {
  hostname: string;
  host?: string;
  protocol: string;
  /** The origin's port, `''` for the protocol's default. */
  port: string;
  servername?: string;
  localAddress?: string | null;
}

/**
 * undici's connector callback. The socket argument is typed `never` so that undici's own
 * callback type (which names `net.Socket`) is accepted where this one is expected: undici uses
 * the socket as a Duplex, which an {@link RSocket} is.
 */
export type UndiciConnectCallback = (...args: [null, never] | [Error, null]) => void;

/** undici's connector signature (`buildConnector.connector`). */
export type UndiciConnector = (options: UndiciConnectOptions, callback: UndiciConnectCallback) => void;

/** Options of {@link buildConnector}. */
export interface ConnectorOptions extends RSocketOptions {
  /** Connect timeout in ms, TLS handshake included (undici's `connectTimeout`, default 10 000; 0: none). */
  timeout?: number;
  /**
   * TLS for `https:` origins (`tls.connect`'s options: `ca`, `cert`, `key`, `rejectUnauthorized`
   * …; `servername` defaults to the origin's host name). Without it an `https:` origin is refused.
   */
  tls?: tls.ConnectionOptions;
}

/** Default connect timeout of {@link buildConnector}, undici's. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * An undici connector over rsockets with these socket options: `new Agent({ connect:
 * buildConnector({ sendBufferSize }) })`. It calls back once the rsocket is established (and, for
 * an `https:` origin, its TLS handshake done), or with the error: ECONNREFUSED, ETIMEDOUT after
 * `timeout` ms, a TLS error, EPROTONOSUPPORT for `https:` without `tls`.
 */
export function buildConnector(options: ConnectorOptions = {}): UndiciConnector {
  const { timeout = CONNECT_TIMEOUT_MS, tls: tlsOptions, ...rsOpts } = options;
  return (o, callback) => {
    const cb = callback as (err: Error | null, s: RSocket | tls.TLSSocket | null) => void;
    try {
      checkProtocol(o.protocol, 'connect', tlsOptions !== undefined);
    } catch (e) {
      queueMicrotask(() => cb(e as Error, null));
      return;
    }
    const secure = o.protocol === 'https:';
    const c: HttpConnectionOptions = { hostname: o.hostname, port: o.port === '' ? (secure ? HTTPS_PORT : HTTP_PORT) : o.port };
    if (o.localAddress) c.localAddress = o.localAddress;
    const s = new RSocket(rsOpts);
    let sock: RSocket | tls.TLSSocket = s;
    let timer: NodeJS.Timeout | null = null;
    let done = false;
    const settle = (err: Error | null): void => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      timer = null;
      sock.off('error', onError);
      if (err) {
        sock.destroy();
        s.destroy();
        cb(err, null);
      } else cb(null, sock);
    };
    const onError = (e: Error): void => settle(e);
    s.once('connect', () => {
      if (done || !secure) return settle(null);
      // TLS over the established rsocket; undici reads the ALPN result (HTTP/1.1 here).
      const t = tls.connect({ ALPNProtocols: ['http/1.1'], ...tlsOptionsOf({ ...tlsOptions, hostname: o.hostname }), ...(o.servername ? { servername: o.servername } : {}), socket: s });
      s.off('error', onError);
      sock = t;
      t.once('error', onError);
      t.once('secureConnect', () => settle(null));
    });
    s.once('error', onError);
    if (timeout > 0) {
      timer = setTimeout(() => settle(new RdmaError('ETIMEDOUT', { op: 'connect', detail: `rsocket to ${o.hostname}:${c.port} not established in ${timeout} ms` })), timeout);
    }
    s.connect(connectOptionsOf(c));
  };
}

/** undici's connector over rsockets with the default socket options (see {@link buildConnector}). */
export const rsConnector: UndiciConnector = buildConnector();
