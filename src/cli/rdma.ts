/**
 * What the connection tools (rping, cmtime, ucmatose, rdma_server, rdma_client) use of the
 * package: the verbs and rdma_cm APIs, like the `rdmacm` entry point, but with only the transports
 * a run needs loaded. Loading a module costs about a millisecond at start, and a tool run over the
 * soft iWARP device needs neither the soft RoCE transport (about 30 modules) nor the native
 * backend:
 *
 * - the soft iWARP transport is always loaded;
 * - the native backend (and with it the RoCE transport, so that the transports register in the
 *   order the package entry points register them) when the backend selection admits kernel
 *   devices and the kernel has some (`nativeWanted`);
 * - the soft RoCE transport when `RDMACM_DEVICE` pins a device that is not a soft iWARP one;
 *   otherwise it is deferred to the first wildcard `rdma_listen` (which listens through every
 *   transport serving its port space; the CM runs the deferred loader first). Ids bound to an
 *   address take the iWARP device for RDMA_PS_TCP and RDMA_PS_IB, as they do with every transport
 *   loaded.
 *
 * Tools of other port spaces (udaddy, mckey: UD over RoCE) import the package entry point.
 */
import '../transport/iwarp/index.js';
import { deferTransports } from '../cm/transport.js';
import { backendSelection } from '../verbs/provider.js';
import { nativeWanted } from '../native/wanted.js';

export * from '../verbs/index.js';
export * from '../cm/index.js';
export { RdmaError, PostError, TerminateError } from '../errors.js';
export { Errno, errnoOf, strerror, type ErrnoCode } from '../errno.js';

/** Whether `RDMACM_DEVICE` pins the process to a device other than a soft iWARP one. */
function pinsOtherDevice(): boolean {
  const pin = process.env['RDMACM_DEVICE'];
  return pin !== undefined && pin !== '' && !pin.startsWith('siw_');
}

const loadRoce = (): Promise<unknown> => import('../transport/roce/index.js');

if (backendSelection() !== 'soft' && nativeWanted()) {
  await loadRoce();
  await import('../native/index.js');
} else if (pinsOtherDevice()) {
  await loadRoce();
} else {
  deferTransports(loadRoce);
}
