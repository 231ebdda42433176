// The send path's one-step builder for a message that fits one FPDU (QpTx.stageOne) against the
// general segmenting builder (QpTx.sendMessage) and the wire codec's encodeFpdu: the same bytes
// for every opcode, size, payload split, field value, with MPA CRC on and off.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QpTx } from '../../../../dist/transport/iwarp/qp-tx.js';
import { IwarpCounters } from '../../../../dist/transport/iwarp/counters.js';
import { encodeFpdu, RdmapOpcode } from '../../../../dist/wire/index.js';
import { prng } from '../../../lib/prng.js';

/** A QpTx on a stand-in connection: builders stage into its slab; writes are dropped. */
function tx(crc, fpduMax) {
  const t = new QpTx({ tag: 'QP[test]', counters: new IwarpCounters() });
  t.attach({ write() {}, socket: { writableLength: 0 }, isClosed: false, beginBatch() {}, endBatch() {} }, crc, fpduMax);
  return t;
}

/** What `build` staged for one FPDU of `len` bytes on the wire (the last bytes staged). */
function staged(t, len, build) {
  build();
  const out = Buffer.from(t.slab.subarray(t.slabPos - len, t.slabPos));
  t.stageStart = t.slabPos;
  return out;
}

test('stageOne builds the bytes sendMessage and encodeFpdu build, CRC on and off', () => {
  const rnd = prng(20261125);
  const ops = [RdmapOpcode.WRITE, RdmapOpcode.SEND, RdmapOpcode.SEND_SE, RdmapOpcode.SEND_INV, RdmapOpcode.SEND_SE_INV];
  let cases = 0;
  for (const crc of [false, true]) {
    for (const fpduMax of [1448, 9000, 64]) {
      const a = tx(crc, fpduMax);
      const b = tx(crc, fpduMax);
      assert.equal(a.oneMax, (Math.max(64, fpduMax & ~7) - 24) & ~3);
      for (let i = 0; i < 800; i++) {
        const op = ops[Math.floor(rnd() * ops.length)];
        const n = rnd() < 0.1 ? 0 : rnd() < 0.2 ? a.oneMax - Math.floor(rnd() * 4) : Math.floor(rnd() * Math.min(a.oneMax + 1, 200));
        const src = Buffer.alloc(n + 16);
        for (let j = 0; j < src.length; j++) src[j] = Math.floor(rnd() * 256);
        // The payload in 1-4 pieces (as gather resolves SGEs), at random offsets of their buffers.
        const bufs = [];
        const offs = [];
        const lens = [];
        let left = n;
        while (left > 0 || bufs.length === 0) {
          const k = bufs.length === 3 || rnd() < 0.5 ? left : Math.floor(rnd() * (left + 1));
          const o = Math.floor(rnd() * 8);
          const piece = Buffer.alloc(k + 8, 0xa5);
          src.copy(piece, o, n - left, n - left + k);
          bufs.push(piece);
          offs.push(o);
          lens.push(k);
          left -= k;
        }
        const big = () => Math.floor(rnd() * 2 ** 32);
        const w = { length: n, rkey: big(), remoteAddr: rnd() < 0.5 ? big() : big() * 2 ** 21 + big() % 2 ** 21, invalidateRkey: op === RdmapOpcode.SEND_INV || op === RdmapOpcode.SEND_SE_INV ? big() : 0 };
        const msn = op === RdmapOpcode.WRITE ? 0 : 1 + (big() % 0xffffffff);
        const p = { bufs, offs, lens };
        const hdr = op === RdmapOpcode.WRITE ? 16 : 20;
        const len = hdr + n + (-(hdr + n) & 3) + 4;
        const one = staged(a, len, () => a.stageOne(null, op, w, msn, p));
        const gen = staged(b, len, () => b.sendMessage(null, op, w, msn, p));
        assert.deepEqual(one, gen, `case ${i} op ${op} n ${n} crc ${crc}`);
        const f = op === RdmapOpcode.WRITE ? { opcode: op, stag: w.rkey, to: w.remoteAddr } : { opcode: op, msn, invStag: w.invalidateRkey };
        assert.deepEqual(one, encodeFpdu(f, src.subarray(0, n), { crc }));
        cases++;
      }
    }
  }
  assert.equal(cases, 4800);
});
