/**
 * `ibv_pd` of a native device: memory registration (ibv_reg_mr over the caller's memory in place)
 * and deallocation through the addon.
 */
import { err } from '../errors.js';
import { isAddr, isU32 } from '../util/fields.js';
import type { Mr } from '../verbs/mr.js';
import type { Mw } from '../verbs/mw.js';
import { SrqType, type Srq, type SrqInitAttr } from '../verbs/srq.js';
import type { MwType } from '../verbs/types.js';
import { Pd, type MrMemory } from '../verbs/pd.js';
import { check, type Handle } from './binding.js';
import type { NativeContext } from './context.js';
import { NativeMr, memView } from './mr.js';
import { NativeMw } from './mw.js';
import { newKey } from './registry.js';
import { NativeSrq } from './srq.js';

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
    this.context._checkAlive(op);
    if (this.deallocated) throw err('EINVAL', op, 'PD deallocated');
    if (!isU32(access) || access > 0xff) throw err('EINVAL', op, `access flags ${String(access)}`);
    const view = memView(mem, op);
    if (view.byteLength === 0) throw err('EINVAL', op, 'zero length');
    if (iova !== undefined && !isAddr(iova)) throw err('EINVAL', op, `iova ${String(iova)}`);
    const ctx = this.context;
    const [h, addr, lkey, rkey, , slot] = check(ctx._b.regMr(this._h, view, access, iova ?? -1), op);
    const mr = new NativeMr(this, view, addr, access, lkey, rkey, h, slot);
    ctx._liveMrs.add(mr);
    this._mrCount++;
    return mr;
  }

  /**
   * `ibv_alloc_mw()`: a window of the kernel's device (type 1 or 2, as the device has them:
   * `max_mw` and the MEM_WINDOW bits of `device_cap_flags`).
   * @throws RdmaError EINVAL (PD deallocated, a type that is no u32); the kernel's errno otherwise
   *   (EOPNOTSUPP from a provider without windows, siw; EINVAL for a type it lacks).
   */
  override allocMw(type: MwType): Mw {
    const op = 'ibv_alloc_mw';
    this.context._checkAlive(op);
    if (this.deallocated) throw err('EINVAL', op, 'PD deallocated');
    if (!isU32(type)) throw err('EINVAL', op, `mw_type ${String(type)}`);
    const [h, rkey, slot] = check(this.context._b.allocMw(this._h, type), op);
    const mw = new NativeMw(this, type, rkey, h, slot);
    this._mwCount++;
    return mw;
  }

  /**
   * `ibv_create_srq()`: a shared receive queue of the kernel's device in this PD. `attr.attr.maxWr`
   * and `maxSge` are written back as the provider sized them.
   * @throws RdmaError EINVAL (PD deallocated, a field that is no u32); EOPNOTSUPP for an srq_type
   *   other than BASIC; the kernel's errno otherwise (EINVAL beyond `max_srq_wr` ..., ENOMEM,
   *   EOPNOTSUPP on a device without SRQs).
   */
  override createSrq(init: SrqInitAttr): Srq {
    const op = 'ibv_create_srq';
    this.context._checkAlive(op);
    if (this.deallocated) throw err('EINVAL', op, 'PD deallocated');
    if (typeof init !== 'object' || init === null || typeof init.attr !== 'object' || init.attr === null) throw err('EINVAL', op, 'no init attributes');
    if ((init.srqType ?? SrqType.BASIC) !== SrqType.BASIC) throw err('EOPNOTSUPP', op, `srq_type ${String(init.srqType)}`);
    const { maxWr } = init.attr;
    const maxSge = init.attr.maxSge ?? 1;
    const limit = init.attr.srqLimit ?? 0;
    if (!isU32(maxWr) || !isU32(maxSge) || !isU32(limit)) throw err('EINVAL', op, `max_wr ${String(maxWr)} max_sge ${String(maxSge)} srq_limit ${String(limit)}`);
    const ctx = this.context;
    const key = newKey();
    const [h, wr, sge] = check(ctx._b.createSrq(this._h, maxWr, maxSge, limit, key), op);
    const srq = new NativeSrq(this, ctx._nextSrqHandle(), { maxWr: wr, maxSge: sge, srqLimit: limit }, init.srqContext, h, key);
    ctx._srqCount++;
    this._srqs.add(srq);
    init.attr.maxWr = wr;
    init.attr.maxSge = sge;
    return srq;
  }

  /** `ibv_dealloc_pd()`. EBUSY while MRs, windows, SRQs or QPs use it. */
  override dealloc(): void {
    const op = 'ibv_dealloc_pd';
    if (this.deallocated) throw err('EINVAL', op, 'already deallocated');
    if (this._mrCount > 0 || this.qpCount > 0 || this._mwCount > 0 || this._srqs.size > 0) {
      throw err('EBUSY', op, `${this._mrCount} MR(s), ${this._mwCount} window(s), ${this._srqs.size} SRQ(s) and ${this.qpCount} QP(s) still use it`);
    }
    check(this.context._b.deallocPd(this._h), op);
    super.dealloc();
  }
}
