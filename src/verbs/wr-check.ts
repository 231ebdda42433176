/**
 * Post-time checks of work requests, made once per WR by the verbs layer for every device (rxe's
 * `validate_send_wr` / `validate_recv_wr` in drivers/infiniband/sw/rxe/rxe_verbs.c). A bad WR is
 * refused with EINVAL and a reason; `Qp.postSend` / `postRecv` turn that into a `PostError`
 * naming its index.
 *
 * What every opcode carries is IB's and the same everywhere ({@link SEND_OPCODES}, rxe's
 * `rxe_wr_opcode_info[]` masks). What a device accepts is its provider's declaration
 * ({@link WrCaps}, `VerbsProvider.wrCaps`): the opcodes of each QP type, the SGE and message
 * limits, what an RDMA READ's sink may be, and how much is checked here at all — everything the
 * device checks at post (the soft devices, whose post path this is) or only what the C call cannot
 * be handed (the native backend, whose provider in rdma-core answers the rest with its errno).
 * {@link wrRules} makes the two into one QP's rules when the QP is created.
 */
import { isAddr, isU32 } from '../util/fields.js';
import { Ah } from './ah.js';
import { Mr } from './mr.js';
import { Mw } from './mw.js';
import type { Pd } from './pd.js';
import { QpType, SendFlags, WrOpcode, type QpCap, type RecvWr, type SendWr, type Sge, type UdDest, type WrId } from './types.js';

/** What a send opcode carries and needs (rxe's `WR_*_MASK` bits). */
export const WrMask = {
  /** A remote address and rkey in `wr.rdma` (WR_READ_MASK, WR_WRITE_MASK). */
  RDMA: 1,
  /** Immediate data in `wr.immData` (optional: absent is 0). */
  IMM: 2,
  /** An rkey to invalidate in `wr.invalidateRkey` (Send with Invalidate, Local Invalidate). */
  INV: 4,
  /** `wr.atomic`: an 8-byte aligned remote address, its rkey and the operands; 8 local bytes (WR_ATOMIC_MASK). */
  ATOMIC: 8,
  /** The SGEs are the sink of an RDMA READ: `SendFlags.INLINE` has nothing to copy. */
  READ: 16,
  /** `wr.bindMw`: a window, its new rkey and what it is bound to; no SGEs, no immediate data (WR_LOCAL_OP_MASK). */
  BIND: 32,
} as const;

/** One row of {@link SEND_OPCODES}. */
export interface SendOpcodeInfo {
  readonly name: string;
  /** {@link WrMask} bits. */
  readonly mask: number;
}

const M = WrMask;
const INLINE = SendFlags.INLINE;

/** Every `enum ibv_wr_opcode` value, indexed by it: its name and what it carries. */
export const SEND_OPCODES: readonly SendOpcodeInfo[] = opcodeTable([
  [WrOpcode.RDMA_WRITE, M.RDMA],
  [WrOpcode.RDMA_WRITE_WITH_IMM, M.RDMA | M.IMM],
  [WrOpcode.SEND, 0],
  [WrOpcode.SEND_WITH_IMM, M.IMM],
  [WrOpcode.RDMA_READ, M.RDMA | M.READ],
  [WrOpcode.ATOMIC_CMP_AND_SWP, M.ATOMIC],
  [WrOpcode.ATOMIC_FETCH_AND_ADD, M.ATOMIC],
  [WrOpcode.LOCAL_INV, M.INV],
  [WrOpcode.BIND_MW, M.BIND],
  [WrOpcode.SEND_WITH_INV, M.INV],
]);

function opcodeTable(rows: readonly (readonly [WrOpcode, number])[]): readonly SendOpcodeInfo[] {
  const t: SendOpcodeInfo[] = [];
  for (const [op, mask] of rows) t[op] = Object.freeze({ name: WrOpcode[op], mask });
  return Object.freeze(t);
}

