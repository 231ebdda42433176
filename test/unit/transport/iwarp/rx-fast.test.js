// The receive fast path (QpRx.fast: whole small Writes, Sends, Read Requests and single-segment
// Read Responses decoded and placed in one step) against the general FPDU decoder. The same byte stream, cut the same way, is fed to the receive
// path of two fresh QPs, one with the fast path on and one with it off; what they do must be the
// same: the bytes in the registered memory (and the guard bytes around it), the receive
// completions, the TERMINATE sent, the decoder's counters and state, the QP's state. Streams are
// random FPDU sequences (valid and invalid Writes, Sends, Read Requests, and Read Responses to
// the Reads the receiving QP has outstanding), then mutated (a byte changed, the stream cut short)
// and split at random points.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Access, WrOpcode, iwarp } from '../../../../dist/index.js';
import { resetIwarpConfig } from '../../../../dist/transport/iwarp/config.js';
import { random } from '../../../../dist/util/random.js';
import { encodeFpdu, RdmapOpcode, wholeFpdu, FpduDecoder, createFpduHeader } from '../../../../dist/wire/index.js';
import { rcPair } from '../../../lib/cm-rc-pair.js';
import { prng } from '../../../lib/prng.js';
import { createHash } from 'node:crypto';

after(() => resetIwarpConfig());

const PAGE = 4096;

/** A connected pair whose accepting side `b` receives; its QP with an MR and receives posted. */
async function receiver(fast, crc) {
  iwarp.configure({ rxFastPath: fast, crc, rtrNudgeLocal: false });
  const pair = await rcPair({ recv: 16, sge: 4 });
  const id = pair.b;
  const qp = id.qp;
  // The initiator's RTR is the first FPDU: wait until it was received.
  for (let i = 0; i < 200 && !qp.rx.seenFirst; i++) await new Promise((r) => setTimeout(r, 1));
  assert.ok(qp.rx.seenFirst, 'RTR received');
  const backing = Buffer.alloc(3 * PAGE, 0xee);
  const region = backing.subarray(PAGE, 2 * PAGE);
  region.fill(0);
  // The two QPs of a case get MRs with the same STags (drawn from a fixed sequence instead of the
  // CSPRNG), so that their streams are the same bytes: a mutated length can make a payload take in
  // the STags and CRCs of the FPDUs after it, which must then be the same on both.
  const draw = random.next;
  const keys = prng(0x5eed);
  random.next = () => Math.floor(keys() * 2 ** 32) >>> 0;
  let mr;
  let gone;
  try {
    mr = id.pd.regMr(region, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ, 0x1000_0000);
    gone = id.pd.regMr(Buffer.alloc(256), Access.LOCAL_WRITE, 0x2000_0000);
  } finally {
    random.next = draw;
  }
  const terms = [];
  const sendTerminate = qp.tx.sendTerminate.bind(qp.tx);
  qp.tx.sendTerminate = (t) => {
    terms.push({ layer: t.layer, etype: t.etype, ecode: t.ecode, header: relative(Buffer.from(t.header ?? []), mr) });
    sendTerminate(t);
  };
  let fastBytes = 0;
  const rxFast = qp.rx.fast.bind(qp.rx);
  qp.rx.fast = (dec, b, p, end, c) => {
    const q = rxFast(dec, b, p, end, c);
    fastBytes += q - p;
    return q;
  };
  /** Deregister the MRs (their STags are free for the other QP of the case), close the pair. */
  const close = async () => {
    for (const m of [mr, gone]) {
      try {
        m.dereg();
      } catch {
        // deregistered by the case already
      }
    }
    await pair.close();
  };
  return { pair, id, qp, mr, gone, backing, terms, reader: qp.llp.reader, dec: qp.rx.decoder, fastBytes: () => fastBytes, close };
}

/**
 * A TERMINATE's attached header with the STags and TOs that name this QP's MR made relative to
 * it (the two QPs compared have MRs with different keys and addresses).
 */
