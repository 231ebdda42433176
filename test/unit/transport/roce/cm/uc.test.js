// rdma_cm's UC ids over the soft RoCE device's IB CM (RDMA_PS_IB, rdma_create_id2 with
// IBV_QPT_UC) against a hand-made peer at 127.0.0.2: the REQ says transport type UC with the
// RDMA_PS_IB service ID, the QPs get UC's attributes from rdma_init_qp_attr (cm.c
// cm_init_qp_rtr_attr / cm_init_qp_rts_attr), UC packets flow with the PSNs the CM exchanged,
// and a listener takes only REQs of its own QP type (cma.c cma_check_req_qp_type: REJ 28).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PORT, lib, wire, roce } from '../../../../lib/roce.js';
import { expectEvent } from '../../../../lib/cm.js';
import { rawCmPeer, reqFrom, LOCAL, PEER } from '../../../../lib/raw-cm.js';

const { PortSpace, CmEventType, QpState, QpType, Access, serviceId } = lib;
const { CmRejReason, IbOpcode } = wire;
roce.configureRcCm({ cmTimeoutMs: 150, cmRetries: 2, timewaitMs: 60 });

let nextPort = 30000 + Math.floor(Math.random() * 20000);
const cleanups = [];
test.afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) {
    try {
      await Promise.race([f(), new Promise((r) => setTimeout(r, 500))]);
    } catch {
      // released by the test already
    }
  }
});
function track(id) {
  cleanups.push(async () => {
    if (id.qp) id.destroyQp();
    await id.destroy();
  });
  return id;
}

test('active: a UC id of RDMA_PS_IB sends a REQ of transport type UC; the REP moves its UC QP to RTS with UC\'s attributes; UC packets flow', async () => {
  const peer = await rawCmPeer(PORT, { peer: PEER });
  cleanups.push(() => peer.close());
  const ch = lib.createEventChannel();
  cleanups.push(() => ch.destroy());
  const port = nextPort++;
  const id = track(lib.createId(ch, null, PortSpace.IB, { device: 'rxe_lo', qpType: QpType.UC }));
  assert.equal(id.qpType, QpType.UC);
  await id.resolveAddr({ address: LOCAL, port: 0 }, { address: PEER, port }, 2000);
  (await expectEvent(ch, CmEventType.ADDR_RESOLVED)).ack();
  await id.resolveRoute(2000);
  (await expectEvent(ch, CmEventType.ROUTE_RESOLVED)).ack();
  id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  assert.equal(id.qp.qpType, QpType.UC);
  await id.connect({});
  const { mad } = await peer.mad('REQ');
  const q = mad.msg;
  assert.equal(q.transportType, wire.CmTransportType.UC);
  assert.equal(q.serviceId, serviceId(PortSpace.IB, port));
  assert.equal(q.serviceId, 0x00000000013f0000n | BigInt(port));
  assert.equal(q.localQpn, id.qp.qpNum);
  peer.sendMad({
    kind: 'REP', localCommId: 0x7123, remoteCommId: q.localCommId, localQkey: 0, localQpn: 0x5151, vendorId: 0, localEecn: 0, startingPsn: 0xabcde,
    responderResources: 0, initiatorDepth: 0, targetAckDelay: 15, failoverAccepted: 0, e2eFlowControl: false, rnrRetryCount: 7, srq: false,
    localCaGuid: 0x0200000000000001n, privateData: Buffer.alloc(0),
  }, mad.hdr.tid);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  await peer.mad('RTU');
  const a = id.qp.query();
  assert.deepEqual([a.qpState, a.destQpNum, a.sqPsn, a.rqPsn], [QpState.RTS, 0x5151, 0xabcde, q.startingPsn]);
  assert.equal(a.qpAccessFlags & Access.REMOTE_WRITE, Access.REMOTE_WRITE);
  // Our UC SEND from the REP's PSN; the peer's UC SEND at the REQ's PSN lands in our receive.
  const mr = id.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  mr.buf.set(Buffer.from('ping'), 0);
  id.qp.postRecv({ wrId: 'r', sgList: [{ addr: mr.addr + 32, length: 32, lkey: mr.lkey }] });
  id.qp.postSend({ wrId: 's', opcode: lib.WrOpcode.SEND, sendFlags: lib.SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: 4, lkey: mr.lkey }] });
  const send = await peer.next((x) => x.spec.opcode === IbOpcode.UC_SEND_ONLY);
  assert.deepEqual([send.spec.destQp, send.spec.psn], [0x5151, 0xabcde]);
  assert.equal(Buffer.from(send.spec.payload).toString(), 'ping');
  peer.sendRc({ opcode: IbOpcode.UC_SEND_ONLY, destQp: id.qp.qpNum, psn: q.startingPsn, ackReq: true, payload: Buffer.from('pong') });
  const got = [];
  for (let i = 0; i < 200 && got.length < 2; i++) {
    got.push(...id.sendCq.poll(4));
    if (id.recvCq !== id.sendCq) got.push(...id.recvCq.poll(4));
    if (got.length < 2) await new Promise((r) => setTimeout(r, 5));
  }
  assert.deepEqual(got.map((w) => [w.wrId, w.status]).sort(), [['r', lib.WcStatus.SUCCESS], ['s', lib.WcStatus.SUCCESS]]);
  assert.equal(Buffer.from(mr.buf.subarray(32, 36)).toString(), 'pong');
});

