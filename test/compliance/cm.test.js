// rdma_cm on every device that connects RDMA_PS_TCP ids: event order on both sides, private data,
// IRD/ORD in each side's perspective, data and disconnect, errno mapping of wrong states and bad
// arguments, acknowledgement rules, event channels, migrate, IPv6, wildcard listeners; async
// (event channel) and sync (channel = null) modes. Ids are pinned to the device under test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createId, createEventChannel, PortSpace, CmEventType, CmState,
  Access, WrOpcode, SendFlags, WcStatus, QpState, RdmaOption, QpType,
  getCmTransport, TransportType, AsyncEventType,
} from '../../dist/index.js';
import { getProvider } from '../../dist/verbs/provider.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { nextEvent, syncAccept, syncPair } from '../lib/cm.js';
import { aborted } from '../lib/fake-provider.js';
import { until } from '../lib/wait.js';

/**
 * Private data as the peer sent it. The IB CM carries fixed-size fields, so RoCE reports the
 * whole field zero-padded (56 bytes for a REQ, 196 for a REP), as librdmacm does; iWARP exactly.
 */
function assertPrivateData(pd, text) {
  const b = Buffer.from(pd);
  assert.equal(b.subarray(0, text.length).toString(), text);
  assert.ok(b.subarray(text.length).every((x) => x === 0), 'zero padding after the data');
}

