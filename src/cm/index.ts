/**
 * The rdma_cm API: event channels, cm_ids, address helpers and event types, and the CM transport
 * seam. Loads no transport: the package entry points (`rdmacm`, `rdmacm/cm`) do.
 * @packageDocumentation
 */
export { EventChannel, createEventChannel } from './event-channel.js';
export { CmId, CmState, PortSpace, RdmaOption, createId, type CreateIdOptions } from './cm-id.js';
export { McJoinAttr, McJoinFlag, MULTICAST_QPN } from './id-multicast.js';
export { QpInitAttrMask, type CmQpInitAttr, type CmQpInitAttrEx, type CmSrqInitAttrEx } from './id-qp.js';
export {
  CmEventType,
  rdmaEventStr,
  type CmEvent,
  type CmEventCommon,
  type ConnectRequestEvent,
  type MulticastEvent,
  type PlainCmEvent,
  type PlainCmEventType,
  type ConnParam,
  type EventConnParam,
  type UdParam,
} from './events.js';
export { RDMA_UDP_QKEY, RDMA_IB_IP_PS_MASK, RDMA_IB_IP_PS_TCP, RDMA_IB_IP_PS_UDP, RDMA_IB_IP_PS_IB, serviceId } from './port-space.js';
export {
  registerCmTransport,
  unregisterCmTransport,
  deferTransports,
  loadDeferredTransports,
  getCmTransport,
  listCmTransports,
  type CmTransport,
  type CmEndpoint,
  type CmHost,
  type CmUpcall,
  type CmListener,
  type IncomingRequest,
  type ConnectRequest,
  type AcceptRequest,
  type ListenRequest,
  type McJoin,
  type PrivateDataLimits,
  type CmIdOptions,
} from './transport.js';
export { getaddrinfo, gaiStrerror, GaiError, RAI, type SockAddr, type RdmaAddrinfo, type RdmaAddrinfoHints } from './addr.js';
export { MAX_BACKLOG } from './cm-id.js';
export { ipToGid, type RdmaRoute, type SaPathRec } from './id-route.js';
export { createEp, destroyEp, EP_RESOLVE_TIMEOUT_MS } from './ep.js';
export {
  regMsgs,
  regRead,
  regWrite,
  deregMr,
  sgeOf,
  postRecv,
  postRecvv,
  postSend,
  postSendv,
  postUdSend,
  postRead,
  postReadv,
  postWrite,
  postWritev,
  getSendComp,
  getRecvComp,
  type BufAddr,
} from './rdma-verbs.js';
