/**
 * What perftest prints (perftest_parameters.c `ctx_print_test_info`, `print_report_bw`,
 * `print_full_bw_report`, `print_report_lat`; perftest_communication.c `ctx_print_pingpong_data`)
 * with its format strings (perftest_parameters.h `RESULT_*`, `REPORT_*`), and the arithmetic of its
 * figures. Times are "cycles" of a clock of {@link CYCLES_PER_USEC} per microsecond: this port's
 * clock is `process.hrtime` in nanoseconds, where perftest reads the CPU's time stamp counter and
 * divides by its MHz.
 */
import { Verb, Test, type PerfParams } from './params.js';
import type { PerfDest } from './exchange.js';

/** `get_cpu_mhz()` of this port's clock: nanoseconds, 1000 per microsecond. */
export const CYCLES_PER_USEC = 1000;

export const RESULT_LINE = '---------------------------------------------------------------------------------------\n';
export const RESULT_FMT = ' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]';
export const RESULT_FMT_G = ' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]';
export const RESULT_FMT_LAT = ' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ';
export const RESULT_FMT_LAT_DUR = ' #bytes        #iterations       t_avg[usec]    tps average';
export const RESULT_EXT = '\n';

const INT_MAX = 2147483647;
const INT_MIN = -2147483648;

/** `LAT_MEASURE_TAIL`: the slowest samples a latency report leaves out. */
const LAT_MEASURE_TAIL = 2;

const TESTS_STR = ['Send', 'RDMA_Write', 'RDMA_Read', 'Atomic'];
const ATOMIC_TYPES_STR = ['CMP_AND_SWAP', 'FETCH_AND_ADD'];

/** printf `%-W.Pf` (`P` undefined: `%-Wu`/`%-Wd`). */
export function left(v: number | bigint, w: number, p?: number): string {
  const s = p === undefined ? String(v) : fixed(Number(v), p);
  return s.padEnd(w, ' ');
}

/**
 * printf `%.Pf`, with C's spelling of infinities and NaN (the NaN here is sqrt of a negative,
 * which x86 makes with its sign bit set: glibc prints "-nan").
 */
export function fixed(v: number, p: number): string {
  if (Number.isNaN(v)) return '-nan';
  if (!Number.isFinite(v)) return v < 0 ? '-inf' : 'inf';
  return v.toFixed(p);
}

/** The state the banner and the address lines show. */
export interface BannerInfo {
  devName: string;
  /** `transport_str`: "IB" or "IW". */
  transport: string;
  /** `link_layer_str`: "IB" or "Ethernet". */
  linkLayer: string;
  /** The path MTU in bytes. */
  mtuBytes: number;
  inlineSize: number;
  outReads: number;
  gidIndex: number;
}

/** `ctx_print_test_info`. */
export function testInfo(p: PerfParams, b: BannerInfo): string {
  let s = RESULT_LINE;
  s += '                    ';
  s += `${TESTS_STR[p.verb]} `;
  if (p.verb === Verb.ATOMIC) s += `${ATOMIC_TYPES_STR[p.atomicType]} `;
  if (p.tst === Test.BW) s += 'BW ';
  else s += 'Latency ';
  s += 'Test\n';
  s += ` Dual-port       : OFF\t\tDevice         : ${b.devName}\n`;
  s += ` Number of qps   : ${p.numQps}\t\tTransport type : ${b.transport}\n`;
  s += ` Connection type : ${p.conn}\t\tUsing SRQ      : OFF\n`;
  // Debian's perftest is built with relaxed ordering support (HAVE_RO) and prints it ON.
  s += ' PCIe relax order: ON\n';
  s += ' ibv_wr* API     : OFF\n';
  if (p.servername !== null) s += ` TX depth        : ${p.txDepth}\n`;
  if (p.verb === Verb.SEND && p.servername === null) s += ` RX depth        : ${p.rxDepth}\n`;
  if (p.tst === Test.BW) s += ` CQ Moderation   : ${p.cqMod}\n`;
  s += ` Mtu             : ${b.mtuBytes}[B]\n`;
  s += ` Link type       : ${b.linkLayer}\n`;
  if (b.gidIndex !== -1) s += ` GID index       : ${b.gidIndex}\n`;
  if (p.verb !== Verb.READ && p.verb !== Verb.ATOMIC) s += ` Max inline data : ${b.inlineSize}[B]\n`;
  else s += ` Outstand reads  : ${b.outReads}\n`;
  s += ` rdma_cm QPs\t : ${p.rdmaCm ? 'ON' : 'OFF'}\n`;
  // -R makes both the QPs and the side channel rdma_cm's (`use_rdma_cm`).
  s += ` Data ex. method : ${p.rdmaCm ? 'rdma_cm' : 'Ethernet'}`;
  if (p.rdmaCm && p.servername === null) {
    s += '\n' + RESULT_LINE;
    s += ' Waiting for client rdma_cm QP to connect\n';
    s += ' Please run the same command with the IB/RoCE interface IP';
  }
  s += '\n' + RESULT_LINE;
  return s;
}

