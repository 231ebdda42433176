/**
 * The GID table of a soft RoCE port, as the kernel builds it for rxe (core/roce_gid_mgmt.c,
 * core/cache.c): rxe ports carry RoCE v2 GIDs only (`RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP`).
 *
 * - index 0: the default GID, `fe80::` + the modified EUI-64 of the interface MAC
 *   (`make_default_gid`), present whatever addresses the interface has;
 * - then one entry per interface address, IPv4 first then IPv6, each IPv4 address as the
 *   IPv4-mapped IPv6 address `::ffff:a.b.c.d`; an address equal to an entry already in the table
 *   (the link-local address derived from the MAC) is not added twice.
 *
 * GIDs are 16-byte arrays in network order; the address strings kept beside them are what the
 * UDP layer binds and sends to.
 */
import { parseIpv4, parseIpv6, stripZone } from '../../util/ip.js';
import { formatIp } from '../../wire/roce/index.js';
import { eui64, macToBytes } from './params.js';

/** `enum ibv_gid_type` values ibverbs reports (`IBV_GID_TYPE_ROCE_V2`). */
export enum GidType {
  IB = 0,
  ROCE_V1 = 1,
  ROCE_V2 = 2,
}

/** One GID table entry. */
export interface GidEntry {
  /** The table index. */
  index: number;
  /** The GID, 16 bytes. */
  gid: Uint8Array;
  /** Always RoCE v2 on this device. */
  type: GidType;
  /** The IP address the GID stands for (IPv4 dotted quad, or IPv6 without zone). */
  ip: string;
  /** 4 or 6. */
  family: 4 | 6;
  /** IPv6 zone (interface name) for link-local addresses, else ''. */
  zone: string;
}

/** The IPv4-mapped GID of an IPv4 address (dotted quad), `::ffff:a.b.c.d`. */
export function gidFromIpv4(ip: string): Uint8Array | undefined {
  const v = parseIpv4(ip);
  if (v === undefined) return undefined;
  const g = new Uint8Array(16);
  g[10] = 0xff;
  g[11] = 0xff;
  g[12] = v >>> 24;
  g[13] = (v >>> 16) & 0xff;
  g[14] = (v >>> 8) & 0xff;
  g[15] = v & 0xff;
  return g;
}

/** The GID of an IPv6 address (the address itself, zone dropped). */
export function gidFromIpv6(ip: string): Uint8Array | undefined {
  const w = parseIpv6(ip);
  if (w === undefined) return undefined;
  const g = new Uint8Array(16);
  for (let k = 0; k < 8; k++) {
    g[2 * k] = (w[k] ?? 0) >>> 8;
    g[2 * k + 1] = (w[k] ?? 0) & 0xff;
  }
  return g;
}

/** The GID of any IP address string (IPv4, IPv4-mapped IPv6, or IPv6). */
export function gidFromIp(ip: string): Uint8Array | undefined {
  return parseIpv4(ip) !== undefined ? gidFromIpv4(ip) : gidFromIpv6(ip);
}

/** Whether a GID is IPv4-mapped (`::ffff:0:0/96`). */
export function isV4MappedGid(g: Uint8Array): boolean {
  for (let k = 0; k < 10; k++) if (g[k] !== 0) return false;
  return g[10] === 0xff && g[11] === 0xff;
}

/**
 * The IP address a GID stands for: dotted quad for IPv4-mapped GIDs, otherwise the IPv6 address
 * in its shortest text form. `family` tells which.
 */
export function ipFromGid(g: Uint8Array): { ip: string; family: 4 | 6 } {
  if (isV4MappedGid(g)) return { ip: `${g[12]}.${g[13]}.${g[14]}.${g[15]}`, family: 4 };
  return { ip: formatIpv6(g), family: 6 };
}

/** Whether a GID is a multicast address: `ff00::/8`, or an IPv4-mapped 224.0.0.0/4 address. */
export function isMulticastGid(g: Uint8Array): boolean {
  if (g[0] === 0xff) return true;
  return isV4MappedGid(g) && ((g[12] ?? 0) & 0xf0) === 0xe0;
}

