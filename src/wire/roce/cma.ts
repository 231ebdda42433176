/**
 * What rdma_cm (Linux `drivers/infiniband/core/cma.c`, `include/rdma/rdma_cm.h`) puts into IB CM
 * messages over RoCE, and the address ↔ GID mappings it uses:
 *
 * - the Service ID of REQ / SIDR_REQ: `(port space << 16) | port` (RDMA_PS_TCP 0x0106 →
 *   0x0000000001060000 | port);
 * - the 36-byte CMA header at the start of REQ and SIDR_REQ private data:
 *   ```
 *    0  cma_version (0x00)   1  IP version << 4 (0x40 / 0x60)   2  source port (16)
 *    4  source address (16)  — IPv6 as is; IPv4 as 12 zero bytes + the 4-byte address
 *   20  destination address (16), same encoding
 *   ```
 *   (note: **not** the ::ffff: mapping the GIDs use);
 * - RoCE GIDs from IP addresses (IPv4 → ::ffff:a.b.c.d) and the multicast MGID of an IP group
 *   (`cma_iboe_set_mgid`);
 * - the RoCEv2 flow label rdma_cm puts in path records (`cma_get_roce_udp_flow_label`).
 *
 * @module
 */
import { err } from '../../errors.js';
import { FLOW_LABEL_MASK } from './packet.js';
import { formatIpv6Text } from '../../ip-text.js';

/** rdma_cm port spaces (`enum rdma_ucm_port_space`). */
export const RdmaPortSpace = {
  /** IP over IB port space (UD). */
  IPOIB: 0x0002,
  /** TCP port space: RC and UC QPs. */
  TCP: 0x0106,
  /** UDP port space: UD QPs (SIDR). */
  UDP: 0x0111,
  /** IB port space: any QP type. */
  IB: 0x013f,
} as const;

/** The rdma_cm numbers of ib-numbers.ts: the service ID's port-space mask and prefixes, RDMA_UDP_QKEY. */
export { RDMA_IB_IP_PS_MASK, RDMA_IB_IP_PS_TCP, RDMA_IB_IP_PS_UDP, RDMA_IB_IP_PS_IB, RDMA_UDP_QKEY } from '../../ib-numbers.js';

/** rdma_cm Service ID of (port space, port): `(ps << 16) | port` (cma.c `cma_get_service_id`). */
export function cmaServiceId(ps: number, port: number): bigint {
  return (BigInt(ps >>> 0) << 16n) | BigInt(port & 0xffff);
}

/** The two halves of an rdma_cm Service ID. */
export interface CmaServiceIdParts {
  /** Port space ({@link RdmaPortSpace}), bits 63..16. */
  ps: number;
  /** Port, bits 15..0. */
  port: number;
}

/** Port space and port of an rdma_cm Service ID (the inverse of {@link cmaServiceId}). */
export function cmaServiceIdParts(serviceId: bigint): CmaServiceIdParts {
  const s = BigInt.asUintN(64, serviceId);
  return { ps: Number(s >> 16n), port: Number(s & 0xffffn) };
}

// ---- CMA header -------------------------------------------------------------------------------

/** CMA header version (cma.c `CMA_VERSION`). */
export const CMA_VERSION = 0x00;
/** Size of the CMA header. */
export const CMA_HDR_LEN = 36;
/** User private data rdma_connect can send (REQ private data 92 - CMA header 36). */
export const CMA_REQ_USER_PD = 56;
/** User private data a UD rdma_connect can send (SIDR_REQ private data 216 - 36). */
export const CMA_SIDR_USER_PD = 180;

/** The CMA header rdma_cm prepends to REQ / SIDR_REQ private data. */
export interface CmaHeader {
  /** cma_version, 0. */
  version: number;
  /** IP version: 4 or 6 (the high nibble of byte 1). */
  ipVersion: 4 | 6;
  /** The active side's source port. */
  srcPort: number;
  /** Active side's address: 4 bytes (IPv4) or 16 (IPv6). */
  src: Uint8Array;
  /** Passive side's address, as `src`. */
  dst: Uint8Array;
}

