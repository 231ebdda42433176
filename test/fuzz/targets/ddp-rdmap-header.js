// DDP / RDMAP header decoding (RFC 5041 §4, RFC 5040 §4): decodeFpduHeader at any offset, on
// valid headers of every opcode, mutated ones and random bytes, against the incremental decoder
// on the same bytes; then the TERMINATE a refused header makes (encodeTerminate) read back.
//
// Invariants: null ("need more") only while the bytes end before the header; a header decoded
// has self-consistent fields (opcode table, header length, queue, payload length) and equals what
// FpduDecoder hands its sink; a refusal is a TerminateError with an RFC code, the same one the
// FpduDecoder raises, and its TERMINATE FPDU decodes back to that code with the header attached.
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import { FIELDS } from '../../unit/wire/fpdu-cases.js';
import {
  FPDU_MIN_HDR_LEN,
  FpduDecoder,
  IWARP_OPCODES,
  decodeFpduHeader,
  decodeTerminateFpdu,
  encodeFpdu,
  encodeTerminate,
} from '../../../dist/wire/index.js';
import { outcome, assertTermValid, termKey } from '../lib/assert-typed.js';
import { mutate, hexHead } from '../lib/mutate.js';

function genHeader(rng) {
  const opcode = rng.int(8);
  const f = {
    opcode,
    last: rng.chance(0.8),
    stag: rng.u32(),
    to: rng.chance(0.5) ? rng.int(2 ** 32) : rng.int(2 ** 52),
    invStag: rng.u32(),
    msn: rng.u32(),
    mo: rng.u32(),
    sinkStag: rng.u32(),
    sinkTo: rng.int(2 ** 52),
    readSize: rng.u32(),
    srcStag: rng.u32(),
    srcTo: rng.int(2 ** 52),
  };
  const payload = opcode === 1 ? Buffer.alloc(0) : rng.bytes(rng.size(64));
  return encodeFpdu(f, payload, { crc: rng.chance(0.5) });
}

/** What the incremental decoder makes of the header at the start of `b`. */
function viaDecoder(b) {
  let got = null;
  const sink = {
    onHeader(h) {
      got = {};
      for (const k of FIELDS) got[k] = h[k];
      got.raw = Buffer.from(h.raw);
      throw STOP;
    },
    onPayload() {},
    onEnd() {},
  };
  const dec = new FpduDecoder(sink, { crc: false });
  try {
    dec.push(b);
  } catch (e) {
    if (e === STOP) return { header: got };
    if (e instanceof TerminateError) return { error: e };
    throw e;
  }
  return { header: null };
}
const STOP = new Error('header seen');

export default {
  name: 'ddp-rdmap-header',
  about: 'DDP/RDMAP header decoder at any offset, cross-checked with the FPDU decoder and TERMINATE encoding',
  budgetMs: 1500,
  run(rng, t) {
    const r = rng.float();
    let b;
    if (r < 0.15) b = rng.bytes(rng.size(60));
    else {
      b = genHeader(rng);
      if (r < 0.85) b = mutate(rng, b, { fields: [{ off: 0, size: 2 }, { off: 2, size: 1 }, { off: 3, size: 1 }, { off: 8, size: 4 }, { off: 32, size: 4 }], donors: [genHeader(rng)] }).bytes;
    }
    const pre = rng.chance(0.3) ? rng.int(8) : 0;
    const buf = Buffer.concat([rng.bytes(pre), b]);
    t.note(`offset ${pre}: ${hexHead(b)}`);

    const one = outcome(() => decodeFpduHeader(buf, pre), [TerminateError]);
    const inc = viaDecoder(b);
    if (one.error) {
      assertTermValid(one.error, 'decodeFpduHeader');
      assert.ok(inc.error, `the FPDU decoder accepted what decodeFpduHeader refused (${one.error.message})`);
      assert.equal(termKey(inc.error), termKey(one.error), 'same TERMINATE from both decoders');
      // The TERMINATE we would send for it reads back.
      const crc = rng.chance(0.5);
      const siwLayout = rng.chance(0.2);
      const term = encodeTerminate(one.error, { crc, siwLayout });
      assert.equal(term.length % 4, 0);
      const back = decodeTerminateFpdu(term);
      const want = [one.error.layer, one.error.etype, one.error.ecode];
      // siw's layout without flags can read as another valid RFC code: the RFC reading wins then.
      if (siwLayout && back.ambiguous) assert.deepEqual([back.etype, back.layer, back.ecode], want);
      else assert.deepEqual([back.layer, back.etype, back.ecode], want);
      assert.equal(back.qn, 2);
      const hdr = one.error.header;
      if (back.ddpHeader) assert.ok(Buffer.from(back.ddpHeader).equals(Buffer.from(hdr.subarray(2, 2 + back.ddpHeader.length))), 'attached DDP header');
      t.count('terminate');
      return;
    }
    const h = one.value;
    if (h === null) {
      assert.ok(b.length < FPDU_MIN_HDR_LEN || b.length < IWARP_OPCODES[b[3] & 0x0f].hdrLen, 'null only when the header is incomplete');
      assert.equal(inc.header, null, 'the FPDU decoder waits too');
      assert.equal(inc.error, undefined);
      t.count('needMore');
      return;
    }
    const info = IWARP_OPCODES[h.opcode];
    assert.ok(info, `opcode ${h.opcode}`);
    assert.equal(h.hdrLen, info.hdrLen);
    assert.equal(h.tagged, info.tagged);
    if (!h.tagged) assert.equal(h.qn, info.qn);
    assert.equal(h.payloadLen, h.ulpduLen + 2 - h.hdrLen);
    assert.ok(h.payloadLen >= 0);
    if (h.opcode === 1) assert.equal(h.payloadLen, 0);
    assert.equal(h.raw.length, h.hdrLen);
    assert.ok(Buffer.from(h.raw).equals(b.subarray(0, h.hdrLen)));
    assert.ok(inc.header, 'the FPDU decoder sees the same header');
    for (const k of FIELDS) assert.equal(inc.header[k], h[k], `field ${k}`);
    t.count('header');
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['terminate', 'needMore', 'header']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
