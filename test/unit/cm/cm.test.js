// rdma_cm over the software iWARP device: what is particular to it (TCP connect inside
// rdma_connect, siw's reject status, TCP source binding, TCP listeners) and the pure helpers.
// The CM flows every device must serve are in test/compliance/cm.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import {
  createId, createEventChannel, PortSpace, CmEventType, CmState, rdmaEventStr, getaddrinfo, GaiError, RdmaError,
  Access, WrOpcode, SendFlags, WcStatus, QpState, RdmaOption, QpAttrMask, QpType,
} from '../../../dist/index.js';
import { nextEvent, syncPair } from '../../lib/cm.js';
import { freePort } from '../../lib/ports.js';


async function closePair({ id, child }) {
  await id.disconnect();
  for (const x of [id, child]) {
    x.destroyQp();
    await x.destroy();
  }
}

test('rdma_event_str names, including the USER/INTERNAL quirk', () => {
  assert.equal(rdmaEventStr(CmEventType.ESTABLISHED), 'RDMA_CM_EVENT_ESTABLISHED');
  assert.equal(rdmaEventStr(CmEventType.ADDRINFO_ERROR), 'RDMA_CM_EVENT_ADDRINFO_ERROR');
  assert.equal(rdmaEventStr(CmEventType.USER), 'UNKNOWN EVENT');
  assert.equal(rdmaEventStr(99), 'UNKNOWN EVENT');
});

test('connect to a port with nobody listening: rdma_connect fails with ECONNREFUSED (as on Linux siw), no event', async () => {
  const port = await freePort();
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port });
  (await nextEvent(ch)).ack();
  await id.resolveRoute();
  (await nextEvent(ch)).ack();
  id.createQp(null, {});
  await assert.rejects(id.connect(), (e) => e instanceof RdmaError && e.code === 'ECONNREFUSED' && e.errno === 111 && e.op === 'rdma_connect');
  assert.equal(id.state, CmState.ROUTE_RESOLVED, 'back to ROUTE_RESOLVED');
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(ch.pending, 0, 'no event follows');
  id.destroyQp();
  await id.destroy();
  ch.destroy();

  const s = createId(null, null, PortSpace.TCP);
  await s.resolveAddr(null, { address: '127.0.0.1', port });
  await s.resolveRoute();
  s.createQp(null, {});
  await assert.rejects(s.connect(), (e) => e instanceof RdmaError && e.code === 'ECONNREFUSED' && e.errno === 111);
  s.destroyQp();
  await s.destroy();
});

test('rdma_reject with private data: the peer sees REJECTED (-ECONNRESET, as siw reports it) and the data', async () => {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const server = (async () => {
    const child = await listen.getRequest();
    child.reject(Buffer.from('go away'));
    await child.destroy();
  })();
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
  (await nextEvent(ch)).ack();
  await id.resolveRoute();
  (await nextEvent(ch)).ack();
  id.createQp(null, {});
  await id.connect({ privateData: Buffer.from('please') });
  const ev = await nextEvent(ch);
  assert.equal(ev.event, CmEventType.REJECTED);
  assert.equal(ev.status, -104);
  assert.equal(Buffer.from(ev.param.conn.privateData).toString(), 'go away');
  ev.ack();
  await server;
  id.destroyQp();
  await id.destroy();
  await listen.destroy();
  ch.destroy();
});

test('listen on a TCP port another program holds: EADDRINUSE (iWARP listens with a TCP socket)', async () => {
  const blocker = net.createServer();
  await new Promise((r) => blocker.listen(0, '127.0.0.1', r));
  const c = createId(null, null, PortSpace.TCP);
  c.bindAddr({ address: '127.0.0.1', port: blocker.address().port });
  await assert.rejects(c.listen(1), { code: 'EADDRINUSE' });
  blocker.close();
  await c.destroy();
});

test('rdma_getaddrinfo: passive/active, numeric, EAI errors', async () => {
  const p = await getaddrinfo(null, '7174', { flags: 1 });
  assert.deepEqual(p.srcAddr, { address: '0.0.0.0', port: 7174, family: 'IPv4' });
  assert.equal(p.dstAddr, null);
  const a = await getaddrinfo('::1', 7174);
  assert.equal(a.dstAddr.address, '::1');
  assert.equal(a.family, 'IPv6');
  await assert.rejects(getaddrinfo(null, null), { code: 'EINVAL' });
  await assert.rejects(getaddrinfo('name.invalid', '1', { flags: 2 }), (e) => e instanceof GaiError && e.eai === -2);
});

