// The native backend's verbs objects over a stand-in addon (test/fixtures/native/fake-addon.cjs,
// loaded through RDMACM_NATIVE_PATH): every bad argument is refused in JS — with the errno
// ibverbs gives — before any addon call; work requests are encoded and completions decoded as
// the addon's C side expects (native/src/addon.h layouts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

process.env.RDMACM_NATIVE_PATH = fileURLToPath(new URL('../../fixtures/native/fake-addon.cjs', import.meta.url));
delete process.env.RDMACM_NATIVE;
delete process.env.RDMACM_BACKEND;
const m = await import('../../../dist/index.js');
const { getDeviceList, native, QpType, QpState, WrOpcode, SendFlags, RdmaError, PostError, CompChannel, Cq, Pd, Mr, Qp, Context } = m;
const fake = globalThis.__fakeAddon;

/** Run `fn`, expect an RdmaError `code`, and no addon call named `name` meanwhile. */
function refused(fn, code, names) {
  const before = fake.calls.length;
  assert.throws(fn, (e) => e instanceof RdmaError && e.code === code, `expected ${code}`);
  const made = fake.calls.slice(before).map((c) => c.name).filter((n) => names.includes(n));
  assert.deepEqual(made, [], `addon reached: ${made.join(', ')}`);
}

function callsOf(name, since = 0) {
  return fake.calls.slice(since).filter((c) => c.name === name);
}

const dev = getDeviceList().find((d) => d.provider === native.PROVIDER);

test('the stand-in addon registers one native device, listed before the soft ones', () => {
  assert.ok(dev, 'fake0 listed');
  assert.equal(dev.name, 'fake0');
  assert.equal(getDeviceList()[0], dev);
  assert.ok(getDeviceList().some((d) => d.provider !== native.PROVIDER), 'soft devices too');
  assert.equal(dev.guid, 0x0123456789abcdefn);
});

const ctx = dev.open();
const pd = ctx.allocPd();
const ch = ctx.createCompChannel();
const cq = ctx.createCq(8, ch);
const buf = Buffer.alloc(256);
const mr = pd.regMr(buf, 7);
const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 8, maxRecvWr: 8, maxSendSge: 2, maxRecvSge: 2 } });

test('native objects are the verbs classes (instanceof, shapes)', () => {
  assert.ok(ctx instanceof Context);
  assert.ok(pd instanceof Pd);
  assert.ok(ch instanceof CompChannel);
  assert.ok(cq instanceof Cq);
  assert.ok(mr instanceof Mr);
  assert.ok(qp instanceof Qp);
  assert.equal(cq.cqe, 16, 'the CQ size the provider returned');
  assert.equal(mr.addr, 0x7f0000001000);
  assert.equal(mr.lkey, 0x1100);
  assert.equal(mr.rkey, 0x1101);
  assert.equal(mr.buf.buffer, buf.buffer, 'registered in place');
  assert.equal(qp.qpNum >= 100, true);
  assert.deepEqual(qp.cap, { maxSendWr: 8, maxRecvWr: 8, maxSendSge: 2, maxRecvSge: 2, maxInlineData: 0 });
  assert.equal(ctx.queryDevice().vendorId, 0x1234);
  const regs = callsOf('regMr');
  assert.equal(regs.at(-1).args[1].buffer, buf.buffer, 'the caller\'s memory is what the addon registers');
});

test('context: ports, GIDs, P_Keys, CQs — bad arguments never reach the addon', () => {
  const names = ['queryPort', 'queryGid', 'queryPkey', 'createCq'];
  refused(() => ctx.queryPort(0), 'EINVAL', names);
  refused(() => ctx.queryPort(2), 'EINVAL', names);
  refused(() => ctx.queryPort('1'), 'EINVAL', names);
  const before = fake.calls.length;
  refused(() => ctx.queryGid(1, -1), 'EINVAL', ['queryGid']);
  refused(() => ctx.queryGid(1, 2), 'EINVAL', ['queryGid']);
  refused(() => ctx.queryPkey(1, 1), 'EINVAL', ['queryPkey']);
  assert.ok(callsOf('queryPort', before).length > 0, 'the table sizes come from the port');
  refused(() => ctx.createCq(0), 'EINVAL', names);
  refused(() => ctx.createCq(1.5), 'EINVAL', names);
  refused(() => ctx.createCq(5000), 'EINVAL', names);
  refused(() => ctx.createCq(4, {}), 'EINVAL', names);
  refused(() => ctx.createCq(4, null, -1), 'EINVAL', names);
  refused(() => ctx.createCq(4, null, 0.5), 'EINVAL', names);
  assert.equal(ctx.queryGid(1, 1).length, 16);
  assert.equal(ctx.queryPkey(1, 0), 0xffff);
});

