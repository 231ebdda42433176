/**
 * The extended verbs' entry points on a context: `ibv_create_cq_ex`, `ibv_create_qp_ex` and
 * `ibv_query_device_ex` — libibverbs' checks and the provider's (rdma-core's rxe:
 * `rxe_create_cq_ex`, `check_qp_init_attr`; libibverbs `ibv_create_qp_ex`,
 * `ibv_cmd_query_device_any`), then an ordinary CQ or QP of the device with the extended face
 * over it (cq-ex.ts, qp-ex.ts). `Context` calls these.
 */
import { err } from '../errors.js';
import { AtomicCap, DEVICE_MEM_MGT_EXTENSIONS } from './device-attr.js';
import { baseDeviceAttrEx, copyDeviceAttrEx, type DeviceAttrEx } from './device-attr-ex.js';
import { CqEx, CqInitAttrMask, CreateCqAttrFlags, type CqInitAttrEx } from './cq-ex.js';
import { attachQpEx, QpExSendOps, sendOpFlag } from './qp-ex.js';
import { Pd } from './pd.js';
import { DEFAULT_WR_CAPS } from './wr-check.js';
import { QpType, WrOpcode } from './types.js';
import type { Context } from './context.js';
import type { QpInitAttr } from './provider.js';
import type { Qp } from './qp.js';

/** `enum ibv_qp_init_attr_mask` (the `comp_mask` of `ibv_qp_init_attr_ex`). */
export const QpInitAttrMask = {
  PD: 1 << 0,
  XRCD: 1 << 1,
  CREATE_FLAGS: 1 << 2,
  MAX_TSO_HEADER: 1 << 3,
  IND_TABLE: 1 << 4,
  RX_HASH: 1 << 5,
  SEND_OPS_FLAGS: 1 << 6,
} as const;

/** `struct ibv_qp_init_attr_ex`: `ibv_qp_init_attr` and the fields `comp_mask` validates. */
export interface QpInitAttrEx extends QpInitAttr {
  /** {@link QpInitAttrMask} bits; PD is required. */
  compMask: number;
  /** The PD (`QpInitAttrMask.PD`). */
  pd: Pd;
  /** With `QpInitAttrMask.CREATE_FLAGS`: `enum ibv_qp_create_flags` (`QpCreateFlags`), which the device takes or refuses (EOPNOTSUPP). */
  createFlags?: number;
  /** With `QpInitAttrMask.SEND_OPS_FLAGS`: the builder calls the QP is for ({@link QpExSendOps}). */
  sendOpsFlags?: number;
}

/** The `comp_mask` bits rxe's `create_qp_ex` takes (RXE_QP_COMP_MASK_SUP). */
const QP_COMP_MASK_SUP = QpInitAttrMask.PD | QpInitAttrMask.CREATE_FLAGS | QpInitAttrMask.SEND_OPS_FLAGS;

/** The builder calls that need a device capability: atomics, windows, invalidation. */
const ATOMIC_OPS = QpExSendOps.WITH_ATOMIC_CMP_AND_SWP | QpExSendOps.WITH_ATOMIC_FETCH_AND_ADD;
const INV_OPS = QpExSendOps.WITH_LOCAL_INV | QpExSendOps.WITH_SEND_WITH_INV;

/**
 * `ibv_create_cq_ex()`: an extended CQ over a new CQ of `ctx`.
 * @throws RdmaError EOPNOTSUPP (a device without create_cq_ex — siw —, `wc_flags` it does not
 *   serve — completion timestamps on the soft devices, and where the kernel device has no clock —, a `comp_mask` beyond FLAGS and PD,
 *   `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`); EINVAL (malformed attributes) and whatever
 *   `ibv_create_cq` throws for the size, channel and vector.
 */
