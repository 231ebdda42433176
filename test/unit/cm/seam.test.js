// The CM transport seam (src/cm/transport.ts) with fake transports: device choice by port space
// and pin, what CmId asks of an endpoint, and how upcalls become events and id states (connected
// and UD ids, SIDR-style replies, CONNECT_RESPONSE/establish, multicast join/leave, requests on a
// listener, a transport that resolves addresses itself). Loads no real transport.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { registerProvider } from '../../../dist/verbs/provider.js';
import { Qp } from '../../../dist/verbs/qp.js';
import { siwDeviceAttr, siwPortAttr } from '../../../dist/transport/iwarp/attrs.js';
import { TransportType, QpType, QpState, Access, GidType, AsyncEventType } from '../../../dist/verbs/types.js';
import { QpAttrMask } from '../../../dist/verbs/qp-attr.js';
import {
  createId,
  createEventChannel,
  registerCmTransport,
  CmEventType,
  CmState,
  PortSpace,
  McJoinFlag,
  McJoinAttr,
  RDMA_UDP_QKEY,
  ipToGid,
} from '../../../dist/cm/index.js';
import { RdmaError } from '../../../dist/errors.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;

class TestQp extends Qp {
  constructor(ctx, pd, n, init, cap) {
    super(ctx, pd, n, init, cap);
    this.mcast = [];
  }
  _stateChanged() {}
  _sqKick() {}
  _destroyed() {}
  _checkSendWr() {
    return null;
  }
  _copyInline() {
    return Buffer.alloc(0);
  }
}

const ADDR = '198.51.100.20';
const PEER = '198.51.100.21';
const addrs = (a) => [{ address: a, family: 'IPv4', netmask: '255.255.255.0' }];
const base = { ifname: 'test0', mtu: 1500, mac: '02:00:00:00:00:20' };

/** A provider of two devices (ours and a "peer" address) for a transport type. */
function provider(name, transport, ib) {
  return {
    name,
    listDevices: () => [
      { ...base, name: `${name}0`, provider: name, transport, addresses: addrs(ADDR), nodeGuid: 0x20n },
      { ...base, name: `${name}1`, provider: name, transport, addresses: addrs(PEER), nodeGuid: 0x21n },
    ],
    queryDevice: (info, part) => ({ ...siwDeviceAttr(info, part), maxAh: ib ? 64 : 0 }),
    queryPort: (info, port) => ({ ...siwPortAttr(info, port), pkeyTblLen: ib ? 1 : 0, gidTblLen: 1 }),
    queryGid: () => new Uint8Array(16),
    queryGidType: () => GidType.ROCE_V2,
    queryPkey: () => 0xffff,
    accessMask: () => Access.LOCAL_WRITE | Access.REMOTE_READ | Access.REMOTE_WRITE,
    createQp: (ctx, pd, attr) => {
      if (!ib && attr.qpType !== QpType.RC) throw new RdmaError('EOPNOTSUPP', { op: 'ibv_create_qp' });
      return new TestQp(ctx, pd, ctx._allocQpNum(), attr, { maxSendWr: 4, maxRecvWr: 4, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 0 });
    },
    ...(ib
      ? {
          createAh: () => ({}),
          attachMcast: (qp, gid, lid) => qp.mcast.push({ op: 'attach', gid: [...gid], lid }),
          detachMcast: (qp, gid, lid) => qp.mcast.push({ op: 'detach', gid: [...gid], lid }),
        }
      : {}),
  };
}

registerProvider(provider('fakeiw', TransportType.IWARP, false));
registerProvider(provider('fakeroce', TransportType.IB, true));
registerProvider(provider('fakenative', TransportType.IB, true));

