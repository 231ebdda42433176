/**
 * Memory regions (`ibv_reg_mr`, `ibv_dereg_mr`) and the access checks the transport runs on
 * every local SGE and every tagged (remote) access, after siw_mem.c.
 *
 * STags (siw's layout): `stag = (index << 8) | key`, lkey == rkey == stag. Both
 * parts are drawn at random for every registration (a CSPRNG, see {@link MrTable}): the index
 * among the indices no live MR of the context uses (never 0, so STag 0 is never issued), the
 * 8-bit key uniformly. The index has 23 bits (up to {@link MAX_STAG_INDEX}, about eight times the
 * device's `max_mr`), so that every STag is below 2^31: JavaScript engines keep such integers
 * unboxed (V8's small integers are 31 bits plus sign), while an STag at or above 2^31 is a
 * heap number and, the first time one appears, changes the representation of every key field
 * that holds it (SGEs, WQEs, FPDU headers) and throws away the code compiled for the old one.
 * STags are opaque 32-bit values on the wire (RFC 5040); a peer sees ours with bit 31 clear.
 * Linux siw draws the index at random too (siw_mr_add_mem: a random starting point for
 * xa_alloc_cyclic, 24 bits) and always uses key 0; a remote peer here has 31 unknown bits to
 * guess instead of 24. A stale STag of a deregistered MR names a later MR only if both parts are
 * drawn again (2^-31 per registration).
 *
 * Addresses: JavaScript has no pointers, so each MR gets a synthetic virtual address (its iova),
 * drawn at random for every registration: page aligned, in `[MR_VA_BASE, MR_VA_LIMIT)` (2^52
 * bytes, 40 bits of page number), never overlapping another live MR's range or the unmapped guard
 * page after it; or the caller picks one (`ibv_reg_mr_iova`, ZERO_BASED). SGE `addr` and RDMA
 * `remoteAddr` values are addresses in that space; `mr.buf[addr - mr.addr]` is the byte. All
 * addresses and lengths are JS numbers below 2^53. What protects a region against a remote peer
 * (rkey, address, PD) is described in docs/security.md.
 *
 * ## Check functions and their return protocol
 *
 * {@link mrOffset}, {@link localSgeOffset} and {@link remoteAccessOffset} return, on success,
 * the byte offset into `mr.buf` (>= 0) and allocate nothing; on failure a negative
 * {@link MrCheck} code, numbered like siw's `enum siw_access_state` (negated):
 *
 * | code | value | meaning | local WC status | remote (DDP tagged) error |
 * |---|---|---|---|---|
 * | INVALID_STAG | -1 | no MR with this exact STag (unknown index, key mismatch, deregistered, invalidated, memory detached) | LOC_PROT_ERR | invalid STag |
 * | BOUNDS | -2 | `[addr, addr+len)` not inside the MR, or addr/len not a safe non-negative integer | LOC_PROT_ERR | base or bounds violation |
 * | ACCESS | -3 | MR lacks a required access right | LOC_PROT_ERR (LOC_ACCESS_ERR) | access rights violation |
 * | PD_MISMATCH | -4 | MR belongs to another PD than the QP | LOC_PROT_ERR | STag not associated with RDMAP stream |
 *
 * Checks run in siw_check_mem()'s order: STag valid, PD, access rights, bounds.
 * Zero-length accesses: {@link localSgeOffset} and {@link remoteAccessOffset} accept any
 * zero-length access without looking at the STag and return 0 (siw skips zero-length SGEs in
 * siw_check_sgl_tx() and does not check the STag of a zero-length WRITE in siw_proc_write());
 * the 0 must not be used to index anything. {@link mrOffset} is strict: a zero-length access
 * must still name a valid MR and lie within `[addr, addr+length]`.
 */
import { err } from '../errors.js';
import { trace, tracing } from '../trace.js';
import { Access } from './types.js';
import type { Sge } from './types.js';
import type { Context } from './context.js';
import type { Pd } from './pd.js';
import type { Mw } from './mw.js';
import { random } from '../util/random.js';

/** Lowest synthetic MR address (4 GiB; addresses below it are never handed out). */
export const MR_VA_BASE = 2 ** 32;
/** End of the synthetic address space (exclusive): every synthetic MR lies below 2^52. */
export const MR_VA_LIMIT = 2 ** 52;
/** Page size of the synthetic address space (and `page_size_cap`). */
export const MR_PAGE_SIZE = 4096;
/** Largest STag index (23 bits: every STag is below 2^31, see the module comment). */
export const MAX_STAG_INDEX = 0x7f_ffff;

