// IB CM MADs: every message round-trips (random fields at full width), each packed field lands on
// the bits IBTA chapter 12 gives it (single-field vectors), private data limits, header checks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roce } from '../../../../dist/wire/index.js';
import { KINDS, big, randomBytes, randomCmMessage, rng } from './roce-util.js';

const { CmAttrId, CmPrivateDataLen, encodeCmMad, decodeCmMad } = roce;

test('every CM message round-trips with random full-width fields', () => {
  const next = rng(42);
  for (let i = 0; i < 900; i++) {
    const kind = KINDS[i % KINDS.length];
    const msg = randomCmMessage(next, kind);
    const tid = big(next);
    const mad = encodeCmMad(msg, tid);
    assert.equal(mad.length, 256);
    const d = decodeCmMad(mad);
    assert.deepEqual(d.msg, msg, kind);
    assert.deepEqual(d.hdr, { baseVersion: 1, mgmtClass: 7, classVersion: 2, method: 3, status: 0, classSpecific: 0, tid, attrId: CmAttrId[kind], reserved: 0, attrMod: 0 });
    assert.deepEqual(encodeCmMad(d.msg, d.hdr.tid), mad);
    assert.equal(roce.cmMadHeaderProblem(d.hdr), null);
  }
});

/** MAD bytes changed when one field of a zero message is set to all ones. */
function footprint(kind, field, value, sub) {
  const zero = randomCmMessage(rng(1), kind);
  for (const k of Object.keys(zero)) {
    if (typeof zero[k] === 'number') zero[k] = 0;
    else if (typeof zero[k] === 'boolean') zero[k] = false;
    else if (typeof zero[k] === 'bigint') zero[k] = 0n;
    else if (zero[k] instanceof Uint8Array) zero[k] = new Uint8Array(0);
    else if (k.endsWith('Path')) zero[k] = roce.emptyCmPath();
  }
  const base = encodeCmMad(zero, 0n);
  const m = { ...zero };
  if (sub) m[field] = { ...roce.emptyCmPath(), [sub]: value };
  else m[field] = value;
  const mad = encodeCmMad(m, 0n);
  const diff = {};
  for (let i = 24; i < 256; i++) if (mad[i] !== base[i]) diff[i - 24] = mad[i];
  return diff;
}

