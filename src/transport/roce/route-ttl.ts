/**
 * The hop limit a unicast RoCE datagram leaves with. The kernel does not use the address
 * handle's: when a QP is moved to RTR or an address handle is made for a RoCE port, it resolves
 * the destination (core/verbs.c ib_resolve_eth_dmac → ib_resolve_unicast_gid_dmac →
 * rdma_addr_find_l2_eth_by_grh) and writes the route's hop limit into the GRH, so rxe sends every
 * unicast datagram with the route's TTL (64 by default) whatever the application asked
 * (ibv_rc_pingpong asks 1; a capture of rxe shows 64). Multicast keeps the handle's.
 *
 * The route's hop limit here is the system's default (IPv4 `net.ipv4.ip_default_ttl`, IPv6 the
 * interface's `hop_limit`), read once per family and interface; a route with a hop limit metric
 * of its own is not looked at.
 */
import { readFileSync } from 'node:fs';

/** Linux's default TTL / hop limit, where the sysctl cannot be read. */
const DEFAULT_HOP_LIMIT = 64;

const cache = new Map<string, number>();

function sysctl(path: string): number {
  try {
    const v = Number(readFileSync(path, 'utf8').trim());
    return Number.isInteger(v) && v > 0 && v < 256 ? v : DEFAULT_HOP_LIMIT;
  } catch {
    return DEFAULT_HOP_LIMIT;
  }
}

/** The route's hop limit for unicast datagrams of `family` leaving interface `ifname`. */
export function routeHopLimit(family: 4 | 6, ifname: string): number {
  const key = `${family}/${ifname}`;
  let v = cache.get(key);
  if (v === undefined) {
    v = family === 4 ? sysctl('/proc/sys/net/ipv4/ip_default_ttl') : sysctl(`/proc/sys/net/ipv6/conf/${ifname.replace(/[/.]/g, '_')}/hop_limit`);
    cache.set(key, v);
  }
  return v;
}
