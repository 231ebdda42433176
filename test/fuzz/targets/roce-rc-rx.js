// RC packets into an RC QP of the soft RoCE device in RTS, through the device's receive path
// (rxeReceive: header checks, QP checks, ICRC, then the responder or the completer): requests of
// every kind near and far from the expected PSN (SEND first/middle/last/only, WRITE, READ,
// atomics, with good and bad rkeys, addresses and lengths) and responses near the PSNs the QP's
// own outstanding requests carry (ACK, NAKs, READ responses, atomic ACKs), whole or mutated, from
// the connected peer's address. A third of the cases go to a UC QP of the same device instead:
// UC SENDs and WRITEs in every position of a message, near and far from its expected PSN (and RC
// opcodes, which it drops). The QPs' packets go to captures instead of the sockets and their
// timers run on a virtual clock.
//
// A fifth of the RC requests come as trains (src/transport/roce/train.ts) from the host path
// instead: a SEND or WRITE FIRST or MIDDLE (now and then a LAST or ONLY) whose payload is 2 ..
// 15 segments (mostly of the path MTU), AckReq and SE mostly clear, ICRC left uncomputed, whole or
// mutated, flagged as a train of that many segments.
//
// Requests also name a memory window (type 1, on the middle quarter of a region registered with no
// remote right of its own) by its rkey, at addresses in and around it.
//
// Invariants: nothing throws; every datagram is counted once (`rcvd_pkts` or one `rcvd_*_drop`),
// a train once if it is dropped whole and once per segment if its segments reach the QP;
// no byte outside the region registered for remote access changes, nor a byte of a region
// registered without it, nor a byte of the windowed region outside the window; everything the QP
// sends decodes; the UC QP sends nothing back; every work request completes at most once; a QP
// that went to ERR is taken back to RTS (RESET → INIT → RTR → RTS) and works again.
// roce-rc-rx-srq.js runs the same with the RC QP's receives on a shared receive queue.
import assert from 'node:assert/strict';
import { getDeviceList, QpType, QpState, Access, WrOpcode, SendFlags, MwType, WcStatus } from '../../../dist/index.js';
import { roceDevice } from '../../../dist/transport/roce/device.js';
import { rxeReceive } from '../../../dist/transport/roce/recv.js';
import { IbOpcode, AethSyndrome, encodeRocePacket, decodeRocePacket } from '../../../dist/wire/roce/index.js';
import { mutate, hexHead } from '../lib/mutate.js';
import { TRAIN_MAX, TRAIN_MIN } from '../../../dist/transport/roce/train.js';

const PORT = Number(process.env.RDMACM_ROCE_PORT ?? 4791);
const PEER = '127.0.0.2';
const PEER_QPN = 0x4242;
const MTU = 256;
const MR_ALL = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC;
const GUARD = 0xee;
const O = IbOpcode;
const REQUESTS = [
  O.RC_SEND_ONLY,
  O.RC_SEND_ONLY_WITH_IMMEDIATE,
  O.RC_SEND_ONLY_WITH_INVALIDATE,
  O.RC_SEND_FIRST,
  O.RC_SEND_MIDDLE,
  O.RC_SEND_LAST,
  O.RC_SEND_LAST_WITH_IMMEDIATE,
  O.RC_RDMA_WRITE_ONLY,
  O.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
  O.RC_RDMA_WRITE_FIRST,
  O.RC_RDMA_WRITE_MIDDLE,
  O.RC_RDMA_WRITE_LAST,
  O.RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
  O.RC_RDMA_READ_REQUEST,
  O.RC_COMPARE_SWAP,
  O.RC_FETCH_ADD,
];
/** Every UC request opcode (0x20-0x2B). */
const UC_REQUESTS = Array.from({ length: 12 }, (_, i) => 0x20 + i);
/** The opcodes a train starts with (train.ts). */
const TRAIN_STARTS = [O.RC_SEND_FIRST, O.RC_SEND_MIDDLE, O.RC_RDMA_WRITE_FIRST, O.RC_RDMA_WRITE_MIDDLE];
const RESPONSES = [O.RC_ACKNOWLEDGE, O.RC_ATOMIC_ACKNOWLEDGE, O.RC_RDMA_READ_RESPONSE_FIRST, O.RC_RDMA_READ_RESPONSE_MIDDLE, O.RC_RDMA_READ_RESPONSE_LAST, O.RC_RDMA_READ_RESPONSE_ONLY];
const SYNDROMES = [AethSyndrome.ACK_UNLIMITED, 0x00, AethSyndrome.RNR_NAK | 1, AethSyndrome.NAK_PSN_SEQ_ERROR, AethSyndrome.NAK_INVALID_REQUEST, AethSyndrome.NAK_REMOTE_ACCESS_ERROR, AethSyndrome.NAK_REMOTE_OP_ERROR, 0x64, 0x40];

