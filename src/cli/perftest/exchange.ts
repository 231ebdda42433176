/**
 * perftest's TCP side channel (perftest_communication.c): the connection on port 18515, the
 * fixed-size records both ends exchange over it, and their codecs. Every exchange is
 * `ctx_xchg_data_ethernet`'s: the client writes its record then reads the server's; the server
 * reads then writes. In the order the bandwidth and latency tools run them:
 *
 * - the version (`exchange_versions`): 16 bytes, a NUL-padded string such as "6.06";
 * - `check_sys_data`: the cycle buffer (page size) and the cache line size, each a big-endian int;
 * - `check_mtu`: the active MTU as an `enum ibv_mtu` in decimal text, 2 bytes ("5\0");
 * - the QP keys (`ctx_hand_shake`): `KEY_PRINT_FMT_GID` text, 108 bytes with its NUL, when a GID
 *   index is in use (always on RoCE), else `KEY_PRINT_FMT`, 59 bytes; the same record is
 *   exchanged again as a barrier at each synchronisation point;
 * - the bandwidth report (`xchg_bw_reports`): size, iterations (u64 from peers of version 5.33
 *   on), peak, average and message rate (big-endian doubles), one exchange each;
 * - `ctx_close_connection`: a last key exchange, then "done" with its NUL.
 *
 * With `-R` the same records travel over an rdma_cm connection instead (cm-channel.ts).
 */
import net from 'node:net';

/** `KEY_MSG_SIZE`: `KEY_PRINT_FMT` and its NUL. */
export const KEY_MSG_SIZE = 59;
/** `KEY_MSG_SIZE_GID`: `KEY_PRINT_FMT_GID` and its NUL. */
export const KEY_MSG_SIZE_GID = 108;
/** `MAX_VERSION`: the version record. */
export const VERSION_SIZE = 16;
/** The MTU record of peers of version 5.31 on (`sizeof(char[2])`). */
export const MTU_MSG_SIZE = 2;
/** `sizeof "done"`. */
export const DONE_MSG = Buffer.from('done\0', 'latin1');
/** `DEF_PORT`. */
export const DEF_PORT = 18515;

/** `struct pingpong_dest` as it travels. */
export interface PerfDest {
  lid: number;
  outReads: number;
  qpn: number;
  psn: number;
  rkey: number;
  vaddr: bigint;
  gid: Uint8Array;
  srqn: number;
}

/** Why a peer's record was refused (the tool prints perftest's line for it). */
export class ExchangeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExchangeError';
  }
}

const hex = (n: number | bigint, w: number): string => n.toString(16).padStart(w, '0');

/** `sprintf(KEY_PRINT_FMT[_GID])` into its fixed-size record (NUL-padded). */
export function encodeDest(d: PerfDest, withGid: boolean): Buffer {
  let text = `${hex(d.lid & 0xffff, 4)}:${hex(d.outReads >>> 0, 4)}:${hex(d.qpn >>> 0, 6)}:${hex(d.psn >>> 0, 6)}:` +
    `${hex(d.rkey >>> 0, 8)}:${hex(BigInt.asUintN(64, d.vaddr), 16)}:`;
  if (withGid) for (let i = 0; i < 16; i++) text += `${hex(d.gid[i] ?? 0, 2)}:`;
  text += hex(d.srqn >>> 0, 8);
  if (withGid) text += ':';
  const b = Buffer.alloc(withGid ? KEY_MSG_SIZE_GID : KEY_MSG_SIZE);
  b.write(text, 'latin1');
  return b;
}

const HEX_FIELD = /^[0-9a-fA-F]{1,16}$/;

/**
 * The reverse of {@link encodeDest}: `ethernet_read_keys`. perftest reads each field with
 * strtol(16) up to the next ':'; a record without its fields, or a field that is not hex, is
 * refused here ("Couldn't parse line"), where the C reader would run past its buffer.
 */
export function decodeDest(b: Uint8Array, withGid: boolean): PerfDest {
  const size = withGid ? KEY_MSG_SIZE_GID : KEY_MSG_SIZE;
  if (b.length !== size) throw new ExchangeError(`Couldn't read remote address`);
  const nul = b.indexOf(0);
  const text = Buffer.from(b.subarray(0, nul < 0 ? b.length : nul)).toString('latin1');
  const f = text.split(':');
  const want = withGid ? 23 : 7;
  if (f.length < want || f.slice(0, want).some((x) => !HEX_FIELD.test(x))) {
    throw new ExchangeError(`Couldn't parse line <${text}>`);
  }
  const n = (i: number): number => Number.parseInt(f[i] as string, 16);
  const gid = new Uint8Array(16);
  if (withGid) for (let i = 0; i < 16; i++) gid[i] = n(6 + i) & 0xff;
  return {
    lid: n(0) & 0xffff,
    outReads: n(1),
    qpn: n(2) >>> 0,
    psn: n(3) >>> 0,
    rkey: n(4) >>> 0,
    vaddr: BigInt.asUintN(64, BigInt(`0x${f[5]}`)),
    gid,
    srqn: n(withGid ? 22 : 6) >>> 0,
  };
}

/** The version record: `strncpy(version, VERSION, MAX_VERSION)`. */
export function encodeVersion(v: string): Buffer {
  const b = Buffer.alloc(VERSION_SIZE);
  b.write(v.slice(0, VERSION_SIZE - 1), 'latin1');
  return b;
}

