/**
 * Protection domain (`ibv_alloc_pd`, `ibv_dealloc_pd`) and the calls that create objects in it:
 * `ibv_reg_mr` / `ibv_reg_mr_iova`, `ibv_alloc_mw`, `ibv_create_qp` and `ibv_create_ah` (the
 * device's provider says whether it has windows, and creates QPs and AHs), `ibv_create_srq`
 * (sized and checked as the provider declares).
 */
import { err } from '../errors.js';
import { Ah, ahAttrProblem, copyAhAttr, type AhAttr } from './ah.js';
import { trace, tracing } from '../trace.js';
import { Cq } from './cq.js';
import { ACCESS_ALL, Mr, stagStr } from './mr.js';
import { Mw } from './mw.js';
import type { QpInitAttr, QpLike } from './provider.js';
import { Access, MwType, QpType } from './types.js';
import type { QpCap } from './types.js';
import type { Context } from './context.js';
import type { Qp } from './qp.js';
import { Srq, SrqType, type SrqInitAttr } from './srq.js';

/** Memory `Pd.regMr()` accepts: any ArrayBuffer view (Buffer, Uint8Array ...) or a whole buffer. */
export type MrMemory = ArrayBufferView | ArrayBuffer | SharedArrayBuffer;

interface QpRecord {
  sendCq: Cq;
  recvCq: Cq;
  srq: Srq | null;
}

/** `struct ibv_pd`. Create with `Context.allocPd()`. */
export class Pd {
  /** The owning device context. */
  readonly context: Context;
  /** `handle`: per-context PD number. */
  readonly handle: number;
  /** @internal Registered MRs of this PD. */
  _mrCount = 0;
  /** @internal Its registered MRs (for the resource listing, src/stat/). */
  readonly _mrs = new Set<Mr>();
  /** @internal Allocated memory windows of this PD. */
  _mwCount = 0;
  /** @internal QPs of this PD, with the CQs they are attached to. */
  readonly _qps = new Map<QpLike, QpRecord>();
  /** @internal Live address handles of this PD. */
  readonly _ahs = new Set<Ah>();
  private _nextAhHandle = 1;
  /** @internal Live SRQs of this PD. */
  readonly _srqs = new Set<Srq>();
  private _deallocated = false;

  /** @internal Use `Context.allocPd()`. */
  constructor(context: Context, handle: number) {
    this.context = context;
    this.handle = handle;
    context._pdSet.add(this);
  }

  /** True after {@link dealloc}. */
  get deallocated(): boolean {
    return this._deallocated;
  }

  /**
   * `ibv_reg_mr()` / `ibv_reg_mr_iova()`: register `mem` (not copied: `mr.buf` is a view of it).
   * @param mem the memory; a view registers exactly its bytes. Resizable or growable buffers are
   *   refused (they could shrink under the MR).
   * @param access bitwise OR of `Access` flags. REMOTE_WRITE or REMOTE_ATOMIC require
   *   LOCAL_WRITE (as ibverbs). Rights outside the device's access mask are accepted but not
   *   granted (siw has neither atomics nor memory windows). MW_BIND lets windows be bound to
   *   the MR. ZERO_BASED: the iova defaults to 0.
   * @param iova the MR's address (`ibv_reg_mr_iova`); by default a random, page-aligned
   *   synthetic address whose range (and the guard page after it) no other live MR of the
   *   context overlaps. A safe non-negative integer with `iova + length < 2^53`.
   * @throws RdmaError EINVAL (bad memory, zero length — as siw —, bad access flags, bad iova,
   *   PD deallocated); EFAULT (detached memory, as ibv_reg_mr of unmapped memory); EBADF (the
   *   context is closed); ENOMEM (more than `maxMr` MRs, STag or address space exhausted).
   */
  regMr(mem: MrMemory, access: number, iova?: number): Mr {
    const op = iova === undefined ? 'ibv_reg_mr' : 'ibv_reg_mr_iova';
    this.context._checkAlive(op);
    if (this._deallocated) throw err('EINVAL', op, 'PD deallocated');
    if (!Number.isInteger(access) || access < 0 || (access & ~ACCESS_ALL) !== 0) {
      throw err('EINVAL', op, `access flags ${String(access)}`);
    }
    if ((access & (Access.REMOTE_WRITE | Access.REMOTE_ATOMIC)) !== 0 && (access & Access.LOCAL_WRITE) === 0) {
      throw err('EINVAL', op, 'remote write/atomic access requires local write');
    }
    const buf = toView(mem, op);
    const len = buf.byteLength;
    if (len === 0) throw err('EINVAL', op, 'zero length');
    if (iova !== undefined && (!Number.isSafeInteger(iova) || iova < 0 || len > Number.MAX_SAFE_INTEGER - iova)) {
      throw err('EINVAL', op, `iova ${String(iova)}`);
    }
    const ctx = this.context;
    if (ctx._mrs.size >= ctx._attr.maxMr) throw err('ENOMEM', op, `more than ${ctx._attr.maxMr} MRs`);
    const stag = ctx._mrs._allocStag();
    const drawn = iova === undefined && (access & Access.ZERO_BASED) === 0;
    const addr = iova ?? (drawn ? ctx._mrs._allocVa(len) : 0);
    const mr = new Mr(this, buf, addr, access, stag);
    mr._vaOwned = drawn;
    ctx._mrs._insert(mr);
    this._mrCount++;
    if (tracing('mr')) {
      trace('mr', `MR[${stagStr(stag)}]`, `reg PD[${this.handle}] addr 0x${addr.toString(16)} len ${len} access 0x${access.toString(16)}`);
    }
    return mr;
  }

