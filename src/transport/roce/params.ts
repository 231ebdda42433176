/**
 * What the soft RoCE device reports, after Linux rdma_rxe (drivers/infiniband/sw/rxe/rxe_param.h,
 * rxe.c `rxe_init_device_param` / `rxe_init_port_param`, rxe_verbs.c `rxe_query_port`) as of the
 * 6.1 kernels, and the MTU rules of rxe (`eth_mtu_int_to_enum`, `rxe_set_mtu`) and of the
 * connection manager (`iboe_get_mtu`, include/rdma/ib_addr.h) are in wire/roce/packet.ts.
 *
 * Everything is rxe's (atomics: IBV_ATOMIC_HCA; memory windows of types 1 and 2B, as rxe).
 */
import { AtomicCap, LinkLayer, Mtu, PortState, type DeviceAttr, type PortAttr } from '../../verbs/device.js';
import { rxePortMtu } from '../../wire/roce/index.js';

/** `DEFAULT_MAX_VALUE` of rxe_param.h: 1 << 20. */
const DEFAULT_MAX_VALUE = 1 << 20;

/**
 * rxe's limits (rxe_param.h, Linux 6.1 with the stable fixes to the MR/MW index ranges).
 * `maxInlineData` is `RXE_MAX_INLINE_DATA` = `RXE_MAX_SGE * sizeof(struct ib_sge)`.
 */
export const RXE_LIMITS = Object.freeze({
  maxMrSize: 0xffff_ffff_ffff_ffffn,
  pageSizeCap: 0xfffff000n,
  maxQpWr: DEFAULT_MAX_VALUE,
  maxSge: 32,
  maxSgeRd: 32,
  maxInlineData: 32 * 16,
  maxCq: DEFAULT_MAX_VALUE,
  maxCqe: (1 << 15) - 1,
  maxPd: DEFAULT_MAX_VALUE,
  maxQpRdAtom: 128,
  maxResRdAtom: 0x3f000,
  maxQpInitRdAtom: 128,
  maxMcastGrp: 8192,
  maxMcastQpAttach: 56,
  maxTotalMcastQpAttach: 0x70000,
  maxAh: (1 << 15) - 1,
  maxSrqWr: DEFAULT_MAX_VALUE,
  maxSrqSge: 27,
  maxPkeys: 64,
  localCaAckDelay: 15,
  /** `RXE_MIN_QP_INDEX`: rxe numbers its QPs from 16 (0 and 1 are the special QPs). */
  minQpIndex: 16,
  maxQp: DEFAULT_MAX_VALUE - 16,
  maxMr: (DEFAULT_MAX_VALUE >> 1) - 1,
  /** `RXE_MAX_MW`: the MW indices are the upper half of rxe's index space. */
  maxMw: (DEFAULT_MAX_VALUE >> 1) - 1,
  maxSrq: DEFAULT_MAX_VALUE - 0x20001,
  /** `RXE_VENDOR_ID`: 0xFFFFFF, "no vendor" (IBTA A3.3.1). */
  vendorId: 0xffffff,
  /** `RXE_PORT_MAX_MSG_SZ`. */
  maxMsgSz: 0x800000,
  /** `RXE_PORT_GID_TBL_LEN`. */
  gidTblLen: 1024,
  /** `RXE_PORT_PKEY_TBL_LEN`: one P_Key, 0xFFFF. */
  pkeyTblLen: 1,
});

/** `enum ib_device_cap_flags` bits rxe reports (their ibverbs `IBV_DEVICE_*` values are the same). */
export const DeviceCap = {
  BAD_PKEY_CNTR: 1 << 1,
  BAD_QKEY_CNTR: 1 << 2,
  AUTO_PATH_MIG: 1 << 4,
  CHANGE_PHY_PORT: 1 << 5,
  UD_AV_PORT_ENFORCE: 1 << 6,
  PORT_ACTIVE_EVENT: 1 << 10,
  SYS_IMAGE_GUID: 1 << 11,
  RC_RNR_NAK_GEN: 1 << 12,
  SRQ_RESIZE: 1 << 13,
  MEM_WINDOW: 1 << 17,
  MEM_MGT_EXTENSIONS: 1 << 21,
  MEM_WINDOW_TYPE_2B: 1 << 24,
} as const;

/** rxe's `RXE_DEVICE_CAP_FLAGS` on 6.1: 0x01223c76 (the bits above). */
export const ROCE_DEVICE_CAP_FLAGS =
  DeviceCap.BAD_PKEY_CNTR |
  DeviceCap.BAD_QKEY_CNTR |
  DeviceCap.AUTO_PATH_MIG |
  DeviceCap.CHANGE_PHY_PORT |
  DeviceCap.UD_AV_PORT_ENFORCE |
  DeviceCap.PORT_ACTIVE_EVENT |
  DeviceCap.SYS_IMAGE_GUID |
  DeviceCap.RC_RNR_NAK_GEN |
  DeviceCap.SRQ_RESIZE |
  DeviceCap.MEM_WINDOW |
  DeviceCap.MEM_MGT_EXTENSIONS |
  DeviceCap.MEM_WINDOW_TYPE_2B;

