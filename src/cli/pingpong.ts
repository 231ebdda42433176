/**
 * What libibverbs' pingpong examples share (libibverbs/examples/pingpong.c and the code each of
 * rc/uc/ud/srq_pingpong.c repeats): the device lookup, the TCP side channel on which the two sides
 * trade their addresses (`pp_client_exch_dest` / `pp_server_exch_dest`, the messages in
 * pingpong-wire.ts), the completion wait of the ping-pong loop and the two result lines. Messages
 * and exit statuses are the C tools'.
 *
 * Every wait on the side channel has a deadline ({@link PP_EXCHANGE_TIMEOUT_MS} once a peer is
 * connected): a peer that connects and goes silent, stops mid-message or sends garbage ends the
 * tool with the C tool's message for a failed read, never a hang. The server waits for its client
 * without a deadline, as the C tools do.
 */
import net from 'node:net';
import { Errno, getDeviceList, strerror, type CompChannel, type Cq, type Device, type Wc } from './api.js';
import { errOut, out } from './c-compat.js';
import { gaiMessage, inetNtop6, resolveHost } from './addresses.js';
import { PP_DONE, PP_DONE_LEN, PP_MSG_LEN, decodeDest, encodeDest, type PpDest } from './pingpong-wire.js';

/** How long a connected peer has to send each message of the exchange (`RDMACM_PP_TIMEOUT_MS`). */
export const PP_EXCHANGE_TIMEOUT_MS = Number(process.env['RDMACM_PP_TIMEOUT_MS']) > 0 ? Number(process.env['RDMACM_PP_TIMEOUT_MS']) : 30_000;

/**
 * The errno the C tools' `perror("client read/write")` and `perror("server read")` print after a
 * short read: read(2) returning 0 sets none, so they print one left over from libibverbs' start,
 * ENOSPC with rdma-core 44 ("No space left on device"), on rxe and siw alike.
 */
const STALE_ERRNO = Errno.ENOSPC;

/** `PINGPONG_RECV_WRID`. */
export const PP_RECV_WRID = 1;
/** `PINGPONG_SEND_WRID`. */
export const PP_SEND_WRID = 2;

/**
 * The device `-d` names, or the first one: null after printing "No IB devices found" or
 * "IB device <name> not found" (stderr).
 */
export function ppFindDevice(name: string | null): Device | null {
  const list = getDeviceList();
  const dev = name === null ? list[0] : list.find((d) => d.name === name);
  if (dev === undefined) errOut(name === null ? 'No IB devices found\n' : `IB device ${name} not found\n`);
  return dev ?? null;
}

/** inet_ntop(AF_INET6) of a GID, as the tools print it. */
export const gidText = inetNtop6;

/** `"  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s"` (`sep` ": " for ud_pingpong's). */
export function printDest(which: 'local' | 'remote', d: PpDest, sep = ', '): void {
  const hex = (v: number, w: number): string => v.toString(16).padStart(w, '0');
  const label = which === 'local' ? 'local address: ' : 'remote address:';
  out(`  ${label} LID 0x${hex(d.lid, 4)}, QPN 0x${hex(d.qpn, 6)}, PSN 0x${hex(d.psn, 6)}${sep}GID ${gidText(d.gid)}\n`);
}

/** `lrand48() & 0xffffff`: a random first PSN. */
export function randomPsn(): number {
  return Math.floor(Math.random() * 0x100_0000);
}

