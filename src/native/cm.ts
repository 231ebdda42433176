/**
 * The native CM transport: librdmacm's `rdma_cm_id` wrapped whole. Every id of a native device
 * is an rdma_cm_id on one process-wide librdmacm event channel whose fd libuv watches; each event
 * is read and acknowledged in C (rdma_get_cm_event / rdma_ack_cm_event), then handed here and
 * reported to the owning `CmId` through the seam's upcall, so the application sees the same
 * `CmId` / `EventChannel` API, states and events as on the soft devices, with librdmacm's
 * errno and event mapping (it is librdmacm that produces them).
 *
 * librdmacm does what it does for a C program: the kernel picks the device that owns an address,
 * rdma_create_qp moves the QP to INIT, rdma_connect / rdma_accept drive RTR and RTS (IB/RoCE) or
 * let the kernel do it (iWARP), rdma_disconnect moves the QP to ERR or SQD.
 *
 * Keeping the process alive: the channel's libuv handle is referenced while some id waits for an
 * outcome (address or route resolution, a connect), listens, or is connected — what a soft
 * device's TCP socket does — and unreferenced otherwise, so a process that is done exits.
 */
import { RdmaError, err } from '../errors.js';
import { getDeviceList, type Device } from '../verbs/device.js';
import type { Context } from '../verbs/context.js';
import type { Pd } from '../verbs/pd.js';
import type { Qp } from '../verbs/qp.js';
import type { QpAttr } from '../verbs/qp-attr.js';
import type { QpInitAttr } from '../verbs/provider.js';
import { QP_STATE_NUM, QpType, TransportType, type QpState } from '../verbs/types.js';
import {
  CmEventType,
  PortSpace,
  registerCmTransport,
  type AcceptRequest,
  type CmEndpoint,
  type CmHost,
  type CmListener,
  type CmTransport,
  type ConnParam,
  type ConnectRequest,
  type IncomingRequest,
  type ListenRequest,
  type McJoin,
  type SaPathRec,
  type SockAddr,
  type UdParam,
} from '../cm/transport.js';
import { QA, decodeQpAttr, type NativeAhAttr } from './abi.js';
import { check, dispatch, loadBinding, type Handle, type NativeBinding, type NativeCmEvent } from './binding.js';
import { NATIVE_PROVIDER } from './provider.js';
import { cmQpRequests, markAttached } from './cm-qp.js';
import { NativeQp } from './qp.js';
import { newKey } from './registry.js';

/** rdma_set_option constants (rdma_cma.h). */
const OPT = { LEVEL_ID: 0, TOS: 0, REUSEADDR: 1, AFONLY: 2, ACK_TIMEOUT: 3 } as const;
/** RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER (rdma_cma.h). */
const MC_JOIN_SENDONLY_FULLMEMBER = 1;

/** Targets of events, by the rdma_cm_id's key (its `context`). */
const targets = new Map<number, { onEvent(ev: NativeCmEvent): void }>();

dispatch.cmEvent = (ev) => {
  targets.get(ev.key)?.onEvent(ev);
};

let binding: NativeBinding | null = null;
function b(op: string): NativeBinding {
  if (binding === null) {
    const x = loadBinding();
    if (x === null) throw err('ENODEV', op, 'native addon not loaded');
    const r = x.cmInit();
    if (r < 0) throw RdmaError.fromErrno(-r, { op, detail: 'rdma_create_event_channel' });
    binding = x;
  }
  return binding;
}

/** The loop-liveness reference of one id: counted once while the id is active. */
class Liveness {
  private held = false;
  set(on: boolean): void {
    if (on === this.held || binding === null) return;
    this.held = on;
    binding.cmRef(on ? 1 : -1);
  }
}

function scope(a: SockAddr): number {
  return (a as { scopeid?: number }).scopeid ?? 0;
}

function sockAddr(address: string, port: number): SockAddr {
  return { address, port, family: address.includes(':') ? 'IPv6' : 'IPv4' };
}

/** The (opened) native device `name`, by the name librdmacm reports for an id. */
function contextOf(name: string | null): Context | null {
  if (name === null) return null;
  const dev: Device | undefined = getDeviceList().find((d) => d.name === name && d.provider === NATIVE_PROVIDER);
  return dev ? dev.open() : null;
}

