/**
 * `struct rdma_cm_id` and its calls (rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route,
 * rdma_create_qp, rdma_connect, rdma_listen, rdma_accept, rdma_reject, rdma_disconnect,
 * rdma_establish, rdma_init_qp_attr, rdma_notify, rdma_join_multicast, rdma_leave_multicast,
 * rdma_destroy_id, rdma_migrate_id, rdma_set_option, rdma_get_request): the kernel's cma.c role.
 * What differs per device family — TCP + MPA on iWARP, CM MADs and SIDR on RoCE, a whole native
 * librdmacm — is the device's CM transport (transport.ts): each call does the generic part here
 * (checks, id state, addresses, device choice, port reservations, QP creation) and delegates the
 * rest to the id's endpoint, which reports back through upcalls ({@link CmId.upcall}) that
 * become events and state changes here.
 *
 * Two modes, as librdmacm: an id created on an {@link EventChannel} reports outcomes as events
 * (the promise a call returns only means "started"); an id created with `channel = null` is
 * synchronous: each call awaits its own event and rejects with an errno-coded error, like
 * `ucma_complete()`. Every call that waits takes an `AbortSignal` last (docs/cm.md).
 *
 * The id is composed of parts with one job each: its events and sync mode (id-events.ts), its
 * QP (id-qp.ts), its multicast groups (id-multicast.ts), its options (id-options.ts), what a
 * transport sees of it (id-host.ts), how its calls end early — aborted or destroyed —
 * (id-cancel.ts); the argument checks (addr-check.ts, conn-param.ts) and its route
 * (route-query.ts) are functions of their own. This file keeps the id's state, addresses and
 * device, resolution, connect, listen, accept and destroy.
 *
 * State machine: the kernel's cm_id states (cma_priv.h) in a {@link StateCell}: a call's guard
 * and its change are one step (`exch`, the kernel's `cma_comp_exch`), refused with EINVAL; a
 * call that fails after it goes back, as the kernel's error paths do.
 */
import { RdmaError, err } from '../errors.js';
import { Errno } from '../errno.js';
import { StateCell } from '../util/state.js';
import type { Context } from '../verbs/context.js';
import type { Device } from '../verbs/device.js';
import type { Pd } from '../verbs/pd.js';
import type { Cq } from '../verbs/cq.js';
import type { CompChannel } from '../verbs/comp-channel.js';
import type { Qp } from '../verbs/qp.js';
import { SrqInitAttrMask, SrqType, type Srq, type SrqInitAttr } from '../verbs/srq.js';
import type { QpAttr } from '../verbs/qp-attr.js';
import { QpType, type QpState } from '../verbs/types.js';
import type { EventChannel } from './event-channel.js';
import { CmEventType, rdmaEventStr, type CmEvent, type ConnParam, type EventConnParam } from './events.js';
import { checkChannel, checkDevicePin, checkOptionalSockAddr, checkSockAddr } from './addr-check.js';
import { ipFamily, isAfIb, isAny, isLoopback, resolveNeighbor, routeSource, type SockAddr } from './addr.js';
import { PortSpace, isPortSpace, qpTypeOfPortSpace } from './port-space.js';
import { checkPortPrivilege } from './port-privilege.js';
import { chooseDevice, defaultDevicePin, deviceOfTransport, devicesOwning, transportOf } from './device-choice.js';
import { loadDeferredTransports, transportsDeferred, type CmEndpoint, type CmHost, type CmListener, type CmTransport, type CmUpcall, type ConnectRequest, type IncomingRequest } from './transport.js';
import { IdEvents } from './id-events.js';
import { Attempt, DestroyCuts, cancellable, checkSignal, untilAborted } from './id-cancel.js';
import '../util/dispose.js';
import { IdQp, type CmQpInitAttr, type CmQpInitAttrEx, type CmSrqInitAttrEx } from './id-qp.js';
import { IdMulticast, McJoinFlag, checkJoinCompMask, checkJoinFlags } from './id-multicast.js';
import { IdHost } from './id-host.js';
import { IdOptions } from './id-options.js';
import { registerId, unregisterId } from './id-registry.js';
import { attachId, type DeviceBoundId } from './id-device.js';
import type { RdmaRoute } from './id-route.js';
import { routeOf } from './route-query.js';
import { checkPrivateData, deviceMaxRd, rdLimits } from './conn-param.js';
import { listenTransports } from './listen-transports.js';

export { PortSpace } from './port-space.js';
export { RdmaOption } from './id-options.js';

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
  /** rdma_destroy_id was called; no call or upcall leaves it. */
  DESTROYING = 'DESTROYING',
}

/**
 * The listen backlog the kernel uses when rdma_listen gets 0, a negative value or more than this
 * (ucma.c `max_backlog`, net/rdma_ucm/max_backlog, default 1024).
 */
export const MAX_BACKLOG = 1024;

/** Options of {@link createId} beyond librdmacm's arguments. */
export interface CreateIdOptions {
  /**
   * Use only this device (by name, as `rdma link` shows it: `siw_lo`, `rxe_eth0`): binding,
   * resolving and listening pick it or fail. Default: the `RDMACM_DEVICE` environment variable;
   * when that is unset too, the device owning the address whose CM transport serves the id's
   * port space.
   */
  device?: string;
  /**
   * The QP type of an RDMA_PS_IB id (`rdma_create_id2`'s `qp_type`): RC (the default) or UC. The
   * other port spaces connect the type the kernel gives them whatever is asked (its
   * `ucma_get_qp_type`): RC for RDMA_PS_TCP, UD for RDMA_PS_UDP and RDMA_PS_IPOIB. UD on
   * RDMA_PS_IB is not supported here (EOPNOTSUPP).
   */
  qpType?: QpType;
}

/** In-process port reservations, to report EADDRINUSE at bind time like the kernel. */
const boundPorts = new Map<string, CmId>();
let idSeq = 0;

/**
 * An RDMA CM identifier. Create with {@link createId}.
 */
