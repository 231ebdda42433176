// perftest's side-channel records as the tools read them from a peer (src/cli/perftest/exchange.ts):
// the QP keys in both layouts (KEY_PRINT_FMT, 59 bytes; KEY_PRINT_FMT_GID, 108 bytes), the version
// record, the MTU record; and the keys as the rdma_cm side channel (-R) carries them, the binary
// struct pingpong_dest. Valid records, mutated ones and random bytes.
//
// Invariants: a valid record decodes to what was encoded; any other input either decodes to keys
// whose fields fit their wire widths (LID 16 bits, QPN and PSN as read, rkey and SRQN 32 bits,
// the GID 16 bytes) or is refused with an ExchangeError, never another exception; the version and
// MTU readers return a number for any bytes.
import assert from 'node:assert/strict';
import {
  ExchangeError,
  KEY_MSG_SIZE,
  KEY_MSG_SIZE_GID,
  decodeDest,
  decodeMtu,
  encodeDest,
  encodeMtu,
  encodeVersion,
  versionNumber,
} from '../../../dist/cli/perftest/exchange.js';
import { PINGPONG_DEST_SIZE, decodeDestBinary, encodeDestBinary } from '../../../dist/cli/perftest/cm-channel.js';
import { mutate, hexHead } from '../lib/mutate.js';

function genDest(rng) {
  return {
    lid: rng.int(0x10000),
    outReads: rng.int(0x10000),
    qpn: rng.int(0x1000000),
    psn: rng.int(0x1000000),
    rkey: rng.u32(),
    vaddr: (BigInt(rng.u32()) << 32n) | BigInt(rng.u32()),
    gid: Uint8Array.from(rng.bytes(16)),
    srqn: rng.u32(),
  };
}

function checkDecoded(d) {
  assert.ok(Number.isInteger(d.lid) && d.lid >= 0 && d.lid <= 0xffff);
  for (const k of ['qpn', 'psn', 'rkey', 'srqn']) assert.ok(Number.isInteger(d[k]) && d[k] >= 0 && d[k] <= 0xffffffff, k);
  assert.ok(Number.isInteger(d.outReads));
  assert.equal(typeof d.vaddr, 'bigint');
  assert.ok(d.vaddr >= 0n && d.vaddr < 1n << 64n);
  assert.equal(d.gid.length, 16);
}

export default {
  name: 'perftest-exchange',
  about: "perftest's side-channel records (QP keys with and without GID, version, MTU): valid, mutated, random",
  budgetMs: 600,
  run(rng, t) {
    const withGid = rng.chance(0.5);
    const size = withGid ? KEY_MSG_SIZE_GID : KEY_MSG_SIZE;
    const d = genDest(rng);
    if (!withGid) d.gid = new Uint8Array(16);
    const valid = encodeDest(d, withGid);
    assert.equal(valid.length, size);
    const kind = rng.int(4);
    if (kind === 0) {
      const back = decodeDest(valid, withGid);
      assert.deepEqual({ ...back, gid: [...back.gid] }, { ...d, gid: [...d.gid] });
      t.count('valid');
      return;
    }
    let bytes;
    if (kind === 1) bytes = Buffer.from(rng.bytes(rng.chance(0.8) ? size : rng.size(2 * size)));
    else {
      const fields = [];
      const text = valid.toString('latin1');
      let at = 0;
      for (const f of text.replace(/\0+$/, '').split(':')) {
        // The mutator's field widths are 1, 2, 4 and 8 bytes: the head of each text field.
        fields.push({ off: at, size: f.length >= 8 ? 8 : f.length >= 4 ? 4 : f.length >= 2 ? 2 : 1 });
        at += f.length + 1;
      }
      bytes = Buffer.from(mutate(rng, valid, { fields, donors: [encodeDest(genDest(rng), withGid)] }).bytes);
    }
    t.note(hexHead(bytes));
    try {
      checkDecoded(decodeDest(bytes, withGid));
      t.count('accepted');
    } catch (e) {
      if (!(e instanceof ExchangeError)) throw e;
      t.count('refused');
    }
    const v = versionNumber(bytes.subarray(0, 16));
    assert.equal(typeof v, 'number');
    assert.equal(versionNumber(encodeVersion('6.06')), 6.06);
    // The rdma_cm channel's binary keys (struct pingpong_dest): the same bytes as a message.
    const vb = encodeDestBinary(d, withGid ? 1 : -1);
    assert.equal(vb.length, PINGPONG_DEST_SIZE);
    const vback = decodeDestBinary(vb);
    assert.deepEqual({ ...vback, gid: [...vback.gid] }, { ...d, srqn: 0, outReads: d.outReads, gid: [...d.gid] });
    try {
      checkDecoded(decodeDestBinary(bytes));
    } catch (e) {
      if (!(e instanceof ExchangeError)) throw e;
      assert.ok(bytes.length < PINGPONG_DEST_SIZE, 'only a short message is refused');
    }
    const m = decodeMtu(bytes.subarray(0, 2));
    assert.ok(Number.isInteger(m));
    assert.equal(decodeMtu(encodeMtu(1 + rng.int(5))) >= 1, true);
  },
  check(counts, cases) {
    if (cases < 2000) return;
    for (const k of ['valid', 'accepted', 'refused']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
