/**
 * perftest's measured loops (perftest_resources.c `run_iter_bw`, `run_iter_bw_server`,
 * `run_iter_lat_send`, `run_iter_lat_write`, `run_iter_lat`), each recording the time of every
 * post (`tposted`) and of the moderated completions (`tcompleted`) on this port's clock. The C
 * loops spin on the CQ; ours poll it and give the event loop a turn when it is empty (a soft
 * device runs on it) for {@link SPIN_TURNS} turns, then wait on the CQ's completion channel: two
 * processes spinning for ever starve each other's soft device on a busy machine (their peers'
 * retransmissions run out: retry exceeded). A loop gives up after {@link STALL_MS} without
 * progress, where perftest would spin for ever.
 */
import { SendFlags, WcStatus, WrOpcode, type CompChannel, type Qp, type SendWr, type Wc, type Cq } from '../api.js';
import { errOut } from '../c-compat.js';
import type { Credits } from './credit.js';
import type { PerfDest } from './exchange.js';
import { Verb, type PerfParams } from './params.js';
import { DEF_QKEY, UD_ADDITION, type Resources } from './resources.js';

/** How long a loop waits without any completion or arrival before it fails. */
export const STALL_MS = 20_000;

const base = process.hrtime.bigint();
/** `get_cycles()`: nanoseconds of a monotonic clock since the module loaded. */
export const cycles = (): number => Number(process.hrtime.bigint() - base);

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Empty polls, each after a turn of the event loop, before a loop waits on the completion channel. */
export const SPIN_TURNS = 64;
/** The longest wait on a channel before the loop looks at its clocks again (ms). */
const WAIT_SLICE_MS = 50;

/** One event of `ch`, or none within `ms` (the read is cancelled then). True when one came. */
async function eventWithin(ch: CompChannel, ms: number): Promise<boolean> {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(), ms);
  try {
    const cq = await ch.getCqEvent(ac.signal);
    cq.ackEvents(1);
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(t);
  }
}

/**
 * The next completions of `cq` (up to `max`): poll, spinning {@link SPIN_TURNS} turns, then arm
 * the CQ, poll again and wait on its channel. `until`: stop waiting (an empty result) once true.
 */
async function nextWcs(cq: Cq, ch: CompChannel, max: number, stall: Stall, what: string, until?: () => boolean): Promise<Wc[]> {
  for (let spin = 0; ; spin++) {
    const w = cq.poll(max);
    if (w.length > 0) {
      stall.progress();
      return w;
    }
    if (until?.()) return [];
    stall.check(what);
    if (spin < SPIN_TURNS) {
      await turn();
      continue;
    }
    cq.reqNotify();
    const again = cq.poll(max);
    if (again.length > 0) {
      stall.progress();
      return again;
    }
    await eventWithin(ch, WAIT_SLICE_MS);
  }
}

/** Wait for a byte of memory a peer writes: spin, then look again every millisecond or so. */
async function memoryTurn(spin: number): Promise<void> {
  if (spin < SPIN_TURNS) await turn();
  else await new Promise((r) => setTimeout(r, 0));
}

/** A stall watch: `progress()` on every event, `check()` throws once nothing happened for too long. */
class Stall {
  private last = Date.now();
  progress(): void {
    this.last = Date.now();
  }
  check(what: string): void {
    if (Date.now() - this.last > STALL_MS) throw new LoopError(` ${what}: nothing completed for ${STALL_MS / 1000} s\n`);
  }
}

/**
 * `-D`: perftest's duration states (`catch_alarm`): a margin of a quarter of the duration, then
 * the sample (its start and end times kept), then the margin again, then the end. Only what
 * happens during the sample counts.
 */
export class DurationClock {
  state: 'start' | 'sample' | 'stop' | 'end' = 'start';
  t0 = 0;
  t1 = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly margin: number;

  constructor(private readonly seconds: number) {
    this.margin = Math.floor(seconds / 4);
    if (this.margin > 0) this.after(this.margin);
    else this.next();
  }

  private after(s: number): void {
    this.timer = setTimeout(() => this.next(), s * 1000);
  }

  private next(): void {
    if (this.state === 'start') {
      this.state = 'sample';
      this.t0 = cycles();
      this.after(this.seconds - 2 * this.margin);
    } else if (this.state === 'sample') {
      this.state = 'stop';
      this.t1 = cycles();
      if (this.margin > 0) this.after(this.margin);
      else this.next();
    } else this.state = 'end';
  }

