// Trains (src/transport/roce/train.ts): several full-MTU packets of one SEND or RDMA WRITE in one
// forwarding frame on the host path. The codec: which opcodes start one, the shape rules, and the
// packets a train stands for, byte for byte those the per-packet path builds. On rxe_lo: RC and
// UC transfers of every size come out the same with trains as without (they are off while a
// capture runs), memory, completions and packet counters alike; a train handed over by hand is
// executed segment by segment; a malformed one is dropped and counted, never executed.
import { wire, lib, LO_HEADERS, fwdFrame, handOver, udQp, until } from '../../../lib/roce.js';
import { wiredRcPair, destroyPairs, drain, WcStatus, WrOpcode, SendFlags } from '../../../lib/roce-rc.js';
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TRAIN_MAX, TRAIN_MIN, expandTrain, trainMiddleOpcode, trainSegmentLength, trainStep } from '../../../../dist/transport/roce/train.js';

const { IbOpcode: O, parseRocePacket, RocePacket, encodeRocePacket } = wire;
const { Access, QpType } = lib;
after(() => destroyPairs());

/** A packet's bytes with its ICRC zeroed (as the host path leaves it). */
function noIcrc(spec) {
  const b = Buffer.from(encodeRocePacket(spec, LO_HEADERS));
  b.fill(0, b.length - 4);
  return b;
}

/** The first packet of a train of `n` segments of `seg` bytes (pattern payload), parsed. */
function trainPacket(opcode, n, seg, { psn = 0x10, ackReq = false, se = false, reth, deth } = {}) {
  const payload = Buffer.alloc(n * seg);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 13 + (i >> 8)) & 0xff;
  const spec = { opcode, destQp: 0x1234, psn, ackReq, se, payload };
  if (reth) spec.reth = reth;
  if (deth) spec.deth = deth;
  const bytes = noIcrc(spec);
  const p = new RocePacket();
  assert.equal(parseRocePacket(bytes, 0, bytes.length, p, { pkey: null }), null);
  return { p, bytes, payload };
}

test('which opcodes start a train: SEND and RDMA WRITE FIRST and MIDDLE, RC and UC; their segments after the first are the MIDDLE', () => {
  const want = new Map([
    [O.RC_SEND_FIRST, O.RC_SEND_MIDDLE],
    [O.RC_SEND_MIDDLE, O.RC_SEND_MIDDLE],
    [O.RC_RDMA_WRITE_FIRST, O.RC_RDMA_WRITE_MIDDLE],
    [O.RC_RDMA_WRITE_MIDDLE, O.RC_RDMA_WRITE_MIDDLE],
    [O.UC_SEND_FIRST, O.UC_SEND_MIDDLE],
    [O.UC_SEND_MIDDLE, O.UC_SEND_MIDDLE],
    [O.UC_RDMA_WRITE_FIRST, O.UC_RDMA_WRITE_MIDDLE],
    [O.UC_RDMA_WRITE_MIDDLE, O.UC_RDMA_WRITE_MIDDLE],
  ]);
  for (let op = 0; op < 256; op++) assert.equal(trainMiddleOpcode(op), want.get(op) ?? -1, `opcode 0x${op.toString(16)}`);
});

