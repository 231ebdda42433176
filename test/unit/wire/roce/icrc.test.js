// RoCEv2 ICRC: the hardware vector (ConnectX-4 Lx CNP), a UD vector, every CRC backend against
// the bitwise reference, a naive reference ICRC for IPv4 and IPv6, the IPv4 ID recovery and the
// IP header writers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roce } from '../../../../dist/wire/index.js';
import { hex, randomBytes, rng } from './roce-util.js';
import { netopt } from '../../../../dist/util/netopt.js';

/** Reference ICRC: build the masked byte string explicitly and run the bitwise CRC. */
function refIcrc(ipHdr, udpHdr, bthToPad) {
  const ip = Uint8Array.from(ipHdr);
  if (ip.length === 20) {
    ip[1] = 0xff;
    ip[8] = 0xff;
    ip[10] = 0xff;
    ip[11] = 0xff;
  } else {
    ip[0] |= 0x0f;
    ip[1] = 0xff;
    ip[2] = 0xff;
    ip[3] = 0xff;
    ip[7] = 0xff;
  }
  const udp = Uint8Array.from(udpHdr);
  udp[6] = 0xff;
  udp[7] = 0xff;
  const rest = Uint8Array.from(bthToPad);
  rest[4] = 0xff;
  const all = new Uint8Array(8 + ip.length + 8 + rest.length);
  all.fill(0xff, 0, 8);
  all.set(ip, 8);
  all.set(udp, 8 + ip.length);
  all.set(rest, 16 + ip.length);
  return roce.crc32Bitwise(all);
}

test('CRC-32 check value, rxe seed, and all backends agree with the bitwise reference', () => {
  const digits = new TextEncoder().encode('123456789');
  assert.equal(roce.crc32Bitwise(digits), 0xcbf43926);
  assert.equal(roce.crc32Js(digits), 0xcbf43926);
  assert.equal(roce.crc32(digits), 0xcbf43926);
  // the 8 x 0xFF prefix leaves the raw register at rxe's seed
  assert.equal(~roce.crc32Js(new Uint8Array(8).fill(0xff)) >>> 0, roce.ICRC_SEED);
  const next = rng(99);
  for (const n of [0, 1, 7, 8, 9, 63, 255, 256, 257, 1000, 4133, 9000]) {
    const d = randomBytes(next, n);
    const ref = roce.crc32Bitwise(d);
    assert.equal(roce.crc32Js(d), ref, `js ${n}`);
    assert.equal(roce.crc32(d), ref, `crc32 ${n}`);
    if (roce.crc32Native) assert.equal(roce.crc32Native(d), ref, `native ${n}`);
    // chaining at every kind of split
    const cut = next() % (n + 1);
    assert.equal(roce.crc32(d.subarray(cut), roce.crc32(d.subarray(0, cut))), ref);
    assert.equal(roce.crc32Js(d.subarray(cut), roce.crc32Js(d.subarray(0, cut))), ref);
    const a = next() % (n + 1);
    const b = a + (next() % (n - a + 1));
    assert.equal(roce.crc32Range(d, a, b), roce.crc32Bitwise(d.subarray(a, b)));
  }
  // this Node (20.20) has zlib.crc32; the JS tables are still used below the threshold
  assert.equal(typeof roce.crc32Native === 'function', roce.crc32Backend === 'native');
});

test('a range backend is taken only when it computes CRC-32, and then serves crc32 and crc32Range', (t) => {
  const wrong = (d, a, b, prev) => roce.crc32Js(d.subarray(a, b), prev) ^ (b - a === 200 ? 1 : 0);
  assert.equal(roce.useCrc32Backend(wrong), false);
  assert.equal(roce.useCrc32Backend(() => {
    throw new RangeError('no');
  }), false);
  assert.notEqual(roce.crc32Backend, 'range');
  // the netopt addon's PCLMULQDQ CRC-32 (native/src/crc32.c), where it is built for this CPU
  const fast = netopt()?.crc32;
  if (fast === undefined) {
    t.skip('netopt addon without crc32 (not built, or no PCLMULQDQ)');
    return;
  }
  assert.throws(() => fast(new Uint8Array(8), 4, 9, 0), RangeError);
  assert.throws(() => fast(new Uint16Array(8), 0, 1, 0), RangeError);
  const next = rng(7);
  for (let i = 0; i < 400; i++) {
    const n = i < 200 ? i : next() % 9000;
    const d = randomBytes(next, n + 16);
    const a = next() % 16;
    const prev = i & 1 ? 0 : (next() * 2654435761) >>> 0;
    assert.equal(fast(d, a, a + n, prev), roce.crc32Bitwise(d.subarray(a, a + n), prev), `addon ${n} at ${a}`);
  }
  let calls = 0;
  assert.equal(roce.useCrc32Backend((d, a, b, p) => (calls++, fast(d, a, b, p))), true);
  assert.equal(roce.crc32Backend, 'range');
  for (const n of [roce.CRC32_FAST_MIN - 1, roce.CRC32_FAST_MIN, 4133]) {
    const d = randomBytes(next, n + 5);
    const before = calls;
    assert.equal(roce.crc32(d.subarray(0, n)), roce.crc32Bitwise(d.subarray(0, n)));
    assert.equal(roce.crc32Range(d, 5, n + 5, 77), roce.crc32Bitwise(d.subarray(5, n + 5), 77));
    assert.equal(calls - before, n >= roce.CRC32_FAST_MIN ? 2 : 0, `calls for ${n}`);
  }
});

