// Real kernel bytes: Linux rdma_rxe (kernel 6.1) between two VMs, copied from the reference VM
// captures to test/fixtures/captures. E-rxe-2vm.pcap: udaddy (SIDR REQ/REP on QP1, UD sends with
// immediate), mckey (multicast UD), ib_send_lat and rping over RC with their CM exchanges.
// C-rxe-mcast.pcap: hand-built UD multicast datagrams from the host, then rxe's multicast sends.
// Every RoCEv2 datagram is decoded, its ICRC checked against the real IP header, and re-encoded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { roce } from '../../../../dist/wire/index.js';
import { udpDatagrams } from '../../../lib/pcap.js';

const { IbOpcode, OpMask } = roce;
const capture = (name) => fileURLToPath(new URL(`../../../fixtures/captures/${name}`, import.meta.url));

/** The IP/UDP description of a captured datagram, every field taken from the real headers. */
function netOf(d) {
  const ip = d.ipHeader;
  return d.family === 4
    ? { family: 4, src: d.src, dst: d.dst, sport: d.sport, dport: d.dport, tos: ip[1], ttl: ip[8], ipId: ip.readUInt16BE(4), ipFlags: ip.readUInt16BE(6) }
    : { family: 6, src: d.src, dst: d.dst, sport: d.sport, dport: d.dport, tos: ((ip[0] & 15) << 4) | (ip[1] >> 4), ttl: ip[7], flowLabel: ip.readUInt32BE(0) & 0xfffff };
}

/**
 * Decode every RoCEv2 datagram of a capture: ICRC against the real header, and again as a
 * userspace receiver sees it (no ID, ToS or TTL: the ID is recovered from the ICRC); the packet
 * and the IP header re-encode to the captured bytes.
 */
function decodeAll(name) {
  const out = [];
  for (const d of udpDatagrams(capture(name))) {
    if (d.dport !== roce.ROCE_V2_UDP_PORT) continue;
    const net = netOf(d);
    const label = `${name} record ${d.index}`;
    const r = roce.decodeRocePacket(d.payload, { net });
    assert.ok(r.ok, `${label}: ${r.drop}`);
    assert.deepEqual(roce.encodeRocePacket(r.spec, net), new Uint8Array(d.payload), `${label}: re-encodes`);
    assert.equal(r.icrc, roce.icrcCompute(net, d.payload, 0, d.payload.length - 4));
    // what a userspace socket knows: addresses, ports, lengths
    const blind = { family: d.family, src: d.src, dst: d.dst, sport: d.sport };
    const p = new roce.RocePacket();
    assert.equal(roce.parseRocePacket(d.payload, 0, d.payload.length, p, { net: blind }), null, label);
    assert.equal(p.ipId, net.ipId, `${label}: IPv4 ID recovered from the ICRC`);
    // the GRH area rebuilt with the recovered ID and the default ToS 0 / TTL 64 is the real header
    const grh = new Uint8Array(40);
    roce.writeGrhArea({ ...blind, ipId: p.ipId }, d.payload.length, grh, 0);
    assert.deepEqual(grh.subarray(20), new Uint8Array(d.ipHeader), `${label}: IP header rebuilt`);
    out.push({ d, net, spec: r.spec, info: roce.IB_OPCODES[r.spec.opcode] });
  }
  return out;
}

const ip = (s) => new Uint8Array(roce.parseIp(s));
const sameBytes = (a, b) => Buffer.from(a).equals(Buffer.from(b));

test('E-rxe-2vm: every RoCEv2 datagram decodes, ICRC matches, re-encodes byte for byte', () => {
  const pkts = decodeAll('E-rxe-2vm.pcap');
  assert.equal(pkts.length, 4150);
  const byOp = {};
  for (const { d, spec, info } of pkts) {
    byOp[info.name] = (byOp[info.name] ?? 0) + 1;
    // what rxe always sends
    assert.equal(d.udpChecksum, 0, 'UDP checksum 0');
    assert.equal(d.ipHeader.readUInt16BE(6), roce.IPV4_DF, 'DF, no fragments');
    assert.equal(d.ipHeader[8], 64, 'TTL = route hop limit 64');
    assert.equal(d.ipHeader[1], 0, 'ToS 0');
    assert.notEqual(d.ipHeader.readUInt16BE(4), 0, 'rxe picks non-zero IP IDs (__ip_select_ident)');
    assert.equal(spec.pkey, 0xffff);
    assert.equal(spec.tver, 0);
    assert.equal(spec.mig, false);
    assert.equal(spec.fecn || spec.becn, false);
    assert.equal(spec.payload === undefined ? 0 : (spec.payload.length + roce.bthPad(d.payload, 0)) % 4, 0);
  }
  assert.deepEqual(byOp, {
    UD_SEND_ONLY: 16,
    UD_SEND_ONLY_WITH_IMMEDIATE: 30,
    RC_SEND_ONLY: 2042,
    RC_ACKNOWLEDGE: 2047,
    RC_RDMA_READ_REQUEST: 5,
    RC_RDMA_READ_RESPONSE_ONLY: 5,
    RC_RDMA_WRITE_ONLY: 5,
  });
});