function udOf(ev: NativeCmEvent): UdParam | undefined {
  const u = ev.ud;
  if (u === undefined) return undefined;
  const a = u.ahAttr;
  const ah: NativeAhAttr = { dlid: a.dlid, sl: a.sl, srcPathBits: a.srcPathBits, staticRate: a.staticRate, isGlobal: a.isGlobal, portNum: a.portNum };
  if (a.isGlobal) ah.grh = { dgid: new Uint8Array(a.dgid), flowLabel: a.flowLabel, sgidIndex: a.sgidIndex, hopLimit: a.hopLimit, trafficClass: a.trafficClass };
  return { privateData: new Uint8Array(u.privateData), ahAttr: ah as UdParam['ahAttr'], qpNum: u.qpNum, qkey: u.qkey };
}

/** Connection parameters as librdmacm takes them; undefined fields get its defaults. */
function connArgs(pdata: Uint8Array, rr: number, idepth: number, p: ConnParam): [Uint8Array | null, number, number, number, number, number, number, number] {
  return [pdata.length > 0 ? pdata : null, rr, idepth, p.flowControl ?? 0, p.retryCount ?? 7, p.rnrRetryCount ?? 7, p.srq ?? 0, p.qpNum ?? 0];
}

const qaBuf = new Float64Array(QA.WORDS);
const qaGid = new Uint8Array(16);

/** One rdma_cm_id (the transport half of a CmId). */
class NativeEndpoint implements CmEndpoint {
  readonly key = newKey();
  private destroyed = false;
  private connected = false;
  private pending = 0;
  private listening = false;
  private readonly live = new Liveness();
  private routeWait: ((status: number) => void) | null = null;
  /** Bound (rdma_bind_addr) or resolved: rdma_resolve_addr then takes no source. */
  private bound = false;
  /** The QP rdma_create_qp made for this id. */
  private qp: NativeQp | null = null;
  private readonly mcContexts = new Map<number, unknown>();
  private readonly mcKeys = new Map<string, number>();
  /** The keys of send-only joins: librdmacm attaches no QP for them (ucma_process_join). */
  private readonly mcSendOnly = new Set<number>();
  /**
   * The keys of joins whose MULTICAST_JOIN / MULTICAST_ERROR has not come yet: each holds the
   * event loop (as a pending resolve does), or a process waiting for its join — where the C
   * tool blocks in rdma_get_cm_event — would end with nothing else to do.
   */
  private readonly mcWaiting = new Set<number>();

  /** The rdma_cm_id; null for a UC id until it is bound (see {@link create}). */
  private hd: Handle | null;

  constructor(
    private host: CmHost,
    h: Handle | null,
  ) {
    this.hd = h;
    targets.set(this.key, this);
    if (h !== null) check(b('rdma_create_id').cmSetKey(h, this.key), 'rdma_create_id');
  }

  /** The rdma_cm_id (EINVAL for a UC id not yet bound or resolved). */
  get h(): Handle {
    if (this.hd === null) throw err('EINVAL', 'rdma_cm', 'UC id neither bound nor resolved');
    return this.hd;
  }

  /**
   * A new rdma_cm_id of the host's port space. rdma_create_id makes RC ids on RDMA_PS_IB, so a UC
   * id is made when it is bound or resolved, by rdma_create_ep (librdmacm's rdma_create_id2 with
   * the QP type), bound to its address, and moved to the process's event channel.
   */
  static create(host: CmHost): NativeEndpoint {
    const op = 'rdma_create_id';
    if (host.qpType === QpType.UC) {
      b(op);
      return new NativeEndpoint(host, null);
    }
    const h = check(b(op).cmCreateId(-1, host.portSpace), op);
    return new NativeEndpoint(host, h);
  }

  /** A UC id's rdma_cm_id, made bound to `addr` (rdma_create_ep, rdma_migrate_id). */
  private createBound(addr: SockAddr, op: string): void {
    this.hd = check(b(op).cmCreateIdBound(this.key, this.host.portSpace, this.host.qpType, addr.address, addr.port ?? 0, scope(addr)), op);
    this.bound = true;
  }

  private update(): void {
    const established = this.holds && (this.connected || this.listening);
    this.live.set(!this.destroyed && (this.pending > 0 || this.mcWaiting.size > 0 || established));
  }

  /** Whether being connected or listening holds the event loop; calls under way always do. */
  private holds = true;

  holdLoop(on: boolean): void {
    this.holds = on;
    this.update();
  }