export class CmId implements DeviceBoundId, AsyncDisposable {
  /** The user's context pointer. */
  context: unknown;
  readonly ps: PortSpace;
  readonly qpType: QpType;
  /** The device context once bound/resolved (`id->verbs`). */
  verbs: Context | null = null;
  /** Port number (always 1 on the software devices) once bound. */
  portNum = 0;
  /** The device this id is pinned to (createId's `device`, or `RDMACM_DEVICE`), if any. */
  readonly devicePin: string | undefined;
  /** The id's state; changed only by `move` and `exch`. */
  private readonly cell: StateCell<CmState> = new StateCell<CmState>('cm', () => this.tag(), CmState.IDLE);
  private src: SockAddr | null = null;
  private dst: SockAddr | null = null;
  private readonly seq = ++idSeq;
  /** The id's events: its channel, sync mode, acknowledgements. */
  private readonly events: IdEvents;
  /** The id's QP and the CQs rdma_create_qp made. */
  private readonly qps = new IdQp();
  /** The multicast groups the id joined. */
  private readonly groups = new IdMulticast();
  /** The CM transport of the id's device, once known. */
  private transport: CmTransport | null = null;
  /** The transport half of this id (the kernel's iw_cm_id / ib_cm_id). */
  private ep: CmEndpoint | null = null;
  /** What the transport sees of this id. */
  private readonly host: CmHost;
  /** Listening: one listener per transport serving the port space (a wildcard: all of them). */
  private listeners: CmListener[] = [];
  /** CONNECT_REQUEST ids: what the requester sent (the defaults of rdma_accept). */
  private reqParam: Partial<EventConnParam> | null = null;
  /** rdma_connect was called on this id (it is the active side). */
  private active = false;
  /** ESTABLISHED was reported. */
  private established = false;
  private reservedKey: string | null = null;
  /** Bound by the application (rdma_bind_addr, or a source given to rdma_resolve_addr). */
  private boundExplicitly = false;
  /** The explicitly bound source address is the one route lookup picks for `dst` (resolveAddr). */
  private boundIsRouteSource = false;
  private readonly options = new IdOptions();
  /** The address or route resolution under way: stopped when the call is aborted (its work then reports nothing) or the id destroyed. */
  private attempt: Attempt | null = null;
  /** Cut by rdma_destroy_id: ends the transport waits of the calls under way. */
  private readonly life = new DestroyCuts();
  /** Detach from the device the id is attached to (id-device.ts), while attached. */
  private detachDevice: (() => void) | null = null;
  /**
   * @internal rdma_create_ep on a passive id: the QP attributes (and PD) rdma_get_request uses to
   * create the QP of each new connection.
   */
  _epQpInitAttr: CmQpInitAttr | null = null;

  /** @internal Use {@link createId}. */
  constructor(channel: EventChannel | null, context: unknown, ps: PortSpace, opts: CreateIdOptions | null = {}) {
    if (!isPortSpace(ps)) throw err('EINVAL', 'rdma_create_id', `port space ${ps}`);
    if (typeof opts !== 'object') throw err('EINVAL', 'rdma_create_id', 'options must be an object');
    opts ??= {};
    const env = opts.device === undefined ? defaultDevicePin() : undefined;
    // The pin is checked where it is given (ENODEV naming it), unless transports not loaded yet may bring the device.
    if (opts.device !== undefined || env !== undefined) checkDevicePin(opts.device ?? env, 'rdma_create_id', env === undefined ? 'device' : 'RDMACM_DEVICE', !transportsDeferred());
    this.events = new IdEvents(this, this.tag(), channel);
    this.context = context;
    const asked = opts.qpType ?? QpType.RC;
    if (asked !== QpType.RC && asked !== QpType.UC && asked !== QpType.UD) throw err('EINVAL', 'rdma_create_id', `qp_type ${String(asked)}`);
    if (ps === PortSpace.IB && asked === QpType.UD) throw err('EOPNOTSUPP', 'rdma_create_id', 'UD ids on RDMA_PS_IB');
    this.ps = ps;
    this.qpType = qpTypeOfPortSpace(ps, asked);
    this.devicePin = opts.device ?? env;
    this.host = this.makeHost();
    this.idn = registerId(this);
  }

  /** @internal The id's number in this process (`cm-idn` of the resource listing, src/stat/). */
  readonly idn: number;

  /** Event channel (a private one in synchronous mode). */
  get channel(): EventChannel {
    return this.events.channel;
  }
  /** Synchronous mode: the last event, acknowledged by the next call. */
  get event(): CmEvent | null {
    return this.events.last;
  }
  /** The PD of the id's QP (rdma_create_ep: of its connections' QPs). */
  get pd(): Pd | null {
    return this.qps.pd;
  }
  /** Sets the PD later QPs of the id are made on (rdma_create_ep keeps it for its connections). */
  set pd(pd: Pd | null) {
    this.qps.pd = pd;
  }
  /** The QP rdma_create_qp made. */
  get qp(): Qp | null {
    return this.qps.qp;
  }
  /** The send CQ rdma_create_qp made (`id->send_cq`). */
  get sendCq(): Cq | null {
    return this.qps.sendCq;
  }
  /** The receive CQ rdma_create_qp made (`id->recv_cq`). */
  get recvCq(): Cq | null {
    return this.qps.recvCq;
  }
  /** The completion channel of the send CQ, when rdma_create_qp made the CQ. */
  get sendCqChannel(): CompChannel | null {
    return this.qps.sendCqChannel;
  }
  /** The completion channel of the receive CQ, when rdma_create_qp made the CQ. */
  get recvCqChannel(): CompChannel | null {
    return this.qps.recvCqChannel;
  }

