/**
 * rdma_cm event types, names and payloads (`enum rdma_cm_event_type`, `struct rdma_cm_event`),
 * with librdmacm's numeric values and `rdma_event_str()` texts.
 */
import type { AhAttr } from '../verbs/ah.js';
import type { CmId } from './cm-id.js';

/** `enum rdma_cm_event_type`. */
export enum CmEventType {
  ADDR_RESOLVED = 0,
  ADDR_ERROR = 1,
  ROUTE_RESOLVED = 2,
  ROUTE_ERROR = 3,
  CONNECT_REQUEST = 4,
  CONNECT_RESPONSE = 5,
  CONNECT_ERROR = 6,
  UNREACHABLE = 7,
  REJECTED = 8,
  ESTABLISHED = 9,
  DISCONNECTED = 10,
  DEVICE_REMOVAL = 11,
  MULTICAST_JOIN = 12,
  MULTICAST_ERROR = 13,
  ADDR_CHANGE = 14,
  TIMEWAIT_EXIT = 15,
  ADDRINFO_RESOLVED = 16,
  ADDRINFO_ERROR = 17,
  USER = 18,
  INTERNAL = 19,
}

/**
 * `rdma_event_str()`: `"RDMA_CM_EVENT_<NAME>"` for 0..17 and `"UNKNOWN EVENT"` otherwise —
 * including USER and INTERNAL, exactly as librdmacm (a quirk kept for output compatibility).
 */
export function rdmaEventStr(ev: CmEventType | number): string {
  if (Number.isInteger(ev) && ev >= 0 && ev <= CmEventType.ADDRINFO_ERROR) return `RDMA_CM_EVENT_${CmEventType[ev]}`;
  return 'UNKNOWN EVENT';
}

/** `struct rdma_conn_param`. Omitted fields take librdmacm's defaults. */
export interface ConnParam {
  /** Private data for the peer (iWARP: ≤ 252 bytes with the MPA v2 IRD/ORD word). */
  privateData?: Uint8Array;
  /** Inbound RDMA Reads this side accepts (IRD); 0xFF = device maximum. */
  responderResources?: number;
  /** Outbound RDMA Reads this side issues (ORD); 0xFF = device maximum. */
  initiatorDepth?: number;
  flowControl?: number;
  retryCount?: number;
  rnrRetryCount?: number;
  srq?: number;
  /** QP number of a QP the application created itself (when no QP is attached to the id). */
  qpNum?: number;
}

/** The connection parameters carried by an event (what the peer sent, in our perspective). */
export interface EventConnParam {
  privateData: Uint8Array;
  responderResources: number;
  initiatorDepth: number;
  flowControl: number;
  retryCount: number;
  rnrRetryCount: number;
  srq: number;
  qpNum: number;
}

/**
 * `struct rdma_ud_param`: what a UD event carries — CONNECT_REQUEST of a UD id (the SIDR
 * request's private data), ESTABLISHED of a UD connect (the responder's QP number and Q_Key, and
 * the address handle attributes to reach it), MULTICAST_JOIN (the group's AH attributes, QP number
 * 0xFFFFFF and Q_Key).
 */
export interface UdParam {
  privateData: Uint8Array;
  ahAttr: AhAttr;
  qpNum: number;
  qkey: number;
}

/** What every `struct rdma_cm_event` carries. Acknowledge every event once, with `ack()`. */
export interface CmEventCommon {
  /** The id the event is for (CONNECT_REQUEST: the new id). */
  readonly id: CmId;
  /** 0, or a negative errno / transport status (e.g. REJECTED on iWARP: -111). */
  readonly status: number;
  /**
   * Both views of the event's parameters, as librdmacm's union: `conn` for connected ids, `ud`
   * for UD ids and multicast; the one that does not apply holds empty defaults.
   */
  readonly param: { conn: EventConnParam; ud: UdParam };
  /** rdma_ack_cm_event(). Throws EINVAL if already acknowledged. */
  ack(): void;
}

/**
 * RDMA_CM_EVENT_CONNECT_REQUEST: a new id (`id`, in CONNECT) for the request that reached the
 * listening id `listenId`; the requester's private data and IRD/ORD (seen from this side) in
 * `param.conn`, a UD request's in `param.ud`.
 */
export interface ConnectRequestEvent extends CmEventCommon {
  readonly event: CmEventType.CONNECT_REQUEST;
  /** The listening id the request reached. */
  readonly listenId: CmId;
  readonly mcContext?: undefined;
}

/** RDMA_CM_EVENT_MULTICAST_JOIN / MULTICAST_ERROR: the outcome of a join, with its context. */
export interface MulticastEvent extends CmEventCommon {
  readonly event: CmEventType.MULTICAST_JOIN | CmEventType.MULTICAST_ERROR;
  readonly listenId: null;
  /** The context given to `joinMulticast` (librdmacm passes it in `param.ud.private_data`). */
  readonly mcContext: unknown;
}

/** The event types whose events carry no more than {@link CmEventCommon}. */
export type PlainCmEventType = Exclude<CmEventType, CmEventType.CONNECT_REQUEST | CmEventType.MULTICAST_JOIN | CmEventType.MULTICAST_ERROR>;

/**
 * Every other event: ADDR_RESOLVED, ROUTE_RESOLVED, ESTABLISHED (the peer's private data and
 * IRD/ORD in `param.conn`; a UD connect's address handle and QP number in `param.ud`),
 * DISCONNECTED, TIMEWAIT_EXIT, ADDR_CHANGE, DEVICE_REMOVAL; the failures ADDR_ERROR, ROUTE_ERROR,
 * CONNECT_ERROR, UNREACHABLE (a negative errno in `status`) and REJECTED (the REJ reason or
 * -ECONNREFUSED/-ECONNRESET in `status`, the peer's private data in `param.conn`).
 */
export interface PlainCmEvent<T extends PlainCmEventType = PlainCmEventType> extends CmEventCommon {
  readonly event: T;
  readonly listenId: null;
  readonly mcContext?: undefined;
}

/**
 * `struct rdma_cm_event`: a union discriminated by `event`, so that `switch (ev.event)` narrows
 * (`case CmEventType.CONNECT_REQUEST:` gives `ev.listenId` as a `CmId`).
 */
export type CmEvent = ConnectRequestEvent | MulticastEvent | PlainCmEvent;
