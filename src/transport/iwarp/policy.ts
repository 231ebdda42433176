/**
 * When a connection tool loads the soft iWARP transport: always, at start. The tools run over it
 * by default — an id bound to an address takes its device for RDMA_PS_TCP and RDMA_PS_IB — so the
 * other soft transports can wait (see src/transports.ts).
 */
export function when(): 'now' {
  return 'now';
}