/** Read exactly `n` bytes from `sock`: fewer when it ends, fails or `deadlineMs` passes first. */
export function readExact(sock: net.Socket, n: number, deadlineMs = PP_EXCHANGE_TIMEOUT_MS): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let have = 0;
    const finish = (): void => {
      clearTimeout(timer);
      sock.off('readable', pull);
      sock.off('end', finish);
      sock.off('close', finish);
      sock.off('error', finish);
      const all = Buffer.concat(chunks);
      if (all.length > n) sock.unshift(all.subarray(n));
      resolve(all.subarray(0, n));
    };
    const pull = (): void => {
      for (let c = sock.read() as Buffer | null; c !== null; c = sock.read() as Buffer | null) {
        chunks.push(c);
        have += c.length;
        if (have >= n) {
          finish();
          return;
        }
      }
      // ended before: no 'end' or 'close' comes again
      if (sock.readableEnded || sock.destroyed) finish();
    };
    const timer = setTimeout(finish, deadlineMs);
    sock.on('readable', pull);
    sock.once('end', finish);
    sock.once('close', finish);
    sock.once('error', finish);
    pull();
  });
}

/** Write `b` and wait until the socket took it (false if it failed). */
function writeAll(sock: net.Socket, b: Buffer): Promise<boolean> {
  return new Promise((resolve) => sock.write(b, (e) => resolve(e === undefined || e === null)));
}

/** Connect to `host:port` (each address of the name in turn, as the C loop over getaddrinfo). */
async function connectTo(host: string, port: number): Promise<net.Socket | 'gai' | null> {
  let addr: string;
  try {
    addr = (await resolveHost(host)).address;
  } catch (e) {
    errOut(`${gaiMessage(e)} for ${host}:${port}\n`);
    return 'gai';
  }
  return new Promise((resolve) => {
    const s = net.connect({ host: addr, port });
    s.once('connect', () => {
      s.off('error', fail);
      resolve(s);
    });
    const fail = (): void => {
      s.destroy();
      resolve(null);
    };
    s.once('error', fail);
  });
}

/**
 * `pp_client_exch_dest`: connect to the server, send our `mine.length` messages, read as many,
 * send "done". Prints the C tool's message and returns null on failure.
 * @param srqStyle srq_pingpong's messages after a short read ("%d/%d: Couldn't read remote
 *   address [%d]") instead of rc/uc/ud's (`perror("client read/write")`, "Couldn't read/write
 *   remote address").
 * @param parseFirst how many of the peer's messages carry addresses: srq_pingpong sends 256
 *   whatever its QP count, the ones past its QPs from memory it never set, so they are read and
 *   not parsed.
 */
export async function ppClientExchange(host: string, port: number, mine: readonly PpDest[], srqStyle = false, parseFirst = mine.length): Promise<PpDest[] | null> {
  const sock = await connectTo(host, port);
  if (sock === 'gai') return null;
  if (sock === null) {
    errOut(`Couldn't connect to ${host}:${port}\n`);
    return null;
  }
  try {
    for (const d of mine) {
      if (!(await writeAll(sock, encodeDest(d)))) {
        errOut("Couldn't send local address\n");
        return null;
      }
    }
    const rem: PpDest[] = [];
    for (let i = 0; i < mine.length; i++) {
      const m = await readExact(sock, PP_MSG_LEN);
      if (m.length !== PP_MSG_LEN) {
        if (srqStyle) errOut(`${m.length}/${PP_MSG_LEN}: Couldn't read remote address [${i}]\n`);
        else errOut(`client read/write: ${strerror(STALE_ERRNO)}\nCouldn't read/write remote address\n`);
        return null;
      }
      if (i >= parseFirst) continue;
      const d = decodeDest(m);
      if (d === null) {
        errOut(`Couldn't parse remote address: ${JSON.stringify(m.toString('latin1').replace(/\0+$/, ''))}\n`);
        return null;
      }
      rem.push(d);
    }
    if (!(await writeAll(sock, PP_DONE))) {
      errOut(srqStyle ? "Couldn't send \"done\"\n" : `client read/write: ${strerror(STALE_ERRNO)}\nCouldn't read/write remote address\n`);
      return null;
    }
    return rem;
  } finally {
    sock.end();
  }
}

