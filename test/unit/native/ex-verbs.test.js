// The extended verbs on the native backend over the stand-in addon (test/fixtures/native/
// fake-addon.cjs): ibv_query_device_ex maps every field rdma-core returns; ibv_create_cq_ex and
// ibv_create_qp_ex are made over ibv_create_cq / ibv_create_qp (no completion timestamps: refused);
// the builder's batch is checked whole in JS before the addon posts any of it, and the fields read
// by poll-by-field are those the addon's completions carry.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

process.env.RDMACM_NATIVE_PATH = fileURLToPath(new URL('../../fixtures/native/fake-addon.cjs', import.meta.url));
delete process.env.RDMACM_NATIVE;
delete process.env.RDMACM_BACKEND;
const m = await import('../../../dist/index.js');
const { getDeviceList, native, QpType, SendFlags, RdmaError, Errno, WcExFlags, WC_STANDARD_FLAGS, QpExSendOps, QpInitAttrMask, qpToQpEx } = m;
const fake = globalThis.__fakeAddon;
const code = (c) => (e) => e instanceof RdmaError && e.code === c;
const callsOf = (name, since = 0) => fake.calls.slice(since).filter((c) => c.name === name);

const dev = getDeviceList().find((d) => d.provider === native.PROVIDER);
const ctx = dev.open();

test('ibv_query_device_ex: every field of the addon\'s answer, orig_attr from ibv_query_device, the device\'s window bits', () => {
  const x = ctx.queryDeviceEx();
  assert.deepEqual(x.origAttr, ctx.queryDevice());
  assert.deepEqual(x.odpCaps, { generalCaps: 1n, perTransportCaps: { rcOdpCaps: 0x1f, ucOdpCaps: 0, udOdpCaps: 3 } });
  assert.equal(x.completionTimestampMask, 0xffffffffffffn);
  assert.equal(x.hcaCoreClock, 156250n);
  assert.equal(x.deviceCapFlagsEx, (1n << 36n) | 0x20000n, 'IBV_DEVICE_MEM_WINDOW kept: the backend serves the device\'s windows');
  assert.deepEqual(x.tsoCaps, { maxTso: 262144, supportedQpts: 0x100 });
  assert.deepEqual(x.rssCaps, { supportedQpts: 0x100, maxRwqIndirectionTables: 64, maxRwqIndirectionTableSize: 2048, rxHashFieldsMask: 0x3fn, rxHashFunction: 1 });
  assert.equal(x.maxWqTypeRq, 512);
  assert.deepEqual(x.packetPacingCaps, { qpRateLimitMin: 1000, qpRateLimitMax: 100000000, supportedQpts: 0x100 });
  assert.equal(x.rawPacketCaps, 0x1f);
  assert.deepEqual(x.tmCaps, { maxRndvHdrSize: 64, maxNumTags: 4096, flags: 1, maxOps: 32, maxSge: 1 });
  assert.deepEqual(x.cqModCaps, { maxCqCount: 65535, maxCqPeriod: 4095 });
  assert.equal(x.maxDmSize, 131072n);
  assert.deepEqual(x.pciAtomicCaps, { fetchAdd: 3, swap: 3, compareSwap: 7 });
  assert.equal(x.xrcOdpCaps, 0x1f);
  assert.equal(x.physPortCntEx, 1);
  const n = callsOf('queryDeviceEx').length;
  ctx.queryDeviceEx();
  assert.equal(callsOf('queryDeviceEx').length, n, 'asked once per context');
});

test('ibv_create_cq_ex over ibv_create_cq: the standard fields', () => {
  const since = fake.calls.length;
  const x = ctx.createCqEx({ cqe: 4, wcFlags: WC_STANDARD_FLAGS });
  assert.equal(callsOf('createCq', since).length, 1);
  assert.equal(callsOf('createCqEx', since).length, 0, 'the standard fields need no ibv_create_cq_ex');
  fake.next.pollCq = (_h, max) => {
    assert.equal(max, 1, 'one completion at a time');
    const w = fake.wc;
    w.fill(0, 0, 12);
    w[0] = 31;
    w[1] = 0x8000_0000;
    w[3] = 128;
    w[5] = 12;
    w[6] = 100;
    w[7] = 0x42;
    w[8] = 2;
    w[9] = 0xfeedface;
    w[10] = 0 | (7 << 16);
    w[11] = 3 | (1 << 8);
    fake.next.pollCq = 0;
    return 1;
  };
  assert.equal(x.startPoll(), 0);
  assert.deepEqual([x.wrId, x.status, x.readOpcode(), x.readByteLen(), x.readQpNum(), x.readSrcQp(), x.readWcFlags(), x.readImmData(), x.readSlid(), x.readSl(), x.readDlidPathBits()],
    [31, 0, 128, 12, 100, 0x42, 2, 0xfeedface, 7, 3, 1]);
  assert.equal(x.nextPoll(), Errno.ENOENT);
  x.endPoll();
  delete fake.next.pollCq;
  x.destroy();
});

