/**
 * The native provider: the kernel's RDMA devices (siw0, rxe0, mlx5_0 ...) through rdma-core,
 * listed by `getDeviceList()` beside the soft devices. It registers only when the addon loads and
 * rdma-core reports at least one device (`ibv_get_device_list`), and not at all with
 * `RDMACM_BACKEND=soft`.
 *
 * Each device is bound to the network interface it serves — read from sysfs
 * (`/sys/class/infiniband/<dev>/ports/1/gid_attrs/ndevs/0`, the PCI device's `net/` folder), from
 * `rdma link` (iproute2), or matched by its GUID against the interfaces' MACs (siw puts the MAC in
 * its node GUID, rxe the EUI-64 of the MAC) — so that resolving an address finds the kernel device
 * that owns it, as librdmacm does.
 */
import { kernelHwCounters } from './hw-counters.js';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { err } from '../errors.js';
import { registerProvider, type QpInitAttr, type VerbsProvider } from '../verbs/provider.js';
import {
  netdevs,
  type DeviceAttr,
  type DeviceInfo,
  type Device,
  type NetdevInfo,
  type PortAttr,
} from '../verbs/device.js';
import type { Context } from '../verbs/context.js';
import type { Pd } from '../verbs/pd.js';
import type { Qp } from '../verbs/qp.js';
import type { AhAttr } from '../verbs/ah.js';
import { ACCESS_ALL } from '../verbs/mr.js';
import { TransportType, type MwBind } from '../verbs/types.js';
import type { Mw } from '../verbs/mw.js';
import { isAddr, isU32 } from '../util/fields.js';
import { baseDeviceAttrEx, type DeviceAttrEx } from '../verbs/device-attr-ex.js';
import { WC_STANDARD_FLAGS, WcExFlags } from '../verbs/cq-ex.js';
import { AH, encodeAh, putWrId, type NativeAhData } from './abi.js';
import { check, loadBinding, type Handle, type NativeBinding, type NativeDeviceEntry } from './binding.js';
import { takeAttached } from './cm-qp.js';
import { NativeContext } from './context.js';
import { NativePd } from './pd.js';
import { NativeQp } from './qp.js';
import { NativeMr } from './mr.js';
import { NativeMw } from './mw.js';
import { NATIVE_WR_CAPS } from './wr-caps.js';

export { NATIVE_WR_CAPS } from './wr-caps.js';

/** The provider name native devices carry in `DeviceInfo.provider`. */
export const NATIVE_PROVIDER = 'rdma-core';

/**
 * `DeviceAttr.maxInlineData` of a native device: rdma-core does not report it; the provider
 * refuses a QP asking for more than it can (EINVAL), so the verbs layer lets any request through.
 */
const NATIVE_MAX_INLINE = 0xffff;

interface NativeDev {
  entry: NativeDeviceEntry;
  attr: DeviceAttr;
  ifname: string;
}

let devs: NativeDev[] | null = null;
let cache: { at: number; list: DeviceInfo[] } | null = null;
const CACHE_MS = 1000;

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** `rdma -j link show`: device name → netdev, or an empty map when iproute2's rdma is absent. */
let rdmaLinks: Map<string, string> | null = null;
function linksFromRdmaTool(): Map<string, string> {
  if (rdmaLinks !== null) return rdmaLinks;
  rdmaLinks = new Map();
  try {
    const out = execFileSync('rdma', ['-j', 'link', 'show'], { encoding: 'utf8', timeout: 3000, stdio: ['ignore', 'pipe', 'ignore'] });
    const arr = JSON.parse(out) as { ifname?: string; netdev?: string }[];
    for (const l of arr) if (l.ifname && l.netdev) rdmaLinks.set(l.ifname.split('/')[0] ?? l.ifname, l.netdev);
  } catch {
    // no iproute2 rdma tool: other sources decide
  }
  return rdmaLinks;
}

function macToBytes(mac: string): number[] {
  return mac.split(':').map((x) => parseInt(x, 16));
}

