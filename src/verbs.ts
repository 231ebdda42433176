/**
 * The `rdmacm/verbs` entry point: the verbs API with the built-in providers loaded (the soft iWARP
 * and RoCEv2 devices, and the native backend where its addon is built), like linking libibverbs
 * with its providers installed.
 * @packageDocumentation
 */
import './transports.js';
export * from './verbs/index.js';
export { SIW_LIMITS } from './transport/iwarp/index.js';
export { RXE_LIMITS, RXE_PROVIDER, rxeDeviceName, roceCounters, ROCE_COUNTER_NAMES, type RoceCounterName, configureRoceCm, roceCmConfig, type RoceCmConfig } from './transport/roce/index.js';