const h = (n: number | bigint, w: number): string => `0x${n.toString(16).padStart(w - 2, '0')}`;

/**
 * `ctx_print_pingpong_data`: `BASIC_ADDR_FMT` (`%#04x` etc.: zero-padded to the width, the "0x"
 * counted in it; a zero has no "0x"), the rkey and address for RDMA verbs, the out reads for
 * READ, then the GID in `PERF_GID_FMT` (decimal bytes) when a GID index is in use.
 */
export function destLines(side: 'local' | 'remote', d: PerfDest, verb: Verb, gidIndex: number): string {
  const alt = (n: number | bigint, w: number): string => (n === 0 || n === 0n ? '0'.repeat(w) : h(n, w));
  let s = ` ${side} address: LID ${alt(d.lid, 4)} QPN ${alt(d.qpn, 6)} PSN ${alt(d.psn, 6)}`;
  if (verb === Verb.READ || verb === Verb.ATOMIC) s += ` OUT ${alt(d.outReads, 4)}`;
  if (verb !== Verb.SEND) s += ` RKey ${alt(d.rkey, 8)} VAddr ${alt(d.vaddr, 16)}`;
  s += '\n';
  if (gidIndex > -1) s += ` GID: ${Array.from(d.gid, (x) => String(x).padStart(2, '0')).join(':')}\n`;
  return s;
}

/** The bandwidth header lines the tools print before their rows. */
export function bwHeader(p: PerfParams): string {
  return RESULT_LINE + (p.gbits ? RESULT_FMT_G : RESULT_FMT) + RESULT_EXT;
}

/** `struct bw_report_data` as this side computed it. */
export interface BwFigures {
  size: bigint;
  iters: bigint;
  bwPeak: number;
  bwAvg: number;
  msgRate: number;
}

/**
 * `print_report_bw`'s arithmetic over per-iteration post and completion times (`tposted`,
 * `tcompleted`, in cycles): the peak is the best rate over any window from a post to a moderated
 * completion, the average is over the whole run. `noPeak` (a SEND server, runs over 20000
 * iterations): no peak (0), the average from `tcompleted[0]`.
 */
export function bwFigures(p: PerfParams, size: number, tposted: Float64Array, tcompleted: Float64Array, n: number, noPeak: boolean): BwFigures {
  const formatFactor = p.gbits ? 125_000_000 : 0x100000;
  const cyclesToUnits = CYCLES_PER_USEC * 1_000_000;
  // cycles_t is unsigned: an unset first completion time makes the start value "infinite".
  let optDelta = tcompleted[0]! - tposted[0]! < 0 ? Number.POSITIVE_INFINITY : tcompleted[0]! - tposted[0]!;
  for (let i = 0; i < n && !noPeak; i++) {
    for (let j = Math.ceil((i + 1) / p.cqMod) * p.cqMod - 1; j < n; j += p.cqMod) {
      const t = Math.trunc((tcompleted[j]! - tposted[i]!) / (j - i + 1));
      if (t < optDelta) optDelta = t;
    }
    if (n % p.cqMod) {
      const j = n - 1;
      const t = Math.trunc((tcompleted[j]! - tposted[i]!) / (j - i + 1));
      if (t < optDelta) optDelta = t;
    }
  }
  const sum = tcompleted[noPeak ? 0 : n - 1]! - tposted[0]!;
  const bwAvg = (size * n * cyclesToUnits) / (sum * formatFactor);
  const msgRate = (n * cyclesToUnits) / (sum * 1_000_000);
  const bwPeak = noPeak ? 0 : (size * cyclesToUnits) / (optDelta * formatFactor);
  return { size: BigInt(size), iters: BigInt(n), bwPeak, bwAvg, msgRate };
}

