// The connected IB CM of the soft RoCE device (RDMA_PS_TCP ids on rxe_lo) against a hand-made
// peer: a UDP socket at 127.0.0.2 on the RoCE port that reads the MADs (and RC packets) our side
// sends and answers with MADs it builds. Checks the messages on the wire (REQ, RTU, REP, REJ,
// MRA, DREQ, DREP), the CM state machine on both sides with every failure path (REJ reasons,
// retries and timeouts, MRA, duplicates, destroy at each stage, DREQ/DREP and TIMEWAIT), the PSN
// directions of the QPs it sets up, and what hostile MADs and a REQ flood do.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PORT, lib, wire, roce, until, Access, WcStatus } from '../../../../lib/roce.js';
import { expectEvent as expectCmEvent } from '../../../../lib/cm.js';
import { rawCmPeer, reqFrom, LOCAL, PEER, V4, GID } from '../../../../lib/raw-cm.js';

const { PortSpace, CmEventType, QpState, RdmaOption, serviceId } = lib;
const { cmAckTimeout } = await import('../../../../../dist/transport/roce/cm/timing.js');
const { CmRejReason, CmMsgRef, IbOpcode, AethSyndrome } = wire;
roce.configureRcCm({ cmTimeoutMs: 150, cmRetries: 2, timewaitMs: 60 });

let nextPort = 30000 + Math.floor(Math.random() * 20000);

/** The next event, of `type`; its id (a request's child) is destroyed with the test's others. */
const expectEvent = (ch, type, ms = 3000) => expectCmEvent(ch, type, ms, { seen: (ev) => ev.id && made.ids.add(ev.id) });

/** No event on `ch` for `ms`. */
async function noEvent(ch, ms = 200) {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(), ms);
  try {
    const ev = await ch.getEvent(ac.signal);
    assert.fail(`unexpected ${lib.rdmaEventStr(ev.event)}`);
  } catch (e) {
    if (e?.code === 'ERR_ASSERTION') throw e;
  } finally {
    clearTimeout(t);
  }
}

// Everything a test makes is released after it, also when an assertion failed half-way: a QP
// left alive holds the device's sockets, and so the event loop, open (as a TCP socket would).
const peers = [];
const made = { ids: new Set(), chans: new Set(), cleanups: [] };
function createEventChannel() {
  const ch = lib.createEventChannel();
  made.chans.add(ch);
  return ch;
}
function createId(...a) {
  const id = lib.createId(...a);
  made.ids.add(id);
  return id;
}
test.afterEach(async () => {
  for (const p of peers.splice(0)) p.close();
  for (const f of made.cleanups.splice(0)) {
    try {
      f();
    } catch {
      // released by the test already
    }
  }
  for (const id of made.ids) {
    try {
      if (id.qp) id.destroyQp();
    } catch {
      // already gone
    }
    // rdma_destroy_id waits for the id's events to be acknowledged: not for ever here
    await Promise.race([id.destroy().catch(() => {}), new Promise((r) => setTimeout(r, 500))]);
  }
  made.ids.clear();
  for (const ch of made.chans) {
    try {
      ch.destroy();
    } catch {
      // already destroyed
    }
  }
  made.chans.clear();
});

/** The raw peer at 127.0.0.2 (or `addr`), closed after each test. */
async function rawPeer(addr = PEER) {
  const peer = await rawCmPeer(PORT, { peer: addr });
  peers.push(peer);
  return peer;
}

/** An RC id on rxe_lo resolved to the peer, with a QP in INIT. */
async function activeId(ch, port, qp = true) {
  const id = createId(ch, null, PortSpace.TCP, { device: 'rxe_lo' });
  await id.resolveAddr({ address: LOCAL, port: 0 }, { address: PEER, port }, 2000);
  (await expectEvent(ch, CmEventType.ADDR_RESOLVED)).ack();
  await id.resolveRoute(2000);
  (await expectEvent(ch, CmEventType.ROUTE_RESOLVED)).ack();
  if (qp) id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  return id;
}

/** A REP answering REQ `req` from the peer. */
function repFor(req, { commId = 0x7000 + Math.floor(Math.random() * 1e6), qpn = 0x5151, psn = 0x777, ird = 1, ord = 1, pd = Buffer.from('rep data'), targetAckDelay = 15, rnrRetryCount = 7 } = {}) {
  return {
    kind: 'REP',
    localCommId: commId,
    remoteCommId: req.localCommId,
    localQkey: 0,
    localQpn: qpn,
    vendorId: 0,
    localEecn: 0,
    startingPsn: psn,
    responderResources: ird,
    initiatorDepth: ord,
    targetAckDelay,
    failoverAccepted: 0,
    e2eFlowControl: false,
    rnrRetryCount,
    srq: false,
    localCaGuid: 0x0200000000000001n,
    privateData: pd,
  };
}

// -- active side --------------------------------------------------------------------------------

