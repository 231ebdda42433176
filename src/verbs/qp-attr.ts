/**
 * QP attributes (`struct ibv_qp_attr`, `enum ibv_qp_attr_mask`) and the modify_qp transition
 * table: for every (current state, next state) pair, the attributes each QP type must give
 * (required) and may give (optional), after the kernel's `qp_state_table` and
 * `ib_modify_qp_is_ok()` (drivers/infiniband/core/verbs.c; IB spec 11.2.4.2 and the QP state
 * diagram of 10.3.1). Providers that follow the IB rules (RoCE) have `modify_qp` checked against
 * it; iWARP devices check only the state graph, as siw (`siw_verbs_modify_qp` accepts and ignores
 * the IB-only attributes).
 */
import type { AhAttr } from './ah.js';
import { QpState, QpType, type QpCap } from './types.js';

/** `enum ibv_qp_attr_mask` bits, with ibverbs' values. */
export const QpAttrMask = {
  STATE: 1 << 0,
  CUR_STATE: 1 << 1,
  EN_SQD_ASYNC_NOTIFY: 1 << 2,
  ACCESS_FLAGS: 1 << 3,
  PKEY_INDEX: 1 << 4,
  PORT: 1 << 5,
  QKEY: 1 << 6,
  AV: 1 << 7,
  PATH_MTU: 1 << 8,
  TIMEOUT: 1 << 9,
  RETRY_CNT: 1 << 10,
  RNR_RETRY: 1 << 11,
  RQ_PSN: 1 << 12,
  MAX_QP_RD_ATOMIC: 1 << 13,
  ALT_PATH: 1 << 14,
  MIN_RNR_TIMER: 1 << 15,
  SQ_PSN: 1 << 16,
  MAX_DEST_RD_ATOMIC: 1 << 17,
  PATH_MIG_STATE: 1 << 18,
  CAP: 1 << 19,
  DEST_QPN: 1 << 20,
  RATE_LIMIT: 1 << 25,
} as const;

/** `enum ibv_mig_state`. */
export enum MigState {
  MIGRATED = 0,
  REARM = 1,
  ARMED = 2,
}

/** `struct ibv_qp_attr` (ibverbs' names, camelCased). Which fields count is said by the mask. */
export interface QpAttr {
  /** `qp_state`: the state to move to. */
  qpState?: QpState;
  /** `cur_qp_state`: the state the caller believes the QP is in. */
  curQpState?: QpState;
  /** `path_mtu` (`enum ibv_mtu`, 1..5). */
  pathMtu?: number;
  /** `path_mig_state` ({@link MigState}). */
  pathMigState?: MigState;
  /** `qkey` (UD). */
  qkey?: number;
  /** `rq_psn`: expected PSN of the first inbound packet (24 bits). */
  rqPsn?: number;
  /** `sq_psn`: PSN of the first outbound packet (24 bits). */
  sqPsn?: number;
  /** `dest_qp_num`: the connected peer QP (RC/UC, 24 bits). */
  destQpNum?: number;
  /** `qp_access_flags`: remote access the QP allows (`Access` bits). */
  qpAccessFlags?: number;
  /** `cap`: queue sizes. */
  cap?: QpCap;
  /** `ah_attr`: the primary path (RC/UC). */
  ahAttr?: AhAttr;
  /** `alt_ah_attr`: the alternate path. */
  altAhAttr?: AhAttr;
  /** `pkey_index`. */
  pkeyIndex?: number;
  /** `alt_pkey_index`. */
  altPkeyIndex?: number;
  /** `en_sqd_async_notify`. */
  enSqdAsyncNotify?: number;
  /** `sq_draining` (query only). */
  sqDraining?: number;
  /** `max_rd_atomic`: ORD, RDMA Reads/atomics this QP may have outstanding as initiator. */
  maxRdAtomic?: number;
  /** `max_dest_rd_atomic`: IRD, RDMA Reads/atomics this QP accepts as responder. */
  maxDestRdAtomic?: number;
  /** `min_rnr_timer` (5-bit IB encoding). */
  minRnrTimer?: number;
  /** `port_num`. */
  portNum?: number;
  /** `timeout`: local ACK timeout exponent (4.096 µs * 2^timeout; 0 = infinite). */
  timeout?: number;
  /** `retry_cnt` (3 bits). */
  retryCnt?: number;
  /** `rnr_retry` (3 bits; 7 = infinite). */
  rnrRetry?: number;
  /** `alt_port_num`. */
  altPortNum?: number;
  /** `alt_timeout`. */
  altTimeout?: number;
  /** `rate_limit` (kbps). */
  rateLimit?: number;
}

