/**
 * The UD and multicast part of the API (address handles, rdma_ud_param, rdma_join_multicast_ex),
 * declared here until the verbs and CM layers export it.
 */
import type { CmEvent } from '../cm/events.js';
import { err } from '../errors.js';
import type { Context } from '../verbs/context.js';
import type { Pd } from '../verbs/pd.js';
import { WcFlags, type Wc } from '../verbs/types.js';

/** `struct ibv_global_route`. */
export interface GlobalRoute {
  dgid: Uint8Array;
  flowLabel: number;
  sgidIndex: number;
  hopLimit: number;
  trafficClass: number;
}

/** `struct ibv_ah_attr`. */
export interface AhAttr {
  dlid?: number;
  sl?: number;
  srcPathBits?: number;
  staticRate?: number;
  isGlobal: boolean;
  portNum: number;
  grh?: GlobalRoute;
}

/** `struct ibv_ah`. */
export interface Ah {
  readonly attr: Readonly<AhAttr>;
  destroy(): void;
}

/** `struct rdma_ud_param`. */
export interface UdParam {
  privateData: Uint8Array;
  ahAttr: AhAttr;
  qpNum: number;
  qkey: number;
}

/** `RDMA_MC_JOIN_FLAG_*`. */
export const McJoinFlag = { FULLMEMBER: 0, SENDONLY_FULLMEMBER: 1 } as const;

/** `IBV_QP_QKEY`. */
export const QP_ATTR_QKEY = 1 << 6;

/** `ibv_query_qp(qp, &attr, IBV_QP_QKEY)`: the QP's Q_Key. */
export function qpQkey(qp: import('../verbs/qp.js').Qp): number {
  return (qp.query() as { qkey?: number }).qkey ?? 0;
}

/** `ev.param.ud`. */
export function udParamOf(ev: CmEvent): UdParam {
  return (ev.param as unknown as { ud: UdParam }).ud;
}

declare module '../cm/cm-id.js' {
  interface CmId {
    joinMulticastEx(opts: { addr: import('../cm/addr.js').SockAddr; joinFlags: number; context?: unknown }): Promise<void>;
    leaveMulticast(addr: import('../cm/addr.js').SockAddr): Promise<void>;
  }
}

declare module '../verbs/pd.js' {
  interface Pd {
    createAh(attr: AhAttr): Ah;
  }
}

declare module '../verbs/context.js' {
  interface Context {
    queryGid(portNum: number, index: number): Uint8Array;
    queryGidType(portNum: number, index: number): number;
  }
}

declare module '../verbs/types.js' {
  interface SendWr {
    ud?: { ah: Ah; remoteQpn: number; remoteQkey: number };
  }
  interface Wc {
    slid?: number;
    sl?: number;
    dlidPathBits?: number;
  }
}

// -- ibv_init_ah_from_wc / ibv_create_ah_from_wc -------------------------------------------------

const GID_TYPE_ROCE_V1 = 1;
const GID_TYPE_ROCE_V2 = 2;
/** `sizeof(struct ibv_grh)`. */
export const GRH_SIZE = 40;

function fail(code: 'EINVAL' | 'EPROTONOSUPPORT', detail: string): never {
  throw err(code, 'ibv_init_ah_from_wc', detail);
}

/** An IPv4 address as its IPv4-mapped GID (`::ffff:a.b.c.d`). */
function mappedGid(v4: Uint8Array): Uint8Array {
  const g = new Uint8Array(16);
  g[10] = 0xff;
  g[11] = 0xff;
  g.set(v4, 12);
  return g;
}

/**
 * libibverbs `get_grh_header_version()`: 6 or 4. A RoCEv2 receive over IPv4 leaves the IPv4
 * header in bytes 20..39 of the 40-byte area; a version nibble of 6 in byte 0 is an IPv6 header
 * unless the IPv4 candidate has IHL 5 and a correct header checksum.
 */