/** A virtual clock: timers run only when the target advances it. */
class Clock {
  constructor() {
    this.t = 0;
    this.seq = 0;
    this.timers = [];
  }
  now() {
    return this.t;
  }
  after(ms, fn) {
    const tm = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, dead: false };
    this.timers.push(tm);
    return { cancel: () => (tm.dead = true) };
  }
  defer(fn) {
    return this.after(0, fn);
  }
  /** Advance by `ms`, running every timer due (bounded: a timer may arm another). */
  advance(ms) {
    const end = this.t + ms;
    for (let n = 0; n < 10000; n++) {
      this.timers = this.timers.filter((x) => !x.dead);
      let best = null;
      for (const x of this.timers) if (x.at <= end && (best === null || x.at < best.at || (x.at === best.at && x.seq < best.seq))) best = x;
      if (best === null) break;
      this.timers.splice(this.timers.indexOf(best), 1);
      if (best.at > this.t) this.t = best.at;
      best.fn();
    }
    this.t = end;
  }
}

function counted(c) {
  let n = c.rcvd_pkts;
  for (const [k, v] of Object.entries(c)) if (k.startsWith('rcvd_') && k.endsWith('_drop')) n += v;
  return n;
}

/** RESET → INIT → RTR → RTS towards the peer; receives posted again. */
function connect(ctx) {
  const { qp } = ctx;
  if (qp.state !== QpState.RESET) qp.modify({ qpState: QpState.RESET });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC });
  qp.modify({
    qpState: QpState.RTR,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: ctx.dgid, flowLabel: 0, sgidIndex: ctx.sgid, hopLimit: 64, trafficClass: 0 } },
    pathMtu: 1,
    destQpNum: PEER_QPN,
    rqPsn: 0xfffff0,
    maxDestRdAtomic: 4,
    minRnrTimer: 1,
  });
  qp.modify({ qpState: QpState.RTS, sqPsn: 0xfffffa, timeout: 14, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 4 });
  ctx.outstanding = 0;
  // The QP's own receive queue is empty now; an SRQ keeps what no QP took.
  ctx.recvs = ctx.srq ? ctx.srq.depth : 0;
  ctx.sqPsn = 0xfffffa;
}

/** The UC QP: RESET → INIT → RTR → RTS towards the peer with UC's attributes; receives posted again. */
function connectUc(ctx) {
  const u = ctx.uc;
  if (u.qp.state !== QpState.RESET) u.qp.modify({ qpState: QpState.RESET });
  u.qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.REMOTE_WRITE });
  u.qp.modify({
    qpState: QpState.RTR,
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: ctx.dgid, flowLabel: 0, sgidIndex: ctx.sgid, hopLimit: 64, trafficClass: 0 } },
    pathMtu: 1,
    destQpNum: PEER_QPN,
    rqPsn: 0x800,
  });
  u.qp.modify({ qpState: QpState.RTS, sqPsn: 0x40 });
  u.recvs = 0;
}

/**
 * The target; `onSrq`: the QP takes its receives from a shared receive queue (which a QP in ERR
 * does not flush: only the receive it was filling completes).
 */
