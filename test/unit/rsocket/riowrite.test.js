// riowrite at the end of the peer's mapping: a peer mapping covers [offset, offset + length), so a
// write longer than the mapping places the bytes that fit, returns their count, and the next call
// (at the mapping's end) returns 0 — no mapping covers it. It must not go on with the used-up
// mapping: that posted zero-length RDMA WRITEs in a loop that, with its completions arriving at
// once, never ended, and the event loop never ran again (the connection's end was never seen).
// (When completions lag, the loop ends once the send queue is full: the socket is then not
// writable right after one 64-byte write.) The exchange runs in a worker so that a loop without
// end fails the test instead of hanging it.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';

const RSOCKET = new URL('../../../dist/rsocket/index.js', import.meta.url).href;

const BODY = `
const { parentPort } = await import('node:worker_threads');
const { RsConn, RsListener, RS_EAGAIN, POLLIN, POLLOUT, PROT_WRITE, SOL_RDMA, RDMA_IOMAPSIZE } = await import(${JSON.stringify(RSOCKET)});
const MAP = 64;
const l = new RsListener();
l.setsockopt(SOL_RDMA, RDMA_IOMAPSIZE, 1);
l.bind({ address: '127.0.0.1', port: 0 });
await l.listen(1);
const accepted = l.accept();
const c = new RsConn();
c.setsockopt(SOL_RDMA, RDMA_IOMAPSIZE, 1);
await c.connect({ address: '127.0.0.1', port: l.localAddress.port });
const s = await accepted;
const target = Buffer.alloc(MAP);
s.riomap(target, PROT_WRITE, 0);
// The mapping goes to the peer before the next send.
let n;
while ((n = s.send(Buffer.from('sync'))) === RS_EAGAIN) await s.poll(0, 10);
const got = Buffer.alloc(4);
while (c.recv(got) === RS_EAGAIN) await c.poll(POLLIN, 1000);
const src = Buffer.alloc(100_000);
for (let i = 0; i < src.length; i++) src[i] = (i * 7 + 1) & 0xff;
let first;
while ((first = c.riowrite(src, 0, src.length, 0)) === RS_EAGAIN) await c.poll(0, 10);
// One write of 64 bytes was posted: the send queue still has room, before any completion.
const writable = c.pollEvents(POLLOUT) === POLLOUT;
const second = c.riowrite(src, MAP, src.length - MAP, MAP);
// Let the written bytes arrive.
const t0 = Date.now();
while (!target.equals(src.subarray(0, MAP)) && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 5));
parentPort.postMessage({ first, writable, second, placed: target.equals(src.subarray(0, MAP)) });
await Promise.race([Promise.all([c.close(), s.close(), l.close()]), new Promise((r) => setTimeout(r, 2000))]);
`;

test('riowrite longer than the peer mapping: the bytes that fit, then 0 at its end', { timeout: 30_000 }, async () => {
  const w = new Worker(new URL(`data:text/javascript,${encodeURIComponent(BODY)}`));
  let timer;
  try {
    const r = await Promise.race([
      new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }),
      new Promise((resolve) => (timer = setTimeout(() => resolve(null), 10_000))),
    ]);
    assert.ok(r !== null, 'riowrite did not return within 10 s');
    assert.deepEqual(r, { first: 64, writable: true, second: 0, placed: true });
  } finally {
    clearTimeout(timer);
    await w.terminate();
  }
});
