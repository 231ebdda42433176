// TERMINATE messages (RFC 5040 §4.8, §7; siw's bit-swapped layout): decodeTerminate,
// decodeTerminateFpdu and decodeTerminateMessage on Terminates we encode (RFC and siw layout,
// every attachment form), as the FPDU decoder delivers them under random splits, and mutated.
//
// Invariants: a valid Terminate reads back with its code, flags, MSN and attachments, the same
// whole or as header + payload pieces; anything else decodes leniently (fields in range, the
// attachment lengths of its own T bit) or is a RangeError for too few bytes — never another
// exception; termName names any triple.
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import {
  FpduDecoder,
  decodeTerminate,
  decodeTerminateFpdu,
  decodeTerminateMessage,
  encodeFpdu,
  encodeTerminate,
  isValidTermCode,
  termName,
} from '../../../dist/wire/index.js';
import { outcome } from '../lib/assert-typed.js';
import { mutate, splits, hexHead } from '../lib/mutate.js';

/** Every (layer, etype, ecode) the RFCs define. */
const CODES = [];
for (let layer = 0; layer < 3; layer++) {
  for (let etype = 0; etype < 3; etype++) for (let ecode = 0; ecode < 256; ecode++) if (isValidTermCode(layer, etype, ecode)) CODES.push([layer, etype, ecode]);
}

function genSpec(rng) {
  const [layer, etype, ecode] = rng.pick(CODES);
  const spec = { layer, etype, ecode };
  if (rng.chance(0.7)) {
    const opcode = rng.pick([0, 1, 2, 3, 4, 5, 6]);
    const hdr = encodeFpdu({ opcode, stag: rng.u32(), to: rng.int(2 ** 40), msn: rng.u32(), mo: rng.u32(), srcStag: rng.u32(), readSize: rng.u32() }, opcode === 1 ? undefined : rng.bytes(rng.size(16)));
    spec.header = hdr.subarray(0, [16, 48, 16, 20, 20, 20, 20][opcode]);
  }
  return spec;
}

function checkInfo(info, where) {
  for (const k of ['layer', 'etype']) assert.ok(Number.isInteger(info[k]) && info[k] >= 0 && info[k] <= 15, `${where}: ${k} ${info[k]}`);
  assert.ok(Number.isInteger(info.ecode) && info.ecode >= 0 && info.ecode <= 255);
  assert.equal(info.raw.length, 4);
  if (info.siwLayout) assert.ok(isValidTermCode(info.layer, info.etype, info.ecode), `${where}: siw layout only for a valid code`);
  if (info.ddpHeader) assert.equal(info.ddpHeader.length, info.ddpHeader[0] & 0x80 ? 14 : 18, `${where}: DDP attachment length`);
  if (info.rdmapHeader) {
    assert.ok(info.ddpHeader, `${where}: an RDMAP attachment follows a DDP one`);
    assert.equal(info.rdmapHeader.length, 28);
  }
  assert.equal(typeof termName(info.layer, info.etype, info.ecode), 'string');
}

/** Feed a Terminate FPDU through the FPDU decoder in chunks: its header and payload. */
function viaDecoder(bytes, crc, chunks) {
  let raw = null;
  const pieces = [];
  let ok = null;
  const dec = new FpduDecoder(
    {
      onHeader: (h) => (raw = Buffer.from(h.raw)),
      onPayload: (s, a, b) => pieces.push(Buffer.from(s.subarray(a, b))),
      onEnd: (h, crcOk) => (ok = crcOk),
    },
    { crc },
  );
  for (const [s, e] of chunks) dec.push(bytes, s, e);
  return { raw, payload: Buffer.concat(pieces), crcOk: ok };
}

export default {
  name: 'terminate',
  about: 'TERMINATE decoders (RFC and siw layouts, attachments), whole, via the FPDU decoder, mutated',
  budgetMs: 1500,
  run(rng, t) {
    const spec = genSpec(rng);
    const opts = { crc: rng.chance(0.5), msn: rng.chance(0.8) ? 1 : rng.u32(), siwLayout: rng.chance(0.3) };
    if (spec.header && spec.header.length === 48 && rng.chance(0.3)) opts.attachRdmap = false;
    const term = encodeTerminate(spec, opts);
    t.note(`spec ${spec.layer}/${spec.etype}/${spec.ecode}, header ${spec.header ? spec.header.length : 0}, ${JSON.stringify(opts)}: ${hexHead(term)}`);
    if (rng.chance(0.4)) {
      const info = decodeTerminateFpdu(term);
      checkInfo(info, 'valid');
      const want = [spec.layer, spec.etype, spec.ecode];
      if (opts.siwLayout && info.ambiguous) assert.deepEqual([info.etype, info.layer, info.ecode], want);
      else assert.deepEqual([info.layer, info.etype, info.ecode], want);
      // An RFC-layout Terminate never reads as siw's; siw's may read as RFC 5040's when both agree.
      if (!opts.siwLayout) assert.equal(info.siwLayout, false);
      assert.deepEqual([info.qn, info.msn, info.mo], [2, opts.msn >>> 0, 0]);
      const attached = spec.header !== undefined;
      assert.equal(info.m, attached);
      assert.equal(info.d, attached);
      if (attached) {
        assert.ok(Buffer.from(info.ddpHeader).equals(spec.header.subarray(2, 2 + info.ddpHeader.length)));
        assert.equal(info.ddpSegLen, spec.header.readUInt16BE(0));
        assert.equal(info.r, spec.header.length === 48 && opts.attachRdmap !== false);
        if (info.r) assert.ok(Buffer.from(info.rdmapHeader).equals(spec.header.subarray(20, 48)));
      }
      const d = viaDecoder(term, opts.crc, splits(rng, term.length));
      assert.equal(d.crcOk, true);
      assert.deepEqual(decodeTerminateMessage(d.raw, d.payload), info, 'header + payload pieces decode as the whole');
      t.count('valid');
      return;
    }
    const { bytes, ops } = mutate(rng, term, { fields: [{ off: 0, size: 2 }, { off: 20, size: 1 }, { off: 21, size: 1 }, { off: 22, size: 1 }, { off: 24, size: 2 }], donors: [encodeTerminate(genSpec(rng), { crc: false })] });
    t.note(`${ops.join(' ')}: ${hexHead(bytes)}`);
    const off = rng.chance(0.5) ? 20 : rng.int(bytes.length + 1);
    const end = rng.chance(0.7) ? bytes.length : off + rng.int(bytes.length - off + 1);
    const a = outcome(() => decodeTerminate(bytes, off, end), [RangeError]);
    if (a.error) assert.ok(end - off < 4, `RangeError with ${end - off} bytes: ${a.error.message}`);
    else checkInfo(a.value, 'decodeTerminate');
    const b = outcome(() => decodeTerminateFpdu(bytes), [RangeError]);
    if (!b.error) {
      checkInfo(b.value, 'decodeTerminateFpdu');
      t.count('lenient');
    } else t.count('refused');
    // what the receive path does with it: the FPDU decoder, then decodeTerminateMessage if it is one
    const d = outcome(() => viaDecoder(bytes, false, splits(rng, bytes.length)), [TerminateError]);
    if (!d.error && d.value.raw !== null && d.value.raw.length === 24) {
      const m = outcome(() => decodeTerminateMessage(d.value.raw, d.value.payload), [RangeError]);
      if (!m.error) checkInfo(m.value, 'decodeTerminateMessage');
    }
    assert.equal(typeof termName(rng.int(256), rng.int(256), rng.int(256)), 'string');
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['valid', 'lenient', 'refused']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
