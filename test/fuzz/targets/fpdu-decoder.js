// The incremental FPDU decoder (src/wire/fpdu-decoder.ts, RFC 5044 §4) over streams of valid
// FPDUs, cut into random TCP-like chunks, whole or mutated (bit flips, length fields, control
// bytes, truncation, splices), CRC on or off.
//
// Invariants: a valid stream decodes to exactly what was encoded under any chunking; any stream,
// valid or not, decodes identically (same FPDUs, payloads, CRC verdicts, same TERMINATE) whether
// pushed whole or in chunks; the only exception is a TerminateError with an RFC code and the
// header bytes attached, after which the decoder is dead and ignores input; the sink's call
// protocol (header, payload pieces, end) is kept. Half the chunked runs feed each chunk with
// pushFpdu (one FPDU at a time, as the QP's receive path does between its fast-path runs).
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import { FpduDecoder } from '../../../dist/wire/index.js';
import { crc32cBitwise } from '../../../dist/wire/index.js';
import { FIELDS, RecordingSink, genStream, refDecode } from '../../unit/wire/fpdu-cases.js';
import { outcome, assertTermValid, termKey } from '../lib/assert-typed.js';
import { mutate, splits, hexHead } from '../lib/mutate.js';

/** Decode `bytes` pushed in `chunks`; `byFpdu`: each chunk with pushFpdu, one FPDU at a time. */
function decode(bytes, crc, chunks, byFpdu = false) {
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc });
  const r = outcome(() => {
    for (const [s, e] of chunks) {
      if (!byFpdu) {
        dec.push(bytes, s, e);
        continue;
      }
      for (let p = s; p < e; ) {
        const q = dec.pushFpdu(bytes, p, e);
        assert.ok(q > p && q <= e, 'pushFpdu makes progress within its range');
        if (q < e) assert.ok(dec.atBoundary, 'pushFpdu stops only at a boundary');
        p = q;
      }
    }
  }, [TerminateError]);
  if (r.error) {
    assertTermValid(r.error, 'FpduDecoder.push');
    assert.ok(r.error.header instanceof Uint8Array && r.error.header.length >= 4, 'the header read is attached');
    assert.equal(dec.state, 'dead');
    dec.push(bytes); // a dead decoder ignores further input
    assert.equal(dec.state, 'dead');
  } else {
    assert.equal(dec.bytes, bytes.length);
  }
  assert.equal(dec.fpdus, sink.records.length);
  return { records: sink.records, error: r.error, state: dec.state, inFpdu: sink.inFpdu, got: sink.got ?? 0 };
}

function sameRecords(a, b, what) {
  assert.equal(a.length, b.length, `${what}: FPDU count`);
  for (let i = 0; i < a.length; i++) {
    for (const k of FIELDS) assert.equal(a[i][k], b[i][k], `${what}: FPDU ${i} ${k}`);
    assert.ok(Buffer.from(a[i].raw).equals(Buffer.from(b[i].raw)), `${what}: FPDU ${i} header bytes`);
    assert.ok(a[i].payload.equals(b[i].payload), `${what}: FPDU ${i} payload`);
    assert.equal(a[i].crcOk, b[i].crcOk, `${what}: FPDU ${i} CRC verdict`);
  }
}

export default {
  name: 'fpdu-decoder',
  about: 'incremental FPDU decoder: valid and mutated streams, random TCP splits, CRC on/off',
  budgetMs: 2000,
  run(rng, t) {
    const crc = rng.chance(0.5);
    const rnd = () => rng.float();
    const big = rng.chance(0.04);
    const { bytes: valid, expected, sizes } = genStream(rnd, { crc, maxMessages: big ? 3 : 5, maxLen: big ? 70000 : 2000 });
    const mutated = rng.chance(0.75);
    let bytes = valid;
    let ops = [];
    if (mutated) {
      // the length field, control bytes, STag/QN, MSN and MO of the first FPDUs
      const fields = [];
      let o = 0;
      for (let i = 0; i < Math.min(4, sizes.length); i++) {
        fields.push({ off: o, size: 2 }, { off: o + 2, size: 1 }, { off: o + 3, size: 1 }, { off: o + 4, size: 4 }, { off: o + 8, size: 4 }, { off: o + 12, size: 4 }, { off: o + 16, size: 4 });
        o += sizes[i];
      }
      const donor = genStream(rnd, { crc, maxMessages: 2, maxLen: 200 }).bytes;
      ({ bytes, ops } = mutate(rng, valid, { fields, donors: [donor] }));
    }
    t.note(`crc ${crc}, ${mutated ? `mutated: ${ops.join(' ')}` : 'valid'}; ${hexHead(bytes)}`);

    const whole = decode(bytes, crc, bytes.length ? [[0, bytes.length]] : []);
    const byFpdu = rng.chance(0.5);
    const split = decode(bytes, crc, splits(rng, bytes.length), byFpdu);
    if (byFpdu) t.count('pushFpdu');
    sameRecords(split.records, whole.records, 'split vs whole');
    assert.equal(termKey(split.error), termKey(whole.error), 'same TERMINATE');
    if (whole.error) assert.ok(Buffer.from(split.error.header).equals(Buffer.from(whole.error.header)), 'same attached header');
    assert.equal(split.state, whole.state, 'same final state');
    if (!mutated) {
      assert.equal(whole.error, undefined);
      assert.equal(whole.state, 'hdr');
      sameRecords(whole.records, expected, 'decoded vs encoded');
      // a naive whole-buffer DataView decoder with the bitwise CRC reads the stream the same way
      if (rng.chance(0.1)) sameRecords(refDecode(valid, { crc, crcFn: crc32cBitwise }), expected, 'reference decoder');
      t.count('valid');
      return;
    }
    if (whole.error) t.count('terminate');
    else if (whole.records.some((r) => !r.crcOk)) t.count('badCrc');
    else if (whole.state !== 'hdr') t.count('needMore');
    else t.count('accepted');
  },
  check(counts, cases) {
    if (cases < 1000) return;
    for (const k of ['valid', 'terminate', 'badCrc', 'needMore']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
