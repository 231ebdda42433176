// The whole iWARP receive path of the soft device: a raw TCP peer (played here) speaks MPA to our
// passive side, then sends a stream of FPDUs aimed at the accepted QP's memory region and posted
// receives — Sends (in segments), RDMA Writes, Read Requests — cut into random TCP writes, whole or
// mutated, CRC on or off. Some cases mutate the MPA Request instead.
//
// Invariants: nothing throws in the process; bytes outside the registered region never change; a
// valid stream is delivered exactly (Send completions in order with their data, Writes in memory,
// every Read answered); after the peer's FIN or RST the QP reports DISCONNECTED within a bound and
// every posted receive completes exactly once (some cases put the QP's receives on a shared
// receive queue: every one the QP took, the rest stay there); whatever our side sends back decodes as well-formed
// FPDUs (Read Responses, then at most one TERMINATE with an RFC code, last); a mutated MPA Request
// gets no answer or a reject reply, and the connection ends.
import assert from 'node:assert/strict';
import net from 'node:net';
import { createId, PortSpace, Access, CmEventType, WcStatus } from '../../../dist/index.js';
import { TerminateError } from '../../../dist/errors.js';
import {
  FpduDecoder,
  RdmapOpcode,
  decodeMpaStartFrame,
  decodeTerminateMessage,
  encodeFpdu,
  encodeMpaStartFrame,
  isValidTermCode,
} from '../../../dist/wire/index.js';
import { mutate, splits, hexHead } from '../lib/mutate.js';
import { until, sleep } from '../../lib/wait.js';

const PAGE = 4096;
const RECV_LEN = 256;
const WRITE_AREA = 2048; // Writes land in [2048, 4096) of the region, receives in [0, RECV_LEN * recvs)
const WAIT_MS = 3000;

const turn = () => new Promise((r) => setImmediate(r));


/** A raw TCP peer: connects, collects what it receives, notices the close. */
async function rawPeer(port) {
  const sock = net.connect({ host: '127.0.0.1', port });
  sock.on('error', () => {});
  await new Promise((r, j) => sock.once('connect', r).once('error', j));
  sock.setNoDelay(true);
  const p = { sock, chunks: [], closed: false, all: () => Buffer.concat(p.chunks) };
  sock.on('data', (d) => p.chunks.push(d));
  sock.on('close', () => (p.closed = true));
  return p;
}

async function sendChunks(rng, sock, bytes) {
  for (const [s, e] of splits(rng, bytes.length)) {
    if (sock.destroyed) return;
    sock.write(bytes.subarray(s, e));
    if (rng.chance(0.25)) await turn(); // let some chunks arrive as reads of their own
  }
}

/**
 * Our passive side for one connection: a QP with `recvs` receives posted — to its own receive
 * queue, or (`onSrq`) to a shared receive queue it takes them from — and a guarded region.
 */
