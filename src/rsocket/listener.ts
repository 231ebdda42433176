/**
 * A listening stream rsocket (rlisten / raccept): an rdma_cm id listening in the TCP port space,
 * with connect requests queued until {@link RsListener.accept} takes them. Accepted sockets
 * inherit the listener's buffer and queue sizes, inline size and iomap size (rs_alloc), so set
 * those on the listener before accepting.
 */
import { CmEventType, PortSpace, createEventChannel, createId, type CmEvent, type CmId, type EventChannel, type SockAddr } from '../cm/index.js';
import { RdmaError } from '../errors.js';
import { RsConn, noDevices } from './conn.js';
import { RsSockOpts, applySockopt, type SockOptValue } from './sockopt.js';
import { fullConfig, type RsConfig } from './tunables.js';
import { POLLIN, POLLNVAL, POLLOUT, SOL_SOCKET, SO_ERROR } from './options.js';
import { RsState, describeState } from './state.js';
import { StateCell } from '../util/state.js';
import { checkAddrPort } from './args.js';

let listenerSeq = 0;

/** A listening rsocket. */
export class RsListener {
  /** Trace tag `RSL[n]`. */
  readonly tag = `RSL[${++listenerSeq}]`;
  /** Sizes handed to accepted sockets. */
  readonly cfg: RsConfig;
  /** The rsocket state ({@link RsState}), every change traced under `RDMA_TRACE=rs`. */
  private readonly st = new StateCell<number>('rs', () => this.tag, RsState.init, describeState);
  private id: CmId | null = null;
  private ch: EventChannel | null = null;
  private readonly requests: CmEvent[] = [];
  private readonly waiters: { resolve: () => void }[] = [];
  /** The option flags and TCP_KEEPIDLE, answered as a connection answers them. */
  private readonly opts = new RsSockOpts();
  private closed = false;
  private loop: Promise<void> | null = null;

  constructor(cfg?: Partial<RsConfig>) {
    this.cfg = fullConfig(cfg);
  }

  /** The rsocket state ({@link RsState}). */
  get state(): number {
    return this.st.state;
  }

  /** rsetsockopt() on the listener (values are inherited by accepted sockets where rsocket.c does). */
  setsockopt(level: number, name: number, value: SockOptValue): void {
    applySockopt(this, level, name, value);
  }

  /**
   * rgetsockopt() on the listener: what a connection answers (rsocket.c has one rgetsockopt for
   * every rsocket), with the sizes accepted sockets inherit; SO_ERROR is 0 (a listener has no
   * connection to fail).
   */
  getsockopt(level: number, name: number): number {
    if (level === SOL_SOCKET && name === SO_ERROR) return 0;
    return this.opts.get(this.cfg, level, name);
  }

  /** @internal */
  _setFlag(level: number, name: number, on: boolean): void {
    this.opts.setFlag(level, name, on);
  }
  /** @internal */
  get _hasBuffers(): boolean {
    return false;
  }
  /** @internal */
  _setKeepIdle(s: number): void {
    this.opts.keepaliveTime = s;
  }
  /** @internal */
  _ensureId(): CmId {
    if (!this.id) {
      this.ch = createEventChannel();
      this.id = createId(this.ch, this, PortSpace.TCP);
      this.id._setHoldsLoop(this.holds);
    }
    return this.id;
  }

  private holds = true;

  /** @internal Whether the listening id holds the Node event loop (`RServer.ref()` / `unref()`). */
  _setHoldsLoop(on: boolean): void {
    this.holds = on;
    this.id?._setHoldsLoop(on);
  }

  /** rbind(). */
  bind(addr: SockAddr): void {
    if (!this.st.is(RsState.init)) throw new RdmaError('EINVAL', { op: 'rbind' });
    checkAddrPort(addr, 'rbind');
    noDevices('rbind');
    const id = this._ensureId();
    try {
      id.bindAddr(addr);
    } catch (e) {
      throw e instanceof RdmaError ? new RdmaError(e.code, { op: 'rbind', cause: e }) : e;
    }
    this.st.move(RsState.bound, 'bind');
  }

  /** rlisten(): start accepting connect requests (binds to the wildcard, port 0, if unbound). */
  async listen(backlog = 1): Promise<void> {
    if (this.st.is(RsState.listening)) return;
    if (this.st.is(RsState.init)) this.bind({ address: '0.0.0.0', port: 0 });
    const id = this.id as CmId;
    try {
      await id.listen(backlog);
    } catch (e) {
      throw e instanceof RdmaError ? new RdmaError(e.code, { op: 'rlisten', cause: e }) : e;
    }
    this.st.move(RsState.listening, 'listen');
    this.loop = this.run();
  }