  get ended(): boolean {
    return this.state === 'end';
  }

  get sampling(): boolean {
    return this.state === 'sample';
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

/** A loop's failure, with perftest's lines for it. */
export class LoopError extends Error {
  constructor(readonly lines: string) {
    super(lines.trim());
    this.name = 'LoopError';
  }
}

const sendError = (wc: Wc, scnt: number, ccnt: number): LoopError =>
  new LoopError(` Completion with error at client\n Failed status ${wc.status}: wr_id ${Number(wc.wrId)} syndrom 0x${wc.vendorErr.toString(16)}\nscnt=${scnt}, ccnt=${ccnt}\n`);
const recvError = (wc: Wc, rcnt: number): LoopError =>
  new LoopError(` Completion with error at server\n Failed status ${wc.status}: wr_id ${Number(wc.wrId)} syndrom 0x${wc.vendorErr.toString(16)}\n rcnt=${rcnt}\n`);

/** `post_send_method`, failing as perftest reports it. */
function post(qp: Qp, wr: SendWr, line: () => string): void {
  try {
    qp.postSend(wr);
  } catch {
    throw new LoopError(line());
  }
}

const OPCODES = { [Verb.SEND]: WrOpcode.SEND, [Verb.WRITE]: WrOpcode.RDMA_WRITE, [Verb.READ]: WrOpcode.RDMA_READ } as const;

/** `ctx_set_send_wqes`: QP `q`'s work request for messages of `size`, signaled or not. */
export function sendWr(p: PerfParams, r: Resources, q: number, rem: PerfDest, size: number, signaled: boolean): SendWr {
  const inline = size <= r.inlineSize && p.verb !== Verb.READ && p.verb !== Verb.ATOMIC ? SendFlags.INLINE : 0;
  const flags = (signaled ? SendFlags.SIGNALED : 0) | inline;
  const local = { addr: r.mr.addr + q * r.half, length: size, lkey: r.mr.lkey };
  if (p.verb === Verb.ATOMIC) {
    const remoteAddr = Number(rem.vaddr);
    return {
      wrId: q,
      opcode: p.atomicType === 0 ? WrOpcode.ATOMIC_CMP_AND_SWP : WrOpcode.ATOMIC_FETCH_AND_ADD,
      sgList: [{ ...local, length: 8 }],
      sendFlags: flags,
      atomic: p.atomicType === 0 ? { remoteAddr, rkey: rem.rkey, compareAdd: 0n, swap: 0n } : { remoteAddr, rkey: rem.rkey, compareAdd: 1n },
    };
  }
  const wr: SendWr = { wrId: q, opcode: OPCODES[p.verb], sgList: [local], sendFlags: flags };
  if (p.verb !== Verb.SEND) wr.rdma = { remoteAddr: Number(rem.vaddr), rkey: rem.rkey };
  else if (p.conn === 'UD') {
    // With -R the CM's QP number and Q_Key (ctx_set_send_reg_wqes: cma_master.nodes[q]).
    const peer = r.udPeers[q] ?? { qpn: rem.qpn, qkey: DEF_QKEY };
    wr.ud = { ah: r.ahs[q]!, remoteQpn: peer.qpn, remoteQkey: peer.qkey };
  }
  return wr;
}

/** `ctx_set_recv_wqes`: `n` receives on each QP, into its receive half. */
export function postRecvs(p: PerfParams, r: Resources, size: number, n: number): void {
  const len = size + (p.conn === 'UD' ? UD_ADDITION : 0);
  for (let q = 0; q < r.qps.length; q++) {
    const wr = { wrId: q, sgList: [{ addr: r.mr.addr + (p.numQps + q) * r.half, length: len, lkey: r.mr.lkey }] };
    for (let i = 0; i < n; i++) (r.qps[q] as Qp).postRecv(wr);
  }
}

/** Times of a bandwidth run. */
export interface BwTimes {
  tposted: Float64Array;
  tcompleted: Float64Array;
  n: number;
}

/**
 * `run_iter_bw`: keep up to `-t` work requests outstanding on each QP, every `-Q`th (and the
 * last) signaled; a completion stands for the `-Q` before it. With `credits` (SEND over iWARP)
 * also fewer than `-r` messages beyond the receiver's last count; the loop then waits for
 * completions or for the count to move.
 */
export async function runIterBw(p: PerfParams, r: Resources, rem: PerfDest[], size: number, credits: Credits | null = null): Promise<BwTimes> {
  if (p.duration > 0) return runIterBwDuration(p, r, rem, size, credits);
  const nq = r.qps.length;
  const total = p.iters * nq;
  const tposted = new Float64Array(total);
  const tcompleted = new Float64Array(total);
  const plain = rem.map((d, q) => sendWr(p, r, q, d, size, false));
  const signaled = rem.map((d, q) => sendWr(p, r, q, d, size, true));
  const scnt = new Array<number>(nq).fill(0);
  const ccnt = new Array<number>(nq).fill(0);
  let totscnt = 0;
  let totccnt = 0;
  const stall = new Stall();
  const may = (q: number): boolean => scnt[q]! < p.iters && scnt[q]! - ccnt[q]! < p.txDepth && (credits === null || credits.open(q, scnt[q]!, p.rxDepth));
  const credited = credits === null ? undefined : (): boolean => scnt.some((_, q) => may(q));
  while (totscnt < total || totccnt < total) {
    for (let q = 0; q < nq; q++) {
      const qp = r.qps[q] as Qp;
      while (may(q)) {
        const next = scnt[q]! + 1;
        const sig = next % p.cqMod === 0 || next === p.iters;
        tposted[totscnt] = cycles();
        post(qp, sig ? signaled[q]! : plain[q]!, () => `Couldn't post send: qp ${q} scnt=${scnt[q]} \n Failed to complete run_iter_bw function successfully\n`);
        scnt[q] = next;
        totscnt++;
      }
    }
    const wcs = await nextWcs(r.sendCq, r.sendCh, 16, stall, 'run_iter_bw', credited);
    const now = cycles();
    for (const wc of wcs) {
      if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, totscnt, totccnt);
      const q = Number(wc.wrId);
      const n = ccnt[q]! + p.cqMod > p.iters ? p.iters - ccnt[q]! : p.cqMod;
      ccnt[q] = ccnt[q]! + n;
      totccnt += n;
      tcompleted[Math.min(totccnt, total) - 1] = now;
    }
  }
  return { tposted, tcompleted, n: total };
}

/** `run_iter_bw` of a `-D` run: post for as long as the clock runs; count the sample's completions. */
async function runIterBwDuration(p: PerfParams, r: Resources, rem: PerfDest[], size: number, credits: Credits | null): Promise<BwTimes> {
  const clock = new DurationClock(p.duration);
  const nq = r.qps.length;
  const plain = rem.map((d, q) => sendWr(p, r, q, d, size, false));
  const signaled = rem.map((d, q) => sendWr(p, r, q, d, size, true));
  const scnt = new Array<number>(nq).fill(0);
  const ccnt = new Array<number>(nq).fill(0);
  let sampled = 0;
  const stall = new Stall();
  const may = (q: number): boolean => scnt[q]! - ccnt[q]! < p.txDepth && (credits === null || credits.open(q, scnt[q]!, p.rxDepth));
  const until = (): boolean => clock.ended || (credits !== null && scnt.some((_, q) => may(q)));
  while (!clock.ended) {
    for (let q = 0; q < nq; q++) {
      while (may(q)) {
        const next = scnt[q]! + 1;
        post(r.qps[q] as Qp, next % p.cqMod === 0 ? signaled[q]! : plain[q]!, () => `Couldn't post send: qp ${q} scnt=${scnt[q]} \n Failed to complete run_iter_bw function successfully\n`);
        scnt[q] = next;
      }
    }
    const wcs = await nextWcs(r.sendCq, r.sendCh, 16, stall, 'run_iter_bw', until);
    for (const wc of wcs) {
      if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, scnt[0]!, ccnt[0]!);
      const q = Number(wc.wrId);
      ccnt[q] = ccnt[q]! + p.cqMod;
      if (clock.sampling) sampled += p.cqMod;
    }
  }
  clock.stop();
  return { tposted: Float64Array.of(clock.t0), tcompleted: Float64Array.of(clock.t1), n: sampled };
}