export function createCqEx(ctx: Context, attr: CqInitAttrEx): CqEx {
  const op = 'ibv_create_cq_ex';
  ctx._checkAlive(op);
  if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no init attributes');
  const wcFlags = attr.wcFlags ?? 0;
  const mask = attr.compMask ?? 0;
  const flags = mask & CqInitAttrMask.FLAGS ? (attr.flags ?? 0) : 0;
  if (!isFlags(wcFlags)) throw err('EINVAL', op, `wc_flags ${String(wcFlags)}`);
  if (!isFlags(mask) || !isFlags(flags)) throw err('EINVAL', op, 'comp_mask / flags');
  const p = ctx.device._provider(op);
  const caps = p.exCaps;
  if (caps === undefined) throw err('EOPNOTSUPP', op, `${ctx.device.name} has no extended CQs`);
  // libibverbs ibv_icmd_create_cq_ex: comp_mask beyond FLAGS | PD.
  if (mask & ~(CqInitAttrMask.FLAGS | CqInitAttrMask.PD)) throw err('EOPNOTSUPP', op, `comp_mask 0x${mask.toString(16)}`);
  // rxe_create_cq_ex: "user is asking for flags we don't support".
  const hook = p.createCqEx !== undefined ? (caps.deviceWcFlags ?? 0) : 0;
  const extra = wcFlags & ~(caps.wcFlags | hook);
  if (extra !== 0) throw err('EOPNOTSUPP', op, `wc_flags 0x${extra.toString(16)} not served by ${ctx.device.name}`);
  // IGNORE_OVERRUN goes to the kernel, whose rxe_create_cq and siw_create_cq refuse any flag.
  if (flags & ~CreateCqAttrFlags.SINGLE_THREADED) throw err('EOPNOTSUPP', op, `flags 0x${flags.toString(16)}`);
  const args = { cqe: attr.cqe, channel: attr.channel ?? null, compVector: attr.compVector ?? 0, cqContext: attr.cqContext };
  const cq = (wcFlags & hook) !== 0 && p.createCqEx !== undefined ? p.createCqEx(ctx, args, wcFlags) : ctx.createCq(args.cqe, args.channel, args.compVector, args.cqContext);
  return new CqEx(cq, wcFlags);
}

/**
 * The `send_ops_flags` a QP of `qpType` on `ctx` may be created with: the opcodes its
 * provider's WrCaps take on that type, less those the device's attributes lack (atomics without
 * `atomic_cap`, BIND_MW without `max_mw`, invalidation without MEM_MGT_EXTENSIONS). FLUSH,
 * ATOMIC_WRITE and TSO are never among them: no device here has them (the kernel 6.1 rxe and siw
 * report no FLUSH or ATOMIC_WRITE bit in `device_cap_flags_ex`).
 */
export function supportedSendOps(ctx: Context, qpType: QpType): number {
  const caps = ctx.device._provider('ibv_create_qp_ex').wrCaps ?? DEFAULT_WR_CAPS;
  let ops = 0;
  for (const op of caps.sendOpcodes[qpType] ?? []) if (op <= WrOpcode.SEND_WITH_INV) ops |= sendOpFlag(op);
  const a = ctx._attr;
  if (a.atomicCap === AtomicCap.NONE) ops &= ~ATOMIC_OPS;
  if (a.maxMw === 0) ops &= ~QpExSendOps.WITH_BIND_MW;
  if ((a.deviceCapFlags & DEVICE_MEM_MGT_EXTENSIONS) === 0) ops &= ~INV_OPS;
  return ops;
}

/**
 * `ibv_create_qp_ex()`: with only PD in `comp_mask`, `ibv_create_qp` (no builder, as
 * libibverbs); otherwise the provider's `create_qp_ex`, which checks the mask, the create flags
 * and the send ops (rxe `check_qp_init_attr`), creates the QP and gives it its builder
 * (`qpToQpEx(qp)`).
 * @throws RdmaError EINVAL (no PD, a PD of another device, malformed attributes); EOPNOTSUPP (a
 *   device without create_qp_ex — siw —, a `comp_mask` bit beyond PD, CREATE_FLAGS and
 *   SEND_OPS_FLAGS, create flags the device lacks, a send op the device lacks for that QP type —
 *   FLUSH and ATOMIC_WRITE everywhere); whatever `ibv_create_qp` throws.
 */