/** `atof(rem_version)`: the leading number of the peer's string, 0 when there is none. */
export function versionNumber(b: Uint8Array): number {
  const nul = b.indexOf(0);
  const s = Buffer.from(b.subarray(0, nul < 0 ? b.length : nul)).toString('latin1');
  const m = /^\s*[+-]?(\d+(\.\d*)?|\.\d+)/.exec(s);
  return m ? Number.parseFloat(m[0]) : 0;
}

/** The MTU record: `sprintf(cur, "%d", mtu)`, sent as its first two bytes. */
export function encodeMtu(mtu: number): Buffer {
  const b = Buffer.alloc(MTU_MSG_SIZE);
  b.write(String(mtu).slice(0, MTU_MSG_SIZE), 'latin1');
  return b;
}

/** `strtol(rem, NULL, 10)` of the peer's MTU record (0 when it holds no number). */
export function decodeMtu(b: Uint8Array): number {
  const m = /^\s*[+-]?\d+/.exec(Buffer.from(b).toString('latin1'));
  return m ? Number.parseInt(m[0], 10) : 0;
}

/** `struct bw_report_data`, the fields that travel. */
export interface BwReport {
  size: bigint;
  iters: bigint;
  bwPeak: number;
  bwAvg: number;
  msgRate: number;
}

/** A record, sent after another. The exchange works one record at a time (peer bytes in order). */
export class SideChannel {
  private buf: Buffer = Buffer.alloc(0);
  private want: { n: number; resolve: (b: Buffer) => void; reject: (e: Error) => void } | null = null;
  private ended: Error | null = null;
  private timer: NodeJS.Timeout | null = null;

  private constructor(
    private readonly sock: net.Socket,
    /** Whether this end is the client (it writes first). */
    readonly isClient: boolean,
    /** How long one read may wait for the peer (perftest's reads block; ours end). */
    private readonly timeoutMs: number,
  ) {
    sock.setNoDelay(true);
    sock.on('data', (d: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      this.pump();
    });
    const gone = (e?: Error): void => {
      this.ended ??= e ?? new Error('connection closed by peer');
      this.pump();
    };
    sock.on('error', gone);
    sock.on('close', () => gone());
  }

  /** `ethernet_client_connect`: one TCP connection to the server. */
  static connect(host: string, port: number, timeoutMs: number): Promise<SideChannel> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host, port, family: 4 });
      s.once('connect', () => resolve(new SideChannel(s, true, timeoutMs)));
      s.once('error', reject);
    });
  }

  /** `ethernet_server_connect`: listen (backlog 1), take one connection, stop listening. */
  static accept(port: number, timeoutMs: number, onListening: () => void = () => {}): Promise<SideChannel> {
    return new Promise((resolve, reject) => {
      const srv = net.createServer({ noDelay: true });
      srv.once('error', reject);
      srv.once('connection', (s) => {
        srv.close();
        resolve(new SideChannel(s, false, timeoutMs));
      });
      srv.listen({ port, host: '0.0.0.0', backlog: 1 }, onListening);
    });
  }

  private pump(): void {
    const w = this.want;
    if (!w) return;
    if (this.buf.length >= w.n) {
      this.want = null;
      if (this.timer) clearTimeout(this.timer);
      const b = Buffer.from(this.buf.subarray(0, w.n));
      this.buf = this.buf.subarray(w.n);
      w.resolve(b);
    } else if (this.ended) {
      this.want = null;
      if (this.timer) clearTimeout(this.timer);
      w.reject(this.ended);
    }
  }

  /** Read exactly `n` bytes; rejects when the peer closes first or stays silent too long. */
  read(n: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.want = { n, resolve, reject };
      this.timer = setTimeout(() => {
        if (this.want) {
          this.want = null;
          reject(new Error('timed out waiting for the peer'));
        }
      }, this.timeoutMs);
      this.pump();
    });
  }

  write(b: Uint8Array): void {
    this.sock.write(b);
  }

  /** `ctx_xchg_data_ethernet`: the client writes then reads, the server reads then writes. */
  async xchg(mine: Uint8Array, size = mine.length): Promise<Buffer> {
    if (this.isClient) {
      this.write(mine);
      return this.read(size);
    }
    const rem = await this.read(size);
    this.write(mine);
    return rem;
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.sock.end();
    this.sock.destroySoon();
  }
}

const u64 = (v: bigint): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt.asUintN(64, v));
  return b;
};
const f64 = (v: number): Buffer => {
  const b = Buffer.alloc(8);
  b.writeDoubleBE(v);
  return b;
};

/** `xchg_bw_reports`: five exchanges (iterations as u32 to peers older than 5.33). */
export async function xchgBwReports(ch: { xchg(mine: Uint8Array, size?: number): Promise<Buffer> }, mine: BwReport, remVersion: number): Promise<BwReport> {
  const size = (await ch.xchg(u64(mine.size))).readBigUInt64BE();
  let iters: bigint;
  if (remVersion >= 5.33) iters = (await ch.xchg(u64(mine.iters))).readBigUInt64BE();
  else {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(Number(BigInt.asUintN(32, mine.iters)));
    iters = BigInt((await ch.xchg(b)).readUInt32BE());
  }
  const bwPeak = (await ch.xchg(f64(mine.bwPeak))).readDoubleBE();
  const bwAvg = (await ch.xchg(f64(mine.bwAvg))).readDoubleBE();
  const msgRate = (await ch.xchg(f64(mine.msgRate))).readDoubleBE();
  return { size, iters, bwPeak, bwAvg, msgRate };
}
