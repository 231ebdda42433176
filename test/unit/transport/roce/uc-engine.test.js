// The UC QP of the soft RoCE device (rxe's engines with their UC checks), driven deterministically:
// two connected UC QPs under a virtual clock over a simulated link whose filter drops chosen
// packets, every packet going through the device's receive path. Checks the packets byte by byte
// against rxe's (UC opcodes 0x20-0x2B, RETH on WRITE FIRST/ONLY, ImmDt, AckReq as rxe sets it),
// that the sender completes a WR when its last packet leaves and never hears back, what a lost
// packet or a PSN gap costs the receiver (that message, nothing else), the class D errors (dropped
// silently, the QP stays in RTS), and what is refused when posted.
import test from 'node:test';
import assert from 'node:assert/strict';
import { lib, wire, roce, code } from '../../../lib/roce.js';
import { wiredRcPair, destroyPairs, VirtualClock, SimLink, drain, deliver, prng, WcStatus, WrOpcode, WcOpcode, WcFlags, SendFlags } from '../../../lib/roce-rc.js';

const { Access, QpState, QpType, QpAttrMask, PostError } = lib;
const { IbOpcode, decodeRocePacket, bthOpcode, bthPsn } = wire;
const SIG = SendFlags.SIGNALED;
const O = IbOpcode;
const MTU = 256;

test.afterEach(() => {
  destroyPairs();
  roce.configureImpairment(null);
});

/** A UC pair under a virtual clock over a SimLink; `opts` for wiredRcPair. */
function setup(opts = {}, linkOpts = {}) {
  const clock = new VirtualClock();
  const link = new SimLink(clock, linkOpts);
  const p = wiredRcPair({ clock, link, qpType: QpType.UC, ...opts });
  return { clock, link, ...p };
}

/** Let every timer run (the link's deliveries, deferred bursts); then what both CQs hold. */
function settle(clock, cqA, cqB) {
  clock.run(() => false, 60_000);
  return [drain(cqA), drain(cqB)];
}

function pattern(n, seed) {
  const r = prng(seed);
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (r() * 256) | 0;
  return b;
}

/** Decoded packets of the link's log sent by `qp`. */
function sentBy(link, qp) {
  return link.log.filter((x) => x.from === qp.qpNum).map((x) => decodeRocePacket(x.buf)).filter((d) => d.ok).map((d) => d.spec);
}

/** Drop the packets `a` sends with these PSNs (the link's filter). */
function dropPsns(link, a, psns) {
  const set = new Set(psns);
  link.filter = (buf, from) => !(from === a.qpNum && set.has(bthPsn(buf, 0)));
}

/** `n` receives of `len` bytes each into consecutive slots of `mr`, wrIds from `first`. */
function postRecvs(qp, mr, n, len, first = 100) {
  for (let i = 0; i < n; i++) qp.postRecv({ wrId: first + i, sgList: [{ addr: mr.addr + i * len, length: len, lkey: mr.lkey }] });
}

