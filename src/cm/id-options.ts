/**
 * The options of one CM id (rdma_set_option at level RDMA_OPTION_ID, librdmacm's `rdma_set_option`
 * over the kernel's `cma_set_*`): type of service, address reuse, IPv6-only, ACK timeout. Level
 * RDMA_OPTION_IB goes to the id's transport.
 */
import { err } from '../errors.js';
import { QpType } from '../verbs/types.js';
import type { CmEndpoint, CmIdOptions } from './transport.js';

/** rdma_set_option levels and names. */
export const RdmaOption = {
  LEVEL_ID: 0,
  LEVEL_IB: 1,
  ID_TOS: 0,
  ID_REUSEADDR: 1,
  ID_AFONLY: 2,
  ID_ACK_TIMEOUT: 3,
  IB_PATH: 1,
} as const;

/** The id-level options of one id, as its transport reads them. */
export class IdOptions implements CmIdOptions {
  /** RDMA_OPTION_ID_TOS, -1 when unset. */
  tos = -1;
  reuseAddr = false;
  afOnly = false;
  /** RDMA_OPTION_ID_ACK_TIMEOUT, -1 when unset. */
  ackTimeout = -1;

  /**
   * rdma_set_option(level, name, value) on an id of `qpType` (`idle`: not bound yet; `ep`: its
   * transport half, for level IB). EINVAL for a value out of range or REUSEADDR/AFONLY after
   * bind, ENOSYS for unknown levels and names, EOPNOTSUPP for level IB where the transport has
   * no IB options.
   */
  set(level: number, name: number, value: number, qpType: QpType, idle: boolean, ep: CmEndpoint | null): void {
    const op = 'rdma_set_option';
    if (!Number.isInteger(value)) throw err('EINVAL', op, 'value');
    if (level === RdmaOption.LEVEL_ID) {
      switch (name) {
        case RdmaOption.ID_TOS:
          if (value < 0 || value > 255) throw err('EINVAL', op, 'tos');
          this.tos = value;
          return;
        case RdmaOption.ID_REUSEADDR:
          if (!idle) throw err('EINVAL', op, 'REUSEADDR after bind');
          this.reuseAddr = value !== 0;
          return;
        case RdmaOption.ID_AFONLY:
          if (!idle) throw err('EINVAL', op, 'AFONLY after bind');
          this.afOnly = value !== 0;
          return;
        case RdmaOption.ID_ACK_TIMEOUT:
          // A u8, stored as given (rdma_set_ack_timeout); only RC ids take it.
          if (value < 0 || value > 255) throw err('EINVAL', op, 'ack timeout');
          if (qpType !== QpType.RC) throw err('EINVAL', op, 'ack timeout on a non-RC id');
          this.ackTimeout = value;
          return;
        default:
          throw err('ENOSYS', op, `option ${name}`);
      }
    }
    if (level === RdmaOption.LEVEL_IB) {
      if (!ep?.setIbOption) throw err('EOPNOTSUPP', op, 'IB options on this device');
      ep.setIbOption(name, value);
      return;
    }
    throw err('ENOSYS', op, `level ${level}`);
  }
}
