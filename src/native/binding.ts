/**
 * The native addon's loader and its typed face. The addon (native/build/rdmacm.node, built at
 * install from native/src/*.c where rdma-core's headers exist) is optional: {@link loadBinding}
 * returns `null` — and {@link bindingStatus} says why — when it is absent, fails to load (e.g.
 * libibverbs.so.1 missing at run time), was built for another ABI, or is switched off
 * (`RDMACM_BACKEND=soft`, or `RDMACM_NATIVE=0`, which also makes tests behave as on a machine
 * without the headers). `RDMACM_NATIVE_PATH` loads the addon from another file.
 *
 * Every addon function returns a negative errno number instead of throwing; {@link check} turns
 * that into an {@link RdmaError} naming the ibverbs/librdmacm call. The data path shares two
 * scratch buffers with the addon (no per-call allocation): work requests are encoded into
 * {@link Scratch.wr} and completions decoded from {@link Scratch.wc}, in the layouts of abi.ts
 * (kept in step with native/src/addon.h); loading checks that the addon was built for them.
 */
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RdmaError } from '../errors.js';
import { AH, QA, WR_STATUS_WORD } from './abi.js';

/** The ABI the JS side speaks (native/src/addon.h `ADDON_ABI`). */
export const ADDON_ABI = 3;

/** An opaque handle to an rdma-core object (an N-API external). */
export type Handle = { readonly __native: unique symbol };

/** `deviceList()` entries. */
export interface NativeDeviceEntry {
  name: string;
  ctx: Handle;
  /** node GUID, 16 hex digits. */
  guid: string;
  nodeType: number;
  transportType: number;
  /** The context is librdmacm's own (rdma_get_devices): rdma_cm works on it. */
  cm: boolean;
  /** The context's `async_fd` (its async events' file descriptor). */
  asyncFd?: number;
}

/** The event object `cmEvent` handlers receive (native/src/cm.c `event_value`). */
export interface NativeCmEvent {
  key: number;
  event: number;
  status: number;
  listenKey: number;
  newId?: Handle;
  mcKey?: number;
  conn?: {
    privateData: Buffer;
    responderResources: number;
    initiatorDepth: number;
    flowControl: number;
    retryCount: number;
    rnrRetryCount: number;
    srq: number;
    qpNum: number;
  };
  ud?: {
    privateData: Buffer;
    ahAttr: {
      dlid: number;
      sl: number;
      srcPathBits: number;
      staticRate: number;
      isGlobal: boolean;
      portNum: number;
      flowLabel: number;
      sgidIndex: number;
      hopLimit: number;
      trafficClass: number;
      dgid: Buffer;
    };
    qpNum: number;
    qkey: number;
  };
}

type R<T> = T | number;

