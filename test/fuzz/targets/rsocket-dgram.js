// The datagram rsocket wire (src/rsocket/dgram/protocol.ts): the ds_header a peer's UD SEND
// starts with and the ds_udp_header of a datagram on our rsocket's UDP socket, as the receive
// path and the UDP service decode them.
//
// Invariants: valid headers round-trip; any bytes at any offset decode to a header or to one of
// 'short' / 'version' / 'tag' / 'family', never throw; a decoded header names a valid IP address,
// a 16-bit port and a 24-bit QPN, lies within the bytes given, and re-encodes to the same bytes
// (the reserved byte and the QPN's top byte aside).
import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import { decodeDsHeader, decodeDsUdpHeader, encodeDsHeader, encodeDsUdpHeader, formatIpv6Bytes } from '../../../dist/rsocket/dgram/protocol.js';
import { mutate, hexHead } from '../lib/mutate.js';

const ERRORS = new Set(['short', 'version', 'tag', 'family']);

function address(rng, v6) {
  if (!v6) return `${rng.int(256)}.${rng.int(256)}.${rng.int(256)}.${rng.int(256)}`;
  const b = rng.bytes(16);
  if (rng.chance(0.3)) b.fill(0, 0, 10 + rng.int(6));
  return formatIpv6Bytes(b);
}

function dsHeader(rng, t) {
  const v6 = rng.chance(0.5);
  const valid = Buffer.from(encodeDsHeader(address(rng, v6), rng.int(65536), v6 ? rng.u32() : 0));
  const bytes = rng.chance(0.2) ? valid : rng.chance(0.2) ? rng.bytes(rng.int(40)) : mutate(rng, valid, { fields: [{ off: 0, size: 1 }, { off: 1, size: 1 }, { off: 2, size: 2 }] }).bytes;
  const off = rng.int(bytes.length + 1);
  const len = rng.chance(0.7) ? bytes.length - off : rng.int(bytes.length - off + 1);
  t.note(`ds_header at ${off}+${len}: ${hexHead(bytes)}`);
  const h = decodeDsHeader(bytes, off, len);
  if (typeof h === 'string') {
    assert.ok(ERRORS.has(h), h);
    t.count(`ds-${h}`);
    return;
  }
  assert.ok(h.length <= len);
  assert.equal(isIP(h.address), h.version);
  assert.ok(Number.isInteger(h.port) && h.port >= 0 && h.port < 65536);
  assert.ok(Buffer.from(encodeDsHeader(h.address, h.port, h.flowinfo)).equals(bytes.subarray(off, off + h.length)));
  t.count('ds-valid');
}

function udpHeader(rng, t) {
  const v6 = rng.chance(0.5);
  const valid = Buffer.from(encodeDsUdpHeader(rng.chance(0.5) ? 0 : rng.chance(0.8) ? 7 : rng.int(256), rng.u32(), address(rng, v6)));
  const payload = rng.bytes(rng.int(24));
  const whole = Buffer.concat([valid, payload]);
  const bytes = rng.chance(0.2) ? whole : rng.chance(0.2) ? rng.bytes(rng.int(48)) : mutate(rng, whole, { fields: [{ off: 0, size: 4 }, { off: 4, size: 1 }, { off: 6, size: 1 }, { off: 8, size: 4 }] }).bytes;
  const family = rng.chance(0.8) ? (v6 ? 6 : 4) : v6 ? 4 : 6;
  const off = rng.chance(0.7) ? 0 : rng.int(bytes.length + 1);
  t.note(`ds_udp_header from IPv${family} at ${off}: ${hexHead(bytes)}`);
  const h = decodeDsUdpHeader(bytes, family, off);
  if (typeof h === 'string') {
    assert.ok(ERRORS.has(h), h);
    t.count(`udp-${h}`);
    return;
  }
  assert.equal(h.version, family);
  assert.ok(off + h.length <= bytes.length);
  assert.equal(isIP(h.address), h.version);
  assert.ok(Number.isInteger(h.qpn) && h.qpn >= 0 && h.qpn < 1 << 24);
  const re = Buffer.from(encodeDsUdpHeader(h.op, h.qpn, h.address));
  const got = Buffer.from(bytes.subarray(off, off + h.length));
  got[7] = 0;
  got[8] = 0;
  assert.ok(re.equals(got), `${re.toString('hex')} != ${got.toString('hex')}`);
  t.count('udp-valid');
}

export default {
  name: 'rsocket-dgram',
  about: 'ds_header of UD datagrams and ds_udp_header of UDP service datagrams from a peer',
  budgetMs: 800,
  run(rng, t) {
    dsHeader(rng, t);
    udpHeader(rng, t);
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['ds-valid', 'ds-short', 'ds-version', 'udp-valid', 'udp-short', 'udp-tag', 'udp-version', 'udp-family']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