/** All `enum ibv_access_flags` bits this package knows. */
export const ACCESS_ALL =
  Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC | Access.MW_BIND | Access.ZERO_BASED;

/** `enum ibv_rereg_mr_flags`: what `ibv_rereg_mr` changes. */
export const ReregMrFlag = {
  /** The memory (address and length). */
  CHANGE_TRANSLATION: 1 << 0,
  /** The protection domain. */
  CHANGE_PD: 1 << 1,
  /** The access flags. */
  CHANGE_ACCESS: 1 << 2,
} as const;

/** `IBV_REREG_MR_FLAGS_SUPPORTED`. */
const REREG_FLAGS_SUPPORTED = ReregMrFlag.CHANGE_TRANSLATION | ReregMrFlag.CHANGE_PD | ReregMrFlag.CHANGE_ACCESS;

/** Negative results of the MR checks (see the module comment for the mapping). */
export enum MrCheck {
  INVALID_STAG = -1,
  BOUNDS = -2,
  ACCESS = -3,
  PD_MISMATCH = -4,
}

/** Human-readable text of a check result (`'ok'` for offsets >= 0). */
export function mrCheckStr(code: number): string {
  if (code >= 0) return 'ok';
  return MR_CHECK_STR[code] ?? `unknown MR check result ${code}`;
}

const MR_CHECK_STR: Record<number, string> = {
  [MrCheck.INVALID_STAG]: 'invalid STag',
  [MrCheck.BOUNDS]: 'base or bounds violation',
  [MrCheck.ACCESS]: 'access rights violation',
  [MrCheck.PD_MISMATCH]: 'protection domain mismatch',
};

/** Format an STag as traces print it: `0x0000a100`. */
export function stagStr(stag: number): string {
  return `0x${(stag >>> 0).toString(16).padStart(8, '0')}`;
}

/** `struct ibv_mr`. Create with `Pd.regMr()`. */
export class Mr {
  /** The owning device context. */
  readonly context: Context;
  /** The protection domain. */
  readonly pd: Pd;
  /** A view of the registered memory (never a copy): byte `i` is at address `addr + i`. */
  readonly buf: Uint8Array;
  /** The MR's (synthetic or caller-given) virtual address, the iova. */
  readonly addr: number;
  /** Length in bytes. */
  readonly length: number;
  /** The access flags requested at registration (`enum ibv_access_flags` bits). */
  readonly access: number;
  /** Local key (= the STag). */
  readonly lkey: number;
  /** Remote key (= the STag). */
  readonly rkey: number;
  /** `handle`: the STag index. */
  readonly handle: number;
  /**
   * @internal The rights enforced: `access` within the device's access mask (the provider's
   * `accessMask`; siw: local write, remote write, remote read). Local read is always allowed.
   */
  readonly _perms: number;
  /**
   * @internal `buf` as a Buffer (the same memory; `buf` itself when it is one), made once here
   * so that the data path resolves an access to a Buffer without a check or lookup per FPDU.
   */
  readonly _bytes: Buffer;
  /** @internal False once deregistered or invalidated. */
  _stagValid = true;
  /** @internal Memory windows bound to it (rxe `num_mw`): it can be neither deregistered nor invalidated. */
  _mwCount = 0;
  /** @internal The address was drawn by the context's {@link MrTable} (freed on dereg). */
  _vaOwned = false;
  private _registered = true;

  /** @internal Use `Pd.regMr()`. */
  constructor(pd: Pd, buf: Uint8Array, addr: number, access: number, stag: number) {
    this.context = pd.context;
    this.pd = pd;
    this.buf = buf;
    this.addr = addr;
    this.length = buf.byteLength;
    this.access = access;
    this.lkey = stag;
    this.rkey = stag;
    this.handle = stag >>> 8;
    this._perms = access & pd.context._accessMask;
    this._bytes = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    // Cleared at deregistration: mutable from the first MR on (see util/arrays.ts).
    this._stagValid = false;
    this._stagValid = true;
    this._registered = false;
    this._registered = true;
    pd._mrs.add(this);
  }

  /** True until {@link dereg}. */
  get registered(): boolean {
    return this._registered;
  }

  /** False once deregistered or its STag invalidated (then every access check fails). */
  get stagValid(): boolean {
    return this._stagValid;
  }