/** Write a CMA header at `b[off]` (36 bytes); returns `off + 36`. */
export function writeCmaHeader(b: Uint8Array, off: number, h: CmaHeader): number {
  const n = h.ipVersion === 4 ? 4 : 16;
  if (h.src.length !== n || h.dst.length !== n) {
    throw err('EINVAL', 'writeCmaHeader', `IPv${h.ipVersion} addresses must be ${n} bytes`);
  }
  b.fill(0, off, off + CMA_HDR_LEN);
  b[off] = h.version;
  b[off + 1] = h.ipVersion << 4;
  b[off + 2] = h.srcPort >>> 8;
  b[off + 3] = h.srcPort;
  b.set(h.src, off + 4 + 16 - n);
  b.set(h.dst, off + 20 + 16 - n);
  return off + CMA_HDR_LEN;
}

/**
 * REQ / SIDR_REQ private data: the CMA header followed by `user` (at most 56 / 180 bytes, checked
 * by the CM message encoder).
 */
export function encodeCmaPrivateData(h: CmaHeader, user: Uint8Array = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(CMA_HDR_LEN + user.length);
  writeCmaHeader(out, 0, h);
  out.set(user, CMA_HDR_LEN);
  return out;
}

/**
 * Read the CMA header at `b[off]`. Throws `RdmaError` `EBADMSG` when fewer than 36 bytes are there
 * or the IP version is neither 4 nor 6 (rdma_cm then finds no listener and rejects). IPv4
 * addresses are the last 4 bytes of their 16-byte slots; the 12 bytes before them are ignored,
 * as cma.c does.
 */
export function decodeCmaHeader(b: Uint8Array, off = 0): CmaHeader {
  if (off < 0 || b.length - off < CMA_HDR_LEN) throw err('EBADMSG', 'decodeCmaHeader', `${b.length - off} bytes, need 36`);
  const ipv = b[off + 1]! >>> 4;
  if (ipv !== 4 && ipv !== 6) throw err('EBADMSG', 'decodeCmaHeader', `IP version ${ipv}`);
  const n = ipv === 4 ? 4 : 16;
  return {
    version: b[off]!,
    ipVersion: ipv,
    srcPort: (b[off + 2]! << 8) | b[off + 3]!,
    src: new Uint8Array(b.subarray(off + 20 - n, off + 20)),
    dst: new Uint8Array(b.subarray(off + 36 - n, off + 36)),
  };
}

// ---- GIDs and addresses -----------------------------------------------------------------------

/** Size of a GID. */
export const GID_LEN = 16;

/** The RoCEv2 GID of an IPv4 address: ::ffff:a.b.c.d (IPv4-mapped IPv6). */
export function gidFromIpv4(addr: Uint8Array): Uint8Array {
  if (addr.length !== 4) throw err('EINVAL', 'gidFromIpv4', `${addr.length}-byte address`);
  const g = new Uint8Array(GID_LEN);
  g[10] = 0xff;
  g[11] = 0xff;
  g.set(addr, 12);
  return g;
}

/** Whether a GID is an IPv4-mapped address (::ffff:a.b.c.d). */
export function isIpv4MappedGid(gid: Uint8Array): boolean {
  if (gid.length !== GID_LEN) return false;
  for (let i = 0; i < 10; i++) if (gid[i] !== 0) return false;
  return gid[10] === 0xff && gid[11] === 0xff;
}

/** The GID of an IP address: IPv4 (4 bytes) → IPv4-mapped, IPv6 (16 bytes) → itself (a copy). */
export function gidFromIp(addr: Uint8Array): Uint8Array {
  if (addr.length === 4) return gidFromIpv4(addr);
  if (addr.length === GID_LEN) return new Uint8Array(addr);
  throw err('EINVAL', 'gidFromIp', `${addr.length}-byte address`);
}

/** The IP address of a RoCEv2 GID: 4 bytes for an IPv4-mapped GID, else the 16 bytes (a copy). */
export function ipFromGid(gid: Uint8Array): Uint8Array {
  if (gid.length !== GID_LEN) throw err('EINVAL', 'ipFromGid', `${gid.length}-byte GID`);
  return new Uint8Array(isIpv4MappedGid(gid) ? gid.subarray(12) : gid);
}

