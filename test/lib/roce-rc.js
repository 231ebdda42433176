// RC test helpers: two connected RC QPs on rxe_lo in this process, either over the device (the
// real receive path and sockets) or over a simulated link under a virtual clock: seeded loss,
// reordering and duplication, deterministic, every packet still going through the device's
// receive path (headers, ICRC, QP checks) of the other QP.
import { lib, loDevice, v4GidIndex, QpType, QpState, Access } from './roce.js';
import { prng } from './prng.js';

export const { WcStatus, WrOpcode, WcOpcode, WcFlags, SendFlags } = lib;

/** A small seeded PRNG (mulberry32): the same seed gives the same loss pattern. */
export { prng };

/** A virtual clock for the RC engines: timers run when the test advances time. */
export class VirtualClock {
  constructor() {
    this.t = 0;
    this.seq = 0;
    this.timers = [];
  }
  now() {
    return this.t;
  }
  after(ms, fn) {
    const tm = { at: this.t + ms, seq: this.seq++, fn, dead: false };
    this.timers.push(tm);
    return { cancel: () => (tm.dead = true) };
  }
  defer(fn) {
    return this.after(0, fn);
  }
  /** Run the next due timer (the earliest), moving time to it; false when none is pending. */
  step() {
    this.timers = this.timers.filter((x) => !x.dead);
    if (this.timers.length === 0) return false;
    this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
    const tm = this.timers.shift();
    if (tm.at > this.t) this.t = tm.at;
    tm.fn();
    return true;
  }
  /** Run timers until `done()` or nothing is pending or `limitMs` of virtual time passed. */
  run(done, limitMs = 600_000) {
    const end = this.t + limitMs;
    while (!done()) {
      this.timers = this.timers.filter((x) => !x.dead);
      if (this.timers.length === 0) return false;
      const next = Math.min(...this.timers.map((x) => x.at));
      if (next > end) return false;
      this.step();
    }
    return true;
  }
}

/**
 * A simulated link between two QPs: each packet may be lost, duplicated or delayed (reordered),
 * then handed to the receiver's device receive path after `delayMs`.
 */
export class SimLink {
  constructor(clock, { seed = 1, loss = 0, dup = 0, reorder = 0, delayMs = 0.05, jitterMs = 1 } = {}) {
    this.clock = clock;
    this.rand = prng(seed);
    this.loss = loss;
    this.dup = dup;
    this.reorder = reorder;
    this.delayMs = delayMs;
    this.jitterMs = jitterMs;
    this.sent = 0;
    this.dropped = 0;
    this.duplicated = 0;
    this.reordered = 0;
    /** Optional filter `(buf, fromQpn)`: return false to drop a packet (targeted loss). */
    this.filter = null;
    /** Every packet, in order of sending (for assertions): { from, buf }. */
    this.log = [];
    this.keepLog = false;
  }

  /** Carry the packets of `from` to the receive path of `to` (both RC QPs of rxe_lo). */
  attach(from, to) {
    from.link = (buf) => this.carry(from, to, Buffer.from(buf));
  }

  carry(from, to, buf) {
    this.sent++;
    if (this.keepLog) this.log.push({ from: from.qpNum, buf });
    if (this.filter && !this.filter(buf, from.qpNum)) {
      this.dropped++;
      return;
    }
    if (this.rand() < this.loss) {
      this.dropped++;
      return;
    }
    const copies = this.rand() < this.dup ? 2 : 1;
    if (copies === 2) this.duplicated++;
    for (let i = 0; i < copies; i++) {
      let d = this.delayMs;
      if (this.rand() < this.reorder) {
        d += this.rand() * this.jitterMs;
        this.reordered++;
      }
      this.clock.after(d, () => deliver(to, buf));
    }
  }
}

/** Hand a packet to the device receive path as the socket would (127.0.0.1 both ways). */
export function deliver(to, buf) {
  to.dev.rxDatagram(buf, { family: 4, src: '127.0.0.1', dst: '127.0.0.1', srcPort: to.dev.agent.port, forwarded: false });
}

/**
 * Two RC QPs connected to each other on rxe_lo: `{ ctx, pd, a, b, cqA, cqB }`. `opts.clock`
 * (a VirtualClock) and `opts.link` (a SimLink) replace time and the sockets. `opts.qpType`
 * `QpType.UC` makes a UC pair (moved with the attributes UC's modify table takes).
 */
export function wiredRcPair(opts = {}) {
  const dev = loDevice();
  const ctx = dev.open();
  const pd = ctx.allocPd();
  const cqA = ctx.createCq(4096);
  const cqB = ctx.createCq(4096);
  const cap = { maxSendWr: 1024, maxRecvWr: 1024, maxSendSge: 4, maxRecvSge: 4, maxInlineData: 64, ...(opts.cap ?? {}) };
  const qpType = opts.qpType ?? QpType.RC;
  const uc = qpType === QpType.UC;
  const a = pd.createQp({ qpType, sendCq: cqA, recvCq: cqA, cap });
  const b = pd.createQp({ qpType, sendCq: cqB, recvCq: cqB, cap });
  if (opts.clock) {
    a.clock = opts.clock;
    b.clock = opts.clock;
  }
  if (opts.link) {
    opts.link.attach(a, b);
    opts.link.attach(b, a);
  }
  const sgid = v4GidIndex(ctx);
  const gid = ctx.queryGid(1, sgid);
  const access = opts.access ?? (uc ? Access.REMOTE_WRITE : Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC);
  const psnA = opts.psnA ?? 0x100;
  const psnB = opts.psnB ?? 0xfffff0;
  const connect = (qp, peer, sq, rq) => {
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: access });
    if (uc) {
      qp.modify({
        qpState: QpState.RTR,
        ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: gid, flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } },
        pathMtu: opts.pathMtu ?? 1,
        destQpNum: peer.qpNum,
        rqPsn: rq,
      });
      qp.modify({ qpState: QpState.RTS, sqPsn: sq });
      return;
    }
    qp.modify({
      qpState: QpState.RTR,
      ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: gid, flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } },
      pathMtu: opts.pathMtu ?? 1,
      destQpNum: peer.qpNum,
      rqPsn: rq,
      maxDestRdAtomic: opts.ird ?? 4,
      minRnrTimer: opts.minRnrTimer ?? 1,
    });
    qp.modify({
      qpState: QpState.RTS,
      sqPsn: sq,
      timeout: opts.timeout ?? 14,
      retryCnt: opts.retryCnt ?? 7,
      rnrRetry: opts.rnrRetry ?? 7,
      maxRdAtomic: opts.ord ?? 4,
    });
  };
  connect(a, b, psnA, psnB);
  connect(b, a, psnB, psnA);
  live.push(a, b);
  return { ctx, pd, a, b, cqA, cqB };
}

const live = [];

/** Destroy every QP wiredRcPair made (the device's sockets then let the process end). */
export function destroyPairs() {
  for (const qp of live.splice(0)) {
    try {
      qp.destroy();
    } catch {
      // destroyed by the test
    }
  }
}

/** Poll `cq` until it is empty; returns the completions. */
export function drain(cq) {
  const out = [];
  for (let w = cq.poll(64); w.length > 0; w = cq.poll(64)) out.push(...w);
  return out;
}
