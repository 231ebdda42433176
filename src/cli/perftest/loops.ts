/**
 * perftest's measured loops (perftest_resources.c `run_iter_bw`, `run_iter_bw_server`,
 * `run_iter_lat_send`, `run_iter_lat_write`, `run_iter_lat`), each recording the time of every
 * post (`tposted`) and of the moderated completions (`tcompleted`) on this port's clock. The C
 * loops spin on the CQ; ours poll it and give the event loop a turn when it is empty (a soft
 * device runs on it), and give up after {@link STALL_MS} without progress, where perftest would
 * spin for ever.
 */
import { SendFlags, WcStatus, WrOpcode, type Qp, type SendWr, type Wc, type Cq } from '../api.js';
import { errOut } from '../c-compat.js';
import type { PerfDest } from './exchange.js';
import { Verb, type PerfParams } from './params.js';
import { DEF_QKEY, UD_ADDITION, type Resources } from './resources.js';

/** How long a loop waits without any completion or arrival before it fails. */
export const STALL_MS = 20_000;

const base = process.hrtime.bigint();
/** `get_cycles()`: nanoseconds of a monotonic clock since the module loaded. */
export const cycles = (): number => Number(process.hrtime.bigint() - base);

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

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
  else if (p.conn === 'UD') wr.ud = { ah: r.ahs[q]!, remoteQpn: rem.qpn, remoteQkey: DEF_QKEY };
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
 * last) signaled; a completion stands for the `-Q` before it.
 */
export async function runIterBw(p: PerfParams, r: Resources, rem: PerfDest[], size: number): Promise<BwTimes> {
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
  while (totscnt < total || totccnt < total) {
    for (let q = 0; q < nq; q++) {
      const qp = r.qps[q] as Qp;
      while (scnt[q]! < p.iters && scnt[q]! - ccnt[q]! < p.txDepth) {
        const next = scnt[q]! + 1;
        const sig = next % p.cqMod === 0 || next === p.iters;
        tposted[totscnt] = cycles();
        post(qp, sig ? signaled[q]! : plain[q]!, () => `Couldn't post send: qp ${q} scnt=${scnt[q]} \n Failed to complete run_iter_bw function successfully\n`);
        scnt[q] = next;
        totscnt++;
      }
    }
    const wcs = r.sendCq.poll(16);
    if (wcs.length === 0) {
      stall.check('run_iter_bw');
      await turn();
      continue;
    }
    stall.progress();
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

/** `run_iter_bw_server`: take `-n` messages on each QP, posting a receive for each one taken. */
export async function runIterBwServer(p: PerfParams, r: Resources, size: number): Promise<BwTimes> {
  const total = p.iters * r.qps.length;
  const tposted = new Float64Array(1);
  const tcompleted = new Float64Array(1);
  const rcntQ = new Array<number>(r.qps.length).fill(0);
  const len = size + (p.conn === 'UD' ? UD_ADDITION : 0);
  let rcnt = 0;
  const stall = new Stall();
  while (rcnt < total) {
    const wcs = r.recvCq.poll(16);
    if (wcs.length === 0) {
      stall.check('run_iter_bw_server');
      await turn();
      continue;
    }
    stall.progress();
    for (const wc of wcs) {
      if (wc.status !== WcStatus.SUCCESS) throw recvError(wc, rcnt);
      if (rcnt === 0) tposted[0] = cycles();
      rcnt++;
      const q = Number(wc.wrId);
      rcntQ[q] = rcntQ[q]! + 1;
      if (rcntQ[q]! + p.rxDepth <= p.iters) {
        (r.qps[q] as Qp).postRecv({ wrId: q, sgList: [{ addr: r.mr.addr + (p.numQps + q) * r.half, length: len, lkey: r.mr.lkey }] });
      }
    }
  }
  tcompleted[0] = cycles();
  return { tposted, tcompleted, n: total };
}

/** Wait for one completion on `cq`. */
async function pollOne(cq: Cq, stall: Stall, what: string): Promise<Wc> {
  for (;;) {
    const w = cq.poll(1);
    if (w.length > 0) {
      stall.progress();
      return w[0] as Wc;
    }
    stall.check(what);
    await turn();
  }
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
      const wc = await pollOne(r.recvCq, stall, 'run_iter_lat_send');
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
        const wc = await pollOne(r.sendCq, stall, 'run_iter_lat_send');
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
      while (r.buf[pollOff] !== (rcnt & 0xff)) {
        stall.check('run_iter_lat_write');
        await turn();
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
      const wc = await pollOne(r.sendCq, stall, 'run_iter_lat_write');
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
    const wc = await pollOne(r.sendCq, stall, 'run_iter_lat');
    if (wc.status !== WcStatus.SUCCESS) throw sendError(wc, scnt + 1, scnt);
  }
  return tposted;
}
