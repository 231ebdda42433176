/**
 * Addresses for the CM: the socket-address type, source-address selection (which local address
 * would the kernel route `dst` from), and `rdma_getaddrinfo()`.
 */
import dgram from 'node:dgram';
import dns from 'node:dns';
import net from 'node:net';
import { err } from '../errors.js';
import { ipKey, isLoopbackIp } from '../util/ip.js';

/** A socket address (`struct sockaddr_in`/`sockaddr_in6`), Node style. */
export interface SockAddr {
  address: string;
  port: number;
  /** Derived from `address` when omitted. */
  family?: 'IPv4' | 'IPv6';
}

/** 4 or 6 for an IP literal, else EINVAL. */
export function ipFamily(address: string, op: string): 4 | 6 {
  const f = net.isIP(address);
  if (f === 4 || f === 6) return f;
  throw err('EINVAL', op, `not an IP address: ${address}`);
}

/** Whether an address is the wildcard (0.0.0.0 or ::). */
export function isAny(address: string): boolean {
  const k = ipKey(address);
  return k === '0.0.0.0' || k === '0:0:0:0:0:0:0:0';
}

/** Loopback check (127/8, ::1, ::ffff:127.x). */
export function isLoopback(address: string): boolean {
  return isLoopbackIp(ipKey(address) ?? address);
}

/** Strip an IPv4-mapped prefix (`::ffff:1.2.3.4` → `1.2.3.4`). */
export function unmapV4(address: string): string {
  return address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/**
 * The local source address for traffic to `dst`, found the way the kernel would (a connected UDP
 * socket's local address: no datagram is sent). Rejects with the socket's errno code
 * (ENETUNREACH ...). A wildcard destination means the local host (as rdma_resolve_addr).
 */
export function routeSource(dst: string, family: 4 | 6): Promise<string> {
  if (isAny(dst) || isLoopback(dst)) return Promise.resolve(family === 6 ? '::1' : '127.0.0.1');
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket(family === 6 ? 'udp6' : 'udp4');
    s.on('error', (e) => {
      s.close();
      reject(e);
    });
    s.connect(9, dst, () => {
      try {
        const a = s.address().address;
        s.close();
        resolve(a);
      } catch (e) {
        s.close();
        reject(e);
      }
    });
  });
}

/** `rdma_addrinfo` flags (RAI_*). */
export const RAI = {
  PASSIVE: 0x1,
  NUMERICHOST: 0x2,
  NOROUTE: 0x4,
  FAMILY: 0x8,
} as const;

/** `struct rdma_addrinfo` (one result; librdmacm uses only the first getaddrinfo answer). */
export interface RdmaAddrinfo {
  flags: number;
  family: 'IPv4' | 'IPv6';
  /** ibv_qp_type: 2 = RC, 4 = UD. */
  qpType: number;
  portSpace: number;
  srcAddr: SockAddr | null;
  dstAddr: SockAddr | null;
  srcCanonname: string | null;
  dstCanonname: string | null;
}

/** Hints for {@link getaddrinfo}. */
export interface RdmaAddrinfoHints {
  flags?: number;
  family?: 'IPv4' | 'IPv6';
  qpType?: number;
  portSpace?: number;
  srcAddr?: SockAddr;
}

/** An rdma_getaddrinfo failure: `eai` is glibc's EAI_* value (e.g. -2 EAI_NONAME). */
export class GaiError extends Error {
  readonly eai: number;
  readonly code: string;
  constructor(eai: number, code: string, message: string) {
    super(message);
    this.name = 'GaiError';
    this.eai = eai;
    this.code = code;
  }
}

const EAI: Record<string, [number, string]> = {
  ENOTFOUND: [-2, 'Name or service not known'],
  EAI_NONAME: [-2, 'Name or service not known'],
  EAI_AGAIN: [-3, 'Temporary failure in name resolution'],
  EAI_FAIL: [-4, 'Non-recoverable failure in name resolution'],
  EAI_FAMILY: [-6, 'ai_family not supported'],
  EAI_SERVICE: [-8, 'Servname not supported for ai_socktype'],
  ENODATA: [-5, 'No address associated with hostname'],
};

/** glibc's gai_strerror() for the EAI codes we produce. */
export function gaiStrerror(eai: number): string {
  for (const v of Object.values(EAI)) if (v[0] === eai) return v[1];
  if (eai === -1) return 'Bad value for ai_flags';
  return 'Unknown error';
}

/**
 * rdma_getaddrinfo(node, service, hints). EINVAL if node and service are both missing; name
 * resolution failures reject with a {@link GaiError} carrying the EAI code.
 */
export async function getaddrinfo(node: string | null, service: string | number | null, hints: RdmaAddrinfoHints = {}): Promise<RdmaAddrinfo> {
  if (node === null && service === null) throw err('EINVAL', 'rdma_getaddrinfo');
  const flags = hints.flags ?? 0;
  let port = 0;
  if (service !== null) {
    port = typeof service === 'number' ? service : Number(service);
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new GaiError(-8, 'EAI_SERVICE', gaiStrerror(-8));
  }
  const passive = (flags & RAI.PASSIVE) !== 0;
  let address: string;
  let canon: string | null = null;
  let family: 4 | 6;
  if (node === '') throw new GaiError(-2, 'EAI_NONAME', gaiStrerror(-2));
  if (node === null) {
    family = hints.family === 'IPv6' ? 6 : 4;
    address = passive ? (family === 6 ? '::' : '0.0.0.0') : family === 6 ? '::1' : '127.0.0.1';
  } else if (net.isIP(node)) {
    family = net.isIP(node) as 4 | 6;
    address = node;
  } else {
    if (flags & RAI.NUMERICHOST) throw new GaiError(-2, 'EAI_NONAME', gaiStrerror(-2));
    try {
      const opts: dns.LookupOneOptions = {};
      if (hints.family) opts.family = hints.family === 'IPv6' ? 6 : 4;
      const r = await dns.promises.lookup(node, opts);
      address = r.address;
      family = r.family as 4 | 6;
      canon = node;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? 'ENOTFOUND';
      const [eai, text] = EAI[code] ?? [-2, gaiStrerror(-2)];
      throw new GaiError(eai, code, text);
    }
  }
  if (hints.family && (hints.family === 'IPv6') !== (family === 6)) throw new GaiError(-6, 'EAI_FAMILY', gaiStrerror(-6));
  const sa: SockAddr = { address, port, family: family === 6 ? 'IPv6' : 'IPv4' };
  return {
    flags,
    family: sa.family as 'IPv4' | 'IPv6',
    qpType: hints.qpType ?? 2,
    portSpace: hints.portSpace ?? 0x0106,
    srcAddr: passive ? sa : (hints.srcAddr ?? null),
    dstAddr: passive ? null : sa,
    srcCanonname: passive ? canon : null,
    dstCanonname: passive ? null : canon,
  };
}
