/**
 * `ibv_cq` of a native device. Polling decodes completions from the scratch the addon fills
 * (abi.ts): `poll` makes new `Wc` objects, `pollInto` fills the ones already in its array (no
 * allocation). Completion events read in C are counted here so that destroying the CQ
 * acknowledges those the application never read, as libibverbs requires. A CQ made by
 * `ibv_create_cq_ex` (the provider's `createCqEx`, for completion timestamps) is polled through
 * `ibv_start_poll` in C and fills the timestamps of the completion objects that have them.
 */
import { err } from '../errors.js';
import { Cq } from '../verbs/cq.js';
import type { Wc } from '../verbs/types.js';
import { WC_MAX, WR_COUNT_WORD, WR_SLOT_WORD, decodeWc, newWc, type FullWc } from './abi.js';
import { check, scratchBuffers, type Handle, type NativeBinding } from './binding.js';
import type { NativeCompChannel } from './comp-channel.js';
import type { NativeContext } from './context.js';
import { cqs } from './registry.js';

/** `ibv_cq` of a native device. */
export class NativeCq extends Cq {
  /** @internal */
  readonly _h: Handle;
  /** @internal */
  readonly _key: number;
  /** @internal Completion events read in C (ibv_get_cq_event) for this CQ. */
  _cGot = 0;
  /** @internal Of those, acknowledged in C (ibv_ack_cq_events). */
  private _cAcked = 0;
  private readonly _b: NativeBinding;
  /** A CQ made by ibv_create_cq_ex (polled through ibv_start_poll): the timestamps (`[2i]`) and wallclocks (`[2i + 1]`) of the completions of the last ex poll. */
  private readonly _ts: BigUint64Array | null;
  /** The completion scratch shared with the addon. */
  private readonly _wcs: Uint32Array;
  /** The WR scratch, whose slot and count words name the CQ to the addon's pollCqSlot. */
  private readonly _wrs: Uint32Array;
  /** The CQ's slot for the addon's calls by slot. */
  private readonly _slot: number;
  declare readonly context: NativeContext;

  /** @internal Use `ctx.createCq()` (or `ctx.createCqEx()`: `ex`). */
  constructor(ctx: NativeContext, cqe: number, ch: NativeCompChannel | undefined, compVector: number, cqContext: unknown, key: number, h: Handle, ex = false) {
    super(ctx, 1, ch, compVector, cqContext, key);
    this._cqe = cqe;
    this._h = h;
    this._key = key;
    this._b = ctx._b;
    this._ts = ex ? new BigUint64Array(2 * WC_MAX) : null;
    const s = scratchBuffers();
    this._wcs = s.wc;
    this._wrs = s.wr;
    this._slot = check(this._b.dataSlot(h), ex ? 'ibv_create_cq_ex' : 'ibv_create_cq');
  }

  /** One addon poll of up to `max` (<= WC_MAX) completions into the WC scratch (and {@link _ts}). */
  private pollSome(max: number): number {
    const b = this._b;
    const ts = this._ts;
    if (ts !== null && b.pollCqEx !== undefined) return b.pollCqEx(this._h, max, ts);
    const w = this._wrs;
    w[WR_SLOT_WORD] = this._slot;
    w[WR_COUNT_WORD] = max;
    return b.pollCqSlot();
  }

  /** Completion `i` of the last poll into `wc`: the scratch's fields, and the timestamps of an ex CQ where `wc` has them. */
  private decode(w: Uint32Array, i: number, wc: FullWc): void {
    decodeWc(w, i, wc);
    const ts = this._ts;
    if (ts !== null && 'completionTs' in wc) {
      const t = wc as FullWc & { completionTs: bigint; completionWallclockNs: bigint };
      t.completionTs = ts[2 * i] as bigint;
      t.completionWallclockNs = ts[2 * i + 1] as bigint;
    }
  }

  private checkPoll(max: number): void {
    if (this.destroyed) throw err('EINVAL', 'ibv_poll_cq', 'CQ destroyed');
    if (!Number.isInteger(max) || max < 0) throw err('EINVAL', 'ibv_poll_cq', `num_entries ${max}`);
  }