  /**
   * `ibv_alloc_mw()`: a memory window of `type` in this PD (mw.ts), not bound: a type 1 window
   * valid with length 0, a type 2 window free. Its rkey's index is drawn among those no MR or
   * window of the context uses, its key byte at random (rxe_alloc_mw).
   * @throws RdmaError EOPNOTSUPP on a device without memory windows (libibverbs' answer when the
   *   provider has no `alloc_mw`: siw); EINVAL (a type other than 1 and 2, as
   *   ib_uverbs_alloc_mw; more than `maxMw` windows, as rxe's pool; PD deallocated); whatever the
   *   device's provider refuses.
   */
  allocMw(type: MwType): Mw {
    const op = 'ibv_alloc_mw';
    this.context._checkAlive(op);
    const ctx = this.context;
    const provider = ctx.device._provider(op);
    if (provider.allocMw === undefined) throw err('EOPNOTSUPP', op, `${ctx.device.name} has no memory windows`);
    if (this._deallocated) throw err('EINVAL', op, 'PD deallocated');
    if (type !== MwType.TYPE_1 && type !== MwType.TYPE_2) throw err('EINVAL', op, `mw_type ${String(type)}`);
    if (ctx._mrs.mwCount >= ctx._attr.maxMw) throw err('EINVAL', op, `more than ${ctx._attr.maxMw} memory windows`);
    provider.allocMw(ctx, this, type);
    const mw = new Mw(this, type, ctx._mrs._allocStag(op));
    ctx._mrs._insertMw(mw);
    this._mwCount++;
    if (tracing('mr')) trace('mr', `MW[${stagStr(mw.rkey)}]`, `alloc type ${type} PD[${this.handle}]`);
    return mw;
  }

