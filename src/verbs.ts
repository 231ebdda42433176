/**
 * The `rdmacm/verbs` entry point: the verbs API with the software iWARP provider loaded (its
 * devices registered), like linking libibverbs with the siw provider installed.
 * @packageDocumentation
 */
import './transports.js';
export * from './verbs/index.js';
export { SIW_LIMITS } from './transport/iwarp/index.js';
export { RXE_LIMITS, RXE_PROVIDER, rxeDeviceName, roceCounters, ROCE_COUNTER_NAMES, type RoceCounterName, configureRoceCm, roceCmConfig, type RoceCmConfig } from './transport/roce/index.js';
