// cmtime end to end: a listener (-L) and a connecting peer meeting at an OOB controller address
// on loopback; the progress lines and the timing table of rdma-core's current cmtime.c. On
// iWARP its "no QPs" run fails in rdma_connect (EINVAL), as with the kernel's siw.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, describeRun, waitListening } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';

const CMTIME = join(REPO_ROOT, 'dist', 'cli', 'cmtime.js');
const opts = { skip: existsSync(CMTIME) ? false : `${CMTIME} is missing: run npm run build` };

const STEPS = ['full connect', 'create id', 'bind addr', 'resolve addr', 'resolve route', 'create qp', 'init qp attr', 'init qp', 'rtr qp attr', 'rtr qp', 'rts qp attr', 'rts qp', 'cm connect', 'establish', 'disconnect', 'destroy id', 'destroy qp'];
const HEADER = 'step             avg/conn  total(us)    us/conn    sum(us)    max(us)    min(us)';

/** The table after `heading`: checks its exact shape, returns { step: [6 numbers] }. */
function parseTable(text, heading, { kind, conns }) {
  const lines = text.split('\n');
  const at = lines.indexOf(heading);
  assert.ok(at >= 0, `no "${heading}" in:\n${text}`);
  const t = lines.slice(at).findIndex((l) => /^(qp|cm)_conn /.test(l)) + at;
  assert.equal(lines[t], `${kind}_conn        ${String(conns).padStart(10)}`);
  assert.equal(lines[t + 1], `threads        ${'1'.padStart(10)}`);
  assert.equal(lines[t + 2], HEADER);
  const rows = {};
  STEPS.forEach((step, i) => {
    const line = lines[t + 3 + i];
    const m = /^(.{13})  ( {0,9}\d+) ( {0,9}\d+) ( {0,9}\d+) ( {0,9}\d+) ( {0,9}\d+) ( {0,9}\d+)$/.exec(line);
    assert.ok(m, `row ${i} "${line}" is not "%-13s  %10u %10u %10u %10u %10u %10u"`);
    assert.equal(m[1].trimEnd(), step);
    for (let k = 2; k <= 7; k++) assert.equal(m[k].length, 10);
    rows[step] = m.slice(2).map(Number);
  });
  return rows;
}

async function run(conns, extra = []) {
  const port = await freePort();
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(port), '-c', String(conns), ...extra];
  const srv = startCli(CMTIME, [...common, '-L'], { timeoutMs: 60_000 });
  await waitListening(port, { exited: srv.done }); // the OOB root's listener
  const cli = await runCli(CMTIME, common, { timeoutMs: 60_000 });
  const s = await srv.done;
  return { cli, srv: s, both: `${describeRun('client', cli)}\n${describeRun('server', s)}` };
}