  /** Current state. */
  get state(): CmState {
    return this.cell.state;
  }
  /** Whether rdma_destroy_id was called (the id is DESTROYING). */
  get destroyed(): boolean {
    return this.cell.is(CmState.DESTROYING);
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
  /**
   * `id->route` (`struct rdma_route`), as librdmacm fills it after rdma_resolve_route or for the
   * id of a connect request (see id-route.ts): the addresses, `ibaddr` (source and destination
   * GIDs, P_Key) and the path records — on RoCE one record (GIDs, flow label, hop limit 64,
   * traffic class from RDMA_OPTION_ID_TOS, the port's MTU, the port's rate, P_Key 0xFFFF, packet
   * lifetime), on iWARP none. A fresh copy on each read.
   * @throws RdmaError EOPNOTSUPP where the transport cannot report it (the native backend's addon
   *   does not expose librdmacm's `id->route`).
   */
  get route(): RdmaRoute {
    const resolved = this.cell.in([CmState.ROUTE_RESOLVED, CmState.CONNECT, CmState.DISCONNECT]);
    return routeOf(this.src, this.dst, this.verbs, this.portNum, this.ep?.routePaths?.(resolved) ?? []);
  }

  /** Whether the id is synchronous (created without a channel). */
  get isSync(): boolean {
    return this.events.sync;
  }

  private tag(): string {
    return `ID[${this.seq}]`;
  }

  /**
   * Begin `op`: from one of `from` to `to` in one step (the kernel's `cma_comp_exch`), or EINVAL
   * naming the state the id is in. Returns the state it left, for the way back.
   */
  private enter(from: CmState | readonly CmState[], to: CmState, op: string, why: string): CmState {
    const was = this.cell.state;
    if (!this.cell.exch(from, to, why)) throw err('EINVAL', op, `state ${was}`);
    return was;
  }

  /** EINVAL naming the state unless the id is in one of `states` (a call that changes none). */
  private expect(states: readonly CmState[], op: string): void {
    if (!this.cell.in(states)) throw err('EINVAL', op, `state ${this.cell.state}`);
  }

  private checkAlive(op: string): void {
    if (this.destroyed) throw err('EINVAL', op, 'id destroyed');
  }

  // -- the transport seam -------------------------------------------------------------------------

  /**
   * What a transport sees of this id (read live: addresses and device change as it binds).
   * `transport` is the transport it speaks for: the id's own (null), or (a wildcard listener
   * listening through several) the one a listener belongs to, so that `deviceFor` places its
   * requests.
   */
  private makeHost(transport: CmTransport | null = null): CmHost {
    return new IdHost(this, transport);
  }

  /** @internal For {@link IdHost}. */
  _hostTag(): string {
    return this.tag();
  }
  /** @internal For {@link IdHost}. */
  _hostOptions(): CmHost['options'] {
    return this.options;
  }
  /** @internal For {@link IdHost}: the device of the id's transport (or `t`) owning `ip`. */
  _hostDeviceFor(ip: string, t: CmTransport | null): Device | undefined {
    const tr = t ?? this.transport;
    return tr ? deviceOfTransport(ip, tr, this.devicePin) : undefined;
  }
  /** @internal For {@link IdHost}. */
  _hostUpcall(ev: CmUpcall): void {
    this.upcall(ev);
  }

  private holds = true;

  /**
   * Whether what the id's transport keeps for it (a listener's socket or published service, a
   * connection's CM state) holds the Node event loop: true from creation. Not a librdmacm call:
   * the hook behind `RServer.unref()` / `RSocket.unref()` (as `net.Server.unref()`); the id keeps
   * working when it does not. The QP has its own ({@link Qp._setHoldsLoop}).
   * @internal
   */
  _setHoldsLoop(on: boolean): void {
    if (this.holds === on) return;
    this.holds = on;
    this.applyHold();
  }

  /** Tell the endpoint and listeners whether they hold the event loop (those that can). */
  private applyHold(): void {
    this.ep?.holdLoop?.(this.holds);
    for (const l of this.listeners) l.holdLoop?.(this.holds);
  }

  /** Bind the id to `dev`: its context, port and CM transport (and the transport's endpoint). */
  private useDevice(dev: Device): void {
    this.attachTo(dev.open());
    this.portNum = 1;
    const t = transportOf(dev) ?? null;
    if (t !== this.transport) {
      this.ep?.destroy();
      this.ep = null;
      this.transport = t;
    }
    if (t && !this.ep) {
      this.ep = t.createEndpoint(this.host);
      this.applyHold();
    }
  }

  /** Take `ctx` as the id's device context and attach to the device (id-device.ts). */
  private attachTo(ctx: Context): void {
    if (this.verbs === ctx && this.detachDevice !== null) return;
    this.detachDevice?.();
    this.verbs = ctx;
    this.detachDevice = attachId(ctx, this);
  }

  /**
   * @internal The id's device is gone (cma_send_device_removal_put): DEVICE_REMOVAL once, the id
   * in DEVICE_REMOVAL (a call that needs another state fails with EINVAL; rdma_destroy_id works),
   * its listeners closed and its connection dropped, as ucma destroys the kernel id then.
   */
  _deviceRemoved(): void {
    if (this.cell.in([CmState.DESTROYING, CmState.DEVICE_REMOVAL])) return;
    this.cell.move(CmState.DEVICE_REMOVAL, 'device removed');
    this.detachDevice?.();
    this.detachDevice = null;
    for (const l of this.listeners) l.close();
    this.listeners = [];
    this.ep?.destroy();
    this.ep = null;
    this.events.post(CmEventType.DEVICE_REMOVAL, 0);
  }

  /**
   * @internal The hardware address of the id's interface changed (cma_netdev_change): the
   * address it resolved with is stale. ADDR_CHANGE; the id's state is unchanged.
   */
  _linkAddrChanged(): void {
    if (this.cell.in([CmState.DESTROYING, CmState.DEVICE_REMOVAL])) return;
    this.events.post(CmEventType.ADDR_CHANGE, 0);
  }

  /** The id's endpoint, or EINVAL/EOPNOTSUPP when it has no device or the device no CM. */
  private endpoint(op: string): CmEndpoint {
    if (this.ep) return this.ep;
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    throw err('EOPNOTSUPP', op, `no CM transport for ${this.verbs.device.name}`);
  }

  /**
   * A transport's report (see `CmUpcall`): turn it into the event and the state change cma.c
   * makes for it. Ignored once the id is destroyed (a connect request is then refused).
   */
  private upcall(ev: CmUpcall): void {
    if (ev.event === CmEventType.CONNECT_REQUEST) {
      this.incomingRequest(ev.request);
      return;
    }
    if (this.destroyed) return;
    const status = ev.status ?? 0;
    switch (ev.event) {
      case CmEventType.ESTABLISHED:
        if (ev.localAddr) this.src = ev.localAddr;
        this.established = true;
        break;
      case CmEventType.REJECTED:
      case CmEventType.UNREACHABLE:
      case CmEventType.CONNECT_ERROR:
        if (this.active && !this.established) {
          // The connect failed: the id can try again (ROUTE_RESOLVED); librdmacm moves the QP to ERR.
          this.cell.exch([CmState.CONNECT, CmState.DISCONNECT], CmState.ROUTE_RESOLVED, rdmaEventStr(ev.event));
          this.qps.connectFailed();
        } else this.cell.exch(CmState.CONNECT, CmState.DISCONNECT, rdmaEventStr(ev.event));
        break;
      case CmEventType.DISCONNECTED:
        this.cell.exch(CmState.CONNECT, CmState.DISCONNECT, 'disconnected');
        break;
      case CmEventType.MULTICAST_JOIN: {
        if (this.groups.orphaned(ev)) return;
        const attach = this.groups.joined(ev, this.qp);
        if (attach !== 0) {
          this.events.post(CmEventType.MULTICAST_ERROR, attach, undefined, undefined, ev.mcContext);
          return;
        }
        break;
      }
      case CmEventType.MULTICAST_ERROR:
        // The outcome of a join the id left since (an aborted one) is dropped.
        if (this.groups.orphaned(ev)) return;
        break;
      // ADDR_ERROR also reports a UD connect's failure (cma.c `cma_sidr_rep_handler`: a Q_Key
      // that cannot be set), outside any resolution: every report is passed on.
      case CmEventType.ADDR_RESOLVED:
        if (ev.localAddr) this.src = ev.localAddr;
        this.cell.exch(CmState.ADDR_QUERY, CmState.ADDR_RESOLVED, 'address resolved');
        break;
      case CmEventType.ADDR_ERROR:
        this.cell.exch(CmState.ADDR_QUERY, CmState.ADDR_BOUND, 'address error');
        break;
      case CmEventType.ROUTE_RESOLVED:
        this.cell.exch(CmState.ROUTE_QUERY, CmState.ROUTE_RESOLVED, 'route resolved');
        break;
      case CmEventType.ROUTE_ERROR:
        this.cell.exch(CmState.ROUTE_QUERY, CmState.ADDR_RESOLVED, 'route error');
        break;
      default:
        break;
    }
    this.events.post(ev.event, status, ev.conn, ev.ud, ev.mcContext);
  }

  /** A listener's transport reports a connect request: a new id takes it (CONNECT_REQUEST). */
  private incomingRequest(req: IncomingRequest | undefined): void {
    if (!req) return;
    if (!this.cell.is(CmState.LISTEN)) {
      req.refuse();
      return;
    }
    const opts: CreateIdOptions = { qpType: this.qpType };
    if (this.devicePin !== undefined) opts.device = this.devicePin;
    const child = new CmId(this.isSync ? null : this.channel, this.context, this.ps, opts);
    child.attachTo(req.context);
    child.portNum = req.portNum;
    child.transport = transportOf(req.context.device) ?? null;
    child.src = req.local;
    child.dst = req.remote;
    child.reqParam = req.conn ?? {};
    child.cell.exch(CmState.IDLE, CmState.CONNECT, 'connect request');
    child.ep = req.adopt(child.host);
    child.events.post(CmEventType.CONNECT_REQUEST, 0, req.conn, req.ud, undefined, this, this.channel);
  }

  // -- address ------------------------------------------------------------------------------------

  /**
   * rdma_bind_addr(). Binding to a specific local IP also binds the id to its device (the one
   * whose CM serves the id's port space, or the pinned one); port 0 picks one when connecting
   * or listening. EADDRNOTAVAIL for an address no (pinned) device owns, EADDRINUSE for a port
   * another id holds, EACCES for a privileged port without CAP_NET_BIND_SERVICE (any port space,
   * any device: port-privilege.ts), ENODEV for an AF_IB address but the zero GID, EINVAL when
   * not IDLE.
   */
  bindAddr(given: SockAddr): void {
    const op = 'rdma_bind_addr';
    this.checkAlive(op);
    given = checkSockAddr(given, op, 'address');
    this.enter(CmState.IDLE, CmState.ADDR_BOUND, op, 'bind');
    try {
      this.bind(given, op);
    } catch (e) {
      this.cell.exch(CmState.ADDR_BOUND, CmState.IDLE, 'bind failed');
      throw e;
    }
  }

  /** rdma_bind_addr's work: the address checked and reserved, the device taken. */
  private bind(given: SockAddr, op: string): void {
    // AF_IB: no device here is addressed by GID (the kernel finds none owning it: ENODEV); the
    // zero GID binds no device, as the IP wildcard does.
    if (isAfIb(given) && !isAny(given.address)) throw err('ENODEV', op, `no device has GID ${given.address}`);
    const addr = isAfIb(given) ? { address: '0.0.0.0', port: given.port } : given;
    const fam = ipFamily(addr.address, op);
    checkPortPrivilege(addr.port, op);
    let dev: Device | undefined;
    if (!isAny(addr.address)) {
      dev = chooseDevice(addr.address, this.ps, this.devicePin);
      if (!dev) throw err('EADDRNOTAVAIL', op, this.devicePin === undefined ? addr.address : `${addr.address} on ${this.devicePin}`);
    }
    if (addr.port !== 0) {
      const key = `${this.ps}:${addr.port}`;
      const holder = boundPorts.get(key);
      if (holder && !holder.destroyed && !(this.options.reuseAddr && holder.options.reuseAddr)) throw err('EADDRINUSE', op, `port ${addr.port}`);
      boundPorts.set(key, this);
      this.reservedKey = key;
    }
    this.src = { address: addr.address, port: addr.port, family: fam === 6 ? 'IPv6' : 'IPv4' };
    this.boundExplicitly = true;
    if (dev) this.useDevice(dev);
    this.ep?.bind?.(this.src);
  }

  /**
   * rdma_resolve_addr(): find the local device and source address for `dst` (binding first if
   * `src` is given or the id is unbound). No route to `dst`: the call itself fails
   * (ENETUNREACH), as the kernel's synchronous route lookup does. Then the next hop's link
   * address is waited for (IPv4: the ARP table) up to `timeoutMs`.
   * Event: ADDR_RESOLVED, or ADDR_ERROR with a negative
   * errno status (-ENODEV: no (pinned) device owns the source; -ETIMEDOUT: no ARP answer).
   * An AF_IB source or destination fails the call with ENODEV.
   */
  async resolveAddr(src: SockAddr | null, dst: SockAddr, timeoutMs = 2000, signal?: AbortSignal): Promise<void> {
    const op = 'rdma_resolve_addr';
    this.checkAlive(op);
    src = checkOptionalSockAddr(src, op, 'source');
    dst = checkSockAddr(dst, op, 'destination');
    const d = dst;
    // Aborted: back to ADDR_BOUND, as a failed resolution leaves the id (cma.c `rdma_resolve_addr`'s error path).
    return cancellable(this, op, signal, () => this.startResolveAddr(src, d, timeoutMs, op, signal), () => this.stopAttempt(CmState.ADDR_QUERY, CmState.ADDR_BOUND, 'resolve_addr aborted'));
  }

  /** rdma_resolve_addr's work, once its arguments are checked. */
  private async startResolveAddr(src: SockAddr | null, dst: SockAddr, timeoutMs: number, op: string, signal: AbortSignal | undefined): Promise<void> {
    // The kernel resolves an AF_IB address to the device owning its GID (cma_resolve_ib_dev);
    // no device here is addressed by GID.
    if (isAfIb(dst) || isAfIb(src)) throw err('ENODEV', op, 'no device resolves AF_IB addresses');
    const dfam = ipFamily(dst.address, op);
    if (this.cell.is(CmState.IDLE)) {
      if (src) this.bindAddr(src);
      else this.src = { address: dfam === 6 ? '::' : '0.0.0.0', port: 0, family: dfam === 6 ? 'IPv6' : 'IPv4' };
    }
    const was = this.enter([CmState.IDLE, CmState.ADDR_BOUND], CmState.ADDR_QUERY, op, 'resolve_addr');
    try {
      const sfam = ipFamily((this.src as SockAddr).address, op);
      if (sfam !== dfam && !isAny((this.src as SockAddr).address)) throw err('EINVAL', op, 'source and destination families differ');
      if (!Number.isInteger(timeoutMs) || timeoutMs < 0) throw err('EINVAL', op, `timeout ${timeoutMs}`);
    } catch (e) {
      this.cell.exch(CmState.ADDR_QUERY, was, 'resolve_addr refused');
      throw e;
    }
    if (this.ep?.resolveAddr) {
      // The transport resolves by itself (native): it reports ADDR_RESOLVED / ADDR_ERROR.
      this.dst = { address: dst.address, port: dst.port, family: dfam === 6 ? 'IPv6' : 'IPv4' };
      try {
        await this.life.wait(this.ep.resolveAddr(src, dst, timeoutMs), op, signal);
      } catch (e) {
        this.cell.exch(CmState.ADDR_QUERY, CmState.ADDR_BOUND, 'resolve failed');
        throw e;
      }
      if (this.isSync) await this.events.complete(op, signal);
      return;
    }
    this.dst = { address: dst.address, port: dst.port, family: dfam === 6 ? 'IPv6' : 'IPv4' };
    // The route lookup is synchronous in the kernel (rdma_resolve_ip): no route to the
    // destination fails the call itself (ENETUNREACH/EHOSTUNREACH), no event follows.
    const s = this.src as SockAddr;
    let from: string;
    this.boundIsRouteSource = false;
    const attempt = (this.attempt = new Attempt());
    try {
      if (isAny(s.address)) from = await untilAborted(routeSource(dst.address, dfam), op, signal);
      else {
        from = s.address;
        // A bind() of the address the kernel would pick anyway only costs: it makes the kernel
        // search the port space, slow with thousands of sockets. rdma_connect skips it then.
        if (this.boundExplicitly && !s.port) this.boundIsRouteSource = from === dst.address || (await untilAborted(routeSource(dst.address, dfam).catch(() => ''), op, signal)) === from;
      }
    } catch (e) {
      if (signal?.aborted) throw e;
      this.cell.exch(CmState.ADDR_QUERY, CmState.ADDR_BOUND, 'no route');
      const c = (e as NodeJS.ErrnoException).code;
      throw err(c === 'ENETUNREACH' || c === 'EHOSTUNREACH' || c === 'EADDRNOTAVAIL' ? c : 'ENETUNREACH', op, `${dst.address}: ${(e as Error).message}`);
    }
    const work = async (): Promise<void> => {
      if (attempt.stopped) return;
      let status = 0;
      const dev = chooseDevice(from, this.ps, this.devicePin);
      if (!dev) status = -Errno.ENODEV;
      else {
        this.useDevice(dev);
        if (this.ep?.resolveAddr && this.cell.is(CmState.ADDR_QUERY)) {
          // The device's transport resolves by itself (native): now that the route picked its
          // device, hand it the call; it reports ADDR_RESOLVED / ADDR_ERROR.
          try {
            await this.ep.resolveAddr(src, dst, timeoutMs);
            return;
          } catch (e) {
            status = -(e instanceof RdmaError ? e.errno : Errno.EIO);
          }
        }
        if (status === 0) this.src = { address: from, port: s.port, family: dfam === 6 ? 'IPv6' : 'IPv4' };
        // The next hop's link address (ARP): -ETIMEDOUT when nobody answers within the timeout.
        if (status === 0 && !isLoopback(dst.address) && !isAny(dst.address) && devicesOwning(dst.address).length === 0) status = await resolveNeighbor(dst.address, timeoutMs, { signal: attempt.signal });
      }
      if (attempt.stopped) return;
      if (status === 0) {
        if (this.cell.exch(CmState.ADDR_QUERY, CmState.ADDR_RESOLVED, 'address resolved')) this.events.post(CmEventType.ADDR_RESOLVED);
      } else if (this.cell.exch(CmState.ADDR_QUERY, CmState.ADDR_BOUND, 'address error')) this.events.post(CmEventType.ADDR_ERROR, status);
    };
    setImmediate(() => void work());
    if (this.isSync) await this.events.complete(op, signal);
  }

  /** An aborted resolution: its work reports nothing, and the id goes back from `from` to `to`. */
  private stopAttempt(from: CmState, to: CmState, why: string): void {
    this.attempt?.stop();
    this.attempt = null;
    this.cell.exch(from, to, why);
  }

  /**
   * rdma_resolve_route(). On iWARP the route is the IP route already found: ROUTE_RESOLVED
   * follows at once; a transport with path resolution (IB) resolves it first (ROUTE_ERROR with
   * its status on failure). EINVAL unless ADDR_RESOLVED.
   */
  async resolveRoute(timeoutMs = 2000, signal?: AbortSignal): Promise<void> {
    const op = 'rdma_resolve_route';
    this.checkAlive(op);
    checkSignal(signal, op);
    this.enter(CmState.ADDR_RESOLVED, CmState.ROUTE_QUERY, op, 'resolve_route');
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0) {
      this.cell.exch(CmState.ROUTE_QUERY, CmState.ADDR_RESOLVED, 'resolve_route refused');
      throw err('EINVAL', op, `timeout ${timeoutMs}`);
    }
    const ep = this.ep;
    const attempt = (this.attempt = new Attempt());
    setImmediate(() => {
      const done = (status: number): void => {
        if (attempt.stopped) return;
        if (status === 0) {
          if (this.cell.exch(CmState.ROUTE_QUERY, CmState.ROUTE_RESOLVED, 'route resolved')) this.events.post(CmEventType.ROUTE_RESOLVED);
        } else if (this.cell.exch(CmState.ROUTE_QUERY, CmState.ADDR_RESOLVED, 'route error')) this.events.post(CmEventType.ROUTE_ERROR, status);
      };
      if (ep?.resolveRoute) ep.resolveRoute(timeoutMs).then(done, (e: unknown) => done(-(e instanceof RdmaError ? e.errno : Errno.EIO)));
      else done(0);
    });
    // Aborted: back to ADDR_RESOLVED, as a route error leaves it.
    if (this.isSync) await cancellable(this, op, signal, () => this.events.complete(op, signal), () => this.stopAttempt(CmState.ROUTE_QUERY, CmState.ADDR_RESOLVED, 'resolve_route aborted'));
  }

