// RoCEv2 packets (wire/roce): parseRocePacket, decodeRocePacket and decodeGsiPacket on packets of
// every opcode we encode and on the rxe packets of the captures, valid and mutated, with the ICRC
// checked, recovered (IPv4 ID unknown), skipped, or fixed up after the mutation so that mutated
// headers reach the checks behind the ICRC.
//
// Invariants: the parser never throws and reads no index outside the bytes it is given (a guard
// proxy), and its verdict and fields are the same for the packet alone and for the packet inside
// a larger buffer of garbage; a valid packet decodes to what was encoded; whatever is accepted is
// self-consistent (offsets inside the packet, lengths adding up) and survives decode → encode →
// decode; the allocating decoders agree with the parser.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { roce } from '../../../dist/wire/index.js';
import { udpDatagrams } from '../../lib/pcap.js';
import { guarded } from '../lib/assert-typed.js';
import { hexHead, mutate } from '../lib/mutate.js';

const NET = { family: 4, src: Uint8Array.of(10, 77, 0, 3), dst: Uint8Array.of(10, 77, 0, 2), sport: 0xc123 };
const OPCODES = roce.IB_OPCODES.filter((i) => i.valid && (i.opcode & 0xe0) !== roce.IbTransport.RD);
/** BTH fields worth hitting with field mutations: opcode, flags, P_Key, QPN word, PSN word. */
const FIELDS = [{ off: 0, size: 1 }, { off: 1, size: 1 }, { off: 2, size: 2 }, { off: 4, size: 4 }, { off: 8, size: 4 }, { off: 12, size: 4 }];

/** A random packet spec for a random opcode, every extension header it carries filled in. */
function genSpec(rng) {
  const info = rng.pick(OPCODES);
  const m = info.mask;
  const big = () => (BigInt(rng.u32()) << 32n) | BigInt(rng.u32());
  const ud = (info.opcode & 0xe0) === roce.IbTransport.UD;
  const dest = ud && rng.chance(0.3) ? rng.pick([1, 0xffffff]) : 2 + rng.int(0xfffffd);
  const s = {
    opcode: info.opcode, destQp: dest, psn: rng.int(0x1000000), se: rng.chance(0.5), mig: rng.chance(0.1), pkey: rng.pick([0xffff, 0x7fff]),
    ackReq: rng.chance(0.5), fecn: rng.chance(0.2), becn: rng.chance(0.2), tver: 0,
  };
  if (m & roce.OpMask.DETH) s.deth = { qkey: dest === 1 ? roce.GSI_QKEY : rng.u32(), srcQp: rng.int(0x1000000) };
  if (m & roce.OpMask.FETH) s.feth = { placementType: rng.int(16), selectivity: rng.int(4) };
  if (m & roce.OpMask.RETH) s.reth = { va: big(), rkey: rng.u32(), len: rng.u32() };
  if (m & roce.OpMask.ATMETH) s.atmeth = { va: big(), rkey: rng.u32(), swapAdd: big(), compare: big() };
  if (m & roce.OpMask.AETH) s.aeth = { syndrome: rng.int(256), msn: rng.int(0x1000000) };
  if (m & roce.OpMask.ATMACK) s.atmack = big();
  if (m & roce.OpMask.IMMDT) s.immDt = rng.u32();
  if (m & roce.OpMask.IETH) s.ieth = rng.u32();
  if (m & roce.OpMask.PAYLOAD) s.payload = new Uint8Array(rng.bytes(dest === 1 ? 256 : rng.size(300)));
  return s;
}

/** The spec decode gives back for `s` (RETH / AtomicETH addresses come back as bigints). */
function normalized(s) {
  const n = { ...s };
  if (n.reth) n.reth = { ...n.reth, va: BigInt(n.reth.va) };
  if (n.atmeth) n.atmeth = { ...n.atmeth, va: BigInt(n.atmeth.va) };
  if (!n.payload && roce.IB_OPCODES[n.opcode].mask & roce.OpMask.PAYLOAD) n.payload = new Uint8Array(0);
  return n;
}

function checkAccepted(p, start, end) {
  assert.ok(p.info.valid && (p.opcode & 0xe0) !== roce.IbTransport.RD);
  assert.equal(p.payloadOff, start + p.info.length);
  assert.equal(p.payloadOff + p.payloadLen + p.pad + 4, end, 'lengths add up');
  assert.ok(p.payloadLen >= 0 && p.pad <= 3);
  for (let h = 0; h < roce.HDR_KINDS; h++) {
    const o = p.hdrOffset(h);
    if (o >= 0) assert.ok(o >= start && o + roce.HDR_LEN[h] <= end - 4, `header ${h} inside the packet`);
  }
}