/** The path record the fake IB CM gives a resolved route. */
const FAKE_PATH = {
  dgid: Uint8Array.from([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]),
  sgid: Uint8Array.from([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
  dlid: 0, slid: 0, rawTraffic: 0, flowLabel: 0x12345, hopLimit: 64, trafficClass: 0, reversible: 1, numbPath: 1,
  pkey: 0x8001, sl: 0, mtuSelector: 2, mtu: 3, rateSelector: 2, rate: 0, packetLifeTimeSelector: 2, packetLifeTime: 18, preference: 0x2b,
};

/** A fake CM transport: endpoints record calls; tests upcall through `ep.host`. */
function cmTransport(name, providerName, portSpaces, limits, opts = {}) {
  const t = {
    name,
    provider: providerName,
    portSpaces,
    privateDataLimits: limits,
    endpoints: [],
    listens: [],
    createEndpoint(host) {
      const ep = {
        host,
        calls: [],
        paths: [],
        async connect(req) {
          ep.calls.push(['connect', req]);
          if (opts.needsQp && !req.qp) throw new RdmaError('EINVAL', { op: 'rdma_connect', detail: 'no QP' });
        },
        async accept(req) {
          ep.calls.push(['accept', req]);
        },
        reject(pd) {
          ep.calls.push(['reject', pd]);
        },
        disconnect() {
          ep.calls.push(['disconnect']);
          return ep.connected === true;
        },
        initQpAttr(state) {
          if (state === QpState.INIT) {
            return host.qpType === QpType.UD
              ? { attr: { qpState: state, pkeyIndex: 0, portNum: host.portNum, qkey: RDMA_UDP_QKEY }, mask: QpAttrMask.STATE | QpAttrMask.PKEY_INDEX | QpAttrMask.PORT | QpAttrMask.QKEY }
              : { attr: { qpState: state, qpAccessFlags: 7, portNum: host.portNum, pkeyIndex: 0 }, mask: QpAttrMask.STATE | QpAttrMask.ACCESS_FLAGS | QpAttrMask.PORT | QpAttrMask.PKEY_INDEX };
          }
          return { attr: { qpState: state }, mask: 0 };
        },
        destroy() {
          ep.calls.push(['destroy']);
        },
        ...(opts.multicast
          ? {
              joinMulticast(j) {
                ep.calls.push(['join', j]);
              },
              leaveMulticast(a) {
                ep.calls.push(['leave', a]);
              },
              establish() {
                ep.calls.push(['establish']);
              },
            }
          : {}),
        ...(opts.notify
          ? {
              notify(event) {
                ep.calls.push(['notify', event]);
              },
              routePaths(resolved) {
                if (!resolved) return [];
                const path = { ...FAKE_PATH, sgid: Uint8Array.from(FAKE_PATH.sgid), dgid: Uint8Array.from(FAKE_PATH.dgid) };
                ep.paths.push(path);
                return [path];
              },
            }
          : {}),
        ...(opts.resolves
          ? {
              async resolveAddr(src, dst) {
                ep.calls.push(['resolveAddr', src, dst]);
              },
            }
          : {}),
      };
      t.endpoints.push(ep);
      return ep;
    },
    async listen(host, req) {
      const l = { host, req, closed: false, port: req.addr.port || 4791 + t.listens.length, close: () => (l.closed = true) };
      t.listens.push(l);
      return l;
    },
  };
  registerCmTransport(t);
  return t;
}

const IW = cmTransport('fake-iwcm', 'fakeiw', [PortSpace.TCP, PortSpace.IB], { connect: 252, accept: 252, reject: 252, udConnect: 0, udAccept: 0 }, { needsQp: true });
const RC = cmTransport('fake-ibcm', 'fakeroce', [PortSpace.UDP, PortSpace.IPOIB], { connect: 56, accept: 196, reject: 148, udConnect: 180, udAccept: 136 }, { multicast: true, resolves: false, notify: true });

const lastEp = (t) => t.endpoints.at(-1);

/** An id bound to ADDR, resolved and routed to PEER (both fake devices: no ARP wait). */
async function routed(ps, ch, opts) {
  const id = createId(ch, null, ps, opts);
  await id.resolveAddr({ address: ADDR, port: 0 }, { address: PEER, port: 7000 });
  const e1 = await ch.getEvent();
  assert.equal(e1.event, CmEventType.ADDR_RESOLVED);
  e1.ack();
  await id.resolveRoute();
  const e2 = await ch.getEvent();
  assert.equal(e2.event, CmEventType.ROUTE_RESOLVED);
  e2.ack();
  return id;
}

test('device choice: the device whose CM serves the port space; a pin overrides; env default', async () => {
  const tcp = createId(null, null, PortSpace.TCP);
  tcp.bindAddr({ address: ADDR, port: 0 });
  assert.equal(tcp.verbs.device.name, 'fakeiw0');
  const udp = createId(null, null, PortSpace.UDP);
  udp.bindAddr({ address: ADDR, port: 0 });
  assert.equal(udp.verbs.device.name, 'fakeroce0');
  const pinned = createId(null, null, PortSpace.UDP, { device: 'fakeiw0' });
  pinned.bindAddr({ address: ADDR, port: 0 });
  assert.equal(pinned.verbs.device.name, 'fakeiw0');
  const elsewhere = createId(null, null, PortSpace.TCP, { device: 'fakeiw1' });
  assert.throws(() => elsewhere.bindAddr({ address: ADDR, port: 0 }), code('EADDRNOTAVAIL'), 'the pinned device does not own the address');
  assert.throws(() => createId(null, null, PortSpace.TCP, { device: '' }), code('EINVAL'));
  process.env.RDMACM_DEVICE = 'fakeroce0';
  try {
    const env = createId(null, null, PortSpace.TCP);
    assert.equal(env.devicePin, 'fakeroce0');
    env.bindAddr({ address: ADDR, port: 0 });
    assert.equal(env.verbs.device.name, 'fakeroce0');
    await env.destroy();
  } finally {
    delete process.env.RDMACM_DEVICE;
  }
  for (const id of [tcp, udp, pinned, elsewhere]) await id.destroy();
});

test('connected id: connect hands the transport its request; upcalls set states and events', async () => {
  const ch = createEventChannel();
  const id = await routed(PortSpace.TCP, ch);
  const ep = lastEp(IW);
  assert.equal(ep.host.context.device.name, 'fakeiw0');
  await assert.rejects(id.connect(), code('EINVAL'), 'the transport needs a QP');
  assert.equal(id.state, CmState.ROUTE_RESOLVED, 'a failed call returns the id to ROUTE_RESOLVED');
  const qp = id.createQp(null, { cap: { maxSendWr: 2, maxRecvWr: 2 } });
  assert.equal(qp.state, QpState.INIT);
  assert.equal(qp.query().qpAccessFlags, 7, 'INIT with rdma_init_qp_attr attributes');
  await assert.rejects(id.connect({ privateData: new Uint8Array(253) }), code('EINVAL'), 'above the transport limit');
  await assert.rejects(id.connect({ responderResources: 129 }), code('EINVAL'), 'above the device limit');
  await id.connect({ privateData: Uint8Array.of(1, 2, 3), initiatorDepth: 2 });
  assert.equal(id.state, CmState.CONNECT);
  const [, req] = ep.calls.find((c) => c[0] === 'connect' && c[1].qp);
  assert.equal(req.qp, qp);
  assert.deepEqual([...req.privateData], [1, 2, 3]);
  assert.equal(req.initiatorDepth, 2);
  assert.equal(req.responderResources, 128, 'IRD defaults to the device maximum');
  assert.equal(req.dst.address, PEER);
  assert.deepEqual(req.bind, { address: ADDR }, 'the bound source is not the route source here');

  // REJECTED: back to ROUTE_RESOLVED, the QP to ERR, private data delivered
  ep.host.upcall({ event: CmEventType.REJECTED, status: -104, conn: { privateData: Uint8Array.of(9) } });
  const rej = await ch.getEvent();
  assert.equal(rej.event, CmEventType.REJECTED);
  assert.equal(rej.status, -104);
  assert.deepEqual([...rej.param.conn.privateData], [9]);
  assert.equal(rej.param.ud.qpNum, 0, 'param.ud exists on every event');
  rej.ack();
  assert.equal(id.state, CmState.ROUTE_RESOLVED);
  assert.equal(qp.state, QpState.ERR);

  // a second attempt: ESTABLISHED (local address updated), then DISCONNECTED
  await id.connect();
  ep.host.upcall({ event: CmEventType.ESTABLISHED, conn: { responderResources: 4, initiatorDepth: 5 }, localAddr: { address: ADDR, port: 40000, family: 'IPv4' } });
  const est = await ch.getEvent();
  assert.equal(est.event, CmEventType.ESTABLISHED);
  assert.equal(est.param.conn.initiatorDepth, 5);
  est.ack();
  assert.equal(id.localAddr.port, 40000);
  // an error after ESTABLISHED does not rewind the id
  ep.host.upcall({ event: CmEventType.DISCONNECTED });
  const dis = await ch.getEvent();
  assert.equal(dis.event, CmEventType.DISCONNECTED);
  dis.ack();
  assert.equal(id.state, CmState.DISCONNECT);
  ep.connected = false;
  await id.disconnect();
  assert.ok(ep.calls.some((c) => c[0] === 'disconnect'));
  id.destroyQp();
  await id.destroy();
  assert.equal(ep.calls.at(-1)[0], 'destroy');
  ep.host.upcall({ event: CmEventType.DISCONNECTED });
  assert.equal(ch.pending, 0, 'upcalls after destroy are dropped');
  ch.destroy();
});

test('CONNECT_RESPONSE and rdma_establish go through the transport', async () => {
  const ch = createEventChannel();
  const id = await routed(PortSpace.UDP, ch);
  const ep = lastEp(RC);
  await id.connect();
  ep.host.upcall({ event: CmEventType.CONNECT_RESPONSE, conn: { privateData: Uint8Array.of(7) } });
  const ev = await ch.getEvent();
  assert.equal(ev.event, CmEventType.CONNECT_RESPONSE);
  ev.ack();
  id.establish();
  assert.equal(ep.calls.at(-1)[0], 'establish');
  const iw = createId(null, null, PortSpace.TCP);
  iw.bindAddr({ address: ADDR, port: 0 });
  assert.throws(() => iw.establish(), code('EINVAL'), 'a transport without rdma_establish');
  await iw.destroy();
  await id.destroy();
  ch.destroy();
});

test('UD id: UD QP moved to RTS at creation; SIDR-style ESTABLISHED and UNREACHABLE', async () => {
  const ch = createEventChannel();
  const id = await routed(PortSpace.UDP, ch);
  const ep = lastEp(RC);
  assert.equal(id.qpType, QpType.UD);
  const qp = id.createQp(null);
  assert.equal(qp.qpType, QpType.UD);
  assert.equal(qp.state, QpState.RTS, 'ucma_init_ud_qp: INIT, RTR, RTS');
  assert.equal(qp.query().qkey, RDMA_UDP_QKEY);
  assert.equal(qp.query().sqPsn, 0);
  await assert.rejects(id.connect({ privateData: new Uint8Array(181) }), code('EINVAL'), 'SIDR REQ limit 180');
  await id.connect({ privateData: new Uint8Array(180) });
  const ud = { privateData: Uint8Array.of(5), ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: new Uint8Array(16), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } }, qpNum: 0x1234, qkey: RDMA_UDP_QKEY };
  ep.host.upcall({ event: CmEventType.ESTABLISHED, ud });
  const est = await ch.getEvent();
  assert.equal(est.event, CmEventType.ESTABLISHED);
  assert.equal(est.param.ud.qpNum, 0x1234);
  assert.equal(est.param.ud.qkey, RDMA_UDP_QKEY);
  assert.equal(est.param.conn.qpNum, 0, 'param.conn exists with defaults');
  est.ack();
  id.destroyQp();
  await id.destroy();

  const id2 = await routed(PortSpace.UDP, ch);
  await id2.connect();
  lastEp(RC).host.upcall({ event: CmEventType.UNREACHABLE, status: -110 });
  const un = await ch.getEvent();
  assert.equal(un.event, CmEventType.UNREACHABLE);
  assert.equal(un.status, -110);
  un.ack();
  assert.equal(id2.state, CmState.ROUTE_RESOLVED);
  await id2.destroy();
  ch.destroy();
});

