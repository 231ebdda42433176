/**
 * `struct rdma_cm_id` and its calls (rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route,
 * rdma_create_qp, rdma_connect, rdma_listen, rdma_accept, rdma_reject, rdma_disconnect,
 * rdma_destroy_id, rdma_migrate_id, rdma_set_option, rdma_get_request) over the software iWARP
 * device.
 *
 * Two modes, as librdmacm: an id created on an {@link EventChannel} reports outcomes as events
 * (the promise a call returns only means "started"); an id created with `channel = null` is
 * synchronous: each call awaits its own event and rejects with an errno-coded {@link RdmaError}
 * (REJECTED → ECONNREFUSED, status s → errno |s|), like `ucma_complete()`.
 *
 * State machine: the kernel's cm_id states (cma_priv.h), changed only through {@link CmId.setState}.
 */
import { existsSync } from 'node:fs';
import net from 'node:net';
import { RdmaError, err } from '../errors.js';
import type { ErrnoCode } from '../errno.js';
import { trace, tracing } from '../trace.js';
import { findDeviceByAddress as lookupDevice, type Device } from '../verbs/device.js';
import type { Context } from '../verbs/context.js';
import type { Pd } from '../verbs/pd.js';
import type { Cq } from '../verbs/cq.js';
import type { CompChannel } from '../verbs/comp-channel.js';
import type { Qp } from '../verbs/qp.js';
import { QpState, QpType, type QpCap } from '../verbs/types.js';
import { Cep, CepState, MAX_IRD_ORD, type MpaResult } from '../transport/iwarp/cep.js';
import { Llp, acceptLlps } from '../transport/iwarp/llp.js';
import { IwarpQp, type LlpDownInfo } from '../transport/iwarp/iwarp-qp.js';
import { EventChannel } from './event-channel.js';
import { CmEventType, rdmaEventStr, type CmEvent, type ConnParam, type EventConnParam } from './events.js';
import { ipFamily, isAny, isLoopback, resolveNeighbor, routeSource, unmapV4, type SockAddr } from './addr.js';

/** `enum rdma_port_space`. */
export enum PortSpace {
  IPOIB = 0x0002,
  TCP = 0x0106,
  UDP = 0x0111,
  IB = 0x013f,
}

/** cm_id states (the kernel's `enum rdma_cm_state`). */
export enum CmState {
  IDLE = 'IDLE',
  ADDR_QUERY = 'ADDR_QUERY',
  ADDR_RESOLVED = 'ADDR_RESOLVED',
  ROUTE_QUERY = 'ROUTE_QUERY',
  ROUTE_RESOLVED = 'ROUTE_RESOLVED',
  CONNECT = 'CONNECT',
  DISCONNECT = 'DISCONNECT',
  ADDR_BOUND = 'ADDR_BOUND',
  LISTEN = 'LISTEN',
  DEVICE_REMOVAL = 'DEVICE_REMOVAL',
  DESTROYING = 'DESTROYING',
}

/** rdma_set_option levels and names. */
export const RdmaOption = {
  LEVEL_ID: 0,
  LEVEL_IB: 1,
  ID_TOS: 0,
  ID_REUSEADDR: 1,
  ID_AFONLY: 2,
  ID_ACK_TIMEOUT: 3,
  IB_PATH: 1,
} as const;

/** QP attributes for {@link CmId.createQp} (`struct ibv_qp_init_attr`). */
export interface CmQpInitAttr {
  sendCq?: Cq;
  recvCq?: Cq;
  cap?: Partial<QpCap>;
  qpType?: QpType;
  sqSigAll?: boolean;
  qpContext?: unknown;
}

/**
 * The listen backlog the kernel uses when rdma_listen gets 0, a negative value or more than this
 * (ucma.c `max_backlog`, net/rdma_ucm/max_backlog, default 1024).
 */
export const MAX_BACKLOG = 1024;

/** Private data limit on iWARP (256-byte MPA limit minus the 4-byte IRD/ORD word). */
export const IWARP_MAX_PRIVATE_DATA = 252;

/** Grace before a non-P2P responder sends its first FPDU without having received one (ms). */
const HOLD_GRACE_MS = Number(process.env['RDMACM_IWARP_HOLD_MS'] ?? 200);
/**
 * How long after our Write RTR, with nothing received from the peer, another zero-length Write
 * is sent (ms; then after 4, 16 and 64 times that; 0: never). Works around Linux siw's P2P
 * responder race, see {@link CmId.goLive}.
 */
const RTR_NUDGE_MS = Number(process.env['RDMACM_IWARP_RTR_NUDGE_MS'] ?? 50);
/** `RDMACM_IWARP_RTR_NUDGE_LOOPBACK`: 1 or 0 overrides {@link nudgeLoopback}'s default. */
const NUDGE_LOOPBACK = process.env['RDMACM_IWARP_RTR_NUDGE_LOOPBACK'];
let localSiw: boolean | null = null;
/**
 * Whether a peer on this host (loopback or one of our addresses) gets the RTR nudges: only a
 * kernel siw can have the race, and such a peer runs in this very kernel, so only when this
 * kernel has the siw module. Spares every connection between two of our own processes up to
 * four writes and reads.
 */
function nudgeLoopback(): boolean {
  if (NUDGE_LOOPBACK === '1' || NUDGE_LOOPBACK === '0') return NUDGE_LOOPBACK === '1';
  return (localSiw ??= existsSync('/sys/module/siw'));
}
/** Request peer-to-peer mode (RFC 6581 RTR) as initiator. */
const P2P = process.env['RDMACM_IWARP_P2P'] !== '0';
/** Ask for MPA CRC as initiator (siw default: off). */
const WANT_CRC = process.env['RDMACM_IWARP_CRC'] === '1';

const defaultPds = new WeakMap<Context, Pd>();

/**
 * The device owning a local address, remembered for as long as the provider keeps its device
 * list (1 s): every resolve, bind and incoming connection asks, and the full lookup normalises
 * every address of every device.
 */
