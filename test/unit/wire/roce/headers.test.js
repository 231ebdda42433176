// BTH and extension header accessors: every field read back as written, setters touch only their
// own bits, byte positions against hand-written vectors, PSN ring arithmetic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roce } from '../../../../dist/wire/index.js';
import { rng } from './roce-util.js';

test('BTH byte layout (vector) and readBth/writeBth round trip', () => {
  const b = new Uint8Array(14).fill(0xee);
  const h = { opcode: 0x65, se: true, mig: false, pad: 3, tver: 0, pkey: 0xffff, fecn: true, becn: false, destQp: 0x123456, ackReq: true, psn: 0xabcdef };
  assert.equal(roce.writeBth(b, 1, h), 13);
  assert.deepEqual([...b], [0xee, 0x65, 0xb0, 0xff, 0xff, 0x80, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef, 0xee]);
  assert.deepEqual(roce.readBth(b, 1), h);
  const next = rng(7);
  for (let i = 0; i < 500; i++) {
    const r = next();
    const x = {
      opcode: r & 0xff, se: !!(r & 0x100), mig: !!(r & 0x200), pad: (r >>> 10) & 3, tver: (r >>> 12) & 15,
      pkey: next() & 0xffff, fecn: !!(r & 0x10000), becn: !!(r & 0x20000), destQp: next() & 0xffffff,
      ackReq: !!(r & 0x40000), psn: next() & 0xffffff,
    };
    const buf = new Uint8Array(12);
    roce.writeBth(buf, 0, x);
    assert.deepEqual(roce.readBth(buf, 0), x);
    assert.equal(buf[4] & 0x3f, 0, 'resv6a zero');
    assert.equal(buf[8] & 0x7f, 0, 'resv7 zero');
  }
});

test('each BTH setter changes only its own field', () => {
  const fields = [
    ['opcode', roce.setBthOpcode, roce.bthOpcode, (r) => r & 0xff],
    ['se', roce.setBthSe, roce.bthSe, (r) => !!(r & 1)],
    ['mig', roce.setBthMig, roce.bthMig, (r) => !!(r & 1)],
    ['pad', roce.setBthPad, roce.bthPad, (r) => r & 3],
    ['tver', roce.setBthTver, roce.bthTver, (r) => r & 15],
    ['pkey', roce.setBthPkey, roce.bthPkey, (r) => r & 0xffff],
    ['fecn', roce.setBthFecn, roce.bthFecn, (r) => !!(r & 1)],
    ['becn', roce.setBthBecn, roce.bthBecn, (r) => !!(r & 1)],
    ['destQp', roce.setBthQpn, roce.bthQpn, (r) => r & 0xffffff],
    ['ackReq', roce.setBthAckReq, roce.bthAckReq, (r) => !!(r & 1)],
    ['psn', roce.setBthPsn, roce.bthPsn, (r) => r & 0xffffff],
  ];
  const next = rng(11);
  for (let i = 0; i < 300; i++) {
    const b = new Uint8Array(16);
    for (let k = 0; k < 16; k++) b[k] = next();
    const off = 2;
    const before = roce.readBth(b, off);
    const resv = [b[off + 4] & 0x3f, b[off + 8] & 0x7f, b[0], b[1], b[14], b[15]];
    const [name, set, get, gen] = fields[i % fields.length];
    const v = gen(next());
    set(b, off, v);
    assert.equal(get(b, off), v, name);
    assert.deepEqual(roce.readBth(b, off), { ...before, [name]: v }, name);
    assert.deepEqual([b[off + 4] & 0x3f, b[off + 8] & 0x7f, b[0], b[1], b[14], b[15]], resv, `${name}: reserved bits kept`);
  }
});

test('P_Key match (rxe pkey_match)', () => {
  assert.equal(roce.pkeyMatch(0xffff, 0xffff), true);
  assert.equal(roce.pkeyMatch(0x7fff, 0xffff), true);
  assert.equal(roce.pkeyMatch(0xffff, 0x7fff), true);
  assert.equal(roce.pkeyMatch(0x7fff, 0x7fff), false, 'two limited members');
  assert.equal(roce.pkeyMatch(0x8001, 0xffff), false);
  assert.equal(roce.pkeyMatch(0x8000, 0x8000), false, 'invalid P_Key');
});

