// A peer killed in the middle of a transfer, for every tool: server and client run as processes,
// one is SIGKILLed while data flows, and the other must end by itself within a deadline with what
// rdma-core's tool prints and returns in that case (every outstanding work request completes —
// with a flush — so no wait is left hanging). rdma_server / rdma_client exchange one message, so
// their peer is a small process that connects (or accepts) and then waits to be killed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startCli, waitListening, describeRun, rpingLines } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { until, sleep } from '../lib/wait.js';

const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
const DIST_INDEX = join(REPO_ROOT, 'dist', 'index.js');
/** How long the surviving side may take to end after its peer is killed. */
const SURVIVOR_MS = 8000;



/** Whether an ESTABLISHED TCP connection has `port` at either end (from /proc/net/tcp{,6}). */
function connectedOn(port) {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    for (const l of text.split('\n')) {
      const c = l.trim().split(/\s+/);
      if (c[3] === '01' && (c[1]?.endsWith(hex) || c[2]?.endsWith(hex))) return true;
    }
  }
  return false;
}

/**
 * Start the server, then the client; wait until `midway(srv, cli)` says data is flowing; SIGKILL
 * `victim`; return the survivor's run (the processes are killed at the end whatever happens).
 */
async function killMidway({ tool, serverArgs, clientArgs, port, midway, victim, listening = true }) {
  const srv = startCli(cli(tool), serverArgs, { timeoutMs: 60_000 });
  let c = null;
  try {
    if (listening) await waitListening(port, { exited: srv.done });
    c = startCli(cli(tool), clientArgs, { timeoutMs: 60_000 });
    await until(() => midway(srv, c), 10_000, `${tool} to be mid-transfer (server: ${JSON.stringify(srv.stdout().slice(-200))}, client: ${JSON.stringify(c.stdout().slice(-200))})`);
    const [dead, alive] = victim === 'server' ? [srv, c] : [c, srv];
    dead.kill('SIGKILL');
    const t0 = Date.now();
    const r = await Promise.race([alive.done, sleep(SURVIVOR_MS).then(() => null)]);
    const who = victim === 'server' ? 'client' : 'server';
    assert.ok(r !== null, `the ${who} did not end within ${SURVIVOR_MS} ms of its peer's death\n  stderr: ${JSON.stringify(alive.stderr())}\n  stdout: ${JSON.stringify(alive.stdout().slice(-500))}`);
    return { ...r, afterKillMs: Date.now() - t0, what: describeRun(`${who} after the ${victim} was killed`, r) };
  } finally {
    srv.kill('SIGKILL');
    c?.kill('SIGKILL');
    await srv.done;
    await c?.done;
  }
}

// ---- rping: infinite ping-pong; the survivor prints the DISCONNECT line and where its test
// loop was, and exits 0 (rping_test_*: `return (cb->state == DISCONNECTED) ? 0 : ret`).

for (const victim of ['server', 'client']) {
  test(`rping: ${victim} killed mid-ping, the other side exits 0 after "DISCONNECT EVENT"`, async () => {
    const port = await freePort();
    const base = ['-a', '127.0.0.1', '-p', String(port), '-v'];
    const r = await killMidway({
      tool: 'rping',
      serverArgs: ['-s', ...base],
      clientArgs: ['-c', ...base],
      port,
      victim,
      midway: (s, c) => (c.stdout().match(/\n/g) ?? []).length >= 20,
    });
    const who = victim === 'server' ? 'client' : 'server';
    assert.equal(r.code, 0, r.what);
    // the DISCONNECT line, then the state the test loop was waiting for (state 10: DISCONNECTED)
    assert.match(r.stderr, new RegExp(`^${who} DISCONNECT EVENT\\.\\.\\.\\nwait for RDMA_(READ|WRITE)_(ADV|COMPLETE) state 10\\n$`), r.what);
    // what was printed is rping's ping pattern, pings in order, no line cut short
    const n = r.stdout.split('\n').length - 1;
    assert.ok(n >= 10, r.what);
    assert.equal(r.stdout, rpingLines({ count: n, role: who }), r.what);
  });
}

