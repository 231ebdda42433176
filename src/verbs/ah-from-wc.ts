/**
 * `ibv_init_ah_from_wc()` / `ibv_create_ah_from_wc()` (libibverbs verbs.c): the address handle
 * that answers the sender of a UD receive, from its work completion and the 40 bytes of network
 * header the device put at the head of the receive buffer.
 *
 * On RoCEv2 those 40 bytes hold an IPv6 header, or for IPv4 twenty unspecified bytes and then the
 * IPv4 header (bytes 20..39). The version is told as libibverbs does (`get_grh_header_version`):
 * not 6 in the first nibble means IPv4 if the header at byte 20 says 4; a 6 there is IPv6 unless
 * the IPv4 candidate has IHL 5 and a correct header checksum.
 */
import { err } from '../errors.js';
import type { Ah, AhAttr } from './ah.js';
import type { Context } from './context.js';
import type { Pd } from './pd.js';
import { GidType, WcFlags, type Wc } from './types.js';

/** `sizeof(struct ibv_grh)`: the network-header area at the head of every UD receive buffer. */
export const GRH_SIZE = 40;

const IPPROTO_UDP = 17;
/** `IB_NEXT_HDR`: a RoCE v1 (IB) GRH's next header. */
const IB_NEXT_HDR = 0x1b;

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

/** `get_grh_header_version()`: 4 or 6. */
function grhVersion(grh: Uint8Array): 4 | 6 {
  const ip4 = grh.subarray(20, 40);
  if ((grh[0] as number) >> 4 !== 6) {
    if ((ip4[0] as number) >> 4 === 4) return 4;
    fail('EPROTONOSUPPORT', 'neither an IPv4 nor an IPv6 header');
  }
  if (((ip4[0] as number) & 0xf) !== 5) return 6;
  // The checksum as libibverbs computes it: 16-bit words in host (little-endian) order, the check
  // field taken as zero, the carries folded once.
  let sum = 0;
  for (let i = 0; i < 20; i += 2) if (i !== 10) sum += (ip4[i] as number) | ((ip4[i + 1] as number) << 8);
  sum = (sum & 0xffff) + (sum >>> 16);
  return (~sum & 0xffff) === ((ip4[10] as number) | ((ip4[11] as number) << 8)) ? 4 : 6;
}

/** `ibv_find_gid_index()`: the first entry of the port's GID table equal to `gid` and of `type`. */
function findGidIndex(ctx: Context, portNum: number, gid: Uint8Array, type: GidType): number {
  const len = ctx.queryPort(portNum).gidTblLen;
  for (let i = 0; i < len; i++) {
    const g = ctx.queryGid(portNum, i);
    if (g.every((b, k) => b === gid[k]) && ctx.queryGidType(portNum, i) === type) return i;
  }
  fail('EINVAL', 'no local GID is the destination of the datagram');
}

/**
 * `ibv_init_ah_from_wc()`: the attributes of an address handle back to the sender of the UD
 * receive `wc`, whose buffer began with `grh` (at least 40 bytes). Without `WcFlags.GRH` only
 * `dlid`, `sl` and `srcPathBits` are taken from the completion.
 * @throws RdmaError EINVAL (a multicast destination: no point looking it up; no local GID is the
 *   destination); EPROTONOSUPPORT (an unknown network header); as `queryPort`/`queryGid` for a bad
 *   port.
 */
export function initAhFromWc(ctx: Context, portNum: number, wc: Wc, grh: Uint8Array): AhAttr {
  if (grh.length < GRH_SIZE) throw err('EINVAL', 'ibv_init_ah_from_wc', `GRH of ${grh.length} bytes`);
  const flowClass = new DataView(grh.buffer, grh.byteOffset, GRH_SIZE).getUint32(0);
  const attr: AhAttr = { isGlobal: false, portNum, dlid: wc.slid, sl: wc.sl, srcPathBits: wc.dlidPathBits };
  if (!(wc.wcFlags & WcFlags.GRH)) return attr;
  attr.isGlobal = true;
  const flowLabel = flowClass & 0xfffff;
  if (grhVersion(grh) === 4) {
    const ip4 = grh.subarray(20, 40);
    const daddr = ip4.subarray(16, 20);
    if ((daddr[0] as number) >> 4 === 0xe) fail('EINVAL', 'multicast destination');
    const sgidIndex = findGidIndex(ctx, portNum, mappedGid(daddr), GidType.ROCE_V2);
    attr.grh = { dgid: mappedGid(ip4.subarray(12, 16)), flowLabel, sgidIndex, hopLimit: ip4[8] as number, trafficClass: ip4[1] as number };
    return attr;
  }
  const dgid = grh.subarray(24, 40);
  if (dgid[0] === 0xff) fail('EINVAL', 'multicast destination');
  const next = grh[6];
  const type = next === IPPROTO_UDP ? GidType.ROCE_V2 : next === IB_NEXT_HDR ? GidType.ROCE_V1 : fail('EPROTONOSUPPORT', `next header ${String(next)}`);
  const sgidIndex = findGidIndex(ctx, portNum, dgid, type);
  attr.grh = { dgid: Uint8Array.from(grh.subarray(8, 24)), flowLabel, sgidIndex, hopLimit: grh[7] as number, trafficClass: (flowClass >>> 20) & 0xff };
  return attr;
}

/** `ibv_create_ah_from_wc()`: {@link initAhFromWc} then `pd.createAh()`. */
export function createAhFromWc(pd: Pd, wc: Wc, grh: Uint8Array, portNum: number): Ah {
  return pd.createAh(initAhFromWc(pd.context, portNum, wc, grh));
}