/** The addon's exports. */
export interface NativeBinding {
  abi: number;
  wrScratchBytes: number;
  wcScratchBytes: number;
  qaWords: number;
  ahWords: number;
  setScratch(wr: ArrayBuffer, wc: ArrayBuffer): number;
  setHandlers(cq: (chanKey: number, cqKey: number) => void, cm: (ev: NativeCmEvent) => void, async: (ctxKey: number, type: number, kind: number, key: number) => void): number;
  deviceList(): R<NativeDeviceEntry[]>;
  queryDevice(ctx: Handle): R<Record<string, number | bigint | string>>;
  /** ibv_query_device_ex's fields past orig_attr, flattened (absent in addons built before it). */
  queryDeviceEx?(ctx: Handle): R<Record<string, number | bigint>>;
  queryPort(ctx: Handle, port: number): R<Record<string, number>>;
  queryGid(ctx: Handle, port: number, index: number, out: Uint8Array): number;
  queryPkey(ctx: Handle, port: number, index: number): number;
  watchAsync(ctx: Handle, key: number): number;
  allocPd(ctx: Handle): R<Handle>;
  deallocPd(pd: Handle): number;
  /** `[mr, addr, lkey, rkey, length, slot]`: the slot names the MR in a BIND_MW work request. */
  regMr(pd: Handle, mem: ArrayBufferView | ArrayBuffer | SharedArrayBuffer, access: number, iova: number): R<[Handle, number, number, number, number, number]>;
  deregMr(mr: Handle): number;
  createCompChannel(ctx: Handle, key: number): R<Handle>;
  compChannelRef(ch: Handle, delta: number): number;
  destroyCompChannel(ch: Handle): number;
  createCq(ctx: Handle, cqe: number, ch: Handle | null, vector: number, key: number): R<[Handle, number]>;
  /** ibv_create_cq_ex with `wcFlags` (absent in addons built before it). */
  createCqEx?(ctx: Handle, cqe: number, ch: Handle | null, vector: number, key: number, wcFlags: number): R<[Handle, number]>;
  /** Poll a CQ made by createCqEx through ibv_start_poll: the WC scratch, and each completion's timestamp and wallclock in `ts[2i]`, `ts[2i + 1]`. */
  pollCqEx?(cq: Handle, max: number, ts: BigUint64Array): number;
  destroyCq(cq: Handle): number;
  reqNotifyCq(cq: Handle, solicitedOnly: boolean): number;
  ackCqEvents(cq: Handle, n: number): number;
  pollCq(cq: Handle, max: number): number;
  createAh(pd: Handle, attr: Float64Array, dgid: Uint8Array | null): R<[Handle, number]>;
  destroyAh(ah: Handle): number;
  /** ibv_create_qp, or with `createFlags` non-zero ibv_create_qp_ex (comp_mask PD | CREATE_FLAGS). */
  createQp(pd: Handle, sendCq: Handle, recvCq: Handle, qpType: number, sendWr: number, recvWr: number, sendSge: number, recvSge: number, inline: number, sigAll: boolean, key: number, srq: Handle | null, createFlags: number): R<QpResult>;
  modifyQp(qp: Handle, mask: number, attr: Float64Array, dgid: Uint8Array | null): number;
  queryQp(qp: Handle, mask: number, out: Float64Array, dgid: Uint8Array | null): number;
  qpState(qp: Handle): number;
  destroyQp(qp: Handle): number;
  attachMcast(qp: Handle, gid: Uint8Array, lid: number): number;
  detachMcast(qp: Handle, gid: Uint8Array, lid: number): number;
  postSend(qp: Handle, n: number): number;
  postRecv(qp: Handle, n: number): number;
  /** `[srq, maxWr, maxSge]` as the provider sized it. */
  createSrq(pd: Handle, maxWr: number, maxSge: number, srqLimit: number, key: number): R<[Handle, number, number]>;
  modifySrq(srq: Handle, mask: number, maxWr: number, srqLimit: number): number;
  /** `[maxWr, maxSge, srqLimit]`. */
  querySrq(srq: Handle): R<[number, number, number]>;
  destroySrq(srq: Handle): number;
  postSrqRecv(srq: Handle, n: number): number;
  /** `[mw, rkey, slot]`. */
  allocMw(pd: Handle, type: number): R<[Handle, number, number]>;
  deallocMw(mw: Handle): number;
  /** ibv_bind_mw: the window's new rkey. */
  bindMw(qp: Handle, mw: Handle, mwRkey: number, mr: Handle | null, addr: number, length: number, access: number, wrIdLo: number, wrIdHi: number, sendFlags: number): number;
  /** A QP's or CQ's slot for the calls by slot (given on first use, dropped when it is destroyed). */
  dataSlot(qpOrCq: Handle): number;
  /** postSend / postRecv / pollCq of the QP or CQ whose slot is in WR_SLOT_WORD, the count in WR_COUNT_WORD. */
  postSendSlot(): number;
  postRecvSlot(): number;
  pollCqSlot(): number;
  cLoopPingPong(qpA: Handle, cqA: Handle, qpB: Handle, cqB: Handle, args: Float64Array): number;
  cLoopStream(qpA: Handle, cqA: Handle, qpB: Handle, cqB: Handle, args: Float64Array): number;
  cmInit(): number;
  cmRef(delta: number): number;
  cmCreateId(key: number, ps: number): R<Handle>;
  cmSetKey(id: Handle, key: number): number;
  /** rdma_create_ep (RAI_PASSIVE) + rdma_migrate_id: an id of `qpType` bound to the address. */
  cmCreateIdBound(key: number, ps: number, qpType: number, address: string, port: number, scope: number): R<Handle>;
  cmBind(id: Handle, address: string, port: number, scope: number): number;
  cmResolveAddr(id: Handle, src: string | null, srcPort: number, srcScope: number, dst: string, dstPort: number, dstScope: number, timeoutMs: number): number;
  cmResolveRoute(id: Handle, timeoutMs: number): number;
  cmListen(id: Handle, backlog: number): number;
  cmConnect(id: Handle, pdata: Uint8Array | null, rr: number, idepth: number, flow: number, retry: number, rnr: number, srq: number, qpNum: number): number;
  cmAccept(id: Handle, pdata: Uint8Array | null, rr: number, idepth: number, flow: number, retry: number, rnr: number, srq: number, qpNum: number): number;
  cmReject(id: Handle, pdata: Uint8Array | null): number;
  cmDisconnect(id: Handle): number;
  cmEstablish(id: Handle): number;
  cmDestroyId(id: Handle): number;
  cmInfo(id: Handle): R<[string | null, number, string, number, string, number]>;
  /** rdma_create_qp, or with `createFlags` non-zero rdma_create_qp_ex (comp_mask PD | CREATE_FLAGS). */
  cmCreateQp(id: Handle, pd: Handle, sendCq: Handle, recvCq: Handle, qpType: number, sendWr: number, recvWr: number, sendSge: number, recvSge: number, inline: number, sigAll: boolean, key: number, srq: Handle | null, createFlags: number): R<QpResult>;
  cmSetOption(id: Handle, level: number, name: number, value: number): number;
  cmInitQpAttr(id: Handle, state: number, out: Float64Array, dgid: Uint8Array | null): number;
  cmJoinMulticast(id: Handle, address: string, port: number, scope: number, key: number, flags: number): number;
  cmLeaveMulticast(id: Handle, address: string, port: number, scope: number): number;
}

