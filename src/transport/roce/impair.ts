/**
 * Link impairment for the soft RoCE device: drop, duplicate and reorder the datagrams it sends, as
 * Linux's `tc qdisc netem` does to a link, for testing RC recovery on hosts whose kernel has no
 * sch_netem. Off unless configured: `RDMACM_ROCE_IMPAIR="loss=0.05,dup=0.01,reorder=0.1,delay=2,seed=7"`
 * (probabilities per datagram; a reordered datagram is held back up to `delay` ms; a seed makes
 * the pattern repeatable) or {@link configureRoceImpairment}.
 *
 * `spare=dreq` lets the CM's DREQs through untouched. A tool that exits right after
 * rdma_disconnect (rping's client, for one) sends its DREQ once: the kernel's CM cancels the
 * resend when the id is destroyed, and so does this one's when the process ends. A lost DREQ
 * then leaves the peer waiting for a message that never comes, which says nothing about the
 * reliable delivery a lossy link is there to test.
 */
import { err } from '../../errors.js';
import { CmAttrId, GSI_QPN, IbOpcode, bthOpcode, bthQpn, gsiCmAttrId } from '../../wire/roce/index.js';

/** What happens to the datagrams the device sends. */
export interface RoceImpairment {
  /** Probability that a datagram is dropped. */
  loss: number;
  /** Probability that a datagram is sent twice. */
  dup: number;
  /** Probability that a datagram is held back (so later ones overtake it). */
  reorder: number;
  /** Longest hold-back of a reordered datagram (ms). */
  delayMs: number;
  /** Seed of the pseudo-random sequence (0: from the clock). */
  seed: number;
  /** Send the CM's DREQs untouched (never dropped, duplicated or held back). */
  spareDreq: boolean;
}

let active: { cfg: RoceImpairment; rand: () => number } | null = null;
let counts = { sent: 0, dropped: 0, duplicated: 0, reordered: 0 };

/** mulberry32: small, seedable, good enough for loss patterns. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Impair every datagram the soft RoCE devices of this process send from now on (`null`: stop).
 * @throws RdmaError EINVAL for probabilities outside [0, 1] or a negative delay.
 */
export function configureRoceImpairment(cfg: Partial<RoceImpairment> | null): void {
  if (cfg === null) {
    active = null;
    return;
  }
  const c: RoceImpairment = { loss: 0, dup: 0, reorder: 0, delayMs: 1, seed: 0, spareDreq: false, ...cfg };
  for (const k of ['loss', 'dup', 'reorder'] as const) {
    if (!(c[k] >= 0 && c[k] <= 1)) throw err('EINVAL', 'configureRoceImpairment', `${k} ${String(c[k])}`);
  }
  if (!(c.delayMs >= 0)) throw err('EINVAL', 'configureRoceImpairment', `delay ${String(c.delayMs)}`);
  active = { cfg: c, rand: prng(c.seed || Date.now()) };
  counts = { sent: 0, dropped: 0, duplicated: 0, reordered: 0 };
}

/** What the impairment did so far (datagrams seen, dropped, duplicated, held back). */
export function roceImpairmentCounts(): { sent: number; dropped: number; duplicated: number; reordered: number } {
  return { ...counts };
}

/** Parse `RDMACM_ROCE_IMPAIR` (`key=value,...`: loss, dup, reorder, delay, seed, spare=dreq). */
function fromEnv(): void {
  const s = process.env['RDMACM_ROCE_IMPAIR'];
  if (s === undefined || s.trim() === '') return;
  const cfg: Partial<RoceImpairment> = {};
  for (const part of s.split(',')) {
    const [k, v] = part.split('=').map((x) => x.trim());
    if (k === 'spare') {
      if (v === 'dreq') cfg.spareDreq = true;
      continue;
    }
    const n = Number(v);
    if (!Number.isFinite(n)) continue;
    if (k === 'loss' || k === 'dup' || k === 'reorder' || k === 'seed') cfg[k] = n;
    else if (k === 'delay') cfg.delayMs = n;
  }
  configureRoceImpairment(cfg);
}
fromEnv();

/** Whether an impairment is configured (cheap: checked for every datagram). */
export function impairing(): boolean {
  return active !== null;
}

/** Whether `pkt` (a RoCEv2 UDP payload: BTH first) carries an IB CM DREQ. */
export function isCmDreq(pkt: Uint8Array): boolean {
  return bthOpcode(pkt, 0) === IbOpcode.UD_SEND_ONLY && bthQpn(pkt, 0) === GSI_QPN && gsiCmAttrId(pkt) === CmAttrId.DREQ;
}

/**
 * Send the datagram `pkt` (BTH first) through the impairment: `send` is called zero, one or two
 * times, now or later. Returns false when nothing is configured (the caller sends as usual).
 */
export function impairedSend(pkt: Uint8Array, send: () => void): boolean {
  const a = active;
  if (a === null) return false;
  const { cfg, rand } = a;
  counts.sent++;
  if (cfg.spareDreq && isCmDreq(pkt)) {
    send();
    return true;
  }
  if (rand() < cfg.loss) {
    counts.dropped++;
    return true;
  }
  const copies = rand() < cfg.dup ? 2 : 1;
  if (copies === 2) counts.duplicated++;
  for (let i = 0; i < copies; i++) {
    if (rand() < cfg.reorder) {
      counts.reordered++;
      setTimeout(send, rand() * cfg.delayMs).unref();
    } else send();
  }
  return true;
}