test('an explicit bind is honoured on connect: 127.0.0.2 stays the source; a bind of the route source keeps it too', async () => {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(4);
  for (const from of ['127.0.0.2', '127.0.0.1']) {
    const { id, child } = await syncPair(listen, '127.0.0.1', from);
    // Route lookup picks 127.0.0.1 for 127.0.0.1: only the 127.0.0.2 bind needs a bind(2), and
    // the peer must see it.
    assert.equal(child.peerAddr.address, from);
    assert.equal(id.localAddr.address, from);
    assert.equal(id.localAddr.port, child.peerAddr.port);
    assert.ok(id.localAddr.port > 0);
    // The accepted side's own address is the listener's (bound to one address).
    assert.deepEqual(child.localAddr, { address: '127.0.0.1', port: listen.srcPort, family: 'IPv4' });
    assert.deepEqual(id.peerAddr, child.localAddr);
    await closePair({ id, child });
  }
  await listen.destroy();
});

test('rdma_init_qp_attr as the kernel answers on iWARP: no access before the id connects; then INIT and RTR give state, access and port, RTS the port alone', async () => {
  const M = QpAttrMask;
  const STATE_ACCESS_PORT = M.STATE | M.ACCESS_FLAGS | M.PORT;
  const RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const request = listen.getRequest();
  const id = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
  await id.resolveRoute();
  // cma.c: an id without its iw_cm id yet gets the state with no access, whatever the state.
  for (const s of [QpState.INIT, QpState.RTR, QpState.RTS]) {
    assert.deepEqual(id.initQpAttr(s), { attr: { qpState: s, qpAccessFlags: 0, portNum: 1 }, mask: STATE_ACCESS_PORT }, `before rdma_connect: ${s}`);
  }
  const own = (cmId) => {
    const pd = cmId.verbs.allocPd();
    const cq = cmId.verbs.createCq(4);
    const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 } });
    return { qp, free: () => (qp.destroy(), cq.destroy(), pd.dealloc()) };
  };
  const move = (cmId, qp, s) => {
    const { attr, mask } = cmId.initQpAttr(s);
    qp.modify(attr, mask);
  };
  const cli = own(id);
  move(id, cli.qp, QpState.INIT);
  assert.equal(cli.qp.state, QpState.INIT);
  const connected = id.connect({ qpNum: cli.qp.qpNum });
  const child = await request;
  // The connect request's id has its iw_cm id (iw_cm_init_qp_attr).
  for (const s of [QpState.INIT, QpState.RTR]) {
    assert.deepEqual(child.initQpAttr(s), { attr: { qpState: s, qpAccessFlags: RW, portNum: 1 }, mask: STATE_ACCESS_PORT }, `request: ${s}`);
  }
  assert.deepEqual(child.initQpAttr(QpState.RTS), { attr: { qpState: QpState.RTS, portNum: 1 }, mask: M.PORT });
  assert.throws(() => child.initQpAttr(QpState.SQD), (e) => e instanceof RdmaError && e.code === 'EINVAL');
  const srv = own(child);
  move(child, srv.qp, QpState.INIT);
  move(child, srv.qp, QpState.RTR);
  move(child, srv.qp, QpState.RTS);
  assert.equal(srv.qp.state, QpState.RTR, 'RTS is the CM\'s to make');
  assert.equal(srv.qp.query().qpAccessFlags, RW);
  await Promise.all([child.accept({ qpNum: srv.qp.qpNum }), connected]);
  assert.equal(srv.qp.state, QpState.RTS);
  assert.equal(cli.qp.state, QpState.RTS);
  // After ESTABLISHED (rping -q's client): the INIT and RTR answers change nothing but the access
  // of a connected QP (siw ignores those moves), and rdma_establish has nothing to do (EINVAL).
  for (const s of [QpState.INIT, QpState.RTR, QpState.RTS]) move(id, cli.qp, s);
  assert.equal(cli.qp.state, QpState.RTS);
  assert.equal(cli.qp.query().qpAccessFlags, RW);
  assert.throws(() => id.establish(), (e) => e instanceof RdmaError && e.code === 'EINVAL');
  await id.disconnect();
  for (const [x, q] of [[id, cli], [child, srv]]) {
    q.free();
    await x.destroy();
  }
  await listen.destroy();
});
