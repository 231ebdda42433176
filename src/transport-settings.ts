/**
 * The package entry points' loader: importing this module loads every built-in transport, in
 * the order of the transport manifest (src/transports.ts), and gives each one's settings as a
 * namespace named after it — `import { iwarp, roce, native } from 'rdmacm'`, then
 * `iwarp.configure(...)`, `roce.counters('rxe_lo')`, `native.addonStatus()`. A transport's
 * settings module loads its transport, so these lines are the registration order.
 *
 * Static imports, not the manifest's `load()`: an entry point that awaited at the top level could
 * no longer be loaded through require() from CommonJS. test/unit/transports.test.js checks that
 * this order is the manifest's and that every manifest entry has its namespace here.
 */
/** The soft iWARP transport's typed configuration (`iwarp.configure()`, `iwarp.settings()`). */
export * as iwarp from './transport/iwarp/settings.js';
/** The soft RoCEv2 transport's settings and its per-device counters (`roce.counters('rxe_lo')`). */
export * as roce from './transport/roce/settings.js';
/** The native backend: whether its addon is loaded and why not (`native.addonStatus()`). */
export * as native from './native/settings.js';
