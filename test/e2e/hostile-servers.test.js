// Hostile peers against the shipped servers, each a separate process: raw TCP peers that send
// junk instead of an MPA Request, hold connections half-open, end the handshake between our MPA
// Reply and their RTR, answer it with garbage, or ask for 4 GiB RDMA Reads — and then a real client
// that must still be served, with the server's output and exit status those of a normal run.
//
// Servers that serve one connection after another (rping -P) must survive every attack; one-shot
// servers (rping, rdma_server, rstream, riostream), ucmatose, which serves exactly -c connections,
// and cmtime, which counts them, must survive every attack that never becomes a connection (a peer
// that completes the handshake is a client to them, as with the kernel). The rsocket server's own
// hostile-peer tests are in test/unit/rsocket/hostile.test.js.
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { RPING, REPO_ROOT, startCli, runCli, waitListening, waitRoceListening, describeRun, rpingLines } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { rawCmPeer, reqWithoutRtu, reqThenRej, establishThenVanish, sendThenVanish, garbageMads } from '../lib/raw-cm.js';
import { junkRequests, halfOpenFlood, replyThenClose, requestThenReset, garbageForRtr, hugeReads, rawClient, rtrWrite } from '../lib/raw-mpa.js';
import { encodeFpdu, RdmapOpcode } from '../../dist/wire/index.js';
import { getDeviceList, TransportType } from '../../dist/index.js';

const tool = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
const UCMATOSE = tool('ucmatose');
const RDMA_SERVER = tool('rdma_server');
const RDMA_CLIENT = tool('rdma_client');
const RSTREAM = tool('rstream');
const RIOSTREAM = tool('riostream');
const CMTIME = tool('cmtime');
const opts = { skip: [RPING, UCMATOSE, RDMA_SERVER, RSTREAM, RIOSTREAM, CMTIME].every(existsSync) ? false : 'the tools are not built: run npm run build', timeout: 40_000 };
const HOST = '127.0.0.1';

/** Every junk attempt was closed by the server, the markers request with an MPA reject. */
function assertTurnedAway(results, who) {
  for (const r of results) assert.ok(r.closed, `${who}: '${r.name}' left open`);
  assert.equal(results.find((r) => r.name === 'markers').reply?.reject, true, `${who}: markers request not rejected`);
  for (const r of results) if (r.name !== 'markers') assert.equal(r.reply, null, `${who}: '${r.name}' got a Reply`);
}

/**
 * Start `server` on a fresh port, run `attack(port)` once it listens (half-open connections it
 * returns stay open), then `client(port)`. Returns the client's and the server's results.
 */
async function underAttack(server, serverArgs, attack, client) {
  const port = await freePort();
  const srv = startCli(server, [...serverArgs(port)], { timeoutMs: 30_000 });
  let flood = null;
  try {
    await waitListening(port, { exited: srv.done });
    flood = await attack(port);
    const cli = await client(port);
    const s = await srv.done;
    return { cli, srv: s, both: `${describeRun('client', cli)}\n${describeRun('server', s)}` };
  } finally {
    flood?.destroy();
    srv.kill('SIGKILL');
  }
}

/**
 * Junk requests and `n` half-open connections (kept open until the end). Servers listening with a
 * small backlog (rping: 3, rstream and riostream: 1) accept a burst of connections slowly (the
 * kernel drops SYNs while the accept queue is full), so they get fewer.
 */
const softAttack = (n) => async (port) => {
  const flood = await halfOpenFlood(port, HOST, n);
  assertTurnedAway(await junkRequests(port, HOST), 'junk');
  return flood;
};

/** rping's buffer advertisement (addr, rkey, len), big-endian, of a `len`-byte buffer. */
function rpingAdvert(len) {
  const info = Buffer.alloc(16);
  info.writeBigUInt64BE(0x10000n, 0);
  info.writeUInt32BE(0x1234, 8);
  info.writeUInt32BE(len, 12);
  return info;
}

/** What a raw rping client does: RTR, then the Send of its buffer advertisement. */
async function rpingAdvertising(port, len) {
  const c = await rawClient(port, { host: HOST });
  c.send(rtrWrite());
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, rpingAdvert(len)));
  await c.until(() => c.isClosed(), 5000).catch(() => {});
  c.sock.destroy();
}

