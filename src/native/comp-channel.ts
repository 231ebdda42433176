/**
 * `ibv_comp_channel` of a native device. The channel's fd is watched by libuv; an event is read
 * in C (ibv_get_cq_event) and queued on the JS channel (registry.ts), so `getCqEvent()`,
 * `tryGetCqEvent()` and async iteration behave as on the soft devices. A wait in progress keeps
 * the event loop alive, and only then.
 */
import { err } from '../errors.js';
import { CompChannel } from '../verbs/comp-channel.js';
import type { Cq } from '../verbs/cq.js';
import { check, type Handle } from './binding.js';
import type { NativeContext } from './context.js';
import { channels } from './registry.js';

/** `ibv_comp_channel` of a native device: its fd is watched by libuv. */
export class NativeCompChannel extends CompChannel {
  /** @internal */
  readonly _h: Handle;
  /** @internal */
  readonly _key: number;
  declare readonly context: NativeContext;

  /** @internal Use `ctx.createCompChannel()`. */
  constructor(ctx: NativeContext, h: Handle, key: number) {
    super(ctx);
    this._h = h;
    this._key = key;
  }

  private ref(d: number): void {
    if (!this.destroyed) this.context._b.compChannelRef(this._h, d);
  }

  /** `ibv_get_cq_event()`; the wait keeps the event loop alive. */
  override async getCqEvent(signal?: AbortSignal): Promise<Cq> {
    if (this.destroyed || this.pending > 0) return super.getCqEvent(signal);
    this.ref(1);
    try {
      return await super.getCqEvent(signal);
    } finally {
      this.ref(-1);
    }
  }

  override [Symbol.asyncIterator](): AsyncIterableIterator<Cq> {
    const inner = super[Symbol.asyncIterator]();
    const it: AsyncIterableIterator<Cq> = {
      next: async () => {
        if (this.destroyed || this.pending > 0) return inner.next();
        this.ref(1);
        try {
          return await inner.next();
        } finally {
          this.ref(-1);
        }
      },
      return: async () => (inner.return ? inner.return() : { done: true, value: undefined }),
      [Symbol.asyncIterator]() {
        return it;
      },
    };
    return it;
  }

  /** `ibv_destroy_comp_channel()`. EBUSY while CQs use it. */
  override destroy(): void {
    const op = 'ibv_destroy_comp_channel';
    if (this.destroyed) throw err('EINVAL', op, 'already destroyed');
    if (this._cqs.size > 0) throw err('EBUSY', op, `${this._cqs.size} CQ(s) still use it`);
    check(this.context._b.destroyCompChannel(this._h), op);
    channels.delete(this._key);
    super.destroy();
  }
}