test('UC packets byte for byte: SEND/WRITE with and without immediate, FIRST/MIDDLE/LAST/ONLY, RETH on the first, ImmDt on the last, AckReq on the last', () => {
  const { clock, link, pd, a, b, cqA, cqB } = setup({ psnA: 0xfffffe });
  link.keepLog = true;
  const src = pattern(4096, 1);
  const ms = pd.regMr(src, Access.LOCAL_WRITE);
  const rbuf = Buffer.alloc(8192);
  const mr = pd.regMr(rbuf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  postRecvs(b, mr, 4, 1024);
  const sg = (off, len) => [{ addr: ms.addr + off, length: len, lkey: ms.lkey }];
  a.postSend([
    { wrId: 1, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg(0, 5) },
    { wrId: 2, opcode: WrOpcode.SEND_WITH_IMM, immData: 0x01020304, sendFlags: SIG | SendFlags.SOLICITED, sgList: sg(0, 600) },
    { wrId: 3, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: sg(100, 300), rdma: { remoteAddr: mr.addr + 5000, rkey: mr.rkey } },
    { wrId: 4, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, immData: 0x0a0b0c0d, sendFlags: SIG, sgList: sg(7, 5), rdma: { remoteAddr: mr.addr + 6000, rkey: mr.rkey } },
    { wrId: 5, opcode: WrOpcode.SEND_WITH_IMM, immData: 7, sendFlags: SIG, sgList: sg(0, 0) },
  ]);
  const [sa, rb] = settle(clock, cqA, cqB);
  assert.deepEqual(sa.map((w) => [w.wrId, w.status, w.opcode]), [
    [1, WcStatus.SUCCESS, WcOpcode.SEND],
    [2, WcStatus.SUCCESS, WcOpcode.SEND],
    [3, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE],
    [4, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE],
    [5, WcStatus.SUCCESS, WcOpcode.SEND],
  ]);
  assert.deepEqual(rb.map((w) => [w.wrId, w.status, w.opcode, w.byteLen, w.immData ?? 0]), [
    [100, WcStatus.SUCCESS, WcOpcode.RECV, 5, 0],
    [101, WcStatus.SUCCESS, WcOpcode.RECV, 600, 0x01020304],
    [102, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, 5, 0x0a0b0c0d],
    [103, WcStatus.SUCCESS, WcOpcode.RECV, 0, 7],
  ]);
  assert.ok(rb[1].wcFlags & WcFlags.WITH_IMM);
  assert.ok(rbuf.subarray(1024, 1624).equals(src.subarray(0, 600)));
  assert.ok(rbuf.subarray(5000, 5300).equals(src.subarray(100, 400)));
  assert.ok(rbuf.subarray(6000, 6005).equals(src.subarray(7, 12)));

  const reqs = sentBy(link, a);
  assert.deepEqual(reqs.map((s) => s.opcode), [
    O.UC_SEND_ONLY,
    O.UC_SEND_FIRST, O.UC_SEND_MIDDLE, O.UC_SEND_LAST_WITH_IMMEDIATE,
    O.UC_RDMA_WRITE_FIRST, O.UC_RDMA_WRITE_LAST,
    O.UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    O.UC_SEND_ONLY_WITH_IMMEDIATE,
  ]);
  assert.deepEqual(reqs.map((s) => s.opcode), [0x24, 0x20, 0x21, 0x23, 0x26, 0x28, 0x2b, 0x25]);
  assert.deepEqual(reqs.map((s) => s.psn), [0xfffffe, 0xffffff, 0, 1, 2, 3, 4, 5]);
  // rxe init_req_packet: AckReq on the last packet of each message, for UC as for RC.
  assert.deepEqual(reqs.map((s) => s.ackReq), [true, false, false, true, false, true, true, true]);
  assert.deepEqual(reqs.map((s) => s.se), [false, false, false, true, false, false, false, false]);
  assert.deepEqual(reqs.map((s) => s.payload.length), [5, 256, 256, 88, 256, 44, 5, 0]);
  assert.ok(reqs.every((s) => s.destQp === b.qpNum && s.pkey === 0xffff));
  assert.deepEqual(reqs[4].reth, { va: BigInt(mr.addr + 5000), rkey: mr.rkey, len: 300 });
  assert.equal(reqs[5].reth, undefined);
  assert.deepEqual(reqs[6].reth, { va: BigInt(mr.addr + 6000), rkey: mr.rkey, len: 5 });
  assert.equal(reqs[3].immDt, 0x01020304);
  assert.equal(reqs[6].immDt, 0x0a0b0c0d);

  // The WRITE ONLY with immediate, as rxe lays it out: BTH, RETH, ImmDt, payload, pad, ICRC.
  const raw = link.log.filter((x) => x.from === a.qpNum)[6].buf;
  assert.equal(raw.length, 12 + 16 + 4 + 5 + 3 + 4);
  const qpn = b.qpNum;
  const expect = Buffer.alloc(40);
  Buffer.from([0x2b, 0x30, 0xff, 0xff, 0, qpn >>> 16, (qpn >>> 8) & 0xff, qpn & 0xff, 0x80, 0, 0, 4]).copy(expect, 0);
  expect.writeBigUInt64BE(BigInt(mr.addr + 6000), 12);
  expect.writeUInt32BE(mr.rkey, 20);
  expect.writeUInt32BE(5, 24);
  expect.writeUInt32BE(0x0a0b0c0d, 28);
  src.copy(expect, 32, 7, 12);
  assert.deepEqual([...raw.subarray(0, 40)], [...expect]);
  // The receiver sent nothing at all: UC has no acknowledgements.
  assert.equal(sentBy(link, b).length, 0);
  assert.equal(link.log.filter((x) => x.from === b.qpNum).length, 0);
});

test('the sender completes a WR when its last packet is sent: before the packet arrives, and whether it arrives or not', () => {
  const { clock, link, pd, a, b, cqA, cqB } = setup();
  link.filter = () => false; // nothing arrives
  const ms = pd.regMr(pattern(1000, 2), Access.LOCAL_WRITE);
  const mr = pd.regMr(Buffer.alloc(4096), Access.LOCAL_WRITE);
  postRecvs(b, mr, 2, 2048);
  a.postSend([
    { wrId: 1, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: ms.addr, length: 1000, lkey: ms.lkey }] },
    { wrId: 2, opcode: WrOpcode.SEND, sendFlags: 0, sgList: [{ addr: ms.addr, length: 10, lkey: ms.lkey }] },
    { wrId: 3, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: ms.addr, length: 10, lkey: ms.lkey }] },
  ]);
  // No virtual time has passed: the completions are there already, and no timer waits for an
  // acknowledgement (the link delivers nothing, so nothing else is pending).
  assert.deepEqual(drain(cqA).map((w) => [w.wrId, w.status]), [[1, WcStatus.SUCCESS], [3, WcStatus.SUCCESS]]);
  assert.equal(clock.timers.filter((t) => !t.dead).length, 0, 'no retransmission timer');
  assert.equal(link.dropped, 6);
  const [sa, rb] = settle(clock, cqA, cqB);
  assert.deepEqual(sa, []);
  assert.deepEqual(rb, []);
  assert.equal(a.state, QpState.RTS);
  assert.equal(b.state, QpState.RTS);
});