  /**
   * `ibv_create_qp()`: check `attr` against the device limits, then let the device's provider
   * create the QP, and register it (context QP table, this PD, both CQs).
   * @throws RdmaError EINVAL (bad QP type, CQ missing, destroyed or of another context, a `cap`
   *   field negative, non-integer or above the device limit — maxQpWr, maxSge, maxInlineData —,
   *   PD deallocated, `createFlags` not a 32-bit mask); ENODEV (the device's provider is no
   *   longer registered); whatever the provider throws (EOPNOTSUPP for QP types or create flags
   *   it lacks, ENOMEM ...).
   */
  createQp(attr: QpInitAttr): Qp {
    const op = 'ibv_create_qp';
    this.context._checkAlive(op);
    if (this._deallocated) throw err('EINVAL', op, 'PD deallocated');
    if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no init attributes');
    if (QpType[attr.qpType] === undefined || typeof attr.qpType !== 'number') {
      throw err('EINVAL', op, `qp_type ${String(attr.qpType)}`);
    }
    this._checkCq(attr.sendCq, 'send_cq');
    this._checkCq(attr.recvCq, 'recv_cq');
    const srq = attr.srq;
    if (srq !== undefined && srq !== null) {
      if (!(srq instanceof Srq)) throw err('EINVAL', op, 'srq is not an SRQ');
      if (srq.context !== this.context) throw err('EINVAL', op, 'srq belongs to another device');
      if (srq.destroyed) throw err('EINVAL', op, 'srq destroyed');
    }
    // The receive capabilities of a QP on an SRQ are not looked at (rxe_qp_chk_cap, siw_create_qp).
    this._checkCap(attr.cap, srq instanceof Srq);
    const flags = attr.createFlags ?? 0;
    if (!Number.isInteger(flags) || flags < 0 || flags > 0xffff_ffff) throw err('EINVAL', op, `create_flags ${String(flags)}`);
    const ctx = this.context;
    const provider = ctx.device._provider(op);
    let qp: QpLike;
    try {
      qp = provider.createQp(ctx, this, attr);
    } finally {
      ctx._qpNumSettled();
    }
    if (typeof qp !== 'object' || qp === null || !Number.isInteger(qp.qpNum) || ctx._qps.has(qp.qpNum)) {
      throw err('EIO', op, `provider '${provider.name}' returned a bad QP`);
    }
    ctx._qps.set(qp.qpNum, qp);
    ctx._qpsChanged();
    this._qps.set(qp, { sendCq: attr.sendCq, recvCq: attr.recvCq, srq: srq instanceof Srq ? srq : null });
    attr.sendCq._attachQp(qp);
    attr.recvCq._attachQp(qp);
    if (srq instanceof Srq) srq._attach(qp);
    if (tracing('qp')) trace('qp', `QP[${qp.qpNum}]`, `created on PD[${this.handle}] ${ctx.device.name}${srq instanceof Srq ? ` with ${srq.tag}` : ''}`);
    return qp as Qp;
  }

  /**
   * `ibv_create_ah()`: an address handle for UD sends. The attribute shape is checked here;
   * the device's provider checks it against its ports and GID table.
   * @throws RdmaError EINVAL (malformed attributes; a bad port, GID index or a missing GRH on a
   *   RoCE device; PD deallocated); ENOMEM beyond `maxAh`; EOPNOTSUPP on a device without address
   *   handles (iWARP, as siw).
   */
  createAh(attr: AhAttr): Ah {
    const op = 'ibv_create_ah';
    this.context._checkAlive(op);
    if (this._deallocated) throw err('EINVAL', op, 'PD deallocated');
    const ctx = this.context;
    const provider = ctx.device._provider(op);
    if (provider.createAh === undefined) throw err('EOPNOTSUPP', op, `${ctx.device.name} has no address handles`);
    const bad = ahAttrProblem(attr);
    if (bad !== null) throw err('EINVAL', op, bad);
    ctx._checkPort(attr.portNum, op);
    if (ctx._ahCount >= ctx._attr.maxAh) throw err('ENOMEM', op, `more than ${ctx._attr.maxAh} AHs`);
    const copy = copyAhAttr(attr);
    const data = provider.createAh(ctx, this, copy);
    const ah = new Ah(this, copy, this._nextAhHandle++, data);
    this._ahs.add(ah);
    ctx._ahCount++;
    return ah;
  }

