// A hostile or broken peer against a real RC QP of the soft RoCE device: a UDP socket at 127.0.0.2
// on the RoCE port sends hand-built packets (the wire codecs) to an RC QP on rxe_lo that is in
// RTS towards it, through the device's sockets and receive path. Checks the NAK each bad request
// gets on the wire (syndrome and PSN, as IBTA 9.7.5 / rxe_resp.c prescribe), the drop counters
// for what is dropped, that no byte outside what a valid request may touch changes, and that a
// second connection on the same device (two QPs talking over 127.0.0.1) keeps working.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { PORT, lib, wire, roce, loDevice, v4GidIndex, pollN, until } from '../../../lib/roce.js';
import { wiredRcPair, destroyPairs, WrOpcode, WcStatus, SendFlags } from '../../../lib/roce-rc.js';
import { arrivals } from '../../../lib/arrivals.js';

const { Access, QpState, QpType, MwType, MwState, incRkey } = lib;
const { IbOpcode, AethSyndrome, encodeRocePacket, decodeRocePacket } = wire;
const SIG = SendFlags.SIGNALED;
const MR_ALL = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC;

const LOCAL = '127.0.0.1';
const PEER = '127.0.0.2';
const V4 = (s) => Uint8Array.from(s.split('.').map(Number));
/** The peer's QP number (made up: it only has to be what the target QP sends to). */
const PEER_QPN = 0x4242;
/** The PSN the target expects first, and the one it sends first. */
const RQ_PSN = 0x500;
const SQ_PSN = 0xfffffe;
const MTU = 1024;

// -- the peer -----------------------------------------------------------------------------------

let sock;
const box = arrivals((items) => `got ${items.map((s) => s.opcode).join(',')}`);
const inbox = box.items;
const OUT = { family: 4, src: V4(PEER), dst: V4(LOCAL), sport: PORT, dport: PORT };

test.before(async () => {
  sock = dgram.createSocket('udp4');
  sock.bind(PORT, PEER);
  await once(sock, 'listening');
  sock.on('message', (msg, rinfo) => {
    const d = decodeRocePacket(msg, { net: { family: 4, src: V4(rinfo.address), dst: V4(PEER), sport: rinfo.port, dport: PORT } });
    if (d.ok) box.push(d.spec);
  });
});
test.after(() => sock.close());
test.afterEach(() => {
  for (const f of cleanups.splice(0)) f();
  destroyPairs();
  inbox.length = 0;
});

function send(spec) {
  sock.send(encodeRocePacket(spec, OUT), PORT, LOCAL);
}
function sendRaw(bytes) {
  sock.send(bytes, PORT, LOCAL);
}

/** The next packet the peer got matching `pred` (taken out of the inbox). */
const next = (pred, ms = 2000, what = 'a packet') => box.next(pred, ms, what);
const ackOf = (s) => s.opcode === IbOpcode.RC_ACKNOWLEDGE;
const nak = () => next(ackOf, 2000, 'an ACK/NAK');
const quiet = (ms = 150) => new Promise((r) => setTimeout(r, ms));

// -- the target QP ------------------------------------------------------------------------------

const cleanups = [];

/**
 * An RC QP on rxe_lo in RTS towards the peer (QP `PEER_QPN` at 127.0.0.2), with `access` as its
 * remote access flags, IRD 4, a 1024-byte path MTU; `region` registered with `mrAccess` inside a
 * larger buffer whose guard bytes on both sides must never change. With `window` ({ type, offset,
 * length, access, invalidate }), a memory window `mw` bound to `[offset, offset + length)` of the
 * region through the QP (unsignaled), and for `invalidate` freed again by a LOCAL_INV.
 */
function target({ access = Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC, mrAccess = MR_ALL, size = 64, window = null } = {}) {
  const ctx = loDevice().open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(64);
  const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 16, maxRecvWr: 16, maxSendSge: 2, maxRecvSge: 2 } });
  const whole = Buffer.alloc(size + 128, 0xee);
  const region = whole.subarray(64, 64 + size);
  region.fill(0x5a);
  const mr = pd.regMr(region, mrAccess);
  const sgid = v4GidIndex(ctx);
  const dgid = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...V4(PEER)]);
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: access });
  qp.modify({
    qpState: QpState.RTR,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid, flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } },
    pathMtu: 3,
    destQpNum: PEER_QPN,
    rqPsn: RQ_PSN,
    maxDestRdAtomic: 4,
    minRnrTimer: 1,
  });
  qp.modify({ qpState: QpState.RTS, sqPsn: SQ_PSN, timeout: 14, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 4 });
  cleanups.push(() => {
    try {
      qp.destroy();
    } catch {
      // destroyed by the test
    }
  });
  const mw = window === null ? null : bindWindow(pd, qp, mr, window);
  const untouched = () => whole.subarray(0, 64).every((x) => x === 0xee) && whole.subarray(64 + size).every((x) => x === 0xee);
  return { ctx, pd, cq, qp, mr, mw, region, untouched };
}

