/**
 * The `rdmacm/verbs` entry point: the verbs API with the software iWARP provider loaded (its
 * devices registered), like linking libibverbs with the siw provider installed.
 * @packageDocumentation
 */
import './transport/iwarp/provider.js';
import './transport/roce/provider.js';
export * from './verbs/index.js';
export { SIW_LIMITS } from './transport/iwarp/attrs.js';
export { RXE_LIMITS } from './transport/roce/params.js';
export { roceCounters, rxeDeviceName, RXE_PROVIDER } from './transport/roce/provider.js';
export { COUNTER_NAMES as ROCE_COUNTER_NAMES, type CounterName as RoceCounterName } from './transport/roce/counters.js';
