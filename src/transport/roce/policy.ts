/**
 * When a connection tool loads the soft RoCE transport (its about 30 modules), decided without
 * loading any of them. The tools ask {@link when} through the transport manifest
 * (src/transports.ts).
 */

/**
 * At start when `RDMACM_DEVICE` pins a device that is not a soft iWARP one (the transport the
 * tools always load), since the pinned device may be ours. Otherwise deferred to the first
 * `rdma_listen` on a wildcard address, which listens through every transport serving its port
 * space: ids bound to an address take the iWARP device for RDMA_PS_TCP and RDMA_PS_IB whether or
 * not this transport is loaded, so nothing else of a tool run reaches it.
 */
export function when(ctx: { readonly env: NodeJS.ProcessEnv }): 'now' | 'deferred' {
  const pin = ctx.env['RDMACM_DEVICE'];
  return pin !== undefined && pin !== '' && !pin.startsWith('siw_') ? 'now' : 'deferred';
}