  // -- QP -----------------------------------------------------------------------------------------

  /**
   * rdma_create_qp(): a QP on the id's device, in the default PD when `pd` is null; CQs (with
   * completion channels) are created when not given, sized max_send_wr/max_recv_wr. The QP is
   * moved to INIT with the attributes rdma_init_qp_attr gives (UD QPs on to RTS, as librdmacm's
   * `ucma_init_ud_qp`). EINVAL if the id has no device or already a QP; whatever the device's
   * provider throws (EOPNOTSUPP for UD on iWARP, as siw).
   */
  createQp(pd: Pd | null, attr: CmQpInitAttr = {}): Qp {
    const op = 'rdma_create_qp';
    this.checkAlive(op);
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    return this.qps.create(this.verbs, this.ep, pd, attr, this.qpType, op);
  }

  /** rdma_destroy_qp(): destroy the QP and the CQs/channels rdma_create_qp made. */
  destroyQp(): void {
    this.qps.destroy();
  }

  /**
   * rdma_create_qp_ex(): as {@link createQp}, with `comp_mask` saying which of `pd`,
   * `createFlags` and `sendOpsFlags` are valid; with SEND_OPS_FLAGS the QP has the `ibv_wr_*`
   * builder (`qpToQpEx(id.qp)`). EINVAL (no device, a QP already, a PD of another device, create
   * flags not a 32-bit mask); EOPNOTSUPP for bits the device's `create_qp_ex` refuses — every
   * one but PD on siw — and for create flags the device lacks (see id-qp.ts).
   */
  createQpEx(attr: CmQpInitAttrEx): Qp {
    const op = 'rdma_create_qp_ex';
    this.checkAlive(op);
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    return this.qps.createEx(this.verbs, this.ep, attr, this.qpType, op);
  }