test('the shape of a train: 2 .. 15 equal segments of an IB MTU, no AckReq, SE or pad', () => {
  for (const seg of [256, 512, 1024, 2048, 4096]) {
    for (const n of [TRAIN_MIN, 7, TRAIN_MAX]) assert.equal(trainSegmentLength(trainPacket(O.RC_SEND_MIDDLE, n, seg).p, n), seg);
  }
  const { p } = trainPacket(O.RC_RDMA_WRITE_FIRST, 4, 1024, { reth: { va: 0n, rkey: 1, len: 4096 } });
  assert.equal(trainSegmentLength(p, 4), 1024);
  assert.equal(trainSegmentLength(p, 1), -1, 'one segment is a packet');
  assert.equal(trainSegmentLength(p, 16), -1, 'more than 15');
  assert.equal(trainSegmentLength(p, 3), -1, '4096 B do not split into 3 segments');
  assert.equal(trainSegmentLength(trainPacket(O.RC_SEND_MIDDLE, 2, 100).p, 2), -1, 'not an MTU');
  assert.equal(trainSegmentLength(trainPacket(O.RC_SEND_MIDDLE, 2, 8192).p, 2), -1, 'larger than 4096');
  assert.equal(trainSegmentLength(trainPacket(O.RC_SEND_MIDDLE, 2, 256, { ackReq: true }).p, 2), -1, 'AckReq');
  assert.equal(trainSegmentLength(trainPacket(O.RC_SEND_MIDDLE, 2, 256, { se: true }).p, 2), -1, 'SE');
  assert.equal(trainSegmentLength(trainPacket(O.RC_SEND_LAST, 2, 256).p, 2), -1, 'a LAST');
  assert.equal(trainSegmentLength(trainPacket(O.RC_SEND_ONLY, 2, 256).p, 2), -1, 'an ONLY');
  assert.equal(trainSegmentLength(trainPacket(O.UD_SEND_ONLY, 2, 256, { deth: { qkey: 1, srcQp: 2 } }).p, 2), -1, 'UD');
});

test('a train stands for the packets the per-packet path builds, byte for byte (PSNs across the 24-bit wrap)', () => {
  for (const [op0, reth] of [
    [O.RC_RDMA_WRITE_FIRST, { va: 0x1122334455667788n, rkey: 0xabcdef01, len: 5 * 256 + 7 }],
    [O.UC_SEND_MIDDLE, undefined],
  ]) {
    const n = 5;
    const seg = 256;
    const { p, payload } = trainPacket(op0, n, seg, { psn: 0xfffffe, reth });
    const got = expandTrain(p, n, seg);
    const mid = trainMiddleOpcode(op0);
    assert.equal(got.length, n);
    for (let i = 0; i < n; i++) {
      const spec = { opcode: i === 0 ? op0 : mid, destQp: 0x1234, psn: (0xfffffe + i) & 0xffffff, payload: payload.subarray(i * seg, (i + 1) * seg) };
      if (i === 0 && reth) spec.reth = reth;
      assert.ok(got[i].equals(noIcrc(spec)), `segment ${i}`);
    }
    // Stepping the parsed packet through the segments gives the same fields as parsing each.
    const payload0 = p.payloadOff;
    p.payloadLen = seg;
    for (let i = 0; i < n; i++) {
      if (i > 0) trainStep(p, i, mid, seg, payload0);
      const q = new RocePacket();
      assert.equal(parseRocePacket(got[i], 0, got[i].length, q, { pkey: null }), null);
      assert.deepEqual([p.opcode, p.mask, p.psn, p.payloadLen, p.ackReq, p.se], [q.opcode, q.mask, q.psn, q.payloadLen, q.ackReq, q.se], `segment ${i} fields`);
      assert.ok(Buffer.from(p.buf.subarray(p.payloadOff, p.payloadOff + seg)).equals(got[i].subarray(q.payloadOff, q.payloadOff + seg)), `segment ${i} payload`);
    }
  }
});

/**
 * Run `sizes` through an RC (or UC) pair on rxe_lo: a WRITE and a SEND of each size, from an
 * odd offset; returns the bytes placed, the completions (status, opcode, byte length) and the
 * device's packet counters moved.
 */
