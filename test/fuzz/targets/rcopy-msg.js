// rcopy's messages as its server reads them from a client (src/cli/rcopy-msg.ts): the 16-byte
// header (version u8, command u8, len u16, data u32, id u64, little-endian), an OPEN's path and a
// WRITE's size.
//
// Invariants: valid messages round-trip; any 16 bytes at any offset decode to in-range fields equal
// to a Buffer-read reference, and re-encode to the same bytes; the header is accepted exactly when
// version is 0 and len at least 16; any payload gives a path without a NUL that re-encodes to a
// prefix of the payload's bytes (when they are UTF-8); any 8 bytes give a u64 size; fewer bytes
// than a structure needs are a RangeError, never a short read.
import assert from 'node:assert/strict';
import {
  CMD_RESP,
  MSG_HDR_SIZE,
  MSG_WRITE_SIZE,
  decodeHdr,
  decodePath,
  decodeSize,
  encodeHdr,
  encodeOpen,
  encodeResp,
  encodeWrite,
  hdrValid,
  statusOf,
} from '../../../dist/cli/rcopy-msg.js';
import { mutate, hexHead } from '../lib/mutate.js';

function genHdr(rng) {
  return { version: rng.chance(0.8) ? 0 : rng.int(256), command: rng.int(256), len: rng.int(65536), data: rng.u32(), id: (BigInt(rng.u32()) << 32n) | BigInt(rng.u32()) };
}

function header(rng, t) {
  const h = genHdr(rng);
  const valid = Buffer.from(encodeHdr(h));
  assert.deepEqual(decodeHdr(valid), h);
  const bytes = rng.chance(0.5) ? mutate(rng, Buffer.concat([rng.bytes(rng.int(8)), valid, rng.bytes(rng.int(8))]), { fields: [] }).bytes : rng.bytes(rng.int(40));
  const off = rng.int(bytes.length + 1);
  t.note(`header at ${off}: ${hexHead(bytes)}`);
  if (bytes.length - off < MSG_HDR_SIZE) {
    assert.throws(() => decodeHdr(bytes, off), RangeError);
    t.count('short');
    return;
  }
  const d = decodeHdr(bytes, off);
  const ref = { version: bytes[off], command: bytes[off + 1], len: bytes.readUInt16LE(off + 2), data: bytes.readUInt32LE(off + 4), id: bytes.readBigUInt64LE(off + 8) };
  assert.deepEqual(d, ref);
  assert.ok(Buffer.from(encodeHdr(d)).equals(bytes.subarray(off, off + MSG_HDR_SIZE)));
  assert.equal(hdrValid(d), d.version === 0 && d.len >= MSG_HDR_SIZE);
  assert.equal(statusOf(d), bytes.readInt32LE(off + 4));
  const resp = decodeHdr(encodeResp(d, d.data));
  assert.deepEqual(resp, { version: 0, command: (d.command | CMD_RESP) & 0xff, len: MSG_HDR_SIZE, data: d.data, id: d.id });
  t.count(hdrValid(d) ? 'accepted' : 'refused');
}

function path(rng, t) {
  const name = rng.chance(0.5) ? Buffer.from(`dir/${rng.int(1e9)}.bin`) : rng.bytes(rng.int(300));
  const payload = rng.chance(0.5) ? Buffer.from(encodeOpen(name.toString('utf8'), rng.u32()).msg).subarray(MSG_HDR_SIZE) : name;
  t.note(`path payload: ${hexHead(payload)}`);
  const p = decodePath(payload);
  assert.equal(typeof p, 'string');
  assert.ok(!p.includes('\0'));
  const nul = payload.indexOf(0);
  const raw = payload.subarray(0, nul < 0 ? payload.length : nul);
  if (Buffer.from(raw.toString('utf8'), 'utf8').equals(raw)) assert.ok(Buffer.from(p, 'utf8').equals(raw));
  t.count('path');
}

function size(rng, t) {
  const v = (BigInt(rng.u32()) << 32n) | BigInt(rng.u32());
  const w = Buffer.from(encodeWrite(v));
  assert.equal(w.length, MSG_WRITE_SIZE);
  assert.equal(decodeSize(w, MSG_HDR_SIZE), v);
  const bytes = rng.bytes(rng.int(16));
  const off = rng.int(bytes.length + 1);
  if (bytes.length - off < 8) assert.throws(() => decodeSize(bytes, off), RangeError);
  else assert.equal(decodeSize(bytes, off), bytes.readBigUInt64LE(off));
  t.count('size');
}

export default {
  name: 'rcopy-msg',
  about: 'rcopy headers, OPEN paths and WRITE sizes as the server reads them from a client',
  budgetMs: 300,
  run(rng, t) {
    header(rng, t);
    path(rng, t);
    size(rng, t);
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['short', 'accepted', 'refused', 'path', 'size']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
