// The Node face of rsockets beyond the data path, against net: argument checks thrown in the call
// (rsockets: RdmaError EINVAL naming the call and the argument, where net throws
// ERR_SOCKET_BAD_PORT …), listen failures emitted a tick later, `signal` on listen and connect,
// Symbol.asyncDispose / Symbol.dispose, 'close' with hadError; and the signal of rpoll / rselect.
// The bodies that net shares run on net once and on rsockets over every device that connects
// RDMA_PS_TCP ids.
import test from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import * as rs from '../../dist/rsocket/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { aborted } from '../lib/fake-provider.js';
import { withRsPair } from '../lib/rs-pair.js';
import { freePort } from '../lib/ports.js';
import { sleep } from '../lib/wait.js';
import { REPO_ROOT } from '../lib/tools.js';

const T = { timeout: 30_000 };
const LO = '127.0.0.1';
/** An IPv4 address no interface of the test's network namespace has. */
const NOT_LOCAL = '10.255.255.1';

const FACES = [
  { name: 'net', createServer: (...a) => net.createServer(...a), connect: (...a) => net.connect(...a), badPort: { name: 'RangeError', code: 'ERR_SOCKET_BAD_PORT' } },
  { name: 'rsocket', createServer: (...a) => rs.createServer(...a), connect: (...a) => rs.connect(...a), badPort: { name: 'RdmaError', code: 'EINVAL' } },
];

/** 'close' of a socket or server, with its argument (hadError for a socket). */
const closeOf = (x) => new Promise((r) => x.once('close', r));

async function listening(X, handler) {
  const server = X.createServer(handler);
  server.listen(0, LO);
  await once(server, 'listening');
  return server;
}

