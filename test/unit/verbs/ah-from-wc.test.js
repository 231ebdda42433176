// ibv_init_ah_from_wc / ibv_create_ah_from_wc: the reply address handle from a UD completion and
// the 40-byte network-header area (RoCEv2 over IPv4: the IPv4 header at bytes 20..39; over IPv6:
// the IPv6 header), with the source GID index looked up in the port's GID table.
import test from 'node:test';
import assert from 'node:assert/strict';
import { initAhFromWc, createAhFromWc, GRH_SIZE, GidType, WcFlags } from '../../../dist/verbs.js';

const gid = (text) => {
  // '::ffff:a.b.c.d' or full IPv6 with '::'
  const out = new Uint8Array(16);
  const m = /^::ffff:(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (m) {
    out[10] = 0xff;
    out[11] = 0xff;
    for (let i = 0; i < 4; i++) out[12 + i] = Number(m[i + 1]);
    return out;
  }
  const [head, tail = ''] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const words = [...h, ...Array(8 - h.length - t.length).fill('0'), ...t].map((w) => parseInt(w, 16));
  words.forEach((w, i) => ((out[2 * i] = w >> 8), (out[2 * i + 1] = w & 0xff)));
  return out;
};

/** A context with a GID table of [gid text, GidType] entries on port 1. */
function fakeCtx(table) {
  return {
    queryPort(port) {
      if (port !== 1) throw Object.assign(new Error('bad port'), { code: 'EINVAL' });
      return { gidTblLen: table.length };
    },
    queryGid: (port, i) => gid(table[i][0]),
    queryGidType: (port, i) => table[i][1],
  };
}

const TABLE = [
  ['fe80::1', GidType.ROCE_V1],
  ['fe80::1', GidType.ROCE_V2],
  ['::ffff:10.0.0.1', GidType.ROCE_V1],
  ['::ffff:10.0.0.1', GidType.ROCE_V2],
  ['2001:db8::1', GidType.ROCE_V2],
];

/** The IPv4 header checksum (RFC 791), big-endian words. */
function ipv4Checksum(h) {
  let s = 0;
  for (let i = 0; i < 20; i += 2) s += (h[i] << 8) | h[i + 1];
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return ~s & 0xffff;
}

function grhV4({ src, dst, tos = 0, ttl = 64, goodChecksum = true, head = 0 }) {
  const g = new Uint8Array(GRH_SIZE);
  g[0] = head;
  const h = g.subarray(20);
  h[0] = 0x45;
  h[1] = tos;
  h[3] = 28 + 100;
  h[8] = ttl;
  h[9] = 17;
  src.split('.').forEach((x, i) => (h[12 + i] = Number(x)));
  dst.split('.').forEach((x, i) => (h[16 + i] = Number(x)));
  const c = ipv4Checksum(h) ^ (goodChecksum ? 0 : 1);
  h[10] = c >> 8;
  h[11] = c & 0xff;
  return g;
}

function grhV6({ src, dst, tclass = 0, flow = 0, hop = 64, next = 17 }) {
  const g = new Uint8Array(GRH_SIZE);
  new DataView(g.buffer).setUint32(0, ((6 << 28) | (tclass << 20) | flow) >>> 0);
  g[5] = 108;
  g[6] = next;
  g[7] = hop;
  g.set(gid(src), 8);
  g.set(gid(dst), 24);
  return g;
}

const wc = (over = {}) => ({ wcFlags: WcFlags.GRH | WcFlags.WITH_IMM, slid: 0, sl: 0, dlidPathBits: 0, ...over });

test('RoCEv2 over IPv4: the sender as an IPv4-mapped GID, TTL and ToS from the header, our GID index', () => {
  const a = initAhFromWc(fakeCtx(TABLE), 1, wc({ slid: 7, sl: 3, dlidPathBits: 1 }), grhV4({ src: '10.0.0.2', dst: '10.0.0.1', tos: 0x20, ttl: 63 }));
  assert.deepEqual(a, {
    isGlobal: true,
    portNum: 1,
    dlid: 7,
    sl: 3,
    srcPathBits: 1,
    grh: { dgid: gid('::ffff:10.0.0.2'), flowLabel: 0, sgidIndex: 3, hopLimit: 63, trafficClass: 0x20 },
  });
});

test('a version nibble of 6 in the undefined bytes: IPv4 all the same when the header at byte 20 checks out', () => {
  const a = initAhFromWc(fakeCtx(TABLE), 1, wc(), grhV4({ src: '10.0.0.9', dst: '10.0.0.1', head: 0x60 }));
  assert.equal(a.grh.sgidIndex, 3);
  assert.deepEqual(a.grh.dgid, gid('::ffff:10.0.0.9'));
  // With a bad checksum the area is read as an IPv6 header, whose next header (byte 6: 0) is
  // neither UDP nor IB.
  assert.throws(() => initAhFromWc(fakeCtx(TABLE), 1, wc(), grhV4({ src: '10.0.0.9', dst: '10.0.0.1', head: 0x60, goodChecksum: false })), { code: 'EPROTONOSUPPORT' });
});

test('RoCEv2 over IPv6: source GID, traffic class, flow label and hop limit from the header', () => {
  const a = initAhFromWc(fakeCtx(TABLE), 1, wc(), grhV6({ src: '2001:db8::2', dst: '2001:db8::1', tclass: 0x12, flow: 0xabcde, hop: 33 }));
  assert.deepEqual(a.grh, { dgid: gid('2001:db8::2'), flowLabel: 0xabcde, sgidIndex: 4, hopLimit: 33, trafficClass: 0x12 });
  // Next header 0x1b is RoCE v1: the GID must be a RoCE v1 entry.
  const v1 = initAhFromWc(fakeCtx(TABLE), 1, wc(), grhV6({ src: 'fe80::2', dst: 'fe80::1', next: 0x1b }));
  assert.equal(v1.grh.sgidIndex, 0);
  const v2 = initAhFromWc(fakeCtx(TABLE), 1, wc(), grhV6({ src: 'fe80::2', dst: 'fe80::1' }));
  assert.equal(v2.grh.sgidIndex, 1);
});

test('refusals: multicast destinations, no local GID of the type, unknown headers', () => {
  const ctx = fakeCtx(TABLE);
  assert.throws(() => initAhFromWc(ctx, 1, wc(), grhV4({ src: '10.0.0.2', dst: '239.1.1.1' })), { code: 'EINVAL' });
  assert.throws(() => initAhFromWc(ctx, 1, wc(), grhV6({ src: '2001:db8::2', dst: 'ff0e::1' })), { code: 'EINVAL' });
  assert.throws(() => initAhFromWc(ctx, 1, wc(), grhV4({ src: '10.0.0.2', dst: '10.0.0.3' })), { code: 'EINVAL' });
  assert.throws(() => initAhFromWc(ctx, 1, wc(), grhV6({ src: '2001:db8::2', dst: '2001:db8::1', next: 0x1b })), { code: 'EINVAL' });
  assert.throws(() => initAhFromWc(ctx, 1, wc(), grhV6({ src: '2001:db8::2', dst: '2001:db8::1', next: 6 })), { code: 'EPROTONOSUPPORT' });
  assert.throws(() => initAhFromWc(ctx, 1, wc(), new Uint8Array(GRH_SIZE)), { code: 'EPROTONOSUPPORT' });
  assert.throws(() => initAhFromWc(ctx, 1, wc(), new Uint8Array(39)), { code: 'EINVAL' });
  assert.throws(() => initAhFromWc(ctx, 2, wc(), grhV4({ src: '10.0.0.2', dst: '10.0.0.1' })), { code: 'EINVAL' });
});

test('without the GRH flag: a local AH from the completion alone (no GID lookup)', () => {
  const a = initAhFromWc(fakeCtx([]), 1, wc({ wcFlags: 0, slid: 0x12, sl: 5 }), new Uint8Array(GRH_SIZE));
  assert.deepEqual(a, { isGlobal: false, portNum: 1, dlid: 0x12, sl: 5, srcPathBits: 0 });
});

test('createAhFromWc hands the attributes to pd.createAh', () => {
  const made = [];
  const pd = { context: fakeCtx(TABLE), createAh: (attr) => (made.push(attr), { attr }) };
  const ah = createAhFromWc(pd, wc(), grhV4({ src: '10.0.0.5', dst: '10.0.0.1' }), 1);
  assert.equal(made.length, 1);
  assert.deepEqual(ah.attr.grh.dgid, gid('::ffff:10.0.0.5'));
});
