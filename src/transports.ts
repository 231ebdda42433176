/**
 * The transport manifest: the built-in transports, in the order they register their verbs
 * providers and CM transports (soft iWARP, soft RoCEv2, the native backend), each with its folder,
 * its loader and its policy. Loading a transport (its `index` module) registers it, what linking
 * libibverbs with a provider installed does.
 *
 * Two loaders follow it:
 * - the package entry points (`rdmacm`, `rdmacm/verbs`, `rdmacm/cm`, `rdmacm/rsocket`) load every
 *   transport, in this order, through src/transport-settings.ts, which also gives each one's
 *   settings as a namespace of its name (static imports there: an entry point stays loadable
 *   through require(); test/unit/transports.test.js checks that the two agree);
 * - the connection tools' loader (src/cli/rdma.ts) loads only what a run needs, asking each
 *   transport's own policy ({@link Transport.when}, in its folder's `policy.ts`) and keeping this
 *   order ({@link loadPlan}).
 *
 * This module loads no transport: it and the policies are cheap to import. The verbs and CM
 * layers import neither it nor the entry points' loader.
 */
import type { Backend } from './verbs/provider.js';
import * as iwarp from './transport/iwarp/policy.js';
import * as roce from './transport/roce/policy.js';
import * as native from './native/policy.js';

/**
 * When a process that loads only what it needs loads a transport: `now` (at start), `deferred`
 * (before the first wildcard `rdma_listen`, through the CM's `deferTransports`), or `never`.
 */
export type LoadWhen = 'now' | 'deferred' | 'never';

/** What a transport's policy is told about the process. */
export interface LoadContext {
  /** The process environment (`RDMACM_DEVICE`, `RDMACM_NATIVE_PATH` ...). */
  readonly env: NodeJS.ProcessEnv;
  /** The backend selection (`RDMACM_BACKEND`, as the verbs layer read it at start-up). */
  readonly backend: Backend;
}

/** One transport of the manifest. */
export interface Transport {
  /** Its name, and the name of its settings namespace (`roce.configureCm(...)`). */
  readonly name: string;
  /** Its folder under src/ (and dist/): `index` there registers it, `policy` there is {@link when}. */
  readonly dir: string;
  /** Load it (import `<dir>/index.js`), which registers its verbs provider and CM transport. */
  readonly load: () => Promise<unknown>;
  /** When a connection tool loads it. */
  readonly when: (ctx: LoadContext) => LoadWhen;
}

/**
 * The built-in transports, in registration order. A new transport adds its line here, and its
 * namespace line in src/transport-settings.ts.
 */
export const TRANSPORTS: readonly Transport[] = Object.freeze([
  { name: 'iwarp', dir: 'transport/iwarp', load: () => import('./transport/iwarp/index.js'), when: iwarp.when },
  { name: 'roce', dir: 'transport/roce', load: () => import('./transport/roce/index.js'), when: roce.when },
  { name: 'native', dir: 'native', load: () => import('./native/index.js'), when: native.when },
]);

/**
 * Which transports a connection tool loads at start and which it defers, each list in manifest
 * order. Every transport answers for itself, but one the tool names in `needed` is loaded at
 * start unless its policy says `never` (the UD tools need the soft RoCE transport before their
 * first call, not at a wildcard listen); one rule keeps the registration order of the entry
 * points: a transport loaded at start brings forward the deferred ones before it (the native
 * backend, when it loads, brings the soft RoCE transport).
 */
export function loadPlan(ctx: LoadContext, needed: readonly string[] = []): { now: Transport[]; deferred: Transport[] } {
  const when = TRANSPORTS.map((t) => {
    const w = t.when(ctx);
    return w === 'deferred' && needed.includes(t.name) ? 'now' : w;
  });
  const last = when.lastIndexOf('now');
  const plan: { now: Transport[]; deferred: Transport[] } = { now: [], deferred: [] };
  TRANSPORTS.forEach((t, i) => {
    const w = when[i];
    if (w === 'now' || (w === 'deferred' && i < last)) plan.now.push(t);
    else if (w === 'deferred') plan.deferred.push(t);
  });
  return plan;
}
