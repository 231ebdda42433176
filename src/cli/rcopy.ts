#!/usr/bin/env node
/**
 * rcopy: file copy over rsockets — a port of rdma-core's `librdmacm/examples/rcopy.c` (same
 * command line, messages, protocol and exit statuses; docs/man/rcopy.1.md):
 *
 *     rcopy [-p port]                              the server: receives files, for ever
 *     rcopy source server[:destination] [-p port]  the client: sends `source`
 *
 * The client sends OPEN (the destination path and the source's mode), WRITE (the size) and then
 * the file's bytes as one stream, then CLOSE, each answered by a status (rcopy-msg.ts), and prints
 * `opening...transferring...closing...done` and `<n> bytes in <s> seconds = <r> Gb/sec`. The
 * file is read and sent in 1 MiB pieces (the next piece is read while one is sent; rsend waits
 * for the server's credits), where rcopy.c maps the whole file. The exit status is rcopy.c's
 * `return ret` from main: 0, -1 (255) when a call fails, a getaddrinfo code (-2: 254), or the
 * errno the server answered (an OPEN the server could not do: its errno).
 */
import { eagerFeedback } from './startup.js';
import { promises as fsp } from 'node:fs';
import { RsConn, SHUT_RDWR } from './rs-api.js';
import { Errno, getDeviceList, getaddrinfo, type SockAddr } from './rdma.js';
import { errnoFrom, out, perror, progName, runMain } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';
import { gaiCode, gaiText } from './addresses.js';
import { fmtF } from './stream-tool.js';
import { RcopyCmd, encodeClose, encodeOpen, encodeWrite } from './rcopy-msg.js';
import { getResp, sendFull } from './rcopy-io.js';
import { serverRun } from './rcopy-server.js';

/** Bytes per read of the source file. */
const CHUNK = 1 << 20;
/** rcopy.c's default port. */
const DEFAULT_PORT = '7427';

/** The usage text (stdout), as rcopy.c's show_usage prints it; it then exits 1. */
export function usage(prog: string): string {
  return [
    `usage 1: ${prog} [options]`,
    '\t     starts the server application',
    '\t[-p  port_number]',
    `usage 2: ${prog} source server[:destination] [options]`,
    '\t     source - file name and path',
    '\t     server - name or address',
    '\t     destination - file name and path',
    '\t[-p  port_number]',
    '',
  ].join('\n');
}

/** The client's run (rcopy.c's globals). */
class Client {
  fh: fsp.FileHandle | null = null;
  bytes = 0;

  constructor(
    readonly src: string,
    readonly dstAddr: string,
    readonly dstFile: string,
    readonly port: string,
  ) {}

  /** client_connect: the connected rsocket, or the status to return. */
  async connect(): Promise<RsConn | number> {
    let dst: SockAddr;
    try {
      const r = await getaddrinfo(this.dstAddr, this.port, {});
      dst = r.dstAddr as SockAddr;
    } catch (e) {
      out(`getaddrinfo failed: ${gaiText(e)}\n`);
      return gaiCode(e);
    }
    // rsocket() fails without a device, and rcopy.c says nothing.
    if (getDeviceList().length === 0) return -1;
    const c = new RsConn();
    try {
      await c.connect(dst);
    } catch (e) {
      perror('rconnect failed\n', e);
      await c.close();
      return -1;
    }
    return c;
  }

  /** client_open: open the source, send OPEN, take its status (0: the server opened it). */
  async open(c: RsConn): Promise<number> {
    out('opening...');
    try {
      this.fh = await fsp.open(this.src, 'r');
    } catch {
      return -1;
    }
    const fh = this.fh;
    let ret: number;
    try {
      const st = await fh.stat();
      this.bytes = st.size;
      // rcopy.c maps the file here: a directory cannot be (ENODEV), nor an empty file (EINVAL).
      if (st.isDirectory()) ret = Errno.ENODEV;
      else if (st.size === 0) ret = Errno.EINVAL;
      else {
        const { msg, send } = encodeOpen(this.dstFile, st.mode);
        ret = await sendFull(c, msg, 0, send);
        ret = ret !== send ? ret : await getResp(c, RcopyCmd.OPEN);
      }
    } catch (e) {
      ret = errnoFrom(e);
    }
    if (ret) await this.closeFile();
    return ret;
  }

  /** client_start_write: WRITE with the size (0, or what rsend returned). */
  async startWrite(c: RsConn): Promise<number> {
    out('transferring');
    const msg = encodeWrite(BigInt(this.bytes));
    const n = await sendFull(c, msg);
    return n !== msg.length ? n : 0;
  }

