/**
 * The native addon's ABI as JavaScript sees it: the layouts of the buffers the data path and the
 * attribute calls share with native/src (addon.h: keep the two in step), and the pure functions
 * that encode work requests, address-handle and QP attributes into them and decode completions and
 * attributes out of them. Nothing here calls the addon or keeps state: every function works on
 * the arrays it is handed, so the marshalling is tested without the addon
 * (test/unit/native/abi.test.js).
 *
 * Numbers cross as 32-bit words (`Uint32Array`) and, for 64-bit addresses, as doubles
 * (`Float64Array` over the same memory, 8-byte aligned word pairs); a `wr_id` crosses as two
 * words, its bit 63 set for ids that were numbers so they come back as numbers.
 */
import type { AhAttr } from '../verbs/ah.js';
import { QpAttrMask, type QpAttr } from '../verbs/qp-attr.js';
import { QP_STATE_NUM, QpState, WcFlags, WrOpcode, type RecvWr, type SendWr, type Sge, type Wc, type WrId } from '../verbs/types.js';
import { isU32 } from '../util/fields.js';
import type { Handle } from './binding.js';

// -- the work-request scratch (32-bit words) -----------------------------------------------------
// The encoders and decoders read the layouts through module-private bindings (WR_N, WR_W …):
// V8 reads those more cheaply than exported ones, per field of every work request.

/** Words per work request. */
const WR_N = 20;
export const WR_WORDS = WR_N;
/** Work requests per addon call. */
export const WR_MAX = 32;
/** Words per SGE: addr (f64), length, lkey. */
const SGE_N = 4;
export const SGE_WORDS = SGE_N;
/** SGEs per addon call. */
export const SGE_MAX = 256;
/** First SGE word. */
const SGE_AT = WR_MAX * WR_N;
export const SGE_BASE = SGE_AT;
/** Word holding the index of the first WR not posted after a failed post. */
export const WR_STATUS_WORD = SGE_BASE + SGE_MAX * SGE_WORDS;
/**
 * The calls by slot (`postSendSlot`, `postRecvSlot`, `pollCqSlot`): the word naming their QP or
 * CQ by its key-table slot, and the word after it holding the WR count or the poll maximum.
 */
export const WR_SLOT_WORD = WR_STATUS_WORD + 1;
export const WR_COUNT_WORD = WR_STATUS_WORD + 2;
const WR_W = {
  ID_LO: 0, ID_HI: 1, OPCODE: 2, FLAGS: 3, NSGE: 4, SGE0: 5, IMM: 6, RKEY: 7, RADDR: 8, INV: 10, QKEY: 11, AH: 12, RQPN: 13,
  /** An atomic WR's compare (CAS) or add (FAA) operand and its swap operand, as 32-bit halves. */
  CMP_LO: 16, CMP_HI: 17, SWAP_LO: 18, SWAP_HI: 19,
  /**
   * BIND_MW: the window's access rights and its rkey as the application has it (`mw.rkey`); the
   * window's key-table slot goes in `AH`, the MR's in `RQPN`, the new rkey in `RKEY`, the address
   * at `RADDR` and the length as a double at `CMP_LO`.
   */
  MW_ACCESS: 14, MW_RKEY: 15,
} as const;
/** Work request word offsets (`W_*`). */
export const W = WR_W;
/** SGE word offsets: the address is the double at words 0-1. */
const SGE_W = { ADDR: 0, LENGTH: 2, LKEY: 3 } as const;
export const S = SGE_W;

// -- the completion scratch ----------------------------------------------------------------------

/** Words per completion, completions per call. */
const WC_N = 12;
export const WC_WORDS = WC_N;
export const WC_MAX = 64;
/**
 * Completion word offsets: `IMM_INV` is the immediate data (host order) with IBV_WC_WITH_IMM,
 * else the invalidated rkey; `PKEY_SLID` is pkey_index | slid << 16; `SL_PATH` is
 * sl | dlid_path_bits << 8.
 */
