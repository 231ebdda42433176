// Every posted work request completes exactly once, in posting order.
// Receive side: a Send being placed takes its receive off the queue; when the connection fails
// mid-message, that receive must still complete — with the message's error status when the failing
// FPDU is the Send itself (siw_rdmap_complete), with WR_FLUSH_ERR when the QP is flushed for any
// other reason (siw_rq_flush) — and before the receives still queued behind it.
// Send side: outstanding RDMA Reads (the ORQ), a message handed to TCP and not yet taken by it,
// and the WRs queued behind them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QpState, WcStatus, WcOpcode, CmEventType, WrOpcode, SendFlags, Access } from '../../../../dist/index.js';
import { encodeFpdu, encodeTerminate, RdmapOpcode } from '../../../../dist/wire/index.js';
import { server, rawClient, expectTerminate, teardown, rtr } from '../../../lib/raw-peer.js';
import { until, sleep } from '../../../lib/wait.js';



/** A server (see raw-peer.js) torn down after the test whatever its outcome. */
async function serverFor(t, opts) {
  const s = await server(opts);
  t.after(async () => {
    await s.ready.catch(() => {});
    await teardown(s);
  });
  return s;
}

/** The first segment has been taken in: receive 0 is off the queue (and `left` remain). */
const sendStarted = (s, left) => until(() => s.qp.rqDepth === left, 3000, 'the Send to take its receive');

/** The first segment (not last) of a Send of which `n` bytes arrive. */
const firstSegment = (n, msn = 1) => encodeFpdu({ opcode: RdmapOpcode.SEND, msn, mo: 0, last: false }, Buffer.alloc(n, 0x51));

/** Wait until the QP is in ERR, then a little longer, and return every receive completion. */
async function recvCompletions(s, ms = 3000) {
  await until(() => s.qp.state === QpState.ERR, ms, 'the QP to go to ERR');
  await sleep(50); // anything late (a second completion of the same receive) shows up by now
  return s.child.recvCq.poll(64);
}

/** Receives 0..n-1 each completed exactly once, in posting order, with `statuses`. */
function exactlyOnce(wcs, statuses) {
  assert.deepEqual(wcs.map((w) => w.wrId), statuses.map((_, i) => i), 'each receive once, in order');
  assert.deepEqual(wcs.map((w) => WcStatus[w.status]), statuses.map((s) => WcStatus[s]));
  for (const w of wcs) {
    assert.equal(w.opcode, WcOpcode.RECV);
    if (w.status !== WcStatus.SUCCESS) assert.equal(w.byteLen, 0);
  }
}

test('a Send in progress when the peer closes: its receive is flushed, then the queued ones', async (t) => {
  const s = await serverFor(t, { recvs: 3 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(firstSegment(16));
  await sendStarted(s, 2);
  c.sock.end();
  exactlyOnce(await recvCompletions(s), [WcStatus.WR_FLUSH_ERR, WcStatus.WR_FLUSH_ERR, WcStatus.WR_FLUSH_ERR]);
  const ev = await s.child.channel.getEvent(AbortSignal.timeout(3000));
  assert.equal(ev.event, CmEventType.DISCONNECTED);
  ev.ack();
});

test('a Send in progress when the peer is killed (RST): flushed exactly once', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(firstSegment(8));
  await sendStarted(s, 1);
  c.sock.resetAndDestroy();
  exactlyOnce(await recvCompletions(s), [WcStatus.WR_FLUSH_ERR, WcStatus.WR_FLUSH_ERR]);
});

test('a Send larger than its receive: that receive completes with LOC_LEN_ERR, TERMINATE DDP/untagged/0x02', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.alloc(100, 0x45)));
  await expectTerminate(c, 1, 2, 0x02);
  exactlyOnce(await recvCompletions(s), [WcStatus.LOC_LEN_ERR, WcStatus.WR_FLUSH_ERR]);
  assert.ok(s.region.every((b) => b === 0), 'nothing placed');
});

