import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LO, ETH, SMALL, fake, dev, code, SIW_QUERIES } from '../../lib/fake-provider.js';
import {
  getDeviceList,
  findDeviceByAddress,
  netdevs,
  guidFromMac,
  guidFromName,
  eui64FromMac,
  formatGuid,
  mtuToEnum,
  mtuEnumToBytes,
  Mtu,
  NodeType,
  PortState,
  LinkLayer,
  nodeTypeStr,
  portStateStr,
} from '../../../dist/verbs/device.js';
import { registerProvider, unregisterProvider, getProvider } from '../../../dist/verbs/provider.js';
import { SIW_LIMITS } from '../../../dist/transport/iwarp/attrs.js';
import { TransportType, QpType } from '../../../dist/verbs/types.js';

test('getDeviceList lists the provider devices and caches Device objects', () => {
  const a = getDeviceList();
  const names = a.map((d) => d.name);
  assert.deepEqual(names, ['fake_lo', 'fake_eth0', 'fake_small']);
  const b = getDeviceList();
  assert.notEqual(a, b);
  for (let i = 0; i < a.length; i++) assert.equal(a[i], b[i]);
  const d = dev(ETH);
  assert.equal(d.provider, 'fake');
  assert.equal(d.transportType, TransportType.IWARP);
  assert.equal(d.nodeType, NodeType.RNIC);
  assert.equal(nodeTypeStr(d.nodeType), 'iWARP NIC');
  assert.equal(d.ifname, 'eth0');
  assert.equal(d.guid, ETH.nodeGuid);
});

test('open() returns a per-device singleton context; close() is a no-op', () => {
  const d = dev(LO);
  const c1 = d.open();
  const c2 = d.open();
  assert.equal(c1, c2);
  assert.equal(c1.device, d);
  c1.close();
  assert.equal(d.open(), c1);
  assert.notEqual(dev(ETH).open(), c1);
  assert.ok(c1.numCompVectors >= 1);
});

test('queryDevice reports siw attributes', () => {
  const ctx = dev(ETH).open();
  const a = ctx.queryDevice();
  assert.equal(a.vendorId, 0x626d74);
  assert.equal(a.maxQp, 102400);
  assert.equal(a.maxQpWr, 32768);
  assert.equal(a.maxSge, 6);
  assert.equal(a.maxSgeRd, 1);
  assert.equal(a.maxCq, 102400);
  assert.equal(a.maxCqe, 3276800);
  assert.equal(a.maxMr, 1024000);
  assert.equal(a.maxPd, 102400);
  assert.equal(a.maxMw, 0);
  assert.equal(a.maxQpRdAtom, 128);
  assert.equal(a.maxQpInitRdAtom, 128);
  assert.equal(a.maxResRdAtom, 102400 * 128);
  assert.equal(a.atomicCap, 0);
  assert.equal(a.maxSrq, 102400);
  assert.equal(a.maxSrqWr, 327680);
  assert.equal(a.maxSrqSge, 6);
  assert.equal(a.physPortCnt, 1);
  assert.equal(a.deviceCapFlags, 1 << 21);
  assert.equal(a.maxInlineData, 80);
  assert.equal(a.maxMrSize, 2n ** 64n - 1n);
  assert.equal(a.pageSizeCap, 4096n);
  assert.equal(a.nodeGuid, ETH.nodeGuid);
  assert.equal(a.sysImageGuid, 0x00005efffe102030n);
  assert.equal(a.fwVer, '0.0.0', 'siw_query_device of rdma-core: the raw fw_ver 0 as %d.%d.%d');
  assert.equal(a.vendorPartId, dev(ETH).vendorPartId);
  assert.equal(SIW_LIMITS.maxInline, 80);
  // a copy each time
  a.maxQp = 1;
  assert.equal(ctx.queryDevice().maxQp, 102400);
});

test('device caps overrides apply', () => {
  const a = dev(SMALL).open().queryDevice();
  assert.equal(a.maxCqe, 100);
  assert.equal(a.maxMr, 3);
  assert.equal(a.maxQpWr, 16);
  assert.equal(a.maxSge, 6);
});

test('queryPort: port 1 only, ACTIVE, Ethernet, MTU enum from the interface MTU', () => {
  const p = dev(ETH).open().queryPort(1);
  assert.equal(p.state, PortState.ACTIVE);
  assert.equal(p.state, 4);
  assert.equal(portStateStr(p.state), 'active');
  assert.equal(p.activeMtu, Mtu.MTU_1024);
  assert.equal(p.maxMtu, Mtu.MTU_1024);
  assert.equal(p.linkLayer, LinkLayer.ETHERNET);
  assert.equal(p.lid, 0);
  assert.equal(p.gidTblLen, 1);
  assert.equal(p.maxMsgSz, 0xffffffff);
  assert.equal(dev(LO).open().queryPort().activeMtu, Mtu.MTU_4096);
  assert.equal(dev(SMALL).open().queryPort(1).activeMtu, Mtu.MTU_4096);
  const ctx = dev(ETH).open();
  assert.throws(() => ctx.queryPort(0), code('EINVAL'));
  assert.throws(() => ctx.queryPort(2), code('EINVAL'));
  assert.throws(() => ctx.queryPort('1'), code('EINVAL'));
});

