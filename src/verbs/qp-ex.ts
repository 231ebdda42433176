/**
 * The extended QP's work-request builder (`struct ibv_qp_ex`, ibv_wr_post(3)): `ibv_wr_start`,
 * the settable `wr_id` / `wr_flags`, one builder call per work request (`ibv_wr_send`,
 * `ibv_wr_rdma_write` ...), setters that complete the last one (`ibv_wr_set_sge`,
 * `ibv_wr_set_ud_addr` ...), and `ibv_wr_complete` / `ibv_wr_abort`. After rdma-core's rxe
 * provider (`wr_send` ... `wr_complete`, `check_qp_queue_full`, `set_qp_send_ops`).
 *
 * The builder fills `SendWr` objects it owns and reuses (no object per work request once the
 * largest batch has been seen), and `wrComplete` hands the batch to the QP's post path all or
 * nothing (`Qp._postAll`): every WR is validated there once, by wr-check.ts, before any is
 * queued. Errors are returned as errno numbers, as C's `ibv_wr_complete`:
 * - a builder call the QP was not created for (its `IBV_QP_EX_WITH_*` bit not in
 *   `send_ops_flags`; in C a NULL function pointer): EOPNOTSUPP;
 * - the send queue without room for the batch, more SGEs than `max_send_sge`, inline data above
 *   `max_inline_data` (rxe's builder): ENOSPC;
 * - a setter before any builder call: EINVAL;
 * - a WR the post path refuses (wr-check.ts, the QP's state): EINVAL, or the device's errno.
 * The first error sticks until `wrStart`; `lastError` says what it was.
 *
 * Memory is named here as everywhere in this package — an address inside a registered region and
 * that region's lkey — so the inline setters take `Sge`s: their bytes are copied when
 * `wrComplete` posts (rxe copies at the setter: do not change them in between).
 */
import { PostError } from '../errors.js';
import { Errno, type ErrnoCode } from '../errno.js';
import type { Ah } from './ah.js';
import type { Mw } from './mw.js';
import type { Qp } from './qp.js';
import { SendFlags, WrOpcode, type MwBindInfo, type SendWr, type Sge, type WrId } from './types.js';

/** `enum ibv_qp_create_send_ops_flags`: the builder calls a QP is created for. */
export const QpExSendOps = {
  WITH_RDMA_WRITE: 1 << 0,
  WITH_RDMA_WRITE_WITH_IMM: 1 << 1,
  WITH_SEND: 1 << 2,
  WITH_SEND_WITH_IMM: 1 << 3,
  WITH_RDMA_READ: 1 << 4,
  WITH_ATOMIC_CMP_AND_SWP: 1 << 5,
  WITH_ATOMIC_FETCH_AND_ADD: 1 << 6,
  WITH_LOCAL_INV: 1 << 7,
  WITH_BIND_MW: 1 << 8,
  WITH_SEND_WITH_INV: 1 << 9,
  WITH_TSO: 1 << 10,
  WITH_FLUSH: 1 << 11,
  WITH_ATOMIC_WRITE: 1 << 12,
} as const;

/**
 * The `send_ops_flags` bit of a send opcode: `IBV_QP_EX_WITH_<op>` is `1 << IBV_WR_<op>` for
 * every opcode up to TSO (verbs.h); FLUSH and ATOMIC_WRITE have no `ibv_wr_opcode` here.
 */
export function sendOpFlag(op: WrOpcode): number {
  return 1 << op;
}

/**
 * A work request the builder owns: a `SendWr` with every field present (absent ones
 * `undefined`: one object shape for all), and the operand objects it reuses.
 */
interface BuiltWr {
  wrId: WrId;
  opcode: WrOpcode;
  sgList: Sge[];
  sendFlags: number;
  invalidateRkey: number;
  immData: number;
  rdma: { remoteAddr: number; rkey: number } | undefined;
  atomic: { remoteAddr: number; rkey: number; compareAdd: bigint; swap: bigint } | undefined;
  ud: { ah: Ah; remoteQpn: number; remoteQkey: number } | undefined;
  bindMw: { mw: Mw; rkey: number; bindInfo: MwBindInfo } | undefined;
  /** Its own SGE objects (reused by wrSetSge / wrSetSgeList / the inline setters). */
  own: Sge[];
  rdmaOp: { remoteAddr: number; rkey: number };
  atomicOp: { remoteAddr: number; rkey: number; compareAdd: bigint; swap: bigint };
  udOp: { ah: Ah; remoteQpn: number; remoteQkey: number };
  bindOp: { mw: Mw; rkey: number; bindInfo: MwBindInfo };
}