function grhVersion(grh: Uint8Array): number {
  const ip6Version = (grh[0] as number) >> 4;
  const ip4 = grh.subarray(20, 40);
  if (ip6Version !== 6) {
    if ((ip4[0] as number) >> 4 === 4) return 4;
    fail('EPROTONOSUPPORT', 'neither an IPv4 nor an IPv6 header');
  }
  if (((ip4[0] as number) & 0xf) !== 5) return 6;
  // The header checksum as libibverbs computes it: 16-bit words in host (little-endian) order,
  // with the check field zeroed, folded once.
  let sum = 0;
  for (let i = 0; i < 20; i += 2) if (i !== 10) sum += (ip4[i] as number) | ((ip4[i + 1] as number) << 8);
  sum = (sum & 0xffff) + (sum >>> 16);
  const check = ~sum & 0xffff;
  return check === ((ip4[10] as number) | ((ip4[11] as number) << 8)) ? 4 : 6;
}

/** libibverbs `ibv_find_gid_index()`: the first entry equal to `gid` of type `type`. */
function findGidIndex(ctx: Context, portNum: number, gid: Uint8Array, type: number): number {
  const len = ctx.queryPort(portNum).gidTblLen;
  for (let i = 0; i < len; i++) {
    const g = ctx.queryGid(portNum, i);
    if (g.every((b, k) => b === gid[k]) && ctx.queryGidType(portNum, i) === type) return i;
  }
  fail('EINVAL', 'no local GID matches the destination of the datagram');
}

/**
 * `ibv_init_ah_from_wc()`: the address handle attributes that answer the sender of a UD receive
 * completion `wc`, whose first 40 bytes of buffer are `grh`.
 * @throws RdmaError EINVAL (a multicast destination, no matching local GID), EPROTONOSUPPORT
 *   (an unknown network header).
 */
export function initAhFromWc(ctx: Context, portNum: number, wc: Wc, grh: Uint8Array): AhAttr {
  const flowClass = new DataView(grh.buffer, grh.byteOffset, GRH_SIZE).getUint32(0);
  const attr: AhAttr = { isGlobal: false, portNum, dlid: wc.slid ?? 0, sl: wc.sl ?? 0, srcPathBits: wc.dlidPathBits ?? 0 };
  if (!(wc.wcFlags & WcFlags.GRH)) return attr;
  attr.isGlobal = true;
  if (grhVersion(grh) === 4) {
    const ip4 = grh.subarray(20, 40);
    const daddr = ip4.subarray(16, 20);
    if ((daddr[0] as number) >> 4 === 0xe) fail('EINVAL', 'multicast destination');
    const sgidIndex = findGidIndex(ctx, portNum, mappedGid(daddr), GID_TYPE_ROCE_V2);
    attr.grh = { dgid: mappedGid(ip4.subarray(12, 16)), flowLabel: flowClass & 0xfffff, sgidIndex, hopLimit: ip4[8] as number, trafficClass: ip4[1] as number };
    return attr;
  }
  const dgid = grh.subarray(24, 40);
  if (dgid[0] === 0xff) fail('EINVAL', 'multicast destination');
  const nextHdr = grh[6];
  const type = nextHdr === 17 ? GID_TYPE_ROCE_V2 : nextHdr === 0x1b ? GID_TYPE_ROCE_V1 : fail('EPROTONOSUPPORT', `next header ${String(nextHdr)}`);
  const sgidIndex = findGidIndex(ctx, portNum, dgid, type);
  attr.grh = { dgid: Uint8Array.from(grh.subarray(8, 24)), flowLabel: flowClass & 0xfffff, sgidIndex, hopLimit: grh[7] as number, trafficClass: (flowClass >>> 20) & 0xff };
  return attr;
}

/** `ibv_create_ah_from_wc()`. */
export function createAhFromWc(pd: Pd, wc: Wc, grh: Uint8Array, portNum: number): Ah {
  return pd.createAh(initAhFromWc(pd.context, portNum, wc, grh));
}
