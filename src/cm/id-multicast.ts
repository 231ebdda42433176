/**
 * The multicast groups of one CM id (rdma_join_multicast, rdma_leave_multicast): which groups it
 * asked to join, each group's GID and LID once MULTICAST_JOIN reports them, and the attach and
 * detach of the id's QP (librdmacm's `ucma_process_join` attaches on the event; leave and destroy
 * detach). The endpoint of the id's transport does the joining itself.
 */
import { RdmaError, err } from '../errors.js';
import { Errno } from '../errno.js';
import type { Qp } from '../verbs/qp.js';
import type { SockAddr } from './addr.js';
import type { CmEndpoint, CmUpcall } from './transport.js';

/** `RDMA_MC_JOIN_FLAG_*` (rdma_cm.h): how an id joins a multicast group. */
export const McJoinFlag = {
  FULLMEMBER: 0,
  SENDONLY_FULLMEMBER: 1,
} as const;

/** `RDMA_CM_JOIN_MC_ATTR_*` (rdma_cma.h): which fields of `rdma_cm_join_mc_attr_ex` are valid. */
export const McJoinAttr = {
  ADDRESS: 1 << 0,
  JOIN_FLAGS: 1 << 1,
} as const;

/** `RDMA_CM_JOIN_MC_ATTR_RESERVED`: the first comp_mask bit librdmacm does not know. */
const MC_JOIN_ATTR_RESERVED = 1 << 2;

/**
 * librdmacm's checks of `rdma_cm_join_mc_attr_ex.comp_mask` (cma.c `rdma_join_multicast_ex`):
 * EOPNOTSUPP (ENOTSUP) for unknown bits, EINVAL without the address or the join flags.
 */
export function checkJoinCompMask(compMask: number, op: string): void {
  if (!Number.isInteger(compMask) || compMask < 0) throw err('EINVAL', op, `comp_mask ${String(compMask)}`);
  if (compMask >= MC_JOIN_ATTR_RESERVED) throw err('EOPNOTSUPP', op, `comp_mask 0x${compMask.toString(16)}`);
  if (!(compMask & McJoinAttr.ADDRESS)) throw err('EINVAL', op, 'comp_mask without RDMA_CM_JOIN_MC_ATTR_ADDRESS');
  if (!(compMask & McJoinAttr.JOIN_FLAGS)) throw err('EINVAL', op, 'comp_mask without RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS');
}

/** The QP number a multicast destination is addressed with (IB spec 9.8.1: 0xFFFFFF). */
export const MULTICAST_QPN = 0xffffff;

/** The join flags asked for (default FULLMEMBER); EINVAL for others than {@link McJoinFlag}'s. */
export function checkJoinFlags(flags: number | undefined, op: string): number {
  const f = flags ?? McJoinFlag.FULLMEMBER;
  if (f !== McJoinFlag.FULLMEMBER && f !== McJoinFlag.SENDONLY_FULLMEMBER) throw err('EINVAL', op, `join flags ${f}`);
  return f;
}

/** A multicast group the id joined, for leave and detach. */
interface McEntry {
  context: unknown;
  /** The {@link McJoinFlag} of the join. */
  flags: number;
  /** The group's GID and LID once joined (MULTICAST_JOIN), for ibv_detach_mcast. */
  mgid: Uint8Array | null;
  mlid: number;
  /** MULTICAST_JOIN or MULTICAST_ERROR came for the join. */
  reported: boolean;
}

/** The key of a multicast group address (normalised, so `::ffff:a.b.c.d` is `a.b.c.d`). */
function mcKey(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address.toLowerCase();
}

/** Whether a join of `flags` attaches the id's QP (every join but a send-only one). */
export function joinAttaches(flags: number): boolean {
  return flags !== McJoinFlag.SENDONLY_FULLMEMBER;
}

/** Detach `qp` from a group, when it was attached (the QP may be gone or never attached). */
function detach(qp: Qp | null, mc: McEntry): void {
  if (!qp || !mc.mgid || !joinAttaches(mc.flags)) return;
  try {
    qp.detachMcast(mc.mgid, mc.mlid);
  } catch {
    /* already detached, or the QP destroyed by the user */
  }
}

