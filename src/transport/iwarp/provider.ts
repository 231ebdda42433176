/**
 * The software iWARP provider ("siw"): one device per network interface that has an address,
 * named `siw_<ifname>` (Linux names siw devices by `rdma link add NAME type siw netdev IF`; we fix
 * the name to the interface so scripts can predict it). Unlike Linux siw, loopback works:
 * `siw_lo` carries 127.0.0.1 and ::1 (Linux siw refuses the loopback netdev).
 */
import { err } from '../../errors.js';
import { registerProvider, type QpInitAttr, type VerbsProvider } from '../../verbs/provider.js';
import { netdevs, guidFromMac, guidFromName, type DeviceInfo } from '../../verbs/device.js';
import type { Context } from '../../verbs/context.js';
import type { Pd } from '../../verbs/pd.js';
import { QpType, TransportType, WrOpcode, type QpCap } from '../../verbs/types.js';
import type { WrCaps } from '../../verbs/wr-check.js';
import type { SrqCaps } from '../../verbs/srq.js';
import { IwarpQp } from './iwarp-qp.js';
import { llpsSettled } from './llp.js';
import { SIW_LIMITS, siwAccessMask, siwDeviceAttr, siwGid, siwPortAttr } from './attrs.js';
import { iwarpConfig } from './config.js';
import { iwarpDeviceCounters, type IwarpCounterName } from './counters.js';
import { netdevGeneration, PhysState, portStatus, type NetdevPolicy } from '../../verbs/port-watch.js';
import { AsyncEventType } from '../../verbs/types.js';

/** Provider name, as rdma-core's `siw` provider. */
export const SIW_PROVIDER = 'siw';

let cache: { at: number; gen: number; list: DeviceInfo[] } | null = null;
/** Interfaces are re-read at most this often (ms): device lists are asked for on every resolve. */
const CACHE_MS = 1000;

function listDevices(): DeviceInfo[] {
  const now = Date.now();
  if (cache && now - cache.at < CACHE_MS && cache.gen === netdevGeneration()) return cache.list;
  const list: DeviceInfo[] = [];
  for (const nd of netdevs()) {
    const info: DeviceInfo = {
      name: `siw_${nd.name}`,
      provider: SIW_PROVIDER,
      transport: TransportType.IWARP,
      ifname: nd.name,
      addresses: nd.addresses,
      nodeGuid: nd.loopback ? guidFromName(nd.name) : guidFromMac(nd.mac),
      mtu: nd.mtu,
      mac: nd.mac,
    };
    list.push(info);
  }
  cache = { at: now, gen: netdevGeneration(), list };
  return list;
}

function createQp(ctx: Context, pd: Pd, attr: QpInitAttr): IwarpQp {
  if (attr.qpType !== QpType.RC) throw err('EOPNOTSUPP', 'ibv_create_qp', 'siw supports RC QPs only');
  // siw's provider has no create_qp_ex: libibverbs' ibv_create_qp_ex answers EOPNOTSUPP.
  if (attr.createFlags) throw err('EOPNOTSUPP', 'ibv_create_qp_ex', `create_flags 0x${attr.createFlags.toString(16)}`);
  const dev = ctx._attr;
  const c = attr.cap;
  // A QP on an SRQ has no receive queue (siw_create_qp: rq_size 0, Verbs 6.3.7 "ignore RQ size").
  const srq = attr.srq !== undefined && attr.srq !== null;
  const cap: QpCap = {
    maxSendWr: Math.max(c.maxSendWr ?? 1, 1),
    maxRecvWr: srq ? 0 : Math.max(c.maxRecvWr ?? 1, 1),
    maxSendSge: Math.max(c.maxSendSge ?? 1, 1),
    maxRecvSge: srq ? 0 : Math.max(c.maxRecvSge ?? 1, 1),
    maxInlineData: Math.max(c.maxInlineData ?? 0, 0),
  };
  if (cap.maxSendWr > dev.maxQpWr || cap.maxRecvWr > dev.maxQpWr) throw err('EINVAL', 'ibv_create_qp', 'queue depth above max_qp_wr');
  if (cap.maxSendSge > dev.maxSge || cap.maxRecvSge > dev.maxSge) throw err('EINVAL', 'ibv_create_qp', 'SGEs above max_sge');
  if (cap.maxInlineData > SIW_MAX_INLINE) throw err('EINVAL', 'ibv_create_qp', `max_inline_data above ${SIW_MAX_INLINE}`);
  // siw reports the inline capacity it supports whatever was asked for.
  cap.maxInlineData = Math.max(cap.maxInlineData, SIW_MAX_INLINE);
  return new IwarpQp(ctx, pd, ctx._allocQpNum(), attr, cap);
}