  /** The SRQ rdma_create_srq made (`id->srq`); QPs rdma_create_qp makes afterwards use it. */
  get srq(): Srq | null {
    return this.qps.srq;
  }

  /**
   * rdma_create_srq(): a shared receive queue on the id's device, in `pd` (null: the device's
   * default PD, the one rdma_create_qp uses); `attr.attr.maxWr` / `maxSge` are written back as
   * the device sized them. QPs rdma_create_qp makes on this id afterwards take their receives
   * from it. EINVAL (no device, an SRQ already); whatever ibv_create_srq throws (EOPNOTSUPP on a
   * device without SRQs).
   */
  createSrq(pd: Pd | null, attr: SrqInitAttr): Srq {
    const op = 'rdma_create_srq';
    const ex: CmSrqInitAttrEx = { ...attr, compMask: SrqInitAttrMask.TYPE | SrqInitAttrMask.PD, srqType: SrqType.BASIC, pd };
    return this.createSrqEx(ex, op);
  }

  /** rdma_create_srq_ex(): `comp_mask` must have TYPE (EINVAL); see id-qp.ts. */
  createSrqEx(attr: CmSrqInitAttrEx, op = 'rdma_create_srq_ex'): Srq {
    this.checkAlive(op);
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    return this.qps.createSrqEx(this.verbs, attr, op);
  }