async function transfer(qpType, sizes, pathMtu) {
  const { ctx, pd, a, b, cqA, cqB } = wiredRcPair({ qpType, pathMtu });
  const total = sizes.reduce((s, n) => s + n + 64, 0);
  const src = Buffer.alloc(total + 3);
  for (let i = 0; i < src.length; i++) src[i] = (i * 31 + (i >> 9)) & 0xff;
  const wdst = Buffer.alloc(total + 3);
  const sdst = Buffer.alloc(total + 3);
  const smr = pd.regMr(src, Access.LOCAL_WRITE);
  const wmr = pd.regMr(wdst, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const rmr = pd.regMr(sdst, Access.LOCAL_WRITE);
  const before = ctx.queryCounters();
  let off = 3;
  const sends = [];
  for (const [i, n] of sizes.entries()) {
    b.postRecv({ wrId: i, sgList: [{ addr: rmr.addr + off, length: n + 64, lkey: rmr.lkey }] });
    a.postSend({ wrId: 2 * i, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: smr.addr + off, length: n, lkey: smr.lkey }], rdma: { remoteAddr: wmr.addr + off, rkey: wmr.rkey } });
    a.postSend({ wrId: 2 * i + 1, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: smr.addr + off, length: n, lkey: smr.lkey }] });
    sends.push([off, n]);
    off += n + 64;
  }
  const got = { a: [], b: [] };
  await until(() => ((got.a.push(...drain(cqA)), got.b.push(...drain(cqB))), got.a.length === 2 * sizes.length && got.b.length === sizes.length), 20_000);
  await new Promise((r) => setTimeout(r, 20));
  const after = ctx.queryCounters();
  const moved = Object.fromEntries(['sent_pkts', 'rcvd_pkts', 'rdma_sends', 'rdma_recvs', 'completer_retry_err', 'rcvd_seq_err', 'rcvd_bad_length_drop', 'rcvd_icrc_err_drop', 'out_of_seq_request', 'duplicate_request'].map((k) => [k, after[k] - before[k]]));
  const wcs = (l) => l.map((w) => [Number(w.wrId), w.status, w.opcode, w.byteLen]).sort((x, y) => x[0] - y[0]);
  return { wdst, sdst, src, sends, wcs: { a: wcs(got.a), b: wcs(got.b) }, moved };
}

