// ucmatose end to end: our server and client as two processes on loopback, with -c 1, 10 and
// 100 connections; output lines and exit codes as rdma-core's cmatose.c prints them (checked
// against the kernel's ucmatose on siw in the reference VM, see docs/man/ucmatose.1.md).
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, waitListening, describeRun } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';

const UCMATOSE = join(REPO_ROOT, 'dist', 'cli', 'ucmatose.js');
const opts = { skip: existsSync(UCMATOSE) ? false : `${UCMATOSE} is missing: run npm run build` };

const lines = (...l) => l.map((x) => `${x}\n`).join('');
const SERVER_OK = (migrate = false) =>
  lines(
    'cmatose: starting server',
    'initiating data transfers',
    'completing sends',
    'receiving data transfers',
    'data transfers complete',
    ...(migrate ? ['migrating to new event channel'] : []),
    'cmatose: disconnecting',
    'disconnected',
    'test complete',
    'return status 0',
  );
const CLIENT_OK = (migrate = false) =>
  lines(
    'cmatose: starting client',
    'cmatose: connecting',
    'receiving data transfers',
    'sending replies',
    'data transfers complete',
    ...(migrate ? ['migrating to new event channel'] : []),
    'test complete',
    'return status 0',
  );
const USAGE = lines(
  'usage: ucmatose',
  '\t[-s server_address]',
  '\t[-b bind_address]',
  '\t[-f address_format]',
  '\t    name, ip, ipv6, or gid',
  '\t[-P port_space]',
  '\t    tcp or ib',
  '\t[-c connections]',
  '\t[-C message_count]',
  '\t[-S message_size]',
  '\t[-t type_of_service]',
  '\t[-p port_number]',
  '\t[-m(igrate)]',
  '\t[-a ack_timeout]',
);