function suite(X) {
  test(`[${X.name}] listen() on an address no interface has: 'error' a tick later, so once(server, 'listening') rejects`, T, async () => {
    const server = X.createServer();
    let sync = true;
    let called = false;
    const errored = new Promise((r) => server.once('error', (e) => r({ e, sync })));
    server.listen(0, NOT_LOCAL, () => (called = true));
    const waiting = once(server, 'listening');
    sync = false;
    const r = await errored;
    assert.equal(r.sync, false, "'error' not emitted inside listen()");
    assert.equal(r.e.code, 'EADDRNOTAVAIL');
    await assert.rejects(waiting, { code: 'EADDRNOTAVAIL' });
    assert.equal(called, false, 'the listen callback waits for a listening that never comes');
    assert.equal(server.listening, false);
    assert.equal(server.address(), null);
  });

  test(`[${X.name}] bad ports throw in listen() and connect(), before anything is bound or sent`, T, async () => {
    for (const p of [70000, -1, 1.5, NaN, 65536]) {
      assert.throws(() => X.createServer().listen(p, LO), X.badPort, `listen(${p})`);
      assert.throws(() => X.createServer().listen({ port: p, host: LO }), X.badPort, `listen({ port: ${p} })`);
      assert.throws(() => X.connect(p, LO), X.badPort, `connect(${p})`);
      assert.throws(() => X.connect({ port: p, host: LO }), X.badPort, `connect({ port: ${p} })`);
    }
    assert.throws(() => X.connect({ port: 1, host: LO, signal: 'no' }), X.name === 'net' ? { code: 'ERR_INVALID_ARG_TYPE' } : { code: 'EINVAL' });
    assert.throws(() => X.createServer().listen({ port: 0, signal: {} }), X.name === 'net' ? { code: 'ERR_INVALID_ARG_TYPE' } : { code: 'EINVAL' });
    // a numeric string is a port, as net's validatePort takes it
    const server = X.createServer();
    server.listen(String(await freePort()), LO);
    await once(server, 'listening');
    assert.throws(() => server.listen(0, LO), X.name === 'net' ? { code: 'ERR_SERVER_ALREADY_LISTEN' } : { code: 'EINVAL' });
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] listen({ signal }): an abort closes the server; already aborted, it closes before listening`, T, async () => {
    const ac = new AbortController();
    const server = X.createServer();
    server.on('error', (e) => assert.fail(`unexpected 'error' ${e}`));
    server.listen({ port: 0, host: LO, signal: ac.signal });
    await once(server, 'listening');
    const closed = closeOf(server);
    ac.abort();
    await closed;
    assert.equal(server.listening, false);
    const pre = X.createServer();
    pre.on('listening', () => assert.fail("'listening' after an aborted signal"));
    pre.listen({ port: 0, host: LO, signal: AbortSignal.abort() });
    await closeOf(pre);
    await sleep(50);
    assert.equal(pre.listening, false);
  });

  test(`[${X.name}] server Symbol.asyncDispose: closes and waits until its connections closed; nothing to do unlistened`, T, async () => {
    await X.createServer()[Symbol.asyncDispose]();
    let peer;
    const server = await listening(X, (s) => (peer = s));
    const c = X.connect(server.address().port, LO);
    await once(c, 'connect');
    while (!peer) await sleep(5);
    let done = false;
    const disposing = server[Symbol.asyncDispose]().then(() => (done = true));
    await sleep(100);
    assert.equal(done, false, 'waits for the open connection');
    assert.equal(server.listening, false);
    c.end();
    peer.end();
    await disposing;
    await server[Symbol.asyncDispose]();
  });

  test(`[${X.name}] a closed server listens again: new connections reach it; 'close' after the second close`, T, async () => {
    const accepted = [];
    const server = await listening(X, (s) => {
      accepted.push(s);
      s.end('hi');
    });
    server.close();
    await closeOf(server);
    assert.equal(server.listening, false);
    server.listen(0, LO);
    await once(server, 'listening');
    assert.equal(server.listening, true);
    const c = X.connect(server.address().port, LO);
    let got = '';
    c.on('data', (d) => (got += d));
    await once(c, 'end');
    assert.equal(got, 'hi');
    assert.equal(accepted.length, 1);
    c.destroy();
    const closed = closeOf(server);
    server.close();
    await closed;
  });

  test(`[${X.name}] connect({ signal }) already aborted: not destroyed in the call; 'error' AbortError (the reason as cause), then 'close' with hadError`, T, async () => {
    const why = new Error('stop');
    const c = X.connect({ port: 9, host: LO, signal: AbortSignal.abort(why) });
    assert.equal(c.destroyed, false);
    const [err] = await once(c, 'error').catch((e) => [e]);
    assert.equal(err.name, 'AbortError');
    assert.equal(err.code, 'ABORT_ERR');
    assert.equal(err.cause, why);
    assert.equal(await closeOf(c), true);
  });

  test(`[${X.name}] the signal stays with a connected socket: an abort destroys it, the peer sees the end`, T, async () => {
    let peer;
    const server = await listening(X, (s) => (peer = s));
    const ac = new AbortController();
    const c = X.connect({ port: server.address().port, host: LO, signal: ac.signal });
    await once(c, 'connect');
    while (!peer) await sleep(5);
    peer.resume();
    const peerClosed = closeOf(peer);
    const errs = [];
    c.on('error', (e) => errs.push(e));
    const closed = closeOf(c);
    ac.abort('bye');
    assert.equal(await closed, true);
    assert.equal(errs.length, 1);
    assert.equal(errs[0].name, 'AbortError');
    assert.equal(errs[0].cause, 'bye');
    await peerClosed;
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] 'close' carries hadError: false after an orderly end, true after an error`, T, async () => {
    const server = await listening(X, (s) => s.end());
    const c = X.connect(server.address().port, LO);
    c.resume();
    assert.equal(await closeOf(c), false);
    await new Promise((r) => server.close(r));
    const dead = X.connect(await freePort(), LO);
    dead.on('error', () => {});
    assert.equal(await closeOf(dead), true);
  });

  test(`[${X.name}] socket Symbol.asyncDispose: destroyed (an AbortError, as a stream's dispose), 'close' follows`, T, async () => {
    const server = await listening(X, (s) => s.resume());
    const c = X.connect(server.address().port, LO);
    await once(c, 'connect');
    const closed = closeOf(c);
    await c[Symbol.asyncDispose]();
    assert.equal(c.destroyed, true);
    // the stream's dispose destroys with an AbortError unless the readable side had ended
    assert.equal(await closed, true);
    await new Promise((r) => server.close(r));
  });
}

