/**
 * The CM transport seam: what `CmId` (cm-id.ts, the kernel's cma.c role) delegates to the
 * transport-specific connection manager of a device, after the kernel's split of cma.c over
 * iw_cm (iWARP: TCP + MPA) and ib_cm (InfiniBand/RoCE: CM MADs, SIDR). A transport module
 * registers one {@link CmTransport} per verbs provider, next to its `VerbsProvider`; the CM never
 * imports a concrete transport.
 *
 * Division of work:
 *  - `CmId` keeps the API, the event channel and sync mode, the id state machine, address
 *    resolution (route lookup, neighbour wait), device choice (by port space and pin), port
 *    reservations, argument checks that do not depend on the transport, and QP creation.
 *  - A {@link CmEndpoint} (one per id, made by {@link CmTransport.createEndpoint}) does the
 *    transport's part of each call — listen, connect, accept, reject, disconnect, establish,
 *    init_qp_attr, multicast — and reports what happens through {@link CmHost.upcall}, which
 *    `CmId` turns into CM events and state changes.
 *  - A transport that owns the whole flow (a native librdmacm backend) also implements the
 *    optional hooks (`bind`, `resolveAddr`, `resolveRoute`, `createQp`) and may upcall any event,
 *    ADDR_RESOLVED and ROUTE_RESOLVED included.
 *
 * Only this file of src/cm/ may be imported by transports (as a kernel driver includes
 * `<rdma/iw_cm.h>`); it re-exports the CM types they need.
 */
import { err } from '../errors.js';
import { getProvider, listProviders } from '../verbs/provider.js';
import type { Context } from '../verbs/context.js';
import type { Device } from '../verbs/device.js';
import type { Pd } from '../verbs/pd.js';
import type { Qp } from '../verbs/qp.js';
import type { QpAttr } from '../verbs/qp-attr.js';
import type { QpInitAttr } from '../verbs/provider.js';
import type { QpState, QpType } from '../verbs/types.js';
import type { SockAddr } from './addr.js';
import { CmEventType, type ConnParam, type EventConnParam, type UdParam } from './events.js';
import { PortSpace } from './port-space.js';
import type { SaPathRec } from './id-route.js';

export { CmEventType, PortSpace };
export type { ConnParam, EventConnParam, SockAddr, UdParam };
export { RDMA_UDP_QKEY, serviceId } from './port-space.js';
export { IB_RATE_PORT_CURRENT, PATH_FLAGS_PRIMARY, ROCE_PKEY, SA_SELECTOR_EXACTLY, type SaPathRec } from './id-route.js';

/**
 * The largest private data (bytes) the application may pass per message kind; more is EINVAL.
 * iWARP: 252 everywhere (MPA's 256 less the IRD/ORD word). IB CM: REQ 56 (92 less the CMA
 * header), REP 196, REJ 148, DREQ 220, SIDR REQ 180 (216 less the CMA header), SIDR REP 136.
 */
export interface PrivateDataLimits {
  /** rdma_connect on a connected id (REQ / MPA Request). */
  connect: number;
  /** rdma_accept on a connected id (REP / MPA Reply). */
  accept: number;
  /** rdma_reject (REJ / MPA Reply with R set; SIDR REP with status REJECT on UD ids). */
  reject: number;
  /** rdma_connect on a UD id (SIDR REQ); 0: the transport has no UD service resolution. */
  udConnect: number;
  /** rdma_accept on a UD id (SIDR REP). */
  udAccept: number;
}

/** The id options a transport may honour (rdma_set_option). */
export interface CmIdOptions {
  /** RDMA_OPTION_ID_TOS, -1 when unset. */
  readonly tos: number;
  /** RDMA_OPTION_ID_REUSEADDR. */
  readonly reuseAddr: boolean;
  /** RDMA_OPTION_ID_AFONLY. */
  readonly afOnly: boolean;
  /** RDMA_OPTION_ID_ACK_TIMEOUT, -1 when unset. */
  readonly ackTimeout: number;
}

