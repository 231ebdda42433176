/**
 * The `rdmacm/verbs` entry point: the verbs API with the software iWARP provider loaded (its
 * devices registered), like linking libibverbs with the siw provider installed.
 * @packageDocumentation
 */
import './transports.js';
export * from './verbs/index.js';
export { SIW_LIMITS } from './transport/iwarp/index.js';