const NO_SGES: Sge[] = [];

function newBuiltWr(): BuiltWr {
  return {
    wrId: 0,
    opcode: WrOpcode.SEND,
    sgList: NO_SGES,
    sendFlags: 0,
    invalidateRkey: 0,
    immData: 0,
    rdma: undefined,
    atomic: undefined,
    ud: undefined,
    bindMw: undefined,
    own: [],
    rdmaOp: { remoteAddr: 0, rkey: 0 },
    atomicOp: { remoteAddr: 0, rkey: 0, compareAdd: 0n, swap: 0n },
    udOp: { ah: null as unknown as Ah, remoteQpn: 0, remoteQkey: 0 },
    bindOp: { mw: null as unknown as Mw, rkey: 0, bindInfo: { mr: null, addr: 0, length: 0, mwAccessFlags: 0 } },
  };
}

/** The builders of a QP created with `ctx.createQpEx()`, by QP. */
const builders = new WeakMap<Qp, QpEx>();

/**
 * `ibv_qp_to_qp_ex()`: the builder of a QP made by `ctx.createQpEx()` with more than a PD in
 * its `comp_mask` (the provider's `create_qp_ex`), or null (libibverbs: no VERBS_QP_EX).
 */
export function qpToQpEx(qp: Qp): QpEx | null {
  return builders.get(qp) ?? null;
}

/** @internal Give `qp` its builder (ctx.createQpEx). */
export function attachQpEx(qp: Qp, sendOpsFlags: number): QpEx {
  const x = new QpEx(qp, sendOpsFlags);
  builders.set(qp, x);
  return x;
}

/** `struct ibv_qp_ex`: the work-request builder of one QP. */
export class QpEx {
  /** The QP (`qp_base`). */
  readonly qp: Qp;
  /** The `send_ops_flags` it was created with ({@link QpExSendOps}). */
  readonly sendOpsFlags: number;
  /** `wr_id` of the next builder call. */
  wrId: WrId = 0;
  /** `wr_flags` of the next builder call: {@link SendFlags} bits. */
  wrFlags = 0;
  /** What the first error since `wrStart` was (null: none). */
  lastError: PostError | null = null;
  private readonly _wrs: BuiltWr[] = [];
  private _n = 0;
  private _err = 0;
  private _started = false;

  /** @internal Use `ctx.createQpEx()` and {@link qpToQpEx}. */
  constructor(qp: Qp, sendOpsFlags: number) {
    this.qp = qp;
    this.sendOpsFlags = sendOpsFlags;
    // Changed on every batch: mutable from the first builder on (see util/arrays.ts).
    this._started = true;
    this._started = false;
  }

  /**
   * `using` / `await using`: `ibv_destroy_qp()` of {@link qp} at the end of the scope; nothing
   * if already destroyed.
   * @throws RdmaError what `qp.destroy()` throws (the device's errno): disposal reports, never
   *   leaks silently.
   */
  [Symbol.dispose](): void {
    this.qp[Symbol.dispose]();
  }

  /** `ibv_wr_start()`: begin a batch (an unfinished one is dropped). */
  wrStart(): void {
    this._n = 0;
    this._err = 0;
    this.lastError = null;
    this._started = true;
  }

  /**
   * `ibv_wr_complete()`: post the batch, all of it or none.
   * @returns 0, or the errno (module comment): nothing of the batch was posted.
   */
  wrComplete(): number {
    if (!this._started) return this.fail('EINVAL', 0, 'ibv_wr_complete without ibv_wr_start');
    this._started = false;
    const n = this._n;
    this._n = 0;
    if (this._err !== 0) {
      this.releaseRefs(n);
      return this._err;
    }
    if (n === 0) return 0;
    const bad = this.qp._postAll(this._wrs as unknown as readonly SendWr[], n);
    this.releaseRefs(n);
    if (bad === null) return 0;
    // A kernel's post (native backend) says ENOMEM for a full queue; rxe's builder ENOSPC.
    this.lastError = bad.code === 'ENOMEM' ? new PostError('ENOSPC', 'ibv_wr_complete', bad.badWrIndex, 'send queue full') : bad;
    return this.lastError.errno;
  }

  /** `ibv_wr_abort()`: drop the batch. */
  wrAbort(): void {
    this.releaseRefs(this._n);
    this._n = 0;
    this._started = false;
  }

  // -- builders: each one starts a work request ------------------------------------------------