/**
 * What a transport sees of the `rdma_cm_id` it serves (the kernel's `rdma_id_private` as cma's
 * iw/ib handlers use it). Read fresh on every access: the id's addresses and device change as it
 * is bound and resolved.
 */
export interface CmHost {
  /** Trace prefix of the id (`ID[7]`). */
  readonly tag: string;
  readonly portSpace: PortSpace;
  /** The id's QP type (UD for UDP/IPOIB port spaces, else RC). */
  readonly qpType: QpType;
  /** The device context once bound or resolved (`id->verbs`). */
  readonly context: Context | null;
  /** `id->port_num` (1 once bound to a device). */
  readonly portNum: number;
  /** `rdma_get_local_addr`. */
  readonly localAddr: SockAddr | null;
  /** `rdma_get_peer_addr`. */
  readonly peerAddr: SockAddr | null;
  readonly options: CmIdOptions;
  /**
   * The device of this transport that owns local address `ip`, honouring the id's device pin
   * (cached: cheap to ask per connection). Listeners use it to place an incoming connection.
   */
  deviceFor(ip: string): Device | undefined;
  /** Whether `ip` is loopback or an address of this host (any device). */
  isLocalAddress(ip: string): boolean;
  /**
   * Report what happened. Synchronous; `CmId` queues the event, changes the id's state and, for
   * CONNECT_REQUEST, creates the new id. Ignored once the id is destroyed (CONNECT_REQUEST is
   * then refused).
   */
  upcall(ev: CmUpcall): void;
}

/**
 * A transport's report (the kernel's iw_cm_event / ib_cm_event as cma.c translates them). The
 * fields used depend on `event`:
 *
 * | event | fields | what CmId does |
 * |---|---|---|
 * | CONNECT_REQUEST | `request` (listeners only) | new id in CONNECT, event on the listener's channel |
 * | CONNECT_RESPONSE | `conn` | event (the application then calls rdma_establish) |
 * | ESTABLISHED | `conn` or `ud`, `localAddr` | id connected (local address updated), event |
 * | REJECTED | `status`, `conn.privateData` | active id: back to ROUTE_RESOLVED, QP to ERR; event |
 * | UNREACHABLE, CONNECT_ERROR | `status` | active id not yet established: as REJECTED; else to DISCONNECT; event |
 * | DISCONNECTED | `conn.privateData` (DREQ) | CONNECT → DISCONNECT, event |
 * | TIMEWAIT_EXIT | — | event |
 * | MULTICAST_JOIN | `ud`, `mcContext` | the id's QP attached to the group (failure: MULTICAST_ERROR); event |
 * | MULTICAST_ERROR | `status`, `mcContext` | event |
 * | ADDR_RESOLVED, ROUTE_RESOLVED, …_ERROR, ADDR_CHANGE, DEVICE_REMOVAL | `status`, `localAddr` | state as the CM's own resolution would set it; event (transports owning resolution) |
 */
export interface CmUpcall {
  event: CmEventType;
  /** 0 or a negative errno / transport status (REJECTED on iWARP: -104, on IB: the REJ reason). */
  status?: number;
  /** Connection parameters from the peer (in this side's perspective). */
  conn?: Partial<EventConnParam>;
  /** UD parameters (SIDR reply, multicast group). */
  ud?: UdParam;
  /** MULTICAST_JOIN/ERROR: the context the application gave the join. */
  mcContext?: unknown;
  /** ESTABLISHED (active side) or ADDR_RESOLVED: the id's actual local address. */
  localAddr?: SockAddr;
  /** CONNECT_REQUEST: the incoming request. */
  request?: IncomingRequest;
}

/** A connect request a listener reports (CONNECT_REQUEST). */
export interface IncomingRequest {
  /** The device context the request arrived on. */
  context: Context;
  portNum: number;
  /** The address the requester reached (the new id's local address). */
  local: SockAddr;
  /** The requester's address. */
  remote: SockAddr;
  /** Connected ids: the request's parameters (private data, the requester's IRD/ORD seen from here). */
  conn?: Partial<EventConnParam>;
  /** UD ids: the SIDR request's parameters. */
  ud?: UdParam;
  /**
   * The new id takes the request over: returns its endpoint, which then reports to `host` (the
   * new id). Called at most once.
   */
  adopt(host: CmHost): CmEndpoint;
  /** The listener is gone before the request was adopted: refuse it (the requester is rejected). */
  refuse(): void;
}