const WC_W = { ID_LO: 0, ID_HI: 1, STATUS: 2, OPCODE: 3, VENDOR_ERR: 4, BYTE_LEN: 5, QP_NUM: 6, SRC_QP: 7, FLAGS: 8, IMM_INV: 9, PKEY_SLID: 10, SL_PATH: 11 } as const;
export const WC = WC_W;

// -- attribute layouts (Float64Array) ------------------------------------------------------------

/** `ibv_ah_attr` in a Float64Array (`AH_*`). */
export const AH = { DLID: 0, SL: 1, SRC_PATH_BITS: 2, STATIC_RATE: 3, IS_GLOBAL: 4, PORT: 5, FLOW_LABEL: 6, SGID_INDEX: 7, HOP_LIMIT: 8, TCLASS: 9, WORDS: 10 } as const;
/** `ibv_qp_attr` in a Float64Array (`QA_*`). */
export const QA = {
  STATE: 0,
  CUR_STATE: 1,
  ACCESS: 2,
  PKEY_INDEX: 3,
  PORT: 4,
  QKEY: 5,
  PATH_MTU: 6,
  TIMEOUT: 7,
  RETRY_CNT: 8,
  RNR_RETRY: 9,
  RQ_PSN: 10,
  SQ_PSN: 11,
  MAX_RD_ATOMIC: 12,
  MAX_DEST_RD_ATOMIC: 13,
  MIN_RNR_TIMER: 14,
  DEST_QPN: 15,
  EN_SQD_ASYNC: 16,
  SQ_DRAINING: 17,
  MAX_SEND_WR: 18,
  MAX_RECV_WR: 19,
  MAX_SEND_SGE: 20,
  MAX_RECV_SGE: 21,
  MAX_INLINE: 22,
  PATH_MIG_STATE: 23,
  AH: 24,
  WORDS: 24 + 10,
} as const;

/** Every `IBV_QP_*` mask bit up to IBV_QP_DEST_QPN: what `ibv_query_qp` asks for by default. */
export const ALL_QP_ATTR = (1 << 21) - 1;

/** What an async event's `kind` argument says its element is (native/src/verbs.c). */
export const AsyncElement = { DEVICE: 0, QP: 1, CQ: 2, SRQ: 3, PORT: 4 } as const;

// -- work requests -------------------------------------------------------------------------------

/** A native MR or window: its slot in the addon's key table (native/src/mw.c), from 1. */
export interface KeySlotted {
  readonly _slot: number;
}

/** The key-table slot of `o` (0: not a native MR or window, which the addon refuses). */
function slotOf(o: unknown): number {
  const s = (o as Partial<KeySlotted> | null | undefined)?._slot;
  return typeof s === 'number' ? s : 0;
}

/** What `createAh` returns to the verbs layer for a native device (kept in `ah._provider`). */
export interface NativeAhData {
  h: Handle;
  /** The AH's slot in the addon's table, from 1 (0 in a WR: no AH). */
  index: number;
}

const TWO32 = 0x1_0000_0000;
// The opcodes and flags the encoders and decoders test, read once rather than per work request.
const OP_BIND_MW = WrOpcode.BIND_MW;
const OP_CMP_AND_SWP = WrOpcode.ATOMIC_CMP_AND_SWP;
const OP_FETCH_AND_ADD = WrOpcode.ATOMIC_FETCH_AND_ADD;
const WC_WITH_IMM = WcFlags.WITH_IMM;
const WC_WITH_INV = WcFlags.WITH_INV;

/** Write `id` into words `o`, `o+1`: numbers carry bit 63 so they come back as numbers. */
export function putWrId(w: Uint32Array, o: number, id: WrId): void {
  if (typeof id === 'number') {
    if (id < TWO32) {
      // The common id (below 2^32): no floating-point division or modulo.
      w[o] = id;
      w[o + 1] = 0x8000_0000;
      return;
    }
    w[o] = id % TWO32;
    w[o + 1] = Math.floor(id / TWO32) + 0x8000_0000;
  } else {
    w[o] = Number(id & 0xffff_ffffn);
    w[o + 1] = Number(id >> 32n);
  }
}

