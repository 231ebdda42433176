/**
 * Helpers shared by the command-line tools (the role of rdma-core's `librdmacm/examples/common.c`
 * and `common.h`, plus the C runtime pieces the tools lean on: getopt(3), atoi(3), perror(3),
 * exit(3) and sem_t).
 *
 * Output discipline: every line goes through {@link out} / {@link errOut}, which write to the
 * process streams in call order. {@link exit} waits until both streams have handed everything to
 * the OS before the process ends, and silences any later write — like C's `exit()`, which flushes
 * stdio and stops the other threads, so nothing printed before it is lost and nothing after it
 * appears. It also waits (3 s at most) for connections closed gracefully to finish sending, as the
 * kernel does for a C tool's sockets after it exits.
 */
import { constants as bufferConstants } from 'node:buffer';
import { realpathSync } from 'node:fs';
import os from 'node:os';
import { basename as pathBasename } from 'node:path';
import { fileURLToPath } from 'node:url';
// The APIs only, no transport: each tool loads the transports it uses (src/cli/rdma.ts or the
// package entry point), so that `rstream -T s` loads none.
import {
  GaiError,
  RAI,
  createEventChannel,
  createId,
  gaiStrerror,
  getaddrinfo,
  type CmEvent,
  type CmId,
  type EventChannel,
  type PortSpace,
  type RdmaAddrinfo,
  type RdmaAddrinfoHints,
  type SockAddr,
} from '../cm/index.js';
import { getDeviceList, settleConnections } from '../verbs/index.js';
import { RdmaError } from '../errors.js';
import { errnoOf, strerror } from '../errno.js';

// -- output and process exit ----------------------------------------------------------------------

let exiting = false;

/** True once {@link exit} was called: output is dropped from then on. */
export function isExiting(): boolean {
  return exiting;
}

/** Write to stdout (printf). A string is written as UTF-8; pass a Buffer for raw bytes. */
export function out(data: string | Uint8Array): void {
  if (exiting) return;
  process.stdout.write(data);
}

/** Write to stderr (fprintf(stderr, ...)). */
export function errOut(data: string | Uint8Array): void {
  if (exiting) return;
  process.stderr.write(data);
}

/** Resolve once `stream` has no buffered data left (or it is gone). */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (stream.destroyed || stream.writableLength === 0) {
      resolve();
      return;
    }
    const done = (): void => {
      stream.off('drain', check);
      stream.off('error', done);
      stream.off('close', done);
      resolve();
    };
    const check = (): void => {
      if (stream.writableLength === 0) done();
    };
    stream.on('drain', check);
    stream.once('error', done);
    stream.once('close', done);
  });
}

/**
 * C's `exit(code)`: the status is `code & 0xff` (so -1 → 255, -2 → 254). Flushes stdout and
 * stderr first, then ends the process; every later {@link out}/{@link errOut} is dropped.
 * Calling it again does nothing (the first status wins).
 */
export function exit(code: number): void {
  if (exiting) return;
  exiting = true;
  const status = code & 0xff;
  process.exitCode = status;
  const guard = setTimeout(() => process.exit(status), 5000);
  // Connections we closed must still reach the peer whole (the kernel lingers a closed socket; a
  // Node process that exits does not): at most 3 s, as our graceful close waits for the peer's FIN.
  // One turn of the event loop first: a datagram a device handed to a UDP socket leaves on the
  // next tick (dgram's address lookup), which a chain of promises ending here has not reached —
  // the C tools' sends are on the wire once ibv_post_send returns.
  const turn = new Promise<void>((r) => setImmediate(r));
  void Promise.all([turn, drained(process.stdout), drained(process.stderr), settleConnections(3000)]).then(() => {
    clearTimeout(guard);
    process.exit(status);
  });
}

/**
 * Catch anything unexpected: print one line (`<prog>: <message>`) on stderr and exit non-zero
 * (status 1), instead of a stack trace.
 */
export function installTopLevelHandlers(prog: string): void {
  const die = unexpected(prog);
  process.on('uncaughtException', die);
  process.on('unhandledRejection', die);
  // A closed stdout/stderr (e.g. `rping ... | head`) must not turn into an uncaught EPIPE.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
}

