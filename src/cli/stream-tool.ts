/**
 * What rstream and riostream share, as rstream.c and riostream.c repeat it: the test series
 * (rstream.c `test_size[]`, its counts), the result table (its header, show_perf's row and this
 * port's `--json` row), the options and globals both read alike ({@link StreamTool}), their long
 * options, and the interrupt budget of the series' bandwidth phase.
 */
import { V8_INTERRUPT_BUDGET, setInterruptBudget } from './startup.js';
import { MSG_DONTWAIT } from './rs-api.js';
import { Errno } from './api.js';
import { atoi, cMalloc, errOut, out, perrorN, progName } from './c-compat.js';
import { takeLongOptions } from './getopt.js';
import { BytePattern, cntStr, sizeStr, sizeToCount } from './common.js';

// -- the test series (rstream.c test_size[]) -----------------------------------------------------

/** {size, option}: option 0 sizes run by default, option 1 only with `-S all`. */
export const TEST_SIZES: readonly { size: number; option: number }[] = (() => {
  const t: { size: number; option: number }[] = [{ size: 1 << 6, option: 0 }];
  for (let s = 7; s <= 22; s++) {
    const opt = s === 12 || s === 16 || s === 20 ? 0 : 1;
    t.push({ size: 1 << s, option: opt });
    t.push({ size: (1 << s) + (1 << (s - 1)), option: 1 });
  }
  return t;
})();

/**
 * `RSTREAM_COUNT_DIVISOR=n` divides the default series' iteration/transfer counts (tests only;
 * the C tool has no such knob and the default is 1).
 */
const COUNT_DIVISOR = Math.max(1, Math.trunc(Number(process.env['RSTREAM_COUNT_DIVISOR'] ?? 1)) || 1);
/** size_to_count() of the default series, divided by {@link COUNT_DIVISOR}. */
export function seriesCount(size: number): number {
  return Math.max(1, Math.trunc(sizeToCount(size) / COUNT_DIVISOR));
}

// -- printf pieces ------------------------------------------------------------------------------

/** printf `%.<d>f` with glibc's rounding (exact value, ties to even) and inf/nan spellings. */
export function fmtF(x: number, d: number): string {
  if (Number.isNaN(x)) return '-nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  const exact = Math.abs(x).toFixed(Math.min(100, d + 30));
  const cut = exact.indexOf('.') + 1 + d;
  const rest = exact.slice(cut);
  let s = x.toFixed(d);
  if (/^50*$/.test(rest)) {
    // An exact tie: round half to even, as glibc does.
    const head = exact.slice(0, cut);
    const lastDigit = Number(head.replace('.', '').slice(-1));
    const down = (x < 0 ? '-' : '') + (head.endsWith('.') ? head.slice(0, -1) : head);
    if (lastDigit % 2 === 0) s = down;
  }
  if (s === '-0' || /^-0\.0*$/.test(s)) s = s.slice(1);
  return s;
}

/** `%-<w>s`. */
function left(s: string, w: number): string {
  return s.padEnd(w);
}
/** `%<w>s`. */
function right(s: string, w: number): string {
  return s.padStart(w);
}

/** The table header line. */
export const HEADER = `${left('name', 10)}${left('bytes', 8)}${left('xfers', 8)}${left('iters', 8)}${left('total', 8)}${right('time', 8)} ${right('Gb/sec', 10)}${right('usec/xfer', 13)}\n`;

/** One measured test. */
export interface PerfRow {
  name: string;
  transferSize: number;
  transferCount: number;
  iterations: number;
  /** Elapsed microseconds (an integer, as gettimeofday differences are). */
  usec: number;
}

