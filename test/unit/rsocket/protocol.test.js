// rsocket wire codecs (src/rsocket/protocol.ts): byte vectors written from rsocket.c's layouts
// (struct rs_conn_data, rs_sge, rs_iomap, the 32-bit message), round trips, and a naive DataView
// reference codec to compare against on random values.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  RsOp,
  RsCtrl,
  rsMsgSet,
  rsMsgOp,
  rsMsgData,
  rsMsgStr,
  encodeMsg,
  decodeMsg,
  encodeConnData,
  decodeConnData,
  encodeSge,
  decodeSge,
  encodeIomap,
  decodeIomap,
  valueToScale,
  scaleToValue,
  roundIomapSize,
  seqDiff16,
  RS_CONN_DATA_SIZE,
  RS_CONN_FLAG_IOMAP,
  RS_CONN_FLAG_NET,
  HOST_IS_BIG_ENDIAN,
} from '../../../dist/rsocket/protocol.js';

const hex = (u8) => Buffer.from(u8).toString('hex');

test('message values: op in bits 31..29, data in 28..0 (rsocket.c rs_msg_set)', () => {
  assert.equal(rsMsgSet(RsOp.DATA, 4096), 0x00001000);
  assert.equal(rsMsgSet(RsOp.SGL, 0x1ff), 0x800001ff);
  assert.equal(rsMsgSet(RsOp.IOMAP_SGL, 3), 0xc0000003);
  assert.equal(rsMsgSet(RsOp.CTRL, RsCtrl.DISCONNECT), 0xe0000000);
  assert.equal(rsMsgSet(RsOp.CTRL, RsCtrl.SHUTDOWN), 0xe0000002);
  assert.equal(rsMsgSet(RsOp.WRITE, 10), 0x4000000a);
  // data is masked to 29 bits; the credit value rseq_no + rq_size may exceed 16 bits
  assert.equal(rsMsgSet(RsOp.SGL, 0xffff + 0xfffe), 0x8001fffd);
  assert.equal(rsMsgSet(RsOp.DATA, 0x3fffffff), 0x1fffffff);
  for (const m of [0, 0x1fffffff, 0x80000180, 0xe0000002, 0xffffffff]) {
    assert.equal(rsMsgSet(rsMsgOp(m), rsMsgData(m)), m >>> 0);
  }
  assert.equal(rsMsgStr(0xe0000002), 'CTRL SHUTDOWN');
  assert.equal(rsMsgStr(0x00000040), 'DATA 64');
  assert.equal(rsMsgStr(0x80000180), 'SGL 384');
});

test('iWARP message SEND payload: 4 bytes in the sender host order (little-endian here)', () => {
  assert.equal(HOST_IS_BIG_ENDIAN, false);
  assert.equal(hex(encodeMsg(0xe0000002)), '020000e0');
  assert.equal(hex(encodeMsg(0xe0000002, true)), 'e0000002');
  assert.equal(hex(encodeMsg(rsMsgSet(RsOp.DATA, 0x12345))), '45230100');
  assert.equal(decodeMsg(Buffer.from('020000e0', 'hex')), 0xe0000002);
  assert.equal(decodeMsg(Buffer.from('e0000002', 'hex'), 0, true), 0xe0000002);
  const out = Buffer.alloc(12, 0xee);
  encodeMsg(0x80000123, false, out, 4);
  assert.equal(hex(out), 'eeeeeeee' + '23010080' + 'eeeeeeee');
  assert.equal(decodeMsg(out, 4), 0x80000123);
});

test('rs_conn_data: 40 bytes, big-endian fields (byte vector)', () => {
  const cd = {
    version: 1,
    flags: RS_CONN_FLAG_IOMAP,
    credits: 384,
    targetIomapSize: 1,
    targetSgl: { addr: 0x0011223344556677, key: 0xaabbccdd, length: 2 },
    dataBuf: { addr: 0x10000000, key: 0x1234, length: 65536 },
  };
  const b = encodeConnData(cd);
  assert.equal(b.length, RS_CONN_DATA_SIZE);
  assert.equal(
    hex(b),
    '01020180' + '000000' + '01' +
      '0011223344556677' + 'aabbccdd' + '00000002' +
      '0000000010000000' + '00001234' + '00010000',
  );
  assert.deepEqual(decodeConnData(b), cd);
  // within a larger buffer, at an offset (AF_IB's 36-byte header prefix)
  const big = Buffer.alloc(76);
  encodeConnData(cd, big, 36);
  assert.deepEqual(decodeConnData(big, 36), cd);
});

