/**
 * What `ibv_query_device_ex` reports: `struct ibv_device_attr_ex` and the structs inside it
 * (ODP, TSO, RSS, packet pacing, tag matching, CQ moderation, PCI atomic caps), camelCased, 64-bit
 * fields as bigints. Plain data, as device-attr.ts.
 *
 * libibverbs' `ibv_cmd_query_device_any` zeroes the struct, copies `orig_attr` and what the
 * kernel's `ib_uverbs_ex_query_device` answers, and sets `phys_port_cnt_ex` from the device's
 * ports; `comp_mask` stays 0 and `pci_atomic_caps` is filled only by providers that have them
 * (mlx5). The kernel's soft devices answer zero for everything past `device_cap_flags_ex`, which
 * is their `device_cap_flags` (Linux 6.1: siw 0x200000, rxe 0x1223C76; no completion clock, no
 * ODP, no FLUSH or ATOMIC_WRITE bits).
 */
import type { DeviceAttr } from './device-attr.js';

/** `struct ibv_odp_caps`. */
export interface OdpCaps {
  /** `general_caps`: `IBV_ODP_SUPPORT*` bits. */
  generalCaps: bigint;
  /** `per_transport_caps`: `IBV_ODP_SUPPORT_*` operation bits per QP type. */
  perTransportCaps: { rcOdpCaps: number; ucOdpCaps: number; udOdpCaps: number };
}

/** `struct ibv_tso_caps`. */
export interface TsoCaps {
  maxTso: number;
  /** Bit per `enum ibv_qp_type`. */
  supportedQpts: number;
}

/** `struct ibv_rss_caps`. */
export interface RssCaps {
  supportedQpts: number;
  maxRwqIndirectionTables: number;
  maxRwqIndirectionTableSize: number;
  rxHashFieldsMask: bigint;
  rxHashFunction: number;
}

/** `struct ibv_packet_pacing_caps` (rates in kbps). */
export interface PacketPacingCaps {
  qpRateLimitMin: number;
  qpRateLimitMax: number;
  supportedQpts: number;
}

/** `struct ibv_tm_caps` (tag matching). */
export interface TmCaps {
  maxRndvHdrSize: number;
  maxNumTags: number;
  flags: number;
  maxOps: number;
  maxSge: number;
}

/** `struct ibv_cq_moderation_caps`. */
export interface CqModerationCaps {
  maxCqCount: number;
  maxCqPeriod: number;
}

/** `struct ibv_pci_atomic_caps`: `IBV_PCI_ATOMIC_OPERATION_*_BYTE_SIZE_SUP` bits per operation. */
export interface PciAtomicCaps {
  fetchAdd: number;
  swap: number;
  compareSwap: number;
}

/** `struct ibv_device_attr_ex`. */
export interface DeviceAttrEx {
  /** `orig_attr`: what `ibv_query_device` reports. */
  origAttr: DeviceAttr;
  /** `comp_mask` (libibverbs leaves it 0). */
  compMask: number;
  odpCaps: OdpCaps;
  /** `completion_timestamp_mask`: the valid bits of a completion timestamp (0: none). */
  completionTimestampMask: bigint;
  /** `hca_core_clock`: the timestamp clock in kHz (0: none). */
  hcaCoreClock: bigint;
  /** `device_cap_flags_ex`: the 64-bit `IBV_DEVICE_*` capability bits. */
  deviceCapFlagsEx: bigint;
  tsoCaps: TsoCaps;
  rssCaps: RssCaps;
  maxWqTypeRq: number;
  packetPacingCaps: PacketPacingCaps;
  /** `raw_packet_caps`: `IBV_RAW_PACKET_CAP_*` bits. */
  rawPacketCaps: number;
  tmCaps: TmCaps;
  cqModCaps: CqModerationCaps;
  /** `max_dm_size`: device memory (0: none). */
  maxDmSize: bigint;
  pciAtomicCaps: PciAtomicCaps;
  /** `xrc_odp_caps`. */
  xrcOdpCaps: number;
  /** `phys_port_cnt_ex`: the number of ports (sysfs, else `phys_port_cnt`). */
  physPortCntEx: number;
}

/**
 * The kernel's `IB_UVERBS_DEVICE_FLUSH_GLOBAL` / `_FLUSH_PERSISTENT` / `_ATOMIC_WRITE`
 * (rdma/ib_user_verbs.h): the `device_cap_flags_ex` bits of the operations
 * `IBV_QP_EX_WITH_FLUSH` and `IBV_QP_EX_WITH_ATOMIC_WRITE` need (no device here has them).
 */
export const DEVICE_FLUSH_GLOBAL = 1n << 38n;
/** See {@link DEVICE_FLUSH_GLOBAL}. */
export const DEVICE_FLUSH_PERSISTENT = 1n << 39n;
/** See {@link DEVICE_FLUSH_GLOBAL}. */
export const DEVICE_ATOMIC_WRITE = 1n << 40n;

/**
 * The extended attributes of a device that reports nothing past `device_cap_flags`, as the
 * kernel's siw and rxe (Linux 6.1) answer `ib_uverbs_ex_query_device`: `device_cap_flags_ex`
 * is `device_cap_flags`, `phys_port_cnt_ex` the port count, everything else 0.
 */
export function baseDeviceAttrEx(a: Readonly<DeviceAttr>): DeviceAttrEx {
  return {
    origAttr: { ...a },
    compMask: 0,
    odpCaps: { generalCaps: 0n, perTransportCaps: { rcOdpCaps: 0, ucOdpCaps: 0, udOdpCaps: 0 } },
    completionTimestampMask: 0n,
    hcaCoreClock: 0n,
    deviceCapFlagsEx: BigInt(a.deviceCapFlags >>> 0),
    tsoCaps: { maxTso: 0, supportedQpts: 0 },
    rssCaps: { supportedQpts: 0, maxRwqIndirectionTables: 0, maxRwqIndirectionTableSize: 0, rxHashFieldsMask: 0n, rxHashFunction: 0 },
    maxWqTypeRq: 0,
    packetPacingCaps: { qpRateLimitMin: 0, qpRateLimitMax: 0, supportedQpts: 0 },
    rawPacketCaps: 0,
    tmCaps: { maxRndvHdrSize: 0, maxNumTags: 0, flags: 0, maxOps: 0, maxSge: 0 },
    cqModCaps: { maxCqCount: 0, maxCqPeriod: 0 },
    maxDmSize: 0n,
    pciAtomicCaps: { fetchAdd: 0, swap: 0, compareSwap: 0 },
    xrcOdpCaps: 0,
    physPortCntEx: a.physPortCnt,
  };
}

/** A deep copy (every nested struct fresh), as `ibv_query_device_ex` fills the caller's struct. */
export function copyDeviceAttrEx(x: Readonly<DeviceAttrEx>): DeviceAttrEx {
  return {
    ...x,
    origAttr: { ...x.origAttr },
    odpCaps: { generalCaps: x.odpCaps.generalCaps, perTransportCaps: { ...x.odpCaps.perTransportCaps } },
    tsoCaps: { ...x.tsoCaps },
    rssCaps: { ...x.rssCaps },
    packetPacingCaps: { ...x.packetPacingCaps },
    tmCaps: { ...x.tmCaps },
    cqModCaps: { ...x.cqModCaps },
    pciAtomicCaps: { ...x.pciAtomicCaps },
  };
}
