// perftest's latency row arithmetic (src/cli/perftest/report.ts latRow, after perftest's
// print_report_lat): the median, the two slowest samples left out, and the standard deviation
// summed in ints, whose overflow perftest prints as -nan (seen from the kernel's ib_write_lat on
// the reference VM, with a 102 ms outlier).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { latRow } from '../../../dist/cli/perftest/report.js';
import { parsePerfArgs, Verb, Test } from '../../../dist/cli/perftest/params.js';

const params = parsePerfArgs('ib_send_lat', Verb.SEND, Test.LAT, ['-n', '10']).params;

/** Post times (ns) whose successive gaps are `gapsUsec` round trips. */
function posts(gapsUsec) {
  const t = new Float64Array(gapsUsec.length + 1);
  for (let i = 0; i < gapsUsec.length; i++) t[i + 1] = t[i] + gapsUsec[i] * 1000;
  return t;
}

test('a latency row: half round trips; min, median and average over all but the two slowest, max the first of those', () => {
  // Round trips of 10..90 µs, then 900 and 1000 left out: one-way 5..45 µs. perftest's t_max is
  // delta[measure_cnt], the sample just past the kept ones: 900 / 2.
  const row = latRow(params, 2, posts([10, 20, 30, 40, 50, 60, 70, 80, 90, 900, 1000]), 12);
  const f = row.trim().split(/\s+/);
  assert.deepEqual(f.slice(0, 6), ['2', '12', '5.00', '450.00', '25.00', '25.00']);
  assert.ok(row.endsWith('\n'));
});

test('a deviation whose square passes an int makes the standard deviation -nan, as perftest prints it', () => {
  const row = latRow(params, 2, posts([100, 100, 100, 100, 100, 100, 200000, 1e6, 1e6]), 10);
  assert.match(row, /\t-nan {3}\t\t/);
});
