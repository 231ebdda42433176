// The extended verbs on every device: ibv_query_device_ex (every device), ibv_create_cq_ex with
// the poll-by-field interface and ibv_create_qp_ex with the ibv_wr_* builder (devices whose
// provider has them — probed: a device without create_cq_ex must refuse create_qp_ex's extended
// masks too, as siw; the others serve RC sends, writes, reads, atomics where atomic_cap says so,
// and UD sends through wrSetUdAddr). The poll-by-field readers give what the ordinary poll gives;
// wr_complete posts all of a batch or none; what a device lacks is refused at creation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  Access, SendFlags, WcStatus, WcOpcode, WcFlags, QpType, QpState, AtomicCap, RdmaError, Errno,
  WcExFlags, WC_STANDARD_FLAGS, CqInitAttrMask, CreateCqAttrFlags, QpExSendOps, QpInitAttrMask, qpToQpEx, supportedSendOps,
  DEVICE_FLUSH_GLOBAL, DEVICE_FLUSH_PERSISTENT, DEVICE_ATOMIC_WRITE, DEVICE_MEM_WINDOW_TYPE_2B, MwType, MwState, incRkey,
} from '../../dist/index.js';
import { rcPair, reap } from '../lib/cm-rc-pair.js';
import { until } from '../lib/wait.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const code = (c) => (e) => e instanceof RdmaError && e.code === c;
/** An MR's memory as a Buffer. */
const bytes = (mr) => Buffer.from(mr.buf.buffer, mr.buf.byteOffset, mr.buf.byteLength);
const O = QpExSendOps;
const EX_MASK = QpInitAttrMask.PD | QpInitAttrMask.SEND_OPS_FLAGS;
const BASIC_OPS = O.WITH_SEND | O.WITH_SEND_WITH_IMM | O.WITH_RDMA_WRITE | O.WITH_RDMA_WRITE_WITH_IMM;

/** Whether the device has ibv_create_cq_ex (probed: EOPNOTSUPP means it has none). */
function hasEx(d) {
  try {
    d.device.open().createCqEx({ cqe: 1 }).destroy();
    return true;
  } catch (e) {
    if (e?.code !== 'EOPNOTSUPP') throw e;
    return false;
  }
}

/** Poll `cqx` by field until `n` completions were read: one plain object per completion (test side). */
async function reapEx(cqx, n, ms = 5000) {
  const out = [];
  const end = Date.now() + ms;
  while (out.length < n) {
    if (cqx.startPoll() === 0) {
      do out.push(readAll(cqx));
      while (out.length < n && cqx.nextPoll() === 0);
      cqx.endPoll();
    }
    if (out.length >= n) break;
    if (Date.now() > end) throw new Error(`only ${out.length}/${n} completions`);
    await new Promise((r) => setImmediate(r));
  }
  return out;
}

/** Every field a CQ created with the standard wc_flags reports, as `struct ibv_wc` names them. */
function readAll(x) {
  const flags = x.readWcFlags();
  return {
    wrId: x.wrId, status: x.status, opcode: x.readOpcode(), vendorErr: x.readVendorErr(), byteLen: x.readByteLen(),
    qpNum: x.readQpNum(), srcQp: x.readSrcQp(), wcFlags: flags, immData: x.readImmData(), invalidatedRkey: x.readInvalidatedRkey(),
    slid: x.readSlid(), sl: x.readSl(), dlidPathBits: x.readDlidPathBits(),
  };
}

/** The same fields of an ordinary `Wc`. */
const plain = (w) => ({
  wrId: w.wrId, status: w.status, opcode: w.opcode, vendorErr: w.vendorErr, byteLen: w.byteLen, qpNum: w.qpNum, srcQp: w.srcQp,
  wcFlags: w.wcFlags, immData: w.immData, invalidatedRkey: w.invalidatedRkey, slid: w.slid, sl: w.sl, dlidPathBits: w.dlidPathBits,
});

