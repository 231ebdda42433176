import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { StateCell } from '../../../dist/util/state.js';

test('move changes the state and returns the one it left; exch moves only from the states given', () => {
  const c = new StateCell('cm', () => 'X', 'idle');
  assert.equal(c.state, 'idle');
  assert.equal(c.move('bound', 'bind'), 'idle');
  assert.ok(c.is('bound'));
  assert.equal(c.exch('idle', 'listen', 'listen'), false);
  assert.equal(c.state, 'bound');
  assert.equal(c.exch(['idle', 'bound'], 'listen', 'listen'), true);
  assert.ok(c.in(['listen', 'connect']));
  assert.ok(!c.in(['idle']));
});

test('each change is traced once under the owner tracer, with the owner tag and shown states; a move to the same state is not', () => {
  const url = new URL('../../../dist/util/state.js', import.meta.url).href;
  const src = `
    const { StateCell } = await import(${JSON.stringify(url)});
    let n = 1;
    const c = new StateCell('cm', () => 'ID[' + n + ']', 1, (s) => 'S' + s);
    c.move(2, 'first'); n = 7; c.move(2, 'again'); c.exch(2, 3, 'second'); c.exch(1, 4, 'refused');`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', src], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, RDMA_TRACE: 'cm' } });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.stderr.trim().split('\n'), ['[rdma:cm] ID[1] S1 -> S2 (first)', '[rdma:cm] ID[7] S2 -> S3 (second)']);
  const quiet = spawnSync(process.execPath, ['--input-type=module', '-e', src], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, RDMA_TRACE: 'qp' } });
  assert.equal(quiet.stderr, '');
});
