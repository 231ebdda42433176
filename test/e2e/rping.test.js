// rping end to end: our server and client as two processes over the software iWARP device on
// loopback (127.0.0.1 and ::1). Output lines, exit codes and error texts are rdma-core's
// (docs/man/rping.1.md); the ping data is generated from the documented buffer pattern.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { RPING, startCli, runCli, waitListening, describeRun, rpingLines } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';

const built = existsSync(RPING);
const opts = { skip: built ? false : `${RPING} is missing: run npm run build` };

const USAGE =
  'rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n' +
  'rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n' +
  '\t-c\t\tclient side\n' +
  '\t-I\t\tSource address to bind to for client.\n' +
  '\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n' +
  '\t-v\t\tdisplay ping data to stdout\n' +
  '\t-V\t\tvalidate ping data\n' +
  '\t-d\t\tdebug printfs\n' +
  '\t-S size \tping data size\n' +
  '\t-C count\tping count times\n' +
  '\t-a addr\t\taddress\n' +
  '\t-p port\t\tport\n' +
  '\t-P\t\tpersistent server mode allowing multiple connections\n' +
  '\t-q\t\tuse self-created, self-modified QP\n';

const SERVER_END = 'server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n';

/** Start a server, wait until it listens, run one client; returns both results. */
async function pingPong({ serverArgs, clientArgs, port }) {
  const srv = startCli(RPING, ['-s', ...serverArgs, '-p', String(port)]);
  try {
    await waitListening(port, { exited: srv.done });
    const cli = await runCli(RPING, ['-c', ...clientArgs, '-p', String(port)]);
    const s = await srv.done;
    return { cli, srv: s, both: `${describeRun('client', cli)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

function assertPingRun(r, { count, size = 64, verbose = true }) {
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.cli.stdout, verbose ? rpingLines({ count, size, role: 'client' }) : '', r.both);
  assert.equal(r.srv.stdout, verbose ? rpingLines({ count, size, role: 'server' }) : '', r.both);
  assert.equal(r.cli.stderr, 'client DISCONNECT EVENT...\n', r.both);
  assert.equal(r.srv.stderr, SERVER_END, r.both);
}

test('-C 10 -v -V on 127.0.0.1: the ping data both ways, exit 0/0', opts, async () => {
  const port = await freePort();
  const r = await pingPong({
    port,
    serverArgs: ['-a', '127.0.0.1', '-C', '10', '-v', '-V'],
    clientArgs: ['-a', '127.0.0.1', '-C', '10', '-v', '-V'],
  });
  assertPingRun(r, { count: 10 });
  assert.match(r.srv.stderr, /^wait for RDMA_READ_ADV state 10$/m);
});

for (const size of [26, 64, 1000, 65535]) {
  test(`-S ${size} -V -v (127.0.0.1)`, opts, async () => {
    const port = await freePort();
    const s = size === 64 ? [] : ['-S', String(size)]; // 64 is the default
    const r = await pingPong({
      port,
      serverArgs: ['-a', '127.0.0.1', '-C', '3', '-v', ...s],
      clientArgs: ['-a', '127.0.0.1', '-C', '3', '-V', '-v', ...s],
    });
    assertPingRun(r, { count: 3, size });
  });
}

test('IPv6 ::1, -C 60 (the start letter wraps after z)', opts, async () => {
  const port = await freePort();
  const r = await pingPong({
    port,
    serverArgs: ['-a', '::1', '-C', '60', '-v'],
    clientArgs: ['-a', '::1', '-C', '60', '-v', '-V'],
  });
  assertPingRun(r, { count: 60 });
});

test('server -a ::0 (any, both families); client without -a (0.0.0.0) and without -v', opts, async () => {
  const port = await freePort();
  const r = await pingPong({ port, serverArgs: ['-a', '::0', '-C', '5'], clientArgs: ['-C', '5', '-V'] });
  assertPingRun(r, { count: 5, verbose: false });
});

test('-P persistent server: 3 clients one after another, then 3 at once; killed at the end', opts, async () => {
  const port = await freePort();
  const srv = startCli(RPING, ['-s', '-P', '-a', '127.0.0.1', '-p', String(port), '-v'], { timeoutMs: 40_000 });
  try {
    await waitListening(port, { exited: srv.done });
    const client = (count) => runCli(RPING, ['-c', '-a', '127.0.0.1', '-p', String(port), '-C', String(count), '-v', '-V']);
    const results = [];
    for (let i = 0; i < 3; i++) results.push({ r: await client(4), count: 4 });
    const together = await Promise.all([client(15), client(15), client(15)]);
    for (const r of together) results.push({ r, count: 15 });
    for (const { r, count } of results) {
      const d = `${describeRun('client', r)}\nserver stderr so far: ${JSON.stringify(srv.stderr())}`;
      assert.equal(r.code, 0, d);
      assert.equal(r.stdout, rpingLines({ count }), d);
    }
    // The server is still serving.
    assert.equal(srv.child.exitCode, null, 'the -P server exited');
    const sOut = srv.stdout().split('\n').filter(Boolean);
    assert.equal(sOut.length, 3 * 4 + 3 * 15);
    for (const l of sOut) assert.match(l, /^server ping data: rdma-ping-\d+: [A-Za-z[\\\]^_`]+$/);
    // Each connection ends the way a single server's does (the server sees the last client's
    // disconnect a little after that client exits).
    const t0 = Date.now();
    while (srv.stderr().split('\n').filter((l) => l === 'wait for RDMA_READ_ADV state 10').length < 6 && Date.now() - t0 < 5000) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const errLines = srv.stderr().split('\n').filter(Boolean);
    assert.equal(errLines.filter((l) => l === 'server DISCONNECT EVENT...').length, 6, srv.stderr());
    assert.equal(errLines.filter((l) => l === 'wait for RDMA_READ_ADV state 10').length, 6, srv.stderr());
    assert.equal(errLines.length, 12, srv.stderr());
  } finally {
    srv.kill('SIGTERM');
    const s = await srv.done;
    assert.equal(s.signal, 'SIGTERM', describeRun('server', s));
  }
});