forEachDevice([], (d) => {
  test('ibv_query_device_ex: orig_attr is ibv_query_device, device_cap_flags_ex holds device_cap_flags, ports counted, no FLUSH/ATOMIC_WRITE', () => {
    const ctx = d.device.open();
    const a = ctx.queryDevice();
    const x = ctx.queryDeviceEx();
    assert.deepEqual(x.origAttr, a);
    assert.equal(x.compMask, 0);
    assert.equal(x.deviceCapFlagsEx & 0xffff_ffffn, BigInt(a.deviceCapFlags >>> 0));
    assert.equal(x.physPortCntEx, a.physPortCnt);
    assert.equal(x.deviceCapFlagsEx & (DEVICE_FLUSH_GLOBAL | DEVICE_FLUSH_PERSISTENT | DEVICE_ATOMIC_WRITE), 0n, 'no device here has FLUSH or ATOMIC_WRITE');
    for (const k of ['odpCaps', 'tsoCaps', 'rssCaps', 'packetPacingCaps', 'tmCaps', 'cqModCaps', 'pciAtomicCaps']) assert.equal(typeof x[k], 'object', k);
    for (const k of ['completionTimestampMask', 'hcaCoreClock', 'maxDmSize']) assert.equal(typeof x[k], 'bigint', k);
    x.origAttr.maxQp = -1;
    x.tsoCaps.maxTso = -1;
    assert.notEqual(ctx.queryDeviceEx().origAttr.maxQp, -1, 'a copy');
    assert.notEqual(ctx.queryDeviceEx().tsoCaps.maxTso, -1, 'a deep copy');
    assert.throws(() => ctx.queryDeviceEx({ compMask: 1 }), code('EINVAL'));
  });

  test('ibv_create_cq_ex / ibv_create_qp_ex: a device without them refuses both (EOPNOTSUPP); ibv_create_qp_ex with PD only is ibv_create_qp', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4);
    const base = { qpType: d.caps.has(Cap.RC) ? QpType.RC : QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 } };
    assert.throws(() => ctx.createQpEx({ ...base, compMask: QpInitAttrMask.SEND_OPS_FLAGS }), code('EINVAL'), 'no PD');
    const plainQp = ctx.createQpEx({ ...base, compMask: QpInitAttrMask.PD, pd });
    assert.equal(qpToQpEx(plainQp), null, 'no builder without create_qp_ex');
    plainQp.destroy();
    if (!hasEx(d)) {
      assert.throws(() => ctx.createCqEx({ cqe: 4, wcFlags: WC_STANDARD_FLAGS }), code('EOPNOTSUPP'));
      assert.throws(() => ctx.createQpEx({ ...base, compMask: EX_MASK, pd, sendOpsFlags: O.WITH_SEND }), code('EOPNOTSUPP'));
    }
    cq.destroy();
    pd.dealloc();
  });
});

