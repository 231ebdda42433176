// FpduDecoder: chunking by frame, by byte, concatenated, CRC verdicts, malformed headers, sink
// protocol, zero-copy views. Random streams, random splits and mutations (and the cross-check
// against the naive reference decoder) are the fpdu-decoder target of test/fuzz/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import { FpduDecoder, RdmapOpcode, encodeFpdu } from '../../../dist/wire/index.js';
import { FIELDS, MALFORMED, RecordingSink, genStream, isTerm, prng } from './fpdu-cases.js';

const hex = (s) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const RTR_WRITE = hex('000e c140 00000001 0000000000000000 ebd34c5f');
const SEND_HELLO = hex('0017 4143 00000000 00000000 00000001 00000000 68656c6c6f 000000 b990b10c');
const RTR_READ = hex(
  '002e 4141 00000000 00000001 00000001 00000000 00000000 0000000000000000 00000000 00000001 0000000000000000 ba10e3c9',
);
const VECTORS = Buffer.concat([RTR_WRITE, SEND_HELLO, RTR_READ]);

function decodeWith(bytes, crc, chunker) {
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc });
  for (const [s, e] of chunker(bytes.length)) dec.push(bytes, s, e);
  assert.equal(dec.state, 'hdr', 'stream ends on an FPDU boundary');
  assert.equal(dec.bytes, bytes.length);
  assert.equal(dec.fpdus, sink.records.length);
  return sink.records;
}

const whole = (n) => [[0, n]];
const bytewise = (n) => Array.from({ length: n }, (_, i) => [i, i + 1]);
const bySizes = (sizes) => () => {
  const out = [];
  let o = 0;
  for (const s of sizes) out.push([o, (o += s)]);
  return out;
};
function randomSplits(rnd) {
  return (n) => {
    const out = [];
    let o = 0;
    while (o < n) {
      const r = rnd();
      const max = r < 0.2 ? 16 : r < 0.7 ? 2000 : 100000;
      const s = Math.min(n - o, 1 + Math.floor(rnd() * max));
      out.push([o, o + s]);
      o += s;
    }
    return out;
  };
}

function strip(records) {
  return records.map((r) => {
    const o = {};
    for (const k of [...FIELDS, 'raw', 'payload', 'crcOk']) o[k] = r[k];
    return o;
  });
}

test('the CRC-32C FPDU vectors decode whole and byte by byte, CRC on', () => {
  for (const chunker of [whole, bytewise]) {
    const recs = decodeWith(VECTORS, true, chunker);
    assert.deepEqual(
      recs.map((r) => [r.opcode, r.payloadLen, r.crcOk]),
      [
        [RdmapOpcode.WRITE, 0, true],
        [RdmapOpcode.SEND, 5, true],
        [RdmapOpcode.READ_REQ, 0, true],
      ],
    );
    assert.equal(recs[0].stag, 1);
    assert.equal(recs[1].payload.toString(), 'hello');
    assert.deepEqual([recs[1].qn, recs[1].msn, recs[1].mo], [0, 1, 0]);
    assert.deepEqual([recs[2].qn, recs[2].msn, recs[2].srcStag, recs[2].readSize], [1, 1, 1, 0]);
  }
});

test('CRC off: trailers are skipped unchecked; CRC on: zero trailers fail', () => {
  const zero = Buffer.concat(
    [RTR_WRITE, SEND_HELLO, RTR_READ].map((b) => Buffer.concat([b.subarray(0, b.length - 4), Buffer.alloc(4)])),
  );
  assert.deepEqual(decodeWith(zero, false, whole).map((r) => r.crcOk), [true, true, true]);
  assert.deepEqual(decodeWith(VECTORS, false, bytewise).map((r) => r.crcOk), [true, true, true]);
  assert.deepEqual(decodeWith(zero, true, whole).map((r) => r.crcOk), [false, false, false]);
});

test('whole frames, one byte at a time, and many frames concatenated agree', () => {
  const rnd = prng(1);
  for (const crc of [false, true]) {
    const { bytes, expected, sizes } = genStream(rnd, { crc, maxMessages: 6, maxLen: 3000 });
    const want = strip(expected);
    assert.deepEqual(strip(decodeWith(bytes, crc, bySizes(sizes))), want, 'one FPDU per push');
    assert.deepEqual(strip(decodeWith(bytes, crc, bytewise)), want, 'one byte per push');
    assert.deepEqual(strip(decodeWith(bytes, crc, whole)), want, 'all in one push');
  }
});

