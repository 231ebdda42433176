// The targets of the performance issue (#31), judged on one run of `npm run bench`: each target's
// row, ours beside its same-run baseline, the ratio against the target, and whether the run was
// quiet enough to judge it.
//
// A target is judged on the median of the rounds' ratios (bench/lib.js compare()). The verdict says
// "noisy" when the baseline's own rounds spread by more than NOISY_ABOVE (max / min): the baseline
// is plain Node (or our other device) doing the same work, so when it moves that much between
// rounds the machine's load moved during the run, and the ratio may be the load's. The CPU time per
// operation of both sides, and their ratio, is printed beside it: load moves it much less.
//
// Pure functions over the run's JSON (`sections`): test/unit/bench/targets.test.js.

/** A baseline whose rounds spread by more than this (max / min) makes its row "noisy". */
export const NOISY_ABOVE = 1.25;

/** A steady row of the stream section, by id. */
const steady = (s, id) => s.stream?.steady?.find((r) => r.id === id);
/** A cold row of the stream section, by id. */
const cold = (s, id) => s.stream?.cold?.find((r) => r.id === id);

/**
 * The targets, in the order of the issue's table. `pick(sections)` finds the row's comparison
 * (compare()'s shape) in the run's sections, undefined when the section did not run; `op` and
 * `value` are the target on the ratio ours / baseline; `unit` is that of ours and the baseline,
 * `cpuUnit` that of the CPU time per operation the section measured (none: it measured none).
 */
export const TARGETS = [
  { id: 'rstream-lat64', cpuUnit: 'us/xfer', name: 'rstream soft 64 B latency, warm', vs: 'Node net', unit: 'us/xfer', op: '<=', value: 1.15, pick: (s) => steady(s, 'lat64')?.cmp?.soft },
  { id: 'riostream-lat64', cpuUnit: 'us/xfer', name: 'riostream soft 64 B latency, warm', vs: 'Node net', unit: 'us/xfer', op: '<=', value: 1.15, pick: (s) => steady(s, 'lat64')?.cmp?.rio },
  { id: 'rstream-bw1m', cpuUnit: 'us/MiB', name: 'rstream soft 1 MiB bandwidth, warm', vs: 'Node net', unit: 'Gb/s', op: '>=', value: 0.9, pick: (s) => steady(s, 'bw1m')?.cmp?.soft },
  { id: 'riostream-bw1m', cpuUnit: 'us/MiB', name: 'riostream soft 1 MiB bandwidth, warm', vs: 'Node net', unit: 'Gb/s', op: '>=', value: 0.9, pick: (s) => steady(s, 'bw1m')?.cmp?.rio },
  { id: 'rstream-bw1m-B4M', cpuUnit: 'us/MiB', name: 'rstream soft 1 MiB bandwidth, -B 4M', vs: 'Node net', unit: 'Gb/s', op: '>=', value: 0.9, pick: (s) => steady(s, 'bw1m-B4M')?.cmp?.soft },
  { id: 'rstream-series', cpuUnit: 's/run', name: 'one-shot rstream series, client wall time', vs: 'Node net series', unit: 's', op: '<=', value: 1.25, pick: (s) => s.stream?.series?.soft },
  { id: 'riostream-series', cpuUnit: 's/run', name: 'one-shot riostream series, client wall time', vs: 'Node net series', unit: 's', op: '<=', value: 1.25, pick: (s) => s.stream?.series?.rio },
  { id: 'rstream-64k-coldwarm', name: "rstream series 64k_bw cold/warm", vs: "Node net's own", unit: 'ratio', op: '>=', value: 1 / 1.15, pick: (s) => cold(s, 'cold-bw64k')?.cmp?.soft },
  { id: 'rstream-1m-coldwarm', name: 'rstream series 1m_bw cold/warm', vs: "Node net's own", unit: 'ratio', op: '>=', value: 1 / 1.15, pick: (s) => cold(s, 'cold-bw1m')?.cmp?.soft },
  { id: 'rping-warm', cpuUnit: 'us/ping', name: 'rping warm per ping', vs: 'Node net 3 RTTs', unit: 'us', op: '<=', value: 1.15, pick: (s) => s.rping?.cmp?.warm },
  { id: 'rping-coldwarm', name: 'rping cold/warm (-C 1000)', vs: "Node net's own", unit: 'ratio', op: '<=', value: 1.15, pick: (s) => s.rping?.cmp?.coldWarm },
  { id: 'roce-ud-rtt', cpuUnit: 'us/RT', name: 'RoCE UD 64 B RTT', vs: 'Node dgram', unit: 'us', op: '<=', value: 1.2, pick: (s) => s.roce?.rtt?.cmp },
  { id: 'roce-ud-4k', cpuUnit: 'us/msg', name: 'RoCE UD 4 KiB messages/s', vs: 'Node dgram', unit: 'msg/s', op: '>=', value: 1.5, pick: (s) => s.roce?.mtuRate?.cmp },
  { id: 'roce-mcast1', cpuUnit: 'us/msg', name: 'RoCE multicast, 1 receiver', vs: 'Node dgram', unit: 'msg/s', op: '>=', value: 1.0, pick: (s) => s.roce?.mcast1?.cmp },
  { id: 'roce-mcast2', cpuUnit: 'us/msg', name: 'RoCE multicast, 2 receivers', vs: 'Node dgram', unit: 'msg/s', op: '>=', value: 1.0, pick: (s) => s.roce?.mcast2?.cmp },
  { id: 'roce-rc-rtt', cpuUnit: 'us/RT', name: 'RoCE RC 64 B RTT', vs: 'Node dgram', unit: 'us', op: '<=', value: 1.2, pick: (s) => s.roce?.rcRtt?.cmp },
  { id: 'roce-rc-write', cpuUnit: 'us/MiB', name: 'RoCE RC 1 MiB RDMA WRITE', vs: 'soft iWARP', unit: 'MB/s', scale: 1e-6, op: '>=', value: 1.0, pick: (s) => s.roce?.rcWrite?.cmpIwarp },
  { id: 'roce-udaddy', cpuUnit: 'ms/run', name: 'udaddy -c 100 resolution', vs: 'dgram request/replies', unit: 'ms', op: '<=', value: 3, pick: (s) => s.roce?.udaddy?.cmp },
  { id: 'native-pingpong', name: 'native 64 B ping-pong (JS/C)', vs: 'C loop', unit: 'us', op: '<=', value: 1.2, pick: (s) => s.native?.cmp },
];

