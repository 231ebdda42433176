// RoCEv2 packet build/parse: round trips for every opcode, each drop reason, the parse view
// offsets, the UDP source port rules and the MTU functions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roce } from '../../../../dist/wire/index.js';
import { randomBytes, rng } from './roce-util.js';

const { IB_OPCODES, IbOpcode, OpMask, Hdr, RoceDrop } = roce;
const NET = { family: 4, src: Uint8Array.of(192, 168, 1, 1), dst: Uint8Array.of(192, 168, 1, 2), sport: 0xd123, ipId: 77 };

/** A random spec for an opcode, with every extension header it carries. */
function randomSpec(next, op) {
  const info = IB_OPCODES[op];
  const big = () => (BigInt(next()) << 32n) | BigInt(next());
  const gsi = op >= 0x60 && op < 0x80 && (next() & 1) === 1;
  const s = {
    opcode: op, destQp: gsi ? 1 : 2 + (next() % 0xfffff0), psn: next() & 0xffffff, se: !!(next() & 1), mig: !!(next() & 1),
    pkey: 0xffff, ackReq: !!(next() & 1), fecn: !!(next() & 1), becn: !!(next() & 1), tver: 0,
  };
  const m = info.mask;
  if (m & OpMask.RDETH) s.rdeth = { eecn: next() & 0xffffff };
  if (m & OpMask.DETH) s.deth = { qkey: gsi ? 0x80010000 : next(), srcQp: next() & 0xffffff };
  if (m & OpMask.FETH) s.feth = { placementType: next() & 15, selectivity: next() & 3 };
  if (m & OpMask.RETH) s.reth = { va: big(), rkey: next(), len: next() };
  if (m & OpMask.ATMETH) s.atmeth = { va: big(), rkey: next(), swapAdd: big(), compare: big() };
  if (m & OpMask.AETH) s.aeth = { syndrome: next() & 0xff, msn: next() & 0xffffff };
  if (m & OpMask.ATMACK) s.atmack = big();
  if (m & OpMask.IMMDT) s.immDt = next();
  if (m & OpMask.IETH) s.ieth = next();
  if (m & OpMask.PAYLOAD) s.payload = randomBytes(next, next() % 300);
  return s;
}

const SUPPORTED = IB_OPCODES.filter((i) => i.valid && (i.opcode & 0xe0) !== roce.IbTransport.RD).map((i) => i.opcode);

test('encode/decode round trip for every opcode (random fields, all pad counts)', () => {
  const next = rng(2024);
  for (let i = 0; i < 1500; i++) {
    const op = SUPPORTED[i % SUPPORTED.length];
    const spec = randomSpec(next, op);
    const bytes = roce.encodeRocePacket(spec, NET);
    const plen = spec.payload?.length ?? 0;
    assert.equal(bytes.length, roce.rocePacketLength(op, plen));
    assert.equal(bytes.length % 4, 0);
    assert.equal(roce.bthPad(bytes, 0), roce.rocePad(plen));
    const d = roce.decodeRocePacket(bytes, { net: NET });
    assert.ok(d.ok, `${IB_OPCODES[op].name}: ${d.drop}`);
    const want = { ...spec };
    if (want.reth) want.reth = { ...want.reth, va: BigInt(want.reth.va) };
    if (want.atmeth) want.atmeth = { ...want.atmeth, va: BigInt(want.atmeth.va) };
    assert.deepEqual(d.spec, want, IB_OPCODES[op].name);
    assert.equal(d.ipId, 77);
    assert.deepEqual(roce.encodeRocePacket(d.spec, NET), bytes, 'decode then encode reproduces the bytes');
    // pad bytes are zero
    for (let k = 0; k < roce.rocePad(plen); k++) assert.equal(bytes[bytes.length - 5 - k], 0);
  }
});