  /** `ibv_wr_send()`. */
  wrSend(): void {
    this.next(WrOpcode.SEND);
  }
  /** `ibv_wr_send_imm()`: `immData` in host order (as `SendWr.immData`). */
  wrSendImm(immData: number): void {
    const w = this.next(WrOpcode.SEND_WITH_IMM);
    if (w !== null) w.immData = immData;
  }
  /** `ibv_wr_send_inv()`. */
  wrSendInv(invalidateRkey: number): void {
    const w = this.next(WrOpcode.SEND_WITH_INV);
    if (w !== null) w.invalidateRkey = invalidateRkey;
  }
  /** `ibv_wr_rdma_write()`. */
  wrRdmaWrite(rkey: number, remoteAddr: number): void {
    this.remote(this.next(WrOpcode.RDMA_WRITE), rkey, remoteAddr);
  }
  /** `ibv_wr_rdma_write_imm()`. */
  wrRdmaWriteImm(rkey: number, remoteAddr: number, immData: number): void {
    const w = this.next(WrOpcode.RDMA_WRITE_WITH_IMM);
    this.remote(w, rkey, remoteAddr);
    if (w !== null) w.immData = immData;
  }
  /** `ibv_wr_rdma_read()`. */
  wrRdmaRead(rkey: number, remoteAddr: number): void {
    this.remote(this.next(WrOpcode.RDMA_READ), rkey, remoteAddr);
  }
  /** `ibv_wr_atomic_cmp_swp()`: the 8 local bytes (wrSetSge) receive the original value. */
  wrAtomicCmpSwp(rkey: number, remoteAddr: number, compare: bigint, swap: bigint): void {
    const w = this.next(WrOpcode.ATOMIC_CMP_AND_SWP);
    if (w === null) return;
    const a = w.atomicOp;
    a.rkey = rkey;
    a.remoteAddr = remoteAddr;
    a.compareAdd = compare;
    a.swap = swap;
    w.atomic = a;
  }
  /** `ibv_wr_atomic_fetch_add()`. */
  wrAtomicFetchAdd(rkey: number, remoteAddr: number, add: bigint): void {
    const w = this.next(WrOpcode.ATOMIC_FETCH_AND_ADD);
    if (w === null) return;
    const a = w.atomicOp;
    a.rkey = rkey;
    a.remoteAddr = remoteAddr;
    a.compareAdd = add;
    a.swap = 0n;
    w.atomic = a;
  }
  /** `ibv_wr_bind_mw()`: bind type 2 window `mw` with `rkey` to `bindInfo` (copied). */
  wrBindMw(mw: Mw, rkey: number, bindInfo: MwBindInfo): void {
    const w = this.next(WrOpcode.BIND_MW);
    if (w === null) return;
    const b = w.bindOp;
    b.mw = mw;
    b.rkey = rkey;
    const i = b.bindInfo;
    const from = bindInfo as MwBindInfo | null | undefined;
    i.mr = from?.mr ?? null;
    i.addr = from?.addr ?? (NaN as number);
    i.length = from?.length ?? (NaN as number);
    i.mwAccessFlags = from?.mwAccessFlags ?? (NaN as number);
    w.bindMw = b;
  }
  /** `ibv_wr_local_inv()`. */
  wrLocalInv(invalidateRkey: number): void {
    const w = this.next(WrOpcode.LOCAL_INV);
    if (w !== null) w.invalidateRkey = invalidateRkey;
  }

  // -- setters: they complete the last work request --------------------------------------------

  /** `ibv_wr_set_sge()`: one SGE (a length of 0: none, as rxe). */
  wrSetSge(lkey: number, addr: number, length: number): void {
    const w = this.last('ibv_wr_set_sge');
    if (w === null) return;
    if (length === 0) {
      w.sgList = NO_SGES;
      return;
    }
    const s = this.ownSges(w, 1);
    const e = s[0] as Sge;
    e.lkey = lkey;
    e.addr = addr;
    e.length = length;
  }
  /** `ibv_wr_set_sge_list()`: the SGEs (copied); more than `max_send_sge` is ENOSPC. */
  wrSetSgeList(sgList: readonly Sge[]): void {
    const w = this.last('ibv_wr_set_sge_list');
    if (w === null) return;
    if (sgList.length > this.qp.cap.maxSendSge) {
      this.fail('ENOSPC', this._n - 1, `${sgList.length} SGEs > max_send_sge ${this.qp.cap.maxSendSge}`);
      return;
    }
    this.copySges(w, sgList);
  }
  /**
   * `ibv_wr_set_inline_data()`: the payload is the bytes `buf` names (an address in a registered
   * region and its lkey), sent inline (`IBV_SEND_INLINE` is set); above `max_inline_data`: ENOSPC.
   */
  wrSetInlineData(buf: Sge): void {
    const w = this.last('ibv_wr_set_inline_data');
    if (w === null || !this.inlineFits(buf.length)) return;
    this.copySges(w, [buf]);
    w.sendFlags |= SendFlags.INLINE;
  }
  /** `ibv_wr_set_inline_data_list()`: as {@link wrSetInlineData}, the bytes of several buffers in order. */
  wrSetInlineDataList(bufs: readonly Sge[]): void {
    const w = this.last('ibv_wr_set_inline_data_list');
    if (w === null) return;
    let total = 0;
    for (const b of bufs) total += b.length;
    if (!this.inlineFits(total)) return;
    this.copySges(w, bufs);
    w.sendFlags |= SendFlags.INLINE;
  }
  /** `ibv_wr_set_ud_addr()`: a UD work request's destination. */
  wrSetUdAddr(ah: Ah, remoteQpn: number, remoteQkey: number): void {
    const w = this.last('ibv_wr_set_ud_addr');
    if (w === null) return;
    const u = w.udOp;
    u.ah = ah;
    u.remoteQpn = remoteQpn;
    u.remoteQkey = remoteQkey;
    w.ud = u;
  }

