// The verbs objects' teardown flags are mutable from the first object on: tearing the first MR,
// CQ or completion channel down does not throw away code optimised while reading the flag of
// another one (V8 discards code compiled against a field it counted as constant when the field
// first changes). Checked with V8's own introspection in a child process (natives syntax is a
// command-line flag).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

test('tearing down the first MR / CQ / channel keeps code optimised against the teardown flags (V8)', () => {
  const fp = new URL('../../lib/fake-provider.js', import.meta.url).href;
  const src = `
    const { dev, LO } = await import(${JSON.stringify(fp)});
    const ctx = dev(LO).open();
    const pd = ctx.allocPd();
    const ch1 = ctx.createCompChannel(), ch2 = ctx.createCompChannel();
    const cq1 = ctx.createCq(4, ch1), cq2 = ctx.createCq(4, ch2);
    const m1 = pd.regMr(new Uint8Array(64), 1), m2 = pd.regMr(new Uint8Array(64), 1);
    function use(m, cq, ch) { return (m._stagValid ? 1 : 0) + (cq._destroyed ? 2 : 0) + (ch._destroyed ? 4 : 0); }
    %PrepareFunctionForOptimization(use);
    use(m2, cq2, ch2); use(m2, cq2, ch2);
    %OptimizeFunctionOnNextCall(use);
    use(m2, cq2, ch2);
    const before = (%GetOptimizationStatus(use) & 16) !== 0;
    m1.dereg(); cq1.destroy(); ch1.destroy();
    const after = (%GetOptimizationStatus(use) & 16) !== 0;
    console.log(JSON.stringify([before, after, use(m2, cq2, ch2)]));`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout.trim()), [true, true, 1]);
});
