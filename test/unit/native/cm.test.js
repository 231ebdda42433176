// The librdmacm CM transport over a stand-in addon (test/fixtures/native/fake-addon.cjs): which
// librdmacm calls each CmId call makes on a native device, how librdmacm's events (as the addon
// delivers them) become CmId events and states, and that bad arguments stop before the addon.
// The fake device `fake0` is bound to an interface of this machine through its GUID (siw's
// MAC-in-GUID), so addresses resolve to it as to a kernel device.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { fileURLToPath } from 'node:url';

const nic = Object.entries(networkInterfaces())
  .map(([name, l]) => ({ name, a: (l ?? []).find((x) => (x.family === 'IPv4' || x.family === 4) && x.mac && x.mac !== '00:00:00:00:00:00' && !x.internal) }))
  .find((x) => x.a);
const skip = nic ? false : 'no interface with a MAC and an IPv4 address to bind the fake device to';

process.env.RDMACM_NATIVE_PATH = fileURLToPath(new URL('../../fixtures/native/fake-addon.cjs', import.meta.url));
if (nic) process.env.FAKE_ADDON_GUID = `${nic.a.mac.replaceAll(':', '')}0000`;
delete process.env.RDMACM_NATIVE;
delete process.env.RDMACM_BACKEND;
delete process.env.RDMACM_DEVICE;
const m = await import('../../../dist/index.js');
const { nextEvent } = await import('../../lib/cm.js');
const { createEventChannel, createId, PortSpace, CmEventType, CmState, RdmaError, RdmaOption, QpState } = m;
const fake = globalThis.__fakeAddon;
const ADDR = nic?.a.address;

const since = (n) => fake.calls.slice(n);
const names = (n) => since(n).map((c) => c.name);
/** The key the JS side gave the addon for the id handle `h` (its latest cmSetKey). */
const keyOf = (h) => fake.calls.filter((c) => c.name === 'cmSetKey' && c.args[0] === h).at(-1)?.args[1];
const emit = (ev) => fake.handlers.cm({ status: 0, listenKey: -1, conn: { privateData: Buffer.alloc(0), responderResources: 0, initiatorDepth: 0, flowControl: 0, retryCount: 0, rnrRetryCount: 0, srq: 0, qpNum: 0 }, ...ev });


test('an address of the kernel device binds the id to it through rdma_bind_addr', { skip }, async () => {
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.TCP);
  id.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_REUSEADDR, 1);
  const n = fake.calls.length;
  id.bindAddr({ address: ADDR, port: 0 });
  assert.equal(id.verbs.device.name, 'fake0');
  assert.equal(id.state, CmState.ADDR_BOUND);
  const calls = since(n).filter((c) => c.name.startsWith('cm'));
  assert.deepEqual(calls.map((c) => c.name), ['cmInit', 'cmCreateId', 'cmSetKey', 'cmSetOption', 'cmBind']);
  assert.deepEqual(calls[3].args.slice(1), [0, 1, 1], 'REUSEADDR before the bind');
  assert.deepEqual(calls[4].args.slice(1), [ADDR, 0, 0]);
  const h = calls[2].args[0];
  const m0 = fake.calls.length;
  await id.destroy();
  assert.deepEqual(names(m0), ['cmDestroyId']);
  assert.equal(since(m0)[0].args[0], h);
  ch.destroy();
});

test('an error from librdmacm comes back with its errno and the call', { skip }, async () => {
  const id = createId(createEventChannel(), null, PortSpace.TCP);
  fake.next.cmBind = -98;
  try {
    assert.throws(() => id.bindAddr({ address: ADDR, port: 7000 }), (e) => e instanceof RdmaError && e.code === 'EADDRINUSE' && e.op === 'rdma_bind_addr');
  } finally {
    delete fake.next.cmBind;
  }
});