test('-c 20: warmup, the QPs test and its table; the no-QPs run fails in rdma_connect on iWARP', opts, async () => {
  const r = await run(20);
  const phases = ['\tCreating IDs', '\tBinding addresses', '\tResolving addresses', '\tResolving routes', '\tCreating QPs'];
  const rest = ['\tModify QPs to INIT', '\tConnecting', '\tDisconnecting', '\tDestroying QPs', '\tDestroying IDs'];
  const expectStart = ['Client warmup', ...phases, '\tAllocating verbs resources', ...rest, 'Connect (20) QPs test', ...phases, ...rest].join('\n') + '\n';
  assert.ok(r.cli.stdout.startsWith(expectStart), r.both);
  const rows = parseTable(r.cli.stdout, 'Connect (20) QPs test', { kind: 'qp', conns: 20 });
  for (const s of ['full connect', 'create id', 'bind addr', 'resolve addr', 'resolve route', 'create qp', 'cm connect', 'disconnect', 'destroy id', 'destroy qp']) {
    assert.ok(rows[s][1] > 0, `${s}: total(us) > 0`);
  }
  assert.equal(rows['full connect'][3], 0, 'full connect sum is forced to 0');
  assert.equal(rows['rtr qp'][3], 0, 'iWARP: no CONNECT_RESPONSE, so no per-connection RTR step');
  assert.equal(rows['establish'][1], 0);
  assert.equal(rows['create id'][0], Math.trunc(rows['create id'][1] / 20), 'avg/conn = total / conns');
  assert.ok(r.cli.stdout.endsWith('Connect (20) test - no QPs\n' + [...phases, '\tModify QPs to INIT', '\tConnecting'].join('\n') + '\n'), r.both);
  assert.equal(r.cli.stderr, 'rdma_connect: Invalid argument\n', r.both);
  assert.equal(r.cli.code, 1, r.both);

  assert.ok(r.srv.stdout.startsWith('Running as OOB root\nServer warmup\n\tAccepting\n\tAllocating verbs resources\n\tDisconnecting\nAccept (20) QPs test\n\tAccepting\n\tDisconnecting\n'), r.both);
  const srows = parseTable(r.srv.stdout, 'Accept (20) QPs test', { kind: 'qp', conns: 20 });
  assert.ok(srows['cm connect'][1] > 0 && srows['create qp'][3] > 0, r.both);
  assert.ok(r.srv.stdout.endsWith('Accept (20) test - no QPs\n'), r.both);
  assert.equal(r.srv.code, 1, 'the server ends when its OOB peer is gone');
});

test('-S: the socket baseline tables (cm_conn)', opts, async () => {
  const r = await run(50, ['-S']);
  assert.ok(r.cli.stdout.startsWith('Client baseline socket setup\nCreating sockets\nConnecting sockets\nClosing sockets\nClient baseline socket results:\n'), r.both);
  const rows = parseTable(r.cli.stdout, 'Client baseline socket results:', { kind: 'cm', conns: 50 });
  assert.ok(rows['cm connect'][1] > 0 && rows['cm connect'][3] > 0, r.both);
  assert.ok(r.srv.stdout.includes('Server baseline socket setup\nAccept sockets\nClosing sockets\nServer baseline socket results:\n'), r.both);
  parseTable(r.srv.stdout, 'Server baseline socket results:', { kind: 'cm', conns: 50 });
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
});

test('--warmup 5 -c 2: three untimed rounds (2, 2, 1 connections) before the timed test; -S too', opts, async () => {
  const r = await run(2, ['--warmup', '5']);
  const phases = ['\tCreating IDs', '\tBinding addresses', '\tResolving addresses', '\tResolving routes', '\tCreating QPs'];
  const rest = ['\tModify QPs to INIT', '\tConnecting', '\tDisconnecting', '\tDestroying QPs', '\tDestroying IDs'];
  const round = [...phases, ...rest];
  const first = [...phases, '\tAllocating verbs resources', ...rest];
  const expectStart = ['Client warmup', ...first, ...round, ...round, 'Connect (2) QPs test', ...round].join('\n') + '\n';
  assert.ok(r.cli.stdout.startsWith(expectStart), r.both);
  parseTable(r.cli.stdout, 'Connect (2) QPs test', { kind: 'qp', conns: 2 });
  const srvRound = '\tAccepting\n\tDisconnecting\n';
  assert.ok(r.srv.stdout.startsWith(`Running as OOB root\nServer warmup\n\tAccepting\n\tAllocating verbs resources\n\tDisconnecting\n${srvRound}${srvRound}Accept (2) QPs test\n${srvRound}`), r.both);
  parseTable(r.srv.stdout, 'Accept (2) QPs test', { kind: 'qp', conns: 2 });

  const s = await run(2, ['-S', '--warmup=3']);
  assert.ok(s.cli.stdout.startsWith('Client baseline socket setup\nCreating sockets\nConnecting sockets\nClosing sockets\nClient baseline socket results:\n'), s.both);
  parseTable(s.cli.stdout, 'Client baseline socket results:', { kind: 'cm', conns: 2 });
  assert.ok(s.srv.stdout.startsWith('Running as OOB root\nServer baseline socket setup\nAccept sockets\nClosing sockets\nServer baseline socket results:\n'), s.both);
  assert.equal(s.cli.code, 0, s.both);
  assert.equal(s.srv.code, 0, s.both);

  for (const bad of [['--warmup'], ['--warmup', 'x'], ['--warmup=-1']]) {
    const u = await runCli(CMTIME, ['-b', '127.0.0.1', '-C', '127.0.0.1', ...bad]);
    assert.equal(u.stderr, 'cmtime: --warmup needs a number of connections\n', describeRun(bad.join(' '), u));
    assert.match(u.stdout, /^usage: cmtime\n/);
    assert.equal(u.code, 1);
  }
});