/** What only rsockets have, or what cannot be set up the same way on net. */
function rsocketOnly() {
  test('[rsocket] bad arguments name the call and the argument: rbind options.port, rconnect options.port/host/family', T, () => {
    assert.throws(() => rs.createServer().listen(70000), { op: 'rbind', message: 'rbind: Invalid argument (port should be >= 0 and <= 65535, got 70000)' });
    assert.throws(() => rs.createServer().listen({ port: -1 }), { op: 'rbind', message: 'rbind: Invalid argument (options.port should be >= 0 and <= 65535, got -1)' });
    assert.throws(() => rs.connect(70000), { op: 'rconnect', message: 'rconnect: Invalid argument (port should be >= 0 and <= 65535, got 70000)' });
    assert.throws(() => rs.connect({ port: 'x' }), { op: 'rconnect', message: "rconnect: Invalid argument (options.port should be >= 0 and <= 65535, got 'x')" });
    assert.throws(() => rs.connect({ port: 1, host: 5 }), { op: 'rconnect', message: /options.host should be a string, got 5/ });
    assert.throws(() => rs.connect({ port: 1, family: 5 }), { op: 'rconnect', message: /family should be 0, 4 or 6, got 5/ });
    assert.throws(() => rs.connect({ port: 1, localPort: 1e6 }), { op: 'rconnect', message: /options.localPort/ });
    assert.throws(() => rs.createServer().listen({ host: LO }), { op: 'rbind', message: /port/ });
    assert.throws(() => rs.createServer().listen(0, LO, -1), { op: 'rlisten', message: /backlog/ });
  });

  test('[rsocket] rbind / rconnect of a port a sockaddr cannot hold: EINVAL, the socket still usable', T, async () => {
    for (const port of [70000, -1, 1.5]) {
      const c = new rs.RsConn();
      await assert.rejects(c.connect({ address: LO, port }), { name: 'RdmaError', code: 'EINVAL', op: 'rconnect', message: /port should be >= 0 and <= 65535/ });
      assert.throws(() => c.bind({ address: LO, port }), { code: 'EINVAL', op: 'rbind' });
      const l = new rs.RsListener();
      assert.throws(() => l.bind({ address: LO, port }), { code: 'EINVAL', op: 'rbind' });
      // refused before anything was made: the listener binds and listens as a fresh one
      l.bind({ address: LO, port: 0 });
      await l.listen(1);
      const accepted = l.accept();
      await c.connect({ address: LO, port: l.localAddress.port });
      const s = await accepted;
      await c.close();
      await s.close();
      await l.close();
    }
  });

  test('[rsocket] connect aborted while the peer has not accepted: AbortError of rconnect, closed, nothing left', T, async () => {
    const l = new rs.RsListener();
    l.bind({ address: LO, port: 0 });
    await l.listen(4);
    try {
      const ac = new AbortController();
      const c = rs.connect({ port: l.localAddress.port, host: LO, signal: ac.signal });
      c.on('connect', () => assert.fail('connected'));
      const errs = [];
      c.on('error', (e) => errs.push(e));
      while (l.pending === 0) await sleep(5);
      const why = new Error('give up');
      const closed = closeOf(c);
      ac.abort(why);
      assert.equal(await closed, true);
      assert.equal(errs.length, 1);
      aborted('rconnect', why)(errs[0]);
      assert.equal(c.conn.isClosed, true);
      assert.equal(c.connecting, false);
    } finally {
      await l.close();
    }
  });

  test('[rsocket] socket Symbol.dispose destroys at once; a second dispose does nothing', T, async () => {
    const server = await listening(FACES[1], (s) => s.resume());
    const c = rs.connect(server.address().port, LO);
    await once(c, 'connect');
    const closed = closeOf(c);
    c[Symbol.dispose]();
    assert.equal(c.destroyed, true);
    c[Symbol.dispose]();
    assert.equal(await closed, false);
    await new Promise((r) => server.close(r));
  });

  test('[rsocket] a connect aborted half-way leaves nothing that holds the process: it exits by itself', T, async () => {
    // A child connects to a listener that never accepts and aborts; exit 0 only if it exits alone.
    const code = `
      import * as rs from ${JSON.stringify(`${REPO_ROOT}/dist/rsocket/index.js`)};
      const l = new rs.RsListener();
      l.bind({ address: '127.0.0.1', port: 0 });
      await l.listen(4);
      const ac = new AbortController();
      const c = rs.connect({ port: l.localAddress.port, host: '127.0.0.1', signal: ac.signal });
      c.on('error', (e) => { if (e.name !== 'AbortError') process.exitCode = 3; });
      while (l.pending === 0) await new Promise((r) => setTimeout(r, 5));
      ac.abort();
      await new Promise((r) => c.on('close', r));
      await l.close();
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { env: process.env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const [exit, signal] = await once(child, 'exit');
    clearTimeout(timer);
    assert.equal(signal, null, `killed: the process did not exit by itself\n${stderr}`);
    assert.equal(exit, 0, stderr);
  });

  test('rpoll / rselect with a signal: an abort ends the wait with an AbortError; the sockets poll as before', T, async () => {
    await withRsPair({}, async ({ c, s }) => {
      const fds = [{ fd: c, events: rs.POLLIN, revents: 0 }];
      const ac = new AbortController();
      const waiting = rs.rpoll(fds, -1, ac.signal);
      await sleep(30);
      const why = new Error('enough');
      ac.abort(why);
      await assert.rejects(waiting, aborted('rpoll', why));
      await assert.rejects(rs.rpoll(fds, -1, AbortSignal.abort()), aborted('rpoll'));
      const rd = new Set([c]);
      const sel = new AbortController();
      const selecting = rs.rselect(rd, null, null, null, sel.signal);
      sel.abort(why);
      await assert.rejects(selecting, aborted('rselect', why));
      // nothing was left waiting: data wakes a new rpoll, which reports it
      const later = rs.rpoll(fds, 5000, new AbortController().signal);
      s.send(Buffer.from('x'));
      assert.equal(await later, 1);
      assert.equal(fds[0].revents & rs.POLLIN, rs.POLLIN);
      // a timeout with a signal that never aborts still times out
      assert.equal(await rs.rpoll([{ fd: s, events: rs.POLLIN, revents: 0 }], 50, new AbortController().signal), 0);
    });
  });
}

suite(FACES[0]);
forEachDevice([Cap.CM_TCP], () => {
  suite(FACES[1]);
  rsocketOnly();
}, 'rsocket Node face: arguments, signals, disposal');
