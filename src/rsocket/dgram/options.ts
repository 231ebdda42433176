/**
 * The sizes and options of a datagram rsocket: rs_alloc's defaults, rsetsockopt / rgetsockopt as
 * rsocket.c applies them to a SOCK_DGRAM socket, and ds_set_qp_size, which fits the queues to the
 * buffers (one 2 KiB slot per work request) when the socket is first bound or used.
 */
import { rsErr } from '../errors.js';
import { RS_QP_MAX_SIZE } from '../protocol.js';
import { IPPROTO_IPV6, IPV6_V6ONLY, RDMA_INLINE, RDMA_IOMAPSIZE, RDMA_RQSIZE, RDMA_SQSIZE, RS_DEFAULTS, SOL_RDMA, SOL_SOCKET, SO_ERROR, SO_RCVBUF, SO_SNDBUF } from '../options.js';
import { DS_SLOT_SIZE, type IpVersion } from './protocol.js';

/**
 * The SOL_SOCKET options a Linux UDP socket takes and rsocket keeps as flags or sizes: SO_DEBUG,
 * SO_REUSEADDR, SO_DONTROUTE, SO_BROADCAST, SO_SNDBUF, SO_RCVBUF, SO_KEEPALIVE, SO_OOBINLINE,
 * SO_NO_CHECK, SO_PRIORITY, SO_REUSEPORT.
 */
const UDP_SOL_SOCKET_OPTS = new Set([1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 15]);

/** What {@link DsOptions.set} needs to know of its socket. */
export interface DsOptState {
  /** The socket is bound or used (no longer `rs_init`). */
  inUse: boolean;
  /** It has a QP (the receive buffer size is fixed). */
  hasQp: boolean;
  /** It has its send buffer. */
  hasSbuf: boolean;
}

export class DsOptions {
  sbufSize: number = RS_DEFAULTS.wmem;
  rbufSize: number = RS_DEFAULTS.mem;
  sqSize: number = RS_DEFAULTS.sqSize;
  rqSize: number = RS_DEFAULTS.rqSize;
  sqInline: number = RS_DEFAULTS.inline;
  private soOpts = 0;
  private v6only = false;
  /** SO_ERROR (always 0: a datagram rsocket keeps no pending error). */
  private soError = 0;

  constructor(private readonly family: IpVersion) {}

  /** ds_set_qp_size: the queues no larger than the buffers' slots, the buffers no larger than the queues. */
  fitQueues(): void {
    const max = RS_QP_MAX_SIZE;
    if (this.sqSize > max) this.sqSize = max;
    if (this.rqSize > max) this.rqSize = max;
    if (this.rqSize > Math.floor(this.rbufSize / DS_SLOT_SIZE)) this.rqSize = Math.floor(this.rbufSize / DS_SLOT_SIZE);
    else this.rbufSize = this.rqSize * DS_SLOT_SIZE;
    if (this.sqSize > Math.floor(this.sbufSize / DS_SLOT_SIZE)) this.sqSize = Math.floor(this.sbufSize / DS_SLOT_SIZE);
    else this.sbufSize = this.sqSize * DS_SLOT_SIZE;
  }

  /**
   * rsetsockopt() as rsocket.c applies it to a datagram socket: an option of any level but
   * SOL_RDMA goes to the UDP socket first, which refuses what a Linux UDP socket does not take
   * (ENOPROTOOPT: an unknown SOL_SOCKET option, IPPROTO_TCP, IPPROTO_IPV6 on an IPv4 socket);
   * then SO_RCVBUF (doubled; before the first QP only), SO_SNDBUF (doubled, at least 4 KiB;
   * before the send buffer exists), the flags (SO_REUSEADDR, SO_BROADCAST, SO_KEEPALIVE …), and
   * the SOL_RDMA sizes before the socket is bound or used (EINVAL after; RDMA_IOMAPSIZE and
   * others: ENOTSUP).
   */
  set(level: number, name: number, value: number, st: DsOptState): void {
    const op = 'rsetsockopt';
    if (level === SOL_RDMA) {
      if (st.inUse) throw rsErr('EINVAL', op, 'socket in use');
      const v = value >>> 0;
      if (name === RDMA_SQSIZE) this.sqSize = Math.min(v, RS_QP_MAX_SIZE);
      else if (name === RDMA_RQSIZE) this.rqSize = Math.min(v, RS_QP_MAX_SIZE);
      else if (name === RDMA_INLINE) this.sqInline = Math.min(v, 0xffff);
      else if (name === RDMA_IOMAPSIZE) throw rsErr('EOPNOTSUPP', op, 'RDMA_IOMAPSIZE on a datagram socket');
      else throw rsErr('EOPNOTSUPP', op, `SOL_RDMA option ${name}`);
      return;
    }
    if (level === SOL_SOCKET) {
      if (!UDP_SOL_SOCKET_OPTS.has(name)) throw rsErr('ENOPROTOOPT', op, `SOL_SOCKET option ${name}`);
      if (name === SO_RCVBUF) {
        if (!st.hasQp) this.rbufSize = ((value >>> 0) * 2) >>> 0;
      } else if (name === SO_SNDBUF) {
        if (!st.hasSbuf) this.sbufSize = ((value >>> 0) * 2) >>> 0;
        if (this.sbufSize < DS_SLOT_SIZE) this.sbufSize = DS_SLOT_SIZE * 2;
      } else this.soOpts = value ? this.soOpts | (1 << name) : this.soOpts & ~(1 << name);
      return;
    }
    if (level === IPPROTO_IPV6 && this.family === 6) {
      if (name === IPV6_V6ONLY) this.v6only = value !== 0;
      return;
    }
    throw rsErr('ENOPROTOOPT', op, `level ${level} option ${name} on a UDP socket`);
  }

  /** rgetsockopt(): SO_RCVBUF / SO_SNDBUF (the sizes in use), SO_ERROR (cleared), flags, SOL_RDMA sizes. */
  get(level: number, name: number): number {
    if (level === SOL_SOCKET) {
      if (name === SO_RCVBUF) return this.rbufSize;
      if (name === SO_SNDBUF) return this.sbufSize;
      if (name === SO_ERROR) {
        const e = this.soError;
        this.soError = 0;
        return e;
      }
      if (UDP_SOL_SOCKET_OPTS.has(name)) return this.soOpts & (1 << name) ? 1 : 0;
    } else if (level === IPPROTO_IPV6 && name === IPV6_V6ONLY) {
      return this.v6only ? 1 : 0;
    } else if (level === SOL_RDMA) {
      if (name === RDMA_SQSIZE) return this.sqSize;
      if (name === RDMA_RQSIZE) return this.rqSize;
      if (name === RDMA_INLINE) return this.sqInline;
    }
    throw rsErr('EOPNOTSUPP', 'rgetsockopt', `level ${level} option ${name}`);
  }
}
