/**
 * What the UD tools of the connection manager (udaddy, mckey: RDMA_PS_UDP and RDMA_PS_IPOIB ids,
 * which only the soft RoCE device and kernel devices serve) use of the package: the verbs and
 * rdma_cm APIs of `api.ts`, the transports loaded as `rdma.ts` loads them but with the soft RoCE
 * transport at start (a UD id resolves, joins and answers over it from its first call, not after a
 * wildcard listen), and this process's counter and resource endpoint, which the package entry
 * point starts and `rdmacm-stat` reads (src/stat/service.ts).
 *
 * Not the package entry point: that loads rsockets, the packet capture writer, the statistics
 * reader and the native backend whatever the backend selection says, some 50 modules a UD tool
 * never runs (docs/design/performance.md, "udaddy -c N").
 */
import { loadPlan } from '../transports.js';
import { deferTransports } from '../cm/transport.js';
import { backendSelection } from '../verbs/provider.js';
import '../stat/service.js';

export * from './api.js';

const plan = loadPlan({ env: process.env, backend: backendSelection() }, ['roce']);
for (const t of plan.now) await t.load();
for (const t of plan.deferred) deferTransports(t.load);
