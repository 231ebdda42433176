// rdmacm-stat's tests (rdmacm-stat-cases.js) in a network namespace of their own: the tool lists
// every process of the user that serves a soft device in its network namespace, so the other test
// files a runner runs beside it would show up in its lines. Where no namespace can be made, the
// cases run here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CASES = fileURLToPath(new URL('./rdmacm-stat-cases.js', import.meta.url));
const canUnshare = process.env.RDMACM_STAT_NETNS !== '1' && spawnSync('unshare', ['-n', 'true']).status === 0;

if (!canUnshare) {
  await import(CASES);
} else {
  test('rdmacm-stat: its cases, in a network namespace of their own', { timeout: 240_000 }, async () => {
    const env = { ...process.env, RDMACM_STAT_NETNS: '1' };
    delete env.NODE_TEST_CONTEXT; // the cases run as a program of their own, reporting TAP
    const c = spawn('unshare', ['-n', 'sh', '-c', `ip link set lo up && exec "${process.execPath}" --test-reporter=tap "${CASES}"`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (out += d));
    const code = await new Promise((r) => c.on('close', r));
    const failed = out.split('\n').filter((l) => /^\s*not ok /.test(l));
    assert.equal(code, 0, `${failed.join('\n')}\n\n${out.slice(-6000)}`);
    assert.match(out, /^# pass [1-9]/m, out.slice(-2000));
  });
}
