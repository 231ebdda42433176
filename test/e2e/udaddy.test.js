// udaddy end to end on the soft RoCE device: server and client as two processes on loopback, in
// a network namespace of this test (udaddy's port, 7174 of the UDP port space, is fixed, so runs
// must not meet other ones); output lines and exit codes as rdma-core's udaddy.c prints them.
import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, describeRun, makeNetns } from '../lib/tools.js';
import { sleep } from '../lib/wait.js';

const UDADDY = join(REPO_ROOT, 'dist', 'cli', 'udaddy.js');
const ns = existsSync(UDADDY) ? makeNetns('udaddy') : { skip: `${UDADDY} is missing: run npm run build`, remove() {} };
after(() => ns.remove());
const opts = { skip: ns.skip };

const lines = (...l) => l.map((x) => `${x}\n`).join('');

const SERVER_OK = lines('udaddy: starting server', 'receiving data transfers', 'sending replies', 'data transfers complete', 'test complete', 'return status 0');
const CLIENT_OK = lines('udaddy: starting client', 'udaddy: connecting', 'initiating data transfers', 'receiving data transfers', 'data transfers complete', 'test complete', 'return status 0');

/** The SIDR service of udaddy's port: RDMA_PS_UDP 0x0111 << 16 | 7174, as the listener's name shows it. */
const SERVICE = /svc-(0x)?0*1111c06\b/i;

/**
 * Resolve once the server listens: the soft RoCE CM claims a listened service with an abstract
 * Unix socket of the namespace (`@rdmacm-roce-<port>-svc-<service id>`).
 */
async function listening(srv, ms = 15_000) {
  let gone = false;
  srv.done.then(() => (gone = true));
  const t0 = Date.now();
  for (;;) {
    if (gone) throw new Error(`the server ended before listening:\n${srv.stdout()}${srv.stderr()}`);
    const unix = spawnSync('ip', ['netns', 'exec', ns.name, 'cat', '/proc/net/unix'], { encoding: 'utf8' }).stdout ?? '';
    if (unix.split('\n').some((l) => SERVICE.test(l))) return;
    if (Date.now() - t0 > ms) throw new Error(`the server does not listen after ${ms} ms:\n${srv.stdout()}${srv.stderr()}`);
    await sleep(25);
  }
}

function udaddy(args, timeoutMs = 60_000) {
  return startCli(UDADDY, args, { timeoutMs, netns: ns.name });
}

