/**
 * How a CM id's call ends early: aborted by the caller's `AbortSignal`, or cut short by
 * rdma_destroy_id while it waits.
 *
 * - Aborted: the call rejects with the package's {@link AbortError} (op = the call) and its
 *   `undo` puts the id back where a failure of that call leaves it in the kernel (cma.c's error
 *   paths): a resolve goes back to ADDR_BOUND / ADDR_RESOLVED, a connect is abandoned as a
 *   rejected one (the peer sees the request end, the id is ROUTE_RESOLVED again), an accept is
 *   torn down as a failed rdma_accept (the id can only be destroyed), a join leaves the group.
 * - Destroyed: the call rejects with ECANCELED saying what it was doing ("destroyed while
 *   connecting"), whatever its event channel says about the end.
 *
 * Every wait of a call takes the signal (the event wait, `EventChannel.getEvent(signal)`; the
 * transport's own wait, through {@link untilAborted}), so nothing keeps waiting, and no listener
 * stays on the signal, once the call has ended.
 */
import { err, type RdmaError } from '../errors.js';
import { abortError, isAbortError, throwIfAborted, whenAborted } from '../util/abort.js';

/** What each call was doing, for the ECANCELED message of a call cut short by rdma_destroy_id. */
const DOING: Readonly<Record<string, string>> = {
  rdma_resolve_addr: 'resolving the address',
  rdma_resolve_route: 'resolving the route',
  rdma_connect: 'connecting',
  rdma_accept: 'accepting',
  rdma_listen: 'starting to listen',
  rdma_disconnect: 'disconnecting',
  rdma_get_request: 'waiting for a connect request',
  rdma_join_multicast: 'joining a multicast group',
};

/** ECANCELED for `op` cut short by rdma_destroy_id. */
export function destroyedWhile(op: string): RdmaError {
  return err('ECANCELED', op, `destroyed while ${DOING[op] ?? 'waiting'}`);
}

/**
 * The first step of a cancellable call: EINVAL for a `signal` that is no AbortSignal, the
 * AbortError for one already aborted.
 */
export function checkSignal(signal: unknown, op: string): void {
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw err('EINVAL', op, 'signal must be an AbortSignal');
  throwIfAborted(signal, op);
}

/** What {@link cancellable} needs of the id. */
export interface CancelTarget {
  /** Whether rdma_destroy_id was called. */
  readonly destroyed: boolean;
}

/**
 * Run one cancellable call `op` of `id`: AbortError at once for an aborted `signal`; when `run`
 * rejects because `signal` aborted (an AbortError from one of its waits), `undo` runs (unless
 * the id was destroyed meanwhile) and the call rejects with AbortError for `op`; when the id was
 * destroyed during the call, it rejects with ECANCELED ({@link destroyedWhile}).
 */
export async function cancellable<T>(id: CancelTarget, op: string, signal: AbortSignal | undefined, run: () => Promise<T>, undo: () => void): Promise<T> {
  checkSignal(signal, op);
  let out: T;
  try {
    out = await run();
  } catch (e) {
    if (id.destroyed) throw destroyedWhile(op);
    if (signal?.aborted && isAbortError(e)) {
      undo();
      throw abortError(op, signal);
    }
    throw e;
  }
  if (id.destroyed) throw destroyedWhile(op);
  return out;
}

/**
 * `p`, or an AbortError for `op` as soon as one of `signals` aborts (the work behind `p` goes on;
 * its outcome, a rejection included, is dropped).
 */
export function untilAborted<T>(p: Promise<T>, op: string, ...signals: (AbortSignal | undefined)[]): Promise<T> {
  const given = signals.filter((x): x is AbortSignal => x !== undefined);
  if (given.length === 0) return p;
  return new Promise<T>((resolve, reject) => {
    const stops: (() => void)[] = [];
    const stop = (): void => {
      for (const f of stops) f();
    };
    for (const signal of given) {
      stops.push(
        whenAborted(signal, () => {
          stop();
          p.catch(() => {});
          reject(abortError(op, signal));
        }),
      );
    }
    p.then(
      (v) => {
        stop();
        resolve(v);
      },
      (e: unknown) => {
        stop();
        reject(e);
      },
    );
  });
}

/**
 * An address or route resolution under way: stopped when its call is aborted or the id
 * destroyed, after which its work reports nothing. The `AbortSignal` is made only for the wait
 * that takes one (the neighbour lookup); a resolution that never needs it costs a flag.
 */
export class Attempt {
  private stoppedFlag = false;
  private ctl: AbortController | null = null;

  /** Whether {@link stop} was called. */
  get stopped(): boolean {
    return this.stoppedFlag;
  }

  /** A signal that aborts when the attempt stops (already aborted if it has). */
  get signal(): AbortSignal {
    if (this.ctl === null) {
      this.ctl = new AbortController();
      if (this.stoppedFlag) this.ctl.abort();
    }
    return this.ctl.signal;
  }

  stop(): void {
    this.stoppedFlag = true;
    this.ctl?.abort();
  }
}

/**
 * The transport waits of an id's calls under way, cut short by rdma_destroy_id: each rejects
 * with ECANCELED ({@link destroyedWhile}) when the id is destroyed. A wait costs a set entry, no
 * AbortController nor signal listener.
 */
export class DestroyCuts {
  private readonly cuts = new Set<() => void>();
  private done = false;

  /**
   * `p` (or an AbortError for `op` as soon as `signal` aborts, {@link untilAborted}), or
   * ECANCELED as soon as {@link cutAll} runs; the work behind `p` goes on, its outcome dropped.
   */
  wait<T>(p: Promise<T>, op: string, signal: AbortSignal | undefined): Promise<T> {
    const q = untilAborted(p, op, signal);
    if (this.done) {
      q.catch(() => {});
      return Promise.reject(destroyedWhile(op));
    }
    return new Promise<T>((resolve, reject) => {
      const cut = (): void => {
        q.catch(() => {});
        reject(destroyedWhile(op));
      };
      this.cuts.add(cut);
      q.then(
        (v) => {
          this.cuts.delete(cut);
          resolve(v);
        },
        (e: unknown) => {
          this.cuts.delete(cut);
          reject(e);
        },
      );
    });
  }

  /** rdma_destroy_id: every wait under way, and every later one, rejects with ECANCELED. */
  cutAll(): void {
    this.done = true;
    const all = [...this.cuts];
    this.cuts.clear();
    for (const f of all) f();
  }
}
