/**
 * Small IP address functions: canonical comparison keys (so `::FFFF:10.0.0.1`, `::ffff:a00:1` and
 * `10.0.0.1` compare equal, and `fe80:0::1%eth0` equals `fe80::1`), loopback tests.
 * Pure string/number code, no DNS and no sockets.
 */

/** Parse dotted-quad IPv4 (exactly four decimal octets 0..255) to a uint32, else `undefined`. */
export function parseIpv4(s: string): number | undefined {
  // One pass over the characters: 1-3 ASCII digits per octet (leading zeros allowed), 3 dots.
  let v = 0;
  let n = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      if (++digits > 3) return undefined;
      n = n * 10 + (c - 0x30);
    } else if (c === 0x2e) {
      if (digits === 0 || n > 255 || ++dots > 3) return undefined;
      v = v * 256 + n;
      n = 0;
      digits = 0;
    } else return undefined;
  }
  if (dots !== 3 || digits === 0 || n > 255) return undefined;
  return v * 256 + n;
}

/** Format a uint32 as dotted-quad IPv4. */
export function formatIpv4(v: number): string {
  return `${(v >>> 24) & 255}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
}

/** Remove an IPv6 zone suffix (`fe80::1%eth0` → `fe80::1`). */
export function stripZone(s: string): string {
  const i = s.indexOf('%');
  return i < 0 ? s : s.slice(0, i);
}

/**
 * Parse an IPv6 address (with `::` compression, an optional dotted IPv4 tail and an optional
 * zone suffix) into eight 16-bit words, else `undefined`.
 */
export function parseIpv6(input: string): number[] | undefined {
  let s = stripZone(input);
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const tail: number[] = [];
  if (s.includes('.')) {
    const cut = s.lastIndexOf(':');
    if (cut < 0) return undefined;
    const v4 = parseIpv4(s.slice(cut + 1));
    if (v4 === undefined) return undefined;
    tail.push(v4 >>> 16, v4 & 0xffff);
    // keep a trailing ':' only when it is part of '::'
    s = s.slice(0, cut + 1);
    if (s.endsWith('::')) {
      // fine: '::' followed by the IPv4 part
    } else if (s.endsWith(':')) {
      s = s.slice(0, -1);
    }
  }
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const parseGroups = (part: string): number[] | undefined => {
    if (part === '') return [];
    const out: number[] = [];
    for (const g of part.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = parseGroups(halves[0] ?? '');
  if (head === undefined) return undefined;
  if (halves.length === 1) {
    const words = [...head, ...tail];
    return words.length === 8 ? words : undefined;
  }
  const rest = parseGroups(halves[1] ?? '');
  if (rest === undefined) return undefined;
  const given = head.length + rest.length + tail.length;
  if (given > 7) return undefined;
  const zeros: number[] = [];
  for (let k = 0; k < 8 - given; k++) zeros.push(0);
  return [...head, ...zeros, ...rest, ...tail];
}

/**
 * A canonical key for comparing addresses: dotted-quad for IPv4 and for IPv4-mapped IPv6
 * (`::ffff:a.b.c.d`), otherwise eight lower-case hex words joined by ':' (zone dropped).
 * `undefined` when `s` is not an IP address.
 */
export function ipKey(s: string): string | undefined {
  // A connection asks for the keys of the same few addresses several times (its device, the
  // wildcard and loopback tests): remembered, they are parsed once per process.
  const k = keyCache.get(s);
  if (k !== undefined || keyCache.has(s)) return k;
  const key = computeIpKey(s);
  if (keyCache.size >= KEY_CACHE_MAX) keyCache.clear();
  keyCache.set(s, key);
  return key;
}
const keyCache = new Map<string, string | undefined>();
const KEY_CACHE_MAX = 1024;

function computeIpKey(s: string): string | undefined {
  const v4 = parseIpv4(s);
  if (v4 !== undefined) return formatIpv4(v4);
  const w = parseIpv6(s);
  if (w === undefined) return undefined;
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0 && w[4] === 0 && w[5] === 0xffff) {
    return formatIpv4(((w[6] ?? 0) * 65536 + (w[7] ?? 0)) >>> 0);
  }
  return w.map((x) => x.toString(16)).join(':');
}

/** True for 127.0.0.0/8, `::1` and IPv4-mapped 127/8. Accepts a key from {@link ipKey} or any address. */
export function isLoopbackIp(s: string): boolean {
  const key = ipKey(s);
  if (key === undefined) return false;
  if (key === '0:0:0:0:0:0:0:1') return true;
  const v4 = parseIpv4(key);
  return v4 !== undefined && v4 >>> 24 === 127;
}

/** True for the wildcard addresses (0.0.0.0, ::, ::ffff:0.0.0.0). */
export function isAnyIp(s: string): boolean {
  const key = ipKey(s);
  return key === '0.0.0.0' || key === '0:0:0:0:0:0:0:0';
}

/** Strip an IPv4-mapped prefix (`::ffff:1.2.3.4` → `1.2.3.4`). */
export function unmapV4(address: string): string {
  return address.startsWith('::ffff:') && parseIpv4(address.slice(7)) !== undefined ? address.slice(7) : address;
}