/**
 * `pp_server_exch_dest`: listen on `port` (any address), take one client, read `count` messages,
 * call `connect(rem)` (the QPs to RTR and RTS; false: it printed why), send `mine()` and wait for
 * "done". Prints the C tool's message and returns null on failure. `srqStyle`, `parseFirst`: as
 * {@link ppClientExchange}.
 */
export async function ppServerExchange(
  port: number,
  count: number,
  connect: (rem: PpDest[]) => boolean,
  mine: () => readonly PpDest[],
  srqStyle = false,
  parseFirst = count,
): Promise<PpDest[] | null> {
  const srv = net.createServer({ pauseOnConnect: false });
  const listening = await new Promise<boolean>((resolve) => {
    srv.once('error', () => resolve(false));
    srv.listen({ port, exclusive: true }, () => resolve(true));
  });
  if (!listening) {
    errOut(`Couldn't listen to port ${port}\n`);
    return null;
  }
  const sock = await new Promise<net.Socket>((resolve) => srv.once('connection', resolve));
  srv.close();
  try {
    const rem: PpDest[] = [];
    for (let i = 0; i < count; i++) {
      const m = await readExact(sock, PP_MSG_LEN);
      if (m.length !== PP_MSG_LEN) {
        if (srqStyle) errOut(`${m.length}/${PP_MSG_LEN}: Couldn't read remote address [${i}]\n`);
        else errOut(`server read: ${strerror(STALE_ERRNO)}\n${m.length}/${PP_MSG_LEN}: Couldn't read remote address\n`);
        return null;
      }
      if (i >= parseFirst) continue;
      const d = decodeDest(m);
      if (d === null) {
        errOut(`Couldn't parse remote address: ${JSON.stringify(m.toString('latin1').replace(/\0+$/, ''))}\n`);
        return null;
      }
      rem.push(d);
    }
    if (!connect(rem)) {
      errOut("Couldn't connect to remote QP\n");
      return null;
    }
    for (const d of mine()) {
      if (!(await writeAll(sock, encodeDest(d)))) {
        errOut(srqStyle ? "Couldn't send local address\n" : "Couldn't send/recv local address\n");
        return null;
      }
    }
    const done = await readExact(sock, PP_DONE_LEN);
    if (done.length !== PP_DONE_LEN) {
      errOut(srqStyle ? `client write: ${strerror(STALE_ERRNO)}\n` : "Couldn't send/recv local address\n");
      return null;
    }
    return rem;
  } finally {
    sock.end();
  }
}

/**
 * Wait for completions as the loop does: with `channel` (`-e`), `ibv_get_cq_event`, ack, re-arm
 * and poll once; without, poll until something comes (yielding to the event loop between empty
 * polls, where the soft devices run). Returns the completions (possibly none after an event).
 */
export async function ppNextCompletions(cq: Cq, channel: CompChannel | null, max: number): Promise<Wc[]> {
  if (channel !== null) {
    const c = await channel.getCqEvent();
    c.ackEvents(1);
    cq.reqNotify();
    return cq.poll(max);
  }
  for (;;) {
    const wcs = cq.poll(max);
    if (wcs.length > 0) return wcs;
    await new Promise<void>((r) => setImmediate(r));
  }
}

/** The two result lines: bytes and Mbit/s, iterations and µs per iteration (`%.2f`). */
export function printRate(bytes: number, iters: number, usec: number): void {
  out(`${bytes} bytes in ${(usec / 1e6).toFixed(2)} seconds = ${((bytes * 8) / usec).toFixed(2)} Mbit/sec\n`);
  out(`${iters} iters in ${(usec / 1e6).toFixed(2)} seconds = ${(usec / iters).toFixed(2)} usec/iter\n`);
}

/** Microseconds since `t0` (`process.hrtime.bigint()`), as gettimeofday differences. */
export function usecSince(t0: bigint): number {
  return Math.max(1, Math.round(Number(process.hrtime.bigint() - t0) / 1000));
}