  /**
   * `ibv_create_srq()`: a shared receive queue in this PD (see srq.ts). `attr.attr.maxWr` and
   * `maxSge` are written back as the device sized them (rxe: 2^k - 1 WRs, siw: 2^k).
   * @throws RdmaError EINVAL (max_wr 0 or above `max_srq_wr`, max_sge above `max_srq_sge`, a
   *   negative or — siw — above max_wr srq_limit, PD deallocated); ENOMEM beyond `max_srq`;
   *   EOPNOTSUPP on a device without SRQs and for an srq_type other than BASIC.
   */
  createSrq(init: SrqInitAttr): Srq {
    const op = 'ibv_create_srq';
    this.context._checkAlive(op);
    if (this._deallocated) throw err('EINVAL', op, 'PD deallocated');
    if (typeof init !== 'object' || init === null || typeof init.attr !== 'object' || init.attr === null) throw err('EINVAL', op, 'no init attributes');
    const ctx = this.context;
    const caps = ctx.device._provider(op).srqCaps;
    if (caps === undefined || ctx._attr.maxSrq === 0) throw err('EOPNOTSUPP', op, `${ctx.device.name} has no shared receive queues`);
    if ((init.srqType ?? SrqType.BASIC) !== SrqType.BASIC) throw err('EOPNOTSUPP', op, `srq_type ${String(init.srqType)}`);
    const a = ctx._attr;
    const { maxWr } = init.attr;
    const maxSge = init.attr.maxSge ?? 1;
    const limit = init.attr.srqLimit ?? 0;
    if (!Number.isInteger(maxWr) || maxWr <= 0 || maxWr > a.maxSrqWr) throw err('EINVAL', op, `max_wr ${String(maxWr)} (device max ${a.maxSrqWr})`);
    if (!Number.isInteger(maxSge) || maxSge < 0 || maxSge > a.maxSrqSge) throw err('EINVAL', op, `max_sge ${String(maxSge)} (device max ${a.maxSrqSge})`);
    if (!Number.isInteger(limit) || limit < 0 || limit > 0xffff_ffff) throw err('EINVAL', op, `srq_limit ${String(limit)}`);
    if (caps.limitCheckedAtCreate && limit > maxWr) throw err('EINVAL', op, `srq_limit ${limit} > max_wr ${maxWr}`);
    if (ctx._srqCount >= a.maxSrq) throw err('ENOMEM', op, `more than ${a.maxSrq} SRQs`);
    const attr = { maxWr: caps.depth(maxWr), maxSge: Math.max(maxSge, caps.minSge), srqLimit: limit };
    const srq = new Srq(this, ctx._nextSrqHandle(), caps, attr, init.srqContext);
    ctx._srqCount++;
    this._srqs.add(srq);
    init.attr.maxWr = attr.maxWr;
    init.attr.maxSge = attr.maxSge;
    if (tracing('qp')) trace('qp', srq.tag, `created on PD[${this.handle}] ${ctx.device.name} max_wr ${attr.maxWr} max_sge ${attr.maxSge} srq_limit ${limit}`);
    return srq;
  }

  /** @internal `Srq.destroy()`. */
  _srqDestroyed(srq: Srq): void {
    if (this._srqs.delete(srq)) this.context._srqCount--;
  }

  /** @internal `Ah.destroy()`: forget it and let the provider release its data. */
  _ahDestroyed(ah: Ah): void {
    if (!this._ahs.delete(ah)) return;
    const ctx = this.context;
    ctx._ahCount--;
    ctx.device._provider('ibv_destroy_ah').destroyAh?.(ctx, ah._provider);
  }

  /**
   * @internal For the provider's QP `destroy()`: unregister it — remove it from the context's
   * QP table (which frees its number), detach it from its CQs and this PD, drop its unread async
   * events. Idempotent. (A QP that instead removes itself from `ctx._qps` and detaches from its
   * CQs is also fine: the PD then forgets it lazily.)
   */
  _releaseQp(qp: QpLike): void {
    const ctx = this.context;
    if (ctx._qps.get(qp.qpNum) === qp) {
      ctx._qps.delete(qp.qpNum);
      ctx._qpsChanged();
    }
    const rec = this._qps.get(qp);
    if (rec === undefined) return;
    this._qps.delete(qp);
    rec.sendCq._detachQp(qp);
    rec.recvCq._detachQp(qp);
    rec.srq?._detach(qp);
    ctx._async.purge(qp);
  }

  /** Number of live QPs of this PD (QPs still in the context's QP table). */
  get qpCount(): number {
    this._sweepQps();
    return this._qps.size;
  }

  /** Forget QPs that left the context's QP table (destroyed without `_releaseQp`). */
  private _sweepQps(): void {
    const live = this.context._qps;
    for (const qp of this._qps.keys()) if (live.get(qp.qpNum) !== qp) this._releaseQp(qp);
  }

  /**
   * `ibv_dealloc_pd()`.
   * @throws RdmaError EBUSY while MRs, memory windows, QPs, SRQs or AHs of this PD exist; EINVAL
   *   if already deallocated.
   */
  dealloc(): void {
    if (this._deallocated) throw err('EINVAL', 'ibv_dealloc_pd', 'already deallocated');
    this._sweepQps();
    if (this._mrCount > 0 || this._qps.size > 0) {
      throw err('EBUSY', 'ibv_dealloc_pd', `${this._mrCount} MR(s) and ${this._qps.size} QP(s) still use it`);
    }
    if (this._mwCount > 0) throw err('EBUSY', 'ibv_dealloc_pd', `${this._mwCount} memory window(s) still use it`);
    if (this._ahs.size > 0) throw err('EBUSY', 'ibv_dealloc_pd', `${this._ahs.size} AH(s) still use it`);
    if (this._srqs.size > 0) throw err('EBUSY', 'ibv_dealloc_pd', `${this._srqs.size} SRQ(s) still use it`);
    this._deallocated = true;
    this.context._pdDeallocated(this);
  }