/** Which {@link QpAttr} field each mask bit names (STATE and CUR_STATE included). */
const MASK_FIELDS: readonly (readonly [number, readonly (keyof QpAttr)[]])[] = [
  [QpAttrMask.STATE, ['qpState']],
  [QpAttrMask.CUR_STATE, ['curQpState']],
  [QpAttrMask.EN_SQD_ASYNC_NOTIFY, ['enSqdAsyncNotify']],
  [QpAttrMask.ACCESS_FLAGS, ['qpAccessFlags']],
  [QpAttrMask.PKEY_INDEX, ['pkeyIndex']],
  [QpAttrMask.PORT, ['portNum']],
  [QpAttrMask.QKEY, ['qkey']],
  [QpAttrMask.AV, ['ahAttr']],
  [QpAttrMask.PATH_MTU, ['pathMtu']],
  [QpAttrMask.TIMEOUT, ['timeout']],
  [QpAttrMask.RETRY_CNT, ['retryCnt']],
  [QpAttrMask.RNR_RETRY, ['rnrRetry']],
  [QpAttrMask.RQ_PSN, ['rqPsn']],
  [QpAttrMask.MAX_QP_RD_ATOMIC, ['maxRdAtomic']],
  [QpAttrMask.ALT_PATH, ['altAhAttr', 'altPkeyIndex', 'altPortNum', 'altTimeout']],
  [QpAttrMask.MIN_RNR_TIMER, ['minRnrTimer']],
  [QpAttrMask.SQ_PSN, ['sqPsn']],
  [QpAttrMask.MAX_DEST_RD_ATOMIC, ['maxDestRdAtomic']],
  [QpAttrMask.PATH_MIG_STATE, ['pathMigState']],
  [QpAttrMask.CAP, ['cap']],
  [QpAttrMask.DEST_QPN, ['destQpNum']],
  [QpAttrMask.RATE_LIMIT, ['rateLimit']],
];

/** Every defined mask bit. */
export const QP_ATTR_MASK_ALL = MASK_FIELDS.reduce((m, [bit]) => m | bit, 0);

/** The mask naming every attribute present in `a` (what `qp.modify(attr)` uses without a mask). */
export function qpAttrMaskOf(a: QpAttr): number {
  let m = 0;
  for (let i = 0; i < FIELD_NAMES.length; i++) if (a[FIELD_NAMES[i] as keyof QpAttr] !== undefined) m |= FIELD_BITS[i] as number;
  return m;
}
/** {@link MASK_FIELDS} flattened: field `FIELD_NAMES[i]` sets bit `FIELD_BITS[i]` (one plain loop, no closure per call). */
const FIELD_NAMES: (keyof QpAttr)[] = MASK_FIELDS.flatMap(([, fields]) => fields);
const FIELD_BITS: number[] = MASK_FIELDS.flatMap(([bit, fields]) => fields.map(() => bit));

/** The names of the bits of `mask` (`'STATE|PORT'`), for error messages. */
export function qpAttrMaskStr(mask: number): string {
  const names: string[] = [];
  for (const [k, v] of Object.entries(QpAttrMask)) if (mask & v) names.push(k);
  return names.length > 0 ? names.join('|') : '0';
}

