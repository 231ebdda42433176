// Real bytes: our `rstream -s` (host) against rdma-core 44's `rstream` server on the Linux kernel's
// siw (reference VM), `-S 64 -C 10 -I 5`, captured on the bridge (fixtures/rstream-kernel-server.pcap,
// the interop suite's scenario A0). Both directions are decoded with the wire codecs and the
// rsocket codecs: the two rs_conn_data blocks, the P2P RTR, the first credit update (the second
// buffer half, RDMA-written into the peer's target SGL slot 1, then SGL 384), every DATA write at
// the next address of the peer's buffer followed by its 4-byte little-endian DATA message, and the
// closing CTRL DISCONNECT — what the kernel's librdmacm sent and what ours sent look alike.
import test from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { FpduDecoder, RdmapOpcode, decodeMpaStartFrame } from '../../../dist/wire/index.js';
import * as P from '../../../dist/rsocket/protocol.js';
import { tcpStreams } from '../../lib/pcap.js';
import { RecordingSink } from '../wire/fpdu-cases.js';

const PCAP = fileURLToPath(new URL('./fixtures/rstream-kernel-server.pcap', import.meta.url));
const HALF = 524288; // rstream's SO_RCVBUF 512 KiB -> 1 MiB receive buffer, advertised by halves
const MSGS = 1 + 10 * 5; // the 16-byte sync, then 5 iterations of 10 messages
const BYTES = 16 + 10 * 5 * 64;

function decode(stream, kind) {
  const r = decodeMpaStartFrame(stream.bytes, kind);
  assert.ok('frame' in r, `${kind}: MPA start frame`);
  const sink = new RecordingSink();
  const dec = new FpduDecoder(sink, { crc: r.frame.crc });
  // fed in the kernel's own TCP segments after the start frame
  let pos = 0;
  for (const seg of stream.segments) {
    const from = Math.max(0, r.length - pos);
    if (from < seg.length) dec.push(seg, from, seg.length);
    pos += seg.length;
  }
  return { frame: r.frame, cd: P.decodeConnData(r.frame.privateData), fpdus: sink.records };
}

/** Check one direction's rsocket traffic; `own` is the sender's conn data, `peer` the receiver's. */
function checkDirection(fpdus, own, peer, { initiator }) {
  let i = 0;
  if (initiator) {
    // RFC 6581 RTR of our CM: a zero-length RDMA Write to STag 1, as siw
    const rtr = fpdus[i++];
    assert.equal(rtr.opcode, RdmapOpcode.WRITE);
    assert.equal(rtr.payloadLen, 0);
    assert.equal(rtr.stag, 1);
  }
  // The first credit update: the second half of the sender's buffer, written into slot 1 of
  // the receiver's target SGL, in the receiver's (little-endian) order, then SGL rseq_no+rq_size.
  const sgeWrite = fpdus[i++];
  assert.equal(sgeWrite.opcode, RdmapOpcode.WRITE);
  assert.equal(sgeWrite.stag, peer.targetSgl.key);
  assert.equal(sgeWrite.to, peer.targetSgl.addr + P.RS_SGE_SIZE * 1);
  assert.deepEqual(P.decodeSge(sgeWrite.payload, 0, true), { addr: own.dataBuf.addr + HALF, key: own.dataBuf.key, length: HALF });
  const sgl = fpdus[i++];
  assert.equal(sgl.opcode, RdmapOpcode.SEND);
  assert.equal(sgl.payload.length, 4);
  assert.equal(P.decodeMsg(sgl.payload), P.rsMsgSet(P.RsOp.SGL, 384));
  // DATA: an RDMA WRITE at the next address of the receiver's first half, then its message
  let off = 0;
  let msgs = 0;
  while (i < fpdus.length - 1) {
    const w = fpdus[i++];
    const m = fpdus[i++];
    assert.equal(w.opcode, RdmapOpcode.WRITE, `FPDU ${i - 2}`);
    assert.equal(w.stag, peer.dataBuf.key);
    assert.equal(w.to, peer.dataBuf.addr + off);
    assert.equal(m.opcode, RdmapOpcode.SEND);
    assert.equal(m.payload.length, 4);
    const msg = P.decodeMsg(m.payload);
    assert.equal(P.rsMsgOp(msg), P.RsOp.DATA);
    assert.equal(P.rsMsgData(msg), w.payloadLen);
    off += w.payloadLen;
    msgs++;
  }
  assert.equal(msgs, MSGS);
  assert.equal(off, BYTES);
  // the end: rshutdown(SHUT_RDWR) -> CTRL DISCONNECT
  const last = fpdus[fpdus.length - 1];
  assert.equal(last.opcode, RdmapOpcode.SEND);
  assert.equal(P.decodeMsg(last.payload), 0xe0000000);
}

test('rstream against the kernel: MPA negotiation as rsocket asks it (ORD 1, IRD 0; P2P)', () => {
  const [cli, srv] = tcpStreams(PCAP);
  assert.equal(cli.dport, 7500);
  const c = decode(cli, 'request');
  const s = decode(srv, 'reply');
  // rsocket's conn param: responder_resources 0, initiator_depth 1 (its iWARP work-around)
  assert.equal(c.frame.ird, 0);
  assert.equal(c.frame.ord, 1);
  assert.equal(c.frame.p2p, true);
  // the kernel answers with the mirror image and picks the Write RTR
  assert.equal(s.frame.ird, 1);
  assert.equal(s.frame.ord, 0);
  assert.equal(s.frame.rtrWrite, true);
  assert.equal(c.frame.privateData.length, P.RS_CONN_DATA_SIZE);
  assert.equal(s.frame.privateData.length, P.RS_CONN_DATA_SIZE);
});

test('rstream against the kernel: both rs_conn_data blocks decode, and re-encode to the same bytes', () => {
  const [cli, srv] = tcpStreams(PCAP);
  for (const [st, kind] of [
    [cli, 'request'],
    [srv, 'reply'],
  ]) {
    const { frame, cd } = decode(st, kind);
    assert.equal(typeof cd, 'object', kind);
    assert.equal(cd.version, 1);
    assert.equal(cd.flags, P.RS_CONN_FLAG_IOMAP, 'little-endian sender, iomap capable');
    assert.equal(cd.credits, 384, 'rsocket.c default rq_size');
    assert.equal(cd.targetIomapSize, 0);
    assert.equal(cd.targetSgl.length, 2);
    assert.equal(cd.dataBuf.length, HALF);
    assert.ok(cd.targetSgl.addr < 2 ** 47 && cd.dataBuf.addr < 2 ** 47);
    assert.deepEqual(Buffer.from(P.encodeConnData(cd)), Buffer.from(frame.privateData));
  }
  // the kernel's addresses are a process's heap (rsocket.c malloc), ours synthetic MR addresses
  const k = decode(srv, 'reply').cd;
  assert.ok(k.dataBuf.addr > 2 ** 32);
});

test('rstream against the kernel: credits, DATA writes and DISCONNECT, in both directions', () => {
  const [cli, srv] = tcpStreams(PCAP);
  const ours = decode(cli, 'request');
  const kernel = decode(srv, 'reply');
  checkDirection(ours.fpdus, ours.cd, kernel.cd, { initiator: true });
  checkDirection(kernel.fpdus, kernel.cd, ours.cd, { initiator: false });
});