test('active: the REQ on the wire (service ID, CMA header, QPN, PSN, IRD/ORD, path, timeouts), REP → QP to RTS with the PSNs both ways → RTU → ESTABLISHED', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const port = nextPort++;
  const id = await activeId(ch, port);
  await id.connect({ privateData: Buffer.from('hello'), responderResources: 3, initiatorDepth: 2, retryCount: 5, rnrRetryCount: 6 });
  const { mad, madBytes } = await peer.mad('REQ');
  const q = mad.msg;
  assert.equal(mad.hdr.classVersion, 2);
  assert.equal(mad.hdr.tid >> 32n, 2n, 'TID: agent 2 in the high word');
  assert.equal(q.serviceId, 0x0000000001060000n | BigInt(port));
  assert.equal(q.localQpn, id.qp.qpNum);
  assert.deepEqual([q.responderResources, q.initiatorDepth, q.retryCount, q.rnrRetryCount], [3, 2, 5, 6]);
  assert.deepEqual([q.transportType, q.pkey, q.remoteCmResponseTimeout, q.localCmResponseTimeout, q.maxCmRetries], [0, 0xffff, 20, 20, 15]);
  assert.equal(q.pathMtu, 5, 'lo: MTU 65536 → 4096');
  const p = q.primaryPath;
  assert.deepEqual([p.localLid, p.remoteLid, p.hopLimit, p.subnetLocal], [0xffff, 0xffff, 64, false]);
  assert.equal(p.localAckTimeout, 19, 'cm_ack_timeout(rxe ACK delay 15, RoCE packet lifetime 18), as Linux 6.1 sends');
  assert.equal(madBytes[24 + 95] >> 3, 19, 'REQ byte 95, bits 7..3: the primary local ACK timeout');
  assert.deepEqual(p.localGid, GID(LOCAL));
  assert.deepEqual(p.remoteGid, GID(PEER));
  const h = wire.decodeCmaHeader(q.privateData);
  assert.deepEqual([h.version, h.ipVersion, [...h.src], [...h.dst]], [0, 4, [127, 0, 0, 1], [127, 0, 0, 2]]);
  assert.equal(p.flowLabel, wire.cmaRoceFlowLabel(h.srcPort, port));
  assert.equal(Buffer.from(q.privateData.subarray(36, 41)).toString(), 'hello');
  assert.equal(q.privateData.length, 92);
  assert.equal(id.qp.state, QpState.INIT);
  // REP: the peer's QPN and the PSN it expects to receive first
  const rep = repFor(q, { ird: 2, ord: 1, psn: 0xabcde });
  peer.sendMad(rep, mad.hdr.tid);
  const est = await expectEvent(ch, CmEventType.ESTABLISHED);
  assert.equal(Buffer.from(est.param.conn.privateData.subarray(0, 8)).toString(), 'rep data');
  assert.equal(est.param.conn.privateData.length, 196);
  assert.deepEqual([est.param.conn.responderResources, est.param.conn.initiatorDepth], [1, 2], 'the REP values swapped into this side');
  est.ack();
  const { mad: rtu } = await peer.mad('RTU');
  assert.deepEqual([rtu.msg.localCommId, rtu.msg.remoteCommId], [q.localCommId, rep.localCommId]);
  assert.equal(rtu.hdr.tid, mad.hdr.tid);
  const a = id.qp.query();
  assert.equal(a.qpState, QpState.RTS);
  assert.deepEqual([a.destQpNum, a.sqPsn, a.rqPsn, a.pathMtu, a.timeout, a.maxRdAtomic, a.maxDestRdAtomic], [0x5151, 0xabcde, q.startingPsn, 5, 19, 2, 1]);
  assert.equal(a.qpAccessFlags, Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC);
  // Data: our first request carries the REP's starting PSN; the peer's the REQ's.
  const mr = id.pd.regMr(Buffer.from('ping'), 0);
  id.qp.postSend({ wrId: 1, opcode: lib.WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 4, lkey: mr.lkey }] });
  const send = await peer.next((x) => x.spec.opcode === IbOpcode.RC_SEND_ONLY);
  assert.deepEqual([send.spec.destQp, send.spec.psn, send.spec.ackReq], [0x5151, 0xabcde, true]);
  assert.equal(Buffer.from(send.spec.payload).toString(), 'ping');
  peer.sendRc({ opcode: IbOpcode.RC_SEND_ONLY, destQp: id.qp.qpNum, psn: q.startingPsn, ackReq: true, payload: Buffer.from('pong') });
  const ack = await peer.next((x) => x.spec.opcode === IbOpcode.RC_ACKNOWLEDGE && x.spec.destQp === 0x5151 && x.spec.psn === q.startingPsn);
  // no receive posted: an RNR NAK at that PSN (not a sequence NAK: the PSN was the expected one)
  assert.equal(ack.spec.aeth.syndrome & 0xe0, AethSyndrome.RNR_NAK);
  // A repeated REP (our RTU lost): the RTU again
  peer.sendMad(rep, mad.hdr.tid);
  await peer.mad('RTU');
  // Disconnect from here: QP to ERR, DREQ with the peer's QPN; DREP → DISCONNECTED; then TIMEWAIT_EXIT
  await id.disconnect();
  assert.equal(id.qp.state, QpState.ERR);
  const { mad: dreq } = await peer.mad('DREQ');
  assert.deepEqual([dreq.msg.localCommId, dreq.msg.remoteCommId, dreq.msg.remoteQpn], [q.localCommId, rep.localCommId, 0x5151]);
  peer.sendMad({ kind: 'DREP', localCommId: rep.localCommId, remoteCommId: q.localCommId, privateData: new Uint8Array(0) }, dreq.hdr.tid);
  (await expectEvent(ch, CmEventType.DISCONNECTED)).ack();
  (await expectEvent(ch, CmEventType.TIMEWAIT_EXIT)).ack();
  id.destroyQp();
  await id.destroy();
  ch.destroy();
  peer.close();
});

// The REQ and REP of rping between two Linux 6.1 hosts over rdma_rxe (a capture): BTH + DETH, then the MAD.
const KERNEL_REQ = '6400ffff0000000180000007800100000000000101070203000000000000000271e642ee0010000000000000ee42e671000000000000000001061c06505400fffe77000300000000000000000000150100000001000000a0c42fbca7ffff37f0ffffffff00000000000000000000ffff0a4d000300000000000000000000ffff0a4d00029fe650000040009800000000000000000000000000000000000000000000000000000000000000000000000000000000000000000040d5c10000000000000000000000000a4d00030000000000000000000000000a4d0002';
const KERNEL_REP = '6400ffff0000000180000005800100000000000101070203000000000000000271e642ee001300000000000086473a22ee42e671000000000000150000000000621b3a00010178e0505400fffe770002';
const kernelMad = (h) => wire.decodeCmMad(Buffer.concat([Buffer.from(h, 'hex'), Buffer.alloc(276 - h.length / 2)]).subarray(20, 276)).msg;
/** The fields of a REQ that depend on neither the hosts, the ids, the random PSN nor the interface MTU. */
const reqFields = (q) => {
  const p = q.primaryPath;
  return {
    vendorId: q.vendorId, localQkey: q.localQkey, localEecn: q.localEecn, remoteEecn: q.remoteEecn, responderResources: q.responderResources, initiatorDepth: q.initiatorDepth,
    remoteCmResponseTimeout: q.remoteCmResponseTimeout, localCmResponseTimeout: q.localCmResponseTimeout, maxCmRetries: q.maxCmRetries, transportType: q.transportType,
    e2eFlowControl: q.e2eFlowControl, srq: q.srq, rdcExists: q.rdcExists, extendedTransportType: q.extendedTransportType, retryCount: q.retryCount, rnrRetryCount: q.rnrRetryCount,
    pkey: q.pkey, sapSupported: q.sapSupported, hasAlt: wire.cmReqHasAltPath(q), pdLen: q.privateData.length,
    path: { localLid: p.localLid, remoteLid: p.remoteLid, hopLimit: p.hopLimit, trafficClass: p.trafficClass, sl: p.sl, subnetLocal: p.subnetLocal, packetRate: p.packetRate, localAckTimeout: p.localAckTimeout },
  };
};
const repFields = (r) => ({
  vendorId: r.vendorId, localQkey: r.localQkey, localEecn: r.localEecn, responderResources: r.responderResources, initiatorDepth: r.initiatorDepth, targetAckDelay: r.targetAckDelay,
  failoverAccepted: r.failoverAccepted, e2eFlowControl: r.e2eFlowControl, rnrRetryCount: r.rnrRetryCount, srq: r.srq, pdLen: r.privateData.length,
});

