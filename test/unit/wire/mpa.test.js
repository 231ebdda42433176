// MPA start frames (RFC 5044 §7.1, RFC 6581) and FPDU framing arithmetic (RFC 5044 §4).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import {
  MPA_HDR_LEN,
  MPA_MAX_PD,
  MpaFlag,
  decodeMpaStartFrame,
  encodeMpaStartFrame,
  mpaKeyMatches,
  fpduLength,
  fpduMaxPayload,
  fpduPad,
  readCrcLE,
  validateMpaReply,
  validateMpaRequest,
  writeFpduTrailer,
} from '../../../dist/wire/iwarp/mpa.js';
import { crc32c } from '../../../dist/wire/iwarp/crc32c.js';

const hex = (s) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const KEY_REQ = '4d504120 49442052 65712046 72616d65';
const KEY_REP = '4d504120 49442052 65702046 72616d65';
const none = new Uint8Array(0);

/** The MPA-layer "invalid request/reply" TERMINATE: LLP(2) / MPA(0) / 0x04. */
function isInvalidFrame(e) {
  assert.ok(e instanceof TerminateError, `expected TerminateError, got ${e}`);
  assert.equal(e.layer, 2);
  assert.equal(e.etype, 0);
  assert.equal(e.ecode, 0x04);
  return true;
}

function frame(over) {
  return { type: 'request', markers: false, crc: false, reject: false, enhanced: false, rev: 1, privateData: none, ...over };
}

function v2(over) {
  return frame({ enhanced: true, rev: 2, ird: 0, ord: 0, p2p: false, rtrSend: false, rtrWrite: false, rtrRead: false, ...over });
}

test('siw default request (siw_cm.c) decodes and re-encodes byte for byte', () => {
  const bytes = hex(`${KEY_REQ} 10 02 0004 0010 0010`);
  assert.equal(bytes.length, 24);
  const r = decodeMpaStartFrame(bytes, 'request');
  assert.equal(r.length, 24);
  assert.deepEqual(r.frame, v2({ ird: 16, ord: 16 }));
  assert.deepEqual(encodeMpaStartFrame(r.frame), bytes);
  assert.deepEqual(validateMpaRequest(r.frame), { action: 'accept', crc: false, enhanced: true, rtr: null });
});

test('siw reply echoes the request with the reply key', () => {
  const bytes = hex(`${KEY_REP} 10 02 0004 0010 0010`);
  const r = decodeMpaStartFrame(bytes, 'reply');
  assert.deepEqual(r.frame, v2({ type: 'reply', ird: 16, ord: 16 }));
  assert.deepEqual(encodeMpaStartFrame(r.frame), bytes);
  const req = decodeMpaStartFrame(hex(`${KEY_REQ} 10 02 0004 0010 0010`), 'request').frame;
  assert.deepEqual(validateMpaReply(r.frame, req), { action: 'accept', crc: false, ird: 16, ord: 16, rtr: null });
});

test('reject reply with private data', () => {
  const bytes = hex(`${KEY_REP} 30 02 0006 0000 0000 6e6f`);
  const r = decodeMpaStartFrame(bytes, 'reply');
  assert.equal(r.frame.reject, true);
  assert.deepEqual([...r.frame.privateData], [0x6e, 0x6f]);
  assert.deepEqual(encodeMpaStartFrame(r.frame), bytes);
  assert.deepEqual(validateMpaReply(r.frame, v2({})), { action: 'rejected' });
});

test('rev 1 frames (B-mpa-siw capture) and rev 1 private data', () => {
  const req = decodeMpaStartFrame(hex(`${KEY_REQ} 00 01 0000`), 'request');
  assert.deepEqual(req, { frame: frame({}), length: 20 });
  const withPd = hex(`${KEY_REQ} 40 01 0003 616263`);
  const r = decodeMpaStartFrame(withPd, 'request');
  assert.deepEqual(r.frame, frame({ crc: true, privateData: new Uint8Array([0x61, 0x62, 0x63]) }));
  assert.deepEqual(encodeMpaStartFrame(r.frame), withPd);
  assert.deepEqual(validateMpaRequest(r.frame), { action: 'accept', crc: true, enhanced: false, rtr: null });
});

