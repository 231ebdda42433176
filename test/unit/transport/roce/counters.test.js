// The device's receive counters add up: a known mix of datagrams (good UD, a UD QP without a
// receive WQE, multicast to a group whose QPs hold different Q_Keys, multicast nobody takes,
// garbage and unroutable MADs) each ends in exactly one of `rcvd_pkts` and the `rcvd_*_drop`
// counters, the one docs/design/roce-device.md names for its class.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { wire, loDevice, udQp, pollN, rawSender, Access, WcStatus, roce } from '../../../lib/roce.js';
import { roceDevice } from '../../../../dist/transport/roce/device.js';

const dev = loDevice();
const ctx = dev.open();
const pd = ctx.allocPd();
const cq = ctx.createCq(256);
const buf = Buffer.alloc(1 << 16);
const mr = pd.regMr(buf, Access.LOCAL_WRITE);
const raw = await rawSender();
const qps = [];
after(() => {
  raw.close();
  for (const q of qps) q.destroy();
});

function qp(qkey, recvs = 0) {
  const q = udQp(pd, cq, qkey);
  qps.push(q);
  for (let i = 0; i < recvs; i++) q.postRecv({ wrId: `${q.qpNum}.${i}`, sgList: [{ addr: mr.addr + 512 * qps.length, length: 512, lkey: mr.lkey }] });
  return q;
}

/** `rcvd_pkts` plus every `rcvd_*_drop`: what the receive path has accounted for. */
function accounted(c) {
  let n = c.rcvd_pkts;
  for (const [k, v] of Object.entries(c)) if (k.startsWith('rcvd_') && k.endsWith('_drop')) n += v;
  return n;
}

const V4 = (s) => Uint8Array.from(s.split('.').map(Number));
const mcastGid = (ip) => Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...V4(ip)]);

/** A UD datagram to the group `group` (QPN 0xFFFFFF), its ICRC over that destination. */
function mcastUd(group, qkey) {
  const net = { ...raw.net, dst: V4(group) };
  return Buffer.from(wire.encodeRocePacket({ opcode: wire.IbOpcode.UD_SEND_ONLY, destQp: wire.IB_MULTICAST_QPN, psn: 0, deth: { qkey, srcQp: 0x99 }, payload: Buffer.from('group') }, { ...net, ipId: 0 }));
}

/** A QP1 datagram carrying `mad` (256 bytes). */
function gsi(mad) {
  return Buffer.from(wire.encodeGsiPacket(mad, { ...raw.net, ipId: 0 }, { psn: 0 }));
}

test('every datagram ends in exactly one of rcvd_pkts and the drop counters, the one its class names', { timeout: 30_000 }, async () => {
  const good = qp(0x5555, 4);
  const d = roceDevice('rxe_lo');
  const starved = qp(0x6666, 0);
  // group A: one QP with the sender's Q_Key, one without; group B: nobody holds it
  const a1 = qp(0x1010, 2);
  const a2 = qp(0x2020, 2);
  const b1 = qp(0x3030, 2);
  a1.attachMcast(mcastGid('239.1.1.1'), 0);
  a2.attachMcast(mcastGid('239.1.1.1'), 0);
  b1.attachMcast(mcastGid('239.1.1.2'), 0);
  const garbageMad = Buffer.alloc(256, 0xa5);
  const strayRtu = Buffer.from(wire.encodeCmMad({ kind: 'RTU', localCommId: 0x1234, remoteCommId: 0x7777, privateData: new Uint8Array(0) }, 5n));
  const strayDrep = Buffer.from(wire.encodeCmMad({ kind: 'DREP', localCommId: 0x4321, remoteCommId: 0x8888, privateData: new Uint8Array(0) }, 6n));
  const staleSidrRep = Buffer.from(wire.encodeCmMad({ kind: 'SIDR_REP', requestId: 0x5a5a5a5a, status: 0, addInfoLength: 0, vendorId: 0, qpn: 0x99, serviceId: 0x106abcdn, qkey: 0x1234, addInfo: new Uint8Array(0), privateData: new Uint8Array(0) }, 7n));
  const local = (dst = '127.0.0.1') => ({ family: 4, src: '127.0.0.1', dst, srcPort: raw.sport, forwarded: false });
  const cases = [
    ['rcvd_pkts', raw.ud({ destQp: good.qpNum, qkey: 0x5555, payload: Buffer.from('one') }), local()],
    ['rcvd_no_recv_wqe_drop', raw.ud({ destQp: starved.qpNum, qkey: 0x6666 }), local()],
    ['rcvd_pkts', mcastUd('239.1.1.1', 0x1010), local('239.1.1.1')],
    ['rcvd_bad_qkey_drop', mcastUd('239.1.1.2', 0x1010), local('239.1.1.2')],
    ['rcvd_mcast_no_group_drop', mcastUd('239.1.1.3', 0x1010), local('239.1.1.3')],
    ['rcvd_mad_unroutable_drop', gsi(garbageMad), local()],
    ['rcvd_mad_unroutable_drop', gsi(strayRtu), local()],
    ['rcvd_mad_unroutable_drop', gsi(strayDrep), local()],
    ['rcvd_mad_unroutable_drop', gsi(staleSidrRep), local()],
    ['rcvd_bad_qkey_drop', raw.ud({ destQp: good.qpNum, qkey: 0x5556 }), local()],
    ['rcvd_pkts', raw.ud({ destQp: good.qpNum, qkey: 0x5555, payload: Buffer.from('two') }), local()],
  ];
  const start = roce.counters('rxe_lo');
  const qkeyViol0 = ctx.queryPort(1).qkeyViolCntr;
  for (const [name, bytes, meta] of cases) {
    const before = roce.counters('rxe_lo');
    d.rxDatagram(bytes, meta);
    const now = roce.counters('rxe_lo');
    assert.equal(accounted(now) - accounted(before), 1, `${name}: counted once`);
    assert.equal(now[name], before[name] + 1, `${name}: in its counter`);
  }
  const end = roce.counters('rxe_lo');
  assert.equal(accounted(end) - accounted(start), cases.length, 'sum = rcvd_pkts + Σ drops');
  assert.equal(end.rcvd_pkts - start.rcvd_pkts, 3);
  assert.equal(end.rcvd_mcast_pkts - start.rcvd_mcast_pkts, 1, 'rcvd_mcast_pkts: the group datagram a QP took');
  // rxe checks each attached QP on its own: a2 and b1 refused for their Q_Key, the unicast one too
  assert.equal(ctx.queryPort(1).qkeyViolCntr - qkeyViol0, 3, 'qkey_viol_cntr counts each refusing QP');
  const wcs = await pollN(cq, 3, 3000);
  assert.deepEqual(
    wcs.map((w) => [w.qpNum, w.status]).sort((x, y) => x[0] - y[0]),
    [
      [good.qpNum, WcStatus.SUCCESS],
      [good.qpNum, WcStatus.SUCCESS],
      [a1.qpNum, WcStatus.SUCCESS],
    ].sort((x, y) => x[0] - y[0]),
  );
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(cq.poll(16), [], 'nothing else completed');
  a1.detachMcast(mcastGid('239.1.1.1'), 0);
  a2.detachMcast(mcastGid('239.1.1.1'), 0);
  b1.detachMcast(mcastGid('239.1.1.2'), 0);
});
