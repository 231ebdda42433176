// ref() / unref() of rsockets and rsocket servers, as net's: an unref'd connected socket and an
// unref'd listening server do not keep the process alive by themselves (it exits with the
// connection still open), ref() undoes it, bytes written just before still all arrive, and
// node:http's keep-alive Agent and undici — which unref their idle pooled sockets — let a client
// process exit right after its last response, as over TCP.
// Each case runs in a child process on every device that connects RDMA_PS_TCP ids; the TCP
// counterpart runs once beside them, so a difference from net shows as a failure here.
import test from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import http from 'node:http';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { createHttpServer } from '../../dist/http/index.js';
import * as rsApi from '../../dist/rsocket/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { listenLocal, closeServer, payload, sha } from '../lib/http.js';
import { REPO_ROOT } from '../lib/tools.js';

const T = { timeout: 60_000 };
/** How long a child that should end by itself may take after its last step (ms). */
const EXIT_WITHIN_MS = 5_000;
/** How long a child that must stay alive is watched before it is killed (ms). */
const ALIVE_FOR_MS = 3_000;

const RS = JSON.stringify(`${REPO_ROOT}/dist/rsocket/index.js`);
const HTTP = JSON.stringify(`${REPO_ROOT}/dist/http/index.js`);

/**
 * Run module `code` in a child process. It prints `done` when its last step is over; the result
 * says whether it then exited by itself within `waitMs` (`exited`, with its code and what it
 * printed) or was still running and was killed.
 */
async function runChild(code, waitMs, env = {}) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exit = once(child, 'exit');
  // The child's setup is bounded too: a child that never says `done` is killed.
  const hard = setTimeout(() => child.kill('SIGKILL'), 30_000);
  let doneAt = 0;
  await new Promise((resolve) => {
    const check = () => {
      if (out.includes('done\n')) {
        doneAt = performance.now();
        resolve();
      }
    };
    child.stdout.on('data', check);
    void exit.then(resolve);
  });
  let killed = false;
  const soft = setTimeout(() => {
    killed = true;
    child.kill('SIGKILL');
  }, waitMs);
  const [codeOut, signal] = await exit;
  clearTimeout(soft);
  clearTimeout(hard);
  return { exited: !killed && signal === null, code: codeOut, signal, out, err, afterDoneMs: doneAt ? performance.now() - doneAt : -1 };
}

/**
 * A child that connects an rsocket pair (or a net pair), exchanges a message, calls `calls` on
 * both sockets and the server (e.g. `unref()` or `unref().ref()`), exchanges another message
 * after that (the connection works), prints `done` and leaves the rest to the event loop; at
 * exit it prints whether both sockets were still open.
 */
function pairChild(face, calls) {
  const mod = face === 'net' ? `import * as rs from 'node:net';` : `import * as rs from ${RS};`;
  return `
    ${mod}
    import { once } from 'node:events';
    const server = rs.createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'connection');
    const c = rs.connect(server.address().port, '127.0.0.1');
    await once(c, 'connect');
    const [s] = await accepted;
    s.on('data', (d) => s.write(d));
    c.write('one');
    await once(c, 'data');
    c.${calls}; s.${calls}; server.${calls};
    // The exchange waits on the sockets alone: as over net, a ref'd timer of the program's own
    // keeps the process up meanwhile (an unref'd socket waiting for data does not).
    const hold = setInterval(() => {}, 1000);
    await new Promise((r) => setTimeout(r, 100));
    c.write('two');
    const [back] = await once(c, 'data');
    clearInterval(hold);
    if (String(back) !== 'two') process.exit(3);
    process.on('exit', () => console.log(c.destroyed || s.destroyed ? 'closed' : 'open'));
    console.log('done');
  `;
}

/**
 * A child that makes `n` requests through a keep-alive agent (RAgent over rsockets, or
 * http.Agent over TCP) to the server on `port`, one at a time, reads every body and prints `done`.
 */
