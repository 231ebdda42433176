// node:http2 (cleartext h2c) over rsockets: an Http2Server fed by an rsocket listener
// (rdmacm/http createHttp2Server) and http2.connect with rdmacm/http's createConnection, on every
// device that connects RDMA_PS_TCP ids — concurrent streams on one session, 9 MiB each way on a
// stream, a stream reset by the client while its body is under way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { once } from 'node:events';
import { createHttp2Server, createHttpConnection } from '../../dist/http/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { until } from '../lib/wait.js';
import { sha, payload, body, listenLocal, closeServer } from '../lib/http.js';

const T = { timeout: 60_000 };
const BIG = 9 * 1024 * 1024 + 7;

/** An h2c session to `port` over an rsocket. */
async function session(port) {
  const s = http2.connect(`http://127.0.0.1:${port}`, { createConnection: createHttpConnection });
  await once(s, 'connect');
  return s;
}

/** One request on `sess`: resolves `{ headers, data }` at the end of the response. */
function exchange(sess, headers, reqBody) {
  return new Promise((resolve, reject) => {
    const st = sess.request(headers);
    st.on('error', reject);
    st.once('response', (h) => body(st).then((data) => resolve({ headers: h, data }), reject));
    st.end(reqBody);
  });
}

forEachDevice([Cap.CM_TCP], () => {
  test('8 concurrent streams on one session over one rsocket, and 9 MiB each way on a stream', T, async () => {
    const server = createHttp2Server(async (req, res) => {
      const data = await body(req);
      res.setHeader('x-sha', sha(data));
      res.setHeader('x-path', req.url);
      res.end(data);
    });
    const port = await listenLocal(server);
    const sess = await session(port);
    const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => exchange(sess, { ':path': `/s${i}`, ':method': 'POST' }, `stream ${i}`)));
    replies.forEach(({ headers, data }, i) => {
      assert.equal(headers[':status'], 200);
      assert.equal(headers['x-path'], `/s${i}`);
      assert.equal(data.toString(), `stream ${i}`);
    });
    const big = payload(BIG, 17);
    const { headers, data } = await exchange(sess, { ':path': '/big', ':method': 'PUT' }, big);
    assert.equal(headers['x-sha'], sha(big));
    assert.equal(sha(data), sha(big));
    assert.equal(server.accepted.length, 1);
    assert.equal(server.accepted[0].constructor.name, 'RSocket');
    sess.close();
    await closeServer(server);
  });

  test('a stream reset by the client mid-body: the server stream is aborted and closes, the session lives on', T, async () => {
    let serverStream;
    let received = 0;
    const server = createHttp2Server();
    server.on('stream', (st, h) => {
      if (h[':path'] === '/ping') {
        st.respond({ ':status': 200 });
        st.end('pong');
        return;
      }
      serverStream = st;
      st.on('data', (d) => (received += d.length));
      st.on('error', () => {});
    });
    const port = await listenLocal(server);
    const sess = await session(port);
    const st = sess.request({ ':path': '/upload', ':method': 'POST' });
    st.on('error', () => {});
    st.write(payload(1 << 20, 4));
    await until(() => received >= 1 << 20, 10_000, 'the first MiB at the server');
    const aborted = once(serverStream, 'aborted');
    const closed = new Promise((r) => serverStream.once('close', r));
    st.close(http2.constants.NGHTTP2_CANCEL);
    await aborted;
    await closed;
    assert.equal(serverStream.rstCode, http2.constants.NGHTTP2_CANCEL);
    const { data } = await exchange(sess, { ':path': '/ping' });
    assert.equal(data.toString(), 'pong');
    sess.close();
    await closeServer(server);
  });
});
