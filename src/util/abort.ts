/**
 * Cancellation: the one error every aborted call rejects with, and the small pieces each
 * cancellable call is built from.
 *
 * The error has the shape of Node's own (what `net.connect({ signal })`, `events.once` and
 * `fetch` reject with): `name === 'AbortError'`, `code === 'ABORT_ERR'`, the signal's reason as
 * `cause`; and, as every error of this package, the librdmacm/ibverbs call in `op` and the errno
 * a C caller would see for a cancelled operation (`ECANCELED`, 125) in `errno`.
 */
import { errnoOf } from '../errno.js';

/** What every call given an aborted (or aborting) `AbortSignal` rejects with. */
export class AbortError extends Error {
  /** Node's code for an aborted operation. */
  readonly code = 'ABORT_ERR' as const;
  /** The errno of a cancelled operation (ECANCELED). */
  readonly errno: number = errnoOf('ECANCELED');
  /** The call that was aborted (librdmacm/ibverbs naming, e.g. `'rdma_connect'`). */
  readonly op: string | undefined;

  constructor(op?: string, opts: { cause?: unknown } = {}) {
    super(`${op ? `${op}: ` : ''}The operation was aborted`, 'cause' in opts ? { cause: opts.cause } : undefined);
    this.name = 'AbortError';
    this.op = op;
  }
}

/** The error for `op` aborted by `signal` (its reason as `cause`). */
export function abortError(op: string, signal: AbortSignal): AbortError {
  return new AbortError(op, { cause: signal.reason });
}

/** Throw {@link abortError} if `signal` is already aborted: the first line of a cancellable call. */
export function throwIfAborted(signal: AbortSignal | undefined, op: string): void {
  if (signal?.aborted) throw abortError(op, signal);
}

/**
 * Run `onAbort` once if `signal` aborts; returns the function that stops listening (call it when
 * the operation ends either way, so a long-lived signal does not collect listeners).
 */
export function whenAborted(signal: AbortSignal | undefined, onAbort: () => void): () => void {
  if (!signal) return noop;
  if (signal.aborted) {
    queueMicrotask(onAbort);
    return noop;
  }
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

function noop(): void {}

/** Is `e` an {@link AbortError} (ours or Node's own)? */
export function isAbortError(e: unknown): boolean {
  return e instanceof Error && e.name === 'AbortError';
}
