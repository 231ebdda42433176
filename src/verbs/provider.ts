/**
 * The provider registry, after rdma-core's `verbs_register_driver()`: the verbs layer must not
 * import a transport, so each transport (the software iWARP device, the software RoCE device, a
 * native backend) registers a {@link VerbsProvider} when its module is loaded. The verbs objects
 * (devices, contexts, PDs, MRs, CQs, completion channels, AHs) are transport-neutral and live
 * here; what differs per device comes from the provider: device and port attributes, the GID and
 * P_Key tables, the MR access rights it enforces, QPs (whose data path is the transport),
 * address handles and multicast attachment.
 */
import { err } from '../errors.js';
import type { GidType, MwBind, MwType, QpCap, QpType } from './types.js';
import type { Mw } from './mw.js';
import type { AhAttr } from './ah.js';
import type { Context } from './context.js';
import type { Cq } from './cq.js';
import type { CompChannel } from './comp-channel.js';
import type { Device, DeviceAttr, DeviceInfo, PortAttr } from './device.js';
import type { DeviceAttrEx } from './device-attr-ex.js';
import type { Pd } from './pd.js';
import type { Mr } from './mr.js';
import type { Qp } from './qp.js';
import type { WrCaps } from './wr-check.js';
import type { Srq, SrqCaps } from './srq.js';
import type { NetdevPolicy } from './port-watch.js';

/**
 * `struct ibv_qp_init_attr` as handed to {@link VerbsProvider.createQp} by `Pd.createQp`
 * (already checked against the device limits; CQs belong to the same context and are alive).
 */
export interface QpInitAttr {
  /** `qp_type`. */
  qpType: QpType;
  /** CQ for send (and RDMA Read/Write) completions. */
  sendCq: Cq;
  /** CQ for receive completions. */
  recvCq: Cq;
  /**
   * `srq`: the shared receive queue the QP takes its receive WQEs from (same context, not
   * destroyed: checked). Its own receive queue is then unused; `cap.maxRecvWr` / `maxRecvSge`
   * are not checked.
   */
  srq?: Srq | null;
  /** Requested queue sizes; missing fields are the provider's defaults. */
  cap: Partial<QpCap>;
  /** `sq_sig_all`: every send WR generates a completion. */
  sqSigAll?: boolean;
  /** `qp_context`: an opaque user value, returned unchanged. */
  qpContext?: unknown;
  /**
   * `create_flags` of `ibv_qp_init_attr_ex` (with `IBV_QP_INIT_ATTR_CREATE_FLAGS`): a
   * {@link QpCreateFlags} mask, 0 or absent for none. A device refuses a flag it lacks with
   * EOPNOTSUPP (rxe's `check_qp_init_attr` and `rxe_create_qp` refuse them all; siw has no
   * `create_qp_ex`, for which libibverbs answers EOPNOTSUPP).
   */
  createFlags?: number;
}

/** `enum ibv_qp_create_flags`. */
export const QpCreateFlags = {
  /**
   * The QP's sends to a multicast group are not looped back to this host: no QP of the device
   * (of this process or another) receives them, the QP itself included; the network does.
   * Devices that have it report `DEVICE_BLOCK_MULTICAST_LOOPBACK` in `deviceCapFlags`.
   */
  BLOCK_SELF_MCAST_LB: 1 << 1,
  SCATTER_FCS: 1 << 8,
  CVLAN_STRIPPING: 1 << 9,
  SOURCE_QPN: 1 << 10,
  PCI_WRITE_END_PADDING: 1 << 11,
} as const;

/**
 * What a provider's extended verbs serve (its `create_cq_ex` and `create_qp_ex`, ex-verbs.ts).
 * The builder calls a QP may be created for (`send_ops_flags`) are not declared here: they are
 * the opcodes of its `WrCaps` for the QP type that the device's attributes have (atomics,
 * memory windows).
 */
export interface ExCaps {
  /**
   * The `wc_flags` (`IBV_WC_EX_WITH_*`) `ibv_create_cq_ex` serves over an ordinary CQ of the
   * device (what `ibv_poll_cq` reports).
   */
  readonly wcFlags: number;
  /**
   * With {@link VerbsProvider.createCqEx}: the `wc_flags` beyond those it hands to the device's
   * own `ibv_create_cq_ex`, which refuses what the device cannot serve (the native backend:
   * completion timestamps). Any other flag is EOPNOTSUPP.
   */
  readonly deviceWcFlags?: number;
}

/** `ibv_create_cq`'s arguments, as {@link VerbsProvider.createCqEx} takes them. */
export interface CqArgs {
  cqe: number;
  channel: CompChannel | null;
  compVector: number;
  cqContext: unknown;
}

