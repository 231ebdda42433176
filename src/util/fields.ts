/**
 * The shapes a JavaScript number must have to fill an ibverbs struct field: the checks the verbs
 * layer and the native backend make before an argument is taken as that field.
 */

/** A `uint32_t` field: an integer in 0..2^32-1. */
export function isU32(v: unknown): v is number {
  // Number.isInteger is false for anything but a number.
  return Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0xffff_ffff;
}

/** An address (`uint64_t` addr, remote_addr, iova) as a number: a non-negative safe integer. */
export function isAddr(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}
