/**
 * The verbs objects of a native (rdma-core) device: the same classes as the soft devices'
 * (`Context`, `Pd`, `Mr`, `Cq`, `CompChannel`, `Qp` — subclasses, so `instanceof` and every
 * property work the same), each call mapped to its libibverbs call through the addon, with
 * libibverbs' errno.
 *
 * Arguments are checked here before any C is reached (types, ranges, destroyed objects); the
 * provider (siw, rxe, mlx5 ...) checks the rest, as it does for a C program.
 *
 * - Memory regions are registered over the caller's memory in place (`mr.buf` is a view of it,
 *   `mr.addr` its virtual address, the address SGEs use); the addon holds a strong reference to
 *   the memory until `dereg()`, and the context keeps the `Mr` reachable until then, so memory
 *   that is registered is never collected.
 * - Completion channels: the channel's fd is watched by libuv; an event is read in C
 *   (ibv_get_cq_event) and queued on the JS channel, so `getCqEvent()`, `tryGetCqEvent()` and
 *   async iteration behave as on the soft devices. A read in progress keeps the event loop alive.
 * - The data path (`postSend`, `postRecv`, `poll`, `pollInto`) encodes work requests into, and
 *   decodes completions from, buffers shared with the addon: no allocation per work request
 *   (`pollInto` fills the `Wc` objects already in its array).
 */
import { PostError, RdmaError, err } from '../errors.js';
import type { ErrnoCode } from '../errno.js';
import type { AhAttr } from '../verbs/ah.js';
import { CompChannel } from '../verbs/comp-channel.js';
import { Context } from '../verbs/context.js';
import { Cq } from '../verbs/cq.js';
import type { Device } from '../verbs/device.js';
import { Mr } from '../verbs/mr.js';
import { Pd, type MrMemory } from '../verbs/pd.js';
import { Qp } from '../verbs/qp.js';
import { recvWrProblem, sendWrProblem } from '../verbs/wr-check.js';
import { QpAttrMask, type QpAttr } from '../verbs/qp-attr.js';
import type { QpInitAttr } from '../verbs/provider.js';
import { AsyncEventType, QP_STATE_NUM, QpState, WcFlags, type QpCap, type RecvWr, type SendWr, type Sge, type Wc, type WrId } from '../verbs/types.js';
import {
  AH,
  QA,
  SGE_BASE,
  SGE_MAX,
  SGE_WORDS,
  W,
  WC_MAX,
  WC_WORDS,
  WR_MAX,
  WR_STATUS_WORD,
  WR_WORDS,
  check,
  dispatch,
  scratchBuffers,
  type Handle,
  type NativeBinding,
  type QpResult,
} from './binding.js';

let nextKey = 1;
/** A process-unique key naming an object to the addon (a CQ's cq_context, a QP's qp_context ...). */
export function newKey(): number {
  const k = nextKey;
  nextKey = nextKey >= 0x7fff_fffe ? 1 : nextKey + 1;
  return k;
}

/** The shared scratch buffers (the same object for the process's life once the addon loaded). */
let scratchCache: ReturnType<typeof scratchBuffers> | null = null;
const scratch = (): ReturnType<typeof scratchBuffers> => scratchCache ?? (scratchCache = scratchBuffers());

const contexts = new Map<number, NativeContext>();
const channels = new Map<number, NativeCompChannel>();
const cqs = new Map<number, NativeCq>();
const qps = new Map<number, NativeQp>();

dispatch.cqEvent = (chanKey, cqKey) => {
  const cq = cqs.get(cqKey);
  if (cq === undefined) return;
  cq._cGot++;
  const ch = channels.get(chanKey);
  if (ch !== undefined && !ch.destroyed) ch._enqueue(cq);
};

