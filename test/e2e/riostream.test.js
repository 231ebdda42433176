// riostream end to end: two processes on loopback, riomap/riowrite over rsockets on the soft
// iWARP device (docs/man/riostream.1.md): table format, -T v, the default series, --json, usage.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, runCli, describeRun } from '../lib/tools.js';
import { DEFAULT_SERIES, HEADER, assertOk, assertTable, pair } from '../lib/stream-tools.js';

const RIOSTREAM = join(REPO_ROOT, 'dist', 'cli', 'riostream.js');
const opts = { skip: existsSync(RIOSTREAM) ? false : `${RIOSTREAM} is missing: run npm run build`, timeout: 60_000 };

test('custom 64 B x 50 x 10 -T v: the poll byte protocol, one row each side', opts, async () => {
  const r = await pair(RIOSTREAM, ['-S', '64', '-C', '50', '-I', '10', '-T', 'v']);
  assertOk(r);
  assertTable(r.cli.stdout, [['custom', 64, 50, 10]], 'client');
  assertTable(r.srv.stdout, [['custom', 64, 50, 10]], 'server');
});

test('1 MiB riowrites -T v -T b (chunked RDMA WRITEs into the peer mapping)', opts, async () => {
  const r = await pair(RIOSTREAM, ['-S', '1048576', '-C', '4', '-I', '3', '-T', 'v', '-T', 'b']);
  assertOk(r);
  assertTable(r.cli.stdout, [['custom', 1 << 20, 4, 3]], 'client');
});

test('default series (counts / 1000) -T v: eight rows, a new mapping per test', opts, async () => {
  const r = await pair(RIOSTREAM, ['-T', 'v'], { env: { RSTREAM_COUNT_DIVISOR: '1000' } });
  assertOk(r);
  assertTable(r.cli.stdout, DEFAULT_SERIES, 'client');
  assertTable(r.srv.stdout, DEFAULT_SERIES, 'server');
});

test('--json -T a: one object per row', opts, async () => {
  const r = await pair(RIOSTREAM, ['-S', '4096', '-C', '10', '-T', 'a', '--json']);
  assertOk(r);
  const o = JSON.parse(r.cli.stdout.trim());
  assert.equal(o.name, 'custom');
  assert.equal(o.bytes, 4096);
  assert.equal(o.xfers, 10);
  assert.equal(o.tool, 'riostream');
});

test('--warmup 130 -C 50 -I 3 -T v: untimed blocks of 50, 50 and 30 writes each way, then the same row', opts, async () => {
  const r = await pair(RIOSTREAM, ['-S', '1000', '-C', '50', '-I', '3', '-T', 'v', '--warmup', '130']);
  assertOk(r);
  assertTable(r.cli.stdout, [['custom', 1000, 50, 3]], 'client');
  assertTable(r.srv.stdout, [['custom', 1000, 50, 3]], 'server');
});

test('--warmup without a count, or with a bad one: an error and the usage, exit 1', opts, async () => {
  for (const bad of [['--warmup'], ['--warmup=x'], ['--warmup', '-5']]) {
    const r = await runCli(RIOSTREAM, bad, { timeoutMs: 10_000 });
    assert.equal(r.code, 1, describeRun(bad.join(' '), r));
    assert.equal(r.stderr, 'riostream: --warmup needs a number of messages\n', describeRun(bad.join(' '), r));
    assert.match(r.stdout, /^usage: riostream\n/);
  }
});

test('usage: rstream-only -T letters are refused (s, f, r), exit 1', opts, async () => {
  // -k is not in riostream.c's getopt string: getopt names it on stderr; a -T letter is riostream's own refusal
  for (const [args, stderr] of [
    [['-T', 's'], ''],
    [['-T', 'f'], ''],
    [['-k', '1'], "riostream: invalid option -- 'k'\n"],
    [['-x'], "riostream: invalid option -- 'x'\n"],
    [['-p'], "riostream: option requires an argument -- 'p'\n"],
  ]) {
    const r = await runCli(RIOSTREAM, args, { timeoutMs: 10_000 });
    assert.equal(r.code, 1, describeRun(args.join(' '), r));
    assert.equal(r.stderr, stderr, describeRun(args.join(' '), r));
    assert.match(r.stdout, /^usage: riostream\n/);
    assert.equal(r.stdout.split('\n').length, 17);
    assert.ok(!r.stdout.includes(HEADER));
  }
});
