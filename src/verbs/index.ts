/**
 * Verbs (libibverbs): devices, contexts, protection domains, memory regions, completion queues
 * and channels, queue pairs, shared receive queues, async events.
 * @packageDocumentation
 */
export * from './types.js';
export {
  getDeviceList,
  findDeviceByAddress,
  findDevicesByAddress,
  Device,
  NodeType,
  nodeTypeStr,
  PortState,
  portStateStr,
  Mtu,
  LinkLayer,
  AtomicCap,
  DEVICE_MEM_WINDOW,
  DEVICE_MEM_WINDOW_TYPE_2A,
  DEVICE_MEM_WINDOW_TYPE_2B,
  DEVICE_BLOCK_MULTICAST_LOOPBACK,
  mtuToEnum,
  mtuEnumToBytes,
  formatGuid,
  type DeviceAttr,
  type PortAttr,
  type DeviceInfo,
} from './device.js';
export { Context } from './context.js';
export { Pd, type MrMemory } from './pd.js';
export { Mr, MrCheck, ReregMrFlag, mrCheckStr, stagStr } from './mr.js';
export { Mw, MwState, incRkey } from './mw.js';
export { Cq, type CompletionsOptions } from './cq.js';
export { CompChannel } from './comp-channel.js';
export { CqEx, WcExFlags, WC_STANDARD_FLAGS, CqInitAttrMask, CreateCqAttrFlags, type CqInitAttrEx, type PollCqAttr, type WcTs } from './cq-ex.js';
export { QpEx, QpExSendOps, qpToQpEx, sendOpFlag } from './qp-ex.js';
export { QpInitAttrMask, supportedSendOps, type QpInitAttrEx } from './ex-verbs.js';
export {
  DEVICE_ATOMIC_WRITE,
  DEVICE_FLUSH_GLOBAL,
  DEVICE_FLUSH_PERSISTENT,
  type DeviceAttrEx,
  type OdpCaps,
  type TsoCaps,
  type RssCaps,
  type PacketPacingCaps,
  type TmCaps,
  type CqModerationCaps,
  type PciAtomicCaps,
} from './device-attr-ex.js';
export { eventTypeStr, type AsyncEvent } from './async-event.js';
export { Qp, type RecvInfo } from './qp.js';
export { PreparedWrs, type PreparedKind } from './prepared.js';
export { Srq, SrqAttrMask, SrqInitAttrMask, SrqType, DEVICE_SRQ_RESIZE, type SrqAttr, type SrqInitAttr, type SrqCaps } from './srq.js';
export { QpAttrMask, MigState, QP_STATE_TABLE, qpTransitionAllowed, modifyQpProblem, qpAttrMaskOf, type QpAttr } from './qp-attr.js';
export { Ah, type AhAttr, type GlobalRoute } from './ah.js';
export { initAhFromWc, createAhFromWc, findGidIndex, GRH_AREA_LEN } from './ah-wc.js';
export { DEFAULT_PKEY, type GidEntry } from './context.js';
export { registerProvider, unregisterProvider, settleConnections, backendSelection, type Backend, type VerbsProvider, QpCreateFlags, type QpInitAttr, type QpLike, type ExCaps, type CqArgs } from './provider.js';