test('packed fields sit on their IBTA bits (body offsets)', () => {
  const T = true;
  const cases = [
    ['REQ', 'localCommId', 0xffffffff, null, { 0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff }],
    ['REQ', 'vendorId', 0xffffff, null, { 5: 0xff, 6: 0xff, 7: 0xff }],
    ['REQ', 'serviceId', 0x0102030405060708n, null, { 8: 1, 9: 2, 10: 3, 11: 4, 12: 5, 13: 6, 14: 7, 15: 8 }],
    ['REQ', 'localQkey', 0x01234567, null, { 28: 0x01, 29: 0x23, 30: 0x45, 31: 0x67 }],
    ['REQ', 'localQpn', 0xffffff, null, { 32: 0xff, 33: 0xff, 34: 0xff }],
    ['REQ', 'responderResources', 0xff, null, { 35: 0xff }],
    ['REQ', 'localEecn', 0xffffff, null, { 36: 0xff, 37: 0xff, 38: 0xff }],
    ['REQ', 'initiatorDepth', 0xff, null, { 39: 0xff }],
    ['REQ', 'remoteEecn', 0xffffff, null, { 40: 0xff, 41: 0xff, 42: 0xff }],
    ['REQ', 'remoteCmResponseTimeout', 31, null, { 43: 0xf8 }],
    ['REQ', 'transportType', 3, null, { 43: 0x06 }],
    ['REQ', 'e2eFlowControl', T, null, { 43: 0x01 }],
    ['REQ', 'startingPsn', 0xffffff, null, { 44: 0xff, 45: 0xff, 46: 0xff }],
    ['REQ', 'localCmResponseTimeout', 31, null, { 47: 0xf8 }],
    ['REQ', 'retryCount', 7, null, { 47: 0x07 }],
    ['REQ', 'pkey', 0xffff, null, { 48: 0xff, 49: 0xff }],
    ['REQ', 'pathMtu', 15, null, { 50: 0xf0 }],
    ['REQ', 'rdcExists', T, null, { 50: 0x08 }],
    ['REQ', 'rnrRetryCount', 7, null, { 50: 0x07 }],
    ['REQ', 'maxCmRetries', 15, null, { 51: 0xf0 }],
    ['REQ', 'srq', T, null, { 51: 0x08 }],
    ['REQ', 'extendedTransportType', 7, null, { 51: 0x07 }],
    ['REQ', 'primaryPath', 0xffff, 'localLid', { 52: 0xff, 53: 0xff }],
    ['REQ', 'primaryPath', 0xffff, 'remoteLid', { 54: 0xff, 55: 0xff }],
    ['REQ', 'primaryPath', 0xfffff, 'flowLabel', { 88: 0xff, 89: 0xff, 90: 0xf0 }],
    ['REQ', 'primaryPath', 0x3f, 'packetRate', { 91: 0x3f }],
    ['REQ', 'primaryPath', 0xff, 'trafficClass', { 92: 0xff }],
    ['REQ', 'primaryPath', 0xff, 'hopLimit', { 93: 0xff }],
    ['REQ', 'primaryPath', 15, 'sl', { 94: 0xf0 }],
    ['REQ', 'primaryPath', T, 'subnetLocal', { 94: 0x08 }],
    ['REQ', 'primaryPath', 31, 'localAckTimeout', { 95: 0xf8 }],
    ['REQ', 'alternatePath', 0xffff, 'localLid', { 96: 0xff, 97: 0xff }],
    ['REQ', 'alternatePath', 0xfffff, 'flowLabel', { 132: 0xff, 133: 0xff, 134: 0xf0 }],
    ['REQ', 'alternatePath', 31, 'localAckTimeout', { 139: 0xf8 }],
    ['REQ', 'sapSupported', T, null, { 139: 0x04 }],
    ['MRA', 'messageMraed', 3, null, { 8: 0xc0 }],
    ['MRA', 'serviceTimeout', 31, null, { 9: 0xf8 }],
    ['REJ', 'messageRejected', 3, null, { 8: 0xc0 }],
    ['REJ', 'ariLength', 0x7f, null, { 9: 0xfe }],
    ['REJ', 'reason', 28, null, { 11: 28 }],
    ['REJ', 'ari', Uint8Array.of(1, 2), null, { 12: 1, 13: 2 }],
    ['REJ', 'privateData', Uint8Array.of(9), null, { 84: 9 }],
    ['REP', 'localQkey', 0xffffffff, null, { 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff }],
    ['REP', 'localQpn', 0xffffff, null, { 12: 0xff, 13: 0xff, 14: 0xff }],
    ['REP', 'vendorId', 0x123456, null, { 15: 0x12, 19: 0x34, 23: 0x56 }],
    ['REP', 'localEecn', 0xffffff, null, { 16: 0xff, 17: 0xff, 18: 0xff }],
    ['REP', 'startingPsn', 0xffffff, null, { 20: 0xff, 21: 0xff, 22: 0xff }],
    ['REP', 'responderResources', 0xff, null, { 24: 0xff }],
    ['REP', 'initiatorDepth', 0xff, null, { 25: 0xff }],
    ['REP', 'targetAckDelay', 31, null, { 26: 0xf8 }],
    ['REP', 'failoverAccepted', 3, null, { 26: 0x06 }],
    ['REP', 'e2eFlowControl', T, null, { 26: 0x01 }],
    ['REP', 'rnrRetryCount', 7, null, { 27: 0xe0 }],
    ['REP', 'srq', T, null, { 27: 0x10 }],
    ['REP', 'localCaGuid', 0xffn, null, { 35: 0xff }],
    ['REP', 'privateData', Uint8Array.of(9), null, { 36: 9 }],
    ['RTU', 'privateData', Uint8Array.of(9), null, { 8: 9 }],
    ['DREQ', 'remoteQpn', 0xffffff, null, { 8: 0xff, 9: 0xff, 10: 0xff }],
    ['DREQ', 'privateData', Uint8Array.of(9), null, { 12: 9 }],
    ['DREP', 'privateData', Uint8Array.of(9), null, { 8: 9 }],
    ['SIDR_REQ', 'requestId', 0x01020304, null, { 0: 1, 1: 2, 2: 3, 3: 4 }],
    ['SIDR_REQ', 'pkey', 0xffff, null, { 4: 0xff, 5: 0xff }],
    ['SIDR_REQ', 'serviceId', 0x1111c06n, null, { 12: 0x01, 13: 0x11, 14: 0x1c, 15: 0x06 }],
    ['SIDR_REQ', 'privateData', Uint8Array.of(9), null, { 16: 9 }],
    ['SIDR_REP', 'status', 0xff, null, { 4: 0xff }],
    ['SIDR_REP', 'addInfoLength', 0xff, null, { 5: 0xff }],
    ['SIDR_REP', 'vendorId', 0x123456, null, { 6: 0x12, 7: 0x34, 11: 0x56 }],
    ['SIDR_REP', 'qpn', 0xffffff, null, { 8: 0xff, 9: 0xff, 10: 0xff }],
    ['SIDR_REP', 'serviceId', 0xffn << 56n, null, { 12: 0xff }],
    ['SIDR_REP', 'qkey', 0x01234567, null, { 20: 0x01, 21: 0x23, 22: 0x45, 23: 0x67 }],
    ['SIDR_REP', 'addInfo', Uint8Array.of(7), null, { 24: 7 }],
    ['SIDR_REP', 'privateData', Uint8Array.of(9), null, { 96: 9 }],
  ];
  for (const [kind, field, value, sub, want] of cases) {
    const got = footprint(kind, field, value, sub);
    assert.deepEqual(got, want, `${kind}.${field}${sub ? '.' + sub : ''}`);
  }
});