/**
 * Write the 64-bit atomic operand `v` (a bigint or a safe integer; a negative one wraps as C's
 * uint64_t does) into words `o` (low half) and `o+1` (high half).
 */
export function putU64(w: Uint32Array, o: number, v: bigint | number): void {
  const u = BigInt.asUintN(64, typeof v === 'bigint' ? v : BigInt(v));
  w[o] = Number(u & 0xffff_ffffn);
  w[o + 1] = Number(u >> 32n);
}

/** The wr_id in words `o`, `o+1` (see {@link putWrId}). */
export function wrIdAt(w: Uint32Array, o: number): WrId {
  const lo = w[o] as number;
  const hi = w[o + 1] as number;
  return hi >= 0x8000_0000 ? (hi - 0x8000_0000) * TWO32 + lo : (BigInt(hi) << 32n) | BigInt(lo);
}

/** Write `sgl` as the SGEs from slot `first` on; returns the slot after the last. */
function putSges(w: Uint32Array, f: Float64Array, first: number, sgl: readonly Sge[]): number {
  let slot = first;
  for (let j = 0; j < sgl.length; j++, slot++) {
    const e = sgl[j] as Sge;
    const so = SGE_AT + slot * SGE_N;
    f[(so + SGE_W.ADDR) >> 1] = e.addr;
    w[so + SGE_W.LENGTH] = e.length;
    w[so + SGE_W.LKEY] = e.lkey;
  }
  return slot;
}

/**
 * Encode send WR `wr` (checked already: wr-check.ts) as WR `n` of the scratch `w`/`f`, its SGEs
 * from slot `sge` on. A UD destination goes in as its AH's slot, QPN and Q_Key; else the RDMA
 * remote address and rkey (zeros without `wr.rdma`).
 * @returns the first SGE slot after this WR's.
 */
export function encodeSendWr(w: Uint32Array, f: Float64Array, n: number, sge: number, wr: SendWr): number {
  const o = n * WR_N;
  const sgl = wr.sgList;
  putWrId(w, o, wr.wrId);
  w[o + WR_W.OPCODE] = wr.opcode;
  w[o + WR_W.FLAGS] = wr.sendFlags ?? 0;
  w[o + WR_W.NSGE] = sgl.length;
  w[o + WR_W.SGE0] = sge;
  w[o + WR_W.IMM] = wr.immData ?? 0;
  w[o + WR_W.INV] = wr.invalidateRkey ?? 0;
  const ud = wr.ud;
  if (ud !== undefined) {
    w[o + WR_W.AH] = (ud.ah._provider as NativeAhData).index;
    w[o + WR_W.RQPN] = ud.remoteQpn;
    w[o + WR_W.QKEY] = ud.remoteQkey;
  } else if (wr.opcode === OP_BIND_MW) {
    const b = wr.bindMw;
    const i = b?.bindInfo;
    w[o + WR_W.AH] = slotOf(b?.mw);
    w[o + WR_W.RQPN] = slotOf(i?.mr);
    w[o + WR_W.MW_RKEY] = b !== undefined ? b.mw.rkey >>> 0 : 0;
    w[o + WR_W.RKEY] = b !== undefined ? b.rkey >>> 0 : 0;
    w[o + WR_W.MW_ACCESS] = i?.mwAccessFlags ?? 0;
    f[(o + WR_W.RADDR) >> 1] = i?.addr ?? 0;
    f[(o + WR_W.CMP_LO) >> 1] = i?.length ?? 0;
  } else if (wr.opcode === OP_CMP_AND_SWP || wr.opcode === OP_FETCH_AND_ADD) {
    const a = wr.atomic;
    w[o + WR_W.AH] = 0;
    w[o + WR_W.RKEY] = a !== undefined ? a.rkey : 0;
    f[(o + WR_W.RADDR) >> 1] = a !== undefined ? a.remoteAddr : 0;
    putU64(w, o + WR_W.CMP_LO, a?.compareAdd ?? 0);
    putU64(w, o + WR_W.SWAP_LO, a?.swap ?? 0);
  } else {
    const r = wr.rdma;
    w[o + WR_W.AH] = 0;
    w[o + WR_W.RKEY] = r !== undefined ? r.rkey : 0;
    f[(o + WR_W.RADDR) >> 1] = r !== undefined ? r.remoteAddr : 0;
  }
  return putSges(w, f, sge, sgl);
}

