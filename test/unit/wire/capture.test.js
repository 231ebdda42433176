// The capture codecs (src/wire/capture/): pcapng blocks byte for byte, a random round trip
// through a naive pcapng reader written here from the format's text, the Internet checksum on
// RFC 1071's arithmetic and a known IPv4 header, and the frames' checksums verified from scratch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { capture } from '../../../dist/wire/index.js';
import { prng } from '../../lib/prng.js';

const {
  encodeSectionHeader, encodeInterfaceDescription, encodeEnhancedPacket, EpbDirection,
  onesSum, foldChecksum, udpFrameHeaders, tcpFrameHeaders, TcpFlag, MpaSplitter, fpduWireLength,
} = capture;

/** Integers in [0, n) from the tests' seeded generator. */
function ints(seed) {
  const f = prng(seed);
  return { int: (n) => Math.floor(f() * n) };
}

const hex = (s) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

test('Section Header Block: byte-order magic, version 1.0, section length -1, 28 bytes', () => {
  assert.deepEqual(encodeSectionHeader(), hex('0a0d0d0a 1c000000 4d3c2b1a 0100 0000 ffffffff ffffffff 1c000000'));
});

test('Section Header Block with shb_userappl: option padded to 32 bits, end of options', () => {
  assert.deepEqual(encodeSectionHeader('abcde'), hex('0a0d0d0a 2c000000 4d3c2b1a 0100 0000 ffffffff ffffffff 0400 0500 6162636465000000 00000000 2c000000'));
});

test('Interface Description Block: link type, snap length, if_name, if_tsresol', () => {
  const b = encodeInterfaceDescription({ linkType: 1, snapLen: 65535, name: 'lo', tsresol: 6 });
  assert.deepEqual(b, hex('01000000 28000000 0100 0000 ffff0000 0200 0200 6c6f0000 0900 0100 06000000 00000000 28000000'));
});

test('Enhanced Packet Block: interface, 64-bit timestamp split high/low, lengths, padded data, epb_flags, comment', () => {
  const b = encodeEnhancedPacket({ interfaceId: 3, timestamp: 0x1_0000_0002, parts: [hex('0102'), hex('03')], flags: EpbDirection.OUTBOUND, comment: 'x' });
  assert.deepEqual(
    b,
    hex('06000000 38000000 03000000 01000000 02000000 03000000 03000000 01020300 0100 0100 78000000 0200 0400 02000000 00000000 38000000'),
  );
  // Without options: no end-of-options marker either.
  assert.deepEqual(encodeEnhancedPacket({ interfaceId: 0, timestamp: 5, parts: [hex('aa')], originalLength: 9 }), hex('06000000 24000000 00000000 00000000 05000000 01000000 09000000 aa000000 24000000'));
});

/** A naive pcapng reader (blocks, options), little-endian only. */
function readPcapng(buf) {
  const blocks = [];
  let o = 0;
  while (o < buf.length) {
    const type = buf.readUInt32LE(o);
    const len = buf.readUInt32LE(o + 4);
    assert.equal(len % 4, 0, 'block length is a multiple of 4');
    assert.equal(buf.readUInt32LE(o + len - 4), len, 'trailing length');
    blocks.push({ type, body: buf.subarray(o + 8, o + len - 4) });
    o += len;
  }
  assert.equal(o, buf.length);
  return blocks;
}
function readOptions(b) {
  const opts = new Map();
  let o = 0;
  while (o + 4 <= b.length) {
    const code = b.readUInt16LE(o);
    const len = b.readUInt16LE(o + 2);
    if (code === 0) break;
    opts.set(code, b.subarray(o + 4, o + 4 + len));
    o += 4 + ((len + 3) & ~3);
  }
  return opts;
}

