/**
 * CRC-32C (Castagnoli) as used by the MPA FPDU trailer (RFC 5044 §4.5; vectors in docs/design/iwarp-wire.md):
 * reflected polynomial 0x82F63B78, initial register 0xFFFFFFFF, final XOR 0xFFFFFFFF (the iSCSI /
 * SCTP CRC). The value goes on the wire **little-endian** (siw_qp_tx.c, siw_qp_rx.c).
 *
 * Every function here follows zlib's chaining convention: the `prev` argument is the *final*
 * (post-XOR) value returned by an earlier call, `0` to start, so
 * `crc32c(b, crc32c(a)) === crc32c(concat(a, b))`.
 *
 * Backends: the optional dependency `@node-rs/crc32` (SIMD/SSE4.2, several GB/s) when it loads and
 * passes a self-test of the chaining semantics, otherwise a table-driven slice-by-8 implementation
 * in TypeScript. `RDMA_CRC32C=js` in the environment forces the TypeScript backend. Inputs shorter
 * than {@link CRC32C_NATIVE_MIN} bytes always use the TypeScript tables: for a 16–48 byte FPDU
 * header the N-API call costs more than the arithmetic.
 *
 * @module
 */
import { createRequire } from 'node:module';
import { crcBitwise, sliceBy8Tables, sliceBy8Update } from '../crc.js';

/** The reflected CRC-32C polynomial (RFC 3720 §B.4). */
export const CRC32C_POLY = 0x82f63b78;

/** Which implementation {@link crc32c} uses for inputs of {@link CRC32C_NATIVE_MIN} bytes or more. */
export type Crc32cBackend = 'native' | 'js';

/** Signature shared by every CRC-32C function of this module (zlib-style chaining, see module doc). */
export type Crc32cFn = (data: Uint8Array, prev?: number) => number;

/**
 * Inputs shorter than this many bytes are checksummed by the TypeScript tables even when the
 * native backend is loaded (measured crossover of the N-API call overhead on x86-64, Node 20).
 */
export const CRC32C_NATIVE_MIN = 192;

// ---- slice-by-8 tables ------------------------------------------------------------------------

/** 8 tables of 256 entries: `T[k*256 + n]` is the CRC of byte `n` followed by `k` zero bytes. */
const T: Int32Array = sliceBy8Tables(CRC32C_POLY);

/**
 * Table-driven CRC-32C of `data[start, end)` continuing from the final value `prev`.
 * Internal workhorse of {@link crc32cJs} and {@link crc32cRange}; no allocation.
 */
function jsRange(d: Uint8Array, start: number, end: number, prev: number): number {
  return ~sliceBy8Update(T, ~prev, d, start, end) >>> 0;
}

/**
 * CRC-32C in TypeScript (slice-by-8 tables), the fallback backend. Same contract as
 * {@link crc32c}; always available.
 */
export function crc32cJs(data: Uint8Array, prev = 0): number {
  return jsRange(data, 0, data.length, prev);
}

/**
 * Bit-at-a-time CRC-32C: the textbook reference (RFC 3720 §B.4) used by the tests to check the
 * other backends. Far too slow for the data path.
 */
export function crc32cBitwise(data: Uint8Array, prev = 0): number {
  return crcBitwise(CRC32C_POLY, data, prev);
}

// ---- native backend ---------------------------------------------------------------------------

type NativeCrc32c = (input: Uint8Array, initialState?: number | null) => number;

/**
 * Load `@node-rs/crc32` and verify that its `crc32c(input, initialState)` really has zlib chaining
 * semantics and the right vector (docs/design/iwarp-wire.md) before trusting it.
 */
function loadNative(): NativeCrc32c | undefined {
  if (process.env['RDMA_CRC32C'] === 'js') return undefined;
  try {
    const req = createRequire(import.meta.url);
    const mod = req('@node-rs/crc32') as { crc32c?: unknown };
    if (typeof mod.crc32c !== 'function') return undefined;
    const fn = mod.crc32c as NativeCrc32c;
    const digits = new Uint8Array([0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39]);
    const whole = fn(digits);
    const chained = fn(digits.subarray(5), fn(digits.subarray(0, 5)));
    const empty = fn(digits.subarray(0, 0), whole);
    if (whole !== 0xe3069283 || chained !== whole || empty !== whole) return undefined;
    return fn;
  } catch {
    return undefined;
  }
}

const native: NativeCrc32c | undefined = loadNative();

/** The native CRC-32C function when `@node-rs/crc32` is loaded and verified, else `undefined`. */
export const crc32cNative: Crc32cFn | undefined =
  native === undefined ? undefined : (data: Uint8Array, prev = 0): number => native(data, prev);

/** The backend {@link crc32c} uses for large inputs: `'native'` or `'js'`. */
export const crc32cBackend: Crc32cBackend = native === undefined ? 'js' : 'native';

/**
 * CRC-32C of `data`, continuing from `prev` (the final value of a previous call; 0 to start).
 * Returns the final, post-XOR, unsigned 32-bit value (write it little-endian into an MPA trailer).
 */
export function crc32c(data: Uint8Array, prev = 0): number {
  if (native !== undefined && data.length >= CRC32C_NATIVE_MIN) return native(data, prev);
  return jsRange(data, 0, data.length, prev);
}

/**
 * CRC-32C of `data[start, end)` continuing from `prev`; like {@link crc32c} on a subarray but
 * without creating one for short ranges (the FPDU decoder's entry point).
 */
export function crc32cRange(data: Uint8Array, start: number, end: number, prev = 0): number {
  if (native !== undefined && end - start >= CRC32C_NATIVE_MIN) {
    return native(start === 0 && end === data.length ? data : data.subarray(start, end), prev);
  }
  return jsRange(data, start, end, prev);
}
