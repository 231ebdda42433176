/**
 * The rdma_cm API: event channels, cm_ids, address helpers and event types.
 * @packageDocumentation
 */
import '../transport/iwarp/provider.js';
import '../native/provider.js';
export { EventChannel, createEventChannel } from './event-channel.js';
export { CmId, CmState, PortSpace, RdmaOption, createId, IWARP_MAX_PRIVATE_DATA, type CmQpInitAttr } from './cm-id.js';
export { CmEventType, rdmaEventStr, type CmEvent, type ConnParam, type EventConnParam } from './events.js';
export { getaddrinfo, gaiStrerror, GaiError, RAI, type SockAddr, type RdmaAddrinfo, type RdmaAddrinfoHints } from './addr.js';
export { MAX_BACKLOG } from './cm-id.js';
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
  postRead,
  postReadv,
  postWrite,
  postWritev,
  getSendComp,
  getRecvComp,
  type BufAddr,
} from './rdma-verbs.js';
