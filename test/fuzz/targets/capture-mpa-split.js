// The capture's MPA stream splitter (src/wire/capture/mpa-split.ts), which reads the bytes a
// peer sent on an iWARP connection. A valid stream (a start frame, then FPDUs) splits into the
// same units whatever the TCP chunking; any bytes at all (mutated streams, garbage) never throw,
// and what is handed out is the input, in order, each byte once, with only an incomplete unit
// held back at the end.
import assert from 'node:assert/strict';
import { capture } from '../../../dist/wire/index.js';
import { mutate, splits, hexHead } from '../lib/mutate.js';

const { MpaSplitter, fpduWireLength } = capture;

/** A random valid stream and its units. */
function genStream(rng) {
  const units = [];
  const key = rng.chance(0.5) ? 'MPA ID Req Frame' : 'MPA ID Rep Frame';
  const pd = rng.bytes(rng.int(64));
  const start = Buffer.alloc(20 + pd.length);
  start.write(key, 0, 'latin1');
  start[16] = rng.chance(0.5) ? 0x40 : 0x50;
  start[17] = rng.pick([1, 2]);
  start.writeUInt16BE(pd.length, 18);
  Buffer.from(pd).copy(start, 20);
  units.push(start);
  for (let n = rng.int(12); n > 0; n--) {
    const len = rng.chance(0.8) ? rng.int(200) : rng.int(9000);
    const f = Buffer.alloc(fpduWireLength(len));
    f.writeUInt16BE(len, 0);
    Buffer.from(rng.bytes(f.length - 2)).copy(f, 2);
    units.push(f);
  }
  return units;
}

export default {
  name: 'capture-mpa-split',
  about: 'the capture MPA stream splitter: same units whatever the chunking; never throws, loses nor invents bytes',
  budgetMs: 1000,
  run(rng, t) {
    const units = genStream(rng);
    const valid = Buffer.concat(units);
    const mutated = rng.chance(0.4);
    const bytes = mutated ? mutate(rng, valid).bytes : valid;
    t.note(`${mutated ? 'mutated' : 'valid'}: ${hexHead(bytes)}`);
    const s = new MpaSplitter();
    const out = [];
    for (const [a, b] of splits(rng, bytes.length)) s.push(bytes, a, b, (buf, x, y) => out.push(Buffer.from(buf.subarray(x, y))));
    const got = Buffer.concat(out);
    assert.ok(got.equals(bytes.subarray(0, got.length)), 'units are the input, in order');
    if (!mutated) {
      assert.equal(out.length, units.length, 'one unit per start frame or FPDU');
      out.forEach((u, i) => assert.ok(u.equals(units[i]), `unit ${i}`));
      t.count('valid');
    } else t.count(s.mode);
  },
};