/** The window of {@link target}: bound (local operations run at once on an idle QP in RTS). */
function bindWindow(pd, qp, mr, { type = MwType.TYPE_1, offset, length, access, invalidate = false }) {
  const mw = pd.allocMw(type);
  const bindInfo = { mr, addr: mr.addr + offset, length, mwAccessFlags: access };
  if (type === MwType.TYPE_1) qp.bindMw(mw, { wrId: 'bind', bindInfo });
  else {
    const rkey = incRkey(mw.rkey);
    qp.postSend({ wrId: 'bind', opcode: WrOpcode.BIND_MW, sgList: [], bindMw: { mw, rkey, bindInfo } });
    mw.rkey = rkey;
    if (invalidate) qp.postSend({ wrId: 'inv', opcode: WrOpcode.LOCAL_INV, sgList: [], invalidateRkey: rkey });
  }
  assert.equal(mw.state, invalidate ? MwState.FREE : MwState.VALID);
  return mw;
}

/** Counter deltas since `before`. */
function delta(before) {
  const now = roce.counters('rxe_lo');
  const out = {};
  for (const k of Object.keys(now)) if (now[k] !== before[k]) out[k] = now[k] - before[k];
  return out;
}

/** The second connection: a pair of QPs over 127.0.0.1 still moves a SEND, a WRITE and a READ. */
async function secondConnectionWorks() {
  const { pd, a, b, cqA, cqB } = wiredRcPair({ pathMtu: 3 });
  const mem = Buffer.alloc(4096);
  const mr = pd.regMr(mem, MR_ALL);
  Buffer.from('second connection').copy(mem, 0);
  b.postRecv({ wrId: 10, sgList: [{ addr: mr.addr + 1024, length: 64, lkey: mr.lkey }] });
  a.postSend([
    { wrId: 1, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: mr.addr, length: 17, lkey: mr.lkey }] },
    { wrId: 2, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: [{ addr: mr.addr, length: 17, lkey: mr.lkey }], rdma: { remoteAddr: mr.addr + 2048, rkey: mr.rkey } },
    { wrId: 3, opcode: WrOpcode.RDMA_READ, sendFlags: SIG, sgList: [{ addr: mr.addr + 3072, length: 17, lkey: mr.lkey }], rdma: { remoteAddr: mr.addr + 2048, rkey: mr.rkey } },
  ]);
  const sa = await pollN(cqA, 3);
  const rb = await pollN(cqB, 1);
  assert.deepEqual(sa.map((w) => [w.wrId, w.status]), [
    [1, WcStatus.SUCCESS],
    [2, WcStatus.SUCCESS],
    [3, WcStatus.SUCCESS],
  ]);
  assert.deepEqual(rb.map((w) => [w.wrId, w.status, w.byteLen]), [[10, WcStatus.SUCCESS, 17]]);
  for (const off of [1024, 2048, 3072]) assert.equal(mem.subarray(off, off + 17).toString(), 'second connection');
}

// -- requests the responder refuses with a NAK --------------------------------------------------

