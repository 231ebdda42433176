// Seeded mutation fuzzing of every RoCE decoder that reads peer bytes: RoCEv2 packets (with and
// without the ICRC, with the ICRC fixed up so mutations reach the later checks), GSI datagrams,
// CM MADs, MAD headers and CMA headers. Properties:
//  - parsers never throw; decoders throw nothing but RdmaError EBADMSG;
//  - no read outside the given bytes: a guard proxy reports any index outside [0, length), and a
//    packet parsed in the middle of random garbage gives the result it gives on its own;
//  - whatever is accepted is self-consistent and survives decode → encode → decode.
// ROCE_FUZZ_SEED and ROCE_FUZZ_ITERS change the seed and the number of cases per target.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { roce } from '../../../../dist/wire/index.js';
import { RdmaError } from '../../../../dist/errors.js';
import { udpDatagrams } from '../pcap-util.js';
import { KINDS, randomBytes, randomCmMessage, rng } from './roce-util.js';

const SEED = Number(process.env.ROCE_FUZZ_SEED ?? 0x5eed);
const ITERS = Number(process.env.ROCE_FUZZ_ITERS ?? 3000);
const NET = { family: 4, src: Uint8Array.of(10, 77, 0, 3), dst: Uint8Array.of(10, 77, 0, 2), sport: 0xc123 };

