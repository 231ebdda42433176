/**
 * The private copy of a checked receive WR that a receive queue keeps (a QP's own, or an SRQ's):
 * a completed WQE handed back by a transport, its SGE copies overwritten in place when it has as
 * many, or a new one. No allocation on the steady path.
 */
import type { RqWqe } from './qp.js';
import type { RecvWr, Sge } from './types.js';
import type { FreeList } from '../util/arrays.js';

export function recvWqe(wr: RecvWr, length: number, free: FreeList<RqWqe>): RqWqe {
  const src = wr.sgList;
  const n = src.length;
  const f = free.take();
  if (f !== undefined && f.sgList.length === n) {
    for (let j = 0; j < n; j++) {
      const s = src[j] as Sge;
      const d = f.sgList[j] as Sge;
      d.addr = s.addr;
      d.length = s.length;
      d.lkey = s.lkey;
    }
    f.wrId = wr.wrId;
    f.length = length;
    return f;
  }
  const sgList: Sge[] = new Array<Sge>(n);
  for (let j = 0; j < n; j++) {
    const s = src[j] as Sge;
    sgList[j] = { addr: s.addr, length: s.length, lkey: s.lkey };
  }
  return { wrId: wr.wrId, sgList, length };
}
