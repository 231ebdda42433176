/**
 * Verbs constants and plain data types, with ibverbs' names and numeric values
 * (`enum ibv_wr_opcode`, `enum ibv_wc_status`, ...), so numbers printed by our tools match
 * rdma-core's (e.g. rping's `cq completion failed status %d`).
 */
import type { Ah } from './ah.js';
import type { Mr } from './mr.js';
import type { Mw } from './mw.js';

/** `enum ibv_access_flags`. */
export const Access = {
  LOCAL_WRITE: 1,
  REMOTE_WRITE: 2,
  REMOTE_READ: 4,
  REMOTE_ATOMIC: 8,
  MW_BIND: 16,
  ZERO_BASED: 32,
} as const;

/** `enum ibv_send_flags`. */
export const SendFlags = {
  FENCE: 1,
  SIGNALED: 2,
  SOLICITED: 4,
  INLINE: 8,
} as const;

/** `enum ibv_wr_opcode`. */
export enum WrOpcode {
  RDMA_WRITE = 0,
  RDMA_WRITE_WITH_IMM = 1,
  SEND = 2,
  SEND_WITH_IMM = 3,
  RDMA_READ = 4,
  ATOMIC_CMP_AND_SWP = 5,
  ATOMIC_FETCH_AND_ADD = 6,
  LOCAL_INV = 7,
  BIND_MW = 8,
  SEND_WITH_INV = 9,
}

/** `enum ibv_wc_opcode`. */
export enum WcOpcode {
  SEND = 0,
  RDMA_WRITE = 1,
  RDMA_READ = 2,
  COMP_SWAP = 3,
  FETCH_ADD = 4,
  BIND_MW = 5,
  LOCAL_INV = 6,
  RECV = 128,
  RECV_RDMA_WITH_IMM = 129,
}

/** `enum ibv_wc_status`. */
export enum WcStatus {
  SUCCESS = 0,
  LOC_LEN_ERR = 1,
  LOC_QP_OP_ERR = 2,
  LOC_EEC_OP_ERR = 3,
  LOC_PROT_ERR = 4,
  WR_FLUSH_ERR = 5,
  MW_BIND_ERR = 6,
  BAD_RESP_ERR = 7,
  LOC_ACCESS_ERR = 8,
  REM_INV_REQ_ERR = 9,
  REM_ACCESS_ERR = 10,
  REM_OP_ERR = 11,
  RETRY_EXC_ERR = 12,
  RNR_RETRY_EXC_ERR = 13,
  LOC_RDD_VIOL_ERR = 14,
  REM_INV_RD_REQ_ERR = 15,
  REM_ABORT_ERR = 16,
  INV_EECN_ERR = 17,
  INV_EEC_STATE_ERR = 18,
  FATAL_ERR = 19,
  RESP_TIMEOUT_ERR = 20,
  GENERAL_ERR = 21,
}

/** `enum ibv_wc_flags`. */
export const WcFlags = {
  GRH: 1,
  WITH_IMM: 2,
  IP_CSUM_OK: 4,
  WITH_INV: 8,
} as const;

/** `enum ibv_mw_type`. */
export enum MwType {
  /** Bound by `qp.bindMw()` (ibv_bind_mw), unbound by binding again; never invalidated. */
  TYPE_1 = 1,
  /** Bound by a BIND_MW work request while free; freed by LOCAL_INV or SEND_WITH_INV (type 2B). */
  TYPE_2 = 2,
}

/** `struct ibv_mw_bind_info`: what a window is bound to. */
export interface MwBindInfo {
  /** The region (its PD must be the window's); `null` with `addr` and `length` 0 unbinds a type 1 window. */
  mr: Mr | null;
  /** The window's first byte, an address in the MR's address space. */
  addr: number;
  /** Its length in bytes (0: unbind, type 1 only). */
  length: number;
  /** `mw_access_flags`: `Access` bits (REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC, ZERO_BASED). */
  mwAccessFlags: number;
}

/** `struct ibv_mw_bind`: the argument of `qp.bindMw()` (ibv_bind_mw, type 1 windows). */
export interface MwBind {
  wrId: WrId;
  /** Bitwise OR of {@link SendFlags} (SIGNALED: a BIND_MW completion on success). */
  sendFlags?: number;
  bindInfo: MwBindInfo;
}

/** `wr.bind_mw` of `struct ibv_send_wr`: a BIND_MW work request's operands. */
export interface BindMwWr {
  /** The window. */
  mw: Mw;
  /** The rkey it gets: its key byte (bits 0-7) replaces the window's (`incRkey(mw.rkey)` is the usual choice). */
  rkey: number;
  bindInfo: MwBindInfo;
}

/** `enum ibv_qp_type`. */
export enum QpType {
  RC = 2,
  UC = 3,
  UD = 4,
}

/**
 * QP states. String-valued so traces read `RTS -> ERR`; {@link QP_STATE_NUM} gives ibverbs'
 * `enum ibv_qp_state` numbers.
 */
export enum QpState {
  RESET = 'RESET',
  INIT = 'INIT',
  RTR = 'RTR',
  RTS = 'RTS',
  SQD = 'SQD',
  SQE = 'SQE',
  ERR = 'ERR',
}

/** `enum ibv_qp_state` numbers. */
export const QP_STATE_NUM: Readonly<Record<QpState, number>> = {
  [QpState.RESET]: 0,
  [QpState.INIT]: 1,
  [QpState.RTR]: 2,
  [QpState.RTS]: 3,
  [QpState.SQD]: 4,
  [QpState.SQE]: 5,
  [QpState.ERR]: 6,
};