test('rev 1 with the Enhanced bit: no IRD/ORD word (siw parses it only in rev 2)', () => {
  const bytes = hex(`${KEY_REQ} 10 01 0004 0010 0010`);
  const r = decodeMpaStartFrame(bytes, 'request');
  assert.equal(r.frame.enhanced, true);
  assert.equal(r.frame.ird, undefined);
  assert.deepEqual([...r.frame.privateData], [0, 0x10, 0, 0x10]);
  assert.deepEqual(encodeMpaStartFrame(r.frame), bytes);
});

test('P2P / RTR bits of the IRD/ORD word (RFC 6581 §3)', () => {
  const f = v2({ ird: 5, ord: 7, p2p: true, rtrSend: true, rtrWrite: true, rtrRead: true, privateData: new Uint8Array([9]) });
  const bytes = encodeMpaStartFrame(f);
  assert.deepEqual(bytes, hex(`${KEY_REQ} 10 02 0005 c005 c007 09`));
  assert.deepEqual(decodeMpaStartFrame(bytes, 'request').frame, f);
  // only A + C
  const g = v2({ ird: 0x3fff, ord: 1, p2p: true, rtrWrite: true });
  assert.deepEqual(encodeMpaStartFrame(g).subarray(20), hex('bfff 8001'));
  // siw responder's RTR choice: Write if offered, else Read, else Write (never Send)
  assert.equal(validateMpaRequest(f).rtr, 'write');
  assert.equal(validateMpaRequest(v2({ p2p: true, rtrRead: true })).rtr, 'read');
  assert.equal(validateMpaRequest(v2({ p2p: true, rtrSend: true })).rtr, 'write');
  assert.equal(validateMpaRequest(v2({ p2p: false, rtrRead: true })).rtr, null);
});

test('round trip over a table of frames', () => {
  const pd = (n) => Uint8Array.from({ length: n }, (_, i) => (i * 7) & 0xff);
  const table = [
    frame({}),
    frame({ type: 'reply' }),
    frame({ rev: 0 }),
    frame({ crc: true, privateData: pd(256) }),
    frame({ markers: true, crc: true, reject: true, privateData: pd(1) }),
    frame({ type: 'reply', gso: true }),
    v2({}),
    v2({ crc: true, ird: 128, ord: 128, privateData: pd(252) }),
    v2({ type: 'reply', reject: true, ird: 1, ord: 0, privateData: pd(10) }),
    v2({ p2p: true, rtrWrite: true, rtrRead: false, ird: 3, ord: 0x3fff }),
    v2({ p2p: true, rtrSend: true, gso: true }),
  ];
  for (const f of table) {
    const bytes = encodeMpaStartFrame(f);
    const r = decodeMpaStartFrame(bytes, f.type);
    assert.equal(r.length, bytes.length);
    assert.deepEqual(r.frame, f);
    assert.deepEqual(encodeMpaStartFrame(r.frame), bytes);
  }
});

test('flag byte layout (RFC 5044 §7.1)', () => {
  const b = encodeMpaStartFrame(frame({ markers: true, crc: true, reject: true, gso: true, rev: 1 }));
  assert.equal(b[16], MpaFlag.MARKERS | MpaFlag.CRC | MpaFlag.REJECT | MpaFlag.GSO_EXP);
  assert.equal(b[16], 0xe8);
  // reserved bits are ignored on receive
  const r = decodeMpaStartFrame(hex(`${KEY_REQ} 07 01 0000`), 'request');
  assert.deepEqual(r.frame, frame({}));
});

test('every proper prefix returns needMore; bytes beyond the frame are not consumed', () => {
  const f = encodeMpaStartFrame(v2({ ird: 2, ord: 3, privateData: new Uint8Array(40).fill(1) }));
  for (let n = 0; n < f.length; n++) {
    assert.deepEqual(decodeMpaStartFrame(f.subarray(0, n), 'request'), { needMore: true }, `prefix ${n}`);
  }
  const extra = Buffer.concat([f, hex('000e c140')]);
  const r = decodeMpaStartFrame(extra, 'request');
  assert.equal(r.length, f.length);
  // private data is a copy, not a view of the input
  extra.fill(0xee);
  assert.ok(r.frame.privateData.every((x) => x === 1));
});