for (const qpType of [QpType.RC, QpType.UC]) {
  const name = qpType === QpType.RC ? 'RC' : 'UC';
  test(`${name} on rxe_lo: every size comes out the same with trains as without (memory, completions, packet counts)`, { timeout: 60_000 }, async () => {
    const mtu = 256; // pathMtu 1
    const sizes = [1, mtu - 1, mtu, mtu + 1, 2 * mtu, 3 * mtu, 3 * mtu + 5, 15 * mtu, 16 * mtu, 17 * mtu + 1, 63 * mtu, 64 * mtu, 65 * mtu, 130 * mtu + 9, 300 * mtu];
    const trains = await transfer(qpType, sizes, 1);
    // A capture turns trains off (it records packets one by one): the same transfer, per packet.
    const dir = mkdtempSync(join(tmpdir(), 'rdmacm-train-'));
    let single;
    try {
      const cap = lib.startCapture('rxe_lo', join(dir, 'x.pcapng'));
      single = await transfer(qpType, sizes, 1);
      await cap.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    for (const r of [trains, single]) {
      for (const [off, n] of r.sends) {
        assert.ok(r.wdst.subarray(off, off + n).equals(r.src.subarray(off, off + n)), `WRITE of ${n} B placed`);
        assert.ok(r.sdst.subarray(off, off + n).equals(r.src.subarray(off, off + n)), `SEND of ${n} B placed`);
      }
      assert.ok(r.wcs.a.every((w) => w[1] === WcStatus.SUCCESS));
      assert.ok(r.wcs.b.every((w) => w[1] === WcStatus.SUCCESS));
    }
    assert.deepEqual(trains.wcs, single.wcs, 'the same completions');
    assert.deepEqual(trains.moved, single.moved, 'the same packets sent and received, nothing dropped or resent');
    const data = sizes.reduce((s, n) => s + 2 * Math.max(1, Math.ceil(n / mtu)), 0);
    assert.ok(trains.moved.sent_pkts >= data, `${trains.moved.sent_pkts} packets for ${data} data packets`);
    assert.equal(trains.moved.rcvd_pkts, trains.moved.sent_pkts, 'every packet received');
  });
}

test('a train handed over by hand is executed segment by segment; a malformed one is dropped and counted, never executed', { timeout: 30_000 }, async () => {
  const { ctx, pd, b } = wiredRcPair({ pathMtu: 1, psnA: 0x200 });
  const dst = Buffer.alloc(8 * 256);
  const mr = pd.regMr(dst, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const seg = 256;
  const payload = Buffer.alloc(5 * seg);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 7 + 1) & 0xff;
  const reth = { va: BigInt(mr.addr), rkey: mr.rkey, len: payload.length };
  const dest = b.qpNum;
  const flags = (n) => 0x01 | (n << 4);
  const bad = (opcode, n, bytes, extra = {}) => fwdFrame(noIcrc({ opcode, destQp: dest, psn: 0x200, payload: payload.subarray(0, bytes), ...extra }), flags(n));
  const c0 = ctx.queryCounters();
  await handOver(dest, [
    bad(O.RC_RDMA_WRITE_LAST, 2, 2 * seg), // a LAST cannot start a train
    bad(O.RC_RDMA_WRITE_FIRST, 3, 2 * seg, { reth }), // 512 B in 3 segments
    bad(O.RC_RDMA_WRITE_FIRST, 2, 2 * seg, { reth, ackReq: true }), // AckReq inside a train
  ]);
  await until(() => ctx.queryCounters().rcvd_bad_length_drop - c0.rcvd_bad_length_drop >= 3, 3000);
  assert.equal(b.state, lib.QpState.RTS, 'the QP goes on');
  // The shape of a train, but segments of 512 B on a path MTU of 256: the responder refuses the
  // first segment as it would that packet (invalid request: the QP to ERR), placing nothing.
  await handOver(dest, [bad(O.RC_RDMA_WRITE_FIRST, 2, 2 * 512, { reth })]);
  await until(() => b.state === lib.QpState.ERR, 3000);
  let c = ctx.queryCounters();
  assert.equal(c.rcvd_bad_length_drop - c0.rcvd_bad_length_drop, 3, 'the three malformed trains, and only those, dropped as bad lengths');
  assert.ok(dst.every((x) => x === 0), 'nothing placed');
  destroyPairs();

  // A fresh pair: a WRITE of five segments as a train of four, then its LAST as a packet.
  const p2 = wiredRcPair({ pathMtu: 1, psnA: 0x300 });
  const mr2 = p2.pd.regMr(dst, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const reth2 = { va: BigInt(mr2.addr), rkey: mr2.rkey, len: payload.length };
  const d2 = p2.b.qpNum;
  const c1 = p2.ctx.queryCounters();
  await handOver(d2, [
    fwdFrame(noIcrc({ opcode: O.RC_RDMA_WRITE_FIRST, destQp: d2, psn: 0x300, payload: payload.subarray(0, 4 * seg), reth: reth2 }), flags(4)),
    fwdFrame(noIcrc({ opcode: O.RC_RDMA_WRITE_LAST, destQp: d2, psn: 0x304, ackReq: true, payload: payload.subarray(4 * seg) }), 0x01),
  ]);
  await until(() => dst.subarray(0, payload.length).equals(payload), 3000);
  c = p2.ctx.queryCounters();
  assert.ok(c.rcvd_pkts - c1.rcvd_pkts >= 5, 'four segments and the LAST received');
  assert.equal(c.rcvd_bad_length_drop - c1.rcvd_bad_length_drop, 0);

  // A UD QP takes no train: a UD SEND its checks accept, flagged as one, is dropped as a bad length.
  const ud = udQp(p2.pd, p2.ctx.createCq(4), 0x11111111);
  const c2 = p2.ctx.queryCounters();
  await handOver(ud.qpNum, [fwdFrame(noIcrc({ opcode: O.UD_SEND_ONLY, destQp: ud.qpNum, psn: 0, deth: { qkey: 0x11111111, srcQp: 5 }, payload: payload.subarray(0, 2 * seg) }), flags(2))]);
  await until(() => p2.ctx.queryCounters().rcvd_bad_length_drop - c2.rcvd_bad_length_drop >= 1, 3000);
  ud.destroy();
});
