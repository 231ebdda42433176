/**
 * The lower-layer protocol adaptor: one TCP connection (`net.Socket`) as the iWARP stack sees it.
 * Reading: every received byte is handed, in order, to the current consumer (the MPA handshake,
 * then the QP's receive path) as a view that is only valid during the call — sockets we create
 * read into one reused buffer (`onread`), so the consumer copies what it keeps (straight into the
 * destination memory region). Writing: batched with cork/uncork, backpressure reported to the TX
 * path through {@link Llp.onDrain}.
 */
import net from 'node:net';
import { traceEvent, tracing } from '../../trace.js';
import { netopt } from '../../util/netopt.js';
import { captureOn, type CaptureDirection } from '../../verbs/capture.js';
import { ConnectionCapture } from './capture.js';
import type { FpduFaults } from './faults.js';

/** Receives stream bytes `[start, end)` of `buf`; the view is valid only during the call. */
export type LlpConsumer = (buf: Buffer, start: number, end: number) => void;

/**
 * The receive side of an RDMA-mode connection (the QP's FPDU decoder behind it), with direct
 * placement. An object of one class for every connection rather than closures made per
 * connection: the socket's read path then calls the same functions on every connection, and code
 * optimised on one does not have to be thrown away on the next ("wrong call target").
 */
export interface LlpReader {
  /** Stream bytes `[start, end)` of `buf`, valid only during the call (as {@link LlpConsumer}). */
  bytes(buf: Buffer, start: number, end: number): void;
  /**
   * Where the next read should land: a view of the target memory to read payload straight into
   * it, a byte count to read just that much into the shared buffer (so a read stops at a payload
   * boundary), or null for a full read.
   */
  readTarget(): Buffer | number | null;
  /** A read landed in a view {@link readTarget} returned: `n` bytes at its start. */
  placed(view: Buffer, n: number): void;
}

/**
 * How long a graceful close waits for TCP to send what we wrote before it queues the FIN anyway
 * (see {@link Llp.end}), and the longest pause between two looks.
 */
const SEND_WAIT_MS = 2000;
const SEND_POLL_MAX_MS = 16;