  /**
   * `using` / `await using`: `ibv_dealloc_pd()` at the end of the scope; nothing if already
   * deallocated.
   * @throws RdmaError what {@link dealloc} throws (EBUSY while MRs, windows, QPs, SRQs or AHs
   *   of the PD exist): disposal reports, never leaks silently.
   */
  [Symbol.dispose](): void {
    if (!this._deallocated) this.dealloc();
  }

  private _checkCq(cq: unknown, name: string): void {
    if (!(cq instanceof Cq)) throw err('EINVAL', 'ibv_create_qp', `${name} is not a CQ`);
    if (cq.context !== this.context) throw err('EINVAL', 'ibv_create_qp', `${name} belongs to another device`);
    if (cq.destroyed) throw err('EINVAL', 'ibv_create_qp', `${name} destroyed`);
  }

  private _checkCap(cap: Partial<QpCap> | undefined, srq: boolean): void {
    if (typeof cap !== 'object' || cap === null) throw err('EINVAL', 'ibv_create_qp', 'no cap');
    const a = this.context._attr;
    checkCapField(cap, 'maxSendWr', a.maxQpWr);
    checkCapField(cap, 'maxSendSge', a.maxSge);
    if (!srq) {
      checkCapField(cap, 'maxRecvWr', a.maxQpWr);
      checkCapField(cap, 'maxRecvSge', a.maxSge);
    }
    checkCapField(cap, 'maxInlineData', a.maxInlineData);
  }
}

/** EINVAL unless `cap[k]` is absent or an integer in [0, max]. */
function checkCapField(cap: Partial<QpCap>, k: keyof QpCap, max: number): void {
  const v = cap[k];
  if (v === undefined) return;
  if (!Number.isInteger(v) || v < 0 || v > max) throw err('EINVAL', 'ibv_create_qp', `cap.${k} ${String(v)} (device max ${max})`);
}

/**
 * @internal Whether `buffer` was detached (transferred, e.g. by `structuredClone` or
 * `postMessage` with a transfer list): its memory is gone. Node 20 has no `detached` getter; a
 * detached buffer has length 0 and refuses every view.
 */
export function isDetached(buffer: ArrayBufferLike): boolean {
  const d = (buffer as { detached?: unknown }).detached;
  if (typeof d === 'boolean') return d;
  if (buffer.byteLength !== 0 || !(buffer instanceof ArrayBuffer)) return false;
  try {
    new Uint8Array(buffer);
    return false;
  } catch {
    return true;
  }
}

/**
 * @internal EFAULT for memory that is gone (a detached buffer, or a view of one): ib_umem_get
 * answers so when pin_user_pages_fast finds the range unmapped, which is what `ibv_reg_mr` of
 * freed memory meets.
 */
export function checkAttached(buffer: ArrayBufferLike, op: string): void {
  if (isDetached(buffer)) throw err('EFAULT', op, 'memory detached (its ArrayBuffer was transferred)');
}

/** A Uint8Array over exactly the bytes of `mem`. */
function toView(mem: MrMemory, op: string): Uint8Array {
  let buffer: ArrayBufferLike;
  let offset = 0;
  let length: number;
  if (ArrayBuffer.isView(mem)) {
    buffer = mem.buffer;
    offset = mem.byteOffset;
    length = mem.byteLength;
  } else if (mem instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && mem instanceof SharedArrayBuffer)) {
    buffer = mem;
    length = mem.byteLength;
  } else {
    throw err('EINVAL', op, 'memory must be an ArrayBuffer, SharedArrayBuffer or ArrayBuffer view');
  }
  checkAttached(buffer, op);
  const flags = buffer as { resizable?: boolean; growable?: boolean };
  if (flags.resizable === true || flags.growable === true) throw err('EINVAL', op, 'resizable/growable buffers cannot be registered');
  return new Uint8Array(buffer, offset, length);
}