/** What rdma_connect hands the endpoint (checked and defaulted by CmId). */
export interface ConnectRequest {
  /** The QP to connect: the id's, or the one `param.qpNum` names; null if neither. */
  qp: Qp | null;
  /**
   * Whether `qp` is the id's own (rdma_create_qp). librdmacm moves only that QP itself; a QP that
   * `param.qpNum` names is the application's to move (IB: CONNECT_RESPONSE, then rdma_establish).
   * Absent: treated as true.
   */
  ownQp?: boolean;
  /** Local address (possibly a wildcard with a port) and destination. */
  src: SockAddr;
  dst: SockAddr;
  /**
   * Where to bind the connection's local end: only what the application bound explicitly, and
   * not the address the route lookup picks anyway (binding it costs a port-space search).
   */
  bind: { address?: string; port?: number };
  /** Private data (within the transport's limit). */
  privateData: Uint8Array;
  /** IRD and ORD to offer (within the device's limits). */
  responderResources: number;
  initiatorDepth: number;
  /** The application's parameters as given (retry counts, SRQ, QP number ...). */
  param: ConnParam;
}

/** What rdma_accept hands the endpoint. */
export interface AcceptRequest {
  qp: Qp | null;
  /** As {@link ConnectRequest.ownQp}. */
  ownQp?: boolean;
  privateData: Uint8Array;
  /** Final IRD and ORD (defaults: the requester's, within the device's limits). */
  responderResources: number;
  initiatorDepth: number;
  param: ConnParam;
}

/** What rdma_listen hands the transport. */
export interface ListenRequest {
  /** The bound address (a wildcard listens on every device of this transport). */
  addr: SockAddr;
  /** rdma_listen's backlog after the kernel's defaulting (1..1024). */
  backlog: number;
}

/** A transport's listener on one address and port. */
export interface CmListener {
  /** The port listened on (the one picked when the id was bound to port 0). */
  readonly port: number;
  /** Stop listening (rdma_destroy_id); requests already reported stay with their ids. */
  close(): void;
  /**
   * Whether the listener holds the Node event loop, as a listening `net.Server` does (true when
   * made): `false` from `RServer.unref()`. Absent: the listener holds nothing.
   */
  holdLoop?(on: boolean): void;
}

/** A multicast join (rdma_join_multicast_ex). */
export interface McJoin {
  /** The group's IP address. */
  addr: SockAddr;
  /** `McJoinFlag` (FULLMEMBER 0, SENDONLY_FULLMEMBER 1). */
  joinFlags: number;
  /** Returned in the MULTICAST_JOIN/ERROR event as `mcContext`. */
  context: unknown;
}