function relative(h, mr) {
  const b = Buffer.from(h);
  const rel = (so, to) => {
    b.writeUInt32BE((b.readUInt32BE(so) ^ mr.rkey) >>> 0, so);
    b.writeBigUInt64BE(BigInt.asUintN(64, b.readBigUInt64BE(to) - BigInt(mr.addr)), to);
  };
  if (b.length >= 16 && (b[2] & 0x80) !== 0) rel(4, 8);
  else if (b.length >= 48 && (b[3] & 0x0f) === RdmapOpcode.READ_REQ) rel(36, 40);
  else if (b.length >= 8 && ((b[3] & 0x0f) === RdmapOpcode.SEND_INV || (b[3] & 0x0f) === RdmapOpcode.SEND_SE_INV)) b.writeUInt32BE((b.readUInt32BE(4) ^ mr.rkey) >>> 0, 4);
  return b.toString('hex');
}

/** Receives of several shapes, the same on both QPs; one whose MR is gone by the time it is used. */
function postRecvs(r, rnd) {
  const { qp, mr, gone } = r;
  const shapes = [[64], [16, 0, 48], [8, 200], [300], [4, 4, 4, 4], [0]];
  const n = 1 + Math.floor(rnd() * 8);
  let at = 2048;
  for (let i = 0; i < n; i++) {
    if (rnd() < 0.08) {
      qp.postRecv({ wrId: 100 + i, sgList: [{ addr: gone.addr, length: 128, lkey: gone.lkey }] });
      continue;
    }
    const shape = shapes[Math.floor(rnd() * shapes.length)];
    const sgList = shape.map((len) => {
      const s = { addr: mr.addr + at, length: len, lkey: mr.lkey };
      at += len;
      return s;
    });
    qp.postRecv({ wrId: 100 + i, sgList });
  }
}

/** RDMA READs outstanding on the receiving QP (its ORQ), into its MR at 3072: 0 to 2 of them. */
function outstandingReads(r, rnd) {
  const reads = [];
  const n = Math.floor(rnd() * 3);
  for (let i = 0; i < n; i++) {
    const len = 1 + Math.floor(rnd() * 120);
    const off = 3072 + 256 * i;
    const w = { wrId: 900 + i, opcode: WrOpcode.RDMA_READ, sgList: [{ addr: r.mr.addr + off, length: len, lkey: r.mr.lkey }], flags: 0, signaled: true, length: len, inline: null, remoteAddr: 0, rkey: 0, invalidateRkey: 0, compareAdd: 0n, swap: 0n, immData: 0, ah: null, remoteQpn: 0, remoteQkey: 0, bind: null, sent: 0, detached: true };
    r.qp.tx.orq.push(w);
    reads.push({ off, len });
  }
  return reads;
}

/** The Read Response(s) to `read` (usually one matching segment; sometimes two, or a wrong one). */
function readResponse(rnd, mr, read, payload, crc) {
  const k = rnd();
  const resp = (off, len, more = {}) => encodeFpdu({ opcode: RdmapOpcode.READ_RESP, last: true, stag: mr.lkey, to: mr.addr + off, ...more }, payload(len), { crc });
  if (k < 0.75) return [resp(read.off, read.len)];
  if (k < 0.85 && read.len > 1) {
    const h = Math.floor(read.len / 2);
    return [resp(read.off, h, { last: false }), resp(read.off + h, read.len - h)];
  }
  if (k < 0.9) return [resp(read.off, read.len, { stag: (mr.lkey ^ 0x100) >>> 0 })];
  if (k < 0.95) return [resp(read.off + 4, read.len)];
  return [resp(read.off, read.len + (rnd() < 0.5 ? 1 : -1))];
}