test('PD and MR: bad memory, access, iova; double dealloc/dereg; EBUSY', () => {
  const names = ['regMr', 'deregMr', 'deallocPd'];
  refused(() => pd.regMr('text', 1), 'EINVAL', names);
  refused(() => pd.regMr(null, 1), 'EINVAL', names);
  refused(() => pd.regMr(Buffer.alloc(0), 1), 'EINVAL', names);
  refused(() => pd.regMr(buf, -1), 'EINVAL', names);
  refused(() => pd.regMr(buf, 1.5), 'EINVAL', names);
  refused(() => pd.regMr(buf, 1 << 12), 'EINVAL', names);
  refused(() => pd.regMr(buf, 1, -4096), 'EINVAL', names);
  refused(() => pd.regMr(new ArrayBuffer(8, { maxByteLength: 16 }), 1), 'EINVAL', names);
  refused(() => pd.dealloc(), 'EBUSY', names);
  const pd2 = ctx.allocPd();
  const m2 = pd2.regMr(new Float64Array(4), 1);
  assert.equal(callsOf('regMr').at(-1).args[1].byteLength, 32, 'a typed array registers its bytes');
  assert.ok(ctx._liveMrs.has(m2), 'a registered MR stays reachable from its context');
  m2.dereg();
  assert.ok(!ctx._liveMrs.has(m2));
  refused(() => m2.dereg(), 'EINVAL', names);
  pd2.dealloc();
  refused(() => pd2.dealloc(), 'EINVAL', names);
  refused(() => pd2.regMr(buf, 1), 'EINVAL', names);
});

test('an errno from the provider becomes an RdmaError naming the call', () => {
  fake.next.allocPd = -12;
  try {
    assert.throws(() => ctx.allocPd(), (e) => e instanceof RdmaError && e.code === 'ENOMEM' && e.op === 'ibv_alloc_pd');
  } finally {
    delete fake.next.allocPd;
  }
});

test('QP create flags: given to the addon (its ibv_create_qp_ex), 0 without; the kernel\'s refusal names ibv_create_qp_ex', () => {
  const { QpCreateFlags } = m;
  const init = (extra) => ({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 }, ...extra });
  let n = fake.calls.length;
  const q0 = pd.createQp(init({}));
  assert.equal(callsOf('createQp', n)[0].args[12], 0, 'no flags: ibv_create_qp');
  q0.destroy();
  n = fake.calls.length;
  const q1 = pd.createQp(init({ createFlags: QpCreateFlags.BLOCK_SELF_MCAST_LB }));
  assert.equal(callsOf('createQp', n)[0].args[12], 2, 'IBV_QP_CREATE_BLOCK_SELF_MCAST_LB reaches the addon');
  q1.destroy();
  refused(() => pd.createQp(init({ createFlags: -1 })), 'EINVAL', ['createQp']);
  refused(() => pd.createQp(init({ createFlags: 2 ** 32 })), 'EINVAL', ['createQp']);
  // rxe (the provider's check_qp_init_attr, the kernel's rxe_create_qp): EOPNOTSUPP
  fake.next.createQp = -95;
  try {
    assert.throws(() => pd.createQp(init({ createFlags: 2 })), (e) => e instanceof RdmaError && e.code === 'EOPNOTSUPP' && e.op === 'ibv_create_qp_ex');
  } finally {
    delete fake.next.createQp;
  }
});