function serve(listen, recvs, onSrq) {
  const backing = Buffer.alloc(3 * PAGE, 0xee);
  const region = backing.subarray(PAGE, 2 * PAGE);
  region.fill(0);
  const s = { backing, region, child: null, mr: null, recvs, srq: null };
  s.ready = (async () => {
    const child = await listen.getRequest();
    s.child = child;
    if (onSrq) s.srq = child.createSrq(null, { attr: { maxWr: 8 } });
    const qp = child.createQp(null, { cap: { maxSendWr: 8, maxRecvWr: 8 } });
    s.mr = child.pd.regMr(region, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
    for (let i = 0; i < recvs; i++) (s.srq ?? qp).postRecv({ wrId: i, sgList: [{ addr: s.mr.addr + i * RECV_LEN, length: RECV_LEN, lkey: s.mr.lkey }] });
    await child.accept({ responderResources: 4, initiatorDepth: 4 });
  })();
  return s;
}

const guardsIntact = (s) => {
  for (let i = 0; i < PAGE; i++) if (s.backing[i] !== 0xee || s.backing[2 * PAGE + i] !== 0xee) return false;
  return true;
};

/** A stream of valid messages for the accepted QP, and what it must do there. */
function genStream(rng, s, crc) {
  const parts = [];
  const sends = [];
  const reads = [];
  const model = Buffer.from(s.region);
  let sendMsn = 1;
  let readMsn = 1;
  const n = 1 + rng.int(6);
  for (let m = 0; m < n; m++) {
    const r = rng.float();
    if (r < 0.45 && sends.length < s.recvs) {
      const len = rng.size(RECV_LEN);
      const data = rng.bytes(len);
      const seg = rng.chance(0.5) ? Math.max(1, len) : 1 + rng.int(Math.max(1, len));
      const opcode = rng.chance(0.8) ? RdmapOpcode.SEND : RdmapOpcode.SEND_SE;
      let off = 0;
      do {
        const k = Math.min(seg, len - off);
        parts.push(encodeFpdu({ opcode, msn: sendMsn, mo: off, last: off + k === len }, data.subarray(off, off + k), { crc }));
        off += k;
      } while (off < len);
      sendMsn++;
      data.copy(model, sends.length * RECV_LEN);
      sends.push(data);
    } else if (r < 0.85 || reads.length >= 2) {
      const len = rng.size(1024);
      const at = WRITE_AREA + rng.int(PAGE - WRITE_AREA - len + 1);
      const data = rng.bytes(len);
      const seg = rng.chance(0.5) ? Math.max(1, len) : 1 + rng.int(Math.max(1, len));
      let off = 0;
      do {
        const k = Math.min(seg, len - off);
        parts.push(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: s.mr.rkey, to: s.mr.addr + at + off, last: off + k === len }, data.subarray(off, off + k), { crc }));
        off += k;
      } while (off < len);
      data.copy(model, at);
    } else {
      const size = rng.size(512);
      const read = { sinkStag: rng.u32(), sinkTo: rng.int(2 ** 40), readSize: size, srcStag: s.mr.rkey, srcTo: s.mr.addr + rng.int(PAGE - size + 1), msn: readMsn++ };
      parts.push(encodeFpdu({ opcode: RdmapOpcode.READ_REQ, ...read }, undefined, { crc }));
      reads.push(read);
    }
  }
  const sizes = parts.map((p) => p.length);
  return { bytes: Buffer.concat(parts), sizes, sends, reads, model };
}

/** Decode what our side sent back after its MPA Reply: Read Responses, then at most one TERMINATE. */
function decodeReturned(bytes, crc, complete) {
  const out = { responses: [], terminate: null, partial: false };
  let cur = null;
  let termPayload = [];
  const dec = new FpduDecoder(
    {
      onHeader(h) {
        assert.equal(out.terminate, null, 'nothing follows a TERMINATE');
        assert.ok(h.opcode === RdmapOpcode.READ_RESP || h.opcode === RdmapOpcode.TERMINATE, `our side sent opcode ${h.opcode} unasked`);
        cur = { opcode: h.opcode, stag: h.stag, to: h.to, len: h.payloadLen, last: h.last, raw: Buffer.from(h.raw) };
        termPayload = [];
      },
      onPayload(src, a, b) {
        if (cur.opcode === RdmapOpcode.TERMINATE) termPayload.push(Buffer.from(src.subarray(a, b)));
      },
      onEnd(h, crcOk) {
        assert.ok(crcOk, 'our FPDUs carry a good CRC');
        if (cur.opcode === RdmapOpcode.TERMINATE) {
          const info = decodeTerminateMessage(cur.raw, Buffer.concat(termPayload));
          assert.ok(isValidTermCode(info.layer, info.etype, info.ecode), `TERMINATE ${info.layer}/${info.etype}/${info.ecode} is not an RFC code`);
          assert.equal(info.siwLayout, false, 'we send the RFC 5040 layout');
          out.terminate = info;
        } else out.responses.push(cur);
      },
    },
    { crc },
  );
  try {
    dec.push(bytes);
  } catch (e) {
    if (e instanceof TerminateError) throw new Error(`our side sent a malformed FPDU: ${e.message}`);
    throw e;
  }
  if (dec.state !== 'hdr') {
    assert.ok(!complete, `our side's stream ends inside an FPDU (${dec.state})`);
    out.partial = true;
  }
  return out;
}

