/**
 * Memory windows (`ibv_alloc_mw`, `ibv_bind_mw`, `ibv_dealloc_mw`; IBTA 10.6.7), after rdma_rxe's
 * rxe_mw.c: a window is a remotely accessible part of a registered region, named by its own
 * rkey, with its own access rights, bound and moved without registering memory again.
 *
 * - **Type 1** windows are bound by `qp.bindMw()` (ibv_bind_mw: the device posts a BIND_MW work
 *   request on the QP) and stay bound until bound again (a bind with no MR and length 0 unbinds
 *   them). They belong to their PD: any QP of it may use them. They cannot be invalidated
 *   (o10-37.2.26) and cannot be zero based (o10-36.2.2).
 * - **Type 2** (2B) windows are bound by a BIND_MW work request, only while free (o10-37.2.30),
 *   to a QP of their PD (C10-72) that is then the only QP remote accesses through them may
 *   arrive on; LOCAL_INV or a peer's SEND_WITH_INV frees them again.
 *
 * The rkey: `index << 8 | key`, the index drawn from the same space as the MRs' STags (one
 * table, {@link MrTable}), the key byte at random at allocation; every bind takes the key byte
 * of the rkey the bind names, so an rkey handed out before a bind no longer works after it. An
 * rkey names a window or an MR by its index (rxe's `rkey_is_mw`).
 *
 * The bind rules ({@link bindMw}: rxe_bind_mw / rxe_check_bind_mw / rxe_do_bind_mw) and the
 * remote access through a window ({@link remoteKeyOffset}: rxe_resp.c check_rkey with
 * rxe_lookup_mw) live here, with the device-neutral objects; a device that has windows runs them
 * from its requester (BIND_MW, LOCAL_INV) and responder (RDMA READ/WRITE, atomics,
 * SEND_WITH_INV). A remote access through a window must lie inside the window and inside its
 * MR. (rxe checks only the MR's range, so a peer could reach bytes of the MR outside the window
 * through it; IBTA C10-75 bounds a window's accesses by the window, and so does this.)
 *
 * A window holds its MR: the MR can be neither deregistered (IBA 10.6.7.2.6, rxe_dereg_mr:
 * EINVAL) nor invalidated (rxe_invalidate_mr) while windows are bound to it; a PD with windows
 * cannot be deallocated (EBUSY).
 */
import { err } from '../errors.js';
import { trace, tracing } from '../trace.js';
import { StateCell } from '../util/state.js';
import { MrCheck, invalidateStag, mrOffset, remoteAccessOffset, stagStr, type Mr, type MrTable } from './mr.js';
import type { Context } from './context.js';
import type { Pd } from './pd.js';
import { Access, MwType } from './types.js';

/** The states of a window (rxe `enum rxe_mw_state`). */
export enum MwState {
  /** Deallocated. */
  INVALID = 'INVALID',
  /** A type 2 window not bound (allocated, or invalidated): a BIND_MW may bind it. */
  FREE = 'FREE',
  /** Bound (type 1: always, possibly to nothing, length 0). */
  VALID = 'VALID',
}

/** The access rights a window may be bound with (rxe `RXE_ACCESS_SUPPORTED_MW`). */
export const MW_ACCESS_SUPPORTED = Access.REMOTE_READ | Access.REMOTE_WRITE | Access.REMOTE_ATOMIC | Access.ZERO_BASED | Access.MW_BIND;

/** `ibv_inc_rkey()`: `rkey` with its key byte (bits 0-7) increased by one, modulo 256. */
export function incRkey(rkey: number): number {
  return ((rkey & ~0xff) | ((rkey + 1) & 0xff)) >>> 0;
}