function randomStream(rnd, mr, crc, reads = []) {
  const parts = [];
  let msn = 1;
  let readMsn = 1;
  let nextRead = 0;
  const n = 1 + Math.floor(rnd() * 6);
  for (let i = 0; i < n; i++) {
    const k = rnd();
    const payload = (len) => {
      const b = Buffer.alloc(len);
      for (let j = 0; j < len; j++) b[j] = Math.floor(rnd() * 256);
      return b;
    };
    if (k < 0.45) {
      const len = rnd() < 0.1 ? 0 : rnd() < 0.05 ? 600 + Math.floor(rnd() * 1500) : Math.floor(rnd() * 160);
      const stag = rnd() < 0.92 ? mr.rkey : (mr.rkey ^ (1 + Math.floor(rnd() * 255))) >>> 0;
      const off = rnd() < 0.9 ? Math.floor(rnd() * 1900) : PAGE - Math.floor(rnd() * 64);
      parts.push(encodeFpdu({ opcode: RdmapOpcode.WRITE, last: rnd() < 0.9, stag, to: mr.addr + off }, payload(len), { crc }));
    } else if (k < 0.9) {
      const ops = [RdmapOpcode.SEND, RdmapOpcode.SEND, RdmapOpcode.SEND_SE, RdmapOpcode.SEND_INV];
      const opcode = ops[Math.floor(rnd() * ops.length)];
      const len = rnd() < 0.1 ? 0 : Math.floor(rnd() * 120);
      const f = { opcode, last: rnd() < 0.92, msn: rnd() < 0.93 ? msn : msn + 1, mo: rnd() < 0.95 ? 0 : 4 };
      if (opcode === RdmapOpcode.SEND_INV) f.invStag = rnd() < 0.5 ? mr.rkey : (mr.rkey ^ 0x12345678) >>> 0;
      if (rnd() < 0.03) f.qn = 1;
      parts.push(encodeFpdu(f, payload(len), { crc }));
      if (f.last) msn++;
    } else if (k < 0.93) {
      const readSize = rnd() < 0.1 ? 0 : rnd() < 0.1 ? PAGE : 1 + Math.floor(rnd() * 200);
      const srcStag = rnd() < 0.9 ? mr.rkey : (mr.rkey ^ 0x200) >>> 0;
      parts.push(encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: rnd() < 0.9 ? readMsn : readMsn + 1, sinkStag: 7, sinkTo: 0x1000, readSize, srcStag, srcTo: mr.addr + Math.floor(rnd() * 64) }, undefined, { crc }));
      readMsn++;
    } else if (k < 0.97 && nextRead < reads.length) {
      parts.push(...readResponse(rnd, mr, reads[nextRead++], payload, crc));
    } else {
      parts.push(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: mr.rkey, to: mr.addr, last: true }, Buffer.alloc(4), { crc }));
    }
  }
  let s = Buffer.concat(parts);
  const m = rnd();
  if (m < 0.25) {
    // One byte changed anywhere (a header field, a length, the payload, the CRC).
    s = Buffer.from(s);
    s[Math.floor(rnd() * s.length)] ^= 1 + Math.floor(rnd() * 255);
  } else if (m < 0.32) {
    s = s.subarray(0, Math.floor(rnd() * s.length));
  }
  return s;
}

/** Cut points: often none (the whole stream in one read, the fast path's case), else random. */
function splits(rnd, len) {
  const out = [0];
  if (rnd() >= 0.4) {
    let p = 0;
    while (p < len) {
      p += 1 + Math.floor(rnd() * (rnd() < 0.5 ? 24 : 200));
      if (p < len) out.push(p);
    }
  }
  out.push(len);
  return out;
}

function observe(r) {
  const wcs = r.qp.recvCq.poll(64).map((w) => [w.wrId, w.status, w.byteLen, w.opcode, w.wcFlags, w.invalidatedRkey && (w.invalidatedRkey ^ r.mr.rkey) >>> 0]);
  return {
    memory: createHash('sha256').update(r.backing).digest('hex'),
    memoryChanged: r.backing.subarray(PAGE, 2 * PAGE).filter((x) => x !== 0).length,
    wcs,
    terms: r.terms,
    fpdus: r.dec.fpdus,
    bytes: r.dec.bytes,
    decState: r.dec.state,
    qpState: r.qp.state,
    rqDepth: r.qp.rqDepth,
    expectSendMsn: r.qp.rx.expectSendMsn,
    expectReadMsn: r.qp.rx.nextReadMsn,
    irq: r.qp.tx.irq.toArray().map((e) => [e.sinkStag, e.sinkTo, e.size, e.off]),
    orq: r.qp.tx.orq.length,
    sendWcs: r.qp.sendCq === r.qp.recvCq ? [] : r.qp.sendCq.poll(64).map((w) => [w.wrId, w.status, w.opcode]),
  };
}

