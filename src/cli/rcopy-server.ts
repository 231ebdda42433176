/**
 * rcopy's server (librdmacm/examples/rcopy.c server_run and the server_* handlers): listen on
 * the port, take one client at a time, and for each OPEN / WRITE / CLOSE do what rcopy.c does,
 * printing its progress line — `waiting for connection...client: <address>`, then
 * `opening: <path>, transferring...<n> bytes...closing...done`.
 *
 * Where it differs from rcopy.c, on purpose:
 * - the data is streamed to the file in 1 MiB writes as it arrives (the rsocket's credits hold
 *   the client back while a write is pending) instead of being received into an mmap of the file;
 * - the file is written under a temporary name in the destination's directory and renamed onto
 *   the destination once every byte arrived, so a transfer that fails never leaves a partial file
 *   under the final name (rcopy.c truncates the destination at OPEN). An existing destination's
 *   permission bits are kept, as O_TRUNC keeps them; one that is not a regular file (a device) is
 *   opened in place, as rcopy.c does;
 * - an open file is closed (and its temporary name removed) when its connection ends: rcopy.c
 *   keeps it in a global until a CLOSE comes, and refuses every later OPEN with EBUSY after a
 *   client that went away without one;
 * - a failed write to the file is reported with its errno (`...error writing file`) after the
 *   rest of the data was drained; rcopy.c would take a SIGBUS on its mapping.
 */
import { constants as fsc, promises as fsp } from 'node:fs';
import { dirname, join } from 'node:path';
import { RsConn, RsListener, RS_EAGAIN, POLLIN, SHUT_RDWR, SOL_SOCKET, SO_REUSEADDR } from './rs-api.js';
import { Errno, RAI, getDeviceList, getaddrinfo, type SockAddr } from './rdma.js';
import { errnoFrom, out, perror } from './c-compat.js';
import { gaiCode, gaiText } from './addresses.js';
import { MSG_WRITE_SIZE, RcopyCmd, decodePath, decodeSize, type MsgHdr } from './rcopy-msg.js';
import { IO_TIMEOUT_MS, recvFull, recvHdr, sendResp } from './rcopy-io.js';

/** Bytes per write to the file. */
const CHUNK = 1 << 20;
/** mmap's limit on a length (the user address space of x86-64): ENOMEM beyond. */
const MMAP_MAX = 2 ** 47;

let tmpSeq = 0;

/** An error carrying an errno, as the fs calls' own. */
function sysErr(errno: number): Error & { errno: number } {
  return Object.assign(new Error(`errno ${errno}`), { errno });
}

/** The destination file of one OPEN. */
class Destination {
  private finished = false;
  private constructor(
    private readonly fh: fsp.FileHandle,
    /** Where the bytes go until finished, null when written in place. */
    private readonly temp: string | null,
    private readonly final: string,
  ) {}

