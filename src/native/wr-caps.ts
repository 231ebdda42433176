/**
 * What the native backend's QPs and SRQs take at post time: the opcodes the addon's work-request
 * layout carries and the limits of its scratch (wr-check.ts `WrCaps`).
 */
import { QpType, WrOpcode } from '../verbs/types.js';
import type { WrCaps } from '../verbs/wr-check.js';
import { SGE_MAX } from './abi.js';

/**
 * The send opcodes the addon's work-request layout carries (native/src/addon.h): the atomics with
 * their operands, BIND_MW with its window and MR, LOCAL_INV and SEND_WITH_INV with their rkey.
 * Which of them a QP type takes, and whether the device has atomics (its `atomic_cap`) or windows
 * (`max_mw`) at all, is the kernel provider's answer, as for a C program.
 */
const NATIVE_OPCODES: readonly WrOpcode[] = [
  WrOpcode.RDMA_WRITE,
  WrOpcode.RDMA_WRITE_WITH_IMM,
  WrOpcode.SEND,
  WrOpcode.SEND_WITH_IMM,
  WrOpcode.RDMA_READ,
  WrOpcode.ATOMIC_CMP_AND_SWP,
  WrOpcode.ATOMIC_FETCH_AND_ADD,
  WrOpcode.LOCAL_INV,
  WrOpcode.SEND_WITH_INV,
  WrOpcode.BIND_MW,
];

/**
 * What the verbs layer checks before a work request reaches rdma-core: only what the C structs
 * cannot hold (`checks: 'abi'`: u32 fields, u64 wr_id, SGE lengths as ibverbs' u32, no more SGEs
 * than one addon call carries); the kernel's provider checks the rest — opcodes per QP type,
 * operands, inline size — and its errno is the answer.
 */
export const NATIVE_WR_CAPS: WrCaps = {
  sendOpcodes: { [QpType.RC]: NATIVE_OPCODES, [QpType.UC]: NATIVE_OPCODES, [QpType.UD]: NATIVE_OPCODES },
  maxSgeLength: 0xffff_ffff,
  maxSgePerWr: SGE_MAX,
  inlineRead: 'ignore',
  checks: 'abi',
};