/** The transport half of one rdma_cm_id (the kernel's `iw_cm_id` / `ib_cm_id`). */
export interface CmEndpoint {
  /**
   * rdma_connect: start connecting (TCP + MPA Request; REQ; SIDR REQ on UD ids). Resolves once
   * the attempt is under way: the outcome is upcalled (ESTABLISHED, REJECTED, UNREACHABLE,
   * CONNECT_ERROR, CONNECT_RESPONSE). Rejects for errors of the call itself (EINVAL: no QP where
   * one is needed; a refused TCP connect on iWARP, as siw connects inside the call), after which
   * CmId returns the id to ROUTE_RESOLVED and expects no upcall.
   */
  connect(req: ConnectRequest): Promise<void>;
  /**
   * rdma_accept on the id of a CONNECT_REQUEST: answer it (MPA Reply; REP; SIDR REP), moving the
   * QP as the transport requires. ESTABLISHED is upcalled when the connection is up (at once, or
   * after the initiator's RTR / the RTU). EINVAL when no request is pending, ECONNRESET when the
   * requester already left.
   */
  accept(req: AcceptRequest): Promise<void>;
  /** rdma_reject: refuse the pending request with `privateData`. EINVAL when none is pending. */
  reject(privateData: Uint8Array): void;
  /** rdma_establish (IB: send the RTU after CONNECT_RESPONSE). Absent: EINVAL. */
  establish?(): void;
  /**
   * rdma_disconnect: close gracefully (iWARP: queued sends, then FIN; IB: DREQ/DREP). Returns
   * true when a DISCONNECTED upcall will follow (it may already have been made), false when
   * there was no connection to close (a pending request is closed, nothing is reported).
   */
  disconnect(): boolean;
  /**
   * rdma_init_qp_attr: the attributes and mask that move a QP of this id to `state` (INIT: access
   * flags and port, plus P_Key index and Q_Key on IB; RTR/RTS: path, PSNs, QPNs on IB; iWARP
   * gives state and access for RTR as for INIT, and only the port for RTS, which its CM makes).
   */
  initQpAttr(state: QpState): { attr: QpAttr; mask: number };
  /** rdma_join_multicast(_ex): join; MULTICAST_JOIN or MULTICAST_ERROR is upcalled. Absent: ENOSYS. */
  joinMulticast?(join: McJoin): void;
  /** rdma_leave_multicast. */
  leaveMulticast?(addr: SockAddr): void;
  /**
   * rdma_notify: the application saw async event `event` (`AsyncEventType`) on the id's QP. The
   * kernel (cma.c `rdma_notify`) refuses an id with no CM id of its transport yet (EINVAL),
   * passes the event to the IB CM on IB/RoCE devices (`ib_cm_notify`: COMM_EST establishes a
   * connection whose RTU is missing, EISCONN once established; LID_CHANGE is taken on an
   * established one; any other event or state EINVAL) and does nothing on iWARP. Absent:
   * EOPNOTSUPP.
   */
  notify?(event: number): void;
  /**
   * The path records of the id's route (`id->route.path_rec`), fresh copies: `resolved` says
   * whether the route is resolved (rdma_resolve_route done, or a connection under way). RoCE:
   * one record once resolved (cma.c `cma_resolve_iboe_route`), a passive id's from the REQ.
   * Absent: none (iWARP: the route is the IP route). A transport that cannot tell throws
   * EOPNOTSUPP.
   */
  routePaths?(resolved: boolean): SaPathRec[];
  /** rdma_set_option at level RDMA_OPTION_IB (e.g. IB_PATH). Absent: EOPNOTSUPP. */
  setIbOption?(name: number, value: number): void;
  /** rdma_destroy_id: drop everything without further upcalls (a pending request is rejected). */
  destroy(): void;
  /**
   * Whether an established connection's CM state holds the Node event loop (true when made):
   * `false` from `RSocket.unref()`. Exchanges under way (a request, a DREQ waiting for its reply)
   * may hold it still. Absent: the endpoint holds nothing once connected.
   */
  holdLoop?(on: boolean): void;

  // -- optional: a transport owning the whole flow (native) -------------------------------------

  /** rdma_bind_addr: called after CmId's checks; the transport binds its own id. */
  bind?(addr: SockAddr): void;
  /** rdma_resolve_addr: replaces CmId's resolution; upcall ADDR_RESOLVED / ADDR_ERROR. */
  resolveAddr?(src: SockAddr | null, dst: SockAddr, timeoutMs: number): Promise<void>;
  /**
   * rdma_resolve_route: returns 0 (ROUTE_RESOLVED) or a negative errno (ROUTE_ERROR) for CmId to
   * report; absent: the IP route found by resolve_addr is the route (iWARP).
   */
  resolveRoute?(timeoutMs: number): Promise<number>;
  /** rdma_listen: replaces {@link CmTransport.listen} when the endpoint listens itself. */
  listen?(req: ListenRequest): Promise<CmListener>;
  /** rdma_create_qp: create the QP through the transport (it must be a QP of `pd`'s device). */
  createQp?(pd: Pd, init: QpInitAttr): Qp;
}