/** `[qp, qpNum, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData]`. */
export type QpResult = [Handle, number, number, number, number, number, number];

/** The data-path scratch buffers shared with the addon. */
export interface Scratch {
  wr: Uint32Array;
  wrF64: Float64Array;
  wc: Uint32Array;
}

/** Why the addon is (not) loaded. */
export interface BindingStatus {
  loaded: boolean;
  /** Empty when loaded; else one line. */
  reason: string;
  /** The file tried. */
  path: string;
}

/** The package's root directory (the one holding `dist/` and `native/`). */
function packageRoot(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
}

/** The addon file this package builds (`native/build/rdmacm.node` next to `dist/`). */
export function defaultAddonPath(): string {
  return join(packageRoot(), 'native', 'build', 'rdmacm.node');
}

/**
 * The command that builds the addon again: `npm rebuild rdmacm` where the package is a dependency
 * (under node_modules), `npm run build:native` in the package's own checkout.
 */
export function rebuildCommand(): string {
  return packageRoot().split(sep).includes('node_modules') ? 'npm rebuild rdmacm' : 'npm run build:native';
}

/**
 * Why the last build did not make the addon file `path`, as native/build.mjs kept it in
 * build-status.json beside it; null when it kept nothing for that file.
 */
function buildFailure(path: string): string | null {
  try {
    const all = JSON.parse(readFileSync(join(dirname(path), 'build-status.json'), 'utf8')) as Record<string, { built?: boolean; reason?: unknown } | undefined>;
    const st = all[basename(path)];
    return st && st.built === false && typeof st.reason === 'string' ? st.reason : null;
  } catch {
    return null;
  }
}

