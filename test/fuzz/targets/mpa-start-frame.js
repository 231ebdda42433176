// MPA Request / Reply start frames (RFC 5044 §7.1, RFC 6581 §3): decodeMpaStartFrame as the CM
// feeds it (the bytes received so far, re-decoded after every TCP chunk), then the accept rules
// (validateMpaRequest / validateMpaReply).
//
// Valid frames: decoded identically whatever the chunking, "need more" exactly until the whole
// frame is in, bytes behind the frame ignored, encode(decode(x)) == x. Mutated frames: a frame,
// "need more", or TerminateError LLP/MPA/0x04 — nothing else; a decoded frame's length is
// 20 + PD_Length within the bytes given, and the accept rules never throw.
import assert from 'node:assert/strict';
import { TerminateError } from '../../../dist/errors.js';
import {
  MPA_HDR_LEN,
  MPA_MAX_PD,
  decodeMpaStartFrame,
  encodeMpaStartFrame,
  mpaHasV2Word,
  validateMpaReply,
  validateMpaRequest,
} from '../../../dist/wire/index.js';
import { outcome, assertTermValid } from '../lib/assert-typed.js';
import { mutate, splits, hexHead } from '../lib/mutate.js';

/** A random valid start frame (as our encoder writes it). */
function genFrame(rng) {
  const type = rng.chance(0.5) ? 'request' : 'reply';
  const rev = rng.pick([1, 2, 2, 2, 0]);
  const enhanced = rng.chance(0.7);
  const v2 = enhanced && rev === 2;
  const pdMax = MPA_MAX_PD - (v2 ? 4 : 0);
  const f = {
    type,
    markers: rng.chance(0.1),
    crc: rng.chance(0.3),
    reject: type === 'reply' && rng.chance(0.15),
    enhanced,
    rev,
    privateData: rng.bytes(rng.size(pdMax)),
  };
  if (rng.chance(0.05)) f.gso = true;
  if (v2) {
    Object.assign(f, {
      ird: rng.chance(0.5) ? rng.int(129) : rng.int(0x4000),
      ord: rng.chance(0.5) ? rng.int(129) : rng.int(0x4000),
      p2p: rng.chance(0.5),
      rtrSend: rng.chance(0.3),
      rtrWrite: rng.chance(0.5),
      rtrRead: rng.chance(0.5),
    });
  }
  return f;
}

/** Decode as the CM does: append each chunk, decode what has arrived, stop at the first verdict. */
function decodeChunked(bytes, expect, chunks) {
  let acc = Buffer.alloc(0);
  for (const [s, e] of chunks) {
    acc = Buffer.concat([acc, bytes.subarray(s, e)]);
    const r = outcome(() => decodeMpaStartFrame(acc, expect), [TerminateError]);
    if (r.error || !('needMore' in r.value)) return { ...r, at: acc.length };
  }
  return { value: { needMore: true }, at: acc.length };
}

const sameFrame = (a, b) => {
  assert.deepEqual({ ...a, privateData: Buffer.from(a.privateData) }, { ...b, privateData: Buffer.from(b.privateData) });
};

function checkVerdicts(frame, rng) {
  if (frame.type === 'request') {
    const v = validateMpaRequest(frame, { crcStrict: rng.chance(0.2) });
    assert.ok(v.action === 'accept' || v.action === 'reject', `request verdict ${v.action}`);
    if (v.action === 'accept') assert.ok(v.rtr === null || v.rtr === 'write' || v.rtr === 'read');
  } else {
    const req = genFrame(rng);
    req.type = 'request';
    const v = validateMpaReply(frame, req, rng.chance(0.5) ? {} : { maxIrd: rng.int(200) });
    assert.ok(['accept', 'rejected', 'fail'].includes(v.action), `reply verdict ${v.action}`);
    if (v.action === 'fail' && v.terminate !== undefined) assertTermValid(v.terminate, 'validateMpaReply');
    if (v.action === 'fail') assert.ok(Number.isInteger(v.status) && v.status < 0);
  }
}

export default {
  name: 'mpa-start-frame',
  about: 'MPA Request/Reply decoder (chunked as the CM feeds it) and the accept rules',
  budgetMs: 1500,
  run(rng, t) {
    const f = genFrame(rng);
    const valid = encodeMpaStartFrame(f);
    const expect = rng.chance(0.9) ? f.type : f.type === 'request' ? 'reply' : 'request';
    const mutated = rng.chance(0.7);
    let bytes = valid;
    if (mutated) {
      const donor = encodeMpaStartFrame(genFrame(rng));
      bytes = mutate(rng, valid, { fields: [{ off: 16, size: 1 }, { off: 17, size: 1 }, { off: 18, size: 2 }, { off: 20, size: 2 }, { off: 22, size: 2 }], donors: [donor] }).bytes;
    } else if (rng.chance(0.3)) {
      bytes = Buffer.concat([valid, rng.bytes(1 + rng.int(40))]); // data queued behind the frame
    }
    t.note(`expect ${expect}, ${mutated ? 'mutated' : 'valid'}: ${hexHead(bytes)}`);

    const whole = outcome(() => decodeMpaStartFrame(bytes, expect), [TerminateError]);
    const chunked = decodeChunked(bytes, expect, splits(rng, bytes.length));
    if (whole.error) {
      assertTermValid(whole.error, 'decodeMpaStartFrame');
      assert.deepEqual([whole.error.layer, whole.error.etype, whole.error.ecode], [2, 0, 0x04], 'only "invalid MPA request/reply"');
      assert.ok(chunked.error, 'chunked decoding refuses the same bytes');
      assert.equal(chunked.error.message, whole.error.message);
      t.count('terminate');
      return;
    }
    assert.ok(!chunked.error, `chunked decoding threw where whole did not: ${chunked.error && chunked.error.message}`);
    const r = whole.value;
    if ('needMore' in r) {
      assert.deepEqual(Object.keys(r), ['needMore']);
      assert.ok('needMore' in chunked.value);
      assert.ok(bytes.length < MPA_HDR_LEN || bytes.length < MPA_HDR_LEN + bytes.readUInt16BE(18), 'need more only when short');
      assert.ok(!(expect === f.type && !mutated), 'a whole valid frame decodes');
      t.count('needMore');
      return;
    }
    assert.ok(!('needMore' in chunked.value), 'chunked decoding completes on the same bytes');
    assert.equal(r.length, MPA_HDR_LEN + bytes.readUInt16BE(18));
    assert.ok(r.length <= bytes.length && r.length <= MPA_HDR_LEN + MPA_MAX_PD);
    assert.equal(chunked.value.length, r.length);
    assert.ok(chunked.at >= r.length, 'no verdict before the frame is in');
    sameFrame(chunked.value.frame, r.frame);
    assert.equal(r.frame.type, expect);
    if (!mutated) {
      assert.equal(expect, f.type);
      sameFrame(r.frame, { ...f });
      assert.ok(encodeMpaStartFrame(r.frame).equals(valid.subarray(0, r.length)), 'encode(decode(x)) == x');
    } else if (!mpaHasV2Word(r.frame) || r.frame.ird !== undefined) {
      // a decoded frame re-encodes to the same fields (reserved flag bits aside)
      sameFrame(decodeMpaStartFrame(encodeMpaStartFrame(r.frame), expect).frame, r.frame);
    }
    checkVerdicts(r.frame, rng);
    t.count(mutated ? 'mutatedFrame' : 'validFrame');
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['terminate', 'needMore', 'mutatedFrame', 'validFrame']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
