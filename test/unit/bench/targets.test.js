// The bench's reporting: spreads, ratios and CPU per operation of a compared row (bench/lib.js
// compare), and the targets table's verdicts (bench/targets.js). Pure functions over numbers; no
// speed is measured or asserted here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { compare, cpuMeter, fmtCompare, jsonCpuUs, pairTimedCpuUs, procCpuUs, spread } from '../../../bench/lib.js';
import { NOISY_ABOVE, TARGETS, formatTargets, judge, meets, noisy, verdict } from '../../../bench/targets.js';

test('spread: median, min, max and max/min of the finite runs; null for none', () => {
  assert.deepEqual(spread([3, 1, null, 2]), { n: 3, median: 2, min: 1, max: 3, rel: 3 });
  assert.deepEqual(spread([4, 2]), { n: 2, median: 3, min: 2, max: 4, rel: 2 });
  assert.equal(spread([]), null);
  assert.equal(spread([null, NaN]), null);
  assert.equal(spread([0, 1]).rel, null);
});

test('compare: the ratio is the median of the rounds\' ratios, not the ratio of the medians', () => {
  // Round 2 slowed down both sides: its ratio is like the others'.
  const c = compare({ ours: [10, 30, 11], base: [5, 15, 5], oursCpu: [8, 9, 10], baseCpu: [4, 4, 4] });
  assert.equal(c.ratio, 2);
  assert.deepEqual(c.ratioRange, [2, 2.2]);
  assert.equal(c.ours.median, 11);
  assert.equal(c.base.rel, 3);
  assert.equal(c.cpu.ratio, 2.25);
  assert.equal(c.cpu.ours.median, 9);
  // A round where one side did not measure is left out of the ratio.
  const d = compare({ ours: [10, null], base: [5, 4] });
  assert.equal(d.ratio, 2);
  assert.equal(d.cpu.ratio, null);
  assert.match(fmtCompare(c), /rounds ours 11\.00 \[10\.00–30\.00\] base 5\.00 \[5\.00–15\.00\]; CPU us\/op ours 9\.0 \[8\.0–10\.0\] base 4\.0 \[4\.0–4\.0\] \(2\.25\)/);
  assert.match(fmtCompare(d), /; CPU -$/);
});

test('meets: <= and >= at, below and above the target; null without a ratio', () => {
  assert.equal(meets(1.15, '<=', 1.15), true);
  assert.equal(meets(1.16, '<=', 1.15), false);
  assert.equal(meets(0.9, '>=', 0.9), true);
  assert.equal(meets(0.89, '>=', 0.9), false);
  assert.equal(meets(null, '<=', 1), null);
  assert.equal(meets(Infinity, '<=', 1), null);
});

test('noisy: the baseline\'s max/min above the threshold; null with one round', () => {
  assert.equal(NOISY_ABOVE, 1.25);
  const c = (base) => compare({ ours: base.map((x) => x * 2), base });
  assert.equal(noisy(c([100, 110, 120])), false);
  assert.equal(noisy(c([100, 125])), false); // at the threshold: quiet
  assert.equal(noisy(c([100, 126])), true);
  assert.equal(noisy(c([100])), null);
  assert.equal(noisy(c([100, 126]), 1.5), false);
  // Our own spread does not make a row noisy: only the baseline's.
  assert.equal(noisy(compare({ ours: [1, 5], base: [10, 11] })), false);
});

test('verdict words', () => {
  assert.equal(verdict(true, false), 'met');
  assert.equal(verdict(false, false), 'not met');
  assert.equal(verdict(true, true), 'met, noisy');
  assert.equal(verdict(false, null), 'not met, 1 round');
  assert.equal(verdict(null, null), 'not run');
});

test('judge: every target of the issue, met / not met / not run, from a run\'s sections', () => {
  const quiet = compare({ ours: [40, 42, 41], base: [38, 40, 39], oursCpu: [30, 31, 30], baseCpu: [20, 20, 21] });
  const loud = compare({ ours: [20, 30, 25], base: [10, 20, 15] });
  const sections = {
    stream: { steady: [{ id: 'lat64', cmp: { soft: quiet, rio: loud } }] },
    roce: { mtuRate: { cmp: compare({ ours: [150], base: [100] }) } },
  };
  const rows = judge(sections);
  assert.equal(rows.length, TARGETS.length);
  assert.deepEqual(new Set(rows.map((r) => r.id)).size, TARGETS.length);
  const by = Object.fromEntries(rows.map((r) => [r.id, r]));
  // 41 / 39 ≈ 1.05 ≤ 1.15 on a quiet baseline.
  assert.equal(by['rstream-lat64'].met, true);
  assert.equal(by['rstream-lat64'].noisy, false);
  assert.equal(by['rstream-lat64'].verdict, 'met');
  assert.equal(by['rstream-lat64'].cpu.ratio, 1.5);
  assert.equal(by['rstream-lat64'].target, '<= 1.15');
  // 1.67 > 1.15 on a baseline that moved by 2×.
  assert.equal(by['riostream-lat64'].met, false);
  assert.equal(by['riostream-lat64'].verdict, 'not met, noisy');
  // >= 1.5 exactly, one round.
  assert.equal(by['roce-ud-4k'].met, true);
  assert.equal(by['roce-ud-4k'].verdict, 'met, 1 round');
  assert.equal(by['roce-ud-4k'].rounds, 1);
  // Sections that did not run.
  assert.equal(by['rping-warm'].verdict, 'not run');
  assert.equal(by['rping-warm'].ratio, null);
  assert.equal(by['native-pingpong'].met, null);
  // The cold/warm targets are "within 1.15 × of Node's own", written as a ratio >= 1/1.15.
  assert.equal(by['rstream-1m-coldwarm'].target, '>= 0.87');
  assert.equal(judge({}).every((r) => r.verdict === 'not run'), true);
});

