/**
 * Fault injection on the soft RoCE device: what Linux's `tc qdisc netem` does to a link, applied
 * to every datagram the soft RoCE devices of this process send, for testing RC recovery and
 * applications on hosts whose kernel has no sch_netem. Off unless configured, by
 * `RDMACM_ROCE_IMPAIR="loss=0.05,dup=0.01,reorder=0.1,delay=2,seed=7"` or
 * {@link configureRoceImpairment}; docs/faults.md is the users' description. Per datagram, in
 * this order:
 *
 * 1. `spare=dreq`: a CM DREQ goes out untouched (see below), counted nowhere else.
 * 2. `partition=MS,partition_at=N`: datagram number N (from 1, counted since the configuration)
 *    starts a partition of MS ms — it and every datagram handed over before MS ms have passed
 *    are dropped (`inject_partition_drop`). Once per configuration.
 * 3. `loss=P`: dropped (`inject_drop`).
 * 4. `dup=P`: sent twice (`inject_dup`); each copy then goes through 5 and 6 on its own.
 * 5. `corrupt=P`: one bit flipped in a copy, after the transport headers (in the payload or the
 *    ICRC), so the receiver's ICRC check fails: rxe drops it and counts `rcvd_icrc_err_drop`
 *    (`inject_corrupt`).
 * 6. `reorder=P`: held back `latency` plus a random time up to `delay` ms (default 1), so that
 *    datagrams behind it may overtake it (`inject_reorder`); otherwise `latency=MS`, `jitter=MS`:
 *    sent `latency` plus a random time up to `jitter` ms later, but never before the datagram
 *    handed over before it — a delay line that keeps the order (`inject_delay`).
 *
 * `seed=S` makes every random choice repeatable: the same seed and the same sequence of
 * datagrams give the same pattern (0 or absent: a seed from the clock). The counters are the
 * sending device's (counters.ts, `inject_*`); {@link roceImpairmentCounts} sums them over the
 * process.
 *
 * `spare=dreq` lets the CM's DREQs through untouched. A tool that exits right after
 * rdma_disconnect (rping's client, for one) sends its DREQ once: the kernel's CM cancels the
 * resend when the id is destroyed, and so does this one's when the process ends. A lost DREQ
 * then leaves the peer waiting for a message that never comes, which says nothing about the
 * reliable delivery a lossy link is there to test.
 */
import { err } from '../../errors.js';
import { DelayLine, checkFaults, faultPrng, faultsFromEnv, parseFaultSpec, type FaultKeys } from '../../util/fault-spec.js';
import { CmAttrId, GSI_QPN, IB_OPCODES, ICRC_LEN, IbOpcode, bthOpcode, bthQpn, gsiCmAttrId } from '../../wire/roce/index.js';
import { C, type RoceCounters } from './counters.js';
import { pinPacket } from './packet-buffer.js';

/** What happens to the datagrams the device sends. */
export interface RoceImpairment {
  /** Probability that a datagram is dropped. */
  loss: number;
  /** Probability that a datagram is sent twice. */
  dup: number;
  /** Probability that a datagram is held back (so later ones overtake it). */
  reorder: number;
  /** Longest hold-back of a reordered datagram beyond {@link latencyMs} (ms; default 1). */
  delayMs: number;
  /** Every datagram is sent this much later (ms), order kept. */
  latencyMs: number;
  /** A random extra delay of each datagram, up to this (ms), order kept. */
  jitterMs: number;
  /** Probability that a datagram goes out with one bit flipped (its ICRC fails at the receiver). */
  corrupt: number;
  /** Length of the partition (ms; 0: none). */
  partitionMs: number;
  /** The number of the datagram that starts the partition (from 1; default 1). */
  partitionAt: number;
  /** Seed of the pseudo-random sequence (0: from the clock). */
  seed: number;
  /** Send the CM's DREQs untouched (never dropped, duplicated, corrupted or held back). */
  spareDreq: boolean;
}

/** The numeric keys: API name → [name in RDMACM_ROCE_IMPAIR, kind]. */
const KEYS: FaultKeys<Omit<RoceImpairment, 'spareDreq'>> = {
  loss: ['loss', 'prob'],
  dup: ['dup', 'prob'],
  reorder: ['reorder', 'prob'],
  delayMs: ['delay', 'ms'],
  latencyMs: ['latency', 'ms'],
  jitterMs: ['jitter', 'ms'],
  corrupt: ['corrupt', 'prob'],
  partitionMs: ['partition', 'ms'],
  partitionAt: ['partition_at', 'count'],
  seed: ['seed', 'seed'],
};

/** What the impairment did in this process (see {@link roceImpairmentCounts}). */
export interface RoceImpairmentCounts {
  /** Datagrams handed to the impairment. */
  sent: number;
  dropped: number;
  duplicated: number;
  reordered: number;
  delayed: number;
  corrupted: number;
  partitionDropped: number;
}

const ZERO: RoceImpairmentCounts = { sent: 0, dropped: 0, duplicated: 0, reordered: 0, delayed: 0, corrupted: 0, partitionDropped: 0 };

interface Active {
  cfg: RoceImpairment;
  rand: () => number;
  /** When the partition started (performance.now()), or -1 before it. */
  partitionStart: number;
  line: DelayLine<() => void>;
}

let active: Active | null = null;
let counts: RoceImpairmentCounts = { ...ZERO };

/**
 * Impair every datagram the soft RoCE devices of this process send from now on (`null`: stop).
 * Datagrams already held back are still sent. The counts of {@link roceImpairmentCounts} start
 * again from zero; the devices' `inject_*` counters keep counting.
 * @throws RdmaError EINVAL for an unknown key, a probability outside [0, 1], a negative or
 *   non-numeric duration, a `partitionAt` or `seed` that is not a whole number.
 */
