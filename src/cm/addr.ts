/**
 * Addresses for the CM: the socket-address type, source-address selection (which local address
 * would the kernel route `dst` from), and `rdma_getaddrinfo()`.
 */
import dgram from 'node:dgram';
import dns from 'node:dns';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { err } from '../errors.js';
import { Errno } from '../errno.js';
import { checkPort, checkSockAddr } from './addr-check.js';
import { formatIpv4, ipKey, isLoopbackIp, parseIpv4, unmapV4 } from '../util/ip.js';

/**
 * A socket address (`struct sockaddr_in`/`sockaddr_in6`), Node style; or, with family `'IB'`, an
 * AF_IB address (`struct sockaddr_ib`): `address` is its GID in IPv6 notation, `port` the port
 * of its service ID.
 */
export interface SockAddr {
  address: string;
  port: number;
  /** Derived from `address` when omitted (an IP address). */
  family?: 'IPv4' | 'IPv6' | 'IB';
}

/** An AF_IB address: such an address names a GID, which no device here is addressed by. */
export function isAfIb(a: SockAddr | null | undefined): boolean {
  return a?.family === 'IB';
}

/** 4 or 6 for an IP literal, else EINVAL. */
export function ipFamily(address: string, op: string): 4 | 6 {
  const f = net.isIP(address);
  if (f === 4 || f === 6) return f;
  throw err('EINVAL', op, `not an IP address: ${address}`);
}

/**
 * Answers of {@link isAny} and {@link isLoopback} per address string: every resolve and connect
 * asks about the same few addresses, and the answer needs a full parse.
 */
const addrKinds = new Map<string, number>();
const ANY = 1;
const LOOPBACK = 2;
function addrKind(address: string): number {
  let k = addrKinds.get(address);
  if (k === undefined) {
    const key = ipKey(address);
    k = (key === '0.0.0.0' || key === '0:0:0:0:0:0:0:0' ? ANY : 0) | (isLoopbackIp(key ?? address) ? LOOPBACK : 0);
    if (addrKinds.size >= 256) addrKinds.clear();
    addrKinds.set(address, k);
  }
  return k;
}

/** Whether an address is the wildcard (0.0.0.0 or ::). */
export function isAny(address: string): boolean {
  return (addrKind(address) & ANY) !== 0;
}

/** Loopback check (127/8, ::1, ::ffff:127.x). */
export function isLoopback(address: string): boolean {
  return (addrKind(address) & LOOPBACK) !== 0;
}