test('a multi-segment Send that outgrows its receive in a later segment: LOC_LEN_ERR', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(firstSegment(40));
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1, mo: 40 }, Buffer.alloc(40, 0x52)));
  await expectTerminate(c, 1, 2, 0x02);
  exactlyOnce(await recvCompletions(s), [WcStatus.LOC_LEN_ERR, WcStatus.WR_FLUSH_ERR]);
});

test('a Send whose next segment has the wrong MO: the receive fails (GENERAL_ERR), TERMINATE 0x04', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(firstSegment(8));
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1, mo: 12 }, Buffer.alloc(4)));
  await expectTerminate(c, 1, 2, 0x04);
  exactlyOnce(await recvCompletions(s), [WcStatus.GENERAL_ERR, WcStatus.WR_FLUSH_ERR]);
});

test('a bad RDMA Write while a Send is in progress: the Send\'s receive is flushed', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(firstSegment(8));
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: (s.mr.rkey ^ 0x100) >>> 0, to: s.mr.addr }, Buffer.alloc(8)));
  await expectTerminate(c, 1, 1, 0x00);
  exactlyOnce(await recvCompletions(s), [WcStatus.WR_FLUSH_ERR, WcStatus.WR_FLUSH_ERR]);
});

test('the peer\'s TERMINATE while a Send is in progress: flushed exactly once', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(firstSegment(8));
  c.send(encodeTerminate({ layer: 0, etype: 2, ecode: 0xff }, { crc: false, msn: 1 }));
  exactlyOnce(await recvCompletions(s), [WcStatus.WR_FLUSH_ERR, WcStatus.WR_FLUSH_ERR]);
  c.sock.destroy();
});

test('the user moves the QP to ERR while a Send is in progress: flushed exactly once', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(firstSegment(8));
  await sendStarted(s, 1);
  s.qp.modify({ qpState: QpState.ERR });
  exactlyOnce(await recvCompletions(s), [WcStatus.WR_FLUSH_ERR, WcStatus.WR_FLUSH_ERR]);
  // Receives posted in ERR complete at once, once.
  s.qp.postRecv({ wrId: 2, sgList: [{ addr: s.mr.addr, length: 8, lkey: s.mr.lkey }] });
  const late = s.child.recvCq.poll(8);
  assert.deepEqual(late.map((w) => [w.wrId, w.status]), [[2, WcStatus.WR_FLUSH_ERR]]);
  c.sock.destroy();
});

test('a receive buffer deregistered under a Send in progress: LOC_PROT_ERR once, then the rest flushed', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(firstSegment(8));
  await sendStarted(s, 1);
  s.mr.dereg();
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1, mo: 8 }, Buffer.alloc(8)));
  exactlyOnce(await recvCompletions(s), [WcStatus.LOC_PROT_ERR, WcStatus.WR_FLUSH_ERR]);
  c.sock.destroy();
});

test('a complete message, then a partial one, then close: SUCCESS, WR_FLUSH_ERR, WR_FLUSH_ERR', async (t) => {
  const s = await serverFor(t, { recvs: 3 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.from('whole')));
  c.send(firstSegment(8, 2));
  await sendStarted(s, 1);
  c.sock.end();
  const wcs = await recvCompletions(s);
  exactlyOnce(wcs, [WcStatus.SUCCESS, WcStatus.WR_FLUSH_ERR, WcStatus.WR_FLUSH_ERR]);
  assert.equal(wcs[0].byteLen, 5);
});

/** Send completions 0..n-1, each exactly once and in order, once `n` have come (and nothing after). */
async function sendCompletions(s, n, ms = 5000) {
  const out = [];
  await until(() => {
    out.push(...s.child.sendCq.poll(16));
    return out.length >= n;
  }, ms, `${n} send completions`);
  await sleep(50);
  out.push(...s.child.sendCq.poll(16));
  assert.deepEqual(out.map((w) => w.wrId), [...Array(n).keys()], 'each send WR once, in order');
  return out;
}

