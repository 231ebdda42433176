// riowriteBlocking: riowrite on a blocking rsocket. Chunks of RDMACM_RS_ZC_MIN (64 KiB) bytes or
// more are RDMA-written straight from the caller's memory (a memory region over its ArrayBuffer,
// kept in a per-socket cache of 4) and the call resolves once their WRITEs have completed; smaller
// ones are copied into the send buffer as riowrite copies them. Checked here: the bytes that land
// in the peer's mapping (sizes around the threshold, offsets inside larger buffers, the source
// changed right after each call: the peer must see the old contents); the same bytes handed to
// TCP as with the copying riowrite; the MR cache's bound and its cleanup on close; a connection
// that fails or is closed during a write; and the nonblocking riowrite still copying.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import * as rs from '../../../dist/rsocket/index.js';
import { WrOpcode } from '../../../dist/verbs/index.js';
import { withRsPair } from '../lib/rs-pair.js';

const { RS_EAGAIN, POLLIN, POLLOUT, PROT_WRITE, SOL_RDMA, RDMA_IOMAPSIZE, SOL_SOCKET, SO_SNDBUF } = rs;
const KiB = 1024;
const MiB = 1024 * KiB;
const ZC_MIN = 64 * KiB;
const MAP = 4 * MiB;
const OPTS = { listener: [[SOL_RDMA, RDMA_IOMAPSIZE, 1]], client: [[SOL_RDMA, RDMA_IOMAPSIZE, 1], [SOL_SOCKET, SO_SNDBUF, MiB / 2]] };

/** Map `target` on the server and let the client learn of it (the entry goes before a send). */
async function mapped(c, s, target) {
  s.riomap(target, PROT_WRITE, 0);
  while (s.send(Buffer.from('m')) === RS_EAGAIN) await s.poll(POLLOUT, 1000);
  const got = Buffer.alloc(1);
  while (c.recv(got) === RS_EAGAIN) await c.poll(POLLIN, 1000);
}

/**
 * One byte from the client, received by the server: every RDMA WRITE posted before it has been
 * placed (they travel ahead of it on the same connection).
 */
async function sync(c, s) {
  while (c.send(Buffer.from('s')) === RS_EAGAIN) await c.poll(POLLOUT, 1000);
  const got = Buffer.alloc(1);
  for (;;) {
    const n = s.recv(got);
    if (n === 1) return;
    assert.equal(n, RS_EAGAIN, 'the sync byte');
    await s.poll(POLLIN, 5000);
  }
}

/** Record the RDMA WRITEs `c` posts: `{ len, lkey }` each. */
function recordWrites(c) {
  const writes = [];
  const qp = c.qp;
  const orig = qp.postSend.bind(qp);
  qp.postSend = (list) => {
    for (const wr of Array.isArray(list) ? list : [list]) {
      if (wr.opcode === WrOpcode.RDMA_WRITE) writes.push({ len: wr.sgList.reduce((n, g) => n + g.length, 0), lkey: wr.sgList[0]?.lkey });
    }
    return orig(list);
  };
  return writes;
}

/** The MRs registered through `c`'s protection domain from now on. */
function recordMrs(c) {
  const mrs = [];
  const pd = c._id.pd;
  const orig = pd.regMr.bind(pd);
  pd.regMr = (...a) => {
    const mr = orig(...a);
    mrs.push(mr);
    return mr;
  };
  return mrs;
}

test('blocking riowrite from the caller memory: byte-exact around the threshold, at offsets, the source changed right after return', { timeout: 60_000 }, () =>
  withRsPair(OPTS, async ({ c, s }) => {
    const target = Buffer.alloc(MAP);
    await mapped(c, s, target);
    const writes = recordWrites(c);
    const expect = Buffer.alloc(MAP);
    const sizes = [ZC_MIN - 1, ZC_MIN, ZC_MIN + 1, ZC_MIN + 3, 2 * ZC_MIN - 1, MiB, MiB + 1, 3 * MiB + 5];
    for (let i = 0; i < 12; i++) sizes.push(ZC_MIN - 64 + randomInt(128), randomInt(1, MAP));
    for (const size of sizes) {
      // The source: `size` bytes at a random offset inside a larger buffer; the target offset random.
      const big = randomBytes(size + 8192);
      const at = randomInt(0, 8192);
      const src = big.subarray(at, at + size);
      const to = randomInt(0, MAP - size + 1);
      const before = writes.length;
      const n = await c.riowriteBlocking(src, 0, size, to);
      assert.equal(n, size, `all ${size} bytes written`);
      src.copy(expect, to);
      // Changed at once: only what the call wrote may reach the peer.
      big.fill(0xee);
      const posted = writes.slice(before);
      assert.equal(posted.reduce((k, w) => k + w.len, 0), size, `${size}: WRITEs of ${size} bytes in all`);
      for (const w of posted) assert.ok(w.len <= MiB, `${size}: a ${w.len}-byte WRITE`);
      if (size >= ZC_MIN) assert.ok(c.zcMrCount >= 1 && c.zcMrCount <= 4, `${c.zcMrCount} MRs over caller memory`);
      await sync(c, s);
      assert.ok(target.equals(expect), `${size} bytes at ${to}: the peer holds exactly the bytes of the call`);
    }
  }));