test('CQ: poll arguments, destroyed CQ, EBUSY while a QP uses it', () => {
  const names = ['pollCq', 'destroyCq', 'reqNotifyCq'];
  refused(() => cq.poll(-1), 'EINVAL', names);
  refused(() => cq.poll(1.5), 'EINVAL', names);
  refused(() => cq.pollInto([], -1), 'EINVAL', names);
  refused(() => cq.destroy(), 'EBUSY', names);
  refused(() => cq.ackEvents(1), 'EINVAL', ['ackCqEvents']);
  const c2 = ctx.createCq(2);
  c2.destroy();
  refused(() => c2.poll(1), 'EINVAL', names);
  refused(() => c2.reqNotify(), 'EINVAL', names);
  refused(() => c2.destroy(), 'EINVAL', names);
  refused(() => ch.destroy(), 'EBUSY', ['destroyCompChannel']);
});

test('post_send: each bad WR refused in JS with its index; WRs before it are posted', () => {
  const names = ['postSend'];
  const sge = { addr: mr.addr, length: 16, lkey: mr.lkey };
  const good = { wrId: 1, opcode: WrOpcode.SEND, sgList: [sge] };
  const bads = [
    { ...good, wrId: -1 },
    { ...good, wrId: 1.5 },
    { ...good, wrId: 2n ** 63n },
    { ...good, wrId: 'x' },
    { ...good, opcode: 99 },
    { ...good, opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, atomic: { remoteAddr: 8, rkey: -1, compareAdd: 1 } },
    { ...good, opcode: WrOpcode.ATOMIC_CMP_AND_SWP, atomic: { remoteAddr: 8, rkey: 1, compareAdd: 1.5, swap: 0 } },
    { ...good, opcode: WrOpcode.ATOMIC_CMP_AND_SWP, atomic: { remoteAddr: 8, rkey: 1, compareAdd: 1, swap: 'x' } },
    { ...good, sgList: 'no' },
    { ...good, sgList: [sge, sge, sge] },
    { ...good, sgList: [{ addr: -1, length: 1, lkey: 1 }] },
    { ...good, sgList: [{ addr: 2 ** 53, length: 1, lkey: 1 }] },
    { ...good, sgList: [{ addr: 0, length: 2 ** 32, lkey: 1 }] },
    { ...good, sgList: [{ addr: 0, length: 1, lkey: -1 }] },
    { ...good, sgList: [null] },
    { ...good, sendFlags: -1 },
    { ...good, immData: 2 ** 32 },
    { ...good, opcode: WrOpcode.RDMA_WRITE, rdma: { remoteAddr: -1, rkey: 1 } },
    { ...good, opcode: WrOpcode.RDMA_WRITE, rdma: null },
    null,
    42,
  ];
  for (const b of bads) {
    const before = fake.calls.length;
    assert.throws(() => qp.postSend(b), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 0, JSON.stringify(b, (k, v) => (typeof v === 'bigint' ? String(v) : v)));
    assert.deepEqual(callsOf('postSend', before), [], 'not reached');
  }
  const before = fake.calls.length;
  assert.throws(() => qp.postSend([good, good, { ...good, opcode: -3 }, good]), (e) => e instanceof PostError && e.badWrIndex === 2);
  const posts = callsOf('postSend', before);
  assert.equal(posts.length, 1);
  assert.equal(posts[0].args[1], 2, 'the two good WRs before the bad one were posted');
  void names;
});

test('post_send encodes WRs, SGEs and wr_ids as the addon reads them', () => {
  const s1 = { addr: mr.addr + 8, length: 10, lkey: mr.lkey };
  const s2 = { addr: mr.addr + 100, length: 20, lkey: mr.lkey };
  const before = fake.calls.length;
  qp.postSend([
    { wrId: 2 ** 40 + 5, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, sgList: [s1, s2], rdma: { remoteAddr: 0x12345678abc, rkey: 0xdead } },
    { wrId: 0x0123456789abcdefn, opcode: WrOpcode.SEND_WITH_IMM, immData: 0xcafebabe, sgList: [] },
  ]);
  const [call] = callsOf('postSend', before);
  assert.equal(call.args[1], 2);
  const w = fake.wr;
  const f = new Float64Array(w.buffer);
  // WR 0
  assert.equal(w[0], 5);
  assert.equal(w[1], 0x8000_0000 + 2 ** 8, 'numbers carry bit 63');
  assert.equal(w[2], WrOpcode.RDMA_WRITE);
  assert.equal(w[3], SendFlags.SIGNALED);
  assert.equal(w[4], 2);
  assert.equal(w[5], 0);
  assert.equal(w[7], 0xdead);
  assert.equal(f[4], 0x12345678abc);
  const sgeBase = 32 * 20;
  assert.equal(f[sgeBase / 2], s1.addr);
  assert.equal(w[sgeBase + 2], 10);
  assert.equal(w[sgeBase + 3], mr.lkey);
  assert.equal(f[(sgeBase + 4) / 2], s2.addr);
  // WR 1 (20 words per WR)
  assert.equal(w[20], 0x89abcdef);
  assert.equal(w[21], 0x01234567, 'bigints do not');
  assert.equal(w[22], WrOpcode.SEND_WITH_IMM);
  assert.equal(w[24], 0);
  assert.equal(w[25], 2, 'its SGEs would start after WR 0\'s');
  assert.equal(w[26], 0xcafebabe);
});