export function createQpEx(ctx: Context, attr: QpInitAttrEx): Qp {
  const op = 'ibv_create_qp_ex';
  ctx._checkAlive(op);
  if (typeof attr !== 'object' || attr === null) throw err('EINVAL', op, 'no init attributes');
  const mask = attr.compMask;
  if (!isFlags(mask)) throw err('EINVAL', op, `comp_mask ${String(mask)}`);
  const pd = attr.pd as Pd | null | undefined;
  if (!(mask & QpInitAttrMask.PD) || !(pd instanceof Pd)) throw err('EINVAL', op, 'no PD (IBV_QP_INIT_ATTR_PD)');
  if (pd.context !== ctx) throw err('EINVAL', op, 'PD of another device');
  const base: QpInitAttr = { qpType: attr.qpType, sendCq: attr.sendCq, recvCq: attr.recvCq, cap: attr.cap };
  if (mask & QpInitAttrMask.CREATE_FLAGS && attr.createFlags) base.createFlags = attr.createFlags;
  if (attr.srq !== undefined) base.srq = attr.srq;
  if (attr.sqSigAll !== undefined) base.sqSigAll = attr.sqSigAll;
  if (attr.qpContext !== undefined) base.qpContext = attr.qpContext;
  const ops = qpExSendOps(ctx, attr, op);
  const qp = pd.createQp(base);
  if (ops !== null) attachQpEx(qp, ops);
  return qp;
}

/**
 * The provider half of `ibv_create_qp_ex` (rxe's `check_qp_init_attr`) for a QP about to be
 * created on `ctx`: null when `comp_mask` is PD alone (libibverbs makes a plain QP, no
 * builder), else the `send_ops_flags` its builder gets. librdmacm's `rdma_create_qp_ex` goes
 * through it too.
 * @throws RdmaError as {@link createQpEx}.
 */
export function qpExSendOps(ctx: Context, attr: { compMask: number; qpType: QpType; createFlags?: number; sendOpsFlags?: number }, op: string): number | null {
  const mask = attr.compMask;
  if (!isFlags(mask)) throw err('EINVAL', op, `comp_mask ${String(mask)}`);
  if ((mask & ~QpInitAttrMask.PD) === 0) return null;
  if (ctx.device._provider(op).exCaps === undefined) throw err('EOPNOTSUPP', op, `${ctx.device.name} has no create_qp_ex`);
  if (mask & ~QP_COMP_MASK_SUP) throw err('EOPNOTSUPP', op, `comp_mask 0x${(mask & ~QP_COMP_MASK_SUP).toString(16)}`);
  const createFlags = mask & QpInitAttrMask.CREATE_FLAGS ? (attr.createFlags ?? 0) : 0;
  if (!isFlags(createFlags)) throw err('EINVAL', op, `create_flags ${String(createFlags)}`);
  // The create flags go on to the provider's QP creation, which refuses those it lacks
  // (EOPNOTSUPP: rxe all of them, the soft RoCE device all but BLOCK_SELF_MCAST_LB).
  if (!(mask & QpInitAttrMask.SEND_OPS_FLAGS)) return 0;
  const sendOps = attr.sendOpsFlags ?? 0;
  if (!isFlags(sendOps)) throw err('EINVAL', op, `send_ops_flags ${String(sendOps)}`);
  const t = attr.qpType;
  if (t !== QpType.RC && t !== QpType.UC && t !== QpType.UD) throw err('EOPNOTSUPP', op, `send_ops_flags on qp_type ${String(t)}`);
  const extra = sendOps & ~supportedSendOps(ctx, t);
  if (extra !== 0) throw err('EOPNOTSUPP', op, `send_ops_flags 0x${extra.toString(16)} not served on ${ctx.device.name}'s ${QpType[t]} QPs`);
  return sendOps;
}

/** Extended attributes per context (asked once, as `ibv_query_device`'s). */
const exAttrs = new WeakMap<Context, Readonly<DeviceAttrEx>>();

/**
 * `ibv_query_device_ex()`: every field of `struct ibv_device_attr_ex` (a fresh copy).
 * @throws RdmaError EINVAL for an `input.compMask` other than 0 (libibverbs).
 */
export function queryDeviceEx(ctx: Context, input?: { compMask: number }): DeviceAttrEx {
  const op = 'ibv_query_device_ex';
  ctx._checkOpen(op);
  if (input !== undefined && input !== null && input.compMask !== 0) throw err('EINVAL', op, `comp_mask ${String(input.compMask)}`);
  let x = exAttrs.get(ctx);
  if (x === undefined) {
    const p = ctx.device._provider(op);
    x = p.queryDeviceEx ? p.queryDeviceEx(ctx.device.info, ctx._attr) : baseDeviceAttrEx(ctx._attr);
    // orig_attr is what ibv_query_device says (the device's caps applied).
    x = Object.freeze({ ...x, origAttr: { ...ctx._attr } });
    exAttrs.set(ctx, x);
  }
  return copyDeviceAttrEx(x);
}

/** A flags word: a non-negative integer below 2^32. */
function isFlags(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff;
}