// ---- ucmatose: 1 MiB messages; cmatose counts flushed completions as done, so each side goes on
// to its next phase, disconnects and ends with "return status 0". The peer dies while a message
// is arriving in pieces, so the survivor's receive in progress must be flushed too. (The client
// killed while its replies are on the wire is test/e2e/ucmatose.test.js's.)

const UCMA = ['-c', '1', '-C', '300', '-S', '1000000'];

test('ucmatose: server killed while the client receives, the client completes and returns 0', async () => {
  const port = await freePort();
  const r = await killMidway({
    tool: 'ucmatose',
    serverArgs: ['-p', String(port), ...UCMA],
    clientArgs: ['-s', '127.0.0.1', '-p', String(port), ...UCMA],
    port,
    victim: 'server',
    midway: (s, c) => c.stdout().includes('receiving data transfers'),
  });
  assert.equal(r.code, 0, r.what);
  assert.equal(r.stderr, '', r.what);
  assert.match(r.stdout, /receiving data transfers\n(sending replies\ndata transfers complete\n)?test complete\nreturn status 0\n$/, r.what);
});

// ---- rstream / riostream: a long custom bandwidth test; the survivor's next call fails with
// ECONNRESET, it prints the call's perror line and ends with -1 (255).

for (const [tool, calls] of [['rstream', 'rsend|rrecv'], ['riostream', 'rsend|rrecv|riowrite|riostream: waiting for the peer']]) {
  for (const victim of ['server', 'client']) {
    test(`${tool}: ${victim} killed mid-transfer, the other side fails the test with the call's error and exits 255`, async () => {
      const port = await freePort();
      const custom = ['-S', '1048576', '-C', '100000'];
      let flowingSince = 0;
      const r = await killMidway({
        tool,
        serverArgs: ['-b', '127.0.0.1', '-p', String(port), ...custom],
        clientArgs: ['-s', '127.0.0.1', '-p', String(port), ...custom],
        port,
        victim,
        midway: () => {
          if (!connectedOn(port)) return false;
          flowingSince ||= Date.now();
          return Date.now() - flowingSince > 300; // connected, set up, and well into the transfers
        },
      });
      assert.equal(r.code, 255, r.what);
      assert.match(r.stderr, new RegExp(`^(${calls}): (Connection reset by peer|Input/output error|Broken pipe)\\n$`), r.what);
      assert.equal(r.stdout, 'name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n', `no result row for a test cut short\n${r.what}`);
    });
  }
}

// ---- cmtime: 3000 connections; the listener loses its peer's OOB connection (cmtime: OOB
// connection lost, exit 1); the connecting peer fails the connect or an event (exit 1).

for (const victim of ['server', 'client']) {
  test(`cmtime: ${victim === 'server' ? 'listener' : 'connecting peer'} killed while connecting, the other exits 1`, async () => {
    const port = await freePort();
    const base = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(port), '-c', '3000'];
    const r = await killMidway({
      tool: 'cmtime',
      serverArgs: [...base, '-L'],
      clientArgs: base,
      port,
      victim,
      midway: (s, c) => /QPs test\n(.*\n)*\tConnecting\n/.test(c.stdout()),
    });
    assert.equal(r.code, 1, r.what);
    if (victim === 'client') assert.match(r.stderr, /^cmtime: OOB connection lost \(.+\)\n$/, r.what);
    else assert.match(`${r.stderr}${r.stdout}`, /rdma_connect: \w.*\n|cmtime: OOB connection lost \(.+\)\n|event: RDMA_CM_EVENT_\w+, error: -?\d+\n/, r.what);
  });
}

// ---- rdma_server / rdma_client: the peer is a process that connects (accepts) and is killed
// before it sends. rdma_get_recv_comp returns the flushed completion (its status is not looked at),
// the post that follows is flushed too, and the tool ends with "end 0", exit 0, as rdma-core's.

