// The Node face of rsockets (RSocket, a stream.Duplex, and RServer) against net.Socket/net.Server:
// the same test bodies run on net once and on rsockets over every device that connects
// RDMA_PS_TCP ids (pinned to it), so "behaves like TCP" is checked, not asserted: data order and
// integrity, backpressure, half-close and allowHalfOpen, destroy, errors, pipeline, close.
import test from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { randomBytes, createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as rs from '../../dist/rsocket/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const [NET, RSOCKET] = [
  {
    name: 'net',
    createServer: (opts, cb) => net.createServer(opts, cb),
    connect: (port, opts = {}) => net.connect({ port, host: '127.0.0.1', ...opts }),
  },
  {
    name: 'rsocket',
    createServer: (opts, cb) => rs.createServer(opts, cb),
    connect: (port, opts = {}) => rs.connect({ port, host: '127.0.0.1', ...opts }),
  },
];

const T = { timeout: 30_000 };
const sha = (b) => createHash('sha256').update(b).digest('hex');

async function listen(server) {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server.address().port;
}

/** Collect a readable to one Buffer (resolves at 'end'). */
function collect(s) {
  return new Promise((resolve, reject) => {
    const parts = [];
    s.on('data', (d) => parts.push(d));
    s.once('end', () => resolve(Buffer.concat(parts)));
    s.once('error', reject);
  });
}

/** A free TCP port nobody listens on. */
async function deadPort() {
  const s = net.createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return p;
}