test('post_send hands atomics to the kernel provider with their operands (the device\'s atomic_cap decides there)', () => {
  const sge = { addr: mr.addr, length: 8, lkey: mr.lkey };
  const before = fake.calls.length;
  qp.postSend([
    { wrId: 1, opcode: WrOpcode.ATOMIC_CMP_AND_SWP, sgList: [sge], atomic: { remoteAddr: 0x10008, rkey: 0x77, compareAdd: 5n, swap: 2n ** 40n + 9n } },
    { wrId: 2, opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: [sge], atomic: { remoteAddr: 0x10010, rkey: 0x78, compareAdd: 3 } },
  ]);
  const [call] = callsOf('postSend', before);
  assert.equal(call.args[1], 2);
  const w = fake.wr;
  const f = new Float64Array(w.buffer);
  assert.deepEqual([w[2], w[7], f[4], w[16], w[17], w[18], w[19]], [WrOpcode.ATOMIC_CMP_AND_SWP, 0x77, 0x10008, 5, 0, 9, 2 ** 8]);
  assert.deepEqual([w[22], w[27], f[14], w[36], w[37]], [WrOpcode.ATOMIC_FETCH_AND_ADD, 0x78, 0x10010, 3, 0]);
});

test('post_send on a UD QP: the destination is a live address handle of this device, or the WR is refused in JS', () => {
  const ud = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: 4 } });
  const ah = pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: new Uint8Array(16), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } });
  const dead = pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: new Uint8Array(16), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } });
  dead.destroy();
  const send = (extra) => ({ wrId: 1, opcode: WrOpcode.SEND, sgList: [], ...extra });
  for (const [what, wr] of [
    ['no destination (a NULL address handle for the provider)', send({})],
    ['a destroyed AH', send({ ud: { ah: dead, remoteQpn: 5, remoteQkey: 1 } })],
    ['an object that is no AH', send({ ud: { ah: { _provider: ah._provider }, remoteQpn: 5, remoteQkey: 1 } })],
  ]) {
    const before = fake.calls.length;
    assert.throws(() => ud.postSend([send({ ud: { ah, remoteQpn: 5, remoteQkey: 1 } }), wr]), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1, what);
    assert.deepEqual(callsOf('postSend', before).map((c) => c.args[1]), [1], `${what}: only the good WR reached the addon`);
  }
  const before = fake.calls.length;
  ud.postSend(send({ ud: { ah, remoteQpn: 0x123, remoteQkey: 0x11 } }));
  assert.equal(callsOf('postSend', before).length, 1);
  assert.deepEqual([fake.wr[12], fake.wr[13], fake.wr[11]], [ah._provider.index, 0x123, 0x11], 'AH index, remote QPN, Q_Key as the addon reads them');
  ah.destroy();
  ud.destroy();
});