  /**
   * open(path, O_RDWR | O_CREAT | O_TRUNC, mode) with the same errors, but written under a
   * temporary name next to the destination (see the module comment).
   */
  static async open(path: string, mode: number): Promise<Destination> {
    let st: Awaited<ReturnType<typeof fsp.stat>> | null = null;
    try {
      st = await fsp.stat(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    if (st?.isDirectory()) throw sysErr(Errno.EISDIR);
    if (st) await fsp.access(path, fsc.R_OK | fsc.W_OK);
    if (st && !st.isFile()) return new Destination(await fsp.open(path, fsc.O_RDWR), null, path);
    const final = st ? await fsp.realpath(path) : path;
    const temp = join(dirname(final), `.rcopy-${process.pid}-${++tmpSeq}`);
    const fh = await fsp.open(temp, fsc.O_RDWR | fsc.O_CREAT | fsc.O_EXCL, mode & 0o7777);
    if (st) await fh.chmod(st.mode & 0o7777).catch(() => {});
    return new Destination(fh, temp, final);
  }

  truncate(size: number): Promise<void> {
    return this.fh.truncate(size);
  }

  async write(buf: Uint8Array, len: number, pos: number): Promise<void> {
    for (let done = 0; done < len; ) {
      const { bytesWritten } = await this.fh.write(buf, done, len - done, pos + done);
      done += bytesWritten;
    }
  }

  /** Every byte is there: the file takes its final name. */
  async finish(): Promise<void> {
    this.finished = true;
    if (this.temp) await fsp.rename(this.temp, this.final);
  }

  /** Close it: under its final name if {@link finish}ed (or `keep`), else the temporary one goes. */
  async close(keep: boolean): Promise<void> {
    await this.fh.close().catch(() => {});
    if (this.finished || !this.temp) return;
    if (keep) await fsp.rename(this.temp, this.final).catch(() => fsp.unlink(this.temp as string).catch(() => {}));
    else await fsp.unlink(this.temp).catch(() => {});
  }
}

/** One connection's state (rcopy.c's globals `fd`, `file_addr` and `bytes`). */
class Session {
  dest: Destination | null = null;
  /** A WRITE was taken (whatever its outcome). */
  wrote = false;

  constructor(readonly c: RsConn) {}

  /** server_open. */
  async open(msg: MsgHdr): Promise<number> {
    let ret: number;
    out('opening: ');
    if (this.dest) {
      out('cannot open another file\n');
      ret = Errno.EBUSY;
    } else {
      const len = msg.len - 16;
      const path = new Uint8Array(len);
      const got = await recvFull(this.c, path);
      if (got !== len) {
        out('error receiving path\n');
        ret = got;
      } else {
        const name = decodePath(path);
        out(`${name}, `);
        try {
          this.dest = await Destination.open(name, msg.data);
          this.wrote = false;
          ret = 0;
        } catch (e) {
          out('unable to open destination file\n');
          ret = errnoFrom(e);
        }
      }
    }
    await sendResp(this.c, msg, ret);
    return ret;
  }

  /** server_close. */
  async close(msg: MsgHdr): Promise<void> {
    out('closing...');
    await sendResp(this.c, msg, 0);
    await this.release(!this.wrote);
    out('done\n');
  }

  /** The file of this connection closed: kept when complete (or never written), else removed. */
  async release(keep: boolean): Promise<void> {
    const d = this.dest;
    this.dest = null;
    if (d) await d.close(keep);
  }

  /** server_write: the size, then the data streamed into the file. */
  async write(msg: MsgHdr): Promise<number> {
    const ret = await this.receiveFile(msg);
    await sendResp(this.c, msg, ret);
    return ret;
  }

  private async receiveFile(msg: MsgHdr): Promise<number> {
    out('transferring');
    const dest = this.dest;
    if (!dest) {
      out('...file not opened\n');
      return Errno.EINVAL;
    }
    if (msg.len !== MSG_WRITE_SIZE) {
      out(`...invalid message length ${msg.len}\n`);
      return Errno.EINVAL;
    }
    this.wrote = true;
    const sb = new Uint8Array(8);
    const got = await recvFull(this.c, sb);
    if (got !== 8) return got;
    const size = decodeSize(sb);
    // ftruncate(fd, bytes): -1 on failure, as rcopy.c sends it.
    if (size > BigInt(Number.MAX_SAFE_INTEGER)) return -1;
    const bytes = Number(size);
    try {
      await dest.truncate(bytes);
    } catch {
      return -1;
    }
    if (bytes === 0 || bytes > MMAP_MAX) {
      out('...error mapping file\n');
      return bytes === 0 ? Errno.EINVAL : Errno.ENOMEM;
    }
    out(`...${bytes} bytes...`);
    const r = await this.stream(dest, bytes);
    if (r.received !== bytes) {
      out('...error receiving data\n');
      return r.failed ? -1 : 0;
    }
    if (r.writeErrno) {
      out('...error writing file\n');
      return r.writeErrno;
    }
    try {
      await dest.finish();
    } catch (e) {
      out('...error writing file\n');
      return errnoFrom(e);
    }
    return 0;
  }

  /**
   * Receive `bytes` and write them at their offsets, two buffers in turn: one fills from the
   * rsocket while the other is being written. A failed write stops the writing, not the
   * receiving (the client sends everything before it reads the response).
   */
  private async stream(dest: Destination, bytes: number): Promise<{ received: number; failed: boolean; writeErrno: number }> {
    const bufs = [Buffer.allocUnsafe(Math.min(CHUNK, bytes)), Buffer.allocUnsafe(Math.min(CHUNK, bytes))];
    let cur = 0;
    let fill = 0;
    let pos = 0;
    let received = 0;
    let writeErrno = 0;
    let pending: Promise<void> | null = null;
    const flush = async (): Promise<void> => {
      if (pending) await pending;
      const b = bufs[cur] as Buffer;
      const n = fill;
      const at = pos;
      pos += n;
      fill = 0;
      cur ^= 1;
      pending = writeErrno
        ? null
        : dest.write(b, n, at).catch((e: unknown) => {
            writeErrno = errnoFrom(e);
          });
    };
    let failed = false;
    while (received < bytes) {
      const b = bufs[cur] as Buffer;
      let n: number;
      try {
        n = this.c.recv(b, fill, Math.min(b.length - fill, bytes - received));
      } catch {
        failed = true;
        break;
      }
      if (n === RS_EAGAIN) {
        if (fill > 0) await flush();
        else if ((await this.c.poll(POLLIN, IO_TIMEOUT_MS)) === 0) {
          failed = true;
          break;
        }
        continue;
      }
      if (n === 0) break;
      fill += n;
      received += n;
      if (fill === b.length) await flush();
    }
    if (fill > 0) await flush();
    if (pending) await pending;
    return { received, failed, writeErrno };
  }
}

/** server_process: messages until one fails or the stream ends; the file is released at the end. */
async function serverProcess(c: RsConn): Promise<void> {
  const s = new Session(c);
  try {
    for (;;) {
      const msg = await recvHdr(c);
      if (!msg) break;
      let ret: number;
      switch (msg.command) {
        case RcopyCmd.OPEN:
          ret = await s.open(msg);
          break;
        case RcopyCmd.CLOSE:
          await s.close(msg);
          ret = 0;
          break;
        case RcopyCmd.WRITE:
          ret = await s.write(msg);
          break;
        default:
          await sendResp(c, msg, Errno.EINVAL);
          ret = -1;
      }
      if (ret) break;
    }
  } finally {
    await s.release(false);
  }
}

/** inet_ntop of the client's address, as `_ntop` prints it ("" for none). */
function ntop(a: SockAddr | null): string {
  return a?.address ?? '';
}

/** server_listen: the listening rsocket, or the status to exit with. */
async function serverListen(port: string): Promise<RsListener | number> {
  let addr: SockAddr;
  try {
    const r = await getaddrinfo(null, port, { flags: RAI.PASSIVE });
    addr = r.srcAddr as SockAddr;
  } catch (e) {
    out(`getaddrinfo failed: ${gaiText(e)}\n`);
    return gaiCode(e);
  }
  // rsocket() fails without a device, and rcopy.c says nothing.
  if (getDeviceList().length === 0) return -1;
  const l = new RsListener();
  try {
    l.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1);
  } catch (e) {
    perror('rsetsockopt failed', e);
    await l.close();
    return -1;
  }
  try {
    l.bind(addr);
  } catch (e) {
    perror('rbind failed', e);
    await l.close();
    return -1;
  }
  try {
    await l.listen(1);
  } catch (e) {
    perror('rlisten failed', e);
    await l.close();
    return -1;
  }
  return l;
}

/** server_run: serve clients one after the other, for ever (or the status of a failed start). */
export async function serverRun(port: string): Promise<number> {
  const l = await serverListen(port);
  if (typeof l === 'number') return l;
  for (;;) {
    out('waiting for connection...');
    let c: RsConn | null = null;
    try {
      c = await l.accept();
    } catch (e) {
      // rcopy.c goes on with rs = -1: an empty address, and its first rrecv fails. A listener
      // that is gone (EBADF) would make that a loop without end: stop there.
      if ((e as { code?: string }).code === 'EBADF') {
        perror('raccept', e);
        return -1;
      }
    }
    out(`client: ${ntop(c?.remoteAddress ?? null)}\n`);
    if (!c) continue;
    await serverProcess(c);
    await c.shutdown(SHUT_RDWR).catch(() => {});
    await c.close();
  }
}
