/**
 * Per-device counters of the soft iWARP device, read with `iwarpCounters(deviceName)` or, for
 * any device, `Context.queryCounters()` (the equivalent of `rdma statistic show link DEV/1`).
 *
 * Linux siw has no hw counters. The names follow those the kernel's iWARP NICs show where a
 * meaning matches (irdma and i40iw `irdma_hw_stat_names`: `iwOutRdmaSends` ...); the rest name
 * what only the MPA/DDP/RDMAP layers of a soft device see, in the same style. A counter the
 * device cannot count (TCP segments and retransmissions: the kernel's TCP does them) is not
 * listed. docs/counters.md gives each name's meaning.
 */

/** The counter names, in the order they are listed. */
export const IWARP_COUNTER_NAMES = [
  // RDMAP messages, as irdma counts them (a message, whatever its number of FPDUs)
  'iwOutRdmaSends',
  'iwOutRdmaWrites',
  'iwOutRdmaReads',
  'iwInRdmaSends',
  'iwInRdmaWrites',
  'iwInRdmaReads',
  // Send with Invalidate received that invalidated an STag (irdma's iwRdmaInv counts the
  // invalidations its RNIC performs)
  'iwRdmaInv',
  // the MPA stream: FPDUs and their bytes (header, payload, pad and CRC) handed to TCP and
  // received from it once the connection is in RDMA mode
  'mpaOutFpdus',
  'mpaInFpdus',
  'mpaOutOctets',
  'mpaInOctets',
  // FPDUs received with a bad MPA CRC (each ends the connection with a TERMINATE)
  'mpaCrcErrors',
  // TERMINATE messages sent and received, and the errors that made this device send one, by the
  // layer that found them (RFC 5040 TERMINATE layer: RDMAP, DDP, LLP/MPA)
  'iwTerminatesSent',
  'iwTerminatesRcvd',
  'rdmapErrors',
  'ddpErrors',
  'llpErrors',
  // fault injection (faults.ts, RDMACM_IWARP_FAULTS): FPDUs of this device's connections written
  // late, stalls begun, connections reset, FPDUs sent with a wrong MPA CRC
  'inject_delay',
  'inject_stall',
  'inject_reset',
  'inject_crc',
] as const;

/** One counter name. */
export type IwarpCounterName = (typeof IWARP_COUNTER_NAMES)[number];

/** Counter indexes by name, for the data path (`c.add(IC.mpaOutFpdus)`). */
export const IC: Readonly<Record<IwarpCounterName, number>> = Object.freeze(
  Object.fromEntries(IWARP_COUNTER_NAMES.map((n, i) => [n, i])) as Record<IwarpCounterName, number>,
);

/** Each counter's low word holds its value's low 30 bits; the high word, the value over 2^30. */
const LOW_BITS = 30;
const LOW_MASK = 2 ** LOW_BITS - 1;

/**
 * The counters of one device. Each is two 32-bit words, the low one kept below 2^30: a word
 * loaded from a Uint32Array is then a small integer, and so is its sum with a count below 2^30,
 * where a load from a Float64Array is a new heap number in baseline code (which a short run
 * executes throughout), and so is the sum — two allocations per count, some twenty per rping
 * iteration. The carry into the high word is arithmetic, not a branch, and no sum ever leaves the
 * small integers: optimised code compiled early in a run never meets a case it has not seen (an
 * octet count passing 2^31, after 2 GiB, would otherwise throw the data path's code away).
 */
export class IwarpCounters {
  /** Low 30 bits of each counter, indexed by {@link IC}. */
  private readonly lo = new Uint32Array(IWARP_COUNTER_NAMES.length);
  /** Each counter's value over 2^30. */
  private readonly hi = new Uint32Array(IWARP_COUNTER_NAMES.length);

  /**
   * Add `n` (default 1) to counter `i` (an index from {@link IC}). `n` is a non-negative integer
   * below 2^31 (the bytes of one read or write at most).
   */
  add(i: number, n = 1): void {
    const s = (this.lo[i] as number) + n;
    this.lo[i] = s & LOW_MASK;
    this.hi[i] = (this.hi[i] as number) + (s >>> LOW_BITS);
  }

  /** Counter `i`'s value. */
  value(i: number): number {
    return (this.hi[i] as number) * 2 ** LOW_BITS + (this.lo[i] as number);
  }

  /** Every counter by name (a copy). */
  snapshot(): Record<IwarpCounterName, number> {
    const out = {} as Record<IwarpCounterName, number>;
    for (let i = 0; i < IWARP_COUNTER_NAMES.length; i++) out[IWARP_COUNTER_NAMES[i] as IwarpCounterName] = this.value(i);
    return out;
  }
}

const byDevice = new Map<string, IwarpCounters>();

/**
 * The counters of device `name`, made on first use: they count for the life of the process,
 * across the device's contexts (the kernel keeps a device's hw counters until it is removed).
 */
export function iwarpDeviceCounters(name: string): IwarpCounters {
  let c = byDevice.get(name);
  if (c === undefined) {
    c = new IwarpCounters();
    byDevice.set(name, c);
  }
  return c;
}