  private info(): [string | null, number, string, number, string, number] {
    return check(b('rdma_get_local_addr').cmInfo(this.h), 'rdma_get_local_addr');
  }

  private applyBindOptions(): void {
    const o = this.host.options;
    const x = b('rdma_set_option');
    if (o.reuseAddr) check(x.cmSetOption(this.h, OPT.LEVEL_ID, OPT.REUSEADDR, 1), 'rdma_set_option');
    if (o.afOnly) check(x.cmSetOption(this.h, OPT.LEVEL_ID, OPT.AFONLY, 1), 'rdma_set_option');
  }

  private applyRouteOptions(): void {
    const o = this.host.options;
    const x = b('rdma_set_option');
    if (o.tos >= 0) check(x.cmSetOption(this.h, OPT.LEVEL_ID, OPT.TOS, o.tos), 'rdma_set_option');
    if (o.ackTimeout >= 0) check(x.cmSetOption(this.h, OPT.LEVEL_ID, OPT.ACK_TIMEOUT, o.ackTimeout), 'rdma_set_option');
  }

  onEvent(ev: NativeCmEvent): void {
    if (this.destroyed) return;
    const t = ev.event as CmEventType;
    switch (t) {
      case CmEventType.ADDR_RESOLVED:
      case CmEventType.ADDR_ERROR: {
        this.pending = Math.max(0, this.pending - 1);
        this.update();
        const i = t === CmEventType.ADDR_RESOLVED ? this.info() : null;
        this.host.upcall(i ? { event: t, status: ev.status, localAddr: sockAddr(i[2], i[3]) } : { event: t, status: ev.status });
        return;
      }
      case CmEventType.ROUTE_RESOLVED:
      case CmEventType.ROUTE_ERROR: {
        const w = this.routeWait;
        this.routeWait = null;
        this.pending = Math.max(0, this.pending - 1);
        this.update();
        w?.(t === CmEventType.ROUTE_RESOLVED ? 0 : ev.status < 0 ? ev.status : -(ev.status || 5));
        return;
      }
      case CmEventType.CONNECT_REQUEST:
        if (ev.newId !== undefined) this.request(ev);
        return;
      case CmEventType.ESTABLISHED: {
        this.pending = 0;
        this.connected = true;
        this.update();
        const i = this.info();
        const ud = udOf(ev);
        this.host.upcall(ud ? { event: t, status: ev.status, ud, localAddr: sockAddr(i[2], i[3]) } : { event: t, status: ev.status, conn: ev.conn ?? {}, localAddr: sockAddr(i[2], i[3]) });
        return;
      }
      case CmEventType.DISCONNECTED:
        this.connected = false;
        this.update();
        this.host.upcall({ event: t, status: ev.status, conn: ev.conn ?? {} });
        return;
      case CmEventType.REJECTED:
      case CmEventType.UNREACHABLE:
      case CmEventType.CONNECT_ERROR:
        this.pending = 0;
        this.connected = false;
        this.update();
        this.host.upcall({ event: t, status: ev.status, conn: ev.conn ?? {} });
        return;
      case CmEventType.MULTICAST_JOIN:
      case CmEventType.MULTICAST_ERROR: {
        if (this.mcWaiting.delete(ev.mcKey ?? -1)) this.update();
        const mcContext = this.mcContexts.get(ev.mcKey ?? -1);
        const ud = udOf(ev);
        // librdmacm attached the id's QP already (ucma_process_join): the CM's own attach of
        // the same group is then a no-op.
        const grh = ud?.ahAttr.grh;
        const attached = !this.mcSendOnly.has(ev.mcKey ?? -1);
        if (t === CmEventType.MULTICAST_JOIN && attached && this.qp !== null && grh) markAttached(this.qp, grh.dgid, ud?.ahAttr.dlid ?? 0);
        this.host.upcall(ud ? { event: t, status: ev.status, ud, mcContext } : { event: t, status: ev.status, mcContext });
        return;
      }
      default:
        this.host.upcall({ event: t, status: ev.status });
    }
  }