test('with rping\'s parameters our REQ and REP carry what a Linux 6.1 rdma_cm over rxe puts in them (every field but addresses, IDs, PSNs and the MTU)', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  // rping's client: one READ each way, retry and RNR retry 7
  const id = await activeId(ch, nextPort++);
  await id.connect({ responderResources: 1, initiatorDepth: 1, retryCount: 7, rnrRetryCount: 7 });
  const { mad } = await peer.mad('REQ');
  assert.deepEqual(reqFields(mad.msg), reqFields(kernelMad(KERNEL_REQ)));
  await id.destroy();
  // rping's server accepts with one READ each way
  const { l, port } = await listener(ch);
  const req = reqFrom(port);
  peer.sendMad(req, 0x88n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  const c = cr.id;
  cr.ack();
  c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  await c.accept({ responderResources: 1, initiatorDepth: 1 });
  const { mad: rep } = await peer.mad('REP');
  assert.deepEqual(repFields(rep.msg), repFields(kernelMad(KERNEL_REP)));
  c.destroyQp();
  await c.destroy();
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('cm.c cm_ack_timeout: the local ACK timeout from a CA ACK delay and a packet lifetime', () => {
  // max(ack delay, lifetime + 1), plus one when the other is within a factor of two; at most 31.
  for (const [delay, life, want] of [
    [15, 18, 19],
    [15, 16, 17],
    [15, 13, 16],
    [15, 12, 15],
    [15, 14, 16],
    [20, 18, 21],
    [0, 0, 2],
    [15, 0, 15],
    [31, 31, 31],
  ]) assert.equal(cmAckTimeout(delay, life), want, `cm_ack_timeout(${delay}, ${life})`);
});

test('active: the QP timeout follows the REP\'s target ACK delay (cm_rep_handler); RDMA_OPTION_ID_ACK_TIMEOUT sets the path lifetime and the QP timeout', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  for (const [opt, tad, wantReq, wantQp] of [
    [-1, 20, 19, 21], // cm_ack_timeout(20, 18)
    [-1, 5, 19, 19], // cm_ack_timeout(5, 18)
    [14, 15, 16, 14], // lifetime 13: cm_ack_timeout(15, 13) in the REQ; the option on the QP
    [0, 15, 19, 0], // timeout 0 leaves the lifetime at 18 but is the QP's
  ]) {
    const id = await activeId(ch, nextPort++);
    if (opt >= 0) id.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_ACK_TIMEOUT, opt);
    await id.connect({});
    const { mad } = await peer.mad('REQ');
    assert.equal(mad.msg.primaryPath.localAckTimeout, wantReq, `REQ with option ${opt}`);
    peer.sendMad(repFor(mad.msg, { targetAckDelay: tad }), mad.hdr.tid);
    (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
    await peer.mad('RTU');
    assert.equal(id.qp.query().timeout, wantQp, `QP timeout with option ${opt}, target ACK delay ${tad}`);
    id.destroyQp();
    await id.destroy();
    await peer.mad('DREQ');
  }
  ch.destroy();
  peer.close();
});

test('retry counts and path as cm.c: the passive QP takes retry_cnt, rnr_retry and the traffic class from the REQ, its REP carries the acceptor\'s RNR retry count; the active QP takes the REP\'s RNR retry count', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  const req = reqFrom(port, { retryCount: 3, rnrRetryCount: 2, trafficClass: 0x68 });
  peer.sendMad(req, 0x77n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  const c = cr.id;
  cr.ack();
  c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  await c.accept({ rnrRetryCount: 5, retryCount: 6 });
  const { mad } = await peer.mad('REP');
  assert.equal(mad.msg.rnrRetryCount, 5, 'the REP: the acceptor\'s RNR retry count (cma_accept_ib)');
  const a = c.qp.query();
  assert.deepEqual([a.retryCnt, a.rnrRetry], [3, 2], 'the passive QP: the REQ\'s counts (cm_req_handler)');
  assert.deepEqual([a.ahAttr.grh.trafficClass, a.ahAttr.grh.flowLabel], [0x68, 1234], 'the passive QP\'s path: the REQ\'s traffic class and flow label');
  peer.sendMad({ kind: 'RTU', localCommId: req.localCommId, remoteCommId: mad.msg.localCommId, privateData: new Uint8Array(0) }, 0x77n);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  c.destroyQp();
  await c.destroy();
  await peer.mad('DREQ');
  await l.destroy();
  // the active side: its own retry count, the REP's RNR retry count
  const id = await activeId(ch, nextPort++);
  await id.connect({ retryCount: 4, rnrRetryCount: 6 });
  const { mad: rq } = await peer.mad('REQ');
  assert.deepEqual([rq.msg.retryCount, rq.msg.rnrRetryCount], [4, 6]);
  peer.sendMad(repFor(rq.msg, { rnrRetryCount: 1 }), rq.hdr.tid);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  const b = id.qp.query();
  assert.deepEqual([b.retryCnt, b.rnrRetry], [4, 1]);
  id.destroyQp();
  await id.destroy();
  await peer.mad('DREQ');
  ch.destroy();
  peer.close();
});

test('passive: the QP timeout is the REQ\'s local ACK timeout (lifetime = value − 1, not below 0; timeout = lifetime + 1), or the accepting id\'s RDMA_OPTION_ID_ACK_TIMEOUT', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  for (const [reqTimeout, opt, want] of [
    [19, -1, 19],
    [14, -1, 14],
    [0, -1, 1],
    [19, 12, 12],
  ]) {
    const req = reqFrom(port, { ackTimeout: reqTimeout });
    peer.sendMad(req, 0x99n);
    const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
    const c = cr.id;
    cr.ack();
    if (opt >= 0) c.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_ACK_TIMEOUT, opt);
    c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
    await c.accept({});
    const { mad } = await peer.mad('REP');
    assert.equal(mad.msg.targetAckDelay, 15, 'rxe\'s CA ACK delay');
    assert.equal(c.qp.query().timeout, want, `REQ local ACK timeout ${reqTimeout}, option ${opt}`);
    peer.sendMad({ kind: 'RTU', localCommId: req.localCommId, remoteCommId: mad.msg.localCommId, privateData: new Uint8Array(0) }, 0x99n);
    (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
    c.destroyQp();
    await c.destroy();
    await peer.mad('DREQ');
  }
  await l.destroy();
  ch.destroy();
  peer.close();
});

for (const [reason, pd] of [
  [CmRejReason.INVALID_SERVICE_ID, Buffer.alloc(0)],
  [CmRejReason.CONSUMER_DEFINED, Buffer.from('go away')],
  [CmRejReason.STALE_CONN, Buffer.alloc(0)],
]) {
  test(`active: REJ reason ${reason} → REJECTED with status ${reason} and the 148 private bytes; QP to ERR; the id may connect again`, async () => {
    const peer = await rawPeer();
    const ch = createEventChannel();
    const id = await activeId(ch, nextPort++);
    await id.connect({ privateData: Buffer.from('x') });
    const { mad } = await peer.mad('REQ');
    peer.sendMad({ kind: 'REJ', localCommId: 0, remoteCommId: mad.msg.localCommId, messageRejected: CmMsgRef.REQ, ariLength: 0, reason, ari: new Uint8Array(0), privateData: pd }, mad.hdr.tid);
    const ev = await expectEvent(ch, CmEventType.REJECTED);
    assert.equal(ev.status, reason);
    assert.equal(ev.param.conn.privateData.length, 148);
    assert.equal(Buffer.from(ev.param.conn.privateData.subarray(0, pd.length)).toString(), pd.toString());
    ev.ack();
    assert.equal(id.qp.state, QpState.ERR);
    assert.equal(id.state, lib.CmState.ROUTE_RESOLVED);
    await noEvent(ch, 400); // no REQ retry, no UNREACHABLE
    assert.equal(peer.count('REQ'), 0);
    id.destroyQp();
    await id.destroy();
    ch.destroy();
    peer.close();
  });
}