test('mtuToEnum follows ib_mtu_int_to_enum', () => {
  assert.equal(mtuToEnum(100), Mtu.MTU_256);
  assert.equal(mtuToEnum(511), Mtu.MTU_256);
  assert.equal(mtuToEnum(512), Mtu.MTU_512);
  assert.equal(mtuToEnum(1500), Mtu.MTU_1024);
  assert.equal(mtuToEnum(2048), Mtu.MTU_2048);
  assert.equal(mtuToEnum(4095), Mtu.MTU_2048);
  assert.equal(mtuToEnum(9000), Mtu.MTU_4096);
  assert.equal(mtuEnumToBytes(Mtu.MTU_1024), 1024);
  assert.equal(mtuEnumToBytes(Mtu.MTU_4096), 4096);
  assert.equal(mtuEnumToBytes(9), -1);
});

test('findDeviceByAddress: exact, IPv4-mapped, zones, loopback', () => {
  const lo = dev(LO);
  const eth = dev(ETH);
  assert.equal(findDeviceByAddress('127.0.0.1'), lo);
  assert.equal(findDeviceByAddress('127.0.0.53'), lo);
  assert.equal(findDeviceByAddress('::1'), lo);
  assert.equal(findDeviceByAddress('0:0::1'), lo);
  assert.equal(findDeviceByAddress('::ffff:127.0.0.1'), lo);
  assert.equal(findDeviceByAddress('192.0.2.10'), eth);
  assert.equal(findDeviceByAddress('::ffff:192.0.2.10'), eth);
  assert.equal(findDeviceByAddress('::FFFF:c000:20a'), eth);
  assert.equal(findDeviceByAddress('2001:DB8:0:0::10'), eth);
  assert.equal(findDeviceByAddress('fe80::1%eth0'), eth);
  assert.equal(findDeviceByAddress('198.51.100.7'), dev(SMALL));
  assert.equal(findDeviceByAddress('192.0.2.11'), undefined);
  assert.equal(findDeviceByAddress('0.0.0.0'), undefined);
  assert.equal(findDeviceByAddress('::'), undefined);
  assert.equal(findDeviceByAddress('not-an-ip'), undefined);
  assert.equal(findDeviceByAddress('1.2.3'), undefined);
});

test('netdevs lists interfaces with MTU and MAC', () => {
  const list = netdevs();
  assert.ok(Array.isArray(list));
  for (const n of list) {
    assert.equal(typeof n.name, 'string');
    assert.ok(Number.isInteger(n.mtu) && n.mtu > 0);
    assert.match(n.mac, /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i);
    assert.ok(n.addresses.length > 0);
    for (const a of n.addresses) assert.ok(a.family === 'IPv4' || a.family === 'IPv6');
  }
  const lo = list.find((n) => n.loopback);
  if (lo) assert.ok(lo.addresses.some((a) => a.address === '127.0.0.1' || a.address === '::1'));
});

test('GUID functions follow siw', () => {
  assert.equal(guidFromMac('52:54:00:12:34:56'), 0x5254_0012_3456_0000n);
  assert.equal(guidFromMac('52-54-00-12-34-56'), 0x5254_0012_3456_0000n);
  assert.throws(() => guidFromMac('52:54:00'), code('EINVAL'));
  assert.equal(guidFromName('siw_lo'), 0x7369_775f_6c6f_0000n);
  assert.equal(guidFromName('lo'), 0x6c6f_0000_0000_0000n);
  assert.equal(guidFromName('siw_enp0s3'), 0x7369_775f_656e_0000n);
  assert.equal(eui64FromMac('52:54:00:12:34:56'), 0x5054_00ff_fe12_3456n);
  assert.equal(formatGuid(0x5254_0012_3456_0000n), '5254:0012:3456:0000');
});

test('provider registry: EEXIST, EINVAL, idempotent re-registration, unregister', () => {
  registerProvider(fake); // same object: no-op
  assert.equal(getProvider('fake'), fake);
  assert.throws(() => registerProvider({ ...SIW_QUERIES, name: 'fake', listDevices: () => [], createQp() {} }), code('EEXIST'));
  assert.throws(() => registerProvider({ name: 'x' }), code('EINVAL'));
  assert.throws(() => registerProvider(null), code('EINVAL'));

  assert.throws(() => registerProvider({ name: 'noquery', listDevices: () => [], createQp() {} }), code('EINVAL'));

  const other = {
    ...SIW_QUERIES,
    name: 'other',
    listDevices: () => [{ ...LO, name: 'other0', provider: 'other', addresses: [{ address: '203.0.113.1', family: 'IPv4', netmask: '255.255.255.0' }] }],
    createQp: () => assert.fail('not reached'),
  };
  registerProvider(other);
  const d = getDeviceList().find((x) => x.name === 'other0');
  assert.ok(d);
  assert.equal(findDeviceByAddress('203.0.113.1'), d);
  const ctx = d.open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(4);
  assert.ok(unregisterProvider('other'));
  assert.equal(unregisterProvider('other'), false);
  assert.equal(getDeviceList().find((x) => x.name === 'other0'), undefined);
  assert.throws(() => pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: {} }), code('ENODEV'));

  // a provider with a device name already used by another provider: skipped
  const dup = { ...SIW_QUERIES, name: 'dup', listDevices: () => [{ ...LO, provider: 'dup' }], createQp() {} };
  registerProvider(dup);
  assert.equal(getDeviceList().filter((x) => x.name === 'fake_lo').length, 1);
  assert.equal(dev(LO).provider, 'fake');
  unregisterProvider('dup');

  // malformed device descriptions
  const bad = { ...SIW_QUERIES, name: 'bad', listDevices: () => [{ name: 'b0', provider: 'someone-else', addresses: [], nodeGuid: 1n }], createQp() {} };
  registerProvider(bad);
  assert.throws(() => getDeviceList(), code('EINVAL'));
  unregisterProvider('bad');
  assert.equal(getDeviceList().length, 3);
});