  /**
   * rsend(rs, file_addr, bytes): the file's bytes, each piece read while the one before is sent.
   * Resolves with the bytes sent (all of them, or those before the connection failed), -1 when
   * none could be.
   */
  async sendFile(c: RsConn): Promise<number> {
    const fh = this.fh as fsp.FileHandle;
    const bufs = [Buffer.allocUnsafe(Math.min(CHUNK, this.bytes)), Buffer.allocUnsafe(Math.min(CHUNK, this.bytes))];
    const read = (i: number, pos: number): Promise<number> =>
      pos >= this.bytes ? Promise.resolve(0) : fh.read(bufs[i] as Buffer, 0, Math.min(CHUNK, this.bytes - pos), pos).then((r) => r.bytesRead);
    let sent = 0;
    let cur = 0;
    let next = read(cur, 0);
    while (sent < this.bytes) {
      let n: number;
      try {
        n = await next;
      } catch {
        n = 0;
      }
      // The file shrank or cannot be read: what was sent is all there is (rcopy.c's mapping
      // would fault).
      if (n === 0) break;
      const piece = bufs[cur] as Buffer;
      cur ^= 1;
      next = read(cur, sent + n);
      const r = await sendFull(c, piece, 0, n);
      if (r !== n) {
        next.catch(() => {});
        const total = sent + Math.max(r, 0);
        return total > 0 ? total : -1;
      }
      sent += n;
    }
    next.catch(() => {});
    return sent;
  }

  /** client_close: CLOSE and its status; `done` once answered. Closes the source. */
  async close(c: RsConn): Promise<void> {
    out('closing...');
    const msg = encodeClose();
    if ((await sendFull(c, msg)) === msg.length && (await getResp(c, RcopyCmd.CLOSE)) === 0) out('done\n');
    await this.closeFile();
  }

  async closeFile(): Promise<void> {
    const fh = this.fh;
    this.fh = null;
    await fh?.close().catch(() => {});
  }

  /** client_run. */
  async run(): Promise<number> {
    const conn = await this.connect();
    if (typeof conn === 'number') return conn;
    const c = conn;
    let ret = await this.open(c);
    let usec = 0;
    if (!ret) {
      ret = await this.startWrite(c);
      if (!ret) {
        out('...');
        const t0 = process.hrtime.bigint();
        const len = await this.sendFile(c);
        if (len === this.bytes) ret = await getResp(c, RcopyCmd.WRITE);
        else ret = Number(BigInt.asIntN(32, BigInt(len)));
        usec = Number((process.hrtime.bigint() - t0) / 1000n);
      }
      await this.close(c);
    }
    await c.shutdown(SHUT_RDWR).catch(() => {});
    await c.close();
    if (!ret) this.showPerf(usec);
    return ret;
  }

  /** show_perf: `usec` is a float in rcopy.c. */
  showPerf(usec: number): void {
    const us = Math.fround(usec);
    out(`${this.bytes} bytes in ${fmtF(us / 1000000, 2)} seconds = ${fmtF((this.bytes * 8) / (1000 * us), 2)} Gb/sec\n`);
  }
}

/** Options with getopt("p:"): the port, or null after a bad option (usage printed). */
function parsePort(argv: readonly string[], prog: string): string | null {
  let port = DEFAULT_PORT;
  const g = new Getopt(argv, 'p:');
  for (let it = g.next(); it; it = g.next()) {
    if (it.opt === 'p') port = it.optarg ?? '';
    else {
      getoptComplaint(prog, it, 'p:');
      out(usage(prog));
      return null;
    }
  }
  return port;
}

async function main(argv: readonly string[]): Promise<number> {
  eagerFeedback();
  const prog = progName('rcopy');
  if (argv.length === 0 || (argv[0] as string).startsWith('-')) {
    const port = parsePort(argv, prog);
    if (port === null) return 1;
    return serverRun(port);
  }
  if (argv.length < 2) {
    out(usage(prog));
    return 1;
  }
  const src = argv[0] as string;
  const arg = argv[1] as string;
  const colon = arg.indexOf(':');
  const dstAddr = colon < 0 ? arg : arg.slice(0, colon);
  const dstFile = colon < 0 ? src : arg.slice(colon + 1);
  const port = parsePort(argv, prog);
  if (port === null) return 1;
  return new Client(src, dstAddr, dstFile, port).run();
}

runMain('rcopy', main);
