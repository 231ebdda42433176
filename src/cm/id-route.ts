/**
 * The route of one CM id (`struct rdma_route`, `id->route`) as librdmacm fills it from the
 * kernel's answer (librdmacm cma.c `ucma_query_route` over ucma.c `ucma_query_route`):
 *
 * - `addr`: the id's source and destination addresses, and `ibaddr` — the source and destination
 *   GIDs and the P_Key. RoCE (`ucma_copy_iboe_route`): the GIDs of the IP addresses
 *   (`rdma_ip2gid`: IPv4-mapped for IPv4) and P_Key 0xFFFF, or the path record's once there is
 *   one. iWARP (`ucma_copy_iw_route`): the link-layer GIDs of the device's address
 *   (`rdma_addr_get_sgid`: siw's GID, the interface MAC zero padded) and of the destination's,
 *   known here only when a local device owns the destination (zero otherwise); no P_Key (0).
 * - `pathRec` / `numPaths`: the path records. RoCE: one after rdma_resolve_route (cma.c
 *   `cma_resolve_iboe_route`), or from the connect request on a passive id; iWARP: none
 *   (`num_paths` 0: the route is the IP route).
 *
 * The path records come from the id's transport (`CmEndpoint.routePaths`); this file holds the
 * shapes and the parts every transport shares.
 */
import type { SockAddr } from './addr.js';

/** `struct ibv_sa_path_rec` as librdmacm fills `id->route.path_rec` (`ucma_convert_path`). */
export interface SaPathRec {
  /** Destination GID (16 bytes). */
  dgid: Uint8Array;
  /** Source GID (16 bytes). */
  sgid: Uint8Array;
  /** Destination and source LIDs (RoCE: 0). */
  dlid: number;
  slid: number;
  /** `raw_traffic` (always 0 from rdma_cm). */
  rawTraffic: number;
  /** 20-bit flow label (RoCEv2: from the rdma_cm ports, cma.c `cma_get_roce_udp_flow_label`). */
  flowLabel: number;
  hopLimit: number;
  trafficClass: number;
  /** 1: the path is reversible. */
  reversible: number;
  /** `numb_path` (1). */
  numbPath: number;
  pkey: number;
  /** Service level (4 bits). */
  sl: number;
  /** 2: exactly (`IB_SA_EQ`). */
  mtuSelector: number;
  /** `enum ibv_mtu` (1: 256 … 5: 4096). */
  mtu: number;
  rateSelector: number;
  /** `enum ibv_rate` (0: the port's current rate, `IB_RATE_PORT_CURRENT`). */
  rate: number;
  packetLifeTimeSelector: number;
  /** Packet lifetime exponent (4.096 µs · 2^n). */
  packetLifeTime: number;
  /** `preference`: the kernel's path flags, librdmacm keeps their low byte. */
  preference: number;
}

/** `struct rdma_route`. */
export interface RdmaRoute {
  addr: {
    srcAddr: SockAddr | null;
    dstAddr: SockAddr | null;
    /** `addr.ibaddr`: source and destination GIDs and the P_Key. */
    ibaddr: { sgid: Uint8Array; dgid: Uint8Array; pkey: number };
  };
  pathRec: SaPathRec[];
  numPaths: number;
}

/** `IB_SA_EQ`: a path record selector meaning "exactly". */
export const SA_SELECTOR_EXACTLY = 2;
/** `IB_RATE_PORT_CURRENT`: the rate of the port (RoCE paths, cma.c `cma_resolve_iboe_route`). */
export const IB_RATE_PORT_CURRENT = 0;
/** `IB_PATH_GMP | IB_PATH_PRIMARY | IB_PATH_BIDIRECTIONAL`: the flags ucma.c gives each path. */
export const PATH_FLAGS_PRIMARY = 0x01 | 0x02 | 0x08 | 0x20;
/** The P_Key of RoCE routes (`ucma_copy_iboe_route`, cma.c `cma_resolve_iboe_route`). */
export const ROCE_PKEY = 0xffff;

/**
 * `rdma_ip2gid`: the GID of an IP address (IPv4-mapped IPv6 for IPv4, the address itself for
 * IPv6); the zero GID for anything else.
 */
export function ipToGid(ip: string | undefined): Uint8Array {
  const g = new Uint8Array(16);
  if (ip === undefined) return g;
  ip = ip.split('%')[0] as string;
  const v4 = /^(?:::ffff:)?(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/i.exec(ip);
  if (v4) {
    g[10] = 0xff;
    g[11] = 0xff;
    for (let i = 0; i < 4; i++) g[12 + i] = Number(v4[i + 1]) & 0xff;
    return g;
  }
  if (!ip.includes(':')) return g;
  const [head = '', tail] = ip.split('::');
  const hs = head === '' ? [] : head.split(':');
  const ts = tail === undefined || tail === '' ? [] : tail.split(':');
  const words = tail === undefined ? hs : [...hs, ...new Array<string>(Math.max(0, 8 - hs.length - ts.length)).fill('0'), ...ts];
  if (words.length !== 8) return g;
  for (let i = 0; i < 8; i++) {
    const w = parseInt(words[i] as string, 16);
    if (!Number.isInteger(w) || w < 0 || w > 0xffff) return new Uint8Array(16);
    g[2 * i] = w >> 8;
    g[2 * i + 1] = w & 0xff;
  }
  return g;
}

/** A fresh copy of a path record (the caller may change what it gets). */
export function copyPathRec(p: SaPathRec): SaPathRec {
  return { ...p, dgid: Uint8Array.from(p.dgid), sgid: Uint8Array.from(p.sgid) };
}