export function rcRxTarget(onSrq) {
  return {
  name: onSrq ? 'roce-rc-rx-srq' : 'roce-rc-rx',
  about: `RC requests and responses into an RC QP${onSrq ? ' on an SRQ' : ''} in RTS through the device receive path, whole and mutated`,
  budgetMs: 600,
  async setup() {
    const dev = getDeviceList().find((d) => d.name === 'rxe_lo');
    const c = dev.open();
    const pd = c.allocPd();
    const cq = c.createCq(8192);
    const srq = onSrq ? pd.createSrq({ attr: { maxWr: 64, maxSge: 2 } }) : null;
    const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, ...(srq ? { srq } : {}), cap: { maxSendWr: 64, maxRecvWr: 64, maxSendSge: 2, maxRecvSge: 2 } });
    const clock = new Clock();
    qp.clock = clock;
    const out = [];
    qp.link = (pkt) => out.push(Buffer.from(pkt));
    // The remote region in the middle of a guarded buffer; a second region without remote rights.
    const whole = Buffer.alloc(4096 + 2 * 256, GUARD);
    const region = whole.subarray(256, 256 + 4096);
    const mr = pd.regMr(region, MR_ALL);
    const closed = Buffer.alloc(512, 0x77);
    const mrClosed = pd.regMr(closed, Access.LOCAL_WRITE);
    // Local buffers for receives and for the QP's own requests.
    const local = Buffer.alloc(8192);
    const ml = pd.regMr(local, Access.LOCAL_WRITE);
    // A region reachable only through a window on [256, 512) of it.
    const winBuf = Buffer.alloc(1024, 0x55);
    const mrWin = pd.regMr(winBuf, Access.LOCAL_WRITE | Access.MW_BIND);
    const mw = pd.allocMw(MwType.TYPE_1);
    let sgid = 0;
    for (let i = 0; i < 8; i++) {
      const g = c.queryGid(1, i);
      if (g[10] === 0xff && g[11] === 0xff && g[12] === 127) {
        sgid = i;
        break;
      }
    }
    const dgid = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2]);
    const ctx = { rd: roceDevice('rxe_lo'), pd, cq, qp, srq, clock, out, whole, region, mr, closed, mrClosed, local, ml, winBuf, mrWin, mw, sgid, dgid, wrId: 1, done: new Set(), recvIds: new Set(), outstanding: 0, recvs: 0, sqPsn: 0 };
    connect(ctx);
    // Unsignaled and carried out at once (nothing is outstanding yet): no completion.
    qp.bindMw(mw, { wrId: 0, bindInfo: { mr: mrWin, addr: mrWin.addr + 256, length: 256, mwAccessFlags: Access.REMOTE_WRITE | Access.REMOTE_READ } });
    const ucCq = c.createCq(4096);
    const ucQp = pd.createQp({ qpType: QpType.UC, sendCq: ucCq, recvCq: ucCq, cap: { maxSendWr: 16, maxRecvWr: 16, maxSendSge: 2, maxRecvSge: 2 } });
    ucQp.clock = clock;
    const ucOut = [];
    ucQp.link = (pkt) => ucOut.push(Buffer.from(pkt));
    ctx.uc = { qp: ucQp, cq: ucCq, out: ucOut, recvs: 0, recvIds: new Set(), recvBuf: Buffer.alloc(4 * 700), done: new Set() };
    ctx.uc.mrRecv = pd.regMr(ctx.uc.recvBuf, Access.LOCAL_WRITE);
    connectUc(ctx);
    return ctx;
  },
  async teardown(ctx) {
    ctx.qp.destroy();
    ctx.uc.qp.destroy();
    ctx.srq?.destroy();
  },
  run(rng, t, ctx) {
    const { rd, qp, cq, clock, out, mr, ml } = ctx;
    if (qp.state !== QpState.RTS) {
      clock.advance(1);
      for (let w = cq.poll(64); w.length > 0; w = cq.poll(64)) for (const x of w) seen(ctx, x);
      connect(ctx);
      t.count('reconnected');
    }
    // Keep receives posted and a few requests of the QP's own outstanding.
    while (ctx.recvs < 8) {
      ctx.recvIds.add(ctx.wrId);
      (ctx.srq ?? qp).postRecv({ wrId: ctx.wrId++, sgList: [{ addr: ml.addr + 512 * (ctx.recvs % 8), length: 512, lkey: ml.lkey }] });
      ctx.recvs++;
    }
    while (ctx.outstanding < 3) {
      const k = rng.int(3);
      const sge = [{ addr: ml.addr + 4096 + 512 * rng.int(4), length: k === 2 ? 8 : 1 + rng.int(400), lkey: ml.lkey }];
      const wr =
        k === 0
          ? { opcode: WrOpcode.SEND, sgList: sge }
          : k === 1
            ? { opcode: WrOpcode.RDMA_READ, sgList: sge, rdma: { remoteAddr: 0x1000 + rng.int(4096), rkey: 0x1234 } }
            : { opcode: WrOpcode.ATOMIC_FETCH_AND_ADD, sgList: sge, atomic: { remoteAddr: 0x1000, rkey: 0x1234, compareAdd: 1n } };
      qp.postSend({ wrId: ctx.wrId++, sendFlags: SendFlags.SIGNALED, ...wr });
      ctx.outstanding++;
    }
    out.length = 0;
    // One packet from the peer, to the RC QP or (a third of the time) to the UC QP.
    const u = ctx.uc;
    const toUc = rng.chance(0.33);
    if (toUc) ucPrepare(ctx, rng, t);
    const isReq = toUc || rng.chance(0.65);
    const opcode = toUc ? (rng.chance(0.9) ? rng.pick(UC_REQUESTS) : rng.pick(REQUESTS)) : isReq ? rng.pick(REQUESTS) : rng.pick(RESPONSES);
    // The RC opcode of the same operation decides the headers (UC's are RC's | 0x20).
    const rcOp = (opcode & 0xe0) === 0x20 ? opcode & 0x1f : opcode;
    const target = toUc ? u.qp : qp;
    const epsn = target.resp.epsn;
    const near = (base) => (base + (rng.chance(0.6) ? 0 : rng.chance(0.8) ? rng.int(9) - 4 : rng.int(1 << 24))) & 0xffffff;
    const psn = isReq ? near(epsn) : near(qp.comp.psn);
    const va = () => (rng.chance(0.15) ? ctx.mrWin.addr + 236 + rng.int(300) : rng.chance(0.7) ? mr.addr + (rng.chance(0.8) ? 8 * rng.int(512) : rng.int(4200) - 50) : rng.chance(0.5) ? ctx.mrClosed.addr : rng.u32());
    const rkey = () => (rng.chance(0.15) ? ctx.mw.rkey : rng.chance(0.75) ? mr.rkey : rng.chance(0.5) ? ctx.mrClosed.rkey : rng.u32());
    // Sometimes the packet's own payload length, so that a WRITE ONLY can be whole.
    const len = () => (rng.chance(0.25) ? payloadLen : rng.chance(0.7) ? rng.int(600) : rng.u32());
    const payloadLen = rng.chance(0.6) ? rng.pick([0, 1, MTU, MTU - 1, MTU + 1]) : rng.int(MTU + 64);
    const spec = { opcode, destQp: target.qpNum, psn, ackReq: rng.chance(0.7), se: rng.chance(0.2), payload: Buffer.alloc(payloadLen, 0x33) };
    if (opcode === O.RC_RDMA_READ_REQUEST) spec.payload = Buffer.alloc(0);
    if ([O.RC_RDMA_WRITE_ONLY, O.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, O.RC_RDMA_WRITE_FIRST, O.RC_RDMA_READ_REQUEST].includes(rcOp)) spec.reth = { va: va(), rkey: rkey(), len: len() };
    if (opcode === O.RC_COMPARE_SWAP || opcode === O.RC_FETCH_ADD) {
      spec.atmeth = { va: va(), rkey: rkey(), swapAdd: BigInt(rng.u32()), compare: BigInt(rng.u32()) };
      spec.payload = Buffer.alloc(0);
    }
    if ([O.RC_SEND_ONLY_WITH_IMMEDIATE, O.RC_SEND_LAST_WITH_IMMEDIATE, O.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, O.RC_RDMA_WRITE_LAST_WITH_IMMEDIATE].includes(rcOp)) spec.immDt = rng.u32();
    if (opcode === O.RC_SEND_ONLY_WITH_INVALIDATE) spec.ieth = rkey();
    if (!isReq) {
      spec.aeth = { syndrome: rng.pick(SYNDROMES), msn: rng.int(1 << 24) };
      spec.ackReq = false;
      if (opcode === O.RC_ATOMIC_ACKNOWLEDGE) {
        spec.atmack = BigInt(rng.u32());
        spec.payload = Buffer.alloc(0);
      }
      if (opcode === O.RC_ACKNOWLEDGE) spec.payload = Buffer.alloc(0);
      if (opcode === O.RC_RDMA_READ_RESPONSE_MIDDLE) delete spec.aeth;
    }
    const sport = 49152 + rng.int(16384);
    // A train of the host path: the segments' payload after the first packet's headers.
    const train = !toUc && isReq && rng.chance(0.2) ? TRAIN_MIN + rng.int(TRAIN_MAX - TRAIN_MIN + 1) : 0;
    if (train > 0) {
      // Mostly an opcode that may start a train, now and then a payload-carrying one that may not.
      spec.opcode = rng.chance(0.85) ? rng.pick(TRAIN_STARTS) : rng.pick([O.RC_SEND_LAST, O.RC_SEND_ONLY, O.RC_RDMA_WRITE_LAST]);
      for (const k of ['immDt', 'ieth', 'atmeth', 'reth']) delete spec[k];
      if (spec.opcode === O.RC_RDMA_WRITE_FIRST) spec.reth = { va: va(), rkey: rkey(), len: rng.chance(0.5) ? (train + 1) * MTU : len() };
      spec.payload = Buffer.alloc(train * (rng.chance(0.85) ? MTU : rng.pick([100, 2 * MTU, MTU + 4])), 0x44);
      spec.ackReq = rng.chance(0.1);
      spec.se = rng.chance(0.05);
    }
    let valid;
    try {
      valid = Buffer.from(encodeRocePacket(spec, { family: 4, src: Uint8Array.of(127, 0, 0, 2), dst: Uint8Array.of(127, 0, 0, 1), sport, dport: PORT, ipId: rng.int(65536) }));
    } catch (e) {
      throw new Error(`encoder refused a spec the target built: ${e.message}`);
    }
    if (train > 0) valid.fill(0, valid.length - 4);
    const whole = rng.chance(0.5);
    const { bytes, ops } = whole ? { bytes: valid, ops: ['none'] } : mutate(rng, valid, { fields: [{ off: 0, size: 1 }, { off: 4, size: 4 }, { off: 8, size: 4 }, { off: 12, size: 4 }, { off: 16, size: 4 }] });
    t.note(`${toUc ? 'UC' : 'RC'} QP${train > 0 ? ` train of ${train}` : ''}: op 0x${spec.opcode.toString(16)} psn 0x${psn.toString(16)} (epsn 0x${epsn.toString(16)}) ${ops.join(' ')}: ${hexHead(bytes)}`);
    u.out.length = 0;
    const guardsBefore = ctx.closed.every((x) => x === 0x77);
    assert.ok(guardsBefore);
    const before = ctx.rd.counters.snapshot();
    const windowBefore = Buffer.from(ctx.winBuf.subarray(256, 512));
    const meta = { family: 4, src: PEER, dst: '127.0.0.1', srcPort: sport, forwarded: train > 0, icrcOffload: train > 0, train };
    rxeReceive(rd, Buffer.from(bytes), meta);
    clock.advance(rng.chance(0.1) ? 2000 : 0);
    const after = ctx.rd.counters.snapshot();
    const n = counted(after) - counted(before);
    if (train > 0) {
      assert.ok(n === 1 || n === train, `a train of ${train} counted ${n} times`);
      t.count(n === train ? 'train taken' : 'train dropped');
    } else assert.equal(n, 1, 'one counter per datagram');
    assert.ok(ctx.whole.subarray(0, 256).every((x) => x === GUARD) && ctx.whole.subarray(256 + 4096).every((x) => x === GUARD), 'a byte outside the remote region changed');
    assert.ok(ctx.closed.every((x) => x === 0x77), 'a region without remote access changed');
    assert.ok(ctx.winBuf.subarray(0, 256).every((x) => x === 0x55) && ctx.winBuf.subarray(512).every((x) => x === 0x55), 'a byte outside the memory window changed');
    if (!windowBefore.equals(ctx.winBuf.subarray(256, 512))) t.count('written through the window');
    for (const pkt of out) {
      const d = decodeRocePacket(pkt);
      assert.ok(d.ok, `the QP sent a packet that does not decode: ${hexHead(pkt)}`);
      assert.equal(d.spec.destQp, PEER_QPN);
    }
    for (let w = cq.poll(64); w.length > 0; w = cq.poll(64)) for (const x of w) seen(ctx, x);
    assert.equal(u.out.length, 0, 'the UC QP answered a packet');
    const ucGot = ucReap(u);
    if (ucGot > 0) t.count('UC message received', ucGot);
    if (after.rcvd_pkts > before.rcvd_pkts) t.count(toUc ? 'UC request taken' : isReq ? 'request taken' : 'response taken');
    else t.count('dropped');
    if (out.some((p) => decodeRocePacket(p).spec?.aeth && (decodeRocePacket(p).spec.aeth.syndrome & 0xe0) === 0x60)) t.count('NAK sent');
  },
  check(counts, cases) {
    if (cases < 1000) return;
    for (const k of ['request taken', 'response taken', 'dropped', 'NAK sent', 'reconnected', 'UC request taken', 'UC message received', 'train taken', 'train dropped']) {
      assert.ok(counts[k] > 0, `no case ended in ${k}: ${JSON.stringify(counts)}`);
    }
  },
  };
}