/**
 * The receiver's side of {@link Credits}: the WRITEs of its counts, signaled, at most `-t` of
 * them outstanding on a QP (`scredit_for_qp`; when a QP has that many, the send CQ is polled
 * until it has fewer), and the wait for the rest at the end (`clean_scq_credit`).
 */
class CreditWriter {
  private readonly outstanding: number[];
  private total = 0;

  constructor(private readonly p: PerfParams, private readonly r: Resources, private readonly credits: Credits, private readonly stall: Stall) {
    this.outstanding = new Array<number>(r.qps.length).fill(0);
  }

  /** After QP `q`'s `rcnt`th message: its count, when one is due. */
  async taken(q: number, rcnt: number): Promise<void> {
    if (!this.credits.due(rcnt, this.p.rxDepth)) return;
    while (this.outstanding[q] === this.p.txDepth) {
      for (const wc of await nextWcs(this.r.sendCq, this.r.sendCh, this.p.txDepth, this.stall, 'run_iter_bw_server')) {
        const k = Number(wc.wrId);
        if (wc.status !== WcStatus.SUCCESS) throw new LoopError(`Poll send CQ error status=${wc.status} qp ${k} credit=${rcnt} scredit=${this.outstanding[k]}\n`);
        this.outstanding[k] = this.outstanding[k]! - 1;
        this.total--;
      }
    }
    post(this.r.qps[q] as Qp, this.credits.wr(q, rcnt), () => `Couldn't post send qp ${q} credit = ${rcnt}\n`);
    this.outstanding[q] = this.outstanding[q]! + 1;
    this.total++;
  }