test('UD ids on a device without UD: EOPNOTSUPP from the provider, resources released', async () => {
  const id = createId(null, null, PortSpace.UDP, { device: 'fakeiw0' });
  id.bindAddr({ address: ADDR, port: 0 });
  const ctx = id.verbs;
  assert.throws(() => id.createQp(null), code('EOPNOTSUPP'));
  assert.equal(id.qp, null);
  assert.equal(id.sendCqChannel, null);
  await assert.rejects(id.joinMulticast({ address: '224.0.0.9', port: 0 }), code('ENOSYS'), 'no multicast');
  void ctx;
  await id.destroy();
});

test('multicast: join reports MULTICAST_JOIN with the context; a full member is attached and detached on leave, a send-only one never', async () => {
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.UDP);
  await assert.rejects(id.joinMulticast({ address: '224.1.2.3', port: 0 }), code('EINVAL'), 'not bound');
  id.bindAddr({ address: ADDR, port: 0 });
  const ep = lastEp(RC);
  const qp = id.createQp(null);
  const ctxObj = { tag: 'group-1' };
  await id.joinMulticastEx({ addr: { address: '224.1.2.3', port: 0 }, joinFlags: McJoinFlag.SENDONLY_FULLMEMBER, context: ctxObj });
  await assert.rejects(id.joinMulticast({ address: '224.1.2.3', port: 0 }), code('EADDRINUSE'));
  await assert.rejects(id.joinMulticastEx({ addr: { address: '224.1.2.4', port: 0 }, joinFlags: 7 }), code('EINVAL'));
  // rdma_cm_join_mc_attr_ex.comp_mask as librdmacm checks it
  const g5 = { address: '224.1.2.5', port: 0 };
  await assert.rejects(id.joinMulticastEx({ addr: g5, joinFlags: 0, compMask: McJoinAttr.ADDRESS | McJoinAttr.JOIN_FLAGS | 4 }), code('EOPNOTSUPP'), 'an unknown comp_mask bit');
  await assert.rejects(id.joinMulticastEx({ addr: g5, joinFlags: 0, compMask: McJoinAttr.JOIN_FLAGS }), code('EINVAL'), 'no ADDRESS');
  await assert.rejects(id.joinMulticastEx({ addr: g5, joinFlags: 0, compMask: McJoinAttr.ADDRESS }), code('EINVAL'), 'no JOIN_FLAGS');
  assert.equal(ep.calls.filter((c) => c[0] === 'join').length, 1, 'none of them reached the transport');
  const [, join] = ep.calls.find((c) => c[0] === 'join');
  assert.equal(join.addr.address, '224.1.2.3');
  assert.equal(join.joinFlags, McJoinFlag.SENDONLY_FULLMEMBER);
  assert.equal(join.context, ctxObj);
  const mgid = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 224, 1, 2, 3]);
  ep.host.upcall({
    event: CmEventType.MULTICAST_JOIN,
    mcContext: ctxObj,
    ud: { privateData: new Uint8Array(0), ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: mgid, flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } }, qpNum: 0xffffff, qkey: RDMA_UDP_QKEY },
  });
  const ev = await ch.getEvent();
  assert.equal(ev.event, CmEventType.MULTICAST_JOIN);
  assert.equal(ev.mcContext, ctxObj);
  assert.equal(ev.param.ud.qpNum, 0xffffff);
  assert.equal(ev.param.ud.privateData.length, 0);
  ev.ack();
  assert.deepEqual(qp.mcast, [], 'a send-only full member is not attached (ucma_process_join)');
  await assert.rejects(id.leaveMulticast({ address: '224.9.9.9', port: 0 }), code('EADDRNOTAVAIL'));
  await id.leaveMulticast({ address: '224.1.2.3', port: 0 });
  assert.deepEqual(qp.mcast, [], 'nor detached when it leaves');
  assert.equal(ep.calls.at(-1)[0], 'leave');
  // a full member is attached on MULTICAST_JOIN and detached when it leaves
  const full = { tag: 'group-2' };
  await id.joinMulticast({ address: '224.1.2.3', port: 0 }, full);
  ep.host.upcall({
    event: CmEventType.MULTICAST_JOIN,
    mcContext: full,
    ud: { privateData: new Uint8Array(0), ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: mgid, flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } }, qpNum: 0xffffff, qkey: RDMA_UDP_QKEY },
  });
  (await ch.getEvent()).ack();
  assert.deepEqual(qp.mcast, [{ op: 'attach', gid: [...mgid], lid: 0 }]);
  await id.leaveMulticast({ address: '224.1.2.3', port: 0 });
  assert.deepEqual(qp.mcast.at(-1), { op: 'detach', gid: [...mgid], lid: 0 });
  ep.host.upcall({ event: CmEventType.MULTICAST_ERROR, status: -110, mcContext: 'x' });
  const err = await ch.getEvent();
  assert.equal(err.event, CmEventType.MULTICAST_ERROR);
  assert.equal(err.mcContext, 'x');
  err.ack();
  id.destroyQp();
  await id.destroy();
  ch.destroy();
});

