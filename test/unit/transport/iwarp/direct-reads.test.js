// Direct placement across read boundaries. The receive side of a QP is driven the way the LLP
// drives it (ask where the next read lands, then report the read), with a simulated socket that
// hands over a random number of the stream's bytes per read: all the target asked for, fewer,
// or fewer by a few bytes so that a read ends inside a trailer or a header. A direct read may
// take, past a payload, the trailer and the next FPDU's header into the destination memory (the
// bytes there are saved and put back): after every read the registered memory, and the guard
// bytes around it, must hold exactly the payload bytes of the stream consumed so far and nothing
// else, and the decoder must have taken every FPDU.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Access, iwarp } from '../../../../dist/index.js';
import { resetIwarpConfig } from '../../../../dist/transport/iwarp/config.js';
import { encodeFpdu, RdmapOpcode } from '../../../../dist/wire/index.js';
import { rcPair } from '../../../lib/cm-rc-pair.js';
import { prng } from '../../../lib/prng.js';

after(() => resetIwarpConfig());

const PAGE = 4096;
const REGION = 64 * PAGE;

async function receiver(crc, shared = false) {
  iwarp.configure({ crc, rtrNudgeLocal: false, directPlacementMin: 8192 });
  const pair = await rcPair({ recv: 4, sge: 1 });
  const id = pair.b;
  const qp = id.qp;
  for (let i = 0; i < 200 && !qp.rx.seenFirst; i++) await new Promise((r) => setTimeout(r, 1));
  assert.ok(qp.rx.seenFirst, 'RTR received');
  const backing = shared ? Buffer.from(new SharedArrayBuffer(REGION + 2 * PAGE)).fill(0xee) : Buffer.alloc(REGION + 2 * PAGE, 0xee);
  const region = backing.subarray(PAGE, PAGE + REGION);
  for (let i = 0; i < region.length; i++) region[i] = (i * 7) & 0xff;
  const mr = id.pd.regMr(region, Access.LOCAL_WRITE | Access.REMOTE_WRITE, 0x1000_0000);
  const terms = [];
  const sendTerminate = qp.tx.sendTerminate.bind(qp.tx);
  qp.tx.sendTerminate = (t) => {
    terms.push(t);
    sendTerminate(t);
  };
  return { pair, qp, mr, backing, shared, terms, reader: qp.llp.reader, dec: qp.rx.decoder };
}

/**
 * RDMA Writes, most of several segments of 8–20 KiB (odd sizes: every pad length), their last
 * segment anywhere from 1 byte up, some ending at the region's end, with small Writes between.
 * Returns the stream, where each of its bytes lands in `backing` (-1: not payload) and the FPDU
 * count.
 */
function stream(rnd, mr, crc) {
  const parts = [];
  const dests = [];
  let fpdus = 0;
  const add = (off, last, len) => {
    const payload = Buffer.alloc(len);
    for (let j = 0; j < len; j++) payload[j] = Math.floor(rnd() * 256);
    const f = encodeFpdu({ opcode: RdmapOpcode.WRITE, last, stag: mr.rkey, to: mr.addr + off }, payload, { crc });
    const d = new Int32Array(f.length).fill(-1);
    for (let j = 0; j < len; j++) d[16 + j] = PAGE + off + j;
    parts.push(f);
    dests.push(d);
    fpdus++;
  };
  const n = 2 + Math.floor(rnd() * 5);
  for (let i = 0; i < n; i++) {
    if (rnd() < 0.25) {
      add(Math.floor(rnd() * (REGION - 200)), true, Math.floor(rnd() * 200));
      continue;
    }
    const segs = 1 + Math.floor(rnd() * 4);
    const lens = [];
    for (let s = 0; s < segs; s++) lens.push(8192 + Math.floor(rnd() * 12000));
    const r = rnd();
    lens.push(r < 0.3 ? 1 + Math.floor(rnd() * 24) : r < 0.6 ? Math.floor(rnd() * 8192) + 1 : 8192 + Math.floor(rnd() * 12000));
    const total = lens.reduce((a, b) => a + b, 0);
    const off = rnd() < 0.3 ? REGION - total : Math.floor(rnd() * (REGION - total));
    let at = off;
    lens.forEach((len, k) => {
      add(at, k === lens.length - 1, len);
      at += len;
    });
  }
  const s = Buffer.concat(parts);
  const dest = new Int32Array(s.length);
  let p = 0;
  for (const d of dests) {
    dest.set(d, p);
    p += d.length;
  }
  return { s, dest, fpdus };
}