/**
 * The minimum the verbs layer needs from a QP object. The provider's QP must, in `destroy()`,
 * call `pd._releaseQp(this)` (which detaches it from its CQs, from the PD and from the
 * context's QP table, and frees its QP number).
 */
export interface QpLike {
  /** `qp_num`, allocated with `Context._allocQpNum()`. */
  readonly qpNum: number;
  /** `ibv_destroy_qp`. */
  destroy(): void;
}

/**
 * A transport's entry points (cf. rdma-core `struct verbs_device_ops` + `struct
 * verbs_context_ops`). The verbs layer validates arguments that do not depend on the device
 * (shapes, ranges, object ownership) before calling; the provider checks the rest.
 */
export interface VerbsProvider {
  /** Provider name, e.g. `'siw'`. Devices name it in {@link DeviceInfo.provider}. */
  readonly name: string;
  /** The devices this provider currently offers; called by `getDeviceList()` every time. */
  listDevices(): DeviceInfo[];
  /**
   * True for the provider of the kernel's devices (rdma-core, see src/native/); absent for the
   * soft devices. `RDMACM_BACKEND` selects between the two kinds (see {@link backendSelection}).
   */
  readonly native?: boolean;
  /**
   * `ibv_open_device` for a provider whose verbs objects are its own (subclasses of `Context`,
   * `Pd` ...: the native backend's call into rdma-core). Absent: the transport-neutral `Context`.
   */
  openDevice?(dev: Device): Context;
  /**
   * `ibv_query_device` for a device of this provider (`vendorPartId`: the device's number in
   * this process, from 1). Called once per device when its context is opened; the result is
   * frozen and handed out as copies.
   */
  queryDevice(info: DeviceInfo, vendorPartId: number): DeviceAttr;
  /** `ibv_query_port` (`portNum` already checked: 1..`physPortCnt`). */
  queryPort(info: DeviceInfo, portNum: number): PortAttr;
  /**
   * `ibv_query_gid`: GID `index` of the port (16 bytes; `index` already checked against
   * `gidTblLen`). An unused entry is all zeros, as the kernel reports.
   */
  queryGid(info: DeviceInfo, portNum: number, index: number): Uint8Array;
  /** `ibv_query_gid_type`: the type of GID `index`. Default: IB for InfiniBand link layers, else RoCE v2. */
  queryGidType?(info: DeviceInfo, portNum: number, index: number): GidType;
  /** `ibv_query_pkey`: P_Key `index` of the port (`index` already checked against `pkeyTblLen`). */
  queryPkey?(info: DeviceInfo, portNum: number, index: number): number;
  /**
   * The MR access rights the device enforces (`Access` bits; siw: local write, remote write,
   * remote read). Registration accepts any valid combination; rights outside this mask are not
   * granted (siw's `IWARP_ACCESS_MASK`; a device with atomics includes REMOTE_ATOMIC, one with
   * memory windows MW_BIND).
   */
  accessMask(info: DeviceInfo): number;
  /**
   * `ibv_create_qp` for a device of this provider. Must obtain its QP number from
   * `ctx._allocQpNum()`; if it throws after that, the number is released by the caller.
   * Registration in `ctx._qps`, `pd` and the CQs is done by `Pd.createQp` once this returns.
   * A provider that cannot serve `attr.qpType` throws EOPNOTSUPP (siw for UD).
   * @throws RdmaError (EINVAL, EOPNOTSUPP, ENOMEM ...) as ibverbs would.
   */
  createQp(ctx: Context, pd: Pd, attr: QpInitAttr): QpLike;
  /**
   * What this provider's QPs accept at post time — the opcodes of each QP type, SGE and message
   * limits, an RDMA READ's sink, how much the verbs layer checks (see wr-check.ts). The verbs
   * layer checks every work request against it once per post. Absent: wr-check.ts's
   * `DEFAULT_WR_CAPS` (IB's opcodes, every check made there).
   */
  readonly wrCaps?: WrCaps;
  /**
   * The extended verbs: present, the device has `ibv_create_cq_ex` and `ibv_create_qp_ex`
   * (rxe); absent, both are EOPNOTSUPP (rdma-core's siw provider has neither).
   */
  readonly exCaps?: ExCaps;
  /**
   * `ibv_query_device_ex` for a device whose answer is more than ex-verbs.ts derives from its
   * `ibv_query_device` attributes (`device_cap_flags_ex` = `device_cap_flags`, the port count, the
   * rest 0 — siw's and rxe's): the native backend asks rdma-core. Called once per context.
   */
  queryDeviceEx?(info: DeviceInfo, attr: Readonly<DeviceAttr>): DeviceAttrEx;
  /**
   * The device's own `ibv_create_cq_ex`, for `wc_flags` in `exCaps.deviceWcFlags`: a CQ of the
   * context (checked as `ibv_create_cq` checks its arguments) whose `pollInto` also fills the
   * completion timestamps of `WcTs` objects (cq-ex.ts). The device refuses flags it lacks.
   */
  createCqEx?(ctx: Context, args: CqArgs, wcFlags: number): Cq;
  /**
   * `ibv_alloc_mw` for a device with memory windows: refuse a type it lacks (throw); the verbs
   * layer has checked the type (1 or 2), the PD and `max_mw`, and makes the window (mw.ts).
   * Absent: the device has no windows, `allocMw` fails with EOPNOTSUPP (siw; libibverbs'
   * answer for a provider without `alloc_mw`). A device that has them also says so in its
   * attributes (`max_mw`, `IBV_DEVICE_MEM_WINDOW`, `..._TYPE_2A/2B`).
   */
  allocMw?(ctx: Context, pd: Pd, type: MwType): void;
  /**
   * `ibv_bind_mw` (the provider's `bind_mw`) for a type 1 window: after libibverbs' checks
   * (type 1, an MR only with an address and length, the MR in the window's PD), bind `mw` as
   * `bind` says through `qp` — rxe posts a BIND_MW work request — and return the rkey it binds
   * with (the verbs layer sets `mw.rkey` to it). Absent: EOPNOTSUPP.
   * @throws RdmaError as the provider refuses (rxe: EINVAL for a zero-based window, the
   *   post's errno).
   */
  bindMw?(qp: Qp, mw: Mw, bind: MwBind): number;
  /**
   * How the device sizes and checks shared receive queues (srq.ts); the queue and its limit
   * event are the verbs layer's, the providers' QPs take WQEs from it through `Qp`. Absent: the
   * device has no SRQs (`ibv_create_srq` EOPNOTSUPP) and must report `max_srq` 0.
   */
  readonly srqCaps?: SrqCaps;
  /**
   * For a device bound to a network interface that the kernel does not watch for it (the soft
   * devices): how its port follows the interface — state, events, what happens to its QPs, and
   * its removal (port-watch.ts). Absent: the port is not watched (a fake device; the native
   * backend, whose kernel raises the events itself).
   */
  readonly netdevPolicy?: NetdevPolicy;
  /**
   * `ibv_create_ah`: check `attr` against the device (port, GID index, GRH required on RoCE:
   * EINVAL) and return what the provider needs to address packets (kept in `ah._provider`).
   * Absent: the device has no address handles (iWARP), `createAh` fails with EOPNOTSUPP.
   */
  createAh?(ctx: Context, pd: Pd, attr: AhAttr): unknown;
  /** `ibv_destroy_ah`: release what {@link createAh} returned. */
  destroyAh?(ctx: Context, providerData: unknown): void;
  /**
   * `ibv_attach_mcast` for a UD QP of this provider (`gid`: 16 bytes; the verbs layer has
   * checked the QP type). Absent: EOPNOTSUPP.
   */
  attachMcast?(qp: Qp, gid: Uint8Array, lid: number): void;
  /** `ibv_detach_mcast`. EINVAL if the QP is not attached to the group. */
  detachMcast?(qp: Qp, gid: Uint8Array, lid: number): void;
  /**
   * `ibv_rereg_mr` for an MR of this provider's device, after libibverbs' input checks. Absent:
   * EOPNOTSUPP (libibverbs' default op), as for every provider of rdma-core without `rereg_mr`.
   */
  reregMr?(mr: Mr, flags: number, pd: Pd | null, mem: ArrayBufferView | ArrayBuffer | SharedArrayBuffer | null, access: number): void;
  /**
   * `ibv_resize_cq` for a CQ of this provider's device: check `cqe` as the device does and call
   * `cq._setSize(cqe)`. Absent: the device cannot resize CQs (EOPNOTSUPP, rdma-core's default op).
   */
  resizeCq?(cq: Cq, cqe: number): void;
  /**
   * The CQEs a CQ asked for `cqe` gets, at creation and at resize (the device's queue rounding:
   * rxe's `rxe_queue_init` gives `roundup_pow_of_two(cqe + 1) - 1`). Absent: siw's
   * `roundup_pow_of_two(cqe)`.
   */
  cqSlots?(cqe: number): number;
  /**
   * The device's counters by name (what `rdma statistic show link DEV/PORT` lists: the kernel's
   * hw counters of the port, the soft devices' own — docs/counters.md). A device lists only
   * counters it counts. Absent: the device has none (`Context.queryCounters` answers EOPNOTSUPP).
   */
  counters?(info: DeviceInfo, portNum: number): Record<string, number>;
  /**
   * Resolves once the connections this provider closed gracefully have sent everything they had
   * queued and closed, or after `timeoutMs`. See {@link settleConnections}.
   */
  settle?(timeoutMs: number): Promise<void>;
}