test('listen: wildcard uses every transport serving the port space; requests become new ids', async () => {
  const ch = createEventChannel();
  const ln = createId(ch, 'listener-ctx', PortSpace.UDP);
  ln.bindAddr({ address: '0.0.0.0', port: 0 });
  const before = RC.listens.length;
  const iwBefore = IW.listens.length;
  await ln.listen(5);
  assert.equal(RC.listens.length, before + 1);
  assert.equal(IW.listens.length, iwBefore, 'iWARP does not serve UDP');
  const l = RC.listens.at(-1);
  assert.equal(l.req.backlog, 5);
  assert.equal(ln.localAddr.port, l.port, 'the transport picked the port');
  assert.equal(ln.state, CmState.LISTEN);

  let refused = 0;
  let adopted = null;
  const ud = { privateData: Uint8Array.of(1, 2), ahAttr: { isGlobal: true, portNum: 1 }, qpNum: 0x55, qkey: RDMA_UDP_QKEY };
  const request = {
    context: RC.endpoints[0].host.context ?? null,
    portNum: 1,
    local: { address: ADDR, port: l.port, family: 'IPv4' },
    remote: { address: PEER, port: 1234, family: 'IPv4' },
    ud,
    adopt(host) {
      adopted = RC.createEndpoint(host);
      return adopted;
    },
    refuse() {
      refused++;
    },
  };
  // the request's device: the fake RoCE device owning ADDR
  const probe = createId(null, null, PortSpace.UDP);
  probe.bindAddr({ address: ADDR, port: 0 });
  request.context = probe.verbs;
  await probe.destroy();

  l.host.upcall({ event: CmEventType.CONNECT_REQUEST, request });
  const ev = await ch.getEvent();
  assert.equal(ev.event, CmEventType.CONNECT_REQUEST);
  assert.equal(ev.listenId, ln);
  assert.notEqual(ev.id, ln);
  assert.equal(ev.id.context, 'listener-ctx');
  assert.equal(ev.id.state, CmState.CONNECT);
  assert.equal(ev.id.peerAddr.address, PEER);
  assert.deepEqual([...ev.param.ud.privateData], [1, 2]);
  assert.equal(ev.param.ud.qpNum, 0x55);
  ev.ack();
  const child = ev.id;
  assert.equal(adopted.host.localAddr.address, ADDR);
  const qp = child.createQp(null);
  await assert.rejects(child.accept({ privateData: new Uint8Array(137) }), code('EINVAL'), 'SIDR REP limit 136');
  await child.accept({ privateData: Uint8Array.of(4) });
  const [, acc] = adopted.calls.find((c) => c[0] === 'accept');
  assert.equal(acc.qp, qp);
  assert.deepEqual([...acc.privateData], [4]);
  assert.throws(() => child.reject(new Uint8Array(149)), code('EINVAL'), 'REJ limit 148');

  // after destroy, a request is refused
  child.destroyQp();
  await child.destroy();
  await ln.destroy();
  assert.equal(l.closed, true);
  l.host.upcall({ event: CmEventType.CONNECT_REQUEST, request });
  assert.equal(refused, 1);
  ch.destroy();
});