function httpChild(face, port, n) {
  const agent = face === 'net' ? `new http.Agent({ keepAlive: true, maxSockets: 1 })` : `new RAgent({ keepAlive: true, maxSockets: 1 })`;
  return `
    import http from 'node:http';
    import { RAgent } from ${HTTP};
    const agent = ${agent};
    for (let i = 0; i < ${n}; i++) {
      const body = await new Promise((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port: ${port}, path: '/' + i, agent }, (res) => {
          let b = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (b += d));
          res.on('end', () => resolve(b));
        });
        req.on('error', reject);
      });
      if (body !== 'hello /' + i) process.exit(3);
    }
    // One connection served every request: the pooled socket was reused, not reopened.
    const free = Object.values(agent.freeSockets).flat();
    if (free.length !== 1) process.exit(4);
    console.log('done');
  `;
}

function pairSuite(face) {
  test(`[${face}] unref() on both sockets and the server: the process exits by itself, the connection still open`, T, async () => {
    const r = await runChild(pairChild(face, 'unref()'), EXIT_WITHIN_MS);
    assert.equal(r.exited, true, `still running ${EXIT_WITHIN_MS} ms after its last step: something holds the event loop\n${r.err}`);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /done\nopen\n/, 'the sockets were open when the process ended');
  });

  test(`[${face}] unref() then ref(): the process stays alive (killed after a bounded wait)`, T, async () => {
    const r = await runChild(pairChild(face, 'unref().ref()'), ALIVE_FOR_MS);
    assert.match(r.out, /done\n/, r.err);
    assert.equal(r.exited, false, `exited by itself (code ${r.code}) although every socket and the server were ref'd again\n${r.err}`);
  });

  test(`[${face}] the sockets unref'd but not the server: the listening server keeps the process alive`, T, async () => {
    const code = pairChild(face, 'unref()').replace('server.unref();', '');
    const r = await runChild(code, ALIVE_FOR_MS);
    assert.match(r.out, /done\n/, r.err);
    assert.equal(r.exited, false, `exited by itself (code ${r.code}) with a ref'd listening server\n${r.err}`);
  });
}

/**
 * A child that makes `n` requests through an undici Agent (over rsockets: `rsConnector`) to the
 * server on `port`, one connection for all, reads every body, prints `done` and does not close
 * the dispatcher: undici unrefs its idle connection, so the process may end.
 */
function undiciChild(face, port, n) {
  const opts = face === 'net' ? `{ connections: 1 }` : `{ connect: rsConnector, connections: 1 }`;
  return `
    import { Agent, request } from ${JSON.stringify(`${REPO_ROOT}/node_modules/undici/index.js`)};
    import { rsConnector } from ${HTTP};
    const dispatcher = new Agent(${opts});
    for (let i = 0; i < ${n}; i++) {
      const { statusCode, body } = await request('http://127.0.0.1:${port}/' + i, { dispatcher });
      const text = await body.text();
      if (statusCode !== 200 || text !== 'hello /' + i) process.exit(3);
    }
    console.log('done');
  `;
}