export default {
  name: 'roce-packet',
  about: 'RoCEv2 packet parser and decoders (every opcode, rxe captures), ICRC checked / recovered / fixed up',
  budgetMs: 700,
  setup() {
    const captured = [];
    for (const name of ['E-rxe-2vm.pcap', 'C-rxe-mcast.pcap']) {
      const seen = new Set();
      for (const d of udpDatagrams(fileURLToPath(new URL(`../../fixtures/captures/${name}`, import.meta.url)))) {
        const key = `${d.payload[0]}/${d.payload.length}`;
        if (d.dport !== 4791 || seen.has(key)) continue;
        seen.add(key);
        captured.push({
          bytes: Buffer.from(d.payload),
          net: { family: 4, src: new Uint8Array(d.src), dst: new Uint8Array(d.dst), sport: d.sport, ipId: d.ipHeader.readUInt16BE(4) },
        });
      }
    }
    return { captured };
  },
  run(rng, t, ctx) {
    let valid;
    let net;
    let spec = null;
    if (rng.chance(0.25)) {
      ({ bytes: valid, net } = rng.pick(ctx.captured));
    } else {
      spec = genSpec(rng);
      net = { ...NET, sport: 0xc000 + rng.int(0x4000), ipId: rng.chance(0.5) ? 0 : rng.int(0x10000) };
      valid = Buffer.from(roce.encodeRocePacket(spec, net));
    }
    const mutated = rng.chance(0.85);
    let bytes = valid;
    let ops = [];
    if (mutated) {
      ({ bytes, ops } = mutate(rng, valid, { fields: FIELDS, donors: ctx.captured.slice(0, 8).map((c) => c.bytes) }));
      if (bytes.length >= 16 && rng.chance(0.5)) {
        bytes = Buffer.from(bytes);
        roce.icrcWrite(net, bytes, 0, bytes.length - 4);
        ops.push('icrc-fixup');
      }
    }
    const mode = rng.int(3);
    const { ipId, ...blind } = net;
    const opts = mode === 0 ? {} : mode === 1 ? { net } : { net: blind };
    t.note(`${ops.join(' ') || 'valid'}; icrc ${['unchecked', 'known ID', 'ID recovered'][mode]}: ${hexHead(bytes)}`);

    const p = new roce.RocePacket();
    const violations = [];
    const drop = roce.parseRocePacket(guarded(bytes, violations), 0, bytes.length, p, opts);
    assert.deepEqual(violations, [], 'read outside the packet');
    t.count(drop ?? 'accepted');

    // the same packet in the middle of garbage
    const pre = rng.int(17);
    const big = Buffer.concat([rng.bytes(pre), bytes, rng.bytes(rng.int(17))]);
    const q = new roce.RocePacket();
    assert.equal(roce.parseRocePacket(big, pre, pre + bytes.length, q, opts), drop, 'verdict depends on bytes outside the packet');
    assert.deepEqual(
      [q.opcode, q.destQp, q.psn, q.pkey, q.pad, q.payloadOff - pre, q.payloadLen, q.icrc, q.ipId, q.se, q.ackReq],
      [p.opcode, p.destQp, p.psn, p.pkey, p.pad, p.payloadOff, p.payloadLen, p.icrc, p.ipId, p.se, p.ackReq],
    );

    const d = roce.decodeRocePacket(bytes, opts);
    assert.equal(d.ok, drop === null);
    if (!d.ok) assert.equal(d.drop, drop);
    if (!mutated) {
      assert.equal(drop, null, 'a valid packet is accepted');
      if (spec) assert.deepEqual(d.spec, normalized(spec));
      if (mode !== 0) assert.equal(p.ipId, net.ipId, 'the ID used or recovered');
    }
    if (drop === null) {
      checkAccepted(p, 0, bytes.length);
      const re = roce.encodeRocePacket(d.spec, net);
      const again = roce.decodeRocePacket(re, { net });
      assert.ok(again.ok);
      assert.deepEqual(again.spec, d.spec, 'decode → encode → decode');
    }
    const g = roce.decodeGsiPacket(bytes, opts);
    if (g.ok) {
      assert.equal(drop, null);
      assert.equal(g.gsi.mad.length, 256);
      assert.equal(p.destQp, 1);
      t.count('gsi');
    } else if (drop !== null) {
      assert.equal(g.drop, drop);
    }
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['accepted', 'too_short', 'bad_tver', 'bad_opcode', 'truncated', 'bad_pad', 'bad_pkey', 'icrc_error', 'gsi']) {
      assert.ok(counts[k] > 0, `no case ended in ${k}: ${JSON.stringify(counts)}`);
    }
  },
};