/** Encode receive WR `wr` as WR `n` of the scratch, its SGEs from slot `sge` on; returns the next free slot. */
export function encodeRecvWr(w: Uint32Array, f: Float64Array, n: number, sge: number, wr: RecvWr): number {
  const o = n * WR_N;
  const sgl = wr.sgList;
  putWrId(w, o, wr.wrId);
  w[o + WR_W.NSGE] = sgl.length;
  w[o + WR_W.SGE0] = sge;
  return putSges(w, f, sge, sgl);
}

// -- completions ---------------------------------------------------------------------------------

/** A completion as the native CQ fills it (the soft device's fields plus the UD ones). */
export interface FullWc extends Wc {
  pkeyIndex: number;
  slid: number;
  sl: number;
  dlidPathBits: number;
}

/** A zeroed completion (the one shape {@link decodeWc} fills). */
export function newWc(): FullWc {
  return { wrId: 0, status: 0, opcode: 0, vendorErr: 0, byteLen: 0, qpNum: 0, srcQp: 0, wcFlags: 0, immData: 0, invalidatedRkey: 0, pkeyIndex: 0, slid: 0, sl: 0, dlidPathBits: 0 };
}

/** Decode completion `i` of the scratch `w` into `wc`. */
export function decodeWc(w: Uint32Array, i: number, wc: FullWc): void {
  const o = i * WC_N;
  // wrIdAt, written out: a number id (bit 63 set) without a call.
  const hi = w[o + WC_W.ID_HI] as number;
  const lo = w[o + WC_W.ID_LO] as number;
  wc.wrId = hi >= 0x8000_0000 ? (hi - 0x8000_0000) * TWO32 + lo : (BigInt(hi) << 32n) | BigInt(lo);
  wc.status = w[o + WC_W.STATUS] as number;
  wc.opcode = w[o + WC_W.OPCODE] as number;
  wc.vendorErr = w[o + WC_W.VENDOR_ERR] as number;
  wc.byteLen = w[o + WC_W.BYTE_LEN] as number;
  wc.qpNum = w[o + WC_W.QP_NUM] as number;
  wc.srcQp = w[o + WC_W.SRC_QP] as number;
  const flags = w[o + WC_W.FLAGS] as number;
  wc.wcFlags = flags;
  const x = w[o + WC_W.IMM_INV] as number;
  wc.immData = flags & WC_WITH_IMM ? x : 0;
  wc.invalidatedRkey = flags & WC_WITH_INV ? x : 0;
  const p = w[o + WC_W.PKEY_SLID] as number;
  wc.pkeyIndex = p & 0xffff;
  wc.slid = p >>> 16;
  const s = w[o + WC_W.SL_PATH] as number;
  wc.sl = s & 0xff;
  wc.dlidPathBits = (s >>> 8) & 0xff;
}

// -- address handles and QP attributes -----------------------------------------------------------

/** Address-handle attributes as the CM and `QpAttr.ahAttr` carry them: `struct ibv_ah_attr`. */
export type NativeAhAttr = AhAttr;

/** A u8 field (`d` when absent), or null when out of range. */
function u8(x: unknown, d = 0): number | null {
  return x === undefined ? d : Number.isInteger(x) && (x as number) >= 0 && (x as number) <= 0xff ? (x as number) : null;
}

