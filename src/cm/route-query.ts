/**
 * The route an id reports (`id->route`, librdmacm's `ucma_query_route`): its addresses, the
 * source and destination GIDs and P_Key, and the path records its transport gives (see
 * id-route.ts for the shapes and what each device family puts there).
 */
import type { Context } from '../verbs/context.js';
import { TransportType } from '../verbs/types.js';
import { isAny, type SockAddr } from './addr.js';
import { devicesOwning } from './device-choice.js';
import { ROCE_PKEY, copyPathRec, ipToGid, type RdmaRoute, type SaPathRec } from './id-route.js';

/**
 * The route of an id from `src` to `dst` on `ctx` (port `portNum`), with its transport's path
 * records: fresh copies throughout.
 */
export function routeOf(src: SockAddr | null, dst: SockAddr | null, ctx: Context | null, portNum: number, given: SaPathRec[]): RdmaRoute {
  const paths = given.map(copyPathRec);
  const first = paths[0];
  let ibaddr: RdmaRoute['addr']['ibaddr'];
  if (first) ibaddr = { sgid: Uint8Array.from(first.sgid), dgid: Uint8Array.from(first.dgid), pkey: first.pkey };
  else if (ctx === null) ibaddr = { sgid: new Uint8Array(16), dgid: new Uint8Array(16), pkey: 0 };
  else if (ctx.device.transportType === TransportType.IWARP) ibaddr = { sgid: linkGid(ctx, portNum), dgid: peerLinkGid(ctx, portNum, dst), pkey: 0 };
  else ibaddr = { sgid: ipToGid(src?.address), dgid: ipToGid(dst?.address), pkey: ROCE_PKEY };
  return {
    addr: { srcAddr: src ? { ...src } : null, dstAddr: dst ? { ...dst } : null, ibaddr },
    pathRec: paths,
    numPaths: paths.length,
  };
}

/** GID 0 of `ctx`'s port (iWARP: the link address), zeros if it has none. */
function linkGid(ctx: Context, portNum: number): Uint8Array {
  try {
    return ctx.queryGid(portNum || 1, 0);
  } catch {
    return new Uint8Array(16);
  }
}

/**
 * The destination's link-layer GID on iWARP (`rdma_addr_get_dgid`): that of the local device of
 * the same transport owning the destination; zeros for a remote one (the soft device does not
 * learn its neighbours' link addresses).
 */
function peerLinkGid(ctx: Context, portNum: number, dst: SockAddr | null): Uint8Array {
  const a = dst?.address;
  if (a === undefined || isAny(a)) return new Uint8Array(16);
  const owner = devicesOwning(a).find((d) => d.provider === ctx.device.provider);
  return owner ? linkGid(owner.open(), portNum) : new Uint8Array(16);
}
