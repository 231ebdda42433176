/**
 * Byte copies for the data path, shared by the transport and the rsocket layer.
 *
 * @module
 */

/**
 * Copy `src[so, so + n)` to `dst[d ...]`. Copies up to {@link LOOP_MAX} bytes use a plain loop;
 * longer ones a native copy, which costs a typed-array view and a native call (about 57 ns
 * whatever the size up to a few hundred bytes in optimised code). In optimised code the loop is
 * the cheaper one up to about 100 bytes (35 ns at 64); in baseline (Sparkplug) code, which a
 * short run of a tool executes throughout, each byte of the loop is two inline-cache calls and
 * it costs 0.3 µs at 16 bytes and 1.1 µs at 64 against 0.1 µs for the native copy. Above 32 bytes
 * the native copy is taken: a few ns more per copy in optimised code, most of a microsecond less
 * in baseline code. The view is made with `new Uint8Array(buffer, offset, n)`, about 6 ns less
 * than `subarray` (Buffer's own `subarray` goes through its species constructor).
 */
export function copyBytes(src: Uint8Array, so: number, dst: Uint8Array, d: number, n: number): void {
  if (n > LOOP_MAX) {
    if (so >= 0 && so + n <= src.length) dst.set(new Uint8Array(src.buffer, src.byteOffset + so, n), d);
    else dst.set(src.subarray(so, so + n), d);
    return;
  }
  // Offsets computed from 64-bit addresses arrive as heap numbers even when their values are
  // small, and in baseline code each sum with one is a new heap number (16 index sums per 8
  // bytes): the loop indexes with small integers whenever the offsets are int32 values.
  const s32 = so | 0;
  const d32 = d | 0;
  if (s32 === so && d32 === d) {
    so = s32;
    d = d32;
  }
  // Unrolled by 8: about twice as fast as the plain loop for 16..128 bytes.
  let i = 0;
  for (const e8 = n - 8; i <= e8; i += 8) {
    const a = so + i;
    const b = d + i;
    dst[b] = src[a] as number;
    dst[b + 1] = src[a + 1] as number;
    dst[b + 2] = src[a + 2] as number;
    dst[b + 3] = src[a + 3] as number;
    dst[b + 4] = src[a + 4] as number;
    dst[b + 5] = src[a + 5] as number;
    dst[b + 6] = src[a + 6] as number;
    dst[b + 7] = src[a + 7] as number;
  }
  for (; i < n; i++) dst[d + i] = src[so + i] as number;
}

/** The longest copy {@link copyBytes} makes with its loop (the 16-byte adverts and headers of small messages). */
const LOOP_MAX = 32;
