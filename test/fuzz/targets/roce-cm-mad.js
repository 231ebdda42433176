// IB CM MADs and the rdma_cm private-data header (wire/roce): decodeCmMad, decodeMadHeader and
// decodeCmaHeader on every CM message we encode (random fields at full width) and on the CM MADs
// rxe sent in the captures, valid and mutated; gsiCmAttrId on the same bytes behind a BTH and DETH.
//
// Invariants: a valid MAD decodes to what was encoded and re-encodes to the same bytes; a mutated
// one decodes or is refused with RdmaError EBADMSG (nothing else is thrown), with no index read
// outside the bytes given; whatever decodes survives decode → encode → decode; the same holds for
// the CMA header inside REQ and SIDR_REQ private data. gsiCmAttrId gives the attribute ID of a
// whole CM-class MAD and -1 for anything else, reading nothing outside the datagram.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { RdmaError } from '../../../dist/errors.js';
import { roce } from '../../../dist/wire/index.js';
import { udpDatagrams } from '../../lib/pcap.js';
import { KINDS, randomCmMessage } from '../../unit/wire/roce/roce-util.js';
import { guarded, outcome } from '../lib/assert-typed.js';
import { hexHead, mutate } from '../lib/mutate.js';

/** MAD header fields plus the first words of every message body. */
const FIELDS = [{ off: 0, size: 1 }, { off: 1, size: 1 }, { off: 2, size: 1 }, { off: 16, size: 2 }, { off: 24, size: 4 }, { off: 28, size: 4 }, { off: 32, size: 4 }];

/** A BTH and DETH in front of the MAD, for gsiCmAttrId (which reads neither). */
const GSI_HEADERS = Buffer.alloc(roce.GSI_MAD_OFF);

function typedOnly(fn) {
  const r = outcome(fn, [RdmaError]);
  if (r.error) assert.equal(r.error.code, 'EBADMSG', r.error.message);
  return r;
}

export default {
  name: 'roce-cm-mad',
  about: 'IB CM MADs (REQ MRA REJ REP RTU DREQ DREP SIDR_REQ SIDR_REP) and the CMA header, valid and mutated',
  budgetMs: 700,
  setup() {
    const captured = [];
    const file = fileURLToPath(new URL('../../fixtures/captures/E-rxe-2vm.pcap', import.meta.url));
    for (const d of udpDatagrams(file)) {
      if (d.dport === 4791 && d.payload.length === 280 && d.payload[7] === 1) captured.push(Buffer.from(d.payload.subarray(20, 276)));
    }
    return { captured };
  },
  run(rng, t, ctx) {
    let valid;
    let msg = null;
    if (rng.chance(0.2)) {
      valid = rng.pick(ctx.captured);
    } else {
      msg = randomCmMessage(() => rng.u32(), rng.pick(KINDS));
      valid = Buffer.from(roce.encodeCmMad(msg, (BigInt(rng.u32()) << 32n) | BigInt(rng.u32())));
    }
    const mutated = rng.chance(0.8);
    let bytes = valid;
    let ops = [];
    if (mutated) {
      ({ bytes, ops } = mutate(rng, valid, { fields: FIELDS, donors: ctx.captured }));
      // keep most cases a CM MAD so that the message decoders run
      if (bytes.length >= 2 && rng.chance(0.6)) {
        bytes = Buffer.from(bytes);
        bytes[0] = 1;
        bytes[1] = 7;
      }
    }
    t.note(`${ops.join(' ') || 'valid'}: ${hexHead(bytes)}`);
    const violations = [];
    const g = guarded(bytes, violations);
    const r = typedOnly(() => roce.decodeCmMad(g));
    typedOnly(() => roce.decodeMadHeader(g));
    const whole = bytes.length >= roce.MAD_SIZE && bytes[1] === roce.MgmtClass.CM;
    const attr = roce.gsiCmAttrId(guarded(Buffer.concat([GSI_HEADERS, bytes]), violations));
    assert.equal(attr, whole ? bytes.readUInt16BE(roce.MadOff.ATTR_ID) : -1, 'gsiCmAttrId');
    assert.deepEqual(violations, [], 'read outside the MAD');
    if (!mutated) {
      assert.ok(r.value, 'a valid MAD decodes');
      if (msg) assert.deepEqual(r.value.msg, msg);
      assert.deepEqual(Buffer.from(roce.encodeCmMad(r.value.msg, r.value.hdr.tid, r.value.hdr)), valid, 're-encodes to the same bytes');
    }
    if (r.error) {
      t.count('refused');
      return;
    }
    const m = r.value;
    t.count(m.msg.kind);
    const again = roce.decodeCmMad(roce.encodeCmMad(m.msg, m.hdr.tid, m.hdr));
    assert.deepEqual(again.msg, m.msg, 'decode → encode → decode');
    assert.deepEqual(again.hdr, { ...m.hdr, classSpecific: 0, reserved: 0 });
    if (m.msg.kind === 'REQ' || m.msg.kind === 'SIDR_REQ') {
      const v = [];
      const pd = m.msg.privateData.subarray(0, rng.int(m.msg.privateData.length + 1));
      const h = typedOnly(() => roce.decodeCmaHeader(guarded(pd, v)));
      assert.deepEqual(v, [], 'read outside the private data');
      if (h.value) {
        t.count('cma');
        assert.deepEqual(roce.decodeCmaHeader(roce.encodeCmaPrivateData(h.value)), h.value);
      }
    }
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of [...KINDS, 'refused', 'cma']) assert.ok(counts[k] > 0, `no case ended in ${k}: ${JSON.stringify(counts)}`);
  },
};