test('parse view: offsets, payload view and header accessors, no allocation of its own', () => {
  const spec = {
    opcode: IbOpcode.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, destQp: 0x42, psn: 0xfffffe, ackReq: true,
    reth: { va: 0x1000, rkey: 0x77, len: 5 }, immDt: 0xcafef00d, payload: Uint8Array.of(1, 2, 3, 4, 5),
  };
  const pkt = roce.encodeRocePacket(spec, NET);
  const buf = new Uint8Array(pkt.length + 10);
  buf.set(pkt, 6);
  const p = new roce.RocePacket();
  assert.equal(roce.parseRocePacket(buf, 6, 6 + pkt.length, p, { net: NET }), null);
  assert.equal(p.opcode, spec.opcode);
  assert.equal(p.info.name, 'RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE');
  assert.equal(p.hdrOffset(Hdr.RETH), 6 + 12);
  assert.equal(p.hdrOffset(Hdr.IMMDT), 6 + 28);
  assert.equal(p.hdrOffset(Hdr.DETH), -1);
  assert.equal(p.payloadOff, 6 + 32);
  assert.equal(p.payloadLen, 5);
  assert.equal(p.pad, 3);
  assert.deepEqual(p.payload(), spec.payload);
  assert.equal(p.payload().buffer, buf.buffer, 'payload is a view');
  assert.equal(roce.rethVa(buf, p.hdrOffset(Hdr.RETH)), 0x1000);
  assert.equal(roce.immDt(buf, p.hdrOffset(Hdr.IMMDT)), 0xcafef00d);
  assert.deepEqual([p.destQp, p.psn, p.ackReq, p.se, p.pkey], [0x42, 0xfffffe, true, false, 0xffff]);
  assert.equal(p.ipId, 77);
  // without net the ICRC is not checked, with an IPv4 net lacking ipId it is recovered
  assert.equal(roce.parseRocePacket(buf, 6, 6 + pkt.length, p), null);
  assert.equal(p.ipId, -1);
  const { ipId, ...noId } = NET;
  assert.equal(roce.parseRocePacket(buf, 6, 6 + pkt.length, p, { net: noId }), null);
  assert.equal(p.ipId, ipId);
});