export function configureRoceImpairment(cfg: Partial<RoceImpairment> | null): void {
  const op = 'configureRoceImpairment';
  if (cfg === null) {
    active = null;
    return;
  }
  const { spareDreq, ...nums } = cfg;
  if (spareDreq !== undefined && typeof spareDreq !== 'boolean') throw err('EINVAL', op, `spareDreq ${String(spareDreq)}`);
  checkFaults(nums, KEYS, op);
  const c: RoceImpairment = {
    loss: 0,
    dup: 0,
    reorder: 0,
    delayMs: 1,
    latencyMs: 0,
    jitterMs: 0,
    corrupt: 0,
    partitionMs: 0,
    partitionAt: 1,
    seed: 0,
    spareDreq: false,
    ...cfg,
  };
  active = { cfg: c, rand: faultPrng(c.seed), partitionStart: -1, line: new DelayLine((send) => send()) };
  counts = { ...ZERO };
}

/** Parse the text of `RDMACM_ROCE_IMPAIR` (`key=value,...`); errors name `op`. */
export function parseRoceImpairment(text: string, op = 'RDMACM_ROCE_IMPAIR'): Partial<RoceImpairment> {
  return parseFaultSpec<RoceImpairment>(text, KEYS, op, { spare: (v) => (v === 'dreq' ? { spareDreq: true } : null) });
}

/** What the impairment did in this process since it was configured (every device). */
export function roceImpairmentCounts(): RoceImpairmentCounts {
  return { ...counts };
}

faultsFromEnv('RDMACM_ROCE_IMPAIR', (text, op) => configureRoceImpairment(parseRoceImpairment(text, op)));

/** Whether an impairment is configured (cheap: checked for every datagram). */
export function impairing(): boolean {
  return active !== null;
}

/** Whether `pkt` (a RoCEv2 UDP payload: BTH first) carries an IB CM DREQ. */
export function isCmDreq(pkt: Uint8Array): boolean {
  return bthOpcode(pkt, 0) === IbOpcode.UD_SEND_ONLY && bthQpn(pkt, 0) === GSI_QPN && gsiCmAttrId(pkt) === CmAttrId.DREQ;
}

/**
 * A copy of packet `pkt` (BTH first, ICRC last) with one bit flipped after its transport headers:
 * in the payload or the ICRC, so that every header check passes and the ICRC check fails.
 * `r` in [0, 1) picks the bit.
 */
export function corruptCopy(pkt: Uint8Array, r: number): Buffer {
  const out = Buffer.from(pkt);
  const hdr = pkt.length >= 1 ? (IB_OPCODES[bthOpcode(pkt, 0)]?.length ?? 0) : 0;
  const from = hdr > 0 && hdr <= pkt.length - ICRC_LEN ? hdr : Math.max(0, pkt.length - ICRC_LEN);
  const bit = Math.floor(r * (pkt.length - from) * 8);
  const at = from + (bit >> 3);
  if (at < out.length) out[at] = (out[at] as number) ^ (1 << (bit & 7));
  return out;
}

/**
 * Send the datagram `pkt` (BTH first, ICRC last: the exact bytes that go out) through the
 * impairment: `send` is called zero, one or two times, now or later, with no argument to send
 * `pkt` itself or with a corrupted copy to send instead. `ctr`: the sending device's counters
 * (the `inject_*` ones count). Returns false when nothing is configured (the caller sends as
 * usual). A packet from packetBuffer() is pinned: a duplicate or a delayed copy may still be sent
 * after the first, so its slab is not carved again (packet-buffer.ts).
 */
export function impairedSend(pkt: Uint8Array, send: (replacement?: Buffer) => void, ctr?: RoceCounters): boolean {
  const a = active;
  if (a === null) return false;
  pinPacket(pkt);
  const { cfg, rand } = a;
  const n = ++counts.sent;
  if (cfg.spareDreq && isCmDreq(pkt)) {
    send();
    return true;
  }
  if (cfg.partitionMs > 0) {
    const now = performance.now();
    if (n === cfg.partitionAt) a.partitionStart = now;
    if (a.partitionStart >= 0 && now - a.partitionStart < cfg.partitionMs) {
      counts.partitionDropped++;
      ctr?.inc(C.inject_partition_drop);
      return true;
    }
  }
  if (rand() < cfg.loss) {
    counts.dropped++;
    ctr?.inc(C.inject_drop);
    return true;
  }
  const copies = rand() < cfg.dup ? 2 : 1;
  if (copies === 2) {
    counts.duplicated++;
    ctr?.inc(C.inject_dup);
  }
  for (let i = 0; i < copies; i++) {
    let out: (() => void) | null = null;
    if (cfg.corrupt > 0 && rand() < cfg.corrupt) {
      counts.corrupted++;
      ctr?.inc(C.inject_corrupt);
      const bad = corruptCopy(pkt, rand());
      out = () => send(bad);
    }
    if (rand() < cfg.reorder) {
      counts.reordered++;
      ctr?.inc(C.inject_reorder);
      setTimeout(out ?? (() => send()), cfg.latencyMs + rand() * cfg.delayMs).unref();
    } else if (cfg.latencyMs > 0 || cfg.jitterMs > 0) {
      counts.delayed++;
      ctr?.inc(C.inject_delay);
      a.line.push(out ?? (() => send()), cfg.latencyMs + (cfg.jitterMs > 0 ? rand() * cfg.jitterMs : 0));
    } else if (out !== null) out();
    else send();
  }
  return true;
}
