/**
 * rdmacm: the RDMA connection manager (librdmacm), verbs and the librdmacm tools in TypeScript,
 * over software devices that speak the real wire protocols — iWARP as Linux siw (MPA/DDP/RDMAP over
 * TCP), RoCEv2 as Linux rdma_rxe (BTH/DETH/ICRC over UDP 4791) — and, through the optional native
 * addon, the kernel's own RDMA devices.
 *
 * ```ts
 * import { createId, PortSpace, getDeviceList } from 'rdmacm';
 * const id = createId(null, null, PortSpace.TCP);            // synchronous id
 * await id.resolveAddr(null, { address: '127.0.0.1', port: 7174 });
 * await id.resolveRoute();
 * id.createQp(null, { cap: { maxSendWr: 16, maxRecvWr: 16 } });
 * await id.connect({ responderResources: 1, initiatorDepth: 1 });
 * ```
 * @packageDocumentation
 */
import './transports.js';
export * from './verbs/index.js';
export { SIW_LIMITS } from './transport/iwarp/index.js';
export { RXE_LIMITS, RXE_PROVIDER, rxeDeviceName, roceCounters, ROCE_COUNTER_NAMES, type RoceCounterName, configureRoceCm, roceCmConfig, type RoceCmConfig,
  configureRoceRcCm, roceRcCmConfig, roceRcHalfOpen, type RoceRcCmConfig, configureRoceImpairment, roceImpairmentCounts, type RoceImpairment } from './transport/roce/index.js';
export * from './cm/index.js';
export { IWARP_MAX_PRIVATE_DATA, configureIwarp, iwarpConfig, type IwarpConfig } from './transport/iwarp/index.js';
export { RdmaError, PostError, TerminateError, type RdmaErrorOptions } from './errors.js';
export { Errno, errnoOf, strerror, type ErrnoCode } from './errno.js';
/** rsockets: `rsocket.connect()` / `rsocket.createServer()` give Node `Duplex` streams over RDMA. */
export * as rsocket from './rsocket/index.js';
/** The native (rdma-core) backend: whether its addon is loaded, and the name of its provider. */
export { bindingStatus as nativeAddonStatus, type BindingStatus as NativeAddonStatus } from './native/binding.js';
export { NATIVE_PROVIDER } from './native/provider.js';