let loaded: NativeBinding | null | undefined;
let scratch: Scratch | null = null;
const status: BindingStatus = { loaded: false, reason: 'not tried', path: '' };

/** Handlers the addon calls; the verbs and CM modules fill them in. */
export const dispatch = {
  cqEvent: (_chanKey: number, _cqKey: number): void => {},
  cmEvent: (_ev: NativeCmEvent): void => {},
  asyncEvent: (_ctxKey: number, _type: number, _kind: number, _key: number): void => {},
};

/**
 * Load the addon once. `null` when it is switched off, absent or unusable ({@link bindingStatus}
 * says why); never throws.
 */
export function loadBinding(): NativeBinding | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  const path = process.env['RDMACM_NATIVE_PATH'] || defaultAddonPath();
  status.path = path;
  const backend = process.env['RDMACM_BACKEND'];
  if (backend === 'soft') {
    status.reason = 'RDMACM_BACKEND=soft';
    return null;
  }
  if (process.env['RDMACM_NATIVE'] === '0') {
    status.reason = 'RDMACM_NATIVE=0';
    return null;
  }
  if (!existsSync(path)) {
    const why = buildFailure(path);
    status.reason = why !== null ? `not built: ${why}` : `not built (${path} absent: install rdma-core's headers, e.g. apt install libibverbs-dev librdmacm-dev, then ${rebuildCommand()})`;
    return null;
  }
  let b: NativeBinding;
  try {
    const req = createRequire(import.meta.url);
    b = req(path) as NativeBinding;
  } catch (e) {
    status.reason = `failed to load ${path}: ${(e as Error).message.split('\n')[0] ?? ''}`;
    return null;
  }
  if (typeof b !== 'object' || b === null || b.abi !== ADDON_ABI) {
    status.reason = `${path} speaks ABI ${String((b as { abi?: unknown } | null)?.abi)}, not ${ADDON_ABI}: rebuild it (${rebuildCommand()})`;
    return null;
  }
  const wrAb = new ArrayBuffer(b.wrScratchBytes);
  const wcAb = new ArrayBuffer(b.wcScratchBytes);
  if (b.setScratch(wrAb, wcAb) !== 0 || b.qaWords !== QA.WORDS || b.ahWords !== AH.WORDS || b.wrScratchBytes !== (WR_STATUS_WORD + 4) * 4) {
    status.reason = `${path}: scratch layout mismatch: rebuild it (${rebuildCommand()})`;
    return null;
  }
  scratch = { wr: new Uint32Array(wrAb), wrF64: new Float64Array(wrAb), wc: new Uint32Array(wcAb) };
  b.setHandlers(
    (ch, cq) => dispatch.cqEvent(ch, cq),
    (ev) => dispatch.cmEvent(ev),
    (ctx, type, kind, key) => dispatch.asyncEvent(ctx, type, kind, key),
  );
  loaded = b;
  status.loaded = true;
  status.reason = '';
  return b;
}

/** The scratch buffers (after a successful {@link loadBinding}). */
export function scratchBuffers(): Scratch {
  if (scratch === null) throw new RdmaError('ENODEV', { op: 'rdmacm native', detail: 'addon not loaded' });
  return scratch;
}

/** Why the addon is or is not loaded (loads the addon on first use). */
export function bindingStatus(): Readonly<BindingStatus> {
  loadBinding();
  return { ...status };
}

/**
 * An addon result: a negative number is `-errno` and throws an RdmaError naming `op`; anything
 * else is returned.
 */
export function check<T>(r: T | number, op: string, detail?: string): T {
  if (typeof r === 'number' && r < 0) throw RdmaError.fromErrno(-r, detail === undefined ? { op } : { op, detail });
  return r as T;
}
