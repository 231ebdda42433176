/**
 * rcopy's blocking rsocket calls (rcopy.c uses rsockets in blocking mode) over the non-blocking
 * {@link RsConn}: a whole rsend, `_recv` (rrecv until `len` bytes or the end), msg_recv_hdr,
 * msg_get_resp and msg_send_resp, with rcopy.c's messages on stdout.
 */
import { RsConn, RS_EAGAIN, POLLIN, POLLOUT } from './rs-api.js';
import { Errno } from './api.js';
import { out } from './c-compat.js';
import { CMD_RESP, MSG_HDR_SIZE, decodeHdr, encodeResp, hdrValid, statusOf, type MsgHdr } from './rcopy-msg.js';

/** Every wait of a blocking call is bounded: a peer silent this long has gone (ms). */
export const IO_TIMEOUT_MS = Number(process.env['RCOPY_TIMEOUT_MS'] ?? 0) || 10 * 60 * 1000;

/** A call failed: rsend/rrecv's -1 with its errno. */
export class IoError extends Error {
  constructor(readonly errno: number) {
    super(`errno ${errno}`);
  }
}

/** The errno of the last failed call of this module. */
export let lastErrno = 0;

function errnoOf(e: unknown): number {
  if (e instanceof IoError) return e.errno;
  const n = (e as { errno?: unknown } | null)?.errno;
  return typeof n === 'number' && n > 0 ? n : Errno.EIO;
}

/** Wait for `events`; ETIMEDOUT after {@link IO_TIMEOUT_MS} without a change. */
async function wait(c: RsConn, events: number): Promise<void> {
  const r = await c.poll(events, IO_TIMEOUT_MS);
  if (r === 0) throw new IoError(Errno.ETIMEDOUT);
}

/**
 * A blocking rsend of `len` bytes of `buf[off..]`: resolves with `len`, or with the bytes taken
 * before the connection failed; -1 (errno in {@link lastErrno}) when it failed before any.
 */
export async function sendFull(c: RsConn, buf: Uint8Array, off = 0, len = buf.length - off): Promise<number> {
  let done = 0;
  try {
    while (done < len) {
      const n = c.send(buf, off + done, len - done);
      if (n === RS_EAGAIN) await wait(c, POLLOUT);
      else done += n;
    }
  } catch (e) {
    lastErrno = errnoOf(e);
    return done > 0 ? done : -1;
  }
  return done;
}

/**
 * rcopy.c's `_recv`: rrecv until `len` bytes are in `buf[off..]`. Resolves with `len`, 0 when the
 * stream ended first, -1 when the connection failed (errno in {@link lastErrno}).
 */
export async function recvFull(c: RsConn, buf: Uint8Array, off = 0, len = buf.length - off): Promise<number> {
  let done = 0;
  try {
    while (done < len) {
      const n = c.recv(buf, off + done, len - done);
      if (n === RS_EAGAIN) await wait(c, POLLIN);
      else if (n === 0) return 0;
      else done += n;
    }
  } catch (e) {
    lastErrno = errnoOf(e);
    return -1;
  }
  return len;
}

/**
 * Whatever bytes are queued, up to `len`, after waiting for some: the count, 0 at the end of the
 * stream, -1 on failure (a streaming rrecv).
 */
export async function recvSome(c: RsConn, buf: Uint8Array, off: number, len: number): Promise<number> {
  try {
    for (;;) {
      const n = c.recv(buf, off, len);
      if (n !== RS_EAGAIN) return n;
      await wait(c, POLLIN);
    }
  } catch (e) {
    lastErrno = errnoOf(e);
    return -1;
  }
}

/** msg_recv_hdr: the next header, or null (the stream ended, failed, or the header is invalid). */
export async function recvHdr(c: RsConn): Promise<MsgHdr | null> {
  const b = new Uint8Array(MSG_HDR_SIZE);
  if ((await recvFull(c, b)) !== MSG_HDR_SIZE) return null;
  const h = decodeHdr(b);
  if (!hdrValid(h)) {
    out(`invalid version ${h.version} or length ${h.len}\n`);
    return null;
  }
  return h;
}

/** msg_get_resp: the status of the response to `cmd` (0: success), or -1. */
export async function getResp(c: RsConn, cmd: number): Promise<number> {
  const h = await recvHdr(c);
  if (!h) return -1;
  if (h.len !== MSG_HDR_SIZE || h.command !== (cmd | CMD_RESP)) {
    out(`invalid length ${h.len} or bad command response ${h.command.toString(16)}:${(cmd | CMD_RESP).toString(16)}\n`);
    return -1;
  }
  return statusOf(h);
}

/** msg_send_resp: the response to `req` with `status` (its result ignored, as rcopy.c). */
export async function sendResp(c: RsConn, req: MsgHdr, status: number): Promise<void> {
  await sendFull(c, encodeResp(req, status));
}
