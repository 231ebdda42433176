// The soft RoCE device: what ibv_query_device/port/gid report (rxe's answers), the GID table,
// UD QP modify rules, post-time errors, UD send/receive with immediate data and the GRH area,
// and every receive drop reason counted (datagrams from a real UDP socket).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  PORT,
  lib,
  wire,
  loDevice,
  code,
  v4GidIndex,
  udQp,
  ahTo,
  pollN,
  rawSender,
  until,
  QpType,
  QpState,
  WrOpcode,
  SendFlags,
  Access,
  WcStatus,
  WcFlags,
  WcOpcode,
  roce,
} from '../../../lib/roce.js';
import { buildGidTable, formatIpv6, gidFromIp } from '../../../../dist/transport/roce/gid.js';
import { rxeDeviceAttr, ROCE_DEVICE_CAP_FLAGS } from '../../../../dist/transport/roce/params.js';
import { roceDevice } from '../../../../dist/transport/roce/device.js';
import { PortAgent } from '../../../../dist/transport/roce/udp.js';

const dev = loDevice();
const ctx = dev.open();
const pd = ctx.allocPd();
const cq = ctx.createCq(256);
const buf = Buffer.alloc(1 << 16);
const mr = pd.regMr(buf, Access.LOCAL_WRITE);
const sgid = v4GidIndex(ctx);
const myGid = ctx.queryGid(1, sgid);
const qps = [];
const raw = await rawSender();
after(() => {
  raw.close();
  for (const q of qps) {
    try {
      q.destroy();
    } catch {
      // destroyed by the test
    }
  }
});

function qp(qkey, cap) {
  const q = udQp(pd, cq, qkey, cap);
  qps.push(q);
  return q;
}
const count = (name) => roce.counters('rxe_lo')[name];

test('devices are named rxe_<ifname>, transport IB, node GUID = EUI-64 of the MAC', () => {
  assert.equal(dev.name, 'rxe_lo');
  assert.equal(dev.provider, 'rxe');
  assert.equal(dev.transportType, lib.TransportType.IB);
  assert.equal(dev.nodeType, lib.NodeType.CA);
  // loopback's MAC is all zeros: EUI-64 02:00:00:ff:fe:00:00:00
  assert.equal(dev.guid, 0x020000fffe000000n);
  assert.ok(lib.getDeviceList().some((d) => d.name === 'siw_lo'), 'the iWARP device stays beside it');
});

test('ibv_query_device answers as rxe (Linux 6.1 limits)', () => {
  const a = ctx.queryDevice();
  assert.equal(a.fwVer, '0.0.0');
  assert.equal(a.vendorId, 0xffffff);
  assert.equal(a.vendorPartId, 0);
  assert.equal(a.maxQp, 1048560);
  assert.equal(a.maxQpWr, 1048576);
  assert.equal(a.maxSge, 32);
  assert.equal(a.maxSgeRd, 32);
  assert.equal(a.maxCq, 1048576);
  assert.equal(a.maxCqe, 32767);
  assert.equal(a.maxMr, 524287);
  assert.equal(a.maxPd, 1048576);
  assert.equal(a.maxQpRdAtom, 128);
  assert.equal(a.maxResRdAtom, 258048);
  assert.equal(a.maxMcastGrp, 8192);
  assert.equal(a.maxMcastQpAttach, 56);
  assert.equal(a.maxTotalMcastQpAttach, 458752);
  assert.equal(a.maxAh, 32767);
  assert.equal(a.maxSrqSge, 27);
  assert.equal(a.maxPkeys, 64);
  assert.equal(a.localCaAckDelay, 15);
  assert.equal(a.pageSizeCap, 0xfffff000n);
  assert.equal(a.maxMrSize, 0xffffffffffffffffn);
  assert.equal(a.physPortCnt, 1);
  assert.equal(a.deviceCapFlags, ROCE_DEVICE_CAP_FLAGS);
  assert.equal(a.deviceCapFlags, 0x01623c76, 'rxe\'s flags (memory windows, type 1 and 2B, included) and multicast loopback blocking');
  assert.equal(a.maxMw, 524287);
  assert.equal(a.sysImageGuid, a.nodeGuid);
  assert.deepEqual(rxeDeviceAttr(5n).nodeGuid, 5n);
});