/** `print_full_bw_report`: `REPORT_FMT` (or `REPORT_FMT_EXT` below 0.1 Gb/s) and `REPORT_EXT`. */
export function bwRow(p: PerfParams, r: BwFigures): string {
  if (p.gbits && r.bwAvg < 0.1) {
    return ` ${left(r.size, 7)}    ${r.iters}           ${left(r.bwPeak, 7, 6)}            ${left(r.bwAvg, 7, 6)}            ${left(r.msgRate, 7, 6)}\n`;
  }
  return ` ${left(r.size, 7)}    ${left(r.iters, 10)}       ${left(r.bwPeak, 7, 2)}            ${left(r.bwAvg, 7, 2)}\t\t   ${left(r.msgRate, 7, 6)}\n`;
}

/** The latency header lines. */
export function latHeader(p: PerfParams): string {
  return RESULT_LINE + (p.duration > 0 ? RESULT_FMT_LAT_DUR : RESULT_FMT_LAT) + RESULT_EXT;
}

/** `get_median` of a sorted array of `n` samples. */
function median(n: number, d: Float64Array): number {
  if ((n - 1) % 2) return Math.trunc((d[n >> 1]! + d[(n >> 1) - 1]!) / 2);
  return d[n >> 1]!;
}

/**
 * `print_report_lat` of an iteration run: the deltas between successive posts (`tposted`), halved
 * for a ping-pong (SEND, WRITE: one round trip is two latencies), sorted, the slowest
 * {@link LAT_MEASURE_TAIL} left out; min, max, median, average, standard deviation (perftest's:
 * each difference truncated to an int before squaring) and the 99 and 99.9 percentiles.
 */
export function latRow(p: PerfParams, size: number, tposted: Float64Array, iters: number): string {
  let cnt = iters - 1;
  const rtt = p.verb === Verb.READ || p.verb === Verb.ATOMIC ? 1 : 2;
  const q = CYCLES_PER_USEC * rtt;
  const delta = new Float64Array(cnt);
  for (let i = 0; i < cnt; i++) delta[i] = tposted[i + 1]! - tposted[i]!;
  delta.sort();
  cnt -= LAT_MEASURE_TAIL;
  const med = median(cnt, delta);
  let sum = 0;
  for (let i = 0; i < cnt; i++) sum += delta[i]! / q;
  const avg = sum / cnt;
  let var_ = 0;
  for (let i = 0; i < cnt; i++) {
    const t = Math.trunc(avg - delta[i]! / q);
    // `int pow_var = pow(temp_var, 2)`: a square beyond an int becomes INT_MIN (x86's
    // conversion), so one deviation over 46340 µs makes the sum negative and the deviation -nan.
    const sq = t * t;
    var_ += sq > INT_MAX ? INT_MIN : sq;
  }
  const stdev = Math.sqrt(var_ / cnt);
  const i99 = Math.ceil(cnt * 0.99);
  const i999 = Math.ceil(cnt * 0.999);
  return ` ${left(size, 7)} ${iters}          ${left(delta[0]! / q, 7, 2)}        ${left(delta[cnt]! / q, 7, 2)}      ${left(med / q, 7, 2)}  \t       ${left(avg, 7, 2)}     \t${left(stdev, 7, 2)}\t\t${left(delta[i99]! / q, 7, 2)} \t\t${left(delta[i999]! / q, 7, 2)}\n`;
}

/** `print_report_lat_duration`: average latency and transactions per second of a timed run. */
export function latDurationRow(p: PerfParams, size: number, iters: number, seconds: number): string {
  const rtt = p.verb === Verb.READ || p.verb === Verb.ATOMIC ? 1 : 2;
  const latency = (seconds * 1e6) / (iters * rtt);
  const tps = iters / seconds;
  return ` ${left(size, 7)}       ${iters}            ${left(latency, 7, 2)}        ${left(tps, 7, 2)}\n`;
}
