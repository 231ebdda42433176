/**
 * `ibv_init_ah_from_wc` / `ibv_create_ah_from_wc` (libibverbs verbs.c): the address handle that
 * answers a received UD datagram, from its work completion and the 40-byte network-header area at
 * the head of its receive buffer.
 *
 * On RoCE the area holds either an IPv6 header, or 20 bytes followed by the IPv4 header; which
 * one is decided as libibverbs does (`get_grh_header_version`): a first nibble other than 6 means
 * IPv4 (when the header at byte 20 says version 4); a first nibble of 6 means IPv6 unless the
 * bytes at 20 form a 20-byte IPv4 header with a valid checksum. The source GID is the GID of the
 * datagram's destination address (`ibv_find_gid_index`), the destination GID its source address;
 * hop limit and traffic class come from the header (IPv4 TTL and ToS). The GID type searched
 * follows the header: IPv4 is RoCE v2; for IPv6 the next-header field decides, as
 * `set_ah_attr_by_ipv6` does — UDP (17) RoCE v2, the IB next header 0x1B an IB or RoCE v1 GID
 * (the kernel's "IB/RoCE v1" type), anything else EPROTONOSUPPORT.
 */
import { err } from '../errors.js';
import { Ah, type AhAttr } from './ah.js';
import type { Context } from './context.js';
import type { Pd } from './pd.js';
import { GidType, WcFlags, type Wc } from './types.js';

/** Bytes of the network-header area (`sizeof(struct ibv_grh)`), defined once with the RoCEv2 headers. */
export { GRH_AREA_LEN } from '../ib-numbers.js';
import { GRH_AREA_LEN } from '../ib-numbers.js';

/** IPv6 next-header values libibverbs tells RoCE v2 from RoCE v1 (and IB) by. */
const NEXT_HDR_UDP = 17;
/** The next header of an IB GRH (`IB_NEXT_HDR`), also carried by RoCE v1. */
const NEXT_HDR_IB = 0x1b;

function ipv4Checksum(b: Uint8Array, off: number): number {
  let sum = 0;
  for (let i = 0; i < 20; i += 2) {
    if (i === 10) continue;
    sum += ((b[off + i] ?? 0) << 8) | (b[off + i + 1] ?? 0);
  }
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

/** 4, 6 or -1, as libibverbs `get_grh_header_version`. */
function grhVersion(g: Uint8Array): number {
  const v6 = (g[0] ?? 0) >>> 4;
  const ip4 = 20;
  if (v6 !== 6) return (g[ip4] ?? 0) >>> 4 === 4 ? 4 : -1;
  if (((g[ip4] ?? 0) & 0x0f) !== 5) return 6;
  const stored = ((g[ip4 + 10] ?? 0) << 8) | (g[ip4 + 11] ?? 0);
  return stored === ipv4Checksum(g, ip4) ? 4 : 6;
}

/** `ibv_find_gid_index`: the index of `gid` of type `type` in the port's table, or -1. */
export function findGidIndex(ctx: Context, portNum: number, gid: Uint8Array, type: GidType): number {
  return findGidIndexOf(ctx, portNum, gid, [type]);
}

/** {@link findGidIndex} for a GID of any of `types`. */
function findGidIndexOf(ctx: Context, portNum: number, gid: Uint8Array, types: readonly GidType[]): number {
  const n = ctx.queryPort(portNum).gidTblLen;
  for (let i = 0; i < n; i++) {
    const g = ctx.queryGid(portNum, i);
    let same = true;
    for (let k = 0; k < 16 && same; k++) same = g[k] === gid[k];
    if (same && types.includes(ctx.queryGidType(portNum, i))) return i;
  }
  return -1;
}

/**
 * `ibv_init_ah_from_wc`: the address handle attributes that reach the sender of the datagram of
 * `wc` (its receive buffer starting with `grh`, 40 bytes).
 * @throws RdmaError EINVAL when the area holds neither header, the datagram was sent to a
 *   multicast group (libibverbs: no reply AH from a group address), or no GID of the port matches
 *   its destination address; EPROTONOSUPPORT as libibverbs for an unknown header version or an
 *   IPv6 next header other than UDP and 0x1B.
 */
export function initAhFromWc(ctx: Context, portNum: number, wc: Wc, grh: Uint8Array): AhAttr {
  const op = 'ibv_init_ah_from_wc';
  const flow = (((grh[1] ?? 0) & 0x0f) << 16) | ((grh[2] ?? 0) << 8) | (grh[3] ?? 0);
  const attr: AhAttr = { isGlobal: false, portNum, dlid: wc.slid, sl: wc.sl, srcPathBits: wc.dlidPathBits };
  if (!(wc.wcFlags & WcFlags.GRH)) return attr;
  if (!(grh instanceof Uint8Array) || grh.length < GRH_AREA_LEN) throw err('EINVAL', op, 'the GRH area is 40 bytes');
  const version = grhVersion(grh);
  if (version === 4) {
    const ip = 20;
    if (((grh[ip + 16] ?? 0) & 0xf0) === 0xe0) throw err('EINVAL', op, 'datagram sent to a multicast group');
    const mapped = (off: number): Uint8Array => {
      const g = new Uint8Array(16);
      g[10] = 0xff;
      g[11] = 0xff;
      g.set(grh.subarray(off, off + 4), 12);
      return g;
    };
    const idx = findGidIndex(ctx, portNum, mapped(ip + 16), GidType.ROCE_V2);
    if (idx < 0) throw err('EINVAL', op, 'no GID of the port matches the destination address');
    return { ...attr, isGlobal: true, grh: { dgid: mapped(ip + 12), flowLabel: flow, sgidIndex: idx, hopLimit: grh[ip + 8] ?? 0, trafficClass: grh[ip + 1] ?? 0 } };
  }
  if (version === 6) {
    if (grh[24] === 0xff) throw err('EINVAL', op, 'datagram sent to a multicast group');
    const next = grh[6];
    let types: readonly GidType[];
    if (next === NEXT_HDR_UDP) types = [GidType.ROCE_V2];
    else if (next === NEXT_HDR_IB) types = [GidType.IB, GidType.ROCE_V1];
    else throw err('EPROTONOSUPPORT', op, `IPv6 next header ${next ?? 0} is neither UDP (RoCE v2) nor 0x1B (IB, RoCE v1)`);
    const idx = findGidIndexOf(ctx, portNum, grh.subarray(24, 40), types);
    if (idx < 0) throw err('EINVAL', op, 'no GID of the port matches the destination address');
    const tc = (((grh[0] ?? 0) & 0x0f) << 4) | ((grh[1] ?? 0) >>> 4);
    return { ...attr, isGlobal: true, grh: { dgid: Uint8Array.from(grh.subarray(8, 24)), flowLabel: flow, sgidIndex: idx, hopLimit: grh[7] ?? 0, trafficClass: tc } };
  }
  throw err('EPROTONOSUPPORT', op, 'the GRH area holds no IP header');
}

/** `ibv_create_ah_from_wc`: {@link initAhFromWc} then `pd.createAh`. */
export function createAhFromWc(pd: Pd, wc: Wc, grh: Uint8Array, portNum: number): Ah {
  return pd.createAh(initAhFromWc(pd.context, portNum, wc, grh));
}
