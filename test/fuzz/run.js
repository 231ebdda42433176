// npm run fuzz: every fuzz target (or FUZZ_TARGETS=a,b) for FUZZ_SECONDS seconds (default 60)
// or FUZZ_CASES cases each, from FUZZ_SEED (default: a random seed, printed first). FUZZ_CASE=n
// replays that single case of the seed. Exits 1 on the first failure, printing the seed, the case
// and the command that replays it.
import { loadTargets, runCases, runInWorker } from './lib/runner.js';
import { randomSeed } from './lib/rng.js';

const env = process.env;
const num = (v, what) => {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) {
    console.error(`fuzz: ${what}=${v} is not a number`);
    process.exit(2);
  }
  return n;
};
const seed = (num(env.FUZZ_SEED, 'FUZZ_SEED') ?? randomSeed()) >>> 0;
const cases = num(env.FUZZ_CASES, 'FUZZ_CASES');
const seconds = num(env.FUZZ_SECONDS, 'FUZZ_SECONDS') ?? (cases === undefined ? 60 : undefined);
const caseIndex = num(env.FUZZ_CASE, 'FUZZ_CASE');
const names = env.FUZZ_TARGETS ? env.FUZZ_TARGETS.split(',').map((s) => s.trim()).filter(Boolean) : null;

const targets = await loadTargets(names);
console.log(`fuzz: seed ${seed}, ${caseIndex !== undefined ? `case ${caseIndex} only` : `${cases !== undefined ? `${cases} cases` : ''}${cases !== undefined && seconds !== undefined ? ' or ' : ''}${seconds !== undefined ? `${seconds} s` : ''} per target`}, targets: ${targets.map((t) => t.target.name).join(', ')}`);

let failed = false;
for (const { file, target } of targets) {
  const opts = { seed, cases: cases ?? Infinity, ms: seconds !== undefined ? seconds * 1000 : Infinity, caseIndex: caseIndex ?? null };
  if (caseIndex !== undefined) {
    // A replay runs in this thread, so that a debugger or a stack trace sees the case directly.
    try {
      await runCases(target, opts);
      console.log(`${target.name}: case ${caseIndex} passes`);
    } catch (e) {
      console.error(e.message);
      failed = true;
    }
    continue;
  }
  const r = await runInWorker(file, target, opts);
  if (!r.ok) {
    console.error(r.message);
    failed = true;
    break;
  }
  const c = Object.entries(r.stats.counts).map(([k, v]) => `${k} ${v}`).join(', ');
  console.log(`${target.name}: ${r.stats.cases} cases in ${(r.stats.ms / 1000).toFixed(1)} s (${Math.round((r.stats.cases * 1000) / Math.max(1, r.stats.ms))}/s)${c ? `; ${c}` : ''}`);
}
if (failed) {
  console.error(`fuzz: FAILED (seed ${seed})`);
  process.exit(1);
}
console.log(`fuzz: all targets passed (seed ${seed})`);
