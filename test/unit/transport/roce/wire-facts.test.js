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
import { PORT, lib, wire } from '../../../lib/roce.js';
import { expectEvent } from '../../../lib/cm.js';
import { until } from '../../../lib/wait.js';

const { createEventChannel, createId, PortSpace, CmEventType, roce } = lib;
roce.configureRcCm({ cmTimeoutMs: 150, cmRetries: 2, timewaitMs: 60 });

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
    for (let i = 0; i < 2; i++) {
      const port = nextPort++;
      const id = await resolvedId(ch, PortSpace.TCP, port);
      id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
      await id.connect({ responderResources: 1, initiatorDepth: 1 });
      const { hdr, msg: q } = await peer.mad('REQ');
      const h = wire.decodeCmaHeader(q.privateData);
      assert.ok(h.srcPort >= LO && h.srcPort <= HI, `CMA header source port ${h.srcPort} in ${LO}..${HI}`);
      assert.equal(q.primaryPath.flowLabel, (h.srcPort * 31 + port) & 0xfffff, 'flow label: sport * 31 + dport');
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

// A kernel rxe sends its datagrams with UDP checksum 0 (the ICRC protects them); over IPv6 the
// receiving socket must allow that (UDP_NO_CHECK6_RX) or Linux drops every one of them. A raw
// IPv6 socket (root only) sends such a datagram to the device's ::1 socket.
test('IPv6: a UD SEND with UDP checksum 0, as a kernel rxe sends it, is received', { skip: process.getuid?.() !== 0 && 'needs root (a raw IPv6 socket sends the datagram)' }, async () => {
  const { spawnSync } = await import('node:child_process');
  const { QpType, QpState, Access } = lib;
  const dev = lib.getDeviceList().find((d) => d.name === 'rxe_lo');
  const ctx = dev.open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(8);
  const qp = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: 4, maxSendSge: 1, maxRecvSge: 1 } });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 0x1234 });
  qp.modify({ qpState: QpState.RTR });
  qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
  // the device's IPv6 socket on ::1 exists once a GID of it is used
  let sgid = -1;
  for (let i = 0; i < 8 && sgid < 0; i++) if (Buffer.from(ctx.queryGid(1, i)).equals(Buffer.from('00000000000000000000000000000001', 'hex'))) sgid = i;
  assert.ok(sgid >= 0, 'rxe_lo has the GID ::1');
  const ah = pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: ctx.queryGid(1, sgid), flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } });
  const buf = Buffer.alloc(256);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr, length: 256, lkey: mr.lkey }] });
  // our own send to ::1 makes sure the socket is bound (and is received: a second receive)
  qp.postRecv({ wrId: 2, sgList: [{ addr: mr.addr + 128, length: 128, lkey: mr.lkey }] });
  const one = Buffer.from('00000000000000000000000000000001', 'hex');
  const sport = 0xc000 + Math.floor(Math.random() * 0x3fff);
  const payload = Buffer.from('checksum zero');
  const udpPayload = Buffer.from(wire.encodeRocePacket({ opcode: wire.IbOpcode.UD_SEND_ONLY, destQp: qp.qpNum, psn: 0, deth: { qkey: 0x1234, srcQp: 0x99 }, payload }, { family: 6, src: one, dst: one, sport, dport: PORT }));
  const smr = pd.regMr(Buffer.from('warm up'), 0);
  qp.postSend({ wrId: 3, opcode: lib.WrOpcode.SEND, sendFlags: lib.SendFlags.SIGNALED, sgList: [{ addr: smr.addr, length: 7, lkey: smr.lkey }], ud: { ah, remoteQpn: qp.qpNum, remoteQkey: 0x1234 } });
  const got = [];
  /** Reap `cq` into `got` until `pred()` holds. */
  const reapUntil = (pred, what) => until(() => (got.push(...cq.poll(8)), pred()), 3000, what);
  await reapUntil(() => got.filter((w) => w.wrId === 1 || w.wrId === 2).length >= 1, 'our own datagram');
  assert.equal(got.filter((w) => w.wrId === 1).length, 1, 'our own datagram over ::1 arrived');
  // UDP header with checksum 0, then the packet; the kernel adds the IPv6 header
  const udp = Buffer.alloc(8);
  udp.writeUInt16BE(sport, 0);
  udp.writeUInt16BE(PORT, 2);
  udp.writeUInt16BE(8 + udpPayload.length, 4);
  const py = 'import socket,sys\ns=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_UDP)\ns.sendto(bytes.fromhex(sys.argv[1]),("::1",0))\n';
  const r = spawnSync('python3', ['-c', py, Buffer.concat([udp, udpPayload]).toString('hex')], { encoding: 'utf8', timeout: 10_000 });
  assert.equal(r.status, 0, `python3 raw socket: ${r.stderr}`);
  await reapUntil(() => got.some((w) => w.wrId === 2), () => `the datagram with UDP checksum 0 (completions: ${JSON.stringify(got.map((w) => w.wrId))})`);
  const wc = got.find((w) => w.wrId === 2);
  assert.ok(wc, `the datagram with UDP checksum 0 was not received (completions: ${JSON.stringify(got.map((w) => w.wrId))})`);
  assert.equal(wc.status, lib.WcStatus.SUCCESS);
  assert.equal(buf.subarray(128 + 40, 128 + 40 + payload.length).toString(), 'checksum zero', 'after the 40-byte GRH');
  qp.destroy();
  ah.destroy();
  mr.dereg();
  smr.dereg();
  cq.destroy();
  pd.dealloc();
  ctx.close();
});
