/**
 * The state of the network interfaces a soft device is bound to, as the kernel's netdev notifier
 * chain tells a driver about them (`NETDEV_UP`, `NETDEV_DOWN`, `NETDEV_CHANGE` for the carrier,
 * `NETDEV_CHANGEADDR`, `NETDEV_UNREGISTER`, and the address notifiers roce_gid_mgmt.c listens
 * to). A process has no notifier chain, so {@link readNetdevs} reads the same facts:
 *
 * - which interfaces exist: `/proc/net/dev` (procfs follows the reader's network namespace);
 * - which are running (`IFF_UP` and carrier: libuv's `uv_interface_addresses` lists only those)
 *   and their addresses and MAC: `os.networkInterfaces()`;
 * - `IFF_UP`, the carrier, the MAC and the MTU of each: `/sys/class/net/<if>/{flags,carrier,
 *   address,mtu}` — when sysfs is this namespace's (it lists the interfaces `/proc/net/dev`
 *   does). A sysfs mounted from another namespace (`unshare -n` without a new mount) is not
 *   read: an interface is then up exactly while it is running;
 * - the IPv6 addresses of an interface that is not running: `/proc/net/if_inet6` (the kernel
 *   keeps an IPv4 address on a downed interface and removes its IPv6 ones, unless
 *   `keep_addr_on_down`).
 *
 * Nothing here runs on its own: port-watch.ts calls it from its timer.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import type { DeviceAddress } from './device.js';

/** `IFF_UP` in `/sys/class/net/<if>/flags`. */
const IFF_UP = 0x1;

/** One interface as {@link readNetdevs} found it. */
export interface NetdevState {
  /** The interface name. */
  readonly name: string;
  /** Administratively up (`IFF_UP`, the kernel's `netif_running`). */
  readonly up: boolean;
  /** Up with a carrier (`netif_running && netif_carrier_ok`; libuv's `IFF_UP && IFF_RUNNING`). */
  readonly running: boolean;
  /** The hardware address (`aa:bb:cc:dd:ee:ff`); all zeros when unknown. */
  readonly mac: string;
  /** The MTU; 0 when unknown. */
  readonly mtu: number;
  /**
   * Its addresses: all of them while it is running; otherwise only its IPv6 ones
   * (`/proc/net/if_inet6`), and `ipv4Known` is false.
   */
  readonly addresses: DeviceAddress[];
  /** Whether `addresses` includes the IPv4 addresses (only known while running). */
  readonly ipv4Known: boolean;
}

const ZERO_MAC = '00:00:00:00:00:00';

/** The interface names of this network namespace (`/proc/net/dev`); null where there is none. */
function procNames(): string[] | null {
  let text: string;
  try {
    text = readFileSync('/proc/net/dev', 'utf8');
  } catch {
    return null;
  }
  const out: string[] = [];
  // Two header lines, then "  name: counters ...".
  const lines = text.split('\n');
  for (let k = 2; k < lines.length; k++) {
    const line = lines[k] as string;
    const colon = line.indexOf(':');
    if (colon > 0) out.push(line.slice(0, colon).trim());
  }
  return out;
}

/** Whether `/sys/class/net` lists exactly the interfaces of this namespace. */
function sysfsIsOurs(names: readonly string[]): boolean {
  let sys: string[];
  try {
    sys = readdirSync('/sys/class/net');
  } catch {
    return false;
  }
  if (sys.length !== names.length) return false;
  const set = new Set(sys);
  return names.every((n) => set.has(n));
}

function sysRead(ifname: string, attr: string): string | undefined {
  try {
    return readFileSync(`/sys/class/net/${ifname}/${attr}`, 'utf8').trim();
  } catch {
    // `carrier` of a downed interface cannot be read (EINVAL): no carrier.
    return undefined;
  }
}

/** The IPv6 addresses of every interface, from `/proc/net/if_inet6` (by interface name). */
function procInet6(): Map<string, DeviceAddress[]> {
  try {
    return parseIfInet6(readFileSync('/proc/net/if_inet6', 'utf8'));
  } catch {
    return new Map();
  }
}

/**
 * The addresses `/proc/net/if_inet6` lists, by interface name: one line per address — 32 hex
 * digits, interface index, prefix length, scope, flags (all hex), name. Lines not of that form
 * are skipped.
 */
