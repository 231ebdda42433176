// The RoCE connection manager for datagram ids on rxe_lo: SIDR (rdma_connect on a UD id, the
// listener's CONNECT_REQUEST, rdma_accept / rdma_reject), its failures (no listener, no answer,
// Q_Key mismatch), UD data between the two ids with the AH and QPN the events carry, and
// multicast join/leave events.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { PORT, lib, wire, pollN, WrOpcode, SendFlags, Access, WcStatus, WcFlags, roce, until } from '../../../../lib/roce.js';
import { expectEvent } from '../../../../lib/cm.js';
import { rawCmPeer, PEER, V4 } from '../../../../lib/raw-cm.js';

const { createEventChannel, createId, PortSpace, CmEventType, RDMA_UDP_QKEY } = lib;
roce.configureCm({ sidrTimeoutMs: 100, sidrRetries: 2 });
const gidText = (g) => wire.formatIp(wire.ipFromGid(g));
const code = (c) => (e) => e && e.code === c;
const ADDR = '127.0.0.1';
let nextPort = 40000 + Math.floor(Math.random() * 20000);


/** A UD id resolved to ADDR:port on rxe_lo. */
async function client(ch, port) {
  const id = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  await id.resolveAddr(null, { address: ADDR, port }, 2000);
  (await expectEvent(ch, CmEventType.ADDR_RESOLVED)).ack();
  await id.resolveRoute(2000);
  (await expectEvent(ch, CmEventType.ROUTE_RESOLVED)).ack();
  return id;
}

async function server(ch, port = nextPort++) {
  const id = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  id.bindAddr({ address: ADDR, port });
  await id.listen(4);
  return { id, port };
}

test('SIDR: connect → CONNECT_REQUEST with the user bytes → accept → ESTABLISHED with QPN, Q_Key, AH; then data both ways', async () => {
  const sch = createEventChannel();
  const cch = createEventChannel();
  const { id: listener, port } = await server(sch);
  const c = await client(cch, port);
  const cqp = c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  await c.connect({ privateData: Buffer.from('hello sidr') });
  const req = await expectEvent(sch, CmEventType.CONNECT_REQUEST);
  assert.equal(req.param.ud.privateData.length, 180);
  assert.equal(Buffer.from(req.param.ud.privateData.subarray(0, 10)).toString(), 'hello sidr');
  const sid = req.id;
  const sqp = sid.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  const pd = sqp.pd;
  const buf = Buffer.alloc(4096);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  sqp.postRecv({ wrId: 'srv', sgList: [{ addr: mr.addr, length: 1024, lkey: mr.lkey }] });
  await sid.accept({ privateData: Buffer.from('welcome') });
  req.ack();
  const est = await expectEvent(cch, CmEventType.ESTABLISHED);
  assert.equal(est.param.ud.qpNum, sqp.qpNum);
  assert.equal(est.param.ud.qkey, RDMA_UDP_QKEY);
  assert.equal(est.param.ud.privateData.length, 136);
  assert.equal(Buffer.from(est.param.ud.privateData.subarray(0, 7)).toString(), 'welcome');
  assert.equal(est.param.ud.ahAttr.isGlobal, true);
  assert.equal(gidText(est.param.ud.ahAttr.grh.dgid), '127.0.0.1');
  // data from the client to the server's QP with the event's AH
  const cpd = cqp.pd;
  const cbuf = Buffer.alloc(4096);
  const cmr = cpd.regMr(cbuf, Access.LOCAL_WRITE);
  const ah = cpd.createAh(est.param.ud.ahAttr);
  cbuf.write('over sidr', 0);
  cqp.postSend({ wrId: 'c', opcode: WrOpcode.SEND_WITH_IMM, immData: cqp.qpNum, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: cmr.addr, length: 9, lkey: cmr.lkey }], ud: { ah, remoteQpn: est.param.ud.qpNum, remoteQkey: est.param.ud.qkey } });
  est.ack();
  const [w] = await pollN(sqp.recvCq, 1);
  assert.equal(w.status, WcStatus.SUCCESS);
  assert.equal(w.wcFlags, WcFlags.GRH | WcFlags.WITH_IMM);
  assert.equal(w.immData, cqp.qpNum);
  assert.equal(buf.subarray(40, 49).toString(), 'over sidr');
  ah.destroy();
  c.destroyQp();
  sid.destroyQp();
  await c.destroy();
  await sid.destroy();
  await listener.destroy();
  sch.destroy();
  cch.destroy();
});