test('-q: a server with its own QP serves a normal client', opts, async () => {
  const port = await freePort();
  const r = await pingPong({
    port,
    serverArgs: ['-q', '-a', '127.0.0.1', '-C', '4', '-v'],
    clientArgs: ['-a', '127.0.0.1', '-C', '4', '-v', '-V'],
  });
  assertPingRun(r, { count: 4 });
});

test('--json --warmup 5: the client times its 10 pings after 5 untimed, the server reports the CPU of the same 10', opts, async () => {
  const port = await freePort();
  const r = await pingPong({
    port,
    serverArgs: ['-a', '127.0.0.1', '--json', '--warmup', '5'],
    clientArgs: ['-a', '127.0.0.1', '-C', '10', '--warmup', '5', '--json'],
  });
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.srv.stderr, SERVER_END, r.both);
  const c = JSON.parse(r.cli.stdout);
  assert.deepEqual([c.tool, c.pings, c.warmup], ['rping', 10, 5], r.both);
  assert.ok(c.usec > 0 && c.cpu_user_usec >= 0 && c.cpu_sys_usec >= 0, r.both);
  assert.equal(r.srv.stdout.split('\n').filter(Boolean).length, 1, r.both);
  const s = JSON.parse(r.srv.stdout);
  assert.deepEqual([s.tool, s.role, s.pings, s.warmup], ['rping', 'server', 10, 5], r.both);
  assert.ok(Number.isInteger(s.cpu_user_usec) && Number.isInteger(s.cpu_sys_usec) && s.cpu_user_usec + s.cpu_sys_usec > 0, r.both);
});

test('a server without --json prints nothing of its timing', opts, async () => {
  const port = await freePort();
  const r = await pingPong({ port, serverArgs: ['-a', '127.0.0.1'], clientArgs: ['-a', '127.0.0.1', '-C', '3', '--json'] });
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.srv.stdout, '', r.both);
  assert.equal(JSON.parse(r.cli.stdout).pings, 3, r.both);
});

test('-q client: rdma_establish fails with EINVAL on iWARP, as with rdma-core on siw', opts, async () => {
  const port = await freePort();
  const r = await pingPong({
    port,
    serverArgs: ['-a', '127.0.0.1', '-C', '2'],
    clientArgs: ['-q', '-a', '127.0.0.1', '-C', '2'],
  });
  assert.equal(r.cli.code, 255, r.both);
  assert.match(r.cli.stderr, /^rdma_establish: Invalid argument\nconnect error -1\n/, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.srv.stderr, SERVER_END, r.both);
});