test('an id destroyed while its transport sets up the listener: listen fails and the listener is closed', async () => {
  const ch = createEventChannel();
  const ln = createId(ch, null, PortSpace.TCP, { device: 'fakeiw0' });
  ln.bindAddr({ address: ADDR, port: 0 });
  const before = IW.listens.length;
  const p = ln.listen(1);
  await ln.destroy();
  await assert.rejects(p, code('EINVAL'));
  assert.equal(IW.listens.length, before + 1);
  assert.equal(IW.listens.at(-1).closed, true, 'nothing listens for a destroyed id');
  assert.equal(ln.state, CmState.DESTROYING);
  ch.destroy();
});

let NT;
test('a transport that resolves addresses itself reports ADDR_RESOLVED by upcall', async () => {
  NT = cmTransport('fake-native', 'fakenative', [PortSpace.TCP], { connect: 56, accept: 196, reject: 148, udConnect: 180, udAccept: 136 }, { resolves: true });
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.TCP, { device: 'fakenative0' });
  id.bindAddr({ address: ADDR, port: 0 });
  const ep = lastEp(NT);
  await id.resolveAddr(null, { address: PEER, port: 1 });
  assert.equal(id.state, CmState.ADDR_QUERY);
  assert.equal(ep.calls.at(-1)[0], 'resolveAddr');
  ep.host.upcall({ event: CmEventType.ADDR_RESOLVED, localAddr: { address: ADDR, port: 0, family: 'IPv4' } });
  const ev = await ch.getEvent();
  assert.equal(ev.event, CmEventType.ADDR_RESOLVED);
  ev.ack();
  assert.equal(id.state, CmState.ADDR_RESOLVED);
  await id.destroy();
  ch.destroy();
});