  /**
   * `ibv_rereg_mr()`: change the region's memory (`ReregMrFlag.CHANGE_TRANSLATION`, `mem`), PD
   * (`CHANGE_PD`, `pd`) or access flags (`CHANGE_ACCESS`, `access`) in place, keeping its keys.
   * libibverbs' checks come first: EINVAL for unknown flags, for CHANGE_TRANSLATION without
   * memory, for access flags without CHANGE_ACCESS. Then the device decides, and none of ours
   * rereg: rdma-core's siw and rxe providers have no `rereg_mr` op (rxe's kernel driver can change
   * the PD and access, but userspace never reaches it), so libibverbs' default op answers
   * EOPNOTSUPP; the native backend's addon has no rereg either. The region is unchanged then.
   * @throws RdmaError EINVAL (bad input, deregistered), EOPNOTSUPP (the device cannot rereg).
   */
  rereg(flags: number, pd: Pd | null, mem: ArrayBufferView | ArrayBuffer | SharedArrayBuffer | null, access: number): void {
    const op = 'ibv_rereg_mr';
    if (!this._registered) throw err('EINVAL', op, 'MR deregistered');
    if (!Number.isInteger(flags) || flags < 0 || (flags & ~REREG_FLAGS_SUPPORTED) !== 0) throw err('EINVAL', op, `flags ${String(flags)}`);
    if (flags & ReregMrFlag.CHANGE_TRANSLATION && (mem === null || mem.byteLength === 0)) throw err('EINVAL', op, 'CHANGE_TRANSLATION without memory');
    if (!Number.isInteger(access) || (access !== 0 && !(flags & ReregMrFlag.CHANGE_ACCESS))) throw err('EINVAL', op, 'access flags without CHANGE_ACCESS');
    const p = this.context.device._provider(op);
    if (!p.reregMr) throw err('EOPNOTSUPP', op, `${this.context.device.name} cannot re-register memory`);
    p.reregMr(this, flags, pd, mem, access);
  }

  /**
   * `ibv_dereg_mr()`. The STag becomes invalid at once: remote accesses get an invalid-STag
   * error, local SGEs using it a protection error. (Work requests already in progress that hold
   * an offset keep using the memory until their current segment ends.)
   * @throws RdmaError EINVAL if already deregistered, or while memory windows are bound to it
   *   (IBA 10.6.7.2.6, rxe_dereg_mr).
   */
  dereg(): void {
    if (!this._registered) throw err('EINVAL', 'ibv_dereg_mr', 'MR already deregistered');
    if (this._mwCount > 0) throw err('EINVAL', 'ibv_dereg_mr', `${this._mwCount} memory window(s) bound to it`);
    this._registered = false;
    this._stagValid = false;
    this.context._mrs._remove(this);
    this.pd._mrs.delete(this);
    this.pd._mrCount--;
    if (tracing('mr')) trace('mr', `MR[${stagStr(this.lkey)}]`, 'dereg');
  }

  /**
   * `using` / `await using`: `ibv_dereg_mr()` at the end of the scope; nothing if already
   * deregistered.
   * @throws RdmaError what {@link dereg} throws (EINVAL while memory windows are bound to it):
   *   disposal reports, never leaks silently.
   */
  [Symbol.dispose](): void {
    if (this._registered) this.dereg();
  }
}


/**
 * Synthetic address space layout: `[MR_VA_BASE, MR_VA_LIMIT)` cut into slots of 2^28 bytes
 * (2^24 − 16 slots). A region and its guard page occupy one slot, or several consecutive ones
 * when larger, and a slot holds at most one region, so live regions never overlap and a free
 * place is found in a few random draws even with a million MRs (siw's `max_mr`).
 */
const VA_SLOT_SHIFT = 28;
const VA_SLOT = 2 ** VA_SLOT_SHIFT;
const VA_FIRST_SLOT = MR_VA_BASE / VA_SLOT;
const VA_SLOTS = MR_VA_LIMIT / VA_SLOT - VA_FIRST_SLOT;
/** Random draws before a registration gives up (ENOMEM); each misses with probability ≤ fill. */
const MAX_DRAWS = 256;

/**
 * The device-wide MR table (`siw_device.mem_xa`) and synthetic address allocator of a context.
 * Every STag and every synthetic address is drawn at random (see the module comment); lookups by
 * STag are one hash-map probe. Memory windows (mw.ts) draw their rkey indices from the same
 * space, so an index names an MR or a window, never both.
 */
export class MrTable {
  /**
   * The MR found by the last {@link localSgeOffset} or `remoteKeyOffset` (mw.ts) call
   * (`undefined` for a zero-length access or an unknown key). Read it right after a successful
   * call to get the MR without allocating.
   */
  last: Mr | undefined = undefined;
  /** Live MRs by STag index. */
  private readonly _byIndex = new Map<number, Mr>();
  /** Live memory windows by rkey index. */
  private readonly _mws = new Map<number, Mw>();
  /** The MR the last successful lookup found (a data path mostly touches one MR in a row). */
  private _hot: Mr | undefined = undefined;
  /** Index reserved by {@link _allocStag}, not yet published by {@link _insert}. */
  private _reserved = 0;
  /** Occupied address slots (slot number → the region's first slot). */
  private readonly _vaSlots = new Map<number, number>();