/** show_perf(): the row text, with the C code's float arithmetic. */
export function formatRow(r: PerfRow): string {
  const usec = Math.fround(r.usec);
  const bytes = r.iterations * r.transferCount * r.transferSize * 2;
  const secs = usec / 1000000;
  const gbps = (bytes * 8) / (1000 * usec);
  const per = Math.fround(Math.fround(usec / r.iterations) / (r.transferCount * 2));
  return (
    left(r.name.slice(0, 9), 10) +
    left(sizeStr(r.transferSize), 8) +
    left(cntStr(r.transferCount), 8) +
    left(cntStr(r.iterations), 8) +
    left(sizeStr(bytes), 8) +
    `${right(fmtF(secs, 2), 8)}s${right(fmtF(gbps, 2), 10)}${right(fmtF(per, 2), 11)}\n`
  );
}

/** The `--json` object of a row. */
export function jsonRow(r: PerfRow, extra: Record<string, unknown>): string {
  const usec = Math.fround(r.usec);
  const bytes = r.iterations * r.transferCount * r.transferSize * 2;
  const round = (v: number): number | null => (Number.isFinite(v) ? Math.round(v * 1e4) / 1e4 : null);
  return (
    JSON.stringify({
      name: r.name,
      bytes: r.transferSize,
      xfers: r.transferCount,
      iters: r.iterations,
      total: bytes,
      usec: r.usec,
      time_s: round(usec / 1e6),
      gbps: round((bytes * 8) / (1000 * usec)),
      usec_per_xfer: round(Math.fround(Math.fround(usec / r.iterations) / (r.transferCount * 2))),
      ...extra,
    }) + '\n'
  );
}

/** What the socket options favour (rstream.c's `optimization`). */
export enum Optimization {
  MIXED = 0,
  LATENCY = 1,
  BANDWIDTH = 2,
}

/**
 * What rstream.c and riostream.c both keep in globals (the same names and defaults in both), and
 * their shared printing of a result row and setting up of a series test.
 */
export abstract class StreamTool {
  /** What the socket options favour: set_options() per test phase (-T's mixed for a custom test). */
  optimization = Optimization.MIXED;
  useAsync = false;
  verify = false;
  flags = MSG_DONTWAIT;
  pollTimeout = 0;
  custom = false;
  sizeOption = 0;
  iterations = 1;
  transferSize = 1000;
  transferCount = 1000;
  bufferSize = 0;
  inlineSize = 64;
  testName = 'custom';
  port = '7471';
  dstAddr: string | null = null;
  srcAddr: string | null = null;
  numericHost = false;
  gidFormat = false;
  json = false;
  /** `--warmup N`: untimed messages each way before every test (0: none, as in rdma-core). */
  warmup = 0;
  buf: Buffer = Buffer.alloc(0);
  pattern = new BytePattern();

  /**
   * run()'s `buf = malloc(...)`: the largest size of the series, or the custom transfer size (a
   * C int: a negative one cannot be allocated). False after `malloc: Cannot allocate memory`.
   */
  allocBuf(): boolean {
    const b = cMalloc(!this.custom ? (TEST_SIZES[TEST_SIZES.length - 1] as { size: number }).size : this.transferSize);
    if (!b) {
      perrorN('malloc', Errno.ENOMEM);
      return false;
    }
    // The sync messages are 16 bytes (the C tools read and write past a smaller buffer).
    this.buf = b.length >= 16 ? b : Buffer.alloc(16);
    return true;
  }

  /** The `transport` and `tool` of a `--json` row. */
  protected abstract perfTags(): { transport: string; tool: string };
  /** sync_test(): a 16-byte exchange each way. 0, or what failed. */
  abstract syncTest(): Promise<number>;
  /** set_test_opt(): one `-T` letter or word; false for one the tool does not know. */
  abstract setTestOpt(arg: string): boolean;

  /**
   * The short options rstream and riostream read alike (-s -b -B -i -I -C -S -p, and -T through
   * {@link setTestOpt}): the value is stored; false for an option this does not take, or a -T
   * value the tool does not know (both print the usage).
   */
  setOption(opt: string, a: string): boolean {
    switch (opt) {
      case 's':
        this.dstAddr = a;
        return true;
      case 'b':
        this.srcAddr = a;
        return true;
      case 'B':
        this.bufferSize = atoi(a);
        return true;
      case 'i':
        this.inlineSize = atoi(a);
        return true;
      case 'I':
        this.custom = true;
        this.iterations = atoi(a);
        return true;
      case 'C':
        this.custom = true;
        this.transferCount = atoi(a);
        return true;
      case 'S':
        if (a.slice(0, 3).toLowerCase() === 'all') this.sizeOption = 1;
        else {
          this.custom = true;
          this.transferSize = atoi(a);
        }
        return true;
      case 'p':
        this.port = a;
        return true;
      case 'T':
        return this.setTestOpt(a);
      default:
        return false;
    }
  }