test('ibv_query_port: active, Ethernet, MTU from the interface as rxe (65536 - 80 → 4096)', () => {
  const p = ctx.queryPort(1);
  assert.equal(p.state, lib.PortState.ACTIVE);
  assert.equal(p.maxMtu, lib.Mtu.MTU_4096);
  assert.equal(p.activeMtu, wire.rxePortMtu(dev.info.mtu));
  assert.equal(p.linkLayer, lib.LinkLayer.ETHERNET);
  assert.equal(p.gidTblLen, 1024);
  assert.equal(p.pkeyTblLen, 1);
  assert.equal(p.portCapFlags, 0x10000);
  assert.equal(p.maxMsgSz, 0x800000);
  assert.equal(p.maxVlNum, 1);
  assert.equal(p.physState, 5);
  assert.equal(ctx.queryPkey(1, 0), 0xffff);
  assert.throws(() => ctx.queryPkey(1, 1), code('EINVAL'));
  assert.throws(() => ctx.queryPort(2), code('EINVAL'));
  // rxe: 1500 → 1024, 9000 → 4096, 576 → 256 (never below 256)
  assert.equal(wire.rxePortMtu(1500), 3);
  assert.equal(wire.rxePortMtu(9000), 5);
  assert.equal(wire.rxePortMtu(300), 1);
  assert.equal(wire.iboePathMtu(1500), 3);
});

test('GID table: default link-local GID from the MAC, IPv4-mapped then IPv6 addresses, RoCE v2', () => {
  assert.equal(formatIpv6(ctx.queryGid(1, 0)), 'fe80::200:ff:fe00:0');
  assert.equal(formatIpv6(myGid), '::ffff:127.0.0.1');
  assert.equal(ctx.queryGidType(1, sgid), lib.GidType.ROCE_V2);
  assert.deepEqual([...ctx.queryGid(1, 1000)], new Array(16).fill(0));
  const t = buildGidTable('eth9', '52:54:00:12:34:56', [
    { address: '10.0.0.2', family: 'IPv4' },
    { address: 'fe80::5054:ff:fe12:3456', family: 'IPv6' },
    { address: 'fd00::2', family: 'IPv6' },
  ]);
  assert.deepEqual(
    t.map((e) => formatIpv6(e.gid)),
    ['fe80::5054:ff:fe12:3456', '::ffff:10.0.0.2', 'fd00::2'],
  );
  assert.deepEqual([...gidFromIp('10.0.0.2')], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2]);
});

test('UD QP: RESET→INIT needs P_Key index, port and Q_Key; RTR→RTS needs the SQ PSN', () => {
  const q = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } });
  qps.push(q);
  assert.throws(() => q.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1 }), code('EINVAL'));
  assert.throws(() => q.modify({ qpState: QpState.INIT, pkeyIndex: 1, portNum: 1, qkey: 1 }), code('EINVAL'));
  q.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 0x1234 });
  q.modify({ qpState: QpState.RTR });
  assert.throws(() => q.modify({ qpState: QpState.RTS }), code('EINVAL'));
  q.modify({ qpState: QpState.RTS, sqPsn: 5 });
  const a = q.query();
  assert.equal(a.qkey, 0x1234);
  assert.equal(a.qpState, QpState.RTS);
  // rxe rounds queues to 2^k - 1 entries, at least the request
  assert.equal(q.cap.maxSendWr, 1);
  assert.equal(qp(1, { maxSendWr: 10 }).cap.maxSendWr, 15);
  // rxe makes UC QPs too (uc-engine.test.js); a type ibverbs does not have is EINVAL.
  const uc = pd.createQp({ qpType: QpType.UC, sendCq: cq, recvCq: cq, cap: {} });
  qps.push(uc);
  assert.equal(uc.qpType, QpType.UC);
  assert.throws(() => pd.createQp({ qpType: 9, sendCq: cq, recvCq: cq, cap: {} }), code('EINVAL'));
});

test('QP numbers come from a QPN block this process owns', () => {
  const q = qp(1);
  const agent = PortAgent.get(PORT);
  assert.ok(agent.ownsQpn(q.qpNum));
  assert.ok(q.qpNum >= 1024 && q.qpNum < 0xfffc00);
});

test('address handles: GRH required, sgid must exist, family must match', () => {
  assert.throws(() => pd.createAh({ isGlobal: false, portNum: 1 }), code('EINVAL'));
  assert.throws(() => ahTo(pd, myGid, 900), code('EINVAL'));
  const v6 = new Uint8Array(16);
  v6[15] = 1;
  assert.throws(() => ahTo(pd, v6, sgid), code('EINVAL'), 'IPv6 destination from an IPv4 GID');
  assert.throws(() => ahTo(pd, new Uint8Array(16).fill(0).map((x, i) => (i === 10 || i === 11 ? 0xff : 0)), sgid), code('EINVAL'));
  const ah = ahTo(pd, myGid, sgid);
  ah.destroy();
  assert.throws(() => ah.destroy(), code('EINVAL'));
});