/** ioctl(SIOCOUTQNSD) through the netopt addon: bytes not sent yet, or -1 without the addon. */
let unsentFn: ((fd: number) => number) | null | undefined;
function unsentOf(socket: net.Socket): number {
  if (unsentFn === undefined) unsentFn = netopt()?.unsentBytes ?? null;
  if (unsentFn === null) return -1;
  const fd = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? unsentFn(fd) : -1;
}

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
 * The one receive buffer of every socket we read ourselves, and the small one a read that must
 * stop at a payload boundary lands in. Sharing them is safe: libuv reads one socket at a time,
 * and each read is handed to its consumer synchronously, which copies what it keeps (the stash
 * and the MPA accumulator copy; the QP's decoder copies into the target memory). Allocated on
 * first use, so that a process that never opens a connection does not pay for them.
 */
let sharedRead: Buffer | null = null;
let sharedSmall: Buffer | null = null;
function readBuffer(): Buffer {
  return (sharedRead ??= Buffer.allocUnsafeSlow(READ_BUF));
}
function smallBuffer(): Buffer {
  return (sharedSmall ??= Buffer.allocUnsafeSlow(SMALL_BUF));
}
/** Size of the shared buffer of reads that stop at a payload boundary. */
const SMALL_BUF = 16 * 1024;

/** The `onread` option of a socket we read ourselves (see {@link Llp.nextReadBuffer}). */
function onread(l: { self: Llp | null }): { buffer: () => Buffer; callback: (n: number, b: Buffer) => boolean } {
  return {
    buffer: () => (l.self ? l.self.nextReadBuffer() : readBuffer()),
    callback: (n, b) => {
      l.self?.readDone(b, n);
      return true;
    },
  };
}

/**
 * Hand every connection `server` accepts to `onLlp` as an {@link Llp} reading into the shared
 * buffer. Call in the server's listen callback. The server's handle delivers each accepted TCP
 * handle straight to us: net.Server would first build a net.Socket of its own that we would only
 * re-wrap (two sockets per connection; it also counts connections that `close()` then waits
 * for, which a listener's destroy must not). Falls back to the 'connection' event when the
 * server's handle is not the one we know.
 */
export function acceptLlps(server: net.Server, onLlp: (l: Llp) => void): void {
  const h = (server as unknown as { _handle?: { onconnection?: unknown; setNoDelay?: (on: boolean) => number } | null })._handle;
  if (h && typeof h.onconnection === 'function') {
    // Linux copies TCP_NODELAY from the listening socket to the sockets it accepts: set once
    // here, it saves a setsockopt per connection.
    const inherited = process.platform === 'linux' && typeof h.setNoDelay === 'function' && h.setNoDelay(true) === 0;
    h.onconnection = (err: number, handle: unknown) => Llp._onconnection(err, handle, onLlp, inherited);
  } else server.on('connection', (sock: net.Socket) => onLlp(Llp.accepted(sock)));
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

  /** The timer that destroys a socket whose peer never answers our FIN. */
  private lingerTimer: NodeJS.Timeout | null = null;
  /** The timer of the next look at the send queue before our FIN (see {@link end}). */
  private finTimer: NodeJS.Timeout | null = null;
  /** The RDMA-mode receive side (see {@link setReader}); bytes go to it rather than {@link consumer}. */
  private reader: LlpReader | null = null;
  /** Ask {@link reader} where each read should land (direct placement is on). */
  private direct = false;
  /** This side opened the connection (it sent the SYN). */
  private initiator = false;
  /** The connection as a packet capture sees it, from the first byte moved while one runs. */
  private cap: ConnectionCapture | null = null;
  /** Fault injection on what is written (faults.ts), from RDMA mode on; null: none. */
  private faults: FpduFaults | null = null;

  /** `noDelay`: TCP_NODELAY is set on the socket already (inherited from its listener). */
  private constructor(socket: net.Socket, noDelay = false) {
    this.socket = socket;
    // Set at the end of a connection (the flags, the FIN and linger timers, the linger deadline):
    // mutable from the first LLP on (see util/arrays.ts).
    this.closed = this.localEnded = true;
    this.closed = this.localEnded = false;
    this.lingerTimer = undefined as never;
    this.lingerTimer = null;
    this.finTimer = undefined as never;
    this.finTimer = null;
    this.lingerAt = 0;
    this.lingerAt = Infinity;
    if (!noDelay) socket.setNoDelay(true);
    // 'drain' is listened to from the first write that fills the socket's buffer (see write).
    socket.on('end', () => {
      if (tracing('llp')) traceEvent('llp', `LLP[${this.id}]`, 'llp', { what: 'peer-fin' });
      // Half-close is not part of iWARP: a FIN ends the connection (siw releases the socket).
      this.finish(undefined, true);
    });
    socket.on('error', (e) => {
      this.lastError = e;
      if (tracing('llp')) traceEvent('llp', `LLP[${this.id}]`, 'llp', { what: 'error', error: e.message });
    });
    socket.on('close', () => {
      if (this.lingerTimer) {
        clearTimeout(this.lingerTimer);
        this.lingerTimer = null;
      }
      if (this.finTimer) {
        clearTimeout(this.finTimer);
        this.finTimer = null;
      }
      lingerDone(this);
      this.finish(this.lastError, !this.localEnded);
    });
  }

  /**
   * Wrap an accepted socket. A socket accepted paused (`pauseOnConnect`) is re-wrapped so that
   * it, too, reads into the shared buffer (net.Server has no `onread` option); otherwise reads
   * come as 'data' events. Listeners should use {@link acceptLlps}, which skips the first socket.
   */
  static accepted(socket: net.Socket): Llp {
    const handle = (socket as unknown as { _handle?: unknown })._handle;
    if (socket.isPaused() && handle) {
      (socket as unknown as { _handle: unknown })._handle = null;
      return Llp.fromHandle(handle);
    }
    const l = new Llp(socket);
    socket.on('data', (chunk: Buffer) => l.deliver(chunk, 0, chunk.length));
    return l;
  }

  /** An LLP on an accepted TCP handle (a libuv stream handle), reading into the shared buffer. */
  private static fromHandle(handle: unknown, noDelay = false): Llp {
    const l: { self: Llp | null } = { self: null };
    const s = new net.Socket({ handle, onread: onread(l) } as unknown as net.SocketConstructorOpts);
    const self = new Llp(s, noDelay);
    l.self = self;
    // No resume(): the socket's constructor started reading (its handle's readStart), reads go to
    // `onread`, not through the stream, and the peer's FIN ends the stream ('end') in paused mode
    // too. Flowing mode would only add a nextTick and a stream read per connection.
    return self;
  }

  /** @internal {@link acceptLlps}: the accepted handle, or an error number (ignored: as accept(2) retried). */
  static _onconnection(err: number, handle: unknown, onLlp: (l: Llp) => void, noDelay = false): void {
    if (err || !handle) return;
    onLlp(Llp.fromHandle(handle, noDelay));
  }

  /**
   * Open a TCP connection to `host:port` (from `localAddress:localPort` when given), reading into
   * one reused buffer. `onConnect` runs once connected; errors arrive through {@link onClose}.
   */
  static connect(opts: { host: string; port: number; localAddress?: string; localPort?: number; family?: number }, onConnect: () => void): Llp {
    const l: { self: Llp | null } = { self: null };
    const o: net.NetConnectOpts & { onread: ReturnType<typeof onread> } = {
      host: opts.host,
      port: opts.port,
      noDelay: true,
      onread: onread(l),
    };
    if (opts.localAddress !== undefined) o.localAddress = opts.localAddress;
    if (opts.localPort !== undefined && opts.localPort !== 0) o.localPort = opts.localPort;
    if (opts.family !== undefined) o.family = opts.family;
    const sock = net.connect(o);
    const self = new Llp(sock);
    self.initiator = true;
    l.self = self;
    sock.once('connect', onConnect);
    return self;
  }

  /** The buffer the next read goes into (the `onread` buffer function). */
  nextReadBuffer(): Buffer {
    const t = this.direct ? (this.reader as LlpReader).readTarget() : null;
    if (t === null) return readBuffer();
    if (typeof t === 'number') return t > 0 && t <= SMALL_BUF ? smallBuffer().subarray(0, t) : readBuffer();
    return t;
  }

  /** A read of `n` bytes completed into `b`. */
  readDone(b: Buffer, n: number): void {
    if (b === sharedRead || b.buffer === sharedSmall?.buffer) this.deliver(b, 0, n);
    else if (!this.closed && this.reader !== null) {
      if (captureOn) this.capture('in', b, 0, n);
      this.reader.placed(b, n);
    }
  }

  /** Stream bytes `buf[start, end)` went `dir`: to a running packet capture (capture.ts). */
  private capture(dir: CaptureDirection, buf: Uint8Array, start: number, end: number): void {
    let c = this.cap;
    if (c === null) {
      const s = this.socket;
      c = ConnectionCapture.open({ address: s.localAddress, port: s.localPort }, { address: s.remoteAddress, port: s.remotePort }, this.id, this.initiator);
      if (c === null) return;
      this.cap = c;
    }
    c.data(dir, buf, start, end);
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
    this.reader = null;
    this.direct = false;
    this.consumer = c;
    if (c) {
      while (this.stash.length > 0 && this.consumer === c) {
        const b = this.stash.shift() as Buffer;
        c(b, 0, b.length);
      }
    }
  }

  /**
   * Route received bytes to `r` from now on, as {@link setConsumer} does to a function, and with
   * `direct` ask it where each read should land (direct placement).
   */
  setReader(r: LlpReader, direct: boolean): void {
    this.consumer = null;
    this.reader = r;
    this.direct = direct;
    while (this.stash.length > 0 && this.reader === r) {
      const b = this.stash.shift() as Buffer;
      r.bytes(b, 0, b.length);
    }
  }

  /** Hand bytes that were read ahead by the previous consumer back for the next one. */
  unshift(buf: Buffer): void {
    if (buf.length > 0) this.stash.unshift(buf);
  }

  private deliver(buf: Buffer, start: number, end: number): void {
    if (this.closed) return;
    if (captureOn) this.capture('in', buf, start, end);
    const r = this.reader;
    if (r !== null) {
      r.bytes(buf, start, end);
      return;
    }
    const c = this.consumer;
    if (c) c(buf, start, end);
    else this.stash.push(Buffer.from(buf.subarray(start, end)));
  }

  /**
   * Inject `f`'s faults into everything written from now on (the connection is in RDMA mode:
   * only FPDUs follow).
   */
  setFaults(f: FpduFaults): void {
    this.faults = f;
  }

  /** What {@link setFaults}' injector writes with: the socket, and a reset. */
  faultSink(): { write: (b: Uint8Array, cb?: (err?: Error | null) => void) => void; reset: () => void } {
    return {
      write: (b, cb) => {
        if (this.socket.destroyed) cb?.(new Error('connection closed'));
        else this.writeNow(b, cb);
      },
      reset: () => {
        if (tracing('llp')) traceEvent('llp', `LLP[${this.id}]`, 'llp', { what: 'reset', error: '(fault injection)' });
        const e = new Error('connection reset by fault injection') as NodeJS.ErrnoException;
        e.code = 'ECONNRESET';
        this.lastError = e;
        if (!this.socket.destroyed) this.cap?.reset();
        this.localEnded = true;
        this.socket.resetAndDestroy();
      },
    };
  }

  /** Write bytes; returns false when the caller should wait for {@link onDrain}. */
  write(buf: Uint8Array, cb?: (err?: Error | null) => void): boolean {
    if (this.closed || this.localEnded) {
      cb?.(new Error('connection closed'));
      return false;
    }
    if (this.faults !== null) {
      this.faults.write(buf, cb);
      return !this.socket.writableNeedDrain;
    }
    return this.writeNow(buf, cb);
  }

  /** Hand bytes to the socket (batching, capture, loop hold, drain). */
  private writeNow(buf: Uint8Array, cb?: (err?: Error | null) => void): boolean {
    if (this.batching === 1) this.batching = 3;
    else if (this.batching === 3) {
      this.socket.cork();
      this.batching = 2;
    }
    if (captureOn) this.capture('out', buf, 0, buf.length);
    const ok = this.socket.write(buf, cb);
    if (!this.holds && this.sentPoll === null) this.releaseWhenSent(1);
    // A socket emits 'drain' only after a write returned false: listen from then on (most
    // connections never fill their buffer, and one listener fewer is less to set up per socket).
    if (!ok && !this.drainHooked) {
      this.drainHooked = true;
      this.socket.on('drain', () => this.onDrain?.());
    }
    return ok;
  }
  private drainHooked = false;

  /** Whether the socket holds the event loop ({@link holdLoop}). */
  private holds = true;
  /** Unref'd with bytes not sent yet: the next look at the send queue. */
  private sentPoll: NodeJS.Timeout | null = null;

  /**
   * Whether the connection holds the event loop, as `net.Socket.ref()` / `unref()` (held when
   * made). Unref'd, it still holds the loop while bytes written are not sent yet — Node's write
   * requests until the kernel has them, then the kernel's send queue (SIOCOUTQNSD, looked at every
   * few ms) — so a process that ends right after a write does not cut its last message off: its
   * close resets the connection when late bytes of the peer are unread, and what was unsent is
   * lost.
   */
  holdLoop(on: boolean): void {
    this.holds = on;
    if (!on) {
      this.releaseWhenSent(1);
      return;
    }
    if (this.sentPoll) clearTimeout(this.sentPoll);
    this.sentPoll = null;
    this.socket.ref();
  }

  /** Unref the socket once everything written is sent; until then hold it and look in `wait` ms. */
  private releaseWhenSent(wait: number): void {
    this.sentPoll = null;
    const s = this.socket;
    if (this.holds || s.destroyed) return;
    if (s.writableLength > 0 || unsentOf(s) > 0) {
      s.ref();
      this.sentPoll = setTimeout(() => this.releaseWhenSent(Math.min(wait * 2, SEND_POLL_MAX_MS)), wait);
      return;
    }
    s.unref();
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
  /**
   * 0: not batching; 1: batching, nothing written yet; 3: batching, one write gone out uncorked;
   * 2: corked. Small integers only: a fractional value would turn the field into a
   * double and give every later connection's LLP a new hidden class, which throws away the code
   * optimised for the earlier ones.
   */
  private batching: 0 | 1 | 2 | 3 = 0;

  /**
   * Graceful close: everything written so far is sent, then FIN — queued only once TCP has sent
   * every byte before it (at most {@link SEND_WAIT_MS} later), so that it leaves in a segment of
   * its own. Linux siw can lose the data of a segment that carries the FIN too: TCP signals the
   * state change of such a segment before its data, and siw starts its close work from the state
   * change, which on another CPU can shut the QP's receive side before the softirq places that
   * data (the last message of the exchange, or an rsocket's DISCONNECT, is then never seen). The
   * kernel appends a FIN to the last unsent segment, which a peer whose window holds our data back
   * leaves there. Not waiting for the acknowledgement keeps a close as fast as before (a peer in
   * interactive mode delays its ACK by some 40 ms). Without the netopt addon (SIOCOUTQNSD) the FIN
   * follows the data at once.
   */
  end(): void {
    if (this.localEnded || this.closed) return;
    this.localEnded = true;
    if (this.socket.destroyed) return;
    this.cap?.fin('out');
    lingering.add(this);
    const fin = (): void => {
      // A peer that never answers the FIN must not keep us open forever.
      this.armLinger(3000);
      this.finWhenSent(Date.now() + SEND_WAIT_MS, 1);
    };
    // Bytes a fault holds back go first.
    if (this.faults !== null) this.faults.whenEmpty(fin);
    else fin();
  }

  /** Queue the FIN once nothing we wrote is unsent (or at `deadline`); look again in `wait` ms. */
  private finWhenSent(deadline: number, wait: number): void {
    this.finTimer = null;
    const s = this.socket;
    if (s.destroyed || s.writableEnded) return;
    if (Date.now() < deadline && (s.writableLength > 0 || unsentOf(s) > 0)) {
      this.finTimer = setTimeout(() => this.finWhenSent(deadline, Math.min(wait * 2, SEND_POLL_MAX_MS)), wait);
      this.finTimer.unref();
      return;
    }
    if (tracing('llp')) traceEvent('llp', `LLP[${this.id}]`, 'llp', { what: 'fin' });
    s.end();
  }

  /** Destroy the socket in `ms` at the latest (an earlier deadline already set stays). */
  private armLinger(ms: number): void {
    const at = Date.now() + ms;
    if (this.lingerTimer) {
      if (this.lingerAt <= at) return;
      clearTimeout(this.lingerTimer);
    }
    const s = this.socket;
    this.lingerAt = at;
    this.lingerTimer = setTimeout(() => s.destroy(), ms);
    this.lingerTimer.unref();
  }
  /**
   * When {@link lingerTimer} fires (a Date.now() value, beyond small integers). Born a double
   * (Infinity: no deadline): a field that starts as a small integer changes representation at the
   * first connection's close, which gives the LLP a new hidden class and throws away the code
   * optimised for it just as the next connection starts.
   */
  private lingerAt = Infinity;

  /** Abortive close (RST when unread data is pending, as Linux close() does). */
  abort(): void {
    if (!this.socket.destroyed) this.cap?.reset();
    this.localEnded = true;
    this.socket.destroy();
  }

  /** The connection is over (peer FIN, error or close): close our side too, tell the owner once. */
  private finish(e: Error | undefined, byPeer: boolean): void {
    if (this.closed) return;
    this.closed = true;
    const cap = this.cap;
    if (cap !== null) {
      if (byPeer && e === undefined) cap.fin('in');
      cap.fin('out');
      cap.close();
    }
    this.consumer = null;
    this.reader = null;
    this.direct = false;
    this.stash = [];
    this.faults?.drop(e ?? new Error('connection closed'));
    if (!this.socket.destroyed) {
      this.localEnded = true;
      lingering.add(this);
      // After our own end() the stream is finished already: ending again only builds an error.
      if (!this.socket.writableEnded) this.socket.end();
      this.armLinger(1000);
    }
    const cb = this.onClose;
    this.onClose = null;
    cb?.(e, byPeer);
  }
}