/**
 * Multicast GID rdma_cm joins for an IP group on RoCE (cma.c `cma_iboe_set_mgid`): IPv4 group
 * a.b.c.d → ::ffff:a.b.c.d on RoCEv2, ff0e::ffff:a.b.c.d on RoCEv1; IPv6 group → itself; the
 * any-address → all zeros.
 */
export function cmaIboeMgid(group: Uint8Array, roceV2 = true): Uint8Array {
  const g = new Uint8Array(GID_LEN);
  if (group.every((x) => x === 0)) return g;
  if (group.length === GID_LEN) {
    g.set(group);
    return g;
  }
  if (group.length !== 4) throw err('EINVAL', 'cmaIboeMgid', `${group.length}-byte address`);
  if (!roceV2) {
    g[0] = 0xff;
    g[1] = 0x0e;
  }
  g[10] = 0xff;
  g[11] = 0xff;
  g.set(group, 12);
  return g;
}

/**
 * RoCEv2 flow label rdma_cm puts in a route's path record (cma.c `cma_get_roce_udp_flow_label`):
 * `(srcPort * 31 + dstPort) mod 2^20` with the rdma_cm (TCP/UDP port space) ports, unless an IPv6
 * source address carries a non-zero flow label of its own. rxe derives its RC source port from it
 * ({@link rdmaFlowLabelToUdpSport}).
 */
export function cmaRoceFlowLabel(srcPort: number, dstPort: number, ipv6FlowInfo = 0): number {
  const fl = ipv6FlowInfo & FLOW_LABEL_MASK;
  if (fl !== 0) return fl;
  return ((srcPort & 0xffff) * 31 + (dstPort & 0xffff)) & FLOW_LABEL_MASK;
}

/** Parse a dotted IPv4 or textual IPv6 address into 4 or 16 bytes; throws `EINVAL` otherwise. */
export function parseIp(text: string): Uint8Array {
  const v4 = parseIpv4(text);
  if (v4 !== null) return v4;
  const v6 = parseIpv6(text);
  if (v6 !== null) return v6;
  throw err('EINVAL', 'parseIp', `not an IP address: ${JSON.stringify(text)}`);
}

function parseIpv4(text: string): Uint8Array | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p) || Number(p) > 255) return null;
    out[i] = Number(p);
  }
  return out;
}

function parseIpv6(text: string): Uint8Array | null {
  const s = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const words = (part: string): number[] | null => {
    if (part === '') return [];
    const out: number[] = [];
    const items = part.split(':');
    for (let i = 0; i < items.length; i++) {
      const it = items[i]!;
      if (i === items.length - 1 && it.includes('.')) {
        const v4 = parseIpv4(it);
        if (v4 === null) return null;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(it)) return null;
        out.push(parseInt(it, 16));
      }
    }
    return out;
  };
  const head = words(halves[0]!);
  const tail = halves.length === 2 ? words(halves[1]!) : [];
  if (head === null || tail === null) return null;
  const fill = 8 - head.length - tail.length;
  if (halves.length === 2 ? fill < 1 : fill !== 0) return null;
  const all = [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...tail];
  const out = new Uint8Array(16);
  all.forEach((w, i) => {
    out[2 * i] = w >>> 8;
    out[2 * i + 1] = w;
  });
  return out;
}

/**
 * Text form of a 4- or 16-byte address: dotted IPv4; IPv6 in RFC 5952 style (`::` for the longest
 * zero run, IPv4-mapped as `::ffff:a.b.c.d`).
 */
export function formatIp(addr: Uint8Array): string {
  if (addr.length === 4) return addr.join('.');
  if (addr.length !== 16) throw err('EINVAL', 'formatIp', `${addr.length}-byte address`);
  return formatIpv6Text(addr, 0, 'mapped');
}

/** A GID as `ibv_devinfo -v` prints it: eight 4-digit hex groups (`0000:...:ffff:0a4d:0002`). */
export function formatGid(gid: Uint8Array): string {
  if (gid.length !== GID_LEN) throw err('EINVAL', 'formatGid', `${gid.length}-byte GID`);
  const w: string[] = [];
  for (let i = 0; i < 8; i++) w.push(((gid[2 * i]! << 8) | gid[2 * i + 1]!).toString(16).padStart(4, '0'));
  return w.join(':');
}