async function runCase(seed, crc) {
  const out = [];
  let used = 0;
  let stream = null;
  for (const fast of [true, false]) {
    const rnd = prng(seed);
    const r = await receiver(fast, crc);
    try {
      postRecvs(r, rnd);
      r.gone.dereg();
      const reads = outstandingReads(r, rnd);
      const s = randomStream(rnd, r.mr, crc, reads);
      // Both QPs receive the same bytes (see receiver: the same STags).
      if (fast) stream = s;
      else assert.ok(s.equals(stream), `seed ${seed}: the two streams differ`);
      const cuts = splits(rnd, s.length);
      // Each piece arrives as the LLP hands it over: a view into a bigger shared buffer.
      const shared = Buffer.alloc(s.length + 64, 0xcc);
      for (let i = 1; i < cuts.length; i++) {
        const at = 17;
        s.copy(shared, at, cuts[i - 1], cuts[i]);
        r.reader.bytes(shared, at, at + cuts[i] - cuts[i - 1]);
      }
      out.push(observe(r));
      if (fast) used = r.fastBytes();
    } finally {
      await r.close();
    }
  }
  assert.deepEqual(out[0], out[1], `seed ${seed} crc ${crc}`);
  return { used, terms: out[0].terms.length, wcs: out[0].wcs.length };
}

test('receive fast path: random and mutated streams, random splits — the same outcome as the decoder alone', { timeout: 240_000 }, async () => {
  let fastCases = 0;
  let termCases = 0;
  let wcs = 0;
  for (let seed = 1; seed <= 500; seed++) {
    const r = await runCase(seed * 7919, seed % 4 === 0);
    if (r.used > 0) fastCases++;
    if (r.terms > 0) termCases++;
    wcs += r.wcs;
  }
  console.log(`# ${fastCases} cases used the fast path, ${termCases} sent a TERMINATE, ${wcs} receive completions`);
  // The comparison means something only if both outcomes occurred often.
  assert.ok(fastCases >= 100, `fast path used in ${fastCases} cases`);
  assert.ok(termCases >= 100, `TERMINATE in ${termCases} cases`);
  assert.ok(wcs >= 200, `${wcs} receive completions`);
});

// Each case: a stream the fast path must leave to the decoder, with what the decoder then does.
async function oneCase(build, { posts = [[64]], crc = false, reads = 0 } = {}) {
  const res = [];
  for (const fast of [true, false]) {
    const r = await receiver(fast, crc);
    try {
      for (const [i, shape] of posts.entries()) {
        let at = 1024 + 256 * i;
        r.qp.postRecv({ wrId: i, sgList: shape.map((len) => ({ addr: r.mr.addr + ((at += len) - len), length: len, lkey: r.mr.lkey })) });
      }
      // `reads` RDMA READs of 64 bytes outstanding (the ORQ): 1.0 → 0, 1.1 → 1 … (rnd() of a constant).
      if (reads > 0) outstandingReads(r, () => (reads + 0.5) / 3);
      const s = build(r.mr);
      r.reader.bytes(s, 0, s.length);
      res.push({ o: observe(r), used: r.fastBytes() });
    } finally {
      await r.close();
    }
  }
  assert.deepEqual(res[0].o, res[1].o);
  return { ...res[0].o, used: res[0].used };
}

const w = (mr, off, len, more = {}) => encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: mr.rkey, to: mr.addr + off, ...more }, Buffer.alloc(len, 0x5a), { crc: more.crc ?? false });
const send = (len, more = {}) => encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1, ...more }, Buffer.alloc(len, 0x33), { crc: more.crc ?? false });

test('receive fast path: the rsocket pair (Write + Send) in one read is taken whole', async () => {
  const o = await oneCase((mr) => Buffer.concat([w(mr, 0, 64), send(4)]));
  assert.equal(o.used, 112);
  assert.deepEqual(o.wcs, [[0, 0, 4, 128, 0, 0]]);
  assert.equal(o.terms.length, 0);
  assert.equal(o.fpdus, 3); // the RTR, then the two
});