test('E-rxe-2vm: CM MADs on QP1 decode to sensible values and re-encode byte for byte', () => {
  const pkts = decodeAll('E-rxe-2vm.pcap').filter((p) => p.spec.destQp === roce.GSI_QPN);
  const client = ip('10.77.0.3');
  const server = ip('10.77.0.2');
  const mads = pkts.map(({ d, spec }) => {
    assert.equal(spec.opcode, IbOpcode.UD_SEND_ONLY);
    assert.deepEqual(spec.deth, { qkey: roce.GSI_QKEY, srcQp: 1 });
    assert.equal(spec.ackReq, true, "rxe's GSI QP sets AckReq");
    assert.equal(d.sport, roce.GSI_UDP_SPORT);
    const gsi = roce.decodeGsiPacket(new Uint8Array(d.payload), { net: netOf(d) });
    assert.ok(gsi.ok);
    const m = roce.decodeCmMad(gsi.gsi.mad);
    assert.equal(roce.cmMadHeaderProblem(m.hdr), null);
    assert.deepEqual([m.hdr.status, m.hdr.classSpecific, m.hdr.attrMod], [0, 0, 0]);
    assert.ok(sameBytes(roce.encodeCmMad(m.msg, m.hdr.tid), gsi.gsi.mad), `${m.msg.kind} re-encodes`);
    assert.equal(roce.gsiCmAttrId(new Uint8Array(d.payload)), roce.CmAttrId[m.msg.kind], `${m.msg.kind}: its attribute ID read in place`);
    return { ...m, fromClient: sameBytes(d.src, client), d };
  });
  assert.deepEqual(
    mads.map((m) => `${m.fromClient ? 'c' : 's'}:${m.msg.kind}`),
    ['c:SIDR_REQ', 's:SIDR_REP',
      'c:REQ', 's:REP', 'c:RTU', 'c:REQ', 's:REP', 'c:RTU',
      'c:DREQ', 's:DREP', 'c:DREQ', 's:DREP',
      'c:REQ', 's:REP', 'c:RTU', 'c:DREQ'],
  );
  // every message of one exchange carries the TID of the request that opened it
  const [sreq, srep] = mads;
  assert.equal(srep.hdr.tid, sreq.hdr.tid);
  // udaddy: SIDR_REQ to UDP port 7174 with a CMA header naming both ends
  assert.equal(sreq.msg.serviceId, roce.cmaServiceId(roce.RdmaPortSpace.UDP, 7174));
  assert.equal(sreq.msg.pkey, 0xffff);
  const cma = roce.decodeCmaHeader(sreq.msg.privateData);
  assert.deepEqual([cma.version, cma.ipVersion, cma.src, cma.dst], [0, 4, client, server]);
  assert.equal(srep.msg.requestId, sreq.msg.requestId);
  assert.equal(srep.msg.status, roce.CmSidrStatus.SUCCESS);
  assert.equal(srep.msg.qkey, roce.RDMA_UDP_QKEY);
  assert.equal(srep.msg.serviceId, sreq.msg.serviceId);
  assert.equal(srep.msg.qpn, 0x11);
  // the three RC connections: REQ / REP / RTU, then DREQ / DREP
  const reqs = mads.filter((m) => m.msg.kind === 'REQ');
  assert.deepEqual(reqs.map((m) => roce.cmaServiceIdParts(m.msg.serviceId)), [
    { ps: roce.RdmaPortSpace.TCP, port: 18515 }, { ps: roce.RdmaPortSpace.TCP, port: 18515 }, { ps: roce.RdmaPortSpace.TCP, port: 7174 },
  ]);
  for (const req of reqs) {
    const q = req.msg;
    const rep = mads.find((m) => m.msg.kind === 'REP' && m.msg.remoteCommId === q.localCommId);
    const rtu = mads.find((m) => m.msg.kind === 'RTU' && m.msg.localCommId === q.localCommId);
    assert.ok(rep && rtu);
    assert.equal(rep.hdr.tid, req.hdr.tid);
    assert.equal(rtu.hdr.tid, req.hdr.tid);
    assert.equal(rtu.msg.remoteCommId, rep.msg.localCommId);
    assert.deepEqual(
      [q.transportType, q.pkey, q.pathMtu, q.remoteCmResponseTimeout, q.localCmResponseTimeout, q.maxCmRetries, q.retryCount, q.rnrRetryCount, q.srq],
      [roce.CmTransportType.RC, 0xffff, roce.IbMtu.MTU_1024, 20, 20, 15, 7, 7, false],
    );
    assert.equal(roce.iboePathMtu(1500), q.pathMtu, 'netdev MTU 1500 → 1024');
    const p = q.primaryPath;
    assert.deepEqual([p.localLid, p.remoteLid, p.hopLimit, p.trafficClass, p.subnetLocal, p.sl], [0xffff, 0xffff, 64, 0, false, 0]);
    assert.deepEqual(p.localGid, roce.gidFromIpv4(client));
    assert.deepEqual(p.remoteGid, roce.gidFromIpv4(server));
    assert.equal(roce.cmReqHasAltPath(q), false);
    const h = roce.decodeCmaHeader(q.privateData);
    assert.deepEqual([h.ipVersion, h.src, h.dst], [4, client, server]);
    assert.equal(p.flowLabel, roce.cmaRoceFlowLabel(h.srcPort, roce.cmaServiceIdParts(q.serviceId).port));
    assert.equal(rep.msg.rnrRetryCount, 7);
    // node GUIDs are the EUI-64 of each VM's MAC
    assert.equal(q.localCaGuid, 0x505400fffe770003n);
    assert.equal(rep.msg.localCaGuid, 0x505400fffe770002n);
    const dreq = mads.find((m) => m.msg.kind === 'DREQ' && m.msg.localCommId === q.localCommId);
    assert.equal(dreq.msg.remoteQpn, rep.msg.localQpn);
    assert.equal(dreq.hdr.tid, req.hdr.tid);
    req.rep = rep;
  }
  // rping asked for one read/atomic resource each way; ib_send_lat none
  assert.deepEqual(reqs.map((r) => [r.msg.responderResources, r.msg.initiatorDepth]), [[0, 0], [0, 0], [1, 1]]);
});

