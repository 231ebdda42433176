/**
 * Verbs (libibverbs): devices, contexts, protection domains, memory regions, completion queues
 * and channels, queue pairs, async events.
 * @packageDocumentation
 */
import '../transport/iwarp/provider.js';
export * from './types.js';
export { getDeviceList, findDeviceByAddress, Device, NodeType, PortState, Mtu, LinkLayer, mtuToEnum, mtuEnumToBytes, type DeviceAttr, type PortAttr, type DeviceInfo } from './device.js';
export { Context } from './context.js';
export { Pd } from './pd.js';
export { Mr, MrCheck, stagStr } from './mr.js';
export { Cq } from './cq.js';
export { CompChannel } from './comp-channel.js';
export { eventTypeStr, type AsyncEvent } from './async-event.js';
export { Qp, QpAttrMask, qpTransitionAllowed, type QpAttr } from './qp.js';
export { registerProvider, type VerbsProvider, type QpInitAttr } from './provider.js';
