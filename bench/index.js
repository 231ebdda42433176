// npm run bench: every section, one after the other, in one run on this machine; the figures of
// one run are comparable with each other, not with another machine's or another day's.
//
//   node bench/index.js [--json FILE] [--only stream,verbs,rping,cm,roce,roce-io,perftest,http,capture,native] [--reps N] [--quick]
//
// --json FILE  also write the results (every run, medians, ratios, what the machine was) as JSON
// --only       run only these sections (default: all)
// --reps N     runs per figure (median; best of N for connection rates); default 3
// --quick      steady counts scaled to a fifth, no cold rows, no memory run: a smoke test of the
//              bench itself, not figures to keep
//
// Every row that prints a ratio to a baseline also prints the spread of both sides' rounds and
// the CPU time per operation of both sides' processes; the run ends with the targets of issue #31
// judged on it (bench/targets.js), also kept in the JSON as `summary.targets`.
//
// See docs/bench.md for what each row means and how to reproduce a run; bench/setup.sh installs
// the C baselines (rdma-core's rstream, qperf) where apt is available.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compare, machine } from './lib.js';
import { NOISY_ABOVE, formatTargets, judge } from './targets.js';
import { streamBench } from './stream.js';
import { verbsBench } from './verbs.js';
import { rpingBench } from './rping.js';
import { cmBench } from './cmtime.js';
import { perftestBench } from './perftest.js';
import { httpBench } from './http.js';
import { captureBench } from './capture.js';
import { formatNative } from './native.js';

const argv = process.argv.slice(2);
const opt = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const json = opt('--json');
const SECTIONS = ['stream', 'verbs', 'rping', 'cm', 'roce', 'roce-io', 'perftest', 'http', 'capture', 'native'];
const only = opt('--only')?.split(',') ?? SECTIONS;
for (const s of only) if (!SECTIONS.includes(s)) throw new Error(`unknown section ${s} (sections: ${SECTIONS.join(', ')})`);
const reps = Number(opt('--reps') ?? process.env.BENCH_REPS ?? 3);
const quick = argv.includes('--quick');
for (const a of argv) if (a.startsWith('--') && !['--json', '--only', '--reps', '--quick'].includes(a)) throw new Error(`unknown option ${a}`);

// The soft devices' sections measure the soft devices, whatever kernel RDMA devices the machine
// has; the native section (bench/native.js, a kernel device through the addon) gets the
// environment as it was.
const backend = process.env.RDMACM_BACKEND;
process.env.RDMACM_BACKEND = 'soft';

const result = { machine: machine(), started: new Date().toISOString(), reps, quick, sections: {} };
const t0 = performance.now();
if (only.includes('stream')) {
  result.sections.stream = await streamBench({ reps, scale: quick ? 0.2 : 1, cold: !quick });
  console.log();
}
if (only.includes('verbs')) {
  result.sections.verbs = await verbsBench({ reps });
  console.log();
}
if (only.includes('rping')) {
  result.sections.rping = await rpingBench({ reps });
  console.log();
}
if (only.includes('cm')) {
  result.sections.cm = await cmBench({ rounds: reps, cycles: quick ? 0 : undefined });
  console.log();
}
if (only.includes('roce')) {
  // A process of its own (bench/roce.js picks the soft RoCE device's UDP port before anything in
  // its process opens the device); its table goes to our stdout, its JSON into ours.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rdmacm-bench-'));
  const file = path.join(dir, 'roce.json');
  const r = spawnSync(process.execPath, [fileURLToPath(new URL('./roce.js', import.meta.url)), '--json', file, '--reps', String(reps), ...(quick ? ['--quick'] : [])], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 1_800_000 });
  try {
    result.sections.roce = JSON.parse(readFileSync(file, 'utf8')).sections.roce;
  } catch {
    result.sections.roce = { failed: `bench/roce.js exit ${r.status}` };
  }
  rmSync(dir, { recursive: true, force: true });
  console.log();
}
if (only.includes('roce-io')) {
  // The RoCE device's UDP I/O paths (batched addon sockets, Node's dgram) beside plain dgram, each
  // measuring process a child of bench/roce-io.js.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rdmacm-bench-'));
  const file = path.join(dir, 'roce-io.json');
  const r = spawnSync(process.execPath, [fileURLToPath(new URL('./roce-io.js', import.meta.url)), '--json', file, '--reps', String(reps), ...(quick ? ['--quick'] : [])], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 1_800_000 });
  try {
    result.sections.roceIo = JSON.parse(readFileSync(file, 'utf8')).sections.roceIo;
  } catch {
    result.sections.roceIo = { failed: `bench/roce-io.js exit ${r.status}` };
  }
  rmSync(dir, { recursive: true, force: true });
  console.log();
}
if (only.includes('perftest')) {
  result.sections.perftest = await perftestBench({ reps, quick });
  console.log();
}
if (only.includes('http')) {
  result.sections.http = await httpBench({ reps, scale: quick ? 0.2 : 1 });
  console.log();
}
if (only.includes('capture')) {
  result.sections.capture = await captureBench({ reps, quick });
  console.log();
}
if (only.includes('native')) {
  const env = { ...process.env, BENCH_JSON: '1' };
  if (backend === undefined) delete env.RDMACM_BACKEND;
  else env.RDMACM_BACKEND = backend;
  const r = spawnSync(process.execPath, [fileURLToPath(new URL('./native.js', import.meta.url))], { env, encoding: 'utf8', timeout: 600_000 });
  const line = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  if (line.startsWith('{')) {
    const n = JSON.parse(line);
    // Its rounds in µs per round trip (and CPU per round trip where the section reports it).
    const us = (a) => (Array.isArray(a) ? a.map((x) => x / 1000) : []);
    n.cmp = compare({ ours: us(n.jsNs), base: us(n.cNs), oursCpu: us(n.jsCpuNs), baseCpu: us(n.cCpuNs) });
    result.sections.native = n;
    for (const l of formatNative(n)) console.log(l);
  } else {
    result.sections.native = { skipped: line || `exit ${r.status}` };
    console.log(line || `native data path: bench/native.js exit ${r.status}\n${r.stderr}`);
  }
}
// The targets of the performance issue, judged on this run.
const targets = judge(result.sections);
result.summary = { noisyAbove: NOISY_ABOVE, targets };
console.log();
for (const line of formatTargets(targets)) console.log(line);
result.seconds = (performance.now() - t0) / 1000;
result.machine.loadavgAfter = (await import('node:os')).loadavg();
if (json) {
  writeFileSync(json, JSON.stringify(result, null, 2) + '\n');
  console.log(`\nresults written to ${json}`);
}
process.exit(0);
