/**
 * How rsocket calls fail: {@link RS_EAGAIN} for "nothing can move now", an {@link RdmaError}
 * named after the rsocket call for everything else, and ENOMEM for a buffer beyond what an
 * rsocket allocates.
 */
import { RdmaError } from '../errors.js';
import type { ErrnoCode } from '../errno.js';

/** What {@link RsConn.send} / {@link RsConn.recv} return when nothing can move now (-EAGAIN). */
export const RS_EAGAIN = -11;

/** An rsocket error: an {@link RdmaError} whose `op` is the rsocket call. */
export function rsErr(code: ErrnoCode, op: string, detail?: string): RdmaError {
  return new RdmaError(code, detail === undefined ? { op } : { op, detail });
}

/**
 * The largest send or receive buffer an rsocket allocates. rs_init_bufs allocates and registers
 * the SO_SNDBUF/SO_RCVBUF sizes (doubled, in 32 bits: up to 4 GiB) and fails with ENOMEM when it
 * cannot, as happens on an ordinary machine long before that (the pinned memory of an MR is
 * limited by RLIMIT_MEMLOCK); here anything above 1 GiB is refused the same way.
 */
export const RS_MAX_BUFFER = 1 << 30;

/** A zeroed rsocket buffer (rs_init_bufs' calloc), or ENOMEM. */
export function rsBuffer(n: number): Buffer<ArrayBuffer> {
  if (n > RS_MAX_BUFFER) throw rsErr('ENOMEM', 'rsocket', `a ${n}-byte buffer`);
  try {
    return Buffer.alloc(n);
  } catch (e) {
    throw new RdmaError('ENOMEM', { op: 'rsocket', detail: `a ${n}-byte buffer`, cause: e });
  }
}