test('E-rxe-2vm: RC data follows the CM: ports from the flow label, PSNs from REQ/REP, ACKs and reads', () => {
  const pkts = decodeAll('E-rxe-2vm.pcap');
  const mads = pkts
    .filter((p) => p.spec.destQp === 1)
    .map((p) => roce.decodeCmMad(p.spec.payload).msg);
  const rc = pkts.filter((p) => (p.spec.opcode & 0xe0) === roce.IbTransport.RC);
  const server = ip('10.77.0.2');
  for (const req of mads.filter((m) => m.kind === 'REQ')) {
    const rep = mads.find((m) => m.kind === 'REP' && m.remoteCommId === req.localCommId);
    const sport = roce.rdmaFlowLabelToUdpSport(req.primaryPath.flowLabel);
    const flow = rc.filter((p) => p.d.sport === sport);
    assert.ok(flow.length >= 10, 'both directions use the flow-label port');
    assert.ok(flow.every((p) => p.d.dport === 4791));
    // Linux ib_cm: a message's starting PSN is the one its *sender* expects to receive first, so
    // the passive side sends from the REQ's PSN and the active side from the REP's
    const requests = flow.filter((p) => p.info.mask & OpMask.REQ);
    const toPassive = requests.filter((p) => sameBytes(p.d.dst, server));
    const toActive = requests.filter((p) => sameBytes(p.d.src, server));
    assert.ok(toPassive.every((p) => p.spec.destQp === rep.localQpn));
    assert.ok(toActive.every((p) => p.spec.destQp === req.localQpn));
    assert.equal(toPassive[0].spec.psn, rep.startingPsn);
    assert.equal(toActive[0].spec.psn, req.startingPsn);
    for (const dir of [toPassive, toActive]) {
      let psn = dir[0].spec.psn;
      for (const p of dir) {
        assert.equal(p.spec.psn, psn, 'no gaps, one PSN per single-packet message');
        psn = roce.psnNext(psn);
        assert.equal(p.spec.ackReq, true, 'AckReq on the last packet of every message');
      }
    }
    // every ACK answers a request of the other direction with the same PSN, AETH "ACK, unlimited credits"
    for (const ack of flow.filter((p) => p.spec.opcode === IbOpcode.RC_ACKNOWLEDGE)) {
      assert.equal(ack.spec.aeth.syndrome, roce.AethSyndrome.ACK_UNLIMITED);
      assert.ok(flow.some((p) => p.info.mask & OpMask.REQ && p.spec.psn === ack.spec.psn && !sameBytes(p.d.src, ack.d.src)));
    }
  }
  // rping: Read Request → Read Response ONLY of exactly the requested length, same PSN
  const reads = rc.filter((p) => p.spec.opcode === IbOpcode.RC_RDMA_READ_REQUEST);
  for (const rr of reads) {
    const resp = rc.find((p) => p.spec.opcode === IbOpcode.RC_RDMA_READ_RESPONSE_ONLY && p.spec.psn === rr.spec.psn);
    assert.equal(resp.spec.payload.length, rr.spec.reth.len);
    assert.equal(resp.spec.aeth.syndrome & roce.AethSyndrome.TYPE_MASK, roce.AethSyndrome.ACK);
  }
  const writes = rc.filter((p) => p.spec.opcode === IbOpcode.RC_RDMA_WRITE_ONLY);
  assert.ok(writes.every((w) => w.spec.payload.length === w.spec.reth.len && w.spec.reth.rkey !== 0));
  // ib_send_lat -n 1000 (2-byte sends, pad 2): the busiest connection, 1000 sends each way, each ACKed
  const bySport = new Map();
  for (const p of rc) bySport.set(p.d.sport, [...(bySport.get(p.d.sport) ?? []), p]);
  const lat = [...bySport.values()].sort((a, b) => b.length - a.length)[0];
  const sends = lat.filter((p) => p.spec.opcode === IbOpcode.RC_SEND_ONLY);
  assert.equal(sends.length, 2000);
  assert.equal(sends.filter((p) => sameBytes(p.d.src, server)).length, 1000);
  assert.ok(sends.every((p) => p.spec.payload.length === 2 && roce.bthPad(p.d.payload, 0) === 2));
  assert.equal(lat.filter((p) => p.spec.opcode === IbOpcode.RC_ACKNOWLEDGE).length, 2000);
});

