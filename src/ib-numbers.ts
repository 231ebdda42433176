/**
 * Numbers of the InfiniBand, RoCEv2 and rdma_cm specifications that the wire codecs, the verbs,
 * the CM and rsockets all use, defined once here, in a module that loads nothing else: a process
 * on the iWARP device, or rstream on plain TCP, reads them without loading the RoCE codecs.
 *
 * @module
 */

/** The Q_Key rdma_cm uses for UDP / IB port-space UD QPs and multicast (`RDMA_UDP_QKEY`). */
export const RDMA_UDP_QKEY = 0x01234567;
/** The port-space part of an rdma_cm IB service ID (`RDMA_IB_IP_PS_MASK`, cma.c). */
export const RDMA_IB_IP_PS_MASK = 0xffffffffffff0000n;
/** Service ID prefix of the TCP port space (`RDMA_IB_IP_PS_TCP`). */
export const RDMA_IB_IP_PS_TCP = 0x0000000001060000n;
/** Service ID prefix of the UDP port space (`RDMA_IB_IP_PS_UDP`). */
export const RDMA_IB_IP_PS_UDP = 0x0000000001110000n;
/** Service ID prefix of the IB port space (`RDMA_IB_IP_PS_IB`). */
export const RDMA_IB_IP_PS_IB = 0x00000000013f0000n;
/** IP protocol number of UDP, which RoCEv2 rides on (`IPPROTO_UDP`). */
export const IPPROTO_UDP = 17;
/** Bytes of the network-header area before the payload of every UD receive (`sizeof(struct ibv_grh)`). */
export const GRH_AREA_LEN = 40;