test('active: no answer → the REQ is resent cmRetries times every cmTimeoutMs, then UNREACHABLE -ETIMEDOUT', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++);
  const t0 = Date.now();
  await id.connect();
  const ev = await expectEvent(ch, CmEventType.UNREACHABLE, 3000);
  const took = Date.now() - t0;
  assert.equal(ev.status, -110);
  ev.ack();
  assert.ok(took >= 3 * 150 - 20 && took < 1500, `${took} ms`);
  assert.equal(peer.count('REQ'), 3, 'the REQ and two retries');
  const ids = new Set(peer.inbox.filter((x) => x.mad?.msg.kind === 'REQ').map((x) => x.mad.msg.localCommId));
  assert.equal(ids.size, 1, 'a resend is the same REQ');
  id.destroyQp();
  await id.destroy();
  ch.destroy();
  peer.close();
});

test('active: an MRA stretches the wait by its service timeout; the REP after it still connects', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++);
  await id.connect();
  const { mad } = await peer.mad('REQ');
  // service timeout 12: 2^(12-8) = 16 ms, plus the path's 2^(18-8) ms: about a second of quiet
  peer.sendMad({ kind: 'MRA', localCommId: 0x99, remoteCommId: mad.msg.localCommId, messageMraed: CmMsgRef.REQ, serviceTimeout: 12, privateData: new Uint8Array(0) }, mad.hdr.tid);
  await new Promise((r) => setTimeout(r, 600));
  assert.equal(peer.count('REQ'), 0, 'no resend while the peer asked for time');
  peer.sendMad(repFor(mad.msg), mad.hdr.tid);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  id.destroyQp();
  await id.destroy();
  await peer.mad('DREQ');
  ch.destroy();
  peer.close();
});

test('active without a QP on the id: CONNECT_RESPONSE, rdma_establish sends the RTU; QPs the application names are not moved', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++, false);
  const ctx = id.verbs;
  const pd = ctx.allocPd();
  const cq = ctx.createCq(4);
  const own = pd.createQp({ qpType: lib.QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } });
  made.cleanups.push(() => own.destroy());
  await id.connect({ qpNum: own.qpNum });
  const { mad } = await peer.mad('REQ');
  assert.equal(mad.msg.localQpn, own.qpNum);
  peer.sendMad(repFor(mad.msg), mad.hdr.tid);
  const ev = await expectEvent(ch, CmEventType.CONNECT_RESPONSE);
  ev.ack();
  assert.equal(own.state, QpState.RESET, 'the CM leaves the application\'s QP alone');
  assert.equal(peer.count('RTU'), 0);
  id.establish();
  await peer.mad('RTU');
  own.destroy();
  cq.destroy();
  pd.dealloc();
  await id.destroy();
  ch.destroy();
  peer.close();
});

test('active: rdma_destroy_id while the REQ waits → REJ "timeout" (4) to the peer; after ESTABLISHED → a DREQ', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++);
  await id.connect();
  const { mad } = await peer.mad('REQ');
  id.destroyQp();
  await id.destroy();
  const { mad: rej } = await peer.mad('REJ');
  assert.deepEqual([rej.msg.reason, rej.msg.localCommId, rej.msg.messageRejected], [CmRejReason.TIMEOUT, mad.msg.localCommId, CmMsgRef.REQ]);
  assert.deepEqual([rej.msg.ariLength, Buffer.from(rej.msg.ari.subarray(0, 8)).readBigUInt64BE(0)], [8, mad.msg.localCaGuid], 'ARI: the CA GUID (cm.c)');
  const id2 = await activeId(ch, nextPort++);
  await id2.connect();
  const r2 = await peer.mad('REQ');
  peer.sendMad(repFor(r2.mad.msg, { qpn: 0x6161 }), r2.mad.hdr.tid);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  id2.destroyQp();
  await id2.destroy();
  const { mad: dreq } = await peer.mad('DREQ');
  assert.equal(dreq.msg.remoteQpn, 0x6161);
  ch.destroy();
  peer.close();
});

test('a DREQ from the peer → DISCONNECTED; our rdma_disconnect answers DREP; a repeated DREQ in TIMEWAIT gets the DREP again; one for no connection gets one too', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++);
  await id.connect();
  const { mad } = await peer.mad('REQ');
  const rep = repFor(mad.msg, { qpn: 0x7171 });
  peer.sendMad(rep, mad.hdr.tid);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  const dreq = { kind: 'DREQ', localCommId: rep.localCommId, remoteCommId: mad.msg.localCommId, remoteQpn: id.qp.qpNum, privateData: new Uint8Array(0) };
  // a DREQ naming another QPN is not ours
  peer.sendMad({ ...dreq, remoteQpn: id.qp.qpNum ^ 1 }, mad.hdr.tid);
  await noEvent(ch, 200);
  peer.sendMad(dreq, mad.hdr.tid);
  (await expectEvent(ch, CmEventType.DISCONNECTED)).ack();
  assert.equal(peer.count('DREP'), 0, 'the DREP waits for the application');
  await id.disconnect();
  assert.equal(id.qp.state, QpState.ERR);
  const { mad: drep } = await peer.mad('DREP');
  assert.deepEqual([drep.msg.localCommId, drep.msg.remoteCommId], [mad.msg.localCommId, rep.localCommId]);
  peer.sendMad(dreq, mad.hdr.tid);
  await peer.mad('DREP');
  (await expectEvent(ch, CmEventType.TIMEWAIT_EXIT)).ack();
  peer.sendMad({ ...dreq, remoteCommId: 0x31337 }, 77n);
  const { mad: d3 } = await peer.mad('DREP');
  assert.equal(d3.msg.localCommId, 0x31337);
  id.destroyQp();
  await id.destroy();
  ch.destroy();
  peer.close();
});

test('active: our DREQ unanswered → resent, then DISCONNECTED -ETIMEDOUT', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++);
  await id.connect();
  const { mad } = await peer.mad('REQ');
  peer.sendMad(repFor(mad.msg), mad.hdr.tid);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  await id.disconnect();
  const ev = await expectEvent(ch, CmEventType.DISCONNECTED, 3000);
  assert.equal(ev.status, -110);
  ev.ack();
  assert.equal(peer.count('DREQ'), 3);
  id.destroyQp();
  await id.destroy();
  ch.destroy();
  peer.close();
});