test('receive fast path: with CRC on, a good pair is taken; a bad CRC is the decoder\'s TERMINATE', async () => {
  const good = await oneCase((mr) => Buffer.concat([w(mr, 0, 64, { crc: true }), send(4, { crc: true })]), { crc: true });
  assert.equal(good.used, 112);
  assert.equal(good.wcs.length, 1);
  const bad = await oneCase(
    (mr) => {
      const b = Buffer.concat([w(mr, 0, 64, { crc: true }), send(4, { crc: true })]);
      b[b.length - 1] ^= 1;
      return b;
    },
    { crc: true },
  );
  assert.equal(bad.used, 84); // the Write; the Send with the bad CRC is the decoder's
  assert.deepEqual(bad.terms.map((t) => [t.layer, t.etype, t.ecode]), [[2, 0, 2]]);
  assert.deepEqual(bad.wcs.map((x) => x[1] !== 0), [true]);
});

test('receive fast path: each fallback case ends as the decoder alone ends it', async () => {
  // Partial FPDU: the Write whole, the Send's last byte missing.
  let o = await oneCase((mr) => Buffer.concat([w(mr, 0, 8), send(4)]).subarray(0, 28 + 28 - 1));
  assert.equal(o.used, 28);
  assert.equal(o.decState, 'trailer');
  // Unknown STag, out of bounds: DDP tagged 0x00 / 0x01.
  o = await oneCase((mr) => encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: mr.rkey ^ 0x100, to: mr.addr }, Buffer.alloc(8)));
  assert.equal(o.used, 0);
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 1, 0]]);
  o = await oneCase((mr) => w(mr, PAGE - 4, 8));
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 1, 1]]);
  // ULPDU_Length too short for the header: DDP catastrophic.
  o = await oneCase((mr) => {
    const b = w(mr, 0, 8);
    b.writeUInt16BE(4, 0);
    return b;
  });
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype]), [[1, 0]]);
  // Wrong MSN, wrong MO, wrong queue, no receive posted, receive too small.
  o = await oneCase(() => send(4, { msn: 2 }));
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 2, 3]]);
  o = await oneCase(() => send(4, { mo: 4 }));
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 2, 4]]);
  o = await oneCase(() => send(4, { qn: 1 }));
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 2, 1]]);
  o = await oneCase(() => send(4), { posts: [] });
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 2, 2]]);
  o = await oneCase(() => send(100), { posts: [[16, 0, 48]] });
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 2, 2]]);
  assert.deepEqual(o.wcs.map((x) => [x[0], x[1]]), [[0, 1]]); // LOC_LEN_ERR
  // A multi-segment Send, a Send with Invalidate: left to the decoder, completed by it.
  o = await oneCase(() => Buffer.concat([send(8, { last: false }), send(8, { mo: 8 })]));
  assert.equal(o.used, 0);
  assert.deepEqual(o.wcs.map((x) => [x[1], x[2]]), [[0, 16]]);
  o = await oneCase((mr) => encodeFpdu({ opcode: RdmapOpcode.SEND_INV, msn: 1, invStag: mr.rkey }, Buffer.alloc(4)));
  assert.equal(o.used, 0);
  // A Send scattered over SGEs (one of them empty) by the fast path.
  o = await oneCase(() => send(60), { posts: [[16, 0, 48]] });
  assert.equal(o.used, 84);
  assert.deepEqual(o.wcs.map((x) => [x[1], x[2]]), [[0, 60]]);
});