/** Feed `s` through the reader as the LLP would, with random read sizes; check after each read. */
function drive(rnd, r, s, dest) {
  const { reader, backing } = r;
  const model = Buffer.from(backing);
  let pos = 0;
  let viewsPast = 0;
  const scratch = Buffer.alloc(1 << 20);
  while (pos < s.length) {
    const t = reader.readTarget();
    let want;
    if (t === null) want = 1 + Math.floor(rnd() * 70000);
    else if (typeof t === 'number') want = t > 0 ? t : 1 + Math.floor(rnd() * 70000);
    else want = t.length;
    const c = rnd();
    let n = c < 0.5 ? want : c < 0.75 ? Math.max(1, want - Math.floor(rnd() * 24)) : 1 + Math.floor(rnd() * want);
    n = Math.min(n, s.length - pos);
    if (Buffer.isBuffer(t)) {
      if (t.buffer === backing.buffer && t.byteOffset + t.length > backing.byteOffset) {
        // The view is in the registered memory; its bytes past the payload are the trailer and header.
        r.views = (r.views ?? 0) + 1;
        if (r.shared) assert.equal(t.length, r.dec.payloadRemaining, 'shared memory: nothing read past the payload');
        s.copy(t, 0, pos, pos + n);
        if (n > 0 && dest[pos + n - 1] === -1) viewsPast++;
        reader.placed(t, n);
      } else assert.fail('a read target outside the registered memory');
    } else {
      s.copy(scratch, 0, pos, pos + n);
      reader.bytes(scratch, 0, n);
    }
    for (let i = pos; i < pos + n; i++) if (dest[i] >= 0) model[dest[i]] = s[i];
    pos += n;
    if (!backing.equals(model)) {
      let i = 0;
      while (backing[i] === model[i]) i++;
      assert.fail(`after ${pos} of ${s.length} stream bytes: memory differs at ${i - PAGE} of the region`);
    }
  }
  return viewsPast;
}

for (const crc of [false, true]) {
  test(`direct reads across payload, trailer and header boundaries (crc ${crc})`, async () => {
    const r = await receiver(crc);
    try {
      let past = 0;
      let fpdus = r.dec.fpdus;
      for (let seed = 1; seed <= 60; seed++) {
        const rnd = prng(seed * 7919 + (crc ? 1 : 0));
        const { s, dest, fpdus: k } = stream(rnd, r.mr, crc);
        past += drive(rnd, r, s, dest);
        fpdus += k;
        assert.equal(r.dec.fpdus, fpdus, `seed ${seed}: every FPDU decoded`);
        assert.equal(r.dec.state, 'hdr', `seed ${seed}: at a boundary`);
        assert.deepEqual(r.terms, [], `seed ${seed}: no TERMINATE`);
      }
      // The reads past a payload (trailer and next header into the destination) did happen.
      assert.ok(past > 50, `reads that ended past a payload: ${past}`);
    } finally {
      await r.pair.close();
    }
  });
}

test('memory other threads can see is not read into past the payload', async () => {
  const r = await receiver(false, true);
  try {
    let past = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const rnd = prng(seed * 104729);
      const { s, dest } = stream(rnd, r.mr, false);
      past += drive(rnd, r, s, dest);
      assert.deepEqual(r.terms, [], `seed ${seed}: no TERMINATE`);
    }
    assert.equal(past, 0);
    assert.ok(r.views > 50, `direct reads: ${r.views}`);
  } finally {
    await r.pair.close();
  }
});
