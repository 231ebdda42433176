// What the kernel's rdma_cm puts on the wire and a peer relies on, checked on our REQ and SIDR_REQ
// against a hand-made peer at 127.0.0.2: an id that connects without binding a port gets a
// random one of the local port range (cma_alloc_any_port, at rdma_resolve_addr in the kernel);
// the CMA header carries it as the source port, the path's flow label is derived from it
// (cma_get_roce_udp_flow_label: sport * 31 + dport), and the id reports it as its local address.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { PORT, lib, wire } from './roce-helpers.js';

const { createEventChannel, createId, PortSpace, CmEventType, configureRoceRcCm } = lib;
configureRoceRcCm({ cmTimeoutMs: 150, cmRetries: 2, timewaitMs: 60 });

const LOCAL = '127.0.0.1';
const PEER = '127.0.0.2';
const V4 = (s) => Uint8Array.from(s.split('.').map(Number));
const [LO, HI] = (() => {
  try {
    return readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'latin1').trim().split(/\s+/).map(Number);
  } catch {
    return [32768, 60999];
  }
})();
let nextPort = 30000 + Math.floor(Math.random() * 20000);

async function expectEvent(ch, type, ms = 3000) {
  let t;
  const ev = await Promise.race([ch.getEvent(), new Promise((_, rej) => (t = setTimeout(() => rej(new Error(`no ${lib.rdmaEventStr(type)} within ${ms} ms`)), ms)))]);
  clearTimeout(t);
  assert.equal(lib.rdmaEventStr(ev.event), lib.rdmaEventStr(type), `got ${lib.rdmaEventStr(ev.event)} status ${ev.status}`);
  return ev;
}

/** A UDP socket at 127.0.0.2 on the RoCE port that collects the MADs it receives. */
async function madPeer() {
  const sock = dgram.createSocket('udp4');
  sock.bind(PORT, PEER);
  await once(sock, 'listening');
  const mads = [];
  sock.on('message', (msg, rinfo) => {
    const net = { family: 4, src: V4(rinfo.address), dst: V4(PEER), sport: rinfo.port, dport: PORT };
    const g = wire.decodeGsiPacket(msg, { net });
    if (g.ok) mads.push(wire.decodeCmMad(g.gsi.mad));
  });
  const out = { family: 4, src: V4(PEER), dst: V4(LOCAL), sport: PORT, dport: PORT };
  return {
    async mad(kind, ms = 3000) {
      const end = Date.now() + ms;
      for (;;) {
        const i = mads.findIndex((m) => m.msg.kind === kind);
        if (i >= 0) return mads.splice(i, 1)[0];
        if (Date.now() > end) throw new Error(`no ${kind} within ${ms} ms`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    sendMad(msg, tid) {
      sock.send(wire.encodeGsiPacket(wire.encodeCmMad(msg, tid), out, { psn: 0 }), PORT, LOCAL);
    },
    close: () => sock.close(),
  };
}

async function resolvedId(ch, ps, port) {
  const id = createId(ch, null, ps, { device: 'rxe_lo' });
  await id.resolveAddr({ address: LOCAL, port: 0 }, { address: PEER, port }, 2000);
  (await expectEvent(ch, CmEventType.ADDR_RESOLVED)).ack();
  await id.resolveRoute(2000);
  (await expectEvent(ch, CmEventType.ROUTE_RESOLVED)).ack();
  return id;
}

test('RC: an id bound to port 0 connects from a random port of the local port range: CMA header, flow label, local address', async () => {
  const peer = await madPeer();
  const ch = createEventChannel();
  try {
    const seen = new Set();
    for (let i = 0; i < 2; i++) {
      const port = nextPort++;
      const id = await resolvedId(ch, PortSpace.TCP, port);
      id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
      await id.connect({ responderResources: 1, initiatorDepth: 1 });
      const { hdr, msg: q } = await peer.mad('REQ');
      const h = wire.decodeCmaHeader(q.privateData);
      assert.ok(h.srcPort >= LO && h.srcPort <= HI, `CMA header source port ${h.srcPort} in ${LO}..${HI}`);
      assert.equal(q.primaryPath.flowLabel, (h.srcPort * 31 + port) & 0xfffff, 'flow label: sport * 31 + dport');
      seen.add(h.srcPort);
      peer.sendMad({
        kind: 'REP', localCommId: 0x7000 + i, remoteCommId: q.localCommId, localQkey: 0, localQpn: 0x5151, vendorId: 0, localEecn: 0,
        startingPsn: 0x777, responderResources: 1, initiatorDepth: 1, targetAckDelay: 15, failoverAccepted: 0, e2eFlowControl: false,
        rnrRetryCount: 7, srq: false, localCaGuid: 0x0200000000000001n, privateData: new Uint8Array(0),
      }, hdr.tid);
      (await expectEvent(ch, CmEventType.ESTABLISHED)).ack();
      await peer.mad('RTU');
      assert.deepEqual(id.localAddr, { address: LOCAL, port: h.srcPort, family: 'IPv4' }, 'rdma_get_local_addr shows the port the REQ named');
      id.destroyQp();
      await id.destroy();
    }
    assert.ok(seen.size >= 1);
  } finally {
    ch.destroy();
    peer.close();
  }
});

test('RC: an id bound to a port connects from that port', async () => {
  const peer = await madPeer();
  const ch = createEventChannel();
  try {
    const port = nextPort++;
    const mine = nextPort++;
    const id = createId(ch, null, PortSpace.TCP, { device: 'rxe_lo' });
    id.bindAddr({ address: LOCAL, port: mine });
    await id.resolveAddr(null, { address: PEER, port }, 2000);
    (await expectEvent(ch, CmEventType.ADDR_RESOLVED)).ack();
    await id.resolveRoute(2000);
    (await expectEvent(ch, CmEventType.ROUTE_RESOLVED)).ack();
    id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
    await id.connect({});
    const { msg: q } = await peer.mad('REQ');
    assert.equal(wire.decodeCmaHeader(q.privateData).srcPort, mine);
    assert.equal(q.primaryPath.flowLabel, (mine * 31 + port) & 0xfffff);
    id.destroyQp();
    await id.destroy();
  } finally {
    ch.destroy();
    peer.close();
  }
});

test('UD: the SIDR_REQ of an id bound to port 0 names a random port of the local port range in its CMA header', async () => {
  const peer = await madPeer();
  const ch = createEventChannel();
  try {
    const id = await resolvedId(ch, PortSpace.UDP, nextPort++);
    id.createQp(null, { qpType: lib.QpType.UD, cap: { maxSendWr: 4, maxRecvWr: 4 } });
    await id.connect({});
    const { msg: q } = await peer.mad('SIDR_REQ');
    const h = wire.decodeCmaHeader(q.privateData);
    assert.ok(h.srcPort >= LO && h.srcPort <= HI, `CMA header source port ${h.srcPort} in ${LO}..${HI}`);
    id.destroyQp();
    await id.destroy();
  } finally {
    ch.destroy();
    peer.close();
  }
});
