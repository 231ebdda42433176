/**
 * What `ibv_query_device` and `ibv_query_port` report: `struct ibv_device_attr`,
 * `struct ibv_port_attr` and the enums and bits of their fields (node type, port state, MTU,
 * link layer, atomic capability), with ibverbs' `*_str()` helpers. Plain data: the device
 * objects that hand these out are in device.ts, the context that caches them in context.ts.
 */
/** `enum ibv_node_type`. */
export enum NodeType {
  UNKNOWN = -1,
  CA = 1,
  SWITCH = 2,
  ROUTER = 3,
  RNIC = 4,
  USNIC = 5,
  USNIC_UDP = 6,
}

/** `ibv_node_type_str()`. */
export function nodeTypeStr(t: NodeType): string {
  return NODE_TYPE_STR[t] ?? 'unknown';
}

const NODE_TYPE_STR: Record<number, string> = {
  1: 'InfiniBand channel adapter',
  2: 'InfiniBand switch',
  3: 'InfiniBand router',
  4: 'iWARP NIC',
  5: 'usNIC',
  6: 'usNIC UDP',
};

/** `enum ibv_port_state`. */
export enum PortState {
  NOP = 0,
  DOWN = 1,
  INIT = 2,
  ARMED = 3,
  ACTIVE = 4,
  ACTIVE_DEFER = 5,
}

/** `ibv_port_state_str()`. */
export function portStateStr(s: PortState): string {
  return PORT_STATE_STR[s] ?? 'unknown';
}

const PORT_STATE_STR: Record<number, string> = {
  0: 'no state change (NOP)',
  1: 'down',
  2: 'init',
  3: 'armed',
  4: 'active',
  5: 'active defer',
};

/** `enum ibv_mtu`. */
export enum Mtu {
  MTU_256 = 1,
  MTU_512 = 2,
  MTU_1024 = 3,
  MTU_2048 = 4,
  MTU_4096 = 5,
}

/** The kernel's `ib_mtu_int_to_enum()`: the largest IB MTU not above `bytes` (minimum 256). */
export function mtuToEnum(bytes: number): Mtu {
  if (bytes >= 4096) return Mtu.MTU_4096;
  if (bytes >= 2048) return Mtu.MTU_2048;
  if (bytes >= 1024) return Mtu.MTU_1024;
  if (bytes >= 512) return Mtu.MTU_512;
  return Mtu.MTU_256;
}

/** `ibv_mtu_to_num()`: 256 << (mtu - 1), or -1 for a bad value. */
export function mtuEnumToBytes(m: Mtu): number {
  return Number.isInteger(m) && m >= 1 && m <= 5 ? 256 << (m - 1) : -1;
}

/** Port `link_layer` values (`IBV_LINK_LAYER_*`). */
export enum LinkLayer {
  UNSPECIFIED = 0,
  INFINIBAND = 1,
  ETHERNET = 2,
}

/** `enum ibv_atomic_cap`. */
export enum AtomicCap {
  NONE = 0,
  HCA = 1,
  GLOB = 2,
}

/** `IBV_DEVICE_MEM_MGT_EXTENSIONS`, the one `device_cap_flags` bit siw reports. */
export const DEVICE_MEM_MGT_EXTENSIONS = 1 << 21;
/** `IBV_DEVICE_MEM_WINDOW`: the device has memory windows (`max_mw` > 0; type 1 unless a type 2 bit says more). */
export const DEVICE_MEM_WINDOW = 1 << 17;
/** `IBV_DEVICE_MEM_WINDOW_TYPE_2A`: type 2 windows of the 2A kind (bound to a QP number). */
export const DEVICE_MEM_WINDOW_TYPE_2A = 1 << 23;
/** `IBV_DEVICE_MEM_WINDOW_TYPE_2B`: type 2 windows of the 2B kind (bound to a QP; rxe's). */
export const DEVICE_MEM_WINDOW_TYPE_2B = 1 << 24;
/**
 * The kernel's `IB_DEVICE_BLOCK_MULTICAST_LOOPBACK` (libibverbs passes `device_cap_flags` through
 * without naming it): QPs may be created with `QpCreateFlags.BLOCK_SELF_MCAST_LB` (mlx4 and mlx5
 * report it; rxe and siw do not, and refuse the flag).
 */
export const DEVICE_BLOCK_MULTICAST_LOOPBACK = 1 << 22;

/** Port capability bits siw reports: `IB_PORT_CM_SUP | IB_PORT_DEVICE_MGMT_SUP`. */
export const PORT_CAP_CM_SUP = 1 << 16;
/** See {@link PORT_CAP_CM_SUP}. */
export const PORT_CAP_DEVICE_MGMT_SUP = 1 << 19;

/**
 * `struct ibv_device_attr` (field names camelCased; 64-bit fields are bigints), plus
 * `maxInlineData`, which ibverbs does not report but every QP creation is checked against.
 */
