// udpong end to end: server and client as two processes on loopback in a network namespace of
// this test, over datagram rsockets on the soft RoCE device (and `-T s`, plain UDP); output lines
// and exit codes as rdma-core's udpong.c prints them; bad options; a server that is not there
// (the client resends its login once a second, as udpong.c); a device without UD QPs (siw).
import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, describeRun, makeNetns } from '../lib/tools.js';
import { sleep } from '../lib/wait.js';

const UDPONG = join(REPO_ROOT, 'dist', 'cli', 'udpong.js');
const ns = existsSync(UDPONG) ? makeNetns('udpong') : { skip: `${UDPONG} is missing: run npm run build`, remove() {} };
after(() => ns.remove());
const T = { skip: ns.skip, timeout: 90_000 };
const LO = '127.0.0.1';
const ENV = { RDMACM_BACKEND: 'soft' };

const HEADER = 'name      bytes   xfers   total       time     Gb/sec    usec/xfer\n';
const USAGE = [
  'usage: udpong',
  '\t[-s server_address]',
  '\t[-b bind_address]',
  '\t[-B buffer_size]',
  '\t[-C transfer_count]',
  '\t[-S transfer_size]',
  '\t[-p port_number]',
  '\t[-T test_option]',
  '\t    s|sockets - use standard tcp/ip sockets',
  '\t    a|async - asynchronous operation (use poll)',
  '\t    b|blocking - use blocking calls',
  '\t    n|nonblocking - use nonblocking calls',
  '\t    e|echo - server echoes all messages',
  '',
].join('\n');

let nextPort = 7300;
const cli = (args, o = {}) => startCli(UDPONG, args, { netns: ns.name, env: ENV, timeoutMs: 60_000, ...o });

/** Resolve once something has UDP port `port` bound in the namespace (/proc/net/udp). */
async function bound(proc, port, ms = 15_000) {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')} `;
  let gone = false;
  proc.done.then(() => (gone = true));
  const t0 = Date.now();
  for (;;) {
    if (gone) throw new Error(`the server ended before binding:\n${proc.stdout()}${proc.stderr()}`);
    const udp = spawnSync('ip', ['netns', 'exec', ns.name, 'cat', '/proc/net/udp', '/proc/net/udp6'], { encoding: 'utf8' }).stdout ?? '';
    if (udp.includes(hex)) return;
    if (Date.now() - t0 > ms) throw new Error(`nothing bound on UDP ${port} after ${ms} ms`);
    await sleep(25);
  }
}

/** A server on a fresh port; `run(port)` gets it; the server is killed after. */
async function withServer(extra, run) {
  const port = nextPort++;
  const srv = cli(['-b', LO, '-p', String(port), ...extra]);
  try {
    await bound(srv, port);
    return await run(port, srv);
  } finally {
    srv.kill();
    await srv.done;
  }
}

/** One result row of show_perf(): name, size, transfers, total, then the figures. */
const row = (name, size, xfers, total) =>
  new RegExp(`^${name.padEnd(10)}${size.padEnd(8)}${xfers.padEnd(8)}${total.padEnd(8)} *\\d+\\.\\d\\ds +\\d+\\.\\d\\d +\\d+\\.\\d\\d\\n$`);