test('a corrupted byte is reported as crcOk=false on exactly the FPDU it hit', () => {
  const rnd = prng(5);
  const { bytes, expected, sizes } = genStream(rnd, { crc: true, maxMessages: 8, maxLen: 5000 });
  const starts = [];
  let o = 0;
  for (const s of sizes) starts.push((o += s) - s);
  for (let trial = 0; trial < 60; trial++) {
    const k = Math.floor(rnd() * sizes.length);
    const rec = expected[k];
    // anywhere except the length, the control bytes and an untagged QN (validated header fields)
    let rel;
    do rel = 4 + Math.floor(rnd() * (sizes[k] - 4));
    while (!rec.tagged && rel >= 8 && rel < 12);
    const at = starts[k] + rel;
    const bad = Buffer.from(bytes);
    bad[at] ^= 1 << Math.floor(rnd() * 8);
    const got = decodeWith(bad, true, randomSplits(rnd));
    assert.equal(got.length, expected.length);
    got.forEach((r, j) => assert.equal(r.crcOk, j !== k, `fpdu ${j}, flipped ${at - starts[k]} of ${sizes[k]} (${rec.opcode})`));
  }
  // with CRC off the same damage goes unnoticed by the framing layer
  const bad = Buffer.from(bytes);
  bad[bytes.length - 1] ^= 0xff;
  assert.ok(decodeWith(bad, false, whole).every((r) => r.crcOk));
});

test('pad bytes are covered by the CRC', () => {
  const b = Buffer.from(SEND_HELLO);
  b[25] = 1; // first pad byte
  assert.deepEqual(decodeWith(b, true, whole).map((r) => r.crcOk), [false]);
});

test('malformed headers throw the right TERMINATE after the preceding FPDUs, then the decoder is dead', () => {
  for (const [name, make, codes, attached] of MALFORMED) {
    const bad = make();
    const stream = Buffer.concat([SEND_HELLO, bad, RTR_WRITE]);
    for (const chunker of [whole, bytewise]) {
      const sink = new RecordingSink();
      const dec = new FpduDecoder(sink, { crc: false });
      let consumed = 0;
      let err;
      for (const [s, e] of chunker(stream.length)) {
        try {
          dec.push(stream, s, e);
          consumed = e;
        } catch (x) {
          err = x;
          break;
        }
      }
      assert.ok(err, `${name}: no error`);
      isTerm(...codes)(err);
      assert.deepEqual(err.header, new Uint8Array(bad.subarray(0, attached)), `${name}: attached bytes`);
      assert.equal(sink.records.length, 1, `${name}: the good FPDU before it was delivered`);
      assert.equal(dec.state, 'dead');
      if (chunker === bytewise) assert.equal(consumed, SEND_HELLO.length + attached - 1, `${name}: thrown at the byte completing the header part`);
      dec.push(RTR_WRITE); // ignored
      assert.equal(sink.records.length, 1);
      assert.equal(sink.inFpdu, false, `${name}: no header was announced for the bad FPDU`);
    }
  }
});

test('a sink exception kills the decoder and propagates unchanged', () => {
  for (const where of ['onHeader', 'onPayload', 'onEnd']) {
    const sink = new RecordingSink();
    const boom = new TerminateError(1, 1, 0, 'invalid STag');
    const orig = sink[where].bind(sink);
    let calls = 0;
    sink[where] = (...a) => {
      if (++calls === 2) throw boom;
      return orig(...a);
    };
    const dec = new FpduDecoder(sink, { crc: true });
    const stream = Buffer.concat([SEND_HELLO, SEND_HELLO, SEND_HELLO]);
    assert.throws(() => dec.push(stream), (e) => e === boom);
    assert.equal(dec.state, 'dead');
    dec.push(SEND_HELLO);
    assert.equal(sink.records.length, 1, where);
  }
});

test('stop() from inside the sink ends decoding in the middle of a chunk', () => {
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc: true });
  const orig = sink.onEnd.bind(sink);
  sink.onEnd = (h, ok) => {
    orig(h, ok);
    if (h.opcode === RdmapOpcode.SEND) dec.stop();
  };
  dec.push(Buffer.concat([RTR_WRITE, SEND_HELLO, RTR_READ]));
  assert.deepEqual(sink.records.map((r) => r.opcode), [0, 3]);
  assert.equal(dec.state, 'dead');
  // stop() mid-payload as well
  const sink2 = new RecordingSink();
  const dec2 = new FpduDecoder(sink2, { crc: false });
  sink2.onPayload = () => dec2.stop();
  dec2.push(Buffer.concat([SEND_HELLO, SEND_HELLO]));
  assert.equal(dec2.state, 'dead');
  assert.equal(sink2.records.length, 0);
});