test('thrown (drop silently): bad key, the other key, rev > 2, PD_Length > 256', () => {
  assert.throws(() => decodeMpaStartFrame(hex(`${KEY_REP} 10 02 0004 0010 0010`), 'request'), isInvalidFrame);
  assert.throws(() => decodeMpaStartFrame(hex(`${KEY_REQ} 10 02 0004 0010 0010`), 'reply'), isInvalidFrame);
  const garbage = Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.throws(() => decodeMpaStartFrame(garbage, 'request'), isInvalidFrame);
  assert.throws(() => decodeMpaStartFrame(hex(`${KEY_REQ} 00 03 0000`), 'request'), isInvalidFrame);
  assert.throws(() => decodeMpaStartFrame(hex(`${KEY_REQ} 00 ff 0000`), 'request'), isInvalidFrame);
  // PD_Length is checked from the 20-byte header alone, before the PD arrives
  assert.throws(() => decodeMpaStartFrame(hex(`${KEY_REQ} 10 02 0101`), 'request'), isInvalidFrame);
  const pd256 = Buffer.concat([hex(`${KEY_REQ} 00 01 0100`), Buffer.alloc(256)]);
  assert.equal(decodeMpaStartFrame(pd256, 'request').length, 276);
});

test('returned for the CM to reject: markers, Enhanced rev 2 with PD_Length < 4, strict CRC', () => {
  const m = decodeMpaStartFrame(hex(`${KEY_REQ} 90 02 0004 0010 0010`), 'request').frame;
  assert.equal(m.markers, true);
  assert.equal(validateMpaRequest(m).action, 'reject');
  for (const short of ['10 02 0000', '10 02 0003 000102']) {
    const r = decodeMpaStartFrame(hex(`${KEY_REQ} ${short}`), 'request');
    assert.equal(r.frame.enhanced, true);
    assert.equal(r.frame.ird, undefined);
    assert.equal(validateMpaRequest(r.frame).action, 'reject');
  }
  const c = decodeMpaStartFrame(hex(`${KEY_REQ} 50 02 0004 0008 0008`), 'request').frame;
  assert.equal(validateMpaRequest(c).action, 'accept');
  assert.equal(validateMpaRequest(c, { crcStrict: true }).action, 'reject');
  // R in a request is ignored (as siw does)
  assert.equal(validateMpaRequest(frame({ reject: true })).action, 'accept');
});

test('reply validation against the request (siw_proc_mpareply order, siw_cm.c)', () => {
  const req = v2({ ird: 16, ord: 16 });
  const ok = v2({ type: 'reply', ird: 4, ord: 8, crc: true });
  assert.deepEqual(validateMpaReply(ok, req), { action: 'accept', crc: true, ird: 8, ord: 4, rtr: null });
  // CRC follows the reply's C bit even if we did not ask
  assert.equal(validateMpaReply(v2({ type: 'reply', crc: true }), v2({ crc: false })).crc, true);
  assert.equal(validateMpaReply(v2({ type: 'reply', markers: true }), req).action, 'fail');
  // enhanced request: reply must be rev 2 + enhanced with the word
  const notV2 = validateMpaReply(frame({ type: 'reply', rev: 1 }), req);
  assert.equal(notV2.action, 'fail');
  assert.equal(notV2.terminate, undefined);
  assert.equal(validateMpaReply(frame({ type: 'reply', rev: 2, enhanced: false }), req).action, 'fail');
  assert.equal(validateMpaReply(frame({ type: 'reply', rev: 2, enhanced: true }), req).action, 'fail');
  // a rev 1 request accepts any rev <= 2 reply and ignores its word
  assert.deepEqual(validateMpaReply(frame({ type: 'reply' }), frame({})), { action: 'accept', crc: false, ird: undefined, ord: undefined, rtr: null });
  // insufficient IRD -> TERMINATE LLP/MPA/0x06
  const big = validateMpaReply(v2({ type: 'reply', ord: 129 }), req);
  assert.equal(big.action, 'fail');
  assert.deepEqual([big.terminate.layer, big.terminate.etype, big.terminate.ecode], [2, 0, 0x06]);
  assert.equal(validateMpaReply(v2({ type: 'reply', ord: 129 }), req, { maxIrd: 200 }).action, 'accept');
  // P2P: the reply must pick an RTR we offered, Write preferred
  const p2p = v2({ p2p: true, rtrWrite: true, rtrRead: true, ord: 1 });
  assert.equal(validateMpaReply(v2({ type: 'reply', p2p: true, rtrRead: true }), p2p).rtr, 'read');
  assert.equal(validateMpaReply(v2({ type: 'reply', p2p: true, rtrWrite: true, rtrRead: true }), p2p).rtr, 'write');
  const none2 = validateMpaReply(v2({ type: 'reply', p2p: true, rtrSend: true }), p2p);
  assert.equal(none2.action, 'fail');
  assert.deepEqual([none2.terminate.layer, none2.terminate.etype, none2.terminate.ecode], [2, 0, 0x07]);
  const writeOnly = v2({ p2p: true, rtrWrite: true });
  assert.equal(validateMpaReply(v2({ type: 'reply', p2p: true, rtrRead: true }), writeOnly).action, 'fail');
});