test('formatTargets: a header, a column header and one line per target', () => {
  const rows = judge({ roce: { rtt: { cmp: compare({ ours: [90, 95], base: [50, 52], oursCpu: [100, 110], baseCpu: [50, 50] }) } } });
  const lines = formatTargets(rows);
  assert.equal(lines.length, 2 + TARGETS.length);
  assert.match(lines[0], /noisy/);
  const rtt = lines.find((l) => l.startsWith('RoCE UD 64 B RTT'));
  assert.match(rtt, /92\.5 us\s+51\.0 us\s+1\.81 \(1\.80–1\.83\)\s+<= 1\.2\s+not met\s+1\.04\s+105 · 50\.0 us\/RT\s+2\.10$/);
});

test('formatTargets: rates in thousands, ratios without a unit, bytes scaled to MB/s', () => {
  const rows = judge({
    roce: { mtuRate: { cmp: compare({ ours: [48866], base: [45842] }) }, rcWrite: { cmpIwarp: compare({ ours: [83.1e6], base: [592e6] }) } },
    rping: { cmp: { coldWarm: compare({ ours: [2.73], base: [1.13] }) } },
  });
  const lines = formatTargets(rows);
  assert.match(lines.find((l) => l.startsWith('RoCE UD 4 KiB')), /48\.9k msg\/s\s+45\.8k msg\/s\s+1\.07\s+>= 1\.5\s+not met, 1 round\s+-\s+-\s+-$/);
  assert.match(lines.find((l) => l.startsWith('RoCE RC 1 MiB')), /83\.1 MB\/s\s+592 MB\/s\s+0\.14\s+>= 1\s+not met, 1 round/);
  assert.match(lines.find((l) => l.startsWith('rping cold/warm')), /2\.73\s+1\.13\s+2\.42\s+<= 1\.15\s+not met, 1 round/);
});

test('pairTimedCpuUs: the client\'s and the server\'s --json CPU summed; null when one printed none', () => {
  const row = (u, s) => JSON.stringify({ name: 'custom', cpu_user_usec: u, cpu_sys_usec: s });
  assert.equal(jsonCpuUs({ cpu_user_usec: 3, cpu_sys_usec: 4 }), 7);
  assert.equal(jsonCpuUs({}), null);
  assert.equal(pairTimedCpuUs({ out: `warming\n${row(100, 20)}\n`, server: { out: `${row(50, 5)}\n` } }), 175);
  assert.equal(pairTimedCpuUs({ out: `${row(100, 20)}\n`, server: { out: 'no json\n' } }), null);
  assert.equal(pairTimedCpuUs({ out: '', server: { out: `${row(1, 1)}\n` } }), null);
});

test('cpuMeter reads another process\'s CPU time from /proc: a child that burns 150 ms of CPU', { timeout: 60_000 }, async (t) => {
  if (procCpuUs(process.pid) === null || procCpuUs(process.ppid) === null) return t.skip('no /proc');
  // The child spins until it has used 150 ms of CPU time (however long that takes on a loaded
  // machine), says so, and waits for stdin to close.
  const src = "process.stdout.write('ready\\n'); process.stdin.once('data', () => { const c0 = process.cpuUsage(); for (;;) { const c = process.cpuUsage(c0); if (c.user + c.system >= 150000) break; } process.stdout.write('done\\n'); }); process.stdin.on('end', () => process.exit(0));";
  const c = spawn(process.execPath, ['-e', src], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  const next = () => new Promise((r) => (lines.length ? r(lines.shift()) : c.stdout.once('data', (d) => r(String(d).trim()))));
  assert.equal(await next(), 'ready');
  const m = cpuMeter([c.pid]);
  m.start();
  c.stdin.write('go\n');
  assert.equal(await next(), 'done');
  const used = m.stop();
  c.stdin.end();
  await once(c, 'exit');
  assert.ok(used >= 140_000 && used < 10_000_000, `measured ${used} µs`);
  // Gone: unreadable, so the meter says null rather than a wrong figure.
  assert.equal(procCpuUs(c.pid), null);
});
