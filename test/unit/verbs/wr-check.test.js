// Post-time checks of work requests (src/verbs/wr-check.ts): every malformed WR is refused with
// EINVAL and the index of the first WR not queued, on every soft device and QP type — the same
// argument shapes everywhere — while what a device declares it cannot do (opcodes, READ sinks,
// message sizes, inline on a READ) stays that device's answer.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';

// A private RoCE UDP port: other tests on this host never see this process's datagrams.
if (!process.env.RDMACM_ROCE_PORT) process.env.RDMACM_ROCE_PORT = String(20000 + Math.floor(Math.random() * 30000));
const { getDeviceList, QpType, QpState, WrOpcode, SendFlags, WcStatus, PostError, Mw, MwType } = await import('../../../dist/index.js');

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

// The table-driven checks themselves (pure: no device), per declared caps. Each row is a WR and
// what each provider's QPs answer: null (posted) or EINVAL. Where the devices differ, each keeps
// the answer its kernel counterpart gives: siw has no immediate data, no atomics and one READ sink
// SGE, and ignores INLINE on a READ, which rxe refuses; rxe caps a message at 2^31; the native
// backend refuses only what the addon cannot carry and leaves the rest to the kernel's provider.
const { checkSendWr, checkRecvWr, wrRules, DEFAULT_WR_CAPS, SEND_OPCODES, WrMask } = await import('../../../dist/verbs/wr-check.js');
const { SIW_WR_CAPS } = await import('../../../dist/transport/iwarp/provider.js');
const { RXE_WR_CAPS } = await import('../../../dist/transport/roce/provider.js');
const { NATIVE_WR_CAPS } = await import('../../../dist/native/provider.js');

const CAP = { maxSendWr: 8, maxRecvWr: 8, maxSendSge: 2, maxRecvSge: 2, maxInlineData: 64 };
const RULES = {
  siw: wrRules(SIW_WR_CAPS, QpType.RC, CAP),
  rxe: wrRules(RXE_WR_CAPS, QpType.RC, CAP),
  native: wrRules(NATIVE_WR_CAPS, QpType.RC, CAP),
  default: wrRules(DEFAULT_WR_CAPS, QpType.RC, CAP),
};
const PD = {};
const MW = new Mw({ context: {} }, MwType.TYPE_1, 0x100);
const sge = (length = 8) => ({ addr: 0x1000, length, lkey: 0x100 });
const rdma = { remoteAddr: 0x2000, rkey: 0x200 };
const OK = null;
const NO = 'EINVAL';