test('SIDR reject: UNREACHABLE with the SIDR status 2 and the private data', async () => {
  const sch = createEventChannel();
  const cch = createEventChannel();
  const { id: listener, port } = await server(sch);
  const c = await client(cch, port);
  c.createQp(null);
  await c.connect();
  const req = await expectEvent(sch, CmEventType.CONNECT_REQUEST);
  req.id.reject(Buffer.from('go away'));
  req.ack();
  const un = await expectEvent(cch, CmEventType.UNREACHABLE);
  assert.equal(un.status, 2);
  assert.equal(Buffer.from(un.param.ud.privateData.subarray(0, 7)).toString(), 'go away');
  un.ack();
  await req.id.destroy();
  c.destroyQp();
  await c.destroy();
  await listener.destroy();
  sch.destroy();
  cch.destroy();
});

test('SIDR to a port nobody listens on: UNREACHABLE status 1 (unsupported service) at once, not after a resend', async () => {
  const cch = createEventChannel();
  const c = await client(cch, nextPort++);
  c.createQp(null);
  // No process publishes the service: the first SIDR_REQ itself is answered (resends 10 s apart).
  roce.configureCm({ sidrTimeoutMs: 10_000 });
  try {
    await c.connect();
    const un = await expectEvent(cch, CmEventType.UNREACHABLE, 5000);
    assert.equal(un.status, 1);
    un.ack();
  } finally {
    roce.configureCm({ sidrTimeoutMs: 100 });
  }
  c.destroyQp();
  await c.destroy();
  cch.destroy();
});

test('SIDR without an answer: resent, then UNREACHABLE -ETIMEDOUT', async () => {
  // A listener that never answers: the request sits with an id nobody accepts.
  const sch = createEventChannel();
  const cch = createEventChannel();
  const { id: listener, port } = await server(sch);
  const c = await client(cch, port);
  c.createQp(null);
  const t0 = Date.now();
  await c.connect();
  const req = await expectEvent(sch, CmEventType.CONNECT_REQUEST);
  const un = await expectEvent(cch, CmEventType.UNREACHABLE);
  assert.equal(un.status, -110);
  assert.ok(Date.now() - t0 >= 250, 'three tries 100 ms apart');
  un.ack();
  req.ack();
  await req.id.destroy();
  c.destroyQp();
  await c.destroy();
  await listener.destroy();
  sch.destroy();
  cch.destroy();
});

test('a second listener on the same UDP port fails with EADDRINUSE', async () => {
  const ch = createEventChannel();
  const { id, port } = await server(ch);
  const other = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  assert.throws(() => other.bindAddr({ address: ADDR, port }), code('EADDRINUSE'));
  await other.destroy();
  await id.destroy();
  ch.destroy();
});

test('a fake peer at 127.0.0.2 gets a real SIDR_REQ on the wire; its SIDR_REP with another Q_Key gives ADDR_ERROR -EINVAL', async () => {
  // The peer is a plain UDP socket on 127.0.0.2 at the RoCE port: the request leaves through the
  // device's socket, and the hand-made reply comes back through it.
  const peer = dgram.createSocket('udp4');
  peer.bind(PORT, '127.0.0.2');
  await once(peer, 'listening');
  const cch = createEventChannel();
  const c = createId(cch, null, PortSpace.UDP, { device: 'rxe_lo' });
  await c.resolveAddr({ address: ADDR, port: 0 }, { address: '127.0.0.2', port: 7174 }, 2000);
  (await expectEvent(cch, CmEventType.ADDR_RESOLVED)).ack();
  await c.resolveRoute(2000);
  (await expectEvent(cch, CmEventType.ROUTE_RESOLVED)).ack();
  c.createQp(null);
  const got = once(peer, 'message');
  await c.connect({ privateData: Buffer.from('pd') });
  const [msg, rinfo] = await got;
  const net = { family: 4, src: Uint8Array.of(127, 0, 0, 1), dst: Uint8Array.of(127, 0, 0, 2), sport: rinfo.port, dport: PORT };
  const d = wire.decodeGsiPacket(msg, { net });
  assert.ok(d.ok, 'a valid GSI datagram with a valid ICRC');
  const mad = wire.decodeCmMad(d.gsi.mad);
  assert.equal(mad.msg.kind, 'SIDR_REQ');
  assert.equal(mad.msg.serviceId, lib.serviceId(PortSpace.UDP, 7174));
  const cma = wire.decodeCmaHeader(mad.msg.privateData);
  assert.equal(cma.ipVersion, 4);
  assert.deepEqual([...cma.dst], [127, 0, 0, 2]);
  assert.equal(Buffer.from(mad.msg.privateData.subarray(36, 38)).toString(), 'pd');
  const rep = wire.encodeCmMad(
    { kind: 'SIDR_REP', requestId: mad.msg.requestId, status: 0, addInfoLength: 0, vendorId: 0, qpn: 0x4242, serviceId: mad.msg.serviceId, qkey: 0x1111, addInfo: new Uint8Array(72), privateData: new Uint8Array(0) },
    mad.hdr.tid,
  );
  const back = wire.encodeGsiPacket(rep, { family: 4, src: Uint8Array.of(127, 0, 0, 2), dst: Uint8Array.of(127, 0, 0, 1), sport: PORT, dport: PORT }, { psn: 0 });
  peer.send(back, PORT, '127.0.0.1');
  const ev = await expectEvent(cch, CmEventType.ADDR_ERROR);
  assert.equal(ev.status, -22);
  ev.ack();
  peer.close();
  c.destroyQp();
  await c.destroy();
  cch.destroy();
});