/** Every send opcode. */
const ALL_OPCODES: readonly WrOpcode[] = SEND_OPCODES.map((_, op) => op as WrOpcode);

/**
 * What a provider's QPs accept at post time: its half of rxe's `rxe_wr_opcode_info[]` (which
 * opcodes each QP type takes) and of `validate_send_wr`'s limits. Declared once per provider;
 * the verbs layer checks every work request against it.
 */
export interface WrCaps {
  /**
   * The send opcodes a QP of each type accepts. Any other opcode, and every opcode on a QP type
   * not listed, is EINVAL.
   */
  readonly sendOpcodes: { readonly [T in QpType]?: readonly WrOpcode[] };
  /** The largest `length` of one SGE (ibverbs' field is a u32; the soft devices' memory is a Buffer: 2^31 - 1). */
  readonly maxSgeLength: number;
  /** The most SGEs one WR may carry whatever the QP's cap says (the native addon's per-call scratch). Absent: the cap decides. */
  readonly maxSgePerWr?: number;
  /** The largest message a send WR may describe (the sum of its SGE lengths), per QP type (rxe: 2^31). Absent: no limit here. */
  readonly maxMessage?: { readonly [T in QpType]?: number };
  /** An RDMA READ's sink is exactly this many SGEs (siw: 1, the one tagged buffer of RFC 5040). Absent: up to max_send_sge. */
  readonly readSges?: number;
  /** `SendFlags.INLINE` on an RDMA READ: refused (rxe: READ has no inline mask) or ignored (siw). */
  readonly inlineRead: 'refuse' | 'ignore';
  /**
   * How much the verbs layer checks:
   * - `'device'`: everything the device checks at post — the operands the opcode needs (remote
   *   address and rkey, the rkey to invalidate, atomic operands, a UD destination on this PD)
   *   present and well formed, immediate data an int32 or a u32, inline data within the QP's
   *   max_inline_data.
   * - `'abi'`: only what the C call cannot be handed — wr_id a u64; send_flags, imm_data and
   *   invalidate_rkey u32s and `rdma` well formed where given; a UD destination that is a live
   *   address handle of this device. The provider underneath checks the rest and its errno is the
   *   answer.
   */
  readonly checks: 'device' | 'abi';
}

/** The caps of a provider that declares none: IB's opcodes (UD: sends only), every check here. */
export const DEFAULT_WR_CAPS: WrCaps = Object.freeze({
  sendOpcodes: Object.freeze({
    [QpType.RC]: ALL_OPCODES,
    [QpType.UC]: ALL_OPCODES,
    [QpType.UD]: [WrOpcode.SEND, WrOpcode.SEND_WITH_IMM],
  }),
  maxSgeLength: 0x7fff_ffff,
  inlineRead: 'ignore',
  checks: 'device',
});

/** One QP's post-time rules: its provider's {@link WrCaps} applied to its type and cap. */
export interface WrRules {
  readonly qpType: QpType;
  /** The opcodes this QP accepts, indexed by opcode (null: refused). */
  readonly ops: readonly (SendOpcodeInfo | null)[];
  /** A UD QP: every send names its destination. */
  readonly ud: boolean;
  readonly maxSendSge: number;
  readonly maxRecvSge: number;
  readonly maxSgeLength: number;
  readonly maxMessage: number;
  /** `max_inline_data` (`Infinity` where it is not checked here). */
  readonly maxInline: number;
  /** Exact SGE count of an RDMA READ's sink; 0: any up to maxSendSge. */
  readonly readSges: number;
  readonly refuseInlineRead: boolean;
  /** `checks: 'abi'`. */
  readonly abi: boolean;
}