test('-d prints the debug trace (stdout) without disturbing the ping data', opts, async () => {
  const port = await freePort();
  const r = await pingPong({
    port,
    serverArgs: ['-d', '-a', '127.0.0.1', '-C', '2', '-v'],
    clientArgs: ['-d', '-a', '127.0.0.1', '-C', '2', '-v'],
  });
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  for (const l of [`port ${port}`, 'count 2', 'verbose', 'rdma_resolve_addr - rdma_resolve_route successful', 'cq_thread started.', 'rdma_connect successful', 'ESTABLISHED']) {
    assert.ok(r.cli.stdout.split('\n').includes(l), `client -d lacks ${JSON.stringify(l)}\n${r.both}`);
  }
  for (const l of ['rdma_bind_addr successful', 'rdma_listen', 'accepting client connection request', 'server posted go ahead']) {
    assert.ok(r.srv.stdout.split('\n').includes(l), `server -d lacks ${JSON.stringify(l)}\n${r.both}`);
  }
  const data = r.cli.stdout.split('\n').filter((l) => l.startsWith('ping data: ')).join('\n') + '\n';
  assert.equal(data, rpingLines({ count: 2 }));
  assert.match(r.cli.stdout, /^RDMA addr [0-9a-f]+ rkey [0-9a-f]+ len 64$/m);
  assert.match(r.srv.stdout, /^cma_event type RDMA_CM_EVENT_CONNECT_REQUEST cma_id 0x[0-9a-f]+ \(child\)$/m);
});

// ---- errors ---------------------------------------------------------------------------------

test('no -s/-c: usage on stdout, exit 22', opts, async () => {
  const r = await runCli(RPING, ['-v']);
  assert.equal(r.code, 22, describeRun('rping -v', r));
  assert.equal(r.stdout, USAGE);
  assert.equal(r.stderr, '');
});

test('-t (in the getopt string, never handled), an unknown option, a missing argument: usage, exit 22', opts, async () => {
  for (const args of [['-s', '-t', '5'], ['-c', '-x'], ['--help'], ['-c', '-a']]) {
    const r = await runCli(RPING, args);
    assert.equal(r.code, 22, describeRun(args.join(' '), r));
    assert.equal(r.stdout, USAGE, args.join(' '));
  }
});

test('-S 25 and -S 65536: the Invalid size line (range printed as 26 to 65536), exit 22', opts, async () => {
  for (const size of ['25', '65536']) {
    const r = await runCli(RPING, ['-s', '-S', size]);
    assert.equal(r.code, 22, describeRun(`-S ${size}`, r));
    assert.equal(r.stderr, `Invalid size ${size} (valid range is 26 to 65536)\n`);
    assert.equal(r.stdout, '');
  }
});

test('-C -1: Invalid count -1, exit 22; -d only affects the options after it', opts, async () => {
  let r = await runCli(RPING, ['-c', '-C', '-1']);
  assert.equal(r.code, 22, describeRun('-C -1', r));
  assert.equal(r.stderr, 'Invalid count -1\n');
  r = await runCli(RPING, ['-d', '-c', '-C', '5', '-S', '10']);
  assert.equal(r.code, 22);
  assert.equal(r.stdout, 'client\ncount 5\n');
  assert.equal(r.stderr, 'Invalid size 10 (valid range is 26 to 65536)\n');
  r = await runCli(RPING, ['-c', '-C', '5', '-d', '-S', '10']);
  assert.equal(r.stdout, '');
});

test('bad hostname: the getaddrinfo line on stdout, exit status = EAI code (254 for EAI_NONAME)', opts, async () => {
  const r = await runCli(RPING, ['-c', '-a', 'no-such-host.invalid', '-C', '1']);
  const m = /^getaddrinfo failed \((.+)\) - invalid hostname or IP address\n$/.exec(r.stdout);
  assert.ok(m, describeRun('bad host', r));
  const expected = { 'Name or service not known': 254, 'Temporary failure in name resolution': 253 }[m[1]];
  assert.equal(r.code, expected ?? 254, describeRun('bad host', r));
  assert.equal(r.stderr, '');
});

test('nobody listening: rdma_connect: Connection refused, connect error -1, exit 255 (the kernel rping prints the same, then hangs)', opts, async () => {
  const port = await freePort();
  for (const host of ['127.0.0.1', '::1']) {
    const r = await runCli(RPING, ['-c', '-a', host, '-p', String(port), '-C', '1']);
    assert.equal(r.code, 255, describeRun(`client to ${host}`, r));
    assert.equal(r.stderr, 'rdma_connect: Connection refused\nconnect error -1\n', describeRun(host, r));
    assert.equal(r.stdout, '');
  }
});

test('server on an address that is not local: rdma_bind_addr error, exit 255', opts, async () => {
  const r = await runCli(RPING, ['-s', '-a', '198.51.100.77', '-p', String(await freePort())]);
  assert.equal(r.code, 255, describeRun('bind', r));
  assert.equal(r.stderr, 'rdma_bind_addr: Cannot assign requested address\n');
});