test('a lost packet loses exactly its message: no error on the sender, the messages after it arrive', () => {
  const { clock, link, pd, a, b, cqA, cqB } = setup({ psnA: 10 });
  const src = pattern(4 * 64, 3);
  const ms = pd.regMr(src, Access.LOCAL_WRITE);
  const mr = pd.regMr(Buffer.alloc(4 * 64), Access.LOCAL_WRITE);
  postRecvs(b, mr, 4, 64);
  dropPsns(link, a, [11]); // the second message (one packet each)
  for (let i = 0; i < 4; i++) a.postSend({ wrId: i, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: ms.addr + i * 64, length: 64, lkey: ms.lkey }] });
  const [sa, rb] = settle(clock, cqA, cqB);
  assert.deepEqual(sa.map((w) => [w.wrId, w.status]), [0, 1, 2, 3].map((i) => [i, WcStatus.SUCCESS]));
  // Receives are taken in order: messages 0, 2, 3 land in the first three.
  assert.deepEqual(rb.map((w) => [w.wrId, w.status, w.byteLen]), [[100, WcStatus.SUCCESS, 64], [101, WcStatus.SUCCESS, 64], [102, WcStatus.SUCCESS, 64]]);
  assert.equal(link.dropped, 1);
  assert.equal(a.state, QpState.RTS);
  assert.equal(b.state, QpState.RTS);
});

test('a PSN gap mid-message drops that message; the receive WQE it was filling takes the next one', () => {
  const { clock, link, pd, a, b, cqA, cqB } = setup({ psnA: 0 });
  const src = pattern(2048, 4);
  const ms = pd.regMr(src, Access.LOCAL_WRITE);
  const rbuf = Buffer.alloc(4 * 1024);
  const mr = pd.regMr(rbuf, Access.LOCAL_WRITE);
  postRecvs(b, mr, 4, 1024);
  // Message A: PSNs 0-3 (MIDDLE 1 lost); B: 4 (ONLY); C: 5-6; D: 7.
  dropPsns(link, a, [1]);
  const sizes = [4 * MTU, 100, MTU + 1, 3];
  let off = 0;
  sizes.forEach((n, i) => {
    a.postSend({ wrId: i, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: ms.addr + off, length: n, lkey: ms.lkey }] });
    off += n;
  });
  const [sa, rb] = settle(clock, cqA, cqB);
  assert.deepEqual(sa.map((w) => [w.wrId, w.status]), [0, 1, 2, 3].map((i) => [i, WcStatus.SUCCESS]));
  // A never completes; B lands in the WQE A was filling (100), C and D in the next ones.
  assert.deepEqual(rb.map((w) => [w.wrId, w.status, w.byteLen]), [[100, WcStatus.SUCCESS, 100], [101, WcStatus.SUCCESS, MTU + 1], [102, WcStatus.SUCCESS, 3]]);
  assert.ok(rbuf.subarray(0, 100).equals(src.subarray(4 * MTU, 4 * MTU + 100)));
  assert.ok(rbuf.subarray(1024, 1024 + MTU + 1).equals(src.subarray(4 * MTU + 100, 5 * MTU + 101)));
  assert.ok(rbuf.subarray(2048, 2051).equals(src.subarray(5 * MTU + 101, 5 * MTU + 104)));
  assert.equal(b.state, QpState.RTS);
});