/** The groups of one id, by address key. */
export class IdMulticast {
  private readonly groups = new Map<string, McEntry>();
  /**
   * The contexts of joins left before their outcome came (an aborted join, or a leave right
   * after the join): that outcome, when the transport still reports it, is dropped, as ucma
   * drops the events of a freed join (`ucma_cleanup_mc_events`).
   */
  private readonly orphans: unknown[] = [];

  /**
   * Join the group at `addr` through `ep` with `flags` ({@link checkJoinFlags}); MULTICAST_JOIN
   * or MULTICAST_ERROR follows. ENOSYS if the endpoint has no multicast (`device` names it),
   * EADDRINUSE if the id joined the group already; whatever the endpoint throws (the group is
   * then forgotten).
   */
  join(ep: CmEndpoint, device: string, addr: SockAddr, flags: number, context: unknown, op: string): void {
    if (!ep.joinMulticast) throw err('ENOSYS', op, `no multicast on ${device}`);
    const key = mcKey(addr.address);
    if (this.groups.has(key)) throw err('EADDRINUSE', op, addr.address);
    this.groups.set(key, { context, flags, mgid: null, mlid: 0, reported: false });
    try {
      ep.joinMulticast({ addr: { ...addr }, joinFlags: flags, context });
    } catch (e) {
      this.groups.delete(key);
      throw e;
    }
  }

  /**
   * Leave the group at `addr`: detach `qp` from it and tell `ep`. EADDRNOTAVAIL if the id did
   * not join it (librdmacm).
   */
  leave(addr: SockAddr, qp: Qp | null, ep: CmEndpoint | null, op: string): void {
    const key = mcKey(addr.address);
    const mc = this.groups.get(key);
    if (!mc) throw err('EADDRNOTAVAIL', op, addr.address);
    this.groups.delete(key);
    if (!mc.reported) this.orphans.push(mc.context);
    detach(qp, mc);
    ep?.leaveMulticast?.({ ...addr });
  }

  /**
   * A MULTICAST_JOIN / MULTICAST_ERROR report: whether it is for a join left before it came (it
   * is then dropped); otherwise the join it is for counts as reported.
   */
  orphaned(ev: CmUpcall): boolean {
    const entry = this.pending(ev);
    if (entry !== null) {
      entry.reported = true;
      return false;
    }
    const i = this.orphans.indexOf(ev.mcContext);
    if (i < 0) return false;
    this.orphans.splice(i, 1);
    return true;
  }

  /** The join of the report's context still waiting for its outcome. */
  private pending(ev: CmUpcall): McEntry | null {
    for (const m of this.groups.values()) if (m.context === ev.mcContext && !m.reported) return m;
    return null;
  }

  /**
   * MULTICAST_JOIN arrived: remember the group's GID and LID and attach `qp` to it, unless the
   * join was send-only. Returns 0, or the negative errno of a failed attach (the event becomes
   * MULTICAST_ERROR with it).
   */
  joined(ev: CmUpcall, qp: Qp | null): number {
    const grh = ev.ud?.ahAttr.grh;
    const entry = [...this.groups.values()].find((m) => m.context === ev.mcContext && m.mgid === null) ?? null;
    if (entry) entry.reported = true;
    if (entry && grh) {
      entry.mgid = Uint8Array.from(grh.dgid);
      entry.mlid = ev.ud?.ahAttr.dlid ?? 0;
    }
    if (!qp || !grh || (entry !== null && !joinAttaches(entry.flags))) return 0;
    try {
      qp.attachMcast(Uint8Array.from(grh.dgid), ev.ud?.ahAttr.dlid ?? 0);
    } catch (e) {
      return -(e instanceof RdmaError ? e.errno : Errno.EIO);
    }
    return 0;
  }

  /** The id is destroyed: detach `qp` from every group and forget them. */
  clear(qp: Qp | null): void {
    for (const mc of this.groups.values()) detach(qp, mc);
    this.groups.clear();
    this.orphans.length = 0;
  }
}
