// The frames in which the processes sharing a soft RoCE device's UDP port hand each other
// datagrams over Unix sockets any local process can connect to (src/transport/roce/fwd-frame.ts):
// valid and mutated streams of frames through the incremental splitter, whole and cut at random.
//
// Invariants: a valid stream gives back exactly its frames, in order, whole and under any
// chunking; a mutated stream gives, whole and chunked alike, the same frames up to the same
// verdict (malformed or not), every frame handed on is within the length bounds and carries its
// own length's bytes, nothing throws, and after a malformed length nothing more is handed on.
import assert from 'node:assert/strict';
import { FwdFrameSplitter, FWD_HDR, FWD_MAX, encodeFwdHeader, fwdFamily, fwdFlags, fwdSrcPort } from '../../../dist/transport/roce/fwd-frame.js';
import { hexHead, mutate, splits } from '../lib/mutate.js';

/** A random frame: header then payload, its length word first. */
function genFrame(rng) {
  const payload = rng.bytes(rng.chance(0.1) ? rng.int(9000) : rng.int(300));
  const f = Buffer.alloc(4 + FWD_HDR + payload.length);
  encodeFwdHeader(f, 0, rng.pick([4, 6]), rng.int(65536), Buffer.from(rng.bytes(32)), payload.length, rng.pick([0, 1, 0x21, 0xf1]));
  Buffer.from(payload).copy(f, 4 + FWD_HDR);
  return f;
}

/** Feed `stream` in the given `[start, end)` pieces; the frames handed on (copied) and whether it stayed well formed. */
function run(stream, pieces) {
  const frames = [];
  const s = new FwdFrameSplitter((f) => {
    assert.ok(f.length >= FWD_HDR && f.length <= FWD_MAX, `frame of ${f.length} bytes handed on`);
    // The header's decoders, as the receiver runs them on every frame: a verdict, never a throw.
    assert.ok([0, 4, 6].includes(fwdFamily(f)));
    const flags = fwdFlags(f);
    assert.ok(flags === -1 || (flags >= 0 && flags < 256 && (flags & 0x0e) === 0));
    assert.ok(fwdSrcPort(f) >= 0 && fwdSrcPort(f) < 65536);
    frames.push(Buffer.from(f));
  });
  let ok = true;
  for (const [a, off] of pieces) {
    const r = s.push(Buffer.from(stream.subarray(a, off)));
    if (!r) {
      ok = false;
      // nothing more after the verdict, whatever follows
      const before = frames.length;
      assert.equal(s.push(Buffer.from(stream.subarray(off))), false);
      assert.equal(frames.length, before, 'no frame after a malformed one');
      break;
    }
  }
  return { frames, ok };
}

export default {
  name: 'roce-fwd-frame',
  about: 'forwarding frames between processes sharing the RoCE port: the incremental splitter, valid and mutated, whole and split',
  budgetMs: 800,
  run(rng, t) {
    const frames = Array.from({ length: 1 + rng.int(6) }, () => genFrame(rng));
    const valid = Buffer.concat(frames);
    if (rng.chance(0.4)) {
      const whole = run(valid, [[0, valid.length]]);
      const cut = run(valid, splits(rng, valid.length));
      assert.equal(whole.ok, true);
      assert.equal(cut.ok, true);
      assert.deepEqual(whole.frames, frames.map((f) => f.subarray(4)));
      assert.deepEqual(cut.frames, whole.frames, 'the same frames under any chunking');
      t.count('valid');
      return;
    }
    const fields = [];
    let at = 0;
    for (const f of frames) {
      fields.push({ off: at, size: 4 }, { off: at + 4, size: 1 });
      at += f.length;
    }
    const { bytes, ops } = mutate(rng, valid, { fields, donors: [genFrame(rng)] });
    t.note(`${ops.join(' ')}: ${hexHead(bytes)}`);
    const stream = Buffer.from(bytes);
    const whole = run(stream, stream.length === 0 ? [] : [[0, stream.length]]);
    const cut = run(stream, splits(rng, stream.length));
    assert.equal(cut.ok, whole.ok, 'the same verdict whole and chunked');
    assert.deepEqual(cut.frames, whole.frames, 'the same frames whole and chunked');
    t.count(whole.ok ? 'accepted' : 'malformed');
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['valid', 'accepted', 'malformed']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