  // -- internals ---------------------------------------------------------------------------------

  /** Start work request `op` with the current wr_id / wr_flags; null once an error is pending. */
  private next(op: WrOpcode): BuiltWr | null {
    if (this._err !== 0) return null;
    if (!this._started) {
      this.fail('EINVAL', this._n, `${WrOpcode[op]} outside ibv_wr_start / ibv_wr_complete`);
      return null;
    }
    if ((this.sendOpsFlags & sendOpFlag(op)) === 0) {
      this.fail('EOPNOTSUPP', this._n, `QP not created with IBV_QP_EX_WITH_${WrOpcode[op]}`);
      return null;
    }
    let w = this._wrs[this._n];
    if (w === undefined) {
      w = newBuiltWr();
      this._wrs.push(w);
    }
    this._n++;
    w.wrId = this.wrId;
    w.opcode = op;
    w.sendFlags = this.wrFlags;
    w.sgList = NO_SGES;
    w.immData = 0;
    w.invalidateRkey = 0;
    w.rdma = undefined;
    w.atomic = undefined;
    w.bindMw = undefined;
    w.ud = undefined;
    return w;
  }

  private remote(w: BuiltWr | null, rkey: number, remoteAddr: number): void {
    if (w === null) return;
    const r = w.rdmaOp;
    r.rkey = rkey;
    r.remoteAddr = remoteAddr;
    w.rdma = r;
  }

  /** The work request the setters complete; null (EINVAL recorded) before any builder call. */
  private last(op: string): BuiltWr | null {
    if (this._err !== 0) return null;
    if (!this._started || this._n === 0) {
      this.fail('EINVAL', this._n, `${op} before a work request was started`);
      return null;
    }
    return this._wrs[this._n - 1] as BuiltWr;
  }

  private inlineFits(len: number): boolean {
    const max = this.qp.cap.maxInlineData;
    if (len <= max) return true;
    this.fail('ENOSPC', this._n - 1, `inline data of ${len} bytes > max_inline_data ${max}`);
    return false;
  }

  /** `w`'s own SGE array, `n` long, as its SGE list. */
  private ownSges(w: BuiltWr, n: number): Sge[] {
    const own = w.own;
    while (own.length < n) own.push({ addr: 0, length: 0, lkey: 0 });
    own.length = n;
    w.sgList = own;
    return own;
  }

  private copySges(w: BuiltWr, from: readonly Sge[]): void {
    const n = from.length;
    const own = this.ownSges(w, n);
    for (let i = 0; i < n; i++) {
      const s = from[i] as Sge | null | undefined;
      const t = own[i] as Sge;
      // A malformed SGE stays malformed for wr-check.ts to name.
      t.addr = s?.addr ?? (NaN as number);
      t.length = s?.length ?? (NaN as number);
      t.lkey = s?.lkey ?? (NaN as number);
    }
  }

  /** Drop the references the batch holds to the caller's objects (AHs, windows, MRs). */
  private releaseRefs(n: number): void {
    for (let i = 0; i < n; i++) {
      const w = this._wrs[i] as BuiltWr;
      w.bindOp.bindInfo.mr = null;
      w.ud = undefined;
    }
  }

  /** Record the first error of the batch. */
  private fail(code: ErrnoCode, index: number, why: string): number {
    if (this._err === 0) {
      this._err = Errno[code];
      this.lastError = new PostError(code, 'ibv_wr_complete', Math.max(0, index), why);
    }
    return Errno[code];
  }
}
