/**
 * Which CM transports an rdma_listen listens through: an id bound to a device, its device's
 * transport; a wildcard, every transport serving the id's port space (the kernel's
 * `cma_listen_on_all`: one listen per device), less one another supersedes and those of devices
 * other than the pinned one.
 */
import { err } from '../errors.js';
import type { Context } from '../verbs/context.js';
import { getDeviceList } from '../verbs/device.js';
import type { PortSpace } from './port-space.js';
import { listCmTransports, servesPortSpace, type CmTransport } from './transport.js';

/**
 * The transports for a listen of port space `ps` by an id on `verbs` with `transport` (or on no
 * device), pinned to `pin`; EOPNOTSUPP if none serves the port space.
 */
export function listenTransports(verbs: Context | null, transport: CmTransport | null, ps: PortSpace, pin: string | undefined, op: string): CmTransport[] {
  if (verbs) {
    if (!transport) throw err('EOPNOTSUPP', op, `no CM transport for ${verbs.device.name}`);
    if (!servesPortSpace(transport, ps)) throw err('EOPNOTSUPP', op, `${transport.name} does not serve port space 0x${ps.toString(16)}`);
    return [transport];
  }
  let ts = listCmTransports().filter((t) => servesPortSpace(t, ps));
  // Two transports that need the same port (the kernel's iWARP and the soft one both listen
  // on the TCP port): the one that supersedes the other listens alone.
  ts = ts.filter((t) => !ts.some((o) => o !== t && o.supersedes?.(t) === true));
  if (pin !== undefined) {
    const provider = getDeviceList().find((d) => d.name === pin)?.provider;
    ts = ts.filter((t) => t.provider === provider);
  }
  if (ts.length === 0) throw err('EOPNOTSUPP', op, `no CM transport serves port space 0x${ps.toString(16)}`);
  return ts;
}
