/**
 * The tunables of the RoCE CM: the SIDR exchange of datagram ids and the connections of RC ids.
 * Defaults from the environment, changed through {@link configureRoceCm} and
 * {@link configureRoceRcCm}.
 */
import { envInt } from '../../../util/env.js';
import { MAX_CM_RETRIES } from './timing.js';

/** Tunables of the RoCE CM for datagram ids. */
export interface RoceCmConfig {
  /** SIDR_REQ response timeout before a resend (ms). cma: `1 << (CMA_CM_RESPONSE_TIMEOUT - 8)` = 4096. */
  sidrTimeoutMs: number;
  /** SIDR_REQ resends before UNREACHABLE. cma: `CMA_MAX_CM_RETRIES` = 15. */
  sidrRetries: number;
}

/** Tunables of the connected CM. */
export interface RoceRcCmConfig {
  /**
   * How long a REQ, REP or DREQ waits for its answer before it is sent again (ms). cm.c for a REQ:
   * 2 × 2^(packet lifetime − 8) + 2^(remote CM response timeout − 8) = 2 × 1024 + 4096 with rdma_cm's
   * RoCE packet lifetime 18 and response timeout 20.
   */
  cmTimeoutMs: number;
  /** Resends before giving up (cma: 15). */
  cmRetries: number;
  /** TIMEWAIT before TIMEWAIT_EXIT (ms): cm.c 2^(ACK timeout − 8), 2048 for the timeout 19 of RoCE paths. */
  timewaitMs: number;
  /**
   * −1 (the default): the local ACK timeout is derived as Linux 6.1 does — the REQ carries
   * cmAckTimeout(15, packet lifetime 18) = 19, the active QP gets cmAckTimeout(the REP's
   * target ACK delay, 18) (19 against rxe), the passive QP the REQ's value (cm.c: lifetime = REQ
   * value − 1, timeout = lifetime + 1). 0..31: as if every id had RDMA_OPTION_ID_ACK_TIMEOUT set
   * to it (the option of an id wins).
   */
  ackTimeout: number;
}

const sidr: RoceCmConfig = {
  sidrTimeoutMs: Math.max(1, envInt('RDMACM_ROCE_SIDR_TIMEOUT_MS', 4096)),
  sidrRetries: envInt('RDMACM_ROCE_SIDR_RETRIES', 15),
};

const rc: RoceRcCmConfig = {
  cmTimeoutMs: Math.max(1, envInt('RDMACM_ROCE_CM_TIMEOUT_MS', 6144)),
  cmRetries: envInt('RDMACM_ROCE_CM_RETRIES', MAX_CM_RETRIES),
  timewaitMs: envInt('RDMACM_ROCE_TIMEWAIT_MS', 2048),
  ackTimeout: envInt('RDMACM_ROCE_ACK_TIMEOUT', -1, 31),
};

/** The SIDR tunables in force (read by the SIDR requester). */
export const sidrConfig: Readonly<RoceCmConfig> = sidr;
/** The connection tunables in force (read by the IB CM and the RC endpoint). */
export const rcConfig: Readonly<RoceRcCmConfig> = rc;

/** Change the RoCE CM tunables (environment defaults: `RDMACM_ROCE_SIDR_TIMEOUT_MS`, `RDMACM_ROCE_SIDR_RETRIES`). */
export function configureRoceCm(c: Partial<RoceCmConfig>): void {
  if (c.sidrTimeoutMs !== undefined) sidr.sidrTimeoutMs = Math.max(1, Math.floor(c.sidrTimeoutMs));
  if (c.sidrRetries !== undefined) sidr.sidrRetries = Math.max(0, Math.floor(c.sidrRetries));
}

/** The current RoCE CM tunables (a copy). */
export function roceCmConfig(): RoceCmConfig {
  return { ...sidr };
}

/**
 * Change the connected CM's tunables (environment defaults: `RDMACM_ROCE_CM_TIMEOUT_MS`,
 * `RDMACM_ROCE_CM_RETRIES`, `RDMACM_ROCE_TIMEWAIT_MS`, `RDMACM_ROCE_ACK_TIMEOUT`).
 */
export function configureRoceRcCm(c: Partial<RoceRcCmConfig>): void {
  if (c.cmTimeoutMs !== undefined) rc.cmTimeoutMs = Math.max(1, Math.floor(c.cmTimeoutMs));
  if (c.cmRetries !== undefined) rc.cmRetries = Math.max(0, Math.floor(c.cmRetries));
  if (c.timewaitMs !== undefined) rc.timewaitMs = Math.max(0, Math.floor(c.timewaitMs));
  if (c.ackTimeout !== undefined) rc.ackTimeout = c.ackTimeout < 0 ? -1 : Math.min(31, Math.floor(c.ackTimeout));
}

/** The connected CM's tunables (a copy). */
export function roceRcCmConfig(): RoceRcCmConfig {
  return { ...rc };
}
