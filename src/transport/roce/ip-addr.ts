/**
 * IP addresses as the soft RoCE device meets them: as text (what a UDP socket reports and a GID
 * stands for) and as the bytes the ICRC, the CMA header and the forwarding frames carry. Pure
 * functions, no sockets.
 */
import { parseIpv4, parseIpv6 } from '../../util/ip.js';

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
