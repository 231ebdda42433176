// rstream end to end: server and client as two processes on loopback, over rsockets on the soft
// iWARP device and (-T s) over plain TCP. Checks the table (exact header, exact name/size/count
// columns, figures shaped as printf's %8.2fs%10.2f%11.2f), -T v, the default series, --json,
// usage and error exits (docs/man/rstream.1.md).
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { REPO_ROOT, runCli, describeRun } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { DEFAULT_SERIES, HEADER, assertOk, assertTable, pair } from '../lib/stream-tools.js';

const RSTREAM = join(REPO_ROOT, 'dist', 'cli', 'rstream.js');
const opts = { skip: existsSync(RSTREAM) ? false : `${RSTREAM} is missing: run npm run build`, timeout: 60_000 };

for (const [label, extra] of [
  ['rsocket', []],
  ['-T s (TCP)', ['-T', 's']],
]) {
  test(`${label}: custom 64 B x 100 x 10, -T v: one row on each side`, opts, async () => {
    const r = await pair(RSTREAM, ['-S', '64', '-C', '100', '-I', '10', '-T', 'v', ...extra]);
    assertOk(r);
    assertTable(r.cli.stdout, [['custom', 64, 100, 10]], 'client');
    assertTable(r.srv.stdout, [['custom', 64, 100, 10]], 'server');
  });

  test(`${label}: default series (counts / 1000), -T v: latency then bandwidth rows, reconnecting between`, opts, async () => {
    const r = await pair(RSTREAM, ['-T', 'v', ...extra], { env: { RSTREAM_COUNT_DIVISOR: '1000' } });
    assertOk(r);
    assertTable(r.cli.stdout, DEFAULT_SERIES, 'client');
    assertTable(r.srv.stdout, DEFAULT_SERIES, 'server');
  });
}

test('rsocket: 1 MiB transfers (chunks, credit updates, both buffer halves) with -T v', opts, async () => {
  const r = await pair(RSTREAM, ['-S', '1048576', '-C', '8', '-I', '2', '-T', 'v']);
  assertOk(r);
  assertTable(r.cli.stdout, [['custom', 1 << 20, 8, 2]], 'client');
});

test('rsocket: -B 4096 (8 KiB buffers) -T n -T v: many SGE rotations and credit updates', opts, async () => {
  const r = await pair(RSTREAM, ['-B', '4096', '-S', '65536', '-C', '20', '-T', 'n', '-T', 'verify']);
  assertOk(r);
  assertTable(r.srv.stdout, [['custom', 65536, 20, 1]], 'server');
});

test('-T a (poll before every call), over rsockets and over TCP: both sides succeed', opts, async () => {
  // The client receives last: its final poll finds the server's data and its DISCONNECT together,
  // and must still report the data (POLLIN) before the hangup.
  for (let round = 0; round < 3; round++) {
    const r = await pair(RSTREAM, ['-S', '4096', '-C', '20', '-I', '2', '-T', 'a', '-T', 'v']);
    assertOk(r);
    assertTable(r.cli.stdout, [['custom', 4096, 20, 2]], 'client');
    assertTable(r.srv.stdout, [['custom', 4096, 20, 2]], 'server');
  }
  const d = await pair(RSTREAM, ['-T', 'async'], { env: { RSTREAM_COUNT_DIVISOR: '1000' } });
  assertOk(d);
  assert.equal(d.cli.stdout.split('\n').length, 10, `the default series, 8 rows\n${d.both}`);
  const s = await pair(RSTREAM, ['-S', '4096', '-C', '20', '-I', '2', '-T', 'a', '-T', 'v', '-T', 's']);
  assertOk(s);
  assertTable(s.cli.stdout, [['custom', 4096, 20, 2]], 'client');
});

test('rsocket: -T b (blocking), IPv6 ::1, odd size 1000 x 300', opts, async () => {
  const r = await pair(RSTREAM, ['-C', '300', '-T', 'b', '-T', 'v'], { host: '::1', serverArgs: ['-b', '::1'] });
  assertOk(r);
  assertTable(r.cli.stdout, [['custom', 1000, 300, 1]], 'client');
});

test('--json: one object per row, no header; the table columns as numbers', opts, async () => {
  const r = await pair(RSTREAM, ['-S', '4096', '-C', '10', '-I', '3', '--json']);
  assertOk(r);
  for (const [out, role] of [
    [r.cli.stdout, 'client'],
    [r.srv.stdout, 'server'],
  ]) {
    const lines = out.trim().split('\n');
    assert.equal(lines.length, 1, out);
    const o = JSON.parse(lines[0]);
    assert.equal(o.name, 'custom');
    assert.equal(o.bytes, 4096);
    assert.equal(o.xfers, 10);
    assert.equal(o.iters, 3);
    assert.equal(o.total, 4096 * 10 * 3 * 2);
    assert.equal(o.role, role);
    assert.equal(o.transport, 'rsocket');
    for (const k of ['time_s', 'gbps', 'usec_per_xfer', 'usec']) assert.equal(typeof o[k], 'number', k);
  }
});

test('--warmup 250 -C 100 -I 2 -T v, rsockets and TCP: untimed messages first, then the same rows', opts, async () => {
  for (const extra of [[], ['-T', 's']]) {
    const r = await pair(RSTREAM, ['-S', '1000', '-C', '100', '-I', '2', '-T', 'v', '--warmup', '250', ...extra]);
    assertOk(r);
    assertTable(r.cli.stdout, [['custom', 1000, 100, 2]], `client ${extra.join(' ')}`);
    assertTable(r.srv.stdout, [['custom', 1000, 100, 2]], `server ${extra.join(' ')}`);
  }
});