test('encoder refuses what cannot go on the wire', () => {
  assert.throws(() => encodeMpaStartFrame(frame({ privateData: new Uint8Array(MPA_MAX_PD + 1) })), RangeError);
  assert.throws(() => encodeMpaStartFrame(v2({ privateData: new Uint8Array(253) })), RangeError);
  assert.equal(encodeMpaStartFrame(v2({ privateData: new Uint8Array(252) })).length, MPA_HDR_LEN + 256);
  assert.throws(() => encodeMpaStartFrame(v2({ ird: 0x4000 })), RangeError);
  assert.throws(() => encodeMpaStartFrame(v2({ ord: -1 })), RangeError);
  assert.throws(() => encodeMpaStartFrame(frame({ rev: 256 })), RangeError);
});

test('FPDU pad / length arithmetic (RFC 5044 §4, siw_qp_tx.c)', () => {
  for (let u = 0; u < 70; u++) {
    const pad = fpduPad(u);
    assert.ok(pad >= 0 && pad <= 3);
    assert.equal((2 + u + pad) % 4, 0);
    assert.equal(fpduLength(u), 2 + u + pad + 4);
  }
  assert.equal(fpduPad(23), 3); // Send "hello"
  assert.equal(fpduLength(23), 32);
  assert.equal(fpduLength(14), 20); // zero-length Write
  assert.equal(fpduLength(46), 52); // Read Request
  assert.equal(fpduLength(22), 28); // bare Terminate
  assert.equal(fpduLength(0xffff), 0x10000 + 2 + 4 + 2);
  assert.equal(fpduMaxPayload(1448, 16), 1428);
  assert.equal(fpduMaxPayload(1448, 20), 1424);
  assert.equal(fpduMaxPayload(1452, 16), 1428); // rounded down to a multiple of 8 first
  assert.equal(fpduMaxPayload(1 << 20, 16), 0xffff + 2 - 16);
});

test('writeFpduTrailer: zero pad, little-endian CRC over length + ULPDU + pad, or zeros', () => {
  // Send "hello" (docs/design/iwarp-wire.md, CRC-32C vectors)
  const body = hex('0017 4143 00000000 00000000 00000001 00000000 68656c6c6f');
  const out = new Uint8Array(32).fill(0xaa);
  out.set(body, 0);
  assert.equal(writeFpduTrailer(out, 25, 23, crc32c(body)), 7);
  assert.deepEqual(Buffer.from(out.subarray(25)), hex('000000 b990b10c'));
  assert.equal(readCrcLE(out, 28), 0x0cb190b9);
  out.fill(0xaa, 25);
  assert.equal(writeFpduTrailer(out, 25, 23, null), 7);
  assert.deepEqual(Buffer.from(out.subarray(25)), hex('000000 00000000'));
});

test('mpaKeyMatches: the Request and Reply keys of RFC 5044, nothing else', () => {
  const rep = Buffer.concat([hex(KEY_REP), Buffer.alloc(4)]);
  const req = Buffer.concat([hex(KEY_REQ), Buffer.alloc(4)]);
  assert.equal(mpaKeyMatches(rep, 'reply'), true);
  assert.equal(mpaKeyMatches(req, 'request'), true);
  assert.equal(mpaKeyMatches(rep, 'request'), false);
  assert.equal(mpaKeyMatches(req, 'reply'), false);
  const bad = Buffer.from(rep);
  bad[15] ^= 1;
  assert.equal(mpaKeyMatches(bad, 'reply'), false);
  assert.equal(mpaKeyMatches(hex(KEY_REP).subarray(0, 15), 'reply'), false, 'a short buffer is no match');
});
