/**
 * Addresses as the RoCE CM meets them (cma.c's IBoE address and route side): the family of a
 * socket address, the wildcard, the soft RoCE device of an id's context, the address handle of a
 * RoCEv2 path (`cma_resolve_iboe_route`: GIDs from the IP addresses, hop limit 64) and GIDs from
 * the CMA header's address bytes; where an rdma_connect goes from and the CMA header it sends.
 */
import { err } from '../../../errors.js';
import type { AhAttr } from '../../../verbs/ah.js';
import type { Context } from '../../../verbs/context.js';
import { IB_RATE_PORT_CURRENT, PATH_FLAGS_PRIMARY, ROCE_PKEY, SA_SELECTOR_EXACTLY, type CmHost, type ConnectRequest, type SaPathRec, type SockAddr } from '../../../cm/transport.js';
import { encodeCmaPrivateData } from '../../../wire/roce/index.js';
import { RoceDevice } from '../device.js';
import { ipBytes } from '../ip-addr.js';
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

/** What differs between the RoCEv2 path records of two routes. */
export interface IboePath {
  local: string;
  remote: string;
  flowLabel: number;
  trafficClass: number;
  /** `enum ibv_mtu`. */
  mtu: number;
  packetLifeTime: number;
}

/**
 * The path record of a RoCEv2 route (cma.c `cma_resolve_iboe_route`, as librdmacm's
 * `ucma_convert_path` hands it over): the GIDs of the IP addresses, hop limit 64, reversible,
 * P_Key 0xFFFF, SL 0 (no VLAN priority), the port's MTU and current rate, selectors "exactly".
 */
export function iboePathRec(p: IboePath): SaPathRec {
  return {
    dgid: gidFromIp(p.remote) ?? new Uint8Array(16),
    sgid: gidFromIp(p.local) ?? new Uint8Array(16),
    dlid: 0,
    slid: 0,
    rawTraffic: 0,
    flowLabel: p.flowLabel,
    hopLimit: HOP_LIMIT,
    trafficClass: p.trafficClass,
    reversible: 1,
    numbPath: 1,
    pkey: ROCE_PKEY,
    sl: 0,
    mtuSelector: SA_SELECTOR_EXACTLY,
    mtu: p.mtu,
    rateSelector: SA_SELECTOR_EXACTLY,
    rate: IB_RATE_PORT_CURRENT,
    packetLifeTimeSelector: SA_SELECTOR_EXACTLY,
    packetLifeTime: p.packetLifeTime,
    preference: PATH_FLAGS_PRIMARY & 0xff,
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

/** Where an rdma_connect goes from: the id's device, the address family and the local address. */
export interface ConnectFrom {
  dev: RoceDevice;
  family: 4 | 6;
  local: string;
}

/**
 * The device, family and local address of `req` on the id of `host` (a wildcard source: the
 * id's local address). EINVAL when the id is not on a soft RoCE device or has no local address.
 */
export function connectFrom(host: CmHost, req: ConnectRequest, op: string): ConnectFrom {
  const dev = devOf(host.context, op);
  const family = familyOf(req.dst);
  const local = isAnyAddr(req.src.address) ? (host.localAddr?.address ?? '') : req.src.address;
  if (!local || isAnyAddr(local)) throw err('EINVAL', op, 'no local address');
  return { dev, family, local };
}

/** The private data of a REQ or SIDR_REQ: the CMA header (addresses, source port), then `user`. */
export function cmaPrivateData(from: ConnectFrom, dst: string, srcPort: number, user: Uint8Array): Uint8Array {
  const { family } = from;
  return encodeCmaPrivateData({ version: 0, ipVersion: family, srcPort, src: ipBytes(from.local, family), dst: ipBytes(dst, family) }, user);
}