test('listen, a connect request, accept, ESTABLISHED, DISCONNECTED', { skip }, async () => {
  const ch = createEventChannel();
  const l = createId(ch, 'ctx', PortSpace.TCP);
  l.bindAddr({ address: ADDR, port: 7174 });
  const lh = fake.calls.filter((c) => c.name === 'cmSetKey').at(-1).args[0];
  let n = fake.calls.length;
  await l.listen(5);
  assert.deepEqual(names(n).filter((x) => x !== 'cmRef' && x !== 'cmInfo'), ['cmListen']);
  assert.equal(since(n).find((c) => c.name === 'cmListen').args[1], 5);
  assert.ok(since(n).some((c) => c.name === 'cmRef' && c.args[0] === 1), 'a listener keeps the loop alive');
  assert.equal(l.state, CmState.LISTEN);

  // librdmacm's CONNECT_REQUEST: a new rdma_cm_id, the requester's parameters.
  const newId = { fake: 'cmid', id: 'new' };
  n = fake.calls.length;
  emit({ key: keyOf(lh), event: CmEventType.CONNECT_REQUEST, listenKey: keyOf(lh), newId, conn: { privateData: Buffer.from('hello'), responderResources: 3, initiatorDepth: 2, flowControl: 0, retryCount: 0, rnrRetryCount: 0, srq: 0, qpNum: 0 } });
  const ev = await nextEvent(ch);
  assert.equal(ev.event, CmEventType.CONNECT_REQUEST);
  assert.equal(ev.listenId, l);
  assert.equal(Buffer.from(ev.param.conn.privateData).toString(), 'hello');
  assert.equal(ev.param.conn.responderResources, 3);
  const child = ev.id;
  assert.equal(child.state, CmState.CONNECT);
  assert.equal(child.verbs.device.name, 'fake0');
  assert.equal(child.context, 'ctx');
  assert.deepEqual(child.localAddr, { address: '192.0.2.9', port: 7174, family: 'IPv4' });
  assert.deepEqual(child.peerAddr, { address: '192.0.2.10', port: 40000, family: 'IPv4' });
  const ck = keyOf(newId);
  assert.ok(Number.isInteger(ck) && ck > 0, 'the new id got its own key');
  ev.ack();

  // Bad private data never reaches rdma_accept.
  n = fake.calls.length;
  await assert.rejects(child.accept({ privateData: new Uint8Array(256) }), (e) => e.code === 'EINVAL');
  assert.deepEqual(names(n).filter((x) => x === 'cmAccept'), []);
  await child.accept({ privateData: Buffer.from('yes'), responderResources: 1, initiatorDepth: 1 });
  const acc = since(n).find((c) => c.name === 'cmAccept');
  assert.equal(acc.args[0], newId);
  assert.equal(Buffer.from(acc.args[1]).toString(), 'yes');
  assert.deepEqual(acc.args.slice(2), [1, 1, 0, 7, 7, 0, 0], 'rr, depth, then librdmacm\'s defaults: retry 7, rnr retry 7');

  n = fake.calls.length;
  emit({ key: ck, event: CmEventType.ESTABLISHED });
  const est = await nextEvent(ch);
  assert.equal(est.event, CmEventType.ESTABLISHED);
  assert.equal(est.id, child);
  est.ack();
  assert.ok(since(n).some((c) => c.name === 'cmRef' && c.args[0] === 1), 'connected: the loop stays alive');

  n = fake.calls.length;
  emit({ key: ck, event: CmEventType.DISCONNECTED });
  const dis = await nextEvent(ch);
  assert.equal(dis.event, CmEventType.DISCONNECTED);
  assert.equal(child.state, CmState.DISCONNECT);
  dis.ack();
  assert.ok(since(n).some((c) => c.name === 'cmRef' && c.args[0] === -1));
  await child.destroy();
  await l.destroy();
  ch.destroy();
});

