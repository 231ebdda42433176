/**
 * The table-driven reflected CRC-32 both wire families use: CRC-32C (Castagnoli, MPA trailers)
 * and CRC-32 (IEEE 802.3 / zlib, the RoCEv2 ICRC) differ only in the polynomial. The slice-by-8
 * method takes 8 input bytes per step through 8 tables of 256 entries each.
 *
 * @module
 */

/**
 * The slice-by-8 tables of a reflected polynomial: `T[k*256 + n]` is the register update for
 * byte `n` followed by `k` zero bytes (so `T[0..255]` is the classic byte table).
 */
export function sliceBy8Tables(poly: number): Int32Array {
  const t = new Int32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let k = 1; k < 8; k++) {
      c = (c >>> 8) ^ t[c & 0xff]!;
      t[k * 256 + n] = c;
    }
  }
  return t;
}

/**
 * The raw register `c` updated over `d[start, end)` with the tables `T` of
 * {@link sliceBy8Tables} (no initial or final XOR: a CRC is `~sliceBy8Update(T, ~prev, ...)`).
 * No allocation.
 */
export function sliceBy8Update(T: Int32Array, c: number, d: Uint8Array, start: number, end: number): number {
  let i = start;
  const last8 = end - 8;
  for (; i <= last8; i += 8) {
    const x = c ^ (d[i]! | (d[i + 1]! << 8) | (d[i + 2]! << 16) | (d[i + 3]! << 24));
    c =
      T[0x700 + (x & 0xff)]! ^
      T[0x600 + ((x >>> 8) & 0xff)]! ^
      T[0x500 + ((x >>> 16) & 0xff)]! ^
      T[0x400 + (x >>> 24)]! ^
      T[0x300 + d[i + 4]!]! ^
      T[0x200 + d[i + 5]!]! ^
      T[0x100 + d[i + 6]!]! ^
      T[d[i + 7]!]!;
  }
  for (; i < end; i++) c = T[(c ^ d[i]!) & 0xff]! ^ (c >>> 8);
  return c;
}

/**
 * Bit-at-a-time CRC of a reflected polynomial over `data`, continuing from `prev` (the final
 * value of an earlier call, 0 to start): the textbook reference the tests check the table and
 * native backends against. Far too slow for the data path.
 */
export function crcBitwise(poly: number, data: Uint8Array, prev: number): number {
  let c = ~prev >>> 0;
  for (let i = 0; i < data.length; i++) {
    c ^= data[i]!;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
  }
  return ~c >>> 0;
}