/** Encode an AH attribute into `v[at..]` (and its DGID into `gid`); a string names a problem. */
export function encodeAh(a: NativeAhAttr, v: Float64Array, at: number, gid: Uint8Array): string | null {
  if (typeof a !== 'object' || a === null) return 'ah_attr';
  const dlid = a.dlid === undefined ? 0 : Number.isInteger(a.dlid) && a.dlid >= 0 && a.dlid <= 0xffff ? a.dlid : null;
  const vals = [dlid, u8(a.sl), u8(a.srcPathBits), u8(a.staticRate), a.isGlobal ? 1 : 0, u8(a.portNum)];
  if (vals.some((x) => x === null)) return 'ah_attr field out of range';
  for (let i = 0; i < vals.length; i++) v[at + i] = vals[i] as number;
  if (a.isGlobal) {
    const g = a.grh;
    if (typeof g !== 'object' || g === null || !(g.dgid instanceof Uint8Array) || g.dgid.length !== 16) return 'ah_attr.grh.dgid must be 16 bytes';
    if (!Number.isInteger(g.flowLabel) || g.flowLabel < 0 || g.flowLabel > 0xfffff) return 'ah_attr.grh.flow_label';
    const rest = [u8(g.sgidIndex), u8(g.hopLimit), u8(g.trafficClass)];
    if (rest.some((x) => x === null)) return 'ah_attr.grh field out of range';
    v[at + AH.FLOW_LABEL] = g.flowLabel;
    v[at + AH.SGID_INDEX] = rest[0] as number;
    v[at + AH.HOP_LIMIT] = rest[1] as number;
    v[at + AH.TCLASS] = rest[2] as number;
    gid.set(g.dgid);
  } else {
    v[at + AH.FLOW_LABEL] = v[at + AH.SGID_INDEX] = v[at + AH.HOP_LIMIT] = v[at + AH.TCLASS] = 0;
    gid.fill(0);
  }
  return null;
}

/** Decode an AH attribute from `v[at..]` (the DGID from `gid`, copied). */
export function decodeAh(v: Float64Array, at: number, gid: Uint8Array): NativeAhAttr {
  const a: NativeAhAttr = {
    dlid: v[at + AH.DLID] as number,
    sl: v[at + AH.SL] as number,
    srcPathBits: v[at + AH.SRC_PATH_BITS] as number,
    staticRate: v[at + AH.STATIC_RATE] as number,
    isGlobal: v[at + AH.IS_GLOBAL] !== 0,
    portNum: v[at + AH.PORT] as number,
  };
  if (a.isGlobal) {
    a.grh = { dgid: Uint8Array.from(gid), flowLabel: v[at + AH.FLOW_LABEL] as number, sgidIndex: v[at + AH.SGID_INDEX] as number, hopLimit: v[at + AH.HOP_LIMIT] as number, trafficClass: v[at + AH.TCLASS] as number };
  }
  return a;
}

const STATE_OF_NUM: readonly QpState[] = [QpState.RESET, QpState.INIT, QpState.RTR, QpState.RTS, QpState.SQD, QpState.SQE, QpState.ERR];

/** The QP state the kernel reports (`enum ibv_qp_state` number); anything else reads as ERR. */
export function qpStateOfNum(n: number): QpState {
  return STATE_OF_NUM[n] ?? QpState.ERR;
}

/** Every numeric attribute of `QpAttr` the `QA` layout carries, with its mask bit and slot. */
const QA_FIELDS: readonly (readonly [keyof QpAttr, number, number])[] = [
  ['curQpState', QpAttrMask.CUR_STATE, QA.CUR_STATE],
  ['qpAccessFlags', QpAttrMask.ACCESS_FLAGS, QA.ACCESS],
  ['pkeyIndex', QpAttrMask.PKEY_INDEX, QA.PKEY_INDEX],
  ['portNum', QpAttrMask.PORT, QA.PORT],
  ['qkey', QpAttrMask.QKEY, QA.QKEY],
  ['pathMtu', QpAttrMask.PATH_MTU, QA.PATH_MTU],
  ['timeout', QpAttrMask.TIMEOUT, QA.TIMEOUT],
  ['retryCnt', QpAttrMask.RETRY_CNT, QA.RETRY_CNT],
  ['rnrRetry', QpAttrMask.RNR_RETRY, QA.RNR_RETRY],
  ['rqPsn', QpAttrMask.RQ_PSN, QA.RQ_PSN],
  ['sqPsn', QpAttrMask.SQ_PSN, QA.SQ_PSN],
  ['maxRdAtomic', QpAttrMask.MAX_QP_RD_ATOMIC, QA.MAX_RD_ATOMIC],
  ['maxDestRdAtomic', QpAttrMask.MAX_DEST_RD_ATOMIC, QA.MAX_DEST_RD_ATOMIC],
  ['minRnrTimer', QpAttrMask.MIN_RNR_TIMER, QA.MIN_RNR_TIMER],
  ['destQpNum', QpAttrMask.DEST_QPN, QA.DEST_QPN],
];