forEachDevice([], (d) => {
  const skip = !hasEx(d) && 'the device has no ibv_create_cq_ex';

  test('ibv_create_cq_ex: the standard wc_flags; timestamps only with a completion clock; other masks and flags refused', { skip }, () => {
    const ctx = d.device.open();
    const x = ctx.queryDeviceEx();
    const cqx = ctx.createCqEx({ cqe: 8, wcFlags: WC_STANDARD_FLAGS, compMask: CqInitAttrMask.FLAGS, flags: CreateCqAttrFlags.SINGLE_THREADED, cqContext: 'ctx' });
    assert.equal(cqx.toCq(), cqx.cq);
    assert.ok(cqx.cqe >= 8);
    assert.equal(cqx.cqContext, 'ctx');
    assert.equal(cqx.startPoll(), Errno.ENOENT, 'empty: ENOENT, as ibv_start_poll');
    assert.throws(() => cqx.nextPoll(), code('EINVAL'), 'no poll started after ENOENT');
    assert.throws(() => cqx.endPoll(), code('EINVAL'));
    assert.throws(() => cqx.readOpcode(), code('EINVAL'), 'no current completion');
    cqx.destroy();
    if (x.completionTimestampMask === 0n) {
      for (const f of [WcExFlags.WITH_COMPLETION_TIMESTAMP, WcExFlags.WITH_COMPLETION_TIMESTAMP_WALLCLOCK]) {
        assert.throws(() => ctx.createCqEx({ cqe: 4, wcFlags: f }), code('EOPNOTSUPP'), `wc_flags 0x${f.toString(16)} without a completion clock`);
      }
    }
    for (const f of [WcExFlags.WITH_CVLAN, WcExFlags.WITH_FLOW_TAG, WcExFlags.WITH_TM_INFO]) {
      assert.throws(() => ctx.createCqEx({ cqe: 4, wcFlags: f }), code('EOPNOTSUPP'), `wc_flags 0x${f.toString(16)}`);
    }
    assert.throws(() => ctx.createCqEx({ cqe: 4, compMask: 4 }), code('EOPNOTSUPP'), 'comp_mask beyond FLAGS | PD');
    assert.throws(() => ctx.createCqEx({ cqe: 4, compMask: CqInitAttrMask.FLAGS, flags: CreateCqAttrFlags.IGNORE_OVERRUN }), code('EOPNOTSUPP'));
    assert.throws(() => ctx.createCqEx({ cqe: 0 }), code('EINVAL'), 'as ibv_create_cq');
    const narrow = ctx.createCqEx({ cqe: 2, wcFlags: WcExFlags.WITH_BYTE_LEN });
    assert.equal(narrow.wcFlags, WcExFlags.WITH_BYTE_LEN);
    narrow.destroy();
  });

  test('ibv_create_qp_ex: send_ops_flags the device lacks are refused (FLUSH, ATOMIC_WRITE, TSO everywhere); create_flags refused', { skip }, () => {
    const ctx = d.device.open();
    const a = ctx.queryDevice();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4);
    const type = d.caps.has(Cap.RC) ? QpType.RC : QpType.UD;
    const base = { qpType: type, sendCq: cq, recvCq: cq, cap: { maxSendWr: 2, maxRecvWr: 2 }, pd };
    for (const f of [O.WITH_FLUSH, O.WITH_ATOMIC_WRITE, O.WITH_TSO]) {
      assert.throws(() => ctx.createQpEx({ ...base, compMask: EX_MASK, sendOpsFlags: O.WITH_SEND | f }), code('EOPNOTSUPP'), `0x${f.toString(16)}`);
    }
    if (a.atomicCap === AtomicCap.NONE) {
      assert.throws(() => ctx.createQpEx({ ...base, compMask: EX_MASK, sendOpsFlags: O.WITH_ATOMIC_FETCH_AND_ADD }), code('EOPNOTSUPP'), 'no atomic_cap');
    }
    if (a.maxMw === 0) assert.throws(() => ctx.createQpEx({ ...base, compMask: EX_MASK, sendOpsFlags: O.WITH_BIND_MW }), code('EOPNOTSUPP'), 'no windows');
    if (d.caps.has(Cap.UD)) {
      const ud = { ...base, qpType: QpType.UD };
      assert.throws(() => ctx.createQpEx({ ...ud, compMask: EX_MASK, sendOpsFlags: O.WITH_RDMA_READ }), code('EOPNOTSUPP'), 'UD: no READ');
    }
    assert.throws(() => ctx.createQpEx({ ...base, compMask: QpInitAttrMask.PD | QpInitAttrMask.CREATE_FLAGS, createFlags: 2 }), code('EOPNOTSUPP'));
    assert.throws(() => ctx.createQpEx({ ...base, compMask: QpInitAttrMask.PD | QpInitAttrMask.XRCD }), code('EOPNOTSUPP'));
    const qp = ctx.createQpEx({ ...base, compMask: EX_MASK, sendOpsFlags: O.WITH_SEND });
    const x = qpToQpEx(qp);
    assert.equal(x.qp, qp);
    assert.equal(x.sendOpsFlags, O.WITH_SEND);
    assert.ok((supportedSendOps(ctx, type) & O.WITH_SEND) !== 0);
    // In RESET: the batch is refused whole, nothing queued.
    x.wrStart();
    x.wrSend();
    assert.equal(x.wrComplete(), Errno.EINVAL);
    assert.match(x.lastError.message, /state/);
    qp.destroy();
    cq.destroy();
    pd.dealloc();
  });
});

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  const skip = !hasEx(d) && 'the device has no ibv_create_cq_ex';

  /** A connected pair whose QPs have builders (`ops`) and extended CQs (`id.cqx.send` / `.recv`). */
  async function exPair(ops, opts = {}) {
    const made = [];
    const pair = await rcPair({
      ...opts,
      createQp: (id, cap) => {
        const ctx = id.verbs;
        const ch = ctx.createCompChannel();
        const send = ctx.createCqEx({ cqe: 32, wcFlags: WC_STANDARD_FLAGS });
        const recv = ctx.createCqEx({ cqe: 32, wcFlags: WC_STANDARD_FLAGS, channel: ch });
        id.createQpEx({ compMask: EX_MASK, sendOpsFlags: ops, sendCq: send.cq, recvCq: recv.cq, cap });
        id.cqx = { send, recv, ch };
        made.push(id.cqx);
      },
    });
    const close = async () => {
      await pair.close();
      for (const m of made) {
        m.send.destroy();
        m.recv.destroy();
        m.ch.destroy();
      }
    };
    return { a: pair.a, b: pair.b, close };
  }

  test('RC through the builder: SEND, SEND_WITH_IMM, RDMA_WRITE(_WITH_IMM), RDMA_READ; poll-by-field gives what ibv_poll_cq gives', { skip }, async () => {
    const ops = BASIC_OPS | O.WITH_RDMA_READ;
    const { a, b, close } = await exPair(ops);
    try {
      const src = a.pd.regMr(Buffer.from('0123456789abcdefghijklmnopqrstuv'), Access.LOCAL_WRITE);
      const sink = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
      const back = a.pd.regMr(Buffer.alloc(8), Access.LOCAL_WRITE);
      const x = qpToQpEx(a.qp);
      /** One round: two receives, then SEND_IMM + WRITE + WRITE_IMM + READ in one batch. */
      const round = () => {
        b.qp.postRecv([{ wrId: 100, sgList: [{ addr: sink.addr, length: 32, lkey: sink.lkey }] }, { wrId: 101, sgList: [] }]);
        x.wrStart();
        x.wrFlags = SendFlags.SIGNALED;
        x.wrId = 1;
        x.wrSendImm(0x01020304);
        x.wrSetSge(src.lkey, src.addr, 10);
        x.wrId = 2;
        x.wrRdmaWrite(sink.rkey, sink.addr + 40, 0);
        x.wrSetSgeList([{ addr: src.addr + 10, length: 4, lkey: src.lkey }, { addr: src.addr + 20, length: 4, lkey: src.lkey }]);
        x.wrId = 3;
        x.wrRdmaWriteImm(sink.rkey, sink.addr + 48, 0xcafe);
        x.wrSetSge(src.lkey, src.addr, 0);
        x.wrId = 4n;
        x.wrRdmaRead(sink.rkey, sink.addr, 8);
        x.wrSetSge(back.lkey, back.addr, 8);
        assert.equal(x.wrComplete(), 0, x.lastError?.message);
      };
      round();
      const sendWcs = (await reap(a.cqx.send.cq, 4)).map(plain);
      const recvWcs = (await reap(b.cqx.recv.cq, 2)).map(plain);
      assert.equal(bytes(sink).subarray(0, 10).toString(), '0123456789');
      assert.equal(bytes(sink).subarray(40, 48).toString(), 'abcdklmn');
      assert.equal(bytes(back).toString(), '01234567');
      assert.deepEqual(sendWcs.map((w) => [w.wrId, w.status, w.opcode]), [
        [1, WcStatus.SUCCESS, WcOpcode.SEND],
        [2, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE],
        [3, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE],
        [4n, WcStatus.SUCCESS, WcOpcode.RDMA_READ],
      ]);
      assert.equal(recvWcs[0].immData, 0x01020304);
      assert.ok(recvWcs[0].wcFlags & WcFlags.WITH_IMM);
      assert.equal(recvWcs[1].opcode, WcOpcode.RECV_RDMA_WITH_IMM);
      assert.equal(recvWcs[1].immData, 0xcafe);
      // The same round again, polled by field: field for field what the ordinary poll gave.
      bytes(sink).fill(0);
      bytes(back).fill(0);
      round();
      assert.deepEqual(await reapEx(a.cqx.send, 4), sendWcs);
      assert.deepEqual(await reapEx(b.cqx.recv, 2), recvWcs);
      assert.equal(a.cqx.send.startPoll(), Errno.ENOENT, 'every completion consumed once');
      src.dereg();
      sink.dereg();
      back.dereg();
    } finally {
      await close();
    }
  });

  test('an extended CQ with a completion channel: req_notify, the event names its CQ, then poll by field', { skip }, async () => {
    const { a, b, close } = await exPair(O.WITH_SEND);
    try {
      const mr = b.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
      const src = a.pd.regMr(Buffer.from('ping'), Access.LOCAL_WRITE);
      const rx = b.cqx.recv;
      rx.reqNotify();
      b.qp.postRecv({ wrId: 9, sgList: [{ addr: mr.addr, length: 16, lkey: mr.lkey }] });
      const x = qpToQpEx(a.qp);
      x.wrStart();
      x.wrId = 5;
      x.wrFlags = 0;
      x.wrSend();
      x.wrSetSge(src.lkey, src.addr, 4);
      assert.equal(x.wrComplete(), 0);
      const cq = await b.cqx.ch.getCqEvent(AbortSignal.timeout(5000));
      assert.equal(cq, rx.cq, 'the event names ibv_cq_ex_to_cq(cq_ex)');
      rx.ackEvents(1);
      assert.equal(rx.startPoll(), 0);
      assert.equal(rx.wrId, 9);
      assert.equal(rx.status, WcStatus.SUCCESS);
      assert.equal(rx.readByteLen(), 4);
      assert.equal(rx.readQpNum(), b.qp.qpNum);
      assert.throws(() => rx.startPoll(), code('EINVAL'), 'a poll is under way');
      assert.equal(rx.nextPoll(), Errno.ENOENT);
      rx.endPoll();
      assert.equal(a.cqx.send.startPoll(), Errno.ENOENT, 'unsignaled: no send completion');
      mr.dereg();
      src.dereg();
    } finally {
      await close();
    }
  });

  test('wr_complete is all or nothing: a bad WR in the batch posts none; builder errors stick until wr_start; wr_abort drops', { skip }, async () => {
    const { a, b, close } = await exPair(O.WITH_SEND | O.WITH_RDMA_WRITE, { send: 4, inline: 16 });
    try {
      const src = a.pd.regMr(Buffer.alloc(64, 7), Access.LOCAL_WRITE);
      const sink = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const x = qpToQpEx(a.qp);
      const sendOne = (id) => {
        x.wrId = id;
        x.wrSend();
        x.wrSetSge(src.lkey, src.addr, 4);
      };
      x.wrFlags = SendFlags.SIGNALED;
      // A good SEND, then an RDMA WRITE with a malformed remote address: EINVAL, nothing posted.
      x.wrStart();
      sendOne(1);
      x.wrId = 2;
      x.wrRdmaWrite(sink.rkey, -8);
      x.wrSetSge(src.lkey, src.addr, 8);
      assert.equal(x.wrComplete(), Errno.EINVAL);
      assert.equal(x.lastError.badWrIndex, 1);
      // A call the QP was not created for: EOPNOTSUPP.
      x.wrStart();
      x.wrRdmaRead(sink.rkey, sink.addr);
      sendOne(3);
      assert.equal(x.wrComplete(), Errno.EOPNOTSUPP);
      // Inline above max_inline_data, too many SGEs, more WRs than the queue holds: ENOSPC.
      x.wrStart();
      x.wrSend();
      x.wrSetInlineData({ addr: src.addr, length: a.qp.cap.maxInlineData + 1, lkey: src.lkey });
      assert.equal(x.wrComplete(), Errno.ENOSPC);
      x.wrStart();
      x.wrSend();
      x.wrSetSgeList(Array.from({ length: a.qp.cap.maxSendSge + 1 }, () => ({ addr: src.addr, length: 1, lkey: src.lkey })));
      assert.equal(x.wrComplete(), Errno.ENOSPC);
      x.wrStart();
      for (let i = 0; i <= a.qp.cap.maxSendWr; i++) sendOne(10 + i);
      assert.equal(x.wrComplete(), Errno.ENOSPC, 'no room for the batch');
      // A setter before any builder call: EINVAL. wr_abort: nothing posted.
      x.wrStart();
      x.wrSetSge(src.lkey, src.addr, 4);
      assert.equal(x.wrComplete(), Errno.EINVAL);
      x.wrStart();
      sendOne(4);
      x.wrAbort();
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(a.cqx.send.cq.pending, 0, 'no refused or aborted WR completed');
      assert.equal(a.qp.state, QpState.RTS, 'refusals at post leave the QP alone');
      // Then a good batch: inline data (a list) and a SEND, both arrive.
      b.qp.postRecv([{ wrId: 50, sgList: [{ addr: sink.addr, length: 32, lkey: sink.lkey }] }, { wrId: 51, sgList: [{ addr: sink.addr + 32, length: 32, lkey: sink.lkey }] }]);
      bytes(src).write('inline', 0);
      bytes(src).write('-list', 16);
      x.wrStart();
      x.wrId = 5;
      x.wrFlags = SendFlags.SIGNALED;
      x.wrSend();
      x.wrSetInlineDataList([{ addr: src.addr, length: 6, lkey: src.lkey }, { addr: src.addr + 16, length: 5, lkey: src.lkey }]);
      sendOne(6);
      assert.equal(x.wrComplete(), 0, x.lastError?.message);
      const wcs = await reapEx(a.cqx.send, 2);
      assert.deepEqual(wcs.map((w) => [w.wrId, w.status]), [[5, WcStatus.SUCCESS], [6, WcStatus.SUCCESS]]);
      const r = await reapEx(b.cqx.recv, 2);
      assert.deepEqual(r.map((w) => [w.wrId, w.byteLen]), [[50, 11], [51, 4]]);
      assert.equal(bytes(sink).subarray(0, 11).toString(), 'inline-list');
      src.dereg();
      sink.dereg();
    } finally {
      await close();
    }
  });

  test('completion timestamps where the device has a completion clock: read by field, non-decreasing', { skip }, async (t) => {
    const x0 = d.device.open().queryDeviceEx();
    if (x0.completionTimestampMask === 0n) {
      t.skip('completion_timestamp_mask 0: no completion clock');
      return;
    }
    const made = [];
    const { a, b, close } = await rcPair({
      createQp: (id, cap) => {
        const cqx = id.verbs.createCqEx({ cqe: 32, wcFlags: WC_STANDARD_FLAGS | WcExFlags.WITH_COMPLETION_TIMESTAMP });
        id.createQpEx({ compMask: EX_MASK, sendOpsFlags: O.WITH_SEND, sendCq: cqx.cq, recvCq: cqx.cq, cap });
        id.cqx = cqx;
        made.push(cqx);
      },
    });
    try {
      const mr = b.pd.regMr(Buffer.alloc(8), Access.LOCAL_WRITE);
      b.qp.postRecv([{ wrId: 1, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] }, { wrId: 2, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }] }]);
      const x = qpToQpEx(a.qp);
      x.wrStart();
      x.wrFlags = SendFlags.SIGNALED;
      x.wrSend();
      x.wrSend();
      assert.equal(x.wrComplete(), 0, x.lastError?.message);
      const stamps = [];
      const end = Date.now() + 5000;
      while (stamps.length < 2 && Date.now() < end) {
        if (b.cqx.startPoll() === 0) {
          do stamps.push(b.cqx.readCompletionTs() & x0.completionTimestampMask);
          while (b.cqx.nextPoll() === 0);
          b.cqx.endPoll();
        } else await new Promise((r) => setImmediate(r));
      }
      assert.equal(stamps.length, 2);
      assert.ok(stamps[0] > 0n && stamps[1] >= stamps[0], `timestamps ${stamps}`);
      await reapEx(a.cqx, 2);
      mr.dereg();
    } finally {
      await close();
      for (const c of made) c.destroy();
    }
  });

  test('atomics through the builder where atomic_cap says so: compare-and-swap, fetch-and-add', { skip }, async (t) => {
    if (d.device.open().queryDevice().atomicCap === AtomicCap.NONE) {
      t.skip('atomic_cap NONE');
      return;
    }
    const { a, b, close } = await exPair(O.WITH_ATOMIC_CMP_AND_SWP | O.WITH_ATOMIC_FETCH_AND_ADD);
    try {
      const target = Buffer.alloc(16);
      target.writeBigUInt64LE(5n, 0);
      const tmr = b.pd.regMr(target, Access.LOCAL_WRITE | Access.REMOTE_ATOMIC);
      const old = a.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
      const x = qpToQpEx(a.qp);
      x.wrStart();
      x.wrFlags = SendFlags.SIGNALED;
      x.wrId = 1;
      x.wrAtomicCmpSwp(tmr.rkey, tmr.addr, 5n, 9n);
      x.wrSetSge(old.lkey, old.addr, 8);
      x.wrId = 2;
      x.wrAtomicFetchAdd(tmr.rkey, tmr.addr, 3n);
      x.wrSetSge(old.lkey, old.addr + 8, 8);
      assert.equal(x.wrComplete(), 0, x.lastError?.message);
      const wcs = await reapEx(a.cqx.send, 2);
      assert.deepEqual(wcs.map((w) => [w.wrId, w.status, w.opcode, w.byteLen]), [
        [1, WcStatus.SUCCESS, WcOpcode.COMP_SWAP, 8],
        [2, WcStatus.SUCCESS, WcOpcode.FETCH_ADD, 8],
      ]);
      assert.equal(bytes(old).readBigUInt64LE(0), 5n, 'the value before the swap');
      assert.equal(bytes(old).readBigUInt64LE(8), 9n, 'the value before the add');
      await until(() => target.readBigUInt64LE(0) === 12n, 2000);
      tmr.dereg();
      old.dereg();
    } finally {
      await close();
    }
  });
});

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  const a0 = d.device.open().queryDevice();
  const skip = (!hasEx(d) && 'the device has no ibv_create_cq_ex') || (!(a0.maxMw > 0 && a0.deviceCapFlags & DEVICE_MEM_WINDOW_TYPE_2B) && 'no type 2B memory windows');

  test('memory windows through the builder: BIND_MW of a type 2 window, an RDMA WRITE through it, SEND_WITH_INV and LOCAL_INV', { skip }, async () => {
    const ops = O.WITH_BIND_MW | O.WITH_LOCAL_INV | O.WITH_SEND_WITH_INV | O.WITH_RDMA_WRITE | O.WITH_SEND;
    const made = [];
    const { a, b, close } = await rcPair({
      createQp: (id, cap) => {
        const cqx = id.verbs.createCqEx({ cqe: 32, wcFlags: WC_STANDARD_FLAGS });
        id.createQpEx({ compMask: EX_MASK, sendOpsFlags: ops, sendCq: cqx.cq, recvCq: cqx.cq, cap });
        id.cqx = cqx;
        made.push(cqx);
      },
    });
    try {
      const region = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.MW_BIND);
      const mw = b.pd.allocMw(MwType.TYPE_2);
      const src = a.pd.regMr(Buffer.from('through-a-window'), Access.LOCAL_WRITE);
      const xb = qpToQpEx(b.qp);
      const rkey = incRkey(mw.rkey);
      xb.wrStart();
      xb.wrId = 1;
      xb.wrFlags = SendFlags.SIGNALED;
      xb.wrBindMw(mw, rkey, { mr: region, addr: region.addr + 16, length: 32, mwAccessFlags: Access.REMOTE_WRITE });
      assert.equal(xb.wrComplete(), 0, xb.lastError?.message);
      const [bound] = await reapEx(b.cqx, 1);
      assert.deepEqual([bound.wrId, bound.status, bound.opcode], [1, WcStatus.SUCCESS, WcOpcode.BIND_MW]);
      mw.rkey = rkey;
      const xa = qpToQpEx(a.qp);
      b.qp.postRecv({ wrId: 7, sgList: [] });
      xa.wrStart();
      xa.wrFlags = SendFlags.SIGNALED;
      xa.wrId = 2;
      xa.wrRdmaWrite(rkey, region.addr + 16);
      xa.wrSetSge(src.lkey, src.addr, 16);
      xa.wrId = 3;
      xa.wrSendInv(rkey);
      assert.equal(xa.wrComplete(), 0, xa.lastError?.message);
      const sent = await reapEx(a.cqx, 2);
      assert.deepEqual(sent.map((w) => [w.wrId, w.status]), [[2, WcStatus.SUCCESS], [3, WcStatus.SUCCESS]]);
      const [inv] = await reapEx(b.cqx, 1);
      assert.equal(inv.wrId, 7);
      assert.ok(inv.wcFlags & WcFlags.WITH_INV);
      assert.equal(inv.invalidatedRkey, rkey, 'read by field under WITH_IMM, as ibv_wc_read_invalidated_rkey');
      assert.equal(bytes(region).subarray(16, 32).toString(), 'through-a-window');
      assert.equal(mw.state, MwState.FREE, 'invalidated by the SEND_WITH_INV');
      // Bound again, then invalidated locally.
      const rkey2 = incRkey(rkey);
      xb.wrStart();
      xb.wrFlags = SendFlags.SIGNALED;
      xb.wrId = 4;
      xb.wrBindMw(mw, rkey2, { mr: region, addr: region.addr, length: 8, mwAccessFlags: Access.REMOTE_WRITE });
      xb.wrId = 5;
      xb.wrLocalInv(rkey2);
      assert.equal(xb.wrComplete(), 0, xb.lastError?.message);
      const done = await reapEx(b.cqx, 2);
      assert.deepEqual(done.map((w) => [w.wrId, w.status, w.opcode]), [[4, WcStatus.SUCCESS, WcOpcode.BIND_MW], [5, WcStatus.SUCCESS, WcOpcode.LOCAL_INV]]);
      assert.equal(mw.state, MwState.FREE);
      mw.dealloc();
      region.dereg();
      src.dereg();
    } finally {
      await close();
      for (const c of made) c.destroy();
    }
  });
});

