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
  /** The group's GID and LID once joined (MULTICAST_JOIN), for ibv_detach_mcast. */
  mgid: Uint8Array | null;
  mlid: number;
}

/** The key of a multicast group address (normalised, so `::ffff:a.b.c.d` is `a.b.c.d`). */
function mcKey(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address.toLowerCase();
}

/** Detach `qp` from a group, when it was attached (the QP may be gone or never attached). */
function detach(qp: Qp | null, mc: McEntry): void {
  if (!qp || !mc.mgid) return;
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
   * Join the group at `addr` through `ep` with `flags` ({@link checkJoinFlags}); MULTICAST_JOIN
   * or MULTICAST_ERROR follows. ENOSYS if the endpoint has no multicast (`device` names it),
   * EADDRINUSE if the id joined the group already; whatever the endpoint throws (the group is
   * then forgotten).
   */
  join(ep: CmEndpoint, device: string, addr: SockAddr, flags: number, context: unknown, op: string): void {
    if (!ep.joinMulticast) throw err('ENOSYS', op, `no multicast on ${device}`);
    const key = mcKey(addr.address);
    if (this.groups.has(key)) throw err('EADDRINUSE', op, addr.address);
    this.groups.set(key, { context, mgid: null, mlid: 0 });
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
    detach(qp, mc);
    ep?.leaveMulticast?.({ ...addr });
  }

  /**
   * MULTICAST_JOIN arrived: remember the group's GID and LID and attach `qp` to it. Returns 0, or
   * the negative errno of a failed attach (the event becomes MULTICAST_ERROR with it).
   */
  joined(ev: CmUpcall, qp: Qp | null): number {
    const grh = ev.ud?.ahAttr.grh;
    const entry = [...this.groups.values()].find((m) => m.context === ev.mcContext && m.mgid === null) ?? null;
    if (entry && grh) {
      entry.mgid = Uint8Array.from(grh.dgid);
      entry.mlid = ev.ud?.ahAttr.dlid ?? 0;
    }
    if (!qp || !grh) return 0;
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
  }
}