/** A server (bound to `bind`, or to every address when null) and, once it listens, a client. */
async function pair({ server = [], client = [], addr = '127.0.0.1', bind = '127.0.0.1', timeoutMs = 60_000 }) {
  const srv = udaddy([...(bind === null ? [] : ['-b', bind]), ...server], timeoutMs);
  try {
    await listening(srv);
    const cli = await udaddy(['-s', addr, ...client], timeoutMs).done;
    const s = await srv.done;
    return { cli, srv: s, both: `${describeRun('client', cli)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

function assertOk(r) {
  assert.equal(r.cli.stdout, CLIENT_OK, r.both);
  assert.equal(r.srv.stdout, SERVER_OK, r.both);
  assert.equal(r.cli.stderr, '', r.both);
  assert.equal(r.srv.stderr, '', r.both);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
}

test('defaults (one path, 10 datagrams of 100 bytes each way): exit 0/0, the lines of udaddy.c', opts, async () => {
  assertOk(await pair({}));
});

test('a server without -b listens on every address (rdma_getaddrinfo(NULL, "7174") gives 0.0.0.0)', opts, async () => {
  assertOk(await pair({ bind: null }));
});

test('-c 8 -C 50: eight paths resolved at once on one channel', opts, async () => {
  assertOk(await pair({ server: ['-c', '8', '-C', '50'], client: ['-c', '8', '-C', '50'] }));
});

test('-S 1 and -S 4096 (the active MTU on loopback); -t 0x20 on the client', opts, async () => {
  assertOk(await pair({ server: ['-S', '1'], client: ['-S', '1'] }));
  assertOk(await pair({ server: ['-S', '4096', '-C', '20'], client: ['-S', '4096', '-C', '20', '-t', '0x20'] }));
});

test('IPv6 (::1): the reply address handle from an IPv6 network header', opts, async () => {
  assertOk(await pair({ bind: '::1', addr: '::1', server: ['-c', '2'], client: ['-c', '2'] }));
});

test('-S over the MTU: the client stops before its request (-22); a server refuses the request (client: UNREACHABLE 2)', opts, async () => {
  const c = await runCli(UDADDY, ['-s', '127.0.0.1', '-S', '4097'], { netns: ns.name });
  assert.equal(c.stdout, lines('udaddy: starting client', 'udaddy: connecting', 'udaddy: message_size 4097 is larger than active mtu 4096', 'test complete', 'return status -22'), describeRun('client', c));
  assert.equal(c.stderr, '');
  assert.equal(c.code, 234);
  const r = await pair({ server: ['-S', '5000'] });
  assert.equal(
    r.srv.stdout,
    lines('udaddy: starting server', 'udaddy: message_size 5000 is larger than active mtu 4096', 'udaddy: failing connection request', 'receiving data transfers', 'sending replies', 'data transfers complete', 'test complete', 'return status 0'),
    r.both,
  );
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.cli.stdout, lines('udaddy: starting client', 'udaddy: connecting', 'udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 2', 'test complete', 'return status 2'), r.both);
  assert.equal(r.cli.code, 2, r.both);
});

test('-S 0 / -C 0: resolution only, no datagrams', opts, async () => {
  const r = await pair({ server: ['-S', '0'], client: ['-C', '0'] });
  assert.equal(r.srv.stdout, lines('udaddy: starting server', 'test complete', 'return status 0'), r.both);
  assert.equal(r.cli.stdout, lines('udaddy: starting client', 'udaddy: connecting', 'test complete', 'return status 0'), r.both);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
});

test('-p 0x0002 (RDMA_PS_IPOIB) and -P ipoib: the IPoIB Q_Key comes from an IB multicast group, which RoCE has not: no QP (ENODEV, as rxe)', opts, async () => {
  for (const ps of [['-p', '0x0002'], ['-P', 'ipoib']]) {
    const r = await runCli(UDADDY, ['-s', '127.0.0.1', ...ps], { netns: ns.name });
    assert.equal(r.stdout, lines('udaddy: starting client', 'udaddy: connecting', 'test complete', 'return status -1'), describeRun(ps.join(' '), r));
    assert.equal(r.stderr, 'udaddy: unable to create QP: No such device\n', describeRun(ps.join(' '), r));
    assert.equal(r.code, 255);
  }
});

test('nobody listening: the SIDR request is answered "unsupported service" (UNREACHABLE 1)', opts, async () => {
  const r = await runCli(UDADDY, ['-s', '127.0.0.1'], { netns: ns.name, timeoutMs: 60_000 });
  assert.equal(r.stdout, lines('udaddy: starting client', 'udaddy: connecting', 'udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1', 'test complete', 'return status 1'), describeRun('client', r));
  assert.equal(r.code, 1);
});

test('on an iWARP device: no UD QP (EOPNOTSUPP, as siw)', opts, async () => {
  const r = await startCli(UDADDY, ['-s', '127.0.0.1'], { netns: ns.name, env: { RDMACM_DEVICE: 'siw_lo' } }).done;
  assert.equal(r.stdout, lines('udaddy: starting client', 'udaddy: connecting', 'test complete', 'return status -1'), describeRun('siw', r));
  assert.equal(r.stderr, 'udaddy: unable to create QP: Operation not supported\n', describeRun('siw', r));
  assert.equal(r.code, 255);
});