/** The rules of a QP of `qpType` with capabilities `cap` on a device whose provider declared `caps`. */
export function wrRules(caps: WrCaps, qpType: QpType, cap: QpCap): WrRules {
  const accepted = new Set(caps.sendOpcodes[qpType] ?? []);
  const perWr = caps.maxSgePerWr ?? Infinity;
  const abi = caps.checks === 'abi';
  return {
    qpType,
    ops: SEND_OPCODES.map((info, op) => (accepted.has(op) ? info : null)),
    ud: qpType === QpType.UD,
    maxSendSge: Math.min(cap.maxSendSge, perWr),
    maxRecvSge: Math.min(cap.maxRecvSge, perWr),
    maxSgeLength: caps.maxSgeLength,
    maxMessage: caps.maxMessage?.[qpType] ?? Infinity,
    maxInline: abi ? Infinity : cap.maxInlineData,
    readSges: caps.readSges ?? 0,
    refuseInlineRead: caps.inlineRead === 'refuse',
    abi,
  };
}

/**
 * Check send WR `wr` of a QP of `pd` with rules `r` (everything but the QP's state and queue
 * room, which the caller checks first). The common case takes a few loads and compares; every
 * reason is worded out of line.
 * @returns the message length (the sum of the SGE lengths) of a WR that may be posted, or why it
 *   is refused (EINVAL).
 */
export function checkSendWr(wr: SendWr, r: WrRules, pd: Pd): number | string {
  if (typeof wr !== 'object' || wr === null || !Array.isArray(wr.sgList)) return shapeReason(wr);
  const op = wr.opcode;
  const info = typeof op === 'number' ? r.ops[op] : undefined;
  if (info === undefined || info === null) return opcodeReason(op, r);
  const len = sglLength(wr.sgList, r.maxSendSge, r.maxSgeLength);
  if (len < 0) return sglReason(len, wr.sgList, 'max_send_sge', r.maxSendSge);
  if (len > r.maxMessage) return `message of ${len} bytes > ${r.maxMessage}`;
  const mask = info.mask;
  // The common case, a plain Send on a connected QP, has nothing more to check.
  if (mask === 0 && !r.ud && !r.abi && ((wr.sendFlags ?? 0) & INLINE) === 0) return len;
  return (r.abi ? givenFieldsProblem(wr, r, pd) : operandsProblem(wr, mask, len, r, pd)) ?? len;
}

/** Check receive WR `wr` with rules `r`: the length its SGEs describe, or why it is refused (EINVAL). */
export function checkRecvWr(wr: RecvWr, r: WrRules): number | string {
  if (typeof wr !== 'object' || wr === null || !Array.isArray(wr.sgList)) return shapeReason(wr);
  if (r.abi && !validWrId(wr.wrId)) return WR_ID_REASON;
  const len = sglLength(wr.sgList, r.maxRecvSge, r.maxSgeLength);
  return len < 0 ? sglReason(len, wr.sgList, 'max_recv_sge', r.maxRecvSge) : len;
}

/** {@link sglLength}'s answer for more SGEs than the QP takes; below it, -(2 + j) for a malformed SGE j. */
const SGL_TOO_LONG = -1;

/** The total length of `sgl`; or, negative, what is wrong with it (see {@link SGL_TOO_LONG}). */
function sglLength(sgl: readonly Sge[], max: number, maxSgeLength: number): number {
  const n = sgl.length;
  if (n > max) return SGL_TOO_LONG;
  let len = 0;
  for (let j = 0; j < n; j++) {
    const s = sgl[j] as Sge;
    if (!sgeOk(s, maxSgeLength)) return -2 - j;
    len += s.length;
  }
  return len;
}

function sglReason(code: number, sgl: readonly Sge[], what: string, max: number): string {
  return code === SGL_TOO_LONG ? `${sgl.length} SGEs > ${what} ${max}` : `malformed SGE ${-2 - code}`;
}

function shapeReason(wr: unknown): string {
  return typeof wr !== 'object' || wr === null ? 'not a work request' : 'sg_list must be an array';
}

function opcodeReason(op: WrOpcode, r: WrRules): string {
  return `opcode ${opName(op)} not supported on this device's ${QpType[r.qpType] ?? r.qpType} QPs`;
}