dispatch.asyncEvent = (ctxKey, type, kind, key) => {
  const ctx = contexts.get(ctxKey);
  if (ctx === undefined) return;
  if (kind === 1) {
    const qp = qps.get(key);
    if (qp !== undefined) ctx._raiseAsyncEvent({ type, qp });
  } else if (kind === 2) {
    const cq = cqs.get(key);
    if (cq !== undefined) ctx._raiseAsyncEvent({ type: AsyncEventType.CQ_ERR, cq });
  } else if (kind === 4) ctx._raiseAsyncEvent({ type, portNum: key });
  else ctx._raiseAsyncEvent({ type });
};

const STATE_OF_NUM: readonly QpState[] = [QpState.RESET, QpState.INIT, QpState.RTR, QpState.RTS, QpState.SQD, QpState.SQE, QpState.ERR];

/** The QP state the kernel reports (`enum ibv_qp_state` number). */
export function qpStateOfNum(n: number): QpState {
  return STATE_OF_NUM[n] ?? QpState.ERR;
}

const isU32 = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff;
const isAddr = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

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
    const h = check(this._b.allocPd(this._h), 'ibv_alloc_pd');
    this._pds++;
    return new NativePd(this, this._pds, h);
  }

  /** `ibv_create_comp_channel()`: its fd is watched by the event loop. */
  override createCompChannel(): CompChannel {
    const key = newKey();
    const h = check(this._b.createCompChannel(this._h, key), 'ibv_create_comp_channel');
    const ch = new NativeCompChannel(this, h, key);
    channels.set(key, ch);
    return ch;
  }

  /**
   * `ibv_create_cq()`.
   * @throws RdmaError EINVAL (cqe out of 1..maxCqe, a channel of another device or destroyed, a
   *   bad comp vector), or the provider's errno.
   */
  override createCq(cqe: number, channel?: CompChannel | null, compVector = 0, cqContext?: unknown): Cq {
    const op = 'ibv_create_cq';
    const ch = channel ?? undefined;
    if (!Number.isInteger(cqe) || cqe < 1 || cqe > this._attr.maxCqe) throw err('EINVAL', op, `cqe ${String(cqe)} (device max ${this._attr.maxCqe})`);
    if (ch !== undefined) {
      if (!(ch instanceof NativeCompChannel) || ch.context !== this) throw err('EINVAL', op, 'channel of another device');
      if (ch.destroyed) throw err('EINVAL', op, 'channel destroyed');
    }
    if (!Number.isInteger(compVector) || compVector < 0 || compVector >= this.numCompVectors) throw err('EINVAL', op, `comp_vector ${String(compVector)}`);
    const key = newKey();
    const [h, actual] = check(this._b.createCq(this._h, cqe, ch?._h ?? null, compVector, key), op);
    const cq = new NativeCq(this, actual, ch, compVector, cqContext, key, h);
    cqs.set(key, cq);
    ch?._cqs.add(cq);
    return cq;
  }
}

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

/** A Uint8Array over exactly the bytes of `mem` (no copy). */
function memView(mem: MrMemory, op: string): Uint8Array {
  if (ArrayBuffer.isView(mem)) {
    const b = mem.buffer as ArrayBufferLike & { resizable?: boolean; growable?: boolean };
    if (b.resizable === true || b.growable === true) throw err('EINVAL', op, 'resizable/growable buffers cannot be registered');
    return mem instanceof Uint8Array ? mem : new Uint8Array(mem.buffer, mem.byteOffset, mem.byteLength);
  }
  if (mem instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && mem instanceof SharedArrayBuffer)) {
    const b = mem as ArrayBufferLike & { resizable?: boolean; growable?: boolean };
    if (b.resizable === true || b.growable === true) throw err('EINVAL', op, 'resizable/growable buffers cannot be registered');
    return new Uint8Array(mem);
  }
  throw err('EINVAL', op, 'memory must be an ArrayBuffer, SharedArrayBuffer or ArrayBuffer view');
}

/** `ibv_mr` of a native device. */
export class NativeMr extends Mr {
  /** @internal */
  readonly _h: Handle;

