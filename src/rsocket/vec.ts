/**
 * The vectored stream calls of rsocket.c: rwritev / rsendmsg (its `rsendv`) and rreadv /
 * rrecvmsg (its `rrecvv`), over a stream socket's non-blocking {@link RsConn.send} and
 * {@link RsConn.recv}.
 *
 * - rsendv gathers the vectors into the send buffer in order, in chunks that may cross a vector's
 *   end. Here each vector goes through rsend in turn; the data writes of one call that continue
 *   each other are merged before they are posted (coalesce.ts), so the peer sees the same stream
 *   in as many or fewer DATA messages.
 * - rsocket.c's rrecvv fills only the first vector ("simple, straightforward implementation for
 *   now"); here the received bytes are scattered over every vector in order, as readv(2) does. A
 *   caller written for rsocket.c, which loops on short reads anyway, sees at least as much data.
 * - rrecvmsg in rsocket.c passes `msg->msg_flags` where recvmsg(2) takes the `flags` argument;
 *   here `flags` is used (MSG_PEEK), as the socket call it mirrors.
 * - Control data (a non-empty `control`) is refused with EOPNOTSUPP (rsocket.c's ERR(ENOTSUP),
 *   the same number on Linux), before anything moves.
 *
 * The return protocol is {@link RsConn.send}'s and {@link RsConn.recv}'s: the byte count, 0 at the
 * end of the stream (receive), {@link RS_EAGAIN} when nothing can move now. An error after some
 * bytes moved returns those bytes (rsocket.c's `(ret && left == len) ? ret : len - left`); the
 * error comes with the next call.
 */
import { RdmaError } from '../errors.js';
import { RS_EAGAIN } from './errors.js';
import { MSG_PEEK } from './options.js';
import type { RsConn } from './conn.js';

/** `struct msghdr` of a stream socket: the I/O vectors, and control data (refused when non-empty). */
export interface RsMsghdr {
  /** `msg_iov`: the buffers, filled or sent in order. */
  iov: readonly Uint8Array[];
  /** `msg_control`: ancillary data; rsockets have none (EOPNOTSUPP when non-empty). */
  control?: Uint8Array | null;
}

/** rsendv(): every vector's bytes in order; the count taken, or RS_EAGAIN when none. */
export function sendVec(c: RsConn, iov: readonly Uint8Array[]): number {
  let done = 0;
  for (const v of iov) {
    if (v.length === 0) continue;
    let n: number;
    try {
      n = c.send(v, 0, v.length);
    } catch (e) {
      if (done > 0) return done;
      throw e;
    }
    if (n === RS_EAGAIN) return done > 0 ? done : RS_EAGAIN;
    done += n;
    if (n < v.length) break;
  }
  return done;
}

/** rrecvv(): received bytes scattered over the vectors in order (see the module comment). */
export function recvVec(c: RsConn, iov: readonly Uint8Array[], flags: number): number {
  if (flags & MSG_PEEK) return peekVec(c, iov, flags);
  let done = 0;
  let any = false;
  for (const v of iov) {
    if (v.length === 0) continue;
    any = true;
    let n: number;
    try {
      n = c.recv(v, 0, v.length, flags);
    } catch (e) {
      if (done > 0) return done;
      throw e;
    }
    if (n === RS_EAGAIN) return done > 0 ? done : RS_EAGAIN;
    done += n;
    if (n < v.length) break;
  }
  // Only empty vectors: rrecv of 0 bytes (its checks and end-of-stream answer).
  if (!any) return c.recv(new Uint8Array(0), 0, 0, flags);
  return done;
}

/** MSG_PEEK over several vectors: one peek of their total length, copied out in order. */
function peekVec(c: RsConn, iov: readonly Uint8Array[], flags: number): number {
  let total = 0;
  for (const v of iov) total += v.length;
  const tmp = new Uint8Array(total);
  const n = c.recv(tmp, 0, total, flags);
  if (n <= 0) return n;
  let at = 0;
  for (const v of iov) {
    if (at >= n) break;
    const k = Math.min(v.length, n - at);
    v.set(tmp.subarray(at, at + k));
    at += k;
  }
  return n;
}

function checkControl(msg: RsMsghdr, op: string): void {
  if (msg.control && msg.control.length > 0) throw new RdmaError('EOPNOTSUPP', { op, detail: 'rsockets carry no control data' });
}

/** rsendmsg() of a stream socket. `flags` change nothing on these non-blocking calls. */
export function sendMsg(c: RsConn, msg: RsMsghdr, flags: number): number {
  void flags;
  checkControl(msg, 'rsendmsg');
  return sendVec(c, msg.iov);
}

/** rrecvmsg() of a stream socket. */
export function recvMsg(c: RsConn, msg: RsMsghdr, flags: number): number {
  checkControl(msg, 'rrecvmsg');
  return recvVec(c, msg.iov, flags);
}
