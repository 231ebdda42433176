/**
 * The software iWARP transport: the `siw` verbs provider (provider.ts, `siw_<ifname>` devices)
 * and its connection manager (iwarp-cm.ts), both registered when this module is loaded.
 */
import './provider.js';
import './iwarp-cm.js';
export { SIW_PROVIDER, SIW_MAX_INLINE, iwarpCounters } from './provider.js';
export { IWARP_COUNTER_NAMES, type IwarpCounterName } from './counters.js';
export { IWARP_MAX_PRIVATE_DATA, iwarpCmTransport } from './iwarp-cm.js';
export { SIW_LIMITS, IWARP_ACCESS_MASK } from './attrs.js';
export { configureIwarp, iwarpConfig, resetIwarpConfig, type IwarpConfig, type ResolvedIwarpConfig } from './config.js';
export { configureIwarpFaults, iwarpFaultCounts, parseIwarpFaults, type IwarpFaults, type IwarpFaultCounts } from './faults.js';