export interface DeviceAttr {
  /** `fw_ver` (siw: empty). */
  fwVer: string;
  /** `node_guid`: node GUID (siw: MAC, or device name for loopback). */
  nodeGuid: bigint;
  /** `sys_image_guid`: system image GUID (siw: modified EUI-64 of the MAC). */
  sysImageGuid: bigint;
  /** `max_mr_size`: largest MR (siw: ~0). */
  maxMrSize: bigint;
  /** `page_size_cap`: supported page sizes (siw: PAGE_SIZE). */
  pageSizeCap: bigint;
  /** `vendor_id`: siw: 0x626d74, ASCII "bmt". */
  vendorId: number;
  /** `vendor_part_id`: siw: device number, from 1. */
  vendorPartId: number;
  /** `hw_ver`. */
  hwVer: number;
  /** `max_qp`: max QPs. */
  maxQp: number;
  /** `max_qp_wr`: max WRs per send/receive queue. */
  maxQpWr: number;
  /** `device_cap_flags`: `IBV_DEVICE_*` bits (siw: MEM_MGT_EXTENSIONS). */
  deviceCapFlags: number;
  /** `max_sge`: max SGEs per WR. */
  maxSge: number;
  /** `max_sge_rd`: max SGEs of an RDMA Read sink (iWARP: 1). */
  maxSgeRd: number;
  /** `max_cq`: max CQs. */
  maxCq: number;
  /** `max_cqe`: max CQEs per CQ. */
  maxCqe: number;
  /** `max_mr`: max MRs. */
  maxMr: number;
  /** `max_pd`: max PDs. */
  maxPd: number;
  /** Max outstanding RDMA Reads per QP as target (siw: ORD max, 128). */
  maxQpRdAtom: number;
  /** `max_ee_rd_atom`. */
  maxEeRdAtom: number;
  /** `max_res_rd_atom`: total RDMA Read resources (maxQp * IRD). */
  maxResRdAtom: number;
  /** Max outstanding RDMA Reads per QP as initiator (siw: IRD max, 128). */
  maxQpInitRdAtom: number;
  /** `max_ee_init_rd_atom`. */
  maxEeInitRdAtom: number;
  /** `atomic_cap`: atomic support (siw: none). */
  atomicCap: AtomicCap;
  /** `max_ee`. */
  maxEe: number;
  /** `max_rdd`. */
  maxRdd: number;
  /** `max_mw`: max memory windows (siw: 0; rxe: 524287). */
  maxMw: number;
  /** `max_raw_ipv6_qp`. */
  maxRawIpv6Qp: number;
  /** `max_raw_ethy_qp`. */
  maxRawEthyQp: number;
  /** `max_mcast_grp`. */
  maxMcastGrp: number;
  /** `max_mcast_qp_attach`. */
  maxMcastQpAttach: number;
  /** `max_total_mcast_qp_attach`. */
  maxTotalMcastQpAttach: number;
  /** `max_ah`. */
  maxAh: number;
  /** `max_fmr`. */
  maxFmr: number;
  /** `max_map_per_fmr`. */
  maxMapPerFmr: number;
  /** `max_srq`: max SRQs. */
  maxSrq: number;
  /** `max_srq_wr`: max WRs per SRQ. */
  maxSrqWr: number;
  /** `max_srq_sge`: max SGEs per SRQ WR. */
  maxSrqSge: number;
  /** `max_pkeys`. */
  maxPkeys: number;
  /** `local_ca_ack_delay`. */
  localCaAckDelay: number;
  /** `phys_port_cnt`: number of ports (1). */
  physPortCnt: number;
  /** Not in ibverbs: the largest `cap.maxInlineData` a QP may ask for (siw: SIW_MAX_INLINE). */
  maxInlineData: number;
}

/** `struct ibv_port_attr` (field names camelCased). */
export interface PortAttr {
  /** `state`: port state (siw: ACTIVE). */
  state: PortState;
  /** `max_mtu`: largest IB MTU enum. */
  maxMtu: Mtu;
  /** `active_mtu`: IB MTU enum of the interface MTU. */
  activeMtu: Mtu;
  /** `gid_tbl_len`: GID table size (1: the MAC-based GID). */
  gidTblLen: number;
  /** `port_cap_flags`: `IBV_PORT_*_SUP` bits. */
  portCapFlags: number;
  /** `max_msg_sz`: largest message (2^32-1). */
  maxMsgSz: number;
  /** `bad_pkey_cntr`. */
  badPkeyCntr: number;
  /** `qkey_viol_cntr`. */
  qkeyViolCntr: number;
  /** `pkey_tbl_len`: P_Key table size (iWARP: 0). */
  pkeyTblLen: number;
  /** `lid`: LID (iWARP: 0). */
  lid: number;
  /** `sm_lid`. */
  smLid: number;
  /** `lmc`. */
  lmc: number;
  /** `max_vl_num`. */
  maxVlNum: number;
  /** `sm_sl`. */
  smSl: number;
  /** `subnet_timeout`. */
  subnetTimeout: number;
  /** `init_type_reply`. */
  initTypeReply: number;
  /** `IBV_WIDTH_1X` = 1. */
  activeWidth: number;
  /** `IBV_SPEED_SDR` = 1. */
  activeSpeed: number;
  /** 5 = LinkUp. */
  physState: number;
  /** `link_layer`: ETHERNET for iWARP. */
  linkLayer: LinkLayer;
  /** `flags`. */
  flags: number;
  /** `port_cap_flags2`. */
  portCapFlags2: number;
}