test('rs_conn_data: refusals (short, other version, address beyond 2^53)', () => {
  const cd = { version: 1, flags: 2, credits: 16, targetIomapSize: 0, targetSgl: { addr: 8, key: 1, length: 2 }, dataBuf: { addr: 16, key: 2, length: 4 } };
  const b = Buffer.from(encodeConnData(cd));
  assert.equal(decodeConnData(b.subarray(0, 39)), 'short');
  const v2 = Buffer.from(b);
  v2[0] = 2;
  assert.equal(decodeConnData(v2), 'version');
  const far = Buffer.from(b);
  far.writeBigUInt64BE(1n << 60n, 8);
  assert.equal(decodeConnData(far), 'address');
  const netFlag = Buffer.from(b);
  netFlag[1] = RS_CONN_FLAG_NET | RS_CONN_FLAG_IOMAP;
  assert.equal(decodeConnData(netFlag).flags, 3);
});

test('rs_sge and rs_iomap in either byte order (what RDMA writes into the peer target list)', () => {
  const s = { addr: 0x7fff12345678, key: 0x01020304, length: 0x80000 };
  assert.equal(hex(encodeSge(s, true)), '78563412ff7f0000' + '04030201' + '00000800');
  assert.equal(hex(encodeSge(s, false)), '00007fff12345678' + '01020304' + '00080000');
  assert.deepEqual(decodeSge(encodeSge(s, true), 0, true), s);
  assert.deepEqual(decodeSge(encodeSge(s, false), 0, false), s);
  const m = { offset: 0, sge: { addr: 0x10004000, key: 0x4500, length: 1000 } };
  assert.equal(hex(encodeIomap(m, true)), '0000000000000000' + '0040001000000000' + '00450000' + 'e8030000');
  assert.deepEqual(decodeIomap(encodeIomap(m, true), 0, true), m);
  assert.deepEqual(decodeIomap(encodeIomap(m, false), 0, false), m);
});

test('iomap size scale (rs_value_to_scale / rs_scale_to_value, 8 bits)', () => {
  const table = [
    [0, 0, 0],
    [1, 1, 1],
    [127, 127, 127],
    [128, 128, 128],
    [129, 0x80, 128],
    [255, 0x80, 128],
    [256, 0x81, 256],
    [1000, 0x83, 768],
    [0x7fff, 0xff, 0x7f00],
  ];
  for (const [v, scale, back] of table) {
    assert.equal(valueToScale(v), scale, `scale(${v})`);
    assert.equal(scaleToValue(scale), back, `value(${scale})`);
    assert.equal(roundIomapSize(v), back, `round(${v})`);
  }
});

test('16-bit sequence difference (int16)(a - b)', () => {
  assert.equal(seqDiff16(5, 3), 2);
  assert.equal(seqDiff16(3, 5), -2);
  assert.equal(seqDiff16(0, 0xffff), 1);
  assert.equal(seqDiff16(0xffff, 0), -1);
  assert.equal(seqDiff16(0x8000, 0), -32768);
  assert.equal(seqDiff16(0x7fff, 0), 32767);
});

// A naive reference codec with DataView, compared on random values.
function refConnData(c) {
  const b = new ArrayBuffer(40);
  const v = new DataView(b);
  v.setUint8(0, c.version);
  v.setUint8(1, c.flags);
  v.setUint16(2, c.credits);
  v.setUint8(7, c.targetIomapSize);
  v.setBigUint64(8, BigInt(c.targetSgl.addr));
  v.setUint32(16, c.targetSgl.key);
  v.setUint32(20, c.targetSgl.length);
  v.setBigUint64(24, BigInt(c.dataBuf.addr));
  v.setUint32(32, c.dataBuf.key);
  v.setUint32(36, c.dataBuf.length);
  return new Uint8Array(b);
}

test('random round trips against a DataView reference', () => {
  let seed = 12345;
  const rnd = (n) => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed % n;
  };
  for (let i = 0; i < 500; i++) {
    const c = {
      version: 1,
      flags: rnd(4),
      credits: rnd(0x10000),
      targetIomapSize: rnd(256),
      targetSgl: { addr: rnd(2 ** 31) * 2 ** 20 + rnd(2 ** 20), key: rnd(2 ** 32), length: rnd(2 ** 32) },
      dataBuf: { addr: rnd(2 ** 31) * 2 ** 20 + rnd(2 ** 20), key: rnd(2 ** 32), length: rnd(2 ** 32) },
    };
    const mine = encodeConnData(c);
    assert.equal(hex(mine), hex(refConnData(c)));
    assert.deepEqual(decodeConnData(mine), c);
    const m = rnd(2 ** 32);
    assert.equal(decodeMsg(encodeMsg(m)), m);
    assert.equal(decodeMsg(encodeMsg(m, true), 0, true), m);
  }
});
