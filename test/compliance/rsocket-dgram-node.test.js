// The Node face of datagram rsockets (RDgramSocket, createSocket) against node:dgram: the same
// test bodies run on Node's dgram once and on datagram rsockets over every device with UD QPs
// (pinned to it), so "behaves like dgram" is checked, not asserted: bind and 'listening',
// address(), send forms and callbacks, 'message' with rinfo, connect and remoteAddress, errors a
// tick later (to the callback, else 'error'), close and 'close'.
import test from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { once } from 'node:events';
import * as rs from '../../dist/rsocket/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const T = { timeout: 30_000 };
const LO = '127.0.0.1';
const FACES = [
  { name: 'dgram', createSocket: (o, cb) => dgram.createSocket(o, cb) },
  { name: 'rsocket', createSocket: (o, cb) => rs.createSocket(o, cb) },
];

async function bound(face) {
  const s = face.createSocket('udp4');
  s.bind(0, LO);
  await once(s, 'listening');
  return s;
}

const closed = (s) => new Promise((r) => s.close(r));

function suite(face) {
  test(`${face.name}: bind → 'listening', address(); send → 'message' with rinfo, both ways`, T, async () => {
    const a = await bound(face);
    const b = await bound(face);
    try {
      const aa = a.address();
      assert.equal(aa.address, LO);
      assert.equal(aa.family, 'IPv4');
      assert.ok(aa.port > 0);
      const got = once(a, 'message');
      const sent = await new Promise((resolve, reject) => b.send(Buffer.from('hello'), aa.port, LO, (e, n) => (e ? reject(e) : resolve(n))));
      assert.equal(sent, 5);
      const [msg, rinfo] = await got;
      assert.equal(msg.toString(), 'hello');
      assert.deepEqual(rinfo, { address: LO, family: 'IPv4', port: b.address().port, size: 5 });
      const back = once(b, 'message');
      a.send('world', rinfo.port, rinfo.address);
      assert.equal((await back)[0].toString(), 'world');
      // offset/length and a list of buffers
      const more = [];
      a.on('message', (m) => more.push(m.toString()));
      b.send(Buffer.from('xxabcxx'), 2, 3, aa.port, LO);
      b.send([Buffer.from('li'), 'st'], aa.port, LO);
      for (let i = 0; i < 200 && more.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(more, ['abc', 'list']);
    } finally {
      await closed(a);
      await closed(b);
    }
  });

  test(`${face.name}: a socket that sends unbound binds itself; connect → 'connect', remoteAddress(), send without an address`, T, async () => {
    const a = await bound(face);
    const b = face.createSocket('udp4');
    try {
      const port = a.address().port;
      const listening = once(b, 'listening');
      const got = once(a, 'message');
      b.send('first', port, LO);
      await listening;
      assert.equal((await got)[0].toString(), 'first');
      const c = face.createSocket('udp4');
      c.connect(port, LO);
      await once(c, 'connect');
      assert.deepEqual(c.remoteAddress(), { address: LO, family: 'IPv4', port });
      const got2 = once(a, 'message');
      c.send('connected');
      assert.equal((await got2)[0].toString(), 'connected');
      await closed(c);
    } finally {
      await closed(a);
      await closed(b);
    }
  });

  test(`${face.name}: errors a tick later — to the send callback, else 'error'; address() before bind throws`, T, async () => {
    const s = face.createSocket('udp4');
    assert.throws(() => s.address(), { code: 'EBADF' });
    assert.throws(() => s.remoteAddress(), { code: 'ERR_SOCKET_DGRAM_NOT_CONNECTED' });
    // A bad port (none on a socket not connected) throws at once, as Node's argument checks
    // (rsockets: EINVAL of rsendto, saying which port).
    const badPort = face.name === 'dgram' ? { name: 'RangeError', code: 'ERR_SOCKET_BAD_PORT' } : { name: 'RdmaError', code: 'EINVAL', op: 'rsendto' };
    assert.throws(() => s.send('x'), badPort);
    assert.throws(() => s.send('x', () => {}), badPort);
    assert.throws(() => s.send('x', 70000, LO), badPort);
    assert.throws(() => s.send('x', 0, LO), badPort);
    if (face.name === 'rsocket') assert.throws(() => s.send('x', 70000, LO), { message: /port should be >= 1 and <= 65535, got 70000/ });
    // What fails later comes a tick later: to the callback, else as 'error'.
    let sync = true;
    const e = await new Promise((resolve) => {
      s.send('x', 9, 'no.such.host.invalid', (err) => resolve({ err, sync }));
      sync = false;
    });
    assert.equal(e.sync, false, 'not called synchronously');
    assert.ok(['ENOTFOUND', 'EAI_AGAIN'].includes(e.err?.code), String(e.err));
    const errEv = once(s, 'error');
    s.send('x', 9, 'no.such.host.invalid');
    assert.ok(['ENOTFOUND', 'EAI_AGAIN'].includes((await errEv)[0].code));
    await closed(s);
    assert.throws(() => s.close(), { code: 'ERR_SOCKET_DGRAM_NOT_RUNNING' });
  });

  test(`${face.name}: signal — an abort closes the socket ('close', no 'error'); already aborted: closed a tick after createSocket`, T, async () => {
    const ac = new AbortController();
    const s = face.createSocket({ type: 'udp4', signal: ac.signal });
    s.on('error', (e) => assert.fail(`unexpected 'error' ${e}`));
    s.bind(0, LO);
    await once(s, 'listening');
    const closedEv = once(s, 'close');
    ac.abort(new Error('stop'));
    await closedEv;
    assert.throws(() => s.close(), { code: 'ERR_SOCKET_DGRAM_NOT_RUNNING' });
    const pre = face.createSocket({ type: 'udp4', signal: AbortSignal.abort() });
    let sync = true;
    const preClosed = new Promise((r) => pre.once('close', () => r(sync)));
    sync = false;
    assert.equal(await preClosed, false, "'close' a tick later");
    assert.throws(() => face.createSocket({ type: 'udp4', signal: 'no' }), face.name === 'dgram' ? { code: 'ERR_INVALID_ARG_TYPE' } : { name: 'RdmaError', code: 'EINVAL' });
  });

  test(`${face.name}: Symbol.asyncDispose closes and waits for 'close'; a second dispose does nothing`, T, async () => {
    const s = await bound(face);
    let closedEv = false;
    s.once('close', () => (closedEv = true));
    await s[Symbol.asyncDispose]();
    assert.equal(closedEv, true);
    await s[Symbol.asyncDispose]();
    assert.throws(() => s.close(), { code: 'ERR_SOCKET_DGRAM_NOT_RUNNING' });
  });

  test(`${face.name}: binding a port in use emits 'error' (EADDRINUSE)`, T, async () => {
    const a = await bound(face);
    const b = face.createSocket('udp4');
    try {
      b.bind(a.address().port, LO);
      const [err] = await once(b, 'error');
      assert.equal(err.code, 'EADDRINUSE');
    } finally {
      await closed(a);
      b.close();
    }
  });
}

/** The rsocket face's own argument checks: EINVAL of the rsocket call, where Node's dgram throws or errs later. */
function rsocketArgs() {
  test('rsocket: bad ports throw EINVAL in bind (rbind), connect (rconnect) and send (rsendto), saying which', T, async () => {
    const s = rs.createSocket('udp4');
    try {
      for (const p of [70000, -1, 1.5, NaN, 'abc']) {
        assert.throws(() => s.bind(p, LO), { name: 'RdmaError', code: 'EINVAL', op: 'rbind', message: /port should be >= 0 and <= 65535/ });
        assert.throws(() => s.connect(p, LO), { name: 'RdmaError', code: 'EINVAL', op: 'rconnect', message: /port should be >= 1 and <= 65535/ });
      }
      assert.throws(() => s.connect(0, LO), { code: 'EINVAL', op: 'rconnect' });
      // nothing was bound by the refused calls
      assert.throws(() => s.address(), { code: 'EBADF' });
      s.bind(0, LO);
      await once(s, 'listening');
    } finally {
      await closed(s);
    }
  });

  test('rsocket calls: rbind / rconnect / rsendto of a port a sockaddr cannot hold: EINVAL naming it', T, async () => {
    const d = new rs.DsSocket(4);
    try {
      for (const port of [70000, -1, 2.5]) {
        await assert.rejects(d.bind({ address: LO, port }), { code: 'EINVAL', op: 'rbind', message: /port should be >= 0 and <= 65535/ });
        await assert.rejects(d.connect({ address: LO, port }), { code: 'EINVAL', op: 'rconnect' });
        await assert.rejects(d.sendto(Buffer.from('x'), { address: LO, port }), { code: 'EINVAL', op: 'rsendto' });
      }
      await d.bind({ address: LO, port: 0 });
      assert.ok(d.localAddress.port > 0);
    } finally {
      await d.close();
    }
  });
}

suite(FACES[0]);
forEachDevice([Cap.UD, Cap.AH], () => {
  suite(FACES[1]);
  rsocketArgs();
}, 'datagram rsockets, Node face');
