// npm test's share of the standing fuzz suite: every target in test/fuzz/targets/ for its small
// time budget (`budgetMs`, about 12 s in all), in a worker with a hang watchdog and a heap limit,
// from a fixed seed (FUZZ_SEED overrides) so that the first cases are the same on every run.
// `npm run fuzz` runs the same targets for long (test/fuzz/README.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadTargets, runInWorker } from './lib/runner.js';

const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) >>> 0 : 1;
const targets = await loadTargets();

for (const { file, target } of targets) {
  test(`fuzz ${target.name}: ${target.about ?? ''}`, async (t) => {
    const r = await runInWorker(file, target, { seed: SEED, ms: target.budgetMs ?? 1000 });
    assert.ok(r.ok, r.message);
    const c = Object.entries(r.stats.counts).map(([k, v]) => `${k} ${v}`).join(', ');
    t.diagnostic(`seed ${SEED}: ${r.stats.cases} cases in ${r.stats.ms} ms; ${c}`);
    assert.ok(r.stats.cases > 0);
  });
}
