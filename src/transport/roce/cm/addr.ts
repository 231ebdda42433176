/**
 * Addresses as the RoCE CM meets them (cma.c's IBoE address and route side): the family of a
 * socket address, the wildcard, the soft RoCE device of an id's context, the address handle of a
 * RoCEv2 path (`cma_resolve_iboe_route`: GIDs from the IP addresses, hop limit 64) and GIDs from
 * the CMA header's address bytes.
 */
import { err } from '../../../errors.js';
import type { AhAttr } from '../../../verbs/ah.js';
import type { Context } from '../../../verbs/context.js';
import type { SockAddr } from '../../../cm/transport.js';
import { RoceDevice } from '../device.js';
import { gidFromIp } from '../gid.js';
import { RXE_PROVIDER } from '../provider.js';

/** The hop limit of RoCEv2 paths and groups (rdma_cm: `IPV6_DEFAULT_HOPLIMIT`). */
export const HOP_LIMIT = 64;

export function familyOf(a: SockAddr): 4 | 6 {
  return a.address.includes(':') ? 6 : 4;
}

export function isAnyAddr(ip: string): boolean {
  return ip === '0.0.0.0' || ip === '::' || ip === '';
}

/** The soft RoCE device of a context. */
export function devOf(ctx: Context | null, op: string): RoceDevice {
  if (!ctx || ctx.device.provider !== RXE_PROVIDER) throw err('EINVAL', op, 'id not on a soft RoCE device');
  return RoceDevice.of(ctx.device.info);
}

/** The address handle attributes from local address `local` to `remote` on `dev`. */
export function ahTo(dev: RoceDevice, local: string, remote: string, family: 4 | 6, tos: number): AhAttr {
  const sg = dev.gidOfIp(local, family) ?? dev.gids.find((e) => e.family === family && e.index > 0) ?? dev.gids[0];
  return {
    isGlobal: true,
    portNum: 1,
    grh: { dgid: gidFromIp(remote) ?? new Uint8Array(16), flowLabel: 0, sgidIndex: sg?.index ?? 0, hopLimit: HOP_LIMIT, trafficClass: tos > 0 ? tos : 0 },
  };
}

/** 16 address bytes, or 4 for IPv4, as a GID. */
export function gidFromBytes(b: Uint8Array): Uint8Array {
  if (b.length === 16) return Uint8Array.from(b);
  const g = new Uint8Array(16);
  g[10] = 0xff;
  g[11] = 0xff;
  g.set(b, 12);
  return g;
}
