/**
 * `ibv_context` of a native (rdma-core) device: the verbs `Context` whose PDs, completion
 * channels and CQs are made by libibverbs through the addon. Its MRs stay reachable from it until
 * they are deregistered (the addon holds their memory until then), and its async events arrive
 * through the registry.
 */
import { err } from '../errors.js';
import type { CompChannel } from '../verbs/comp-channel.js';
import { Context } from '../verbs/context.js';
import type { Cq } from '../verbs/cq.js';
import type { Device } from '../verbs/device.js';
import type { Pd } from '../verbs/pd.js';
import { check, type Handle, type NativeBinding } from './binding.js';
import { NativeCompChannel } from './comp-channel.js';
import { NativeCq } from './cq.js';
import type { NativeMr } from './mr.js';
import { NativePd } from './pd.js';
import { channels, contexts, cqs, newKey } from './registry.js';

/** `ibv_context` of a native device. Obtain with `device.open()`. */
export class NativeContext extends Context {
  /** @internal The addon. */
  readonly _b: NativeBinding;
  /** @internal The context handle (librdmacm's own context of the device where rdma_cm exists). */
  readonly _h: Handle;
  /** @internal Key of this context for async events. */
  readonly _key = newKey();
  /** @internal Registered MRs, kept reachable until deregistered. */
  readonly _liveMrs = new Set<NativeMr>();
  private _pds = 0;

  /** @internal Use `Device.open()`. */
  constructor(device: Device, b: NativeBinding, h: Handle) {
    super(device);
    this._b = b;
    this._h = h;
    contexts.set(this._key, this);
    b.watchAsync(h, this._key);
  }

  /** `ibv_alloc_pd()`. */
  override allocPd(): Pd {
    this._checkAlive('ibv_alloc_pd');
    const h = check(this._b.allocPd(this._h), 'ibv_alloc_pd');
    this._pds++;
    this._pdCount++;
    return new NativePd(this, this._pds, h);
  }

  /** `ibv_create_comp_channel()`: its fd is watched by the event loop. */
  override createCompChannel(): CompChannel {
    this._checkAlive('ibv_create_comp_channel');
    const key = newKey();
    const h = check(this._b.createCompChannel(this._h, key), 'ibv_create_comp_channel');
    const ch = new NativeCompChannel(this, h, key);
    channels.set(key, ch);
    this._channels.add(ch);
    return ch;
  }

  /**
   * `ibv_create_cq()`.
   * @throws RdmaError EINVAL (cqe out of 1..maxCqe, a channel of another device or destroyed, a
   *   bad comp vector), or the provider's errno.
   */
  override createCq(cqe: number, channel?: CompChannel | null, compVector = 0, cqContext?: unknown): Cq {
    return this.makeCq('ibv_create_cq', cqe, channel, compVector, cqContext, -1);
  }

  /**
   * @internal The kernel device's own `ibv_create_cq_ex` with `wcFlags` (the provider's
   * `createCqEx`: completion timestamps, which `ibv_poll_cq` cannot report). Checked as
   * {@link createCq}; the device refuses flags it cannot serve (EOPNOTSUPP).
   */
  _createCqEx(cqe: number, channel: CompChannel | null, compVector: number, cqContext: unknown, wcFlags: number): Cq {
    return this.makeCq('ibv_create_cq_ex', cqe, channel, compVector, cqContext, wcFlags);
  }

  /** A CQ made by the addon: ibv_create_cq, or (`wcFlags` >= 0) ibv_create_cq_ex. */
  private makeCq(op: string, cqe: number, channel: CompChannel | null | undefined, compVector: number, cqContext: unknown, wcFlags: number): Cq {
    const ch = channel ?? undefined;
    this._checkAlive(op);
    if (!Number.isInteger(cqe) || cqe < 1 || cqe > this._attr.maxCqe) throw err('EINVAL', op, `cqe ${String(cqe)} (device max ${this._attr.maxCqe})`);
    if (ch !== undefined) {
      if (!(ch instanceof NativeCompChannel) || ch.context !== this) throw err('EINVAL', op, 'channel of another device');
      if (ch.destroyed) throw err('EINVAL', op, 'channel destroyed');
    }
    if (!Number.isInteger(compVector) || compVector < 0 || compVector >= this.numCompVectors) throw err('EINVAL', op, `comp_vector ${String(compVector)}`);
    const b = this._b;
    if (wcFlags >= 0 && (b.createCqEx === undefined || b.pollCqEx === undefined)) throw err('EOPNOTSUPP', op, 'the addon predates ibv_create_cq_ex: rebuild it');
    const key = newKey();
    const r = wcFlags >= 0 && b.createCqEx !== undefined ? b.createCqEx(this._h, cqe, ch?._h ?? null, compVector, key, wcFlags) : b.createCq(this._h, cqe, ch?._h ?? null, compVector, key);
    const [h, actual] = check(r, op);
    const cq = new NativeCq(this, actual, ch, compVector, cqContext, key, h, wcFlags >= 0);
    cqs.set(key, cq);
    this._cqCount++;
    ch?._cqs.add(cq);
    return cq;
  }
}
