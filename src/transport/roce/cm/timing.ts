/**
 * The timing values rdma_cm and the IB CM put in and derive from their MADs over RoCE (all codes
 * of 4.096 µs × 2^n unless said otherwise).
 */

/** CM response timeout code rdma_cm puts in REQs (cma.c `CMA_CM_RESPONSE_TIMEOUT`). */
export const CM_RESPONSE_TIMEOUT = 20;
/** Max CM retries code (cma.c `CMA_MAX_CM_RETRIES`). */
export const MAX_CM_RETRIES = 15;
/** The service timeout of an MRA (cma.c `CMA_CM_MRA_SETTING`, ≈ 68.7 s). */
export const MRA_SERVICE_TIMEOUT = 24;
/** rxe's `local_ca_ack_delay` (RXE_LOCAL_CA_ACK_DELAY): the CA ACK delay cm.c uses for a REQ, sent as the REP's target ACK delay. */
export const CA_ACK_DELAY = 15;
/**
 * The packet lifetime rdma_cm puts in RoCE path records (cma.c `CMA_IBOE_PACKET_LIFETIME`: 18 up to
 * Linux 6.1, the kernel of Debian bookworm; 16 from 6.2), unless RDMA_OPTION_ID_ACK_TIMEOUT gives
 * the id a timeout t > 0, which makes it t − 1 (`cma_resolve_iboe_route`).
 */
export const CMA_IBOE_PACKET_LIFETIME = 18;

/**
 * cm.c `cm_ack_timeout`: the local ACK timeout code for a CA ACK delay and a packet lifetime.
 * IBTA 12.7.34 wants 2^ack_delay + 2 × 2^life_time; cm.c takes the larger of the ACK delay and
 * lifetime + 1 and adds one when the other is within a factor of two. rxe (15) with lifetime 18 →
 * 19, which is what a Linux 6.1 rdma_cm sends in its REQs.
 */
export function cmAckTimeout(caAckDelay: number, packetLifeTime: number): number {
  let t = packetLifeTime + 1;
  if (t >= caAckDelay) t += caAckDelay >= t - 1 ? 1 : 0;
  else t = caAckDelay + (t >= caAckDelay - 1 ? 1 : 0);
  return Math.min(31, t);
}

/** The wait an MRA adds (cm.c: the service timeout plus a packet lifetime), in ms. */
export function mraWaitMs(serviceTimeout: number, avTimeout: number): number {
  return 2 ** Math.max(serviceTimeout - 8, 0) + 2 ** Math.max(avTimeout - 8, 0);
}