test('resolve: the route picks the device, librdmacm resolves; QP by rdma_create_qp; a reject', { skip }, async () => {
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.TCP);
  let n = fake.calls.length;
  await id.resolveAddr(null, { address: ADDR, port: 9999 }, 1500);
  // resolution is asynchronous: wait for the addon call
  for (let i = 0; i < 50 && !names(n).includes('cmResolveAddr'); i++) await new Promise((r) => setTimeout(r, 20));
  const ra = since(n).find((c) => c.name === 'cmResolveAddr');
  assert.ok(ra, names(n).join(','));
  assert.deepEqual(ra.args.slice(1), [null, 0, 0, ADDR, 9999, 0, 1500], 'no source: the kernel picks it, as for the C tools');
  const h = ra.args[0];
  assert.equal(id.state, CmState.ADDR_QUERY);
  emit({ key: keyOf(h), event: CmEventType.ADDR_RESOLVED });
  const e1 = await nextEvent(ch);
  assert.equal(e1.event, CmEventType.ADDR_RESOLVED);
  e1.ack();
  assert.equal(id.state, CmState.ADDR_RESOLVED);
  assert.equal(id.localAddr.address, '192.0.2.9', 'the source librdmacm reports');

  n = fake.calls.length;
  await id.resolveRoute(1000);
  for (let i = 0; i < 50 && !names(n).includes('cmResolveRoute'); i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(names(n).includes('cmResolveRoute'));
  emit({ key: keyOf(h), event: CmEventType.ROUTE_RESOLVED });
  const e2 = await nextEvent(ch);
  assert.equal(e2.event, CmEventType.ROUTE_RESOLVED);
  e2.ack();
  assert.equal(id.state, CmState.ROUTE_RESOLVED);

  n = fake.calls.length;
  fake.next.qpState = 1; // librdmacm moved it to INIT
  const qp = id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  delete fake.next.qpState;
  const made = names(n);
  assert.ok(made.includes('cmCreateQp') && !made.includes('createQp'), made.join(','));
  assert.equal(since(n).find((c) => c.name === 'cmCreateQp').args[0], h);
  assert.ok(!made.includes('modifyQp'), 'rdma_create_qp left it in INIT: nothing more to do');
  assert.equal(qp.qpType, 2);

  n = fake.calls.length;
  await assert.rejects(id.connect({ privateData: new Uint8Array(300) }), (e) => e.code === 'EINVAL');
  assert.deepEqual(names(n).filter((x) => x === 'cmConnect'), []);
  await id.connect({ responderResources: 1, initiatorDepth: 1, retryCount: 3, rnrRetryCount: 5 });
  const cc = since(n).find((c) => c.name === 'cmConnect');
  assert.deepEqual(cc.args.slice(1), [null, 1, 1, 0, 3, 5, 0, 0]);
  fake.next.qpState = 6; // librdmacm moved the QP to ERR on REJECTED
  emit({ key: keyOf(h), event: CmEventType.REJECTED, status: 28, conn: { privateData: Buffer.from('no'), responderResources: 0, initiatorDepth: 0, flowControl: 0, retryCount: 0, rnrRetryCount: 0, srq: 0, qpNum: 0 } });
  const e3 = await nextEvent(ch);
  assert.equal(e3.event, CmEventType.REJECTED);
  assert.equal(e3.status, 28);
  assert.equal(Buffer.from(e3.param.conn.privateData).toString(), 'no');
  assert.equal(id.state, CmState.ROUTE_RESOLVED, 'the id may connect again');
  e3.ack();
  assert.equal(qp.state, QpState.ERR);
  delete fake.next.qpState;
  n = fake.calls.length;
  id.destroyQp();
  await id.destroy();
  assert.deepEqual(names(n).filter((x) => ['destroyQp', 'cmDestroyId', 'destroyCq', 'destroyCompChannel'].includes(x)), ['destroyQp', 'destroyCq', 'destroyCompChannel', 'destroyCq', 'destroyCompChannel', 'cmDestroyId']);
  ch.destroy();
});

test('RDMACM_DEVICE-style pins and the soft devices still work beside the native one', { skip }, async () => {
  const id = createId(createEventChannel(), null, PortSpace.TCP, { device: 'siw_lo' });
  const n = fake.calls.length;
  id.bindAddr({ address: '127.0.0.1', port: 0 });
  assert.equal(id.verbs.device.name, 'siw_lo');
  assert.deepEqual(names(n).filter((x) => x.startsWith('cm')), [], 'a soft id never touches librdmacm');
  await id.destroy();
});

