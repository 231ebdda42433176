/**
 * The Node face of datagram rsockets: {@link RDgramSocket}, shaped like `dgram.Socket` —
 * `createSocket('udp4' | 'udp6' | options, onMessage?)`, `bind()` → `'listening'`, `send()`,
 * `'message'` events with `rinfo` ({ address, family, port, size }), `connect()` → `'connect'`,
 * `address()`, `remoteAddress()`, `close()` → `'close'`, `'error'`. As Node's dgram: errors of a
 * call with a callback go to the callback, else to `'error'`, a tick later; a socket that sends
 * before it is bound binds to the wildcard address and a free port first; sends go out in the
 * order they were made. As Node's, bad arguments throw in the call — here an RdmaError EINVAL
 * naming the rsocket call and the argument (a port out of range for bind, connect or send); a
 * `signal` closes the socket when it aborts; `await using` closes it (Symbol.asyncDispose).
 */
import { EventEmitter } from 'node:events';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { SockAddr } from '../../cm/index.js';
import { RdmaError } from '../../errors.js';
import { RS_EAGAIN } from '../errors.js';
import { POLLOUT, SOL_SOCKET, SO_RCVBUF, SO_SNDBUF } from '../options.js';
import { DS_SLOT_SIZE } from './protocol.js';
import { DsSocket } from './socket.js';
import { checkPort, checkSignal } from '../args.js';
import type { EventArgs, EventListener } from '../events.js';

/** `dgram.RemoteInfo`. */
export interface RDgramRemoteInfo {
  address: string;
  family: 'IPv4' | 'IPv6';
  port: number;
  size: number;
}

/** `dgram.SocketOptions` (the parts that apply). */
export interface RDgramSocketOptions {
  type: 'udp4' | 'udp6';
  recvBufferSize?: number;
  sendBufferSize?: number;
  /** Closes the socket when it aborts (already aborted: a tick after createSocket), as dgram's. */
  signal?: AbortSignal;
}

/** The events of an {@link RDgramSocket} and their arguments, as `dgram.Socket`'s. */
export interface RDgramSocketEventMap {
  /** A datagram arrived. */
  message: [msg: Buffer, rinfo: RDgramRemoteInfo];
  /** Bound: `address()` answers. */
  listening: [];
  /** connect() set the default destination. */
  connect: [];
  /** A failure with no callback to take it (a send without a callback, a failed bind). */
  error: [err: Error];
  /** Closed. */
  close: [];
}

/** The events of a datagram rsocket, typed by {@link RDgramSocketEventMap}. */
export interface RDgramSocket {
  /** Add `listener` for `event`; a listener of a mapped event gets its typed arguments. */
  on<K extends string | symbol>(event: K, listener: EventListener<RDgramSocketEventMap, K>): this;
  /** Add `listener` for the next `event` only. */
  once<K extends string | symbol>(event: K, listener: EventListener<RDgramSocketEventMap, K>): this;
  /** Remove `listener` from `event` (alias of removeListener). */
  off<K extends string | symbol>(event: K, listener: EventListener<RDgramSocketEventMap, K>): this;
  /** Add `listener` for `event` (alias of on). */
  addListener<K extends string | symbol>(event: K, listener: EventListener<RDgramSocketEventMap, K>): this;
  /** Remove `listener` from `event`. */
  removeListener<K extends string | symbol>(event: K, listener: EventListener<RDgramSocketEventMap, K>): this;
  /** Add `listener` for `event` before the listeners already there. */
  prependListener<K extends string | symbol>(event: K, listener: EventListener<RDgramSocketEventMap, K>): this;
  /** Add `listener` for the next `event` only, before the listeners already there. */
  prependOnceListener<K extends string | symbol>(event: K, listener: EventListener<RDgramSocketEventMap, K>): this;
  /** Call the listeners of `event` with `args` (typed for a mapped event); true if it had any. */
  emit<K extends string | symbol>(event: K, ...args: EventArgs<RDgramSocketEventMap, K>): boolean;
}

