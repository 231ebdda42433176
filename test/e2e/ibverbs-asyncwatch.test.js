// ibv_asyncwatch end to end: the device line, then one line per asynchronous event of its context
// until killed — the port events of a soft device whose interface (a veth of a namespace of this
// test) goes down and up — and its options and exit statuses.
import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { getDeviceList } from '../../dist/index.js';
import { startCli, runCli, describeRun, makeNetns } from '../lib/tools.js';
import { cli, ENV } from '../lib/pingpong.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Wait until `p`'s stdout matches `re` (or `ms` pass); its stdout. */
async function until(p, re, ms = 15_000) {
  const t0 = Date.now();
  while (!re.test(p.stdout()) && Date.now() - t0 < ms) await sleep(25);
  return p.stdout();
}

/** Wait until `p`'s stdout holds `n` lines (or `ms` pass). */
async function lines(p, n, ms = 15_000) {
  const t0 = Date.now();
  while (p.stdout().split('\n').length <= n && Date.now() - t0 < ms) await sleep(25);
  return p.stdout();
}

test('ibv_asyncwatch: the device line, then it waits for events until killed; -h → usage, 0; a bad option → usage, 1; an unknown device → 1', async () => {
  const dev = getDeviceList()[0].name;
  const p = startCli(cli('ibv_asyncwatch'), ['-d', dev], { env: ENV, timeoutMs: 20_000 });
  const t0 = Date.now();
  while (!p.stdout().includes('\n') && Date.now() - t0 < 15_000) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(p.child.exitCode, null, 'still waiting for events');
  p.kill('SIGTERM');
  const r = await p.done;
  assert.equal(r.stdout, `${dev}: async event FD -1\n`, describeRun('asyncwatch', r));
  assert.equal(r.signal, 'SIGTERM');
  const usage = /^Usage:\n {2}ibv_asyncwatch {12}start an asyncwatch process\n\nOptions:\n/;
  for (const [args, code, err] of [
    [['-h'], 0, ''],
    [['--help'], 0, ''],
    [['-z'], 1, "ibv_asyncwatch: invalid option -- 'z'\n"],
  ]) {
    const u = await runCli(cli('ibv_asyncwatch'), args, { env: ENV });
    assert.equal(u.code, code, args.join(' '));
    assert.equal(u.stderr, err);
    assert.match(u.stdout, usage);
  }
  const nodev = await runCli(cli('ibv_asyncwatch'), ['-d', 'nosuch'], { env: ENV });
  assert.equal(nodev.code, 1);
  assert.equal(nodev.stderr, 'IB device nosuch not found\n');
});

const ns = makeNetns('asyncwatch');
after(() => ns.remove());
const ip = (...a) => spawnSync('ip', ['-n', ns.name, ...a], { encoding: 'utf8' });

for (const [provider, prefix] of [['rxe', 'rxe'], ['siw', 'siw']]) {
  test(`ibv_asyncwatch -d ${prefix}_v0: the interface going down and up is IBV_EVENT_PORT_ERR (10) then IBV_EVENT_PORT_ACTIVE (9) on port 1`, { skip: ns.skip }, async () => {
    if (ip('link', 'show', 'v0').status !== 0) {
      assert.equal(ip('link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1').status, 0);
      ip('addr', 'add', '10.9.0.1/24', 'dev', 'v0');
      ip('link', 'set', 'v1', 'up');
    }
    assert.equal(ip('link', 'set', 'v0', 'up').status, 0);
    const p = startCli(cli('ibv_asyncwatch'), ['-d', `${prefix}_v0`], { env: { ...ENV, RDMACM_PORT_POLL_MS: '20' }, netns: ns.name, timeoutMs: 30_000 });
    try {
      assert.match(await lines(p, 1), new RegExp(`^${prefix}_v0: async event FD -1\\n`), p.stderr());
      await sleep(300);
      ip('link', 'set', 'v0', 'down');
      await until(p, /PORT_ERR/);
      ip('link', 'set', 'v0', 'up');
      const out = await until(p, /PORT_ACTIVE/);
      const events = out.split('\n').slice(1, -1);
      // rxe's GID table follows the addresses the interface loses and regains (GID_CHANGE, 18)
      const ports = events.filter((l) => !/^ {2}event_type IBV_EVENT_GID_CHANGE \(18\), port 1$/.test(l));
      assert.deepEqual(ports, ['  event_type IBV_EVENT_PORT_ERR (10), port 1', '  event_type IBV_EVENT_PORT_ACTIVE (9), port 1'], out + p.stderr());
    } finally {
      p.kill('SIGKILL');
      await p.done;
    }
  });
}