/** `struct ibv_mw`. Create with `Pd.allocMw()`. */
export class Mw {
  readonly context: Context;
  readonly pd: Pd;
  readonly type: MwType;
  /** `handle`: the rkey's index. */
  readonly handle: number;
  /**
   * `ibv_mw.rkey`, the application's copy of the window's rkey: `qp.bindMw()` sets it to the rkey
   * it binds with when it posts the bind (an error completion leaves the window with the old one,
   * as rdma-core: undo it then). After a type 2 bind or invalidation the application sets it
   * itself. A bind names the window by this rkey, which must be the one the window has.
   */
  rkey: number;
  /** @internal The window's rkey as the device knows it (rxe `mw->rkey`). */
  _key: number;
  /** @internal FREE / VALID / INVALID. */
  readonly _st: StateCell<MwState>;
  /** @internal The bound region (null: none). */
  _mr: Mr | null = null;
  /** @internal Start (an address in the MR's space), length and access rights of the binding. */
  _addr = 0;
  _length = 0;
  _access = 0;
  /** @internal Type 2: the QP it was bound through, the only one accesses may arrive on. */
  _qp: object | null = null;

  /** @internal Use `Pd.allocMw()`. */
  constructor(pd: Pd, type: MwType, rkey: number) {
    this.context = pd.context;
    this.pd = pd;
    this.type = type;
    this.handle = rkey >>> 8;
    this.rkey = rkey;
    this._key = rkey;
    // rxe_alloc_mw: a type 2 window starts free, a type 1 window valid (bound to nothing).
    this._st = new StateCell<MwState>('mr', () => `MW[${stagStr(this._key)}]`, type === MwType.TYPE_2 ? MwState.FREE : MwState.VALID);
  }

  /** FREE, VALID or, once deallocated, INVALID. */
  get state(): MwState {
    return this._st.state;
  }

  /** The bound range: `{ mr, addr, length, access }` (mr null: not bound). */
  get binding(): { mr: Mr | null; addr: number; length: number; access: number } {
    return { mr: this._mr, addr: this._addr, length: this._length, access: this._access };
  }

  /**
   * `ibv_dealloc_mw()`: the window's rkey stops working at once; the MR it was bound to is
   * released.
   * @throws RdmaError EINVAL if already deallocated.
   */
  dealloc(): void {
    if (this._st.is(MwState.INVALID)) throw err('EINVAL', 'ibv_dealloc_mw', 'MW already deallocated');
    // rxe_mw_cleanup.
    release(this);
    this._st.move(MwState.INVALID, 'dealloc');
    this.context._mrs._removeMw(this);
    this.pd._mwCount--;
  }

  /**
   * `using` / `await using`: `ibv_dealloc_mw()` at the end of the scope; nothing if already
   * deallocated.
   * @throws RdmaError what {@link dealloc} throws (the device's errno): disposal reports, never
   *   leaks silently.
   */
  [Symbol.dispose](): void {
    if (!this._st.is(MwState.INVALID)) this.dealloc();
  }
}

/** Drop the window's binding (its MR and QP), as rxe_do_invalidate_mw / rxe_mw_cleanup. */
function release(mw: Mw): void {
  if (mw._mr !== null) mw._mr._mwCount--;
  mw._mr = null;
  mw._qp = null;
  mw._access = 0;
  mw._addr = 0;
  mw._length = 0;
}

/** A BIND_MW work request's operands as the send queue keeps them (rxe `wr.mw`). */
export interface BindWqe {
  /** `mw_rkey`: the window's rkey as the application named it when posting (`mw.rkey`). */
  mwRkey: number;
  /** The new rkey (its key byte is taken). */
  rkey: number;
  /** `mr_lkey`: the region's lkey (0 without one). */
  mrLkey: number;
  addr: number;
  length: number;
  access: number;
}

/** Why a bind fails: every reason completes the BIND_MW with MW_BIND_ERR (rxe returns EINVAL / EOPNOTSUPP). */
export type BindProblem = string | null;