export default rcRxTarget(false);

/** A completion: its WR must not have completed before. */
function seen(ctx, w) {
  assert.ok(!ctx.done.has(w.wrId), `work request ${w.wrId} completed twice`);
  ctx.done.add(w.wrId);
  if (ctx.recvIds.delete(w.wrId)) ctx.recvs--;
  else ctx.outstanding--;
}

/** The UC QP before a case: back to RTS if a case failed it, receives posted, now and then a send of its own. */
function ucPrepare(ctx, rng, t) {
  const u = ctx.uc;
  if (u.qp.state !== QpState.RTS) {
    ucReap(u);
    connectUc(ctx);
    t.count('UC reconnected');
  }
  while (u.recvs < 4) {
    u.recvIds.add(ctx.wrId);
    u.qp.postRecv({ wrId: ctx.wrId++, sgList: [{ addr: u.mrRecv.addr + 700 * (u.recvs % 4), length: 700, lkey: u.mrRecv.lkey }] });
    u.recvs++;
  }
  if (rng.chance(0.1)) {
    u.out.length = 0;
    const sge = [{ addr: ctx.ml.addr + rng.int(4096), length: rng.int(700), lkey: ctx.ml.lkey }];
    const write = rng.chance(0.5);
    u.qp.postSend({ wrId: ctx.wrId++, sendFlags: SendFlags.SIGNALED, opcode: write ? WrOpcode.RDMA_WRITE : WrOpcode.SEND, sgList: sge, ...(write ? { rdma: { remoteAddr: rng.u32(), rkey: rng.u32() } } : {}) });
    ctx.clock.advance(0);
    for (const pkt of u.out) {
      const d = decodeRocePacket(pkt);
      assert.ok(d.ok && (d.spec.opcode & 0xe0) === 0x20 && d.spec.destQp === PEER_QPN, `the UC QP sent ${hexHead(pkt)}`);
    }
  }
}

/** The UC QP's completions: each work request at most once. Returns the receives that succeeded. */
function ucReap(u) {
  let got = 0;
  for (let w = u.cq.poll(64); w.length > 0; w = u.cq.poll(64)) {
    for (const x of w) {
      assert.ok(!u.done.has(x.wrId), `UC work request ${x.wrId} completed twice`);
      u.done.add(x.wrId);
      if (u.recvIds.delete(x.wrId)) {
        u.recvs--;
        if (x.status === WcStatus.SUCCESS) got++;
      }
    }
  }
  return got;
}
