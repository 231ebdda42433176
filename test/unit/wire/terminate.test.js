// TERMINATE: RFC 5040 §4.8 encoding, lenient decoding with siw's swapped layout (siw_qp.c),
//, attachments, names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import {
  FpduDecoder,
  decodeFpduHeader,
  decodeTerminate,
  decodeTerminateFpdu,
  decodeTerminateMessage,
  encodeFpdu,
  encodeTerminate,
  fpduCrc,
  isValidTermCode,
  termName,
} from '../../../dist/wire/index.js';
import { RecordingSink } from './fpdu-cases.js';

const hex = (s) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

test('bare TERMINATE: 28 bytes, QN 2, MSN, MO 0, L=1, RFC control word (RFC 5040 §4.8)', () => {
  const t = encodeTerminate({ layer: 2, etype: 0, ecode: 2 }, { crc: false });
  assert.deepEqual(t, hex('0016 4147 00000000 00000002 00000001 00000000 20020000 00000000'));
  const c = encodeTerminate({ layer: 2, etype: 0, ecode: 2 }, { crc: true, msn: 5 });
  assert.equal(c.length, 28);
  assert.equal(c.readUInt32BE(12), 5);
  assert.equal(c.readUInt32LE(24), fpduCrc(c));
  const h = decodeFpduHeader(c);
  assert.deepEqual([h.opcode, h.qn, h.msn, h.mo, h.last, h.payloadLen, h.hdrLen], [7, 2, 5, 0, true, 0, 24]);
});

test('attachments: tagged (2+14), untagged (2+18), Read Request (2+18+28) (RFC 5040 §4.8)', () => {
  const write = encodeFpdu({ opcode: 0, stag: 0x1234, to: 0x10 }, Buffer.alloc(100));
  const wh = decodeFpduHeader(write);
  const tw = encodeTerminate({ layer: 1, etype: 1, ecode: 0, header: wh.raw }, { crc: true });
  assert.equal(tw.length, 44);
  assert.deepEqual(tw.subarray(20, 24), hex('11 00 c0 00')); // DDP / tagged / invalid STag, M + D
  assert.deepEqual(tw.subarray(24, 40), write.subarray(0, 16)); // segment length 114 + DDP header
  const d = decodeTerminateFpdu(tw);
  assert.deepEqual([d.layer, d.etype, d.ecode, d.m, d.d, d.r, d.siwLayout, d.ambiguous], [1, 1, 0, true, true, false, false, false]);
  assert.equal(d.ddpSegLen, 114);
  assert.deepEqual(d.ddpHeader, new Uint8Array(write.subarray(2, 16)));
  assert.equal(d.rdmapHeader, undefined);
  assert.deepEqual([d.qn, d.msn, d.mo], [2, 1, 0]);

  const send = encodeFpdu({ opcode: 3, msn: 9 }, Buffer.alloc(3));
  const ts = encodeTerminate({ layer: 1, etype: 2, ecode: 3, header: decodeFpduHeader(send).raw }, { crc: false });
  assert.equal(ts.length, 48);
  assert.deepEqual(ts.subarray(20, 24), hex('12 03 c0 00'));
  assert.equal(decodeTerminateFpdu(ts).ddpHeader.length, 18);

  const rreq = encodeFpdu({ opcode: 1, msn: 2, sinkStag: 1, srcStag: 0xbad, srcTo: 77, readSize: 8 });
  const raw = decodeFpduHeader(rreq).raw;
  const tr = encodeTerminate({ layer: 0, etype: 1, ecode: 0, header: raw }, { crc: true });
  assert.equal(tr.length, 76);
  assert.deepEqual(tr.subarray(20, 24), hex('01 00 e0 00')); // RDMAP / remote protection / invalid STag, M + D + R
  assert.deepEqual(tr.subarray(24, 72), rreq.subarray(0, 48));
  const dr = decodeTerminateFpdu(tr);
  assert.equal(dr.r, true);
  assert.deepEqual(dr.rdmapHeader, new Uint8Array(rreq.subarray(20, 48)));
  // the R attachment can be left out
  const tn = encodeTerminate({ layer: 1, etype: 2, ecode: 3, header: raw }, { crc: false, attachRdmap: false });
  assert.equal(tn.length, 48);
  assert.equal(tn[22], 0xc0);
  // segment length override
  const to = encodeTerminate({ layer: 1, etype: 1, ecode: 0, header: wh.raw }, { crc: false, ddpSegLen: 100 });
  assert.equal(to.readUInt16BE(24), 100);
});

test('a TerminateError from the decoder is a TerminateSpec as is', () => {
  const bad = encodeFpdu({ opcode: 3, qn: 1 }, Buffer.alloc(4));
  const dec = new FpduDecoder(new RecordingSink(), { crc: false });
  let err;
  try {
    dec.push(bad);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof TerminateError);
  const t = encodeTerminate(err, { crc: false });
  const d = decodeTerminateFpdu(t);
  assert.deepEqual([d.layer, d.etype, d.ecode], [1, 2, 1]);
  assert.deepEqual(d.ddpHeader, new Uint8Array(bad.subarray(2, 20)));
  // an error without a header attaches nothing
  assert.equal(encodeTerminate(new TerminateError(0, 2, 6, 'x'), { crc: false }).length, 28);
});