test('a SIDR_REP is taken only from the address and GSI QP its SIDR_REQ went to: one from a third address or another QP is dropped and counted (rcvd_mad_src_drop), one for no request too; the peer\'s own then connects', async () => {
  const peer = dgram.createSocket('udp4');
  peer.bind(PORT, '127.0.0.2');
  await once(peer, 'listening');
  const intruder = dgram.createSocket('udp4');
  intruder.bind(0, '127.0.0.3');
  await once(intruder, 'listening');
  const cch = createEventChannel();
  const c = createId(cch, null, PortSpace.UDP, { device: 'rxe_lo' });
  await c.resolveAddr({ address: ADDR, port: 0 }, { address: '127.0.0.2', port: 7175 }, 2000);
  (await expectEvent(cch, CmEventType.ADDR_RESOLVED)).ack();
  await c.resolveRoute(2000);
  (await expectEvent(cch, CmEventType.ROUTE_RESOLVED)).ack();
  c.createQp(null);
  try {
    const got = once(peer, 'message');
    await c.connect();
    const [msg, rinfo] = await got;
    const d = wire.decodeGsiPacket(msg, { net: { family: 4, src: Uint8Array.of(127, 0, 0, 1), dst: Uint8Array.of(127, 0, 0, 2), sport: rinfo.port, dport: PORT } });
    const req = wire.decodeCmMad(d.gsi.mad);
    const repFor = (requestId, qpn) =>
      wire.encodeCmMad(
        { kind: 'SIDR_REP', requestId, status: 0, addInfoLength: 0, vendorId: 0, qpn, serviceId: req.msg.serviceId, qkey: RDMA_UDP_QKEY, addInfo: new Uint8Array(72), privateData: new Uint8Array(0) },
        req.hdr.tid,
      );
    const from = (ip, sport, mad, srcQp = 1) =>
      wire.encodeRocePacket(
        { opcode: wire.IbOpcode.UD_SEND_ONLY, destQp: 1, psn: 0, ackReq: true, deth: { qkey: wire.GSI_QKEY, srcQp }, payload: mad },
        { family: 4, src: Uint8Array.from(ip.split('.').map(Number)), dst: Uint8Array.of(127, 0, 0, 1), sport, dport: PORT },
      );
    const before = roce.counters('rxe_lo');
    // A third address that knows the request ID, pointing the requester at a QP of its choice.
    intruder.send(from('127.0.0.3', intruder.address().port, repFor(req.msg.requestId, 0x6666)), PORT, ADDR);
    // The right address, but not from its GSI QP.
    peer.send(from('127.0.0.2', PORT, repFor(req.msg.requestId, 0x6667), 0x77), PORT, ADDR);
    // The right address and QP, but a request nobody made.
    peer.send(from('127.0.0.2', PORT, repFor((req.msg.requestId ^ 1) >>> 0, 0x6668)), PORT, ADDR);
    const deadline = Date.now() + 2000;
    const delta = (k) => roce.counters('rxe_lo')[k] - before[k];
    while ((delta('rcvd_mad_src_drop') < 2 || delta('rcvd_mad_unroutable_drop') < 1) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(delta('rcvd_mad_src_drop'), 2, 'the third address and the other QP');
    assert.equal(delta('rcvd_mad_unroutable_drop'), 1, 'the unknown request');
    peer.send(from('127.0.0.2', PORT, repFor(req.msg.requestId, 0x4242)), PORT, ADDR);
    const ev = await expectEvent(cch, CmEventType.ESTABLISHED);
    assert.equal(ev.param.ud.qpNum, 0x4242, 'the peer\'s QPN, not the intruder\'s');
    ev.ack();
  } finally {
    // also after a failed assertion: a live QP would hold the event loop open
    peer.close();
    intruder.close();
    c.destroyQp();
    await Promise.race([c.destroy().catch(() => {}), new Promise((r) => setTimeout(r, 500))]);
    cch.destroy();
  }
});

test('multicast join: MULTICAST_JOIN with the group AH (MGID ::ffff:group), QPN 0xFFFFFF, Q_Key; data reaches the joined QP; leave', async () => {
  const ch = createEventChannel();
  const group = `239.254.${(nextPort >> 8) & 0xff}.${nextPort & 0xff}`;
  const recv = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  recv.bindAddr({ address: ADDR, port: 0 });
  const rqp = recv.createQp(null, { cap: { maxRecvWr: 4 } });
  const rpd = rqp.pd;
  const rbuf = Buffer.alloc(2048);
  const rmr = rpd.regMr(rbuf, Access.LOCAL_WRITE);
  rqp.postRecv({ wrId: 'm', sgList: [{ addr: rmr.addr, length: 1024, lkey: rmr.lkey }] });
  await recv.joinMulticast({ address: group, port: 0 }, 'ctx-r');
  const j = await expectEvent(ch, CmEventType.MULTICAST_JOIN);
  assert.equal(j.mcContext, 'ctx-r');
  assert.equal(j.param.ud.qpNum, 0xffffff);
  assert.equal(j.param.ud.qkey, RDMA_UDP_QKEY);
  assert.equal(j.param.ud.privateData.length, 0);
  assert.equal(gidText(j.param.ud.ahAttr.grh.dgid), group);
  assert.deepEqual([...j.param.ud.ahAttr.grh.dgid.subarray(0, 12)], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
  assert.equal(j.param.ud.ahAttr.grh.hopLimit, 64);
  const ahAttr = j.param.ud.ahAttr;
  j.ack();
  // a sender id joins send-only and sends to the group
  const send = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  send.bindAddr({ address: ADDR, port: 0 });
  const sqp = send.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 1 } });
  await send.joinMulticastEx({ addr: { address: group, port: 0 }, joinFlags: lib.McJoinFlag.SENDONLY_FULLMEMBER, context: 'ctx-s' });
  const js = await expectEvent(ch, CmEventType.MULTICAST_JOIN);
  js.ack();
  const spd = sqp.pd;
  const sbuf = Buffer.alloc(64);
  const smr = spd.regMr(sbuf, Access.LOCAL_WRITE);
  sbuf.write('to the group');
  const ah = spd.createAh(ahAttr);
  // the send-only member's QP is not attached: a receive it posts gets nothing from the group
  const sown = Buffer.alloc(2048);
  const sownMr = spd.regMr(sown, Access.LOCAL_WRITE);
  sqp.postRecv({ wrId: 'own', sgList: [{ addr: sownMr.addr, length: 1024, lkey: sownMr.lkey }] });
  await new Promise((r) => setTimeout(r, 50)); // the group socket's bind and IGMP join
  sqp.postSend({ wrId: 's', opcode: WrOpcode.SEND, sgList: [{ addr: smr.addr, length: 12, lkey: smr.lkey }], ud: { ah, remoteQpn: 0xffffff, remoteQkey: RDMA_UDP_QKEY } });
  const [w] = await pollN(rqp.recvCq, 1);
  assert.equal(w?.status, WcStatus.SUCCESS);
  assert.equal(rbuf.subarray(40, 52).toString(), 'to the group');
  assert.equal(roce.counters('rxe_lo').rcvd_mcast_pkts > 0, true);
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(sqp.recvCq.poll(1), [], 'the send-only member received nothing from the group');
  await recv.leaveMulticast({ address: group, port: 0 });
  await assert.rejects(recv.leaveMulticast({ address: group, port: 0 }), code('EADDRNOTAVAIL'));
  // a join of a non-multicast address: MULTICAST_ERROR
  await recv.joinMulticast({ address: '10.1.2.3', port: 0 }, 'bad');
  const e = await expectEvent(ch, CmEventType.MULTICAST_ERROR);
  assert.equal(e.mcContext, 'bad');
  e.ack();
  ah.destroy();
  recv.destroyQp();
  send.destroyQp();
  await recv.destroy();
  await send.destroy();
  ch.destroy();
});