test('send WRs against each provider\'s declared caps (RC QPs)', () => {
  const rows = [
    ['SEND', { opcode: WrOpcode.SEND, sgList: [sge()] }, { siw: OK, rxe: OK, native: OK, default: OK }],
    ['SEND_WITH_IMM', { opcode: WrOpcode.SEND_WITH_IMM, sgList: [sge()], immData: 7 }, { siw: NO, rxe: OK, native: OK, default: OK }],
    ['immediate data -1', { opcode: WrOpcode.SEND_WITH_IMM, sgList: [], immData: -1 }, { siw: NO, rxe: OK, native: NO, default: OK }],
    ['LOCAL_INV', { opcode: WrOpcode.LOCAL_INV, sgList: [], invalidateRkey: 5 }, { siw: NO, rxe: OK, native: OK, default: OK }],
    ['SEND_WITH_INV without its rkey', { opcode: WrOpcode.SEND_WITH_INV, sgList: [] }, { siw: NO, rxe: NO, native: OK, default: NO }],
    ['RDMA_WRITE without rdma', { opcode: WrOpcode.RDMA_WRITE, sgList: [sge()] }, { siw: NO, rxe: NO, native: OK, default: NO }],
    ['rdma on a SEND, malformed', { opcode: WrOpcode.SEND, sgList: [], rdma: { remoteAddr: -1, rkey: 0 } }, { siw: OK, rxe: OK, native: NO, default: OK }],
    ['RDMA_READ, two sink SGEs', { opcode: WrOpcode.RDMA_READ, sgList: [sge(), sge()], rdma }, { siw: NO, rxe: OK, native: OK, default: OK }],
    ['RDMA_READ, no sink SGE', { opcode: WrOpcode.RDMA_READ, sgList: [], rdma }, { siw: NO, rxe: OK, native: OK, default: OK }],
    ['RDMA_READ, INLINE', { opcode: WrOpcode.RDMA_READ, sgList: [sge()], rdma, sendFlags: SendFlags.INLINE }, { siw: OK, rxe: NO, native: OK, default: OK }],
    ['inline beyond max_inline_data', { opcode: WrOpcode.SEND, sgList: [sge(65)], sendFlags: SendFlags.INLINE }, { siw: NO, rxe: NO, native: OK, default: NO }],
    ['an SGE of 2^31 bytes', { opcode: WrOpcode.SEND, sgList: [sge(2 ** 31)] }, { siw: NO, rxe: NO, native: OK, default: NO }],
    ['a message of 2^32 - 2 bytes', { opcode: WrOpcode.RDMA_WRITE, sgList: [sge(2 ** 31 - 1), sge(2 ** 31 - 1)], rdma }, { siw: OK, rxe: NO, native: OK, default: OK }],
    ['three SGEs (max_send_sge 2)', { opcode: WrOpcode.SEND, sgList: [sge(), sge(), sge()] }, { siw: NO, rxe: NO, native: NO, default: NO }],
    ['FETCH_AND_ADD', { opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: [sge(8)], atomic: { remoteAddr: 0x2000, rkey: 0x200, compareAdd: 1n } }, { siw: NO, rxe: OK, native: OK, default: OK }],
    ['CMP_AND_SWP without swap', { opcode: WrOpcode.ATOMIC_CMP_AND_SWP, sgList: [sge(8)], atomic: { remoteAddr: 0x2000, rkey: 0x200, compareAdd: 1n } }, { siw: NO, rxe: NO, native: OK, default: NO }],
    ['atomic, misaligned', { opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: [sge(8)], atomic: { remoteAddr: 0x2004, rkey: 0x200, compareAdd: 1n } }, { siw: NO, rxe: NO, native: OK, default: NO }],
    ['atomic, 4 local bytes', { opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: [sge(4)], atomic: { remoteAddr: 0x2000, rkey: 0x200, compareAdd: 1n } }, { siw: NO, rxe: NO, native: OK, default: NO }],
    ['atomic, operand 1.5', { opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: [sge(8)], atomic: { remoteAddr: 0x2000, rkey: 0x200, compareAdd: 1.5 } }, { siw: NO, rxe: NO, native: NO, default: NO }],
    ['BIND_MW without its operands', { opcode: WrOpcode.BIND_MW, sgList: [] }, { siw: NO, rxe: NO, native: NO, default: NO }],
    ['BIND_MW', { opcode: WrOpcode.BIND_MW, sgList: [], bindMw: { mw: MW, rkey: 0x101, bindInfo: { mr: null, addr: 0, length: 0, mwAccessFlags: 0 } } }, { siw: NO, rxe: OK, native: OK, default: OK }],
    ['BIND_MW, rkey -1', { opcode: WrOpcode.BIND_MW, sgList: [], bindMw: { mw: MW, rkey: -1, bindInfo: { mr: null, addr: 0, length: 0, mwAccessFlags: 0 } } }, { siw: NO, rxe: NO, native: NO, default: NO }],
    ['BIND_MW with an SGE', { opcode: WrOpcode.BIND_MW, sgList: [sge()], bindMw: { mw: MW, rkey: 0x101, bindInfo: { mr: null, addr: 0, length: 0, mwAccessFlags: 0 } } }, { siw: NO, rxe: NO, native: NO, default: NO }],
    ['BIND_MW, bind_info.mr not an MR', { opcode: WrOpcode.BIND_MW, sgList: [], bindMw: { mw: MW, rkey: 0x101, bindInfo: { mr: {}, addr: 0, length: 8, mwAccessFlags: 0 } } }, { siw: NO, rxe: NO, native: NO, default: NO }],
    ['opcode 99', { opcode: 99, sgList: [] }, { siw: NO, rxe: NO, native: NO, default: NO }],
    ['opcode "2"', { opcode: '2', sgList: [] }, { siw: NO, rxe: NO, native: NO, default: NO }],
    ['wr_id a string', { wrId: 'x', opcode: WrOpcode.SEND, sgList: [] }, { siw: OK, rxe: OK, native: NO, default: OK }],
    ['send_flags -1', { opcode: WrOpcode.SEND, sgList: [], sendFlags: -1 }, { siw: OK, rxe: OK, native: NO, default: OK }],
  ];
  for (const [what, wr, want] of rows) {
    for (const [dev, r] of Object.entries(RULES)) {
      const got = checkSendWr({ wrId: 1, ...wr }, r, PD);
      assert.equal(typeof got === 'number' ? OK : NO, want[dev], `${what} on ${dev}: ${got}`);
      if (typeof got === 'number') assert.equal(got, wr.sgList.reduce((n, s) => n + s.length, 0), 'the message length');
    }
  }
});

