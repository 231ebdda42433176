/**
 * The local port of an rdma_cm id that connects without having bound one.
 *
 * The kernel's rdma_resolve_addr binds an unbound id to port 0, which cma_alloc_any_port
 * (drivers/infiniband/core/cma.c) turns into a random port of the local port range
 * (`net.ipv4.ip_local_port_range`). Over RoCE that port is on the wire twice: in the CMA header of
 * the REQ / SIDR_REQ (the passive side's view of its peer's address) and in the flow label of the
 * path (`cma_get_roce_udp_flow_label`: source port × 31 + destination port), from which a kernel
 * rxe peer derives the UDP source port of the connection's packets.
 */
import { readFileSync } from 'node:fs';
import { random } from '../../util/random.js';

/** Linux's default `ip_local_port_range`. */
const DEFAULT_RANGE: readonly [number, number] = [32768, 60999];

let range: readonly [number, number] | null = null;

/** The local port range of this network namespace (read once; Linux's default elsewhere). */
export function localPortRange(): readonly [number, number] {
  if (range) return range;
  let r = DEFAULT_RANGE;
  try {
    const [lo = 0, hi = 0] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'latin1').trim().split(/\s+/).map(Number);
    if (Number.isInteger(lo) && Number.isInteger(hi) && lo >= 1 && lo <= hi && hi <= 65535) r = [lo, hi];
  } catch {
    /* not Linux: the default */
  }
  range = r;
  return r;
}

/** A random port of the local port range, as cma_alloc_any_port picks one. */
export function ephemeralPort(): number {
  const [lo, hi] = localPortRange();
  return random.between(lo, hi);
}