test('a provider error on post names the first WR not posted', () => {
  const good = { wrId: 1, opcode: WrOpcode.SEND, sgList: [] };
  fake.next.postSend = () => {
    fake.wr[32 * 20 + 256 * 4] = 1;
    return -12;
  };
  try {
    assert.throws(() => qp.postSend([good, good, good]), (e) => e instanceof PostError && e.code === 'ENOMEM' && e.badWrIndex === 1);
  } finally {
    delete fake.next.postSend;
  }
  // More than one addon call's worth: the index counts from the first WR of the whole list.
  let n = 0;
  fake.next.postSend = (_h, cnt) => {
    n++;
    if (n === 2) {
      fake.wr[32 * 20 + 256 * 4] = 3;
      return -22;
    }
    return 0;
  };
  try {
    const list = Array.from({ length: 40 }, (_, i) => ({ ...good, wrId: i }));
    assert.throws(() => qp.postSend(list), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 35);
  } finally {
    delete fake.next.postSend;
  }
});

test('post_recv: bad WRs refused in JS with their index', () => {
  const before = fake.calls.length;
  const sge = { addr: mr.addr, length: 16, lkey: mr.lkey };
  for (const b of [{ wrId: -2, sgList: [] }, { wrId: 1, sgList: [sge, sge, sge] }, { wrId: 1, sgList: [{ addr: 1, length: -1, lkey: 0 }] }, { wrId: 1 }, undefined]) {
    assert.throws(() => qp.postRecv(b), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 0);
  }
  assert.deepEqual(callsOf('postRecv', before), []);
  qp.postRecv([{ wrId: 7, sgList: [sge] }, { wrId: 8n, sgList: [] }]);
  assert.equal(callsOf('postRecv', before)[0].args[1], 2);
});

test('poll decodes completions; pollInto fills the objects it is given', () => {
  fake.next.pollCq = (_h, max) => {
    assert.ok(max <= 64);
    const w = fake.wc;
    w.fill(0);
    // completion 0: numeric wr_id 2^33+9, RECV with immediate
    w[0] = 9;
    w[1] = 0x8000_0002;
    w[2] = 0;
    w[3] = 129;
    w[5] = 77;
    w[6] = 100;
    w[8] = 2;
    w[9] = 0xfeedface;
    w[10] = 3 | (4 << 16);
    w[11] = 5 | (6 << 8);
    // completion 1: bigint wr_id, flushed send
    w[12] = 1;
    w[13] = 2;
    w[14] = 5;
    fake.next.pollCq = 0;
    return 2;
  };
  const got = cq.poll(10);
  assert.equal(got.length, 2);
  assert.deepEqual(
    { ...got[0] },
    { wrId: 2 ** 33 + 9, status: 0, opcode: 129, vendorErr: 0, byteLen: 77, qpNum: 100, srcQp: 0, wcFlags: 2, immData: 0xfeedface, invalidatedRkey: 0, pkeyIndex: 3, slid: 4, sl: 5, dlidPathBits: 6 },
  );
  assert.equal(got[1].wrId, (2n << 32n) | 1n);
  assert.equal(got[1].status, 5);
  fake.next.pollCq = () => {
    fake.wc[0] = 42;
    fake.wc[1] = 0x8000_0000;
    fake.next.pollCq = 0;
    return 1;
  };
  const mine = { wrId: 0, status: 9, opcode: 0, vendorErr: 0, byteLen: 0, qpNum: 0, srcQp: 0, wcFlags: 0, immData: 0, invalidatedRkey: 0 };
  const out = [mine];
  assert.equal(cq.pollInto(out, 4), 1);
  assert.equal(out[0], mine, 'the same object, filled');
  assert.equal(mine.wrId, 42);
  assert.equal(mine.status, 0);
  delete fake.next.pollCq;
});