test('rdma_join_multicast refuses as cma_iboe_join_multicast: the zero address EINVAL, an IPv6 group ENOTSUPP (524); no group kept, no event', async () => {
  const ch = createEventChannel();
  const id4 = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  id4.bindAddr({ address: ADDR, port: 0 });
  id4.createQp(null, { cap: { maxRecvWr: 1 } });
  await assert.rejects(id4.joinMulticast({ address: '0.0.0.0', port: 0 }, 'zero'), (e) => e.code === 'EINVAL' && e.errno === 22);
  await assert.rejects(id4.leaveMulticast({ address: '0.0.0.0', port: 0 }), code('EADDRNOTAVAIL'));
  const id6 = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  id6.bindAddr({ address: '::1', port: 0 });
  await assert.rejects(id6.joinMulticast({ address: 'ff0e::1', port: 0 }, 'v6'), (e) => e.code === 'ENOTSUPP' && e.errno === 524 && /Unknown error 524/.test(lib.strerror(e.errno)));
  await assert.rejects(id6.joinMulticast({ address: '::', port: 0 }, 'zero6'), code('EINVAL'));
  await assert.rejects(id6.leaveMulticast({ address: 'ff0e::1', port: 0 }), code('EADDRNOTAVAIL'));
  // nothing was queued for either id
  await assert.rejects(expectEvent(ch, CmEventType.MULTICAST_ERROR, 300), /within 300 ms/);
  id4.destroyQp();
  await id4.destroy();
  await id6.destroy();
  ch.destroy();
});