test('the opcode table: what each opcode carries; the rules a QP gets from its provider', () => {
  assert.equal(SEND_OPCODES.length, 10);
  assert.equal(SEND_OPCODES[WrOpcode.RDMA_READ].name, 'RDMA_READ');
  assert.equal(SEND_OPCODES[WrOpcode.RDMA_READ].mask, WrMask.RDMA | WrMask.READ);
  assert.equal(SEND_OPCODES[WrOpcode.RDMA_WRITE_WITH_IMM].mask, WrMask.RDMA | WrMask.IMM);
  assert.ok(Object.isFrozen(SEND_OPCODES) && Object.isFrozen(SEND_OPCODES[0]));
  // A QP type the provider does not list takes no opcode; the native addon's per-call scratch
  // bounds the SGEs of one WR whatever the QP's cap.
  assert.ok(wrRules(SIW_WR_CAPS, QpType.UD, CAP).ops.every((x) => x === null));
  assert.deepEqual(wrRules(SIW_WR_CAPS, QpType.RC, CAP).ops.flatMap((x) => (x === null ? [] : [x.name])), ['RDMA_WRITE', 'SEND', 'RDMA_READ', 'SEND_WITH_INV']);
  assert.equal(wrRules(NATIVE_WR_CAPS, QpType.RC, { ...CAP, maxSendSge: 1000, maxRecvSge: 1000 }).maxSendSge, 256);
  assert.equal(wrRules(RXE_WR_CAPS, QpType.UD, CAP).maxMessage, Infinity, 'UD: the port MTU, checked by the QP');
  assert.equal(wrRules(RXE_WR_CAPS, QpType.RC, CAP).maxMessage, 2 ** 31);
});

test('receive WRs: SGE count and shape; wr_id only where the C struct holds it', () => {
  for (const [dev, r] of Object.entries(RULES)) {
    assert.equal(checkRecvWr({ wrId: 1, sgList: [sge(), sge()] }, r), 16, dev);
    assert.equal(typeof checkRecvWr({ wrId: 1, sgList: [sge(), sge(), sge()] }, r), 'string', dev);
    assert.equal(typeof checkRecvWr({ wrId: 1, sgList: [{ addr: 0, length: 1, lkey: -1 }] }, r), 'string', dev);
    assert.equal(typeof checkRecvWr({ wrId: 'x', sgList: [] }, r), dev !== 'native' ? 'number' : 'string', dev);
    assert.equal(typeof checkRecvWr({ wrId: 1, sgList: [sge(2 ** 31)] }, r), dev === 'native' ? 'number' : 'string', dev);
  }
});
