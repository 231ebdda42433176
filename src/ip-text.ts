/**
 * Text of a 16-byte IPv6 address, for every layer (the wire codecs included, so it is pure and
 * depends on nothing): lower-case hex words with the longest run of two or more zero words (the
 * first of equal runs) written `::` (RFC 5952 §4.2), and optionally the last 32 bits in dotted form.
 */

/**
 * Which addresses end in dotted IPv4 form: `'none'`; `'mapped'` (`::ffff:a.b.c.d`, RFC 5952 §5);
 * `'glibc'` as glibc's inet_ntop: IPv4-mapped and IPv4-compatible (`::a.b.c.d`, when the first
 * 96 bits are zero and the address is neither `::` nor `::1`-like with more zero words).
 */
export type Ipv6DottedTail = 'none' | 'mapped' | 'glibc';

/** The 16 bytes at `off` of `b` as IPv6 text. */
export function formatIpv6Text(b: Uint8Array, off = 0, tail: Ipv6DottedTail = 'none'): string {
  const w = new Array<number>(8);
  for (let i = 0; i < 8; i++) w[i] = ((b[off + 2 * i] ?? 0) << 8) | (b[off + 2 * i + 1] ?? 0);
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (w[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const mapped = best === 0 && ((bestLen === 5 && w[5] === 0xffff) || (tail === 'glibc' && bestLen === 6));
  if (mapped && tail !== 'none') {
    const v4 = `${b[off + 12] ?? 0}.${b[off + 13] ?? 0}.${b[off + 14] ?? 0}.${b[off + 15] ?? 0}`;
    return bestLen === 5 ? `::ffff:${v4}` : `::${v4}`;
  }
  const hex = (from: number, to: number): string => {
    let s = '';
    for (let i = from; i < to; i++) s += (i === from ? '' : ':') + (w[i] as number).toString(16);
    return s;
  };
  if (best < 0) return hex(0, 8);
  return `${hex(0, best)}::${hex(best + bestLen, 8)}`;
}
