// FPDU headers: CRC-32C byte vectors (docs/design/iwarp-wire.md), zero-allocation writers, builders, one-shot header decode and
// every malformed-header TERMINATE (RFC 5044 §4, RFC 5041 §4, RFC 5040 §4; siw_qp_rx.c).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import {
  IWARP_OPCODES,
  RdmapOpcode,
  TO_OVERFLOW,
  decodeFpduHeader,
  encodeFpdu,
  fpduCrc,
  writeReadRequest,
  writeTaggedHdr,
  writeUntaggedHdr,
} from '../../../dist/wire/index.js';
import { crc32cBitwise } from '../../../dist/wire/iwarp/crc32c.js';
import { MALFORMED } from './fpdu-cases.js';

const hex = (s) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

/** FPDU examples with CRC on (docs/design/iwarp-wire.md, CRC-32C vectors). */
const RTR_WRITE = hex('000e c140 00000001 0000000000000000 ebd34c5f');
const SEND_HELLO = hex('0017 4143 00000000 00000000 00000001 00000000 68656c6c6f 000000 b990b10c');
const RTR_READ = hex(
  '002e 4141 00000000 00000001 00000001 00000000' + // untagged DDP header, QN 1, MSN 1, MO 0
    '00000000 0000000000000000 00000000 00000001 0000000000000000' + // sink 0/0, size 0, source 1/0
    'ba10e3c9',
);

const withZeroTrailer = (b) => Buffer.concat([b.subarray(0, b.length - 4), Buffer.alloc(4)]);

function term(layer, etype, ecode) {
  return (e) => {
    assert.ok(e instanceof TerminateError, `expected TerminateError, got ${e && e.stack}`);
    assert.deepEqual([e.layer, e.etype, e.ecode], [layer, etype, ecode], e.message);
    return true;
  };
}

test('table: header lengths, queues and control templates (RFC 5040 §4.2, siw_qp.c iwarp_pktinfo)', () => {
  const want = [
    ['RDMA Write', 16, true, -1, 0xc140],
    ['RDMA Read Request', 48, false, 1, 0x4141],
    ['RDMA Read Response', 16, true, -1, 0xc142],
    ['Send', 20, false, 0, 0x4143],
    ['Send with Invalidate', 20, false, 0, 0x4144],
    ['Send with Solicited Event', 20, false, 0, 0x4145],
    ['Send with Solicited Event and Invalidate', 20, false, 0, 0x4146],
    ['Terminate', 24, false, 2, 0x4147],
  ];
  assert.equal(IWARP_OPCODES.length, 8);
  for (let op = 0; op < 8; op++) {
    const i = IWARP_OPCODES[op];
    assert.deepEqual([i.name, i.hdrLen, i.tagged, i.qn, i.ctrl], want[op]);
    assert.equal(i.opcode, op);
    assert.ok(Object.isFrozen(i));
  }
  assert.ok(Object.isFrozen(IWARP_OPCODES));
});

test('vectors: zero-length Write RTR, Send "hello", zero-length Read Request (CRC on and off)', () => {
  const w = encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1, to: 0 }, undefined, { crc: true });
  assert.deepEqual(w, RTR_WRITE);
  assert.equal(fpduCrc(w), 0x5f4cd3eb);
  const s = encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.from('hello'), { crc: true });
  assert.deepEqual(s, SEND_HELLO);
  const r = encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: 1, srcStag: 1 }, undefined, { crc: true });
  assert.deepEqual(r, RTR_READ);
  assert.equal(r.length, 52);
  assert.equal(fpduCrc(r), 0xc9e310ba);
  // the trailer CRC agrees with the bitwise reference over length + ULPDU + pad
  for (const f of [w, s, r]) assert.equal(f.readUInt32LE(f.length - 4), crc32cBitwise(f.subarray(0, f.length - 4)));
  // CRC off: same frames with a zero trailer
  assert.deepEqual(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1 }), withZeroTrailer(RTR_WRITE));
  assert.deepEqual(encodeFpdu({ opcode: RdmapOpcode.SEND }, Buffer.from('hello'), { crc: false }), withZeroTrailer(SEND_HELLO));
  assert.deepEqual(encodeFpdu({ opcode: RdmapOpcode.READ_REQ, srcStag: 1 }), withZeroTrailer(RTR_READ));
});

test('writers fill exactly their bytes at an offset and return the end offset', () => {
  const buf = new Uint8Array(80).fill(0xaa);
  assert.equal(writeTaggedHdr(buf, 3, RdmapOpcode.READ_RESP, false, 0x11223344, 0x0001_0203_0405, 1000), 19);
  assert.deepEqual(Buffer.from(buf.subarray(0, 20)), hex('aaaaaa 03f6 8142 11223344 0000000102030405 aa'));
  buf.fill(0xaa);
  assert.equal(writeUntaggedHdr(buf, 1, RdmapOpcode.SEND_SE_INV, true, 0xdeadbeef, 0, 0xfffffffe, 65000, 5), 21);
  assert.deepEqual(Buffer.from(buf.subarray(0, 22)), hex('aa 0017 4146 deadbeef 00000000 fffffffe 0000fde8 aa'));
  buf.fill(0xaa);
  assert.equal(writeReadRequest(buf, 2, 7, 0xa0, 2 ** 53 - 1, 0x10000, 0xb0, 0x1234_5678_9abc), 50);
  assert.deepEqual(
    Buffer.from(buf.subarray(0, 51)),
    hex('aaaa 002e 4141 00000000 00000001 00000007 00000000 000000a0 001fffffffffffff 00010000 000000b0 000012345678 9abc aa'),
  );
  assert.throws(() => writeTaggedHdr(buf, 0, 0, true, 0, 0, 65535 - 13), RangeError);
  assert.equal(writeTaggedHdr(new Uint8Array(16), 0, 0, true, 0, 0, 65535 - 14), 16);
  assert.throws(() => writeUntaggedHdr(buf, 0, 3, true, 0, 0, 1, 0, 65535 - 17), RangeError);
});

