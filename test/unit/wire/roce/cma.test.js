// rdma_cm over RoCE: Service IDs, the CMA private-data header, GIDs, multicast MGIDs, the RoCEv2
// flow label, address text forms; the GSI datagram wrapping of CM MADs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roce } from '../../../../dist/wire/index.js';
import { hex, randomBytes, rng } from './roce-util.js';

test('Service IDs per port space (cma.c cma_get_service_id)', () => {
  const { RdmaPortSpace, cmaServiceId } = roce;
  assert.equal(cmaServiceId(RdmaPortSpace.TCP, 7174), 0x0000000001061c06n);
  assert.equal(cmaServiceId(RdmaPortSpace.UDP, 7174), 0x0000000001111c06n);
  assert.equal(cmaServiceId(RdmaPortSpace.IB, 0xffff), 0x00000000013fffffn);
  assert.equal(cmaServiceId(RdmaPortSpace.IPOIB, 1), 0x0000000000020001n);
  assert.equal(cmaServiceId(RdmaPortSpace.TCP, 0) & roce.RDMA_IB_IP_PS_MASK, roce.RDMA_IB_IP_PS_TCP);
  assert.equal(cmaServiceId(RdmaPortSpace.UDP, 5) & roce.RDMA_IB_IP_PS_MASK, roce.RDMA_IB_IP_PS_UDP);
  assert.equal(cmaServiceId(RdmaPortSpace.IB, 5) & roce.RDMA_IB_IP_PS_MASK, roce.RDMA_IB_IP_PS_IB);
  assert.deepEqual(roce.cmaServiceIdParts(0x0000000001064853n), { ps: 0x0106, port: 18515 });
  assert.equal(roce.RDMA_UDP_QKEY, 0x01234567);
});

test('CMA header: IPv4 zero-padded (not ::ffff), IPv6 as is, round trip', () => {
  const v4 = { version: 0, ipVersion: 4, srcPort: 0x8e83, src: Uint8Array.of(10, 77, 0, 3), dst: Uint8Array.of(10, 77, 0, 2) };
  const pd = roce.encodeCmaPrivateData(v4, Uint8Array.of(0xaa, 0xbb));
  // bytes of the SIDR_REQ udaddy sent in the E-rxe-2vm capture, then the user data
  assert.deepEqual(pd, hex('00408e83' + '00'.repeat(12) + '0a4d0003' + '00'.repeat(12) + '0a4d0002' + 'aabb'));
  assert.deepEqual(roce.decodeCmaHeader(pd), v4);
  const v6 = { version: 0, ipVersion: 6, srcPort: 1, src: roce.parseIp('fe80::1'), dst: roce.parseIp('2001:db8::2') };
  const b = new Uint8Array(40);
  assert.equal(roce.writeCmaHeader(b, 2, v6), 38);
  assert.equal(b[3], 0x60);
  assert.deepEqual(roce.decodeCmaHeader(b, 2), v6);
  assert.throws(() => roce.decodeCmaHeader(pd.subarray(0, 35)), { code: 'EBADMSG' });
  const bad = Uint8Array.from(pd);
  bad[1] = 0x50;
  assert.throws(() => roce.decodeCmaHeader(bad), { code: 'EBADMSG' });
  assert.throws(() => roce.writeCmaHeader(new Uint8Array(36), 0, { ...v4, src: new Uint8Array(16) }), { code: 'EINVAL' });
  assert.deepEqual([roce.CMA_HDR_LEN, roce.CMA_REQ_USER_PD, roce.CMA_SIDR_USER_PD], [36, 56, 180]);
  const next = rng(4);
  for (let i = 0; i < 100; i++) {
    const six = i % 2 === 0;
    const h = { version: next() & 0xff, ipVersion: six ? 6 : 4, srcPort: next() & 0xffff, src: randomBytes(next, six ? 16 : 4), dst: randomBytes(next, six ? 16 : 4) };
    assert.deepEqual(roce.decodeCmaHeader(roce.encodeCmaPrivateData(h)), h);
  }
});

test('GIDs: IPv4-mapped for IPv4, the address itself for IPv6', () => {
  const g = roce.gidFromIpv4(Uint8Array.of(10, 77, 0, 2));
  assert.deepEqual(g, hex('00000000000000000000ffff0a4d0002'));
  assert.equal(roce.isIpv4MappedGid(g), true);
  assert.deepEqual(roce.ipFromGid(g), Uint8Array.of(10, 77, 0, 2));
  const six = roce.parseIp('fe80::5054:ff:fe77:2');
  assert.deepEqual(roce.gidFromIp(six), six);
  assert.deepEqual(roce.ipFromGid(six), six);
  assert.equal(roce.isIpv4MappedGid(six), false);
  assert.equal(roce.formatGid(g), '0000:0000:0000:0000:0000:ffff:0a4d:0002');
  assert.throws(() => roce.gidFromIp(new Uint8Array(5)), { code: 'EINVAL' });
});

