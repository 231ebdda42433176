/**
 * The extended CQ (`ibv_create_cq_ex`, `struct ibv_cq_ex`) and its poll-by-field interface:
 * `ibv_start_poll` / `ibv_next_poll` / `ibv_end_poll` and the `ibv_wc_read_*` readers
 * (libibverbs verbs.h, ibv_create_cq_ex(3)), after rdma-core's rxe provider (`cq_start_poll`,
 * `cq_next_poll`, `rxe_create_cq_ex`).
 *
 * A `CqEx` is made over an ordinary CQ of the device (`ibv_cq_ex_to_cq`: {@link CqEx.cq}), so
 * QPs, completion channels, `reqNotify` and `ackEvents` work on it as on any CQ, on every
 * backend: polling takes one completion at a time off that CQ into one `Wc` object the CqEx
 * keeps (`Cq.pollInto`), so the readers allocate nothing per completion. `wrId` and `status` are
 * fields set by each successful start/next (as `cq_ex->wr_id` / `cq_ex->status`); the other
 * fields are read with the readers whose `IBV_WC_EX_WITH_*` flag the CQ was created with — a
 * reader of a field not asked for throws EINVAL (in C its function pointer is NULL).
 *
 * Which `wc_flags` a device serves is its provider's answer (`VerbsProvider.exCaps`); rxe's are
 * the standard ones (`IBV_WC_STANDARD_FLAGS`), without completion timestamps (its devices have no
 * completion clock: `completion_timestamp_mask` 0), and anything more is EOPNOTSUPP. The native
 * backend hands timestamp flags to the kernel device's own `ibv_create_cq_ex`
 * (`VerbsProvider.createCqEx`), which serves them where the device has a clock and refuses them
 * otherwise; its CQ's `pollInto` fills the timestamps of the {@link WcTs} kept here.
 */
import { err } from '../errors.js';
import { Errno } from '../errno.js';
import { newWc, type Cq } from './cq.js';
import type { CompChannel } from './comp-channel.js';
import type { Pd } from './pd.js';
import type { Wc, WcOpcode, WcStatus, WrId } from './types.js';

/** `enum ibv_create_cq_wc_flags`: the fields an extended CQ reports. */
export const WcExFlags = {
  WITH_BYTE_LEN: 1 << 0,
  WITH_IMM: 1 << 1,
  WITH_QP_NUM: 1 << 2,
  WITH_SRC_QP: 1 << 3,
  WITH_SLID: 1 << 4,
  WITH_SL: 1 << 5,
  WITH_DLID_PATH_BITS: 1 << 6,
  WITH_COMPLETION_TIMESTAMP: 1 << 7,
  WITH_CVLAN: 1 << 8,
  WITH_FLOW_TAG: 1 << 9,
  WITH_TM_INFO: 1 << 10,
  WITH_COMPLETION_TIMESTAMP_WALLCLOCK: 1 << 11,
} as const;

/** `IBV_WC_STANDARD_FLAGS`: the fields of `struct ibv_wc` (byte_len, imm, qp_num ... dlid_path_bits). */
export const WC_STANDARD_FLAGS = 0x7f;

/** `enum ibv_cq_init_attr_mask`. */
export const CqInitAttrMask = {
  FLAGS: 1 << 0,
  PD: 1 << 1,
} as const;

/** `enum ibv_create_cq_attr_flags`. */
export const CreateCqAttrFlags = {
  /** The application polls from one thread: no locking (accepted, nothing to do here). */
  SINGLE_THREADED: 1 << 0,
  /** The kernel's `IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN` (rxe, siw: EOPNOTSUPP). */
  IGNORE_OVERRUN: 1 << 1,
} as const;

/** `struct ibv_cq_init_attr_ex`. */
export interface CqInitAttrEx {
  /** Minimum number of entries (1..max_cqe). */
  cqe: number;
  /** `cq_context`: returned unchanged. */
  cqContext?: unknown;
  /** Completion channel for events (same context); absent or null: none. */
  channel?: CompChannel | null;
  /** `comp_vector` (0..num_comp_vectors-1). */
  compVector?: number;
  /** `wc_flags`: {@link WcExFlags} bits, the fields the readers will report. */
  wcFlags?: number;
  /** `comp_mask`: {@link CqInitAttrMask} bits saying which of `flags` and `parentDomain` are valid. */
  compMask?: number;
  /** With `CqInitAttrMask.FLAGS`: {@link CreateCqAttrFlags} bits. */
  flags?: number;
  /** With `CqInitAttrMask.PD`: a parent domain (none exist here; rxe's provider ignores it). */
  parentDomain?: Pd | null;
}

/**
 * A completion with its timestamps: the object an extended CQ created with a timestamp flag keeps
 * (a device's own `create_cq_ex` fills them in `pollInto`).
 */
