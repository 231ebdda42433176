// UC QPs on every device that makes them (IBTA 9.8.2: SEND and RDMA WRITE with and without
// immediate data, no acknowledgement, no retry): the data path over a pair connected by hand
// (ibv_modify_qp with UC's attributes), the opcodes refused when posted, and, on devices whose
// transport can drop datagrams on purpose, what a lost packet costs (its message, nothing more,
// and never an error on the sender). Devices that make no UC QP refuse them as the kernel does:
// iWARP (siw) with EOPNOTSUPP.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Access, WrOpcode, SendFlags, WcStatus, WcOpcode, WcFlags, QpState, QpType, TransportType, PostError, createId, PortSpace } from '../../dist/index.js';
import { reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, testDevices, impairmentOf, Cap, recvGrhOf } from '../lib/devices.js';

const SIG = SendFlags.SIGNALED;
const sg = (mr, off = 0, len = mr.length - off) => [{ addr: mr.addr + off, length: len, lkey: mr.lkey }];

/** The GID index of the loopback address (127.0.0.1, else ::1) of port 1. */
function loopbackGid(ctx) {
  const n = ctx.queryPort(1).gidTblLen;
  let v6 = -1;
  for (let i = 0; i < n; i++) {
    let g;
    try {
      g = ctx.queryGid(1, i);
    } catch {
      continue;
    }
    if (g[10] === 0xff && g[11] === 0xff && g[12] === 127 && g[15] === 1) return i;
    if (v6 < 0 && g.every((x, j) => (j === 15 ? x === 1 : x === 0))) v6 = i;
  }
  if (v6 >= 0) return v6;
  throw new Error('no loopback GID');
}

/**
 * Two UC QPs of one context connected to each other over loopback: `{ ctx, pd, a, b, cqA, cqB,
 * close }`. Path MTU 256 bytes (`pathMtu` 1), so messages of a few hundred bytes take several
 * packets.
 */
function ucPair(device, { depth = 64, access = Access.REMOTE_WRITE } = {}) {
  const ctx = device.open();
  const pd = ctx.allocPd();
  const cqA = ctx.createCq(depth * 2);
  const cqB = ctx.createCq(depth * 2);
  const cap = { maxSendWr: depth, maxRecvWr: depth, maxSendSge: 2, maxRecvSge: 2 };
  const a = pd.createQp({ qpType: QpType.UC, sendCq: cqA, recvCq: cqA, cap });
  const b = pd.createQp({ qpType: QpType.UC, sendCq: cqB, recvCq: cqB, cap });
  const sgid = loopbackGid(ctx);
  const ahAttr = { isGlobal: true, portNum: 1, grh: { dgid: ctx.queryGid(1, sgid), flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } };
  for (const [qp, peer, sq, rq] of [[a, b, 0x10, 0xfff0], [b, a, 0xfff0, 0x10]]) {
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: access });
    qp.modify({ qpState: QpState.RTR, ahAttr, pathMtu: 1, destQpNum: peer.qpNum, rqPsn: rq });
    qp.modify({ qpState: QpState.RTS, sqPsn: sq });
  }
  const mrs = [];
  /** `pd.regMr`, deregistered by `close()`. */
  const reg = (buf, access) => {
    const mr = pd.regMr(buf, access);
    mrs.push(mr);
    return mr;
  };
  const close = () => {
    a.destroy();
    b.destroy();
    for (const mr of mrs) mr.dereg();
    cqA.destroy();
    cqB.destroy();
    pd.dealloc();
  };
  return { ctx, pd, a, b, cqA, cqB, reg, close };
}

