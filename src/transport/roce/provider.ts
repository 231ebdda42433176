/**
 * The soft RoCEv2 provider ("rxe"): one device per network interface that has an address,
 * loopback included, named `rxe_<ifname>` (`rxe_lo`, `rxe_eth0`), beside the iWARP devices
 * `siw_<ifname>`. On Linux a user creates an rxe device with
 * `rdma link add rxe_eth0 type rxe netdev eth0`; here the name is fixed to the interface so
 * scripts can predict it, and `rdma link` users recognize the `rxe_` prefix.
 *
 * What the device reports (`ibv_query_device`, `ibv_query_port`, `ibv_query_gid`) follows rxe
 * (params.ts, gid.ts); QPs: UD, and RC and UC (rc/, rxe's engines with its UC checks); memory
 * windows of types 1 and 2 (mw.ts). Per-device counters:
 * {@link roceCounters}.
 */
import { err } from '../../errors.js';
import { QpCreateFlags, registerProvider, type QpInitAttr, type VerbsProvider } from '../../verbs/provider.js';
import { netdevs, type DeviceInfo } from '../../verbs/device.js';
import type { Context } from '../../verbs/context.js';
import type { Pd } from '../../verbs/pd.js';
import type { AhAttr } from '../../verbs/ah.js';
import type { Qp } from '../../verbs/qp.js';
import type { Cq } from '../../verbs/cq.js';
import { Access, GidType, QpType, TransportType, WrOpcode, type QpCap } from '../../verbs/types.js';
import type { WrCaps } from '../../verbs/wr-check.js';
import type { SrqCaps } from '../../verbs/srq.js';
import { WC_STANDARD_FLAGS } from '../../verbs/cq-ex.js';
import { eui64, guidOf, macToBytes, rxeDeviceAttr, rxePortAttr, RXE_LIMITS } from './params.js';
import { RoceDevice, removeRoceDevice, roceDevice } from './device.js';
import { netdevGeneration, PhysState, portStatus, type NetdevPolicy } from '../../verbs/port-watch.js';
import { roceDeviceConfig } from './config.js';
import { RoceUdQp } from './ud-qp.js';
import { RoceRcQp } from './rc/rc-qp.js';
import { MAX_RDMA_LEN } from './rc/common.js';
import { PortAgent } from './udp.js';
import { rxeAllocMw, rxeBindMw } from './mw.js';
import { C, COUNTER_NAMES, type CounterName } from './counters.js';
import { BTH_DEF_PKEY } from '../../wire/roce/index.js';
import { nextPow2 } from '../../util/ring.js';

/** Provider name, as rdma-core's `rxe` provider. */
export const RXE_PROVIDER = 'rxe';

/** The device name of interface `ifname`. */
export function rxeDeviceName(ifname: string): string {
  return `rxe_${ifname}`;
}

let cache: { at: number; gen: number; list: DeviceInfo[] } | null = null;
/** Interfaces are re-read at most this often (ms). */
const CACHE_MS = 1000;

function listDevices(): DeviceInfo[] {
  const now = Date.now();
  if (cache && now - cache.at < CACHE_MS && cache.gen === netdevGeneration()) return cache.list;
  const list: DeviceInfo[] = [];
  for (const nd of netdevs()) {
    list.push({
      name: rxeDeviceName(nd.name),
      provider: RXE_PROVIDER,
      transport: TransportType.IB,
      ifname: nd.name,
      addresses: nd.addresses,
      nodeGuid: guidOf(eui64(macToBytes(nd.mac))),
      mtu: nd.mtu,
      mac: nd.mac,
    });
  }
  cache = { at: now, gen: netdevGeneration(), list };
  for (const info of list) roceDevice(info.name)?.update(info);
  return list;
}

/** The soft RoCE devices of this host (one per interface with an address). */
export function rxeDeviceInfos(): readonly DeviceInfo[] {
  return listDevices();
}