function httpSuite(face) {
  test(`[${face}] node:http with a keepAlive agent: the client process exits right after its last response`, T, async () => {
    const handler = (req, res) => res.end(`hello ${req.url}`);
    const server = face === 'net' ? http.createServer(handler) : createHttpServer(handler);
    // The server would keep the idle connection far longer than the child may take to exit.
    server.keepAliveTimeout = 60_000;
    const port = await listenLocal(server);
    try {
      const r = await runChild(httpChild(face, port, 3), EXIT_WITHIN_MS);
      assert.equal(r.exited, true, `still running ${EXIT_WITHIN_MS} ms after its last response: the pooled socket holds the event loop\n${r.err}`);
      assert.equal(r.code, 0, r.err);
      assert.equal(server.accepted.length, 1, 'one keep-alive connection served every request');
    } finally {
      for (const s of server.accepted) s.destroy();
      await closeServer(server);
    }
  });
  test(`[${face}] undici with a keep-alive Agent: the client process exits right after its last response`, T, async () => {
    const handler = (req, res) => res.end(`hello ${req.url}`);
    const server = face === 'net' ? http.createServer(handler) : createHttpServer(handler);
    server.keepAliveTimeout = 60_000;
    const port = await listenLocal(server);
    try {
      const r = await runChild(undiciChild(face, port, 3), EXIT_WITHIN_MS);
      assert.equal(r.exited, true, `still running ${EXIT_WITHIN_MS} ms after its last response: the idle connection holds the event loop\n${r.err}`);
      assert.equal(r.code, 0, r.err);
      assert.equal(server.accepted.length, 1, 'one keep-alive connection served every request');
    } finally {
      for (const s of server.accepted) s.destroy();
      await closeServer(server);
    }
  });
}

function httpServerSuite(face) {
  test(`[${face}] an http.Server unref'd before listen(): the process exits by itself while it listens`, T, async () => {
    const make = face === 'net' ? `http.createServer()` : `createHttpServer()`;
    const code = `
      import http from 'node:http';
      import { once } from 'node:events';
      import { createHttpServer } from ${HTTP};
      const server = ${make};
      server.unref();
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      process.on('exit', () => console.log(server.listening ? 'listening' : 'closed'));
      console.log('done');
    `;
    const r = await runChild(code, EXIT_WITHIN_MS);
    assert.equal(r.exited, true, `still running ${EXIT_WITHIN_MS} ms after listening: the unref'd server holds the event loop\n${r.err}`);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /done\nlistening\n/);
  });
}

pairSuite('net');
httpServerSuite('net');
writeThenExitSuite('net');
httpSuite('net');

/**
 * A child connects to a server of this process, unrefs its socket, writes `size` bytes (more than
 * the connection's buffers take at once) and leaves the rest to the event loop: the bytes still
 * on their way hold the process, as net's pending writes do, so every one arrives before it ends.
 * `lossy`: the child's device drops some of its datagrams (`env`); the child then reports, as it
 * exits, how many its device dropped and how many times its QP went back to resend
 * (`Context.queryCounters`: inject_drop, completer_retry_err), and both must be more than 0.
 */