test('hardware vector: ConnectX-4 Lx CNP (ICRC 0x2A00FD82, wire 82 fd 00 2a)', () => {
  const ip = hex('45c2003c718c4000401191610a0011010a001201');
  const udp = hex('000012b700280000');
  const pkt = hex('8100ffff4000011800000000' + '00'.repeat(16) + '82fd002a');
  const net = { family: 4, src: ip.subarray(12, 16), dst: ip.subarray(16, 20), sport: 0, ipId: 0x718c, tos: 0xc2, ttl: 0x40 };
  assert.equal(roce.icrcCompute(net, pkt, 0, pkt.length - 4), 0x2a00fd82);
  assert.equal(refIcrc(ip, udp, pkt.subarray(0, -4)), 0x2a00fd82);
  assert.equal(roce.readIcrcValue(pkt, pkt.length - 4), 0x2a00fd82);
  assert.equal(roce.icrcVerify(net, pkt, 0, pkt.length), true);
  // the header we would write for it is the captured one (ToS 0xC2 with ECN, checksum 0x9161)
  const h = new Uint8Array(20);
  roce.writeIpv4Header(net, pkt.length, h, 0);
  assert.deepEqual(h, ip);
  // masked fields do not matter; covered ones do
  assert.equal(roce.icrcVerify({ ...net, tos: 0, ttl: 1 }, pkt, 0, pkt.length), true);
  assert.equal(roce.icrcVerify({ ...net, ipId: 0x718d }, pkt, 0, pkt.length), false);
  assert.equal(roce.icrcVerify({ ...net, sport: 1 }, pkt, 0, pkt.length), false);
  assert.equal(roce.icrcVerify({ ...net, ipFlags: 0 }, pkt, 0, pkt.length), false);
  // FECN/BECN are masked: setting them keeps the ICRC valid
  const ecn = Uint8Array.from(pkt);
  ecn[4] |= 0xc0;
  assert.equal(roce.icrcVerify(net, ecn, 0, ecn.length), true);
  ecn[5] ^= 1;
  assert.equal(roce.icrcVerify(net, ecn, 0, ecn.length), false);
  // the ID is recovered from the ICRC
  assert.equal(roce.icrcSolveIpv4Id({ ...net, ipId: undefined }, pkt, 0, pkt.length), 0x718c);
});

test('UD vector: 10.0.0.1 -> 10.0.0.2, "hello" to QP 0x11 (ICRC 0x14D5E4C8)', () => {
  const frame = hex(`45 00 00 3c 00 00 40 00 40 11 26 af 0a 00 00 01
    0a 00 00 02 c0 01 12 b7 00 28 00 00 64 30 ff ff
    00 00 00 11 00 00 00 00 01 23 45 67 00 00 00 12
    68 65 6c 6c 6f 00 00 00 c8 e4 d5 14`);
  const pkt = frame.subarray(28);
  const net = { family: 4, src: frame.subarray(12, 16), dst: frame.subarray(16, 20), sport: 0xc001 };
  assert.equal(roce.icrcCompute(net, pkt, 0, pkt.length - 4), 0x14d5e4c8);
  const built = roce.encodeRocePacket(
    { opcode: roce.IbOpcode.UD_SEND_ONLY, destQp: 0x11, psn: 0, deth: { qkey: 0x01234567, srcQp: 0x12 }, payload: new TextEncoder().encode('hello') },
    net,
  );
  assert.deepEqual(built, Uint8Array.from(pkt));
  const ip = new Uint8Array(20);
  roce.writeIpv4Header(net, pkt.length, ip, 0);
  assert.deepEqual(ip, frame.subarray(0, 20));
  const udp = new Uint8Array(8);
  roce.writeUdpHeader(net, pkt.length, udp, 0);
  assert.deepEqual(udp, frame.subarray(20, 28));
  assert.equal(roce.icrcSolveIpv4Id(net, pkt, 0, pkt.length), 0);
});