  /** `clean_scq_credit`: every WRITE posted has completed. */
  async drain(): Promise<void> {
    while (this.total > 0) {
      for (const wc of await nextWcs(this.r.sendCq, this.r.sendCh, this.p.txDepth, this.stall, 'clean_scq_credit')) {
        if (wc.status !== WcStatus.SUCCESS) throw new LoopError(`Poll send CQ error status=${wc.status} qp ${Number(wc.wrId)}\n`);
        this.total--;
      }
    }
  }
}

/**
 * `run_iter_bw_server`: take `-n` messages on each QP, posting a receive for each one taken;
 * with `credits` (SEND over iWARP), telling the sender its counts.
 */
export async function runIterBwServer(p: PerfParams, r: Resources, size: number, credits: Credits | null = null): Promise<BwTimes> {
  if (p.duration > 0) return runIterBwServerDuration(p, r, size, credits);
  const total = p.iters * r.qps.length;
  const tposted = new Float64Array(1);
  const tcompleted = new Float64Array(1);
  const rcntQ = new Array<number>(r.qps.length).fill(0);
  const len = size + (p.conn === 'UD' ? UD_ADDITION : 0);
  let rcnt = 0;
  const stall = new Stall();
  const writer = credits === null ? null : new CreditWriter(p, r, credits, stall);
  while (rcnt < total) {
    const wcs = await nextWcs(r.recvCq, r.recvCh, 16, stall, 'run_iter_bw_server');
    for (const wc of wcs) {
      if (wc.status !== WcStatus.SUCCESS) throw recvError(wc, rcnt);
      if (rcnt === 0) tposted[0] = cycles();
      rcnt++;
      const q = Number(wc.wrId);
      rcntQ[q] = rcntQ[q]! + 1;
      if (rcntQ[q]! + p.rxDepth <= p.iters) {
        (r.qps[q] as Qp).postRecv({ wrId: q, sgList: [{ addr: r.mr.addr + (p.numQps + q) * r.half, length: len, lkey: r.mr.lkey }] });
      }
      if (writer) await writer.taken(q, rcntQ[q]!);
    }
  }
  tcompleted[0] = cycles();
  if (writer) await writer.drain();
  return { tposted, tcompleted, n: total };
}

