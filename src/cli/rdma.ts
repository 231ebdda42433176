/**
 * What the connection tools (rping, cmtime, ucmatose, rdma_server, rdma_client) use of the
 * package: the verbs and rdma_cm APIs, like the `rdmacm` entry point, but with only the transports
 * a run needs loaded. Loading a module costs about a millisecond at start, and a tool run over the
 * soft iWARP device needs neither the soft RoCE transport (about 30 modules) nor the native
 * backend. Each transport of the manifest (src/transports.ts) says when a run loads it, through
 * the policy in its folder, and the manifest's order is kept:
 *
 * - the soft iWARP transport at start, always;
 * - the soft RoCE transport at start when `RDMACM_DEVICE` pins a device that is not a soft iWARP
 *   one; otherwise deferred to the first wildcard `rdma_listen` (which listens through every
 *   transport serving its port space; the CM runs the deferred loaders first). Ids bound to an
 *   address take the iWARP device for RDMA_PS_TCP and RDMA_PS_IB, as they do with every
 *   transport loaded;
 * - the native backend at start when the backend selection admits kernel devices and the kernel
 *   has some (`nativeWanted`), and with it the RoCE transport before it (the registration order
 *   of the package entry points); otherwise never.
 *
 * Tools of other port spaces (udaddy, mckey: UD over RoCE) load theirs through `rdma-ud.ts`.
 */
import { loadPlan } from '../transports.js';
import { deferTransports } from '../cm/transport.js';
import { backendSelection } from '../verbs/provider.js';

export * from './api.js';

const plan = loadPlan({ env: process.env, backend: backendSelection() });
for (const t of plan.now) await t.load();
for (const t of plan.deferred) deferTransports(t.load);