test('extension header vectors (byte positions)', () => {
  const b = new Uint8Array(32);
  roce.writeDeth(b, 0, 0x80010000, 0xabcdef);
  assert.deepEqual([...b.subarray(0, 8)], [0x80, 0x01, 0x00, 0x00, 0x00, 0xab, 0xcd, 0xef]);
  assert.equal(roce.dethQkey(b, 0), 0x80010000);
  assert.equal(roce.dethSrcQp(b, 0), 0xabcdef);

  b.fill(0);
  roce.writeReth(b, 0, 0x0102030405060708n, 0x11223344, 0x55667788);
  assert.deepEqual([...b.subarray(0, 16)], [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
  assert.equal(roce.rethVa(b, 0), roce.VA_OVERFLOW, 'above 2^53');
  assert.equal(roce.rethVaBig(b, 0), 0x0102030405060708n);
  assert.equal(roce.rethRkey(b, 0), 0x11223344);
  assert.equal(roce.rethLen(b, 0), 0x55667788);
  roce.writeReth(b, 0, 2 ** 53 - 1, 1, 2);
  assert.equal(roce.rethVa(b, 0), 2 ** 53 - 1);
  assert.deepEqual([...b.subarray(0, 8)], [0, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

  b.fill(0);
  roce.writeAeth(b, 0, 0x61, 0x010203);
  assert.deepEqual([...b.subarray(0, 4)], [0x61, 1, 2, 3]);
  assert.equal(roce.aethSyndrome(b, 0), 0x61);
  assert.equal(roce.aethMsn(b, 0), 0x010203);

  b.fill(0);
  roce.writeAtmeth(b, 0, 0x1000, 0xdeadbeef, 0xffffffffffffffffn, 0x8000000000000001n);
  assert.deepEqual([...b.subarray(0, 28)], [
    0, 0, 0, 0, 0, 0, 0x10, 0, 0xde, 0xad, 0xbe, 0xef,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1,
  ]);
  assert.equal(roce.atmethVa(b, 0), 0x1000);
  assert.equal(roce.atmethVaBig(b, 0), 0x1000n);
  assert.equal(roce.atmethRkey(b, 0), 0xdeadbeef);
  assert.equal(roce.atmethSwapAdd(b, 0), 0xffffffffffffffffn);
  assert.equal(roce.atmethCompare(b, 0), 0x8000000000000001n);

  b.fill(0);
  roce.writeAtmack(b, 0, -1n);
  assert.equal(roce.atmackOrig(b, 0), 0xffffffffffffffffn, 'negative bigint taken mod 2^64');
  roce.writeImmDt(b, 8, 0x01020304);
  assert.deepEqual([...b.subarray(8, 12)], [1, 2, 3, 4]);
  assert.equal(roce.immDt(b, 8), 0x01020304);
  roce.writeIeth(b, 12, 0xfedcba98);
  assert.equal(roce.iethRkey(b, 12), 0xfedcba98);
  roce.writeFeth(b, 16, 0xf, 3);
  assert.deepEqual([...b.subarray(16, 20)], [0, 0, 0, 0x3f]);
  assert.equal(roce.fethPlacementType(b, 16), 0xf);
  assert.equal(roce.fethSelectivity(b, 16), 3);
  roce.writeRdeth(b, 20, 0x123456);
  assert.deepEqual([...b.subarray(20, 24)], [0, 0x12, 0x34, 0x56]);
  assert.equal(roce.rdethEecn(b, 20), 0x123456);
});

test('extension header round trips at random offsets', () => {
  const next = rng(3);
  const big = () => (BigInt(next()) << 32n) | BigInt(next());
  for (let i = 0; i < 300; i++) {
    const b = new Uint8Array(64);
    const o = next() % 30;
    const va = big();
    const rkey = next();
    const len = next();
    roce.writeReth(b, o, va, rkey, len);
    assert.deepEqual([roce.rethVaBig(b, o), roce.rethRkey(b, o), roce.rethLen(b, o)], [va, rkey, len]);
    const sw = big();
    const cmp = big();
    roce.writeAtmeth(b, o, va, rkey, sw, cmp);
    assert.deepEqual([roce.atmethVaBig(b, o), roce.atmethRkey(b, o), roce.atmethSwapAdd(b, o), roce.atmethCompare(b, o)], [va, rkey, sw, cmp]);
    const q = next();
    const sqp = next() & 0xffffff;
    roce.writeDeth(b, o, q, sqp);
    assert.deepEqual([roce.dethQkey(b, o), roce.dethSrcQp(b, o)], [q, sqp]);
    const syn = next() & 0xff;
    const msn = next() & 0xffffff;
    roce.writeAeth(b, o, syn, msn);
    assert.deepEqual([roce.aethSyndrome(b, o), roce.aethMsn(b, o)], [syn, msn]);
    const n = next() % 2 ** 21 * 2 ** 32 + next();
    roce.writeU64(b, o, n);
    assert.equal(roce.readU64(b, o), n);
    assert.equal(roce.readU64Big(b, o), BigInt(n));
  }
});

test('PSN arithmetic wraps at 2^24', () => {
  assert.equal(roce.psnAdd(0xffffff, 1), 0);
  assert.equal(roce.psnAdd(0, -1), 0xffffff);
  assert.equal(roce.psnNext(0xfffffe), 0xffffff);
  assert.equal(roce.psnDiff(0, 0xffffff), 1);
  assert.equal(roce.psnDiff(0xffffff, 0), -1);
  assert.equal(roce.psnDiff(0x7fffff, 0), 0x7fffff);
  assert.equal(roce.psnDiff(0x800000, 0), -0x800000);
  assert.equal(roce.psnCompare(5, 5), 0);
  assert.equal(roce.psnBefore(0xfffff0, 3), true);
  assert.equal(roce.psnAfter(3, 0xfffff0), true);
  assert.equal(roce.psnAfter(0xfffff0, 3), false);
  const next = rng(5);
  for (let i = 0; i < 1000; i++) {
    const a = next() & 0xffffff;
    const d = (next() % 0x1000000) - 0x800000;
    assert.equal(roce.psnDiff(roce.psnAdd(a, d), a), d);
  }
});