export { unmapV4 };

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
    s.connect(9, dst, (e?: Error) => {
      if (e) {
        // No route: the socket stays unconnected (its address would read 0.0.0.0).
        s.close();
        reject(e);
        return;
      }
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

/** Where {@link resolveNeighbor} reads the kernel's tables, and how it makes the kernel ARP. */
export interface NeighborSource {
  /** `/proc/net/route` (IPv4 routes, hex little-endian words). */
  routeFile?: string;
  /** `/proc/net/arp` (IPv4 neighbour table). */
  arpFile?: string;
  /** Make the kernel resolve the next hop (default: an empty UDP datagram to `dst` port 9, discard). */
  trigger?: (dst: string) => void;
  /** Longest poll interval of the neighbour table (ms; polling starts at 2 ms and doubles). */
  pollMs?: number;
  /** Stops the wait (the resolution was aborted or its id destroyed): the result is then ignored. */
  signal?: AbortSignal;
}

/** `struct rtentry` flag: the route goes through a gateway. */
const RTF_GATEWAY = 0x2;
/** ARP entry flags: completed / permanent. */
const ATF_COM = 0x2;
const ATF_PERM = 0x4;

/** The IPv4 next hop for `dst` from a /proc/net/route text (longest prefix wins), or null. */
export function nextHopV4(routeText: string, dst: string): string | null {
  const d = parseIpv4(dst);
  if (d === undefined) return null;
  let best: { mask: number; hop: string } | null = null;
  for (const line of routeText.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    const le = (h: string | undefined): number => {
      const v = parseInt(h ?? '', 16) >>> 0;
      return (((v & 0xff) << 24) | (((v >>> 8) & 0xff) << 16) | (((v >>> 16) & 0xff) << 8) | (v >>> 24)) >>> 0;
    };
    const net4 = le(f[1]);
    const gw = le(f[2]);
    const flags = parseInt(f[3] ?? '0', 16);
    const mask = le(f[7]);
    if (((d & mask) >>> 0) !== net4) continue;
    if (best && popcount(best.mask) >= popcount(mask)) continue;
    const hop = flags & RTF_GATEWAY ? formatIpv4(gw) : dst;
    best = { mask, hop };
  }
  return best?.hop ?? null;
}

function popcount(v: number): number {
  let n = 0;
  for (let x = v >>> 0; x; x >>>= 1) n += x & 1;
  return n;
}

/** Whether `ip` has a completed (or permanent) entry in a /proc/net/arp text. */
export function arpComplete(arpText: string, ip: string): boolean {
  for (const line of arpText.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[0] === ip) return (parseInt(f[2] ?? '0', 16) & (ATF_COM | ATF_PERM)) !== 0;
  }
  return false;
}

/**
 * The neighbour resolution rdma_resolve_addr waits for (the kernel's addr_resolve: the next
 * hop's hardware address): 0 once the next hop of `dst` has a completed ARP entry, -110
 * (-ETIMEDOUT, the status of ADDR_ERROR) when it has none after `timeoutMs`. IPv4 on Linux only
 * (it reads /proc/net/route and /proc/net/arp); anything else, or a table that cannot be read,
 * counts as resolved. Loopback and local destinations need no neighbour and are not asked about.
 */
export async function resolveNeighbor(dst: string, timeoutMs: number, src: NeighborSource = {}): Promise<number> {
  const ip = unmapV4(dst);
  if (!net.isIPv4(ip)) return 0;
  // A group or broadcast destination has no neighbour to ask: the kernel maps it to a link
  // address by itself (arp.c `arp_constructor`: RTN_MULTICAST / RTN_BROADCAST neighbours are
  // NUD_NOARP, `arp_mc_map`), so rdma_resolve_addr of a multicast group completes at once.
  // Waiting for ARP here would time out every join off loopback.
  if (isMulticastOrBroadcastV4(ip)) return 0;
  let routeText: string;
  try {
    routeText = await readFile(src.routeFile ?? '/proc/net/route', 'latin1');
  } catch {
    return 0;
  }
  const hop = nextHopV4(routeText, ip);
  if (hop === null) return 0;
  const arpFile = src.arpFile ?? '/proc/net/arp';
  const complete = async (): Promise<boolean | null> => {
    try {
      return arpComplete(await readFile(arpFile, 'latin1'), hop);
    } catch {
      return null;
    }
  };
  const first = await complete();
  if (first === null || first) return 0;
  (src.trigger ?? udpNudge)(ip);
  const until = Date.now() + timeoutMs;
  // An answer usually comes within a round trip: look again soon, then less and less often.
  const every = src.pollMs ?? 50;
  let wait = Math.min(2, every);
  while (Date.now() < until) {
    if (src.signal?.aborted) return -Errno.ECANCELED;
    await sleep(Math.min(wait, Math.max(until - Date.now(), 1)), src.signal);
    if ((await complete()) !== false) return 0;
    wait = Math.min(wait * 2, every);
  }
  return -Errno.ETIMEDOUT;
}

/** Wait `ms`, or less when `signal` aborts (no timer is left behind). */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** 224.0.0.0/4 (multicast) or 255.255.255.255 (limited broadcast). */
function isMulticastOrBroadcastV4(ip: string): boolean {
  const first = Number(ip.slice(0, ip.indexOf('.')));
  return (first >= 224 && first <= 239) || ip === '255.255.255.255';
}

/** One empty datagram to the discard port: the kernel resolves the next hop to send it. */
function udpNudge(dst: string): void {
  const s = dgram.createSocket('udp4');
  s.on('error', () => s.close());
  s.send(Buffer.alloc(0), 9, dst, () => s.close());
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
  family: 'IPv4' | 'IPv6' | 'IB';
  /** ibv_qp_type: 2 = RC, 4 = UD. */
  qpType: number;
  portSpace: number;
  srcAddr: SockAddr | null;
  dstAddr: SockAddr | null;
  srcCanonname: string | null;
  dstCanonname: string | null;
}

/**
 * Hints for {@link getaddrinfo}. Family `'IB'` with the flags FAMILY and NUMERICHOST asks for
 * AF_IB addresses: the numeric address is read as a GID.
 */
export interface RdmaAddrinfoHints {
  flags?: number;
  family?: 'IPv4' | 'IPv6' | 'IB';
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
  EAI_ADDRFAMILY: [-9, 'Address family for hostname not supported'],
  ENODATA: [-5, 'No address associated with hostname'],
};

/** glibc's gai_strerror() for the EAI codes we produce. */
export function gaiStrerror(eai: number): string {
  for (const v of Object.values(EAI)) if (v[0] === eai) return v[1];
  if (eai === -1) return 'Bad value for ai_flags';
  return 'Unknown error';
}

/**
 * The port of a service string as glibc's getaddrinfo reads it: all of it a decimal number
 * (strtoul: leading white space and a sign allowed) stored in an int — a number that is negative
 * there is looked up as a name, anything else is kept to its low 16 bits (htons), so "99999"
 * is port 34463 —; otherwise a TCP service name from /etc/services. -1: EAI_SERVICE.
 */
export async function servicePort(service: string): Promise<number> {
  if (service === '') return 0; // strtoul stops at once and the end pointer is at the NUL
  const m = /^[ \t\n\v\f\r]*([+-]?)(\d+)$/.exec(service);
  if (m) {
    // strtoul: the value modulo 2^64 (saturating at ULONG_MAX), then the int it is stored in.
    let v = BigInt(m[2] as string);
    if (v > 0xffff_ffff_ffff_ffffn) v = 0xffff_ffff_ffff_ffffn;
    else if (m[1] === '-') v = BigInt.asUintN(64, -v);
    const num = Number(BigInt.asIntN(32, v));
    if (num >= 0) return num & 0xffff;
  }
  return (await serviceNames()).get(service) ?? -1;
}

let services: Promise<Map<string, number>> | null = null;
/** TCP service names and aliases of /etc/services (read once; empty if there is none). */
function serviceNames(): Promise<Map<string, number>> {
  services ??= readFile('/etc/services', 'latin1').then(
    (text) => {
      const map = new Map<string, number>();
      for (const line of text.split('\n')) {
        const f = (line.split('#')[0] as string).trim().split(/\s+/);
        const pm = /^(\d+)\/tcp$/.exec(f[1] ?? '');
        if (!pm) continue;
        for (const name of [f[0] as string, ...f.slice(2)]) if (!map.has(name)) map.set(name, Number(pm[1]));
      }
      return map;
    },
    () => new Map<string, number>(),
  );
  return services;
}

/**
 * The GID an IP address gives as an AF_IB address (librdmacm's `ucma_convert_in6`): an IPv6
 * address is the GID; an IPv4 one gives the zero GID (librdmacm reads its sockaddr_in as a
 * sockaddr_in6, whose address bytes lie past the IPv4 address: sin_zero and beyond).
 */
function gidOfIp(address: string, family: 4 | 6): string {
  return family === 6 ? address : '::';
}

/**
 * rdma_getaddrinfo(node, service, hints). EINVAL if node and service are both missing; name
 * resolution failures reject with a {@link GaiError} carrying the EAI code.
 */
export async function getaddrinfo(node: string | null, service: string | number | null, hints: RdmaAddrinfoHints = {}): Promise<RdmaAddrinfo> {
  const op = 'rdma_getaddrinfo';
  if (node === null && service === null) throw err('EINVAL', op, 'neither node nor service');
  if (node !== null && typeof node !== 'string') throw err('EINVAL', op, `node must be a string or null, not ${typeof node}`);
  if (service !== null && typeof service !== 'string' && typeof service !== 'number') throw err('EINVAL', op, `service must be a string, a port number or null, not ${typeof service}`);
  if (typeof hints !== 'object' || hints === null) throw err('EINVAL', op, 'hints must be an object');
  if (hints.family !== undefined && !['IPv4', 'IPv6', 'IB'].includes(hints.family)) throw err('EINVAL', op, `hints family ${String(hints.family)} (IPv4, IPv6 or IB)`);
  if (hints.srcAddr !== undefined) hints = { ...hints, srcAddr: checkSockAddr(hints.srcAddr, op, 'hints source') };
  const flags = hints.flags ?? 0;
  let port = 0;
  if (service !== null) {
    // A number is a port (checked as every port is); a string is read as glibc reads a service.
    const p = typeof service === 'number' ? checkPort(service, op, 'service') : await servicePort(service);
    if (p < 0) throw new GaiError(-8, 'EAI_SERVICE', gaiStrerror(-8));
    port = p;
  }
  const passive = (flags & RAI.PASSIVE) !== 0;
  // AF_IB is no family of the name lookup (librdmacm's ucma_convert_to_ai leaves it unset).
  const ipFamilyHint = hints.family === 'IB' ? undefined : hints.family;
  let address: string;
  let canon: string | null = null;
  let family: 4 | 6;
  if (node === '') throw new GaiError(-2, 'EAI_NONAME', gaiStrerror(-2));
  if (node === null) {
    family = ipFamilyHint === 'IPv6' ? 6 : 4;
    address = passive ? (family === 6 ? '::' : '0.0.0.0') : family === 6 ? '::1' : '127.0.0.1';
  } else if (net.isIP(node)) {
    family = net.isIP(node) as 4 | 6;
    address = node;
  } else {
    if (flags & RAI.NUMERICHOST) throw new GaiError(-2, 'EAI_NONAME', gaiStrerror(-2));
    try {
      const opts: dns.LookupOneOptions = {};
      if (ipFamilyHint) opts.family = ipFamilyHint === 'IPv6' ? 6 : 4;
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
  // An address of the other family than the hint asks for (glibc: EAI_ADDRFAMILY).
  if (ipFamilyHint && (ipFamilyHint === 'IPv6') !== (family === 6)) throw new GaiError(-9, 'EAI_ADDRFAMILY', gaiStrerror(-9));
  const afIb = hints.family === 'IB' && (flags & (RAI.FAMILY | RAI.NUMERICHOST)) === (RAI.FAMILY | RAI.NUMERICHOST);
  const sa: SockAddr = afIb ? { address: gidOfIp(address, family), port, family: 'IB' } : { address, port, family: family === 6 ? 'IPv6' : 'IPv4' };
  return {
    flags,
    family: sa.family as 'IPv4' | 'IPv6' | 'IB',
    qpType: hints.qpType ?? 2,
    portSpace: hints.portSpace ?? 0x0106,
    srcAddr: passive ? sa : (hints.srcAddr ?? null),
    dstAddr: passive ? null : sa,
    srcCanonname: passive ? canon : null,
    dstCanonname: passive ? null : canon,
  };
}