  /** Number of registered MRs. */
  get size(): number {
    return this._byIndex.size;
  }

  /** Number of allocated memory windows. */
  get mwCount(): number {
    return this._mws.size;
  }

  /** Whether any memory window is allocated (an rkey no MR has may then name one). */
  get hasMws(): boolean {
    return this._mws.size > 0;
  }

  /** The allocated memory window whose rkey has the index of `rkey` (its key byte is not compared). */
  lookupMw(rkey: number): Mw | undefined {
    return this._mws.size === 0 ? undefined : this._mws.get(rkey >>> 8);
  }

  /**
   * The registered MR whose STag is exactly `stag` (index and key), else `undefined`. Returns
   * MRs whose STag was invalidated too (the checks report those as INVALID_STAG).
   */
  lookup(stag: number): Mr | undefined {
    const hot = this._hot;
    if (hot !== undefined && hot.lkey === stag) return hot;
    const mr = this._byIndex.get(stag >>> 8);
    if (mr === undefined || mr.lkey !== stag) return undefined;
    this._hot = mr;
    return mr;
  }

  /**
   * @internal Reserve a random unused index and return its new STag (random key).
   * @throws RdmaError ENOMEM when no free index is found (the table is nearly full).
   */
  _allocStag(op = 'ibv_reg_mr'): number {
    for (let i = 0; i < MAX_DRAWS; i++) {
      const stag = random.next() & 0x7fff_ffff;
      const index = stag >>> 8;
      if (index === 0 || index === this._reserved || this._byIndex.has(index) || this._mws.has(index)) continue;
      this._reserved = index;
      return stag;
    }
    throw err('ENOMEM', op, 'STag index space exhausted');
  }

  /** @internal Publish a new memory window in its reserved slot. */
  _insertMw(mw: Mw): void {
    this._mws.set(mw.handle, mw);
    if (this._reserved === mw.handle) this._reserved = 0;
  }

  /** @internal Remove a deallocated memory window: its index becomes free. */
  _removeMw(mw: Mw): void {
    if (this._mws.get(mw.handle) === mw) this._mws.delete(mw.handle);
  }

  /** @internal Publish a new MR in its reserved slot. */
  _insert(mr: Mr): void {
    this._byIndex.set(mr.handle, mr);
    if (this._reserved === mr.handle) this._reserved = 0;
  }

  /** @internal Remove a deregistered MR: its index and synthetic addresses become free. */
  _remove(mr: Mr): void {
    if (this._byIndex.get(mr.handle) !== mr) return;
    this._byIndex.delete(mr.handle);
    if (this._hot === mr) this._hot = undefined;
    if (mr._vaOwned) this._freeVa(mr.addr, mr.length);
    if (this.last === mr) this.last = undefined;
  }

  /**
   * @internal Allocate `length` bytes of synthetic address space at a random page-aligned
   * address: the region and the guard page after it lie in slots no other live region uses.
   * Freed by {@link _remove} (for an MR created with `_vaOwned`).
   * @throws RdmaError ENOMEM if no free place is found.
   */
  _allocVa(length: number): number {
    const span = Math.ceil(length / MR_PAGE_SIZE) * MR_PAGE_SIZE + MR_PAGE_SIZE;
    const slots = Math.ceil(span / VA_SLOT);
    if (slots <= VA_SLOTS) {
      // Pages of slack in the run of slots: the region starts at a random one of them.
      const slackPages = (slots * VA_SLOT - span) / MR_PAGE_SIZE + 1;
      for (let i = 0; i < MAX_DRAWS; i++) {
        const first = VA_FIRST_SLOT + random.below(VA_SLOTS - slots + 1);
        if (!this._slotsFree(first, slots)) continue;
        for (let k = 0; k < slots; k++) this._vaSlots.set(first + k, first);
        return first * VA_SLOT + random.below(slackPages) * MR_PAGE_SIZE;
      }
    }
    throw err('ENOMEM', 'ibv_reg_mr', 'synthetic address space exhausted');
  }

  private _slotsFree(first: number, n: number): boolean {
    for (let k = 0; k < n; k++) if (this._vaSlots.has(first + k)) return false;
    return true;
  }