export interface WcTs extends Wc {
  /** `ibv_wc_read_completion_ts`: the device clock's raw value. */
  completionTs: bigint;
  /** `ibv_wc_read_completion_wallclock_ns`. */
  completionWallclockNs: bigint;
}

/** The timestamp flags. */
const TS_FLAGS = WcExFlags.WITH_COMPLETION_TIMESTAMP | WcExFlags.WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

/** `struct ibv_poll_cq_attr`: `comp_mask` must be 0. */
export interface PollCqAttr {
  compMask: number;
}

const F = WcExFlags;

/** `struct ibv_cq_ex`. Create with `ctx.createCqEx()`. */
export class CqEx {
  /** `ibv_cq_ex_to_cq()`: the CQ QPs, channels and events see. */
  readonly cq: Cq;
  /** The `wc_flags` it was created with. */
  readonly wcFlags: number;
  /** `wr_id` of the current completion (set by a successful start/next poll). */
  wrId: WrId = 0;
  /** `status` of the current completion (set by a successful start/next poll). */
  status: WcStatus = 0;
  /** The current completion (copied into from the CQ, reused for every one). */
  private readonly _slot: Wc[];
  private _wc: Wc;
  private _polling = false;
  private _current = false;

  /** @internal Use `Context.createCqEx()`, which checks the attributes. */
  constructor(cq: Cq, wcFlags: number) {
    this.cq = cq;
    this.wcFlags = wcFlags;
    const wc = newWc();
    // A CQ with timestamps keeps a completion with their fields (one shape from the start).
    if (wcFlags & TS_FLAGS) Object.assign(wc, { completionTs: 0n, completionWallclockNs: 0n });
    this._wc = wc;
    this._slot = [wc];
    // Changed on every poll: mutable from the first CQ on (see util/arrays.ts).
    this._polling = true;
    this._polling = false;
    this._current = true;
    this._current = false;
  }

  /** `ibv_cq_ex_to_cq()`. */
  toCq(): Cq {
    return this.cq;
  }

  /** The CQ's `cqe`: how many completions it holds. */
  get cqe(): number {
    return this.cq.cqe;
  }
  /** The completion channel the CQ reports to, if it was created with one. */
  get channel(): CompChannel | undefined {
    return this.cq.channel;
  }
  /** The `cq_context` given at creation (ibv_create_cq_ex's `cq_context`). */
  get cqContext(): unknown {
    return this.cq.cqContext;
  }
  /** The completion vector given at creation (`comp_vector`). */
  get compVector(): number {
    return this.cq.compVector;
  }

  /**
   * `ibv_start_poll()`: begin polling and make the oldest completion current.
   * @returns 0, or `ENOENT` (2) when the CQ is empty — then the poll is over: do not call
   *   {@link endPoll}.
   * @throws RdmaError EINVAL (a poll already started and not ended, `attr.compMask` not 0, the
   *   CQ destroyed).
   */
  startPoll(attr?: PollCqAttr): number {
    const op = 'ibv_start_poll';
    if (this._polling) throw err('EINVAL', op, 'poll already started: end it with ibv_end_poll');
    if (attr !== undefined && attr.compMask !== 0) throw err('EINVAL', op, `comp_mask ${String(attr.compMask)}`);
    if (this.take() === 0) return Errno.ENOENT;
    this._polling = true;
    return 0;
  }

  /**
   * `ibv_next_poll()`: make the next completion current (the one current before is consumed).
   * @returns 0, or `ENOENT` (2) when there is none; call {@link endPoll} either way.
   * @throws RdmaError EINVAL without a started poll.
   */
  nextPoll(): number {
    if (!this._polling) throw err('EINVAL', 'ibv_next_poll', 'no poll started');
    return this.take() === 0 ? Errno.ENOENT : 0;
  }

  /**
   * `ibv_end_poll()`: end the poll begun by a successful {@link startPoll}; the current
   * completion is consumed.
   * @throws RdmaError EINVAL without a started poll.
   */
  endPoll(): void {
    if (!this._polling) throw err('EINVAL', 'ibv_end_poll', 'no poll started');
    this._polling = false;
    this._current = false;
  }

  /** One completion off the CQ into the slot: 1, or 0 when the CQ is empty. */
  private take(): number {
    const slot = this._slot;
    slot[0] = this._wc;
    if (this.cq.pollInto(slot, 1) === 0) {
      this._current = false;
      return 0;
    }
    const wc = slot[0];
    this._wc = wc;
    this.wrId = wc.wrId;
    this.status = wc.status;
    this._current = true;
    return 1;
  }

