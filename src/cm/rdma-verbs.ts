/**
 * The inline functions of librdmacm's `rdma_verbs.h`: memory registration on an id's PD, posting work
 * requests on an id's QP, and waiting for one completion on the CQs rdma_create_qp made.
 *
 * Addresses: C passes pointers; here a buffer address is either a number in the MR's address
 * space (`mr.addr + offset`) or a `Uint8Array` view lying inside the MR's memory (its position
 * gives the address). The `context` argument becomes the work request's `wrId`, as in C.
 *
 * ```ts
 * const mr = regMsgs(id, recvBuf);
 * postRecv(id, null, recvBuf, 16, mr);
 * await id.accept();
 * const wc = await getRecvComp(id);
 * postSend(id, null, reply, 16, null, SendFlags.INLINE);   // inline: no MR needed
 * await getSendComp(id);
 * // UD ids: the peer's AH and QP number from ESTABLISHED's `param.ud`
 * postUdSend(udId, null, msg, 16, mr, SendFlags.SIGNALED, ah, ev.param.ud.qpNum);
 * ```
 */
import { err } from '../errors.js';
import type { Mr } from '../verbs/mr.js';
import type { Cq } from '../verbs/cq.js';
import type { CompChannel } from '../verbs/comp-channel.js';
import type { MrMemory } from '../verbs/pd.js';
import { Access, SendFlags, WrOpcode, type RecvWr, type SendWr, type Sge, type Wc, type WrId } from '../verbs/types.js';
import type { Ah } from '../verbs/ah.js';
import type { CmId } from './cm-id.js';
import { RDMA_UDP_QKEY } from './port-space.js';

/** A buffer address: a number in the MR address space or a view inside the MR's memory. */
export type BufAddr = number | Uint8Array;

function pdOf(id: CmId, op: string): NonNullable<CmId['pd']> {
  if (!id.pd) throw err('EINVAL', op, 'the id has no protection domain (create its QP first)');
  return id.pd;
}

/** rdma_reg_msgs(): register `mem` on the id's PD for sends and receives (LOCAL_WRITE). */
export function regMsgs(id: CmId, mem: MrMemory): Mr {
  return pdOf(id, 'rdma_reg_msgs').regMr(mem, Access.LOCAL_WRITE);
}

/** rdma_reg_read(): register `mem` as the source of the peer's RDMA Reads. */
export function regRead(id: CmId, mem: MrMemory): Mr {
  return pdOf(id, 'rdma_reg_read').regMr(mem, Access.LOCAL_WRITE | Access.REMOTE_READ);
}

