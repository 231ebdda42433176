/**
 * IP addresses as the soft RoCE device meets them: as text (what a UDP socket reports and a GID
 * stands for) and as the bytes the ICRC, the CMA header and the forwarding frames carry. Pure
 * functions, no sockets.
 */
import { formatIpv4, parseIpv4, parseIpv6 } from '../../util/ip.js';
import { formatIpv6 } from './gid.js';

/** The bytes of address `ip`: 4 for IPv4, 16 for IPv6 (zeros for text that is no address). */
export function ipBytes(ip: string, family: 4 | 6): Uint8Array {
  if (family === 4) {
    const v = parseIpv4(ip) ?? 0;
    return Uint8Array.of(v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff);
  }
  const w = parseIpv6(ip) ?? [];
  const b = new Uint8Array(16);
  for (let k = 0; k < 8; k++) {
    b[2 * k] = (w[k] ?? 0) >>> 8;
    b[2 * k + 1] = (w[k] ?? 0) & 0xff;
  }
  return b;
}

/** The key under which a local address is known: the text without an IPv6 zone, lower case. */
export function ipKey(ip: string): string {
  const i = ip.indexOf('%');
  return (i < 0 ? ip : ip.slice(0, i)).toLowerCase();
}

/**
 * Write address `ip` into the 16-byte slot at `off` of `out` (an IPv4 address fills the first
 * four bytes, the rest are zero), as a forwarding frame carries it.
 */
export function writeIpSlot(ip: string, family: 4 | 6, out: Uint8Array, off: number): void {
  out.fill(0, off, off + 16);
  out.set(ipBytes(ip, family), off);
}

/** The text of the address in the 16-byte slot at `off` of `b` (see {@link writeIpSlot}). */
export function ipSlotText(b: Buffer, off: number, family: 4 | 6): string {
  if (family === 4) return formatIpv4(b.readUInt32BE(off));
  return formatIpv6(b.subarray(off, off + 16));
}
