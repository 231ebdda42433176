/**
 * Memory lookups for the iWARP data path, on top of the verbs MR checks: resolve an SGE or a
 * remote (STag, TO) access to a Buffer and an offset, and map a failed check to the TERMINATE
 * error code siw sends (siw_qp_rx.c). Results live in one scratch object, valid until the next
 * call (no allocation per FPDU); the Buffer is the MR's own view of its memory (`Mr._bytes`).
 */
import { MrCheck, mrOffset, remoteAccessOffset, invalidateStag } from '../../verbs/mr.js';
import { Access } from '../../verbs/types.js';
import type { Context } from '../../verbs/context.js';
import type { Pd } from '../../verbs/pd.js';
import type { Sge } from '../../verbs/types.js';

/** A resolved target: `buf[off ...]`. Shared scratch: copy the fields before the next lookup. */
export interface Target {
  buf: Buffer;
  off: number;
}

const scratch: Target = { buf: Buffer.alloc(0), off: 0 };

/**
 * Local memory of SGE `s` from byte `off` for `len` bytes (`needWrite`: LOCAL_WRITE required,
 * as for receive buffers and Read sinks). Returns the scratch target or a negative MrCheck.
 */
export function localSgeTarget(ctx: Context, pd: Pd, s: Sge, off: number, len: number, needWrite: boolean): Target | number {
  if (len === 0) {
    scratch.buf = EMPTY;
    scratch.off = 0;
    return scratch;
  }
  const mr = ctx._mrs.lookup(s.lkey);
  if (!mr) return MrCheck.INVALID_STAG;
  const r = mrOffset(mr, pd, s.addr + off, len, needWrite ? Access.LOCAL_WRITE : 0);
  if (r < 0) return r;
  scratch.buf = mr._bytes;
  scratch.off = r;
  return scratch;
}

/**
 * Remote access to our memory by the peer (RDMA Write target: REMOTE_WRITE; RDMA Read source:
 * REMOTE_READ). Returns the scratch target or a negative MrCheck.
 */
export function remoteTarget(ctx: Context, pd: Pd, stag: number, to: number, len: number, access: number): Target | number {
  const mr = ctx._mrs.lookup(stag);
  const r = remoteAccessOffset(mr, pd, stag, to, len, access);
  if (r < 0) return r;
  if (len === 0 || !mr) {
    scratch.buf = EMPTY;
    scratch.off = 0;
    return scratch;
  }
  scratch.buf = mr._bytes;
  scratch.off = r;
  return scratch;
}

/** DDP tagged-buffer ecode for a failed remote Write/Read Response placement (siw). */
export function ddpTaggedEcode(check: number): number {
  switch (check) {
    case MrCheck.BOUNDS:
      return 0x01;
    case MrCheck.PD_MISMATCH:
      return 0x02;
    default:
      return 0x00; // invalid STag; siw reports access violations as invalid STag too
  }
}

/** RDMAP remote-protection ecode for a refused Read source (siw). */
export function rdmapProtEcode(check: number): number {
  switch (check) {
    case MrCheck.BOUNDS:
      return 0x01;
    case MrCheck.ACCESS:
      return 0x02;
    case MrCheck.PD_MISMATCH:
      return 0x03;
    default:
      return 0x00;
  }
}

/** Send with Invalidate: invalidate our STag `stag`; false if it cannot be. */
export function invalidateMr(ctx: Context, pd: Pd, stag: number): boolean {
  return invalidateStag(ctx, pd, stag) === 0;
}

const EMPTY = Buffer.alloc(0);

/** STag as siw prints it. */
export function hex(n: number): string {
  return '0x' + (n >>> 0).toString(16).padStart(8, '0');
}