test('-P 3 --warmup 3 -c 2: each peer runs the same two warm-up rounds; the listener accepts for both clients', opts, async () => {
  const port = await freePort();
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(port), '-c', '2', '-P', '3', '--warmup', '3'];
  const srv = startCli(CMTIME, [...common, '-L'], { timeoutMs: 60_000 });
  await waitListening(port, { exited: srv.done });
  const [a, b] = await Promise.all([runCli(CMTIME, common, { timeoutMs: 60_000 }), runCli(CMTIME, common, { timeoutMs: 60_000 })]);
  const s = await srv.done;
  const all = [describeRun('client a', a), describeRun('client b', b), describeRun('server', s)].join('\n');
  for (const c of [a, b]) {
    // two warm-up rounds (2 + 1 connections) and the test, no no-QPs run with three peers
    assert.equal(c.stdout.split('\n').filter((l) => l === '\tCreating IDs').length, 3, all);
    parseTable(c.stdout, 'Connect (2) QPs test', { kind: 'qp', conns: 2 });
    assert.equal(c.code, 0, all);
  }
  assert.equal(s.stdout.split('\n').filter((l) => l === '\tAccepting').length, 3, all);
  parseTable(s.stdout, 'Accept (4) QPs test', { kind: 'qp', conns: 4 });
  assert.equal(s.code, 0, all);
});

test('usage: -C and -b/-B are required, -P below 2, two listeners only', opts, async () => {
  for (const args of [['-b', '127.0.0.1'], ['-C', '127.0.0.1'], ['-b', '127.0.0.1', '-C', '127.0.0.1', '-P', '1'], ['-b', '127.0.0.1', '-B', 'lo', '-C', '127.0.0.1']]) {
    const r = await runCli(CMTIME, args);
    assert.match(r.stdout, /^(Picking source address .*\n)?usage: cmtime\n\t-B bind_interface \(only one of -B or -b accepted\)\n/, describeRun(args.join(' '), r));
    assert.ok(r.stdout.endsWith('\t[-S] run socket baseline test, 2 peers only\n\t[-t timeout_ms]\n'));
    assert.equal(r.code, 1);
  }
  const r = await runCli(CMTIME, ['-z']);
  assert.equal(r.stderr, "cmtime: invalid option -- 'z'\n");
  assert.equal(r.code, 1);
  const port = await freePort();
  const a = startCli(CMTIME, ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(port), '-L']);
  await waitListening(port, { exited: a.done });
  const b = await runCli(CMTIME, ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(port), '-L']);
  const ra = await a.done;
  assert.equal(b.stdout, 'cannot have all listeners\n', describeRun('second', b));
  assert.equal(b.code, 1);
  assert.equal(ra.stdout, 'Running as OOB root\ncannot have all listeners\n', describeRun('first', ra));
});

test('-B lo picks the interface address', opts, async () => {
  const r = await runCli(CMTIME, ['-B', 'lo']);
  assert.match(r.stdout, /^Picking source address 127\.0\.0\.1 for interface lo\nusage: cmtime\n/);
  const bad = await runCli(CMTIME, ['-B', 'no-such-if0', '-C', '127.0.0.1']);
  assert.equal(bad.stderr, 'Failed to find IP address for interface: no-such-if0\n');
  assert.equal(bad.code, 1);
});