test('rping -s -P survives every attack: junk, a half-open flood (released after 5 s), handshakes ended or stalled before the RTR, garbage RTR, 4 GiB reads', opts, async () => {
  const port = await freePort();
  const srv = startCli(RPING, ['-s', '-P', '-a', HOST, '-p', String(port), '-v'], { timeoutMs: 40_000 });
  let flood = null;
  let idle = null;
  try {
    await waitListening(port, { exited: srv.done });
    const t0 = Date.now();
    flood = await halfOpenFlood(port, HOST, 12);
    assertTurnedAway(await junkRequests(port, HOST), 'rping -P');
    for (let i = 0; i < 3; i++) await replyThenClose(port, HOST);
    await requestThenReset(port, HOST);
    await garbageForRtr(port, HOST);
    const reads = await hugeReads(port, HOST);
    assert.ok(reads.after().length >= 28, 'Read Requests of an STag nobody holds end in a TERMINATE');
    await rpingAdvertising(port, 0xffffffff);
    // One that stays, silent, after our MPA Reply: its connection waits, nobody else does.
    idle = await rawClient(port, { host: HOST });
    const client = () => runCli(RPING, ['-c', '-a', HOST, '-p', String(port), '-C', '5', '-v', '-V']);
    const [a, b] = await Promise.all([client(), client()]);
    for (const r of [a, b]) {
      const d = `${describeRun('client', r)}\nserver stderr: ${JSON.stringify(srv.stderr())}`;
      assert.equal(r.code, 0, d);
      assert.equal(r.stdout, rpingLines({ count: 5 }), d);
    }
    assert.equal(srv.child.exitCode, null, `the -P server exited: ${srv.stderr()}`);
    assert.equal(srv.stdout().split('\n').filter(Boolean).length, 10, 'only the real clients ping');
    assert.doesNotMatch(srv.stderr(), /cma event|CONNECT_ERROR|connect error/, 'no connection error reached rping');
    // siw's MPA Request timer (5 s) releases the half-open connections; the server keeps serving.
    await flood.socks[0].until(() => flood.closed() === 12, Math.max(0, 5000 - (Date.now() - t0)) + 3000);
    const c = await client();
    assert.equal(c.code, 0, describeRun('client after the flood', c));
    assert.equal(srv.child.exitCode, null);
  } finally {
    flood?.destroy();
    idle?.sock.destroy();
    srv.kill('SIGTERM');
    const s = await srv.done;
    assert.equal(s.signal, 'SIGTERM', describeRun('server', s));
  }
});

test('rping -s (one client): junk and half-open connections do not disturb the real client', opts, async () => {
  const r = await underAttack(RPING, (port) => ['-s', '-a', HOST, '-p', String(port), '-C', '4', '-v', '-V'], softAttack(6), (port) =>
    runCli(RPING, ['-c', '-a', HOST, '-p', String(port), '-C', '4', '-v', '-V']),
  );
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.srv.stdout, rpingLines({ count: 4, role: 'server' }), r.both);
  assert.equal(r.srv.stderr, 'server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n', r.both);
});

test('ucmatose -c 3: junk and half-open connections are no connections; a peer ending its handshake before the RTR counts as one', opts, async () => {
  const r = await underAttack(
    UCMATOSE,
    (port) => ['-p', String(port), '-c', '3', '-C', '4'],
    async (port) => {
      const flood = await softAttack(20)(port);
      await replyThenClose(port, HOST);
      await requestThenReset(port, HOST);
      return flood;
    },
    (port) => runCli(UCMATOSE, ['-s', HOST, '-p', String(port), '-c', '1', '-C', '4']),
  );
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.match(r.cli.stdout, /data transfers complete\ntest complete\nreturn status 0\n$/, r.both);
  assert.match(r.srv.stdout, /^cmatose: starting server\n[^]*test complete\nreturn status 0\n$/, r.both);
  assert.doesNotMatch(r.srv.stdout, /event: |failing connection request/, r.both);
});

test('rdma_server: junk and half-open connections do not disturb rdma_client', opts, async () => {
  const r = await underAttack(RDMA_SERVER, (port) => ['-s', HOST, '-p', String(port)], softAttack(20), (port) => runCli(RDMA_CLIENT, ['-s', HOST, '-p', String(port)]));
  assert.equal(r.srv.stdout, 'rdma_server: start\nrdma_server: end 0\n', r.both);
  assert.equal(r.cli.stdout, 'rdma_client: start\nrdma_client: end 0\n', r.both);
  assert.equal(r.srv.stderr + r.cli.stderr, '', r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.cli.code, 0, r.both);
});

