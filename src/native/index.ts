/**
 * The native backend: the kernel's RDMA devices through rdma-core (libibverbs, librdmacm) and
 * the optional addon in native/. Loading this module registers the `rdma-core` verbs provider
 * and the librdmacm CM transport when the addon loads and the kernel has RDMA devices; else it
 * registers nothing and the package runs on its soft devices.
 */
import { nativeWanted, registerNative } from './provider.js';
import { registerNativeCm } from './cm.js';

if (nativeWanted() && registerNative()) registerNativeCm();

export { NATIVE_PROVIDER, nativeAvailable, nativeDeviceNames } from './provider.js';
export { bindingStatus, defaultAddonPath, type BindingStatus } from './binding.js';