/** The handler that ends the process on an unexpected error: one line on stderr, status 1. */
function unexpected(prog: string): (e: unknown) => void {
  return (e: unknown): void => {
    if (exiting) return;
    const msg = e instanceof Error ? e.message : String(e);
    process.stderr.write(`${prog}: unexpected error: ${msg.split('\n')[0]}\n`);
    exit(1);
  };
}

/**
 * Run a tool: install the top-level handlers, call `main` with the arguments after the script,
 * and exit with the status it returns (an exception: one line on stderr, status 1).
 */
export function runMain(prog: string, main: (argv: string[]) => Promise<number>): void {
  installTopLevelHandlers(prog);
  main(process.argv.slice(2)).then((code) => exit(code), unexpected(prog));
}

/** Whether the module at `url` (its `import.meta.url`) is the script node was started with. */
export function isMainModule(url: string): boolean {
  const a = process.argv[1];
  if (!a) return false;
  try {
    return realpathSync(a) === fileURLToPath(url);
  } catch {
    return false;
  }
}

/** The program name for messages (`basename(argv[0])`). */
export function basename(p: string): string {
  return pathBasename(p);
}

// -- errno ----------------------------------------------------------------------------------------

/** The positive errno number an error carries (RdmaError, Node SystemError), else EIO (5). */
export function errnoFrom(e: unknown): number {
  if (e instanceof RdmaError) return e.errno;
  const n = (e as { errno?: unknown } | null)?.errno;
  if (typeof n === 'number' && Number.isInteger(n) && n !== 0) return Math.abs(n);
  return 5;
}

/** perror(3): `<prefix>: <strerror(errno)>` on stderr. */
export function perror(prefix: string, e: unknown): void {
  errOut(`${prefix}: ${strerror(errnoFrom(e))}\n`);
}

// -- numbers --------------------------------------------------------------------------------------

/**
 * atoi(3) as glibc implements it, `(int) strtol(s, NULL, 10)`: leading white space, an optional
 * sign, then decimal digits up to the first non-digit; no digits gives 0. Out-of-range values
 * saturate at the 64-bit long limits and are then truncated to 32 bits (so "99999999999" gives
 * 1215752191 and a huge value gives -1).
 */
export function atoi(s: string): number {
  const m = /^[ \t\n\v\f\r]*([+-]?)(\d+)/.exec(s);
  if (!m) return 0;
  let v = BigInt(m[2] as string);
  if (m[1] === '-') v = -v;
  const LONG_MAX = (1n << 63n) - 1n;
  const LONG_MIN = -(1n << 63n);
  if (v > LONG_MAX) v = LONG_MAX;
  if (v < LONG_MIN) v = LONG_MIN;
  return Number(BigInt.asIntN(32, v));
}

/**
 * common.c `size_str()`: a byte count with k/m/g suffixes (powers of 1024); one decimal digit is
 * shown when the integer part is below 10 and the digit is non-zero (1536 → "1.5k", 4096 → "4k",
 * 1000 → "1000").
 */
export function sizeStr(size: number): string {
  let base = 1;
  let mag = '';
  if (size >= 2 ** 30) {
    base = 2 ** 30;
    mag = 'g';
  } else if (size >= 2 ** 20) {
    base = 2 ** 20;
    mag = 'm';
  } else if (size >= 2 ** 10) {
    base = 2 ** 10;
    mag = 'k';
  }
  const whole = Math.trunc(size / base);
  let fraction = 0;
  if (whole < 10) fraction = Math.trunc(((size % base) * 10) / base);
  return fraction ? `${whole}.${fraction}${mag}` : `${whole}${mag}`;
}

/** common.c `cnt_str()`: decimal units b/m/k (10^9, 10^6, 10^3), integer division. */
export function cntStr(cnt: number): string {
  if (cnt >= 1_000_000_000) return `${Math.trunc(cnt / 1_000_000_000)}b`;
  if (cnt >= 1_000_000) return `${Math.trunc(cnt / 1_000_000)}m`;
  if (cnt >= 1000) return `${Math.trunc(cnt / 1000)}k`;
  return `${cnt}`;
}

/** common.c `size_to_count()`: default iteration count for a transfer size. */
export function sizeToCount(size: number): number {
  if (size >= 1 << 20) return 100;
  if (size >= 1 << 16) return 1000;
  if (size >= 1 << 10) return 10000;
  return 100000;
}