test('a peer that reads late: each blocking riowrite returns only once TCP holds its bytes, not the caller buffer', { timeout: 60_000 }, () =>
  withRsPair(OPTS, async ({ c, s }) => {
    const target = Buffer.alloc(16 * MiB);
    await mapped(c, s, target);
    // The server reads nothing for a while: the first calls' WRITEs wait in the socket, which
    // still refers to the caller's memory for what the kernel has not taken.
    const sock = s.qp.llp.socket;
    sock.pause();
    const resume = setTimeout(() => sock.resume(), 300);
    const src = Buffer.alloc(4 * MiB);
    const expect = [];
    for (let i = 0; i < 4; i++) {
      randomBytes(src.length).copy(src);
      expect.push(Buffer.from(src));
      assert.equal(await c.riowriteBlocking(src, 0, src.length, i * src.length), src.length);
    }
    src.fill(0xee);
    clearTimeout(resume);
    sock.resume();
    await sync(c, s);
    assert.ok(target.equals(Buffer.concat(expect)), 'every call delivered the bytes it was given');
  }));

test('blocking riowrite hands TCP the same bytes as the copying riowrite (the same WRITEs, sizes, offsets)', { timeout: 60_000 }, () =>
  withRsPair(OPTS, async ({ c, s }) => {
    const target = Buffer.alloc(MAP);
    await mapped(c, s, target);
    const sock = c.qp.llp.socket;
    const orig = sock.write;
    let capture = null;
    sock.write = function (chunk, ...rest) {
      if (capture) capture.push(Buffer.from(chunk));
      return orig.call(this, chunk, ...rest);
    };
    const cases = [];
    for (const size of [100, 4096, ZC_MIN - 1, ZC_MIN, 200_003, MiB, MiB + 3, 3 * MiB]) cases.push({ size, to: randomInt(0, MAP - size + 1), data: randomBytes(size) });
    const streams = {};
    const writes = recordWrites(c);
    const sizes = {};
    for (const mode of ['copy', 'zc']) {
      capture = [];
      const before = writes.length;
      for (const { size, to, data } of cases) {
        const src = Buffer.from(data);
        if (mode === 'copy') {
          for (let o = 0; o < size; ) {
            const n = c.riowrite(src, o, size - o, to + o);
            if (n === RS_EAGAIN) await c.poll(POLLOUT, 5000);
            else if (n > 0) o += n;
            else assert.fail(`riowrite returned ${n}`);
          }
        } else assert.equal(await c.riowriteBlocking(src, 0, size, to), size);
        // The next write starts with an empty send buffer and no write in flight, in both modes
        // (waited for without sending anything: only the WRITEs of the calls are captured).
        const t0 = Date.now();
        while (!target.subarray(to, to + size).equals(data) && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 2));
        assert.ok(target.subarray(to, to + size).equals(data), `${mode} ${size}: placed`);
        while (c.pollEvents(POLLOUT) === 0) await c.poll(POLLOUT, 5000);
        for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      }
      streams[mode] = Buffer.concat(capture);
      sizes[mode] = writes.slice(before).map((w) => w.len);
    }
    sock.write = orig;
    assert.deepEqual(sizes.zc, sizes.copy, 'the same RDMA WRITE sizes');
    assert.ok(streams.copy.length > cases.reduce((k, x) => k + x.size, 0), 'payload and FPDU framing captured');
    assert.ok(streams.zc.equals(streams.copy), 'byte for byte the same FPDUs');
  }));

test('the MR cache: at most 4 over caller memory, the least recently used deregistered, all of them on close', { timeout: 60_000 }, async () => {
  let mrs;
  let c0;
  await withRsPair(OPTS, async ({ c, s }) => {
    c0 = c;
    const target = Buffer.alloc(MAP);
    await mapped(c, s, target);
    mrs = recordMrs(c);
    const bufs = Array.from({ length: 6 }, () => randomBytes(ZC_MIN * 2));
    for (let i = 0; i < bufs.length; i++) {
      assert.equal(await c.riowriteBlocking(bufs[i], 0, bufs[i].length, i * ZC_MIN * 2), bufs[i].length);
      assert.equal(c.zcMrCount, Math.min(i + 1, 4));
    }
    assert.equal(mrs.length, 6, 'one registration per buffer');
    assert.deepEqual(mrs.map((m) => m.registered), [false, false, true, true, true, true], 'the two oldest evicted and deregistered');
    assert.ok(mrs.every((m) => m.access === 0), 'local read access only: the peer cannot reach them');
    // A buffer in the cache is used again without a registration; using it makes it the newest.
    assert.equal(await c.riowriteBlocking(bufs[2], 0, ZC_MIN, 0), ZC_MIN);
    assert.equal(mrs.length, 6);
    assert.equal(await c.riowriteBlocking(bufs[0], 0, ZC_MIN, 0), ZC_MIN);
    assert.equal(mrs.length, 7);
    assert.deepEqual(mrs.map((m) => m.registered), [false, false, true, false, true, true, true], 'the least recently used (buffer 3) went');
    // A small write copies, as riowrite: no registration.
    assert.equal(await c.riowriteBlocking(randomBytes(ZC_MIN - 1), 0, ZC_MIN - 1, 0), ZC_MIN - 1);
    assert.equal(mrs.length, 7);
    await sync(c, s);
  });
  assert.ok(c0.isClosed);
  assert.equal(c0.zcMrCount, 0);
  assert.ok(mrs.every((m) => !m.registered), 'no MR outlives its socket');
});

