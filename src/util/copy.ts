/**
 * Byte copies for the data path, shared by the transport and the rsocket layer.
 *
 * @module
 */

/**
 * Copy `src[so, so + n)` to `dst[d ...]`. Small copies use a plain loop: Buffer#copy costs a
 * typed-array allocation and a native call, more than the copy itself below ~128 bytes.
 */
export function copyBytes(src: Uint8Array, so: number, dst: Uint8Array, d: number, n: number): void {
  if (n > 128) {
    dst.set(src.subarray(so, so + n), d);
    return;
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
