/**
 * rdma_create_ep / rdma_destroy_ep: the one-call endpoint setup of librdmacm's synchronous API
 * (`librdmacm/cma.c`), used with {@link CmId.getRequest} on the passive side.
 *
 * ```ts
 * const res = await getaddrinfo('127.0.0.1', 7471, { portSpace: PortSpace.TCP });
 * const id = await createEp(res, null, { cap: { maxSendWr: 1, maxRecvWr: 1, maxInlineData: 16 }, sqSigAll: true });
 * await id.connect();                 // synchronous id: resolves on ESTABLISHED
 * ```
 */
import { err } from '../errors.js';
import type { Pd } from '../verbs/pd.js';
import { QpType } from '../verbs/types.js';
import { RAI, type RdmaAddrinfo } from './addr.js';
import { checkOptionalSockAddr } from './addr-check.js';
import { CmId, PortSpace, createId } from './cm-id.js';
import type { CmQpInitAttr } from './id-qp.js';

/** Address and route resolution timeout rdma_create_ep uses (ms). */
export const EP_RESOLVE_TIMEOUT_MS = 2000;

/**
 * rdma_create_ep(): a synchronous id (no event channel) from an {@link RdmaAddrinfo}.
 *
 * - Passive (`res.flags & RAI.PASSIVE`): bound to `res.srcAddr`; `pd` and `qpInitAttr` are kept
 *   for {@link CmId.getRequest}, which creates each new connection's QP with them.
 * - Active: rdma_resolve_addr (source `res.srcAddr`, destination `res.dstAddr`) and
 *   rdma_resolve_route, 2000 ms each; with `qpInitAttr` a QP is created on the id (in `pd`, or
 *   the device's default PD), and the QP's actual capabilities are written back into
 *   `qpInitAttr.cap`, as rdma_create_qp does.
 *
 * Errors reject with the errno of the failing step (the id is destroyed): EINVAL for a missing
 * or malformed address, the resolution errors (ETIMEDOUT, ENETUNREACH, ENODEV ...),
 * rdma_create_qp's. `signal` aborts the resolution (AbortError for the step it aborted; the id is
 * destroyed).
 */
export async function createEp(res: RdmaAddrinfo, pd: Pd | null = null, qpInitAttr: CmQpInitAttr | null = null, signal?: AbortSignal): Promise<CmId> {
  const op = 'rdma_create_ep';
  if (typeof res !== 'object' || res === null) throw err('EINVAL', op, 'no rdma_addrinfo');
  // The addresses are checked before an id is made (rdma_bind_addr / rdma_resolve_addr check them again, the same way).
  checkOptionalSockAddr(res.srcAddr, op, 'source');
  checkOptionalSockAddr(res.dstAddr, op, 'destination');
  const ps = (res.portSpace || PortSpace.TCP) as PortSpace;
  // rdma_create_id2 with the addrinfo's QP type: the kernel takes it for RDMA_PS_IB only.
  const id = createId(null, null, ps, ps === PortSpace.IB ? { qpType: qpTypeOf(res) } : {});
  try {
    if (res.flags & RAI.PASSIVE) {
      if (!res.srcAddr) throw err('EINVAL', op, 'passive rdma_addrinfo without a source address');
      id.bindAddr(res.srcAddr);
      if (pd) id.pd = pd;
      if (qpInitAttr) id._epQpInitAttr = { ...qpInitAttr, cap: { ...qpInitAttr.cap }, qpType: qpTypeOf(res) };
      return id;
    }
    if (!res.dstAddr) throw err('EINVAL', op, 'active rdma_addrinfo without a destination address');
    await id.resolveAddr(res.srcAddr, res.dstAddr, EP_RESOLVE_TIMEOUT_MS, signal);
    await id.resolveRoute(EP_RESOLVE_TIMEOUT_MS, signal);
    if (qpInitAttr) {
      qpInitAttr.qpType = qpTypeOf(res);
      const qp = id.createQp(pd, qpInitAttr);
      qpInitAttr.cap = { ...qp.cap };
    }
    return id;
  } catch (e) {
    await destroyEp(id).catch(() => {});
    throw e;
  }
}

function qpTypeOf(res: RdmaAddrinfo): QpType {
  return res.qpType === QpType.UD || res.qpType === QpType.UC ? res.qpType : QpType.RC;
}

/** rdma_destroy_ep(): destroy the id's QP (and the CQs rdma_create_qp made) and its SRQ, then the id. */
export async function destroyEp(id: CmId): Promise<void> {
  if (id.qp) id.destroyQp();
  if (id.srq) {
    try {
      id.destroySrq();
    } catch {
      // Still used by QPs of other ids (EBUSY): librdmacm's rdma_destroy_srq goes on regardless.
    }
  }
  id._epQpInitAttr = null;
  await id.destroy();
}
