// Real kernel bytes: Linux siw talking to itself (refvm captures, copied to test/fixtures/captures).
// D-siw-rping-2vm.pcap: `rping -C 10` over MPA rev 2 without CRC; B-mpa-siw.pcap: MPA handshakes
// rev 1, and rev 2 with CRC (handshake only, no FPDUs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import {
  FpduDecoder,
  RdmapOpcode,
  decodeMpaStartFrame,
  encodeMpaStartFrame,
  validateMpaReply,
  validateMpaRequest,
} from '../../../dist/wire/index.js';
import { RecordingSink, refDecode } from './fpdu-cases.js';
import { tcpStreams } from '../../lib/pcap.js';

const capture = (name) => fileURLToPath(new URL(`../../fixtures/captures/${name}`, import.meta.url));
const SERVER_PORT = 7174;
const NAMES = ['WRITE', 'READ_REQ', 'READ_RESP', 'SEND', 'SEND_INV', 'SEND_SE', 'SEND_SE_INV', 'TERMINATE'];

/** Decode one direction: start frame, then every FPDU fed in the kernel's own TCP segments. */
function decodeDirection(stream, expect) {
  const r = decodeMpaStartFrame(stream.bytes, expect);
  assert.ok(!('needMore' in r));
  // re-encoding the decoded frame reproduces the kernel's bytes
  assert.deepEqual(encodeMpaStartFrame(r.frame), stream.bytes.subarray(0, r.length));
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc: r.frame.crc });
  let pos = 0;
  for (const seg of stream.segments) {
    const skip = Math.max(0, Math.min(seg.length, r.length - pos));
    dec.push(seg, skip);
    pos += seg.length;
  }
  assert.equal(dec.state, 'hdr', `${stream.key}: ends on an FPDU boundary`);
  return { frame: r.frame, length: r.length, fpdus: sink.records };
}