  /** `ibv_poll_cq()`: up to `max` completions, oldest first, as new objects. */
  override poll(max = 1): Wc[] {
    this.checkPoll(max);
    const out: Wc[] = [];
    const w = scratchBuffers().wc;
    while (out.length < max) {
      const n = check(this.pollSome(Math.min(max - out.length, WC_MAX)), 'ibv_poll_cq');
      for (let i = 0; i < n; i++) {
        const wc = newWc();
        this.decode(w, i, wc);
        out.push(wc);
      }
      if (n < WC_MAX) break;
    }
    return out;
  }

  /**
   * Allocation-free `ibv_poll_cq()`: completions go into the `Wc` objects already in
   * `out[0..n)` (new ones only where `out` has none), and `n` is returned.
   */
  override pollInto(out: Wc[], max: number = out.length): number {
    if (this.destroyed || !Number.isInteger(max) || max < 0) this.checkPoll(max);
    const w = this._wcs;
    if (max === 1 && this._ts === null) {
      // One completion of an ordinary CQ (a busy-polling loop's call): one addon call, no loop.
      const ws = this._wrs;
      ws[WR_SLOT_WORD] = this._slot;
      ws[WR_COUNT_WORD] = 1;
      const n = this._b.pollCqSlot();
      if (n === 1) {
        let wc = out[0] as FullWc | undefined;
        if (typeof wc !== 'object' || wc === null) {
          wc = newWc();
          out[0] = wc;
        }
        decodeWc(w, 0, wc);
      } else if (n < 0) check(n, 'ibv_poll_cq');
      return n;
    }
    let total = 0;
    while (total < max) {
      const want = max - total;
      const n = this.pollSome(want < WC_MAX ? want : WC_MAX);
      if (n < 0) check(n, 'ibv_poll_cq');
      const ex = this._ts !== null;
      for (let i = 0; i < n; i++) {
        let wc = out[total] as FullWc | undefined;
        if (typeof wc !== 'object' || wc === null) {
          wc = newWc();
          out[total] = wc;
        }
        if (ex) this.decode(w, i, wc);
        else decodeWc(w, i, wc);
        total++;
      }
      if (n < WC_MAX) break;
    }
    return total;
  }

  /** `ibv_req_notify_cq()`. */
  override reqNotify(solicitedOnly = false): void {
    const op = 'ibv_req_notify_cq';
    if (this.destroyed) throw err('EINVAL', op, 'CQ destroyed');
    check(this.context._b.reqNotifyCq(this._h, solicitedOnly === true), op);
  }

  /** `ibv_ack_cq_events()`. */
  override ackEvents(n: number): void {
    super.ackEvents(n);
    if (n > 0) {
      this.context._b.ackCqEvents(this._h, n);
      this._cAcked += n;
    }
  }

  /**
   * `ibv_destroy_cq()`. EBUSY while QPs use it or events read for it are not acknowledged;
   * events still queued unread on the channel are dropped (and acknowledged to libibverbs).
   */
  override destroy(): void {
    const op = 'ibv_destroy_cq';
    if (this.destroyed) throw err('EINVAL', op, 'already destroyed');
    if (this.qps.size > 0) throw err('EBUSY', op, `${this.qps.size} QP(s) still attached`);
    if (this.unackedEvents > 0) throw err('EBUSY', op, `${this.unackedEvents} completion event(s) not acknowledged`);
    if (this.context._unackedAsyncEvents(this) > 0) throw err('EBUSY', op, 'async event(s) not acknowledged');
    const b = this.context._b;
    // Events read in C but still queued unread here: libibverbs' destroy waits for their acks.
    const unacked = this._cGot - this._cAcked;
    if (unacked > 0) {
      b.ackCqEvents(this._h, unacked);
      this._cAcked += unacked;
    }
    check(b.destroyCq(this._h), op);
    cqs.delete(this._key);
    super.destroy();
  }
}
