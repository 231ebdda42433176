/**
 * The soft iWARP transport's settings, exported by the package entry points as the namespace
 * `iwarp`. Importing it loads the transport (index.ts registers it).
 *
 * ```ts
 * import { iwarp } from 'rdmacm';
 * iwarp.configure({ crc: true });                  // every siw device
 * iwarp.configure({ rtrNudgeMs: 0 }, 'siw_eth0');  // one device
 * ```
 */
import './index.js';
export { SIW_PROVIDER as PROVIDER, iwarpCounters as counters } from './provider.js';
export { IWARP_COUNTER_NAMES as COUNTER_NAMES, type IwarpCounterName as CounterName } from './counters.js';
export { SIW_LIMITS as LIMITS } from './attrs.js';
export { IWARP_MAX_PRIVATE_DATA as MAX_PRIVATE_DATA } from './iwarp-cm.js';
export { configureIwarp as configure, iwarpConfig as config, type IwarpConfig as Config } from './config.js';
export { configureIwarpFaults as configureFaults, iwarpFaultCounts as faultCounts, type IwarpFaults as Faults, type IwarpFaultCounts as FaultCounts } from './faults.js';