test('receive fast path: rping\'s Read Request and its Read Response are taken whole', async () => {
  // One Read outstanding on the receiving QP: 1 + floor(0.5 * 120) = 61 bytes at 3072.
  const req = (mr) => encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: 1, sinkStag: 7, sinkTo: 0x1000, readSize: 64, srcStag: mr.rkey, srcTo: mr.addr }, undefined, { crc: false });
  const resp = (mr, more = {}) => encodeFpdu({ opcode: RdmapOpcode.READ_RESP, last: true, stag: mr.lkey, to: mr.addr + 3072, ...more }, Buffer.alloc(61, 0x61), { crc: false });
  let o = await oneCase((mr) => Buffer.concat([req(mr), resp(mr)]), { reads: 1 });
  assert.equal(o.used, req({ rkey: 0, addr: 0 }).length + 84); // the response: 16 + 61 + 3 pad + 4
  assert.equal(o.terms.length, 0);
  assert.equal(o.expectReadMsn, 2);
  assert.equal(o.orq, 0);
  assert.equal(o.memoryChanged, 61);
  // A response that does not match the Read (another STag) is the decoder's TERMINATE.
  o = await oneCase((mr) => resp(mr, { stag: (mr.lkey ^ 0x100) >>> 0 }), { reads: 1 });
  assert.equal(o.used, 0);
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 1, 0]]);
  // A Read Request with the wrong MSN, or beyond the source MR: left to the decoder.
  o = await oneCase((mr) => encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: 2, sinkStag: 7, sinkTo: 0, readSize: 64, srcStag: mr.rkey, srcTo: mr.addr }));
  assert.equal(o.used, 0);
  assert.deepEqual(o.terms.map((t) => [t.layer, t.etype, t.ecode]), [[1, 2, 3]]);
  o = await oneCase((mr) => encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: 1, sinkStag: 7, sinkTo: 0, readSize: PAGE, srcStag: mr.rkey, srcTo: mr.addr + 8 }));
  assert.equal(o.used, 0);
  assert.equal(o.terms.length, 1);
});

test('receive fast path: after an FPDU the decoder took, the rest of the same read is taken whole', async () => {
  // A two-segment Send (the decoder's), then an rsocket pair (Write + Send) in the same read: the
  // decoder hands back at the boundary and the pair goes the fast way, as an rsocket message does
  // behind the end of a large Write.
  const o = await oneCase((mr) => Buffer.concat([send(8, { last: false }), send(8, { mo: 8 }), w(mr, 0, 64), send(4, { msn: 2 })]), { posts: [[64], [64]] });
  assert.equal(o.used, 112);
  assert.deepEqual(o.wcs.map((x) => [x[1], x[2]]), [[0, 16], [0, 4]]);
  assert.equal(o.terms.length, 0);
  assert.equal(o.fpdus, 5); // the RTR, then the four
  assert.equal(o.decState, 'hdr');
});

test('wholeFpdu: the decoder\'s header for every complete valid FPDU, 0 for anything else', () => {
  const rnd = prng(42);
  let whole = 0;
  for (let i = 0; i < 3000; i++) {
    const crc = rnd() < 0.5;
    const op = [RdmapOpcode.WRITE, RdmapOpcode.SEND, RdmapOpcode.SEND_SE, RdmapOpcode.READ_REQ, RdmapOpcode.READ_RESP, RdmapOpcode.SEND_INV][Math.floor(rnd() * 6)];
    const len = op === RdmapOpcode.READ_REQ ? 0 : Math.floor(rnd() * 70);
    const b = Buffer.from(encodeFpdu({ opcode: op, stag: 9, to: 100, msn: 3, readSize: 5, last: rnd() < 0.8 }, Buffer.alloc(len, 1), { crc }));
    if (rnd() < 0.5) b[Math.floor(rnd() * b.length)] = Math.floor(rnd() * 256);
    const end = rnd() < 0.2 ? Math.floor(rnd() * b.length) : b.length;
    const h = createFpduHeader();
    const n = wholeFpdu(h, b, 0, end, crc);
    // The decoder's verdict on its first FPDU in the same bytes.
    const seen = [];
    const dec = new FpduDecoder({ onHeader: (x) => seen.push({ ...x, raw: undefined }), onPayload() {}, onEnd: (_x, ok) => seen.push(ok) }, { crc });
    try {
      dec.push(b, 0, end);
    } catch {
      // a malformed header: seen stops where the decoder did
    }
    const decOk = seen.length >= 2 && seen[1] === true;
    if (n > 0) {
      whole++;
      assert.ok(decOk, `case ${i}: wholeFpdu took what the decoder rejects`);
      const x = seen[0];
      assert.equal(n, x.ulpduLen + 2 + (-(x.ulpduLen + 2) & 3) + 4);
      assert.deepEqual({ ...h, raw: undefined }, x);
    } else {
      assert.ok(!decOk, `case ${i}: wholeFpdu refused a whole valid FPDU`);
    }
  }
  assert.ok(whole > 1000);
});