test('UD SEND_WITH_IMM over loopback: payload after the 40-byte GRH area, src QP, imm, flags', async () => {
  const a = qp(0x11111111);
  const b = qp(0x11111111);
  const ah = ahTo(pd, myGid, sgid);
  b.postRecv({ wrId: 1, sgList: [{ addr: mr.addr + 1024, length: 20, lkey: mr.lkey }, { addr: mr.addr + 2048, length: 1000, lkey: mr.lkey }] });
  buf.write('hello soft roce', 0);
  a.postSend({ wrId: 7, opcode: WrOpcode.SEND_WITH_IMM, immData: 0xdeadbeef, sendFlags: SendFlags.SIGNALED | SendFlags.SOLICITED, sgList: [{ addr: mr.addr, length: 15, lkey: mr.lkey }], ud: { ah, remoteQpn: b.qpNum, remoteQkey: 0x11111111 } });
  const wcs = await pollN(cq, 2);
  const s = wcs.find((w) => w.wrId === 7);
  const r = wcs.find((w) => w.wrId === 1);
  assert.equal(s.status, WcStatus.SUCCESS);
  assert.equal(s.opcode, WcOpcode.SEND);
  assert.equal(r.status, WcStatus.SUCCESS);
  assert.equal(r.opcode, WcOpcode.RECV);
  assert.equal(r.byteLen, 40 + 15);
  assert.equal(r.srcQp, a.qpNum);
  assert.equal(r.qpNum, b.qpNum);
  assert.equal(r.wcFlags, WcFlags.GRH | WcFlags.WITH_IMM);
  assert.equal(r.immData, 0xdeadbeef);
  // GRH area split over two SGEs: 20 zero bytes, then the IPv4 header
  assert.deepEqual([...buf.subarray(1024, 1044)], new Array(20).fill(0));
  const ip = buf.subarray(2048, 2068);
  assert.equal(ip[0], 0x45);
  assert.equal(ip.readUInt16BE(2), 20 + 8 + 12 + 8 + 4 + 16 + 4); // IP+UDP+BTH+DETH+ImmDt+payload(15+1 pad)+ICRC
  assert.equal(ip[9], 17);
  assert.deepEqual([...ip.subarray(12, 20)], [127, 0, 0, 1, 127, 0, 0, 1]);
  assert.equal(wire.ipChecksum(ip, 0, 20), 0, 'valid header checksum');
  assert.equal(buf.subarray(2068, 2068 + 15).toString(), 'hello soft roce');
  ah.destroy();
});

test('post errors: no AH, message over the port MTU, RDMA opcodes, state', () => {
  const a = qp(1);
  const ah = ahTo(pd, myGid, sgid);
  const send = (extra) => a.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }], ud: { ah, remoteQpn: 0x1234, remoteQkey: 1 }, ...extra });
  assert.throws(() => send({ ud: undefined }), code('EINVAL'));
  const dead = ahTo(pd, myGid, sgid);
  dead.destroy();
  assert.throws(() => send({ ud: { ah: dead, remoteQpn: 5, remoteQkey: 1 } }), code('EINVAL'));
  const mtu = 256 << (ctx.queryPort(1).activeMtu - 1);
  assert.throws(() => send({ sgList: [{ addr: mr.addr, length: mtu + 1, lkey: mr.lkey }] }), (e) => e.code === 'EINVAL' && e.badWrIndex === 0);
  assert.throws(() => send({ opcode: WrOpcode.RDMA_WRITE, rdma: { remoteAddr: 0, rkey: 0 } }), code('EINVAL'));
  const fresh = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: {} });
  qps.push(fresh);
  assert.throws(() => fresh.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [], ud: { ah, remoteQpn: 5, remoteQkey: 1 } }), code('EINVAL'));
  ah.destroy();
});

