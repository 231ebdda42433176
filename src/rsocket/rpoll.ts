/**
 * rpoll() and rselect() over several rsockets at once, as rsocket.c's `rpoll` / `rselect`:
 *
 * - every entry is checked (rs_poll_check): a stream socket takes what completed, then reports
 *   POLLIN (data queued, or the read side ended), POLLOUT (it can send), POLLHUP once the peer
 *   disconnected, POLLERR after a connection error — the last two whatever `events` asked; a
 *   listener reports POLLIN while a connect request waits; a closed socket POLLNVAL (poll(2) on a
 *   descriptor that is no longer open); a `null` entry (a negative fd) nothing;
 * - if any entry has revents, or the timeout is 0, rpoll returns how many entries have revents;
 * - otherwise it waits on every entry at once until one of them changes (rs_poll_arm / poll /
 *   rs_poll_events), then checks every entry again — several can be ready together — and goes
 *   back to waiting if none is (a credit update or a connection event that no caller asked about),
 *   until `timeoutMs` has passed (negative: no limit), when it returns 0.
 *
 * rselect() maps its sets onto rpoll entries (rs_select_to_poll: read → POLLIN, write → POLLOUT,
 * except → no events) and back (rs_poll_to_select: read ← POLLIN|POLLHUP, write ← POLLOUT,
 * except ← anything else), clearing the sets first; its count is the number of set memberships.
 * Sockets that are in several sets are polled once.
 *
 * Both take an `AbortSignal` (what a signal interrupting poll(2) is to a C program: EINTR):
 * once it aborts, the wait ends and the call rejects with an AbortError (`op` 'rpoll' or
 * 'rselect', the signal's reason as `cause`), leaving no waiter on any socket; `revents` and the
 * sets then hold what the last check found.
 */
import { abortError, throwIfAborted } from '../util/abort.js';
import type { RsConn } from './conn.js';
import type { RsListener } from './listener.js';
import { POLLHUP, POLLIN, POLLOUT } from './options.js';

/** What rpoll can wait on: a stream rsocket, a listening one, or anything shaped like them. */
export interface RsPollable {
  /** The revents of `events` now. */
  pollNow(events: number): number;
  /** Resolves with revents once ready, 0 after `timeoutMs` or once `signal` aborts. */
  poll(events: number, timeoutMs: number, signal?: AbortSignal): Promise<number>;
}

/** `struct pollfd`: the socket (`null` for a negative fd: ignored), the events asked, the answer. */
export interface RsPollFd {
  fd: RsConn | RsListener | RsPollable | null;
  events: number;
  revents: number;
}

/** rs_poll_check: every entry's revents now; how many have some. */
function checkAll(fds: readonly RsPollFd[]): number {
  let cnt = 0;
  for (const f of fds) {
    f.revents = f.fd ? f.fd.pollNow(f.events) : 0;
    if (f.revents) cnt++;
  }
  return cnt;
}

/**
 * rpoll(): fills each entry's `revents` and resolves with the number of entries that have some;
 * 0 after `timeoutMs` (negative: wait as long as it takes; 0: check once). Rejects with an
 * AbortError once `signal` aborts (at once if it already has).
 */
export function rpoll(fds: readonly RsPollFd[], timeoutMs = -1, signal?: AbortSignal): Promise<number> {
  return pollFds(fds, timeoutMs, signal, 'rpoll');
}

/** rpoll's loop; `op` names the call in an AbortError. */
async function pollFds(fds: readonly RsPollFd[], timeoutMs: number, signal: AbortSignal | undefined, op: string): Promise<number> {
  throwIfAborted(signal, op);
  const deadline = timeoutMs > 0 ? performance.now() + timeoutMs : Infinity;
  for (;;) {
    const n = checkAll(fds);
    if (n > 0 || timeoutMs === 0) return n;
    let left = -1;
    if (timeoutMs > 0) {
      left = Math.ceil(deadline - performance.now());
      if (left <= 0) return 0;
    }
    const stop = new AbortController();
    const waits: Promise<number>[] = [];
    for (const f of fds) if (f.fd) waits.push(f.fd.poll(f.events, left, stop.signal));
    let timer: NodeJS.Timeout | null = null;
    // No socket at all: poll(2) with no descriptors sleeps for the timeout.
    if (waits.length === 0) waits.push(new Promise<number>((r) => (left < 0 ? undefined : (timer = setTimeout(() => r(0), left)))));
    // The signal ends every socket's wait (their own signal) and the sleep.
    let cancelled: (() => void) | null = null;
    const onAbort = (): void => {
      stop.abort();
      cancelled?.();
    };
    if (signal) {
      waits.push(new Promise<number>((r) => (cancelled = () => r(0))));
      signal.addEventListener('abort', onAbort, { once: true });
    }
    try {
      await Promise.race(waits);
    } finally {
      stop.abort();
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
    if (signal?.aborted) throw abortError(op, signal);
  }
}

/** `struct timeval`: seconds and microseconds. */
export interface RsTimeval {
  sec: number;
  usec: number;
}

/** A set of sockets (`fd_set`), emptied and refilled with the ready ones. */
export type RsFdSet = Set<RsConn | RsListener | RsPollable>;

/**
 * rselect(): waits until a socket of `readfds` is readable (or hung up), one of `writefds`
 * writable, or one of `exceptfds` has an error or hangup; `timeout` null waits as long as it
 * takes. The sets are cleared and keep only the ready sockets; resolves with the number of set
 * memberships kept (0 on timeout). Rejects with an AbortError once `signal` aborts (the sets
 * are then left as they were given).
 */
export async function rselect(readfds: RsFdSet | null, writefds: RsFdSet | null, exceptfds: RsFdSet | null, timeout: RsTimeval | null = null, signal?: AbortSignal): Promise<number> {
  const entries = new Map<RsConn | RsListener | RsPollable, RsPollFd>();
  const add = (set: RsFdSet | null, events: number): void => {
    if (!set) return;
    for (const fd of set) {
      const e = entries.get(fd);
      if (e) e.events |= events;
      else entries.set(fd, { fd, events, revents: 0 });
    }
  };
  add(readfds, POLLIN);
  add(writefds, POLLOUT);
  add(exceptfds, 0);
  const fds = [...entries.values()];
  // rs_convert_timeout: tv_sec * 1000 + tv_usec / 1000.
  const ms = timeout ? timeout.sec * 1000 + Math.trunc(timeout.usec / 1000) : -1;
  const ret = await pollFds(fds, ms, signal, 'rselect');
  readfds?.clear();
  writefds?.clear();
  exceptfds?.clear();
  if (ret <= 0) return ret;
  let cnt = 0;
  for (const f of fds) {
    const fd = f.fd as RsConn | RsListener | RsPollable;
    if (readfds && f.revents & (POLLIN | POLLHUP)) {
      readfds.add(fd);
      cnt++;
    }
    if (writefds && f.revents & POLLOUT) {
      writefds.add(fd);
      cnt++;
    }
    if (exceptfds && f.revents & ~(POLLIN | POLLOUT)) {
      exceptfds.add(fd);
      cnt++;
    }
  }
  return cnt;
}
