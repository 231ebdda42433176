// Mutations of a valid input, and random chunkings of a byte stream. Each mutation returns a new
// Buffer (the input is never changed) and a short description, kept for failure reports.

const INTERESTING8 = [0x00, 0x01, 0x7f, 0x80, 0xff];
const INTERESTING16 = [0x0000, 0x0001, 0x7fff, 0x8000, 0xfffe, 0xffff];
const INTERESTING32 = [0, 1, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];

/**
 * One mutation operator: (rng, buf, opts) -> [newBuf, description]. `opts.fields` are the length
 * (or count, offset) fields of the input as `{ off, size }` (size 1, 2, 4 or 8; big-endian);
 * `opts.donors` other valid inputs to splice from.
 */
const OPS = {
  flipBit(rng, b) {
    if (b.length === 0) return [b, 'flipBit(empty)'];
    const out = Buffer.from(b);
    const i = rng.int(b.length);
    const k = rng.int(8);
    out[i] ^= 1 << k;
    return [out, `flipBit(${i}.${k})`];
  },
  setByte(rng, b) {
    if (b.length === 0) return [b, 'setByte(empty)'];
    const out = Buffer.from(b);
    const i = rng.int(b.length);
    out[i] = rng.chance(0.5) ? rng.pick(INTERESTING8) : rng.int(256);
    return [out, `setByte(${i}=${out[i]})`];
  },
  setWord(rng, b) {
    if (b.length < 2) return OPS.setByte(rng, b);
    const out = Buffer.from(b);
    if (b.length >= 4 && rng.chance(0.5)) {
      const i = rng.int(b.length - 3);
      out.writeUInt32BE(rng.chance(0.6) ? rng.pick(INTERESTING32) : rng.u32(), i);
      return [out, `setWord32(${i}=${out.readUInt32BE(i)})`];
    }
    const i = rng.int(b.length - 1);
    out.writeUInt16BE(rng.chance(0.6) ? rng.pick(INTERESTING16) : rng.int(65536), i);
    return [out, `setWord16(${i}=${out.readUInt16BE(i)})`];
  },
  truncate(rng, b) {
    const n = rng.int(b.length + 1);
    return [Buffer.from(b.subarray(0, n)), `truncate(${n})`];
  },
  extend(rng, b) {
    const n = 1 + rng.size(64);
    return [Buffer.concat([b, rng.bytes(n)]), `extend(${n})`];
  },
  insert(rng, b) {
    const i = rng.int(b.length + 1);
    const n = 1 + rng.size(32);
    return [Buffer.concat([b.subarray(0, i), rng.bytes(n), b.subarray(i)]), `insert(${i},${n})`];
  },
  remove(rng, b) {
    if (b.length === 0) return [b, 'remove(empty)'];
    const i = rng.int(b.length);
    const n = 1 + rng.int(Math.min(32, b.length - i));
    return [Buffer.concat([b.subarray(0, i), b.subarray(i + n)]), `remove(${i},${n})`];
  },
  duplicate(rng, b) {
    if (b.length === 0) return [b, 'duplicate(empty)'];
    const i = rng.int(b.length);
    const n = 1 + rng.int(Math.min(64, b.length - i));
    const at = rng.int(b.length + 1);
    return [Buffer.concat([b.subarray(0, at), b.subarray(i, i + n), b.subarray(at)]), `duplicate(${i},${n}@${at})`];
  },
  splice(rng, b, opts) {
    const donors = opts.donors ?? [];
    if (donors.length === 0) return OPS.duplicate(rng, b);
    const d = rng.pick(donors);
    const i = rng.int(b.length + 1);
    const j = rng.int(d.length + 1);
    const n = rng.int(d.length - j + 1);
    return [Buffer.concat([b.subarray(0, i), d.subarray(j, j + n), b.subarray(i)]), `splice(${i}<-${j},${n})`];
  },
  field(rng, b, opts) {
    const fields = (opts.fields ?? []).filter((f) => f.off + f.size <= b.length);
    if (fields.length === 0) return OPS.setWord(rng, b);
    const f = rng.pick(fields);
    const out = Buffer.from(b);
    const max = f.size >= 4 ? 0xffffffff : 2 ** (8 * f.size) - 1;
    const cur = f.size === 1 ? out[f.off] : f.size === 2 ? out.readUInt16BE(f.off) : out.readUInt32BE(f.off + (f.size === 8 ? 4 : 0));
    const r = rng.float();
    let v;
    if (r < 0.3) v = cur + rng.range(-4, 4);
    else if (r < 0.5) v = rng.pick([0, 1, 2, 3, 4, max, max - 1, max >>> 1, (max >>> 1) + 1]);
    else if (r < 0.7) v = Math.min(max, b.length + rng.range(-8, 8));
    else v = rng.int(max + 1);
    v = Math.max(0, Math.min(max, v)) >>> 0;
    if (f.size === 1) out[f.off] = v;
    else if (f.size === 2) out.writeUInt16BE(v, f.off);
    else if (f.size === 4) out.writeUInt32BE(v, f.off);
    else {
      out.writeUInt32BE(rng.chance(0.5) ? 0 : rng.u32(), f.off);
      out.writeUInt32BE(v, f.off + 4);
    }
    return [out, `field(${f.off}/${f.size}=${v})`];
  },
};

const WEIGHTED = [
  ['flipBit', 5], ['setByte', 3], ['setWord', 2], ['field', 4], ['truncate', 2], ['extend', 1],
  ['insert', 1], ['remove', 1], ['duplicate', 1], ['splice', 2],
];
const TABLE = WEIGHTED.flatMap(([name, w]) => Array(w).fill(name));

/** Names of the mutation operators. */
export const MUTATIONS = Object.keys(OPS);

/**
 * Apply 1..`maxOps` random mutations to `input`. Returns `{ bytes, ops }` (`ops`: descriptions).
 * `opts.fields`: `{ off, size }` length/count fields worth hitting (relative to the input);
 * `opts.donors`: other valid inputs to splice from; `opts.only`: restrict to these operators.
 */
export function mutate(rng, input, opts = {}) {
  const table = opts.only ? opts.only : TABLE;
  const n = 1 + rng.int(opts.maxOps ?? 4);
  let b = input;
  const ops = [];
  for (let i = 0; i < n; i++) {
    const [out, what] = OPS[rng.pick(table)](rng, b, opts);
    b = out;
    ops.push(what);
  }
  return { bytes: b, ops };
}

/**
 * Random chunk boundaries over `n` bytes, as TCP might deliver them: `[[start, end], ...]`
 * covering [0, n) in order. Mixes one-byte chunks, small and large ones, and sometimes one chunk.
 */
export function splits(rng, n) {
  if (n === 0) return [];
  const mode = rng.float();
  if (mode < 0.1) return [[0, n]];
  const out = [];
  let o = 0;
  const bytewise = mode < 0.2;
  while (o < n) {
    let s;
    if (bytewise) s = 1;
    else {
      const r = rng.float();
      s = r < 0.3 ? 1 + rng.int(8) : r < 0.7 ? 1 + rng.int(200) : r < 0.9 ? 1 + rng.int(4000) : 1 + rng.int(100000);
    }
    s = Math.min(s, n - o);
    out.push([o, o + s]);
    o += s;
  }
  return out;
}

/** Hex of the first `max` bytes of `b`, for failure reports. */
export function hexHead(b, max = 96) {
  const h = Buffer.from(b.subarray(0, max)).toString('hex');
  return b.length > max ? `${h}... (${b.length} bytes)` : `${h} (${b.length} bytes)`;
}