test('inline send: the buffer may be reused at once', async () => {
  const a = qp(0x22);
  const b = qp(0x22);
  const ah = ahTo(pd, myGid, sgid);
  b.postRecv({ wrId: 'r', sgList: [{ addr: mr.addr + 8192, length: 200, lkey: mr.lkey }] });
  buf.write('inline!!', 4096);
  a.postSend({ wrId: 's', opcode: WrOpcode.SEND, sendFlags: SendFlags.INLINE, sgList: [{ addr: mr.addr + 4096, length: 8, lkey: mr.lkey }], ud: { ah, remoteQpn: b.qpNum, remoteQkey: 0x22 } });
  buf.write('XXXXXXXX', 4096);
  const [r] = await pollN(cq, 1);
  assert.equal(r.wrId, 'r');
  assert.equal(buf.subarray(8192 + 40, 8192 + 48).toString(), 'inline!!');
  ah.destroy();
});

test('a receive buffer smaller than GRH + payload completes LOC_LEN_ERR; the QP stays usable', async () => {
  const a = qp(0x33);
  const b = qp(0x33);
  const ah = ahTo(pd, myGid, sgid);
  b.postRecv({ wrId: 'small', sgList: [{ addr: mr.addr + 100, length: 45, lkey: mr.lkey }] });
  b.postRecv({ wrId: 'big', sgList: [{ addr: mr.addr + 200, length: 100, lkey: mr.lkey }] });
  const s = (n) => a.postSend({ wrId: n, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 10, lkey: mr.lkey }], ud: { ah, remoteQpn: b.qpNum, remoteQkey: 0x33 } });
  s(1);
  s(2);
  const wcs = await pollN(cq, 2);
  assert.equal(wcs[0].wrId, 'small');
  assert.equal(wcs[0].status, WcStatus.LOC_LEN_ERR);
  assert.equal(wcs[1].wrId, 'big');
  assert.equal(wcs[1].status, WcStatus.SUCCESS);
  assert.equal(b.state, QpState.RTS);
  ah.destroy();
});

test('datagrams from a UDP socket: delivered with the sender QP and the recovered IPv4 ID', async () => {
  const b = qp(0x01234567);
  b.postRecv({ wrId: 'raw', sgList: [{ addr: mr.addr + 16384, length: 512, lkey: mr.lkey }] });
  const before = count('rcvd_pkts');
  await raw.send(raw.ud({ destQp: b.qpNum, qkey: 0x01234567, srcQp: 0xabcde, payload: Buffer.from('from a socket'), imm: 0x01020304, ipId: 0x4242 }));
  const [r] = await pollN(cq, 1);
  assert.equal(r.status, WcStatus.SUCCESS);
  assert.equal(r.srcQp, 0xabcde);
  assert.equal(r.immData, 0x01020304);
  assert.equal(count('rcvd_pkts'), before + 1);
  const ip = buf.subarray(16384 + 20, 16384 + 40);
  assert.equal(ip.readUInt16BE(4), 0x4242, 'IP identification recovered from the ICRC');
  assert.equal(ip.readUInt16BE(6), 0x4000, 'DF');
  assert.equal(buf.subarray(16384 + 40, 16384 + 53).toString(), 'from a socket');
});