/**
 * Execute a BIND_MW work request posted on `qp` (of `pd`) — rxe_bind_mw: the window named by
 * `b.mwRkey` (exactly its current rkey), the MR named by `b.mrLkey` (exactly its lkey; none for a
 * zero-length bind), access rights within what windows take, then rxe_check_bind_mw's rules:
 * - type 1: the window valid (always, while allocated), not zero based (o10-36.2.2);
 * - type 2: the window free (o10-37.2.30), the QP of the window's PD (C10-72), an MR and a
 *   non-zero length (o10-37.2.40);
 * - with an MR: the MR not zero based, granting MW_BIND (C10-73), granting LOCAL_WRITE if the
 *   window is writable or atomic (C10-74), and the window inside the MR (C10-75: `[addr,
 *   addr+length)` for a VA-based window, `length` at most the MR's for a zero-based one).
 * Then rxe_do_bind_mw: the rkey's key byte becomes `b.rkey`'s, the binding replaces the old one,
 * a type 2 window remembers the QP.
 * @returns null when bound, else why not.
 */
export function bindMw(table: MrTable, qp: object, pd: Pd, b: BindWqe): BindProblem {
  const mw = table.lookupMw(b.mwRkey);
  if (mw === undefined || mw._key !== b.mwRkey) return `no window with rkey ${stagStr(b.mwRkey)}`;
  let mr: Mr | null = null;
  if (b.length !== 0) {
    const m = table.lookup(b.mrLkey);
    if (m === undefined) return `no MR with lkey ${stagStr(b.mrLkey)}`;
    mr = m;
  }
  if ((b.access & ~MW_ACCESS_SUPPORTED) !== 0) return `access 0x${b.access.toString(16)} not supported for windows`;
  const bad = bindCheck(mw, pd, mr, b);
  if (bad !== null) return bad;
  // rxe_do_bind_mw.
  const key = ((mw._key & ~0xff) | (b.rkey & 0xff)) >>> 0;
  release(mw);
  mw._key = key;
  mw._access = b.access;
  mw._addr = b.addr;
  mw._length = b.length;
  if (b.length !== 0 && mr !== null) {
    mw._mr = mr;
    mr._mwCount++;
  }
  if (mw.type === MwType.TYPE_2) mw._qp = qp;
  mw._st.move(MwState.VALID, 'bind');
  if (tracing('mr')) {
    trace('mr', `MW[${stagStr(key)}]`, `bound to ${mr === null ? 'nothing' : `MR[${stagStr(mr.lkey)}]`} addr 0x${b.addr.toString(16)} len ${b.length} access 0x${b.access.toString(16)}`);
  }
  return null;
}

/** rxe_check_bind_mw. */
function bindCheck(mw: Mw, pd: Pd, mr: Mr | null, b: BindWqe): BindProblem {
  const zeroBased = (b.access & Access.ZERO_BASED) !== 0;
  if (mw.type === MwType.TYPE_1) {
    if (!mw._st.is(MwState.VALID)) return 'type 1 window not valid';
    if (zeroBased) return 'type 1 window cannot be zero based';
  } else {
    if (!mw._st.is(MwState.FREE)) return 'type 2 window not free';
    if (mw.pd !== pd) return 'type 2 window of another PD than the QP';
    if (mr === null || b.length === 0) return 'type 2 window bound to no MR or zero length';
  }
  if (mr === null) return null;
  // Beyond rxe, which binds to any MR the lkey names and lets the accesses fail later: an MR
  // that is invalidated, deregistered or of another PD than the window is refused here.
  if (!mr.stagValid || mr.pd !== mw.pd) return 'MR invalid or of another PD';
  if ((mr.access & Access.ZERO_BASED) !== 0) return 'MR is zero based';
  if ((mr._perms & Access.MW_BIND) === 0) return 'MR without MW_BIND access';
  if ((b.access & (Access.REMOTE_WRITE | Access.REMOTE_ATOMIC)) !== 0 && (mr._perms & Access.LOCAL_WRITE) === 0) {
    return 'writable window on an MR without LOCAL_WRITE';
  }
  if (!Number.isSafeInteger(b.addr) || !Number.isSafeInteger(b.length) || b.addr < 0 || b.length < 0) return 'window outside the MR';
  if (zeroBased) {
    if (b.length > mr.length) return 'zero-based window longer than the MR';
  } else if (b.addr < mr.addr || b.addr + b.length > mr.addr + mr.length) return 'window outside the MR';
  return null;
}