for (const [name, exe] of [
  ['rstream', RSTREAM],
  ['riostream', RIOSTREAM],
]) {
  test(`${name}: junk and half-open connections do not disturb the real client`, opts, async () => {
    const args = ['-S', '4096', '-C', '50'];
    const r = await underAttack(exe, (port) => ['-b', HOST, '-p', String(port), ...args], softAttack(3), (port) => runCli(exe, ['-s', HOST, '-p', String(port), ...args]));
    assert.equal(r.cli.code, 0, r.both);
    assert.equal(r.srv.code, 0, r.both);
    assert.equal(r.srv.stderr + r.cli.stderr, '', r.both);
    for (const out of [r.cli.stdout, r.srv.stdout]) assert.equal(out.trim().split('\n').length, 2, r.both);
  });
}

/** TCP ports process `pid` listens on (its socket inodes matched in /proc/net/tcp{,6}). */
function listeningPorts(pid) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      /* closed meanwhile */
    }
  }
  const ports = [];
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const l of readFileSync(f, 'utf8').split('\n').slice(1)) {
      const x = l.trim().split(/\s+/);
      if (x[3] === '0A' && inodes.has(x[9])) ports.push(parseInt(x[1].split(':').pop(), 16));
    }
  }
  return ports;
}

test('cmtime: junk and half-open connections at its RDMA listener during a run change nothing', { ...opts, skip: opts.skip || (existsSync('/proc/self/fd') ? false : 'needs /proc') }, async () => {
  const port = await freePort();
  const common = ['-b', HOST, '-C', HOST, '-p', String(port), '-c', '50', '--warmup', '1500'];
  const srv = startCli(CMTIME, [...common, '-L'], { timeoutMs: 30_000 });
  let flood = null;
  try {
    await waitListening(port, { exited: srv.done }); // the OOB root
    const cli = startCli(CMTIME, common, { timeoutMs: 30_000 });
    // The RDMA listener opens once the client has joined, on a port of its own.
    let rdmaPort;
    const t0 = Date.now();
    while (!rdmaPort && Date.now() - t0 < 10_000) {
      rdmaPort = listeningPorts(srv.child.pid).find((p) => p !== port);
      if (!rdmaPort) await new Promise((r) => setTimeout(r, 5));
    }
    assert.ok(rdmaPort, 'the RDMA listener was found');
    flood = await halfOpenFlood(rdmaPort, HOST, 10);
    assertTurnedAway(await junkRequests(rdmaPort, HOST), 'cmtime');
    const c = await cli.done;
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    // A normal run: the QP test completes; the no-QPs run ends as it does on iWARP.
    assert.match(c.stdout, /\nConnect \(50\) QPs test\n[^]*\nqp_conn {16}50\n/, both);
    assert.equal(c.stderr, 'rdma_connect: Invalid argument\n', both);
    assert.equal(c.code, 1, both);
    assert.match(s.stdout, /\nAccept \(50\) QPs test\n\tAccepting\n\tDisconnecting\nqp_conn {16}50\n[^]*Accept \(50\) test - no QPs\n$/, both);
    assert.equal(s.code, 1, both);
  } finally {
    flood?.destroy();
    srv.kill('SIGKILL');
  }
});

// ---- a connection's hostile end, on every soft loopback device --------------------------------

/** Short CM timers: a REP left without its RTU gives up after 3 × 100 ms (docs/config.md). */
const FAST_CM = { RDMACM_ROCE_CM_TIMEOUT_MS: '100', RDMACM_ROCE_CM_RETRIES: '2', RDMACM_ROCE_SIDR_TIMEOUT_MS: '100', RDMACM_ROCE_SIDR_RETRIES: '2' };

/**
 * The soft loopback devices, each with what a hostile client can do to one connection of a
 * server on it — chosen by the device's transport: on an IB CM transport (RoCE) a REQ left
 * without its RTU (the server's connection ends UNREACHABLE -110 once the REP's resends run out),
 * a REQ whose REP is rejected (REJECTED 28, consumer defined), garbage MADs on QP1 and a client
 * that vanishes after ESTABLISHED or after advertising its buffer (the server's RDMA Read then runs
 * out of retries, RETRY_EXC_ERR); on iWARP the handshakes ended or answered with garbage before
 * the RTR, which siw ends without an error event. `lines` is what rping -P prints for each.
 */