for (const [name, opts, build, syndrome, counter] of [
  [
    'an RDMA READ beyond the end of the region',
    {},
    (t) => ({ opcode: IbOpcode.RC_RDMA_READ_REQUEST, reth: { va: t.mr.addr + 60, rkey: t.mr.rkey, len: 8 } }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'an RDMA READ of a region registered without REMOTE_READ',
    { mrAccess: Access.LOCAL_WRITE | Access.REMOTE_WRITE },
    (t) => ({ opcode: IbOpcode.RC_RDMA_READ_REQUEST, reth: { va: t.mr.addr, rkey: t.mr.rkey, len: 8 } }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'an RDMA READ on a QP without remote read access',
    { access: Access.REMOTE_WRITE },
    (t) => ({ opcode: IbOpcode.RC_RDMA_READ_REQUEST, reth: { va: t.mr.addr, rkey: t.mr.rkey, len: 8 } }),
    AethSyndrome.NAK_INVALID_REQUEST,
    null,
  ],
  [
    'an RDMA WRITE with a bad rkey',
    {},
    (t) => ({ opcode: IbOpcode.RC_RDMA_WRITE_ONLY, reth: { va: t.mr.addr, rkey: (t.mr.rkey ^ 0x5500) >>> 0, len: 8 }, payload: Buffer.alloc(8, 0x11) }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'an RDMA WRITE running past the end of the region',
    {},
    (t) => ({ opcode: IbOpcode.RC_RDMA_WRITE_ONLY, reth: { va: t.mr.addr + 32, rkey: t.mr.rkey, len: 64 }, payload: Buffer.alloc(64, 0x11) }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'an RDMA WRITE before the start of the region',
    {},
    (t) => ({ opcode: IbOpcode.RC_RDMA_WRITE_ONLY, reth: { va: t.mr.addr - 8, rkey: t.mr.rkey, len: 16 }, payload: Buffer.alloc(16, 0x11) }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'a fetch-and-add on a misaligned address',
    {},
    (t) => ({ opcode: IbOpcode.RC_FETCH_ADD, atmeth: { va: t.mr.addr + 4, rkey: t.mr.rkey, swapAdd: 1n, compare: 0n } }),
    AethSyndrome.NAK_INVALID_REQUEST,
    null,
  ],
  [
    'a compare-and-swap with a bad rkey',
    {},
    (t) => ({ opcode: IbOpcode.RC_COMPARE_SWAP, atmeth: { va: t.mr.addr, rkey: (t.mr.rkey + 0x100) >>> 0, swapAdd: 1n, compare: 0n } }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'an atomic on a region registered without REMOTE_ATOMIC',
    { mrAccess: Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ },
    (t) => ({ opcode: IbOpcode.RC_FETCH_ADD, atmeth: { va: t.mr.addr, rkey: t.mr.rkey, swapAdd: 1n, compare: 0n } }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'an RDMA WRITE through a memory window, past its end (inside its region)',
    { mrAccess: MR_ALL | Access.MW_BIND, window: { offset: 16, length: 32, access: Access.REMOTE_WRITE } },
    (t) => ({ opcode: IbOpcode.RC_RDMA_WRITE_ONLY, reth: { va: t.mr.addr + 40, rkey: t.mw.rkey, len: 16 }, payload: Buffer.alloc(16, 0x11) }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'an RDMA READ through a write-only memory window',
    { mrAccess: MR_ALL | Access.MW_BIND, window: { offset: 16, length: 32, access: Access.REMOTE_WRITE } },
    (t) => ({ opcode: IbOpcode.RC_RDMA_READ_REQUEST, reth: { va: t.mr.addr + 16, rkey: t.mw.rkey, len: 8 } }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'an RDMA WRITE through an invalidated type 2 window',
    { mrAccess: MR_ALL | Access.MW_BIND, window: { type: MwType.TYPE_2, offset: 0, length: 64, access: Access.REMOTE_WRITE, invalidate: true } },
    (t) => ({ opcode: IbOpcode.RC_RDMA_WRITE_ONLY, reth: { va: t.mr.addr, rkey: t.mw.rkey, len: 8 }, payload: Buffer.alloc(8, 0x11) }),
    AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
    'rkey_violation_err',
  ],
  [
    'a SEND ONLY longer than the path MTU',
    {},
    () => ({ opcode: IbOpcode.RC_SEND_ONLY, payload: Buffer.alloc(MTU + 4) }),
    AethSyndrome.NAK_INVALID_REQUEST,
    null,
  ],
  [
    'an RDMA WRITE MIDDLE without its FIRST',
    {},
    () => ({ opcode: IbOpcode.RC_RDMA_WRITE_MIDDLE, payload: Buffer.alloc(MTU, 0x11) }),
    AethSyndrome.NAK_INVALID_REQUEST,
    null,
  ],
]) {
  test(`${name}: NAK ${syndrome.toString(16)} at its PSN, the QP to ERR, memory untouched, the next request dropped; another connection unaffected`, async () => {
    const t = target(opts);
    t.qp.postRecv({ wrId: 77, sgList: [{ addr: t.mr.addr, length: 64, lkey: t.mr.lkey }] });
    const before = roce.counters('rxe_lo');
    send({ destQp: t.qp.qpNum, psn: RQ_PSN, ackReq: true, ...build(t) });
    const n = await nak();
    assert.deepEqual([n.destQp, n.psn, n.aeth.syndrome], [PEER_QPN, RQ_PSN, syndrome]);
    await until(() => t.qp.state === QpState.ERR, 1000);
    assert.equal(t.qp.state, QpState.ERR, 'a class C error moves the responder\'s QP to ERR');
    const wcs = await pollN(t.cq, 1);
    assert.deepEqual(wcs.map((w) => [w.wrId, w.status]), [[77, WcStatus.WR_FLUSH_ERR]]);
    assert.ok(t.region.every((x) => x === 0x5a), 'the region is untouched');
    assert.ok(t.untouched(), 'the bytes around the region are untouched');
    // A request to the QP in ERR is dropped (counted), not answered.
    send({ opcode: IbOpcode.RC_SEND_ONLY, destQp: t.qp.qpNum, psn: RQ_PSN + 1, ackReq: true, payload: Buffer.from('late') });
    await until(() => (delta(before).rcvd_qp_state_drop ?? 0) === 1, 1000);
    await quiet();
    const d = delta(before);
    assert.equal(d.rcvd_qp_state_drop, 1);
    if (counter !== null) assert.equal(d[counter], 1);
    assert.equal(inbox.filter(ackOf).length, 0, 'one NAK only');
    await secondConnectionWorks();
  });
}

test('duplicates: a forged retry of a READ (outside its range or another rkey) gets nothing; a true one, or one for part of its bytes, is replayed; a retried atomic returns the saved value without running again; after the region is gone, a retried READ gets a NAK and no bytes', async () => {
  const t = target();
  assert.equal(t.mr.addr % 8, 0);
  const word = t.region.subarray(8, 16);
  word.writeBigUInt64LE(1000n);
  const read = { opcode: IbOpcode.RC_RDMA_READ_REQUEST, destQp: t.qp.qpNum, psn: RQ_PSN, ackReq: true, reth: { va: t.mr.addr + 16, rkey: t.mr.rkey, len: 32 } };
  send(read);
  const r1 = await next((s) => s.opcode === IbOpcode.RC_RDMA_READ_RESPONSE_ONLY, 2000, 'the READ response');
  assert.deepEqual([r1.psn, Buffer.from(r1.payload)], [RQ_PSN, t.region.subarray(16, 48)]);
  const faa = { opcode: IbOpcode.RC_FETCH_ADD, destQp: t.qp.qpNum, psn: RQ_PSN + 1, ackReq: true, atmeth: { va: t.mr.addr + 8, rkey: t.mr.rkey, swapAdd: 5n, compare: 0n } };
  send(faa);
  const a1 = await next((s) => s.opcode === IbOpcode.RC_ATOMIC_ACKNOWLEDGE, 2000, 'the atomic ACK');
  assert.deepEqual([a1.psn, a1.atmack], [RQ_PSN + 1, 1000n]);
  assert.equal(word.readBigUInt64LE(), 1005n);
  // A "retry" of the READ naming bytes outside the original's range, or another rkey: no response at all.
  send({ ...read, reth: { va: t.mr.addr - 64, rkey: t.mr.rkey, len: 128 } });
  send({ ...read, reth: { va: t.mr.addr + 16, rkey: t.mr.rkey, len: 4096 } });
  send({ ...read, reth: { va: t.mr.addr + 8, rkey: t.mr.rkey, len: 16 } });
  send({ ...read, reth: { va: t.mr.addr + 40, rkey: t.mr.rkey, len: 16 } });
  send({ ...read, reth: { va: t.mr.addr + 16, rkey: (t.mr.rkey ^ 0x100) >>> 0, len: 32 } });
  await quiet(200);
  assert.equal(inbox.length, 0, 'a duplicate READ must stay inside the original one');
  // A retry asking for part of the original's bytes (rxe serves any subset): those bytes.
  t.region.fill(0x77, 20, 28);
  send({ ...read, reth: { va: t.mr.addr + 20, rkey: t.mr.rkey, len: 8 } });
  const rs = await next((s) => s.opcode === IbOpcode.RC_RDMA_READ_RESPONSE_ONLY, 2000, 'the READ response to a subset');
  assert.deepEqual([rs.psn, Buffer.from(rs.payload)], [RQ_PSN, Buffer.alloc(8, 0x77)]);
  // The true retry: the same bytes again.
  send(read);
  const r2 = await next((s) => s.opcode === IbOpcode.RC_RDMA_READ_RESPONSE_ONLY, 2000, 'the replayed READ response');
  assert.deepEqual([r2.psn, Buffer.from(r2.payload)], [RQ_PSN, t.region.subarray(16, 48)]);
  // The atomic retried with other operands: the saved result, not a second execution.
  send({ ...faa, atmeth: { ...faa.atmeth, swapAdd: 99n } });
  const a2 = await next((s) => s.opcode === IbOpcode.RC_ATOMIC_ACKNOWLEDGE, 2000, 'the replayed atomic ACK');
  assert.deepEqual([a2.psn, a2.atmack], [RQ_PSN + 1, 1000n]);
  assert.equal(word.readBigUInt64LE(), 1005n, 'executed once');
  assert.equal(t.qp.state, QpState.RTS);
  // The region deregistered: a retried READ may not read it any more.
  t.mr.dereg();
  send(read);
  const n = await nak();
  assert.deepEqual([n.psn, n.aeth.syndrome], [RQ_PSN, AethSyndrome.NAK_REMOTE_ACCESS_ERROR]);
  await quiet();
  assert.equal(inbox.filter((s) => s.opcode === IbOpcode.RC_RDMA_READ_RESPONSE_ONLY).length, 0);
  assert.equal(t.qp.state, QpState.ERR);
  assert.ok(t.untouched());
  await secondConnectionWorks();
});

test('a retried multi-packet READ from a PSN inside it, for any part of the original bytes: answered from that PSN with MIDDLE/LAST and the new range; outside the range nothing', async () => {
  const t = target({ size: 4096 });
  for (let i = 0; i < 4096; i++) t.region[i] = (i * 7 + 3) & 0xff;
  const read = { opcode: IbOpcode.RC_RDMA_READ_REQUEST, destQp: t.qp.qpNum, psn: RQ_PSN, ackReq: true, reth: { va: t.mr.addr + 100, rkey: t.mr.rkey, len: 3000 } };
  send(read);
  const first = [];
  for (const op of ['FIRST', 'MIDDLE', 'LAST']) first.push(await next((s) => s.opcode === IbOpcode[`RC_RDMA_READ_RESPONSE_${op}`], 2000, `READ response ${op}`));
  assert.deepEqual(first.map((s) => s.psn), [RQ_PSN, RQ_PSN + 1, RQ_PSN + 2]);
  assert.deepEqual(Buffer.concat(first.map((s) => Buffer.from(s.payload))), t.region.subarray(100, 3100));
  // The retry from the second PSN, not for the exact tail: 200 bytes from offset 1500 → one LAST at PSN+1.
  send({ ...read, psn: RQ_PSN + 1, reth: { va: t.mr.addr + 1500, rkey: t.mr.rkey, len: 200 } });
  const r1 = await next((s) => s.opcode === IbOpcode.RC_RDMA_READ_RESPONSE_LAST, 2000, 'the replayed READ LAST');
  assert.deepEqual([r1.psn, Buffer.from(r1.payload)], [RQ_PSN + 1, t.region.subarray(1500, 1700)]);
  // From the last PSN, 1500 bytes (more than one MTU): MIDDLE then LAST from PSN+2.
  send({ ...read, psn: RQ_PSN + 2, reth: { va: t.mr.addr + 1600, rkey: t.mr.rkey, len: 1500 } });
  const m = await next((s) => s.opcode === IbOpcode.RC_RDMA_READ_RESPONSE_MIDDLE, 2000, 'the replayed READ MIDDLE');
  const l = await next((s) => s.opcode === IbOpcode.RC_RDMA_READ_RESPONSE_LAST, 2000, 'the replayed READ LAST');
  assert.deepEqual([m.psn, l.psn], [RQ_PSN + 2, RQ_PSN + 3]);
  assert.deepEqual(Buffer.concat([Buffer.from(m.payload), Buffer.from(l.payload)]), t.region.subarray(1600, 3100));
  // The same PSN but one byte past the original's end, or before its start: dropped.
  send({ ...read, psn: RQ_PSN + 1, reth: { va: t.mr.addr + 3000, rkey: t.mr.rkey, len: 101 } });
  send({ ...read, psn: RQ_PSN + 2, reth: { va: t.mr.addr + 99, rkey: t.mr.rkey, len: 8 } });
  await quiet(200);
  assert.equal(inbox.length, 0, 'nothing outside the original READ');
  assert.equal(t.qp.state, QpState.RTS);
  assert.ok(t.untouched());
});

// -- packets that are dropped and counted -------------------------------------------------------

test('a PSN far ahead of the window: one sequence NAK with the expected PSN, nothing executed; the connection goes on', async () => {
  const t = target();
  t.qp.postRecv({ wrId: 1, sgList: [{ addr: t.mr.addr, length: 64, lkey: t.mr.lkey }] });
  const before = roce.counters('rxe_lo');
  for (const off of [0x400000, 5, 0x7fffff]) {
    send({ opcode: IbOpcode.RC_RDMA_WRITE_ONLY, destQp: t.qp.qpNum, psn: (RQ_PSN + off) & 0xffffff, ackReq: true, reth: { va: t.mr.addr, rkey: t.mr.rkey, len: 8 }, payload: Buffer.alloc(8, 0x11) });
  }
  const n = await nak();
  assert.deepEqual([n.psn, n.aeth.syndrome], [RQ_PSN, AethSyndrome.NAK_PSN_SEQ_ERROR]);
  await until(() => (delta(before).out_of_seq_request ?? 0) === 3, 1000);
  await quiet();
  assert.equal(inbox.filter(ackOf).length, 0, 'one sequence NAK until the expected PSN comes');
  assert.equal(delta(before).out_of_seq_request, 3);
  assert.ok(t.region.every((x) => x === 0x5a));
  assert.equal(t.qp.state, QpState.RTS);
  // A PSN far behind (beyond the duplicate window) is a duplicate: no execution, an ACK at most.
  send({ opcode: IbOpcode.RC_RDMA_WRITE_ONLY, destQp: t.qp.qpNum, psn: (RQ_PSN - 0x300000) & 0xffffff, ackReq: true, reth: { va: t.mr.addr, rkey: t.mr.rkey, len: 8 }, payload: Buffer.alloc(8, 0x11) });
  await quiet();
  assert.ok(t.region.every((x) => x === 0x5a));
  assert.equal(t.qp.state, QpState.RTS);
  inbox.length = 0;
  // The expected PSN now: executed and ACKed.
  send({ opcode: IbOpcode.RC_SEND_ONLY, destQp: t.qp.qpNum, psn: RQ_PSN, ackReq: true, payload: Buffer.from('in order') });
  const ack = await nak();
  assert.deepEqual([ack.psn, ack.aeth.syndrome & AethSyndrome.TYPE_MASK], [RQ_PSN, AethSyndrome.ACK]);
  const [wc] = await pollN(t.cq, 1);
  assert.deepEqual([wc.wrId, wc.status, wc.byteLen], [1, WcStatus.SUCCESS, 8]);
  assert.equal(t.region.subarray(0, 8).toString(), 'in order');
  await secondConnectionWorks();
});

test('the PSN window at its edges (IBA 9.7.5.1, rxe check_psn): only the expected PSN executes; ePSN − 1 and ePSN − 2^23 are duplicates (ACKed again, not delivered), ePSN + 1 and ePSN + 2^23 − 1 get the one sequence NAK', async () => {
  const t = target();
  t.qp.postRecv({ wrId: 1, sgList: [{ addr: t.mr.addr, length: 64, lkey: t.mr.lkey }] });
  const sendAt = (off, text) => send({ opcode: IbOpcode.RC_SEND_ONLY, destQp: t.qp.qpNum, psn: (RQ_PSN + off) & 0xffffff, ackReq: true, payload: Buffer.from(text) });
  const before = roce.counters('rxe_lo');
  for (const off of [-1, -0x800000]) {
    sendAt(off, 'a duplicate');
    const a = await nak();
    assert.deepEqual([a.psn, a.aeth.syndrome & AethSyndrome.TYPE_MASK], [(RQ_PSN - 1) & 0xffffff, AethSyndrome.ACK], `behind by ${-off}: the last PSN executed, ACKed again`);
  }
  sendAt(1, 'ahead');
  const n = await nak();
  assert.deepEqual([n.psn, n.aeth.syndrome], [RQ_PSN, AethSyndrome.NAK_PSN_SEQ_ERROR]);
  sendAt(0x7fffff, 'ahead');
  await until(() => (delta(before).out_of_seq_request ?? 0) === 2, 1000);
  await quiet();
  assert.equal(inbox.filter(ackOf).length, 0, 'one sequence NAK until the expected PSN comes');
  assert.deepEqual([delta(before).duplicate_request, delta(before).out_of_seq_request], [2, 2]);
  assert.deepEqual(t.cq.poll(4), [], 'nothing delivered');
  sendAt(0, 'expected');
  const ack = await nak();
  assert.deepEqual([ack.psn, ack.aeth.syndrome & AethSyndrome.TYPE_MASK], [RQ_PSN, AethSyndrome.ACK]);
  const [wc] = await pollN(t.cq, 1);
  assert.deepEqual([wc.wrId, wc.status, wc.byteLen], [1, WcStatus.SUCCESS, 8]);
  assert.equal(t.region.subarray(0, 8).toString(), 'expected');
  assert.equal(t.qp.state, QpState.RTS);
});

test('bad ICRC, bad transport version, truncated packets, an unknown QPN, a stranger\'s address: dropped, each counted, nothing answered or written', async () => {
  const t = target();
  t.qp.postRecv({ wrId: 1, sgList: [{ addr: t.mr.addr, length: 64, lkey: t.mr.lkey }] });
  const before = roce.counters('rxe_lo');
  const write = { opcode: IbOpcode.RC_RDMA_WRITE_ONLY, destQp: t.qp.qpNum, psn: RQ_PSN, ackReq: true, reth: { va: t.mr.addr, rkey: t.mr.rkey, len: 8 }, payload: Buffer.alloc(8, 0x11) };
  const badIcrc = Buffer.from(encodeRocePacket(write, OUT));
  badIcrc[badIcrc.length - 2] ^= 0x40;
  sendRaw(badIcrc);
  // A payload bit flipped: the ICRC no longer fits either.
  const flipped = Buffer.from(encodeRocePacket(write, OUT));
  flipped[flipped.length - 6] ^= 1;
  sendRaw(flipped);
  send({ ...write, tver: 1 });
  // Shorter than a BTH; long enough for one, not for the RETH and ICRC the opcode needs.
  sendRaw(Buffer.from(encodeRocePacket(write, OUT)).subarray(0, 10));
  sendRaw(Buffer.from(encodeRocePacket(write, OUT)).subarray(0, 20));
  // A QPN in this process's block that no QP has.
  send({ ...write, destQp: (t.qp.qpNum | 0x3ff) >>> 0 });
  // The same packet from an address that is not the connected peer's.
  const stranger = dgram.createSocket('udp4');
  stranger.bind(0, '127.0.0.3');
  await once(stranger, 'listening');
  stranger.send(encodeRocePacket(write, { ...OUT, src: V4('127.0.0.3'), sport: stranger.address().port }), PORT, LOCAL);
  await until(() => Object.values(delta(before)).length >= 6, 1000);
  await quiet();
  stranger.close();
  const d = delta(before);
  assert.equal(d.rcvd_icrc_err_drop, 2);
  assert.equal(d.rcvd_bad_version_drop, 1);
  assert.equal(d.rcvd_truncated_drop, 1);
  assert.equal(d.rcvd_bad_length_drop, 1);
  assert.equal(d.rcvd_unknown_qpn_drop, 1);
  assert.equal(d.rcvd_rc_addr_drop, 1);
  assert.equal(inbox.length, 0, 'nothing answered');
  assert.ok(t.region.every((x) => x === 0x5a));
  assert.equal(t.qp.state, QpState.RTS);
  // The QP still takes the good request at the PSN it expects.
  send(write);
  const ack = await nak();
  assert.deepEqual([ack.psn, ack.aeth.syndrome & AethSyndrome.TYPE_MASK], [RQ_PSN, AethSyndrome.ACK]);
  assert.ok(t.region.subarray(0, 8).every((x) => x === 0x11));
  assert.ok(t.region.subarray(8).every((x) => x === 0x5a));
  assert.ok(t.untouched());
  await secondConnectionWorks();
});

test('hostile responses to the target\'s own requests: an ACK for a PSN never sent, a READ response out of nowhere, an atomic ACK too long — dropped and counted; then a proper ACK completes the SEND', async () => {
  const t = target();
  const before = roce.counters('rxe_lo');
  t.qp.postSend({ wrId: 5, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: t.mr.addr, length: 4, lkey: t.mr.lkey }] });
  const req = await next((s) => s.opcode === IbOpcode.RC_SEND_ONLY, 2000, 'the SEND');
  assert.deepEqual([req.destQp, req.psn], [PEER_QPN, SQ_PSN]);
  send({ opcode: IbOpcode.RC_ACKNOWLEDGE, destQp: t.qp.qpNum, psn: (SQ_PSN + 40) & 0xffffff, aeth: { syndrome: AethSyndrome.ACK_UNLIMITED, msn: 9 } });
  send({ opcode: IbOpcode.RC_RDMA_READ_RESPONSE_ONLY, destQp: t.qp.qpNum, psn: SQ_PSN, aeth: { syndrome: AethSyndrome.ACK_UNLIMITED, msn: 1 }, payload: Buffer.alloc(32, 0x33) });
  send({ opcode: IbOpcode.RC_ATOMIC_ACKNOWLEDGE, destQp: t.qp.qpNum, psn: SQ_PSN, aeth: { syndrome: AethSyndrome.ACK_UNLIMITED, msn: 1 }, atmack: 7n });
  await until(() => (delta(before).rcvd_bad_resp_drop ?? 0) >= 3, 1000);
  await quiet();
  assert.equal(delta(before).rcvd_bad_resp_drop, 3);
  assert.equal(t.cq.poll(4).length, 0, 'nothing completes on a bogus response');
  assert.ok(t.region.every((x) => x === 0x5a));
  send({ opcode: IbOpcode.RC_ACKNOWLEDGE, destQp: t.qp.qpNum, psn: SQ_PSN, aeth: { syndrome: AethSyndrome.ACK_UNLIMITED, msn: 1 } });
  const wcs = await pollN(t.cq, 1);
  assert.deepEqual(wcs.map((w) => [w.wrId, w.status]), [[5, WcStatus.SUCCESS]]);
  await secondConnectionWorks();
});

test('a flood of 2000 out-of-window requests and garbage datagrams: counted, one NAK, and the other connection and this one still work', async () => {
  const t = target();
  t.qp.postRecv({ wrId: 1, sgList: [{ addr: t.mr.addr, length: 64, lkey: t.mr.lkey }] });
  const before = roce.counters('rxe_lo');
  for (let i = 0; i < 1000; i++) {
    send({ opcode: IbOpcode.RC_SEND_ONLY, destQp: t.qp.qpNum, psn: (RQ_PSN + 1 + i) & 0xffffff, ackReq: true, payload: Buffer.alloc(16, i & 0xff) });
    const junk = Buffer.alloc(60 + (i % 40));
    for (let j = 0; j < junk.length; j++) junk[j] = (i * 31 + j * 7) & 0xff;
    sendRaw(junk);
    if (i % 100 === 99) await new Promise((r) => setTimeout(r, 5)); // not more than a socket buffer at once
  }
  await until(() => (delta(before).out_of_seq_request ?? 0) >= 1000, 5000);
  await quiet();
  const d = delta(before);
  assert.equal(d.out_of_seq_request, 1000);
  const dropped = Object.entries(d).filter(([k]) => k.startsWith('rcvd_') && k.endsWith('_drop')).reduce((n, [, v]) => n + v, 0);
  assert.equal(dropped + (d.udp_rcvbuf_drop ?? 0), 1000, 'every garbage datagram dropped and counted once');
  assert.equal(d.fwd_failed_drop, undefined, 'garbage for QPN blocks nobody holds is dropped here, not lost on the way');
  assert.equal(inbox.filter(ackOf).length, 1, 'a single sequence NAK');
  assert.equal(t.qp.state, QpState.RTS);
  assert.ok(t.region.every((x) => x === 0x5a));
  inbox.length = 0;
  send({ opcode: IbOpcode.RC_SEND_ONLY, destQp: t.qp.qpNum, psn: RQ_PSN, ackReq: true, payload: Buffer.from('still here') });
  const [wc] = await pollN(t.cq, 1);
  assert.deepEqual([wc.status, wc.byteLen], [WcStatus.SUCCESS, 10]);
  await secondConnectionWorks();
});