  private _freeVa(addr: number, length: number): void {
    const first = Math.floor(addr / VA_SLOT);
    const last = Math.floor((addr + Math.ceil(length / MR_PAGE_SIZE) * MR_PAGE_SIZE + MR_PAGE_SIZE - 1) / VA_SLOT);
    for (let s = first; s <= last; s++) if (this._vaSlots.get(s) === first) this._vaSlots.delete(s);
  }
}

/**
 * Check an access of `len` bytes at address `addr` against `mr` (siw_check_mem): STag valid,
 * same PD, every bit of `access` granted, `[addr, addr+len)` inside `[mr.addr, mr.addr+mr.length)`
 * (overflow-safe; non-safe-integer or negative values fail with BOUNDS). Strict for zero length.
 * @param access required rights: 0 for a local read, `Access.LOCAL_WRITE`, `Access.REMOTE_READ`,
 *   `Access.REMOTE_WRITE`.
 * @returns offset into `mr.buf` (>= 0), or a negative {@link MrCheck}.
 */
export function mrOffset(mr: Mr, pd: Pd, addr: number, len: number, access: number): number {
  if (!mr._stagValid || mr.buf.byteLength !== mr.length) return MrCheck.INVALID_STAG;
  if (mr.pd !== pd) return MrCheck.PD_MISMATCH;
  if ((mr._perms & access) !== access) return MrCheck.ACCESS;
  if (!Number.isSafeInteger(addr) || !Number.isSafeInteger(len) || len < 0) return MrCheck.BOUNDS;
  const off = addr - mr.addr;
  if (off < 0 || len > mr.length || off > mr.length - len) return MrCheck.BOUNDS;
  return off;
}

/**
 * Check a local SGE of a work request on a QP of `pd` (siw_check_sge): the lkey must name a
 * registered, valid MR of `pd` covering `[sge.addr, sge.addr + sge.length)`, granting
 * LOCAL_WRITE when `needLocalWrite` (receive buffers, RDMA Read sinks). The MR found is left
 * in `ctx._mrs.last`. A zero-length SGE is accepted without looking at the lkey (returns 0,
 * `last` = undefined).
 * @returns offset into `ctx._mrs.last.buf` (>= 0), or a negative {@link MrCheck}.
 */
export function localSgeOffset(ctx: Context, pd: Pd, sge: Sge, needLocalWrite: boolean): number {
  const table = ctx._mrs;
  if (sge.length === 0) {
    table.last = undefined;
    return 0;
  }
  const mr = table.lookup(sge.lkey);
  table.last = mr;
  if (mr === undefined) return MrCheck.INVALID_STAG;
  return mrOffset(mr, pd, sge.addr, sge.length, needLocalWrite ? Access.LOCAL_WRITE : 0);
}

/**
 * Check a remote (tagged) access — the target of an RDMA Write, the source of an RDMA Read —
 * on a QP of `pd`: `mr` (from `ctx._mrs.lookup(stag)`, possibly cached by the caller across
 * DDP segments) must exist and carry exactly `stag` (a key mismatch is an invalid STag), then
 * {@link mrOffset}. A zero-length access is accepted without any check (returns 0).
 * @param to tagged offset: an address in the MR's address space.
 * @param access `Access.REMOTE_WRITE` or `Access.REMOTE_READ`.
 * @returns offset into `mr.buf` (>= 0), or a negative {@link MrCheck}.
 */
export function remoteAccessOffset(mr: Mr | undefined, pd: Pd, stag: number, to: number, len: number, access: number): number {
  if (len === 0) return 0;
  if (mr === undefined || mr.rkey !== stag) return MrCheck.INVALID_STAG;
  return mrOffset(mr, pd, to, len, access);
}

/**
 * Invalidate an STag (Local Invalidate, Send with Invalidate; siw_invalidate_stag): the MR
 * stays registered but every later check on it fails with INVALID_STAG. Invalidating an already
 * invalid STag succeeds, per the verbs definition. An MR that memory windows are bound to is not
 * invalidated (rxe_invalidate_mr).
 * @returns 0, or MrCheck.INVALID_STAG (no MR with that exact STag), MrCheck.PD_MISMATCH,
 *   MrCheck.ACCESS (windows bound to it).
 */
export function invalidateStag(ctx: Context, pd: Pd, stag: number): number {
  const mr = ctx._mrs.lookup(stag);
  if (mr === undefined) return MrCheck.INVALID_STAG;
  if (mr.pd !== pd) return MrCheck.PD_MISMATCH;
  if (mr._mwCount > 0) return MrCheck.ACCESS;
  mr._stagValid = false;
  if (tracing('mr')) trace('mr', `MR[${stagStr(stag)}]`, 'invalidated');
  return 0;
}