const WR_ID_REASON = 'wr_id must be a safe non-negative integer or a bigint below 2^63';

/** `checks: 'device'`: the operands the opcode (`mask`) needs, the READ sink, inline data, a UD destination. */
function operandsProblem(wr: SendWr, mask: number, len: number, r: WrRules, pd: Pd): string | null {
  if (mask & M.RDMA) {
    const bad = remoteProblem(wr.rdma);
    if (bad !== null) return `${opName(wr.opcode)}: ${bad}`;
  }
  if (mask & M.IMM && wr.immData !== undefined && !isImm(wr.immData)) return `imm_data ${String(wr.immData)}`;
  if (mask & M.INV && !isU32(wr.invalidateRkey)) return `${opName(wr.opcode)} without a valid invalidate_rkey`;
  if (mask & M.ATOMIC) {
    const bad = atomicProblem(wr, len);
    if (bad !== null) return bad;
  }
  if (mask & M.BIND) return bindProblem(wr);
  const inline = ((wr.sendFlags ?? 0) & INLINE) !== 0;
  if (mask & M.READ) {
    if (r.readSges !== 0 && wr.sgList.length !== r.readSges) return `RDMA_READ needs exactly ${r.readSges} SGE(s) (max_sge_rd)`;
    if (inline && r.refuseInlineRead) return 'RDMA_READ cannot be inline';
  } else if (inline && len > r.maxInline) return `inline ${len} > max_inline_data ${r.maxInline}`;
  return r.ud ? udDestProblem(wr.ud, pd, false) : null;
}

/** `checks: 'abi'`: wr_id and every field given have the shape the C struct holds; a UD QP's destination. */
function givenFieldsProblem(wr: SendWr, r: WrRules, pd: Pd): string | null {
  if (!validWrId(wr.wrId)) return WR_ID_REASON;
  if (wr.sendFlags !== undefined && !isU32(wr.sendFlags)) return 'send_flags';
  if (wr.immData !== undefined && !isU32(wr.immData)) return 'imm_data';
  if (wr.invalidateRkey !== undefined && !isU32(wr.invalidateRkey)) return 'invalidate_rkey';
  if (wr.opcode === WrOpcode.BIND_MW) {
    const bad = bindProblem(wr);
    if (bad !== null) return bad;
  }
  if (wr.rdma !== undefined && remoteProblem(wr.rdma) !== null) return 'rdma.remote_addr/rkey';
  if (wr.atomic !== undefined) {
    if (remoteProblem(wr.atomic) !== null) return 'atomic.remote_addr/rkey';
    if (!isOperand(wr.atomic.compareAdd) || (wr.atomic.swap !== undefined && !isOperand(wr.atomic.swap))) return 'atomic operands';
  }
  return wr.ud !== undefined || r.ud ? udDestProblem(wr.ud, pd, true) : null;
}

/** A remote address and rkey (`wr.rdma`, `wr.atomic`). */
function remoteProblem(x: { remoteAddr: number; rkey: number } | undefined | null): string | null {
  if (typeof x !== 'object' || x === null) return 'no remote address and rkey';
  if (!isAddr(x.remoteAddr)) return `remote address ${String(x.remoteAddr)}`;
  if (!isU32(x.rkey)) return `rkey ${String(x.rkey)}`;
  return null;
}

/** An atomic WR: remote address (8-byte aligned) and rkey, an 8-byte local buffer, its operands. */
function atomicProblem(wr: SendWr, len: number): string | null {
  const a = wr.atomic;
  const bad = remoteProblem(a);
  if (bad !== null || a === undefined) return `${opName(wr.opcode)}: ${bad ?? ''}`;
  if (a.remoteAddr % 8 !== 0) return `atomic remote address 0x${a.remoteAddr.toString(16)} not 8-byte aligned`;
  if (len !== 8) return `atomic local buffer of ${len} bytes (8 needed)`;
  if (!isOperand(a.compareAdd)) return 'atomic compare/add operand';
  if (wr.opcode === WrOpcode.ATOMIC_CMP_AND_SWP && !isOperand(a.swap)) return 'compare-and-swap without a swap value';
  return null;
}

