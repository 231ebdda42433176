// One end of the HTTP bench (bench/http.js): a node:http server or client, over rsockets
// (rdmacm/http: createHttpServer, RAgent) or over Node TCP (node:http as is) — the same code on
// both, only the connection factory differs.
//
//   node bench/http-peer.js server --transport rs|tcp
//       prints {"port":N} once listening; serves until stdin closes:
//         GET /small      64 B body
//         PUT /sink       reads the body, answers its length
//         GET /big?n=B    B bytes (Content-Length), written with backpressure
//   node bench/http-peer.js client --transport rs|tcp --port N --requests R --warmup W --bytes B
//       R sequential GET /small over one keep-alive connection after W untimed ones, then one
//       PUT and one GET of B bytes on the same connection; prints one JSON line:
//         {"rps":…, "putGbps":…, "getGbps":…, "putMs":…, "getMs":…}
import http from 'node:http';
import { createHttpServer, RAgent } from '../dist/http/index.js';

const argv = process.argv.slice(2);
const mode = argv[0];
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
const transport = opt('--transport', 'rs');
if (!['rs', 'tcp'].includes(transport)) throw new Error(`--transport rs|tcp, not ${transport}`);

const SMALL = Buffer.alloc(64, 'x');
const CHUNK = Buffer.alloc(1 << 20, 'y');

function handler(req, res) {
  if (req.url === '/small') {
    res.setHeader('content-length', SMALL.length);
    res.end(SMALL);
    return;
  }
  if (req.url === '/sink') {
    let n = 0;
    req.on('data', (d) => (n += d.length));
    req.on('end', () => res.end(String(n)));
    return;
  }
  const m = /^\/big\?n=(\d+)$/.exec(req.url ?? '');
  if (!m) {
    res.statusCode = 404;
    res.end();
    return;
  }
  let left = Number(m[1]);
  res.setHeader('content-length', left);
  const more = () => {
    while (left > 0) {
      const c = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
      left -= c.length;
      if (!res.write(c)) return void res.once('drain', more);
    }
    res.end();
  };
  more();
}

async function server() {
  const srv = transport === 'rs' ? createHttpServer(handler) : http.createServer(handler);
  srv.keepAliveTimeout = 60_000;
  srv.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: srv.address().port })));
  process.stdin.resume();
  process.stdin.on('end', () => {
    srv.closeAllConnections();
    srv.close(() => process.exit(0));
  });
}

/** One request on `agent`; resolves the response body's length (or its text when `text`). */
function once(agent, port, method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, agent }, (res) => {
      let n = 0;
      let text = '';
      res.on('data', (d) => {
        n += d.length;
        if (n <= 64) text += d;
      });
      res.on('end', () => resolve({ n, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined) {
      let left = body;
      req.setHeader('content-length', body);
      const more = () => {
        while (left > 0) {
          const c = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
          left -= c.length;
          if (!req.write(c)) return void req.once('drain', more);
        }
        req.end();
      };
      more();
    } else req.end();
  });
}

async function client() {
  const port = Number(opt('--port'));
  const requests = Number(opt('--requests', 5000));
  const warmup = Number(opt('--warmup', requests));
  const bytes = Number(opt('--bytes', 64 << 20));
  const agentOpts = { keepAlive: true, maxSockets: 1 };
  const agent = transport === 'rs' ? new RAgent(agentOpts) : new http.Agent(agentOpts);
  for (let i = 0; i < warmup; i++) await once(agent, port, 'GET', '/small');
  let t = performance.now();
  for (let i = 0; i < requests; i++) {
    const r = await once(agent, port, 'GET', '/small');
    if (r.n !== SMALL.length) throw new Error(`GET /small: ${r.n} bytes`);
  }
  const rps = requests / ((performance.now() - t) / 1000);
  t = performance.now();
  const put = await once(agent, port, 'PUT', '/sink', bytes);
  const putMs = performance.now() - t;
  if (put.text !== String(bytes)) throw new Error(`PUT /sink: the server read ${put.text} bytes`);
  t = performance.now();
  const get = await once(agent, port, 'GET', `/big?n=${bytes}`);
  const getMs = performance.now() - t;
  if (get.n !== bytes) throw new Error(`GET /big: ${get.n} bytes`);
  agent.destroy();
  const gbps = (ms) => (bytes * 8) / (ms / 1000) / 1e9;
  console.log(JSON.stringify({ transport, requests, bytes, rps, putMs, getMs, putGbps: gbps(putMs), getGbps: gbps(getMs) }));
}

if (mode === 'server') await server();
else if (mode === 'client') await client();
else throw new Error('usage: http-peer.js server|client --transport rs|tcp ...');