  /**
   * `--warmup N` (this port's): before a test, a sync (so its short messages are warmed too), then
   * N untimed messages each way in blocks of the transfer count (of one with `-C 0` or below), each
   * block run by `block(k)` as a timed iteration of k messages would be. The timed part then
   * measures the compiled data path rather than V8 compiling it. Both peers must be given the same
   * N: each side counts the messages it expects. 0, or what failed.
   */
  async warmupBlocks(block: (k: number) => Promise<number>): Promise<number> {
    if (this.warmup <= 0) return 0;
    let ret = await this.syncTest();
    const most = Math.max(1, this.transferCount);
    for (let left = this.warmup; left > 0 && !ret; left -= most) ret = await block(Math.min(left, most));
    return ret;
  }

  /**
   * show_perf: one table row (or one JSON object with --json, which also gives the CPU time this
   * process spent in the timed part, `cpu` being process.cpuUsage() taken where timing started).
   */
  showPerf(usec: number, cpu?: NodeJS.CpuUsage): void {
    const row: PerfRow = { name: this.testName, transferSize: this.transferSize, transferCount: this.transferCount, iterations: this.iterations, usec };
    if (this.json) {
      const used = cpu ? process.cpuUsage(cpu) : null;
      out(jsonRow(row, { role: this.dstAddr ? 'client' : 'server', ...this.perfTags(), ...(used ? { cpu_user_usec: used.user, cpu_sys_usec: used.system } : {}) }));
    } else out(formatRow(row));
  }
  /** init_latency_test. */
  initLatencyTest(size: number): void {
    this.testName = `${sizeStr(size)}_lat`;
    this.transferCount = 1;
    this.transferSize = size;
    this.iterations = seriesCount(size);
  }
  /** init_bandwidth_test. */
  initBandwidthTest(size: number): void {
    this.testName = `${sizeStr(size)}_bw`;
    this.iterations = 1;
    this.transferSize = size;
    this.transferCount = seriesCount(size);
  }
}

/**
 * This port's long options of rstream and riostream, `--json` and `--warmup N`, taken out of
 * `argv`; what is left goes to the tool's getopt string. A bad `--warmup` prints an error and the
 * usage (null).
 */
export function streamLongOptions(t: StreamTool, argv: readonly string[], tool: string, usageText: (prog: string) => string): string[] | null {
  const long = takeLongOptions(argv, ['json'], ['warmup']);
  if (long.bad) {
    errOut(`${tool}: --warmup needs a number of messages\n`);
    out(usageText(progName(tool)));
    return null;
  }
  t.json = long.flags.has('json');
  t.warmup = long.values.get('warmup') ?? 0;
  return long.args;
}

/**
 * The interrupt budget of the default series' bandwidth phase over rsockets (a one-shot run):
 * 64 times V8's default, `RDMACM_JIT_BW_BUDGET=<n>` (0: V8's). Its rows are short (1000 × 64 KiB,
 * 100 × 1 MiB), and the functions first hot in them (zero-copy segmentation, direct placement,
 * credit grants) were compiled by TurboFan while they ran: compile jobs on the CPU the transfer
 * needs, for code that had little left to run. With the higher budget those functions stay in
 * baseline code through the phase (docs/design/performance.md, "Cold start"). Steady runs (`-S`/`-C`) and the
 * latency phase keep V8's budget.
 */
export function bandwidthPhaseBudget(): void {
  setInterruptBudget(64 * V8_INTERRUPT_BUDGET, 'RDMACM_JIT_BW_BUDGET');
}