test('D-siw-rping-2vm: MPA rev 2 handshake, then Send / Read / Write FPDUs in rping order', () => {
  const streams = tcpStreams(capture('D-siw-rping-2vm.pcap'));
  assert.equal(streams.length, 2);
  const [cli, srv] = streams;
  assert.equal(cli.dport, SERVER_PORT, 'the initiator speaks first');
  assert.equal(srv.sport, SERVER_PORT);

  const c = decodeDirection(cli, 'request');
  const s = decodeDirection(srv, 'reply');
  // siw defaults: rev 2, Enhanced, no CRC, no markers, IRD/ORD 1 here, echoed in the reply
  assert.deepEqual(c.frame, {
    type: 'request', markers: false, crc: false, reject: false, enhanced: true, rev: 2,
    ird: 1, ord: 1, p2p: false, rtrSend: false, rtrWrite: false, rtrRead: false, privateData: new Uint8Array(0),
  });
  assert.deepEqual({ ...s.frame, type: 'request' }, c.frame);
  assert.equal(validateMpaRequest(c.frame).action, 'accept');
  assert.deepEqual(validateMpaReply(s.frame, c.frame), { action: 'accept', crc: false, ird: 1, ord: 1, rtr: null });

  // rping -C 10: client Send(source buffer) -> server Read -> Read Response -> server Send(go) ->
  // client Send(sink buffer) -> server Write -> server Send(go) -> ...
  const cliOps = ['SEND'];
  const srvOps = [];
  for (let i = 0; i < 10; i++) {
    cliOps.push('READ_RESP', 'SEND');
    if (i < 9) cliOps.push('SEND');
    srvOps.push('READ_REQ', 'SEND', 'WRITE', 'SEND');
  }
  assert.deepEqual(c.fpdus.map((f) => NAMES[f.opcode]), cliOps);
  assert.deepEqual(s.fpdus.map((f) => NAMES[f.opcode]), srvOps);

  for (const dir of [c, s]) {
    // every FPDU is a single-segment message here; MSN counts from 1 per queue; trailers are zero
    const msn = [1, 1, 1];
    for (const f of dir.fpdus) {
      assert.equal(f.last, true);
      assert.equal(f.crcOk, true);
      if (!f.tagged) {
        assert.equal(f.msn, msn[f.qn]++, `MSN on QN ${f.qn}`);
        assert.equal(f.mo, 0);
      }
    }
  }
  for (const dir of [cli, srv]) {
    const start = dir === cli ? c.length : s.length;
    const ref = refDecode(dir.bytes.subarray(start), { crc: false });
    assert.deepEqual(ref.map((r) => r.payload), (dir === cli ? c : s).fpdus.map((r) => r.payload));
    // siw sends a zero CRC field when CRC is off (RFC 5044 §4)
    let o = start;
    for (const r of ref) {
      o += 2 + r.ulpduLen + ((4 - ((2 + r.ulpduLen) % 4)) % 4);
      assert.equal(dir.bytes.readUInt32BE(o), 0);
      o += 4;
    }
  }

  // cross-direction semantics: rping's Sends advertise (addr u64, rkey u32, len u32) and the
  // server's Read Request / Write use exactly those; each Read Response answers the Read Request.
  const cliSends = c.fpdus.filter((f) => f.opcode === RdmapOpcode.SEND);
  const adverts = cliSends.map((f) => ({ addr: Number(f.payload.readBigUInt64BE(0)), rkey: f.payload.readUInt32BE(8), len: f.payload.readUInt32BE(12) }));
  const rreqs = s.fpdus.filter((f) => f.opcode === RdmapOpcode.READ_REQ);
  const writes = s.fpdus.filter((f) => f.opcode === RdmapOpcode.WRITE);
  const rresps = c.fpdus.filter((f) => f.opcode === RdmapOpcode.READ_RESP);
  assert.equal(rreqs.length, 10);
  for (let i = 0; i < 10; i++) {
    const rd = adverts[2 * i];
    const wr = adverts[2 * i + 1];
    assert.deepEqual([rreqs[i].srcTo, rreqs[i].srcStag, rreqs[i].readSize], [rd.addr, rd.rkey, rd.len]);
    assert.deepEqual([writes[i].to, writes[i].stag, writes[i].payloadLen], [wr.addr, wr.rkey, wr.len]);
    assert.deepEqual([rresps[i].stag, rresps[i].to, rresps[i].payloadLen], [rreqs[i].sinkStag, rreqs[i].sinkTo, rreqs[i].readSize]);
    assert.match(rresps[i].payload.toString('latin1'), /^rdma-ping-\d+: [A-Za-z]/);
    assert.deepEqual(writes[i].payload, rresps[i].payload, 'the server writes back what it read');
  }
});

test('B-mpa-siw: rev 1 handshake and rev 2 handshake with CRC, replies echo the requests', () => {
  const streams = tcpStreams(capture('B-mpa-siw.pcap'));
  assert.equal(streams.length, 4);
  const frames = streams.map((st) => {
    const r = decodeMpaStartFrame(st.bytes, st.dport === SERVER_PORT ? 'request' : 'reply');
    assert.equal(r.length, st.bytes.length, 'nothing follows the start frames');
    assert.deepEqual(encodeMpaStartFrame(r.frame), st.bytes);
    return r.frame;
  });
  const [req1, rep1, req2, rep2] = frames;
  assert.deepEqual([req1.rev, req1.crc, req1.enhanced, req1.privateData.length], [1, false, false, 0]);
  assert.deepEqual({ ...rep1, type: 'request' }, req1);
  assert.deepEqual([req2.rev, req2.crc, req2.enhanced, req2.ird, req2.ord], [2, true, true, 8, 8]);
  assert.deepEqual({ ...rep2, type: 'request' }, req2);
  assert.equal(validateMpaReply(rep2, req2).crc, true, 'CRC on: the reply kept C');
  assert.deepEqual(validateMpaRequest(req2), { action: 'accept', crc: true, enhanced: true, rtr: null });
});