test('one WR (not a list) and a poll of one: the same encoding, errors and decoding as lists', () => {
  const sge = { addr: mr.addr + 16, length: 24, lkey: mr.lkey };
  let before = fake.calls.length;
  qp.postSend({ wrId: 2 ** 35 + 3, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, sendFlags: SendFlags.SIGNALED, immData: 0xabcd, sgList: [sge], rdma: { remoteAddr: 0x7000_0000_1000, rkey: 0x77 } });
  const [post] = callsOf('postSend', before);
  assert.equal(post.args[1], 1, 'one WR');
  const w = fake.wr;
  const f = new Float64Array(w.buffer);
  assert.deepEqual([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]], [3, 0x8000_0008, WrOpcode.RDMA_WRITE_WITH_IMM, SendFlags.SIGNALED, 1, 0, 0xabcd, 0x77]);
  assert.equal(f[4], 0x7000_0000_1000, 'remote address');
  assert.deepEqual([f[(32 * 20) / 2], w[32 * 20 + 2], w[32 * 20 + 3]], [mr.addr + 16, 24, mr.lkey], 'its SGE in slot 0');
  before = fake.calls.length;
  qp.postRecv({ wrId: 5n, sgList: [sge] });
  assert.equal(callsOf('postRecv', before)[0].args[1], 1);
  assert.deepEqual([w[0], w[1], w[4], w[5]], [5, 0, 1, 0], 'bigint wr_id, one SGE from slot 0');
  // The provider refuses the one WR: its errno, index 0.
  for (const [name, post1] of [['postSend', () => qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [] })], ['postRecv', () => qp.postRecv({ wrId: 1, sgList: [] })]]) {
    fake.next[name] = () => {
      fake.wr[32 * 20 + 256 * 4] = 0;
      return -12;
    };
    try {
      assert.throws(post1, (e) => e instanceof PostError && e.code === 'ENOMEM' && e.badWrIndex === 0 && e.op === (name === 'postSend' ? 'ibv_post_send' : 'ibv_post_recv'), name);
    } finally {
      delete fake.next[name];
    }
  }
  // pollInto(out, 1): nothing there; one completion into the given object; into a new one where out has none; an error.
  fake.next.pollCq = 0;
  const mine = { wrId: 0, status: 9, opcode: 0, vendorErr: 0, byteLen: 0, qpNum: 0, srcQp: 0, wcFlags: 0, immData: 0, invalidatedRkey: 0 };
  assert.equal(cq.pollInto([mine], 1), 0);
  assert.equal(mine.status, 9, 'untouched when nothing came');
  fake.next.pollCq = (_h, max) => {
    assert.equal(max, 1);
    fake.wc.fill(0);
    fake.wc[0] = 11;
    fake.wc[1] = 0x8000_0000;
    fake.wc[3] = 128;
    fake.wc[5] = 64;
    return 1;
  };
  const out = [mine];
  assert.equal(cq.pollInto(out, 1), 1);
  assert.equal(out[0], mine, 'the same object, filled');
  assert.deepEqual([mine.wrId, mine.status, mine.opcode, mine.byteLen], [11, 0, 128, 64]);
  const empty = [];
  assert.equal(cq.pollInto(empty, 1), 1);
  assert.equal(empty[0].wrId, 11, 'a new object where the array had none');
  fake.next.pollCq = -5;
  assert.throws(() => cq.pollInto(out, 1), (e) => e instanceof RdmaError && e.code === 'EIO' && e.op === 'ibv_poll_cq');
  delete fake.next.pollCq;
});

test('completion events: queued on the JS channel, counted, acknowledged to the addon', async () => {
  cq.reqNotify();
  fake.handlers.cq(ch._key, cq._key);
  const c = await ch.getCqEvent();
  assert.equal(c, cq);
  const before = fake.calls.length;
  c.ackEvents(1);
  assert.deepEqual(callsOf('ackCqEvents', before).map((x) => x.args[1]), [1]);
  // An event read in C but never read by the application is acknowledged before the CQ goes.
  const c3 = ctx.createCq(4, ch);
  fake.handlers.cq(ch._key, c3._key);
  const b2 = fake.calls.length;
  c3.destroy();
  const order = fake.calls.slice(b2).map((x) => x.name);
  assert.deepEqual(order, ['ackCqEvents', 'destroyCq']);
  assert.equal(ch.pending, 0, 'its queued event is gone');
});

test('a wait on the channel keeps the loop alive only while it waits', async () => {
  const before = fake.calls.length;
  const p = ch.getCqEvent();
  assert.deepEqual(callsOf('compChannelRef', before).map((x) => x.args[1]), [1]);
  fake.handlers.cq(ch._key, cq._key);
  await p;
  cq.ackEvents(1);
  assert.deepEqual(callsOf('compChannelRef', before).map((x) => x.args[1]), [1, -1]);
});

