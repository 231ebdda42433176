// The verbs layer's shared receive queue, on a provider that declares its SRQ caps: sizing as
// declared, the limit event's boundary (fewer than srq_limit left after a take), once per arming,
// what query() shows afterwards (siw keeps the limit, rxe clears it), use counts, events and destroy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { registerProvider } from '../../../dist/verbs/provider.js';
import { getDeviceList } from '../../../dist/verbs/device.js';
import { QpType, TransportType, AsyncEventType } from '../../../dist/verbs/types.js';
import { SrqAttrMask } from '../../../dist/verbs/srq.js';
import { FakeQp, SIW_QUERIES, code } from '../../lib/fake-provider.js';

const info = (name, ip) => ({
  name,
  provider: 'srqfake',
  transport: TransportType.IWARP,
  ifname: name,
  addresses: [{ address: ip, family: 'IPv4', netmask: '255.255.255.0' }],
  nodeGuid: 0x0200_0000_0009_0000n,
  mtu: 1500,
  mac: '02:00:00:00:00:09',
});
const KEEPS = info('srqfake_keeps', '203.0.113.21');
const CLEARS = info('srqfake_clears', '203.0.113.22');

registerProvider({
  name: 'srqfake',
  ...SIW_QUERIES,
  listDevices: () => [KEEPS, CLEARS],
  createQp: (ctx, pd, attr) => new FakeQp(ctx, pd, ctx._allocQpNum(), attr),
  srqCaps: {
    depth: (n) => 2 ** Math.ceil(Math.log2(n)),
    minSge: 1,
    limitCheckedAtCreate: true,
    // Only the device choice below differs: what query() shows after the event.
    get keepsLimitAfterEvent() {
      return current === KEEPS;
    },
  },
});
let current = KEEPS;

function open(d) {
  current = d;
  const dev = getDeviceList().find((x) => x.name === d.name);
  assert.ok(dev);
  return dev.open();
}

const wr = (id) => ({ wrId: id, sgList: [] });

/** Queued async events, read and acknowledged. */
function drain(ctx) {
  const out = [];
  for (let ev = ctx.tryGetAsyncEvent(); ev !== undefined; ev = ctx.tryGetAsyncEvent()) {
    ctx.ackAsyncEvent(ev);
    out.push(ev);
  }
  return out;
}

for (const d of [KEEPS, CLEARS]) {
  test(`${d.name}: the limit event fires once when fewer than srq_limit remain, and re-arms`, () => {
    const ctx = open(d);
    const pd = ctx.allocPd();
    const init = { attr: { maxWr: 5, srqLimit: 3 } };
    const srq = pd.createSrq(init);
    assert.equal(init.attr.maxWr, 8, 'the declared depth');
    assert.equal(init.attr.maxSge, 1, 'the declared least max_sge');
    srq.postRecv([1, 2, 3, 4].map(wr));
    assert.equal(srq._take().wrId, 1);
    assert.deepEqual(drain(ctx), [], '3 left: not fewer than 3');
    assert.equal(srq._take().wrId, 2);
    const evs = drain(ctx);
    assert.deepEqual(evs.map((e) => [e.type, e.srq]), [[AsyncEventType.SRQ_LIMIT_REACHED, srq]]);
    assert.equal(srq.query().srqLimit, d === KEEPS ? 3 : 0);
    srq._take();
    srq._take();
    assert.equal(srq._take(), undefined);
    assert.deepEqual(drain(ctx), [], 'disarmed');
    // Re-armed while already below the limit: the next take fires.
    srq.postRecv([5, 6].map(wr));
    srq.modify({ srqLimit: 4 }, SrqAttrMask.LIMIT);
    srq._take();
    assert.equal(drain(ctx).length, 1);
    // A limit of 0 disarms.
    srq.postRecv([7, 8, 9].map(wr));
    srq.modify({ srqLimit: 2 }, SrqAttrMask.LIMIT);
    srq.modify({ srqLimit: 0 }, SrqAttrMask.LIMIT);
    srq._take();
    srq._take();
    srq._take();
    assert.deepEqual(drain(ctx), []);
    srq.destroy();
    pd.dealloc();
  });
}

test('a QP on an SRQ: counted while it lives, its EINVAL post, events hold destroy', () => {
  const ctx = open(KEEPS);
  const pd = ctx.allocPd();
  const cq = ctx.createCq(4);
  assert.throws(() => pd.createSrq({ attr: { maxWr: 2, srqLimit: 3 } }), code('EINVAL'), 'limit above max_wr, where the device checks it');
  const srq = pd.createSrq({ attr: { maxWr: 2, srqLimit: 1 } });
  const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, srq, cap: { maxRecvWr: 1 << 30 } });
  assert.equal(srq.qpCount, 1, 'the receive cap of a QP on an SRQ is not checked');
  assert.throws(() => srq.destroy(), code('EBUSY'));
  qp.destroy();
  assert.equal(srq.qpCount, 0);
  srq.postRecv(wr(1));
  srq._take();
  const ev = ctx.tryGetAsyncEvent();
  assert.equal(ev.type, AsyncEventType.SRQ_LIMIT_REACHED);
  assert.throws(() => srq.destroy(), code('EBUSY'), 'an event read and not acknowledged');
  ctx.ackAsyncEvent(ev);
  assert.throws(() => pd.dealloc(), code('EBUSY'));
  srq.destroy();
  assert.throws(() => srq.query(), code('EINVAL'));
  cq.destroy();
  pd.dealloc();
});