test('active: a REP the QP cannot take (responder resources beyond the device) → CONNECT_ERROR -EINVAL, REJ 28 of the REP to the peer', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++);
  await id.connect();
  const { mad } = await peer.mad('REQ');
  const rep = repFor(mad.msg, { ird: 255 });
  peer.sendMad(rep, mad.hdr.tid);
  const ev = await expectEvent(ch, CmEventType.CONNECT_ERROR);
  assert.equal(ev.status, -22);
  ev.ack();
  const { mad: rej } = await peer.mad('REJ');
  assert.deepEqual([rej.msg.reason, rej.msg.messageRejected, rej.msg.localCommId, rej.msg.remoteCommId], [CmRejReason.CONSUMER_DEFINED, CmMsgRef.REP, mad.msg.localCommId, rep.localCommId]);
  assert.equal(peer.count('RTU'), 0);
  id.destroyQp();
  await id.destroy();
  ch.destroy();
  peer.close();
});

test('passive: the requester rejects our REP (REJ of the REP, both IDs) → REJECTED on the accepted id with its reason, the QP to ERR, no more REPs', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  const req = reqFrom(port);
  const cr = await acceptFromPeer(peer, ch, req, 8n);
  const { mad } = await peer.mad('REP');
  // first a REJ naming the REP but not our ID: not ours to take
  const rej = { kind: 'REJ', localCommId: req.localCommId, remoteCommId: mad.msg.localCommId, messageRejected: CmMsgRef.REP, ariLength: 0, reason: CmRejReason.INSUFFICIENT_RESP_RESOURCES, ari: new Uint8Array(0), privateData: Buffer.from('too few') };
  peer.sendMad({ ...rej, localCommId: req.localCommId + 1 }, 8n);
  await noEvent(ch, 100);
  peer.sendMad(rej, 8n);
  const ev = await expectEvent(ch, CmEventType.REJECTED);
  assert.equal(ev.status, CmRejReason.INSUFFICIENT_RESP_RESOURCES);
  assert.equal(Buffer.from(ev.param.conn.privateData.subarray(0, 7)).toString(), 'too few');
  ev.ack();
  assert.equal(cr.id.qp.state, QpState.ERR);
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(peer.count('REP'), 0, 'the REP is no longer resent');
  cr.id.destroyQp();
  await cr.id.destroy();
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('out-of-state and forged MADs on an established connection: REJ of the REQ, REJ from another ID, REP from another ID, DREP without DREQ, MRA — dropped and counted; the connection stays up', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++);
  await id.connect();
  const { mad } = await peer.mad('REQ');
  const rep = repFor(mad.msg, { qpn: 0x8181 });
  peer.sendMad(rep, mad.hdr.tid);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  await peer.mad('RTU');
  const me = mad.msg.localCommId;
  const c0 = roce.counters('rxe_lo').rcvd_mad_unroutable_drop;
  const rej = { kind: 'REJ', localCommId: rep.localCommId, remoteCommId: me, ariLength: 0, ari: new Uint8Array(0), privateData: new Uint8Array(0) };
  // cm.c finds the connection of a REJ of a REQ by our ID alone, and only while the peer's is unknown
  peer.sendMad({ ...rej, messageRejected: CmMsgRef.REQ, reason: CmRejReason.CONSUMER_DEFINED }, mad.hdr.tid);
  peer.sendMad({ ...rej, localCommId: rep.localCommId + 1, messageRejected: CmMsgRef.REP, reason: CmRejReason.CONSUMER_DEFINED }, mad.hdr.tid);
  peer.sendMad({ ...rep, localCommId: rep.localCommId + 1 }, mad.hdr.tid);
  peer.sendMad({ kind: 'DREP', localCommId: rep.localCommId, remoteCommId: me, privateData: new Uint8Array(0) }, mad.hdr.tid);
  peer.sendMad({ kind: 'MRA', localCommId: rep.localCommId, remoteCommId: me, messageMraed: CmMsgRef.REP, serviceTimeout: 20, privateData: new Uint8Array(0) }, mad.hdr.tid);
  await until(() => roce.counters('rxe_lo').rcvd_mad_unroutable_drop - c0 >= 5, 2000);
  await noEvent(ch, 200);
  assert.equal(roce.counters('rxe_lo').rcvd_mad_unroutable_drop - c0, 5);
  assert.equal(id.qp.state, QpState.RTS);
  assert.equal(peer.count('RTU') + peer.count('REJ') + peer.count('DREQ'), 0, 'nothing answered');
  // the real peer's REJ (of the REP, both IDs right) still ends it
  peer.sendMad({ ...rej, messageRejected: CmMsgRef.REP, reason: CmRejReason.CONSUMER_DEFINED }, mad.hdr.tid);
  const ev = await expectEvent(ch, CmEventType.REJECTED);
  assert.equal(ev.status, CmRejReason.CONSUMER_DEFINED);
  ev.ack();
  assert.equal(id.qp.state, QpState.ERR);
  id.destroyQp();
  await id.destroy();
  ch.destroy();
  peer.close();
});

test('an established connection takes replies only from its peer: REP, REJ, MRA, DREQ, DREP, RTU naming both IDs from a third address, and REJ and DREQ from another QP of the peer, are dropped and counted (rcvd_mad_src_drop); nothing answered; the peer\'s own DREQ still ends it', async () => {
  const peer = await rawPeer();
  const intruder = await rawPeer('127.0.0.3');
  const ch = createEventChannel();
  const id = await activeId(ch, nextPort++);
  await id.connect();
  const { mad } = await peer.mad('REQ');
  const rep = repFor(mad.msg, { qpn: 0x8282 });
  peer.sendMad(rep, mad.hdr.tid);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  await peer.mad('RTU');
  const me = mad.msg.localCommId;
  const them = rep.localCommId;
  const none = new Uint8Array(0);
  const rej = { kind: 'REJ', localCommId: them, remoteCommId: me, messageRejected: CmMsgRef.REP, reason: CmRejReason.CONSUMER_DEFINED, ariLength: 0, ari: none, privateData: none };
  const dreq = { kind: 'DREQ', localCommId: them, remoteCommId: me, remoteQpn: id.qp.qpNum, privateData: none };
  const before = roce.counters('rxe_lo');
  intruder.sendMad(rep, mad.hdr.tid);
  intruder.sendMad(rej, mad.hdr.tid);
  intruder.sendMad({ kind: 'MRA', localCommId: them, remoteCommId: me, messageMraed: CmMsgRef.REP, serviceTimeout: 20, privateData: none }, mad.hdr.tid);
  intruder.sendMad(dreq, mad.hdr.tid);
  intruder.sendMad({ kind: 'DREP', localCommId: them, remoteCommId: me, privateData: none }, mad.hdr.tid);
  intruder.sendMad({ kind: 'RTU', localCommId: them, remoteCommId: me, privateData: none }, mad.hdr.tid);
  peer.sendMadFromQp(0x99, rej, mad.hdr.tid);
  peer.sendMadFromQp(0x99, dreq, mad.hdr.tid);
  await until(() => roce.counters('rxe_lo').rcvd_mad_src_drop - before.rcvd_mad_src_drop >= 8, 2000);
  await noEvent(ch, 200);
  const after = roce.counters('rxe_lo');
  assert.equal(after.rcvd_mad_src_drop - before.rcvd_mad_src_drop, 8);
  assert.equal(after.rcvd_mad_unroutable_drop - before.rcvd_mad_unroutable_drop, 0);
  assert.equal(id.qp.state, QpState.RTS);
  assert.equal(intruder.inbox.length, 0, 'nothing sent to the third address');
  assert.equal(peer.count('RTU') + peer.count('DREP') + peer.count('REJ'), 0, 'nothing sent to the peer');
  peer.sendMad(dreq, mad.hdr.tid);
  (await expectEvent(ch, CmEventType.DISCONNECTED)).ack();
  id.destroyQp();
  await id.destroy();
  await peer.mad('DREP');
  ch.destroy();
});

