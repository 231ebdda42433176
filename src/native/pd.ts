/**
 * `ibv_pd` of a native device: memory registration (ibv_reg_mr over the caller's memory in place)
 * and deallocation through the addon.
 */
import { err } from '../errors.js';
import { isAddr, isU32 } from '../util/fields.js';
import type { Mr } from '../verbs/mr.js';
import { Pd, type MrMemory } from '../verbs/pd.js';
import { check, type Handle } from './binding.js';
import type { NativeContext } from './context.js';
import { NativeMr, memView } from './mr.js';

/** `ibv_pd` of a native device. */
export class NativePd extends Pd {
  /** @internal */
  readonly _h: Handle;
  declare readonly context: NativeContext;

  /** @internal Use `ctx.allocPd()`. */
  constructor(ctx: NativeContext, handle: number, h: Handle) {
    super(ctx, handle);
    this._h = h;
  }

  /**
   * `ibv_reg_mr()` / `ibv_reg_mr_iova()` over `mem` in place. `mr.addr` is the memory's virtual
   * address (what SGEs name); `iova` only changes the address remote peers use with the rkey.
   * @throws RdmaError EINVAL (bad memory, zero length, bad access flags or iova, PD deallocated),
   *   or the provider's errno (ENOMEM, EFAULT ...).
   */
  override regMr(mem: MrMemory, access: number, iova?: number): Mr {
    const op = iova === undefined ? 'ibv_reg_mr' : 'ibv_reg_mr_iova';
    if (this.deallocated) throw err('EINVAL', op, 'PD deallocated');
    if (!isU32(access) || access > 0xff) throw err('EINVAL', op, `access flags ${String(access)}`);
    const view = memView(mem, op);
    if (view.byteLength === 0) throw err('EINVAL', op, 'zero length');
    if (iova !== undefined && !isAddr(iova)) throw err('EINVAL', op, `iova ${String(iova)}`);
    const ctx = this.context;
    const [h, addr, lkey, rkey] = check(ctx._b.regMr(this._h, view, access, iova ?? -1), op);
    const mr = new NativeMr(this, view, addr, access, lkey, rkey, h);
    ctx._liveMrs.add(mr);
    this._mrCount++;
    return mr;
  }

  /** `ibv_dealloc_pd()`. EBUSY while MRs or QPs use it. */
  override dealloc(): void {
    const op = 'ibv_dealloc_pd';
    if (this.deallocated) throw err('EINVAL', op, 'already deallocated');
    if (this._mrCount > 0 || this.qpCount > 0) throw err('EBUSY', op, `${this._mrCount} MR(s) and ${this.qpCount} QP(s) still use it`);
    check(this.context._b.deallocPd(this._h), op);
    super.dealloc();
  }
}
