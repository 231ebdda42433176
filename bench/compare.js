// Compare two kept runs of `npm run bench -- --json FILE`, row by row.
//
//   node bench/compare.js before.json after.json
//
// Prints, for every figure both runs have, the two values and after/before. Ratios to Node net
// (the headline figures) are compared as ratios: they are what carries from one run to another;
// absolute figures move with the machine's load and are shown for reference only.
import { readFileSync } from 'node:fs';

const [a, b] = process.argv.slice(2).map((f) => JSON.parse(readFileSync(f, 'utf8')));
if (!a || !b) {
  console.error('usage: node bench/compare.js before.json after.json');
  process.exit(2);
}
const fx = (x, d = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : '-');
const line = (name, x, y) => console.log(`${name.padEnd(44)}${fx(x).padStart(10)}${fx(y).padStart(10)}${(typeof x === 'number' && typeof y === 'number' && x ? fx(y / x) : '-').padStart(9)}`);

console.log(`before: ${a.started} ${a.machine?.cpu ?? ''} node ${a.machine?.node ?? ''} load ${a.machine?.loadavg?.[0] ?? '-'}`);
console.log(`after:  ${b.started} ${b.machine?.cpu ?? ''} node ${b.machine?.node ?? ''} load ${b.machine?.loadavg?.[0] ?? '-'}`);
console.log(`${'figure'.padEnd(44)}${'before'.padStart(10)}${'after'.padStart(10)}${'a/b'.padStart(9)}`);

const sa = a.sections ?? {};
const sb = b.sections ?? {};
if (sa.stream && sb.stream) {
  for (const r of sa.stream.steady) {
    const q = sb.stream.steady.find((x) => x.id === r.id);
    if (!q) continue;
    for (const impl of ['soft', 'rio', 'tcs', 'c']) line(`stream ${r.id} ${impl}/Node`, r.vsNode[impl], q.vsNode[impl]);
    // Against Node waiting as rsockets wait (latency rows of runs that measured it).
    if (r.vsNodeBusyPoll || q.vsNodeBusyPoll) for (const impl of ['soft', 'rio']) line(`stream ${r.id} ${impl}/Node bp`, r.vsNodeBusyPoll?.[impl], q.vsNodeBusyPoll?.[impl]);
    for (const impl of ['soft', 'rio', 'tcs', 'node', 'nodebp', 'c', 'qperf']) line(`stream ${r.id} ${impl} (${r.unit})`, r.median[impl], q.median[impl]);
  }
  for (const r of sa.stream.cold ?? []) {
    const q = (sb.stream.cold ?? []).find((x) => x.id === r.id);
    if (q) for (const impl of ['soft', 'rio', 'tcs', 'node']) line(`stream ${r.id} ${impl} cold/warm`, r.vsWarm[impl], q.vsWarm[impl]);
  }
}
if (sa.verbs && sb.verbs) {
  line('verbs rtt soft/Node', sa.verbs.rtt.vsNode, sb.verbs.rtt.vsNode);
  line('verbs bw soft/Node', sa.verbs.bw.vsNode, sb.verbs.bw.vsNode);
}
if (sa.rping && sb.rping) {
  line('rping warm/Node', sa.rping.warmVsNode, sb.rping.warmVsNode);
  line('rping cold/warm', sa.rping.coldVsWarm, sb.rping.coldVsWarm);
  if (sa.rping.nodeColdVsWarm !== undefined && sb.rping.nodeColdVsWarm !== undefined) line('Node net cold/warm, rping shape', sa.rping.nodeColdVsWarm, sb.rping.nodeColdVsWarm);
}
if (sa.cm && sb.cm) {
  line('cm warm/Node loop', sa.cm.vsNodeLoop, sb.cm.vsNodeLoop);
  line('cm cold/warm', sa.cm.coldVsWarm, sb.cm.coldVsWarm);
  if (sa.cm.nodeColdVsWarm !== undefined && sb.cm.nodeColdVsWarm !== undefined) line('Node TCP cold/warm, cmtime shape', sa.cm.nodeColdVsWarm, sb.cm.nodeColdVsWarm);
}
// The targets of both runs (runs kept since the bench judges them): the ratio and the CPU ratio
// of each, with the baseline's spread that says whether the run was noisy.
if (a.summary?.targets && b.summary?.targets) {
  for (const t of a.summary.targets) {
    const u = b.summary.targets.find((x) => x.id === t.id);
    if (!u || (t.ratio === null && u.ratio === null)) continue;
    line(`target ${t.id} ratio`, t.ratio, u.ratio);
    line(`target ${t.id} CPU ratio`, t.cpu?.ratio, u.cpu?.ratio);
    line(`target ${t.id} base spread`, t.baseSpread, u.baseSpread);
  }
}
