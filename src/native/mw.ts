/**
 * `ibv_mw` of a native device: a memory window of the kernel's device through rdma-core
 * (ibv_alloc_mw, ibv_bind_mw, ibv_dealloc_mw, and BIND_MW / LOCAL_INV / SEND_WITH_INV work
 * requests). The window's binding, its state and the checks of remote accesses through it are the
 * kernel's (rxe_mw.c); this object carries the handle, the key-table slot a BIND_MW work request
 * names it by, and `rkey`, the application's copy of the window's rkey, which every bind hands to
 * the provider as a C program's `struct ibv_mw` does.
 */
import { err } from '../errors.js';
import { Mw, MwState } from '../verbs/mw.js';
import type { MwType } from '../verbs/types.js';
import { check, type Handle } from './binding.js';
import type { NativeContext } from './context.js';
import type { NativePd } from './pd.js';

/** `ibv_mw` of a native device. Allocate with `pd.allocMw()`. */
export class NativeMw extends Mw {
  /** @internal */
  readonly _h: Handle;
  /** @internal Its slot in the addon's key table (what a BIND_MW work request names). */
  readonly _slot: number;

  /** @internal Use `pd.allocMw()`. */
  constructor(pd: NativePd, type: MwType, rkey: number, h: Handle, slot: number) {
    super(pd, type, rkey);
    this._h = h;
    this._slot = slot;
  }

  /** `ibv_dealloc_mw()`: the kernel invalidates the window's rkey. */
  override dealloc(): void {
    const op = 'ibv_dealloc_mw';
    if (this._st.is(MwState.INVALID)) throw err('EINVAL', op, 'MW already deallocated');
    check((this.context as NativeContext)._b.deallocMw(this._h), op);
    this._st.move(MwState.INVALID, 'dealloc');
    this.pd._mwCount--;
  }
}