test('each drop reason', () => {
  const p = new roce.RocePacket();
  const ud = (over = {}) => ({ opcode: IbOpcode.UD_SEND_ONLY, destQp: 0x11, psn: 1, deth: { qkey: 0x1234, srcQp: 0x12 }, payload: Uint8Array.of(1, 2, 3, 4, 5, 6), ...over });
  const parse = (bytes, opts = { net: NET }) => roce.parseRocePacket(bytes, 0, bytes.length, p, opts);
  const good = roce.encodeRocePacket(ud(), NET);
  assert.equal(parse(good), null);

  assert.equal(parse(good.subarray(0, 15)), RoceDrop.TOO_SHORT);
  assert.equal(roce.parseRocePacket(good, 0, good.length + 1, p), RoceDrop.TOO_SHORT, 'end beyond the buffer');
  assert.equal(parse(roce.encodeRocePacket(ud({ tver: 1 }), NET)), RoceDrop.BAD_TVER);
  for (const op of [0x15, 0x18, 0x2c, 0x44, 0x63, 0x66, 0x80, 0xe0, 0xff]) {
    const b = Uint8Array.from(good);
    b[0] = op;
    assert.equal(parse(b, {}), RoceDrop.BAD_OPCODE, `opcode 0x${op.toString(16)}`);
  }
  // an RC Write ONLY whose RETH is cut off
  const w = roce.encodeRocePacket({ opcode: IbOpcode.RC_RDMA_WRITE_ONLY, destQp: 5, psn: 0, reth: { va: 0, rkey: 1, len: 0 } }, NET);
  assert.equal(w.length, 32);
  const cut = Uint8Array.from(w.subarray(0, 24));
  assert.equal(parse(cut, {}), RoceDrop.TRUNCATED);
  // body not a multiple of 4, pad larger than the body, pad/payload on an ACK
  assert.equal(parse(Uint8Array.of(...good.subarray(0, 30), 0, 0, 0, 0, 0), {}), RoceDrop.BAD_PAD);
  const bigPad = roce.encodeRocePacket(ud({ payload: new Uint8Array(0) }), NET);
  roce.setBthPad(bigPad, 0, 3);
  assert.equal(parse(bigPad, {}), RoceDrop.BAD_PAD);
  const ack = roce.encodeRocePacket({ opcode: IbOpcode.RC_ACKNOWLEDGE, destQp: 5, psn: 0, aeth: { syndrome: 0x1f, msn: 1 } }, NET);
  assert.equal(parse(ack), null);
  const ackPad = Uint8Array.from(ack);
  roce.setBthPad(ackPad, 0, 1);
  assert.equal(parse(ackPad, {}), RoceDrop.BAD_PAD);
  const ackData = new Uint8Array(ack.length + 4);
  ackData.set(ack.subarray(0, 16));
  assert.equal(parse(ackData, {}), RoceDrop.BAD_PAD);
  assert.throws(() => roce.encodeRocePacket({ opcode: IbOpcode.RC_ACKNOWLEDGE, destQp: 5, psn: 0, aeth: { syndrome: 0, msn: 0 }, payload: Uint8Array.of(1) }, NET), { code: 'EINVAL' });

  assert.equal(parse(roce.encodeRocePacket(ud({ destQp: 0 }), NET)), RoceDrop.BAD_QPN);
  const rcToGsi = roce.encodeRocePacket({ opcode: IbOpcode.RC_SEND_ONLY, destQp: 1, psn: 0 }, NET);
  assert.equal(parse(rcToGsi), RoceDrop.BAD_QP_TYPE);
  const ucToMcast = roce.encodeRocePacket({ opcode: IbOpcode.UC_SEND_ONLY, destQp: 0xffffff, psn: 0 }, NET);
  assert.equal(parse(ucToMcast), RoceDrop.BAD_QP_TYPE);
  assert.equal(parse(roce.encodeRocePacket(ud({ destQp: 0xffffff }), NET)), null, 'UD to multicast');

  assert.equal(parse(roce.encodeRocePacket(ud({ pkey: 0x8001 }), NET)), RoceDrop.BAD_PKEY);
  assert.equal(parse(roce.encodeRocePacket(ud({ pkey: 0x7fff }), NET)), null, 'limited member vs full 0xFFFF');
  assert.equal(parse(roce.encodeRocePacket(ud({ pkey: 0x8001 }), NET), { net: NET, pkey: null }), null);

  assert.equal(parse(roce.encodeRocePacket(ud({ destQp: 1 }), NET)), RoceDrop.BAD_QKEY);
  assert.equal(parse(roce.encodeRocePacket(ud({ destQp: 1, deth: { qkey: 0x80010000, srcQp: 1 } }), NET)), null);

  const bad = Uint8Array.from(good);
  bad[good.length - 1] ^= 0x80;
  assert.equal(parse(bad), RoceDrop.ICRC_ERROR);
  const { ipId, ...noId } = NET;
  assert.equal(parse(bad, { net: noId }), RoceDrop.ICRC_ERROR);
  assert.equal(parse(good, { net: { ...NET, dst: Uint8Array.of(192, 168, 1, 3) } }), RoceDrop.ICRC_ERROR);
  assert.equal(parse(good, { net: { ...NET, sport: NET.sport + 1 } }), RoceDrop.ICRC_ERROR);
  assert.deepEqual(new Set(roce.ROCE_DROP_REASONS), new Set(Object.values(RoceDrop)));
});

test('opcodeFitsQp: exact transport class', () => {
  const { IbTransport } = roce;
  assert.equal(roce.opcodeFitsQp(IbOpcode.RC_SEND_ONLY, IbTransport.RC), true);
  assert.equal(roce.opcodeFitsQp(IbOpcode.UC_SEND_ONLY, IbTransport.UD), false, 'rxe lets this one through');
  assert.equal(roce.opcodeFitsQp(IbOpcode.UD_SEND_ONLY, IbTransport.UC), false, 'and this one');
  assert.equal(roce.opcodeFitsQp(IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE, IbTransport.UD), true);
  assert.equal(roce.opcodeFitsQp(IbOpcode.RD_SEND_ONLY, IbTransport.RD), false);
  assert.equal(roce.opcodeFitsQp(0x15, IbTransport.RC), false);
});