function dev(info: DeviceInfo): RoceDevice {
  if (roceDevice(info.name) !== undefined) return RoceDevice.of(info);
  // A device made while its interface is down (its context outlives the listing) starts down.
  const d = RoceDevice.of(info);
  d.portUp = portStatus(info, RXE_NETDEV_POLICY).active;
  return d;
}

/** Round a queue depth up as rxe's queues do: 2^k - 1 slots usable, at least the request. */
function rxeQueueDepth(n: number): number {
  let slots = 1;
  while (slots < n + 1) slots *= 2;
  return slots - 1;
}

/**
 * The create flags this device takes: multicast loopback blocking only (rxe takes none; see
 * `DEVICE_BLOCK_MULTICAST_LOOPBACK` in params.ts). It matters to UD QPs, the only ones that send
 * to a group; RC and UC QPs accept it as NICs that have it do.
 */
const ROCE_CREATE_FLAGS = QpCreateFlags.BLOCK_SELF_MCAST_LB;

function createQp(ctx: Context, pd: Pd, attr: QpInitAttr): RoceUdQp | RoceRcQp {
  const op = 'ibv_create_qp';
  // As rxe's check_qp_init_attr, before anything else: a flag the device lacks is EOPNOTSUPP.
  const flags = attr.createFlags ?? 0;
  if (flags & ~ROCE_CREATE_FLAGS) throw err('EOPNOTSUPP', 'ibv_create_qp_ex', `create_flags 0x${(flags >>> 0).toString(16)}`);
  if (attr.qpType !== QpType.UD && attr.qpType !== QpType.RC && attr.qpType !== QpType.UC) {
    throw err('EOPNOTSUPP', op, `${ctx.device.name}: RC, UC and UD QPs only`);
  }
  const c = attr.cap;
  // A QP on an SRQ has no receive queue: rxe_qp_init_resp and rxe_qp_chk_cap leave the receive
  // capabilities as asked, unchecked.
  const srq = attr.srq !== undefined && attr.srq !== null;
  const sendSge = c.maxSendSge ?? 1;
  const inline = c.maxInlineData ?? 0;
  // rxe_qp_init_req: the send WQE holds max(SGEs, inline bytes); both are reported back from it.
  const wqeSize = Math.max(sendSge * 16, inline);
  const cap: QpCap = {
    maxSendWr: rxeQueueDepth(Math.max(c.maxSendWr ?? 1, 1)),
    maxRecvWr: srq ? (c.maxRecvWr ?? 0) : rxeQueueDepth(Math.max(c.maxRecvWr ?? 1, 1)),
    maxSendSge: Math.floor(wqeSize / 16),
    maxRecvSge: srq ? (c.maxRecvSge ?? 0) : (c.maxRecvSge ?? 1),
    maxInlineData: wqeSize,
  };
  if (cap.maxSendWr > RXE_LIMITS.maxQpWr || (!srq && cap.maxRecvWr > RXE_LIMITS.maxQpWr)) throw err('EINVAL', op, 'queue depth above max_qp_wr');
  const d = dev(ctx.device.info);
  const qpn = d.agent.allocQpn();
  let qp: RoceUdQp | RoceRcQp;
  try {
    qp = attr.qpType === QpType.UD ? new RoceUdQp(ctx, pd, qpn, attr, cap, d) : new RoceRcQp(ctx, pd, qpn, attr, cap, d);
  } catch (e) {
    d.agent.releaseQpn(qpn);
    throw e;
  }
  d._addQp(qp);
  return qp;
}

function createAh(ctx: Context, _pd: Pd, attr: AhAttr): unknown {
  return dev(ctx.device.info).resolveAv(attr);
}

/**
 * `ibv_resize_cq` as rxe (rxe_verbs.c `rxe_resize_cq` → rxe_cq.c `rxe_cq_chk_attr`): EINVAL for
 * fewer than one entry, more than `max_cqe`, or fewer than the completions queued; then the
 * queue is resized with its completions kept.
 */