test('random Enhanced Packet Blocks read back through a naive reader: every field and byte', () => {
  const rng = ints(30);
  const blocks = [encodeSectionHeader('rdmacm')];
  const want = [];
  for (let i = 0; i < 300; i++) {
    const data = Buffer.from(Array.from({ length: rng.int(3000) }, () => rng.int(256)));
    const cut = rng.int(data.length + 1);
    const p = {
      interfaceId: rng.int(4),
      timestamp: rng.int(2 ** 21) * 2 ** 31 + rng.int(2 ** 31),
      parts: [data.subarray(0, cut), data.subarray(cut)],
      flags: rng.int(3),
      ...(rng.int(2) ? { comment: 'c'.repeat(rng.int(40)) } : {}),
    };
    blocks.push(encodeEnhancedPacket(p));
    want.push({ ...p, data });
  }
  const got = readPcapng(Buffer.concat(blocks));
  assert.equal(got[0].type, 0x0a0d0d0a);
  assert.equal(got.length, want.length + 1);
  want.forEach((w, i) => {
    const { type, body } = got[i + 1];
    assert.equal(type, 6);
    assert.equal(body.readUInt32LE(0), w.interfaceId);
    assert.equal(body.readUInt32LE(4) * 2 ** 32 + body.readUInt32LE(8), w.timestamp);
    const cap = body.readUInt32LE(12);
    assert.equal(cap, w.data.length);
    assert.equal(body.readUInt32LE(16), w.data.length);
    assert.deepEqual(body.subarray(20, 20 + cap), w.data);
    const opts = readOptions(body.subarray(20 + ((cap + 3) & ~3)));
    assert.equal(opts.get(2).readUInt32LE(0), w.flags);
    assert.equal(opts.get(1)?.toString(), w.comment);
  });
});

test('Internet checksum: a known IPv4 header sums to b861; odd lengths pad with a zero byte', () => {
  const h = hex('4500 0073 0000 4000 4011 0000 c0a8 0001 c0a8 00c7');
  assert.equal(foldChecksum(onesSum(h, 0, h.length)), 0xb861);
  assert.equal(onesSum(hex('0102 03'), 0, 3), 0x0102 + 0x0300);
});