/**
 * The running byte pattern of common.c `format_buf()` / `verify_buf()`: 0, 1, ..., 255, 0, ...
 * continuing across calls. Keep one instance per direction (the C code uses static counters).
 */
export class BytePattern {
  private fmtNext = 0;
  private verifyNext = 0;
  private verified = 0;

  /** Fill `buf` with the next bytes of the pattern. */
  format(buf: Uint8Array): void {
    for (let i = 0; i < buf.length; i++) {
      buf[i] = this.fmtNext;
      this.fmtNext = (this.fmtNext + 1) & 0xff;
    }
  }

  /**
   * Check `buf` against the pattern. On the first mismatch prints
   * `data verification failed byte <n>` (stdout; n = running byte index) and returns -1.
   */
  verify(buf: Uint8Array): number {
    for (let i = 0; i < buf.length; i++, this.verified++) {
      if (buf[i] !== this.verifyNext) {
        out(`data verification failed byte ${this.verified}\n`);
        return -1;
      }
      this.verifyNext = (this.verifyNext + 1) & 0xff;
    }
    return 0;
  }
}

// -- getopt ---------------------------------------------------------------------------------------

/** One option returned by {@link Getopt.next}. */
export interface GetoptItem {
  /** The option character; `'?'` for an unknown option or a missing argument (`':'` for a
   *  missing argument when the option string starts with `':'`); `'\x01'` for a non-option
   *  argument in return-in-order mode (option string starting with `'-'`). */
  opt: string;
  /** The option's argument (`optarg`), when it takes one. */
  optarg?: string;
  /** For `'?'`/`':'`: the offending option character (`optopt`). */
  optopt?: string;
}

/**
 * Take this port's long options (additions to rdma-core's tools) out of `argv`, before a `--`:
 * `flags` stand alone (`--json`), `valued` take a number (`--warmup N` or `--warmup=N`). What is
 * left goes to the tool's getopt string. `bad` names the first valued option without a
 * non-negative integer.
 */
export function takeLongOptions(
  argv: readonly string[],
  flags: readonly string[],
  valued: readonly string[],
): { args: string[]; flags: Set<string>; values: Map<string, number>; bad: string | null } {
  const r = { args: [] as string[], flags: new Set<string>(), values: new Map<string, number>(), bad: null as string | null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') {
      r.args.push(...argv.slice(i));
      break;
    }
    const name = a.startsWith('--') ? a.slice(2).split('=', 1)[0] as string : '';
    if (flags.includes(name) && a === `--${name}`) {
      r.flags.add(name);
      continue;
    }
    if (!valued.includes(name)) {
      r.args.push(a);
      continue;
    }
    const v = a === `--${name}` ? argv[++i] : a.slice(name.length + 3);
    if (v === undefined || !/^\d+$/.test(v)) {
      r.bad ??= name;
      continue;
    }
    r.values.set(name, Number(v));
  }
  return r;
}

/**
 * getopt(3) with glibc's semantics for short options, always with `opterr = 0` (nothing is
 * printed; the caller reports errors):
 * - grouped flags (`-vVd`), attached (`-S64`) or separate (`-S 64`) arguments;
 * - `--` ends the options; a lone `-` is a non-option argument;
 * - non-option arguments are skipped and collected in {@link operands} (GNU permutation), unless
 *   the option string starts with `'+'` or `POSIXLY_CORRECT` is set (stop at the first one), or it
 *   starts with `'-'` (they are returned in order as option `'\x01'`);
 * - `--name` is not a long option here: it parses as the short option `'-'`, which is unknown.
 */
export class Getopt {
  /** Non-option arguments, in order (complete once {@link next} returned null). */
  readonly operands: string[] = [];
  private readonly args: readonly string[];
  private readonly spec: string;
  private readonly mode: 'permute' | 'stop' | 'inorder';
  private readonly colon: boolean;
  private idx = 0;
  private pos = 0;

  /** @param args the arguments without the program name (`process.argv.slice(2)`). */
  constructor(args: readonly string[], optstring: string) {
    this.args = args;
    let s = optstring;
    let mode: 'permute' | 'stop' | 'inorder' = process.env['POSIXLY_CORRECT'] !== undefined ? 'stop' : 'permute';
    if (s.startsWith('+')) {
      mode = 'stop';
      s = s.slice(1);
    } else if (s.startsWith('-')) {
      mode = 'inorder';
      s = s.slice(1);
    }
    this.mode = mode;
    this.colon = s.startsWith(':');
    this.spec = this.colon ? s.slice(1) : s;
  }

