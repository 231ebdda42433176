/**
 * RDMA CM port spaces (`enum rdma_port_space`) and the constants that go with them (rdma_cm.h,
 * cma.c): which QP type a port space connects, the IB service ID a port becomes on IB/RoCE, the
 * Q_Key of UD port spaces.
 */
import { QpType } from '../verbs/types.js';

/** `enum rdma_port_space`. */
export enum PortSpace {
  IPOIB = 0x0002,
  TCP = 0x0106,
  UDP = 0x0111,
  IB = 0x013f,
}

/**
 * `RDMA_UDP_QKEY` (the Q_Key of RDMA_PS_UDP / RDMA_PS_IPOIB ids and their multicast groups),
 * `RDMA_IB_IP_PS_MASK` and the port-space prefixes of an IB service ID (cma.c): the service ID
 * of port `p` in port space `ps` is `(ps << 16) | p`, e.g. `0x0000000001060000 | p` for TCP.
 * Wire facts, defined once with the CM's wire format.
 */
export { RDMA_UDP_QKEY, RDMA_IB_IP_PS_MASK, RDMA_IB_IP_PS_TCP, RDMA_IB_IP_PS_UDP, RDMA_IB_IP_PS_IB } from '../ib-numbers.js';

/** The IB service ID of `port` in `ps` (cma.c `rdma_get_service_id`). */
export function serviceId(ps: PortSpace, port: number): bigint {
  return (BigInt(ps) << 16n) | BigInt(port & 0xffff);
}

/** Whether `ps` is a valid port space. */
export function isPortSpace(ps: unknown): ps is PortSpace {
  return ps === PortSpace.TCP || ps === PortSpace.UDP || ps === PortSpace.IB || ps === PortSpace.IPOIB;
}

/**
 * The QP type ids of a port space connect, as the kernel's `ucma_get_qp_type` decides it: UD for
 * UDP and IPOIB, RC for TCP, and for IB the type asked for (`rdma_create_id2`; RC by default, as
 * `rdma_create_id` asks).
 */
export function qpTypeOfPortSpace(ps: PortSpace, asked: QpType = QpType.RC): QpType {
  if (ps === PortSpace.UDP || ps === PortSpace.IPOIB) return QpType.UD;
  return ps === PortSpace.IB ? asked : QpType.RC;
}
