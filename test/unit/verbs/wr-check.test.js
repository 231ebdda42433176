// Post-time checks of work requests (src/verbs/wr-check.ts): every malformed WR is refused with
// EINVAL and the index of the first WR not queued, on every soft device and QP type — the same
// argument shapes everywhere — while what a device declares it cannot do (opcodes, READ sinks,
// message sizes, inline on a READ) stays that device's answer.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';

// A private RoCE UDP port: other tests on this host never see this process's datagrams.
if (!process.env.RDMACM_ROCE_PORT) process.env.RDMACM_ROCE_PORT = String(20000 + Math.floor(Math.random() * 30000));
const { getDeviceList, QpType, QpState, WrOpcode, SendFlags, WcStatus, PostError } = await import('../../../dist/index.js');

const cleanup = [];
after(() => {
  for (const f of cleanup.reverse()) f();
});

/** A QP of `type` on soft device `name`, moved to ERR (posting is allowed there: WRs flush). */
function errQp(name, type) {
  const dev = getDeviceList().find((d) => d.name === name);
  assert.ok(dev, name);
  const ctx = dev.open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(64);
  const mr = pd.regMr(Buffer.alloc(256), 0);
  const qp = pd.createQp({ qpType: type, sendCq: cq, recvCq: cq, cap: { maxSendWr: 16, maxRecvWr: 16, maxSendSge: 2, maxRecvSge: 2 } });
  qp.modify({ qpState: QpState.ERR });
  cleanup.push(() => {
    qp.destroy();
    cq.destroy();
    mr.dereg();
    pd.dealloc();
  });
  const ah =
    type === QpType.UD ? pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: ctx.queryGid(1, 0), flowLabel: 0, sgidIndex: 0, hopLimit: 64, trafficClass: 0 } }) : undefined;
  if (ah) cleanup.push(() => ah.destroy());
  const ud = ah ? { ud: { ah, remoteQpn: 5, remoteQkey: 1 } } : {};
  return { qp, cq, mr, ud };
}

const QPS = [
  ['siw_lo', QpType.RC],
  ['rxe_lo', QpType.RC],
  ['rxe_lo', QpType.UD],
];

/** `wr` is refused with EINVAL at index 1 behind a good WR, which is queued (and flushed). */
function refusedAt1(x, wr, what) {
  const { qp, cq, mr, ud } = x;
  const good = { wrId: 'good', opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }], sendFlags: SendFlags.SIGNALED, ...ud };
  assert.throws(
    () => qp.postSend([good, typeof wr === 'function' ? wr(good) : wr]),
    (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1,
    what,
  );
  assert.deepEqual(cq.poll(4).map((w) => [w.wrId, w.status]), [['good', WcStatus.WR_FLUSH_ERR]], `${what}: the WR before it was queued`);
}

for (const [name, type] of QPS) {
  test(`malformed send WRs are EINVAL with their index on ${name} ${QpType[type]}`, () => {
    const x = errQp(name, type);
    const bads = [
      ['no WR', null],
      ['a number', 42],
      ['no SGE list', (g) => ({ ...g, sgList: undefined })],
      ['a null SGE', (g) => ({ ...g, sgList: [null] })],
      ['an lkey below 0', (g) => ({ ...g, sgList: [{ addr: x.mr.addr, length: 8, lkey: -1 }] })],
      ['an lkey above 2^32', (g) => ({ ...g, sgList: [{ addr: x.mr.addr, length: 8, lkey: 2 ** 32 }] })],
      ['an SGE address below 0', (g) => ({ ...g, sgList: [{ addr: -1, length: 8, lkey: x.mr.lkey }] })],
    ];
    if (type === QpType.RC) {
      bads.push(['RDMA WRITE with rdma null', (g) => ({ ...g, opcode: WrOpcode.RDMA_WRITE, rdma: null })]);
      bads.push(['Send with Invalidate of a key below 0', (g) => ({ ...g, opcode: WrOpcode.SEND_WITH_INV, invalidateRkey: -1 })]);
    } else {
      bads.push(['immediate data of 2^40', (g) => ({ ...g, opcode: WrOpcode.SEND_WITH_IMM, immData: 2 ** 40 })]);
      bads.push(['immediate data 1.5', (g) => ({ ...g, opcode: WrOpcode.SEND_WITH_IMM, immData: 1.5 })]);
    }
    for (const [what, wr] of bads) refusedAt1(x, wr, what);
  });

  test(`malformed receive WRs are EINVAL with their index (those before it flush in ERR) on ${name} ${QpType[type]}`, () => {
    const { qp, cq, mr } = errQp(name, type);
    const good = { wrId: 'good', sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] };
    for (const [what, wr] of [
      ['no WR', null],
      ['no SGE list', { wrId: 1 }],
      ['a null SGE', { wrId: 1, sgList: [null] }],
    ]) {
      assert.throws(() => qp.postRecv([good, wr]), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1, what);
      assert.deepEqual(cq.poll(4).map((w) => [w.wrId, w.status]), [['good', WcStatus.WR_FLUSH_ERR]], `${what}: the WR before it was queued, and flushed at once`);
    }
  });
}