  /** Index of the next argument to look at (`optind`, 0-based without the program name). */
  get optind(): number {
    return this.idx;
  }

  /** The next option, or null when the options are exhausted. */
  next(): GetoptItem | null {
    for (;;) {
      if (this.pos === 0) {
        const a = this.args[this.idx];
        if (a === undefined) return null;
        if (a === '--') {
          this.idx++;
          this.operands.push(...this.args.slice(this.idx));
          this.idx = this.args.length;
          return null;
        }
        if (a.length < 2 || a[0] !== '-') {
          if (this.mode === 'stop') {
            this.operands.push(...this.args.slice(this.idx));
            this.idx = this.args.length;
            return null;
          }
          this.idx++;
          if (this.mode === 'inorder') return { opt: '\x01', optarg: a };
          this.operands.push(a);
          continue;
        }
        this.pos = 1;
      }
      const arg = this.args[this.idx] as string;
      const c = arg[this.pos] as string;
      this.pos++;
      const at = c === ':' || c === ';' ? -1 : this.spec.indexOf(c);
      const atEnd = this.pos >= arg.length;
      if (at < 0) {
        if (atEnd) this.advance();
        return { opt: '?', optopt: c };
      }
      if (this.spec[at + 1] !== ':') {
        if (atEnd) this.advance();
        return { opt: c };
      }
      const optional = this.spec[at + 2] === ':';
      if (!atEnd) {
        const optarg = arg.slice(this.pos);
        this.advance();
        return { opt: c, optarg };
      }
      this.advance();
      if (optional) return { opt: c };
      const nextArg = this.args[this.idx];
      if (nextArg === undefined) return { opt: this.colon ? ':' : '?', optopt: c };
      this.idx++;
      return { opt: c, optarg: nextArg };
    }
  }

  private advance(): void {
    this.idx++;
    this.pos = 0;
  }
}

// -- addresses ------------------------------------------------------------------------------------

/** A resolved host: the first getaddrinfo answer (`struct sockaddr_in`/`sockaddr_in6`). */
export interface HostAddr {
  address: string;
  family: 'IPv4' | 'IPv6';
}

/**
 * getaddrinfo(name, NULL, NULL, ...) keeping only the first answer, as the tools do. IP literals
 * (IPv6 with a `%scope` too) are taken as they are; names go through the resolver.
 * @throws GaiError with glibc's EAI code (`-2` EAI_NONAME for an unknown or empty name).
 */
export async function resolveHost(name: string): Promise<HostAddr> {
  if (name === '') throw new GaiError(-2, 'EAI_NONAME', gaiStrerror(-2));
  const r = await getaddrinfo(name, null, {});
  const a = r.dstAddr;
  if (!a || !a.address) throw new GaiError(-2, 'EAI_NONAME', gaiStrerror(-2));
  return { address: canonicalIp(a.address), family: a.family === 'IPv6' || (a.family === undefined && a.address.includes(':')) ? 'IPv6' : 'IPv4' };
}

/**
 * The canonical text of an IPv6 literal (`::0` → `::`, `0:0::1` → `::1`), so that spellings of
 * the same address compare equal (the wildcard `-a ::0` in particular). Anything else, and
 * literals with a `%scope`, are returned unchanged.
 */
