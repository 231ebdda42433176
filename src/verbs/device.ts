/**
 * RDMA devices: `ibv_get_device_list`, `ibv_open_device`, `ibv_query_device`/`ibv_query_port`
 * (their structs are in device-attr.ts), and the network-interface listing a software provider
 * builds its devices from.
 *
 * Devices come from the registered providers (see provider.ts). `Device` objects are cached by
 * name, and each device has one per-process `Context` (librdmacm opens every device once and
 * keeps it open; so do we).
 */
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { err } from '../errors.js';
import { ipKey, isLoopbackIp } from '../util/ip.js';
import { Context } from './context.js';
import { getProvider, listProviders, type VerbsProvider } from './provider.js';
import { TransportType } from './types.js';
import { NodeType, type DeviceAttr, type PortAttr } from './device-attr.js';

/** The attribute structs and enums live in device-attr.ts; they are part of this module's face. */
export {
  AtomicCap,
  DEVICE_MEM_MGT_EXTENSIONS,
  DEVICE_MEM_WINDOW,
  DEVICE_MEM_WINDOW_TYPE_2A,
  DEVICE_MEM_WINDOW_TYPE_2B,
  DEVICE_BLOCK_MULTICAST_LOOPBACK,
  LinkLayer,
  Mtu,
  NodeType,
  PORT_CAP_CM_SUP,
  PORT_CAP_DEVICE_MGMT_SUP,
  PortState,
  mtuEnumToBytes,
  mtuToEnum,
  nodeTypeStr,
  portStateStr,
  type DeviceAttr,
  type PortAttr,
} from './device-attr.js';

/** One interface address of a device (a subset of Node's `os.NetworkInterfaceInfo`). */
export interface DeviceAddress {
  address: string;
  family: 'IPv4' | 'IPv6';
  netmask: string;
  /** IPv6 scope (interface index) for link-local addresses. */
  scopeid?: number;
}

/** What a provider reports for each device it offers ({@link VerbsProvider.listDevices}). */
export interface DeviceInfo {
  /** Device name, unique across providers, e.g. `'siw_lo'`, `'siw_eth0'`. */
  name: string;
  /** The provider's name (`'siw'`). */
  provider: string;
  /** `transport_type`. */
  transport: TransportType;
  /** The network interface the device is bound to (`iw_ifname`). */
  ifname: string;
  /** The interface's addresses. */
  addresses: DeviceAddress[];
  /** `node_guid` as the 64-bit big-endian value ibv_devinfo prints (derived from the interface's MAC address, as rxe and siw derive theirs). */
  nodeGuid: bigint;
  /** The interface MTU in bytes (port `active_mtu` is derived from it). */
  mtu: number;
  /** Interface MAC (`aa:bb:cc:dd:ee:ff`); used for `sys_image_guid`. Optional. */
  mac?: string;
  /** Overrides of the provider's default device attributes (for tests, or per-device limits). */
  caps?: Partial<DeviceAttr>;
}

/** A network interface as seen by {@link netdevs}. */
export interface NetdevInfo {
  /** Interface name (`'lo'`, `'eth0'`). */
  name: string;
  /** MAC address, `'00:00:00:00:00:00'` for loopback. */
  mac: string;
  /** MTU from `/sys/class/net/<if>/mtu`; else 65536 for loopback and 1500 otherwise. */
  mtu: number;
  /** True for the loopback interface (Node's `internal`). */
  loopback: boolean;
  /** Addresses, in `os.networkInterfaces()` order. */
  addresses: DeviceAddress[];
}

/**
 * List the network interfaces that have at least one address, with MAC and MTU, for providers
 * that build one device per interface (siw's `siw_newlink` per netdev). Interfaces without an
 * address (down) are not listed, as `os.networkInterfaces()` omits them.
 */
export function netdevs(): NetdevInfo[] {
  const out: NetdevInfo[] = [];
  for (const [name, infos] of Object.entries(networkInterfaces())) {
    if (!infos || infos.length === 0) continue;
    const loopback = infos.some((i) => i.internal);
    const addresses: DeviceAddress[] = [];
    let mac = '00:00:00:00:00:00';
    for (const i of infos) {
      const fam = i.family as unknown;
      const family: 'IPv4' | 'IPv6' = fam === 'IPv6' || fam === 6 ? 'IPv6' : 'IPv4';
      const a: DeviceAddress = { address: i.address, family, netmask: i.netmask };
      if (family === 'IPv6' && 'scopeid' in i && typeof i.scopeid === 'number') a.scopeid = i.scopeid;
      addresses.push(a);
      if (i.mac && i.mac !== '00:00:00:00:00:00') mac = i.mac;
    }
    out.push({ name, mac, mtu: readMtu(name, loopback), loopback, addresses });
  }
  return out;
}

