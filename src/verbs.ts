/**
 * The `rdmacm/verbs` entry point: the verbs API with the software iWARP provider loaded (its
 * devices registered), like linking libibverbs with the siw provider installed.
 * @packageDocumentation
 */
import './transport/iwarp/provider.js';
import './native/provider.js';
export * from './verbs/index.js';