test('passive: a UC listener of RDMA_PS_IB takes a UC REQ (its new id and QP are UC, the REP follows); an RC REQ to it gets REJ 28 and no event', async () => {
  const peer = await rawCmPeer(PORT, { peer: PEER });
  cleanups.push(() => peer.close());
  const ch = lib.createEventChannel();
  cleanups.push(() => ch.destroy());
  const port = nextPort++;
  const l = track(lib.createId(ch, null, PortSpace.IB, { device: 'rxe_lo', qpType: QpType.UC }));
  l.bindAddr({ address: LOCAL, port });
  await l.listen(4);
  const ps = { serviceId: serviceId(PortSpace.IB, port) };
  // An RC REQ for this UC listener.
  peer.sendMad({ ...reqFrom(port), ...ps }, 0x31n);
  const { mad: rej } = await peer.mad('REJ');
  assert.equal(rej.msg.reason, CmRejReason.CONSUMER_DEFINED);
  // A UC REQ.
  const req = { ...reqFrom(port, { transportType: wire.CmTransportType.UC, psn: 0x2222 }), ...ps };
  peer.sendMad(req, 0x32n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  cr.ack();
  const c = track(cr.id);
  assert.equal(c.qpType, QpType.UC);
  c.createQp(null, { cap: { maxSendWr: 2, maxRecvWr: 2 } });
  assert.equal(c.qp.qpType, QpType.UC);
  await c.accept({});
  const { mad } = await peer.mad('REP');
  assert.equal(mad.msg.localQpn, c.qp.qpNum);
  const a = c.qp.query();
  assert.deepEqual([a.qpState, a.destQpNum, a.sqPsn, a.rqPsn], [QpState.RTS, 0x4242, 0x2222, mad.msg.startingPsn]);
  // The first UC packet at the REP's PSN establishes the connection (no RTU needed).
  peer.sendRc({ opcode: IbOpcode.UC_SEND_ONLY, destQp: c.qp.qpNum, psn: mad.msg.startingPsn, ackReq: true, payload: Buffer.from('x') });
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
});

test('rdma_create_id2: UD on RDMA_PS_IB is refused (EOPNOTSUPP), a type ibverbs lacks is EINVAL, and RDMA_PS_TCP ids are RC whatever is asked', () => {
  assert.throws(() => lib.createId(null, null, PortSpace.IB, { qpType: QpType.UD }), { code: 'EOPNOTSUPP' });
  assert.throws(() => lib.createId(null, null, PortSpace.IB, { qpType: 7 }), { code: 'EINVAL' });
  const tcp = lib.createId(null, null, PortSpace.TCP, { qpType: QpType.UC });
  assert.equal(tcp.qpType, QpType.RC);
  const udp = lib.createId(null, null, PortSpace.UDP, { qpType: QpType.UC });
  assert.equal(udp.qpType, QpType.UD);
  return Promise.all([tcp.destroy(), udp.destroy()]);
});
