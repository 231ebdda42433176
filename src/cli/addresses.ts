/**
 * Host addresses as the tools take and print them: the first getaddrinfo answer for a name
 * ({@link resolveHost}), the canonical text of an IPv6 address, inet_ntop for GIDs, and the
 * resolver's EAI codes and messages.
 */
import { GaiError, gaiStrerror, getaddrinfo, type SockAddr, parseIpv6 } from './api.js';
import { formatIpv6Text } from '../ip-text.js';

/** A resolved host: the first getaddrinfo answer (`struct sockaddr_in`/`sockaddr_in6`). */
export interface HostAddr {
  address: string;
  family: 'IPv4' | 'IPv6';
}

/**
 * getaddrinfo(name, NULL, NULL, ...) keeping only the first answer, as the tools do. IP literals
 * (IPv6 with a `%scope` too) are taken as they are; names go through the resolver.
 * @throws GaiError with glibc's EAI code (`-2` EAI_NONAME for an unknown or empty name).
 */
export async function resolveHost(name: string): Promise<HostAddr> {
  if (name === '') throw new GaiError(-2, 'EAI_NONAME', gaiStrerror(-2));
  const r = await getaddrinfo(name, null, {});
  const a = r.dstAddr;
  if (!a || !a.address) throw new GaiError(-2, 'EAI_NONAME', gaiStrerror(-2));
  return { address: canonicalIp(a.address), family: a.family === 'IPv6' || (a.family === undefined && a.address.includes(':')) ? 'IPv6' : 'IPv4' };
}

/**
 * The canonical text of an IPv6 literal (`::0` → `::`, `0:0::1` → `::1`), so that spellings of
 * the same address compare equal (the wildcard `-a ::0` in particular). Anything else, and
 * literals with a `%scope`, are returned unchanged.
 */
export function canonicalIp(address: string): string {
  if (!address.includes(':') || address.includes('%')) return address;
  try {
    const h = new URL(`http://[${address}]/`).hostname;
    if (!h.startsWith('[') || !h.endsWith(']')) return address;
    const c = h.slice(1, -1);
    // Keep IPv4-mapped addresses in their dotted form (::ffff:127.0.0.1).
    const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(c);
    if (!m) return c;
    const hi = parseInt(m[1] as string, 16);
    const lo = parseInt(m[2] as string, 16);
    return `::ffff:${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  } catch {
    return address;
  }
}

/**
 * inet_ntop(AF_INET6, ...) as glibc formats it: lower-case hex words, the longest run of two or
 * more zero words (the first of equal runs) as `::`, and the last 32 bits in dotted form for
 * IPv4-compatible (`::a.b.c.d`) and IPv4-mapped (`::ffff:a.b.c.d`) addresses. Used for GIDs.
 */
export function inetNtop6(b: Uint8Array): string {
  return formatIpv6Text(b, 0, 'glibc');
}

/**
 * inet_pton(AF_INET6, ...): the 16 bytes of an IPv6 literal (an embedded IPv4 tail included), or
 * null for anything else (a `%scope` or brackets too, which inet_pton refuses).
 */
export function inetPton6(s: string): Uint8Array | null {
  const words = s.includes('%') || s.startsWith('[') ? undefined : parseIpv6(s);
  if (!words) return null;
  const b = new Uint8Array(16);
  words.forEach((w, i) => ((b[2 * i] = w >> 8), (b[2 * i + 1] = w & 0xff)));
  return b;
}

/** The EAI code of a resolver failure (GaiError), else -1 (EAI_BADFLAGS, as glibc reports -1). */
export function eaiOf(e: unknown): number {
  return e instanceof GaiError ? e.eai : -1;
}

/** `gai_strerror()` text for the error of {@link resolveHost}. */
export function gaiMessage(e: unknown): string {
  return e instanceof GaiError ? e.message : gaiStrerror(-1);
}

/** A socket address from a host and a port. */
export function sockAddr(host: HostAddr, port: number): SockAddr {
  return { address: host.address, port, family: host.family };
}

/** The wildcard address of a family (`0.0.0.0` / `::`). */
export function anyAddr(family: 'IPv4' | 'IPv6' = 'IPv4'): HostAddr {
  return { address: family === 'IPv6' ? '::' : '0.0.0.0', family };
}

/** A resolver failure carrying its EAI code (rstream's and riostream's getaddrinfo paths). */
export class GaiErr extends Error {
  constructor(readonly eai: number) {
    super(`EAI ${eai}`);
  }
}

/** gai_strerror() of a failure of the stream tools' resolution. */
export function gaiText(e: unknown): string {
  if (e instanceof GaiErr) return e.eai === -6 ? 'ai_family not supported' : 'Name or service not known';
  return gaiMessage(e);
}

/** The EAI code of a failure of the stream tools' resolution. */
export function gaiCode(e: unknown): number {
  if (e instanceof GaiErr) return e.eai;
  return eaiOf(e);
}
