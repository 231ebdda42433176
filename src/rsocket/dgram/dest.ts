/**
 * Where a datagram rsocket sends (rsocket.c's `struct ds_dest` and the `dest_map` tree): one entry
 * per remote rsocket address, naming the local QP that sends to it and — once the peer's UDP
 * service has told us its QP — the address handle and QP number of the peer's QP. Until then
 * datagrams to it go over UDP.
 */
import type { SockAddr } from '../../cm/index.js';
import type { Ah } from '../../verbs/index.js';
import { ipKey } from '../../util/ip.js';
import type { DsQp } from './qp.js';

/** `struct ds_dest`. */
export interface DsDest {
  /** The map key of {@link addr} ({@link destKey}); '' for a QP's own destination. */
  key: string;
  /** The remote rsocket's address (its UDP socket's). */
  addr: SockAddr;
  /** The local QP sending to it. */
  qp: DsQp;
  /** The address handle of the peer's QP, null until its UDP service answered. */
  ah: Ah | null;
  /** The peer's QP number (valid with {@link ah}). */
  qpn: number;
}

/**
 * The key ds_compare_addr compares by: the address (canonical, so `::ffff:10.0.0.1` and
 * `10.0.0.1` are one) and the port.
 */
export function destKey(a: SockAddr): string {
  return `${ipKey(a.address) ?? a.address}|${a.port}`;
}

/** `rs->dest_map`. */
export class DsDestMap {
  private readonly map = new Map<string, DsDest>();

  find(a: SockAddr): DsDest | undefined {
    return this.map.get(destKey(a));
  }

  /** Add `d` unless its address is there already; the entry in the map either way. */
  insert(d: DsDest): DsDest {
    const had = this.map.get(d.key);
    if (had) return had;
    this.map.set(d.key, d);
    return d;
  }

  values(): IterableIterator<DsDest> {
    return this.map.values();
  }

  clear(): void {
    this.map.clear();
  }
}
