// The side channel of the libibverbs pingpong examples (src/cli/pingpong-wire.ts): the 52-byte
// "LID:QPN:PSN:GID" message a peer sends over TCP.
//
// Invariants: a valid address round-trips; any 52 bytes decode to null or to an address with a
// 16-bit LID, a 24-bit QPN and PSN and a 16-byte GID, exactly when a naive reference parser
// (split at the colons, each field checked on its own) accepts the text before the first NUL, with
// the same values; a decoded address re-encodes to a message that decodes to it again.
import assert from 'node:assert/strict';
import { PP_MSG_LEN, decodeDest, encodeDest } from '../../../dist/cli/pingpong-wire.js';
import { mutate, hexHead } from '../lib/mutate.js';

function genDest(rng) {
  return { lid: rng.int(0x10000), qpn: rng.int(0x1000000), psn: rng.int(0x1000000), gid: rng.chance(0.3) ? new Uint8Array(16) : Uint8Array.from(rng.bytes(16)) };
}

/** The reference: the text before the first NUL, four fields, each hex of bounded width and value. */
function naive(buf) {
  let text = '';
  for (const b of buf) {
    if (b === 0) break;
    text += String.fromCharCode(b);
  }
  const f = text.split(':');
  if (f.length !== 4) return null;
  const hex = (s, max) => (s.length >= 1 && s.length <= 8 && [...s].every((c) => '0123456789abcdefABCDEF'.includes(c)) && parseInt(s, 16) <= max ? parseInt(s, 16) : null);
  const lid = hex(f[0], 0xffff);
  const qpn = hex(f[1], 0xffffff);
  const psn = hex(f[2], 0xffffff);
  if (lid === null || qpn === null || psn === null || f[3].length !== 32) return null;
  const gid = new Uint8Array(16);
  for (let i = 0; i < 16; i++) {
    const v = hex(f[3].slice(2 * i, 2 * i + 2), 0xff);
    if (v === null || f[3].slice(2 * i, 2 * i + 2).length !== 2) return null;
    gid[i] = v;
  }
  return { lid, qpn, psn, gid };
}

const same = (a, b) => a.lid === b.lid && a.qpn === b.qpn && a.psn === b.psn && Buffer.from(a.gid).equals(Buffer.from(b.gid));

export default {
  name: 'pingpong-dest',
  about: 'the pingpong examples\' LID:QPN:PSN:GID side-channel message',
  budgetMs: 400,
  run(rng, t) {
    const d = genDest(rng);
    const valid = encodeDest(d);
    assert.equal(valid.length, PP_MSG_LEN);
    const back = decodeDest(valid);
    assert.ok(back !== null && same(back, d), 'a valid address round-trips');
    const { bytes, ops } = rng.chance(0.1) ? { bytes: Buffer.from(rng.bytes(rng.int(PP_MSG_LEN + 1))), ops: ['random'] } : mutate(rng, valid);
    t.note(`${ops.join(' ')}: ${hexHead(bytes)}`);
    const got = decodeDest(bytes);
    const ref = naive(bytes);
    assert.equal(got === null, ref === null, `decoder ${got === null ? 'refused' : 'accepted'}, reference ${ref === null ? 'refused' : 'accepted'}`);
    t.count(got === null ? 'refused' : 'decoded');
    if (got === null) return;
    assert.ok(same(got, ref), 'the reference reads the same values');
    assert.ok(got.lid <= 0xffff && got.qpn <= 0xffffff && got.psn <= 0xffffff && got.gid.length === 16);
    const again = decodeDest(encodeDest(got));
    assert.ok(again !== null && same(again, got), 're-encoded, it decodes to the same address');
  },
  check(counts, cases) {
    if (cases < 2000) return;
    assert.ok(counts.refused > 0 && counts.decoded > 0, JSON.stringify(counts));
  },
};
