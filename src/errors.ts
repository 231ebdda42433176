/**
 * The error classes of this package. Three channels, never mixed (see docs/errors.md):
 *  - immediate: a thrown/rejected {@link RdmaError} with an errno `code` (bad argument, wrong state);
 *  - completion: a `WcStatus` in a work completion, never a throw;
 *  - wire: a {@link TerminateError} describing the iWARP TERMINATE sent or received.
 */
import { codeOf, errnoOf, strerror, type ErrnoCode } from './errno.js';

/** Options for {@link RdmaError}. */
export interface RdmaErrorOptions {
  /** The failing operation, librdmacm/ibverbs name (`'rdma_connect'`, `'ibv_post_send'`). */
  op?: string;
  /** Extra detail appended to the message. */
  detail?: string;
  /** Underlying error. */
  cause?: unknown;
}

/**
 * An errno-style error, shaped like Node's `SystemError`: `code` is the errno name (`'EINVAL'`),
 * `errno` its positive number (22), `syscall`/`op` the librdmacm or ibverbs call that failed.
 */
export class RdmaError extends Error {
  /** errno name, e.g. `'ECONNREFUSED'`. */
  readonly code: ErrnoCode;
  /** Positive errno number, e.g. 111. */
  readonly errno: number;
  /** The operation that failed (librdmacm/ibverbs naming). */
  readonly op: string | undefined;
  /** Alias of {@link op}, for code written against Node's SystemError. */
  get syscall(): string | undefined {
    return this.op;
  }

  constructor(code: ErrnoCode, opts: RdmaErrorOptions = {}) {
    const errno = errnoOf(code);
    const head = opts.op ? `${opts.op}: ` : '';
    const tail = opts.detail ? ` (${opts.detail})` : '';
    super(`${head}${strerror(errno)}${tail}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'RdmaError';
    this.code = code;
    this.errno = errno;
    this.op = opts.op;
  }

  /** Build from an errno number (sign ignored); unknown numbers become EIO with the number in the detail. */
  static fromErrno(errno: number, opts: RdmaErrorOptions = {}): RdmaError {
    const code = codeOf(errno);
    if (code) return new RdmaError(code, opts);
    return new RdmaError('EIO', { ...opts, detail: `errno ${errno}${opts.detail ? `, ${opts.detail}` : ''}` });
  }
}

/** Shorthand used throughout: `throw err('EINVAL', 'ibv_post_send', 'sge length')`. */
export function err(code: ErrnoCode, op?: string, detail?: string): RdmaError {
  const o: RdmaErrorOptions = {};
  if (op !== undefined) o.op = op;
  if (detail !== undefined) o.detail = detail;
  return new RdmaError(code, o);
}

/**
 * A post_send/post_recv failure: like ibverbs' `bad_wr`, `badWrIndex` is the index of the first
 * work request that was not queued; the ones before it were queued and will complete.
 */
export class PostError extends RdmaError {
  readonly badWrIndex: number;
  constructor(code: ErrnoCode, op: string, badWrIndex: number, detail?: string) {
    super(code, detail === undefined ? { op } : { op, detail });
    this.name = 'PostError';
    this.badWrIndex = badWrIndex;
  }
}

/** TERMINATE layers (RFC 5040 §7.1). */
export enum TermLayer {
  RDMAP = 0,
  DDP = 1,
  LLP = 2,
}

/**
 * An iWARP protocol error: what a TERMINATE message carries (layer, error type, error code),
 * raised by the receive path and sent to the peer, or decoded from a peer's TERMINATE.
 */
export class TerminateError extends Error {
  readonly layer: number;
  readonly etype: number;
  readonly ecode: number;
  /** The offending DDP/RDMAP header bytes, when attached. */
  readonly header: Uint8Array | undefined;
  constructor(layer: number, etype: number, ecode: number, message: string, header?: Uint8Array) {
    super(`${message} (TERMINATE layer ${layer} etype ${etype} ecode 0x${ecode.toString(16).padStart(2, '0')})`);
    this.name = 'TerminateError';
    this.layer = layer;
    this.etype = etype;
    this.ecode = ecode;
    this.header = header;
  }
}