/** rdma_reg_write(): register `mem` as the target of the peer's RDMA Writes. */
export function regWrite(id: CmId, mem: MrMemory): Mr {
  return pdOf(id, 'rdma_reg_write').regMr(mem, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
}

/** rdma_dereg_mr(). */
export function deregMr(mr: Mr): void {
  mr.dereg();
}

/** The MR address of `addr` (EINVAL if a view does not lie inside `mr`). */
function addrIn(mr: Mr, addr: BufAddr, length: number, op: string): number {
  if (typeof addr === 'number') return addr;
  const base = mr.buf;
  const off = addr.byteOffset - base.byteOffset;
  if (addr.buffer !== base.buffer || off < 0 || off + Math.max(length, 0) > base.byteLength) {
    throw err('EINVAL', op, 'buffer not inside the memory region');
  }
  return mr.addr + off;
}

/** One SGE for `addr`/`length` in `mr`. */
export function sgeOf(mr: Mr, addr: BufAddr, length: number, op = 'rdma_post'): Sge {
  return { addr: addrIn(mr, addr, length, op), length, lkey: mr.lkey };
}

function qpOf(id: CmId, op: string): NonNullable<CmId['qp']> {
  if (!id.qp) throw err('EINVAL', op, 'the id has no QP');
  return id.qp;
}

/** rdma_post_recvv(): one receive of the SGEs (`context` is the wrId). */
export function postRecvv(id: CmId, context: WrId | null, sgl: readonly Sge[]): void {
  const wr: RecvWr = { wrId: context ?? 0, sgList: sgl };
  // rdma_verbs.h: to the id's SRQ when it has one (ibv_post_srq_recv), else to its QP.
  const srq = id.srq;
  if (srq !== null) srq.postRecv(wr);
  else qpOf(id, 'rdma_post_recv').postRecv(wr);
}

/** rdma_post_recv(): one receive into `length` bytes at `addr` of `mr` (on the id's SRQ when it has one). */
export function postRecv(id: CmId, context: WrId | null, addr: BufAddr, length: number, mr: Mr): void {
  postRecvv(id, context, [sgeOf(mr, addr, length, 'rdma_post_recv')]);
}

/** rdma_post_sendv(): a SEND of the SGEs with `flags` (SendFlags). */
export function postSendv(id: CmId, context: WrId | null, sgl: readonly Sge[], flags = 0): void {
  const wr: SendWr = { wrId: context ?? 0, opcode: WrOpcode.SEND, sgList: sgl, sendFlags: flags };
  qpOf(id, 'rdma_post_send').postSend(wr);
}

/**
 * The one SGE of a SEND of `length` bytes at `addr` in `mr`, handed to `post`. With `mr` null the
 * send must be inline (`SendFlags.INLINE`, `addr` a Uint8Array): C reads the inline bytes through
 * the pointer; here they are reached through a short-lived registration that lasts while the post
 * copies them, as ibverbs copies inline data, so the buffer may be reused at once.
 */
function withSendSge(id: CmId, addr: BufAddr, length: number, mr: Mr | null, flags: number, op: string, post: (sgl: readonly Sge[]) => void): void {
  if (mr) {
    post([sgeOf(mr, addr, length, op)]);
    return;
  }
  if (length === 0) {
    post([]);
    return;
  }
  if (!(flags & SendFlags.INLINE) || typeof addr === 'number') throw err('EINVAL', op, 'no memory region: only inline sends of a buffer');
  const tmp = pdOf(id, op).regMr(addr.subarray(0, length), 0);
  try {
    post([{ addr: tmp.addr, length, lkey: tmp.lkey }]);
  } finally {
    tmp.dereg();
  }
}

/**
 * rdma_post_send(): a SEND of `length` bytes at `addr`. With `mr` null the send must be inline
 * (`SendFlags.INLINE`, `addr` a Uint8Array); the buffer may be reused as soon as this returns.
 */
export function postSend(id: CmId, context: WrId | null, addr: BufAddr, length: number, mr: Mr | null, flags = 0): void {
  withSendSge(id, addr, length, mr, flags, 'rdma_post_send', (sgl) => postSendv(id, context, sgl, flags));
}

/**
 * rdma_post_ud_send(): a datagram of `length` bytes at `addr` to QP `remoteQpn` behind `ah`, with
 * the Q_Key of rdma_cm's UD ids (`RDMA_UDP_QKEY`), on the id's (UD) QP. `mr` null: an inline
 * send, as {@link postSend}. The peer's AH and QP number come from the ESTABLISHED event of a
 * UD connect (`ev.param.ud`) or a MULTICAST_JOIN (QP number 0xFFFFFF).
 */
export function postUdSend(id: CmId, context: WrId | null, addr: BufAddr, length: number, mr: Mr | null, flags: number, ah: Ah, remoteQpn: number): void {
  const op = 'rdma_post_ud_send';
  const qp = qpOf(id, op);
  withSendSge(id, addr, length, mr, flags, op, (sgl) => {
    const wr: SendWr = { wrId: context ?? 0, opcode: WrOpcode.SEND, sgList: sgl, sendFlags: flags, ud: { ah, remoteQpn, remoteQkey: RDMA_UDP_QKEY } };
    qp.postSend(wr);
  });
}

function rdmaWr(opcode: WrOpcode, context: WrId | null, sgl: readonly Sge[], flags: number, remoteAddr: number, rkey: number): SendWr {
  return { wrId: context ?? 0, opcode, sgList: sgl, sendFlags: flags, rdma: { remoteAddr, rkey } };
}

/** rdma_post_readv(): RDMA Read from `remoteAddr`/`rkey` into the SGEs. */
export function postReadv(id: CmId, context: WrId | null, sgl: readonly Sge[], flags: number, remoteAddr: number, rkey: number): void {
  qpOf(id, 'rdma_post_read').postSend(rdmaWr(WrOpcode.RDMA_READ, context, sgl, flags, remoteAddr, rkey));
}

/** rdma_post_read(): RDMA Read of `length` bytes from the peer into `addr` of `mr`. */
export function postRead(id: CmId, context: WrId | null, addr: BufAddr, length: number, mr: Mr, flags: number, remoteAddr: number, rkey: number): void {
  postReadv(id, context, [sgeOf(mr, addr, length, 'rdma_post_read')], flags, remoteAddr, rkey);
}

/** rdma_post_writev(): RDMA Write of the SGEs to `remoteAddr`/`rkey`. */
export function postWritev(id: CmId, context: WrId | null, sgl: readonly Sge[], flags: number, remoteAddr: number, rkey: number): void {
  qpOf(id, 'rdma_post_write').postSend(rdmaWr(WrOpcode.RDMA_WRITE, context, sgl, flags, remoteAddr, rkey));
}

/** rdma_post_write(): RDMA Write of `length` bytes at `addr` of `mr` to the peer. */
export function postWrite(id: CmId, context: WrId | null, addr: BufAddr, length: number, mr: Mr, flags: number, remoteAddr: number, rkey: number): void {
  postWritev(id, context, [sgeOf(mr, addr, length, 'rdma_post_write')], flags, remoteAddr, rkey);
}

/**
 * rdma_get_send_comp/rdma_get_recv_comp: poll; if empty arm the CQ, poll again, then wait on the
 * completion channel (acknowledging each event) and start over. Resolves with the completion
 * (whatever its status, as in C: check `wc.status`).
 */
async function getComp(cq: Cq | null, ch: CompChannel | null, op: string, signal?: AbortSignal): Promise<Wc> {
  if (!cq || !ch) throw err('EINVAL', op, 'the id has no CQ with a completion channel (rdma_create_qp makes them)');
  for (;;) {
    let wc = cq.poll(1);
    if (wc.length > 0) return wc[0] as Wc;
    cq.reqNotify();
    wc = cq.poll(1);
    if (wc.length > 0) return wc[0] as Wc;
    const c = await ch.getCqEvent(signal);
    c.ackEvents(1);
  }
}

/** rdma_get_send_comp(): the next completion of the id's send CQ. */
export function getSendComp(id: CmId, signal?: AbortSignal): Promise<Wc> {
  return getComp(id.sendCq, id.sendCqChannel, 'rdma_get_send_comp', signal);
}

/** rdma_get_recv_comp(): the next completion of the id's receive CQ. */
export function getRecvComp(id: CmId, signal?: AbortSignal): Promise<Wc> {
  return getComp(id.recvCq, id.recvCqChannel, 'rdma_get_recv_comp', signal);
}