test('a lost FIRST or LAST, a lost packet of a long RDMA WRITE: that message only, later sends and writes arrive', () => {
  for (const lost of ['first', 'last', 'write-middle']) {
    const { clock, link, pd, a, b, cqA, cqB } = setup({ psnA: 100 });
    const src = pattern(4096, 5);
    const ms = pd.regMr(src, Access.LOCAL_WRITE);
    const rbuf = Buffer.alloc(4096);
    const mr = pd.regMr(rbuf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    postRecvs(b, mr, 2, 1024);
    // Message 0 (PSN 100-102): a 3-packet SEND, or a 3-packet WRITE; then a SEND (103) and a WRITE with immediate (104).
    const first = lost === 'write-middle'
      ? { wrId: 0, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: [{ addr: ms.addr, length: 3 * MTU, lkey: ms.lkey }], rdma: { remoteAddr: mr.addr + 2048, rkey: mr.rkey } }
      : { wrId: 0, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: ms.addr, length: 3 * MTU, lkey: ms.lkey }] };
    dropPsns(link, a, [lost === 'first' ? 100 : lost === 'last' ? 102 : 101]);
    a.postSend([
      first,
      { wrId: 1, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: ms.addr + 1000, length: 50, lkey: ms.lkey }] },
      { wrId: 2, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, immData: 9, sendFlags: SIG, sgList: [{ addr: ms.addr + 2000, length: 20, lkey: ms.lkey }], rdma: { remoteAddr: mr.addr + 3500, rkey: mr.rkey } },
    ]);
    const [sa, rb] = settle(clock, cqA, cqB);
    assert.deepEqual(sa.map((w) => w.status), [WcStatus.SUCCESS, WcStatus.SUCCESS, WcStatus.SUCCESS], lost);
    assert.deepEqual(rb.map((w) => [w.wrId, w.opcode, w.byteLen]), [[100, WcOpcode.RECV, 50], [101, WcOpcode.RECV_RDMA_WITH_IMM, 20]], lost);
    assert.ok(rbuf.subarray(0, 50).equals(src.subarray(1000, 1050)), lost);
    assert.ok(rbuf.subarray(3500, 3520).equals(src.subarray(2000, 2020)), lost);
    assert.equal(b.state, QpState.RTS, lost);
    destroyPairs();
  }
});

