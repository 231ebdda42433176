/**
 * What the software iWARP device reports about itself, as Linux siw does: `ibv_query_device`
 * (siw_query_device), `ibv_query_port` (siw_query_port), the one-entry GID table
 * (siw_query_gid: the interface MAC, zero padded) and the MR access rights it enforces.
 * siw has no P_Key table (`pkey_tbl_len` 0), no atomics, no memory windows, no address handles
 * and no multicast.
 */
import {
  AtomicCap,
  DEVICE_MEM_MGT_EXTENSIONS,
  LinkLayer,
  PORT_CAP_CM_SUP,
  PORT_CAP_DEVICE_MGMT_SUP,
  PortState,
  eui64FromMac,
  mtuToEnum,
  type DeviceAttr,
  type DeviceInfo,
  type PortAttr,
} from '../../verbs/device.js';
import { Access } from '../../verbs/types.js';

/**
 * Linux siw's compile-time limits (siw.h, include/uapi/rdma/siw-abi.h): SIW_MAX_QP = 100K,
 * SIW_MAX_QP_WR = 32K, SIW_MAX_ORD_QP = SIW_MAX_IRD_QP = 128, SIW_MAX_SGE = 6,
 * SIW_MAX_SGE_RD = 1, SIW_MAX_CQ = 100K, SIW_MAX_CQE = 100 * SIW_MAX_QP_WR,
 * SIW_MAX_MR = 10 * SIW_MAX_QP, SIW_MAX_PD = SIW_MAX_QP, SIW_MAX_MW = 0,
 * SIW_MAX_SRQ = SIW_MAX_QP, SIW_MAX_SRQ_WR = 10 * SIW_MAX_QP_WR,
 * SIW_MAX_INLINE = sizeof(struct siw_sge) * (SIW_MAX_SGE - 1) = 80.
 */
export const SIW_LIMITS = Object.freeze({
  maxQp: 1024 * 100,
  maxQpWr: 1024 * 32,
  maxOrd: 128,
  maxIrd: 128,
  maxSge: 6,
  maxSgeRd: 1,
  maxCq: 1024 * 100,
  maxCqe: 1024 * 32 * 100,
  maxMr: 1024 * 100 * 10,
  maxPd: 1024 * 100,
  maxMw: 0,
  maxSrq: 1024 * 100,
  maxSrqWr: 1024 * 32 * 10,
  maxInline: 16 * 5,
  /** SIW_VENDOR_ID: ASCII 'bmt'. */
  vendorId: 0x626d74,
});

/**
 * The rights siw enforces (`IWARP_ACCESS_MASK`): local write, remote write, remote read. Local
 * read is always allowed; remote atomics are not supported (atomic_cap 0) and never granted.
 */
export const IWARP_ACCESS_MASK = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;

/** The attributes `ibv_query_device` returns for a siw device (siw_query_device). */
export function siwDeviceAttr(info: DeviceInfo, vendorPartId: number): DeviceAttr {
  const L = SIW_LIMITS;
  return {
    // rdma-core's siw provider (siw_query_device) prints the kernel's raw fw_ver, 0, as "%d.%d.%d"
    fwVer: '0.0.0',
    nodeGuid: info.nodeGuid,
    sysImageGuid: eui64FromMac(siwMac(info)),
    maxMrSize: 0xffff_ffff_ffff_ffffn,
    pageSizeCap: 4096n,
    vendorId: L.vendorId,
    vendorPartId,
    hwVer: 0,
    maxQp: L.maxQp,
    maxQpWr: L.maxQpWr,
    deviceCapFlags: DEVICE_MEM_MGT_EXTENSIONS,
    maxSge: L.maxSge,
    maxSgeRd: L.maxSgeRd,
    maxCq: L.maxCq,
    maxCqe: L.maxCqe,
    maxMr: L.maxMr,
    maxPd: L.maxPd,
    maxQpRdAtom: L.maxOrd,
    maxEeRdAtom: 0,
    maxResRdAtom: L.maxQp * L.maxIrd,
    maxQpInitRdAtom: L.maxIrd,
    maxEeInitRdAtom: 0,
    atomicCap: AtomicCap.NONE,
    maxEe: 0,
    maxRdd: 0,
    maxMw: L.maxMw,
    maxRawIpv6Qp: 0,
    maxRawEthyQp: 0,
    maxMcastGrp: 0,
    maxMcastQpAttach: 0,
    maxTotalMcastQpAttach: 0,
    maxAh: 0,
    maxFmr: 0,
    maxMapPerFmr: 0,
    maxSrq: L.maxSrq,
    maxSrqWr: L.maxSrqWr,
    maxSrqSge: L.maxSge,
    maxPkeys: 0,
    localCaAckDelay: 0,
    physPortCnt: 1,
    maxInlineData: L.maxInline,
  };
}

/**
 * The attributes `ibv_query_port` returns for siw's one port (siw_query_port): `state` as the
 * port watch gives it (ACTIVE while the interface is up), `phys_state` LINK_UP when ACTIVE,
 * else DISABLED. Without `port`: ACTIVE.
 */
export function siwPortAttr(info: DeviceInfo, _portNum = 1, port: { active: boolean; physState: number } = { active: true, physState: 5 }): PortAttr {
  const mtu = mtuToEnum(info.mtu);
  return {
    state: port.active ? PortState.ACTIVE : PortState.DOWN,
    maxMtu: mtu,
    activeMtu: mtu,
    gidTblLen: 1,
    portCapFlags: PORT_CAP_CM_SUP | PORT_CAP_DEVICE_MGMT_SUP,
    maxMsgSz: 0xffffffff,
    badPkeyCntr: 0,
    qkeyViolCntr: 0,
    pkeyTblLen: 0,
    lid: 0,
    smLid: 0,
    lmc: 0,
    maxVlNum: 0,
    smSl: 0,
    subnetTimeout: 0,
    initTypeReply: 0,
    activeWidth: 1,
    activeSpeed: 1,
    physState: port.physState,
    linkLayer: LinkLayer.ETHERNET,
    flags: 0,
    portCapFlags2: 0,
  };
}

/** siw's one GID (siw_query_gid): the interface MAC in the first six bytes, the rest zero. */
export function siwGid(info: DeviceInfo, _portNum: number, _index: number): Uint8Array {
  const gid = new Uint8Array(16);
  siwMac(info)
    .split(/[:-]/)
    .forEach((h, k) => (gid[k] = parseInt(h, 16)));
  return gid;
}

/** siw's enforced MR access rights. */
export function siwAccessMask(_info: DeviceInfo): number {
  return IWARP_ACCESS_MASK;
}

/** The device's MAC: the interface's, or (a device description without one) the top of its GUID. */
function siwMac(info: DeviceInfo): string {
  if (info.mac !== undefined) return info.mac;
  const b: string[] = [];
  for (let k = 0; k < 6; k++) b.push(Number((info.nodeGuid >> BigInt(56 - 8 * k)) & 0xffn).toString(16).padStart(2, '0'));
  return b.join(':');
}