test('RDMA_PS_IPOIB on RoCE: no IPoIB broadcast group to take the Q_Key from, so rdma_create_qp fails with ENODEV', async () => {
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.IPOIB, { device: 'rxe_lo' });
  id.bindAddr({ address: ADDR, port: 0 });
  assert.throws(() => id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } }), code('ENODEV'));
  assert.equal(id.qp, null);
  assert.throws(() => id.initQpAttr(lib.QpState.INIT), code('ENODEV'));
  await id.destroy();
  ch.destroy();
});

test('SIDR_REQs past a UD listener\'s backlog: dropped without an answer and counted; a request answered frees its place for the next', { timeout: 20000 }, async () => {
  const ch = createEventChannel();
  const port = nextPort++;
  const l = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  l.bindAddr({ address: ADDR, port });
  await l.listen(2);
  const peer = await rawCmPeer();
  const pd = wire.encodeCmaPrivateData({ version: 0, ipVersion: 4, srcPort: 5555, src: V4(PEER), dst: V4(ADDR) });
  const sidrReq = (i) => ({ kind: 'SIDR_REQ', requestId: 0x3ff00000 + i, pkey: 0xffff, reserved: 0, serviceId: lib.serviceId(PortSpace.UDP, port), privateData: pd });
  const c0 = roce.counters('rxe_lo').rcvd_req_backlog_drop;
  for (let i = 0; i < 10; i++) peer.sendMad(sidrReq(i), BigInt(i));
  await until(() => roce.counters('rxe_lo').rcvd_req_backlog_drop - c0 >= 8, 3000);
  const first = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  const second = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  assert.equal(roce.counters('rxe_lo').rcvd_req_backlog_drop - c0, 8);
  assert.equal(peer.count('SIDR_REP'), 0, 'nothing answered yet');
  // rdma_reject answers the first: its place is free, and the resend of a dropped request is taken.
  first.ack();
  first.id.reject(Buffer.from('no'));
  await peer.mad('SIDR_REP');
  peer.sendMad(sidrReq(5), 5n);
  const third = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  assert.equal(roce.counters('rxe_lo').rcvd_req_backlog_drop - c0, 8);
  await first.id.destroy();
  for (const ev of [second, third]) {
    ev.ack();
    await ev.id.destroy();
  }
  await l.destroy();
  ch.destroy();
  peer.close();
});
