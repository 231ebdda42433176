/**
 * Arrays and fields born with the representation they will have.
 *
 * Fields: V8 counts a field that still holds the value its object was created with as constant
 * (for every object of the class), and code optimised while it is constant depends on that: the
 * first store of another value, into any object of the class, marks the field mutable and throws
 * away every function compiled against it ("code dependencies"). A flag that first changes at
 * teardown (`destroyed`, `closed`) therefore discards, when the first connection closes, the
 * optimised data path that reads it, which the next connection compiles again while it runs.
 * Such fields are stored twice where the object is made (another value, then the real one), so
 * that they are mutable from the first object on and nothing compiled later depends on them.
 */

/**
 * Empty arrays that are born with the elements kind they will have.
 *
 * V8 gives a fresh `[]` small-integer elements; the first object stored turns it into an array of
 * objects, under a new hidden class. Optimised code that has only seen the arrays of one
 * connection (already turned) checks for that class, so the still-empty arrays of the next
 * connection fail the check and throw the code away ("wrong map"), once per function that
 * touches them. An array made from one object element and emptied has the object kind from the
 * start, so every connection's arrays share one hidden class.
 */
export function objectArray<T>(): T[] {
  const a: (T | null)[] = [null];
  a.pop();
  return a as T[];
}

/**
 * `n` slots for objects (null until written), for a list that is always filled to the same
 * length before use: writing them is never a store past the end, which the first use of an
 * array left empty would be in every connection after the one the code was compiled in.
 */
export function objectSlots<T>(n: number): (T | null)[] {
  const a: (T | null)[] = [];
  for (let i = 0; i < n; i++) a.push(null);
  return a;
}

/**
 * `n` numbers (0), stored as doubles from the start: an array of small integers becomes an
 * array of doubles, under a new hidden class, the first time a number stored in it is not one
 * (an offset computed from 64-bit addresses is a double even when its value is small), and the
 * code compiled for the first connection's array would not accept the next connection's.
 */
export function doubleArray(n: number): number[] {
  const a = new Array<number>(n).fill(0.5);
  a.fill(0);
  return a;
}

/**
 * A bounded stack of objects kept for reuse (completed WQEs, polled completions): `take` and
 * `give` never allocate. A JavaScript array used this way does: V8's `pop` hands an array whose
 * length falls below half its backing store (a store of 17 or more slots, what the first growth
 * gives) to the runtime, which trims the store, and the next `push` allocates a new one — a
 * runtime call and about 150 bytes each time a pool that held two objects runs empty and is
 * refilled, several times per message. Here the slots are made once and only counted.
 */
export class FreeList<T> {
  private readonly slots: (T | null)[];
  private n = 0;

  /** Room for `max` objects; {@link give} drops what does not fit. */
  constructor(readonly max: number) {
    this.slots = objectSlots<T>(max);
  }

  /** Objects held. */
  get length(): number {
    return this.n;
  }

  /** The object given last, or undefined when none is held. */
  take(): T | undefined {
    if (this.n === 0) return undefined;
    const i = --this.n;
    const x = this.slots[i] as T;
    this.slots[i] = null;
    return x;
  }

  /** Keep `x` for a later {@link take} (dropped when full). */
  give(x: T): void {
    if (this.n < this.max) this.slots[this.n++] = x;
  }
}
