/**
 * Which device an rdma_cm_id uses. An address may belong to several devices (an iWARP and a RoCE
 * device on one interface, as `rdma link add` can put siw and rxe on the same netdev): the id
 * takes the device whose CM transport serves its port space (iWARP for RDMA_PS_TCP, RoCE for
 * RDMA_PS_UDP / RDMA_PS_IPOIB), in device-list order; if none serves it, the first device owning
 * the address (the id can bind, and then fails where the device cannot serve it, e.g. EOPNOTSUPP
 * creating a UD QP on iWARP). A pin — `createId(..., { device })`, or the `RDMACM_DEVICE`
 * environment variable as the default — restricts the choice to that device.
 */
import { findDevicesByAddress, type Device } from '../verbs/device.js';
import { netdevGeneration } from '../verbs/port-watch.js';
import { isLoopback } from './addr.js';
import { getCmTransport, servesPortSpace, type CmTransport } from './transport.js';
import type { PortSpace } from './port-space.js';

/**
 * Devices owning an address, remembered for as long as the providers keep their device lists
 * (1 s), or until a watched interface changes (port-watch.ts): every resolve, bind and incoming
 * connection asks, and the full lookup normalises every address of every device.
 */
const CACHE_MS = 1000;
const cache = new Map<string, { devs: Device[]; at: number; gen: number }>();

/** The devices owning local address `ip` (cached; see `findDevicesByAddress`). */
export function devicesOwning(ip: string): Device[] {
  const now = Date.now();
  const hit = cache.get(ip);
  if (hit && now - hit.at < CACHE_MS && hit.gen === netdevGeneration()) return hit.devs;
  const devs = findDevicesByAddress(ip);
  if (cache.size > 256) cache.clear();
  cache.set(ip, { devs, at: now, gen: netdevGeneration() });
  return devs;
}

/** Whether `ip` is a loopback address or one some device owns (a peer on this host). */
export function isLocalAddress(ip: string): boolean {
  return isLoopback(ip) || devicesOwning(ip).length > 0;
}

/** The CM transport of a device (its provider's), if any. */
export function transportOf(dev: Device): CmTransport | undefined {
  return getCmTransport(dev.provider);
}

/**
 * The device an id of port space `ps` uses for local address `ip`: the pinned one if it owns the
 * address, else the first owner whose transport serves `ps`, else the first owner.
 * @returns undefined when no device (or not the pinned one) owns `ip`.
 */
export function chooseDevice(ip: string, ps: PortSpace, pin: string | undefined): Device | undefined {
  const owners = devicesOwning(ip);
  if (pin !== undefined) return owners.find((d) => d.name === pin);
  for (const d of owners) {
    const t = transportOf(d);
    if (t !== undefined && servesPortSpace(t, ps)) return d;
  }
  return owners[0];
}

/**
 * The device of transport `t` owning `ip` (a listener placing an incoming request), honouring
 * the pin.
 */
export function deviceOfTransport(ip: string, t: CmTransport, pin: string | undefined): Device | undefined {
  return devicesOwning(ip).find((d) => d.provider === t.provider && (pin === undefined || d.name === pin));
}

/** `RDMACM_DEVICE`: the device name ids are pinned to unless `createId` says otherwise. */
export function defaultDevicePin(): string | undefined {
  const v = process.env['RDMACM_DEVICE'];
  return v === undefined || v === '' ? undefined : v;
}