/** The interface a kernel RDMA device serves ('' when none is found). */
function ifnameOf(name: string, guid: string, nds: NetdevInfo[]): string {
  const base = `/sys/class/infiniband/${name}`;
  const nd = readText(`${base}/ports/1/gid_attrs/ndevs/0`);
  if (nd) return nd;
  try {
    const net = readdirSync(`${base}/device/net`);
    if (net[0] !== undefined) return net[0];
  } catch {
    // a virtual device has no PCI function
  }
  const l = linksFromRdmaTool().get(name);
  if (l) return l;
  // siw: the MAC in the GUID's first six bytes; rxe: the MAC's EUI-64.
  const g = guid.padStart(16, '0');
  const gb = Array.from({ length: 8 }, (_, i) => parseInt(g.slice(2 * i, 2 * i + 2), 16));
  for (const n of nds) {
    const m = macToBytes(n.mac);
    if (m.length !== 6 || m.every((x) => x === 0)) continue;
    if (m.every((x, i) => gb[i] === x)) return n.name;
    const eui = [(m[0] as number) ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
    if (eui.every((x, i) => gb[i] === x)) return n.name;
  }
  return '';
}

/** The device list, read once (rdma-core's contexts stay open for the process's life). */
function nativeDevices(b: NativeBinding): NativeDev[] {
  if (devs !== null) return devs;
  devs = [];
  const r = b.deviceList();
  if (typeof r === 'number') return devs;
  const nds = netdevs();
  for (const e of r) {
    const q = b.queryDevice(e.ctx);
    if (typeof q === 'number') continue;
    // The kernel device's own answer: SRQs (max_srq ...), memory windows (max_mw and the
    // MEM_WINDOW bits of device_cap_flags) and atomics are what ibv_query_device reports.
    const attr: DeviceAttr = { ...(q as unknown as DeviceAttr), maxInlineData: NATIVE_MAX_INLINE };
    devs.push({ entry: e, attr, ifname: ifnameOf(e.name, e.guid, nds) });
  }
  return devs;
}

function transportOf(t: number): TransportType {
  return t === TransportType.IWARP ? TransportType.IWARP : t === TransportType.IB ? TransportType.IB : TransportType.UNSPECIFIED;
}

function listDevices(): DeviceInfo[] {
  const now = Date.now();
  if (cache && now - cache.at < CACHE_MS) return cache.list;
  const b = loadBinding();
  const list: DeviceInfo[] = [];
  if (b !== null) {
    const nds = netdevs();
    for (const d of nativeDevices(b)) {
      const nd = nds.find((n) => n.name === d.ifname);
      const mtu = Number(readText(`/sys/class/net/${d.ifname}/mtu`) ?? '') || nd?.mtu || 1500;
      const info: DeviceInfo = {
        name: d.entry.name,
        provider: NATIVE_PROVIDER,
        transport: transportOf(d.entry.transportType),
        ifname: d.ifname,
        addresses: nd?.addresses ?? [],
        nodeGuid: BigInt(`0x${d.entry.guid}`),
        mtu,
        caps: d.attr,
      };
      if (nd?.mac !== undefined) info.mac = nd.mac;
      list.push(info);
    }
  }
  cache = { at: now, list };
  return list;
}

/** The addon handle of a listed native device's context. */
function ctxHandleOf(name: string): Handle | undefined {
  const b = loadBinding();
  if (b === null) return undefined;
  return nativeDevices(b).find((d) => d.entry.name === name)?.entry.ctx;
}

/** Whether rdma_cm works on the native device `name` (its context came from librdmacm). */
export function nativeDeviceHasCm(name: string): boolean {
  const b = loadBinding();
  return b !== null && nativeDevices(b).some((d) => d.entry.name === name && d.entry.cm);
}

function openDevice(dev: Device): Context {
  const b = loadBinding();
  const h = ctxHandleOf(dev.name);
  if (b === null || h === undefined) throw err('ENODEV', 'ibv_open_device', dev.name);
  return new NativeContext(dev, b, h);
}

function createQp(ctx: Context, pd: Pd, attr: QpInitAttr): NativeQp {
  if (!(ctx instanceof NativeContext) || !(pd instanceof NativePd)) throw err('EINVAL', 'ibv_create_qp', 'PD of another device');
  return NativeQp._create(ctx, pd, attr);
}

/** The addon and context handle of a listed native device (ENODEV once it is gone). */
function handleOf(info: DeviceInfo, op: string): [NativeBinding, Handle] {
  const b = loadBinding();
  const h = ctxHandleOf(info.name);
  if (b === null || h === undefined) throw err('ENODEV', op, info.name);
  return [b, h];
}

function queryDevice(info: DeviceInfo): DeviceAttr {
  const b = loadBinding();
  const d = b === null ? undefined : nativeDevices(b).find((x) => x.entry.name === info.name);
  if (d === undefined) throw err('ENODEV', 'ibv_query_device', info.name);
  return { ...d.attr };
}

/**
 * `ibv_query_device_ex`: rdma-core's answer (the addon's flattened fields), `orig_attr` as
 * {@link queryDevice} reports it. An addon without the call: the fields libibverbs' legacy
 * path gives (everything past orig_attr 0, `device_cap_flags_ex` from `device_cap_flags`).
 */
function queryDeviceEx(info: DeviceInfo, attr: Readonly<DeviceAttr>): DeviceAttrEx {
  const op = 'ibv_query_device_ex';
  const [b, h] = handleOf(info, op);
  const base = baseDeviceAttrEx(attr);
  if (b.queryDeviceEx === undefined) return base;
  const q = check(b.queryDeviceEx(h), op);
  const n = (k: string): number => Number(q[k] ?? 0);
  const big = (k: string): bigint => BigInt(q[k] ?? 0);
  return {
    ...base,
    compMask: n('compMask'),
    odpCaps: { generalCaps: big('odpGeneralCaps'), perTransportCaps: { rcOdpCaps: n('odpRc'), ucOdpCaps: n('odpUc'), udOdpCaps: n('odpUd') } },
    completionTimestampMask: big('completionTimestampMask'),
    hcaCoreClock: big('hcaCoreClock'),
    // The kernel device's own flags, memory-window bits included (the backend serves windows).
    deviceCapFlagsEx: big('deviceCapFlagsEx'),
    tsoCaps: { maxTso: n('maxTso'), supportedQpts: n('tsoSupportedQpts') },
    rssCaps: {
      supportedQpts: n('rssSupportedQpts'),
      maxRwqIndirectionTables: n('maxRwqIndirectionTables'),
      maxRwqIndirectionTableSize: n('maxRwqIndirectionTableSize'),
      rxHashFieldsMask: big('rxHashFieldsMask'),
      rxHashFunction: n('rxHashFunction'),
    },
    maxWqTypeRq: n('maxWqTypeRq'),
    packetPacingCaps: { qpRateLimitMin: n('qpRateLimitMin'), qpRateLimitMax: n('qpRateLimitMax'), supportedQpts: n('ppSupportedQpts') },
    rawPacketCaps: n('rawPacketCaps'),
    tmCaps: { maxRndvHdrSize: n('tmMaxRndvHdrSize'), maxNumTags: n('tmMaxNumTags'), flags: n('tmFlags'), maxOps: n('tmMaxOps'), maxSge: n('tmMaxSge') },
    cqModCaps: { maxCqCount: n('maxCqCount'), maxCqPeriod: n('maxCqPeriod') },
    maxDmSize: big('maxDmSize'),
    pciAtomicCaps: { fetchAdd: n('pciFetchAdd'), swap: n('pciSwap'), compareSwap: n('pciCompareSwap') },
    xrcOdpCaps: n('xrcOdpCaps'),
    physPortCntEx: n('physPortCntEx'),
  };
}

function queryPort(info: DeviceInfo, portNum: number): PortAttr {
  const op = 'ibv_query_port';
  const [b, h] = handleOf(info, op);
  return check(b.queryPort(h, portNum), op) as unknown as PortAttr;
}

function queryGid(info: DeviceInfo, portNum: number, index: number): Uint8Array {
  const op = 'ibv_query_gid';
  const [b, h] = handleOf(info, op);
  const out = new Uint8Array(16);
  check(b.queryGid(h, portNum, index, out), op);
  return out;
}

function queryPkey(info: DeviceInfo, portNum: number, index: number): number {
  const op = 'ibv_query_pkey';
  const [b, h] = handleOf(info, op);
  return check(b.queryPkey(h, portNum, index), op);
}

const ahBuf = new Float64Array(AH.WORDS);
const ahGid = new Uint8Array(16);

function createAh(ctx: Context, pd: Pd, attr: AhAttr): NativeAhData {
  const op = 'ibv_create_ah';
  if (!(ctx instanceof NativeContext) || !(pd instanceof NativePd)) throw err('EINVAL', op, 'PD of another device');
  const bad = encodeAh(attr, ahBuf, 0, ahGid);
  if (bad !== null) throw err('EINVAL', op, bad);
  const [h, index] = check(ctx._b.createAh(pd._h, ahBuf, attr.isGlobal ? ahGid : null), op);
  return { h, index };
}

function destroyAh(ctx: Context, data: unknown): void {
  if (ctx instanceof NativeContext) check(ctx._b.destroyAh((data as NativeAhData).h), 'ibv_destroy_ah');
}

function mcast(qp: Qp, gid: Uint8Array, lid: number, attach: boolean): void {
  const op = attach ? 'ibv_attach_mcast' : 'ibv_detach_mcast';
  if (!(qp instanceof NativeQp)) throw err('EINVAL', op, 'QP of another device');
  if (attach && takeAttached(qp, gid, lid)) return;
  const b = qp.context._b;
  check(attach ? b.attachMcast(qp._h, gid, lid) : b.detachMcast(qp._h, gid, lid), op);
}

const bindWrId = new Uint32Array(2);

/**
 * `ibv_bind_mw()` of a type 1 window (libibverbs has checked the type and the MR's PD): the
 * provider posts the bind (rxe: a BIND_MW work request completing on the send CQ) and returns the
 * window's new rkey. A bind without an MR (an unbind) is refused with EINVAL: rdma-core's rxe
 * reads the MR through `bind_info.mr` whatever the length (rxe_bind_mw).
 */
function bindMw(qp: Qp, mw: Mw, bind: MwBind): number {
  const op = 'ibv_bind_mw';
  if (!(qp instanceof NativeQp) || !(mw instanceof NativeMw)) throw err('EINVAL', op, 'QP or window of another device');
  const i = bind.bindInfo;
  const mr = i.mr;
  if (!(mr instanceof NativeMr)) throw err('EINVAL', op, 'a bind without an MR (unbind) is not passed to rdma-core, whose rxe would read the missing MR');
  const flags = bind.sendFlags ?? 0;
  if (!isU32(flags) || !isU32(i.mwAccessFlags) || !isAddr(i.addr) || !isAddr(i.length)) throw err('EINVAL', op, 'send_flags, bind_info address, length or access');
  const id = bind.wrId;
  if (!((typeof id === 'number' && Number.isSafeInteger(id) && id >= 0) || (typeof id === 'bigint' && id >= 0n && id < 1n << 63n))) throw err('EINVAL', op, `wr_id ${String(id)}`);
  putWrId(bindWrId, 0, id);
  return check(qp.context._b.bindMw(qp._h, mw._h, mw.rkey >>> 0, mr._h, i.addr, i.length, i.mwAccessFlags, bindWrId[0] as number, bindWrId[1] as number, flags), op) >>> 0;
}

const provider: VerbsProvider = {
  name: NATIVE_PROVIDER,
  native: true,
  listDevices,
  openDevice,
  queryDevice,
  queryPort,
  queryGid,
  queryPkey,
  // The kernel enforces the rights of its MRs; the verbs layer grants what was asked.
  accessMask: () => ACCESS_ALL,
  createQp,
  wrCaps: NATIVE_WR_CAPS,
  bindMw,
  // The extended CQ and QP over ibv_create_cq / ibv_poll_cq and ibv_create_qp / ibv_post_send
  // (src/verbs/cq-ex.ts, qp-ex.ts): the fields ibv_poll_cq reports.
  // Completion timestamps go to the device's own ibv_create_cq_ex, which refuses them where the
  // device has no clock (rdma-core's answer).
  exCaps: { wcFlags: WC_STANDARD_FLAGS, deviceWcFlags: WcExFlags.WITH_COMPLETION_TIMESTAMP | WcExFlags.WITH_COMPLETION_TIMESTAMP_WALLCLOCK },
  createCqEx: (ctx, a, wcFlags) => {
    if (!(ctx instanceof NativeContext)) throw err('EINVAL', 'ibv_create_cq_ex', 'context of another device');
    return ctx._createCqEx(a.cqe, a.channel, a.compVector, a.cqContext, wcFlags);
  },
  queryDeviceEx,
  createAh,
  destroyAh,
  attachMcast: (qp, gid, lid) => mcast(qp, gid, lid, true),
  detachMcast: (qp, gid, lid) => mcast(qp, gid, lid, false),
  counters: (info, portNum) => kernelHwCounters(info.name, portNum),
};

/** Whether the addon is loaded and rdma-core reports devices (the provider is then registered). */
export function nativeAvailable(): boolean {
  const b = loadBinding();
  return b !== null && nativeDevices(b).length > 0;
}

/** Names of the kernel's RDMA devices the addon sees (empty without the addon). */
export function nativeDeviceNames(): string[] {
  const b = loadBinding();
  return b === null ? [] : nativeDevices(b).map((d) => d.entry.name);
}

/** rdma-core's node type and transport of a native device, as ibv_devinfo prints them. */
export function nativeDeviceEntry(name: string): NativeDeviceEntry | undefined {
  const b = loadBinding();
  return b === null ? undefined : nativeDevices(b).find((d) => d.entry.name === name)?.entry;
}

/** The `async_fd` of native device `name`'s context, as ibv_asyncwatch prints it (-1: none). */
export function nativeAsyncFd(name: string): number {
  return nativeDeviceEntry(name)?.asyncFd ?? -1;
}

/** Register the native provider when rdma-core has devices (idempotent). */
export function registerNative(): boolean {
  if (!nativeAvailable()) return false;
  registerProvider(provider);
  return true;
}

/** @internal For the CM: the addon, or ENODEV. */
export function bindingOrThrow(op: string): NativeBinding {
  const b = loadBinding();
  if (b === null) throw err('ENODEV', op, 'native addon not loaded');
  return b;
}

export { nativeWanted } from './policy.js';
