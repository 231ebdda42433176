// Decoder fixtures: the RC connection of rping between two VMs running Linux rdma_rxe (kernel 6.1)
// — its IB CM exchange on QP1 (REQ, REP, RTU, DREQ; the DREQ/DREP closing an earlier connection)
// and its first RC packets (SEND, ACK, RDMA READ request and response, RDMA WRITE) — copied byte
// for byte from a capture (client 10.77.0.3, server 10.77.0.2; a MAD's zero tail is written as
// zeros up to the ICRC). Each datagram is decoded as a userspace receiver sees it (the IPv4 ID
// recovered from the ICRC), its fields checked against the values rdma_cm and rping put there and
// against each other (QPNs and PSNs from REQ/REP, the READ naming the buffer the SEND advertised),
// and re-encoded to the same bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roce } from '../../../../dist/wire/index.js';

const { IbOpcode, AethSyndrome } = roce;
const CLIENT = Uint8Array.of(10, 77, 0, 3);
const SERVER = Uint8Array.of(10, 77, 0, 2);
const hex = (s) => Buffer.from(s, 'hex');
/** A GSI datagram: BTH + DETH + MAD (`head`, then zeros) + ICRC = 280 bytes. */
const mad = (head, icrc) => Buffer.concat([hex(head), Buffer.alloc(276 - head.length / 2), hex(icrc)]);

const F = {
  REQ: mad('6400ffff0000000180000007800100000000000101070203000000000000000271e642ee0010000000000000ee42e671000000000000000001061c06505400fffe77000300000000000000000000150100000001000000a0c42fbca7ffff37f0ffffffff00000000000000000000ffff0a4d000300000000000000000000ffff0a4d00029fe650000040009800000000000000000000000000000000000000000000000000000000000000000000000000000000000000000040d5c10000000000000000000000000a4d00030000000000000000000000000a4d0002', '6e0b0375'),
  REP: mad('6400ffff0000000180000005800100000000000101070203000000000000000271e642ee001300000000000086473a22ee42e671000000000000150000000000621b3a00010178e0505400fffe770002', 'a7d9b665'),
  RTU: mad('6400ffff0000000180000008800100000000000101070203000000000000000271e642ee0014000000000000ee42e67186473a22', '418f1df4'),
  DREQ: mad('6400ffff0000000180000009800100000000000101070203000000000000000271e642ee0015000000000000ee42e67186473a22000015', 'a126ab6e'),
  DREQ_0: mad('6400ffff0000000180000005800100000000000101070203000000000000000271e642ef0015000000000000ef42e67184473a22000014', '278acd56'),
  DREP_0: mad('6400ffff0000000180000003800100000000000101070203000000000000000271e642ef001600000000000084473a22ef42e671', '549bff21'),
  RC_SEND_ONLY_C: hex('0400ffff0000001580621b3a0000563785f955b00000095d00000040d12e021a'),
  RC_ACKNOWLEDGE_S: hex('1100ffff0000001500621b3a1f00000110742505'),
  RC_RDMA_READ_REQUEST_S: hex('0c00ffff0000001580c42fbc0000563785f955b00000095d0000004063a91600'),
  RC_RDMA_READ_RESPONSE_ONLY_C: hex('1000ffff0000001500c42fbc1f00000172646d612d70696e672d303a204142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f7071720080124c12'),
  RC_SEND_ONLY_S: hex('0400ffff0000001580c42fbd00000000000000000000000000000000ca240d26'),
  RC_ACKNOWLEDGE_C: hex('1100ffff0000001500c42fbd1f000002ddb9f776'),
  RC_RDMA_WRITE_ONLY_S: hex('0a00ffff0000001580c42fbe0000563785f921700000089f0000004072646d612d70696e672d303a204142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f70717200ce5f6846'),
};