forEachDevice([Cap.UC], (d) => {
  test('UC: SEND and RDMA WRITE, with and without immediate data, across several packets', async () => {
    const { a, b, cqA, cqB, reg, close } = ucPair(d.device);
    const data = randomBytes(4096);
    const src = reg(Buffer.from(data), Access.LOCAL_WRITE);
    const dst = reg(Buffer.alloc(8192), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    for (let i = 0; i < 3; i++) b.postRecv({ wrId: 100 + i, sgList: sg(dst, i * 1024, 1024) });
    a.postSend([
      { wrId: 1, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: [...sg(src, 0, 300), ...sg(src, 1000, 400)] },
      { wrId: 2, opcode: WrOpcode.SEND_WITH_IMM, immData: 0x11223344, sendFlags: SIG, sgList: sg(src, 2000, 1000) },
      { wrId: 3, opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: sg(src, 0, 2500), rdma: { remoteAddr: dst.addr + 4096, rkey: dst.rkey } },
      { wrId: 4, opcode: WrOpcode.RDMA_WRITE_WITH_IMM, immData: 0x55667788, sendFlags: SIG, sgList: sg(src, 3000, 700), rdma: { remoteAddr: dst.addr + 7000, rkey: dst.rkey } },
    ]);
    const s = await reap(cqA, 4);
    assert.deepEqual(s.map((w) => [w.wrId, w.status, w.opcode]), [
      [1, WcStatus.SUCCESS, WcOpcode.SEND],
      [2, WcStatus.SUCCESS, WcOpcode.SEND],
      [3, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE],
      [4, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE],
    ]);
    const r = await reap(cqB, 3);
    assert.deepEqual(r.map((w) => [w.wrId, w.status, w.opcode, w.byteLen, w.wcFlags & WcFlags.WITH_IMM ? w.immData : null]), [
      [100, WcStatus.SUCCESS, WcOpcode.RECV, 700, null],
      [101, WcStatus.SUCCESS, WcOpcode.RECV, 1000, 0x11223344],
      [102, WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, 700, 0x55667788],
    ]);
    // UC runs over RoCE here: rxe's do_complete puts IBV_WC_GRH on every successful receive.
    if (recvGrhOf(d)) for (const w of r) assert.ok(w.wcFlags & WcFlags.GRH, `receive ${w.wrId} carries IBV_WC_GRH`);
    const got = Buffer.from(dst.buf);
    assert.ok(got.subarray(0, 700).equals(Buffer.concat([data.subarray(0, 300), data.subarray(1000, 1400)])));
    assert.ok(got.subarray(1024, 2024).equals(data.subarray(2000, 3000)));
    assert.ok(got.subarray(4096, 4096 + 2500).equals(data.subarray(0, 2500)));
    assert.ok(got.subarray(7000, 7700).equals(data.subarray(3000, 3700)));
    // The RDMA WRITE without immediate data took no receive WQE and completed nothing there.
    assert.deepEqual(cqB.poll(4), []);
    close();
  });

  test('UC: RDMA READ and the atomics are refused when posted (EINVAL), the WRs before them queued', async () => {
    const { a, cqA, reg, close } = ucPair(d.device);
    const m = reg(Buffer.alloc(64), Access.LOCAL_WRITE);
    const bad = [
      { opcode: WrOpcode.RDMA_READ, rdma: { remoteAddr: m.addr, rkey: m.rkey } },
      { opcode: WrOpcode.ATOMIC_CMP_AND_SWP, atomic: { remoteAddr: m.addr, rkey: m.rkey, compareAdd: 0n, swap: 1n } },
      { opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, atomic: { remoteAddr: m.addr, rkey: m.rkey, compareAdd: 1n } },
    ];
    for (const x of bad) {
      assert.throws(
        () => a.postSend([{ wrId: 'ok', opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg(m, 0, 8) }, { wrId: 'bad', sendFlags: SIG, sgList: sg(m, 0, 8), ...x }]),
        (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1,
        WrOpcode[x.opcode],
      );
    }
    const s = await reap(cqA, bad.length);
    assert.deepEqual(s.map((w) => [w.wrId, w.status]), bad.map(() => ['ok', WcStatus.SUCCESS]));
    close();
  });

  test('UC: the modify table has no RC-only attribute (max_dest_rd_atomic at RTR, timeout at RTS: EINVAL)', () => {
    const ctx = d.device.open();
    const pd = ctx.allocPd();
    const cq = ctx.createCq(2);
    const qp = pd.createQp({ qpType: QpType.UC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } });
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: 0 });
    const sgid = loopbackGid(ctx);
    const ahAttr = { isGlobal: true, portNum: 1, grh: { dgid: ctx.queryGid(1, sgid), flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } };
    const rtr = { qpState: QpState.RTR, ahAttr, pathMtu: 1, destQpNum: qp.qpNum, rqPsn: 0 };
    assert.throws(() => qp.modify({ ...rtr, maxDestRdAtomic: 1, minRnrTimer: 1 }), { code: 'EINVAL' });
    qp.modify(rtr);
    assert.throws(() => qp.modify({ qpState: QpState.RTS, sqPsn: 0, timeout: 14, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 1 }), { code: 'EINVAL' });
    qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
    assert.equal(qp.state, QpState.RTS);
    qp.destroy();
    cq.destroy();
    pd.dealloc();
  });
});