  /** @internal Use `pd.regMr()`. */
  constructor(pd: NativePd, buf: Uint8Array, addr: number, access: number, lkey: number, rkey: number, h: Handle) {
    super(pd, buf, addr, access, lkey);
    (this as { rkey: number }).rkey = rkey;
    (this as { handle: number }).handle = lkey >>> 8;
    this._h = h;
  }

  /** `ibv_dereg_mr()`. */
  override dereg(): void {
    const op = 'ibv_dereg_mr';
    if (!this.registered) throw err('EINVAL', op, 'MR already deregistered');
    const ctx = this.context as NativeContext;
    check(ctx._b.deregMr(this._h), op);
    ctx._liveMrs.delete(this);
    super.dereg();
  }
}

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

/** A completion as this module fills it (the soft device's fields plus the UD ones). */
interface FullWc extends Wc {
  pkeyIndex: number;
  slid: number;
  sl: number;
  dlidPathBits: number;
}

function newWc(): FullWc {
  return { wrId: 0, status: 0, opcode: 0, vendorErr: 0, byteLen: 0, qpNum: 0, srcQp: 0, wcFlags: 0, immData: 0, invalidatedRkey: 0, pkeyIndex: 0, slid: 0, sl: 0, dlidPathBits: 0 };
}

const TWO32 = 0x1_0000_0000;