test('RDMA Reads the peer never answers (ORQ full, one more queued) and a Send: all flushed once, in order', async (t) => {
  const s = await serverFor(t, { recvs: 0 });
  const c = await rawClient(s.port);
  assert.equal(c.reply.ord, 2, 'our ORD');
  c.send(rtr());
  await s.ready;
  const read = (wrId) => ({ wrId, opcode: WrOpcode.RDMA_READ, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: s.mr.addr, length: 16, lkey: s.mr.lkey }], rdma: { remoteAddr: 0x1000, rkey: 0x4242 } });
  s.qp.postSend([read(0), read(1), read(2), { wrId: 3, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: s.mr.addr, length: 4, lkey: s.mr.lkey }] }]);
  // Two Read Requests on the wire (ORD 2), the third Read and the Send wait in the SQ.
  await c.until(() => c.after().length >= 2 * 32);
  assert.equal(s.qp.sqDepth, 2);
  assert.equal(s.child.sendCq.pending, 0);
  c.sock.end();
  const wcs = await sendCompletions(s, 4);
  assert.ok(wcs.every((w) => w.status === WcStatus.WR_FLUSH_ERR));
  assert.deepEqual(wcs.map((w) => w.opcode), [WcOpcode.RDMA_READ, WcOpcode.RDMA_READ, WcOpcode.RDMA_READ, WcOpcode.SEND]);
});

/** A server with a large MR for zero-copy messages, its peer connected and not reading. */
async function stalledPeer(t) {
  const s = await serverFor(t, { recvs: 0 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.sock.pause(); // the kernel buffers fill, the big message stays in our socket's hands
  const big = Buffer.alloc(32 * 1024 * 1024, 0x61);
  const mr = s.child.pd.regMr(big, Access.LOCAL_WRITE);
  const sge = (len) => [{ addr: mr.addr, length: len, lkey: mr.lkey }];
  return { s, c, mr, sge };
}

test('a large Send handed to TCP when the peer is killed, two WRs queued behind it: each completes once, in order', async (t) => {
  const { s, c, sge } = await stalledPeer(t);
  s.qp.postSend([
    { wrId: 0, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sge(32 * 1024 * 1024) },
    { wrId: 1, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sge(100) },
    { wrId: 2, opcode: WrOpcode.RDMA_WRITE, sendFlags: 0, sgList: sge(100), rdma: { remoteAddr: 0, rkey: 0x77 } },
  ]);
  await sleep(50);
  assert.equal(s.child.sendCq.pending, 0, 'nothing completes while the peer does not read');
  c.sock.resetAndDestroy();
  const wcs = await sendCompletions(s, 3);
  // The large one never reached the peer: it must not report success.
  assert.deepEqual(wcs.map((w) => WcStatus[w.status]), ['WR_FLUSH_ERR', 'WR_FLUSH_ERR', 'WR_FLUSH_ERR']);
});

test('a QP destroyed with a large Send in flight produces no completion afterwards', async (t) => {
  const { s, sge } = await stalledPeer(t);
  s.qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sge(32 * 1024 * 1024) });
  await sleep(30);
  s.qp.destroy();
  await sleep(100);
  assert.equal(s.child.sendCq.pending, 0);
});

test('a Send with Invalidate of an STag that cannot be invalidated: REM_INV_REQ_ERR, TERMINATE RDMAP/remote op/0x09', async (t) => {
  const s = await serverFor(t, { recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND_INV, invStag: 0, msn: 1 }, Buffer.alloc(5, 0x49)));
  await expectTerminate(c, 0, 2, 0x09);
  exactlyOnce(await recvCompletions(s), [WcStatus.REM_INV_REQ_ERR, WcStatus.WR_FLUSH_ERR]);
});