/** One transition of the table: attributes required and optional per QP type. */
interface Transition {
  req: Partial<Record<QpType, number>>;
  opt: Partial<Record<QpType, number>>;
}

const M = QpAttrMask;
const NONE: Transition = { req: {}, opt: {} };
const t = (req: Transition['req'], opt: Transition['opt']): Transition => ({ req, opt });

/**
 * The modify_qp transition table (IB QP types RC, UC, UD), after the kernel's `qp_state_table`:
 * `QP_STATE_TABLE[cur][next]` exists for the legal transitions. Any state may go to RESET or
 * ERR with no other attribute.
 */
export const QP_STATE_TABLE: Readonly<Record<QpState, Partial<Record<QpState, Transition>>>> = {
  [QpState.RESET]: {
    [QpState.RESET]: NONE,
    [QpState.ERR]: NONE,
    [QpState.INIT]: t(
      {
        [QpType.UD]: M.PKEY_INDEX | M.PORT | M.QKEY,
        [QpType.UC]: M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS,
        [QpType.RC]: M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS,
      },
      {},
    ),
  },
  [QpState.INIT]: {
    [QpState.RESET]: NONE,
    [QpState.ERR]: NONE,
    [QpState.INIT]: t(
      {},
      {
        [QpType.UD]: M.PKEY_INDEX | M.PORT | M.QKEY,
        [QpType.UC]: M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS,
        [QpType.RC]: M.PKEY_INDEX | M.PORT | M.ACCESS_FLAGS,
      },
    ),
    [QpState.RTR]: t(
      {
        [QpType.UC]: M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN,
        [QpType.RC]: M.AV | M.PATH_MTU | M.DEST_QPN | M.RQ_PSN | M.MAX_DEST_RD_ATOMIC | M.MIN_RNR_TIMER,
      },
      {
        [QpType.UD]: M.PKEY_INDEX | M.QKEY,
        [QpType.UC]: M.ALT_PATH | M.ACCESS_FLAGS | M.PKEY_INDEX,
        [QpType.RC]: M.ALT_PATH | M.ACCESS_FLAGS | M.PKEY_INDEX,
      },
    ),
  },
  [QpState.RTR]: {
    [QpState.RESET]: NONE,
    [QpState.ERR]: NONE,
    [QpState.RTS]: t(
      {
        [QpType.UD]: M.SQ_PSN,
        [QpType.UC]: M.SQ_PSN,
        [QpType.RC]: M.TIMEOUT | M.RETRY_CNT | M.RNR_RETRY | M.SQ_PSN | M.MAX_QP_RD_ATOMIC,
      },
      {
        [QpType.UD]: M.CUR_STATE | M.QKEY,
        [QpType.UC]: M.CUR_STATE | M.ALT_PATH | M.ACCESS_FLAGS | M.PATH_MIG_STATE,
        [QpType.RC]: M.CUR_STATE | M.ALT_PATH | M.ACCESS_FLAGS | M.MIN_RNR_TIMER | M.PATH_MIG_STATE,
      },
    ),
  },
  [QpState.RTS]: {
    [QpState.RESET]: NONE,
    [QpState.ERR]: NONE,
    [QpState.RTS]: t(
      {},
      {
        [QpType.UD]: M.CUR_STATE | M.QKEY,
        [QpType.UC]: M.CUR_STATE | M.ACCESS_FLAGS | M.ALT_PATH | M.PATH_MIG_STATE,
        [QpType.RC]: M.CUR_STATE | M.ACCESS_FLAGS | M.ALT_PATH | M.PATH_MIG_STATE | M.MIN_RNR_TIMER,
      },
    ),
    [QpState.SQD]: t(
      {},
      {
        [QpType.UD]: M.EN_SQD_ASYNC_NOTIFY,
        [QpType.UC]: M.EN_SQD_ASYNC_NOTIFY,
        [QpType.RC]: M.EN_SQD_ASYNC_NOTIFY,
      },
    ),
  },
  [QpState.SQD]: {
    [QpState.RESET]: NONE,
    [QpState.ERR]: NONE,
    [QpState.RTS]: t(
      {},
      {
        [QpType.UD]: M.CUR_STATE | M.QKEY,
        [QpType.UC]: M.CUR_STATE | M.ALT_PATH | M.ACCESS_FLAGS | M.PATH_MIG_STATE,
        [QpType.RC]: M.CUR_STATE | M.ALT_PATH | M.ACCESS_FLAGS | M.MIN_RNR_TIMER | M.PATH_MIG_STATE,
      },
    ),
    [QpState.SQD]: t(
      {},
      {
        [QpType.UD]: M.PKEY_INDEX | M.QKEY,
        [QpType.UC]: M.AV | M.ALT_PATH | M.ACCESS_FLAGS | M.PKEY_INDEX | M.PATH_MIG_STATE,
        [QpType.RC]:
          M.PORT | M.AV | M.TIMEOUT | M.RETRY_CNT | M.RNR_RETRY | M.MAX_QP_RD_ATOMIC | M.MAX_DEST_RD_ATOMIC | M.ALT_PATH |
          M.ACCESS_FLAGS | M.PKEY_INDEX | M.MIN_RNR_TIMER | M.PATH_MIG_STATE,
      },
    ),
  },
  [QpState.SQE]: {
    [QpState.RESET]: NONE,
    [QpState.ERR]: NONE,
    [QpState.RTS]: t(
      {},
      {
        [QpType.UD]: M.CUR_STATE | M.QKEY,
        [QpType.UC]: M.CUR_STATE | M.ACCESS_FLAGS,
      },
    ),
  },
  [QpState.ERR]: {
    [QpState.RESET]: NONE,
    [QpState.ERR]: NONE,
  },
};