test('passive: an RTU from a third address does not establish the accepted connection; the peer\'s RTU does', async () => {
  const peer = await rawPeer();
  const intruder = await rawPeer('127.0.0.3');
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  const req = reqFrom(port);
  const cr = await acceptFromPeer(peer, ch, req, 0x31n);
  const { mad } = await peer.mad('REP');
  const rtu = { kind: 'RTU', localCommId: req.localCommId, remoteCommId: mad.msg.localCommId, privateData: new Uint8Array(0) };
  const before = roce.counters('rxe_lo').rcvd_mad_src_drop;
  intruder.sendMad(rtu, 0x31n);
  peer.sendMadFromQp(0x99, rtu, 0x31n);
  await until(() => roce.counters('rxe_lo').rcvd_mad_src_drop - before >= 2, 2000);
  await noEvent(ch, 200);
  peer.sendMad(rtu, 0x31n);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  cr.id.destroyQp();
  await cr.id.destroy();
  await l.destroy();
  ch.destroy();
});

// -- passive side -------------------------------------------------------------------------------

async function listener(ch, port = nextPort++) {
  const l = createId(ch, 'L', PortSpace.TCP, { device: 'rxe_lo' });
  l.bindAddr({ address: LOCAL, port });
  await l.listen(8);
  return { l, port };
}

/** Send `req` (transaction ID `tid`) from the peer; the listener's CONNECT_REQUEST, acknowledged, gets a QP and is accepted. */
async function acceptFromPeer(peer, ch, req, tid) {
  peer.sendMad(req, tid);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  cr.ack();
  cr.id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
  await cr.id.accept();
  return cr;
}

test('passive: a REQ for a port nobody listens on → REJ 8 (invalid service ID) naming the requester', async () => {
  const peer = await rawPeer();
  const req = reqFrom(nextPort++);
  peer.sendMad(req, 0x55n);
  const { mad } = await peer.mad('REJ');
  assert.deepEqual([mad.msg.reason, mad.msg.remoteCommId, mad.msg.messageRejected], [CmRejReason.INVALID_SERVICE_ID, req.localCommId, CmMsgRef.REQ]);
  assert.equal(mad.hdr.tid, 0x55n, 'the reply carries the request\'s TID');
  peer.close();
});