test('the nonblocking riowrite still copies: no MR over the caller memory, the source free at once', { timeout: 30_000 }, () =>
  withRsPair(OPTS, async ({ c, s }) => {
    const target = Buffer.alloc(MAP);
    await mapped(c, s, target);
    const mrs = recordMrs(c);
    const src = randomBytes(512 * KiB);
    const want = Buffer.from(src);
    assert.equal(c.riowrite(src, 0, src.length, 0), src.length);
    src.fill(0);
    await sync(c, s);
    assert.ok(target.subarray(0, want.length).equals(want));
    assert.equal(mrs.length, 0);
    assert.equal(c.zcMrCount, 0);
  }));

/**
 * A blocking riowrite of 32 MiB into a peer that stops reading: it waits with WRITEs outstanding
 * until `breakIt` fails the connection. Resolves with what the call settled with.
 */
async function interrupted(c, s, breakIt) {
  const target = Buffer.alloc(MAP);
  await mapped(c, s, target);
  // The server's socket reads no more: TCP's buffers fill and the WRITEs stay outstanding.
  s.qp.llp.socket.pause();
  const src = randomBytes(32 * MiB);
  const writes = recordWrites(c);
  let settled = null;
  const p = (async () => {
    let done = 0;
    for (;;) {
      // Each call within the 4 MiB mapping: writes its bytes or fails.
      const n = await c.riowriteBlocking(src, done, Math.min(MAP, src.length - done), 0);
      done += n;
      if (n === 0 || done === src.length) return { done };
    }
  })().then(
    (r) => (settled = r),
    (e) => (settled = { error: e }),
  );
  const t0 = Date.now();
  while (writes.length === 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(settled, null, 'still waiting for TCP');
  assert.ok(c.zcMrCount > 0);
  await breakIt();
  const t1 = Date.now();
  while (settled === null && Date.now() - t1 < 10_000) await new Promise((r) => setTimeout(r, 5));
  assert.ok(settled !== null, 'settled after the failure');
  await p;
  return settled;
}

test('the peer gone during a blocking riowrite: it settles with the error the copying riowrite gives', { timeout: 60_000 }, () =>
  withRsPair(OPTS, async ({ c, s }) => {
    const r = await interrupted(c, s, () => s.destroy());
    // Either some bytes (those whose WRITEs completed) or, with none, the socket's error.
    if ('error' in r) {
      let next;
      try {
        c.riowrite(Buffer.alloc(16), 0, 16, 0);
      } catch (e) {
        next = e;
      }
      assert.ok(next, 'the nonblocking riowrite fails too');
      assert.equal(r.error.code, next.code, 'the same errno');
      assert.ok(['ECONNRESET', 'EIO'].includes(r.error.code), r.error.code);
    } else {
      assert.ok(r.done < 32 * MiB, 'not everything written');
      assert.throws(() => c.riowrite(Buffer.alloc(16), 0, 16, 0), (e) => ['ECONNRESET', 'EIO'].includes(e.code));
      await assert.rejects(c.riowriteBlocking(Buffer.alloc(ZC_MIN), 0, ZC_MIN, 0), (e) => ['ECONNRESET', 'EIO'].includes(e.code));
    }
  }));

test('the socket closed during a blocking riowrite: it settles, and no MR over the caller memory is left', { timeout: 60_000 }, () =>
  withRsPair(OPTS, async ({ c, s }) => {
    const mrs = recordMrs(c);
    const r = await interrupted(c, s, () => c.destroy());
    if ('error' in r) assert.ok(['ECONNRESET', 'EIO'].includes(r.error.code), r.error.code);
    else assert.ok(r.done < 32 * MiB, 'not everything written');
    assert.equal(c.zcMrCount, 0);
    const own = mrs.filter((m) => m.access === 0);
    assert.ok(own.length > 0 && own.every((m) => !m.registered), 'deregistered on close');
  }));