/**
 * Encode the attributes present in `attr` into `v` (the `QA` layout, zeroed first; the AH's DGID
 * into `gid`) for ibv_modify_qp.
 * @returns the mask of the attributes written (`QpAttrMask.AV` when `gid` was filled), or why
 *   `attr` cannot be encoded (EINVAL).
 */
export function encodeQpAttr(attr: QpAttr, v: Float64Array, gid: Uint8Array): number | string {
  v.fill(0);
  let m = 0;
  if (attr.qpState !== undefined) {
    const n = QP_STATE_NUM[attr.qpState];
    if (n === undefined) return `qp_state ${String(attr.qpState)}`;
    v[QA.STATE] = n;
    m |= QpAttrMask.STATE;
  }
  for (const [k, bit, slot] of QA_FIELDS) {
    const x = attr[k];
    if (x === undefined) continue;
    if (k === 'curQpState') {
      const n = QP_STATE_NUM[x as QpState];
      if (n === undefined) return `cur_qp_state ${String(x)}`;
      v[slot] = n;
    } else {
      if (!isU32(x)) return `${k} ${String(x)}`;
      v[slot] = x;
    }
    m |= bit;
  }
  const ah = attr.ahAttr;
  if (ah !== undefined) {
    const bad = encodeAh(ah, v, QA.AH, gid);
    if (bad !== null) return bad;
    m |= QpAttrMask.AV;
  }
  if (attr.cap !== undefined) {
    const c = attr.cap;
    const caps = [c.maxSendWr, c.maxRecvWr, c.maxSendSge, c.maxRecvSge, c.maxInlineData];
    if (!caps.every(isU32)) return 'cap';
    caps.forEach((x, i) => (v[QA.MAX_SEND_WR + i] = x));
    m |= QpAttrMask.CAP;
  }
  return m;
}

/**
 * The attributes in `v` (the `QA` layout; `gid` holds the AH's DGID) that ibv_query_qp and
 * rdma_init_qp_attr both report: the state, the numeric fields and the AH.
 */
export function decodeQpAttr(v: Float64Array, gid: Uint8Array): QpAttr {
  return {
    qpState: qpStateOfNum(v[QA.STATE] as number),
    qpAccessFlags: v[QA.ACCESS] as number,
    pkeyIndex: v[QA.PKEY_INDEX] as number,
    portNum: v[QA.PORT] as number,
    qkey: v[QA.QKEY] as number,
    pathMtu: v[QA.PATH_MTU] as number,
    timeout: v[QA.TIMEOUT] as number,
    retryCnt: v[QA.RETRY_CNT] as number,
    rnrRetry: v[QA.RNR_RETRY] as number,
    rqPsn: v[QA.RQ_PSN] as number,
    sqPsn: v[QA.SQ_PSN] as number,
    maxRdAtomic: v[QA.MAX_RD_ATOMIC] as number,
    maxDestRdAtomic: v[QA.MAX_DEST_RD_ATOMIC] as number,
    minRnrTimer: v[QA.MIN_RNR_TIMER] as number,
    destQpNum: v[QA.DEST_QPN] as number,
    ahAttr: decodeAh(v, QA.AH, gid),
  };
}