async function fpduCase(rng, t, ctx) {
  const crc = rng.chance(0.4);
  const recvs = 1 + rng.int(6);
  const onSrq = rng.chance(0.3);
  const s = serve(ctx.listen, recvs, onSrq);
  const p = await rawPeer(ctx.port);
  try {
    p.sock.write(encodeMpaStartFrame({ type: 'request', markers: false, crc, reject: false, enhanced: true, rev: 2, ird: 4, ord: 4, p2p: true, rtrSend: false, rtrWrite: true, rtrRead: false, privateData: new Uint8Array(0) }));
    await until(() => p.all().length >= 24 || p.closed, WAIT_MS, 'the MPA Reply', 1);
    const rep = decodeMpaStartFrame(p.all(), 'reply');
    assert.ok('frame' in rep && !rep.frame.reject, 'accepted');
    assert.equal(rep.frame.crc, crc);
    p.sock.write(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1, to: 0 }, undefined, { crc }));
    await Promise.race([s.ready, sleep(WAIT_MS).then(() => Promise.reject(new Error('accept did not complete')))]);
    const child = s.child;

    const g = genStream(rng, s, crc);
    const wcs = []; // receive completions, all of them, in order
    const mutated = rng.chance(0.7);
    let bytes = g.bytes;
    if (mutated) {
      const fields = [];
      let o = 0;
      for (const size of g.sizes.slice(0, 4)) {
        fields.push({ off: o, size: 2 }, { off: o + 2, size: 1 }, { off: o + 3, size: 1 }, { off: o + 4, size: 4 }, { off: o + 8, size: 8 }, { off: o + 12, size: 4 }, { off: o + 16, size: 4 }, { off: o + 32, size: 4 });
        o += size;
      }
      const m = mutate(rng, g.bytes, { fields });
      bytes = m.bytes;
      t.note(`mutated: ${m.ops.join(' ')}`);
    }
    t.note(`crc ${crc}, ${recvs} receives${onSrq ? ' on an SRQ' : ''}, ${g.sends.length} sends, ${g.reads.length} reads; ${hexHead(bytes)}`);
    await sendChunks(rng, p.sock, bytes);

    const replyLen = rep.length;
    if (!mutated) {
      // Everything arrives: Sends complete in order with their data, every Read is answered.
      await until(() => {
        wcs.push(...child.recvCq.poll(8));
        return wcs.length >= g.sends.length;
      }, WAIT_MS, `${g.sends.length} receive completions`, 1);
      wcs.forEach((wc, i) => {
        assert.equal(wc.status, WcStatus.SUCCESS, `receive ${i}`);
        assert.equal(wc.wrId, i);
        assert.equal(wc.byteLen, g.sends[i].length);
      });
      const wantBytes = g.reads.reduce((a, r) => a + r.readSize, 0);
      await until(() => {
        const d = decodeReturned(p.all().subarray(replyLen), crc, false);
        return !d.partial && d.responses.reduce((a, r) => a + r.len, 0) >= wantBytes && d.responses.length >= g.reads.length;
      }, WAIT_MS, 'the Read Responses', 1);
      const d = decodeReturned(p.all().subarray(replyLen), crc, true);
      assert.equal(d.terminate, null, 'no TERMINATE for a valid stream');
      let k = 0;
      for (const r of g.reads) {
        let got = 0;
        do {
          const resp = d.responses[k++];
          assert.ok(resp, 'a Read Response for every Read Request');
          assert.equal(resp.stag, r.sinkStag);
          assert.equal(resp.to, r.sinkTo + got);
          got += resp.len;
          if (resp.last) break;
        } while (true);
        assert.equal(got, r.readSize, 'the whole size read');
      }
      assert.equal(k, d.responses.length, 'no Read Response unasked');
      for (let i = 0; i < g.sends.length; i++) assert.ok(s.region.subarray(i * RECV_LEN, i * RECV_LEN + g.sends[i].length).equals(g.sends[i]), `Send ${i} data`);
      await until(() => s.region.subarray(WRITE_AREA).equals(g.model.subarray(WRITE_AREA)), WAIT_MS, 'the RDMA Writes in memory', 1);
      t.count('valid');
    }

    const rst = mutated && rng.chance(0.3);
    if (rst) p.sock.destroy();
    else p.sock.end();
    // The connection ends: DISCONNECTED, then every posted receive has completed exactly once —
    // on an SRQ, every one the QP took (the oldest), the others still posted there.
    let ev;
    try {
      ev = await child.channel.getEvent(AbortSignal.timeout(WAIT_MS));
    } catch (e) {
      throw new Error(`no DISCONNECTED within ${WAIT_MS} ms after the peer's ${rst ? 'RST' : 'FIN'} (${e.message})`);
    }
    assert.equal(ev.event, CmEventType.DISCONNECTED);
    ev.ack();
    const got = () => `got ${wcs.map((w) => `wr ${w.wrId} status ${w.status}`).join(', ') || 'none'}`;
    const left = () => s.srq?.depth ?? 0;
    await until(() => {
      wcs.push(...child.recvCq.poll(16));
      return wcs.length + left() >= recvs;
    }, WAIT_MS, () => `${recvs} receive completions after DISCONNECTED (${got()}, ${left()} on the SRQ)`, 1);
    await turn();
    wcs.push(...child.recvCq.poll(16));
    assert.equal(wcs.length + left(), recvs, `each posted receive completes exactly once, or stays on the SRQ (${got()}, ${left()} on the SRQ)`);
    assert.deepEqual(wcs.map((w) => w.wrId), [...Array(wcs.length).keys()], 'in posting order');
    if (onSrq) t.count('srq');
    for (const w of wcs) if (w.status === WcStatus.SUCCESS) assert.ok(w.byteLen <= RECV_LEN);
    assert.ok(guardsIntact(s), 'bytes outside the region unchanged');
    if (!rst) {
      await until(() => p.closed, WAIT_MS, 'our side to close the connection', 1);
      const d = decodeReturned(p.all().subarray(replyLen), crc, true);
      if (mutated) t.count(d.terminate ? 'terminate' : 'closed');
    } else t.count('rst');
  } finally {
    p.sock.destroy();
    await s.ready.catch(() => {});
    if (s.child) {
      s.child.destroyQp();
      s.child.destroySrq();
      await s.child.destroy();
    }
  }
}