test('payload is handed out as views of the pushed chunk, within push bounds (zero copy)', () => {
  const payload = Buffer.alloc(5000, 7);
  const f = encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 9, to: 100 }, payload, { crc: true });
  const padded = Buffer.concat([Buffer.alloc(13, 0xee), f, Buffer.alloc(9, 0xee)]);
  const sink = new RecordingSink();
  let bounds;
  sink.onChunk = (src, s, e) => {
    assert.equal(src, padded, 'the very chunk object, not a copy');
    assert.ok(s >= bounds[0] && e <= bounds[1]);
  };
  const dec = new FpduDecoder(sink, { crc: true });
  for (const [s, e] of [[13, 20], [20, 1000], [1000, 1001], [1001, 13 + f.length]]) {
    bounds = [s, e];
    dec.push(padded, s, e);
  }
  assert.equal(sink.records.length, 1);
  assert.equal(sink.records[0].crcOk, true);
  assert.deepEqual(sink.records[0].payload, payload);
  assert.equal(sink.views, 3);
});

test('the header object is reused and raw is exactly the header', () => {
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc: false });
  const seen = new Set();
  const orig = sink.onHeader.bind(sink);
  sink.onHeader = (h) => {
    seen.add(h);
    assert.equal(h.raw.length, h.hdrLen);
    orig(h);
  };
  dec.push(Buffer.concat([RTR_WRITE, SEND_HELLO, RTR_READ, encodeFpdu({ opcode: 7 }, Buffer.alloc(4))]));
  assert.equal(seen.size, 1);
  assert.ok(seen.has(dec.header));
  assert.deepEqual(sink.records.map((r) => r.raw.length), [16, 20, 48, 24]);
  assert.deepEqual(Buffer.from(sink.records[2].raw), RTR_READ.subarray(0, 48));
});

test('ULPDU of 65535 bytes (largest FPDU) in odd chunks', () => {
  const payload = Buffer.alloc(65535 - 14);
  for (let i = 0; i < payload.length; i++) payload[i] = i * 13;
  const f = encodeFpdu({ opcode: RdmapOpcode.READ_RESP, stag: 3, to: 2 ** 52 }, payload, { crc: true });
  assert.equal(f.length, 2 + 65535 + 3 + 4);
  const recs = decodeWith(f, true, bySizes([1, 15, 1, 4000, 61000, f.length - 65017]));
  assert.equal(recs.length, 1);
  assert.equal(recs[0].to, 2 ** 52);
  assert.equal(recs[0].crcOk, true);
  assert.deepEqual(recs[0].payload, payload);
});

test('push validates its range and leaves the decoder untouched on a bad one', () => {
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc: true });
  assert.throws(() => dec.push(SEND_HELLO, 0, SEND_HELLO.length + 1), RangeError);
  assert.throws(() => dec.push(SEND_HELLO, 5, 4), RangeError);
  assert.throws(() => dec.push(SEND_HELLO, -1), RangeError);
  assert.equal(dec.state, 'hdr');
  dec.push(SEND_HELLO, 0, 0);
  dec.push(SEND_HELLO);
  assert.equal(sink.records.length, 1);
});

test('pushFpdu stops at the end of each FPDU, and decodes what push decodes', () => {
  const rnd = prng(7);
  for (const crc of [false, true]) {
    for (let round = 0; round < 20; round++) {
      const { bytes, expected, sizes } = genStream(rnd, { crc, maxMessages: 8, maxLen: 3000 });
      const ends = new Set();
      let o = 0;
      for (const s of sizes) ends.add((o += s));
      const sink = new RecordingSink();
      const dec = new FpduDecoder(sink, { crc });
      for (const [s, e] of randomSplits(rnd)(bytes.length)) {
        let p = s;
        while (p < e) {
          const before = sink.records.length;
          const q = dec.pushFpdu(bytes, p, e);
          assert.ok(q > p && q <= e, `progress within the chunk (${p} -> ${q} of ${e})`);
          if (q < e) {
            assert.ok(ends.has(q), `stopped at ${q}, an FPDU's end`);
            assert.ok(dec.atBoundary);
            assert.equal(sink.records.length, before + 1, 'one FPDU ended');
          }
          p = q;
        }
      }
      assert.equal(dec.bytes, bytes.length);
      assert.equal(dec.fpdus, expected.length);
      assert.deepEqual(strip(sink.records), strip(expected));
    }
  }
});

test('pushFpdu: a stop from inside the sink hands back the whole chunk, counted', () => {
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc: true });
  sink.onPayload = () => dec.stop();
  const bytes = Buffer.concat([RTR_WRITE, SEND_HELLO, RTR_READ]);
  assert.equal(dec.pushFpdu(bytes, 0, bytes.length), RTR_WRITE.length, 'the zero-length Write ends first');
  assert.equal(dec.pushFpdu(bytes, RTR_WRITE.length, bytes.length), bytes.length);
  assert.equal(dec.state, 'dead');
  assert.equal(dec.bytes, bytes.length);
  assert.equal(dec.pushFpdu(bytes, 0, 4), 4, 'dead: everything is taken, nothing decoded');
});