const DEVICE_CACHE_MS = 1000;
const deviceCache = new Map<string, { dev: Device | undefined; at: number }>();
function findDeviceByAddress(ip: string): Device | undefined {
  const now = Date.now();
  const hit = deviceCache.get(ip);
  if (hit && now - hit.at < DEVICE_CACHE_MS) return hit.dev;
  const dev = lookupDevice(ip);
  if (deviceCache.size > 256) deviceCache.clear();
  deviceCache.set(ip, { dev, at: now });
  return dev;
}
/** max_qp_rd_atom of the device (asked on every connect/accept). */
function deviceMaxRd(ctx: Context | null): number {
  return ctx ? ctx._attr.maxQpRdAtom : MAX_IRD_ORD;
}
/** In-process port reservations, to report EADDRINUSE at bind time like the kernel. */
const boundPorts = new Map<string, CmId>();
let idSeq = 0;

/** Synchronous calls wait on these outcomes (and reject on the error ones). */
const ERROR_EVENTS = new Set([
  CmEventType.ADDR_ERROR,
  CmEventType.ROUTE_ERROR,
  CmEventType.CONNECT_ERROR,
  CmEventType.UNREACHABLE,
  CmEventType.REJECTED,
  CmEventType.DEVICE_REMOVAL,
]);

/** The private data of an event that carries none (a shared empty view: it cannot be written). */
const NO_PRIVATE_DATA = new Uint8Array(0);

/**
 * A posted CM event. `_report` runs when the channel hands it to the application
 * (rdma_get_cm_event); `ack` may be called once.
 */
class PostedEvent implements CmEvent {
  private acked = false;
  private wasReported = false;
  constructor(
    readonly id: CmId,
    readonly listenId: CmId | null,
    readonly event: CmEventType,
    readonly status: number,
    conn: EventConnParam,
  ) {
    this.param = { conn };
  }
  readonly param: { conn: EventConnParam };
  ack(): void {
    if (this.acked) throw err('EINVAL', 'rdma_ack_cm_event', 'event already acknowledged');
    this.acked = true;
    this.id._eventAcked(this.wasReported);
  }
  _report(): void {
    if (this.wasReported) return;
    this.wasReported = true;
    this.id._eventReported();
  }
}

/**
 * An RDMA CM identifier. Create with {@link createId}.
 */
export class CmId {
  /** Event channel (a private one in synchronous mode). */
  channel: EventChannel;
  /** The user's context pointer. */
  context: unknown;
  readonly ps: PortSpace;
  readonly qpType: QpType;
  /** The device context once bound/resolved (`id->verbs`). */
  verbs: Context | null = null;
  pd: Pd | null = null;
  qp: Qp | null = null;
  sendCq: Cq | null = null;
  recvCq: Cq | null = null;
  sendCqChannel: CompChannel | null = null;
  recvCqChannel: CompChannel | null = null;
  /** Synchronous mode: the last event, acknowledged by the next call. */
  event: CmEvent | null = null;
  /** Port number (always 1 on the software device) once bound. */
  portNum = 0;
  private _state: CmState = CmState.IDLE;
  private src: SockAddr | null = null;
  private dst: SockAddr | null = null;
  private readonly seq = ++idSeq;
  private sync: boolean;
  private cep: Cep | null = null;
  private server: net.Server | null = null;
  private reqParam: EventConnParam | null = null;
  /** Events posted for this id and not acknowledged (queued or handed out). */
  private unacked = 0;
  /** Events handed to the application (rdma_get_cm_event) and not acknowledged. */
  private reportedUnacked = 0;
  private ackWaiters: (() => void)[] = [];
  private _destroyed = false;
  private connected = false;
  private ownsQpResources = false;
  private reservedKey: string | null = null;
  /** Bound by the application (rdma_bind_addr, or a source given to rdma_resolve_addr). */
  private boundExplicitly = false;
  /** The explicitly bound source address is the one route lookup picks for `dst` (resolveAddr). */
  private boundIsRouteSource = false;
  private options = { tos: -1, reuseAddr: false, afOnly: false, ackTimeout: -1 };
  /**
   * @internal rdma_create_ep on a passive id: the QP attributes (and PD) rdma_get_request uses to
   * create the QP of each new connection.
   */
  _epQpInitAttr: CmQpInitAttr | null = null;

  /** @internal Use {@link createId}. */
  constructor(channel: EventChannel | null, context: unknown, ps: PortSpace) {
    if (ps !== PortSpace.TCP && ps !== PortSpace.IB && ps !== PortSpace.UDP && ps !== PortSpace.IPOIB) throw err('EINVAL', 'rdma_create_id', `port space ${ps}`);
    this.sync = channel === null;
    this.channel = channel ?? new EventChannel(true);
    this.channel._ids.add(this);
    this.context = context;
    this.ps = ps;
    this.qpType = ps === PortSpace.UDP || ps === PortSpace.IPOIB ? QpType.UD : QpType.RC;
  }

  /** Current state. */
  get state(): CmState {
    return this._state;
  }
  /** Whether rdma_destroy_id was called. */
  get destroyed(): boolean {
    return this._destroyed;
  }
  /** rdma_get_local_addr(). */
  get localAddr(): SockAddr | null {
    return this.src;
  }
  /** rdma_get_peer_addr(). */
  get peerAddr(): SockAddr | null {
    return this.dst;
  }
  /** rdma_get_src_port() (host byte order here; 0 if unbound). */
  get srcPort(): number {
    return this.src?.port ?? 0;
  }
  /** rdma_get_dst_port(). */
  get dstPort(): number {
    return this.dst?.port ?? 0;
  }
  /** Whether the id is synchronous (created without a channel). */
  get isSync(): boolean {
    return this.sync;
  }

  private tag(): string {
    return `ID[${this.seq}]`;
  }

  private setState(to: CmState, why: string): void {
    if (tracing('cm')) trace('cm', this.tag(), `${this._state} -> ${to} (${why})`);
    this._state = to;
  }

  private checkAlive(op: string): void {
    if (this._destroyed) throw err('EINVAL', op, 'id destroyed');
  }

  // -- events -------------------------------------------------------------------------------------

