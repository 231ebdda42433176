/**
 * The `rdmacm/cm` entry point: the rdma_cm API with the built-in transports loaded (their
 * devices and connection managers registered).
 * @packageDocumentation
 */
import './transports.js';
export * from './cm/index.js';
export { IWARP_MAX_PRIVATE_DATA } from './transport/iwarp/index.js';
