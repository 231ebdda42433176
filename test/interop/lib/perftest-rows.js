// perftest's result rows as the interop files check them (report.ts prints ours; perftest's
// print_report_bw / print_report_lat the kernel's), and what perftest prints when it could not
// measure its clock.
//
// perftest reads the CPU's cycle counter and converts with a frequency it measures at start
// (get_clock.c get_cpu_mhz); in a starved emulated guest the measurement can fail ("Correlation
// coefficient r^2: ... < 0.9" on stderr), get_cpu_mhz returns 0 and every latency figure of the
// run is `inf` (its standard deviation `-nan`; bandwidths 0.00). Such a row is accepted only with
// that line on the same side's stderr.

const FIG = '(\\d+\\.\\d\\d|inf)';

/** A bandwidth row of `size` bytes (a number or a regular expression's alternation) and `iters`. */
export const bwRowRe = (size, iters) => new RegExp(`^ ${size}\\s+${iters}\\s+\\d+\\.\\d\\d\\s+\\d+\\.\\d\\d *\\t\\t   \\d+\\.\\d{6}$`, 'm');

/** A latency row: min, max, typical, average, deviation (`-nan` when it overflows), 99 and 99.9 %. */
export const latRowRe = (size, iters) =>
  new RegExp(`^ ${size}\\s+${iters}\\s+(${FIG}\\s+){3}\\t\\s+${FIG}\\s+\\t(\\d+\\.\\d\\d|-nan)\\s*\\t\\t${FIG}\\s*\\t\\t${FIG} *$`, 'm');

const CLOCK_FAILED = /^Correlation coefficient r\^2: \S+ < 0\.9$/m;

/** Why a side's `inf` figures are not acceptable, or null: only perftest's failed clock explains them. */
export function infWithoutReason(out, err) {
  if (!/ inf /.test(out ?? '')) return null;
  return CLOCK_FAILED.test(err ?? '') ? null : 'inf figures without perftest\'s failed clock measurement on stderr';
}