/** `IB_PORT_CM_SUP`: the only port capability rxe sets (`RXE_PORT_PORT_CAP_FLAGS`). */
export const PORT_CAP_CM_SUP = 1 << 16;

/** Port physical states (`enum ib_port_phys_state`). */
export const PhysState = {
  DISABLED: 3,
  LINK_UP: 5,
} as const;

/**
 * The modified EUI-64 of a MAC (`addrconf_addr_eui48`): rxe's node GUID and system image GUID,
 * and the interface identifier of the port's default GID.
 */
export function eui64(mac: readonly number[]): Uint8Array {
  const b = new Uint8Array(8);
  b[0] = (mac[0] ?? 0) ^ 0x02;
  b[1] = mac[1] ?? 0;
  b[2] = mac[2] ?? 0;
  b[3] = 0xff;
  b[4] = 0xfe;
  b[5] = mac[3] ?? 0;
  b[6] = mac[4] ?? 0;
  b[7] = mac[5] ?? 0;
  return b;
}

/** Parse `aa:bb:cc:dd:ee:ff` into six bytes (all zero when malformed, as loopback's MAC). */
export function macToBytes(mac: string): number[] {
  const parts = mac.split(/[:-]/);
  if (parts.length !== 6 || !parts.every((p) => /^[0-9a-fA-F]{1,2}$/.test(p))) return [0, 0, 0, 0, 0, 0];
  return parts.map((p) => parseInt(p, 16));
}

/** Eight bytes as the big-endian 64-bit value ibverbs reports for a GUID. */
export function guidOf(b: Uint8Array): bigint {
  let v = 0n;
  for (const x of b) v = (v << 8n) | BigInt(x);
  return v;
}

/**
 * `ibv_query_device` of an rxe device (rxe_init_device_param), for a device whose node GUID is
 * `nodeGuid` (the EUI-64 of the netdev MAC, also the system image GUID).
 */
export function rxeDeviceAttr(nodeGuid: bigint): DeviceAttr {
  const L = RXE_LIMITS;
  return {
    // rdma-core's rxe provider prints the raw firmware version 0 as "0.0.0".
    fwVer: '0.0.0',
    nodeGuid,
    sysImageGuid: nodeGuid,
    maxMrSize: L.maxMrSize,
    pageSizeCap: L.pageSizeCap,
    vendorId: L.vendorId,
    vendorPartId: 0,
    hwVer: 0,
    maxQp: L.maxQp,
    maxQpWr: L.maxQpWr,
    deviceCapFlags: ROCE_DEVICE_CAP_FLAGS,
    maxSge: L.maxSge,
    maxSgeRd: L.maxSgeRd,
    maxCq: L.maxCq,
    maxCqe: L.maxCqe,
    maxMr: L.maxMr,
    maxPd: L.maxPd,
    maxQpRdAtom: L.maxQpRdAtom,
    maxEeRdAtom: 0,
    maxResRdAtom: L.maxResRdAtom,
    maxQpInitRdAtom: L.maxQpInitRdAtom,
    maxEeInitRdAtom: 0,
    atomicCap: AtomicCap.HCA,
    maxEe: 0,
    maxRdd: 0,
    maxMw: L.maxMw,
    maxRawIpv6Qp: 0,
    maxRawEthyQp: 0,
    maxMcastGrp: L.maxMcastGrp,
    maxMcastQpAttach: L.maxMcastQpAttach,
    maxTotalMcastQpAttach: L.maxTotalMcastQpAttach,
    maxAh: L.maxAh,
    maxFmr: 0,
    maxMapPerFmr: 0,
    maxSrq: L.maxSrq,
    maxSrqWr: L.maxSrqWr,
    maxSrqSge: L.maxSrqSge,
    maxPkeys: L.maxPkeys,
    localCaAckDelay: L.localCaAckDelay,
    physPortCnt: 1,
    maxInlineData: L.maxInlineData,
  };
}

/**
 * `ibv_query_port` of port 1 of an rxe device (rxe_init_port_param + rxe_query_port): the
 * state and `phys_state` the port watch gives (port-watch.ts: ACTIVE while the interface runs
 * with a carrier; LINK_UP, else POLLING while it is up, else DISABLED); speed and width 1X SDR, what `ib_get_eth_speed` reports for an
 * interface whose link speed is unknown or at most 1 Gb/s.
 */
export function rxePortAttr(netdevMtu: number, port: { active: boolean; physState: number }, badPkeyCntr: number, qkeyViolCntr: number): PortAttr {
  return {
    state: port.active ? PortState.ACTIVE : PortState.DOWN,
    maxMtu: Mtu.MTU_4096,
    activeMtu: rxePortMtu(netdevMtu) as Mtu,
    gidTblLen: RXE_LIMITS.gidTblLen,
    portCapFlags: PORT_CAP_CM_SUP,
    maxMsgSz: RXE_LIMITS.maxMsgSz,
    badPkeyCntr,
    qkeyViolCntr,
    pkeyTblLen: RXE_LIMITS.pkeyTblLen,
    lid: 0,
    smLid: 0,
    lmc: 0,
    maxVlNum: 1,
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