/**
 * A BIND_MW WR (rdma-core's rxe `validate_send_wr`: no SGEs, no immediate data; the QP type is
 * the caps' answer): a window, a u32 rkey, bind_info with an MR or none, a safe address and
 * length, u32 access flags. What the window and MR must be is the device's check when it
 * executes the bind (a failure completes with MW_BIND_ERR).
 */
function bindProblem(wr: SendWr): string | null {
  if (wr.sgList.length !== 0) return 'BIND_MW with SGEs';
  if (wr.immData !== undefined && wr.immData !== 0) return 'BIND_MW with imm_data';
  const b = wr.bindMw;
  if (typeof b !== 'object' || b === null || !(b.mw instanceof Mw)) return 'BIND_MW without bind_mw.mw';
  if (!isU32(b.rkey)) return `BIND_MW rkey ${String(b.rkey)}`;
  const i = b.bindInfo;
  if (typeof i !== 'object' || i === null) return 'BIND_MW without bind_info';
  const mr = i.mr as Mr | null | undefined;
  if (mr !== null && mr !== undefined && !(mr instanceof Mr)) return 'bind_info.mr is not an MR';
  if (!isAddr(i.addr) || !isAddr(i.length)) return `bind_info addr/length ${String(i.addr)}/${String(i.length)}`;
  if (!isU32(i.mwAccessFlags)) return `bind_info.mw_access_flags ${String(i.mwAccessFlags)}`;
  return null;
}

/**
 * A UD send's destination (IB spec 11.4.1.1): a live address handle of this PD (`abi`: of this
 * device), a 24-bit QPN, a Q_Key.
 */
function udDestProblem(d: UdDest | undefined, pd: Pd, abi: boolean): string | null {
  if (typeof d !== 'object' || d === null) return 'UD send without ud.ah/remoteQpn/remoteQkey';
  const ah = d.ah;
  if (!(ah instanceof Ah) || ah.destroyed) return 'UD send with a destroyed AH, or no AH';
  if (abi ? ah.pd.context !== pd.context : ah.pd !== pd) return abi ? 'UD send with an AH of another device' : 'UD send with an AH of another PD';
  if (!isU32(d.remoteQpn) || d.remoteQpn > 0xff_ffff) return `remote_qpn ${String(d.remoteQpn)}`;
  if (!isU32(d.remoteQkey)) return `remote_qkey ${String(d.remoteQkey)}`;
  return null;
}

/** An SGE: an object; a non-negative safe integer address, a length up to `maxLength`, a u32 lkey. */
function sgeOk(s: Sge, maxLength: number): boolean {
  return s !== null && s !== undefined && isAddr(s.addr) && Number.isInteger(s.length) && s.length >= 0 && s.length <= maxLength && isU32(s.lkey);
}

/** A wr_id the C struct holds: a u64 (numbers: safe and non-negative; bigints: below 2^63, bit 63 marks numbers). */
function validWrId(id: WrId): boolean {
  if (typeof id === 'number') return Number.isSafeInteger(id) && id >= 0;
  return typeof id === 'bigint' && id >= 0n && id < 0x8000_0000_0000_0000n;
}

function opName(op: WrOpcode): string {
  return (typeof op === 'number' ? SEND_OPCODES[op]?.name : undefined) ?? String(op);
}

/** Immediate data on a soft device: a u32, or an int32 taken as its two's complement. */
function isImm(v: unknown): boolean {
  return typeof v === 'number' && Number.isInteger(v) && v >= -0x8000_0000 && v <= 0xffff_ffff;
}

/** An atomic operand: a bigint, or a safe integer. */
function isOperand(v: unknown): boolean {
  return typeof v === 'bigint' || (typeof v === 'number' && Number.isSafeInteger(v));
}