test('a wildcard listener served by two transports: one port, each listener places requests on its own devices', async () => {
  const ln = createId(null, null, PortSpace.TCP);
  ln.bindAddr({ address: '0.0.0.0', port: 0 });
  const [iw0, nt0] = [IW.listens.length, NT.listens.length];
  await ln.listen(0);
  assert.equal(IW.listens.length, iw0 + 1);
  assert.equal(NT.listens.length, nt0 + 1);
  const [a, b] = [IW.listens.at(-1), NT.listens.at(-1)];
  assert.equal(a.req.backlog, 1024, 'backlog 0 means the kernel maximum');
  assert.equal(b.req.addr.port, a.port, 'the second transport listens on the port the first picked');
  assert.equal(ln.localAddr.port, a.port);
  assert.equal(a.host.deviceFor(ADDR).name, 'fakeiw0');
  assert.equal(b.host.deviceFor(ADDR).name, 'fakenative0');
  await ln.destroy();
  assert.ok(a.closed && b.closed);
});

test('rdma_notify: EINVAL without a device or for a bad event; the endpoint gets the event; EOPNOTSUPP where the transport does not pass it on', async () => {
  const ud = createId(null, null, PortSpace.UDP);
  assert.throws(() => ud.notify(AsyncEventType.COMM_EST), code('EINVAL'), 'no device');
  ud.bindAddr({ address: ADDR, port: 0 });
  ud.notify(AsyncEventType.COMM_EST);
  assert.deepEqual(lastEp(RC).calls.at(-1), ['notify', AsyncEventType.COMM_EST]);
  assert.throws(() => ud.notify(1.5), code('EINVAL'));
  assert.throws(() => ud.notify(-1), code('EINVAL'));
  const tcp = createId(null, null, PortSpace.TCP);
  tcp.bindAddr({ address: ADDR, port: 0 });
  assert.throws(() => tcp.notify(AsyncEventType.COMM_EST), code('EOPNOTSUPP'), 'the fake iWARP CM has no notify');
  await ud.destroy();
  await tcp.destroy();
  assert.throws(() => ud.notify(AsyncEventType.COMM_EST), code('EINVAL'), 'destroyed');
});