  /** The bound address (after listen: with the port chosen). */
  get localAddress(): SockAddr | null {
    return this.id?.localAddr ?? null;
  }

  private async run(): Promise<void> {
    const ch = this.ch as EventChannel;
    for (;;) {
      let ev: CmEvent;
      try {
        ev = await ch.getEvent();
      } catch {
        return;
      }
      if (ev.event === CmEventType.CONNECT_REQUEST && !this.closed) {
        this.requests.push(ev);
        // Every waiter looks: an raccept takes the request, an rpoll reports it (waking only the
        // first could leave an raccept asleep behind an rpoll with the request queued).
        for (const w of this.waiters.splice(0)) w.resolve();
      } else {
        ev.ack();
        if (ev.event === CmEventType.CONNECT_REQUEST) rejectQuietly(ev);
      }
    }
  }

  /** Connect requests waiting to be accepted (rpoll POLLIN on a listener). */
  get pending(): number {
    return this.requests.length;
  }

  /**
   * The revents of `events` now (rsocket.c's rs_poll_rs on a listener polls its accept queue, one
   * end of a socketpair): POLLIN while a connect request waits, POLLOUT whenever asked (that end
   * is always writable), POLLNVAL once closed.
   */
  pollNow(events: number): number {
    if (this.closed) return POLLNVAL;
    return (events & POLLIN && this.requests.length > 0 ? POLLIN : 0) | (events & POLLOUT);
  }

  /**
   * rpoll() on a listener: {@link pollNow}'s revents once not 0; 0 after `timeoutMs` (negative:
   * no timeout; 0: check once) or once `signal` aborts.
   */
  async poll(events: number, timeoutMs = -1, signal?: AbortSignal): Promise<number> {
    const now = this.pollNow(events);
    if (now !== 0 || timeoutMs === 0 || signal?.aborted) return now;
    await new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | null = null;
      const done = (): void => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const w = { resolve: done };
      this.waiters.push(w);
      if (timeoutMs > 0) timer = setTimeout(done, timeoutMs).unref();
      signal?.addEventListener('abort', done, { once: true });
    });
    return this.pollNow(events);
  }

  /**
   * raccept(): the next connection, established. Waits for a request; rejects when the listener
   * closes (EBADF), or with the request's own failure — ENOTSUP for a peer of another rsocket
   * version, as rsocket.c (the request is refused and the listener stays usable). Like a blocking
   * raccept, it waits for that requester to finish its handshake.
   */
  async accept(): Promise<RsConn> {
    return this._acceptOne(await this._nextRequest());
  }

  /** @internal The next connect request, waited for; EBADF when not listening or once closed. */
  async _nextRequest(): Promise<CmEvent> {
    if (!this.st.is(RsState.listening)) throw new RdmaError('EBADF', { op: 'raccept', detail: 'not listening' });
    for (;;) {
      const ev = this.requests.shift();
      if (ev) return ev;
      if (this.closed) throw new RdmaError('EBADF', { op: 'raccept', detail: 'listener closed' });
      await new Promise<void>((resolve) => this.waiters.push({ resolve }));
    }
  }

  /** @internal Accept one request taken by {@link _nextRequest}: the connection, established. */
  async _acceptOne(ev: CmEvent, signal?: AbortSignal): Promise<RsConn> {
    const c = new RsConn({ ...this.cfg });
    await c._acceptRequest(ev, signal);
    return c;
  }

  /** rclose() of a listener: stop listening; queued requests are refused. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const w of this.waiters.splice(0)) w.resolve();
    for (const ev of this.requests.splice(0)) {
      rejectQuietly(ev);
      ev.ack();
      try {
        await ev.id.destroy();
      } catch {
        /* gone */
      }
    }
    if (this.id && !this.id.destroyed) {
      try {
        await this.id.destroy();
      } catch {
        /* already */
      }
    }
    try {
      this.ch?.destroy();
    } catch {
      /* children still on it */
    }
    await this.loop;
  }
}

function rejectQuietly(ev: CmEvent): void {
  try {
    ev.id.reject();
  } catch {
    /* the requester is gone */
  }
}
