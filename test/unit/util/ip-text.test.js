// The one IPv6 text formatter (src/ip-text.ts): RFC 5952 compression checked against the WHATWG
// URL parser's serializer on random addresses, and the dotted tails against glibc's inet_ntop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';

const { formatIpv6Text } = await import('../../../dist/ip-text.js');

const bytes = (hex) => Buffer.from(hex.replace(/ /g, ''), 'hex');

/** 16 random bytes where each 16-bit word is zero half the time, so runs of zeros are common. */
function sparse() {
  const b = randomBytes(16);
  const mask = randomBytes(1)[0];
  for (let i = 0; i < 8; i++) if (mask & (1 << i)) b.writeUInt16BE(0, 2 * i);
  return b;
}

test('plain form: the same text as the URL parser gives, on random sparse addresses', () => {
  for (let n = 0; n < 3000; n++) {
    const b = sparse();
    const want = new URL(`http://[${[...Array(8)].map((_, i) => b.readUInt16BE(2 * i).toString(16)).join(':')}]/`).hostname.slice(1, -1);
    assert.equal(formatIpv6Text(b), want, b.toString('hex'));
  }
});

test('an offset into a larger buffer', () => {
  const b = Buffer.concat([Buffer.from([1, 2, 3]), bytes('fe80 0000 0000 0000 0000 0000 0000 0001'), Buffer.from([9])]);
  assert.equal(formatIpv6Text(b, 3), 'fe80::1');
});

test('dotted tails: mapped and compatible forms as glibc inet_ntop prints them', () => {
  const cases = [
    // [bytes, none, mapped, glibc]
    ['0000 0000 0000 0000 0000 ffff 7f00 0001', '::ffff:7f00:1', '::ffff:127.0.0.1', '::ffff:127.0.0.1'],
    ['0000 0000 0000 0000 0000 0000 0102 0304', '::102:304', '::102:304', '::1.2.3.4'],
    ['0000 0000 0000 0000 0000 0000 0000 0001', '::1', '::1', '::1'],
    ['0000 0000 0000 0000 0000 0000 0000 0000', '::', '::', '::'],
    ['0000 0000 0000 0000 0000 ffff 0000 0000', '::ffff:0:0', '::ffff:0.0.0.0', '::ffff:0.0.0.0'],
    ['0001 0000 0000 0000 0000 ffff 0a00 0001', '1::ffff:a00:1', '1::ffff:a00:1', '1::ffff:a00:1'],
    ['2001 0db8 0000 0000 0001 0000 0000 0001', '2001:db8::1:0:0:1', '2001:db8::1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001 0db8 0001 0001 0001 0001 0001 0001', '2001:db8:1:1:1:1:1:1', '2001:db8:1:1:1:1:1:1', '2001:db8:1:1:1:1:1:1'],
    ['2001 0db8 0000 0001 0001 0001 0001 0001', '2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
  ];
  for (const [hex, none, mapped, glibc] of cases) {
    const b = bytes(hex);
    assert.equal(formatIpv6Text(b), none, hex);
    assert.equal(formatIpv6Text(b, 0, 'mapped'), mapped, hex);
    assert.equal(formatIpv6Text(b, 0, 'glibc'), glibc, hex);
  }
});