/**
 * `ib_modify_qp_is_ok()`: whether `mask` is acceptable for moving a QP of `type` from `cur` to
 * `next` (`next === cur` when the mask has no STATE bit). Returns null if so, else the reason.
 * CUR_STATE is only accepted from RTR, RTS, SQD and SQE.
 */
export function modifyQpProblem(cur: QpState, next: QpState, type: QpType, mask: number): string | null {
  if (mask & QpAttrMask.CUR_STATE && cur !== QpState.RTR && cur !== QpState.RTS && cur !== QpState.SQD && cur !== QpState.SQE) {
    return `cur_qp_state given in ${cur}`;
  }
  const tr = QP_STATE_TABLE[cur][next];
  if (tr === undefined) return `illegal transition ${cur} -> ${next}`;
  const req = tr.req[type] ?? 0;
  const opt = tr.opt[type] ?? 0;
  if ((mask & req) !== req) return `${cur} -> ${next} requires ${qpAttrMaskStr(req & ~mask)}`;
  const extra = mask & ~(req | opt | QpAttrMask.STATE);
  if (extra !== 0) return `${cur} -> ${next} does not take ${qpAttrMaskStr(extra)}`;
  return null;
}

/**
 * The legal state moves of an iWARP QP (siw's `siw_qp_modify`; IB spec 10.3.1 graph): any state
 * may go to RESET or ERR; otherwise only the pairs listed.
 */
const IWARP_TRANSITIONS: Readonly<Record<QpState, readonly QpState[]>> = {
  [QpState.RESET]: [QpState.INIT],
  [QpState.INIT]: [QpState.INIT, QpState.RTR],
  [QpState.RTR]: [QpState.RTS],
  [QpState.RTS]: [QpState.RTS, QpState.SQD],
  [QpState.SQD]: [QpState.SQD, QpState.RTS],
  [QpState.SQE]: [QpState.RTS],
  [QpState.ERR]: [],
};

/** Whether `from → to` is a legal modify_qp state move (the graph alone, no attribute rules). */
export function qpTransitionAllowed(from: QpState, to: QpState): boolean {
  return to === QpState.RESET || to === QpState.ERR || IWARP_TRANSITIONS[from].includes(to);
}