  private post(type: CmEventType, status = 0, conn?: Partial<EventConnParam>, listenId: CmId | null = null, on: EventChannel = this.channel): void {
    if (this._destroyed) return;
    this.unacked++;
    const param: EventConnParam = { privateData: NO_PRIVATE_DATA, responderResources: 0, initiatorDepth: 0, flowControl: 0, retryCount: 0, rnrRetryCount: 0, srq: 0, qpNum: 0 };
    if (conn) Object.assign(param, conn);
    if (tracing('cm')) trace('cm', this.tag(), `event ${rdmaEventStr(type)} status ${status}`);
    on._post(new PostedEvent(this, listenId, type, status, param));
  }

  /** @internal An event of this id was acknowledged ({@link PostedEvent.ack}). */
  _eventAcked(wasReported: boolean): void {
    this.unacked--;
    if (wasReported) this.reportedUnacked--;
    if (this.ackWaiters.length === 0) return;
    const ws = this.ackWaiters;
    this.ackWaiters = [];
    for (const w of ws) w();
  }

  /** @internal An event of this id was handed to the application (rdma_get_cm_event). */
  _eventReported(): void {
    this.reportedUnacked++;
  }

  /** Resolve once `done()` holds; re-checked after every acknowledgement of this id's events. */
  private async waitAcks(done: () => boolean): Promise<void> {
    while (!done()) await new Promise<void>((r) => this.ackWaiters.push(r));
  }

  /**
   * Synchronous mode: acknowledge the previous event, wait for the next one of this id and map
   * an error event to an RdmaError (ucma_complete()).
   */
  private async complete(op: string): Promise<CmEvent> {
    if (this.event) {
      const e = this.event;
      this.event = null;
      e.ack();
    }
    const ev = await this.channel.getEvent();
    this.event = ev;
    if (ev.event === CmEventType.REJECTED) throw new RdmaError('ECONNREFUSED', { op, detail: `${rdmaEventStr(ev.event)} status ${ev.status}` });
    if (ev.status !== 0 || ERROR_EVENTS.has(ev.event)) {
      throw RdmaError.fromErrno(ev.status === 0 ? 5 : Math.abs(ev.status), { op, detail: rdmaEventStr(ev.event) });
    }
    return ev;
  }

  // -- address ------------------------------------------------------------------------------------

  /**
   * rdma_bind_addr(). Binding to a specific local IP also binds the id to its device; port 0
   * picks one when connecting or listening. EADDRNOTAVAIL for a non-local address,
   * EADDRINUSE for a port another id holds, EINVAL when not IDLE.
   */
  bindAddr(addr: SockAddr): void {
    const op = 'rdma_bind_addr';
    this.checkAlive(op);
    if (this._state !== CmState.IDLE) throw err('EINVAL', op, `state ${this._state}`);
    const fam = ipFamily(addr.address, op);
    if (!Number.isInteger(addr.port) || addr.port < 0 || addr.port > 65535) throw err('EINVAL', op, `port ${addr.port}`);
    let dev: Device | undefined;
    if (!isAny(addr.address)) {
      dev = findDeviceByAddress(addr.address);
      if (!dev) throw err('EADDRNOTAVAIL', op, addr.address);
    }
    if (addr.port !== 0) {
      const key = `${this.ps}:${addr.port}`;
      const holder = boundPorts.get(key);
      if (holder && !holder._destroyed && !(this.options.reuseAddr && holder.options.reuseAddr)) throw err('EADDRINUSE', op, `port ${addr.port}`);
      boundPorts.set(key, this);
      this.reservedKey = key;
    }
    this.src = { address: addr.address, port: addr.port, family: fam === 6 ? 'IPv6' : 'IPv4' };
    this.boundExplicitly = true;
    if (dev) {
      this.verbs = dev.open();
      this.portNum = 1;
    }
    this.setState(CmState.ADDR_BOUND, 'bind');
  }

