// The rsocket wire codecs (src/rsocket/protocol.ts): rs_conn_data from a connect request or accept
// reply's private data, the 32-bit messages of RS_OPT_MSG_SEND in either byte order, and the
// rs_sge / rs_iomap entries a peer RDMA-writes into our target buffer and iomap table.
//
// Invariants: valid structures round-trip; any private data decodes to a structure or to one of
// 'short' / 'version' / 'address' (exactly when too short, another version, an address above
// 2^53), and a decoded structure re-encodes to the same bytes (reserved bytes aside); any 32-bit
// message splits into an op and data that rebuild it; SGEs and iomap entries at any in-bounds
// offset decode to safe integers or NaN for an address beyond 2^53, and a decoded one re-encodes
// to the same bytes.
import assert from 'node:assert/strict';
import {
  RS_CONN_DATA_SIZE,
  RS_CONN_VERSION,
  RS_IOMAP_SIZE,
  RS_SGE_SIZE,
  decodeConnData,
  decodeIomap,
  decodeMsg,
  decodeSge,
  encodeConnData,
  encodeIomap,
  encodeMsg,
  encodeSge,
  rsMsgData,
  rsMsgOp,
  rsMsgSet,
  rsMsgStr,
  scaleToValue,
  seqDiff16,
  valueToScale,
} from '../../../dist/rsocket/protocol.js';
import { mutate, hexHead } from '../lib/mutate.js';

const addr = (rng) => (rng.chance(0.7) ? rng.int(2 ** 48) : rng.int(Number.MAX_SAFE_INTEGER));
const sge = (rng) => ({ addr: addr(rng), key: rng.u32(), length: rng.u32() });

function genConn(rng) {
  return { version: RS_CONN_VERSION, flags: rng.int(256), credits: rng.int(65536), targetIomapSize: rng.int(256), targetSgl: sge(rng), dataBuf: sge(rng) };
}

const isU32 = (v) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff;
const isAddr = (v) => Number.isNaN(v) || (Number.isSafeInteger(v) && v >= 0);

function connData(rng, t) {
  const c = genConn(rng);
  const valid = Buffer.from(encodeConnData(c));
  if (rng.chance(0.3)) {
    assert.deepEqual(decodeConnData(valid), c);
    t.count('connValid');
    return;
  }
  const { bytes } = mutate(rng, valid, { fields: [{ off: 0, size: 1 }, { off: 2, size: 2 }, { off: 7, size: 1 }, { off: 8, size: 8 }, { off: 20, size: 4 }, { off: 24, size: 8 }, { off: 36, size: 4 }] });
  const off = rng.chance(0.8) ? 0 : rng.int(bytes.length + 1);
  t.note(`conn data at ${off}: ${hexHead(bytes)}`);
  const r = decodeConnData(bytes, off);
  if (bytes.length - off < RS_CONN_DATA_SIZE) {
    assert.equal(r, 'short');
    t.count('connShort');
    return;
  }
  if (bytes[off] !== RS_CONN_VERSION) {
    assert.equal(r, 'version');
    t.count('connVersion');
    return;
  }
  const high = bytes.readUInt32BE(off + 8) > 0x1fffff || bytes.readUInt32BE(off + 24) > 0x1fffff;
  if (r === 'address') {
    assert.ok(high, 'address refused only above 2^53');
    t.count('connAddress');
    return;
  }
  assert.equal(typeof r, 'object', `decodeConnData: ${r}`);
  assert.ok(!high);
  for (const s of [r.targetSgl, r.dataBuf]) assert.ok(Number.isSafeInteger(s.addr) && isU32(s.key) && isU32(s.length));
  const back = Buffer.from(encodeConnData(r));
  const want = Buffer.from(bytes.subarray(off, off + RS_CONN_DATA_SIZE));
  want.fill(0, 4, 7); // reserved
  assert.ok(back.equals(want), 're-encodes to the same bytes');
  t.count('connDecoded');
}

function message(rng) {
  const m = rng.chance(0.5) ? rng.u32() : rsMsgSet(rng.int(8), rng.int(0x20000000));
  const be = rng.chance(0.3);
  const b = encodeMsg(m, be);
  assert.equal(decodeMsg(b, 0, be), m);
  const swapped = (((m & 0xff) << 24) | ((m & 0xff00) << 8) | ((m >>> 8) & 0xff00) | (m >>> 24)) >>> 0;
  assert.equal(decodeMsg(b, 0, !be), swapped, 'the other byte order reads the swapped value');
  const op = rsMsgOp(m);
  const data = rsMsgData(m);
  assert.ok(Number.isInteger(op) && op >= 0 && op <= 7);
  assert.ok(Number.isInteger(data) && data >= 0 && data < 0x20000000);
  assert.equal(rsMsgSet(op, data), m);
  assert.equal(typeof rsMsgStr(m), 'string');
}

function entries(rng, t) {
  const le = rng.chance(0.5);
  const iomap = rng.chance(0.5);
  const size = iomap ? RS_IOMAP_SIZE : RS_SGE_SIZE;
  const valid = iomap ? Buffer.from(encodeIomap({ offset: addr(rng), sge: sge(rng) }, le)) : Buffer.from(encodeSge(sge(rng), le));
  const bytes = rng.chance(0.3) ? valid : rng.chance(0.5) ? rng.bytes(size + rng.int(16)) : mutate(rng, valid, { only: ['flipBit', 'setByte', 'setWord', 'field'], fields: [{ off: 0, size: 8 }, { off: 8, size: 8 }] }).bytes;
  if (bytes.length < size) return;
  const off = rng.int(bytes.length - size + 1);
  t.note(`${iomap ? 'iomap' : 'sge'} ${le ? 'LE' : 'BE'} at ${off}: ${hexHead(bytes)}`);
  if (iomap) {
    const m = decodeIomap(bytes, off, le);
    assert.ok(isAddr(m.offset) && isAddr(m.sge.addr) && isU32(m.sge.key) && isU32(m.sge.length));
    if (!Number.isNaN(m.offset) && !Number.isNaN(m.sge.addr)) assert.ok(Buffer.from(encodeIomap(m, le)).equals(bytes.subarray(off, off + size)));
  } else {
    const s = decodeSge(bytes, off, le);
    assert.ok(isAddr(s.addr) && isU32(s.key) && isU32(s.length));
    if (!Number.isNaN(s.addr)) assert.ok(Buffer.from(encodeSge(s, le)).equals(bytes.subarray(off, off + size)));
  }
  t.count(iomap ? 'iomap' : 'sge');
}

export default {
  name: 'rsocket-protocol',
  about: 'rs_conn_data, RS_OPT_MSG_SEND messages, rs_sge / rs_iomap entries written by a peer',
  budgetMs: 1000,
  run(rng, t) {
    connData(rng, t);
    message(rng);
    entries(rng, t);
    const s = rng.int(256);
    const v = scaleToValue(s);
    assert.ok(Number.isInteger(v) && v >= 0 && v <= 0x7f00);
    if (s <= 0x80 || (s & 0x7f) !== 0) assert.equal(scaleToValue(valueToScale(v) & 0xff), v);
    const d = seqDiff16(rng.int(65536), rng.int(65536));
    assert.ok(Number.isInteger(d) && d >= -32768 && d <= 32767);
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['connValid', 'connShort', 'connVersion', 'connAddress', 'connDecoded', 'sge', 'iomap']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
