/**
 * The C runtime the command-line tools were written against: stdio and exit(3) ({@link out},
 * {@link errOut}, {@link exit}) with the program's start and name, perror(3), atoi(3) and
 * strtoul(3) with C's integer casts, what malloc(3) would refuse, sem_t and `%p`.
 *
 * Output discipline: every line goes through {@link out} / {@link errOut}, which write to the
 * process streams in call order. {@link exit} waits until both streams have handed everything to
 * the OS before the process ends, and silences any later write — like C's `exit()`, which flushes
 * stdio and stops the other threads, so nothing printed before it is lost and nothing after it
 * appears. It also waits (3 s at most) for connections closed gracefully to finish sending, as the
 * kernel does for a C tool's sockets after it exits.
 */
import { constants as bufferConstants } from 'node:buffer';
import os from 'node:os';
import { basename as pathBasename } from 'node:path';
import { settleConnections, RdmaError, Errno, strerror } from './api.js';

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

/** The program name for messages (`basename(argv[0])`). */
export function basename(p: string): string {
  return pathBasename(p);
}

/** argv[0] as the C tools print it: the command's name (`rstream`), without the `.js` of our build. */
export function progName(fallback: string): string {
  return basename(process.argv[1] ?? fallback).replace(/\.js$/, '');
}

// -- errno ----------------------------------------------------------------------------------------

/** The positive errno number an error carries (RdmaError, Node SystemError), else EIO (5). */
export function errnoFrom(e: unknown): number {
  if (e instanceof RdmaError) return e.errno;
  const n = (e as { errno?: unknown } | null)?.errno;
  if (typeof n === 'number' && Number.isInteger(n) && n !== 0) return Math.abs(n);
  return Errno.EIO;
}

/** perror(3): `<prefix>: <strerror(errno)>` on stderr. */
export function perror(prefix: string, e: unknown): void {
  errOut(`${prefix}: ${strerror(errnoFrom(e))}\n`);
}

/** perror(3) with errno set to `errno`. */
export function perrorN(prefix: string, errno: number): void {
  errOut(`${prefix}: ${strerror(errno)}\n`);
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

/** `strtol(s, NULL, 0)` as an `int`. */
export function strtolInt(s: string): number {
  const neg = /^\s*-/.test(s);
  const m = /^\s*[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)/.exec(s);
  if (m === null) return 0;
  const t = m[1] as string;
  let v = /^0[xX]/.test(t) ? BigInt(t) : t.startsWith('0') && t.length > 1 ? BigInt(`0o${t.slice(1)}`) : BigInt(t);
  if (neg) v = -v;
  return Number(BigInt.asIntN(32, v));
}

/** `strtoul(s, NULL, 0)` stored in an `unsigned int`. */
export function strtoulUint(s: string): number {
  return strtolInt(s) >>> 0;
}

/** `(uint8_t) value`. */
export function u8(v: bigint | number): number {
  return Number(BigInt.asUintN(8, BigInt(v)));
}

/** `(uint32_t) value`. */
export function u32(v: bigint | number): number {
  return Number(BigInt.asUintN(32, BigInt(v)));
}

// -- memory allocation ---------------------------------------------------------------------------

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

// -- threads and pointers ------------------------------------------------------------------------

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