/** The test bodies, for one transport `X`. */
function suite(X) {
  test(`[${X.name}] echo: bytes arrive intact, in order, across odd chunk sizes`, T, async () => {
    const server = X.createServer({}, (s) => s.pipe(s));
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    const data = randomBytes(3 * 1024 * 1024 + 17);
    const got = collect(c);
    for (let at = 0, k = 1; at < data.length; k = (k * 7 + 3) % 200_000 + 1) {
      c.write(data.subarray(at, at + k));
      at += k;
    }
    c.end();
    const back = await got;
    assert.equal(back.length, data.length);
    assert.equal(sha(back), sha(data));
    if (!c.closed) await once(c, 'close');
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] backpressure: write() returns false while the peer does not read, drain follows`, T, async () => {
    let srvSock;
    const server = X.createServer({}, (s) => {
      srvSock = s;
      s.pause();
    });
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    const chunk = Buffer.alloc(256 * 1024, 0x5a);
    let written = 0;
    let stalled = false;
    // Write until the buffers between us and the stopped reader are full: write() says false
    // and no 'drain' follows.
    for (let i = 0; i < 1024 && !stalled; i++) {
      written += chunk.length;
      if (!c.write(chunk)) {
        stalled = !(await Promise.race([once(c, 'drain').then(() => true), new Promise((r) => setTimeout(() => r(false), 300))]));
      }
    }
    assert.ok(stalled, `the writer never stalled after ${written} bytes`);
    assert.ok(c.writableLength > 0, 'the writer still holds data');
    const drained = once(c, 'drain');
    let seen = 0;
    srvSock.on('data', (d) => {
      for (const b of [d[0], d[d.length - 1]]) assert.equal(b, 0x5a);
      seen += d.length;
    });
    srvSock.resume();
    await drained;
    c.end();
    await once(srvSock, 'end');
    assert.equal(seen, written);
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] half-close: end() delivers everything, then EOF; the peer may still answer`, T, async () => {
    const server = X.createServer({ allowHalfOpen: true }, (s) => {
      let n = 0;
      const h = createHash('sha256');
      s.on('data', (d) => {
        n += d.length;
        h.update(d);
      });
      s.on('end', () => {
        // our side is still writable after the peer's FIN
        s.end(`got ${n} ${h.digest('hex')}`);
      });
    });
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    const data = randomBytes(1024 * 1024 + 3);
    const reply = collect(c);
    c.write(data.subarray(0, 1000));
    c.end(data.subarray(1000));
    const text = (await reply).toString();
    assert.equal(text, `got ${data.length} ${sha(data)}`);
    if (!c.closed) await once(c, 'close');
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] allowHalfOpen false: the peer's end() ends our write side too`, T, async () => {
    let srvEnded = false;
    let srvClosed;
    const server = X.createServer({}, (s) => {
      s.resume();
      s.on('end', () => {
        srvEnded = true;
      });
      srvClosed = once(s, 'close');
    });
    const port = await listen(server);
    const c = X.connect(port, { allowHalfOpen: false });
    await once(c, 'connect');
    c.resume();
    const ended = once(c, 'end');
    c.end('bye');
    await ended; // the server never called end(): Node (and RSocket) did it for it
    assert.equal(srvEnded, true);
    await srvClosed;
    if (!c.closed) await once(c, 'close');
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] destroy(): close now; the peer sees EOF; later writes fail`, T, async () => {
    let srvDone;
    const server = X.createServer({}, (s) => {
      const events = [];
      s.on('data', () => {});
      s.on('end', () => events.push('end'));
      s.on('error', (e) => events.push(`error ${e.code}`));
      srvDone = once(s, 'close').then(() => events);
    });
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    await new Promise((r) => c.write('x', r));
    await new Promise((r) => setTimeout(r, 50));
    c.destroy();
    await once(c, 'close');
    assert.equal(c.destroyed, true);
    const err = await new Promise((r) => c.write('y', r));
    assert.equal(err?.code, 'ERR_STREAM_DESTROYED');
    const events = await srvDone;
    assert.deepEqual(events, ['end']);
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] destroy(err): 'error' with that error, then 'close'`, T, async () => {
    const server = X.createServer({}, (s) => {
      s.resume();
      s.on('error', () => {});
    });
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    const boom = new Error('boom');
    const errP = once(c, 'error');
    c.destroy(boom);
    const [e] = await errP;
    assert.equal(e, boom);
    if (!c.closed) await once(c, 'close');
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] connect to a port nobody listens on: 'error' ECONNREFUSED, then 'close'`, T, async () => {
    const c = X.connect(await deadPort());
    const [e] = await once(c, 'error');
    assert.equal(e.code, 'ECONNREFUSED');
    if (!c.closed) await once(c, 'close');
  });

  test(`[${X.name}] pipeline(source, socket): all of it is read before EOF; for await on the other side`, T, async () => {
    const chunks = Array.from({ length: 40 }, (_, i) => randomBytes(1000 * i + 1));
    const all = Buffer.concat(chunks);
    let got;
    const server = X.createServer({}, (s) => {
      got = (async () => {
        const parts = [];
        for await (const d of s) parts.push(d);
        return Buffer.concat(parts);
      })();
    });
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    c.resume();
    await pipeline(Readable.from(chunks), c);
    const b = await got;
    assert.equal(b.length, all.length);
    assert.equal(sha(b), sha(all));
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] pipeline(socket, sink) with a slow sink: the socket's data waits, nothing lost`, T, async () => {
    const total = 4 * 1024 * 1024;
    const server = X.createServer({}, async (s) => {
      const block = Buffer.alloc(64 * 1024, 1);
      for (let n = 0; n < total; n += block.length) if (!s.write(block)) await once(s, 'drain');
      s.end();
    });
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    let n = 0;
    const slow = new Writable({
      highWaterMark: 1024,
      write(chunk, _e, cb) {
        n += chunk.length;
        setImmediate(cb);
      },
    });
    await pipeline(c, slow);
    assert.equal(n, total);
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] server.close(): stops listening, 'close' once the open connection is gone`, T, async () => {
    let srv;
    const server = X.createServer({}, (s) => {
      srv = s;
      s.resume();
    });
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    await new Promise((r) => setTimeout(r, 20));
    const count = await new Promise((r) => server.getConnections((e, k) => r(k)));
    assert.equal(count, 1);
    let closed = false;
    server.close(() => {
      closed = true;
    });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(closed, false, "'close' came while a connection was open");
    c.end();
    c.resume();
    await once(srv, 'close');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(closed, true);
    const c2 = X.connect(port);
    const [e] = await once(c2, 'error');
    assert.equal(e.code, 'ECONNREFUSED');
  });

  test(`[${X.name}] setTimeout(): 'timeout' after idle time, the socket stays usable`, T, async () => {
    const server = X.createServer({}, (s) => s.pipe(s));
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    const t0 = Date.now();
    c.setTimeout(150);
    await once(c, 'timeout');
    assert.ok(Date.now() - t0 >= 140, 'not before the idle time');
    assert.equal(c.destroyed, false);
    c.setTimeout(0);
    const got = collect(c);
    c.end('still here');
    assert.equal((await got).toString(), 'still here');
    await new Promise((r) => server.close(r));
  });

  test(`[${X.name}] counters and addresses: bytesWritten, bytesRead, remotePort, localAddress`, T, async () => {
    const server = X.createServer({}, (s) => s.pipe(s));
    const port = await listen(server);
    const c = X.connect(port);
    await once(c, 'connect');
    assert.equal(c.remotePort, port);
    assert.equal(c.remoteAddress, '127.0.0.1');
    assert.equal(c.localAddress, '127.0.0.1');
    assert.equal(typeof c.localPort, 'number');
    const got = collect(c);
    c.end(Buffer.alloc(12345));
    await got;
    assert.equal(c.bytesWritten, 12345);
    assert.equal(c.bytesRead, 12345);
    await new Promise((r) => server.close(r));
  });
}

suite(NET);
forEachDevice([Cap.RC, Cap.CM_TCP], () => suite(RSOCKET));