test('completion timestamps: the device\'s own ibv_create_cq_ex (refused where it has no clock), polled through ibv_start_poll', () => {
  const TS = WcExFlags.WITH_COMPLETION_TIMESTAMP | WcExFlags.WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  fake.next.createCqEx = -95;
  assert.throws(() => ctx.createCqEx({ cqe: 4, wcFlags: WC_STANDARD_FLAGS | TS }), code('EOPNOTSUPP'), 'rdma-core\'s answer');
  delete fake.next.createCqEx;
  assert.throws(() => ctx.createCqEx({ cqe: 4, wcFlags: WcExFlags.WITH_CVLAN }), code('EOPNOTSUPP'), 'not carried by the addon');
  let since = fake.calls.length;
  assert.throws(() => ctx.createCqEx({ cqe: 0, wcFlags: TS }), code('EINVAL'));
  assert.deepEqual(callsOf('createCqEx', since), [], 'checked before the addon');
  const x = ctx.createCqEx({ cqe: 4, wcFlags: WcExFlags.WITH_BYTE_LEN | TS, compVector: 0 });
  const [c] = callsOf('createCqEx', since);
  assert.equal(c.args[1], 4);
  assert.equal(c.args[5], WcExFlags.WITH_BYTE_LEN | TS, 'the wc_flags handed to rdma-core');
  since = fake.calls.length;
  // Two completions, handed out as many at a time as asked (the C side's ibv_start_poll loop).
  const queue = [
    { id: 1, len: 64, ts: 123456789n, wall: 1_700_000_000_000_000_000n },
    { id: 2, len: 8, ts: 123456999n, wall: 1_700_000_000_000_000_500n },
  ];
  fake.next.pollCqEx = (_h, max, ts) => {
    assert.ok(ts instanceof BigUint64Array && ts.length >= 2 * max);
    let n = 0;
    for (; n < max && queue.length > 0; n++) {
      const c = queue.shift();
      fake.wc.fill(0, n * 12, n * 12 + 12);
      fake.wc[n * 12] = c.id;
      fake.wc[n * 12 + 1] = 0x8000_0000;
      fake.wc[n * 12 + 5] = c.len;
      ts[2 * n] = c.ts;
      ts[2 * n + 1] = c.wall;
    }
    return n;
  };
  assert.equal(x.startPoll(), 0);
  assert.deepEqual([x.wrId, x.readByteLen(), x.readCompletionTs(), x.readCompletionWallclockNs()], [1, 64, 123456789n, 1_700_000_000_000_000_000n]);
  assert.throws(() => x.readQpNum(), code('EINVAL'), 'not asked for');
  assert.equal(x.nextPoll(), 0);
  assert.deepEqual([x.wrId, x.readCompletionTs(), x.readCompletionWallclockNs()], [2, 123456999n, 1_700_000_000_000_000_500n]);
  assert.equal(x.nextPoll(), Errno.ENOENT);
  x.endPoll();
  assert.equal(callsOf('pollCq', since).length, 0, 'an ex CQ is polled through ibv_start_poll');
  assert.ok(callsOf('pollCqEx', since).length >= 2);
  delete fake.next.pollCqEx;
  x.destroy();
});

test('the builder: a batch with a bad WR never reaches the addon; a good one is posted in one call', () => {
  const pd = ctx.allocPd();
  const cq = ctx.createCq(8);
  const buf = Buffer.alloc(64);
  const mr = pd.regMr(buf, 7);
  const qp = ctx.createQpEx({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 8, maxRecvWr: 8, maxSendSge: 2, maxRecvSge: 2 }, pd,
    compMask: QpInitAttrMask.PD | QpInitAttrMask.SEND_OPS_FLAGS, sendOpsFlags: QpExSendOps.WITH_SEND | QpExSendOps.WITH_RDMA_WRITE });
  assert.throws(() => ctx.createQpEx({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: {}, pd, compMask: QpInitAttrMask.PD | QpInitAttrMask.SEND_OPS_FLAGS, sendOpsFlags: QpExSendOps.WITH_BIND_MW }), code('EOPNOTSUPP'), 'no windows through the addon');
  assert.throws(() => ctx.createQpEx({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: {}, pd, compMask: QpInitAttrMask.PD | QpInitAttrMask.SEND_OPS_FLAGS, sendOpsFlags: QpExSendOps.WITH_ATOMIC_FETCH_AND_ADD }), code('EOPNOTSUPP'), 'the device\'s atomic_cap is NONE');
  const x = qpToQpEx(qp);
  let since = fake.calls.length;
  x.wrStart();
  x.wrId = 1;
  x.wrFlags = SendFlags.SIGNALED;
  x.wrSend();
  x.wrSetSge(mr.lkey, mr.addr, 8);
  x.wrId = 2;
  x.wrRdmaWrite(0x55, 2 ** 64);
  x.wrSetSge(mr.lkey, mr.addr, 8);
  assert.equal(x.wrComplete(), Errno.EINVAL);
  assert.equal(x.lastError.badWrIndex, 1);
  assert.deepEqual(callsOf('postSend', since), [], 'nothing posted');
  since = fake.calls.length;
  x.wrStart();
  x.wrId = 3;
  x.wrSend();
  x.wrSetSge(mr.lkey, mr.addr, 8);
  x.wrId = 4;
  x.wrRdmaWrite(0x55, 0x1000);
  x.wrSetSge(mr.lkey, mr.addr + 8, 8);
  assert.equal(x.wrComplete(), 0, x.lastError?.message);
  const posts = callsOf('postSend', since);
  assert.equal(posts.length, 1);
  assert.equal(posts[0].args[1], 2, 'both WRs in one addon call');
  qp.destroy();
  mr.dereg();
  cq.destroy();
  pd.dealloc();
});
