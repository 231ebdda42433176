/**
 * The interface index of a network interface, as the kernel numbers it (`if_nametoindex`), for
 * the `ndev_ifindex` of GID table entries.
 */
import { readFileSync } from 'node:fs';

/**
 * The interface index of `ifname` (`/sys/class/net/<if>/ifindex`, the `ndev_ifindex` of a GID
 * entry); 0 when it cannot be read.
 */
export function ifindexOf(ifname: string): number {
  if (ifname === '' || ifname.includes('/') || ifname === '.' || ifname === '..') return 0;
  try {
    const v = Number(readFileSync(`/sys/class/net/${ifname}/ifindex`, 'utf8').trim());
    return Number.isInteger(v) && v > 0 ? v : 0;
  } catch {
    return 0;
  }
}