test('writeRoceHeaders refuses reserved opcodes and missing extension headers', () => {
  const b = new Uint8Array(64);
  assert.throws(() => roce.writeRoceHeaders(b, 0, { opcode: 0x15, destQp: 1, psn: 0 }, 0), { code: 'EINVAL' });
  assert.throws(() => roce.writeRoceHeaders(b, 0, { opcode: IbOpcode.UD_SEND_ONLY, destQp: 1, psn: 0 }, 0), /needs deth/);
  assert.throws(() => roce.writeRoceHeaders(b, 0, { opcode: IbOpcode.RC_RDMA_READ_REQUEST, destQp: 1, psn: 0 }, 0), /needs reth/);
  // zero-copy form: headers, caller writes the payload, then pad + ICRC
  const end = roce.writeRoceHeaders(b, 4, { opcode: IbOpcode.RC_SEND_ONLY, destQp: 9, psn: 3 }, 2);
  assert.equal(end, 16);
  b[16] = 0xaa;
  b[17] = 0xbb;
  b[18] = 0xee;
  b[19] = 0xee;
  assert.equal(roce.finishRocePacket(b, 4, 18, NET), 24);
  assert.deepEqual([...b.subarray(18, 20)], [0, 0], 'pad zeroed');
  assert.equal(roce.icrcVerify(NET, b, 4, 24), true);
});

test('UDP source port: rxe hash_32 for new QPs, flow-label port for connected ones', () => {
  // new QPs (UD, GSI): values seen in the kernel captures
  assert.equal(roce.roceUdpSrcPort(1), 55410);
  assert.equal(roce.roceUdpSrcPort(0x11), 57236);
  assert.equal(roce.roceUdpSrcPort(0x12), 63494);
  for (let q = 0; q < 5000; q += 37) {
    const p = roce.roceUdpSrcPort(q);
    assert.ok(p >= 0xc000 && p <= 0xffff);
    assert.equal(p - 0xc000, Number((BigInt(q) * 0x61c88647n) & 0xffffffffn) >>> 18);
  }
  assert.equal(roce.rdmaFlowLabelToUdpSport(0), 0xc000);
  assert.equal(roce.rdmaFlowLabelToUdpSport(0xfffff), 0xc000 | (0x3fff ^ 0x3f));
  assert.equal(roce.rdmaFlowLabelToUdpSport(0x4001), 0xc000 | 0x0000);
  assert.equal(roce.rdmaCalcFlowLabel(0x13, 0x13), 0x169);
  assert.equal(roce.rdmaCalcFlowLabel(0xffffff, 0xffffff), Number(((0xffffffn * 0xffffffn) ^ ((0xffffffn * 0xffffffn) >> 20n) ^ ((((0xffffffn * 0xffffffn) ^ ((0xffffffn * 0xffffffn) >> 20n))) >> 40n)) & 0xfffffn));
  assert.equal(roce.rdmaGetUdpSport(0, 0x13, 0x13), 0xc169);
  assert.equal(roce.rdmaGetUdpSport(0x12345, 1, 2), roce.rdmaFlowLabelToUdpSport(0x12345));
});

test('MTU: IB enum, rxe port MTU, rdma_cm RoCE path MTU', () => {
  assert.deepEqual([1, 2, 3, 4, 5].map(roce.ibMtuToBytes), [256, 512, 1024, 2048, 4096]);
  assert.equal(roce.ibMtuToBytes(0), 0);
  assert.equal(roce.ibMtuToBytes(6), 0);
  assert.equal(roce.ibMtuFromBytes(255), 0);
  assert.equal(roce.ibMtuFromBytes(4095), roce.IbMtu.MTU_2048);
  assert.equal(roce.ibMtuFromBytes(100000), roce.IbMtu.MTU_4096);
  assert.equal(roce.rxePortMtu(1500), roce.IbMtu.MTU_1024);
  assert.equal(roce.rxePortMtu(9000), roce.IbMtu.MTU_4096);
  assert.equal(roce.rxePortMtu(65536), roce.IbMtu.MTU_4096);
  assert.equal(roce.rxePortMtu(300), roce.IbMtu.MTU_256, 'never below 256');
  assert.equal(roce.rxePortMtu(1104), roce.IbMtu.MTU_1024);
  assert.equal(roce.rxePortMtu(1103), roce.IbMtu.MTU_512);
  assert.equal(roce.iboePathMtu(1500), roce.IbMtu.MTU_1024);
  assert.equal(roce.iboePathMtu(1119), roce.IbMtu.MTU_512);
  assert.equal(roce.iboePathMtu(1120), roce.IbMtu.MTU_1024);
  assert.equal(roce.iboePathMtu(300), 0);
});