test('class D errors drop the message silently and the QP stays in RTS: no receive posted, WRITE the QP does not allow, bad rkey, out of bounds, message longer than the receive', () => {
  const { clock, pd, a, b, cqA, cqB } = setup();
  const src = pattern(2048, 7);
  const ms = pd.regMr(src, Access.LOCAL_WRITE);
  const rbuf = Buffer.alloc(2048);
  const mr = pd.regMr(rbuf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const ro = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  const sg = (n) => [{ addr: ms.addr, length: n, lkey: ms.lkey }];
  const before = roce.counters('rxe_lo').rcvd_no_recv_wqe_drop;
  // No receive posted.
  a.postSend({ wrId: 1, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg(10) });
  let [, rb] = settle(clock, cqA, cqB);
  assert.deepEqual(rb, []);
  assert.equal(roce.counters('rxe_lo').rcvd_no_recv_wqe_drop, before + 1);
  // A receive of 100 bytes: a 300-byte message does not fit (dropped, the WQE stays), then one of 40 does.
  b.postRecv({ wrId: 50, sgList: [{ addr: mr.addr, length: 100, lkey: mr.lkey }] });
  a.postSend({ wrId: 2, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg(300) });
  // Writes: an rkey of a region without REMOTE_WRITE, a range beyond the region, an rkey that names nothing.
  a.postSend({ wrId: 3, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: sg(8), rdma: { remoteAddr: ro.addr, rkey: ro.rkey } });
  a.postSend({ wrId: 4, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: sg(600), rdma: { remoteAddr: mr.addr + 1800, rkey: mr.rkey } });
  a.postSend({ wrId: 5, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: sg(8), rdma: { remoteAddr: mr.addr, rkey: (mr.rkey ^ 0x5500) >>> 0 } });
  a.postSend({ wrId: 6, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg(40) });
  let sa;
  [sa, rb] = settle(clock, cqA, cqB);
  assert.deepEqual(sa.map((w) => [w.wrId, w.status]), [2, 3, 4, 5, 6].map((i) => [i, WcStatus.SUCCESS]));
  assert.deepEqual(rb.map((w) => [w.wrId, w.status, w.byteLen]), [[50, WcStatus.SUCCESS, 40]]);
  assert.ok(rbuf.subarray(0, 40).equals(src.subarray(0, 40)));
  assert.ok(rbuf.subarray(1800).every((x) => x === 0), 'nothing written beyond the region');
  assert.ok(ro.buf ? ro.buf.every((x) => x === 0) : true);
  assert.equal(b.state, QpState.RTS);
  assert.equal(a.state, QpState.RTS);
});

test('a QP without REMOTE_WRITE in its access flags drops RDMA WRITEs and still takes SENDs', () => {
  const { clock, pd, a, b, cqA, cqB } = setup({ access: 0 });
  const ms = pd.regMr(pattern(64, 8), Access.LOCAL_WRITE);
  const rbuf = Buffer.alloc(256);
  const mr = pd.regMr(rbuf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  postRecvs(b, mr, 1, 128);
  a.postSend([
    { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: [{ addr: ms.addr, length: 16, lkey: ms.lkey }], rdma: { remoteAddr: mr.addr + 128, rkey: mr.rkey } },
    { wrId: 2, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: ms.addr, length: 16, lkey: ms.lkey }] },
  ]);
  const [, rb] = settle(clock, cqA, cqB);
  assert.deepEqual(rb.map((w) => [w.wrId, w.byteLen]), [[100, 16]]);
  assert.ok(rbuf.subarray(128).every((x) => x === 0));
});

