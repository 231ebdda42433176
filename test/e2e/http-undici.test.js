// undici over rsockets: undici's Agent and Client with rdmacm/http's connector (`connect`)
// against a real node:http server fed by an rsocket listener, on every device that connects
// RDMA_PS_TCP ids — keep-alive, pipelining (two and more requests on the wire at once), bodies
// over 8 MiB both ways through request() and fetch(), an AbortSignal ending a request while its
// response streams, and the connector's errors; Node's own fetch() (the undici bundled in Node)
// over rsockets, given the Agent as its dispatcher or as the global dispatcher.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { Agent, Client, request, fetch, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { createHttpServer, rsConnector, buildConnector, serve } from '../../dist/http/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { until } from '../lib/wait.js';
import { freePort } from '../lib/ports.js';
import { sha, payload, body, listenLocal, closeServer, endlessResponse } from '../lib/http.js';

const T = { timeout: 60_000 };
const BIG = 9 * 1024 * 1024 + 7;

/** Echo server: the request body back, with its length and hash in headers. */
function echoServer() {
  return createHttpServer(async (req, res) => {
    const data = await body(req);
    res.setHeader('x-sha', sha(data));
    res.setHeader('x-conn', `${req.socket.remotePort}`);
    res.end(data);
  });
}