  /** rdma_destroy_srq(): destroy the id's SRQ (EBUSY, kept, while a QP uses it). */
  destroySrq(): void {
    this.qps.destroySrq();
  }

  // -- active side --------------------------------------------------------------------------------

  /**
   * rdma_connect(): start the connection through the device's CM transport (iWARP: TCP
   * connection + MPA Request carrying `param.privateData`, the QP moves to RTS when the Reply
   * arrives; IB: REQ, or SIDR REQ on UD ids). Events: ESTABLISHED; REJECTED (iWARP status
   * -ECONNREFUSED/-ECONNRESET: nobody listening, or the peer rejected — private data attached);
   * UNREACHABLE (-ETIMEDOUT); CONNECT_ERROR otherwise. EINVAL unless ROUTE_RESOLVED, or with no
   * QP where the transport needs one; on iWARP a refused TCP connect fails the call itself.
   */
  async connect(param?: ConnParam, signal?: AbortSignal): Promise<void> {
    const op = 'rdma_connect';
    this.checkAlive(op);
    checkSignal(signal, op);
    this.enter(CmState.ROUTE_RESOLVED, CmState.CONNECT, op, 'connect');
    let ep: CmEndpoint;
    let req: ConnectRequest;
    try {
      ep = this.endpoint(op);
      req = this.connectRequest(param, op);
    } catch (e) {
      this.cell.exch(CmState.CONNECT, CmState.ROUTE_RESOLVED, 'connect refused');
      throw e;
    }
    this.active = true;
    this.established = false;
    this.qps.handOver(req.qp);
    // Aborted: the attempt is dropped as rdma_destroy_id drops it (the peer sees the request
    // end), and the id is back in ROUTE_RESOLVED, as after REJECTED.
    await cancellable(this, op, signal, async () => {
      try {
        await this.life.wait(ep.connect(req), op, signal);
      } catch (e) {
        if (signal?.aborted || this.destroyed) throw e;
        // The call itself failed (no event follows): the id is back in ROUTE_RESOLVED.
        if (!this.established) this.cell.exch(CmState.CONNECT, CmState.ROUTE_RESOLVED, 'connect failed');
        this.qps.release();
        throw e;
      }
      if (this.isSync) await this.events.complete(op, signal);
    }, () => this.abandon(CmState.ROUTE_RESOLVED, 'connect aborted'));
  }

  /**
   * Drop the connection under way (an aborted rdma_connect or rdma_accept) as rdma_destroy_id
   * drops it — the peer sees it end: REJ on IB, a reset on iWARP — and give the id a fresh
   * endpoint; the QP handed over goes to ERR, as after REJECTED. The id goes to `to`.
   */
  private abandon(to: CmState, why: string): void {
    this.ep?.destroy();
    this.ep = this.transport ? this.transport.createEndpoint(this.host) : null;
    this.applyHold();
    this.qps.connectFailed();
    this.established = false;
    this.cell.exch([CmState.CONNECT, CmState.DISCONNECT], to, why);
  }

  /**
   * The connection parameters handed to the transport: with the id's own QP, its SRQ flag is
   * the QP's (librdmacm: `id->qp->srq != NULL`), else the application's.
   */
  private srqParam(qp: Qp | null, param: ConnParam | undefined): ConnParam {
    if (qp === null || qp !== this.qp) return param ?? {};
    return { ...param, srq: qp.srq !== null ? 1 : 0 };
  }

  /** What rdma_connect hands the endpoint: the QP, addresses, private data and IRD/ORD, checked. */
  private connectRequest(param: ConnParam | undefined, op: string): ConnectRequest {
    const qp = this.qps.qpFor(param, this.verbs);
    const pdata = checkPrivateData(param?.privateData, this.transport?.privateDataLimits, this.qpType, op, 'connect');
    const max = deviceMaxRd(this.verbs);
    const { ird, ord } = rdLimits(this.verbs, param, op, { ird: max, ord: max });
    const src = this.src as SockAddr;
    const dst = this.dst as SockAddr;
    // Bind the connection's local end only to what the application bound, and not even then when
    // that is the address route lookup picks: the kernel picks the same source for the connect,
    // and an explicit bind() before connect() makes it search the port space (slow with
    // thousands of connections).
    const bind: { address?: string; port?: number } = {};
    if (this.boundExplicitly && !isAny(src.address) && !this.boundIsRouteSource) bind.address = src.address;
    if (src.port) {
      bind.port = src.port;
      bind.address ??= src.address;
    }
    return { qp, ownQp: qp !== null && qp === this.qp, src, dst, bind, privateData: pdata, responderResources: ird, initiatorDepth: ord, param: this.srqParam(qp, param) };
  }

  // -- passive side -------------------------------------------------------------------------------

  /**
   * rdma_listen(): accept connections on the bound address through the CM transport of its
   * device, or, bound to a wildcard, through every transport serving the port space (and the
   * pinned device only). Resolves once listening; EADDRINUSE if the port is taken, EOPNOTSUPP
   * if no transport serves the port space, EINVAL unless bound or idle (or once destroyed while
   * the transports set up: their listeners are closed).
   */
  async listen(backlog = 0, signal?: AbortSignal): Promise<void> {
    const op = 'rdma_listen';
    this.checkAlive(op);
    checkSignal(signal, op);
    if (this.cell.is(CmState.IDLE)) this.bindAddr({ address: '0.0.0.0', port: 0 });
    this.expect([CmState.ADDR_BOUND], op);
    if (!this.verbs && transportsDeferred()) {
      // Not bound to a device: every transport serving the port space listens, so load those
      // the process has deferred.
      await loadDeferredTransports();
      this.checkAlive(op);
      checkSignal(signal, op);
      this.expect([CmState.ADDR_BOUND], op);
    }
    const wanted = listenTransports(this.verbs, this.transport, this.ps, this.devicePin, op);
    // A wildcard listener's transport (for the id's own calls) is the first one's.
    this.transport ??= wanted[0] ?? null;
    const req = { backlog: backlog > 0 && backlog < MAX_BACKLOG ? backlog : MAX_BACKLOG };
    const listeners: CmListener[] = [];
    try {
      for (const t of wanted) {
        // The first listener picks the port when bound to 0; the others take the same one.
        const addr = this.src as SockAddr;
        const l = t === this.transport && this.ep?.listen ? await this.ep.listen({ addr, ...req }) : await t.listen(t === this.transport ? this.host : this.makeHost(t), { addr, ...req });
        listeners.push(l);
        if (this.src) this.src = { address: this.src.address, port: l.port, family: this.src.family ?? 'IPv4' };
        // Aborted while a transport set up: the listeners made so far are closed; the id stays bound.
        checkSignal(signal, op);
      }
    } catch (e) {
      for (const l of listeners) l.close();
      throw e;
    }
    // An id destroyed (or moved on) while its transports set up: nothing listens for it.
    if (!this.cell.exch(CmState.ADDR_BOUND, CmState.LISTEN, 'listen')) {
      for (const l of listeners) l.close();
      this.checkAlive(op);
      throw err('EINVAL', op, `state ${this.cell.state}`);
    }
    this.listeners = listeners;
    this.applyHold();
    if (!this.reservedKey) {
      this.reservedKey = `${this.ps}:${this.src?.port}`;
      boundPorts.set(this.reservedKey, this);
    }
  }