/** A device family's connection manager (the kernel's iw_cm / ib_cm registration). */
export interface CmTransport {
  /** Name for traces and errors (`'iwcm'`, `'ibcm'`). */
  readonly name: string;
  /** The verbs provider whose devices this CM serves (`'siw'`). */
  readonly provider: string;
  /** The port spaces it connects (iWARP: TCP and IB; RoCE: UDP, IPOIB and TCP). */
  readonly portSpaces: readonly PortSpace[];
  readonly privateDataLimits: PrivateDataLimits;
  /** The transport half of a new id. */
  createEndpoint(host: CmHost): CmEndpoint;
  /**
   * Whether a wildcard listener that would listen through both this transport and `other`
   * listens through this one only, because both need the same port (the kernel's iWARP devices
   * and the soft ones both listen on the TCP port). Absent: never.
   */
  supersedes?(other: CmTransport): boolean;
  /**
   * rdma_listen: listen on `req.addr` (a wildcard: every device of this transport) and upcall
   * CONNECT_REQUEST to `host` per request. Rejects with EADDRINUSE / EADDRNOTAVAIL / EACCES.
   */
  listen(host: CmHost, req: ListenRequest): Promise<CmListener>;
}

const transports = new Map<string, CmTransport>();

/**
 * Register the CM of a verbs provider (called by the transport module, next to
 * `registerProvider`). Registering the same object again is a no-op.
 * @throws RdmaError EINVAL if `t` is not a CmTransport; EEXIST if the provider already has one.
 */
export function registerCmTransport(t: CmTransport): void {
  if (
    typeof t !== 'object' ||
    t === null ||
    typeof t.name !== 'string' ||
    typeof t.provider !== 'string' ||
    t.provider === '' ||
    !Array.isArray(t.portSpaces) ||
    typeof t.createEndpoint !== 'function' ||
    typeof t.listen !== 'function' ||
    typeof t.privateDataLimits !== 'object'
  ) {
    throw err('EINVAL', 'registerCmTransport', 'not a CmTransport');
  }
  const old = transports.get(t.provider);
  if (old === t) return;
  if (old !== undefined) throw err('EEXIST', 'registerCmTransport', `provider '${t.provider}' already has a CM transport`);
  transports.set(t.provider, t);
}

/** Remove the CM of `provider` (mainly for tests). @returns true if one was registered. */
export function unregisterCmTransport(provider: string): boolean {
  return transports.delete(provider);
}

/** The CM transport of a verbs provider, if any. */
export function getCmTransport(provider: string): CmTransport | undefined {
  return transports.get(provider);
}

/**
 * The registered CM transports, in registration order, less those whose verbs provider the
 * backend selection (`RDMACM_BACKEND`) hides.
 */
export function listCmTransports(): CmTransport[] {
  const visible = listProviders();
  return [...transports.values()].filter((t) => {
    const p = getProvider(t.provider);
    return p === undefined || visible.includes(p);
  });
}

/**
 * Transports a process has not loaded yet (a tool loads only the soft iWARP transport up front):
 * loaders run, once each, before anything needs every transport — a wildcard listener, which
 * listens through every transport serving its port space.
 */
const deferred: (() => Promise<unknown>)[] = [];

/**
 * Register a loader of transports not loaded yet: it is run (once) by
 * {@link loadDeferredTransports}, i.e. before the first wildcard `rdma_listen`, and is expected
 * to register its transports (import their modules).
 */
export function deferTransports(load: () => Promise<unknown>): void {
  deferred.push(load);
}

/** Whether loaders are waiting (see {@link deferTransports}). */
export function transportsDeferred(): boolean {
  return deferred.length > 0;
}

/** Run every deferred loader (once each, in registration order). */
export async function loadDeferredTransports(): Promise<void> {
  while (deferred.length > 0) await (deferred.shift() as () => Promise<unknown>)();
}

/** Whether `t` serves port space `ps`. */
export function servesPortSpace(t: CmTransport, ps: PortSpace): boolean {
  return t.portSpaces.includes(ps);
}