test('QP: modify/query/destroy argument checks; destroyed QP', () => {
  const names = ['modifyQp', 'queryQp', 'destroyQp', 'postSend', 'postRecv', 'attachMcast'];
  refused(() => qp.modify(null), 'EINVAL', names);
  refused(() => qp.modify({ qpState: 'BOGUS' }), 'EINVAL', names);
  refused(() => qp.modify({ qkey: -1 }), 'EINVAL', names);
  refused(() => qp.modify({ destQpNum: 1.5 }), 'EINVAL', names);
  refused(() => qp.modify({ qpState: QpState.RTR, ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: new Uint8Array(3), flowLabel: 0, sgidIndex: 0, hopLimit: 1, trafficClass: 0 } } }), 'EINVAL', names);
  refused(() => qp.modify({ qpState: QpState.INIT }, -1), 'EINVAL', names);
  refused(() => qp.query(-1), 'EINVAL', names);
  refused(() => qp.attachMcast(new Uint8Array(16), 0), 'EINVAL', names);
  const before = fake.calls.length;
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: 7 });
  const [mc] = callsOf('modifyQp', before);
  assert.equal(mc.args[1], 1 | 16 | 32 | 8, 'mask from the attributes given');
  assert.deepEqual([mc.args[2][0], mc.args[2][2], mc.args[2][3], mc.args[2][4]], [1, 7, 0, 1]);
  const q2 = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: {} });
  q2.destroy();
  refused(() => q2.modify({ qpState: QpState.INIT }), 'EINVAL', names);
  refused(() => q2.query(), 'EINVAL', names);
  assert.throws(() => q2.postSend({ wrId: 1, opcode: 2, sgList: [] }), (e) => e instanceof PostError && e.code === 'EINVAL');
  assert.throws(() => q2.postRecv({ wrId: 1, sgList: [] }), (e) => e instanceof PostError && e.code === 'EINVAL');
  refused(() => q2.destroy(), 'EINVAL', names);
  assert.equal(q2.state, QpState.RESET);
});

test('the ibv_qp_attr layout decodes to QpAttr as ibv_query_qp and rdma_init_qp_attr report it', async () => {
  const { decodeQpAttr, QA, AH } = await import('../../../dist/native/abi.js');
  const v = new Float64Array(QA.WORDS);
  const put = { STATE: 3, ACCESS: 7, PKEY_INDEX: 1, PORT: 1, QKEY: 0x11111111, PATH_MTU: 3, TIMEOUT: 14, RETRY_CNT: 7, RNR_RETRY: 6, RQ_PSN: 0xabcdef, SQ_PSN: 0x123456, MAX_RD_ATOMIC: 4, MAX_DEST_RD_ATOMIC: 2, MIN_RNR_TIMER: 12, DEST_QPN: 0x99 };
  for (const [k, x] of Object.entries(put)) v[QA[k]] = x;
  Object.assign(v, { [QA.AH + AH.DLID]: 0, [QA.AH + AH.SL]: 2, [QA.AH + AH.IS_GLOBAL]: 1, [QA.AH + AH.PORT]: 1, [QA.AH + AH.FLOW_LABEL]: 0x12345, [QA.AH + AH.SGID_INDEX]: 3, [QA.AH + AH.HOP_LIMIT]: 64, [QA.AH + AH.TCLASS]: 0x20 });
  const gid = Uint8Array.from({ length: 16 }, (_, i) => i + 1);
  const a = decodeQpAttr(v, gid);
  assert.equal(a.qpState, m.QpState.RTS);
  assert.deepEqual(
    [a.qpAccessFlags, a.pkeyIndex, a.portNum, a.qkey, a.pathMtu, a.timeout, a.retryCnt, a.rnrRetry, a.rqPsn, a.sqPsn, a.maxRdAtomic, a.maxDestRdAtomic, a.minRnrTimer, a.destQpNum],
    [7, 1, 1, 0x11111111, 3, 14, 7, 6, 0xabcdef, 0x123456, 4, 2, 12, 0x99],
  );
  assert.equal(a.ahAttr.sl, 2);
  assert.equal(a.ahAttr.isGlobal, true);
  assert.deepEqual(a.ahAttr.grh, { dgid: gid, flowLabel: 0x12345, sgidIndex: 3, hopLimit: 64, trafficClass: 0x20 });
  assert.notEqual(a.ahAttr.grh.dgid, gid, 'the DGID is a copy of the shared buffer');
});
