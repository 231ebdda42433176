/**
 * The package entry points' loader: importing this module loads every built-in transport, in
 * registration order (soft iWARP, soft RoCEv2, the native backend), and gives each one's settings
 * as a namespace named after it — `import { iwarp, roce, native } from 'rdmacm'`, then
 * `iwarp.configure(...)`, `roce.counters('rxe_lo')`, `native.addonStatus()`. A transport's
 * settings module loads its transport, so these lines are the registration order. The verbs and
 * CM layers never import it.
 */
export * as iwarp from './transport/iwarp/settings.js';
export * as roce from './transport/roce/settings.js';
export * as native from './native/settings.js';