export function parseIfInet6(text: string): Map<string, DeviceAddress[]> {
  const out = new Map<string, DeviceAddress[]>();
  for (const line of text.split('\n')) {
    // "fe80000000000000f0e672fffe4e937f 03 40 20 80 v0": address, ifindex, prefix, scope, flags, name.
    const f = line.trim().split(/\s+/);
    if (f.length < 6 || !/^[0-9a-fA-F]{32}$/.test(f[0] as string)) continue;
    const hex = f[0] as string;
    const groups: string[] = [];
    for (let k = 0; k < 32; k += 4) groups.push(hex.slice(k, k + 4).toLowerCase().replace(/^0+(?=.)/, ''));
    const prefix = parseInt(f[2] as string, 16);
    const scope = parseInt(f[3] as string, 16);
    const a: DeviceAddress = { address: compressIpv6(groups), family: 'IPv6', netmask: ipv6Mask(prefix) };
    // Link scope (0x20): the address carries its interface index as zone.
    if (scope === 0x20) a.scopeid = parseInt(f[1] as string, 16);
    const name = f[5] as string;
    const list = out.get(name) ?? [];
    list.push(a);
    out.set(name, list);
  }
  return out;
}

/** RFC 5952 text of eight hex groups: the longest run (two or more) of zero groups as `::`. */
function compressIpv6(groups: readonly string[]): string {
  let best = -1;
  let bestLen = 1;
  for (let k = 0; k < 8; ) {
    if (groups[k] !== '0') {
      k++;
      continue;
    }
    let e = k;
    while (e < 8 && groups[e] === '0') e++;
    if (e - k > bestLen) {
      best = k;
      bestLen = e - k;
    }
    k = e;
  }
  if (best < 0) return groups.join(':');
  return `${groups.slice(0, best).join(':')}::${groups.slice(best + bestLen).join(':')}`;
}

function ipv6Mask(prefix: number): string {
  const groups: string[] = [];
  for (let k = 0; k < 8; k++) {
    const bits = Math.max(0, Math.min(16, prefix - 16 * k));
    groups.push((bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff).toString(16));
  }
  return compressIpv6(groups);
}

/**
 * The interfaces of this network namespace now, by name; `detail` names those whose flags,
 * carrier, MAC and MTU are read from sysfs (the others get what `os.networkInterfaces()` says).
 * An address label (`eth0:1`) counts as an interface while it is listed. Never throws: what
 * cannot be read is left at its fallback.
 * @returns null where the interfaces cannot be listed (no `/proc/net/dev`: not Linux): nothing
 *   can be told then.
 */
export function readNetdevs(detail: ReadonlySet<string>): Map<string, NetdevState> | null {
  const proc = procNames();
  if (proc === null) return null;
  const out = new Map<string, NetdevState>();
  const running = networkInterfaces();
  const names = [...proc, ...Object.keys(running).filter((n) => !proc.includes(n))];
  const sysfs = detail.size > 0 && sysfsIsOurs(proc);
  let inet6: Map<string, DeviceAddress[]> | null = null;
  for (const name of names) {
    const infos = running[name] ?? [];
    const isRunning = infos.length > 0;
    let mac = ZERO_MAC;
    const addresses: DeviceAddress[] = [];
    for (const i of infos) {
      const fam = i.family as unknown;
      const family: 'IPv4' | 'IPv6' = fam === 'IPv6' || fam === 6 ? 'IPv6' : 'IPv4';
      const a: DeviceAddress = { address: i.address, family, netmask: i.netmask };
      if (family === 'IPv6' && 'scopeid' in i && typeof i.scopeid === 'number') a.scopeid = i.scopeid;
      addresses.push(a);
      if (i.mac && i.mac !== ZERO_MAC) mac = i.mac;
    }
    let up = isRunning;
    let carrier = isRunning;
    let mtu = 0;
    if (sysfs && detail.has(name)) {
      const flags = sysRead(name, 'flags');
      if (flags !== undefined) up = (parseInt(flags, 16) & IFF_UP) !== 0;
      carrier = up && sysRead(name, 'carrier') === '1';
      mac = sysRead(name, 'address') ?? mac;
      mtu = Number(sysRead(name, 'mtu') ?? 0) || 0;
    }
    if (!isRunning && detail.has(name)) {
      inet6 ??= procInet6();
      addresses.push(...(inet6.get(name) ?? []));
    }
    out.set(name, { name, up, running: sysfs && detail.has(name) ? carrier : isRunning, mac, mtu, addresses, ipv4Known: isRunning });
  }
  return out;
}
