/**
 * Internal byte functions shared by the wire codecs (not part of the public API).
 *
 * @module
 */

/**
 * A fresh plain `Uint8Array` holding `buf[start, end)`. Unlike `buf.slice()` it is a copy even
 * when `buf` is a Node `Buffer` (whose `slice` returns a view) and never a `Buffer` itself.
 */
export function copyOf(buf: Uint8Array, start: number, end: number): Uint8Array {
  return new Uint8Array(buf.subarray(start, end));
}