type SendCb = (err: Error | null, bytes?: number) => void;

/** A node-style error of this face (`code` as Node's dgram uses it). */
function nodeErr(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** A datagram rsocket with the face of Node's `dgram.Socket`. */
export class RDgramSocket extends EventEmitter {
  /** The rsocket underneath (rsocket calls, options). */
  readonly ds: DsSocket;
  readonly type: 'udp4' | 'udp6';
  private bindState: 'unbound' | 'binding' | 'bound' = 'unbound';
  private bound: Promise<void> | null = null;
  private connected: SockAddr | null = null;
  private closed = false;
  private sends: Promise<void> = Promise.resolve();
  private readonly rbuf = Buffer.alloc(DS_SLOT_SIZE);

  constructor(opts: RDgramSocketOptions | 'udp4' | 'udp6', onMessage?: (msg: Buffer, rinfo: RDgramRemoteInfo) => void) {
    super();
    const o = typeof opts === 'string' ? { type: opts } : opts;
    if (o.type !== 'udp4' && o.type !== 'udp6') throw nodeErr('ERR_SOCKET_BAD_TYPE', 'Bad socket type specified. Valid types are: udp4, udp6');
    const signal = checkSignal(o.signal, 'rsocket');
    this.type = o.type;
    this.ds = new DsSocket(o.type === 'udp6' ? 6 : 4);
    if (o.recvBufferSize !== undefined) this.ds.setsockopt(SOL_SOCKET, SO_RCVBUF, o.recvBufferSize);
    if (o.sendBufferSize !== undefined) this.ds.setsockopt(SOL_SOCKET, SO_SNDBUF, o.sendBufferSize);
    if (onMessage) this.on('message', onMessage);
    this.ds.onNotify = () => this.drain();
    if (signal) this.watchSignal(signal);
  }

  /** As dgram's `signal` option: an abort closes the socket (a tick later when already aborted). */
  private watchSignal(signal: AbortSignal): void {
    const onAbort = (): void => {
      if (!this.closed) this.close();
    };
    if (signal.aborted) {
      process.nextTick(onAbort);
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    this.once('close', () => signal.removeEventListener('abort', onAbort));
  }

  /** Emit every queued datagram as `'message'`. */
  private drain(): void {
    while (!this.closed && this.ds.pendingDatagrams > 0) {
      const d = this.ds.recvfrom(this.rbuf);
      if (d === RS_EAGAIN) return;
      const msg = Buffer.from(this.rbuf.subarray(0, d.n));
      this.emit('message', msg, { address: d.from.address, family: d.from.family === 'IPv6' ? 'IPv6' : 'IPv4', port: d.from.port, size: d.size });
    }
  }

  /** `bind([port][, address][, callback])` or `bind(options[, callback])`. */
  bind(...args: unknown[]): this {
    let port = 0;
    let address: string | undefined;
    let cb: (() => void) | undefined;
    const a0 = args[0];
    if (typeof a0 === 'object' && a0 !== null) {
      const o = a0 as { port?: number; address?: string };
      port = o.port ?? 0;
      address = o.address;
      cb = args[1] as (() => void) | undefined;
    } else {
      if (a0 !== undefined && a0 !== null && typeof a0 !== 'function') port = a0 as number;
      if (typeof args[1] === 'string') address = args[1];
      cb = args.find((x) => typeof x === 'function') as (() => void) | undefined;
    }
    port = checkPort(port, 'rbind', 'port');
    if (address !== undefined && typeof address !== 'string') throw new RdmaError('EINVAL', { op: 'rbind', detail: 'address should be a string' });
    if (this.bindState !== 'unbound') throw nodeErr('ERR_SOCKET_ALREADY_BOUND', 'Socket is already bound');
    if (cb) this.once('listening', cb);
    this.startBind({ address: address ?? (this.type === 'udp6' ? '::' : '0.0.0.0'), port });
    return this;
  }

  private startBind(addr: SockAddr): Promise<void> {
    this.bindState = 'binding';
    const p = this.ds.bind(addr).then(
      () => {
        this.bindState = 'bound';
        this.emit('listening');
      },
      (e: unknown) => {
        this.bindState = 'unbound';
        this.bound = null;
        this.emit('error', e as Error);
        throw e;
      },
    );
    this.bound = p;
    p.catch(() => {});
    return p;
  }

  private ensureBound(): Promise<void> {
    return this.bound ?? this.startBind({ address: this.type === 'udp6' ? '::' : '0.0.0.0', port: 0 });
  }

  /** `connect(port[, address][, callback])`: the default destination; `'connect'` once set. */
  connect(port: number, address?: string | (() => void), cb?: () => void): void {
    const addr = typeof address === 'string' ? address : this.type === 'udp6' ? '::1' : '127.0.0.1';
    const done = typeof address === 'function' ? address : cb;
    // As dgram's connect: a destination port from 1 to 65535.
    port = checkPort(port, 'rconnect', 'port', false);
    if (this.connected) throw nodeErr('ERR_SOCKET_DGRAM_IS_CONNECTED', 'Already connected');
    const dst: SockAddr = { address: addr, port };
    this.connected = dst;
    this.ensureBound()
      .then(() => this.ds.connect(dst))
      .then(
        () => {
          if (done) done();
          this.emit('connect');
        },
        (e: unknown) => {
          this.connected = null;
          if (done) process.nextTick(() => (done as (e: unknown) => void)(e));
          else process.nextTick(() => this.emit('error', e as Error));
        },
      );
  }

  /**
   * `send(msg[, offset, length][, port][, address][, callback])`: one datagram (strings and
   * arrays of buffers joined). The callback gets the error, or null and the byte count.
   */
  send(msg: Buffer | Uint8Array | string | readonly (Buffer | Uint8Array | string)[], ...rest: unknown[]): void {
    const cb = (typeof rest[rest.length - 1] === 'function' ? rest.pop() : undefined) as SendCb | undefined;
    let data: Buffer;
    if (Array.isArray(msg)) data = Buffer.concat(msg.map((m) => (typeof m === 'string' ? Buffer.from(m) : Buffer.from(m as Uint8Array))));
    else if (typeof msg === 'string') data = Buffer.from(msg);
    else data = Buffer.from(msg as Uint8Array);
    if (rest.length >= 2 && typeof rest[0] === 'number' && typeof rest[1] === 'number' && !Array.isArray(msg) && typeof msg !== 'string') {
      data = data.subarray(rest[0], rest[0] + rest[1]);
      rest = rest.slice(2);
    }
    let dst: SockAddr | null = null;
    if (!this.connected) {
      // As Node's dgram: a bad port (none, on a socket not connected) throws at once.
      const port = checkPort(rest[0], 'rsendto', 'port', false);
      dst = { address: typeof rest[1] === 'string' ? rest[1] : this.type === 'udp6' ? '::1' : '127.0.0.1', port };
    } else if (rest.length > 0 && rest[0] !== undefined) {
      throw nodeErr('ERR_SOCKET_DGRAM_IS_CONNECTED', 'Already connected');
    }
    if (this.closed) return this.fail(nodeErr('ERR_SOCKET_DGRAM_NOT_RUNNING', 'Not running'), cb);
    const job = async (): Promise<void> => {
      await this.ensureBound();
      // As Node's dgram: a host name is looked up (in this socket's family) before sending.
      if (dst && isIP(dst.address) === 0) {
        const r = await lookup(dst.address, { family: this.type === 'udp6' ? 6 : 4 });
        dst = { address: r.address, port: dst.port };
      }
      for (;;) {
        const n = await this.ds.sendto(data, dst);
        if (n !== RS_EAGAIN) {
          if (cb) cb(null, n);
          return;
        }
        await this.ds.poll(POLLOUT, -1);
        if (this.closed) throw nodeErr('ERR_SOCKET_DGRAM_NOT_RUNNING', 'Not running');
      }
    };
    this.sends = this.sends.then(job).catch((e: unknown) => this.fail(e as Error, cb));
  }

  private fail(e: Error, cb?: SendCb): void {
    process.nextTick(() => {
      if (cb) cb(e);
      else this.emit('error', e);
    });
  }

  /** `address()`: the bound address; before binding throws as Node's (`getsockname EBADF`). */
  address(): { address: string; family: string; port: number } {
    const a = this.bindState === 'bound' ? this.ds.localAddress : null;
    if (!a) throw Object.assign(nodeErr('EBADF', 'getsockname EBADF'), { errno: -9, syscall: 'getsockname' });
    return { address: a.address, family: a.family ?? 'IPv4', port: a.port };
  }

  /** `remoteAddress()`: the connected peer; throws ERR_SOCKET_DGRAM_NOT_CONNECTED otherwise. */
  remoteAddress(): { address: string; family: string; port: number } {
    const a = this.ds.remoteAddress;
    if (!a) throw nodeErr('ERR_SOCKET_DGRAM_NOT_CONNECTED', 'Not connected');
    return { address: a.address, family: a.address.includes(':') ? 'IPv6' : 'IPv4', port: a.port };
  }

  /** dgram's `setRecvBufferSize()`: SO_RCVBUF of the datagram rsocket. */
  setRecvBufferSize(n: number): void {
    this.ds.setsockopt(SOL_SOCKET, SO_RCVBUF, n);
  }
  /** dgram's `setSendBufferSize()`: SO_SNDBUF of the datagram rsocket. */
  setSendBufferSize(n: number): void {
    this.ds.setsockopt(SOL_SOCKET, SO_SNDBUF, n);
  }
  /** dgram's `getRecvBufferSize()`: SO_RCVBUF as rgetsockopt answers it. */
  getRecvBufferSize(): number {
    return this.ds.getsockopt(SOL_SOCKET, SO_RCVBUF);
  }
  /** dgram's `getSendBufferSize()`: SO_SNDBUF as rgetsockopt answers it. */
  getSendBufferSize(): number {
    return this.ds.getsockopt(SOL_SOCKET, SO_SNDBUF);
  }
  /** As `dgram.Socket.ref()`: the socket holds the event loop open again (the default). */
  ref(): this {
    this.ds._setHoldsLoop(true);
    return this;
  }
  /**
   * As `dgram.Socket.unref()`: the socket (its UDP service socket and its QPs) no longer keeps the
   * process alive by itself; it keeps working.
   */
  unref(): this {
    this.ds._setHoldsLoop(false);
    return this;
  }

  /**
   * `await using socket = createSocket(...)`: close and wait for `'close'`, as
   * `dgram.Socket[Symbol.asyncDispose]`; nothing to do once closed.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.closed) return;
    await new Promise<void>((resolve) => this.close(resolve));
  }

  /** `using socket = createSocket(...)`: close without waiting (dgram has only the async form). */
  [Symbol.dispose](): void {
    if (!this.closed) this.close();
  }

  /** `close([callback])`: after the sends made so far; `'close'` once released. */
  close(cb?: () => void): this {
    if (this.closed) throw nodeErr('ERR_SOCKET_DGRAM_NOT_RUNNING', 'Not running');
    this.closed = true;
    if (cb) this.once('close', cb);
    void this.sends
      .then(() => this.ds.close())
      .catch((e: unknown) => {
        if (e instanceof RdmaError) this.emit('error', e);
      })
      .then(() => this.emit('close'));
    return this;
  }
}

/** `dgram.createSocket(type | options[, callback])` over datagram rsockets. */
export function createSocket(opts: RDgramSocketOptions | 'udp4' | 'udp6', onMessage?: (msg: Buffer, rinfo: RDgramRemoteInfo) => void): RDgramSocket {
  return new RDgramSocket(opts, onMessage);
}
