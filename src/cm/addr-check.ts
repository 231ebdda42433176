/**
 * The argument checks of the CM calls, run before a call changes or sends anything: every address
 * a CM call takes (rdma_bind_addr, rdma_resolve_addr's source and destination,
 * rdma_join_multicast / rdma_leave_multicast, rdma_getaddrinfo's hints, rdma_create_ep's
 * `rdma_addrinfo`) by one function, the device name an id is pinned to, and the event channel an
 * id is created on or migrated to.
 *
 * librdmacm takes a `struct sockaddr` whose port field is 16 bits wide, so a port outside
 * 0..65535 cannot be expressed in C; here it can, and is refused (EINVAL) rather than truncated
 * (70000 would otherwise become 4464 on the wire). A value that is no address at all (`null`, a
 * string, a missing `address`) is EINVAL too, as the kernel's `ucma_bind`/`ucma_resolve_ip`
 * refuse an address they cannot read (`rdma_addr_size` 0). Every refusal says what was wrong.
 */
import net from 'node:net';
import { err } from '../errors.js';
import { getDeviceList } from '../verbs/device.js';
import type { SockAddr } from './addr.js';
import { EventChannel } from './event-channel.js';

/** The families a {@link SockAddr} may name. */
const FAMILIES: ReadonlySet<unknown> = new Set(['IPv4', 'IPv6', 'IB']);

/** The largest port number (`in_port_t` is 16 bits). */
export const MAX_PORT = 0xffff;

/** How {@link checkSockAddr} treats a missing port. */
export interface AddrCheckOptions {
  /** A missing (undefined) port is port 0 (a multicast group's address, whose port is unused). */
  portOptional?: boolean;
}

/**
 * Check `a`, the `what` argument of `op` (e.g. `'destination'`), and return it as a fresh
 * {@link SockAddr} with its family filled in. EINVAL (naming `what` and the bad value) unless it
 * is an object with an IP literal `address` (an IPv6 literal — the GID — for family `'IB'`), a
 * port that is an integer in 0..65535, and a family, when given, that is `'IPv4'`, `'IPv6'` or
 * `'IB'` and agrees with the address.
 */
export function checkSockAddr(a: unknown, op: string, what: string, opts: AddrCheckOptions = {}): SockAddr {
  if (typeof a !== 'object' || a === null || Array.isArray(a)) throw err('EINVAL', op, `${what} must be an address object { address, port }, not ${describe(a)}`);
  const { address, port, family } = a as { address?: unknown; port?: unknown; family?: unknown };
  if (typeof address !== 'string') throw err('EINVAL', op, `${what} address must be a string, not ${describe(address)}`);
  if (family !== undefined && !FAMILIES.has(family)) throw err('EINVAL', op, `${what} family ${describe(family)} (IPv4, IPv6 or IB)`);
  const kind = net.isIP(address);
  if (kind === 0) throw err('EINVAL', op, `${what} address ${JSON.stringify(address)} is not an IP address`);
  if (family === 'IB' && kind !== 6) throw err('EINVAL', op, `${what} address ${address}: an AF_IB address is a GID in IPv6 notation`);
  // An IPv4-mapped IPv6 literal may be labelled IPv4 (the id's own addresses come back so).
  const v4 = kind === 4 || (kind === 6 && /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(address));
  if ((family === 'IPv4' && !v4) || (family === 'IPv6' && kind !== 6)) throw err('EINVAL', op, `${what} address ${address} is not ${family}`);
  const p = checkPort(port === undefined && opts.portOptional === true ? 0 : port, op, what);
  return { address, port: p, family: (family as SockAddr['family']) ?? (kind === 6 ? 'IPv6' : 'IPv4') };
}

/** A port number (of `what`, in `op`'s error): an integer in 0..65535, else EINVAL. */
export function checkPort(port: unknown, op: string, what: string): number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > MAX_PORT) throw err('EINVAL', op, `${what} port ${describe(port)} (an integer in 0..${MAX_PORT})`);
  return port;
}

/** {@link checkSockAddr} for an argument that may be null or undefined (null then). */
export function checkOptionalSockAddr(a: unknown, op: string, what: string): SockAddr | null {
  return a === null || a === undefined ? null : checkSockAddr(a, op, what);
}

/**
 * The device names listed in this process so far. A soft device is listed while its interface
 * has an address; one whose interface went down is still the device it was (the kernel keeps
 * its siw or rxe device then), and a pin naming it is no unknown device.
 */
const seenDevices = new Set<string>();

/**
 * Check the device an id is pinned to (createId's `device`, or `RDMACM_DEVICE`, named by
 * `source`): EINVAL for a value that is no name, ENODEV naming it when no device has that name
 * (now or earlier in the process). `known` false skips the lookup (transports not loaded yet may
 * bring it).
 */
export function checkDevicePin(name: unknown, op: string, source: string, known = true): string {
  if (typeof name !== 'string' || name === '') throw err('EINVAL', op, `${source} must be a device name, not ${describe(name)}`);
  if (!known || seenDevices.has(name)) return name;
  for (const d of getDeviceList()) seenDevices.add(d.name);
  if (!seenDevices.has(name)) throw err('ENODEV', op, `no RDMA device named ${JSON.stringify(name)} (${source})`);
  return name;
}

/** An event channel argument: an EventChannel that is not destroyed, or null (EINVAL otherwise). */
export function checkChannel(channel: unknown, op: string): asserts channel is EventChannel | null {
  if (channel !== null && !(channel instanceof EventChannel)) throw err('EINVAL', op, 'channel must be an EventChannel or null');
  if (channel?.isDestroyed) throw err('EINVAL', op, 'channel destroyed');
}

/** A short description of a bad value for an error message. */
function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'undefined') return String(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (Array.isArray(v)) return 'an array';
  return `a ${typeof v}`;
}