test('every drop reason is counted and nothing is delivered', async () => {
  const b = qp(0x5555);
  const initQp = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxRecvWr: 4 } });
  qps.push(initQp);
  initQp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: 0x5555 });
  for (let i = 0; i < 8; i++) b.postRecv({ wrId: `d${i}`, sgList: [{ addr: mr.addr + 32768, length: 1024, lkey: mr.lkey }] });
  initQp.postRecv({ wrId: 'init', sgList: [{ addr: mr.addr + 32768, length: 1024, lkey: mr.lkey }] });
  const good = raw.ud({ destQp: b.qpNum, qkey: 0x5555, payload: Buffer.from('abcd') });
  // A QPN of this process's block that no QP of this file holds (QPNs are drawn at random).
  const held = new Set(qps.map((q) => q.qpNum));
  let unknownQpn = (b.qpNum & ~0x3ff) | 2;
  while (held.has(unknownQpn)) unknownQpn++;
  const cases = [
    ['rcvd_truncated_drop', good.subarray(0, 10)],
    ['rcvd_bad_length_drop', good.subarray(0, 16)],
    ['rcvd_bad_version_drop', raw.ud({ destQp: b.qpNum, qkey: 0x5555, tver: 1 })],
    ['rcvd_bad_opcode_drop', Uint8Array.from(good, (x, i) => (i === 0 ? 0x18 : x))],
    ['rcvd_bad_opcode_drop', wire.encodeRocePacket({ opcode: wire.IbOpcode.RC_SEND_ONLY, destQp: b.qpNum, psn: 0, payload: new Uint8Array(4) }, raw.net)],
    ['rcvd_bad_pad_drop', Uint8Array.from(raw.ud({ destQp: b.qpNum, qkey: 0x5555 }), (x, i) => (i === 1 ? x | 0x30 : x))],
    ['rcvd_bad_pad_drop', Buffer.concat([good.subarray(0, good.length - 4), Buffer.alloc(2), good.subarray(good.length - 4)])],
    ['rcvd_icrc_err_drop', Uint8Array.from(good, (x, i) => (i === good.length - 1 ? x ^ 0x55 : x))],
    ['rcvd_icrc_err_drop', Uint8Array.from(good, (x, i) => (i === 24 ? x ^ 1 : x))],
    ['rcvd_unknown_qpn_drop', raw.ud({ destQp: unknownQpn, qkey: 0x5555 })],
    ['rcvd_unknown_qpn_drop', raw.ud({ destQp: 0, qkey: 0x5555 })],
    ['rcvd_bad_pkey_drop', raw.ud({ destQp: b.qpNum, qkey: 0x5555, pkey: 0x1234 })],
    ['rcvd_bad_qkey_drop', raw.ud({ destQp: b.qpNum, qkey: 0x5556 })],
    ['rcvd_qp_state_drop', raw.ud({ destQp: initQp.qpNum, qkey: 0x5555 })],
    ['rcvd_bad_qkey_drop', raw.ud({ destQp: 1, qkey: 0x5555 })],
  ];
  const port0 = ctx.queryPort(1);
  for (const [name, bytes] of cases) {
    const before = roce.counters('rxe_lo');
    await raw.send(bytes);
    await until(() => count(name) === before[name] + 1, 2000, `${name} counted`);
    const now = roce.counters('rxe_lo');
    assert.equal(now.rcvd_pkts, before.rcvd_pkts, `${name}: not received`);
  }
  const port1 = ctx.queryPort(1);
  assert.equal(port1.badPkeyCntr, port0.badPkeyCntr + 1);
  assert.equal(port1.qkeyViolCntr, port0.qkeyViolCntr + 2);
  // no receive WQE: counted as a drop
  const empty = qp(0x66);
  const before = count('rcvd_no_recv_wqe_drop');
  await raw.send(raw.ud({ destQp: empty.qpNum, qkey: 0x66 }));
  await until(() => count('rcvd_no_recv_wqe_drop') === before + 1);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(cq.poll(16), [], 'no completion for any dropped datagram');
  // the QP still receives a good one
  await raw.send(good);
  const [w] = await pollN(cq, 1);
  assert.equal(w.status, WcStatus.SUCCESS);
  assert.equal(w.qpNum, b.qpNum);
});

test('a destination address that is not a GID of the port is dropped', () => {
  const d = roceDevice('rxe_lo');
  const before = count('rcvd_dgid_mismatch_drop');
  d.rxDatagram(Buffer.from(raw.ud({ destQp: 5000, qkey: 1 })), { family: 4, src: '127.0.0.1', dst: '10.9.9.9', srcPort: raw.sport, forwarded: false });
  assert.equal(count('rcvd_dgid_mismatch_drop'), before + 1);
});

test('decoder fuzz: random and mutated datagrams never throw and are each dropped or received once', () => {
  const d = roceDevice('rxe_lo');
  const b = qp(0x7777);
  const good = Buffer.from(raw.ud({ destQp: b.qpNum, qkey: 0x7777, payload: Buffer.alloc(24, 7) }));
  let seed = 12345;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8);
  const sum = () => {
    const c = roce.counters('rxe_lo');
    let n = c.rcvd_pkts;
    for (const [k, v] of Object.entries(c)) if (k.startsWith('rcvd_') && k.endsWith('_drop')) n += v;
    return n;
  };
  const before = sum();
  const N = 4000;
  for (let i = 0; i < N; i++) {
    let pkt;
    if (i % 2 === 0) {
      pkt = Buffer.alloc(rnd() % 200);
      for (let k = 0; k < pkt.length; k++) pkt[k] = rnd();
      if (pkt.length > 8 && i % 4 === 0) pkt.writeUIntBE(b.qpNum, 5, 3);
    } else {
      pkt = Buffer.from(good);
      const flips = 1 + (rnd() % 3);
      for (let k = 0; k < flips; k++) pkt[rnd() % pkt.length] ^= 1 << (rnd() % 8);
      if (i % 5 === 0) pkt = pkt.subarray(0, rnd() % pkt.length);
    }
    d.rxDatagram(pkt, { family: 4, src: '127.0.0.1', dst: '127.0.0.1', srcPort: raw.sport, forwarded: false });
  }
  assert.equal(sum() - before, N, 'each datagram ends in exactly one counter');
});

