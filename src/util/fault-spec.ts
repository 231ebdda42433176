/**
 * The one shape of fault injection on the soft devices: a configuration is a set of named
 * numeric keys, given either as an object to the device's configure function
 * (`roce.configureImpairment`, `iwarp.configureFaults`) or as `key=value,...` text in an
 * environment variable (`RDMACM_ROCE_IMPAIR`, `RDMACM_IWARP_FAULTS`). Each key has a kind:
 *
 * - `prob`: a probability, in [0, 1];
 * - `ms`: a duration in milliseconds, ≥ 0 (fractions allowed);
 * - `count`: a whole number ≥ 0 (an FPDU or datagram number, a period);
 * - `seed`: a whole number ≥ 0 (0: from the clock).
 *
 * Anything else — an unknown key, a value of another kind, a probability outside [0, 1], a
 * negative number — is refused: RdmaError EINVAL from the API; from the environment, one line on
 * stderr naming the variable and the key, and the process exits with status 1 (a fault test run
 * without the faults it asked for would pass for the wrong reason).
 *
 * Random faults draw from {@link faultPrng}, a small seedable generator: the same seed and the
 * same sequence of datagrams or FPDUs give the same pattern. It is not a CSPRNG and is used for
 * nothing a peer must not predict.
 */
import { err } from '../errors.js';

/** The kinds of value a key takes. */
export type FaultKeyKind = 'prob' | 'ms' | 'count' | 'seed';

/**
 * The numeric keys of one device's fault configuration: each API key's name in the environment
 * variable's text and its kind.
 */
export type FaultKeys<T> = { readonly [K in keyof T]?: readonly [envName: string, kind: FaultKeyKind] };

/** Why `v` is not a value of kind `kind`, or null when it is. */
function badValue(kind: FaultKeyKind, v: unknown): string | null {
  if (typeof v !== 'number' || !Number.isFinite(v)) return 'not a number';
  if (v < 0) return 'negative';
  if (kind === 'prob' && v > 1) return 'a probability above 1';
  if ((kind === 'count' || kind === 'seed') && !Number.isSafeInteger(v)) return 'not a whole number';
  return null;
}

/**
 * Check a configuration object against `keys`.
 * @throws RdmaError EINVAL (`op` as its op) naming the first bad key.
 */
export function checkFaults<T extends object>(cfg: Partial<T>, keys: FaultKeys<T>, op: string): void {
  if (typeof cfg !== 'object' || cfg === null) throw err('EINVAL', op, 'not an object');
  for (const [k, v] of Object.entries(cfg)) {
    const key = (keys as Record<string, readonly [string, FaultKeyKind] | undefined>)[k];
    if (key === undefined) throw err('EINVAL', op, `unknown key ${k}`);
    if (v === undefined) continue;
    const why = badValue(key[1], v);
    if (why !== null) throw err('EINVAL', op, `${k} ${String(v)}: ${why}`);
  }
}

/**
 * Parse `key=value,...` text into a configuration of `keys`. `words` maps a key that takes a word
 * rather than a number (`spare=dreq`) to the configuration it stands for.
 * @throws RdmaError EINVAL (`op` as its op) naming the first bad part.
 */
export function parseFaultSpec<T extends object>(
  text: string,
  keys: FaultKeys<T>,
  op: string,
  words: Readonly<Record<string, (v: string) => Partial<T> | null>> = {},
): Partial<T> {
  const byEnv = new Map<string, string>();
  for (const [k, key] of Object.entries(keys) as [string, readonly [string, FaultKeyKind]][]) byEnv.set(key[0], k);
  const out: Record<string, unknown> = {};
  for (const raw of text.split(',')) {
    const part = raw.trim();
    if (part === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0) throw err('EINVAL', op, `${part}: not key=value`);
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    const word = words[k];
    if (word !== undefined) {
      const w = word(v);
      if (w === null) throw err('EINVAL', op, `${k}=${v}: unknown value`);
      Object.assign(out, w);
      continue;
    }
    const apiKey = byEnv.get(k);
    if (apiKey === undefined) throw err('EINVAL', op, `unknown key ${k}`);
    const n = v === '' ? NaN : Number(v);
    const why = badValue((keys as Record<string, readonly [string, FaultKeyKind]>)[apiKey]?.[1] ?? 'ms', n);
    if (why !== null) throw err('EINVAL', op, `${k}=${v}: ${why}`);
    out[apiKey] = n;
  }
  return out as Partial<T>;
}

/**
 * Configure from environment variable `name` through `apply`, which parses the text with `name`
 * as the op of its errors (unset or blank: nothing). A bad value is reported on one line of
 * stderr (`rdmacm: RDMACM_ROCE_IMPAIR: Invalid argument (unknown key foo)`) and ends the process
 * with status 1.
 */
export function faultsFromEnv(name: string, apply: (text: string, op: string) => void): void {
  const text = process.env[name];
  if (text === undefined || text.trim() === '') return;
  try {
    apply(text, name);
  } catch (e) {
    process.stderr.write(`rdmacm: ${(e as Error).message}\n`);
    process.exit(1);
  }
}

/**
 * A seedable pseudo-random sequence of numbers in [0, 1) (mulberry32); seed 0 takes one from the
 * clock. Small and fast; for fault patterns only.
 */
export function faultPrng(seed: number): () => number {
  let a = (seed === 0 ? Date.now() : seed) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A queue that sends items in the order they were added, each no earlier than its due time (ms,
 * `performance.now()` clock), and never before the one added before it: a delay line that keeps
 * order. One timer for the whole queue.
 */
export class DelayLine<T> {
  private readonly items: { due: number; item: T }[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | null = null;
  private lastDue = 0;

  /** `release` sends an item; `unref`: the line does not keep the process alive. */
  constructor(
    private readonly release: (item: T) => void,
    private readonly unref = true,
  ) {}

  /** Items not released yet. */
  get size(): number {
    return this.items.length - this.head;
  }

  /** Add `item`, due `delayMs` from now (or when the one before it is, if that is later). */
  push(item: T, delayMs: number): void {
    const due = Math.max(performance.now() + delayMs, this.lastDue);
    this.lastDue = due;
    this.items.push({ due, item });
    if (this.timer === null) this.arm();
  }

  /**
   * A stall: nothing more is released for `ms` from the time the items held now are due (or from
   * now, when none is). Returns when the stall ends (`performance.now()` clock).
   */
  holdFor(ms: number): number {
    this.lastDue = Math.max(this.lastDue, performance.now()) + ms;
    return this.lastDue;
  }

  /** Take every item not released, oldest first, and stop (the connection is gone). */
  clear(): T[] {
    const left = this.items.slice(this.head).map((x) => x.item);
    this.items.length = 0;
    this.head = 0;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    return left;
  }

  private arm(): void {
    const first = this.items[this.head];
    if (first === undefined) return;
    this.timer = setTimeout(() => this.fire(), Math.max(0, first.due - performance.now()));
    if (this.unref) this.timer.unref();
  }

  private fire(): void {
    this.timer = null;
    const now = performance.now();
    for (;;) {
      const first = this.items[this.head];
      if (first === undefined || first.due > now + 0.5) break;
      this.head++;
      this.release(first.item);
      if (this.timer !== null || this.items.length === 0) return; // cleared or re-armed by release
    }
    if (this.head === this.items.length) {
      this.items.length = 0;
      this.head = 0;
      return;
    }
    if (this.head > 1024) {
      this.items.splice(0, this.head);
      this.head = 0;
    }
    this.arm();
  }
}