function writeThenExitSuite(face, { env = {}, size = 4 << 20, lossy = false } = {}) {
  test(`[${face}] an unref'd socket with bytes still to send: they arrive, then the process exits by itself`, T, async () => {
    const data = payload(size, 5);
    const mod = face === 'net' ? `import * as rs from 'node:net';` : `import * as rs from ${RS};`;
    const server = face === 'net' ? net.createServer() : rsApi.createServer();
    const got = new Promise((resolve) => {
      server.once('connection', (s) => {
        const parts = [];
        let n = 0;
        s.on('data', (d) => {
          parts.push(d);
          n += d.length;
          if (n >= size) resolve(Buffer.concat(parts));
        });
        s.on('error', () => {});
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const code = `
      ${mod}
      import { once } from 'node:events';
      import { payload } from ${JSON.stringify(`${REPO_ROOT}/test/lib/http.js`)};
      import { getDeviceList } from ${JSON.stringify(`${REPO_ROOT}/dist/index.js`)};
      const c = rs.connect(${server.address().port}, '127.0.0.1');
      await once(c, 'connect');
      c.on('error', () => process.exit(5));
      c.unref();
      c.write(payload(${size}, 5));
      if (${lossy}) {
        const ctx = getDeviceList().find((d) => d.name === process.env.RDMACM_DEVICE).open();
        process.on('exit', () => {
          const k = ctx.queryCounters();
          console.log('dropped ' + k.inject_drop + ' resent ' + k.completer_retry_err);
        });
      }
      console.log('done');
    `;
    try {
      const r = await runChild(code, 15_000, env);
      assert.equal(r.exited, true, `still running 15 s after writing\n${r.err}`);
      assert.equal(r.code, 0, r.err);
      if (lossy) {
        const m = /dropped (\d+) resent (\d+)/.exec(r.out);
        assert.ok(m, r.out + r.err);
        assert.ok(Number(m[1]) > 0, `the link dropped none of the child's datagrams: ${m[0]}`);
        assert.ok(Number(m[2]) > 0, `the child resent nothing before it ended: ${m[0]}`);
      }
      const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('the written bytes did not all arrive')), 5_000).unref());
      const back = await Promise.race([got, timeout]);
      assert.equal(back.length, size);
      assert.equal(sha(back), sha(data));
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
}

forEachDevice([Cap.CM_TCP], () => {
  pairSuite('rsocket');
  httpSuite('rsocket');
  httpServerSuite('rsocket');
  writeThenExitSuite('rsocket');
}, 'rsocket ref/unref');

/**
 * A child with two datagram sockets (rsockets, or node:dgram) that exchange a datagram, then call
 * `calls` on both, exchange another (held meanwhile by a timer of its own) and print `done`.
 */
function dgramChild(face, calls) {
  const mod = face === 'dgram' ? `import { createSocket } from 'node:dgram';` : `import { createSocket } from ${RS};`;
  return `
    ${mod}
    import { once } from 'node:events';
    const a = createSocket('udp4');
    const b = createSocket('udp4');
    a.bind(0, '127.0.0.1');
    b.bind(0, '127.0.0.1');
    await Promise.all([once(a, 'listening'), once(b, 'listening')]);
    a.on('message', (m, r) => a.send(m, r.port, r.address));
    b.send('one', a.address().port, '127.0.0.1');
    await once(b, 'message');
    a.${calls}; b.${calls};
    const hold = setInterval(() => {}, 1000);
    b.send('two', a.address().port, '127.0.0.1');
    const [m] = await once(b, 'message');
    clearInterval(hold);
    if (String(m) !== 'two') process.exit(3);
    console.log('done');
  `;
}

function dgramSuite(face) {
  test(`[${face}] datagram sockets unref'd: the process exits by itself`, T, async () => {
    const r = await runChild(dgramChild(face, 'unref()'), EXIT_WITHIN_MS);
    assert.equal(r.exited, true, `still running ${EXIT_WITHIN_MS} ms after its last step\n${r.err}`);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /done\n/);
  });

  test(`[${face}] datagram sockets unref'd then ref'd: the process stays alive (killed after a bounded wait)`, T, async () => {
    const r = await runChild(dgramChild(face, 'unref().ref()'), ALIVE_FOR_MS);
    assert.match(r.out, /done\n/, r.err);
    assert.equal(r.exited, false, `exited by itself (code ${r.code})\n${r.err}`);
  });
}

dgramSuite('dgram');

forEachDevice([Cap.UD, Cap.AH], () => {
  dgramSuite('rsocket');
}, 'datagram rsocket ref/unref');

// On a link that drops datagrams, the child's unacknowledged sends are retransmitted before it
// ends (RDMACM_ROCE_IMPAIR: the transports with an impairment read it at start). 512 KiB, four
// times the send buffer, with this seed loses about 30 of the child's datagrams, one of them at
// the end of a burst: that one comes back only when the ACK timeout (about 2.1 s at rdma_cm's
// timeout) resends it, so the child must outlive that wait, once (4 MiB, with the same seed,
// waited it out several times: 7 to 11 s).
forEachDevice([Cap.CM_TCP, Cap.IMPAIR], () => {
  writeThenExitSuite('rsocket', { env: { RDMACM_ROCE_IMPAIR: 'loss=0.05,seed=11' }, size: 512 << 10, lossy: true });
}, 'rsocket unref on a lossy link');