test('multicast MGIDs (cma_iboe_set_mgid)', () => {
  assert.deepEqual(roce.cmaIboeMgid(Uint8Array.of(239, 1, 1, 1)), hex('00000000000000000000ffffef010101'));
  assert.deepEqual(roce.cmaIboeMgid(Uint8Array.of(239, 1, 1, 1), false), hex('ff0e0000000000000000ffffef010101'));
  const six = roce.parseIp('ff0e::1234');
  assert.deepEqual(roce.cmaIboeMgid(six), six);
  assert.deepEqual(roce.cmaIboeMgid(new Uint8Array(4)), new Uint8Array(16));
});

test('RoCEv2 flow label from the rdma_cm ports, and the rxe source port it gives', () => {
  // E-rxe-2vm: ib_send_lat connection from port 0x99aa to 18515 carried flow label 189417, and
  // rxe then sent that connection's RC packets from UDP port 58338
  const fl = roce.cmaRoceFlowLabel(0x99aa, 18515);
  assert.equal(fl, 189417);
  assert.equal(roce.rdmaFlowLabelToUdpSport(fl), 58338);
  assert.equal(roce.cmaRoceFlowLabel(0xffff, 0xffff), (0xffff * 32) & 0xfffff);
  assert.equal(roce.cmaRoceFlowLabel(1, 2, 0x12345), 0x12345, 'an IPv6 flow label of the source wins');
});

test('address text forms', () => {
  const cases = [
    ['10.77.0.2', '10.77.0.2'], ['0.0.0.0', '0.0.0.0'], ['::', '::'], ['::1', '::1'], ['fe80::1', 'fe80::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['::ffff:10.77.0.2', '::ffff:10.77.0.2'], ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'], ['[::1]', '::1'], ['1::', '1::'],
  ];
  for (const [inp, out] of cases) assert.equal(roce.formatIp(roce.parseIp(inp)), out, inp);
  for (const bad of ['', '1.2.3', '256.0.0.1', '01.2.3.4', '1::2::3', '1:2:3:4:5:6:7:8:9', 'g::', '::1.2.3', '1:2:3:4:5:6:7::8']) {
    assert.throws(() => roce.parseIp(bad), { code: 'EINVAL' }, bad);
  }
});

test('GSI wrapping: UD SEND_ONLY QP1 → QP1, Q_Key 0x80010000, 256-byte MAD', () => {
  const mad = roce.encodeCmMad({ kind: 'RTU', localCommId: 1, remoteCommId: 2, privateData: new Uint8Array(0) }, 3n);
  const net = { family: 4, src: Uint8Array.of(10, 0, 0, 1), dst: Uint8Array.of(10, 0, 0, 2), sport: roce.GSI_UDP_SPORT, ipId: 9 };
  assert.equal(roce.GSI_UDP_SPORT, 55410);
  const pkt = roce.encodeGsiPacket(mad, net, { psn: 4 });
  assert.equal(pkt.length, 12 + 8 + 256 + 4);
  assert.deepEqual([...pkt.subarray(0, 20)], [0x64, 0, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 4, 0x80, 0x01, 0, 0, 0, 0, 0, 1]);
  const d = roce.decodeGsiPacket(pkt, { net });
  assert.ok(d.ok);
  assert.deepEqual(d.gsi.mad, mad);
  assert.deepEqual([d.gsi.srcQp, d.gsi.psn, d.gsi.pkey], [1, 4, 0xffff]);
  assert.throws(() => roce.encodeGsiPacket(mad.subarray(1), net, { psn: 0 }), { code: 'EINVAL' });
  const toUd = roce.encodeRocePacket({ opcode: roce.IbOpcode.UD_SEND_ONLY, destQp: 5, psn: 0, deth: { qkey: 0x80010000, srcQp: 1 }, payload: mad }, net);
  assert.deepEqual(roce.decodeGsiPacket(toUd, { net }), { ok: false, drop: 'not_gsi' });
  const short = roce.encodeRocePacket({ opcode: roce.IbOpcode.UD_SEND_ONLY, destQp: 1, psn: 0, deth: { qkey: 0x80010000, srcQp: 1 }, payload: mad.subarray(0, 200) }, net);
  assert.deepEqual(roce.decodeGsiPacket(short, { net }), { ok: false, drop: 'bad_mad_length' });
  const wrongKey = roce.encodeRocePacket({ opcode: roce.IbOpcode.UD_SEND_ONLY, destQp: 1, psn: 0, deth: { qkey: 1, srcQp: 1 }, payload: mad }, net);
  assert.deepEqual(roce.decodeGsiPacket(wrongKey, { net }), { ok: false, drop: 'bad_qkey' });
});
