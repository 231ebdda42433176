// takeLongOptions: this port's long options (--json, --warmup N) taken out of a tool's argv before
// its rdma-core getopt string sees it.
import test from 'node:test';
import assert from 'node:assert/strict';
import { takeLongOptions } from '../../../dist/cli/getopt.js';

test('flags and valued options in both forms are taken out; the rest keeps its order', () => {
  const r = takeLongOptions(['-s', 'h', '--json', '--warmup', '12', '-C', '3', '--warmup=40'], ['json'], ['warmup']);
  assert.deepEqual(r.args, ['-s', 'h', '-C', '3']);
  assert.deepEqual([...r.flags], ['json']);
  assert.equal(r.values.get('warmup'), 40, 'the last value counts');
  assert.equal(r.bad, null);
});

test('-- ends the options: what follows goes to getopt untouched', () => {
  const r = takeLongOptions(['--warmup', '1', '--', '--json', '--warmup=2'], ['json'], ['warmup']);
  assert.deepEqual(r.args, ['--', '--json', '--warmup=2']);
  assert.equal(r.flags.size, 0);
  assert.equal(r.values.get('warmup'), 1);
});

test('unknown long options, near misses and a valued flag are left to getopt', () => {
  const r = takeLongOptions(['--jsonx', '--json=1', '--warmupx', '--other', '5'], ['json'], ['warmup']);
  assert.deepEqual(r.args, ['--jsonx', '--json=1', '--warmupx', '--other', '5']);
  assert.equal(r.flags.size, 0);
  assert.equal(r.values.size, 0);
});

test('a valued option without a non-negative integer is named in bad', () => {
  for (const argv of [['--warmup'], ['--warmup', 'x'], ['--warmup=-1'], ['--warmup='], ['--warmup', '1e3'], ['--warmup', '']]) {
    const r = takeLongOptions(argv, ['json'], ['warmup']);
    assert.equal(r.bad, 'warmup', argv.join(' '));
    assert.equal(r.values.has('warmup'), false, argv.join(' '));
  }
});