test('random IPv4 and IPv6 packets: icrcCompute equals the naive reference', () => {
  const next = rng(1234);
  for (let i = 0; i < 200; i++) {
    const v6 = i % 2 === 1;
    const n = v6 ? 16 : 4;
    const net = {
      family: v6 ? 6 : 4, src: randomBytes(next, n), dst: randomBytes(next, n), sport: next() & 0xffff, dport: next() & 0xffff,
      tos: next() & 0xff, ttl: next() & 0xff, ipId: next() & 0xffff, ipFlags: next() & 0xffff, flowLabel: next() & 0xfffff,
    };
    const body = randomBytes(next, 12 + (next() % 600) * 4);
    const ipHdr = new Uint8Array(v6 ? 40 : 20);
    (v6 ? roce.writeIpv6Header : roce.writeIpv4Header)(net, body.length + 4, ipHdr, 0);
    const udp = new Uint8Array(8);
    roce.writeUdpHeader(net, body.length + 4, udp, 0);
    const pkt = new Uint8Array(body.length + 4);
    pkt.set(body);
    assert.equal(roce.icrcWrite(net, pkt, 0, body.length), pkt.length);
    assert.equal(roce.readIcrcValue(pkt, body.length), refIcrc(ipHdr, udp, body));
    assert.equal(roce.icrcVerify(net, pkt, 0, pkt.length), true);
    // any single bit flip outside the masked BTH byte 4 breaks it
    const pos = next() % pkt.length;
    if (pos !== 4) {
      pkt[pos] ^= 1 << (next() & 7);
      assert.equal(roce.icrcVerify(net, pkt, 0, pkt.length), false);
    }
  }
});

test('IPv4 ID recovery: exact for every valid packet, -1 for corrupted ones', () => {
  const next = rng(77);
  let rejected = 0;
  for (let i = 0; i < 2000; i++) {
    const net = { family: 4, src: randomBytes(next, 4), dst: randomBytes(next, 4), sport: 0xc000 | (next() & 0x3fff) };
    const id = next() & 0xffff;
    const pkt = roce.encodeRocePacket(
      { opcode: roce.IbOpcode.UD_SEND_ONLY, destQp: next() & 0xffffff, psn: next() & 0xffffff, deth: { qkey: next(), srcQp: next() & 0xffffff }, payload: randomBytes(next, next() % 4200) },
      { ...net, ipId: id },
    );
    assert.equal(roce.icrcSolveIpv4Id(net, pkt, 0, pkt.length), id);
    pkt[12 + (next() % (pkt.length - 12))] ^= 0x10;
    if (roce.icrcSolveIpv4Id(net, pkt, 0, pkt.length) < 0) rejected++;
  }
  // a corruption is missed with probability 2^-16: none of 2000 should slip through in practice
  assert.equal(rejected, 2000);
  assert.equal(roce.icrcSolveIpv4Id({ family: 6, src: new Uint8Array(16), dst: new Uint8Array(16), sport: 1 }, new Uint8Array(16), 0, 16), -1);
  assert.equal(roce.icrcSolveIpv4Id({ family: 4, src: new Uint8Array(4), dst: new Uint8Array(4), sport: 1 }, new Uint8Array(15), 0, 15), -1);
});

test('IP headers: checksum, IPv6 fields, GRH area layout', () => {
  const net4 = { family: 4, src: Uint8Array.of(10, 0, 0, 1), dst: Uint8Array.of(10, 0, 0, 2), sport: 1, ipId: 0x1234, tos: 0x10, ttl: 3 };
  const b = new Uint8Array(44).fill(0xaa);
  assert.equal(roce.writeGrhArea(net4, 100, b, 2), 42);
  assert.deepEqual([...b.subarray(2, 22)], new Array(20).fill(0));
  assert.equal(roce.ipChecksum(b, 22, 20), 0, 'a header with its checksum sums to zero');
  assert.deepEqual([...b.subarray(22, 34)], [0x45, 0x10, 0, 128, 0x12, 0x34, 0x40, 0, 3, 17, b[32], b[33]]);
  assert.equal(b[0], 0xaa);
  assert.equal(b[43], 0xaa);
  const net6 = { family: 6, src: new Uint8Array(16).fill(1), dst: new Uint8Array(16).fill(2), sport: 1, tos: 0xab, flowLabel: 0xcdef1, ttl: 9 };
  const h6 = new Uint8Array(40);
  roce.writeGrhArea(net6, 100, h6, 0);
  assert.deepEqual([...h6.subarray(0, 8)], [0x6a, 0xbc, 0xde, 0xf1, 0, 108, 17, 9]);
  assert.deepEqual([...h6.subarray(8, 24)], new Array(16).fill(1));
  assert.deepEqual([...h6.subarray(24, 40)], new Array(16).fill(2));
  assert.throws(() => roce.icrcCompute({ ...net4, src: new Uint8Array(16) }, new Uint8Array(16), 0, 12), { code: 'EINVAL' });
});
