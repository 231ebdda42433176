/**
 * The native backend's face, exported by the package entry points as the namespace `native`:
 * whether its addon is loaded (and why not), and the provider name its devices carry. Importing it
 * loads the backend (which registers where the addon loads and the kernel has devices).
 *
 * ```ts
 * import { native, getDeviceList } from 'rdmacm';
 * if (!native.addonStatus().loaded) console.log(native.addonStatus().reason);
 * const kernel = getDeviceList().filter((d) => d.provider === native.PROVIDER);
 * ```
 */
import './index.js';
export { NATIVE_PROVIDER as PROVIDER, nativeAsyncFd as asyncFd } from './provider.js';
export { bindingStatus as addonStatus, type BindingStatus as AddonStatus } from './binding.js';