forEachDevice([Cap.UC, Cap.IMPAIR], (d) => {
  /**
   * Send `n` messages of `size` bytes through the device's impairment (`loss`, a fixed seed),
   * then one more with the impairment off, and collect what arrived: `{ sent, got, dropped }`
   * where `got` lists the sequence numbers received (the last message excluded).
   */
  async function lossyRun(size, n, loss, seed) {
    const imp = impairmentOf(d.device);
    const { a, b, cqA, cqB, reg, close } = ucPair(d.device, { depth: n + 1 });
    const src = reg(Buffer.alloc(size * (n + 1)), Access.LOCAL_WRITE);
    const dst = reg(Buffer.alloc(size * (n + 1)), Access.LOCAL_WRITE);
    const body = (i) => {
      const m = Buffer.alloc(size, (i * 37 + 11) & 0xff);
      m.writeUInt32BE(i, 0);
      m.writeUInt32BE(i, size - 4);
      return m;
    };
    for (let i = 0; i <= n; i++) {
      body(i).copy(src.buf, i * size);
      b.postRecv({ wrId: i, sgList: sg(dst, i * size, size) });
    }
    let dropped;
    try {
      imp.configure({ loss, seed });
      for (let i = 0; i < n; i++) a.postSend({ wrId: i, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg(src, i * size, size) });
      // Every WR completes successfully when sent, lost or not: UC reports nothing else.
      const s = await reap(cqA, n);
      assert.deepEqual(s.map((w) => [w.wrId, w.status]), Array.from({ length: n }, (_, i) => [i, WcStatus.SUCCESS]));
      dropped = imp.counts().dropped;
    } finally {
      imp.configure(null);
    }
    a.postSend({ wrId: n, opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg(src, n * size, size) });
    await reap(cqA, 1);
    // Messages arrive in order; the one sent without impairment is the last.
    const got = [];
    for (;;) {
      const [w] = await reap(cqB, 1);
      assert.equal(w.status, WcStatus.SUCCESS);
      assert.equal(w.byteLen, size);
      const m = Buffer.from(dst.buf.subarray(w.wrId * size, (w.wrId + 1) * size));
      const seq = m.readUInt32BE(0);
      assert.ok(m.equals(body(seq)), `message ${seq} arrived whole and unmixed`);
      if (seq === n) break;
      got.push(seq);
    }
    assert.equal(a.state, QpState.RTS);
    assert.equal(b.state, QpState.RTS);
    close();
    return { got, dropped };
  }

  test('UC over a lossy link: a lost packet loses exactly its message, without an error on the sender; later messages arrive', async () => {
    const n = 40;
    const { got, dropped } = await lossyRun(200, n, 0.25, 4242);
    assert.ok(dropped > 0, 'the seed drops some');
    assert.equal(got.length, n - dropped, 'one message lost per packet lost');
    for (let i = 1; i < got.length; i++) assert.ok(got[i] > got[i - 1]);
  });

  test('UC over a lossy link: a PSN gap inside a message drops that message whole; the next messages arrive', async () => {
    const n = 30;
    const per = 4; // 1000 bytes at a path MTU of 256
    const { got, dropped } = await lossyRun(1000, n, 0.08, 77);
    assert.ok(dropped > 0, 'the seed drops some');
    // Each lost packet costs its own message and no other: between n - dropped messages (one
    // lost packet per message) and n - ceil(dropped / per) (every packet of a message lost).
    assert.ok(got.length >= n - dropped && got.length <= n - Math.ceil(dropped / per), `${got.length} of ${n} arrived, ${dropped} packets lost`);
    assert.ok(got.length < n);
    for (let i = 1; i < got.length; i++) assert.ok(got[i] > got[i - 1]);
  });
});