  /**
   * rdma_resolve_addr(): find the local device and source address for `dst` (binding first if
   * `src` is given or the id is unbound). No route to `dst`: the call itself fails
   * (ENETUNREACH), as the kernel's synchronous route lookup does. Then the next hop's link
   * address is waited for (IPv4: the ARP table) up to `timeoutMs`.
   * Event: ADDR_RESOLVED, or ADDR_ERROR with a negative
   * errno status (-ENODEV: no device owns the source; -ETIMEDOUT: no ARP answer).
   */
  async resolveAddr(src: SockAddr | null, dst: SockAddr, timeoutMs = 2000): Promise<void> {
    const op = 'rdma_resolve_addr';
    this.checkAlive(op);
    const dfam = ipFamily(dst.address, op);
    if (this._state === CmState.IDLE) {
      if (src) this.bindAddr(src);
      else this.src = { address: dfam === 6 ? '::' : '0.0.0.0', port: 0, family: dfam === 6 ? 'IPv6' : 'IPv4' };
    } else if (this._state !== CmState.ADDR_BOUND) throw err('EINVAL', op, `state ${this._state}`);
    const sfam = ipFamily((this.src as SockAddr).address, op);
    if (sfam !== dfam && !isAny((this.src as SockAddr).address)) throw err('EINVAL', op, 'source and destination families differ');
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0) throw err('EINVAL', op, `timeout ${timeoutMs}`);
    this.setState(CmState.ADDR_QUERY, 'resolve_addr');
    this.dst = { address: dst.address, port: dst.port, family: dfam === 6 ? 'IPv6' : 'IPv4' };
    // The route lookup is synchronous in the kernel (rdma_resolve_ip): no route to the
    // destination fails the call itself (ENETUNREACH/EHOSTUNREACH), no event follows.
    const s = this.src as SockAddr;
    let from: string;
    this.boundIsRouteSource = false;
    try {
      if (isAny(s.address)) from = await routeSource(dst.address, dfam);
      else {
        from = s.address;
        // A bind() of the address the kernel would pick anyway only costs: it makes the kernel
        // search the port space, slow with thousands of sockets. rdma_connect skips it then.
        if (this.boundExplicitly && !s.port) this.boundIsRouteSource = from === dst.address || (await routeSource(dst.address, dfam).catch(() => '')) === from;
      }
    } catch (e) {
      if ((this._state as CmState) === CmState.ADDR_QUERY) this.setState(CmState.ADDR_BOUND, 'no route');
      const c = (e as NodeJS.ErrnoException).code;
      throw err(c === 'ENETUNREACH' || c === 'EHOSTUNREACH' || c === 'EADDRNOTAVAIL' ? c : 'ENETUNREACH', op, `${dst.address}: ${(e as Error).message}`);
    }
    const work = async (): Promise<void> => {
      let status = 0;
      const dev = findDeviceByAddress(from);
      if (!dev) status = -19;
      else {
        this.verbs = dev.open();
        this.portNum = 1;
        this.src = { address: from, port: s.port, family: dfam === 6 ? 'IPv6' : 'IPv4' };
        // The next hop's link address (ARP): -ETIMEDOUT when nobody answers within the timeout.
        if (!isLoopback(dst.address) && !isAny(dst.address) && !findDeviceByAddress(dst.address)) status = await resolveNeighbor(dst.address, timeoutMs);
      }
      if (this._destroyed || this._state !== CmState.ADDR_QUERY) return;
      if (status === 0) {
        this.setState(CmState.ADDR_RESOLVED, 'address resolved');
        this.post(CmEventType.ADDR_RESOLVED);
      } else {
        this.setState(CmState.ADDR_BOUND, 'address error');
        this.post(CmEventType.ADDR_ERROR, status);
      }
    };
    setImmediate(() => void work());
    if (this.sync) await this.complete(op);
  }

  /**
   * rdma_resolve_route(). On iWARP the route is the IP route already found: ROUTE_RESOLVED
   * follows at once. EINVAL unless ADDR_RESOLVED.
   */
  async resolveRoute(timeoutMs = 2000): Promise<void> {
    const op = 'rdma_resolve_route';
    this.checkAlive(op);
    if (this._state !== CmState.ADDR_RESOLVED) throw err('EINVAL', op, `state ${this._state}`);
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0) throw err('EINVAL', op, `timeout ${timeoutMs}`);
    this.setState(CmState.ROUTE_QUERY, 'resolve_route');
    setImmediate(() => {
      if (this._destroyed || this._state !== CmState.ROUTE_QUERY) return;
      this.setState(CmState.ROUTE_RESOLVED, 'route resolved');
      this.post(CmEventType.ROUTE_RESOLVED);
    });
    if (this.sync) await this.complete(op);
  }

  // -- QP -----------------------------------------------------------------------------------------

  /**
   * rdma_create_qp(): a QP on the id's device, in the default PD when `pd` is null; CQs (with
   * completion channels) are created when not given, sized max_send_wr/max_recv_wr. RC QPs end
   * in INIT. EINVAL if the id has no device or already a QP; EOPNOTSUPP for UD on iWARP (siw).
   */
  createQp(pd: Pd | null, attr: CmQpInitAttr = {}): Qp {
    const op = 'rdma_create_qp';
    this.checkAlive(op);
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    if (this.qp) throw err('EINVAL', op, 'id already has a QP');
    const ctx = this.verbs;
    if (pd && pd.context !== ctx) throw err('EINVAL', op, 'PD of another device');
    const qpType = attr.qpType ?? this.qpType;
    if (qpType !== QpType.RC) throw err('EOPNOTSUPP', op, 'iWARP supports RC QPs only');
    let thePd = pd;
    if (!thePd) {
      thePd = defaultPds.get(ctx) ?? ctx.allocPd();
      defaultPds.set(ctx, thePd);
    }
    const cap = { maxSendWr: 1, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 0, ...attr.cap };
    let sendCq = attr.sendCq;
    let recvCq = attr.recvCq;
    const made: { cq: Cq; ch: CompChannel }[] = [];
    if (!sendCq) {
      const ch = ctx.createCompChannel();
      sendCq = ctx.createCq(Math.max(cap.maxSendWr, 1), ch);
      made.push({ cq: sendCq, ch });
      this.sendCqChannel = ch;
    }
    if (!recvCq) {
      const ch = ctx.createCompChannel();
      recvCq = ctx.createCq(Math.max(cap.maxRecvWr, 1), ch);
      made.push({ cq: recvCq, ch });
      this.recvCqChannel = ch;
    }
    let qp: Qp;
    try {
      const init = { qpType, sendCq, recvCq, cap, sqSigAll: attr.sqSigAll ?? false, qpContext: attr.qpContext };
      qp = thePd.createQp(init) as Qp;
    } catch (e) {
      for (const m of made) {
        m.cq.destroy();
        m.ch.destroy();
      }
      this.sendCqChannel = null;
      this.recvCqChannel = null;
      throw e;
    }
    qp.modify({ qpState: QpState.INIT });
    this.ownsQpResources = made.length > 0;
    this.pd = thePd;
    this.qp = qp;
    this.sendCq = sendCq;
    this.recvCq = recvCq;
    return qp;
  }

  /** rdma_destroy_qp(): destroy the QP and the CQs/channels rdma_create_qp made. */
  destroyQp(): void {
    const qp = this.qp;
    if (!qp) return;
    this.qp = null;
    try {
      qp.destroy();
    } catch {
      /* already destroyed by the user */
    }
    if (this.ownsQpResources) {
      for (const [cq, ch] of [
        [this.sendCq, this.sendCqChannel],
        [this.recvCq, this.recvCqChannel],
      ] as const) {
        if (cq && ch) {
          try {
            cq.destroy();
            ch.destroy();
          } catch {
            /* the user still holds events; leave them */
          }
        }
      }
    }
    this.sendCqChannel = this.recvCqChannel = null;
    this.sendCq = this.recvCq = null;
  }

  private qpFor(param: ConnParam | undefined, op: string): IwarpQp {
    if (this.qp) return this.qp as IwarpQp;
    if (param?.qpNum !== undefined && this.verbs) {
      const q = this.verbs._qps.get(param.qpNum);
      if (q) return q as unknown as IwarpQp;
    }
    throw err('EINVAL', op, 'no QP (iWARP needs a QP to connect)');
  }

  private rdLimits(param: ConnParam | undefined, op: string, dflt: { ird: number; ord: number }): { ird: number; ord: number } {
    const max = deviceMaxRd(this.verbs);
    const pick = (v: number | undefined, d: number, what: string): number => {
      if (v === undefined || v === 0xff) return Math.min(d, max);
      if (!Number.isInteger(v) || v < 0 || v > max) throw err('EINVAL', op, `${what} ${v} exceeds the device maximum ${max}`);
      return v;
    };
    return { ird: pick(param?.responderResources, dflt.ird, 'responder_resources'), ord: pick(param?.initiatorDepth, dflt.ord, 'initiator_depth') };
  }

  private checkPrivateData(pd: Uint8Array | undefined, op: string): Uint8Array {
    if (!pd) return new Uint8Array(0);
    if (pd.length > IWARP_MAX_PRIVATE_DATA) throw err('EINVAL', op, `private data ${pd.length} > ${IWARP_MAX_PRIVATE_DATA} bytes`);
    return pd;
  }

  // -- active side --------------------------------------------------------------------------------

  /**
   * rdma_connect(): TCP connection + MPA Request carrying `param.privateData`; the QP moves to
   * RTS when the Reply arrives. Events: ESTABLISHED; REJECTED (status -ECONNREFUSED: nobody
   * listening, or the peer rejected — private data attached); UNREACHABLE (-ETIMEDOUT);
   * CONNECT_ERROR otherwise. EINVAL unless ROUTE_RESOLVED, or with no QP.
   */
  async connect(param?: ConnParam): Promise<void> {
    const op = 'rdma_connect';
    this.checkAlive(op);
    if (this._state !== CmState.ROUTE_RESOLVED) throw err('EINVAL', op, `state ${this._state}`);
    const qp = this.qpFor(param, op);
    const pdata = this.checkPrivateData(param?.privateData, op);
    const max = deviceMaxRd(this.verbs);
    const { ird, ord } = this.rdLimits(param, op, { ird: max, ord: max });
    const src = this.src as SockAddr;
    const dst = this.dst as SockAddr;
    this.setState(CmState.CONNECT, 'connect');
    const opts: { host: string; port: number; localAddress?: string; localPort?: number } = { host: dst.address, port: dst.port };
    // Bind the TCP socket only to what the application bound, and not even then when that is the
    // address route lookup picks: the kernel picks the same source for the connect, and an
    // explicit bind() before connect() makes it search the port space (slow with thousands of
    // connections).
    if (this.boundExplicitly && !isAny(src.address) && !this.boundIsRouteSource) opts.localAddress = src.address;
    if (src.port) {
      opts.localPort = src.port;
      opts.localAddress ??= src.address;
    }
    const cep = Cep.connect(opts, { ird, ord, privateData: pdata, crc: WANT_CRC, p2p: P2P });
    this.cep = cep;
    cep.onEvent = (ev) => {
      if (this._destroyed) return;
      switch (ev.type) {
        case 'reply': {
          this.cep = null;
          const r = ev.result;
          const llp = cep.llp;
          this.src = { address: unmapV4(llp.localAddress ?? src.address), port: llp.localPort ?? src.port, family: src.family ?? 'IPv4' };
          this.goLive(qp, llp, r, true);
          this.post(CmEventType.ESTABLISHED, 0, { privateData: r.privateData, responderResources: r.ird, initiatorDepth: r.ord });
          return;
        }
        case 'rejected':
          this.cep = null;
          this.setState(CmState.ROUTE_RESOLVED, 'rejected');
          if (qp.state !== QpState.RESET) qp.modify({ qpState: QpState.ERR });
          this.post(CmEventType.REJECTED, ev.status, { privateData: ev.privateData });
          return;
        case 'failed': {
          this.cep = null;
          this.setState(CmState.ROUTE_RESOLVED, 'connect failed');
          if (qp.state !== QpState.RESET) qp.modify({ qpState: QpState.ERR });
          const t = ev.status === -111 || ev.status === -104 ? CmEventType.REJECTED : ev.status === -110 ? CmEventType.UNREACHABLE : CmEventType.CONNECT_ERROR;
          this.post(t, ev.status);
          return;
        }
        default:
          return;
      }
    };
    const tcp = await cep.tcpConnected;
    if (tcp !== 0) {
      // The TCP connect failed: rdma_connect itself fails with that errno (siw connects inside
      // the call), the id is back in ROUTE_RESOLVED and no event follows.
      if (this.cep === cep) this.cep = null;
      if (!this._destroyed) this.setState(CmState.ROUTE_RESOLVED, 'connect failed');
      throw RdmaError.fromErrno(-tcp, { op });
    }
    if (this.sync) await this.complete(op);
  }

  /** Hand the negotiated connection to the QP and watch for its end. */
  private goLive(qp: IwarpQp, llp: Llp, r: MpaResult, active: boolean, onFirst?: () => void): void {
    this.connQp = qp;
    qp.ird = r.ird;
    qp.ord = r.ord;
    qp.onLlpDown = (info) => this.llpDown(info);
    if (qp.state === QpState.INIT) qp.modify({ qpState: QpState.RTR });
    const mtu = this.verbs?.device.info.mtu ?? 1500;
    // Both ends of a TCP connection are of one family; our side is known without a getsockname(2)
    // (src is unmapped: a v4-mapped local address counts as IPv4, as its MSS does).
    const v6 = (this.src?.address ?? '').includes(':');
    const fpduMax = Math.min(mtu - (v6 ? 60 : 40) - 12, 65535 + 6) & ~7;
    const p: import('../transport/iwarp/iwarp-qp.js').LlpParams = {
      crc: r.crc,
      fpduMax,
      holdTx: !active && !r.p2p,
      holdGraceMs: HOLD_GRACE_MS,
    };
    if (active && r.rtr) p.rtr = r.rtr;
    let nudge: NodeJS.Timeout | null = null;
    // Peers on this host (loopback or a local address) only when this kernel runs siw: siw
    // attaches to `lo` as well (loopback_enabled), and its race is a window between two of its
    // own steps, whatever the link.
    if (active && r.rtr === 'write' && RTR_NUDGE_MS > 0 && (!this.peerIsLocal() || nudgeLoopback())) {
      // Linux siw as a P2P responder installs its RTR reader only after sending the MPA Reply
      // (siw_accept: siw_send_mpareqrep, then siw_sk_assign_rtr_upcalls): bytes landing in
      // between sit unread until more bytes arrive, and the responder never reports ESTABLISHED
      // (seen with kernel 6.1 under emulation: `cm_llp_data_ready: cep state 7`; the gap lasted
      // over 50 ms there, and destroying such an id later hit the kernel's BUG at iwcm.c:969).
      // While the peer has sent nothing, another zero-length RDMA Write (no placement, no
      // completion) makes siw read the socket again: after 50 ms, then 4 times the previous wait
      // (50, 250, 1050, 4250 ms), so an idle connection costs at most four 20-byte writes.
      let wait = RTR_NUDGE_MS;
      const again = (): void => {
        nudge = null;
        if (qp.llp !== llp || llp.isClosed) return;
        if (qp.sqDepth === 0 && qp.tx.pendingCb === 0) qp.tx.sendRtr('write');
        wait *= 4;
        if (wait > RTR_NUDGE_MS * 64) return;
        nudge = setTimeout(again, wait);
        nudge.unref();
      };
      nudge = setTimeout(again, wait);
      nudge.unref();
    }
    if (onFirst || nudge) {
      p.onFirstFpdu = () => {
        if (nudge) clearTimeout(nudge);
        nudge = null;
        onFirst?.();
      };
    }
    this.connected = true;
    qp.attachLlp(llp, p, r.leftover);
  }

  /** The peer is this host (loopback or one of our addresses): its stack runs in this kernel. */
  private peerIsLocal(): boolean {
    const d = this.dst?.address;
    return d !== undefined && (isLoopback(d) || findDeviceByAddress(d) !== undefined);
  }

  private llpDown(info: LlpDownInfo): void {
    if (!this.connected) return;
    this.connected = false;
    if (this._state === CmState.CONNECT) this.setState(CmState.DISCONNECT, info.byPeer ? 'peer closed' : 'disconnect');
    // A P2P accept whose connection ended before the RTR: ESTABLISHED, then DISCONNECTED, as the
    // kernel delivers (siw's RTR reader reports ESTABLISHED on the peer's FIN, then its
    // peer-close work DISCONNECT and CLOSE; iw_cm promises ESTABLISHED before CLOSE on the
    // passive side). An error event here would end servers that exit on any CM error (rping).
    this.flushEstablished();
    this.post(CmEventType.DISCONNECTED, 0);
  }
  /** Posts the ESTABLISHED of a P2P accept, once: on the first FPDU, or when the connection ends. */
  private flushEstablished(): void {
    const f = this.pendingEstablished;
    this.pendingEstablished = null;
    f?.();
  }
  private pendingEstablished: (() => void) | null = null;
  /** The QP carrying the connection (the id's own, or one the application created: `qpNum`). */
  private connQp: IwarpQp | null = null;

  // -- passive side -------------------------------------------------------------------------------

  /**
   * rdma_listen(): accept connections on the bound address (wildcard: every device). Resolves
   * once listening; EADDRINUSE if the TCP port is taken, EINVAL unless bound or idle.
   */
  async listen(backlog = 0): Promise<void> {
    const op = 'rdma_listen';
    this.checkAlive(op);
    if (this._state === CmState.IDLE) this.bindAddr({ address: '0.0.0.0', port: 0 });
    if (this._state !== CmState.ADDR_BOUND) throw err('EINVAL', op, `state ${this._state}`);
    if (this.ps !== PortSpace.TCP && this.ps !== PortSpace.IB) throw err('EOPNOTSUPP', op, 'iWARP listens in the TCP port space only');
    const src = this.src as SockAddr;
    const server = net.createServer({ noDelay: true, pauseOnConnect: true });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) => {
        this.server = null;
        const code = (e.code ?? 'EIO') as ErrnoCode;
        reject(e.code === 'EADDRINUSE' || e.code === 'EADDRNOTAVAIL' || e.code === 'EACCES' ? err(code, op, `${src.address}:${src.port}`) : new RdmaError('EIO', { op, cause: e }));
      });
      const lo: net.ListenOptions = { port: src.port, backlog: backlog > 0 && backlog < MAX_BACKLOG ? backlog : MAX_BACKLOG };
      if (!(src.address === '::' && !this.options.afOnly)) lo.host = src.address;
      if (src.address === '::') lo.ipv6Only = this.options.afOnly;
      server.listen(lo, () => {
        acceptLlps(server, (llp) => this.incoming(llp));
        resolve();
      });
    });
    server.on('error', () => {});
    const a = server.address();
    if (a && typeof a === 'object') this.src = { address: src.address, port: a.port, family: src.family ?? 'IPv4' };
    if (!this.reservedKey) {
      this.reservedKey = `${this.ps}:${this.src?.port}`;
      boundPorts.set(this.reservedKey, this);
    }
    this.setState(CmState.LISTEN, 'listen');
  }

  private incoming(llp: Llp): void {
    if (this._destroyed || this._state !== CmState.LISTEN) {
      llp.abort();
      return;
    }
    const cep = Cep.accepted(llp);
    const ts = llp.socket;
    cep.onEvent = (ev) => {
      if (ev.type !== 'request') return;
      if (this._destroyed) {
        cep.close(false);
        return;
      }
      const f = ev.frame;
      // Bound to one address, the listener's address and port are the connection's: no
      // getsockname(2) (the wildcard asks which of ours the peer reached).
      const ls = this.src as SockAddr;
      const specific = !isAny(ls.address);
      const local = unmapV4(specific ? ls.address : (ts.localAddress ?? ''));
      const dev = findDeviceByAddress(local);
      if (!dev) {
        cep.close(false);
        return;
      }
      const child = new CmId(this.sync ? null : this.channel, this.context, this.ps);
      child.verbs = dev.open();
      child.portNum = 1;
      child.src = { address: local, port: specific ? ls.port : (ts.localPort ?? 0), family: local.includes(':') ? 'IPv6' : 'IPv4' };
      const remote = unmapV4(ts.remoteAddress ?? '');
      child.dst = { address: remote, port: ts.remotePort ?? 0, family: remote.includes(':') ? 'IPv6' : 'IPv4' };
      child.cep = cep;
      child.setState(CmState.CONNECT, 'connect request');
      // The requester's IRD/ORD seen from our side: its ORD is what we must answer (our
      // responder resources), its IRD bounds our initiator depth (cma.c iw handler).
      const conn: EventConnParam = {
        privateData: f.privateData,
        responderResources: f.enhanced ? (f.ord ?? 0) : 1,
        initiatorDepth: f.enhanced ? (f.ird ?? 0) : 1,
        flowControl: 0,
        retryCount: 0,
        rnrRetryCount: 0,
        srq: 0,
        qpNum: 0,
      };
      child.reqParam = conn;
      cep.onEvent = (e2) => {
        if (e2.type === 'failed' && !child._destroyed && child._state === CmState.CONNECT && !child.connected) {
          // The requester went away before accept/reject.
          child.cep = null;
        }
      };
      child.post(CmEventType.CONNECT_REQUEST, 0, conn, this, this.channel);
    };
  }

  /**
   * rdma_get_request(): synchronous listeners only (EINVAL otherwise): wait for the next
   * CONNECT_REQUEST and return its new (synchronous) id.
   */
  async getRequest(): Promise<CmId> {
    const op = 'rdma_get_request';
    this.checkAlive(op);
    if (!this.sync || this._state !== CmState.LISTEN) throw err('EINVAL', op);
    if (this.event) {
      const e = this.event;
      this.event = null;
      e.ack();
    }
    const ev = await this.channel.getEvent();
    // As librdmacm: an event that is not a usable request stays in listen->event (acknowledged
    // by the next call or by rdma_destroy_id).
    if (ev.event === CmEventType.REJECTED) {
      this.event = ev;
      throw err('ECONNREFUSED', op);
    }
    if (ev.status !== 0) {
      this.event = ev;
      throw RdmaError.fromErrno(Math.abs(ev.status), { op });
    }
    if (ev.event !== CmEventType.CONNECT_REQUEST) {
      this.event = ev;
      throw err('EINVAL', op, rdmaEventStr(ev.event));
    }
    const child = ev.id;
    if (this._epQpInitAttr) {
      // rdma_create_ep saved the QP attributes: the new id gets its QP now, in the listener's PD.
      try {
        child.createQp(this.pd, { ...this._epQpInitAttr, cap: { ...this._epQpInitAttr.cap } });
      } catch (e) {
        this.event = ev;
        throw e;
      }
    }
    child.event = ev;
    return child;
  }

  /**
   * rdma_accept(): on the id of a CONNECT_REQUEST. Sends the MPA Reply (IRD/ORD negotiated as
   * siw does), moves the QP to RTS. ESTABLISHED follows (after the initiator's RTR in P2P mode).
   * `param` omitted: the requester's values within device limits.
   */
  async accept(param?: ConnParam): Promise<void> {
    const op = 'rdma_accept';
    this.checkAlive(op);
    const cep = this.cep;
    if (this._state !== CmState.CONNECT || !cep || this.connected) throw err('EINVAL', op, 'no pending connect request');
    const qp = this.qpFor(param, op);
    const pdata = this.checkPrivateData(param?.privateData, op);
    const req = this.reqParam as EventConnParam;
    const { ird, ord } = this.rdLimits(param, op, { ird: req.responderResources, ord: req.initiatorDepth });
    if (cep.state !== 'RECVD_MPAREQ') {
      this.cep = null;
      throw err('ECONNRESET', op, 'the requester closed the connection');
    }
    const r = cep.accept(ird, ord, pdata);
    this.cep = null;
    const established = (): void => this.post(CmEventType.ESTABLISHED, 0, { responderResources: r.ird, initiatorDepth: r.ord });
    this.pendingEstablished = r.p2p ? established : null;
    this.goLive(qp, cep.llp, r, false, r.p2p ? () => this.flushEstablished() : undefined);
    if (!r.p2p) established();
    if (this.sync) await this.complete(op);
  }

  /**
   * rdma_establish(): IB/RoCE only (it sends the RTU after CONNECT_RESPONSE). iWARP connections
   * are established by rdma_connect itself, so the kernel refuses it there: EINVAL.
   */
  establish(): void {
    this.checkAlive('rdma_establish');
    throw err('EINVAL', 'rdma_establish', 'not used on iWARP');
  }

  /**
   * rdma_init_qp_attr(): the attributes to move an application-created QP to `state`. On iWARP
   * the CM drives RTR/RTS itself, so only INIT carries attributes (access flags); the mask is 0
   * for the other states, as the iWARP kernel path returns.
   */
  initQpAttr(state: QpState): { attr: { qpState: QpState; qpAccessFlags?: number; portNum?: number }; mask: number } {
    const op = 'rdma_init_qp_attr';
    this.checkAlive(op);
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    if (state === QpState.INIT) {
      // IB_QP_STATE | IB_QP_ACCESS_FLAGS | IB_QP_PORT (+ PKEY_INDEX is IB only).
      return { attr: { qpState: state, qpAccessFlags: 0x7, portNum: this.portNum || 1 }, mask: 1 | 8 | 32 };
    }
    if (state === QpState.RTR || state === QpState.RTS) return { attr: { qpState: state }, mask: 0 };
    throw err('EINVAL', op, `state ${state}`);
  }

  /** rdma_reject(): refuse a connect request; the requester gets REJECTED with `privateData`. */
  reject(privateData?: Uint8Array): void {
    const op = 'rdma_reject';
    this.checkAlive(op);
    const pd = this.checkPrivateData(privateData, op);
    const cep = this.cep;
    if (this._state !== CmState.CONNECT || !cep) throw err('EINVAL', op, 'no pending connect request');
    this.cep = null;
    cep.reject(pd);
    this.setState(CmState.DISCONNECT, 'rejected');
  }

  /**
   * rdma_disconnect(): graceful close (queued sends go out, then TCP FIN); the QP goes to ERR and
   * its outstanding WRs flush. DISCONNECTED is reported on both sides. A second call, or one after
   * the peer disconnected, does nothing.
   */
  async disconnect(): Promise<void> {
    const op = 'rdma_disconnect';
    this.checkAlive(op);
    if (this._state !== CmState.CONNECT && this._state !== CmState.DISCONNECT) throw err('EINVAL', op, `state ${this._state}`);
    if (this.connected && this.connQp) {
      this.connQp.disconnect();
      if (this.sync) await this.complete(op);
      return;
    }
    if (this.cep) {
      this.cep.close(true);
      this.cep = null;
    }
    if (this.sync && this.event?.event !== CmEventType.DISCONNECTED) {
      // Already disconnected by the peer: the DISCONNECTED event may be queued.
      if (this.channel.pending > 0) await this.complete(op);
    }
  }

  /**
   * rdma_destroy_id(): releases the id. Resolves once every event already reported for the id is
   * acknowledged (librdmacm blocks the same way). Destroy the QP first (rdma_destroy_qp).
   */
  async destroy(): Promise<void> {
    if (this._destroyed) throw err('EINVAL', 'rdma_destroy_id', 'already destroyed');
    if (this.event) {
      const e = this.event;
      this.event = null;
      e.ack();
    }
    const wasListening = this._state === CmState.LISTEN;
    this.setState(CmState.DESTROYING, 'destroy');
    this._destroyed = true;
    if (this.reservedKey && boundPorts.get(this.reservedKey) === this) boundPorts.delete(this.reservedKey);
    if (this.server) {
      this.server.close();
      this.server = null;
    }
    if (this.cep) {
      // A connect request never accepted: iw_cm rejects it on destroy (the peer gets REJECTED);
      // an active connect in progress is aborted.
      if (this.cep.state === CepState.RECVD_MPAREQ) this.cep.reject(new Uint8Array(0));
      else this.cep.close(false);
      this.cep = null;
    }
    if (this.connected && this.connQp) {
      this.connected = false;
      this.connQp.abort();
    }
    this.connQp = null;
    // The kernel drops the events not yet retrieved (ucma_cleanup_ctx_events); a listener's
    // queued connect requests go with it, their new ids destroyed (the requesters are rejected).
    this.channel._dropEventsOf(this);
    if (wasListening) {
      for (const e of this.channel._takeWhere((x) => x.listenId === this && x.event === CmEventType.CONNECT_REQUEST)) {
        e.ack();
        void e.id.destroy().catch(() => {});
      }
    }
    // rdma_destroy_id blocks until every event reported for the id is acknowledged.
    await this.waitAcks(() => this.unacked <= 0);
    this.channel._ids.delete(this);
    if (this.sync) this.channel.destroy();
  }

  /**
   * rdma_migrate_id(): move the id and its queued events to `channel`; `null` makes it
   * synchronous. EINVAL if it is already synchronous and `channel` is null.
   */
  async migrate(channel: EventChannel | null): Promise<void> {
    const op = 'rdma_migrate_id';
    this.checkAlive(op);
    if (channel === null && this.sync) throw err('EINVAL', op, 'already synchronous');
    if (channel?.isDestroyed) throw err('EINVAL', op, 'channel destroyed');
    if (this.sync && this.event) {
      const e = this.event;
      this.event = null;
      e.ack();
    }
    const target = channel ?? new EventChannel(true);
    const moved = this.channel._takeEventsOf(this);
    this.channel._ids.delete(this);
    const old = this.channel;
    this.channel = target;
    target._ids.add(this);
    this.sync = channel === null;
    for (const e of moved) target._post(e);
    if (old._sync && old._ids.size === 0) old.destroy();
    // librdmacm blocks until the events already reported on the old channel are acknowledged.
    await this.waitAcks(() => this.reportedUnacked <= 0);
  }

  /**
   * rdma_set_option(). ID level: TOS (recorded; applied to the TCP socket's traffic class is not
   * possible from Node), REUSEADDR and AFONLY (before bind, else EINVAL), ACK_TIMEOUT (recorded;
   * TCP retransmission governs iWARP). Unknown options: ENOSYS.
   */
  setOption(level: number, name: number, value: number): void {
    const op = 'rdma_set_option';
    this.checkAlive(op);
    if (!Number.isInteger(value)) throw err('EINVAL', op, 'value');
    if (level === RdmaOption.LEVEL_ID) {
      switch (name) {
        case RdmaOption.ID_TOS:
          if (value < 0 || value > 255) throw err('EINVAL', op, 'tos');
          this.options.tos = value;
          return;
        case RdmaOption.ID_REUSEADDR:
          if (this._state !== CmState.IDLE) throw err('EINVAL', op, 'REUSEADDR after bind');
          this.options.reuseAddr = value !== 0;
          return;
        case RdmaOption.ID_AFONLY:
          if (this._state !== CmState.IDLE) throw err('EINVAL', op, 'AFONLY after bind');
          this.options.afOnly = value !== 0;
          return;
        case RdmaOption.ID_ACK_TIMEOUT:
          // A u8, stored as given (rdma_set_ack_timeout); only RC ids take it.
          if (value < 0 || value > 255) throw err('EINVAL', op, 'ack timeout');
          if (this.qpType !== QpType.RC) throw err('EINVAL', op, 'ack timeout on a non-RC id');
          this.options.ackTimeout = value;
          return;
        default:
          throw err('ENOSYS', op, `option ${name}`);
      }
    }
    if (level === RdmaOption.LEVEL_IB) throw err('EOPNOTSUPP', op, 'IB options on iWARP');
    throw err('ENOSYS', op, `level ${level}`);
  }

  /** Recorded type of service (-1 when unset). */
  get tos(): number {
    return this.options.tos;
  }
  /** Recorded ACK timeout exponent (-1 when unset). */
  get ackTimeout(): number {
    return this.options.ackTimeout;
  }
}

/**
 * rdma_create_id(channel, context, ps). `channel === null` makes a synchronous id.
 * Port spaces: TCP (RC) is what iWARP supports; UDP/IPOIB ids can be created but cannot make
 * QPs on iWARP (EOPNOTSUPP, as siw).
 */
export function createId(channel: EventChannel | null, context: unknown = null, ps: PortSpace = PortSpace.TCP): CmId {
  if (channel?.isDestroyed) throw err('EINVAL', 'rdma_create_id', 'channel destroyed');
  return new CmId(channel, context, ps);
}