export function canonicalIp(address: string): string {
  if (!address.includes(':') || address.includes('%')) return address;
  try {
    const h = new URL(`http://[${address}]/`).hostname;
    if (!h.startsWith('[') || !h.endsWith(']')) return address;
    const c = h.slice(1, -1);
    // Keep IPv4-mapped addresses in their dotted form (::ffff:127.0.0.1).
    const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(c);
    if (!m) return c;
    const hi = parseInt(m[1] as string, 16);
    const lo = parseInt(m[2] as string, 16);
    return `::ffff:${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  } catch {
    return address;
  }
}

/**
 * inet_ntop(AF_INET6, ...) as glibc formats it: lower-case hex words, the longest run of two or
 * more zero words (the first of equal runs) as `::`, and the last 32 bits in dotted form for
 * IPv4-compatible (`::a.b.c.d`) and IPv4-mapped (`::ffff:a.b.c.d`) addresses. Used for GIDs.
 */
export function inetNtop6(b: Uint8Array): string {
  const w: number[] = [];
  for (let i = 0; i < 8; i++) w.push((((b[2 * i] ?? 0) << 8) | (b[2 * i + 1] ?? 0)) >>> 0);
  let best = { base: -1, len: 0 };
  let cur = { base: -1, len: 0 };
  for (let i = 0; i < 8; i++) {
    if (w[i] === 0) {
      if (cur.base === -1) cur = { base: i, len: 1 };
      else cur.len++;
    } else if (cur.base !== -1) {
      if (best.base === -1 || cur.len > best.len) best = cur;
      cur = { base: -1, len: 0 };
    }
  }
  if (cur.base !== -1 && (best.base === -1 || cur.len > best.len)) best = cur;
  if (best.base !== -1 && best.len < 2) best = { base: -1, len: 0 };
  let s = '';
  for (let i = 0; i < 8; i++) {
    if (best.base !== -1 && i >= best.base && i < best.base + best.len) {
      if (i === best.base) s += ':';
      continue;
    }
    if (i !== 0) s += ':';
    if (i === 6 && best.base === 0 && (best.len === 6 || (best.len === 5 && w[5] === 0xffff))) {
      s += `${b[12] ?? 0}.${b[13] ?? 0}.${b[14] ?? 0}.${b[15] ?? 0}`;
      return s;
    }
    s += (w[i] as number).toString(16);
  }
  if (best.base !== -1 && best.base + best.len === 8) s += ':';
  return s;
}

/** The EAI code of a resolver failure (GaiError), else -1 (EAI_BADFLAGS, as glibc reports -1). */
export function eaiOf(e: unknown): number {
  return e instanceof GaiError ? e.eai : -1;
}

/** `gai_strerror()` text for the error of {@link resolveHost}. */
export function gaiMessage(e: unknown): string {
  return e instanceof GaiError ? e.message : gaiStrerror(-1);
}

/** A socket address from a host and a port. */
export function sockAddr(host: HostAddr, port: number): SockAddr {
  return { address: host.address, port, family: host.family };
}

/** The wildcard address of a family (`0.0.0.0` / `::`). */
export function anyAddr(family: 'IPv4' | 'IPv6' = 'IPv4'): HostAddr {
  return { address: family === 'IPv6' ? '::' : '0.0.0.0', family };
}

// -- CM calls -------------------------------------------------------------------------------------

/**
 * common.c `create_first_event_channel()`: an event channel, or null after printing
 * `No RDMA devices were detected` (no device: ENODEV) or
 * `failed to create RDMA CM event channel: <strerror>`. The errno is in `result.errno`.
 */
export function createFirstEventChannel(): { channel: EventChannel | null; errno: number } {
  let ndev = 0;
  try {
    ndev = getDeviceList().length;
  } catch (e) {
    perror('failed to create RDMA CM event channel', e);
    return { channel: null, errno: errnoFrom(e) };
  }
  if (ndev === 0) {
    errOut('No RDMA devices were detected\n');
    return { channel: null, errno: 19 };
  }
  try {
    return { channel: createEventChannel(), errno: 0 };
  } catch (e) {
    perror('failed to create RDMA CM event channel', e);
    return { channel: null, errno: errnoFrom(e) };
  }
}

// -- threads ------------------------------------------------------------------------------------

/**
 * The tools' `connect_events()` / `disconnect_events()`: while `left()` is non-zero and the last
 * handler returned 0, take the next event from `channel`, hand it to `handle`, then ack it. The
 * handler's last result is returned; a failing rdma_get_cm_event returns what `failed` makes of
 * the error.
 */
export async function cmEventLoop(
  channel: EventChannel,
  left: () => number,
  handle: (event: CmEvent) => Promise<number>,
  failed: (e: unknown) => number,
): Promise<number> {
  let ret = 0;
  while (left() && !ret) {
    let event: CmEvent;
    try {
      event = await channel.getEvent();
    } catch (e) {
      return failed(e);
    }
    ret = await handle(event);
    event.ack();
  }
  return ret;
}

/**
 * The `alloc_nodes()` of cmatose, udaddy and mckey: `count` nodes made by `make(i)`, each given
 * an id on `channel` (its context the node) unless `ps` is null (a server's nodes get theirs from
 * the requests). A negative count fails as its malloc would (`<prog>: unable to allocate memory
 * for test nodes`, -ENOMEM); a failing rdma_create_id destroys the ids made so far (-errno).
 */
export function allocCmNodes<N extends { cmaId: CmId | null }>(
  prog: string,
  count: number,
  make: (i: number) => N,
  channel: EventChannel | null,
  ps: PortSpace | null,
): { nodes: N[]; ret: number } {
  const nodes: N[] = [];
  if (count < 0) {
    // malloc(sizeof *nodes * connections) of a negative count fails.
    out(`${prog}: unable to allocate memory for test nodes\n`);
    return { nodes, ret: -errnoOf('ENOMEM') };
  }
  for (let i = 0; i < count; i++) {
    const node = make(i);
    nodes.push(node);
    if (ps === null) continue;
    try {
      node.cmaId = createId(channel, node, ps);
    } catch (e) {
      for (const n of nodes) void n.cmaId?.destroy().catch(() => {});
      return { nodes, ret: -errnoFrom(e) };
    }
  }
  return { nodes, ret: 0 };
}

/** strncasecmp(word, arg, n) == 0: `arg` starts with the first `n` letters of `word`. */
export function prefixIs(arg: string, word: string, n: number): boolean {
  return arg.slice(0, n).toLowerCase() === word.slice(0, n) && arg.length >= Math.min(n, word.length);
}

/**
 * `-f address_format` of cmatose and udaddy: `ip` (or `ipv6`) makes the addresses numeric, `gid`
 * numeric AF_IB ones, `name` is the default; another word warns on stderr and changes nothing.
 */
export function addressFormatArg(arg: string, hints: RdmaAddrinfoHints): void {
  if (prefixIs(arg, 'ip', 2)) hints.flags = RAI.NUMERICHOST;
  else if (prefixIs(arg, 'gid', 3)) {
    hints.flags = RAI.NUMERICHOST | RAI.FAMILY;
    hints.family = 'IB';
  } else if (!prefixIs(arg, 'name', 4)) errOut('Warning: unknown address format\n');
}

/**
 * A counting semaphore (`sem_t`): {@link post} increments, {@link wait} resolves once it can
 * decrement. Waiters are served in FIFO order.
 */
export class Semaphore {
  private count: number;
  private readonly waiters: (() => void)[] = [];

  constructor(initial = 0) {
    this.count = initial;
  }

  /** sem_post(). */
  post(): void {
    const w = this.waiters.shift();
    if (w) w();
    else this.count++;
  }

  /** sem_wait(). */
  wait(): Promise<void> {
    if (this.count > 0) {
      this.count--;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  /** Current value (sem_getvalue). */
  get value(): number {
    return this.count;
  }
}

const objIds = new WeakMap<object, number>();
let nextObjId = 1;

/**
 * Stands in for `%p` in debug output: a stable per-process id for an object, printed like a
 * pointer (`0x1`, `0x2`, ...). Pointers have no meaning here; ids at least tell objects apart.
 */
export function objId(o: object | null | undefined): string {
  if (!o) return '(nil)';
  let n = objIds.get(o);
  if (n === undefined) {
    n = nextObjId++;
    objIds.set(o, n);
  }
  return `0x${n.toString(16)}`;
}

// -- C library pieces used by the rdma_cm example tools ------------------------------------------

/**
 * strtoul(3) with glibc's rules, as an unsigned 64-bit value: leading white space, an optional
 * sign (a minus negates modulo 2^64), then digits in `base` (0: `0x`/`0X` prefix → 16, leading
 * `0` → 8, else 10); parsing stops at the first invalid character; no digits gives 0; overflow
 * saturates at 2^64-1. Cast with {@link u8}/{@link u32} as the C code does.
 */
export function strtoul(s: string, base = 0): bigint {
  const m = /^[ \t\n\v\f\r]*([+-]?)(.*)$/s.exec(s) as RegExpExecArray;
  const neg = m[1] === '-';
  let rest = m[2] as string;
  let b = base;
  if ((b === 0 || b === 16) && /^0[xX][0-9a-fA-F]/.test(rest)) {
    rest = rest.slice(2);
    b = 16;
  } else if (b === 0) b = rest.startsWith('0') ? 8 : 10;
  let v = 0n;
  let any = false;
  const max = (1n << 64n) - 1n;
  let overflow = false;
  for (const ch of rest) {
    const d = parseInt(ch, 36);
    if (Number.isNaN(d) || d >= b) break;
    any = true;
    v = v * BigInt(b) + BigInt(d);
    if (v > max) overflow = true;
  }
  if (!any) return 0n;
  if (overflow) return max;
  return neg ? BigInt.asUintN(64, -v) : v;
}

// -- memory allocation ----------------------------------------------------------------------------

/** `(size_t) value` of a C `int`: a negative int is 2^64 + value (far beyond any memory). */
export function sizeT(v: number): number {
  return v < 0 ? 2 ** 64 + v : v;
}

/**
 * Whether `calloc(nmemb, size)` (or `malloc(nmemb * size)`) succeeds, for `size_t` arguments
 * (see {@link sizeT}): no larger than this machine's memory — Linux's default overcommit
 * heuristic refuses a single allocation beyond RAM plus swap — and, for what this process
 * really allocates, no larger than a Buffer can be.
 */
export function cAllocOk(nmemb: number, size: number, buffer = false): boolean {
  const n = nmemb * size;
  return n <= os.totalmem() && (!buffer || n <= bufferConstants.MAX_LENGTH);
}

/**
 * `malloc(size)` for a C `int` size, as the tools call it: null (the caller prints its C message)
 * when the allocation fails — a negative size becomes a size_t near 2^64 — else a buffer of that
 * many bytes, not zeroed (large ones are only reserved until used, as malloc's).
 */
export function cMalloc(size: number): Buffer | null {
  const n = sizeT(size);
  if (!cAllocOk(1, n, true)) return null;
  try {
    return Buffer.allocUnsafeSlow(n);
  } catch {
    return null;
  }
}

/** `(uint8_t) value`. */
export function u8(v: bigint | number): number {
  return Number(BigInt.asUintN(8, BigInt(v)));
}

/** `(uint32_t) value`. */
export function u32(v: bigint | number): number {
  return Number(BigInt.asUintN(32, BigInt(v)));
}

/**
 * The message glibc's getopt prints (opterr = 1) for an unknown option or a missing argument:
 * `<prog>: invalid option -- 'x'` / `<prog>: option requires an argument -- 'x'` (stderr).
 */
export function getoptComplaint(prog: string, item: GetoptItem, optstring: string): void {
  const c = item.optopt ?? '?';
  const i = optstring.indexOf(c);
  if (i >= 0 && c !== ':' && optstring[i + 1] === ':') errOut(`${prog}: option requires an argument -- '${c}'\n`);
  else errOut(`${prog}: invalid option -- '${c}'\n`);
}

/**
 * common.c `get_rdma_addr()`: passive (`hints.flags & RAI.PASSIVE`) resolves `src`; active
 * resolves `src` first as a passive address (its result becomes the source) and then `dst`.
 * Failure prints `rdma_getaddrinfo error: <gai_strerror>` (stdout) and returns the EAI code
 * (or -1 for an errno-style failure), as `rdma_getaddrinfo` does.
 */
export async function getRdmaAddr(
  src: string | null,
  dst: string | null,
  port: string,
  hints: RdmaAddrinfoHints,
): Promise<{ ret: number; rai: RdmaAddrinfo | null }> {
  let ret = 0;
  let rai: RdmaAddrinfo | null = null;
  try {
    if ((hints.flags ?? 0) & RAI.PASSIVE) {
      rai = await getaddrinfo(src, port, hints);
    } else {
      const h: RdmaAddrinfoHints = { ...hints };
      if (src !== null) {
        const res = await getaddrinfo(src, null, { ...h, flags: (h.flags ?? 0) | RAI.PASSIVE });
        if (res.srcAddr) h.srcAddr = res.srcAddr;
      }
      rai = await getaddrinfo(dst, port, h);
    }
  } catch (e) {
    ret = eaiOf(e);
    rai = null;
  }
  if (ret) out(`rdma_getaddrinfo error: ${gaiStrerror(ret)}\n`);
  return { ret, rai };
}

/** argv[0] as the C tools print it: the command's name (`rstream`), without the `.js` of our build. */
export function progName(fallback: string): string {
  return basename(process.argv[1] ?? fallback).replace(/\.js$/, '');
}