/** Decode completion `i` of the scratch into `wc`. */
function decodeWc(w: Uint32Array, i: number, wc: FullWc): void {
  const o = i * WC_WORDS;
  const lo = w[o] as number;
  const hi = w[o + 1] as number;
  wc.wrId = hi >= 0x8000_0000 ? (hi - 0x8000_0000) * TWO32 + lo : (BigInt(hi) << 32n) | BigInt(lo);
  wc.status = w[o + 2] as number;
  wc.opcode = w[o + 3] as number;
  wc.vendorErr = w[o + 4] as number;
  wc.byteLen = w[o + 5] as number;
  wc.qpNum = w[o + 6] as number;
  wc.srcQp = w[o + 7] as number;
  const flags = w[o + 8] as number;
  wc.wcFlags = flags;
  const x = w[o + 9] as number;
  wc.immData = flags & WcFlags.WITH_IMM ? x : 0;
  wc.invalidatedRkey = flags & WcFlags.WITH_INV ? x : 0;
  const p = w[o + 10] as number;
  wc.pkeyIndex = p & 0xffff;
  wc.slid = p >>> 16;
  const s = w[o + 11] as number;
  wc.sl = s & 0xff;
  wc.dlidPathBits = (s >>> 8) & 0xff;
}

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
  declare readonly context: NativeContext;

  /** @internal Use `ctx.createCq()`. */
  constructor(ctx: NativeContext, cqe: number, ch: NativeCompChannel | undefined, compVector: number, cqContext: unknown, key: number, h: Handle) {
    super(ctx, 1, ch, compVector, cqContext, key);
    (this as { cqe: number }).cqe = cqe;
    this._h = h;
    this._key = key;
    this._b = ctx._b;
  }

  private checkPoll(max: number): void {
    if (this.destroyed) throw err('EINVAL', 'ibv_poll_cq', 'CQ destroyed');
    if (!Number.isInteger(max) || max < 0) throw err('EINVAL', 'ibv_poll_cq', `num_entries ${max}`);
  }

  /** `ibv_poll_cq()`: up to `max` completions, oldest first, as new objects. */
  override poll(max = 1): Wc[] {
    this.checkPoll(max);
    const out: Wc[] = [];
    const b = this._b;
    const w = scratch().wc;
    while (out.length < max) {
      const n = check(b.pollCq(this._h, Math.min(max - out.length, WC_MAX)), 'ibv_poll_cq');
      for (let i = 0; i < n; i++) {
        const wc = newWc();
        decodeWc(w, i, wc);
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
    const b = this._b;
    const h = this._h;
    const w = scratch().wc;
    let total = 0;
    while (total < max) {
      const want = max - total;
      const n = b.pollCq(h, want < WC_MAX ? want : WC_MAX);
      if (n < 0) check(n, 'ibv_poll_cq');
      for (let i = 0; i < n; i++) {
        let wc = out[total] as FullWc | undefined;
        if (typeof wc !== 'object' || wc === null) {
          wc = newWc();
          out[total] = wc;
        }
        decodeWc(w, i, wc);
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

/** Multicast groups librdmacm attached a QP to (ucma_process_join), by QP: `gid/lid` keys. */
const joinedByCm = new WeakMap<NativeQp, Set<string>>();
const groupKey = (gid: Uint8Array, lid: number): string => `${Buffer.from(gid.buffer, gid.byteOffset, 16).toString('hex')}/${lid}`;

/** @internal librdmacm attached `qp` to a group: the CM's own attach of it is then a no-op. */
export function markAttached(qp: NativeQp, gid: Uint8Array, lid: number): void {
  let s = joinedByCm.get(qp);
  if (s === undefined) joinedByCm.set(qp, (s = new Set()));
  s.add(groupKey(gid, lid));
}

/** @internal Take the mark {@link markAttached} left (true: the QP is attached already). */
export function takeAttached(qp: NativeQp, gid: Uint8Array, lid: number): boolean {
  return joinedByCm.get(qp)?.delete(groupKey(gid, lid)) === true;
}

/** @internal How the CM asks for its QP to be made by rdma_create_qp (the init attr → cm_id). */
export const cmQpRequests = new WeakMap<object, Handle>();

const qaBuf = new Float64Array(QA.WORDS);
const qaGid = new Uint8Array(16);

/** Every attribute field of `QpAttr` this module encodes, with its mask bit and slot. */
const QA_FIELDS: readonly [keyof QpAttr, number, number][] = [
  ['curQpState', QpAttrMask.CUR_STATE, QA.CUR_STATE],
  ['qpAccessFlags', QpAttrMask.ACCESS_FLAGS, QA.ACCESS],
  ['pkeyIndex', QpAttrMask.PKEY_INDEX, QA.PKEY_INDEX],
  ['portNum', QpAttrMask.PORT, QA.PORT],
  ['qkey', QpAttrMask.QKEY, QA.QKEY],
  ['pathMtu', QpAttrMask.PATH_MTU, QA.PATH_MTU],
  ['timeout', QpAttrMask.TIMEOUT, QA.TIMEOUT],
  ['retryCnt', QpAttrMask.RETRY_CNT, QA.RETRY_CNT],
  ['rnrRetry', QpAttrMask.RNR_RETRY, QA.RNR_RETRY],
  ['rqPsn', QpAttrMask.RQ_PSN, QA.RQ_PSN],
  ['sqPsn', QpAttrMask.SQ_PSN, QA.SQ_PSN],
  ['maxRdAtomic', QpAttrMask.MAX_QP_RD_ATOMIC, QA.MAX_RD_ATOMIC],
  ['maxDestRdAtomic', QpAttrMask.MAX_DEST_RD_ATOMIC, QA.MAX_DEST_RD_ATOMIC],
  ['minRnrTimer', QpAttrMask.MIN_RNR_TIMER, QA.MIN_RNR_TIMER],
  ['destQpNum', QpAttrMask.DEST_QPN, QA.DEST_QPN],
];

/** Address-handle attributes as the CM and `QpAttr.ahAttr` carry them: `struct ibv_ah_attr`. */
export type NativeAhAttr = AhAttr;

/** Encode an AH attribute into `v[at..]` (and its DGID into `gid`); a string names a problem. */
export function encodeAh(a: NativeAhAttr, v: Float64Array, at: number, gid: Uint8Array): string | null {
  if (typeof a !== 'object' || a === null) return 'ah_attr';
  const u8 = (x: unknown, d = 0): number | null => (x === undefined ? d : Number.isInteger(x) && (x as number) >= 0 && (x as number) <= 0xff ? (x as number) : null);
  const dlid = a.dlid === undefined ? 0 : Number.isInteger(a.dlid) && a.dlid >= 0 && a.dlid <= 0xffff ? a.dlid : null;
  const vals = [dlid, u8(a.sl), u8(a.srcPathBits), u8(a.staticRate), a.isGlobal ? 1 : 0, u8(a.portNum)];
  if (vals.some((x) => x === null)) return 'ah_attr field out of range';
  for (let i = 0; i < vals.length; i++) v[at + i] = vals[i] as number;
  if (a.isGlobal) {
    const g = a.grh;
    if (typeof g !== 'object' || g === null || !(g.dgid instanceof Uint8Array) || g.dgid.length !== 16) return 'ah_attr.grh.dgid must be 16 bytes';
    if (!Number.isInteger(g.flowLabel) || g.flowLabel < 0 || g.flowLabel > 0xfffff) return 'ah_attr.grh.flow_label';
    const rest = [u8(g.sgidIndex), u8(g.hopLimit), u8(g.trafficClass)];
    if (rest.some((x) => x === null)) return 'ah_attr.grh field out of range';
    v[at + AH.FLOW_LABEL] = g.flowLabel;
    v[at + AH.SGID_INDEX] = rest[0] as number;
    v[at + AH.HOP_LIMIT] = rest[1] as number;
    v[at + AH.TCLASS] = rest[2] as number;
    gid.set(g.dgid);
  } else {
    v[at + AH.FLOW_LABEL] = v[at + AH.SGID_INDEX] = v[at + AH.HOP_LIMIT] = v[at + AH.TCLASS] = 0;
    gid.fill(0);
  }
  return null;
}

/** Decode an AH attribute from `v[at..]`. */
export function decodeAh(v: Float64Array, at: number, gid: Uint8Array): NativeAhAttr {
  const a: NativeAhAttr = {
    dlid: v[at + AH.DLID] as number,
    sl: v[at + AH.SL] as number,
    srcPathBits: v[at + AH.SRC_PATH_BITS] as number,
    staticRate: v[at + AH.STATIC_RATE] as number,
    isGlobal: v[at + AH.IS_GLOBAL] !== 0,
    portNum: v[at + AH.PORT] as number,
  };
  if (a.isGlobal) {
    a.grh = { dgid: Uint8Array.from(gid), flowLabel: v[at + AH.FLOW_LABEL] as number, sgidIndex: v[at + AH.SGID_INDEX] as number, hopLimit: v[at + AH.HOP_LIMIT] as number, trafficClass: v[at + AH.TCLASS] as number };
  }
  return a;
}

/**
 * The attributes in `v` (the `QA` layout; `gid` holds the AH's DGID) that ibv_query_qp and
 * rdma_init_qp_attr both report: the state, the numeric fields and the AH.
 */
export function decodeQpAttr(v: Float64Array, gid: Uint8Array): QpAttr {
  return {
    qpState: qpStateOfNum(v[QA.STATE] as number),
    qpAccessFlags: v[QA.ACCESS] as number,
    pkeyIndex: v[QA.PKEY_INDEX] as number,
    portNum: v[QA.PORT] as number,
    qkey: v[QA.QKEY] as number,
    pathMtu: v[QA.PATH_MTU] as number,
    timeout: v[QA.TIMEOUT] as number,
    retryCnt: v[QA.RETRY_CNT] as number,
    rnrRetry: v[QA.RNR_RETRY] as number,
    rqPsn: v[QA.RQ_PSN] as number,
    sqPsn: v[QA.SQ_PSN] as number,
    maxRdAtomic: v[QA.MAX_RD_ATOMIC] as number,
    maxDestRdAtomic: v[QA.MAX_DEST_RD_ATOMIC] as number,
    minRnrTimer: v[QA.MIN_RNR_TIMER] as number,
    destQpNum: v[QA.DEST_QPN] as number,
    ahAttr: decodeAh(v, QA.AH, gid),
  };
}

/** Every `IBV_QP_*` mask bit up to IBV_QP_DEST_QPN. */
const ALL_QP_ATTR = (1 << 21) - 1;


/** What `createAh` returns to the verbs layer for a native device (kept in `ah._provider`). */
export interface NativeAhData {
  h: Handle;
  index: number;
}

/** Write wr_id into words `o`, `o+1`: numbers carry bit 63 so they come back as numbers. */
function putWrId(w: Uint32Array, o: number, id: WrId): void {
  if (typeof id === 'number') {
    w[o] = id % TWO32;
    w[o + 1] = Math.floor(id / TWO32) + 0x8000_0000;
  } else {
    w[o] = Number(id & 0xffff_ffffn);
    w[o + 1] = Number(id >> 32n);
  }
}

/**
 * `ibv_qp` of a native device. Created by `pd.createQp()` (ibv_create_qp) or by a native cm_id
 * (rdma_create_qp, which also moves it to INIT and lets librdmacm drive RTR/RTS on connect).
 */
export class NativeQp extends Qp {
  /** @internal */
  readonly _h: Handle;
  /** @internal */
  readonly _key: number;
  /** @internal The addon (the data path's calls). */
  private readonly _b: NativeBinding;
  declare readonly context: NativeContext;

  /** @internal Use `pd.createQp()` or `cmId.createQp()`. */
  constructor(ctx: NativeContext, pd: NativePd, init: QpInitAttr, r: QpResult, key: number) {
    const cap: QpCap = { maxSendWr: r[2], maxRecvWr: r[3], maxSendSge: r[4], maxRecvSge: r[5], maxInlineData: r[6] };
    super(ctx, pd, r[1], init, cap);
    this._h = r[0];
    this._key = key;
    this._b = ctx._b;
    qps.set(key, this);
  }

  /** @internal ibv_create_qp / rdma_create_qp for the provider's `createQp`. */
  static _create(ctx: NativeContext, pd: NativePd, attr: QpInitAttr): NativeQp {
    const op = 'ibv_create_qp';
    const c = attr.cap;
    const scq = attr.sendCq as NativeCq;
    const rcq = attr.recvCq as NativeCq;
    if (!(scq instanceof NativeCq) || !(rcq instanceof NativeCq)) throw err('EINVAL', op, 'CQs of another device');
    if (attr.srq !== undefined) throw err('EOPNOTSUPP', op, 'SRQ not supported by this API yet');
    const v = [c.maxSendWr ?? 1, c.maxRecvWr ?? 1, c.maxSendSge ?? 1, c.maxRecvSge ?? 1, c.maxInlineData ?? 0];
    if (!v.every(isU32)) throw err('EINVAL', op, 'cap');
    const key = newKey();
    const cmId = cmQpRequests.get(attr);
    const b = ctx._b;
    const sig = attr.sqSigAll === true;
    const r = cmId
      ? check(b.cmCreateQp(cmId, pd._h, scq._h, rcq._h, attr.qpType, v[0] as number, v[1] as number, v[2] as number, v[3] as number, v[4] as number, sig, key), 'rdma_create_qp')
      : check(b.createQp(pd._h, scq._h, rcq._h, attr.qpType, v[0] as number, v[1] as number, v[2] as number, v[3] as number, v[4] as number, sig, key), op);
    return new NativeQp(ctx, pd, attr, r, key);
  }

  /** The state the kernel reports (ibv_query_qp). */
  override get state(): QpState {
    if (this.destroyed) return QpState.RESET;
    const n = this.context._b.qpState(this._h);
    return n < 0 ? QpState.ERR : qpStateOfNum(n);
  }

  /** `ibv_query_qp()`: the attributes in `mask` (default: all). */
  override query(mask: number = ALL_QP_ATTR): QpAttr {
    const op = 'ibv_query_qp';
    if (this.destroyed) throw err('EINVAL', op, 'QP destroyed');
    if (!isU32(mask)) throw err('EINVAL', op, 'mask');
    check(this.context._b.queryQp(this._h, mask, qaBuf, qaGid), op);
    const a: QpAttr = {
      ...decodeQpAttr(qaBuf, qaGid),
      curQpState: qpStateOfNum(qaBuf[QA.CUR_STATE] as number),
      sqDraining: qaBuf[QA.SQ_DRAINING] as number,
      cap: { ...this.cap },
    };
    return a;
  }

  /**
   * `ibv_modify_qp()`: `mask` (default: every attribute present in `attr`) names the attributes
   * applied; the provider checks the transition and the attributes (EINVAL as the kernel's
   * `ib_modify_qp_is_ok`).
   */
  override modify(attr: QpAttr, mask?: number): void {
    const op = 'ibv_modify_qp';
    if (this.destroyed) throw err('EINVAL', op, 'QP destroyed');
    if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no attributes');
    const v = qaBuf;
    v.fill(0);
    let m = 0;
    if (attr.qpState !== undefined) {
      const n = QP_STATE_NUM[attr.qpState];
      if (n === undefined) throw err('EINVAL', op, `qp_state ${String(attr.qpState)}`);
      v[QA.STATE] = n;
      m |= QpAttrMask.STATE;
    }
    for (const [k, bit, slot] of QA_FIELDS) {
      const x = attr[k];
      if (x === undefined) continue;
      if (k === 'curQpState') {
        const n = QP_STATE_NUM[x as QpState];
        if (n === undefined) throw err('EINVAL', op, `cur_qp_state ${String(x)}`);
        v[slot] = n;
      } else {
        if (!isU32(x)) throw err('EINVAL', op, `${k} ${String(x)}`);
        v[slot] = x;
      }
      m |= bit;
    }
    const ah = (attr as { ahAttr?: NativeAhAttr }).ahAttr;
    let gid: Uint8Array | null = null;
    if (ah !== undefined) {
      const bad = encodeAh(ah, v, QA.AH, qaGid);
      if (bad !== null) throw err('EINVAL', op, bad);
      gid = qaGid;
      m |= QpAttrMask.AV;
    }
    if (attr.cap !== undefined) {
      const c = attr.cap;
      const caps = [c.maxSendWr, c.maxRecvWr, c.maxSendSge, c.maxRecvSge, c.maxInlineData];
      if (!caps.every(isU32)) throw err('EINVAL', op, 'cap');
      caps.forEach((x, i) => (v[QA.MAX_SEND_WR + i] = x));
      m |= QpAttrMask.CAP;
    }
    const useMask = mask ?? m;
    if (!isU32(useMask)) throw err('EINVAL', op, `mask ${String(mask)}`);
    check(this.context._b.modifyQp(this._h, useMask, v, gid), op);
    if (attr.qpState !== undefined && (useMask & QpAttrMask.STATE) !== 0) this._state = attr.qpState;
  }

  /**
   * `ibv_post_send()`. Each WR is checked here first (PostError EINVAL naming it), then handed to
   * the provider; WRs before the failing one are posted.
   */
  override postSend(wrs: SendWr | readonly SendWr[]): void {
    const op = 'ibv_post_send';
    const many = Array.isArray(wrs);
    const list = wrs as readonly SendWr[];
    const count = many ? list.length : 1;
    if (this.destroyed) throw new PostError('EINVAL', op, 0, 'QP destroyed');
    const s = scratch();
    const w = s.wr;
    const f = s.wrF64;
    const rules = this.wrRules;
    const pd = this.pd;
    let i = 0;
    while (i < count) {
      const start = i;
      let n = 0;
      let sge = 0;
      let bad: string | null = null;
      for (; i < count && n < WR_MAX; i++) {
        const wr = many ? (list[i] as SendWr) : (wrs as SendWr);
        bad = sendWrProblem(wr, rules, pd);
        if (bad !== null) break;
        const sgl = wr.sgList;
        if (sge + sgl.length > SGE_MAX) break;
        const o = n * WR_WORDS;
        putWrId(w, o, wr.wrId);
        w[o + W.OPCODE] = wr.opcode;
        w[o + W.FLAGS] = wr.sendFlags ?? 0;
        w[o + W.NSGE] = sgl.length;
        w[o + W.SGE0] = sge;
        w[o + W.IMM] = wr.immData ?? 0;
        w[o + W.INV] = wr.invalidateRkey ?? 0;
        const r = wr.rdma;
        const ud = wr.ud;
        if (ud !== undefined) {
          w[o + W.AH] = (ud.ah._provider as NativeAhData).index;
          w[o + W.RQPN] = ud.remoteQpn;
          w[o + W.QKEY] = ud.remoteQkey;
        } else {
          w[o + W.AH] = 0;
          w[o + W.RKEY] = r !== undefined ? r.rkey : 0;
          f[(o + W.RADDR) >> 1] = r !== undefined ? r.remoteAddr : 0;
        }
        for (let j = 0; j < sgl.length; j++, sge++) {
          const e = sgl[j] as Sge;
          const so = SGE_BASE + sge * SGE_WORDS;
          f[so >> 1] = e.addr;
          w[so + 2] = e.length;
          w[so + 3] = e.lkey;
        }
        n++;
      }
      if (n > 0) {
        const rc = this._b.postSend(this._h, n);
        if (rc < 0) throw postError(-rc, op, start + (w[WR_STATUS_WORD] as number));
      }
      if (bad !== null) throw new PostError('EINVAL', op, i, bad);
    }
  }

  /** `ibv_post_recv()`, checked and posted as {@link postSend}. */
  override postRecv(wrs: RecvWr | readonly RecvWr[]): void {
    const op = 'ibv_post_recv';
    const many = Array.isArray(wrs);
    const list = wrs as readonly RecvWr[];
    const count = many ? list.length : 1;
    if (this.destroyed) throw new PostError('EINVAL', op, 0, 'QP destroyed');
    const s = scratch();
    const w = s.wr;
    const f = s.wrF64;
    const rules = this.wrRules;
    let i = 0;
    while (i < count) {
      const start = i;
      let n = 0;
      let sge = 0;
      let bad: string | null = null;
      for (; i < count && n < WR_MAX; i++) {
        const wr = many ? (list[i] as RecvWr) : (wrs as RecvWr);
        bad = recvWrProblem(wr, rules);
        if (bad !== null) break;
        const sgl = wr.sgList;
        if (sge + sgl.length > SGE_MAX) break;
        const o = n * WR_WORDS;
        putWrId(w, o, wr.wrId);
        w[o + W.NSGE] = sgl.length;
        w[o + W.SGE0] = sge;
        for (let j = 0; j < sgl.length; j++, sge++) {
          const e = sgl[j] as Sge;
          const so = SGE_BASE + sge * SGE_WORDS;
          f[so >> 1] = e.addr;
          w[so + 2] = e.length;
          w[so + 3] = e.lkey;
        }
        n++;
      }
      if (n > 0) {
        const rc = this._b.postRecv(this._h, n);
        if (rc < 0) throw postError(-rc, op, start + (w[WR_STATUS_WORD] as number));
      }
      if (bad !== null) throw new PostError('EINVAL', op, i, bad);
    }
  }

  /** `ibv_destroy_qp()`. */
  override destroy(): void {
    const op = 'ibv_destroy_qp';
    if (this.destroyed) throw err('EINVAL', op, 'already destroyed');
    check(this.context._b.destroyQp(this._h), op);
    qps.delete(this._key);
    super.destroy();
  }

  protected _stateChanged(): void {}
  protected _sqKick(): void {}
  protected _destroyed(): void {}
  protected _copyInline(): Buffer | string {
    return 'not used';
  }
}

function postError(errno: number, op: string, index: number): PostError {
  const e = RdmaError.fromErrno(errno);
  return new PostError(e.code as ErrnoCode, op, index);
}