const providers = new Map<string, VerbsProvider>();

/** The operations a provider may leave out. */
const OPTIONAL_OPS = ['queryGidType', 'queryPkey', 'allocMw', 'bindMw', 'createAh', 'destroyAh', 'attachMcast', 'detachMcast', 'resizeCq', 'reregMr', 'settle', 'openDevice', 'queryDeviceEx', 'createCqEx', 'counters'] as const;

/**
 * Register a provider (rdma-core `verbs_register_driver`). Registering the same object again is
 * a no-op.
 * @throws RdmaError EINVAL if `p` is not a provider; EEXIST if another provider has that name.
 */
export function registerProvider(p: VerbsProvider): void {
  if (
    typeof p !== 'object' ||
    p === null ||
    typeof p.name !== 'string' ||
    p.name === '' ||
    typeof p.listDevices !== 'function' ||
    typeof p.createQp !== 'function' ||
    typeof p.queryDevice !== 'function' ||
    typeof p.queryPort !== 'function' ||
    typeof p.queryGid !== 'function' ||
    typeof p.accessMask !== 'function' ||
    OPTIONAL_OPS.some((k) => p[k] !== undefined && typeof p[k] !== 'function') ||
    (p.wrCaps !== undefined && (typeof p.wrCaps !== 'object' || p.wrCaps === null)) ||
    (p.exCaps !== undefined && (typeof p.exCaps !== 'object' || p.exCaps === null || typeof p.exCaps.wcFlags !== 'number')) ||
    (p.netdevPolicy !== undefined && (typeof p.netdevPolicy !== 'object' || p.netdevPolicy === null || typeof p.netdevPolicy.portActive !== 'function')) ||
    (p.srqCaps !== undefined && (typeof p.srqCaps !== 'object' || p.srqCaps === null || typeof p.srqCaps.depth !== 'function'))
  ) {
    throw err('EINVAL', 'registerProvider', 'not a VerbsProvider');
  }
  const old = providers.get(p.name);
  if (old === p) return;
  if (old !== undefined) throw err('EEXIST', 'registerProvider', `provider '${p.name}' already registered`);
  providers.set(p.name, p);
}