/** siw's max inline data (SIW_MAX_INLINE = sizeof(struct siw_sge) * (SIW_MAX_SGE - 1)). */
export const SIW_MAX_INLINE = SIW_LIMITS.maxInline;

/**
 * What siw's QPs take at post time (siw_post_send): RC only; Send, Send with Invalidate, RDMA
 * Write and RDMA Read — RFC 5040 has no immediate data, siw no atomics. A Read's sink is one SGE
 * (one tagged buffer: max_sge_rd 1); INLINE on a Read is ignored, as siw copies inline data only
 * for Sends and Writes.
 */
export const SIW_WR_CAPS: WrCaps = {
  sendOpcodes: { [QpType.RC]: [WrOpcode.SEND, WrOpcode.SEND_WITH_INV, WrOpcode.RDMA_WRITE, WrOpcode.RDMA_READ] },
  maxSgeLength: 0x7fff_ffff,
  readSges: 1,
  inlineRead: 'ignore',
  checks: 'device',
};

/**
 * siw's shared receive queues (siw_create_srq, siw_modify_srq, siw_query_srq): `num_rqe` is
 * max_wr rounded up to a power of two; srq_limit above max_wr is refused at create; no resize
 * (the device has no IBV_DEVICE_SRQ_RESIZE: EOPNOTSUPP); the limit event clears `armed` only.
 */
export const SIW_SRQ_CAPS: SrqCaps = {
  depth: (n) => {
    let p = 1;
    while (p < n) p *= 2;
    return p;
  },
  minSge: 0,
  limitCheckedAtCreate: true,
  keepsLimitAfterEvent: true,
};

/**
 * How a siw port follows its interface (siw_main.c `siw_netdev_event`): NETDEV_UP makes it
 * ACTIVE with PORT_ACTIVE; NETDEV_GOING_DOWN moves every QP to ERROR (`siw_netdev_down`), then
 * NETDEV_DOWN makes it DOWN with PORT_ERR; the carrier is not looked at (NETDEV_CHANGE is
 * ignored); a new hardware address raises LID_CHANGE (NETDEV_CHANGEADDR). The one GID is the
 * MAC, read when asked (siw_query_gid); iWARP ports get no GID_CHANGE from address changes.
 */
export const SIW_NETDEV_POLICY: NetdevPolicy = {
  portActive: (nd) => nd.up,
  physState: (_nd, active) => (active ? PhysState.LINK_UP : PhysState.DISABLED),
  errorQpsOnDown: true,
  linkAddrEvent: AsyncEventType.LID_CHANGE,
  gidEvents: false,
  pollMs: (info) => iwarpConfig(info.name).portPollMs,
};

const provider: VerbsProvider = {
  name: SIW_PROVIDER,
  listDevices,
  queryDevice: siwDeviceAttr,
  queryPort: (info, portNum) => siwPortAttr(info, portNum, portStatus(info, SIW_NETDEV_POLICY)),
  queryGid: siwGid,
  accessMask: siwAccessMask,
  createQp,
  wrCaps: SIW_WR_CAPS,
  srqCaps: SIW_SRQ_CAPS,
  netdevPolicy: SIW_NETDEV_POLICY,
  settle: llpsSettled,
  counters: (info) => iwarpDeviceCounters(info.name).snapshot(),
};

/**
 * The counters of soft iWARP device `name` (see counters.ts; docs/counters.md), zeros for a
 * device of this host not used yet.
 * @throws RdmaError ENODEV if no such device exists.
 */
export function iwarpCounters(name: string): Record<IwarpCounterName, number> {
  if (!listDevices().some((i) => i.name === name)) throw err('ENODEV', 'rdma statistic', `no soft iWARP device '${name}'`);
  return iwarpDeviceCounters(name).snapshot();
}

/** Register the siw provider (idempotent; done when this module is imported). */
export function registerSiw(): void {
  registerProvider(provider);
}
registerSiw();
