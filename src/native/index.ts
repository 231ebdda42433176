/**
 * The native backend: the kernel's RDMA devices through rdma-core (libibverbs, librdmacm) and
 * the optional addon in native/. Loading this module registers the `rdma-core` verbs provider
 * and the librdmacm CM transport when the addon loads and the kernel has RDMA devices; else it
 * registers nothing and the package runs on its soft devices.
 *
 * Its verbs objects are the verbs classes (`Context`, `Pd`, `Mr`, `CompChannel`, `Cq`, `Qp` —
 * subclasses, so `instanceof` and every property work the same), each call mapped to its
 * libibverbs call through the addon with libibverbs' errno; arguments are checked before any C is
 * reached and the kernel's provider checks the rest, as for a C program. One file each:
 * context.ts, pd.ts, mr.ts, comp-channel.ts, cq.ts, qp.ts; abi.ts holds the layouts shared with
 * the addon and the pure encode/decode, registry.ts the keys and event routing, binding.ts the
 * loader, provider.ts the `VerbsProvider`, cm.ts the CM transport over librdmacm.
 */
import { nativeWanted, registerNative } from './provider.js';
import { registerNativeCm } from './cm.js';

if (nativeWanted() && registerNative()) registerNativeCm();

export { NATIVE_PROVIDER, nativeAvailable, nativeDeviceNames } from './provider.js';
export { bindingStatus, defaultAddonPath, type BindingStatus } from './binding.js';