const PEER = `
const { createId, PortSpace, Access } = await import(${JSON.stringify(DIST_INDEX)});
const [role, port] = process.argv.slice(1);
const cap = { maxSendWr: 4, maxRecvWr: 4, maxInlineData: 16 };
let id;
if (role === 'client') {
  id = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port: Number(port) });
  await id.resolveRoute();
  id.createQp(null, { cap });
  await id.connect();
} else {
  const l = createId(null, null, PortSpace.TCP);
  l.bindAddr({ address: '127.0.0.1', port: Number(port) });
  await l.listen(1);
  id = await l.getRequest();
  id.createQp(null, { cap });
  const mr = id.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  id.qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
  await id.accept();
}
process.stdout.write('up\\n');
setInterval(() => {}, 1000);
`;

function startPeer(role, port) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', PEER, role, String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const done = new Promise((r) => child.on('close', r));
  return { child, done, up: () => out.includes('up\n'), err: () => err };
}

test('rdma_server: client killed before its message, the server ends with "end 0"', async () => {
  const port = await freePort();
  const srv = startCli(cli('rdma_server'), ['-s', '127.0.0.1', '-p', String(port)], { timeoutMs: 30_000 });
  let peer = null;
  try {
    await waitListening(port, { exited: srv.done });
    peer = startPeer('client', port);
    await until(() => peer.up(), 10_000, `the peer to connect (${peer.err()})`);
    peer.child.kill('SIGKILL');
    const r = await Promise.race([srv.done, sleep(SURVIVOR_MS).then(() => null)]);
    assert.ok(r !== null, `rdma_server did not end within ${SURVIVOR_MS} ms: ${JSON.stringify(srv.stdout())} ${JSON.stringify(srv.stderr())}`);
    const what = describeRun('rdma_server', r);
    assert.equal(r.stdout, 'rdma_server: start\nrdma_server: end 0\n', what);
    assert.equal(r.stderr, '', what);
    assert.equal(r.code, 0, what);
  } finally {
    peer?.child.kill('SIGKILL');
    srv.kill('SIGKILL');
    await Promise.all([peer?.done, srv.done]);
  }
});

test('rdma_client: server killed before its reply, the client ends with "end 0"', async () => {
  const port = await freePort();
  const peer = startPeer('server', port);
  let c = null;
  try {
    await waitListening(port, { exited: peer.done });
    c = startCli(cli('rdma_client'), ['-s', '127.0.0.1', '-p', String(port)], { timeoutMs: 30_000 });
    await until(() => peer.up(), 10_000, `the peer to accept (${peer.err()})`);
    peer.child.kill('SIGKILL');
    const r = await Promise.race([c.done, sleep(SURVIVOR_MS).then(() => null)]);
    assert.ok(r !== null, `rdma_client did not end within ${SURVIVOR_MS} ms: ${JSON.stringify(c.stdout())} ${JSON.stringify(c.stderr())}`);
    const what = describeRun('rdma_client', r);
    assert.equal(r.stdout, 'rdma_client: start\nrdma_client: end 0\n', what);
    assert.equal(r.stderr, '', what);
    assert.equal(r.code, 0, what);
  } finally {
    peer.child.kill('SIGKILL');
    c?.kill('SIGKILL');
    await Promise.all([peer.done, c?.done]);
  }
});

// ---- riostream: a client running a custom test (-S 100000) against a server running the default
// series: the server maps a 64-byte buffer, so the client's riowrite reaches the end of that
// mapping and waits for one covering the rest, which never comes. When the server is killed the
// client must fail as riowrite does on a dead connection, not wait (or spin) forever.

test('riostream: the default-series server killed under a custom-test client, the client fails riowrite and exits 255', async () => {
  const port = await freePort();
  let connectedSince = 0;
  const r = await killMidway({
    tool: 'riostream',
    serverArgs: ['-b', '127.0.0.1', '-p', String(port)],
    clientArgs: ['-s', '127.0.0.1', '-p', String(port), '-S', '100000', '-C', '1000'],
    port,
    victim: 'server',
    midway: (s, c) => {
      if (!c.stdout().includes('usec/xfer\n') || !connectedOn(port)) return false;
      connectedSince ||= Date.now();
      return Date.now() - connectedSince > 1000; // connected, synced, and writing past the mapping
    },
  });
  assert.equal(r.code, 255, r.what);
  assert.match(r.stderr, /^riowrite: (Connection reset by peer|Input\/output error|Broken pipe)\n$/, r.what);
  assert.equal(r.stdout, 'name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n', r.what);
});