/** Whether `ratio` meets `op value` (null when there is no ratio). */
export function meets(ratio, op, value) {
  if (typeof ratio !== 'number' || !Number.isFinite(ratio)) return null;
  return op === '<=' ? ratio <= value : ratio >= value;
}

/**
 * Whether a comparison's baseline was noisy: true when its rounds spread by more than
 * `noisyAbove` (max / min), false when not, null when fewer than two rounds ran (no spread).
 */
export function noisy(cmp, noisyAbove = NOISY_ABOVE) {
  const b = cmp?.base;
  if (!b || b.n < 2 || typeof b.rel !== 'number') return null;
  return b.rel > noisyAbove;
}

/** The verdict's words: "met", "not met", "not run", with "noisy" or "1 round" beside it. */
export function verdict(met, isNoisy) {
  if (met === null) return 'not run';
  const v = met ? 'met' : 'not met';
  return isNoisy === true ? `${v}, noisy` : isNoisy === null ? `${v}, 1 round` : v;
}

/**
 * Judge every target on a run's sections: one row each, in TARGETS order, with ours, the baseline
 * (medians of their rounds), the ratio, the target, met (true / false / null when not measured),
 * noisy (true / false / null for a single round), the baseline's spread and the CPU time per
 * operation of both sides with their ratio.
 */
export function judge(sections, { targets = TARGETS, noisyAbove = NOISY_ABOVE } = {}) {
  return targets.map((t) => {
    const c = t.pick(sections ?? {}) ?? null;
    const ratio = c?.ratio ?? null;
    const met = meets(ratio, t.op, t.value);
    const isNoisy = c ? noisy(c, noisyAbove) : null;
    return {
      id: t.id,
      name: t.name,
      vs: t.vs,
      unit: t.unit,
      ours: c?.ours?.median ?? null,
      base: c?.base?.median ?? null,
      ratio,
      ratioRange: c?.ratioRange ?? null,
      target: `${t.op} ${Number(t.value.toFixed(2))}`,
      met,
      noisy: isNoisy,
      rounds: c?.base?.n ?? 0,
      baseSpread: c?.base?.rel ?? null,
      cpu: { unit: t.cpuUnit ?? null, ours: c?.cpu?.ours?.median ?? null, base: c?.cpu?.base?.median ?? null, ratio: c?.cpu?.ratio ?? null },
      verdict: verdict(met, isNoisy),
      scale: t.scale ?? 1,
    };
  });
}

const fx = (x, d = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : '-');
/** A figure in a few significant digits. */
const sig = (x) => {
  if (typeof x !== 'number' || !Number.isFinite(x)) return '-';
  const a = Math.abs(x);
  return a >= 10_000 ? `${(x / 1000).toFixed(1)}k` : a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2);
};
/** A figure with its unit (a ratio has none). */
const withUnit = (x, unit) => (x === null ? '-' : unit === 'ratio' ? sig(x) : `${sig(x)} ${unit}`);

/** The targets table as text lines (judge()'s rows). */
export function formatTargets(rows, { noisyAbove = NOISY_ABOVE } = {}) {
  const head = ['target row', 'ours', 'baseline', 'ratio', 'target', 'verdict', 'base spread', 'CPU/op ours · base', 'CPU ratio'];
  const body = rows.map((r) => [
    `${r.name} (vs ${r.vs})`,
    withUnit(r.ours === null ? null : r.ours * r.scale, r.unit),
    withUnit(r.base === null ? null : r.base * r.scale, r.unit),
    r.ratioRange && r.rounds > 1 ? `${fx(r.ratio)} (${fx(r.ratioRange[0])}–${fx(r.ratioRange[1])})` : fx(r.ratio),
    r.target,
    r.verdict,
    r.rounds > 1 ? fx(r.baseSpread) : '-',
    r.cpu.ours === null && r.cpu.base === null ? '-' : `${sig(r.cpu.ours)} · ${sig(r.cpu.base)} ${r.cpu.unit ?? ''}`.trimEnd(),
    fx(r.cpu.ratio),
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ');
  return [
    `targets (issue #31): ratio = ours / baseline, median of the rounds' ratios (range); "noisy": the baseline's rounds spread by more than ${noisyAbove} (max/min), judge the ratio on a quieter run or by CPU/op (µs per operation, every process of each side)`,
    line(head),
    ...body.map(line),
  ];
}
