// node:http over rsockets, unchanged on both ends: a real http.Server fed by an rsocket listener
// (rdmacm/http createHttpServer) and http.request through RAgent / createConnection, on every device
// that connects RDMA_PS_TCP ids — keep-alive reuse of one connection, many requests over a pool,
// bodies over 8 MiB both ways (with Content-Length and chunked), a client that goes away in the
// middle of its request body or of the response, the server's timeouts and close(); an
// https.Server doing TLS over rsockets.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createHttpServer, createHttpConnection, RAgent, RHttpsAgent, serve, RSocket } from '../../dist/http/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { until } from '../lib/wait.js';
import { freePort } from '../lib/ports.js';
import { sha, payload, body, listenLocal, closeServer, endlessResponse } from '../lib/http.js';

const T = { timeout: 60_000 };
const BIG = 9 * 1024 * 1024 + 7;

/** One request: resolves `{ res, data }` once the response body has ended. */
function fetchOne(opts, reqBody) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', ...opts }, (res) => body(res).then((data) => resolve({ res, data }), reject));
    req.on('error', reject);
    if (Array.isArray(reqBody)) {
      for (const part of reqBody) req.write(part);
      req.end();
    } else req.end(reqBody);
  });
}

/** Echo server: the request body back, with its length and hash in headers. */
function echoServer(opts = {}) {
  return createHttpServer(opts, async (req, res) => {
    const data = await body(req);
    res.setHeader('x-len', data.length);
    res.setHeader('x-sha', sha(data));
    res.setHeader('x-conn', `${req.socket.remotePort}`);
    res.end(data);
  });
}