test('--warmup N: the client exchanges a sync and N untimed messages before the sync and the timed test (an echo peer counts the bytes)', opts, async () => {
  for (const [warmup, expect] of [
    [null, 16 + 3 * 10 * 64],
    ['25', 16 + 25 * 64 + 16 + 3 * 10 * 64],
    ['--warmup=7', 16 + 7 * 64 + 16 + 3 * 10 * 64],
  ]) {
    let got = 0;
    const server = net.createServer((c) => {
      c.on('data', (d) => {
        got += d.length;
        c.write(d);
      });
      c.on('error', () => {});
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    const port = String(server.address().port);
    const w = warmup === null ? [] : warmup.startsWith('--') ? [warmup] : ['--warmup', warmup];
    const r = await runCli(RSTREAM, ['-s', '127.0.0.1', '-p', port, '-T', 's', '-S', '64', '-C', '10', '-I', '3', ...w], { timeoutMs: 20_000 });
    await new Promise((res) => server.close(res));
    assert.equal(r.code, 0, describeRun(w.join(' '), r));
    assertTable(r.stdout, [['custom', 64, 10, 3]], w.join(' '));
    assert.equal(got, expect, `bytes the echo peer received with ${w.join(' ') || 'no --warmup'}`);
  }
});

test('--warmup 5 with -C 0 (no timed transfers): warm-up blocks of one message, no hang', opts, async () => {
  const r = await pair(RSTREAM, ['-S', '64', '-C', '0', '-I', '2', '--warmup', '5'], { timeoutMs: 20_000 });
  assertOk(r);
  // 0 transfers: usec/xfer divides by zero and prints inf, as printf does in rstream.c.
  assert.match(r.cli.stdout, /^name .*\ncustom    64      0       2       0 .* inf\n$/, r.both);
});

test('--warmup without a count, or with a bad one: an error and the usage, exit 1', opts, async () => {
  for (const bad of [['--warmup'], ['--warmup', 'x'], ['--warmup=-1'], ['--warmup', '1e3']]) {
    const r = await runCli(RSTREAM, bad, { timeoutMs: 10_000 });
    assert.equal(r.code, 1, describeRun(bad.join(' '), r));
    assert.equal(r.stderr, 'rstream: --warmup needs a number of messages\n', describeRun(bad.join(' '), r));
    assert.match(r.stdout, /^usage: rstream\n/);
  }
});

test('-T f (fork, sockets): the server hands each connection to a child process', opts, async () => {
  const r = await pair(RSTREAM, ['-S', '2048', '-C', '20', '-I', '2', '-T', 'v'], { serverArgs: ['-T', 'f'], clientArgs: ['-T', 's'] });
  assertOk(r);
  assertTable(r.srv.stdout, [['custom', 2048, 20, 2]], 'server (child rows)');
});

test('-k 5: keepalive reported on each socket (server: listener and connection)', opts, async () => {
  const r = await pair(RSTREAM, ['-S', '64', '-C', '2', '-k', '5']);
  assertOk(r);
  const ka = 'Keepalive: ON\n  time: 5\n';
  assert.ok(r.cli.stdout.startsWith(`${HEADER}\n${ka}`), r.cli.stdout);
  assert.ok(r.srv.stdout.startsWith(`${HEADER}\n${ka}${ka}`), r.srv.stdout);
});

test('usage: an unknown option or -T letter prints the usage on stdout, exit 1', opts, async () => {
  // getopt (opterr 1 in rstream.c) names a bad option or a missing argument on stderr first; a
  // bad -T letter is rstream's own refusal: the usage alone.
  for (const [args, stderr] of [
    [['-x'], "rstream: invalid option -- 'x'\n"],
    [['-T', 'q'], ''],
    [['-T', 'zebra'], ''],
    [['-S'], "rstream: option requires an argument -- 'S'\n"],
  ]) {
    const r = await runCli(RSTREAM, args, { timeoutMs: 10_000 });
    assert.equal(r.code, 1, describeRun(args.join(' '), r));
    assert.equal(r.stderr, stderr, describeRun(args.join(' '), r));
    assert.match(r.stdout, /^usage: rstream\n\t\[-s server_address\]\n/);
    assert.match(r.stdout, /\t    v\|verify - verify data\n$/);
    assert.equal(r.stdout.split('\n').length, 21);
  }
});

test('no server: rsocket "rpoll: Connection refused" exit 8; -T b "rconnect: ..." 255; -T s exit 24', opts, async () => {
  const port = String(await freePort());
  const a = await runCli(RSTREAM, ['-s', '127.0.0.1', '-p', port, '-C', '1'], { timeoutMs: 20_000 });
  assert.equal(a.code, 8, describeRun('default', a));
  assert.equal(a.stderr, 'rpoll: Connection refused\n');
  assert.equal(a.stdout, `${HEADER}\n`);
  const b = await runCli(RSTREAM, ['-s', '127.0.0.1', '-p', port, '-C', '1', '-T', 'b'], { timeoutMs: 20_000 });
  assert.equal(b.code, 255, describeRun('-T b', b));
  assert.equal(b.stderr, 'rconnect: Connection refused\n');
  const s = await runCli(RSTREAM, ['-s', '127.0.0.1', '-p', port, '-C', '1', '-T', 's'], { timeoutMs: 20_000 });
  assert.equal(s.code, 24, describeRun('-T s', s));
  assert.equal(s.stderr, 'rpoll: Operation now in progress\n');
});

test('bad address: "getaddrinfo: Name or service not known" on stdout, exit 254', opts, async () => {
  const r = await runCli(RSTREAM, ['-s', 'no-such-host.invalid', '-f', 'ip', '-C', '1'], { timeoutMs: 20_000 });
  assert.equal(r.code, 254, describeRun('client', r));
  assert.equal(r.stdout, `${HEADER}\ngetaddrinfo: Name or service not known\n`);
});