function hostileChildren() {
  const out = [];
  for (const dev of getDeviceList()) {
    if (!dev.info.addresses.some((a) => a.address === HOST)) continue;
    if (dev.transportType === TransportType.IB) {
      const rocePort = 40000 + Math.floor(Math.random() * 20000);
      const failed = (ev, status) => `cma event RDMA_CM_EVENT_${ev}, error ${status}\nwait for CONNECTED state 11\nconnect error -1\n`;
      out.push({
        dev: dev.name,
        env: { RDMACM_DEVICE: dev.name, RDMACM_ROCE_PORT: String(rocePort), ...FAST_CM },
        listening: (port, exited) => waitRoceListening(rocePort, port, exited),
        attacks: [
          { name: 'REQ without RTU', run: (port) => withCmPeer(rocePort, (p) => reqWithoutRtu(p, port)), lines: failed('UNREACHABLE', -110) },
          { name: 'REQ, then REJ of the REP', run: (port) => withCmPeer(rocePort, (p) => reqThenRej(p, port)), lines: failed('REJECTED', 28) },
          { name: 'garbage MADs', run: (port) => withCmPeer(rocePort, (p) => garbageMads(p, port)), lines: '' },
          { name: 'vanished after ESTABLISHED', run: (port) => withCmPeer(rocePort, (p) => establishThenVanish(p, port)), lines: '' },
          {
            name: 'vanished after its buffer advertisement',
            run: (port) => withCmPeer(rocePort, (p) => sendThenVanish(p, port, rpingAdvert(64), { ackTimeout: 10 })),
            // The server's RDMA Read of that buffer is never answered: its retries run out.
            lines: 'cq completion failed status 12\nwait for RDMA_READ_COMPLETE state 11\n',
          },
        ],
      });
    } else if (dev.transportType === TransportType.IWARP) {
      out.push({
        dev: dev.name,
        env: { RDMACM_DEVICE: dev.name },
        listening: (port, exited) => waitListening(port, { exited }),
        attacks: [
          { name: 'MPA Reply, then close', run: (port) => replyThenClose(port, HOST), lines: '' },
          { name: 'MPA Request, then reset', run: (port) => requestThenReset(port, HOST), lines: '' },
          { name: 'garbage for the RTR', run: (port) => garbageForRtr(port, HOST), lines: '' },
        ],
      });
    }
  }
  return out;
}

/** Run `fn(peer)` with a raw IB CM peer on RoCE UDP port `rocePort`, closed after. */
async function withCmPeer(rocePort, fn) {
  const peer = await rawCmPeer(rocePort);
  try {
    await fn(peer);
    // Its answers keep coming (REP resends) while the server's CM gives up: the peer stays a while.
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    peer.close();
  }
}

/** Resolve once `get()` ends with `text` (the server's stderr so far), or fail after `ms`. */
async function printed(get, text, ms, what) {
  const t0 = Date.now();
  while (!get().endsWith(text)) {
    if (Date.now() - t0 > ms) assert.fail(`${what}: expected the server to print ${JSON.stringify(text)}; stderr: ${JSON.stringify(get())}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

for (const d of hostileChildren()) {
  test(`rping -s -P on ${d.dev}: each hostile end of a connection ends that connection only (${d.attacks.map((a) => a.name).join('; ')}); real clients are served, the server runs on`, { ...opts, timeout: 90_000 }, async () => {
    const port = await freePort();
    const srv = startCli(RPING, ['-s', '-P', '-a', HOST, '-p', String(port), '-v'], { env: d.env, timeoutMs: 85_000 });
    try {
      await d.listening(port, srv.done);
      const client = () => runCli(RPING, ['-c', '-a', HOST, '-p', String(port), '-C', '3', '-v'], { env: d.env, timeoutMs: 15_000 });
      let stderr = '';
      for (const a of d.attacks) {
        await a.run(port);
        stderr += a.lines;
        await printed(srv.stderr, stderr, 15000, a.name);
        assert.equal(srv.child.exitCode, null, `after '${a.name}' the -P server exited: ${JSON.stringify(srv.stderr())}`);
        // A real client after each: served in full.
        const c = await client();
        const desc = `after '${a.name}': ${describeRun('client', c)}\nserver stderr: ${JSON.stringify(srv.stderr())}`;
        assert.equal(c.code, 0, desc);
        assert.equal(c.stdout, rpingLines({ count: 3 }), desc);
        stderr += 'server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n';
        await printed(srv.stderr, stderr, 15000, `the client after '${a.name}'`);
      }
      assert.equal(srv.stdout(), rpingLines({ count: 3, role: 'server' }).repeat(d.attacks.length), 'only the real clients ping');
      assert.equal(srv.child.exitCode, null, `the -P server exited: ${srv.stderr()}`);
    } finally {
      srv.kill('SIGTERM');
      const s = await srv.done;
      assert.equal(s.signal, 'SIGTERM', describeRun('server', s));
    }
  });
}