/** Sender, IPv4 ID of the captured datagram (null: not noted, recovered only), UDP source port. */
const WHO = {
  REQ: [CLIENT, 0x15a0, 55410],
  REP: [SERVER, 0x60bf, 55410],
  RTU: [CLIENT, 0x15a1, 55410],
  DREQ: [CLIENT, 0x15c1, 55410],
  DREQ_0: [CLIENT, null, 55410],
  DREP_0: [SERVER, 0x5e24, 55410],
  RC_SEND_ONLY_C: [CLIENT, 0x15a2, 65090],
  RC_ACKNOWLEDGE_S: [SERVER, 0x60c0, 65090],
  RC_RDMA_READ_REQUEST_S: [SERVER, 0x60c1, 65090],
  RC_RDMA_READ_RESPONSE_ONLY_C: [CLIENT, 0x15a3, 65090],
  RC_SEND_ONLY_S: [SERVER, 0x60c2, 65090],
  RC_ACKNOWLEDGE_C: [CLIENT, 0x15a4, 65090],
  RC_RDMA_WRITE_ONLY_S: [SERVER, 0x60c4, 65090],
};

/** Decode fixture `k` as a receiver: addresses and ports known, the IP ID recovered. */
function decode(k) {
  const [src, id, sport] = WHO[k];
  const dst = src === CLIENT ? SERVER : CLIENT;
  const bytes = F[k];
  const r = roce.decodeRocePacket(bytes, { net: { family: 4, src, dst, sport } });
  assert.ok(r.ok, `${k}: ${r.drop}`);
  if (id !== null) assert.equal(r.ipId, id, `${k}: IPv4 ID recovered from the ICRC`);
  const net = { family: 4, src, dst, sport, dport: roce.ROCE_V2_UDP_PORT, ipId: r.ipId };
  assert.deepEqual(Buffer.from(roce.encodeRocePacket(r.spec, net)), bytes, `${k}: re-encodes byte for byte`);
  // one bit off anywhere: the ICRC no longer fits any IP ID
  const bad = Buffer.from(bytes);
  bad[12 + ((r.ipId * 7) % (bytes.length - 16))] ^= 0x10;
  assert.equal(roce.decodeRocePacket(bad, { net: { family: 4, src, dst, sport } }).ok, false, `${k}: a flipped bit is caught`);
  return r.spec;
}

function cm(k) {
  const spec = decode(k);
  assert.deepEqual([spec.opcode, spec.destQp, spec.ackReq, spec.deth], [IbOpcode.UD_SEND_ONLY, roce.GSI_QPN, true, { qkey: roce.GSI_QKEY, srcQp: 1 }]);
  const m = roce.decodeCmMad(spec.payload);
  assert.equal(roce.cmMadHeaderProblem(m.hdr), null);
  assert.deepEqual([m.hdr.baseVersion, m.hdr.mgmtClass, m.hdr.classVersion, m.hdr.method, m.hdr.status, m.hdr.attrMod], [1, 7, 2, 3, 0, 0]);
  assert.deepEqual(Buffer.from(roce.encodeCmMad(m.msg, m.hdr.tid)), Buffer.from(spec.payload), `${k}: the MAD re-encodes`);
  return m;
}

