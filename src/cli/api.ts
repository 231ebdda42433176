/**
 * The package as the tools use it, loading no transport: the verbs and rdma_cm APIs, the errors
 * and errno names, and the two byte helpers the tools share with the library. A tool imports the
 * package through this module, `rs-api.ts` (rsockets), the tools' loader `rdma.ts` (this face plus
 * the transports a run needs) or a package entry point; `rstream -T s` runs on plain sockets and so
 * loads no transport at all. test/unit/cli/tool-imports.test.js keeps the tools to these.
 */
export * from '../verbs/index.js';
export * from '../cm/index.js';
export { RdmaError, PostError, TerminateError } from '../errors.js';
export { Errno, errnoOf, strerror, type ErrnoCode } from '../errno.js';
export { copyBytes } from '../util/copy.js';
export { parseIpv6 } from '../util/ip.js';
export { formatIpv6Text } from '../ip-text.js';