test('passive: REQ → CONNECT_REQUEST (56 bytes, IRD/ORD swapped, addresses) → accept → REP on the wire → RTU → ESTABLISHED; the QP sends from the REQ\'s PSN', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  const req = reqFrom(port, { pd: Buffer.from('from the peer'), ird: 4, ord: 2, psn: 0x10203 });
  peer.sendMad(req, 0x66n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  const c = cr.id;
  assert.equal(cr.listenId, l);
  assert.equal(cr.param.conn.privateData.length, 56);
  assert.equal(Buffer.from(cr.param.conn.privateData.subarray(0, 13)).toString(), 'from the peer');
  assert.deepEqual([cr.param.conn.responderResources, cr.param.conn.initiatorDepth, cr.param.conn.qpNum], [2, 4, 0x4242]);
  assert.deepEqual(c.peerAddr, { address: PEER, port: 5555, family: 'IPv4' });
  assert.deepEqual(c.localAddr, { address: LOCAL, port, family: 'IPv4' });
  cr.ack();
  c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  await c.accept({ privateData: Buffer.from('accepted'), responderResources: 2, initiatorDepth: 1 });
  const { mad } = await peer.mad('REP');
  const rep = mad.msg;
  assert.equal(mad.hdr.tid, 0x66n);
  assert.deepEqual([rep.remoteCommId, rep.localQpn, rep.responderResources, rep.initiatorDepth, rep.targetAckDelay], [req.localCommId, c.qp.qpNum, 2, 1, 15]);
  assert.equal(Buffer.from(rep.privateData.subarray(0, 8)).toString(), 'accepted');
  const a = c.qp.query();
  assert.deepEqual([a.qpState, a.destQpNum, a.sqPsn, a.rqPsn, a.pathMtu, a.timeout, a.retryCnt, a.maxRdAtomic, a.maxDestRdAtomic], [QpState.RTS, 0x4242, 0x10203, rep.startingPsn, 3, 19, 7, 1, 2]);
  // a repeated REQ after accept: the REP again
  peer.sendMad(req, 0x66n);
  await peer.mad('REP');
  peer.sendMad({ kind: 'RTU', localCommId: req.localCommId, remoteCommId: rep.localCommId, privateData: new Uint8Array(0) }, 0x66n);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  const mr = c.pd.regMr(Buffer.from('hi'), 0);
  c.qp.postSend({ wrId: 1, opcode: lib.WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 2, lkey: mr.lkey }] });
  const send = await peer.next((x) => x.spec.opcode === IbOpcode.RC_SEND_ONLY);
  assert.deepEqual([send.spec.destQp, send.spec.psn], [0x4242, 0x10203]);
  c.destroyQp();
  await c.destroy();
  await peer.mad('DREQ');
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('passive: before rdma_accept, rdma_init_qp_attr gives the REQ\'s resources in this side\'s perspective (cm_req_handler): its initiator depth as RTR\'s responder resources, its responder resources as RTS\'s initiator depth', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  peer.sendMad(reqFrom(port, { ird: 4, ord: 2 }), 0x67n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  cr.ack();
  assert.equal(cr.id.initQpAttr(QpState.RTR).attr.maxDestRdAtomic, 2);
  assert.equal(cr.id.initQpAttr(QpState.RTS).attr.maxRdAtomic, 4);
  cr.id.reject();
  await peer.mad('REJ');
  await cr.id.destroy();
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('passive: the first request on the QP establishes the connection when the RTU is lost', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  peer.sendMad(reqFrom(port), 1n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  const c = cr.id;
  cr.ack();
  c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  const mr = c.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  c.qp.postRecv({ wrId: 9, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
  await c.accept();
  const { mad } = await peer.mad('REP');
  peer.sendRc({ opcode: IbOpcode.RC_SEND_ONLY, destQp: c.qp.qpNum, psn: mad.msg.startingPsn, ackReq: true, payload: Buffer.from('data first') });
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  await until(() => c.qp.recvCq.poll(1).length === 1 || false, 1000);
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(peer.count('REP'), 0, 'no REP resend once established');
  c.destroyQp();
  await c.destroy();
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('passive: a request outside the PSN window (ahead or behind) does not establish the connection, even from the peer\'s address; the one at the REP\'s starting PSN does', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  peer.sendMad(reqFrom(port), 1n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  const c = cr.id;
  cr.ack();
  c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  const mr = c.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
  c.qp.postRecv({ wrId: 9, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
  await c.accept();
  const { mad } = await peer.mad('REP');
  const psn = mad.msg.startingPsn;
  for (const off of [1, 0x1234, -1, -0x4000]) {
    peer.sendRc({ opcode: IbOpcode.RC_SEND_ONLY, destQp: c.qp.qpNum, psn: (psn + off) & 0xffffff, ackReq: true, payload: Buffer.from('forged') });
  }
  await noEvent(ch, 250);
  assert.deepEqual(c.qp.recvCq.poll(1), [], 'nothing delivered');
  peer.sendRc({ opcode: IbOpcode.RC_SEND_ONLY, destQp: c.qp.qpNum, psn, ackReq: true, payload: Buffer.from('in order') });
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  await until(() => c.qp.recvCq.poll(1).length === 1 || false, 1000);
  c.destroyQp();
  await c.destroy();
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('passive: rdma_reject → REJ 28 with the private data; a repeated REQ before the answer gets an MRA; destroy of a pending request rejects it', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  const req = reqFrom(port);
  peer.sendMad(req, 2n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  peer.sendMad(req, 2n);
  const { mad: mra } = await peer.mad('MRA');
  assert.deepEqual([mra.msg.remoteCommId, mra.msg.messageMraed, mra.msg.serviceTimeout], [req.localCommId, CmMsgRef.REQ, 24]);
  cr.id.reject(Buffer.from('not today'));
  cr.ack();
  const { mad: rej } = await peer.mad('REJ');
  assert.equal(rej.msg.reason, CmRejReason.CONSUMER_DEFINED);
  assert.equal(Buffer.from(rej.msg.privateData.subarray(0, 9)).toString(), 'not today');
  await cr.id.destroy();
  const req2 = reqFrom(port);
  peer.sendMad(req2, 3n);
  const cr2 = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  cr2.ack();
  await cr2.id.destroy();
  const { mad: rej2 } = await peer.mad('REJ');
  assert.deepEqual([rej2.msg.reason, rej2.msg.remoteCommId], [CmRejReason.CONSUMER_DEFINED, req2.localCommId]);
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('passive: the requester gives up (REJ "timeout" naming its ID and CA GUID, not ours) → REJECTED 4 on the accepted id, no more REPs', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  const req = reqFrom(port);
  const cr = await acceptFromPeer(peer, ch, req, 6n);
  await peer.mad('REP');
  const ari = Buffer.alloc(8);
  ari.writeBigUInt64BE(req.localCaGuid);
  peer.sendMad({ kind: 'REJ', localCommId: req.localCommId, remoteCommId: 0, messageRejected: CmMsgRef.REQ, ariLength: 8, reason: CmRejReason.TIMEOUT, ari, privateData: new Uint8Array(0) }, 6n);
  const ev = await expectEvent(ch, CmEventType.REJECTED);
  assert.equal(ev.status, CmRejReason.TIMEOUT);
  ev.ack();
  assert.equal(cr.id.qp.state, QpState.ERR);
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(peer.count('REP'), 0, 'the REP is no longer resent');
  cr.id.destroyQp();
  await cr.id.destroy();
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('passive: the REP resent until the RTU, then UNREACHABLE -ETIMEDOUT on the accepted id', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  const cr = await acceptFromPeer(peer, ch, reqFrom(port), 4n);
  const ev = await expectEvent(ch, CmEventType.UNREACHABLE, 3000);
  assert.equal(ev.status, -110);
  ev.ack();
  assert.equal(peer.count('REP'), 3);
  cr.id.destroyQp();
  await cr.id.destroy();
  await l.destroy();
  ch.destroy();
  peer.close();
});

for (const [name, opts, reason] of [
  ['a GID that is not this port\'s', { gid: GID('127.0.0.9') }, CmRejReason.INVALID_GID],
  ['no CMA header version 0', { cma: new Uint8Array(92).fill(0x77) }, CmRejReason.CONSUMER_DEFINED],
  ['a UC transport type', { transportType: 1 }, CmRejReason.CONSUMER_DEFINED],
  ['a CMA header naming another address', { cma: wire.encodeCmaPrivateData({ version: 0, ipVersion: 4, srcPort: 1, src: V4(PEER), dst: V4('127.0.0.5') }) }, CmRejReason.CONSUMER_DEFINED],
]) {
  test(`passive: a REQ with ${name} → REJ ${reason}, no CONNECT_REQUEST`, async () => {
    const peer = await rawPeer();
    const ch = createEventChannel();
    const { l, port } = await listener(ch);
    peer.sendMad(reqFrom(port, opts), 5n);
    const { mad } = await peer.mad('REJ');
    assert.equal(mad.msg.reason, reason);
    await noEvent(ch, 150);
    await l.destroy();
    ch.destroy();
    peer.close();
  });
}

test('hostile MADs: wrong class version or method, REP/RTU/DREP/MRA for unknown connections, truncated MADs — dropped and counted, no events, no crash', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const { l, port } = await listener(ch);
  const before = roce.counters('rxe_lo');
  const c0 = before.rcvd_mad_unroutable_drop;
  const fake = { kind: 'REP', ...repFor({ localCommId: 0x424242 }) };
  peer.sendMad(fake, 1n);
  peer.sendMad({ kind: 'RTU', localCommId: 1, remoteCommId: 0x424243, privateData: new Uint8Array(0) }, 1n);
  peer.sendMad({ kind: 'DREP', localCommId: 1, remoteCommId: 0x424244, privateData: new Uint8Array(0) }, 1n);
  peer.sendMad({ kind: 'MRA', localCommId: 1, remoteCommId: 0x424245, messageMraed: 0, serviceTimeout: 1, privateData: new Uint8Array(0) }, 1n);
  peer.sendMad(reqFrom(port), 1n, { classVersion: 1 });
  peer.sendMad(reqFrom(port), 1n, { method: 0x81 });
  // random garbage behind a valid GSI header, and a short datagram for QP1
  const junk = new Uint8Array(256);
  for (let i = 0; i < junk.length; i++) junk[i] = (i * 37) & 0xff;
  junk[0] = 1;
  junk[1] = 7;
  junk[2] = 2;
  junk[3] = 3;
  junk[16] = 0;
  junk[17] = 0x13;
  peer.sendRaw(wire.encodeGsiPacket(junk, { family: 4, src: V4(PEER), dst: V4(LOCAL), sport: PORT, dport: PORT }, { psn: 9 }));
  peer.sendRaw(Buffer.from(wire.encodeGsiPacket(junk, { family: 4, src: V4(PEER), dst: V4(LOCAL), sport: PORT, dport: PORT }, { psn: 9 })).subarray(0, 100));
  await noEvent(ch, 300);
  // Seven MADs the CM cannot use: four for connections nobody has, two bad headers, the junk.
  // The short datagram never reaches the CM: the device drops it (its ICRC is cut off).
  await until(() => roce.counters('rxe_lo').rcvd_mad_unroutable_drop - c0 >= 7, 2000);
  const after = roce.counters('rxe_lo');
  assert.equal(after.rcvd_mad_unroutable_drop - c0, 7);
  const drops = (c) => Object.entries(c).reduce((n, [k, v]) => (k.startsWith('rcvd_') && k.endsWith('_drop') ? n + v : n), 0);
  assert.equal(drops(after) - drops(before), 8, 'every datagram dropped is counted once');
  // the listener still serves a proper request
  peer.sendMad(reqFrom(port), 2n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  cr.ack();
  await cr.id.destroy();
  await peer.mad('REJ');
  await l.destroy();
  ch.destroy();
  peer.close();
});

test('a REQ flood against a listener that accepts everything (rping -s -P): at most `backlog` half-open connections, the rest dropped without a REJ and counted; they end when the REP\'s resends run out, then a real client connects', async () => {
  const BACKLOG = 8;
  const FLOOD = 300;
  const peer = await rawPeer();
  const ch = createEventChannel();
  const port = nextPort++;
  const l = createId(ch, 'L', PortSpace.TCP, { device: 'rxe_lo' });
  l.bindAddr({ address: LOCAL, port });
  await l.listen(BACKLOG);
  // The persistent server: every CONNECT_REQUEST gets a QP and is accepted at once.
  const accepted = [];
  const events = [];
  let serving = true;
  const serve = (async () => {
    while (serving) {
      let ev;
      try {
        ev = await ch.getEvent(AbortSignal.timeout(200));
      } catch {
        continue;
      }
      made.ids.add(ev.id);
      events.push(lib.rdmaEventStr(ev.event));
      if (ev.event === CmEventType.CONNECT_REQUEST) {
        ev.id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
        accepted.push(ev.id);
        ev.ack();
        await ev.id.accept();
      } else ev.ack();
    }
  })();
  const c0 = roce.counters('rxe_lo');
  let most = 0;
  for (let i = 0; i < FLOOD; i++) {
    peer.sendMad(reqFrom(port, { commId: 0x100000 + i }), BigInt(i));
    if (i % 20 === 19) {
      await new Promise((r) => setImmediate(r));
      most = Math.max(most, roce.rcHalfOpen());
    }
  }
  await until(() => roce.counters('rxe_lo').rcvd_req_backlog_drop - c0.rcvd_req_backlog_drop + accepted.length >= FLOOD, 5000);
  most = Math.max(most, roce.rcHalfOpen());
  assert.equal(accepted.length, BACKLOG, 'one CONNECT_REQUEST per half-open slot');
  assert.equal(roce.counters('rxe_lo').rcvd_req_backlog_drop - c0.rcvd_req_backlog_drop, FLOOD - BACKLOG);
  assert.ok(most <= BACKLOG, `at most ${BACKLOG} half-open, saw ${most}`);
  assert.equal(roce.rcHalfOpen(), BACKLOG);
  assert.equal(peer.count('REJ'), 0, 'a REQ past the backlog gets no REJ (cm.c: -ENOMEM, "allow future retries")');
  // Nobody answers the REPs: each connection ends when its resends run out, freeing its slot.
  await until(() => events.filter((e) => e === 'RDMA_CM_EVENT_UNREACHABLE').length >= BACKLOG, 5000);
  assert.equal(roce.rcHalfOpen(), 0);
  // A real client now connects to the same listener.
  const cch = createEventChannel();
  const cid = createId(cch, null, PortSpace.TCP, { device: 'rxe_lo' });
  await cid.resolveAddr(null, { address: LOCAL, port }, 2000);
  (await expectEvent(cch, CmEventType.ADDR_RESOLVED)).ack();
  await cid.resolveRoute(2000);
  (await expectEvent(cch, CmEventType.ROUTE_RESOLVED)).ack();
  cid.createQp(null, {});
  await cid.connect();
  (await expectEvent(cch, CmEventType.ESTABLISHED)).ack();
  await until(() => events.includes('RDMA_CM_EVENT_ESTABLISHED'), 3000);
  assert.equal(accepted.length, BACKLOG + 1);
  assert.equal(roce.rcHalfOpen(), 0, 'an established connection is no longer half-open');
  serving = false;
  await serve;
  cid.destroyQp();
  await cid.destroy();
  for (const id of accepted) {
    id.destroyQp();
    await Promise.race([id.destroy().catch(() => {}), new Promise((r) => setTimeout(r, 500))]);
  }
  await l.destroy();
  void WcStatus;
});

test('rdma_notify as cm.c ib_cm_notify: COMM_EST establishes an accepted connection whose RTU is missing (ESTABLISHED follows), then EISCONN; LID_CHANGE taken once established; other events, ids without a connection: EINVAL', async () => {
  const peer = await rawPeer();
  const ch = createEventChannel();
  const idle = createId(ch, null, PortSpace.TCP, { device: 'rxe_lo' });
  assert.throws(() => idle.notify(lib.AsyncEventType.COMM_EST), { code: 'EINVAL' }, 'no device');
  idle.bindAddr({ address: LOCAL, port: 0 });
  assert.throws(() => idle.notify(lib.AsyncEventType.COMM_EST), { code: 'EINVAL' }, 'no ib_cm_id');
  const { port } = await listener(ch);
  const req = reqFrom(port);
  peer.sendMad(req, 0x99n);
  const cr = await expectEvent(ch, CmEventType.CONNECT_REQUEST);
  const c = cr.id;
  cr.ack();
  c.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  assert.throws(() => c.notify(lib.AsyncEventType.COMM_EST), { code: 'EINVAL' }, 'REQ_RCVD: nothing to establish');
  await c.accept({});
  const { mad: rep } = await peer.mad('REP');
  assert.throws(() => c.notify(lib.AsyncEventType.LID_CHANGE), { code: 'EINVAL' }, 'LID_CHANGE before established');
  assert.throws(() => c.notify(lib.AsyncEventType.QP_FATAL), { code: 'EINVAL' }, 'not an event the CM takes');
  c.notify(lib.AsyncEventType.COMM_EST);
  (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
  assert.throws(() => c.notify(lib.AsyncEventType.COMM_EST), { code: 'EISCONN', errno: 106 });
  c.notify(lib.AsyncEventType.LID_CHANGE);
  // the RTU arriving late changes nothing: no second ESTABLISHED
  peer.sendMad({ kind: 'RTU', localCommId: req.localCommId, remoteCommId: rep.msg.localCommId, privateData: new Uint8Array(0) }, rep.hdr.tid);
  await noEvent(ch);
});