/** `run_iter_bw_server` of a `-D` run: take messages for as long as the clock runs, reposting each receive. */
async function runIterBwServerDuration(p: PerfParams, r: Resources, size: number, credits: Credits | null): Promise<BwTimes> {
  const clock = new DurationClock(p.duration);
  const len = size + (p.conn === 'UD' ? UD_ADDITION : 0);
  let sampled = 0;
  let rcnt = 0;
  const rcntQ = new Array<number>(r.qps.length).fill(0);
  const stall = new Stall();
  const writer = credits === null ? null : new CreditWriter(p, r, credits, stall);
  while (!clock.ended) {
    const wcs = await nextWcs(r.recvCq, r.recvCh, 16, stall, 'run_iter_bw_server', () => clock.ended);
    for (const wc of wcs) {
      if (wc.status !== WcStatus.SUCCESS) throw recvError(wc, rcnt);
      rcnt++;
      if (clock.sampling) sampled++;
      const q = Number(wc.wrId);
      rcntQ[q] = rcntQ[q]! + 1;
      (r.qps[q] as Qp).postRecv({ wrId: q, sgList: [{ addr: r.mr.addr + (p.numQps + q) * r.half, length: len, lkey: r.mr.lkey }] });
      if (writer) await writer.taken(q, rcntQ[q]!);
    }
  }
  clock.stop();
  if (writer) await writer.drain();
  return { tposted: Float64Array.of(clock.t0), tcompleted: Float64Array.of(clock.t1), n: sampled };
}

/** Wait for one completion on `cq`. */
async function pollOne(cq: Cq, ch: CompChannel, stall: Stall, what: string): Promise<Wc> {
  return (await nextWcs(cq, ch, 1, stall, what))[0] as Wc;
}

/**
 * `run_iter_lat_send`: a ping-pong of SENDs. The client sends first; each side sends once it has
 * received. Every `-Q`th send (and the last) is signaled and waited for.
 */
export async function runIterLatSend(p: PerfParams, r: Resources, rem: PerfDest, size: number, isClient: boolean): Promise<Float64Array> {
  const tposted = new Float64Array(p.iters);
  const qp = r.qps[0] as Qp;
  const plain = sendWr(p, r, 0, rem, size, false);
  const signaled = sendWr(p, r, 0, rem, size, true);
  const len = size + (p.conn === 'UD' ? UD_ADDITION : 0);
  const recvWr = { wrId: 0, sgList: [{ addr: r.mr.addr + p.numQps * r.half, length: len, lkey: r.mr.lkey }] };
  let scnt = 0;
  let rcnt = 0;
  const stall = new Stall();
  while (scnt < p.iters || rcnt < p.iters) {
    if (rcnt < p.iters && !(scnt < 1 && isClient)) {
      const wc = await pollOne(r.recvCq, r.recvCh, stall, 'run_iter_lat_send');
      if (wc.status !== WcStatus.SUCCESS) throw recvError(wc, rcnt);
      rcnt++;
      if (rcnt + p.rxDepth <= p.iters) qp.postRecv(recvWr);
    }
    if (scnt < p.iters) {
      tposted[scnt] = cycles();
      scnt++;
      const sig = scnt % p.cqMod === 0 || scnt === p.iters;
      post(qp, sig ? signaled : plain, () => `Couldn't post send: scnt=${scnt} \n`);
      if (sig) {
        const wc = await pollOne(r.sendCq, r.sendCh, stall, 'run_iter_lat_send');
        if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, scnt, scnt);
      }
    }
  }
  return tposted;
}

/**
 * `run_iter_lat_write`: a ping-pong of RDMA WRITEs. Each side writes its counter into the last
 * byte of the message and waits until the peer's write of the same count lands in its own
 * receive half; the server writes first.
 */
export async function runIterLatWrite(p: PerfParams, r: Resources, rem: PerfDest, size: number, isClient: boolean): Promise<Float64Array> {
  const tposted = new Float64Array(p.iters);
  const qp = r.qps[0] as Qp;
  const wr = sendWr(p, r, 0, rem, size, true);
  const postOff = size - 1;
  const pollOff = p.numQps * r.half + size - 1;
  r.buf[postOff] = 0;
  r.buf[pollOff] = 0;
  let scnt = 0;
  let ccnt = 0;
  let rcnt = 0;
  const stall = new Stall();
  while (scnt < p.iters || ccnt < p.iters || rcnt < p.iters) {
    if (rcnt < p.iters && !(scnt < 1 && !isClient)) {
      rcnt++;
      for (let spin = 0; r.buf[pollOff] !== (rcnt & 0xff); spin++) {
        stall.check('run_iter_lat_write');
        await memoryTurn(spin);
      }
      stall.progress();
    }
    if (scnt < p.iters) {
      tposted[scnt] = cycles();
      scnt++;
      r.buf[postOff] = scnt & 0xff;
      post(qp, wr, () => `Couldn't post send: scnt=${scnt}\n`);
    }
    if (ccnt < p.iters) {
      const wc = await pollOne(r.sendCq, r.sendCh, stall, 'run_iter_lat_write');
      if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, scnt, ccnt);
      ccnt++;
    }
  }
  return tposted;
}