async function pair({ server = [], client = [], addr = '127.0.0.1', timeoutMs = 60_000 }) {
  const port = await freePort();
  const srv = startCli(UCMATOSE, ['-p', String(port), ...server], { timeoutMs });
  try {
    await waitListening(port, { exited: srv.done });
    const cli = await runCli(UCMATOSE, ['-s', addr, '-p', String(port), ...client], { timeoutMs });
    const s = await srv.done;
    return { cli, srv: s, both: `${describeRun('client', cli)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

function assertOk(r, { migrate = false } = {}) {
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.srv.stdout, SERVER_OK(migrate), r.both);
  assert.equal(r.cli.stdout, CLIENT_OK(migrate), r.both);
  assert.equal(r.srv.stderr, '', r.both);
  assert.equal(r.cli.stderr, '', r.both);
}

test('-c 1 with the defaults (10 messages of 100 bytes): exit 0/0, the lines of cmatose.c', opts, async () => {
  assertOk(await pair({}));
});

test('-c 10 -C 10 -S 1000 -m: ten connections, ids migrated to a new channel before disconnect', opts, async () => {
  const r = await pair({ server: ['-c', '10', '-C', '10', '-S', '1000', '-m'], client: ['-c', '10', '-C', '10', '-S', '1000', '-m'] });
  assertOk(r, { migrate: true });
});

test('-c 100: a hundred connections at once', opts, async () => {
  const r = await pair({ server: ['-c', '100'], client: ['-c', '100'] });
  assertOk(r);
  assert.ok(r.cli.ms < 30_000, r.both);
});

test('IPv6 (::1), -t and -a recorded (rdma_set_option TOS / ACK timeout), -P ib on both sides', opts, async () => {
  const r = await pair({ server: ['-b', '::1', '-a', '14', '-P', 'ib'], client: ['-t', '0x20', '-a', '14', '-P', 'ib'], addr: '::1' });
  assertOk(r);
});

test('-S 0: no messages (count forced to 0), connect and disconnect only', opts, async () => {
  const r = await pair({ server: ['-S', '0'], client: ['-S', '0'] });
  assert.equal(r.srv.stdout, lines('cmatose: starting server', 'cmatose: disconnecting', 'disconnected', 'test complete', 'return status 0'), r.both);
  assert.equal(r.cli.stdout, lines('cmatose: starting client', 'cmatose: connecting', 'test complete', 'return status 0'), r.both);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
});

test('unknown -P/-f values warn on stderr and run with the defaults', opts, async () => {
  const r = await pair({ server: ['-P', 'xyz'], client: ['-P', 'xyz', '-f', 'foo', '-C', '2'], timeoutMs: 30_000 });
  assert.equal(r.srv.stderr, 'Warning: unknown port space format\n', r.both);
  assert.equal(r.cli.stderr, 'Warning: unknown port space format\nWarning: unknown address format\n', r.both);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
});

test('client messages larger than the server\'s receives (-S 1000 against -S 100): both complete, exit 0/0', opts, async () => {
  // The server's first receive completes with LOC_LEN_ERR, its QP goes to ERR (TERMINATE) and the
  // other receives are flushed: cmatose.c counts completions whatever their status, so the server
  // goes on to disconnect and both report status 0.
  const r = await pair({ server: ['-S', '100', '-C', '10'], client: ['-S', '1000', '-C', '10'], timeoutMs: 30_000 });
  assertOk(r);
});

test('client killed while its replies are on the wire: the server completes and exits 0', opts, async () => {
  // Replies of 8 MB each: when the client dies, the server is in the middle of one of them (the
  // kernel holds a few MB at most), so a receive is in progress when its QP goes to ERR.
  const port = await freePort();
  const size = ['-S', '8000000', '-C', '4'];
  const srv = startCli(UCMATOSE, ['-p', String(port), ...size], { timeoutMs: 30_000 });
  try {
    await waitListening(port, { exited: srv.done });
    const cli = startCli(UCMATOSE, ['-s', '127.0.0.1', '-p', String(port), ...size], { timeoutMs: 30_000 });
    const t0 = Date.now();
    while (!cli.stdout().includes('sending replies\n') && Date.now() - t0 < 20_000) await new Promise((res) => setTimeout(res, 5));
    cli.kill('SIGKILL');
    const c = await cli.done;
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    assert.equal(c.signal, 'SIGKILL', both);
    assert.equal(s.timedOut, false, both);
    assert.equal(s.stdout, SERVER_OK(), both);
    assert.equal(s.code, 0, both);
  } finally {
    srv.kill('SIGKILL');
  }
});

test('nobody listening: failure connecting (rdma_connect fails on siw), return status -1, exit 255', opts, async () => {
  const port = await freePort();
  const r = await runCli(UCMATOSE, ['-s', '127.0.0.1', '-p', String(port)]);
  assert.equal(r.stdout, lines('cmatose: starting client', 'cmatose: connecting', 'test complete', 'return status -1'), describeRun('client', r));
  assert.match(r.stderr, /^cmatose: failure connecting: Connection refused\n/);
  assert.equal(r.code, 255);
});

test('address errors: bad service (-8), -f ip with a name (-2), a bind address that is not local (-1)', opts, async () => {
  let r = await runCli(UCMATOSE, ['-s', '127.0.0.1', '-p', 'abc']);
  assert.equal(
    r.stdout,
    lines('cmatose: starting client', 'rdma_getaddrinfo error: Servname not supported for ai_socktype', 'cmatose: getaddrinfo error: Servname not supported for ai_socktype', 'test complete', 'return status -8'),
  );
  assert.equal(r.code, 248);
  r = await runCli(UCMATOSE, ['-p', 'abc']);
  assert.equal(
    r.stdout,
    lines('cmatose: starting server', 'rdma_getaddrinfo error: Servname not supported for ai_socktype', 'cmatose: getrdmaaddr error: Servname not supported for ai_socktype', 'test complete', 'return status -8'),
  );
  assert.equal(r.code, 248);
  r = await runCli(UCMATOSE, ['-f', 'ip', '-s', 'localhost']);
  assert.match(r.stdout, /cmatose: getaddrinfo error: Name or service not known\ntest complete\nreturn status -2\n$/);
  assert.equal(r.code, 254);
  r = await runCli(UCMATOSE, ['-s', '127.0.0.1', '-b', '203.0.113.77']);
  assert.equal(r.stderr, 'cmatose: failure getting addr: Cannot assign requested address\n', describeRun('client', r));
  assert.equal(r.stdout, lines('cmatose: starting client', 'cmatose: connecting', 'test complete', 'return status -1'));
  assert.equal(r.code, 255);
  r = await runCli(UCMATOSE, ['-f', 'gid', '-s', '127.0.0.1']);
  assert.equal(r.stderr, 'cmatose: failure getting addr: No such device\n', describeRun('client', r));
  assert.equal(r.code, 255);
});

test('usage: unknown option / missing argument (getopt message on stderr, usage on stdout, exit 1); -c -1', opts, async () => {
  let r = await runCli(UCMATOSE, ['-x']);
  assert.equal(r.stderr, "ucmatose: invalid option -- 'x'\n");
  assert.equal(r.stdout, USAGE);
  assert.equal(r.code, 1);
  r = await runCli(UCMATOSE, ['-s']);
  assert.equal(r.stderr, "ucmatose: option requires an argument -- 's'\n");
  assert.equal(r.stdout, USAGE);
  assert.equal(r.code, 1);
  r = await runCli(UCMATOSE, ['-s', '127.0.0.1', '-c', '-1']);
  assert.equal(r.stdout, 'cmatose: unable to allocate memory for test nodes\n');
  assert.equal(r.code, 1);
});