function readMtu(ifname: string, loopback: boolean): number {
  const fallback = loopback ? 65536 : 1500;
  if (ifname.includes('/') || ifname === '.' || ifname === '..') return fallback;
  try {
    const v = Number(readFileSync(`/sys/class/net/${ifname}/mtu`, 'utf8').trim());
    return Number.isInteger(v) && v > 0 ? v : fallback;
  } catch {
    return fallback;
  }
}

/** Parse `aa:bb:cc:dd:ee:ff` (or `-` separated) into 6 bytes; `undefined` if malformed. */
function macBytes(mac: string): number[] | undefined {
  const parts = mac.split(/[:-]/);
  if (parts.length !== 6 || !parts.every((p) => /^[0-9a-fA-F]{1,2}$/.test(p))) return undefined;
  return parts.map((p) => parseInt(p, 16));
}

function bytesToBigint(b: readonly number[]): bigint {
  let v = 0n;
  for (const x of b) v = (v << 8n) | BigInt(x & 0xff);
  return v;
}

/**
 * siw's `node_guid` for an Ethernet interface: the MAC in the first six bytes, then two zero
 * bytes (siw_device_create copies `dev_addr` into the start of the GUID).
 * @throws RdmaError EINVAL for a malformed MAC.
 */
export function guidFromMac(mac: string): bigint {
  const b = macBytes(mac);
  if (!b) throw err('EINVAL', 'guidFromMac', `bad MAC '${mac}'`);
  return bytesToBigint([...b, 0, 0]);
}

/**
 * siw's `node_guid` for the loopback interface (which has no MAC): the first (up to) six bytes
 * of the device name, zero padded, so the GUID is non-zero as the CM expects.
 */
export function guidFromName(name: string): bigint {
  const b: number[] = [];
  for (let k = 0; k < 8; k++) b.push(k < 6 && k < name.length ? name.charCodeAt(k) & 0xff : 0);
  return bytesToBigint(b);
}

/** Modified EUI-64 from a MAC (`addrconf_addr_eui48`): siw's `sys_image_guid`. */
export function eui64FromMac(mac: string): bigint {
  const b = macBytes(mac) ?? [0, 0, 0, 0, 0, 0];
  return bytesToBigint([(b[0] ?? 0) ^ 2, b[1] ?? 0, b[2] ?? 0, 0xff, 0xfe, b[3] ?? 0, b[4] ?? 0, b[5] ?? 0]);
}

/** Format a GUID the way ibv_devinfo does: `xxxx:xxxx:xxxx:xxxx`. */
export function formatGuid(guid: bigint): string {
  const h = BigInt.asUintN(64, guid).toString(16).padStart(16, '0');
  return `${h.slice(0, 4)}:${h.slice(4, 8)}:${h.slice(8, 12)}:${h.slice(12, 16)}`;
}

let nextVendorPartId = 1;

/**
 * `struct ibv_device`: one RDMA device offered by a provider. Obtain with {@link getDeviceList};
 * the same object is returned for the same device name every time.
 */
export class Device {
  /** `name`, e.g. `'siw_lo'`. */
  readonly name: string;
  /** siw numbers its devices from 1 in registration order (`vendor_part_id`). */
  readonly vendorPartId: number;
  private _info: DeviceInfo;
  private _ctx: Context | undefined;

  /** @internal Created by {@link getDeviceList}. */
  constructor(info: DeviceInfo) {
    this.name = info.name;
    this._info = info;
    this.vendorPartId = nextVendorPartId++;
  }

  /** The provider's latest description of this device. */
  get info(): Readonly<DeviceInfo> {
    return this._info;
  }

  /** The provider name (`'siw'`). */
  get provider(): string {
    return this._info.provider;
  }

  /** `transport_type`. */
  get transportType(): TransportType {
    return this._info.transport;
  }

  /** `node_type`: RNIC for iWARP, CA for InfiniBand/RoCE. */
  get nodeType(): NodeType {
    switch (this._info.transport) {
      case TransportType.IWARP:
        return NodeType.RNIC;
      case TransportType.IB:
        return NodeType.CA;
      case TransportType.USNIC:
        return NodeType.USNIC;
      case TransportType.USNIC_UDP:
        return NodeType.USNIC_UDP;
      default:
        return NodeType.UNKNOWN;
    }
  }

  /** The bound network interface. */
  get ifname(): string {
    return this._info.ifname;
  }

  /** `ibv_get_device_guid()`: the node GUID. */
  get guid(): bigint {
    return this._info.nodeGuid;
  }