forEachDevice([Cap.CM_TCP], () => {
  test('keep-alive: 20 sequential requests reuse one rsocket, each answered in order', T, async () => {
    const server = echoServer();
    const port = await listenLocal(server);
    const agent = new RAgent({ keepAlive: true, maxSockets: 1 });
    const ports = new Set();
    for (let i = 0; i < 20; i++) {
      const msg = Buffer.from(`request ${i}`);
      const { res, data } = await fetchOne({ port, method: 'POST', path: `/r${i}`, agent }, msg);
      assert.equal(res.statusCode, 200);
      assert.equal(data.toString(), `request ${i}`);
      assert.equal(res.headers.connection, 'keep-alive');
      ports.add(res.headers['x-conn']);
    }
    assert.equal(server.accepted.length, 1, 'one connection accepted');
    assert.equal(ports.size, 1);
    assert.equal(server.accepted[0].constructor.name, 'RSocket');
    agent.destroy();
    await closeServer(server);
  });

  test('a pool of 4 keep-alive rsockets serves 40 concurrent requests', T, async () => {
    let inFlight = 0;
    let most = 0;
    const server = createHttpServer(async (req, res) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((r) => setTimeout(r, 2));
      inFlight--;
      res.end(req.url);
    });
    const port = await listenLocal(server);
    const agent = new RAgent({ keepAlive: true, maxSockets: 4 });
    const got = await Promise.all(Array.from({ length: 40 }, (_, i) => fetchOne({ port, path: `/p${i}`, agent })));
    got.forEach(({ res, data }, i) => {
      assert.equal(res.statusCode, 200);
      assert.equal(data.toString(), `/p${i}`);
    });
    assert.equal(server.accepted.length, 4);
    assert.equal(most, 4, 'four requests in flight at once');
    agent.destroy();
    await closeServer(server);
  });

  test('9 MiB both ways with Content-Length: intact, one connection', T, async () => {
    const server = echoServer();
    const port = await listenLocal(server);
    const agent = new RAgent({ keepAlive: true });
    const data = payload(BIG, 3);
    const { res, data: back } = await fetchOne({ port, method: 'PUT', agent, headers: { 'content-length': data.length } }, data);
    assert.equal(res.headers['x-len'], String(BIG));
    assert.equal(res.headers['x-sha'], sha(data));
    assert.equal(res.headers['content-length'], String(BIG));
    assert.equal(back.length, BIG);
    assert.equal(sha(back), sha(data));
    agent.destroy();
    await closeServer(server);
  });

  test('chunked both ways: a request body in 300 writes, a response streamed in 1 MiB writes', T, async () => {
    const server = createHttpServer(async (req, res) => {
      assert.equal(req.headers['transfer-encoding'], 'chunked');
      const data = await body(req);
      res.setHeader('x-sha', sha(data));
      // No Content-Length: node:http sends the response chunked.
      for (let at = 0; at < data.length; at += 1 << 20) {
        if (!res.write(data.subarray(at, at + (1 << 20)))) await once(res, 'drain');
      }
      res.end();
    });
    const port = await listenLocal(server);
    const data = payload(BIG, 5);
    const parts = [];
    for (let at = 0, i = 0; at < data.length; i++) {
      const n = Math.min(data.length - at, 1 + ((i * 7919) % 65536));
      parts.push(data.subarray(at, at + n));
      at += n;
    }
    const { res, data: back } = await fetchOne({ port, method: 'POST', agent: new RAgent() }, parts);
    assert.equal(res.headers['transfer-encoding'], 'chunked');
    assert.equal(res.headers['x-sha'], sha(data));
    assert.equal(sha(back), sha(data));
    await closeServer(server);
  });

  test('http.request({ createConnection: createHttpConnection }) without an agent; the connection closes after the response', T, async () => {
    const server = echoServer();
    const port = await listenLocal(server);
    const { res, data } = await fetchOne({ port, method: 'POST', createConnection: createHttpConnection, headers: { connection: 'close' } }, 'one');
    assert.equal(res.statusCode, 200);
    assert.equal(data.toString(), 'one');
    await until(() => server.accepted[0]?.destroyed, 5000, 'the server to close the connection');
    await closeServer(server);
  });

  test('a client that goes away in the middle of its request body: the server sees aborted and close, nothing stays open', T, async () => {
    let serverReq;
    const received = [];
    const server = createHttpServer((req, res) => {
      serverReq = req;
      req.on('data', (d) => received.push(d.length));
      req.on('error', () => {});
      res.on('error', () => {});
    });
    const port = await listenLocal(server);
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', createConnection: createHttpConnection, headers: { 'content-length': BIG } });
    req.on('error', () => {});
    req.write(payload(1 << 20, 9));
    await until(() => received.reduce((a, b) => a + b, 0) >= 1 << 20, 10_000, 'the first MiB at the server');
    const closed = new Promise((r) => serverReq.once('close', r));
    const aborted = new Promise((r) => serverReq.once('aborted', () => r(true)));
    const error = new Promise((r) => serverReq.once('error', r));
    req.destroy();
    await closed;
    assert.equal(await aborted, true);
    assert.equal((await error).code, 'ECONNRESET');
    assert.equal(serverReq.complete, false);
    await until(() => server.accepted[0].destroyed, 5000, 'the server side rsocket to close');
    await new Promise((r) => server.getConnections((e, n) => (assert.equal(n, 0), r())));
    await closeServer(server);
  });

  test('a client that goes away in the middle of a large response: the response closes unfinished', T, async () => {
    const endless = endlessResponse(BIG);
    const server = createHttpServer(endless.handler);
    const port = await listenLocal(server);
    const resP = new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, createConnection: createHttpConnection }, resolve);
      req.on('error', reject);
      req.end();
    });
    const res = await resP;
    let got = 0;
    for await (const c of res) {
      got += c.length;
      if (got >= 2 << 20) break; // leaving the loop destroys the response and its socket
    }
    await until(() => endless.last()?.destroyed, 10_000, 'the server response to close');
    assert.equal(endless.last().writableFinished, false);
    await until(() => server.accepted[0].destroyed, 5000, 'the server side rsocket to close');
    await closeServer(server);
  });

  test('keepAliveTimeout: the server closes an idle keep-alive rsocket; the agent then opens a new one', T, async () => {
    const server = echoServer();
    server.keepAliveTimeout = 300;
    const port = await listenLocal(server);
    const agent = new RAgent({ keepAlive: true });
    await fetchOne({ port, method: 'POST', agent }, 'a');
    const first = server.accepted[0];
    await until(() => first.destroyed, 5000, 'the idle connection to time out');
    await until(() => Object.keys(agent.freeSockets).length === 0, 5000, 'the agent to drop the closed socket');
    const { data } = await fetchOne({ port, method: 'POST', agent }, 'b');
    assert.equal(data.toString(), 'b');
    assert.equal(server.accepted.length, 2);
    agent.destroy();
    await closeServer(server);
  });

  test('requestTimeout: a client that stops in the middle of its headers gets 408 and the connection closes', T, async () => {
    const server = createHttpServer({ requestTimeout: 400, headersTimeout: 400, connectionsCheckingInterval: 100 }, (req, res) => res.end('never'));
    const port = await listenLocal(server);
    const c = new RSocket().connect(port, '127.0.0.1');
    await once(c, 'connect');
    c.write('GET / HTTP/1.1\r\nHost: x\r\n');
    const reply = (await body(c)).toString();
    assert.match(reply, /^HTTP\/1\.1 408 Request Timeout\r\n/);
    await until(() => server.accepted[0].destroyed, 5000, 'the server side rsocket to close');
    await closeServer(server);
  });

  test('server.close(): waits for the open connection, then close; a second close() gets ERR_SERVER_NOT_RUNNING', T, async () => {
    let release;
    const server = createHttpServer((req, res) => {
      release = () => res.end('late');
    });
    const port = await listenLocal(server);
    assert.equal(server.listening, true);
    const reply = fetchOne({ port, createConnection: createHttpConnection });
    await until(() => release, 5000, 'the request at the server');
    let closed = false;
    const closing = closeServer(server).then(() => (closed = true));
    assert.equal(server.listening, false);
    assert.equal(server.address(), null);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(closed, false, 'close waits for the connection in use');
    release();
    const { data } = await reply;
    assert.equal(data.toString(), 'late');
    await closing;
    const err = await new Promise((r) => server.close(r));
    assert.equal(err?.code, 'ERR_SERVER_NOT_RUNNING');
    // Closed, it listens again and serves.
    server.removeAllListeners('request').on('request', (req, res) => res.end('again'));
    const again = await listenLocal(server);
    const { data: d2 } = await fetchOne({ port: again, createConnection: createHttpConnection });
    assert.equal(d2.toString(), 'again');
    await closeServer(server);
  });

  test('listen() twice is refused; maxConnections closes the connection over the limit', T, async () => {
    const server = echoServer();
    server.maxConnections = 1;
    const port = await listenLocal(server);
    assert.throws(() => server.listen(0), { code: 'ERR_SERVER_ALREADY_LISTEN' });
    const a1 = new RAgent({ keepAlive: true });
    await fetchOne({ port, method: 'POST', agent: a1 }, 'first');
    await assert.rejects(fetchOne({ port, method: 'POST', agent: new RAgent() }, 'second'), (e) => ['ECONNRESET', 'EPIPE'].includes(e.code) || /socket hang up/.test(e.message));
    a1.destroy();
    await closeServer(server);
  });

  test('https: an https.Server given to serve() does TLS over the rsocket; clients through tls.connect over createConnection and through RHttpsAgent', T, async () => {
    const key = readFileSync(new URL('../fixtures/tls/key.pem', import.meta.url));
    const cert = readFileSync(new URL('../fixtures/tls/cert.pem', import.meta.url));
    const server = serve(
      https.createServer({ key, cert }, async (req, res) => {
        const data = await body(req);
        res.end(`${req.socket.encrypted} ${req.socket.getProtocol()} ${sha(data)}`);
      }),
    );
    const port = await listenLocal(server);
    const data = payload(2 << 20, 21);
    const tlsOver = (opts) => tls.connect({ socket: createHttpConnection(opts), servername: 'localhost', ca: cert });
    const { res, data: back } = await fetchOne({ port, method: 'POST', createConnection: tlsOver }, data);
    assert.equal(res.statusCode, 200);
    assert.match(back.toString(), new RegExp(`^true TLSv1\\.[23] ${sha(data)}$`));
    assert.equal(server.accepted[0].constructor.name, 'RSocket');
    // RHttpsAgent: https.request unchanged, keep-alive over one TLS session on one rsocket.
    const agent = new RHttpsAgent({ ca: cert, keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 3; i++) {
      const r = await new Promise((resolve, reject) => {
        const req = https.request({ host: '127.0.0.1', port, method: 'POST', agent }, (res) => body(res).then((d) => resolve({ res, d }), reject));
        req.on('error', reject);
        req.end(`agent ${i}`);
      });
      assert.equal(r.res.statusCode, 200);
      assert.match(r.d.toString(), new RegExp(`^true TLSv1\\.[23] ${sha(Buffer.from(`agent ${i}`))}$`));
    }
    assert.equal(server.accepted.length, 2, 'one rsocket for the three requests of the agent');
    // A certificate the client does not trust: the TLS error, no request.
    const untrusted = new RHttpsAgent();
    await assert.rejects(
      new Promise((resolve, reject) => https.get({ host: '127.0.0.1', port, agent: untrusted }, resolve).on('error', reject)),
      { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' },
    );
    agent.destroy();
    untrusted.destroy();
    await closeServer(server);
  });

  test('listen() on an address no device owns: the server\'s error event after listen() returns, as net reports it', T, async () => {
    const server = createHttpServer(() => {});
    server.listen(0, '10.255.255.1');
    const [err] = await once(server, 'error');
    assert.equal(err.code, 'EADDRNOTAVAIL');
    assert.equal(server.listening, false);
    const closeErr = await new Promise((r) => server.close(r));
    assert.equal(closeErr?.code, 'ERR_SERVER_NOT_RUNNING');
  });

  test('listen({ signal }): aborting the signal closes the server, as net', T, async () => {
    const server = echoServer();
    const ac = new AbortController();
    server.listen({ port: 0, host: '127.0.0.1', signal: ac.signal });
    await once(server, 'listening');
    const { data } = await fetchOne({ port: server.address().port, method: 'POST', createConnection: createHttpConnection }, 'before');
    assert.equal(data.toString(), 'before');
    const closed = once(server, 'close');
    ac.abort();
    await closed;
    assert.equal(server.listening, false);
  });

  test('nobody listening: the request fails with ECONNREFUSED', T, async () => {
    const port = await freePort();
    await assert.rejects(fetchOne({ port, agent: new RAgent() }), { code: 'ECONNREFUSED' });
  });
});

describe('rdmacm/http refuses what it does not serve', () => {
  test('an https: URL to createConnection is EPROTONOSUPPORT', () => {
    assert.throws(() => createHttpConnection(new URL('https://127.0.0.1:1/')), { code: 'EPROTONOSUPPORT' });
  });
});