function resizeCq(cq: Cq, cqe: number): void {
  const op = 'ibv_resize_cq';
  const max = cq.context._attr.maxCqe;
  if (!Number.isInteger(cqe) || cqe <= 0) throw err('EINVAL', op, `cqe ${String(cqe)}`);
  if (cqe > max) throw err('EINVAL', op, `cqe ${cqe} > max_cqe ${max}`);
  if (cqe < cq.pending) throw err('EINVAL', op, `cqe ${cqe} < ${cq.pending} completions queued`);
  cq._setSize(cqe);
}

function attachMcast(qp: Qp, gid: Uint8Array, _lid: number): void {
  if (!(qp instanceof RoceUdQp)) throw err('EINVAL', 'ibv_attach_mcast', 'not a QP of this device');
  const a = qp.context._attr;
  qp.dev.attach(qp, gid, { maxMcastGrp: a.maxMcastGrp, maxMcastQpAttach: a.maxMcastQpAttach });
}

function detachMcast(qp: Qp, gid: Uint8Array, _lid: number): void {
  if (!(qp instanceof RoceUdQp)) throw err('EINVAL', 'ibv_detach_mcast', 'not a QP of this device');
  qp.dev.detach(qp, gid);
}

/**
 * What rxe's QPs take at post time (rxe_wr_opcode_info[], validate_send_wr): RC — Sends with
 * and without immediate data or invalidation, RDMA Write (with immediate), RDMA Read, the two
 * atomics, Local Invalidate, Bind MW, a message of at most 2^31 bytes; UC — Sends and RDMA Writes
 * with and without immediate data, 2^31 bytes (RDMA Read and the atomics have no UC mask: EINVAL;
 * rxe's table also lists Send with Invalidate for UC, but IB has no UC opcode for it and rxe's
 * requester (`next_opcode_uc`) fails such a WR with LOC_QP_OP_ERR and the QP: it is refused here
 * when posted); UD — Sends with and without immediate data (its message limit is the port MTU,
 * checked by the UD QP: it follows the interface). INLINE on a Read is refused: the opcode has no
 * inline mask.
 */
export const RXE_WR_CAPS: WrCaps = {
  sendOpcodes: {
    [QpType.RC]: [
      WrOpcode.SEND,
      WrOpcode.SEND_WITH_IMM,
      WrOpcode.SEND_WITH_INV,
      WrOpcode.RDMA_WRITE,
      WrOpcode.RDMA_WRITE_WITH_IMM,
      WrOpcode.RDMA_READ,
      WrOpcode.ATOMIC_CMP_AND_SWP,
      WrOpcode.ATOMIC_FETCH_AND_ADD,
      WrOpcode.LOCAL_INV,
      WrOpcode.BIND_MW,
    ],
    [QpType.UC]: [WrOpcode.SEND, WrOpcode.SEND_WITH_IMM, WrOpcode.RDMA_WRITE, WrOpcode.RDMA_WRITE_WITH_IMM],
    [QpType.UD]: [WrOpcode.SEND, WrOpcode.SEND_WITH_IMM],
  },
  maxSgeLength: 0x7fff_ffff,
  maxMessage: { [QpType.RC]: MAX_RDMA_LEN, [QpType.UC]: MAX_RDMA_LEN },
  inlineRead: 'refuse',
  checks: 'device',
};

/**
 * rxe's shared receive queues (rxe_srq.c): the queue holds 2^k - 1 WRs, at least the request
 * (rxe_queue_init), at least one SGE (RXE_MIN_SRQ_SGE); srq_limit is taken as given at create
 * (rxe_srq_chk_init does not look at it); resize allowed (IBV_DEVICE_SRQ_RESIZE); the limit
 * event sets the limit back to 0 (get_srq_wqe).
 */
export const RXE_SRQ_CAPS: SrqCaps = {
  depth: rxeQueueDepth,
  minSge: 1,
  limitCheckedAtCreate: false,
  keepsLimitAfterEvent: false,
};

