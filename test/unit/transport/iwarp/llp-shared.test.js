// LLP sockets (ours and accepted ones) read into one shared buffer: many connections cost no
// per-socket read buffer, interleaved reads still deliver every connection's own bytes, and
// connections closed gracefully stop lingering once their sockets close.
import test from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { Llp, acceptLlps, llpsSettled } from '../../../../dist/transport/iwarp/llp.js';

const N = 100;
const BYTES = 200 * 1024;

/** A listener whose accepted connections arrive as LLPs. */
async function llpServer(onLlp) {
  const srv = net.createServer({ noDelay: true, pauseOnConnect: true });
  await new Promise((resolve) => srv.listen({ port: 0, host: '127.0.0.1', backlog: 1024 }, () => {
    acceptLlps(srv, onLlp);
    resolve();
  }));
  return srv;
}

/** Bytes of connection `i`, side `s`: a pattern no other connection shares at any offset. */
function pattern(i, s, n) {
  const b = Buffer.allocUnsafe(n);
  for (let k = 0; k < n; k++) b[k] = (k * 7 + i * 13 + s * 101 + (k >> 8)) & 0xff;
  return b;
}

/** Collect what an LLP receives (copying: the views are only valid during the call). */
function collect(llp, want) {
  const chunks = [];
  let got = 0;
  return new Promise((resolve) => {
    llp.setConsumer((buf, start, end) => {
      chunks.push(Buffer.from(buf.subarray(start, end)));
      got += end - start;
      if (got >= want) resolve(Buffer.concat(chunks));
    });
  });
}

test(`${N} LLP connections both ways at once: each gets its own bytes, no read buffer per socket`, { timeout: 60_000 }, async () => {
  const accepted = [];
  let onAll;
  const allAccepted = new Promise((r) => (onAll = r));
  const srv = await llpServer((llp) => {
    accepted.push(llp);
    if (accepted.length === N) onAll();
  });
  const port = srv.address().port;
  const ab0 = process.memoryUsage().arrayBuffers;
  const clients = [];
  await Promise.all(
    Array.from({ length: N }, (_, i) =>
      new Promise((resolve) => {
        const l = Llp.connect({ host: '127.0.0.1', port }, resolve);
        clients[i] = l;
      }),
    ),
  );
  await allAccepted;
  const perSocket = (process.memoryUsage().arrayBuffers - ab0) / N;
  // A read buffer per socket would be 1 MiB each (and 16 KiB more for boundary reads).
  assert.ok(perSocket < 16 * 1024, `${perSocket.toFixed(0)} bytes of ArrayBuffers per connection`);

  // Pair each accepted LLP with its client by the client's local port.
  const byPort = new Map(clients.map((c, i) => [c.localPort, i]));
  const received = [];
  for (const a of accepted) {
    const i = byPort.get(a.remotePort);
    assert.notEqual(i, undefined);
    received.push(collect(a, BYTES).then((b) => ({ side: 'server', i, b })));
    received.push(collect(clients[i], BYTES).then((b) => ({ side: 'client', i, b })));
    a.write(pattern(i, 1, BYTES));
    clients[i].write(pattern(i, 0, BYTES));
  }
  for (const { side, i, b } of await Promise.all(received)) {
    assert.equal(b.length, BYTES, `${side} ${i}`);
    assert.ok(b.equals(pattern(i, side === 'server' ? 0 : 1, BYTES)), `${side} ${i} received another connection's bytes`);
  }

  // Graceful close from the clients: the servers answer the FIN, every socket closes, and
  // nothing is left lingering (llpsSettled would otherwise wait for its timeout).
  const closed = [...clients, ...accepted].map((l) => once(l.socket, 'close'));
  for (const c of clients) c.end();
  await Promise.all(closed);
  const t0 = performance.now();
  await llpsSettled(5000);
  assert.ok(performance.now() - t0 < 1000, 'closed connections no longer linger');
  srv.close();
});