test('one-shot decode of every opcode round-trips the header fields', () => {
  const cases = [
    [{ opcode: 0, last: false, stag: 0xfeedface, to: 2 ** 53 - 1 }, 100],
    [{ opcode: 2, stag: 0x100, to: 0x55fb_043d_9170 }, 64],
    [{ opcode: 1, msn: 9, sinkStag: 1, sinkTo: 2, readSize: 3, srcStag: 4, srcTo: 5 }, 0],
    [{ opcode: 3, msn: 0xffffffff, mo: 123, last: false }, 3],
    [{ opcode: 4, invStag: 0x1234, msn: 2 }, 0],
    [{ opcode: 5, msn: 3 }, 1],
    [{ opcode: 6, invStag: 7, msn: 4, mo: 8 }, 65535 - 18],
    [{ opcode: 7, msn: 1 }, 4],
  ];
  for (const [f, n] of cases) {
    for (const crc of [false, true]) {
      const payload = Buffer.alloc(n, 0x5a);
      const b = encodeFpdu(f, payload, { crc });
      const info = IWARP_OPCODES[f.opcode];
      const h = decodeFpduHeader(b);
      assert.equal(h.opcode, f.opcode);
      assert.equal(h.hdrLen, info.hdrLen);
      assert.equal(h.tagged, info.tagged);
      assert.equal(h.last, f.last ?? true);
      assert.equal(h.ulpduLen, info.hdrLen - 2 + n - (f.opcode === 7 ? 4 : 0));
      assert.equal(h.payloadLen, n - (f.opcode === 7 ? 4 : 0));
      for (const k of ['stag', 'to', 'invStag', 'mo', 'sinkStag', 'sinkTo', 'readSize', 'srcStag', 'srcTo']) {
        assert.equal(h[k], f[k] ?? 0, `${info.name} ${k}`);
      }
      if (!info.tagged) {
        assert.equal(h.qn, info.qn);
        assert.equal(h.msn, f.msn);
      }
      assert.deepEqual(h.raw, new Uint8Array(b.subarray(0, info.hdrLen)));
      assert.ok(!Buffer.isBuffer(h.raw));
      assert.equal(b.length % 4, 0);
      assert.equal(b.readUInt32LE(b.length - 4), crc ? fpduCrc(b) : 0);
      // a truncated header is "not yet"
      assert.equal(decodeFpduHeader(b.subarray(0, info.hdrLen - 1)), null);
    }
  }
});

test('64-bit offsets beyond 2^53 decode as TO_OVERFLOW', () => {
  const b = encodeFpdu({ opcode: 0, stag: 1, to: 0 });
  b.writeUInt32BE(0x0020_0000, 8);
  assert.equal(decodeFpduHeader(b).to, TO_OVERFLOW);
  b.writeUInt32BE(0x001f_ffff, 8);
  b.writeUInt32BE(0xffff_ffff, 12);
  assert.equal(decodeFpduHeader(b).to, Number.MAX_SAFE_INTEGER);
  const r = encodeFpdu({ opcode: 1, sinkTo: 1, srcTo: 2 });
  r.writeUInt32BE(0xffffffff, 24);
  r.writeUInt32BE(0x8000_0000, 40);
  const h = decodeFpduHeader(r);
  assert.equal(h.sinkTo, TO_OVERFLOW);
  assert.equal(h.srcTo, TO_OVERFLOW);
});

test('malformed headers throw the TERMINATE siw would send, with the header bytes attached', () => {
  for (const [name, make, codes, attached] of MALFORMED) {
    const b = make();
    let caught;
    assert.throws(
      () => decodeFpduHeader(b),
      (e) => {
        caught = e;
        return term(...codes)(e);
      },
      name,
    );
    assert.deepEqual(caught.header, new Uint8Array(b.subarray(0, attached)), `${name}: attached header`);
  }
});

test('encodeFpdu refuses opcodes > 7, payload on a Read Request, and oversize ULPDUs', () => {
  assert.throws(() => encodeFpdu({ opcode: 8 }), RangeError);
  assert.throws(() => encodeFpdu({ opcode: 1 }, Buffer.alloc(1)), RangeError);
  assert.throws(() => encodeFpdu({ opcode: 0 }, Buffer.alloc(65535 - 13)), RangeError);
  assert.equal(encodeFpdu({ opcode: 0 }, Buffer.alloc(65535 - 14)).readUInt16BE(0), 65535);
});