forEachDevice([Cap.UC, Cap.CM_IB], (d) => {
  /** A UC id of RDMA_PS_IB (rdma_create_id2), or null when the device's CM refuses UC ids. */
  function ucId(t) {
    try {
      const id = createId(null, null, PortSpace.IB, { qpType: QpType.UC });
      id.bindAddr({ address: '127.0.0.1', port: 0 });
      return id;
    } catch (e) {
      if (e?.code !== 'EOPNOTSUPP') throw e;
      t.skip(`${d.name}: ${e.message}`);
      return null;
    }
  }

  /** Destroy `ids` (and their QPs) when the test ends, passed or not. */
  function releasing(t, ids) {
    t.after(async () => {
      for (const x of ids) {
        try {
          if (x.qp) x.destroyQp();
          await Promise.race([x.destroy(), new Promise((r) => setTimeout(r, 1000))]);
        } catch {
          // destroyed by the test
        }
      }
    });
    return ids;
  }

  test('rdma_cm: RDMA_PS_IB ids of type UC connect UC QPs (REQ transport type UC); SEND and WRITE flow', async (t) => {
    const listen = ucId(t);
    if (listen === null) return;
    const ids = releasing(t, [listen]);
    await listen.listen(1);
    const cap = { maxSendWr: 8, maxRecvWr: 8, maxSendSge: 1, maxRecvSge: 1 };
    const srv = (async () => {
      const child = await listen.getRequest();
      assert.equal(child.qpType, QpType.UC);
      child.createQp(null, { cap });
      await child.accept({});
      return child;
    })();
    const a = createId(null, null, PortSpace.IB, { qpType: QpType.UC });
    ids.unshift(a);
    await a.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
    await a.resolveRoute();
    a.createQp(null, { cap });
    assert.equal(a.qp.qpType, QpType.UC);
    await a.connect({});
    const b = await srv;
    ids.unshift(b);
    assert.equal(b.qp.qpType, QpType.UC);
    assert.equal(a.qp.state, QpState.RTS);
    assert.equal(b.qp.state, QpState.RTS);
    const src = a.pd.regMr(Buffer.from('uc over rdma_cm, the write part'), 0);
    const dst = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    b.qp.postRecv({ wrId: 1, sgList: sg(dst, 0, 32) });
    a.qp.postSend({ wrId: 'w', opcode: WrOpcode.RDMA_WRITE, sendFlags: SIG, sgList: sg(src, 16, 15), rdma: { remoteAddr: dst.addr + 40, rkey: dst.rkey } });
    a.qp.postSend({ wrId: 's', opcode: WrOpcode.SEND, sendFlags: SIG, sgList: sg(src, 0, 15) });
    const [r] = await reap(b.recvCq, 1);
    assert.deepEqual([r.wrId, r.status, r.byteLen], [1, WcStatus.SUCCESS, 15]);
    assert.equal(Buffer.from(dst.buf.subarray(0, 15)).toString(), 'uc over rdma_cm');
    assert.equal(Buffer.from(dst.buf.subarray(40, 55)).toString(), ' the write part');
    assert.deepEqual((await reap(a.sendCq, 2)).map((w) => [w.wrId, w.status]), [['w', WcStatus.SUCCESS], ['s', WcStatus.SUCCESS]]);
  });

  test('rdma_cm: a UC REQ to an RC listener of RDMA_PS_IB is rejected (cma_check_req_qp_type): REJECTED, ECONNREFUSED', async (t) => {
    const probe = ucId(t);
    if (probe === null) return;
    await probe.destroy();
    const listen = createId(null, null, PortSpace.IB);
    const a = createId(null, null, PortSpace.IB, { qpType: QpType.UC });
    releasing(t, [a, listen]);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(1);
    await a.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
    await a.resolveRoute();
    a.createQp(null, {});
    await assert.rejects(a.connect({}), { code: 'ECONNREFUSED' });
  });
});

forEachDevice([Cap.UC, Cap.CM_TCP], (d) => {
  test('rdma_cm: RDMA_PS_TCP ids are RC whatever QP they get: a UC QP fails its move to RTR (CONNECT_ERROR, EINVAL)', async (t) => {
    void d;
    const listen = createId(null, null, PortSpace.TCP);
    const a = createId(null, null, PortSpace.TCP);
    const ids = [a, listen];
    t.after(async () => {
      for (const x of ids) {
        try {
          if (x.qp) x.destroyQp();
          await Promise.race([x.destroy(), new Promise((r) => setTimeout(r, 1000))]);
        } catch {
          // destroyed already
        }
      }
    });
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(1);
    const srv = (async () => {
      const child = await listen.getRequest();
      child.createQp(null, {});
      await child.accept({}).catch(() => {});
      return child;
    })();
    await a.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
    await a.resolveRoute();
    a.createQp(null, { qpType: QpType.UC });
    await assert.rejects(a.connect({}), { code: 'EINVAL' });
    assert.equal(a.qp.state, QpState.ERR);
    ids.unshift(await srv);
  });
});

describe('UC on devices without it', () => {
  const without = testDevices().filter((d) => !d.caps.has(Cap.UC));
  for (const d of without) {
    test(`[${d.name}] ibv_create_qp(UC) is refused with EOPNOTSUPP${d.transportType === TransportType.IWARP ? ' (siw_create_qp: RC only)' : ''}`, () => {
      const ctx = d.device.open();
      const pd = ctx.allocPd();
      const cq = ctx.createCq(1);
      assert.throws(() => pd.createQp({ qpType: QpType.UC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } }), { code: 'EOPNOTSUPP' });
      cq.destroy();
      pd.dealloc();
    });
  }
  // Every iWARP device is among them: RFC 5040 has no unreliable connected service.
  test('no iWARP device makes UC QPs', () => {
    for (const d of testDevices()) if (d.transportType === TransportType.IWARP) assert.ok(!d.caps.has(Cap.UC), d.name);
  });
});