test('private data: limits per message, zero padding, full-length on decode', () => {
  for (const [kind, len] of Object.entries(CmPrivateDataLen)) {
    const m = randomCmMessage(rng(5), kind);
    m.privateData = new Uint8Array(len + 1);
    assert.throws(() => encodeCmMad(m, 1n), { code: 'EINVAL' }, kind);
    m.privateData = Uint8Array.of(1, 2, 3);
    const d = decodeCmMad(encodeCmMad(m, 1n)).msg;
    assert.equal(d.privateData.length, len, kind);
    assert.deepEqual([...d.privateData.subarray(0, 4)], [1, 2, 3, 0]);
    assert.equal(roce.CmPrivateDataOff[kind] + len, 232, `${kind} private data runs to the end`);
  }
  assert.deepEqual(CmPrivateDataLen, { REQ: 92, MRA: 222, REJ: 148, REP: 196, RTU: 224, DREQ: 220, DREP: 224, SIDR_REQ: 216, SIDR_REP: 136 });
  const rej = randomCmMessage(rng(6), 'REJ');
  rej.ari = new Uint8Array(73);
  assert.throws(() => encodeCmMad(rej, 1n), { code: 'EINVAL' });
});

test('encode into a caller buffer at an offset; fields are masked to their widths', () => {
  const out = new Uint8Array(300).fill(0xee);
  const msg = { kind: 'DREQ', localCommId: 1, remoteCommId: 2, remoteQpn: 0x1ffffff, privateData: new Uint8Array(0) };
  const v = encodeCmMad(msg, 5n, { attrMod: 9 }, out, 10);
  assert.equal(v.length, 256);
  assert.equal(v.byteOffset, 10);
  assert.equal(out[9], 0xee);
  assert.equal(out[266], 0xee);
  const d = decodeCmMad(out, 10);
  assert.equal(d.msg.remoteQpn, 0xffffff);
  assert.equal(d.hdr.attrMod, 9);
  assert.throws(() => encodeCmMad(msg, 5n, {}, new Uint8Array(255)), { code: 'EINVAL' });
});

test('decode errors are EBADMSG; header problems are reported, not thrown', () => {
  const mad = encodeCmMad(randomCmMessage(rng(8), 'RTU'), 7n);
  assert.throws(() => decodeCmMad(mad.subarray(0, 255)), { code: 'EBADMSG' });
  assert.throws(() => roce.decodeMadHeader(mad.subarray(0, 23)), { code: 'EBADMSG' });
  for (const [off, val] of [[0, 2], [1, 0x03]]) {
    const bad = Uint8Array.from(mad);
    bad[off] = val;
    assert.throws(() => decodeCmMad(bad), { code: 'EBADMSG' });
  }
  for (const attr of [0x0001, 0x0019, 0x001a, 0x00ff]) {
    const bad = Uint8Array.from(mad);
    bad[16] = attr >> 8;
    bad[17] = attr & 0xff;
    assert.throws(() => decodeCmMad(bad), { code: 'EBADMSG', message: /not supported/ });
  }
  const v1 = decodeCmMad(encodeCmMad(randomCmMessage(rng(9), 'RTU'), 7n, { classVersion: 1 }));
  assert.equal(roce.cmMadHeaderProblem(v1.hdr), 'class version 1');
  const get = decodeCmMad(encodeCmMad(randomCmMessage(rng(9), 'RTU'), 7n, { method: 0x01 }));
  assert.equal(roce.cmMadHeaderProblem(get.hdr), 'method 0x1');
});

test('MAD header layout', () => {
  const b = new Uint8Array(24);
  roce.writeMadHeader(b, 0, { baseVersion: 1, mgmtClass: 7, classVersion: 2, method: 3, status: 0x1234, classSpecific: 0x5678, tid: 0x0000000271e642edn, attrId: 0x17, reserved: 0, attrMod: 0xa0b0c0d0 });
  assert.deepEqual([...b], [1, 7, 2, 3, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 2, 0x71, 0xe6, 0x42, 0xed, 0, 0x17, 0, 0, 0xa0, 0xb0, 0xc0, 0xd0]);
});

test('names and constants', () => {
  assert.equal(roce.cmRejReasonName(28), 'CONSUMER_DEFINED');
  assert.equal(roce.cmRejReasonName(8), 'INVALID_SERVICE_ID');
  assert.equal(roce.cmRejReasonName(34), 'REASON_34');
  assert.equal(roce.CmSidrStatus.REJECT, 2);
  assert.ok(Math.abs(roce.cmTimeoutMs(20) - 4294.967) < 0.001);
  assert.equal(roce.cmReqHasAltPath(randomCmMessage(rng(3), 'REQ')), true);
  assert.equal(roce.cmReqHasAltPath({ ...randomCmMessage(rng(3), 'REQ'), alternatePath: roce.emptyCmPath() }), false);
});
