/**
 * A FIFO ring / double-ended queue over a power-of-two backing array.
 *
 * Used by the CQ for its CQEs and meant for SQ/RQ/ORQ/IRQ style queues: `push`/`shift`/`peek`/`at`
 * never allocate. The backing array starts small and doubles (the only allocation) until it can
 * hold `capacity` elements, so a 4M-entry CQ that never holds more than a few entries stays small.
 * Vacated slots are cleared so the ring never keeps a shifted element alive.
 */
import { err } from '../errors.js';

/** Largest backing array: 2^30 slots. */
const MAX_BACKING = 2 ** 30;

/** Smallest power of two >= n (n >= 1, n <= 2^30). */
export function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/**
 * A bounded (or unbounded, `capacity = Infinity`) FIFO with deque operations.
 * `push` returns false instead of throwing when the ring is full, because "queue full" is a
 * normal outcome on the data path (the caller maps it to ENOMEM, a CQ overflow, ...).
 */
export class Ring<T> {
  /** Maximum number of elements; `Infinity` means "bounded only by 2^30". */
  readonly capacity: number;
  private _buf: (T | undefined)[];
  private _mask: number;
  private _head = 0;
  private _len = 0;

  /**
   * @param capacity maximum number of elements: a positive integer <= 2^30, or `Infinity`.
   * @param initialSize initial backing size (rounded up to a power of two, at most the capacity).
   * @throws RdmaError EINVAL for a bad capacity or initial size.
   */
  constructor(capacity: number, initialSize = 16) {
    if (!(capacity === Infinity || (Number.isInteger(capacity) && capacity >= 1 && capacity <= MAX_BACKING))) {
      throw err('EINVAL', 'ring', `capacity ${capacity}`);
    }
    if (!Number.isInteger(initialSize) || initialSize < 1 || initialSize > MAX_BACKING) {
      throw err('EINVAL', 'ring', `initial size ${initialSize}`);
    }
    this.capacity = capacity;
    const want = capacity === Infinity ? initialSize : Math.min(capacity, initialSize);
    const size = nextPow2(want);
    this._buf = newSlots<T>(size);
    this._mask = size - 1;
  }

  /** Number of queued elements. */
  get length(): number {
    return this._len;
  }

  /** True when no element is queued. */
  get isEmpty(): boolean {
    return this._len === 0;
  }

  /** True when `length === capacity` (a push would fail). */
  get isFull(): boolean {
    return this._len >= this.capacity || (this._len === this._buf.length && this._buf.length >= MAX_BACKING);
  }

  /** Append at the tail. Returns false (and stores nothing) when the ring is full. */
  push(item: T): boolean {
    if (this._len >= this.capacity) return false;
    if (this._len === this._buf.length && !this._grow()) return false;
    this._buf[(this._head + this._len) & this._mask] = item;
    this._len++;
    return true;
  }

  /** Prepend at the head (it becomes the next `shift()`). Returns false when full. */
  unshift(item: T): boolean {
    if (this._len >= this.capacity) return false;
    if (this._len === this._buf.length && !this._grow()) return false;
    this._head = (this._head - 1) & this._mask;
    this._buf[this._head] = item;
    this._len++;
    return true;
  }

  /** Remove and return the oldest element, or `undefined` when empty. */
  shift(): T | undefined {
    if (this._len === 0) return undefined;
    const i = this._head;
    const item = this._buf[i];
    this._buf[i] = undefined;
    this._head = (i + 1) & this._mask;
    this._len--;
    return item;
  }

  /** Remove and return the newest element, or `undefined` when empty. */
  pop(): T | undefined {
    if (this._len === 0) return undefined;
    const i = (this._head + this._len - 1) & this._mask;
    const item = this._buf[i];
    this._buf[i] = undefined;
    this._len--;
    return item;
  }

  /** The oldest element without removing it. */
  peek(): T | undefined {
    return this._len === 0 ? undefined : this._buf[this._head];
  }

  /** The newest element without removing it. */
  peekLast(): T | undefined {
    return this._len === 0 ? undefined : this._buf[(this._head + this._len - 1) & this._mask];
  }

  /** Element `i` counted from the head (0 = oldest); negative counts from the tail (-1 = newest). */
  at(i: number): T | undefined {
    if (!Number.isInteger(i)) return undefined;
    if (i < 0) i += this._len;
    if (i < 0 || i >= this._len) return undefined;
    return this._buf[(this._head + i) & this._mask];
  }

  /** Remove every element. */
  clear(): void {
    for (let k = 0; k < this._len; k++) this._buf[(this._head + k) & this._mask] = undefined;
    this._head = 0;
    this._len = 0;
  }

  /**
   * Remove every element for which `pred` returns true, keeping the others in order.
   * O(length); meant for rare purges (a destroyed CQ's pending events), not for the data path.
   * @returns the number of removed elements.
   */
  removeIf(pred: (item: T) => boolean): number {
    let kept = 0;
    const n = this._len;
    for (let k = 0; k < n; k++) {
      const item = this._buf[(this._head + k) & this._mask] as T;
      if (!pred(item)) {
        this._buf[(this._head + kept) & this._mask] = item;
        kept++;
      }
    }
    for (let k = kept; k < n; k++) this._buf[(this._head + k) & this._mask] = undefined;
    this._len = kept;
    return n - kept;
  }

  /** Iterate from oldest to newest (do not modify the ring while iterating). */
  *[Symbol.iterator](): IterableIterator<T> {
    for (let k = 0; k < this._len; k++) yield this._buf[(this._head + k) & this._mask] as T;
  }

  /** Copy the elements, oldest first, into a new array. */
  toArray(): T[] {
    const out: T[] = [];
    for (let k = 0; k < this._len; k++) out.push(this._buf[(this._head + k) & this._mask] as T);
    return out;
  }

  /** Double the backing array (keeping order, head moved to 0). False when already at the maximum. */
  private _grow(): boolean {
    const old = this._buf;
    if (old.length >= MAX_BACKING) return false;
    const size = old.length * 2;
    const buf = newSlots<T>(size);
    for (let k = 0; k < this._len; k++) buf[k] = old[(this._head + k) & this._mask];
    this._buf = buf;
    this._mask = size - 1;
    this._head = 0;
    return true;
  }
}

/** A packed array of `size` empty slots. */
function newSlots<T>(size: number): (T | undefined)[] {
  const a: (T | undefined)[] = [];
  for (let k = 0; k < size; k++) a.push(undefined);
  return a;
}