test('id.route: addresses, and the GIDs and P_Key of the first path record once resolved (copies); without records: ip2gid GIDs and P_Key 0xFFFF (IB), the device GID and no P_Key (iWARP)', async () => {
  const ch = createEventChannel();
  const fresh = createId(ch, null, PortSpace.UDP);
  const r0 = fresh.route;
  assert.deepEqual([r0.numPaths, r0.pathRec, r0.addr.srcAddr, r0.addr.dstAddr, r0.addr.ibaddr.pkey], [0, [], null, null, 0]);
  await fresh.destroy();
  const id = createId(ch, null, PortSpace.UDP);
  await id.resolveAddr({ address: ADDR, port: 0 }, { address: PEER, port: 7000 });
  (await ch.getEvent()).ack();
  const addrOnly = id.route;
  assert.equal(addrOnly.numPaths, 0, 'no path record before rdma_resolve_route');
  assert.deepEqual([...addrOnly.addr.ibaddr.sgid], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 20], 'rdma_ip2gid of the source');
  assert.deepEqual([...addrOnly.addr.ibaddr.dgid], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 21]);
  assert.equal(addrOnly.addr.ibaddr.pkey, 0xffff);
  await id.resolveRoute();
  (await ch.getEvent()).ack();
  const r = id.route;
  assert.equal(r.numPaths, 1);
  assert.deepEqual(r.addr.dstAddr, { address: PEER, port: 7000, family: 'IPv4' });
  assert.equal(r.addr.srcAddr.address, ADDR);
  assert.deepEqual([...r.pathRec[0].sgid], [...FAKE_PATH.sgid]);
  assert.deepEqual([...r.addr.ibaddr.sgid], [...FAKE_PATH.sgid], 'ibaddr from the path record');
  assert.deepEqual([...r.addr.ibaddr.dgid], [...FAKE_PATH.dgid]);
  assert.equal(r.addr.ibaddr.pkey, 0x8001);
  r.pathRec[0].sgid.fill(7);
  r.addr.srcAddr.address = 'x';
  assert.deepEqual([...lastEp(RC).paths.at(-1).sgid], [...FAKE_PATH.sgid], 'the transport\'s record untouched');
  assert.equal(id.route.addr.srcAddr.address, ADDR, 'the id\'s address untouched');
  const iw = await routed(PortSpace.TCP, ch);
  const ri = iw.route;
  assert.deepEqual([ri.numPaths, ri.addr.ibaddr.pkey], [0, 0], 'iWARP: no path record, no P_Key');
  assert.deepEqual([...ri.addr.ibaddr.sgid], [...iw.verbs.queryGid(1, 0)]);
  await id.destroy();
  await iw.destroy();
  ch.destroy();
});

test('ipToGid (rdma_ip2gid): IPv4-mapped for IPv4, the address for IPv6 (scope dropped), zeros for anything else', () => {
  const g = (ip) => [...ipToGid(ip)];
  assert.deepEqual(g('10.1.2.3'), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3]);
  assert.deepEqual(g('::ffff:10.1.2.3'), g('10.1.2.3'));
  assert.deepEqual(g('::1'), [...new Array(15).fill(0), 1]);
  assert.deepEqual(g('fe80::1:2%lo'), [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2]);
  assert.deepEqual(g('2001:db8:1:2:3:4:5:6'), [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6]);
  assert.deepEqual(g('not an address'), new Array(16).fill(0));
  assert.deepEqual(g('1:2:3'), new Array(16).fill(0));
  assert.deepEqual(g(undefined), new Array(16).fill(0));
});