test('E-rxe-2vm: UD sends with immediate (udaddy) and multicast sends (mckey)', () => {
  const pkts = decodeAll('E-rxe-2vm.pcap').filter((p) => p.spec.opcode === IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE);
  const uni = pkts.filter((p) => p.spec.destQp !== roce.IB_MULTICAST_QPN);
  const mc = pkts.filter((p) => p.spec.destQp === roce.IB_MULTICAST_QPN);
  assert.deepEqual([uni.length, mc.length], [20, 10]);
  for (const p of uni) {
    assert.equal(p.spec.destQp, 0x11);
    assert.equal(p.spec.deth.qkey, roce.RDMA_UDP_QKEY);
    assert.equal(p.spec.ackReq, false);
    assert.equal(p.d.sport, roce.roceUdpSrcPort(p.spec.deth.srcQp), 'UD QPs keep the hash_32 port');
    assert.equal(typeof p.spec.immDt, 'number');
    assert.equal(p.spec.payload.length, 100);
  }
  for (const p of mc) {
    assert.ok(sameBytes(p.d.dst, ip('239.1.1.2')));
    assert.equal(p.spec.deth.qkey, roce.RDMA_UDP_QKEY);
    assert.equal(p.d.sport, roce.roceUdpSrcPort(p.spec.deth.srcQp));
    // the MGID a receiver matches is the IPv4-mapped group address
    assert.deepEqual(roce.cmaIboeMgid(new Uint8Array(p.d.dst)), roce.gidFromIpv4(ip('239.1.1.2')));
  }
});

test('C-rxe-mcast: hand-built multicast datagrams and rxe multicast sends', () => {
  const pkts = decodeAll('C-rxe-mcast.pcap');
  assert.equal(pkts.length, 20);
  const host = pkts.filter((p) => p.d.src[3] === 1);
  const rxe = pkts.filter((p) => p.d.src[3] === 2);
  assert.equal(host.length, 10);
  host.forEach((p, i) => {
    assert.deepEqual([p.spec.opcode, p.spec.destQp, p.spec.psn, p.spec.deth.qkey, p.spec.deth.srcQp], [IbOpcode.UD_SEND_ONLY, 0xffffff, i, roce.RDMA_UDP_QKEY, 0x11]);
    assert.equal(p.net.ipId, 0x1000 + i);
  });
  assert.equal(rxe.length, 10);
  for (const p of rxe) {
    assert.deepEqual([p.spec.opcode, p.spec.destQp, p.spec.deth.qkey], [IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE, 0xffffff, roce.RDMA_UDP_QKEY]);
    assert.ok(sameBytes(p.d.dst, ip('239.1.1.1')));
    assert.equal(p.d.sport, roce.roceUdpSrcPort(p.spec.deth.srcQp));
  }
});