/**
 * How an rxe port follows its interface (rxe_net.c `rxe_notify`, `rxe_set_port_state`): ACTIVE
 * while the interface runs with a carrier (`netif_running && netif_carrier_ok`), PORT_ACTIVE /
 * PORT_ERR on each change, QPs left as they are (a port that is down carries no packet);
 * `phys_state` LINK_UP, else POLLING while the interface is up, else DISABLED (rxe_query_port).
 * The GID table follows the addresses (roce_gid_mgmt.c): GID_CHANGE per entry. A changed MTU
 * changes the port's active MTU (`rxe_set_mtu`).
 */
export const RXE_NETDEV_POLICY: NetdevPolicy = {
  portActive: (nd) => nd.running,
  physState: (nd, active) => (active ? PhysState.LINK_UP : nd?.up === true ? PhysState.POLLING : PhysState.DISABLED),
  errorQpsOnDown: false,
  gidEvents: true,
  pollMs: (info) => roceDeviceConfig(info.name).portPollMs,
  updated: (info) => roceDevice(info.name)?.update(info),
  portChanged: (info, active) => {
    const d = roceDevice(info.name);
    if (d === undefined) return;
    // rxe_notify: the carrier lost (the port leaving ACTIVE) counts link_downed.
    if (d.portUp && !active) d.counters.inc(C.link_downed);
    d.portUp = active;
  },
  removed: (info) => removeRoceDevice(info.name),
};

const provider: VerbsProvider = {
  name: RXE_PROVIDER,
  listDevices,
  queryDevice: (info) => ({ ...rxeDeviceAttr(info.nodeGuid), ...(info.caps ?? {}) }),
  queryPort: (info) => {
    const d = roceDevice(info.name);
    return rxePortAttr(info.mtu, portStatus(info, RXE_NETDEV_POLICY), d?.counters.badPkeyCntr ?? 0, d?.counters.qkeyViolCntr ?? 0);
  },
  queryGid: (info, _port, index) => dev(info).gid(index),
  queryGidType: () => GidType.ROCE_V2,
  queryPkey: () => BTH_DEF_PKEY,
  accessMask: () => Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC | Access.MW_BIND,
  createQp,
  wrCaps: RXE_WR_CAPS,
  // rdma-core's rxe: create_cq_ex with RXE_SUP_WC_FLAGS (the standard fields, no timestamps),
  // create_qp_ex with the builder (send ops: RXE_WR_CAPS's opcodes; no FLUSH or ATOMIC_WRITE,
  // which the kernel 6.1 rxe lacks).
  exCaps: { wcFlags: WC_STANDARD_FLAGS },
  allocMw: rxeAllocMw,
  bindMw: rxeBindMw,
  srqCaps: RXE_SRQ_CAPS,
  netdevPolicy: RXE_NETDEV_POLICY,
  createAh,
  attachMcast,
  detachMcast,
  resizeCq,
  // rxe_cq_from_init / rxe_cq_resize_queue: rxe_queue_init keeps one slot free.
  cqSlots: (cqe) => nextPow2(cqe + 1) - 1,
  settle: (timeoutMs) => PortAgent.get().settle(timeoutMs),
  counters: (info) => roceCounters(info.name),
};

/** Register the rxe provider (idempotent; done when this module is imported). */
export function registerRxe(): void {
  registerProvider(provider);
}
registerRxe();

/**
 * The counters of soft RoCE device `name` in this process (the equivalent of
 * `rdma statistic show link <dev>/1`), by name; all zero for a device this process has not used.
 * @throws RdmaError ENODEV for a name that is no soft RoCE device.
 */
export function roceCounters(name: string): Record<CounterName, number> {
  const d = roceDevice(name);
  if (d) {
    const out = d.counters.snapshot();
    out.udp_rcvbuf_drop = d.agent.socketDrops(d);
    return out;
  }
  if (!listDevices().some((i) => i.name === name)) throw err('ENODEV', 'rdma statistic', `no soft RoCE device '${name}'`);
  const out = {} as Record<CounterName, number>;
  for (const n of COUNTER_NAMES) out[n] = 0;
  return out;
}