  /** The current completion, checked: a poll started, a completion current, `flag` asked for (0: always). */
  private cur(flag: number, op: string): Wc {
    if (!this._current) throw err('EINVAL', op, 'no current completion');
    if ((this.wcFlags & flag) !== flag) throw err('EINVAL', op, 'field not asked for in wc_flags');
    return this._wc;
  }

  /** `ibv_wc_read_opcode()`. */
  readOpcode(): WcOpcode {
    return this.cur(0, 'ibv_wc_read_opcode').opcode;
  }
  /** `ibv_wc_read_vendor_err()`. */
  readVendorErr(): number {
    return this.cur(0, 'ibv_wc_read_vendor_err').vendorErr;
  }
  /** `ibv_wc_read_wc_flags()`: the `WcFlags` bits (GRH, WITH_IMM, WITH_INV ...). */
  readWcFlags(): number {
    return this.cur(0, 'ibv_wc_read_wc_flags').wcFlags;
  }
  /** `ibv_wc_read_byte_len()` (`IBV_WC_EX_WITH_BYTE_LEN`). */
  readByteLen(): number {
    return this.cur(F.WITH_BYTE_LEN, 'ibv_wc_read_byte_len').byteLen;
  }
  /**
   * `ibv_wc_read_imm_data()` (`IBV_WC_EX_WITH_IMM`): the immediate data, host order as
   * `Wc.immData` (C returns it big-endian).
   */
  readImmData(): number {
    return this.cur(F.WITH_IMM, 'ibv_wc_read_imm_data').immData;
  }
  /** `ibv_wc_read_invalidated_rkey()` (`IBV_WC_EX_WITH_IMM`, as in C): the rkey a SEND_WITH_INV invalidated. */
  readInvalidatedRkey(): number {
    return this.cur(F.WITH_IMM, 'ibv_wc_read_invalidated_rkey').invalidatedRkey;
  }
  /** `ibv_wc_read_qp_num()` (`IBV_WC_EX_WITH_QP_NUM`). */
  readQpNum(): number {
    return this.cur(F.WITH_QP_NUM, 'ibv_wc_read_qp_num').qpNum;
  }
  /** `ibv_wc_read_src_qp()` (`IBV_WC_EX_WITH_SRC_QP`). */
  readSrcQp(): number {
    return this.cur(F.WITH_SRC_QP, 'ibv_wc_read_src_qp').srcQp;
  }
  /** `ibv_wc_read_slid()` (`IBV_WC_EX_WITH_SLID`). */
  readSlid(): number {
    return this.cur(F.WITH_SLID, 'ibv_wc_read_slid').slid;
  }
  /** `ibv_wc_read_sl()` (`IBV_WC_EX_WITH_SL`). */
  readSl(): number {
    return this.cur(F.WITH_SL, 'ibv_wc_read_sl').sl;
  }
  /** `ibv_wc_read_dlid_path_bits()` (`IBV_WC_EX_WITH_DLID_PATH_BITS`). */
  readDlidPathBits(): number {
    return this.cur(F.WITH_DLID_PATH_BITS, 'ibv_wc_read_dlid_path_bits').dlidPathBits;
  }
  /**
   * `ibv_wc_read_completion_ts()` (`IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`): the raw device clock
   * (`hca_core_clock` kHz, `completion_timestamp_mask` bits). Only a device with a completion
   * clock creates a CQ with the flag: through the native backend, where the kernel's device has
   * one; never on the soft devices.
   */
  readCompletionTs(): bigint {
    return (this.cur(F.WITH_COMPLETION_TIMESTAMP, 'ibv_wc_read_completion_ts') as WcTs).completionTs;
  }
  /** `ibv_wc_read_completion_wallclock_ns()` (`IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK`): as {@link readCompletionTs}. */
  readCompletionWallclockNs(): bigint {
    return (this.cur(F.WITH_COMPLETION_TIMESTAMP_WALLCLOCK, 'ibv_wc_read_completion_wallclock_ns') as WcTs).completionWallclockNs;
  }

  /** `ibv_req_notify_cq()` on the CQ. */
  reqNotify(solicitedOnly = false): void {
    this.cq.reqNotify(solicitedOnly);
  }
  /** `ibv_ack_cq_events()` on the CQ. */
  ackEvents(n: number): void {
    this.cq.ackEvents(n);
  }
  /** `ibv_destroy_cq()` (as for any CQ: EBUSY while QPs use it or events are unacknowledged). */
  destroy(): void {
    this.cq.destroy();
    this._polling = false;
    this._current = false;
  }

  /**
   * `using` / `await using`: `ibv_destroy_cq()` at the end of the scope; nothing if already
   * destroyed.
   * @throws RdmaError what {@link destroy} throws (EBUSY while QPs use it or events read for it
   *   are unacknowledged): disposal reports, never leaks silently.
   */
  [Symbol.dispose](): void {
    if (!this.cq.destroyed) this.destroy();
  }
}
