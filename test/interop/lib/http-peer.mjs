// node:http over rsockets (rdmacm/http) for the interop suite, on whatever backend the environment
// selects (RDMACM_BACKEND, RDMACM_DEVICE):
//   node http-peer.mjs <package dir> server <address> <port>
//       serves GET /hello (answers `hello <x-who header>`) and POST /echo (the body back, its
//       SHA-256 in x-sha) until STOP_FILE exists; creates READY_FILE once listening; then closes
//       and prints one JSON line: the devices it saw, connections accepted, requests served.
//   node http-peer.mjs <package dir> client <address> <port> <who>
//       over one keep-alive connection (RAgent): 5 GETs of /hello, then a 1 MiB POST to /echo;
//       prints one JSON line: statuses, bodies, whether one connection served all, the echo's check.
//   node http-peer.mjs <package dir> undici-client <address> <port> <who>
//       the same through undici (the package's development dependency): a Client with
//       rdmacm/http's connector, the five GETs pipelined two at a time, then the POST.
// Exit 0 when everything checked out, 1 otherwise, 2 past PEER_DEADLINE_SEC (default 300).
import http from 'node:http';
import { createHash } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [root, role, address, portStr, who] = process.argv.slice(2);
const { createHttpServer, RAgent, rsConnector } = await import(`${root}/dist/http/index.js`);
const { getDeviceList } = await import(`${root}/dist/index.js`);
const port = Number(portStr);
const sha = (b) => createHash('sha256').update(b).digest('hex');
const deadline = setTimeout(() => {
  console.error(`http-peer ${role}: deadline`);
  process.exit(2);
}, Number(process.env.PEER_DEADLINE_SEC || 300) * 1000);
deadline.unref();

async function bodyOf(readable) {
  const parts = [];
  for await (const c of readable) parts.push(c);
  return Buffer.concat(parts);
}

async function server() {
  const served = [];
  const srv = createHttpServer(async (req, res) => {
    const data = await bodyOf(req);
    served.push(`${req.method} ${req.url} from ${req.socket.remoteAddress}`);
    res.setHeader('x-conn', `${req.socket.remoteAddress}:${req.socket.remotePort}`);
    if (req.url === '/echo') {
      res.setHeader('x-sha', sha(data));
      res.end(data);
    } else res.end(`hello ${req.headers['x-who']}`);
  });
  let accepted = 0;
  const kinds = new Set();
  srv.on('connection', (s) => {
    accepted++;
    kinds.add(s.constructor.name);
  });
  srv.on('error', (e) => {
    console.error(`listen: ${e.code} ${e.message}`);
    process.exit(1);
  });
  await new Promise((r) => srv.listen(port, address, r));
  if (process.env.READY_FILE) writeFileSync(process.env.READY_FILE, '');
  while (!(process.env.STOP_FILE && existsSync(process.env.STOP_FILE))) await new Promise((r) => setTimeout(r, 200));
  srv.closeAllConnections();
  await new Promise((r) => srv.close(r));
  const devices = getDeviceList().map((d) => d.name);
  console.log(JSON.stringify({ devices, accepted, sockets: [...kinds], served }));
  process.exit(0);
}

function request(agent, method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: address, port, method, path, agent, headers: { 'x-who': who } }, (res) =>
      bodyOf(res).then((data) => resolve({ status: res.statusCode, headers: res.headers, data }), reject),
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The 1 MiB body of the echo. */
function payloadOf() {
  const payload = Buffer.alloc(1 << 20);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
  return payload;
}

async function undiciClient() {
  const undici = await import(pathToFileURL(createRequire(join(root, 'package.json')).resolve('undici')).href);
  const client = new undici.Client(`http://${address}:${port}`, { connect: rsConnector, pipelining: 2 });
  const out = { statuses: [], bodies: [], connections: 0, echo: null };
  const conns = new Set();
  let ok = true;
  try {
    const replies = await Promise.all(
      [0, 1, 2, 3, 4].map(async (i) => {
        const r = await client.request({ path: `/hello?${i}`, method: 'GET', headers: { 'x-who': who } });
        return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
      }),
    );
    for (const r of replies) {
      out.statuses.push(r.status);
      out.bodies.push(r.text);
      conns.add(r.headers['x-conn']);
      ok &&= r.status === 200 && r.text === `hello ${who}`;
    }
    const payload = payloadOf();
    const r = await client.request({ path: '/echo', method: 'POST', body: payload, headers: { 'x-who': who } });
    const data = Buffer.from(await r.body.arrayBuffer());
    conns.add(r.headers['x-conn']);
    out.echo = { status: r.statusCode, length: data.length, shaMatches: r.headers['x-sha'] === sha(payload) && sha(data) === sha(payload) };
    ok &&= r.statusCode === 200 && out.echo.shaMatches;
  } catch (e) {
    out.error = `${e.code ?? ''} ${e.message}`;
    ok = false;
  }
  out.connections = conns.size;
  ok &&= conns.size === 1;
  await client.close();
  console.log(JSON.stringify(out));
  process.exit(ok ? 0 : 1);
}

async function client() {
  const agent = new RAgent({ keepAlive: true, maxSockets: 1 });
  const out = { statuses: [], bodies: [], connections: 0, echo: null };
  const conns = new Set();
  let ok = true;
  try {
    for (let i = 0; i < 5; i++) {
      const r = await request(agent, 'GET', `/hello?${i}`);
      out.statuses.push(r.status);
      out.bodies.push(r.data.toString());
      conns.add(r.headers['x-conn']);
      ok &&= r.status === 200 && r.data.toString() === `hello ${who}`;
    }
    const payload = payloadOf();
    const r = await request(agent, 'POST', '/echo', payload);
    conns.add(r.headers['x-conn']);
    out.echo = { status: r.status, length: r.data.length, shaMatches: r.headers['x-sha'] === sha(payload) && sha(r.data) === sha(payload) };
    ok &&= r.status === 200 && out.echo.shaMatches;
  } catch (e) {
    out.error = `${e.code ?? ''} ${e.message}`;
    ok = false;
  }
  out.connections = conns.size;
  ok &&= conns.size === 1;
  agent.destroy();
  console.log(JSON.stringify(out));
  process.exit(ok ? 0 : 1);
}

if (role === 'server') await server();
else if (role === 'client') await client();
else if (role === 'undici-client') await undiciClient();
else {
  console.error('usage: http-peer.mjs <package dir> server|client|undici-client <address> <port> [who]');
  process.exit(1);
}