/** RFC 1071 over bytes, one 16-bit word at a time: the reference the encoder is checked against. */
function naiveSum(bytes) {
  let s = 0;
  for (let i = 0; i < bytes.length; i += 2) s += (bytes[i] << 8) | (bytes[i + 1] ?? 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

test('random UDP and TCP frames over IPv4 and IPv6: lengths, addresses, ports, and checksums that verify', () => {
  const rng = ints(31);
  const bytes = (n) => Uint8Array.from({ length: n }, () => rng.int(256));
  for (let i = 0; i < 200; i++) {
    const family = rng.int(2) ? 4 : 6;
    const alen = family === 4 ? 4 : 16;
    const e = { family, srcMac: bytes(6), dstMac: bytes(6), src: bytes(alen), dst: bytes(alen), sport: rng.int(65536), dport: rng.int(65536), hopLimit: 1 + rng.int(255) };
    const payload = bytes(rng.int(2000));
    const s = rng.int(payload.length + 1);
    const en = s + rng.int(payload.length - s + 1);
    const tcp = rng.int(2) === 1;
    const t = { seq: rng.int(2 ** 32), ack: rng.int(2 ** 32), flags: TcpFlag.PSH | TcpFlag.ACK, window: rng.int(65536) };
    const h = Buffer.from(tcp ? tcpFrameHeaders(e, t, payload, s, en) : udpFrameHeaders(e, payload, s, en));
    const ipLen = family === 4 ? 20 : 40;
    const l4Len = (tcp ? 20 : 8) + en - s;
    assert.deepEqual(h.subarray(0, 6), Buffer.from(e.dstMac));
    assert.deepEqual(h.subarray(6, 12), Buffer.from(e.srcMac));
    assert.equal(h.readUInt16BE(12), family === 4 ? 0x0800 : 0x86dd);
    const ip = h.subarray(14, 14 + ipLen);
    let pseudo;
    if (family === 4) {
      assert.equal(ip[0], 0x45);
      assert.equal(ip.readUInt16BE(2), 20 + l4Len);
      assert.equal(ip[8], e.hopLimit);
      assert.equal(ip[9], tcp ? 6 : 17);
      assert.equal(naiveSum(ip), 0xffff, 'IPv4 header checksum verifies');
      pseudo = Buffer.concat([ip.subarray(12, 20), Buffer.from([0, tcp ? 6 : 17]), Buffer.from([l4Len >> 8, l4Len & 0xff])]);
    } else {
      assert.equal(ip[0] >> 4, 6);
      assert.equal(ip.readUInt16BE(4), l4Len);
      assert.equal(ip[6], tcp ? 6 : 17);
      assert.equal(ip[7], e.hopLimit);
      pseudo = Buffer.concat([ip.subarray(8, 40), Buffer.from([0, 0, l4Len >> 8, l4Len & 0xff, 0, 0, 0, tcp ? 6 : 17])]);
    }
    assert.deepEqual(ip.subarray(family === 4 ? 12 : 8, family === 4 ? 16 : 24), Buffer.from(e.src));
    const l4 = h.subarray(14 + ipLen);
    assert.equal(l4.readUInt16BE(0), e.sport);
    assert.equal(l4.readUInt16BE(2), e.dport);
    if (tcp) {
      assert.equal(l4.readUInt32BE(4), t.seq);
      assert.equal(l4.readUInt32BE(8), t.ack);
      assert.equal(l4[12], 0x50);
      assert.equal(l4[13], t.flags);
    } else assert.equal(l4.readUInt16BE(4), l4Len);
    const seg = Buffer.concat([pseudo, l4, payload.subarray(s, en)]);
    assert.equal(naiveSum(seg), 0xffff, `${tcp ? 'TCP' : 'UDP'}/IPv${family} checksum verifies`);
  }
});

test('UDP frame headers as rxe writes them: the given IPv4 ID and ToS, UDP checksum 0 on IPv4 only; IPv6 traffic class', () => {
  const payload = Buffer.from('0400ffff00000015', 'hex');
  const base = { srcMac: new Uint8Array(6), dstMac: new Uint8Array(6), sport: 4791, dport: 4791, hopLimit: 64 };
  const v4 = { ...base, family: 4, src: Uint8Array.of(10, 0, 0, 1), dst: Uint8Array.of(10, 0, 0, 2) };
  const h = Buffer.from(udpFrameHeaders({ ...v4, ipId: 0x1234, tos: 0x88, zeroUdpChecksum: true }, payload, 0, payload.length));
  assert.deepEqual([h[15], h.readUInt16BE(18), h.readUInt16BE(20)], [0x88, 0x1234, 0x4000], 'ToS, ID, DF');
  assert.equal(naiveSum(h.subarray(14, 34)), 0xffff, 'the IPv4 header checksum covers them');
  assert.equal(h.readUInt16BE(40), 0, 'UDP checksum 0: not computed');
  // without the options: a checksum, and IDs that count
  const a = Buffer.from(udpFrameHeaders(v4, payload, 0, payload.length));
  const b = Buffer.from(udpFrameHeaders(v4, payload, 0, payload.length));
  assert.notEqual(a.readUInt16BE(40), 0);
  assert.equal((b.readUInt16BE(18) - a.readUInt16BE(18)) & 0xffff, 1);
  // IPv6 has no "no checksum" (RFC 8200 §8.1): computed whatever the option says
  const v6 = { ...base, family: 6, src: new Uint8Array(16).fill(1), dst: new Uint8Array(16).fill(2), tos: 0xb8, zeroUdpChecksum: true };
  const h6 = Buffer.from(udpFrameHeaders(v6, payload, 0, payload.length));
  assert.equal((h6.readUInt32BE(14) >>> 20) & 0xff, 0xb8, 'traffic class');
  assert.equal(h6.readUInt32BE(14) >>> 28, 6);
  assert.notEqual(h6.readUInt16BE(14 + 40 + 6), 0);
});

test('MPA splitter: start frame then FPDUs as units whatever the chunking; a stream without a key passes raw', () => {
  const start = Buffer.concat([Buffer.from('MPA ID Req Frame', 'latin1'), hex('4002 0004'), hex('01020304')]);
  const f1 = Buffer.alloc(fpduWireLength(5));
  f1.writeUInt16BE(5, 0);
  const f2 = Buffer.alloc(fpduWireLength(0));
  assert.equal(f1.length, 12);
  assert.equal(f2.length, 8);
  const all = Buffer.concat([start, f1, f2]);
  for (let step = 1; step <= all.length; step++) {
    const s = new MpaSplitter();
    const out = [];
    for (let o = 0; o < all.length; o += step) s.push(all, o, Math.min(all.length, o + step), (b, x, y) => out.push(Buffer.from(b.subarray(x, y))));
    assert.deepEqual(out, [start, f1, f2], `chunks of ${step}`);
  }
  const raw = new MpaSplitter();
  const out = [];
  raw.push(f1, 0, f1.length, (b, x, y) => out.push(Buffer.from(b.subarray(x, y))));
  assert.equal(raw.mode, 'raw');
  assert.deepEqual(out, [f1]);
  const markers = new MpaSplitter();
  const m = Buffer.from(start);
  m[16] |= 0x80;
  markers.push(m, 0, m.length, () => {});
  assert.equal(markers.mode, 'raw', 'markers move FPDU boundaries: raw');
});