  /** A CONNECT_REQUEST on this (listening) id. */
  private request(ev: NativeCmEvent): void {
    const h = ev.newId as Handle;
    const x = b('rdma_get_cm_event');
    // The new id needs a key at once: events for it may follow before it is adopted.
    const early: NativeCmEvent[] = [];
    const key = newKey();
    let adopted: NativeEndpoint | null = null;
    x.cmSetKey(h, key);
    targets.set(key, { onEvent: (e) => void (adopted ? adopted.onEvent(e) : early.push(e)) });
    const i = check(x.cmInfo(h), 'rdma_get_cm_event');
    const ctx = contextOf(i[0]);
    const refuse = (): void => {
      targets.delete(key);
      x.cmReject(h, null);
      x.cmDestroyId(h);
    };
    if (ctx === null) {
      refuse();
      return;
    }
    const ud = udOf(ev);
    let done = false;
    const req: IncomingRequest = {
      context: ctx,
      portNum: i[1] || 1,
      local: sockAddr(i[2], i[3]),
      remote: sockAddr(i[4], i[5]),
      adopt: (host: CmHost): CmEndpoint => {
        if (done) throw err('EINVAL', 'rdma_get_request', 'request already taken');
        done = true;
        targets.delete(key);
        const ep = new NativeEndpoint(host, h);
        adopted = ep;
        for (const e of early.splice(0)) ep.onEvent(e);
        return ep;
      },
      refuse: () => {
        if (done) return;
        done = true;
        refuse();
      },
    };
    if (ud !== undefined) req.ud = ud;
    else req.conn = ev.conn ?? {};
    this.host.upcall({ event: CmEventType.CONNECT_REQUEST, status: ev.status, request: req });
  }

  // -- the seam --------------------------------------------------------------------------------

  bind(addr: SockAddr): void {
    const op = 'rdma_bind_addr';
    if (this.hd === null) return this.createBound(addr, op);
    this.applyBindOptions();
    check(b(op).cmBind(this.h, addr.address, addr.port, scope(addr)), op);
    this.bound = true;
  }

  async resolveAddr(src: SockAddr | null, dst: SockAddr, timeoutMs: number): Promise<void> {
    const op = 'rdma_resolve_addr';
    const x = b(op);
    // A UC id is made bound to the source (a wildcard of the destination's family without one).
    if (this.hd === null) this.createBound(src ?? { address: dst.address.includes(':') ? '::' : '0.0.0.0', port: 0 }, op);
    const from = this.bound ? null : src;
    if (from !== null) this.applyBindOptions();
    this.pending++;
    this.update();
    const r = x.cmResolveAddr(this.h, from?.address ?? null, from?.port ?? 0, from ? scope(from) : 0, dst.address, dst.port, scope(dst), timeoutMs);
    if (r < 0) {
      this.pending--;
      this.update();
      throw RdmaError.fromErrno(-r, { op, detail: dst.address });
    }
    this.bound = true;
  }

  resolveRoute(timeoutMs: number): Promise<number> {
    const op = 'rdma_resolve_route';
    const x = b(op);
    this.applyRouteOptions();
    return new Promise<number>((resolve, reject) => {
      this.routeWait = resolve;
      this.pending++;
      this.update();
      const r = x.cmResolveRoute(this.h, timeoutMs);
      if (r < 0) {
        this.routeWait = null;
        this.pending--;
        this.update();
        reject(RdmaError.fromErrno(-r, { op }));
      }
    });
  }

  async listen(req: ListenRequest): Promise<CmListener> {
    const op = 'rdma_listen';
    check(b(op).cmListen(this.h, req.backlog), op);
    this.listening = true;
    this.update();
    const port = this.info()[3];
    return {
      port,
      close: () => {
        this.listening = false;
        this.update();
      },
      holdLoop: (on) => this.holdLoop(on),
    };
  }

  createQp(pd: Pd, init: QpInitAttr): Qp {
    cmQpRequests.set(init, this.h);
    try {
      const qp = pd.createQp(init) as Qp;
      if (qp instanceof NativeQp) this.qp = qp;
      return qp;
    } finally {
      cmQpRequests.delete(init);
    }
  }

  async connect(req: ConnectRequest): Promise<void> {
    const op = 'rdma_connect';
    const x = b(op);
    this.applyRouteOptions();
    this.pending++;
    this.update();
    const r = x.cmConnect(this.h, ...connArgs(req.privateData, req.responderResources, req.initiatorDepth, req.param));
    if (r < 0) {
      this.pending--;
      this.update();
      throw RdmaError.fromErrno(-r, { op });
    }
  }

  async accept(req: AcceptRequest): Promise<void> {
    const op = 'rdma_accept';
    const r = b(op).cmAccept(this.h, ...connArgs(req.privateData, req.responderResources, req.initiatorDepth, req.param));
    if (r < 0) throw RdmaError.fromErrno(-r, { op });
  }