/** A view of `bytes` that records every indexed read outside [0, length). */
function guarded(bytes, violations) {
  return new Proxy(bytes, {
    get(target, prop) {
      if (typeof prop === 'string' && /^-?\d+$/.test(prop)) {
        const i = Number(prop);
        if (i < 0 || i >= target.length) violations.push(i);
        return target[i];
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** Valid RoCEv2 payloads: every rxe packet of the captures plus random packets of every opcode. */
function seeds(next) {
  const out = [];
  for (const name of ['E-rxe-2vm.pcap', 'C-rxe-mcast.pcap']) {
    const file = fileURLToPath(new URL(`../../../fixtures/captures/${name}`, import.meta.url));
    const seen = new Set();
    for (const d of udpDatagrams(file)) {
      if (d.dport !== 4791) continue;
      const key = `${d.payload[0]}/${d.payload.length}`;
      if (seen.has(key)) continue; // one of each opcode and size is plenty
      seen.add(key);
      out.push({ bytes: new Uint8Array(d.payload), net: { family: 4, src: new Uint8Array(d.src), dst: new Uint8Array(d.dst), sport: d.sport } });
    }
  }
  for (const info of roce.IB_OPCODES) {
    if (!info.valid || (info.opcode & 0xe0) === 0x40) continue;
    const m = info.mask;
    const s = { opcode: info.opcode, destQp: 1 + (next() % 0xfffffe), psn: next() & 0xffffff };
    if (m & roce.OpMask.DETH) s.deth = { qkey: next(), srcQp: next() & 0xffffff };
    if (m & roce.OpMask.FETH) s.feth = { placementType: 1, selectivity: 1 };
    if (m & roce.OpMask.RETH) s.reth = { va: next(), rkey: next(), len: next() };
    if (m & roce.OpMask.ATMETH) s.atmeth = { va: next(), rkey: next(), swapAdd: 1n, compare: 2n };
    if (m & roce.OpMask.AETH) s.aeth = { syndrome: next() & 0xff, msn: next() & 0xffffff };
    if (m & roce.OpMask.ATMACK) s.atmack = 3n;
    if (m & roce.OpMask.IMMDT) s.immDt = next();
    if (m & roce.OpMask.IETH) s.ieth = next();
    if (m & roce.OpMask.PAYLOAD) s.payload = randomBytes(next, next() % 80);
    out.push({ bytes: roce.encodeRocePacket(s, NET), net: NET });
  }
  return out;
}

/** One random mutation of `b` (may change its length). */
function mutate(next, b, other) {
  const x = Uint8Array.from(b);
  switch (next() % 7) {
    case 0: { // bit flips
      const n = 1 + (next() % 8);
      for (let i = 0; i < n && x.length; i++) x[next() % x.length] ^= 1 << (next() & 7);
      return x;
    }
    case 1: { // interesting byte values
      const vals = [0, 0xff, 0x7f, 0x80, 0x01, 0x3f, 0x40, 0x60, 0x64, 0x65];
      if (x.length) x[next() % x.length] = vals[next() % vals.length];
      return x;
    }
    case 2: // truncate
      return x.subarray(0, next() % (x.length + 1));
    case 3: { // extend
      const y = new Uint8Array(x.length + 1 + (next() % 40));
      y.set(x);
      y.set(randomBytes(next, y.length - x.length), x.length);
      return y;
    }
    case 4: { // splice with another seed
      const cut = next() % (x.length + 1);
      const from = next() % (other.length + 1);
      const y = new Uint8Array(cut + other.length - from);
      y.set(x.subarray(0, cut));
      y.set(other.subarray(from), cut);
      return y;
    }
    case 5: { // header region noise
      for (let i = 0; i < Math.min(x.length, 60); i++) if ((next() & 7) === 0) x[i] = next();
      return x;
    }
    default: // pure noise of a plausible length
      return randomBytes(next, next() % 300);
  }
}

/** Checks that must hold for a packet the parser accepted. */
function checkAccepted(p, start, end) {
  assert.ok(p.info.valid);
  assert.ok(p.payloadOff >= start + 12 && p.payloadOff === start + p.info.length);
  assert.equal(p.payloadOff + p.payloadLen + p.pad + 4, end);
  for (let h = 0; h < roce.HDR_KINDS; h++) {
    const o = p.hdrOffset(h);
    if (o >= 0) assert.ok(o + roce.HDR_LEN[h] <= end - 4, `header ${h} inside the packet`);
  }
}

test('fuzz: parseRocePacket / decodeRocePacket / decodeGsiPacket', () => {
  const next = rng(SEED);
  const pool = seeds(next);
  const p = new roce.RocePacket();
  const q = new roce.RocePacket();
  const drops = {};
  for (let i = 0; i < ITERS; i++) {
    const seed = pool[next() % pool.length];
    let bytes = mutate(next, seed.bytes, pool[next() % pool.length].bytes);
    const fixIcrc = (next() & 1) === 1 && bytes.length >= 16;
    if (fixIcrc) roce.icrcWrite(seed.net, bytes, 0, bytes.length - 4);
    const net = (next() & 3) === 0 ? undefined : (next() & 1) ? seed.net : { ...seed.net, ipId: 0 };
    const opts = net ? { net } : {};
    // 1. guarded: no index outside the bytes, no exception
    const violations = [];
    const drop = roce.parseRocePacket(guarded(bytes, violations), 0, bytes.length, p, opts);
    assert.deepEqual(violations, [], `case ${i}: out-of-bounds read`);
    drops[drop ?? 'ok'] = (drops[drop ?? 'ok'] ?? 0) + 1;
    // 2. embedded in garbage at a random offset: same verdict, same fields
    const pre = next() % 17;
    const big = randomBytes(next, pre + bytes.length + (next() % 17));
    big.set(bytes, pre);
    const drop2 = roce.parseRocePacket(big, pre, pre + bytes.length, q, opts);
    assert.equal(drop2, drop, `case ${i}: verdict depends on bytes outside the packet`);
    assert.deepEqual(
      [q.opcode, q.destQp, q.psn, q.pkey, q.pad, q.payloadOff - pre, q.payloadLen, q.icrc, q.ipId],
      [p.opcode, p.destQp, p.psn, p.pkey, p.pad, p.payloadOff, p.payloadLen, p.icrc, p.ipId],
    );
    // 3. accepted packets are consistent and round-trip through the allocating codec
    const d = roce.decodeRocePacket(bytes, opts);
    assert.equal(d.ok, drop === null);
    if (drop === null) {
      checkAccepted(p, 0, bytes.length);
      const again = roce.decodeRocePacket(roce.encodeRocePacket(d.spec, net ?? NET), { net: net ?? NET });
      assert.ok(again.ok);
      assert.deepEqual(again.spec, d.spec, `case ${i}: decode → encode → decode`);
    }
    const g = roce.decodeGsiPacket(bytes, opts);
    if (g.ok) assert.equal(g.gsi.mad.length, 256);
    bytes = null;
  }
  if (process.env.ROCE_FUZZ_VERBOSE) console.log(drops);
  // the mutations reach every check, not just the first ones
  for (const r of ['ok', 'too_short', 'bad_tver', 'bad_opcode', 'truncated', 'bad_pad', 'bad_pkey', 'icrc_error']) {
    assert.ok(drops[r] > 0, `no case ended in ${r}: ${JSON.stringify(drops)}`);
  }
});

/** Run `fn`; it may return or throw RdmaError EBADMSG, nothing else. */
function typedOnly(fn, what) {
  try {
    return fn();
  } catch (e) {
    assert.ok(e instanceof RdmaError, `${what}: threw ${e}`);
    assert.equal(e.code, 'EBADMSG', `${what}: ${e.message}`);
    return undefined;
  }
}

test('fuzz: decodeCmMad / decodeMadHeader / decodeCmaHeader', () => {
  const next = rng(SEED ^ 0xc0ffee);
  const pool = KINDS.map((k) => roce.encodeCmMad(randomCmMessage(next, k), BigInt(next())));
  for (const d of udpDatagrams(fileURLToPath(new URL('../../../fixtures/captures/E-rxe-2vm.pcap', import.meta.url)))) {
    if (d.dport === 4791 && d.payload.length === 280) pool.push(new Uint8Array(d.payload.subarray(20, 276)));
  }
  const kinds = {};
  for (let i = 0; i < ITERS; i++) {
    const src = pool[next() % pool.length];
    const mad = (next() & 3) === 0 ? Uint8Array.from(src) : mutate(next, src, pool[next() % pool.length]);
    // keep most cases a CM MAD so the body decoders get exercised
    if (mad.length >= 24 && (next() & 1)) {
      mad[0] = 1;
      mad[1] = 7;
    }
    const violations = [];
    const g = guarded(mad, violations);
    const m = typedOnly(() => roce.decodeCmMad(g), `case ${i}`);
    typedOnly(() => roce.decodeMadHeader(g), `case ${i} header`);
    assert.deepEqual(violations, [], `case ${i}: out-of-bounds read`);
    if (m) {
      kinds[m.msg.kind] = (kinds[m.msg.kind] ?? 0) + 1;
      const again = roce.decodeCmMad(roce.encodeCmMad(m.msg, m.hdr.tid, m.hdr));
      assert.deepEqual(again.msg, m.msg, `case ${i}: decode → encode → decode`);
      if (m.msg.kind === 'REQ' || m.msg.kind === 'SIDR_REQ') {
        const v = [];
        const h = typedOnly(() => roce.decodeCmaHeader(guarded(m.msg.privateData, v)), `case ${i} CMA`);
        assert.deepEqual(v, []);
        if (h) assert.deepEqual(roce.decodeCmaHeader(roce.encodeCmaPrivateData(h)), h);
      }
    }
    const v2 = [];
    const cut = mad.subarray(0, next() % 40);
    typedOnly(() => roce.decodeCmaHeader(guarded(cut, v2), 0), `case ${i} short CMA`);
    assert.deepEqual(v2, []);
  }
  for (const k of KINDS) assert.ok(kinds[k] > 0, `no ${k} decoded: ${JSON.stringify(kinds)}`);
});