/**
 * Invalidate `rkey` for a QP of `pd` (LOCAL_INV, a peer's SEND_WITH_INV): rxe's
 * `invalidate_rkey` — a window's rkey frees the window (rxe_invalidate_mw: the exact rkey, not
 * deallocated, type 2 only, o10-37.2.26; a free window stays free), an MR's invalidates the MR
 * ({@link invalidateStag}, refused while windows are bound to it).
 * @returns 0, or a negative {@link MrCheck}.
 */
export function invalidateRkey(ctx: Context, pd: Pd, rkey: number): number {
  const mw = ctx._mrs.lookupMw(rkey);
  if (mw === undefined) return invalidateStag(ctx, pd, rkey);
  if (mw._key !== rkey || mw._st.is(MwState.INVALID)) return MrCheck.INVALID_STAG;
  if (mw.type === MwType.TYPE_1) return MrCheck.ACCESS;
  if (mw._st.is(MwState.FREE)) return 0;
  release(mw);
  mw._st.move(MwState.FREE, 'invalidated');
  return 0;
}

/**
 * A remote access of `len` bytes at `va` with rkey `rkey`, arriving on `qp` of `pd` (rxe_resp.c
 * check_rkey): an MR's rkey is checked by {@link remoteAccessOffset}; a window's by
 * rxe_lookup_mw — the exact rkey, the QP's PD, for type 2 the QP it was bound through, a
 * non-zero length, every right of `access` granted by the window, bound (VALID) — and then the
 * range: `va` (an offset into the window when it is zero based) through `va + len` inside the
 * window, and inside its MR ({@link mrOffset}; the MR's own rights are not asked: the bind
 * checked them). A zero-length access is accepted without any check (returns 0).
 *
 * The MR found is left in `ctx._mrs.last` (undefined on failure or zero length).
 * @returns offset into that MR's `buf` (>= 0), or a negative {@link MrCheck}.
 */
export function remoteKeyOffset(ctx: Context, qp: object, pd: Pd, rkey: number, va: number, len: number, access: number): number {
  const table = ctx._mrs;
  table.last = undefined;
  if (len === 0) return 0;
  const mr = table.lookup(rkey);
  if (mr !== undefined || !table.hasMws) {
    const off = remoteAccessOffset(mr, pd, rkey, va, len, access);
    if (off >= 0) table.last = mr;
    return off;
  }
  const mw = table.lookupMw(rkey);
  if (mw === undefined || mw._key !== rkey || !mw._st.is(MwState.VALID)) return MrCheck.INVALID_STAG;
  if (mw.pd !== pd || (mw.type === MwType.TYPE_2 && mw._qp !== qp)) return MrCheck.PD_MISMATCH;
  const wmr = mw._mr;
  if (mw._length === 0 || wmr === null) return MrCheck.INVALID_STAG;
  if ((mw._access & access) !== access) return MrCheck.ACCESS;
  if (!Number.isSafeInteger(va) || !Number.isSafeInteger(len) || len < 0) return MrCheck.BOUNDS;
  const zb = (mw._access & Access.ZERO_BASED) !== 0;
  const start = zb ? mw._addr + va : va;
  const inWin = start - mw._addr;
  if (inWin < 0 || len > mw._length || inWin > mw._length - len) return MrCheck.BOUNDS;
  const off = mrOffset(wmr, pd, start, len, 0);
  if (off >= 0) table.last = wmr;
  return off;
}