  /**
   * `ibv_open_device()`. Returns the per-process singleton context of this device (created on
   * first call), open until a `Context.close()` matches this open and every other (a closed one
   * is opened again).
   */
  open(): Context {
    if (this._ctx === undefined) {
      this._ctx = getProvider(this._info.provider)?.openDevice?.(this) ?? new Context(this);
      contextOpenHook?.(this._ctx);
    }
    this._ctx._open();
    return this._ctx;
  }

  /**
   * @internal The device's provider.
   * @throws RdmaError ENODEV once the provider is unregistered.
   */
  _provider(op: string): VerbsProvider {
    const p = getProvider(this._info.provider);
    if (p === undefined) throw err('ENODEV', op, `provider '${this._info.provider}' not registered`);
    return p;
  }

  /** @internal The attributes `ibv_query_device` reports: the provider's, with `info.caps` over them. */
  _deviceAttr(): DeviceAttr {
    const base = this._provider('ibv_open_device').queryDevice(this._info, this.vendorPartId);
    return { ...base, ...(this._info.caps ?? {}) };
  }

  /** @internal The attributes `ibv_query_port` reports for `portNum` (already range-checked). */
  _portAttr(portNum: number): PortAttr {
    return this._provider('ibv_query_port').queryPort(this._info, portNum);
  }

  /**
   * @internal The device is gone (its interface unregistered): the next listing of a device of
   * that name makes a new `Device` with a new context; this one keeps its dead context.
   */
  _removed(): void {
    if (devices.get(this.name) === this) devices.delete(this.name);
  }

  /** @internal The provider re-listed the device (addresses may have changed). */
  _update(info: DeviceInfo): void {
    this._info = info;
  }
}

const devices = new Map<string, Device>();

let contextOpenHook: ((ctx: Context) => void) | null = null;

/** @internal Called with each context when it is first made (the per-process listing, src/stat/). */
export function _setContextOpenHook(fn: ((ctx: Context) => void) | null): void {
  contextOpenHook = fn;
}

/** @internal The contexts this process opened (the resource listing, src/stat/), device order. */
export function _openContexts(): Context[] {
  const out: Context[] = [];
  for (const d of devices.values()) {
    const c = (d as unknown as { _ctx: Context | undefined })._ctx;
    if (c !== undefined) out.push(c);
  }
  return out;
}

/**
 * `ibv_get_device_list()`: one {@link Device} per device of every registered provider, in
 * provider registration order. Device objects are cached by name. A device name already used
 * by another provider's device is skipped.
 * @throws RdmaError EINVAL if a provider returns a malformed device description.
 */
export function getDeviceList(): Device[] {
  const out: Device[] = [];
  for (const p of listProviders()) {
    for (const info of p.listDevices()) {
      if (typeof info !== 'object' || info === null || typeof info.name !== 'string' || info.name === '') {
        throw err('EINVAL', 'ibv_get_device_list', `provider '${p.name}': bad device description`);
      }
      if (info.provider !== p.name || !Array.isArray(info.addresses) || typeof info.nodeGuid !== 'bigint') {
        throw err('EINVAL', 'ibv_get_device_list', `provider '${p.name}': bad device '${info.name}'`);
      }
      let dev = devices.get(info.name);
      if (dev === undefined) {
        dev = new Device(info);
        devices.set(info.name, dev);
      } else if (dev.provider !== p.name) {
        continue;
      } else {
        dev._update(info);
      }
      if (!out.includes(dev)) out.push(dev);
    }
  }
  return out;
}

/**
 * Every device owning interface address `ip`, in `getDeviceList()` order (exact match after
 * normalization: IPv4-mapped IPv6 `::ffff:a.b.c.d` matches `a.b.c.d`, IPv6 zones are ignored).
 * Several devices own an address when several providers serve one interface (an iWARP and a
 * RoCE device on `eth0`, as siw and rxe can both be linked to it). A loopback address (127/8,
 * `::1`) that no device owns exactly maps to the devices holding any loopback address.
 * @returns an empty list if no device matches or `ip` is not an IP address (wildcards included).
 */
export function findDevicesByAddress(ip: string): Device[] {
  const key = ipKey(ip);
  if (key === undefined) return [];
  const list = getDeviceList();
  const out = list.filter((dev) => dev.info.addresses.some((a) => ipKey(a.address) === key));
  if (out.length > 0 || !isLoopbackIp(key)) return out;
  return list.filter((dev) => dev.info.addresses.some((a) => isLoopbackIp(a.address)));
}

/**
 * The first device owning interface address `ip` (see {@link findDevicesByAddress}); the CM
 * chooses among several by port space instead.
 * @returns `undefined` if no device matches or `ip` is not an IP address (wildcards included).
 */
export function findDeviceByAddress(ip: string): Device | undefined {
  return findDevicesByAddress(ip)[0];
}