for (const [what, extra, rowOf] of [
  ['datagram rsockets, one way (the server counts what arrived)', ['-C', '300', '-S', '100'], () => row('custom', '100', '300', '29k')],
  ['datagram rsockets, echoed (-T e)', ['-T', 'e', '-C', '100', '-S', '64'], () => row('custom', '64', '200', '12k')],
  ['datagram rsockets, 2000-byte echoes, async (-T a)', ['-T', 'a', '-T', 'e', '-C', '30', '-S', '2000'], () => row('custom', '1.9k', '60', '117k')],
  ['datagram rsockets, async with zero poll timeouts (-T a -T b), echoed', ['-T', 'a', '-T', 'b', '-T', 'e', '-C', '50', '-S', '64'], () => row('custom', '64', '100', '6.2k')],
  ['plain UDP sockets (-T s), echoed', ['-T', 's', '-T', 'e', '-C', '100', '-S', '1000'], () => row('custom', '1000', '200', '195k')],
]) {
  test(`udpong: ${what}`, T, async () => {
    const plain = extra.includes('s') ? ['-T', 's'] : [];
    await withServer(plain, async (port, srv) => {
      const r = await runCli(UDPONG, ['-s', LO, '-p', String(port), ...extra], { netns: ns.name, env: ENV, timeoutMs: 60_000 });
      const both = `${describeRun('client', r)}\n${describeRun('server so far', { code: null, ms: 0, stdout: srv.stdout(), stderr: srv.stderr() })}`;
      assert.equal(r.code, 0, both);
      assert.equal(r.stderr, '', both);
      assert.ok(r.stdout.startsWith(HEADER), both);
      assert.match(r.stdout.slice(HEADER.length), rowOf(), both);
      assert.equal(srv.stdout(), `client login from ${LO}\n`, both);
      assert.equal(srv.stderr(), '', both);
    });
  });
}

test('udpong: two clients in turn log in to one server', T, async () => {
  await withServer([], async (port, srv) => {
    for (let i = 0; i < 2; i++) {
      const r = await runCli(UDPONG, ['-s', LO, '-p', String(port), '-T', 'e', '-C', '20', '-S', '32'], { netns: ns.name, env: ENV, timeoutMs: 60_000 });
      assert.equal(r.code, 0, describeRun('client', r));
      assert.match(r.stdout.slice(HEADER.length), row('custom', '32', '40', '1.2k'));
    }
    assert.equal(srv.stdout(), `client login from ${LO}\nclient login from ${LO}\n`);
  });
});

test('udpong: bad options as rdma-core\'s (getopt\'s message, the usage, exit 1)', T, async () => {
  const cases = [
    [['-x'], "udpong: invalid option -- 'x'\n", USAGE],
    [['-p'], "udpong: option requires an argument -- 'p'\n", USAGE],
    [['-T', 'z'], '', USAGE],
    [['-T', 'nonsense'], '', USAGE],
    [['-S', '8'], '', 'size must be at least 16 bytes\n'],
  ];
  for (const [args, stderr, stdout] of cases) {
    const r = await runCli(UDPONG, args, { netns: ns.name, env: ENV, timeoutMs: 20_000 });
    assert.equal(r.code, 1, describeRun(args.join(' '), r));
    assert.equal(r.stderr, stderr, describeRun(args.join(' '), r));
    assert.equal(r.stdout, stdout, describeRun(args.join(' '), r));
  }
});

test('udpong: with no server the client resends its login over UDP once a second and waits, as udpong.c', T, async () => {
  const port = nextPort++;
  // A plain UDP socket on the port sees what the client sends to a server's UDP service.
  const sink = startCli(join(REPO_ROOT, 'test', 'lib', 'udp-sink.js'), [LO, String(port)], { netns: ns.name, timeoutMs: 30_000 });
  await bound(sink, port);
  const c = cli(['-s', LO, '-p', String(port), '-C', '10'], { timeoutMs: 30_000 });
  await sleep(3500);
  c.kill();
  sink.kill();
  const r = await c.done;
  const s = await sink.done;
  const logins = s.stdout.split('\n').filter((l) => /^55555555 04 00 10 00 [0-9a-f]{8} 7f000001 00/.test(l));
  assert.equal(r.stdout, HEADER, describeRun('client', r));
  assert.equal(r.stderr, '');
  assert.ok(logins.length >= 3 && logins.length <= 5, `logins seen: ${logins.length}\n${s.stdout}`);
});

test('udpong: a device without UD QPs fails as rdma-core\'s on siw (rconnect: Operation not supported, exit 255)', T, async () => {
  const r = await runCli(UDPONG, ['-s', LO, '-p', String(nextPort++), '-C', '10'], { netns: ns.name, env: { ...ENV, RDMACM_DEVICE: 'siw_lo' }, timeoutMs: 20_000 });
  assert.equal(r.code, 255, describeRun('client', r));
  assert.equal(r.stdout, HEADER);
  assert.equal(r.stderr, 'rconnect: Operation not supported\n');
});