/** `run_iter_lat` (READ, ATOMIC): the client alone posts one work request at a time and waits for it. */
export async function runIterLat(p: PerfParams, r: Resources, rem: PerfDest, size: number): Promise<Float64Array> {
  const tposted = new Float64Array(p.iters);
  const qp = r.qps[0] as Qp;
  const wr = sendWr(p, r, 0, rem, size, true);
  const stall = new Stall();
  for (let scnt = 0; scnt < p.iters; scnt++) {
    tposted[scnt] = cycles();
    post(qp, wr, () => `Couldn't post send: scnt=${scnt}\n`);
    const wc = await pollOne(r.sendCq, r.sendCh, stall, 'run_iter_lat');
    if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, scnt + 1, scnt);
  }
  return tposted;
}

/**
 * The latency loops of a `-D` run (`run_iter_lat_send`, `run_iter_lat_write`, `run_iter_lat` in
 * DURATION mode): the same exchanges for as long as the clock runs, each side stopping on its own
 * clock (a wait for the peer ends with it); the sample's exchanges are counted.
 */
export async function runLatDuration(p: PerfParams, r: Resources, rem: PerfDest, size: number, isClient: boolean): Promise<{ iters: number; seconds: number }> {
  const clock = new DurationClock(p.duration);
  const qp = r.qps[0] as Qp;
  const stall = new Stall();
  let iters = 0;
  /** Poll `cq` for one completion until the clock ends (null then). */
  const pollUntilEnd = async (cq: Cq): Promise<Wc | null> => {
    const ch = cq === r.recvCq ? r.recvCh : r.sendCh;
    return (await nextWcs(cq, ch, 1, stall, 'run_iter_lat', () => clock.ended))[0] ?? null;
  };
  if (p.verb === Verb.SEND) {
    const wr = sendWr(p, r, 0, rem, size, true);
    const len = size + (p.conn === 'UD' ? UD_ADDITION : 0);
    const recvWr = { wrId: 0, sgList: [{ addr: r.mr.addr + p.numQps * r.half, length: len, lkey: r.mr.lkey }] };
    let scnt = 0;
    while (!clock.ended) {
      if (!(scnt < 1 && isClient)) {
        const wc = await pollUntilEnd(r.recvCq);
        if (wc === null) break;
        if (wc.status !== WcStatus.SUCCESS) throw recvError(wc, iters);
        if (clock.sampling) iters++;
        qp.postRecv(recvWr);
      }
      scnt++;
      post(qp, wr, () => `Couldn't post send: scnt=${scnt} \n`);
      const wc = await pollUntilEnd(r.sendCq);
      if (wc === null) break;
      if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, scnt, scnt);
    }
  } else if (p.verb === Verb.WRITE) {
    const wr = sendWr(p, r, 0, rem, size, true);
    const postOff = size - 1;
    const pollOff = p.numQps * r.half + size - 1;
    let scnt = 0;
    let rcnt = 0;
    while (!clock.ended) {
      if (!(scnt < 1 && !isClient)) {
        rcnt++;
        for (let spin = 0; r.buf[pollOff] !== (rcnt & 0xff) && !clock.ended; spin++) {
          stall.check('run_iter_lat_write');
          await memoryTurn(spin);
        }
        if (clock.ended) break;
        stall.progress();
        if (clock.sampling) iters++;
      }
      scnt++;
      r.buf[postOff] = scnt & 0xff;
      post(qp, wr, () => `Couldn't post send: scnt=${scnt}\n`);
      const wc = await pollUntilEnd(r.sendCq);
      if (wc === null) break;
      if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, scnt, scnt);
    }
  } else {
    const wr = sendWr(p, r, 0, rem, size, true);
    let scnt = 0;
    while (!clock.ended) {
      scnt++;
      post(qp, wr, () => `Couldn't post send: scnt=${scnt}\n`);
      const wc = await pollUntilEnd(r.sendCq);
      if (wc === null) break;
      if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, scnt, scnt);
      if (clock.sampling) iters++;
    }
  }
  clock.stop();
  return { iters, seconds: (clock.t1 - clock.t0) / 1e9 };
}