/** `enum ibv_transport_type`. */
export enum TransportType {
  IB = 0,
  IWARP = 1,
  USNIC = 2,
  USNIC_UDP = 3,
  UNSPECIFIED = 4,
}

/** `enum ibv_event_type` (the subset a software device raises). */
export enum AsyncEventType {
  CQ_ERR = 0,
  QP_FATAL = 1,
  QP_REQ_ERR = 2,
  QP_ACCESS_ERR = 3,
  COMM_EST = 4,
  SQ_DRAINED = 5,
  PATH_MIG = 6,
  PATH_MIG_ERR = 7,
  DEVICE_FATAL = 8,
  PORT_ACTIVE = 9,
  PORT_ERR = 10,
  LID_CHANGE = 11,
  PKEY_CHANGE = 12,
  SM_CHANGE = 13,
  SRQ_ERR = 14,
  SRQ_LIMIT_REACHED = 15,
  QP_LAST_WQE_REACHED = 16,
  CLIENT_REREGISTER = 17,
  GID_CHANGE = 18,
}

/** A work request id: echoed back unchanged in the completion (ibverbs' `uint64_t wr_id`). */
export type WrId = number | bigint;

/** One scatter/gather element (`struct ibv_sge`): `addr` is an address inside the MR of `lkey`. */
export interface Sge {
  addr: number;
  length: number;
  lkey: number;
}

/** The UD part of a send WR (`wr.ud` of `struct ibv_send_wr`): where the datagram goes. */
export interface UdDest {
  /** The address handle (`ibv_create_ah`) of the destination port. */
  ah: Ah;
  /** `remote_qpn`: the destination QP number (0xFFFFFF for a multicast group). */
  remoteQpn: number;
  /** `remote_qkey`: the Q_Key to send with (bit 31 set: use the QP's own Q_Key, as IB 10.2.5). */
  remoteQkey: number;
}

/** `struct ibv_send_wr` (one request; post several by passing an array). */
export interface SendWr {
  wrId: WrId;
  opcode: WrOpcode;
  sgList: readonly Sge[];
  /** Bitwise OR of {@link SendFlags}. */
  sendFlags?: number;
  /** Send with Invalidate: the remote STag to invalidate. */
  invalidateRkey?: number;
  /** RDMA Write/Read: remote address and rkey. */
  rdma?: { remoteAddr: number; rkey: number };
  /**
   * ATOMIC_CMP_AND_SWP / ATOMIC_FETCH_AND_ADD (`wr.atomic`): the 8-byte aligned remote address
   * and its rkey, `compareAdd` (the compare value, or the addend) and `swap` (compare-and-swap
   * only). The local SGE receives the original remote value (8 bytes, host order).
   */
  atomic?: { remoteAddr: number; rkey: number; compareAdd: bigint; swap?: bigint };
  /**
   * SEND_WITH_IMM / RDMA_WRITE_WITH_IMM: the immediate data, a u32 in host order as the
   * application sees it (the wire carries it big-endian). iWARP has none: siw refuses those
   * opcodes with EINVAL.
   */
  immData?: number;
  /** UD QPs only: the destination (required there, ignored on connected QPs). */
  ud?: UdDest;
  /** BIND_MW: the window, its new rkey and what it is bound to. */
  bindMw?: BindMwWr;
}

/** `struct ibv_recv_wr`. */
export interface RecvWr {
  wrId: WrId;
  sgList: readonly Sge[];
}

/** `struct ibv_wc`. */
export interface Wc {
  wrId: WrId;
  status: WcStatus;
  opcode: WcOpcode;
  vendorErr: number;
  byteLen: number;
  qpNum: number;
  /** UD receive: the sender's QP number (0 otherwise). */
  srcQp: number;
  /** Bitwise OR of {@link WcFlags}. */
  wcFlags: number;
  /** With `WcFlags.WITH_IMM`: the immediate data, host order (0 otherwise). */
  immData: number;
  invalidatedRkey: number;
  /** UD receive: index of the P_Key the datagram matched (0 otherwise). */
  pkeyIndex: number;
  /** UD receive: the sender's LID (0 on RoCE and iWARP). */
  slid: number;
  /** UD receive: the service level (0 on RoCE and iWARP). */
  sl: number;
  /** UD receive: destination LID path bits (0 on RoCE and iWARP). */
  dlidPathBits: number;
}

/** `enum ibv_gid_type` (the type of a GID table entry, as sysfs `gid_attrs/types` reports). */
export enum GidType {
  IB = 0,
  ROCE_V1 = 1,
  ROCE_V2 = 2,
}

/** `struct ibv_qp_cap`. */
export interface QpCap {
  maxSendWr: number;
  maxRecvWr: number;
  maxSendSge: number;
  maxRecvSge: number;
  maxInlineData: number;
}

/** `ibv_wc_status_str()`: the same texts as libibverbs. */
export function wcStatusStr(status: WcStatus): string {
  return WC_STATUS_STR[status] ?? 'unknown';
}

const WC_STATUS_STR: Record<number, string> = {
  0: 'success',
  1: 'local length error',
  2: 'local QP operation error',
  3: 'local EE context operation error',
  4: 'local protection error',
  5: 'Work Request Flushed Error',
  6: 'memory management operation error',
  7: 'bad response error',
  8: 'local access error',
  9: 'remote invalid request error',
  10: 'remote access error',
  11: 'remote operation error',
  12: 'transport retry counter exceeded',
  13: 'RNR retry counter exceeded',
  14: 'local RDD violation error',
  15: 'remote invalid RD request',
  16: 'aborted error',
  17: 'invalid EE context number',
  18: 'invalid EE context state',
  19: 'fatal error',
  20: 'response timeout error',
  21: 'general error',
};