test('ibv_create_ah_from_wc: the reply AH from the completion and the GRH area (IPv4 header at byte 20)', async () => {
  const a = qp(0x4444);
  const b = qp(0x4444);
  const ah = ahTo(pd, myGid, sgid);
  b.postRecv({ wrId: 'q', sgList: [{ addr: mr.addr + 20000, length: 200, lkey: mr.lkey }] });
  a.postRecv({ wrId: 'a', sgList: [{ addr: mr.addr + 21000, length: 200, lkey: mr.lkey }] });
  a.postSend({ wrId: 'x', opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 4, lkey: mr.lkey }], ud: { ah, remoteQpn: b.qpNum, remoteQkey: 0x4444 } });
  const [w] = await pollN(cq, 1);
  const attr = lib.initAhFromWc(ctx, 1, w, buf.subarray(20000, 20040));
  assert.equal(attr.isGlobal, true);
  assert.equal(attr.grh.sgidIndex, sgid);
  assert.deepEqual([...attr.grh.dgid], [...myGid]);
  assert.equal(attr.grh.hopLimit, 64);
  const reply = lib.createAhFromWc(pd, w, buf.subarray(20000, 20040), 1);
  b.postSend({ wrId: 'y', opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 4, lkey: mr.lkey }], ud: { ah: reply, remoteQpn: w.srcQp, remoteQkey: 0x4444 } });
  const [r] = await pollN(cq, 1);
  assert.equal(r.wrId, 'a');
  assert.equal(r.srcQp, b.qpNum);
  // an area holding no IP header
  assert.throws(() => lib.initAhFromWc(ctx, 1, w, new Uint8Array(40)), code('EPROTONOSUPPORT'));
  reply.destroy();
  ah.destroy();
});

test('ibv_init_ah_from_wc on an IPv6 header: the next header picks RoCE v2 (UDP) or v1 (0x1B), anything else EPROTONOSUPPORT', () => {
  // A GRH area as rxe writes it for a datagram from ::2 to ::1 (traffic class 0x28, hop limit 60).
  const v6 = [...Array(16).keys()].map((i) => ctx.queryGid(1, i)).findIndex((g) => g.every((x, k) => x === (k === 15 ? 1 : 0)));
  assert.ok(v6 > 0, 'rxe_lo has ::1 in its GID table');
  const area = (next) => {
    const g = new Uint8Array(40);
    g[0] = 0x62; // version 6, traffic class 0x28
    g[1] = 0x80;
    g[5] = 16; // payload length
    g[6] = next;
    g[7] = 60;
    g[23] = 2; // source ::2
    g[39] = 1; // destination ::1
    return g;
  };
  const wc = { wcFlags: WcFlags.GRH, slid: 0, sl: 0, dlidPathBits: 0 };
  const attr = lib.initAhFromWc(ctx, 1, wc, area(17));
  assert.equal(attr.grh.sgidIndex, v6);
  assert.deepEqual([...attr.grh.dgid], [...Array(15).fill(0), 2]);
  assert.equal(attr.grh.hopLimit, 60);
  assert.equal(attr.grh.trafficClass, 0x28);
  // 0x1B (an IB GRH, RoCE v1): only IB / RoCE v1 GIDs are searched, and rxe ports have none.
  assert.equal(ctx.queryGidType(1, v6), lib.GidType.ROCE_V2);
  assert.throws(() => lib.initAhFromWc(ctx, 1, wc, area(0x1b)), code('EINVAL'));
  for (const next of [0, 6, 58, 0x1a]) assert.throws(() => lib.initAhFromWc(ctx, 1, wc, area(next)), code('EPROTONOSUPPORT'), `next header ${next}`);
  // a multicast destination is refused before the next header is looked at (libibverbs' order)
  const mc = area(6);
  mc[24] = 0xff;
  assert.throws(() => lib.initAhFromWc(ctx, 1, wc, mc), code('EINVAL'));
});

test('RoCE CM defaults as cma.c: SIDR resend every 4096 ms, 15 resends', () => {
  assert.equal(process.env.RDMACM_ROCE_SIDR_TIMEOUT_MS, undefined);
  assert.deepEqual(roce.cmConfig(), { sidrTimeoutMs: 4096, sidrRetries: 15 });
});