test('rxe fixtures: the REQ of rping (port 7174) as rdma_cm builds it over RoCE', () => {
  const { hdr, msg: q } = cm('REQ');
  assert.equal(q.kind, 'REQ');
  // TID: the CM agent (2) in the high word, the communication ID byte-swapped in the low one
  assert.equal(hdr.tid, 0x271e642een);
  assert.equal(q.localCommId, 0xee42e671);
  assert.equal(q.serviceId, roce.cmaServiceId(roce.RdmaPortSpace.TCP, 7174));
  assert.deepEqual(roce.cmaServiceIdParts(q.serviceId), { ps: roce.RdmaPortSpace.TCP, port: 7174 });
  assert.equal(q.localCaGuid, 0x505400fffe770003n, 'EUI-64 of the MAC 52:54:00:77:00:03');
  assert.deepEqual([q.localQpn, q.localQkey, q.localEecn, q.remoteEecn, q.vendorId], [0x15, 0, 0, 0, 0]);
  assert.deepEqual([q.responderResources, q.initiatorDepth], [1, 1], 'rping: one READ each way');
  assert.equal(q.startingPsn, 0xc42fbc);
  assert.deepEqual([q.remoteCmResponseTimeout, q.localCmResponseTimeout, q.maxCmRetries], [20, 20, 15]);
  assert.deepEqual([q.transportType, q.e2eFlowControl, q.srq, q.rdcExists, q.extendedTransportType], [roce.CmTransportType.RC, false, false, false, 0]);
  assert.deepEqual([q.retryCount, q.rnrRetryCount, q.pkey, q.pathMtu], [7, 7, 0xffff, roce.IbMtu.MTU_1024]);
  const p = q.primaryPath;
  assert.deepEqual([p.localLid, p.remoteLid, p.hopLimit, p.trafficClass, p.sl, p.subnetLocal, p.packetRate], [0xffff, 0xffff, 64, 0, 0, false, 0]);
  assert.deepEqual([p.localGid, p.remoteGid], [roce.gidFromIpv4(CLIENT), roce.gidFromIpv4(SERVER)]);
  assert.equal(p.localAckTimeout, 19, 'the local ACK timeout this kernel put in the path');
  assert.equal(roce.cmReqHasAltPath(q), false);
  // the CMA header: version 0, IPv4, the client's port and both addresses
  const h = roce.decodeCmaHeader(q.privateData);
  assert.deepEqual([h.version, h.ipVersion, h.srcPort, [...h.src], [...h.dst]], [0, 4, 0xd5c1, [...CLIENT], [...SERVER]]);
  assert.equal(q.privateData.length, 92);
  assert.ok(q.privateData.subarray(36).every((x) => x === 0), 'rping sends no private data of its own');
  // the flow label of the path is cma's hash of the two ports, and names the RC UDP source port
  assert.equal(p.flowLabel, roce.cmaRoceFlowLabel(0xd5c1, 7174));
  assert.equal(roce.rdmaFlowLabelToUdpSport(p.flowLabel), WHO.RC_SEND_ONLY_C[2]);
});

test('rxe fixtures: REP, RTU and DREQ of the same connection; DREQ → DREP of the one before', () => {
  const req = cm('REQ').msg;
  const { hdr: rh, msg: rep } = cm('REP');
  assert.equal(rh.tid, 0x271e642een, 'the REP carries the REQ\'s TID');
  assert.deepEqual([rep.kind, rep.localCommId, rep.remoteCommId], ['REP', 0x86473a22, req.localCommId]);
  assert.deepEqual([rep.localQpn, rep.startingPsn, rep.responderResources, rep.initiatorDepth], [0x15, 0x621b3a, 1, 1]);
  assert.deepEqual([rep.targetAckDelay, rep.failoverAccepted, rep.e2eFlowControl, rep.rnrRetryCount, rep.srq, rep.localQkey, rep.localEecn], [15, 0, false, 7, false, 0, 0]);
  assert.equal(rep.localCaGuid, 0x505400fffe770002n);
  assert.ok(rep.privateData.every((x) => x === 0));
  const { hdr: th, msg: rtu } = cm('RTU');
  assert.equal(th.tid, rh.tid);
  assert.deepEqual([rtu.kind, rtu.localCommId, rtu.remoteCommId], ['RTU', req.localCommId, rep.localCommId]);
  const { hdr: dh, msg: dreq } = cm('DREQ');
  assert.equal(dh.tid, rh.tid, 'the DREQ reuses the connection\'s TID');
  assert.deepEqual([dreq.kind, dreq.localCommId, dreq.remoteCommId, dreq.remoteQpn], ['DREQ', req.localCommId, rep.localCommId, rep.localQpn]);
  const { hdr: h0, msg: dreq0 } = cm('DREQ_0');
  const { hdr: h1, msg: drep0 } = cm('DREP_0');
  assert.equal(h1.tid, h0.tid);
  assert.deepEqual([drep0.kind, drep0.localCommId, drep0.remoteCommId], ['DREP', dreq0.remoteCommId, dreq0.localCommId]);
  // attribute IDs on the wire
  assert.deepEqual(['REQ', 'REP', 'RTU', 'DREQ', 'DREP_0'].map((k) => F[k].readUInt16BE(20 + 16)), [0x10, 0x13, 0x14, 0x15, 0x16]);
});

