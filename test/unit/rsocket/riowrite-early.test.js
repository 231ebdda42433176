// riowrite behind bytes rsend copied ahead (early staging): riowrite cannot go before them, so it
// answers EAGAIN until they are posted, and poll(POLLOUT) must not report the socket writable for
// it meanwhile. (It did: POLLOUT counted the room to copy more bytes ahead, which only rsend can
// use, so a riowrite loop waiting for POLLOUT went round in microtasks without end, and the grant
// that would post the early bytes was never read.) rsend itself may still copy ahead.
import test from 'node:test';
import assert from 'node:assert/strict';
import * as rs from '../../../dist/rsocket/index.js';
import { withRsPair, recvAll, fixed } from '../../lib/rs-pair.js';

const { RS_EAGAIN, POLLIN, POLLOUT, PROT_WRITE, SOL_RDMA, RDMA_IOMAPSIZE, SOL_SOCKET, SO_RCVBUF, SO_SNDBUF } = rs;
const T = { timeout: 30_000 };

// The server maps a target and has a 16 KiB receive buffer (8 KiB halves); the client a 64 KiB send buffer.
const PAIR = {
  listener: [[SOL_RDMA, RDMA_IOMAPSIZE, 1], [SOL_SOCKET, SO_RCVBUF, 8192]],
  client: [[SOL_RDMA, RDMA_IOMAPSIZE, 1], [SOL_SOCKET, SO_SNDBUF, 32768]],
};

/**
 * The server maps a 4 KiB target (the mapping reaches the client with the server's next send);
 * then the client sends 24 KiB while the server reads nothing: more than its 16 KiB window, so
 * the rest is copied ahead. Returns the target and the bytes sent.
 */
async function mappedAndStaged(c, s, fill) {
  const target = Buffer.alloc(4096);
  s.riomap(target, PROT_WRITE, 0);
  assert.equal(s.send(Buffer.from('sync')), 4);
  const got = Buffer.alloc(4);
  while (c.recv(got) === RS_EAGAIN) await c.poll(POLLIN, 1000);
  const data = Buffer.alloc(24 * 1024, fill);
  let taken = 0;
  while (taken < data.length) {
    const n = c.send(data, taken, data.length - taken);
    assert.notEqual(n, RS_EAGAIN, 'the send buffer has room to copy ahead');
    taken += n;
  }
  return { target, data };
}

test('riowrite behind early-staged bytes: EAGAIN and no POLLOUT until they are posted, then the write goes', T, () =>
  withRsPair(PAIR, async ({ c, s }) => {
    const { target, data } = await mappedAndStaged(c, s, 7);
    const w = Buffer.alloc(4096, 9);
    assert.equal(c.riowrite(w, 0, w.length, 0), RS_EAGAIN, 'behind the early bytes');
    assert.equal(c.pollEvents(POLLOUT), 0, 'not writable for riowrite');
    let resolved = false;
    const writable = c.poll(POLLOUT).then((r) => ((resolved = true), r));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(resolved, false, 'poll(POLLOUT) waits while the server reads nothing');

    // The server reads: its grants come back, the early bytes are posted, the socket is writable.
    const all = await recvAll(s, data.length, fixed(4096));
    assert.ok(all.equals(data));
    assert.equal(await writable, POLLOUT);
    let n;
    while ((n = c.riowrite(w, 0, w.length, 0)) === RS_EAGAIN) await c.poll(POLLOUT, 1000);
    assert.equal(n, w.length);
    const t0 = Date.now();
    while (!target.equals(w) && Date.now() - t0 < 5000) {
      s.progress();
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.ok(target.equals(w), 'the riowrite landed in the mapping');
  }));

test('rsend may still copy ahead while riowrite waits for the early bytes', T, () =>
  withRsPair(PAIR, async ({ c, s }) => {
    const { data } = await mappedAndStaged(c, s, 5);
    assert.equal(c.riowrite(Buffer.alloc(64), 0, 64, 0), RS_EAGAIN);
    // An rsend after that riowrite: copied ahead, and POLLOUT is reported for it again.
    assert.equal(c.send(Buffer.alloc(100, 6)), 100);
    assert.equal(c.pollEvents(POLLOUT), POLLOUT);
    const all = await recvAll(s, data.length + 100, fixed(4096));
    assert.equal(all.length, data.length + 100);
  }));