forEachDevice([Cap.UD, Cap.AH], (d) => {
  const skip = !hasEx(d) && 'the device has no ibv_create_cq_ex';

  test('UD through the builder: SEND and SEND_WITH_IMM with wr_set_ud_addr; the receiver reads src_qp and the GRH flag by field', { skip }, async () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const send = ctx.createCqEx({ cqe: 8, wcFlags: WC_STANDARD_FLAGS });
    const recv = ctx.createCqEx({ cqe: 8, wcFlags: WC_STANDARD_FLAGS });
    const QKEY = 0x1234;
    const mk = (ex) => {
      const attr = { qpType: QpType.UD, sendCq: send.cq, recvCq: recv.cq, cap: { maxSendWr: 4, maxRecvWr: 4, maxSendSge: 1, maxRecvSge: 1 }, pd };
      const qp = ex ? ctx.createQpEx({ ...attr, compMask: EX_MASK, sendOpsFlags: O.WITH_SEND | O.WITH_SEND_WITH_IMM }) : ctx.createQpEx({ ...attr, compMask: QpInitAttrMask.PD });
      qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: QKEY });
      qp.modify({ qpState: QpState.RTR });
      qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
      return qp;
    };
    const tx = mk(true);
    const rx = mk(false);
    const entry = ctx.queryGidTable().find((e) => e.gid.every((b, i) => (i < 10 ? b === 0 : i < 12 ? b === 0xff : true)) && e.gid[12] === 127);
    assert.ok(entry, 'an IPv4 loopback GID');
    const ah = pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: entry.gid, flowLabel: 0, sgidIndex: entry.gidIndex, hopLimit: 64, trafficClass: 0 } });
    const buf = pd.regMr(Buffer.alloc(256), Access.LOCAL_WRITE);
    bytes(buf).write('datagram', 200);
    rx.postRecv([0, 1].map((i) => ({ wrId: 20 + i, sgList: [{ addr: buf.addr + i * 96, length: 96, lkey: buf.lkey }] })));
    const x = qpToQpEx(tx);
    x.wrStart();
    x.wrFlags = SendFlags.SIGNALED;
    x.wrId = 1;
    x.wrSend();
    x.wrSetUdAddr(ah, rx.qpNum, QKEY);
    x.wrSetSge(buf.lkey, buf.addr + 200, 8);
    x.wrId = 2;
    x.wrSendImm(77);
    x.wrSetUdAddr(ah, rx.qpNum, 0x8000_0000); // bit 31: the sending QP's own Q_Key (IB 10.2.5)
    x.wrSetSge(buf.lkey, buf.addr + 200, 4);
    assert.equal(x.wrComplete(), 0, x.lastError?.message);
    // Without a destination: refused at post, nothing sent.
    x.wrStart();
    x.wrSend();
    x.wrSetSge(buf.lkey, buf.addr + 200, 4);
    assert.equal(x.wrComplete(), Errno.EINVAL);
    const s = await reapEx(send, 2);
    assert.deepEqual(s.map((w) => [w.wrId, w.status, w.opcode]), [[1, WcStatus.SUCCESS, WcOpcode.SEND], [2, WcStatus.SUCCESS, WcOpcode.SEND]]);
    const r = await reapEx(recv, 2);
    assert.deepEqual(r.map((w) => [w.wrId, w.status, w.byteLen, w.srcQp, w.qpNum]), [[20, 0, 40 + 8, tx.qpNum, rx.qpNum], [21, 0, 40 + 4, tx.qpNum, rx.qpNum]]);
    assert.ok(r[0].wcFlags & WcFlags.GRH);
    assert.ok(r[1].wcFlags & WcFlags.WITH_IMM);
    assert.equal(r[1].immData, 77);
    assert.equal(bytes(buf).subarray(40, 48).toString(), 'datagram');
    assert.equal(send.startPoll(), Errno.ENOENT, 'the refused WR never completed');
    tx.destroy();
    rx.destroy();
    ah.destroy();
    buf.dereg();
    send.destroy();
    recv.destroy();
    pd.dealloc();
  });
});