test('a receive WQE naming invalid memory is class A: it completes with LOC_QP_OP_ERR and the QP goes to ERR (nothing is sent back)', () => {
  const { clock, link, pd, a, b, cqA, cqB } = setup();
  link.keepLog = true;
  const ms = pd.regMr(pattern(64, 9), Access.LOCAL_WRITE);
  const mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  b.postRecv({ wrId: 7, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
  b.postRecv({ wrId: 8, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
  mr.dereg();
  a.postSend({ wrId: 1, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [{ addr: ms.addr, length: 16, lkey: ms.lkey }] });
  const [sa, rb] = settle(clock, cqA, cqB);
  assert.deepEqual(sa.map((w) => [w.wrId, w.status]), [[1, WcStatus.SUCCESS]]);
  assert.deepEqual(rb.map((w) => [w.wrId, w.status]), [[7, WcStatus.LOC_QP_OP_ERR], [8, WcStatus.WR_FLUSH_ERR]]);
  assert.equal(b.state, QpState.ERR);
  assert.equal(link.log.filter((x) => x.from === b.qpNum).length, 0);
});

test('a long message goes out in bursts and arrives whole; other QPs are not starved', () => {
  const { clock, link, pd, a, b, cqA, cqB } = setup();
  link.keepLog = true;
  const n = 300 * MTU + 17;
  const src = pattern(n, 10);
  const dst = Buffer.alloc(n);
  const ms = pd.regMr(src, Access.LOCAL_WRITE);
  const md = pd.regMr(dst, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  a.postSend({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: [{ addr: ms.addr, length: n, lkey: ms.lkey }], rdma: { remoteAddr: md.addr, rkey: md.rkey } });
  // One turn sends at most 64 packets; the rest follows in later turns.
  assert.equal(link.log.length, 64);
  assert.deepEqual(drain(cqA), []);
  const [sa] = settle(clock, cqA, cqB);
  assert.deepEqual(sa.map((w) => [w.wrId, w.status]), [[1, WcStatus.SUCCESS]]);
  assert.equal(link.log.length, 301);
  assert.ok(dst.equals(src));
  let gap = 0;
  for (const s of sentBy(link, a)) {
    gap = s.ackReq ? 0 : gap + 1;
    assert.ok(gap <= 65);
  }
});

test('posting: RDMA READ, atomics, Send with Invalidate, Local Invalidate are refused with EINVAL, the WRs before them queued', () => {
  const { clock, pd, a, cqA, cqB } = setup();
  const ms = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  const sg = [{ addr: ms.addr, length: 8, lkey: ms.lkey }];
  const bad = [
    { opcode: WrOpcode.RDMA_READ, rdma: { remoteAddr: 0, rkey: 1 } },
    { opcode: WrOpcode.ATOMIC_CMP_AND_SWP, atomic: { remoteAddr: 0, rkey: 1, compareAdd: 0n, swap: 1n } },
    { opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, atomic: { remoteAddr: 0, rkey: 1, compareAdd: 1n } },
    { opcode: WrOpcode.SEND_WITH_INV, invalidateRkey: 5 },
    { opcode: WrOpcode.LOCAL_INV, invalidateRkey: 5 },
  ];
  for (const x of bad) {
    assert.throws(
      () => a.postSend([{ wrId: 1, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg }, { wrId: 2, sendFlags: SIG, sgList: sg, ...x }]),
      (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1,
      `opcode ${x.opcode}`,
    );
  }
  const [sa] = settle(clock, cqA, cqB);
  assert.deepEqual(sa.map((w) => [w.wrId, w.status]), bad.map(() => [1, WcStatus.SUCCESS]));
});

test('the UC modify table (the kernel qp_state_table): RTR takes no RD atomic or RNR attributes, RTS only the SQ PSN and its optional ones', () => {
  const { pd, cqA } = setup();
  const qp = pd.createQp({ qpType: QpType.UC, sendCq: cqA, recvCq: cqA, cap: { maxSendWr: 1, maxRecvWr: 1 } });
  try {
    assert.equal(qp.qpType, QpType.UC);
    assert.throws(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1 }), code('EINVAL'), 'INIT needs access flags');
    assert.throws(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 1, qpAccessFlags: 0 }), code('EINVAL'), 'no Q_Key');
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.REMOTE_WRITE });
    const ctx = qp.context;
    let sgid = 0;
    for (let i = 0; i < 8; i++) {
      const g = ctx.queryGid(1, i);
      if (g[10] === 0xff && g[12] === 127) sgid = i;
    }
    const ahAttr = { isGlobal: true, portNum: 1, grh: { dgid: ctx.queryGid(1, sgid), flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } };
    const rtr = { qpState: QpState.RTR, ahAttr, pathMtu: 1, destQpNum: 0x123, rqPsn: 5 };
    const M = QpAttrMask;
    const rtrMask = M.STATE | M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN;
    assert.throws(() => qp.modify({ ...rtr, maxDestRdAtomic: 1 }, rtrMask | M.MAX_DEST_RD_ATOMIC), code('EINVAL'));
    assert.throws(() => qp.modify({ ...rtr, minRnrTimer: 1 }, rtrMask | M.MIN_RNR_TIMER), code('EINVAL'));
    assert.throws(() => qp.modify(rtr, rtrMask & ~M.RQ_PSN), code('EINVAL'));
    qp.modify(rtr, rtrMask);
    for (const [k, m] of [['timeout', M.TIMEOUT], ['retryCnt', M.RETRY_CNT], ['rnrRetry', M.RNR_RETRY], ['maxRdAtomic', M.MAX_QP_RD_ATOMIC]]) {
      assert.throws(() => qp.modify({ qpState: QpState.RTS, sqPsn: 1, [k]: 1 }, M.STATE | M.SQ_PSN | m), code('EINVAL'), k);
    }
    assert.throws(() => qp.modify({ qpState: QpState.RTS }, M.STATE), code('EINVAL'), 'SQ PSN required');
    qp.modify({ qpState: QpState.RTS, sqPsn: 1, qpAccessFlags: 0 }, M.STATE | M.SQ_PSN | M.ACCESS_FLAGS);
    assert.equal(qp.state, QpState.RTS);
    assert.throws(() => qp.modify({ qpState: QpState.RTS, minRnrTimer: 3 }, M.STATE | M.MIN_RNR_TIMER), code('EINVAL'));
    qp.modify({ qpState: QpState.RTS, qpAccessFlags: Access.REMOTE_WRITE }, M.STATE | M.ACCESS_FLAGS);
    const q = qp.query();
    assert.equal(q.qpAccessFlags, Access.REMOTE_WRITE);
    assert.equal(q.destQpNum, 0x123);
  } finally {
    qp.destroy();
  }
});