  /**
   * rdma_get_request(): synchronous listeners only (EINVAL otherwise): wait for the next
   * CONNECT_REQUEST and return its new (synchronous) id.
   */
  async getRequest(signal?: AbortSignal): Promise<CmId> {
    const op = 'rdma_get_request';
    this.checkAlive(op);
    if (!this.isSync || !this.cell.is(CmState.LISTEN)) throw err('EINVAL', op);
    const ev = await cancellable(this, op, signal, () => this.events.nextRequest(op, signal), () => {});
    const child = ev.id;
    if (this._epQpInitAttr) {
      // rdma_create_ep saved the QP attributes: the new id gets its QP now, in the listener's PD.
      try {
        child.createQp(this.pd, { ...this._epQpInitAttr, cap: { ...this._epQpInitAttr.cap } });
      } catch (e) {
        this.events.last = ev;
        throw e;
      }
    }
    child.events.last = ev;
    return child;
  }

  /**
   * rdma_accept(): on the id of a CONNECT_REQUEST. The transport answers the request (iWARP: MPA
   * Reply with IRD/ORD negotiated as siw does, the QP to RTS; IB: REP, or SIDR REP on UD ids).
   * ESTABLISHED follows (iWARP P2P: after the initiator's RTR; IB: after the RTU; none on UD).
   * `param` omitted: the requester's values within device limits.
   */
  async accept(param?: ConnParam, signal?: AbortSignal): Promise<void> {
    const op = 'rdma_accept';
    this.checkAlive(op);
    checkSignal(signal, op);
    if (!this.cell.is(CmState.CONNECT) || this.active || !this.ep) throw err('EINVAL', op, 'no pending connect request');
    const qp = this.qps.qpFor(param, this.verbs);
    const pdata = checkPrivateData(param?.privateData, this.transport?.privateDataLimits, this.qpType, op, 'accept');
    const req = this.reqParam ?? {};
    const { ird, ord } = rdLimits(this.verbs, param, op, { ird: req.responderResources ?? 0, ord: req.initiatorDepth ?? 0 });
    this.qps.handOver(qp);
    const ep = this.ep;
    // Aborted while waiting for ESTABLISHED: torn down as a failed rdma_accept (cma.c rejects
    // then): the peer sees the connection end; the id can only be destroyed.
    await cancellable(this, op, signal, async () => {
      await ep.accept({ qp, ownQp: qp !== null && qp === this.qp, privateData: pdata, responderResources: ird, initiatorDepth: ord, param: this.srqParam(qp, param) });
      if (this.isSync && this.qpType !== QpType.UD) await this.events.complete(op, signal);
    }, () => this.abandon(CmState.DISCONNECT, 'accept aborted'));
  }

  /**
   * rdma_establish(): IB/RoCE only (it sends the RTU after CONNECT_RESPONSE). iWARP connections
   * are established by rdma_connect itself, so the kernel refuses it there: EINVAL.
   */
  establish(): void {
    const op = 'rdma_establish';
    this.checkAlive(op);
    const ep = this.endpoint(op);
    if (!ep.establish) throw err('EINVAL', op, 'not used by this transport');
    ep.establish();
  }

  /**
   * rdma_init_qp_attr(): the attributes to move an application-created QP to `state`, from the
   * transport. On iWARP the state with access flags and the port for INIT and RTR (no access
   * before rdma_connect), the port alone for RTS: the CM moves the QP to RTS itself. On IB:
   * P_Key index and Q_Key (UD) or access flags at INIT, path, PSNs and QPNs at RTR/RTS.
   */
  initQpAttr(state: QpState): { attr: QpAttr; mask: number } {
    const op = 'rdma_init_qp_attr';
    this.checkAlive(op);
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    return this.endpoint(op).initQpAttr(state);
  }

  /**
   * rdma_notify(): tell the CM of async event `event` (`AsyncEventType`) seen on the id's QP.
   * Where the CM is the IB CM (RoCE), COMM_EST on an accepted connection whose RTU has not
   * arrived establishes it (ESTABLISHED follows), as the first request on the QP would; EISCONN
   * once established; LID_CHANGE is accepted on an established connection; other events and
   * states EINVAL. On iWARP it does nothing (the kernel's `rdma_notify` acts on IB CAs only).
   * EINVAL for an id with no device or no connection of its transport yet (no `cm_id`);
   * EOPNOTSUPP where the transport cannot pass it on (the native backend's addon).
   */
  notify(event: number): void {
    const op = 'rdma_notify';
    this.checkAlive(op);
    if (!Number.isInteger(event) || event < 0) throw err('EINVAL', op, `event ${String(event)}`);
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    const ep = this.endpoint(op);
    if (!ep.notify) throw err('EOPNOTSUPP', op, `not passed on by ${this.transport?.name ?? 'this transport'}`);
    ep.notify(event);
  }

  /** rdma_reject(): refuse a connect request; the requester gets REJECTED with `privateData`. */
  reject(privateData?: Uint8Array): void {
    const op = 'rdma_reject';
    this.checkAlive(op);
    const pd = checkPrivateData(privateData, this.transport?.privateDataLimits, this.qpType, op, 'reject');
    if (!this.cell.is(CmState.CONNECT) || this.active || !this.ep) throw err('EINVAL', op, 'no pending connect request');
    this.ep.reject(pd);
    // The reject may have failed the request already (CONNECT_ERROR: DISCONNECT).
    this.cell.exch(CmState.CONNECT, CmState.DISCONNECT, 'rejected');
  }

  /**
   * rdma_disconnect(): graceful close (iWARP: queued sends go out, then TCP FIN); the QP goes to
   * ERR and its outstanding WRs flush. DISCONNECTED is reported on both sides. A second call, or
   * one after the peer disconnected, does nothing.
   */
  async disconnect(signal?: AbortSignal): Promise<void> {
    const op = 'rdma_disconnect';
    this.checkAlive(op);
    checkSignal(signal, op);
    this.expect([CmState.CONNECT, CmState.DISCONNECT], op);
    // Aborted while waiting (a DREQ unanswered is resent for as long as the kernel's IB CM
    // does): the disconnect goes on, the id stays in DISCONNECT, its DISCONNECTED is dropped with it.
    const wait = (): Promise<unknown> => cancellable(this, op, signal, () => this.events.complete(op, signal), () => {});
    if (this.ep?.disconnect()) {
      if (this.isSync) await wait();
      return;
    }
    if (this.isSync && this.events.last?.event !== CmEventType.DISCONNECTED) {
      // Already disconnected by the peer: the DISCONNECTED event may be queued.
      if (this.channel.pending > 0) await wait();
    }
  }