async function closePair({ id, child }) {
  // Both ends disconnect: on IB a synchronous rdma_disconnect returns with the DREP, which the
  // peer's rdma_disconnect sends.
  await Promise.all([id.disconnect(), child.disconnect()]);
  for (const x of [id, child]) {
    x.destroyQp();
    await x.destroy();
  }
}

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  test('async mode: full event sequence on both sides, private data both ways, data, disconnect', async () => {
    const sch = createEventChannel();
    const cch = createEventChannel();
    const listen = createId(sch, 'L', PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(2);
    assert.equal(listen.state, CmState.LISTEN);
    const id = createId(cch, 'C', PortSpace.TCP);
    await id.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort }, 2000);
    let ev = await nextEvent(cch);
    assert.equal(ev.event, CmEventType.ADDR_RESOLVED);
    assert.equal(ev.id, id);
    ev.ack();
    assert.equal(id.verbs.device.name, d.name, 'the pinned device');
    await id.resolveRoute(2000);
    ev = await nextEvent(cch);
    assert.equal(ev.event, CmEventType.ROUTE_RESOLVED);
    ev.ack();
    const qp = id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
    assert.equal(qp.state, QpState.INIT);
    await id.connect({ privateData: Buffer.from('hello from client'), responderResources: 2, initiatorDepth: 3 });

    ev = await nextEvent(sch);
    assert.equal(ev.event, CmEventType.CONNECT_REQUEST);
    assert.equal(ev.listenId, listen);
    assert.notEqual(ev.id, listen);
    assert.equal(ev.id.context, 'L', 'context copied from the listener');
    assertPrivateData(ev.param.conn.privateData, 'hello from client');
    // The requester's values in our perspective: its ORD (3) is what we answer, its IRD (2) bounds our ORD.
    assert.equal(ev.param.conn.responderResources, 3);
    assert.equal(ev.param.conn.initiatorDepth, 2);
    const child = ev.id;
    ev.ack();
    const sqp = child.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
    const rmr = child.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
    sqp.postRecv({ wrId: 'r1', sgList: [{ addr: rmr.addr, length: 64, lkey: rmr.lkey }] });
    await child.accept({ privateData: Buffer.from('welcome'), responderResources: 3, initiatorDepth: 2 });

    ev = await nextEvent(cch);
    assert.equal(ev.event, CmEventType.ESTABLISHED);
    assertPrivateData(ev.param.conn.privateData, 'welcome');
    ev.ack();
    ev = await nextEvent(sch);
    assert.equal(ev.event, CmEventType.ESTABLISHED, 'passive ESTABLISHED (iWARP P2P: after the RTR; IB: on the RTU)');
    assert.equal(ev.id, child);
    ev.ack();
    assert.equal(qp.state, QpState.RTS);
    assert.equal(sqp.state, QpState.RTS);

    const smr = id.pd.regMr(Buffer.from('ping'), 0);
    qp.postSend({ wrId: 's1', opcode: WrOpcode.SEND, sgList: [{ addr: smr.addr, length: 4, lkey: smr.lkey }], sendFlags: SendFlags.SIGNALED });
    const cq = child.recvCq;
    cq.reqNotify();
    let wc = cq.poll(1);
    if (wc.length === 0) {
      await child.recvCqChannel.getCqEvent();
      cq.ackEvents(1);
      wc = cq.poll(1);
    }
    assert.equal(wc[0].wrId, 'r1');
    assert.equal(wc[0].byteLen, 4);
    assert.equal(Buffer.from(rmr.buf.subarray(0, 4)).toString(), 'ping');

    // Disconnect from the client: DISCONNECTED on both sides, pending receives flushed once the
    // server disconnects too (iWARP: already done, a no-op librdmacm tolerates; IB: the DREP,
    // which brings the client its DISCONNECTED).
    sqp.postRecv({ wrId: 'r2', sgList: [{ addr: rmr.addr, length: 64, lkey: rmr.lkey }] });
    await id.disconnect();
    ev = await nextEvent(sch);
    assert.equal(ev.event, CmEventType.DISCONNECTED);
    assert.equal(ev.id, child);
    ev.ack();
    await child.disconnect();
    ev = await nextEvent(cch);
    assert.equal(ev.event, CmEventType.DISCONNECTED);
    ev.ack();
    wc = child.recvCq.poll(4);
    assert.equal(wc.length, 1);
    assert.equal(wc[0].status, WcStatus.WR_FLUSH_ERR);
    for (const x of [id, child]) {
      x.destroyQp();
      await x.destroy();
    }
    await listen.destroy();
    sch.destroy();
    cch.destroy();
  });

  test('wrong state and bad arguments give errno-style errors', async () => {
    const id = createId(null, null, PortSpace.TCP);
    await assert.rejects(id.resolveRoute(), { code: 'EINVAL' });
    await assert.rejects(id.connect(), { code: 'EINVAL' });
    await assert.rejects(id.accept(), { code: 'EINVAL' });
    assert.throws(() => id.createQp(null, {}), { code: 'EINVAL' }, 'no device yet');
    assert.throws(() => id.bindAddr({ address: '203.0.113.77', port: 0 }), { code: 'EADDRNOTAVAIL' });
    assert.throws(() => id.bindAddr({ address: 'not-an-ip', port: 0 }), { code: 'EINVAL' });
    assert.throws(() => id.setOption(RdmaOption.LEVEL_ID, 99, 1), { code: 'ENOSYS' });
    id.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_TOS, 16);
    assert.equal(id.tos, 16);
    id.bindAddr({ address: '127.0.0.1', port: 0 });
    assert.throws(() => id.bindAddr({ address: '127.0.0.1', port: 0 }), { code: 'EINVAL' });
    assert.throws(() => id.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_REUSEADDR, 1), { code: 'EINVAL' });
    await id.resolveAddr(null, { address: '127.0.0.1', port: 9 });
    await id.resolveRoute();
    id.createQp(null, {});
    const pdMax = getCmTransport(d.provider).privateDataLimits.connect;
    await assert.rejects(id.connect({ privateData: Buffer.alloc(pdMax + 1) }), { code: 'EINVAL' }, 'private data over the limit');
    await assert.rejects(id.connect({ initiatorDepth: id.verbs.queryDevice().maxQpRdAtom + 1 }), { code: 'EINVAL' });
    assert.throws(() => id.createQp(null, {}), { code: 'EINVAL' }, 'already has a QP');
    id.destroyQp();
    await id.destroy();
    await assert.rejects(id.destroy(), { code: 'EINVAL' });
    assert.throws(() => createId(null, null, 0x999), { code: 'EINVAL' });
  });

  test('destroying an id waits until its events are acknowledged', async () => {
    const ch = createEventChannel();
    const id = createId(ch, null, PortSpace.TCP);
    await id.resolveAddr(null, { address: '127.0.0.1', port: 1 });
    const ev = await nextEvent(ch);
    let done = false;
    const p = id.destroy().then(() => (done = true));
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(done, false, 'destroy still waiting for the ack');
    ev.ack();
    await p;
    assert.equal(done, true);
    assert.throws(() => ev.ack(), { code: 'EINVAL' }, 'double ack');
    ch.destroy();
  });

  test('event channel: async iteration, abort, EAGAIN when non-blocking, EBUSY destroy', async () => {
    const ch = createEventChannel();
    assert.throws(() => ch.tryGetEvent(), { code: 'EAGAIN' });
    const ac = new AbortController();
    const p = ch.getEvent(ac.signal);
    const reason = new Error('stop');
    ac.abort(reason);
    await assert.rejects(p, aborted('rdma_get_cm_event', reason));
    const id = createId(ch, null, PortSpace.TCP);
    assert.throws(() => ch.destroy(), { code: 'EBUSY' });
    await id.resolveAddr(null, { address: '::1', port: 1 });
    for await (const ev of ch) {
      assert.equal(ev.event, CmEventType.ADDR_RESOLVED);
      assert.equal(id.localAddr.address, '::1');
      ev.ack();
      break;
    }
    await id.destroy();
    ch.destroy();
  });

  test('rdma_migrate_id moves pending events to the new channel', async () => {
    const a = createEventChannel();
    const b = createEventChannel();
    const id = createId(a, null, PortSpace.TCP);
    await id.resolveAddr(null, { address: '127.0.0.1', port: 1 });
    // The event is queued on `a` (nobody reads it) before the id moves.
    await until(() => a.pending === 1, 5000, 'ADDR_RESOLVED queued on the first channel');
    await id.migrate(b);
    assert.equal(a.pending, 0);
    const ev = await nextEvent(b);
    assert.equal(ev.event, CmEventType.ADDR_RESOLVED);
    ev.ack();
    await id.destroy();
    a.destroy();
    b.destroy();
  });

  test('IPv6 loopback connect and a sync accept', async () => {
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '::1', port: 0 });
    await listen.listen(1);
    const server = syncAccept(listen);
    const id = createId(null, null, PortSpace.TCP);
    await id.resolveAddr(null, { address: '::1', port: listen.srcPort });
    await id.resolveRoute();
    id.createQp(null, {});
    await id.connect();
    const child = await server;
    assert.equal(child.peerAddr.address, '::1');
    assert.deepEqual(child.localAddr, { address: '::1', port: listen.srcPort, family: 'IPv6' });
    assert.equal(id.event.event, CmEventType.ESTABLISHED);
    await Promise.all([id.disconnect(), child.disconnect()]);
    assert.equal(id.event.event, CmEventType.DISCONNECTED);
    for (const x of [id, child]) {
      x.destroyQp();
      await x.destroy();
    }
    await listen.destroy();
  });

  test('a port another id holds: EADDRINUSE at bind', async () => {
    const a = createId(null, null, PortSpace.TCP);
    a.bindAddr({ address: '127.0.0.1', port: 0 });
    await a.listen(1);
    const b = createId(null, null, PortSpace.TCP);
    assert.throws(() => b.bindAddr({ address: '127.0.0.1', port: a.srcPort }), { code: 'EADDRINUSE' });
    for (const x of [a, b]) await x.destroy();
  });

  test('a wildcard listener: each connection\'s local address is the one the peer reached', async () => {
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '0.0.0.0', port: 0 });
    await listen.listen(4);
    // Any 127/8 address reaches lo over TCP (iWARP); a RoCE device answers only on its GIDs (rxe
    // drops datagrams for other destination addresses), and lo's only IPv4 GID is 127.0.0.1.
    const targets = d.transportType === TransportType.IWARP ? ['127.0.0.2', '127.0.0.1'] : ['127.0.0.1'];
    for (const to of targets) {
      const { id, child } = await syncPair(listen, to);
      assert.deepEqual(child.localAddr, { address: to, port: listen.srcPort, family: 'IPv4' });
      assert.deepEqual(child.peerAddr, id.localAddr);
      await closePair({ id, child });
    }
    await listen.destroy();
  });

  test('QPs the application made and moves with rdma_init_qp_attr carry a connection (rping -q on both sides)', async () => {
    const sch = createEventChannel();
    const cch = createEventChannel();
    const listen = createId(sch, 'L', PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(1);
    const id = createId(cch, 'C', PortSpace.TCP);
    await id.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort }, 2000);
    (await nextEvent(cch)).ack();
    await id.resolveRoute(2000);
    (await nextEvent(cch)).ack();
    const own = (cmId) => {
      const pd = cmId.verbs.allocPd();
      const cq = cmId.verbs.createCq(4);
      const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 } });
      const mr = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
      return { qp, cq, mr, free: () => (mr.dereg(), qp.destroy(), cq.destroy(), pd.dealloc()) };
    };
    const move = (cmId, qp, states) => {
      for (const s of states) {
        const { attr, mask } = cmId.initQpAttr(s);
        qp.modify(attr, mask);
      }
    };
    const cli = own(id);
    move(id, cli.qp, [QpState.INIT]);
    await id.connect({ qpNum: cli.qp.qpNum, responderResources: 1, initiatorDepth: 1 });
    let ev = await nextEvent(sch);
    assert.equal(ev.event, CmEventType.CONNECT_REQUEST);
    const child = ev.id;
    ev.ack();
    const srv = own(child);
    move(child, srv.qp, [QpState.INIT]);
    srv.qp.postRecv({ wrId: 'r', sgList: [{ addr: srv.mr.addr, length: 64, lkey: srv.mr.lkey }] });
    move(child, srv.qp, [QpState.RTR, QpState.RTS]);
    await child.accept({ qpNum: srv.qp.qpNum, responderResources: 1, initiatorDepth: 1 });
    ev = await nextEvent(cch);
    // IB: CONNECT_RESPONSE, then the application moves its QP and rdma_establish sends the RTU.
    // iWARP: ESTABLISHED with the QP in RTS already; the moves change nothing and
    // rdma_establish has nothing to do (EINVAL).
    const iwarp = d.transportType === TransportType.IWARP;
    assert.equal(ev.event, iwarp ? CmEventType.ESTABLISHED : CmEventType.CONNECT_RESPONSE);
    ev.ack();
    move(id, cli.qp, [QpState.INIT, QpState.RTR, QpState.RTS]);
    assert.equal(cli.qp.state, QpState.RTS);
    if (iwarp) assert.throws(() => id.establish(), (e) => e.code === 'EINVAL');
    else id.establish();
    ev = await nextEvent(sch);
    assert.equal(ev.event, CmEventType.ESTABLISHED);
    ev.ack();
    assert.equal(srv.qp.state, QpState.RTS);
    Buffer.from(cli.mr.buf.buffer, cli.mr.buf.byteOffset, 7).write('own QPs');
    cli.qp.postSend({ wrId: 's', opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: cli.mr.addr, length: 7, lkey: cli.mr.lkey }] });
    let wc = [];
    for (const t0 = Date.now(); wc.length === 0 && Date.now() - t0 < 3000; await new Promise((r) => setTimeout(r, 5))) wc = srv.cq.poll(1);
    assert.equal(wc.length, 1, 'the Send arrived');
    assert.equal(wc[0].status, WcStatus.SUCCESS);
    assert.equal(Buffer.from(srv.mr.buf.subarray(0, 7)).toString(), 'own QPs');
    await Promise.all([id.disconnect(), child.disconnect()]);
    for (const [ch, x] of [[cch, id], [sch, child]]) {
      while (ch.pending > 0) (await nextEvent(ch)).ack();
      await x.destroy();
    }
    cli.free();
    srv.free();
    await listen.destroy();
    sch.destroy();
    cch.destroy();
  });

  test('id.route as librdmacm fills it: addresses and GIDs; RoCE one path record (GIDs, hop limit 64, ToS, port MTU, rate, P_Key 0xFFFF) on both sides, iWARP none', async () => {
    const native = getProvider(d.provider)?.native === true;
    const iwarp = d.transportType === TransportType.IWARP;
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(1);
    const server = syncAccept(listen);
    const id = createId(null, null, PortSpace.TCP);
    const before = id.route;
    assert.equal(before.numPaths, 0);
    assert.equal(before.addr.srcAddr, null);
    assert.deepEqual([...before.addr.ibaddr.sgid], new Array(16).fill(0));
    id.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_TOS, 0x20);
    await id.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
    if (native) {
      assert.throws(() => id.route, { code: 'EOPNOTSUPP' });
      await id.destroy();
      await listen.destroy();
      return;
    }
    assert.equal(id.route.numPaths, 0, 'no path before rdma_resolve_route');
    await id.resolveRoute();
    const r = id.route;
    assert.equal(r.addr.srcAddr.address, '127.0.0.1');
    assert.deepEqual(r.addr.dstAddr, { address: '127.0.0.1', port: listen.srcPort, family: 'IPv4' });
    const v4gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
    if (iwarp) {
      assert.equal(r.numPaths, 0, 'iWARP: the route is the IP route');
      assert.deepEqual(r.pathRec, []);
      assert.equal(r.addr.ibaddr.pkey, 0);
      assert.deepEqual([...r.addr.ibaddr.sgid], [...id.verbs.queryGid(1, 0)], 'the link-layer GID of the device');
    } else {
      assert.equal(r.numPaths, 1);
      const [p] = r.pathRec;
      assert.deepEqual([...p.sgid], v4gid);
      assert.deepEqual([...p.dgid], v4gid);
      assert.equal(p.pkey, 0xffff);
      assert.equal(p.hopLimit, 64);
      assert.equal(p.trafficClass, 0x20, 'RDMA_OPTION_ID_TOS');
      assert.equal(p.reversible, 1);
      assert.equal(p.numbPath, 1);
      assert.equal(p.rate, 0, 'IB_RATE_PORT_CURRENT');
      assert.equal(p.mtuSelector, 2);
      assert.ok(p.mtu >= 1 && p.mtu <= id.verbs.queryPort(1).activeMtu, `path MTU ${p.mtu} within the port's`);
      assert.deepEqual([...r.addr.ibaddr.sgid], v4gid);
      assert.deepEqual([...r.addr.ibaddr.dgid], v4gid);
      assert.equal(r.addr.ibaddr.pkey, 0xffff);
      // a copy: changing it changes nothing
      p.sgid.fill(9);
      assert.deepEqual([...id.route.pathRec[0].sgid], v4gid);
    }
    id.createQp(null, {});
    await id.connect();
    const child = await server;
    const cr = child.route;
    assert.equal(cr.addr.srcAddr.port, listen.srcPort);
    assert.equal(cr.addr.dstAddr.address, '127.0.0.1');
    if (iwarp) assert.equal(cr.numPaths, 0);
    else {
      assert.equal(cr.numPaths, 1, 'the passive id has the REQ\'s path');
      assert.deepEqual([...cr.pathRec[0].sgid], v4gid);
      assert.equal(cr.pathRec[0].trafficClass, 0x20, 'the REQ\'s traffic class');
      assert.equal(cr.pathRec[0].mtu, id.route.pathRec[0].mtu);
    }
    await closePair({ id, child });
    await listen.destroy();
  });

  test('rdma_notify: EINVAL without a device or a connection; once connected RoCE\'s IB CM answers COMM_EST with EISCONN and takes LID_CHANGE, iWARP ignores both', async () => {
    const native = getProvider(d.provider)?.native === true;
    const iwarp = d.transportType === TransportType.IWARP;
    const idle = createId(null, null, PortSpace.TCP);
    assert.throws(() => idle.notify(AsyncEventType.COMM_EST), { code: 'EINVAL' }, 'no device');
    await idle.destroy();
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(1);
    const pair = await syncPair(listen, '127.0.0.1');
    if (native) assert.throws(() => pair.id.notify(AsyncEventType.COMM_EST), { code: 'EOPNOTSUPP' });
    else if (iwarp) {
      pair.id.notify(AsyncEventType.COMM_EST);
      pair.child.notify(AsyncEventType.QP_FATAL);
    } else {
      assert.throws(() => pair.id.notify(AsyncEventType.COMM_EST), { code: 'EISCONN' });
      assert.throws(() => pair.child.notify(AsyncEventType.COMM_EST), { code: 'EISCONN' });
      pair.id.notify(AsyncEventType.LID_CHANGE);
      assert.throws(() => pair.id.notify(AsyncEventType.QP_FATAL), { code: 'EINVAL' });
    }
    assert.throws(() => pair.id.notify(-1), { code: 'EINVAL' });
    await closePair(pair);
    await listen.destroy();
  });
});