test('a UC QP takes no RC packet and an RC QP no UC packet (rcvd_bad_opcode_drop); a UC packet resynchronises the responder on any FIRST/ONLY PSN', () => {
  const uc = setup({ psnB: 0x500 });
  const rc = wiredRcPair({ clock: uc.clock });
  const { clock, pd, b, cqB } = uc;
  const mr = pd.regMr(Buffer.alloc(256), Access.LOCAL_WRITE);
  postRecvs(b, mr, 2, 128);
  const net = { family: 4, src: Uint8Array.of(127, 0, 0, 1), dst: Uint8Array.of(127, 0, 0, 1), sport: b.dev.agent.port, dport: b.dev.agent.port };
  const pkt = (opcode, destQp, psn, payload = Buffer.from('hello'), extra = {}) => Buffer.from(wire.encodeRocePacket({ opcode, destQp, psn, ackReq: true, payload, ...extra }, net));
  const c0 = roce.counters('rxe_lo').rcvd_bad_opcode_drop;
  deliver(b, pkt(O.RC_SEND_ONLY, b.qpNum, 0x500));
  deliver(rc.b, pkt(O.UC_SEND_ONLY, rc.b.qpNum, 0xfffff0));
  assert.equal(roce.counters('rxe_lo').rcvd_bad_opcode_drop, c0 + 2);
  clock.run(() => false, 10);
  assert.deepEqual(drain(cqB), []);
  // A UC ONLY far from the expected PSN (0x500) starts a new message there; a MIDDLE with no
  // message in progress is dropped; the next ONLY is taken.
  deliver(b, pkt(O.UC_SEND_ONLY, b.qpNum, 0x123456, Buffer.from('far')));
  deliver(b, pkt(O.UC_SEND_MIDDLE, b.qpNum, 0x123457, Buffer.alloc(256)));
  deliver(b, pkt(O.UC_SEND_ONLY_WITH_IMMEDIATE, b.qpNum, 0x123458, Buffer.from('next'), { immDt: 42 }));
  clock.run(() => false, 10);
  const rb = drain(cqB);
  assert.deepEqual(rb.map((w) => [w.wrId, w.byteLen, w.immData ?? 0]), [[100, 3, 0], [101, 4, 42]]);
  assert.equal(b.state, QpState.RTS);
  assert.equal(rc.b.state, QpState.RTS);
});

test('hostile: a UC FIRST/ONLY from an address other than the connected peer is dropped (rcvd_rc_addr_drop), even though UC takes any PSN', () => {
  const { clock, pd, b, cqB } = setup();
  const mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  postRecvs(b, mr, 1, 64);
  const c0 = roce.counters('rxe_lo').rcvd_rc_addr_drop;
  const stranger = { family: 4, src: Uint8Array.of(127, 0, 0, 3), dst: Uint8Array.of(127, 0, 0, 1), sport: b.dev.agent.port, dport: b.dev.agent.port };
  for (const [opcode, extra] of [[O.UC_SEND_ONLY, {}], [O.UC_RDMA_WRITE_ONLY, { reth: { va: mr.addr, rkey: mr.rkey, len: 8 } }]]) {
    const pkt = Buffer.from(wire.encodeRocePacket({ opcode, destQp: b.qpNum, psn: 0x42, payload: Buffer.from('spoofed!'), ...extra }, stranger));
    b.dev.rxDatagram(pkt, { family: 4, src: '127.0.0.3', dst: '127.0.0.1', srcPort: b.dev.agent.port, forwarded: false });
  }
  clock.run(() => false, 10);
  assert.equal(roce.counters('rxe_lo').rcvd_rc_addr_drop, c0 + 2);
  assert.deepEqual(drain(cqB), []);
  assert.ok(Buffer.from(mr.buf).every((x) => x === 0));
  assert.equal(b.state, QpState.RTS);
});