test('rxe fixtures: rping\'s RC packets follow the CM: QPNs and PSNs from REQ/REP, the flow-label port, ACKs, the READ of the advertised buffer', () => {
  const req = cm('REQ').msg;
  const rep = cm('REP').msg;
  // the client's first SEND: to the server's QPN from the PSN the server asked for (its REP's);
  // rping's rdma_info: buffer address, rkey, size (big-endian)
  const send = decode('RC_SEND_ONLY_C');
  assert.deepEqual([send.opcode, send.destQp, send.psn, send.ackReq, send.se], [IbOpcode.RC_SEND_ONLY, rep.localQpn, rep.startingPsn, true, false]);
  const info = Buffer.from(send.payload);
  assert.equal(info.length, 16);
  const [buf, rkey, size] = [info.readBigUInt64BE(0), info.readUInt32BE(8), info.readUInt32BE(12)];
  assert.deepEqual([buf, rkey, size], [0x563785f955b0n, 0x95d, 64]);
  // the server ACKs that PSN: MSN 1, unlimited credits
  const ack = decode('RC_ACKNOWLEDGE_S');
  assert.deepEqual([ack.opcode, ack.destQp, ack.psn, ack.aeth], [IbOpcode.RC_ACKNOWLEDGE, req.localQpn, send.psn, { syndrome: AethSyndrome.ACK_UNLIMITED, msn: 1 }]);
  // the server READs the advertised buffer, from the PSN the client asked for (its REQ's)
  const rd = decode('RC_RDMA_READ_REQUEST_S');
  assert.deepEqual([rd.opcode, rd.destQp, rd.psn, rd.ackReq], [IbOpcode.RC_RDMA_READ_REQUEST, req.localQpn, req.startingPsn, true]);
  assert.deepEqual([BigInt(rd.reth.va), rd.reth.rkey, rd.reth.len], [buf, rkey, size]);
  // the response: same PSN, AETH with MSN 1, exactly the bytes asked for (rping's pattern)
  const resp = decode('RC_RDMA_READ_RESPONSE_ONLY_C');
  assert.deepEqual([resp.opcode, resp.destQp, resp.psn, resp.aeth], [IbOpcode.RC_RDMA_READ_RESPONSE_ONLY, rep.localQpn, rd.psn, { syndrome: AethSyndrome.ACK_UNLIMITED, msn: 1 }]);
  assert.equal(resp.payload.length, size);
  assert.equal(Buffer.from(resp.payload.subarray(0, 13)).toString(), 'rdma-ping-0: ');
  assert.equal(resp.payload[63], 0, 'rping\'s string ends in NUL');
  // then the server's SEND (next PSN), the client's ACK of it (MSN 2: the READ counted)
  const s2 = decode('RC_SEND_ONLY_S');
  assert.deepEqual([s2.opcode, s2.destQp, s2.psn], [IbOpcode.RC_SEND_ONLY, req.localQpn, roce.psnNext(req.startingPsn)]);
  const ack2 = decode('RC_ACKNOWLEDGE_C');
  assert.deepEqual([ack2.destQp, ack2.psn, ack2.aeth], [rep.localQpn, s2.psn, { syndrome: AethSyndrome.ACK_UNLIMITED, msn: 2 }]);
  // and its RDMA WRITE of the same pattern into the client's second buffer
  const wr = decode('RC_RDMA_WRITE_ONLY_S');
  assert.deepEqual([wr.opcode, wr.destQp, wr.psn, wr.ackReq], [IbOpcode.RC_RDMA_WRITE_ONLY, req.localQpn, roce.psnNext(s2.psn), true]);
  assert.deepEqual([BigInt(wr.reth.va), wr.reth.rkey, wr.reth.len, wr.payload.length], [0x563785f92170n, 0x89f, 64, 64]);
  assert.deepEqual(Buffer.from(wr.payload), Buffer.from(resp.payload));
  // pad: 16- and 64-byte payloads need none
  for (const k of Object.keys(F).filter((x) => x.startsWith('RC_'))) assert.equal(roce.bthPad(F[k], 0), 0, k);
});
