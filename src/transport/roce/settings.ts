/**
 * The soft RoCEv2 transport's settings and counters, exported by the package entry points as the
 * namespace `roce`. Importing it loads the transport (index.ts registers it).
 *
 * ```ts
 * import { roce } from 'rdmacm';
 * roce.configureCm({ sidrTimeoutMs: 500 });
 * console.log(roce.counters('rxe_lo').rcvd_pkts);
 * ```
 */
import './index.js';
export { RXE_PROVIDER as PROVIDER, rxeDeviceName as deviceName, roceCounters as counters } from './provider.js';
export { RXE_LIMITS as LIMITS } from './params.js';
export { configureRoceDevice as configureDevice, roceDeviceConfig as deviceConfig, type RoceDeviceConfig as DeviceConfig } from './config.js';
export { COUNTER_NAMES, type CounterName } from './counters.js';
export { configureRoceCm as configureCm, roceCmConfig as cmConfig, type RoceCmConfig as CmConfig } from './cm/config.js';
export { configureRoceRcCm as configureRcCm, roceRcCmConfig as rcCmConfig, type RoceRcCmConfig as RcCmConfig } from './cm/config.js';
export { roceRcHalfOpen as rcHalfOpen } from './cm/index.js';
export { configureRoceImpairment as configureImpairment, roceImpairmentCounts as impairmentCounts, type RoceImpairment as Impairment, type RoceImpairmentCounts as ImpairmentCounts } from './impair.js';
export { roceIoKind as ioPath, type RoceIoKind as IoPath } from './udp-endpoint.js';