  // -- multicast ----------------------------------------------------------------------------------

  /**
   * rdma_join_multicast(): join the group at `addr` as a full member; MULTICAST_JOIN (with the
   * group's AH attributes, QP number 0xFFFFFF and Q_Key in `param.ud`, and `context` as
   * `ev.mcContext`) or MULTICAST_ERROR follows, and the id's QP is attached to the group. EINVAL
   * unless the id is bound to a device (ADDR_BOUND or ADDR_RESOLVED); ENOSYS on a device without
   * multicast (iWARP, as the kernel); EADDRINUSE if already joined.
   */
  async joinMulticast(addr: SockAddr, context?: unknown, signal?: AbortSignal): Promise<void> {
    await this.joinMulticastEx(signal ? { addr, joinFlags: McJoinFlag.FULLMEMBER, context, signal } : { addr, joinFlags: McJoinFlag.FULLMEMBER, context });
  }

  /**
   * rdma_join_multicast_ex(): {@link joinMulticast} with `joinFlags` (`McJoinFlag`). A
   * SENDONLY_FULLMEMBER join sends to the group only: MULTICAST_JOIN gives the group's AH
   * attributes, but the id's QP is not attached (librdmacm's `ucma_process_join`), so it
   * receives nothing sent to the group; on RoCE no IGMP join is sent either
   * (`cma_iboe_join_multicast`). EINVAL for other flags. `compMask` (`McJoinAttr` bits), when
   * given, is checked as librdmacm checks `rdma_cm_join_mc_attr_ex.comp_mask`: EOPNOTSUPP for
   * unknown bits, EINVAL without ADDRESS or JOIN_FLAGS.
   */
  async joinMulticastEx(opts: { addr: SockAddr; joinFlags?: number; context?: unknown; compMask?: number; signal?: AbortSignal }): Promise<void> {
    const op = 'rdma_join_multicast';
    this.checkAlive(op);
    const addr = checkSockAddr(opts?.addr, op, 'group', { portOptional: true });
    if (opts.compMask !== undefined) checkJoinCompMask(opts.compMask, 'rdma_join_multicast_ex');
    this.expect([CmState.ADDR_BOUND, CmState.ADDR_RESOLVED], op);
    if (!this.verbs) throw err('EINVAL', op, 'id not bound to a device');
    const flags = checkJoinFlags(opts.joinFlags, op);
    checkSignal(opts.signal, op);
    this.groups.join(this.endpoint(op), this.verbs.device.name, addr, flags, opts.context, op);
    // Aborted while waiting for MULTICAST_JOIN: the group is left again.
    if (this.isSync) await cancellable(this, op, opts.signal, () => this.events.complete(op, opts.signal), () => this.groups.leave(addr, this.qp, this.ep, op));
  }

  /**
   * rdma_leave_multicast(): detach the id's QP from the group (not after a send-only join, which
   * never attached it) and leave it. EADDRNOTAVAIL if the id did not join `addr` (librdmacm).
   */
  async leaveMulticast(addr: SockAddr, signal?: AbortSignal): Promise<void> {
    const op = 'rdma_leave_multicast';
    this.checkAlive(op);
    checkSignal(signal, op);
    this.groups.leave(checkSockAddr(addr, op, 'group', { portOptional: true }), this.qp, this.ep, op);
  }

  /**
   * rdma_destroy_id(): releases the id. Resolves once every event already reported for the id is
   * acknowledged (librdmacm blocks the same way). Destroy the QP first (rdma_destroy_qp).
   */
  async destroy(): Promise<void> {
    if (this.destroyed) throw err('EINVAL', 'rdma_destroy_id', 'already destroyed');
    this.events.ackLast();
    const wasListening = this.cell.move(CmState.DESTROYING, 'destroy') === CmState.LISTEN;
    unregisterId(this);
    this.attempt?.stop();
    this.life.cutAll();
    this.detachDevice?.();
    this.detachDevice = null;
    if (this.reservedKey && boundPorts.get(this.reservedKey) === this) boundPorts.delete(this.reservedKey);
    for (const l of this.listeners) l.close();
    this.listeners = [];
    this.groups.clear(this.qp);
    // A connect request never accepted is rejected (iw_cm / ib_cm on destroy); a connection is
    // aborted; nothing more is reported.
    this.ep?.destroy();
    this.ep = null;
    this.qps.release();
    // Its events are dropped, and rdma_destroy_id blocks until every one reported is acknowledged.
    await this.events.close(wasListening);
  }

  /**
   * `await using`: librdmacm's teardown in its order — the id's events handed out and not yet
   * acknowledged are acknowledged, its QP (and the CQs rdma_create_qp made) and SRQ destroyed, as
   * rdma_destroy_ep does, then the id. Disposing a destroyed id does nothing.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.destroyed) return;
    this.events.ackHandedOut();
    if (this.qp) this.destroyQp();
    if (this.srq) {
      try {
        this.destroySrq();
      } catch {
        // Still used by QPs of other ids (EBUSY): kept for them, as rdma_destroy_ep goes on.
      }
    }
    this._epQpInitAttr = null;
    await this.destroy();
  }

  /**
   * rdma_migrate_id(): move the id and its queued events to `channel`; `null` makes it
   * synchronous. EINVAL if it is already synchronous and `channel` is null.
   */
  async migrate(channel: EventChannel | null): Promise<void> {
    const op = 'rdma_migrate_id';
    this.checkAlive(op);
    checkChannel(channel, op);
    if (channel === null && this.isSync) throw err('EINVAL', op, 'already synchronous');
    await this.events.migrate(channel);
  }

  /**
   * rdma_set_option(). ID level: TOS (recorded; applied to the TCP socket's traffic class is not
   * possible from Node), REUSEADDR and AFONLY (before bind, else EINVAL), ACK_TIMEOUT (recorded;
   * TCP retransmission governs iWARP). IB level: the transport's (EOPNOTSUPP on iWARP). Unknown
   * options: ENOSYS.
   */
  setOption(level: number, name: number, value: number): void {
    this.checkAlive('rdma_set_option');
    this.options.set(level, name, value, this.qpType, this.cell.is(CmState.IDLE), this.ep);
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
 * rdma_create_id(channel, context, ps), and rdma_create_id2 with `opts.qpType`. `channel ===
 * null` makes a synchronous id. Port spaces: TCP connects RC QPs (iWARP, RoCE), IB RC or UC QPs
 * (`opts.qpType`; UC on RoCE only: an iWARP device makes no UC QP, EOPNOTSUPP as siw), UDP and
 * IPOIB connect UD QPs (RoCE; on iWARP they cannot make QPs: EOPNOTSUPP, as siw). `opts.device`
 * pins the id to a device (default: `RDMACM_DEVICE`).
 */
export function createId(channel: EventChannel | null, context: unknown = null, ps: PortSpace = PortSpace.TCP, opts: CreateIdOptions = {}): CmId {
  checkChannel(channel, 'rdma_create_id');
  return new CmId(channel, context, ps, opts);
}

