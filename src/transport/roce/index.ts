/**
 * The soft RoCEv2 transport: the `rxe` verbs provider (provider.ts, `rxe_<ifname>` devices),
 * registered when this module is loaded.
 */
import './provider.js';
export { RXE_PROVIDER, rxeDeviceName, roceCounters } from './provider.js';
export { RXE_LIMITS } from './params.js';
export { COUNTER_NAMES as ROCE_COUNTER_NAMES, type CounterName as RoceCounterName } from './counters.js';
import './cm/index.js';
export { roceCmTransport, configureRoceCm, roceCmConfig, type RoceCmConfig, configureRoceRcCm, roceRcCmConfig, roceRcHalfOpen, type RoceRcCmConfig } from './cm/index.js';
export { configureRoceImpairment, roceImpairmentCounts, parseRoceImpairment, type RoceImpairment, type RoceImpairmentCounts } from './impair.js';