/**
 * RFC 5952 text of 16 address bytes (`inet_ntop(AF_INET6)`, which is also how ibv_devinfo prints
 * a GID): the wire layer's {@link formatIp}.
 */
export function formatIpv6(g: Uint8Array): string {
  return formatIp(g);
}

/** Whether two GIDs are equal. */
export function gidEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== 16 || b.length !== 16) return false;
  for (let k = 0; k < 16; k++) if (a[k] !== b[k]) return false;
  return true;
}

/** A 32-character hex key of a GID, for maps. */
export function gidKey(g: Uint8Array): string {
  let s = '';
  for (let k = 0; k < 16; k++) s += (g[k] ?? 0).toString(16).padStart(2, '0');
  return s;
}

/** An interface address as {@link buildGidTable} needs it. */
export interface IfAddress {
  address: string;
  family: 'IPv4' | 'IPv6';
}

/**
 * The GID table of a port on interface `ifname` with MAC `mac` and addresses `addresses`
 * (in `os.networkInterfaces()` order).
 */
export function buildGidTable(ifname: string, mac: string, addresses: readonly IfAddress[]): GidEntry[] {
  const table: GidEntry[] = [];
  const add = (gid: Uint8Array, ip: string, family: 4 | 6, zone: string): void => {
    if (table.some((e) => gidEqual(e.gid, gid))) return;
    table.push({ index: table.length, gid, type: GidType.ROCE_V2, ip, family, zone });
  };
  const dflt = new Uint8Array(16);
  dflt[0] = 0xfe;
  dflt[1] = 0x80;
  dflt.set(eui64(macToBytes(mac)), 8);
  add(dflt, formatIpv6(dflt), 6, ifname);
  for (const a of addresses) {
    if (a.family !== 'IPv4') continue;
    const g = gidFromIpv4(a.address);
    if (g) add(g, a.address, 4, '');
  }
  for (const a of addresses) {
    if (a.family !== 'IPv6') continue;
    const ip = stripZone(a.address);
    const g = gidFromIpv6(ip);
    if (!g) continue;
    const linkLocal = g[0] === 0xfe && ((g[1] ?? 0) & 0xc0) === 0x80;
    add(g, formatIpv6(g), 6, linkLocal ? ifname : '');
  }
  return table;
}

/**
 * The table after the interface changed, as the kernel's GID cache keeps it (cache.c
 * `add_modify_gid` / `del_gid`): an entry whose GID is still wanted keeps its index, a GID gone
 * frees its index (reported as unused, zeros), a new GID takes the lowest free index above the
 * default GID's, and the default GID (`fresh[0]`, from the MAC) always sits at index 0. So an
 * address handle or a connection that names a GID index keeps naming the same GID.
 * @param old the current table (sorted by index).
 * @param fresh the table {@link buildGidTable} makes for the interface now.
 * @returns the new table, sorted by index.
 */
export function mergeGidTable(old: readonly GidEntry[], fresh: readonly GidEntry[]): GidEntry[] {
  const out: GidEntry[] = [];
  const used = new Set<number>();
  const placed = new Set<GidEntry>();
  const dflt = fresh[0];
  if (dflt !== undefined) {
    out.push({ ...dflt, index: 0 });
    used.add(0);
    placed.add(dflt);
  }
  for (const f of fresh) {
    if (placed.has(f)) continue;
    const o = old.find((e) => e.index > 0 && gidEqual(e.gid, f.gid));
    if (o === undefined || used.has(o.index)) continue;
    out.push({ ...f, index: o.index });
    used.add(o.index);
    placed.add(f);
  }
  let next = 1;
  for (const f of fresh) {
    if (placed.has(f)) continue;
    while (used.has(next)) next++;
    out.push({ ...f, index: next });
    used.add(next);
  }
  return out.sort((a, b) => a.index - b.index);
}
