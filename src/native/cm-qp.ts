/**
 * What the native CM and the native QP share: the init attributes a cm_id asks rdma_create_qp to
 * make its QP from, and the multicast groups librdmacm attached a QP to itself (so the CM's own
 * ibv_attach_mcast of them is not made twice).
 */
import type { Handle } from './binding.js';
import type { NativeQp } from './qp.js';

/** Multicast groups librdmacm attached a QP to (ucma_process_join), by QP: `gid/lid` keys. */
const joinedByCm = new WeakMap<NativeQp, Set<string>>();
const groupKey = (gid: Uint8Array, lid: number): string => `${Buffer.from(gid.buffer, gid.byteOffset, 16).toString('hex')}/${lid}`;

/** @internal librdmacm attached `qp` to a group: the CM's own attach of it is then a no-op. */
export function markAttached(qp: NativeQp, gid: Uint8Array, lid: number): void {
  let s = joinedByCm.get(qp);
  if (s === undefined) joinedByCm.set(qp, (s = new Set()));
  s.add(groupKey(gid, lid));
}

/** @internal Take the mark {@link markAttached} left (true: the QP is attached already). */
export function takeAttached(qp: NativeQp, gid: Uint8Array, lid: number): boolean {
  return joinedByCm.get(qp)?.delete(groupKey(gid, lid)) === true;
}

/** @internal How the CM asks for its QP to be made by rdma_create_qp (the init attr → cm_id). */
export const cmQpRequests = new WeakMap<object, Handle>();
