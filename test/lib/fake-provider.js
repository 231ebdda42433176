// A tiny fake verbs provider for the verbs unit tests: two devices (loopback and an "Ethernet"
// one), one device with small limits, and a fake QP. Not a test file itself.
import assert from 'node:assert/strict';
import { registerProvider } from '../../dist/verbs/provider.js';
import { getDeviceList } from '../../dist/verbs/device.js';
import { TransportType, QpType } from '../../dist/verbs/types.js';
import { RdmaError } from '../../dist/errors.js';
import { AbortError } from '../../dist/util/abort.js';
import { siwDeviceAttr, siwPortAttr, siwGid, siwAccessMask } from '../../dist/transport/iwarp/attrs.js';
export { prng } from './prng.js';

/** The device/port queries of a provider whose devices look like siw's (for fake providers). */
export const SIW_QUERIES = { queryDevice: siwDeviceAttr, queryPort: siwPortAttr, queryGid: siwGid, accessMask: siwAccessMask };

export class FakeQp {
  constructor(ctx, pd, qpNum, attr) {
    this.context = ctx;
    this.pd = pd;
    this.qpNum = qpNum;
    this.attr = attr;
    this.destroyed = false;
  }
  destroy() {
    this.destroyed = true;
    this.pd._releaseQp(this);
  }
}

/** A QP that cleans up the way a provider may without `_releaseQp`. */
export class SelfCleaningQp extends FakeQp {
  destroy() {
    this.destroyed = true;
    this.context._qps.delete(this.qpNum);
    this.attr.sendCq._detachQp(this);
    this.attr.recvCq._detachQp(this);
  }
}

export const LO = {
  name: 'fake_lo',
  provider: 'fake',
  transport: TransportType.IWARP,
  ifname: 'lo',
  addresses: [
    { address: '127.0.0.1', family: 'IPv4', netmask: '255.0.0.0' },
    { address: '::1', family: 'IPv6', netmask: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', scopeid: 0 },
  ],
  nodeGuid: 0x66616b655f6c0000n,
  mtu: 65536,
};

export const ETH = {
  name: 'fake_eth0',
  provider: 'fake',
  transport: TransportType.IWARP,
  ifname: 'eth0',
  addresses: [
    { address: '192.0.2.10', family: 'IPv4', netmask: '255.255.255.0' },
    { address: '2001:db8::10', family: 'IPv6', netmask: 'ffff:ffff:ffff:ffff::' },
    { address: 'fe80::1', family: 'IPv6', netmask: 'ffff:ffff:ffff:ffff::', scopeid: 2 },
  ],
  nodeGuid: 0x0200_5e10_2030_0000n,
  mtu: 1500,
  mac: '02:00:5e:10:20:30',
};

export const SMALL = {
  name: 'fake_small',
  provider: 'fake',
  transport: TransportType.IWARP,
  ifname: 'small0',
  addresses: [{ address: '198.51.100.7', family: 'IPv4', netmask: '255.255.255.0' }],
  nodeGuid: 0x0200_0000_0007_0000n,
  mtu: 9000,
  mac: '02:00:00:00:00:07',
  caps: { maxCqe: 100, maxMr: 3, maxPd: 2, maxCq: 3, maxQp: 2, maxQpWr: 16 },
};

export const fake = {
  name: 'fake',
  devices: [LO, ETH, SMALL],
  /** When set, the next createQp allocates a QP number and then throws this. */
  failNext: undefined,
  /** QP class to create. */
  QpClass: FakeQp,
  created: 0,
  ...SIW_QUERIES,
  listDevices() {
    return this.devices;
  },
  createQp(ctx, pd, attr) {
    const n = ctx._allocQpNum();
    if (this.failNext !== undefined) {
      const e = this.failNext;
      this.failNext = undefined;
      throw e;
    }
    if (attr.qpType !== QpType.RC) throw new RdmaError('EOPNOTSUPP', { op: 'ibv_create_qp' });
    this.created++;
    return new this.QpClass(ctx, pd, n, attr);
  },
};

registerProvider(fake);

/** The Device of a fake device description. */
export function dev(info) {
  const d = getDeviceList().find((x) => x.name === info.name);
  assert.ok(d, `device ${info.name} listed`);
  return d;
}

/** Predicate for assert.throws / assert.rejects: an RdmaError with errno name `code`. */
export function code(c) {
  return (e) => {
    assert.ok(e instanceof RdmaError, `expected RdmaError, got ${e}`);
    assert.equal(e.code, c, e.message);
    return true;
  };
}

/**
 * Predicate for assert.rejects: the one error every aborted call rejects with (Node's shape:
 * name AbortError, code ABORT_ERR), for `op` and with the signal's reason as `cause` when given.
 */
export function aborted(op, cause) {
  return (e) => {
    assert.ok(e instanceof AbortError, `expected AbortError, got ${e}`);
    assert.equal(e.name, 'AbortError');
    assert.equal(e.code, 'ABORT_ERR');
    assert.equal(e.errno, 125);
    if (op !== undefined) assert.equal(e.op, op);
    if (cause !== undefined) assert.equal(e.cause, cause);
    return true;
  };
}

/** A completion for tests. */
export function wc(id, qpNum = 1) {
  return { wrId: id, status: 0, opcode: 0, vendorErr: 0, byteLen: 0, qpNum, srcQp: 0, wcFlags: 0, immData: 0, invalidatedRkey: 0, pkeyIndex: 0, slid: 0, sl: 0, dlidPathBits: 0 };
}