test('a join holds the event loop until its MULTICAST_JOIN (or a leave), as a pending resolve does', { skip }, async () => {
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.UDP);
  const group = { address: '239.1.2.3', port: 0 };
  let n = fake.calls.length;
  await id.resolveAddr({ address: ADDR, port: 0 }, group, 1500);
  for (let i = 0; i < 50 && !names(n).includes('cmResolveAddr'); i++) await new Promise((r) => setTimeout(r, 20));
  const h = since(n).find((c) => c.name === 'cmResolveAddr').args[0];
  emit({ key: keyOf(h), event: CmEventType.ADDR_RESOLVED });
  (await nextEvent(ch)).ack();
  /** The last liveness change the id asked of the addon (+1 held, -1 released). */
  const lastRef = (from) => since(from).filter((c) => c.name === 'cmRef').at(-1)?.args[0];
  assert.equal(lastRef(0), -1, 'resolved and nothing pending: the loop is free');

  n = fake.calls.length;
  await id.joinMulticast(group, 'ctx');
  const join = since(n).find((c) => c.name === 'cmJoinMulticast');
  assert.ok(join, names(n).join(','));
  assert.equal(lastRef(n), 1, 'waiting for MULTICAST_JOIN: the loop is held');
  n = fake.calls.length;
  const ahAttr = { dlid: 0, sl: 0, srcPathBits: 0, staticRate: 0, isGlobal: true, portNum: 1, flowLabel: 0, sgidIndex: 0, hopLimit: 1, trafficClass: 0, dgid: Buffer.from('00000000000000000000ffffef010203', 'hex') };
  emit({ key: keyOf(h), event: CmEventType.MULTICAST_JOIN, mcKey: join.args[4], ud: { privateData: Buffer.alloc(0), ahAttr, qpNum: 0xffffff, qkey: 0x01234567 } });
  const ev = await nextEvent(ch);
  assert.equal(ev.event, CmEventType.MULTICAST_JOIN);
  assert.equal(ev.mcContext, 'ctx');
  ev.ack();
  assert.equal(lastRef(n), -1, 'joined: released');
  await id.leaveMulticast(group);

  // A leave before the join's event releases it too.
  n = fake.calls.length;
  await id.joinMulticast(group);
  assert.equal(lastRef(n), 1);
  n = fake.calls.length;
  await id.leaveMulticast(group);
  assert.equal(lastRef(n), -1, 'left before MULTICAST_JOIN came: released');
  await id.destroy();
  ch.destroy();
});

test('a UC id on RDMA_PS_IB is made bound by rdma_create_ep with its QP type; unbound, nothing reaches librdmacm', { skip }, async () => {
  const { QpType } = m;
  const n = fake.calls.length;
  const id = createId(createEventChannel(), null, PortSpace.IB, { qpType: QpType.UC });
  assert.deepEqual(names(n).filter((x) => x.startsWith('cmCreate')), [], 'no rdma_create_id: it would make an RC id');
  id.bindAddr({ address: ADDR, port: 7001 });
  const made = since(n).filter((c) => c.name.startsWith('cmCreate'));
  assert.deepEqual(made.map((c) => c.name), ['cmCreateIdBound']);
  assert.deepEqual(made[0].args.slice(1), [PortSpace.IB, QpType.UC, ADDR, 7001, 0], 'port space, qp_type UC, the address');
  assert.equal(typeof made[0].args[0], 'number', 'the key its events come back with');
  assert.deepEqual(names(n).filter((x) => x === 'cmBind'), [], 'rdma_create_ep bound it');
  assert.equal(id.state, CmState.ADDR_BOUND);
  const m0 = fake.calls.length;
  await id.destroy();
  assert.deepEqual(names(m0), ['cmDestroyId']);

  // Resolved without a bind: made bound to the wildcard of the destination's family first.
  const cch = createEventChannel();
  const c = createId(cch, null, PortSpace.IB, { qpType: QpType.UC });
  const k = fake.calls.length;
  const p = c.resolveAddr(null, { address: ADDR, port: 7002 });
  for (let i = 0; i < 50 && !since(k).some((x) => x.name === 'cmResolveAddr'); i++) await new Promise((r) => setImmediate(r));
  const bound = since(k).find((x) => x.name === 'cmCreateIdBound');
  assert.deepEqual(bound?.args.slice(1), [PortSpace.IB, QpType.UC, '0.0.0.0', 0, 0]);
  const r = since(k).find((x) => x.name === 'cmResolveAddr');
  assert.equal(r.args[1], null, 'no second source: the id is bound');
  await p;
  emit({ key: bound.args[0], event: CmEventType.ADDR_ERROR, status: -113 });
  const ev = await nextEvent(cch);
  assert.equal(ev.event, CmEventType.ADDR_ERROR, 'its events come back to it');
  assert.equal(ev.id, c);
  ev.ack();
  await c.destroy();

  // Never bound: destroying it makes no librdmacm call.
  const u = createId(createEventChannel(), null, PortSpace.IB, { qpType: QpType.UC });
  const z = fake.calls.length;
  await u.destroy();
  assert.deepEqual(names(z).filter((x) => x.startsWith('cm')), []);
});