/** A mutated MPA Request to a listener of its own: no answer or a reject, and the connection ends. */
async function mpaCase(rng, t) {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(4);
  const p = await rawPeer(listen.srcPort);
  try {
    const req = encodeMpaStartFrame({ type: 'request', markers: false, crc: rng.chance(0.3), reject: false, enhanced: true, rev: 2, ird: rng.int(200), ord: rng.int(200), p2p: rng.chance(0.5), rtrSend: false, rtrWrite: true, rtrRead: rng.chance(0.5), privateData: rng.bytes(rng.size(64)) });
    const { bytes, ops } = mutate(rng, req, { fields: [{ off: 16, size: 1 }, { off: 17, size: 1 }, { off: 18, size: 2 }, { off: 20, size: 2 }, { off: 22, size: 2 }] });
    t.note(`MPA Request ${ops.join(' ')}: ${hexHead(bytes)}`);
    await sendChunks(rng, p.sock, bytes);
    await sleep(rng.int(5));
    p.sock.end();
    await listen.destroy(); // a request still queued is rejected
    await until(() => p.closed, WAIT_MS, 'the connection to end after a mutated MPA Request', 1);
    const got = p.all();
    if (got.length > 0) {
      const r = decodeMpaStartFrame(got, 'reply');
      assert.ok('frame' in r, `our answer is a whole MPA Reply: ${hexHead(got)}`);
      assert.equal(r.frame.reject, true, 'an answer to a request never accepted is a reject');
      assert.equal(r.length, got.length, 'nothing follows the reject');
      t.count('mpaRejected');
    } else t.count('mpaDropped');
  } finally {
    p.sock.destroy();
  }
}

export default {
  name: 'iwarp-rx',
  about: 'the soft device receive path over a real socket: MPA, then valid or mutated FPDU streams in random TCP writes',
  budgetMs: 4000,
  caseTimeoutMs: 15000,
  async setup() {
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(16);
    return { listen, port: listen.srcPort };
  },
  async teardown(ctx) {
    await ctx.listen.destroy();
  },
  run(rng, t, ctx) {
    return rng.chance(0.15) ? mpaCase(rng, t) : fpduCase(rng, t, ctx);
  },
  check(counts, cases) {
    if (cases < 200) return;
    for (const k of ['valid', 'terminate', 'mpaDropped', 'srq']) assert.ok(counts[k] > 0, `no ${k} outcome in ${cases} cases`);
  },
};