forEachDevice([Cap.CM_TCP], () => {
  test('request() keep-alive: 20 sequential requests over one rsocket (an Agent of one connection per origin)', T, async () => {
    const server = echoServer();
    const port = await listenLocal(server);
    // An Agent's default pool may open a second connection while the first finishes its
    // response (undici does so over TCP as well); one connection per origin pins the count.
    const dispatcher = new Agent({ connect: rsConnector, connections: 1 });
    for (let i = 0; i < 20; i++) {
      const r = await request(`http://127.0.0.1:${port}/k${i}`, { dispatcher, method: 'POST', body: `body ${i}` });
      assert.equal(r.statusCode, 200);
      assert.equal(await r.body.text(), `body ${i}`);
    }
    assert.equal(server.accepted.length, 1);
    await dispatcher.close();
    await closeServer(server);
  });

  test('Client keep-alive: 20 sequential requests, one connection, the same rsocket throughout', T, async () => {
    const server = echoServer();
    const port = await listenLocal(server);
    const client = new Client(`http://127.0.0.1:${port}`, { connect: rsConnector });
    const conns = new Set();
    for (let i = 0; i < 20; i++) {
      const r = await client.request({ path: `/c${i}`, method: 'POST', body: `c ${i}` });
      assert.equal(await r.body.text(), `c ${i}`);
      conns.add(r.headers['x-conn']);
    }
    assert.equal(server.accepted.length, 1);
    assert.equal(conns.size, 1);
    await client.close();
    await closeServer(server);
  });

  test('pipelining: 4 requests on the wire of one rsocket at once, answered in order', T, async () => {
    const waiting = [];
    const server = createHttpServer((req, res) => {
      waiting.push(() => res.end(`answer ${req.url}`));
      // node:http parses pipelined requests as they come and queues their responses: hold
      // every answer until four requests have arrived on the connection.
      if (waiting.length === 4) for (const w of waiting.splice(0)) w();
    });
    const port = await listenLocal(server);
    const client = new Client(`http://127.0.0.1:${port}`, { connect: rsConnector, pipelining: 4 });
    const replies = await Promise.all(
      [0, 1, 2, 3].map(async (i) => {
        const r = await client.request({ path: `/q${i}`, method: 'GET' });
        return r.body.text();
      }),
    );
    assert.deepEqual(replies, ['answer /q0', 'answer /q1', 'answer /q2', 'answer /q3']);
    assert.equal(server.accepted.length, 1);
    await client.close();
    await closeServer(server);
  });

  test('request() with 9 MiB each way', T, async () => {
    const server = echoServer();
    const port = await listenLocal(server);
    const dispatcher = new Agent({ connect: rsConnector });
    const data = payload(BIG, 11);
    const r = await request(`http://127.0.0.1:${port}/big`, { dispatcher, method: 'PUT', body: data });
    assert.equal(r.headers['x-sha'], sha(data));
    const back = Buffer.from(await r.body.arrayBuffer());
    assert.equal(back.length, BIG);
    assert.equal(sha(back), sha(data));
    await dispatcher.close();
    await closeServer(server);
  });

  test('fetch() with 9 MiB each way, the request body streamed', T, async () => {
    const server = echoServer();
    const port = await listenLocal(server);
    const dispatcher = new Agent({ connect: rsConnector });
    const data = payload(BIG, 13);
    const stream = new ReadableStream({
      start(ctl) {
        for (let at = 0; at < data.length; at += 1 << 20) ctl.enqueue(new Uint8Array(data.subarray(at, at + (1 << 20))));
        ctl.close();
      },
    });
    const r = await fetch(`http://127.0.0.1:${port}/f`, { dispatcher, method: 'POST', body: stream, duplex: 'half' });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-sha'), sha(data));
    const back = Buffer.from(await r.arrayBuffer());
    assert.equal(sha(back), sha(data));
    await dispatcher.close();
    await closeServer(server);
  });

  test('an AbortSignal ends a request while its response streams: AbortError, the server sees the connection close', T, async () => {
    const endless = endlessResponse(BIG);
    const server = createHttpServer(endless.handler);
    const port = await listenLocal(server);
    const dispatcher = new Agent({ connect: rsConnector });
    const ac = new AbortController();
    const r = await request(`http://127.0.0.1:${port}/stream`, { dispatcher, signal: ac.signal });
    let got = 0;
    const reading = (async () => {
      for await (const c of r.body) {
        got += c.length;
        if (got >= 2 << 20) ac.abort();
      }
    })();
    await assert.rejects(reading, { name: 'AbortError' });
    await until(() => endless.last().destroyed, 10_000, 'the server response to close');
    assert.equal(endless.last().writableFinished, false);
    await until(() => server.accepted[0].destroyed, 5000, 'the server side rsocket to close');
    await dispatcher.close();
    await closeServer(server);
  });

  test('an AbortSignal aborted before the response: fetch rejects with AbortError', T, async () => {
    const server = createHttpServer(() => {});
    const port = await listenLocal(server);
    const dispatcher = new Agent({ connect: rsConnector });
    const ac = new AbortController();
    const p = fetch(`http://127.0.0.1:${port}/never`, { dispatcher, signal: ac.signal });
    await until(() => server.accepted.length === 1, 5000, 'the connection');
    ac.abort();
    await assert.rejects(p, { name: 'AbortError' });
    await until(() => server.accepted[0].destroyed, 5000, 'the server side rsocket to close');
    await dispatcher.close();
    await closeServer(server);
  });

  test("Node's own fetch() over rsockets: with { dispatcher }, and unchanged once the Agent is the global dispatcher", T, async () => {
    const server = createHttpServer((req, res) => res.end(`${req.url} over ${req.socket.constructor.name}`));
    const port = await listenLocal(server);
    const dispatcher = new Agent({ connect: rsConnector, connections: 1 });
    const r1 = await globalThis.fetch(`http://127.0.0.1:${port}/given`, { dispatcher });
    assert.equal(await r1.text(), '/given over RSocket');
    const saved = getGlobalDispatcher();
    setGlobalDispatcher(dispatcher);
    try {
      const r2 = await globalThis.fetch(`http://127.0.0.1:${port}/global`);
      assert.equal(await r2.text(), '/global over RSocket');
    } finally {
      setGlobalDispatcher(saved);
    }
    assert.equal(server.accepted.length, 1, 'both through the one keep-alive rsocket');
    await dispatcher.close();
    await closeServer(server);
  });

  test('https: origins through buildConnector({ tls }): request() and fetch() over TLS over an rsocket', T, async () => {
    const key = readFileSync(new URL('../fixtures/tls/key.pem', import.meta.url));
    const cert = readFileSync(new URL('../fixtures/tls/cert.pem', import.meta.url));
    const server = serve(https.createServer({ key, cert }, async (req, res) => res.end(`${req.socket.getProtocol()} ${sha(await body(req))}`)));
    const port = await listenLocal(server);
    const dispatcher = new Agent({ connect: buildConnector({ tls: { ca: cert } }), connections: 1 });
    const data = payload(3 << 20, 23);
    const r = await request(`https://127.0.0.1:${port}/`, { dispatcher, method: 'POST', body: data });
    assert.match(await r.body.text(), new RegExp(`^TLSv1\\.[23] ${sha(data)}$`));
    const f = await fetch(`https://127.0.0.1:${port}/`, { dispatcher, method: 'POST', body: 'small' });
    assert.match(await f.text(), new RegExp(`^TLSv1\\.[23] ${sha(Buffer.from('small'))}$`));
    assert.equal(server.accepted[0].constructor.name, 'RSocket');
    const untrusted = new Agent({ connect: buildConnector({ tls: {} }) });
    await assert.rejects(request(`https://127.0.0.1:${port}/`, { dispatcher: untrusted }), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    await untrusted.close();
    await dispatcher.close();
    await closeServer(server);
  });

  test('nobody listening: ECONNREFUSED from request(), fetch failed with it as cause', T, async () => {
    const port = await freePort();
    const dispatcher = new Agent({ connect: buildConnector({ timeout: 5000 }) });
    await assert.rejects(request(`http://127.0.0.1:${port}/`, { dispatcher }), { code: 'ECONNREFUSED' });
    await assert.rejects(fetch(`http://127.0.0.1:${port}/`, { dispatcher }), (e) => e.cause?.code === 'ECONNREFUSED');
    await dispatcher.close();
  });
});

test('an https: origin without TLS options: the connector refuses it with EPROTONOSUPPORT', async () => {
  const dispatcher = new Agent({ connect: rsConnector });
  await assert.rejects(request('https://127.0.0.1:1/', { dispatcher }), { code: 'EPROTONOSUPPORT' });
  await dispatcher.close();
});
