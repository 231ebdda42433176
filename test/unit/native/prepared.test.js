// Prepared work-request lists on the native backend, over the stand-in addon
// (test/fixtures/native/fake-addon.cjs): a prepared list reaches the addon as the very words
// postSend / postRecv write for the same WRs, in the same calls; errors name the index over the
// whole list; a list of another QP, or one with a UD destination, is handled as the verbs layer says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

process.env.RDMACM_NATIVE_PATH = fileURLToPath(new URL('../../fixtures/native/fake-addon.cjs', import.meta.url));
delete process.env.RDMACM_NATIVE;
delete process.env.RDMACM_BACKEND;
const { getDeviceList, native, QpType, WrOpcode, SendFlags, PostError, PreparedWrs } = await import('../../../dist/index.js');
const fake = globalThis.__fakeAddon;

const SGE_BASE = 32 * 20;
const STATUS_WORD = SGE_BASE + 256 * 4;

const dev = getDeviceList().find((d) => d.provider === native.PROVIDER);
const ctx = dev.open();
const pd = ctx.allocPd();
const cq = ctx.createCq(8);
const mr = pd.regMr(Buffer.alloc(4096), 7);
const mkQp = () => pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 64, maxRecvWr: 64, maxSendSge: 2, maxRecvSge: 2 } });
const qp = mkQp();

/** What reaches the addon for `post()`: per call, its name, WR count and the scratch's WR and SGE words. */
function capture(post) {
  const seen = [];
  const record = (name) => (_h, n) => {
    const nsge = Array.from({ length: n }, (_, i) => fake.wr[i * 20 + 4]).reduce((x, y) => x + y, 0);
    seen.push({ name, n, wr: [...fake.wr.subarray(0, n * 20)], sge: [...fake.wr.subarray(SGE_BASE, SGE_BASE + nsge * 4)] });
    return 0;
  };
  fake.next.postSend = record('postSend');
  fake.next.postRecv = record('postRecv');
  try {
    post();
  } finally {
    delete fake.next.postSend;
    delete fake.next.postRecv;
  }
  return seen;
}

const sge = (off, len) => ({ addr: mr.addr + off, length: len, lkey: mr.lkey });

test('a prepared list reaches the addon as the words postSend / postRecv write, in the same calls', () => {
  const sends = [
    { wrId: 7, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [sge(0, 10)] },
    { wrId: 2n ** 40n, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, immData: 0xfeed, sgList: [sge(16, 4), sge(64, 8)], rdma: { remoteAddr: 0x1234_5678_9a, rkey: 0x55 } },
    { wrId: 9, opcode: WrOpcode.SEND_WITH_INV, invalidateRkey: 0x77, sgList: [] },
  ];
  const recvs = [{ wrId: 1, sgList: [sge(128, 32)] }, { wrId: 2, sgList: [sge(256, 16), sge(512, 16)] }];
  const p = qp.prepareSend(sends);
  const r = qp.prepareRecv(recvs);
  assert.ok(p instanceof PreparedWrs);
  assert.deepEqual(capture(() => qp.postPrepared(p)), capture(() => qp.postSend(sends)));
  assert.deepEqual(capture(() => qp.postPrepared(r)), capture(() => qp.postRecv(recvs)));
  // Long lists: the same chunks of 32 WRs.
  const many = Array.from({ length: 70 }, (_, i) => ({ wrId: i, opcode: WrOpcode.SEND, sgList: [sge(i, 1)] }));
  const pm = qp.prepareSend(many);
  const viaPrepared = capture(() => qp.postPrepared(pm));
  assert.deepEqual(viaPrepared.map((c) => c.n), [32, 32, 6]);
  assert.deepEqual(viaPrepared, capture(() => qp.postSend(many)));
  // Posted again: the same words (a snapshot of the WRs as prepared).
  many[0].wrId = 1000;
  many[1].sgList = [sge(0, 2)];
  assert.deepEqual(capture(() => qp.postPrepared(pm)), viaPrepared);
});

test('errors: the provider\'s errno and the index over the whole list; another QP; a destroyed QP', () => {
  const many = Array.from({ length: 40 }, (_, i) => ({ wrId: i, opcode: WrOpcode.SEND, sgList: [] }));
  const p = qp.prepareSend(many);
  let calls = 0;
  fake.next.postSend = () => {
    calls++;
    if (calls === 2) {
      fake.wr[STATUS_WORD] = 3;
      return -12;
    }
    return 0;
  };
  try {
    assert.throws(() => qp.postPrepared(p), (e) => e instanceof PostError && e.code === 'ENOMEM' && e.badWrIndex === 35 && e.op === 'ibv_post_send');
  } finally {
    delete fake.next.postSend;
  }
  const other = mkQp();
  const before = fake.calls.length;
  assert.throws(() => other.postPrepared(p), (e) => e instanceof PostError && e.code === 'EINVAL');
  assert.equal(fake.calls.slice(before).filter((c) => c.name === 'postSend').length, 0, 'nothing reached the addon');
  const r = other.prepareRecv({ wrId: 1, sgList: [] });
  other.destroy();
  assert.throws(() => other.postPrepared(r), (e) => e instanceof PostError && e.code === 'EINVAL' && e.op === 'ibv_post_recv');
  assert.throws(() => qp.prepareSend([many[0], { wrId: 1, opcode: WrOpcode.SEND, sgList: [sge(0, 1), sge(1, 1), sge(2, 1)] }]), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1);
});

test('a UD list is kept as objects: its AH is looked up at every post, and a destroyed one is refused', () => {
  const ud = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: 4 } });
  const ah = pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: new Uint8Array(16), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } });
  const wrs = [{ wrId: 1, opcode: WrOpcode.SEND, sgList: [sge(0, 8)], ud: { ah, remoteQpn: 0x12, remoteQkey: 0x11 } }];
  const p = ud.prepareSend(wrs);
  assert.equal(p._provider, null, 'no encoded form');
  assert.deepEqual(capture(() => ud.postPrepared(p)), capture(() => ud.postSend(wrs)));
  ah.destroy();
  assert.throws(() => ud.postPrepared(p), (e) => e instanceof PostError && e.code === 'EINVAL');
  ud.destroy();
});
