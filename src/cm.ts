/**
 * The `rdmacm/cm` entry point: the rdma_cm API with the built-in transports loaded (their
 * devices and connection managers registered).
 * @packageDocumentation
 */
/** Loads the transports; each one's settings: `iwarp`, `roce`, `native` (src/transport-settings.ts). */
// Symbol.dispose / Symbol.asyncDispose before any class that defines disposers (Node < 20.4 lacks them).
import './util/dispose.js';
export * from './transport-settings.js';
export * from './cm/index.js';
