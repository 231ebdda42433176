// The datagram rsocket wire (src/rsocket/dgram/protocol.ts): ds_header and ds_udp_header byte
// for byte as rsocket.c lays them out (ds_format_hdr, ds_sendv_udp), the checks of ds_valid_recv
// and udp_svc_valid_udp_hdr, and decoding at any offset of a larger buffer.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  DS_IPV4_HDR_LEN,
  DS_IPV6_HDR_LEN,
  DS_UDP_IPV4_HDR_LEN,
  DS_UDP_IPV6_HDR_LEN,
  DS_UDP_TAG,
  DsUdpOp,
  decodeDsHeader,
  decodeDsUdpHeader,
  encodeDsHeader,
  encodeDsUdpHeader,
  formatIpv6Bytes,
  ipv6Bytes,
} from '../../../dist/rsocket/dgram/protocol.js';
import { prng } from '../../lib/prng.js';

const hex = (b) => Buffer.from(b).toString('hex');

test('ds_header vectors: IPv4 is version, length, port, address; IPv6 adds the flow info', () => {
  assert.equal(hex(encodeDsHeader('10.77.0.3', 7174)), '0408' + '1c06' + '0a4d0003');
  assert.equal(encodeDsHeader('10.77.0.3', 7174).length, DS_IPV4_HDR_LEN);
  const v6 = encodeDsHeader('fd77::2', 0x1234, 0xabcdef);
  assert.equal(v6.length, DS_IPV6_HDR_LEN);
  assert.equal(hex(v6), '0618' + '1234' + '00abcdef' + 'fd770000000000000000000000000002');
  assert.deepEqual(decodeDsHeader(v6), { version: 6, length: 24, port: 0x1234, address: 'fd77::2', flowinfo: 0xabcdef });
  assert.deepEqual(decodeDsHeader(Buffer.from('04081c060a4d0003', 'hex')), { version: 4, length: 8, port: 7174, address: '10.77.0.3', flowinfo: 0 });
});

test('ds_udp_header vectors: the tag, version, op, length, 0, the 24-bit QPN, the QP\'s address', () => {
  const h = encodeDsUdpHeader(DsUdpOp.DATA, 0x123456, '10.77.0.1');
  assert.equal(hex(h), '55555555' + '04' + '00' + '10' + '00' + '00123456' + '0a4d0001');
  assert.equal(h.length, DS_UDP_IPV4_HDR_LEN);
  const c = encodeDsUdpHeader(DsUdpOp.CTRL, 0xff000011, 'fd77::1');
  assert.equal(c.length, DS_UDP_IPV6_HDR_LEN);
  assert.equal(hex(c.subarray(0, 12)), '55555555' + '06' + '07' + '1c' + '00' + '00000011');
  assert.deepEqual(decodeDsUdpHeader(h, 4), { version: 4, op: 0, length: 16, qpn: 0x123456, address: '10.77.0.1' });
  assert.deepEqual(decodeDsUdpHeader(c, 6), { version: 6, op: 7, length: 28, qpn: 0x11, address: 'fd77::1' });
  // The QPN's top byte is reserved: ignored on receipt, as rsocket.c masks it.
  const top = Buffer.from(h);
  top[8] = 0xee;
  assert.equal(decodeDsUdpHeader(top, 4).qpn, 0x123456);
  assert.equal(DS_UDP_TAG, 0x55555555);
});

test('refusals: short, bad version/length pairs, a wrong tag, a header of the other family', () => {
  assert.equal(decodeDsHeader(Buffer.from('040800', 'hex')), 'short');
  assert.equal(decodeDsHeader(Buffer.from('0418000000000000', 'hex')), 'version');
  assert.equal(decodeDsHeader(Buffer.from('0608000000000000', 'hex')), 'version');
  assert.equal(decodeDsHeader(Buffer.from('05080000000000000000', 'hex')), 'version');
  // An IPv6 header in a message shorter than 24 bytes (rsocket.c would read past it).
  assert.equal(decodeDsHeader(encodeDsHeader('::1', 1).subarray(0, 20)), 'short');
  const h = encodeDsUdpHeader(0, 1, '1.2.3.4');
  assert.equal(decodeDsUdpHeader(h.subarray(0, 15), 4), 'short');
  assert.equal(decodeDsUdpHeader(h, 6), 'family');
  const bad = Buffer.from(h);
  bad[0] = 0x54;
  assert.equal(decodeDsUdpHeader(bad, 4), 'tag');
  bad[0] = 0x55;
  bad[6] = 28;
  assert.equal(decodeDsUdpHeader(bad, 4), 'version');
  const v6 = encodeDsUdpHeader(0, 1, '::1');
  assert.equal(decodeDsUdpHeader(v6.subarray(0, 20), 6), 'short');
});

test('IPv6 text: canonical form out, every spelling in', () => {
  for (const [i, o] of [['::', '::'], ['::1', '::1'], ['fe80::1%eth0', 'fe80::1'], ['1:0:0:2:0:0:0:3', '1:0:0:2::3'], ['::ffff:10.0.0.1', '::ffff:a00:1'], ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'], ['1:0:2:3:4:5:6:7', '1:0:2:3:4:5:6:7']]) {
    assert.equal(formatIpv6Bytes(ipv6Bytes(i)), o, i);
  }
  for (const bad of ['1::2::3', '1:2:3:4:5:6:7:8:9', 'g::1', '1:2:3:4:5:6:7']) assert.throws(() => ipv6Bytes(bad), TypeError, bad);
});

test('decoding at any offset of a larger buffer is decoding the header alone (random placements)', () => {
  const r = prng(7);
  const rng = { int: (n) => Math.floor(r() * n), chance: (p) => r() < p, u32: () => Math.floor(r() * 2 ** 32) };
  for (let i = 0; i < 2000; i++) {
    const v6 = rng.chance(0.5);
    const addr = v6 ? formatIpv6Bytes(Uint8Array.from({ length: 16 }, () => rng.int(256))) : `${rng.int(256)}.${rng.int(256)}.${rng.int(256)}.${rng.int(256)}`;
    const hdr = rng.chance(0.5) ? encodeDsHeader(addr, rng.int(65536), v6 ? rng.u32() : 0) : encodeDsUdpHeader(rng.chance(0.5) ? 0 : 7, rng.int(1 << 24), addr);
    const pre = rng.int(40);
    const post = rng.int(40);
    const buf = Buffer.concat([Buffer.from(Array.from({ length: pre }, () => rng.int(256))), hdr, Buffer.from(Array.from({ length: post }, () => rng.int(256)))]);
    const isUdp = hdr[0] === 0x55;
    const alone = isUdp ? decodeDsUdpHeader(hdr, v6 ? 6 : 4) : decodeDsHeader(hdr);
    const placed = isUdp ? decodeDsUdpHeader(buf, v6 ? 6 : 4, pre, hdr.length + post) : decodeDsHeader(buf, pre, hdr.length + post);
    assert.deepEqual(placed, alone);
    assert.equal(typeof alone, 'object');
  }
});