test("siw's swapped layout: 02 02 01 00 is LLP / MPA / CRC error with M (siw_qp.c)", () => {
  const d = decodeTerminate(hex('02 02 01 00'));
  assert.deepEqual(
    [d.layer, d.etype, d.ecode, d.m, d.d, d.r, d.siwLayout, d.ambiguous],
    [2, 0, 2, true, false, false, true, false],
  );
  assert.deepEqual(d.raw, new Uint8Array([2, 2, 1, 0]));
  // the RFC peer's version of the same report
  const r = decodeTerminate(hex('20 02 80 00'));
  assert.deepEqual([r.layer, r.etype, r.ecode, r.m, r.siwLayout], [2, 0, 2, true, false]);
});

test('layout detection on every valid triple, both layouts, with and without flags', () => {
  const triples = [];
  for (let layer = 0; layer < 3; layer++) {
    for (let etype = 0; etype < 3; etype++) {
      for (let ecode = 0; ecode < 256; ecode++) if (isValidTermCode(layer, etype, ecode)) triples.push([layer, etype, ecode]);
    }
  }
  assert.equal(triples.length, 2 + 7 + 6 + 1 + 5 + 6 + 7);
  let ambiguous = 0;
  for (const [layer, etype, ecode] of triples) {
    for (const flags of [0, 1, 3, 7]) {
      for (const siw of [false, true]) {
        const b2 = siw ? flags : (flags & 1 ? 0x80 : 0) | (flags & 2 ? 0x40 : 0) | (flags & 4 ? 0x20 : 0);
        const b0 = siw ? (etype << 4) | layer : (layer << 4) | etype;
        const d = decodeTerminate(new Uint8Array([b0, ecode, b2, 0]));
        if (d.ambiguous) {
          ambiguous++;
          assert.equal(flags, 0);
          assert.equal(d.siwLayout, false);
          continue;
        }
        assert.deepEqual([d.layer, d.etype, d.ecode], [layer, etype, ecode], `${b0.toString(16)} ${ecode} ${b2}`);
        assert.deepEqual([d.m, d.d, d.r], [!!(flags & 1), !!(flags & 2), !!(flags & 4)]);
        if (layer !== etype || flags !== 0) assert.equal(d.siwLayout, siw);
      }
    }
  }
  assert.ok(ambiguous > 0);
  // our encoder's siw mimicry decodes back as siw
  const t = encodeTerminate({ layer: 1, etype: 2, ecode: 4 }, { crc: false, siwLayout: true });
  assert.deepEqual(t.subarray(20, 24), hex('21 04 00 00'));
  const d = decodeTerminateFpdu(t);
  assert.deepEqual([d.layer, d.etype, d.ecode, d.siwLayout], [1, 2, 4, true]);
});

test('nonsense control words are reported raw in the RFC reading, never thrown', () => {
  const d = decodeTerminate(hex('ff ee dd cc'));
  assert.deepEqual([d.layer, d.etype, d.ecode, d.siwLayout], [15, 15, 0xee, false]);
  assert.deepEqual(d.raw, new Uint8Array([0xff, 0xee, 0xdd, 0xcc]));
  assert.throws(() => decodeTerminate(hex('20 02 80')), RangeError);
  assert.throws(() => decodeTerminateFpdu(encodeFpdu({ opcode: 3 }, Buffer.alloc(8))), RangeError);
  // truncated attachment: ignored
  const p = decodeTerminate(hex('11 00 c0 00 0072 c1'));
  assert.equal(p.ddpHeader, undefined);
});

test('termName', () => {
  assert.equal(termName(2, 0, 2), 'LLP/MPA: MPA CRC error');
  assert.equal(termName(2, 0, 4), 'LLP/MPA: invalid MPA request or reply frame');
  assert.equal(termName(1, 1, 0), 'DDP/tagged buffer: invalid STag');
  assert.equal(termName(1, 2, 3), 'DDP/untagged buffer: invalid MSN, MSN range');
  assert.equal(termName(1, 0, 0), 'DDP/catastrophic: local catastrophic error');
  assert.equal(termName(0, 2, 6), 'RDMAP/remote operation: unexpected opcode');
  assert.equal(termName(0, 1, 9), 'RDMAP/remote protection: STag cannot be invalidated');
  assert.equal(termName(0, 0, 0xff), 'RDMAP/local catastrophic: unspecified error');
  assert.equal(termName(7, 9, 0x42), 'layer 7/etype 9: ecode 0x42');
  assert.equal(termName(1, 2, 0), 'DDP/untagged buffer: ecode 0x00');
});

test('decodeTerminateMessage: control word from the decoder header, attachments from the payload', () => {
  const rreq = encodeFpdu({ opcode: 1, msn: 2, srcStag: 0xbad });
  const t = encodeTerminate({ layer: 0, etype: 1, ecode: 0, header: decodeFpduHeader(rreq).raw }, { crc: true, msn: 1 });
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc: true });
  for (let i = 0; i < t.length; i++) dec.push(t, i, i + 1);
  const [rec] = sink.records;
  assert.equal(rec.crcOk, true);
  assert.equal(rec.payloadLen, 48);
  const d = decodeTerminateMessage(rec.raw, rec.payload);
  assert.deepEqual(d, decodeTerminateFpdu(t));
  assert.deepEqual([d.layer, d.etype, d.ecode, d.m, d.d, d.r, d.msn], [0, 1, 0, true, true, true, 1]);
  assert.deepEqual(d.rdmapHeader, new Uint8Array(rreq.subarray(20, 48)));
  const bare = decodeTerminateMessage(decodeFpduHeader(encodeTerminate({ layer: 2, etype: 0, ecode: 1 }, { crc: false })).raw);
  assert.deepEqual([bare.layer, bare.ecode, bare.ddpHeader], [2, 1, undefined]);
});