  reject(privateData: Uint8Array): void {
    const op = 'rdma_reject';
    check(b(op).cmReject(this.h, privateData.length > 0 ? privateData : null), op);
  }

  establish(): void {
    const op = 'rdma_establish';
    check(b(op).cmEstablish(this.h), op);
  }

  disconnect(): boolean {
    const op = 'rdma_disconnect';
    const was = this.connected;
    const r = b(op).cmDisconnect(this.h);
    if (r < 0 && was) throw RdmaError.fromErrno(-r, { op });
    return was;
  }

  initQpAttr(state: QpState): { attr: QpAttr; mask: number } {
    const op = 'rdma_init_qp_attr';
    const n = QP_STATE_NUM[state];
    if (n === undefined) throw err('EINVAL', op, `state ${String(state)}`);
    const mask = check(b(op).cmInitQpAttr(this.h, n, qaBuf, qaGid), op);
    const attr = decodeQpAttr(qaBuf, qaGid);
    return { attr, mask };
  }

  /**
   * `id->route`: librdmacm's struct is not exposed by the addon (it would need a `cmRoute(id)`
   * returning `route.num_paths`, `route.path_rec[]` and `route.addr.addr.ibaddr`): EOPNOTSUPP.
   */
  routePaths(_resolved: boolean): SaPathRec[] {
    throw err('EOPNOTSUPP', 'rdma_route', 'the native addon does not expose id->route');
  }

  joinMulticast(join: McJoin): void {
    const op = 'rdma_join_multicast';
    const key = newKey();
    this.mcContexts.set(key, join.context);
    const r = b(op).cmJoinMulticast(this.h, join.addr.address, join.addr.port ?? 0, scope(join.addr), key, join.joinFlags);
    if (r < 0) {
      this.mcContexts.delete(key);
      throw RdmaError.fromErrno(-r, { op });
    }
    this.mcKeys.set(join.addr.address, key);
    if (join.joinFlags === MC_JOIN_SENDONLY_FULLMEMBER) this.mcSendOnly.add(key);
    this.mcWaiting.add(key);
    this.update();
  }

  leaveMulticast(addr: SockAddr): void {
    const op = 'rdma_leave_multicast';
    check(b(op).cmLeaveMulticast(this.h, addr.address, addr.port ?? 0, scope(addr)), op);
    const key = this.mcKeys.get(addr.address);
    if (key !== undefined) {
      this.mcKeys.delete(addr.address);
      this.mcContexts.delete(key);
      this.mcSendOnly.delete(key);
      if (this.mcWaiting.delete(key)) this.update();
    }
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.listening = false;
    this.update();
    targets.delete(this.key);
    const w = this.routeWait;
    this.routeWait = null;
    w?.(-125);
    if (this.hd !== null) b('rdma_destroy_id').cmDestroyId(this.hd);
  }
}

/** The CM of the native devices: librdmacm. */
export const nativeCmTransport: CmTransport = {
  name: 'librdmacm',
  provider: NATIVE_PROVIDER,
  portSpaces: [PortSpace.TCP, PortSpace.UDP, PortSpace.IPOIB, PortSpace.IB],
  // librdmacm and the kernel check the lengths (EINVAL): the verbs-level limit is the u8 length.
  privateDataLimits: { connect: 255, accept: 255, reject: 255, udConnect: 255, udAccept: 255 },
  createEndpoint: (host) => NativeEndpoint.create(host),
  // The kernel's iWARP devices and the soft ones both listen on the TCP port: with a kernel
  // iWARP device present, a wildcard listener listens through the kernel.
  supersedes: (other) => {
    if (other.provider === NATIVE_PROVIDER) return false;
    const devs = getDeviceList();
    const iwarp = (p: string): boolean => devs.some((d) => d.provider === p && d.transportType === TransportType.IWARP);
    return iwarp(NATIVE_PROVIDER) && iwarp(other.provider);
  },
  listen: async (host, req) => {
    const ep = NativeEndpoint.create(host);
    try {
      ep.bind(req.addr);
      const l = await ep.listen(req);
      return { port: l.port, close: () => ep.destroy() };
    } catch (e) {
      ep.destroy();
      throw e;
    }
  },
};

/** Register the librdmacm CM transport (the native provider must be registered). */
export function registerNativeCm(): void {
  registerCmTransport(nativeCmTransport);
}