/**
 * Remove a provider (its devices disappear from `getDeviceList()`; already opened contexts stay
 * usable except for `createQp`, which then fails with ENODEV). Mainly for tests.
 * @returns true if a provider of that name was registered.
 */
export function unregisterProvider(name: string): boolean {
  return providers.delete(name);
}

/** The provider registered under `name`, if any. */
export function getProvider(name: string): VerbsProvider | undefined {
  return providers.get(name);
}

/** Which devices a process uses: `RDMACM_BACKEND` = `auto` (default), `soft` or `native`. */
export type Backend = 'auto' | 'soft' | 'native';

const BACKEND: Backend = ((): Backend => {
  const v = process.env['RDMACM_BACKEND'];
  return v === 'soft' || v === 'native' ? v : 'auto';
})();

/**
 * The backend selection (`RDMACM_BACKEND`, read at start-up): `auto` lists the kernel's RDMA
 * devices (when the native addon is installed and the kernel has some) before the soft ones,
 * `soft` only the soft devices, `native` only the kernel's.
 */
export function backendSelection(): Backend {
  return BACKEND;
}

/**
 * The registered providers the backend selection admits: native ones first (a kernel device
 * that owns an address is the one resolution finds, as in librdmacm), then the soft ones, each
 * group in registration order.
 */
export function listProviders(): VerbsProvider[] {
  const out: VerbsProvider[] = [];
  if (BACKEND !== 'soft') for (const p of providers.values()) if (p.native === true) out.push(p);
  if (BACKEND !== 'native') for (const p of providers.values()) if (p.native !== true) out.push(p);
  return out;
}

/**
 * Wait until every connection closed gracefully (rdma_disconnect, rclose) has handed all it had
 * queued to the peer and closed, but at most `timeoutMs`. Call it before `process.exit()`: the
 * kernel keeps sending what a closed socket still holds after its process exits, Node does not,
 * so a tool that exits right after rdma_disconnect could otherwise cut off its last messages.
 * Resolves at once when nothing is pending. A process that ends by itself (no `process.exit`)
 * does not need it.
 */
export async function settleConnections(timeoutMs = 3000): Promise<void> {
  await Promise.all([...providers.values()].map((p) => p.settle?.(timeoutMs)));
}
