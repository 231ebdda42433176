/**
 * rsocket's socket options: rsetsockopt (shared by a connection and a listener) and the option
 * state a connection or a listener answers rgetsockopt from. SO_ERROR, which reads and clears the
 * connection's pending error, is the connection's own.
 */
import { RdmaOption, type CmId } from '../cm/index.js';
import { RdmaError } from '../errors.js';
import { RS_QP_MAX_SIZE, RS_SNDLOWAT, roundIomapSize } from './protocol.js';
import {
  IPPROTO_IPV6,
  IPPROTO_TCP,
  IPV6_V6ONLY,
  RDMA_INLINE,
  RDMA_IOMAPSIZE,
  RDMA_ROUTE,
  RDMA_RQSIZE,
  RDMA_SQSIZE,
  SOL_RDMA,
  SOL_SOCKET,
  SO_BROADCAST,
  SO_KEEPALIVE,
  SO_LINGER,
  SO_OOBINLINE,
  SO_RCVBUF,
  SO_REUSEADDR,
  SO_SNDBUF,
  TCP_KEEPCNT,
  TCP_KEEPIDLE,
  TCP_KEEPINTVL,
  TCP_MAXSEG,
  TCP_NODELAY,
} from './options.js';
import { RsState } from './state.js';
import { rsErr } from './errors.js';
import type { RsConfig } from './tunables.js';

/** A value for {@link RsConn.setsockopt}: an integer, a boolean, or SO_LINGER's struct. */
export type SockOptValue = number | boolean | { onoff: boolean; linger: number };

/** An rsocket's option flags (one bit per option name, per level) and its TCP_KEEPIDLE. */
export class RsSockOpts {
  /** SOL_SOCKET flags. */
  so = 0;
  /** IPPROTO_TCP flags. */
  tcp = 0;
  /** IPPROTO_IPV6 flags. */
  ipv6 = 0;
  /** TCP_KEEPIDLE, seconds (0: not set). */
  keepaliveTime = 0;

  setFlag(level: number, name: number, on: boolean): void {
    const bit = 2 ** name;
    const upd = (v: number): number => (on ? v | bit : v & ~bit) >>> 0;
    if (level === SOL_SOCKET) this.so = upd(this.so);
    else if (level === IPPROTO_TCP) this.tcp = upd(this.tcp);
    else if (level === IPPROTO_IPV6) this.ipv6 = upd(this.ipv6);
  }

  /**
   * rgetsockopt() of everything but SO_ERROR, with the sizes of `cfg`: the value as a number
   * (booleans as 0/1). ENOTSUP for anything rsocket does not answer.
   */
  get(cfg: RsConfig, level: number, name: number): number {
    const bit = (v: number): number => ((v >>> name) & 1);
    if (level === SOL_SOCKET) {
      switch (name) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          return bit(this.so);
        case SO_RCVBUF:
          return cfg.rbufSize;
        case SO_SNDBUF:
          return cfg.sbufSize;
        case SO_LINGER:
          return bit(this.so) ? 0 : 1;
        default:
          throw rsErr('EOPNOTSUPP', 'rgetsockopt');
      }
    }
    if (level === IPPROTO_TCP) {
      switch (name) {
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
          return 1;
        case TCP_KEEPIDLE:
          return this.keepaliveTime;
        case TCP_NODELAY:
          return bit(this.tcp);
        case TCP_MAXSEG:
          return 2048;
        default:
          throw rsErr('EOPNOTSUPP', 'rgetsockopt');
      }
    }
    if (level === IPPROTO_IPV6 && name === IPV6_V6ONLY) return bit(this.ipv6);
    if (level === SOL_RDMA) {
      switch (name) {
        case RDMA_SQSIZE:
          return cfg.sqSize;
        case RDMA_RQSIZE:
          return cfg.rqSize;
        case RDMA_INLINE:
          return cfg.sqInline;
        case RDMA_IOMAPSIZE:
          return cfg.targetIomapSize;
        default:
          throw rsErr('EOPNOTSUPP', 'rgetsockopt');
      }
    }
    throw rsErr('EOPNOTSUPP', 'rgetsockopt');
  }
}

/** rsetsockopt(), shared by {@link RsConn.setsockopt} and the listener's. */
export function applySockopt(
  t: { cfg: RsConfig; state: number; _setFlag(level: number, name: number, on: boolean): void; _hasBuffers: boolean; _ensureId(): CmId; _setKeepalive?(on: boolean): void; _setKeepIdle?(s: number): void },
  level: number,
  name: number,
  value: SockOptValue,
): void {
  const op = 'rsetsockopt';
  const num = typeof value === 'number' ? value : typeof value === 'boolean' ? (value ? 1 : 0) : value.onoff ? 1 : 0;
  if (level === SOL_SOCKET) {
    switch (name) {
      case SO_REUSEADDR:
        try {
          t._ensureId().setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_REUSEADDR, num ? 1 : 0);
        } catch (e) {
          // rsocket.c ignores ENOSYS (and late IB sets); anything else is reported.
          if (!(e instanceof RdmaError && e.code === 'ENOSYS')) throw e instanceof RdmaError ? new RdmaError(e.code, { op, cause: e }) : e;
        }
        t._setFlag(level, name, num !== 0);
        return;
      // The value as a uint32_t, doubled in 32 bits (rsocket.c: `*(uint32_t *)optval << 1`).
      case SO_RCVBUF:
        // (`>>> 0` keeps a small size a small integer: a double here would change the field's
        // representation in every RsConn's map, and the data path's optimised code with it.)
        if (!t._hasBuffers) t.cfg.rbufSize = (((num >>> 0) * 2) % 2 ** 32) >>> 0;
        return;
      case SO_SNDBUF:
        if (!t._hasBuffers) t.cfg.sbufSize = (((num >>> 0) * 2) % 2 ** 32) >>> 0;
        if (t.cfg.sbufSize < RS_SNDLOWAT) t.cfg.sbufSize = RS_SNDLOWAT << 1;
        return;
      case SO_LINGER:
        // Inverted so that the default (0) means "on", as rsocket.c stores it.
        t._setFlag(level, name, num === 0);
        return;
      case SO_KEEPALIVE:
        if (t._setKeepalive) t._setKeepalive(num !== 0);
        else t._setFlag(level, name, num !== 0);
        return;
      case SO_OOBINLINE:
        t._setFlag(level, name, num !== 0);
        return;
      case SO_BROADCAST:
      default:
        throw rsErr('EOPNOTSUPP', op);
    }
  }
  if (level === IPPROTO_TCP) {
    switch (name) {
      case TCP_KEEPCNT:
      case TCP_KEEPINTVL:
      case TCP_MAXSEG:
        return;
      case TCP_KEEPIDLE:
        if (num <= 0) throw rsErr('EINVAL', op, 'TCP_KEEPIDLE');
        t._setKeepIdle?.(num);
        return;
      case TCP_NODELAY:
        t._setFlag(level, name, num !== 0);
        return;
      default:
        throw rsErr('EOPNOTSUPP', op);
    }
  }
  if (level === IPPROTO_IPV6) {
    if (name !== IPV6_V6ONLY) throw rsErr('EOPNOTSUPP', op);
    t._ensureId().setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_AFONLY, num ? 1 : 0);
    t._setFlag(level, name, num !== 0);
    return;
  }
  if (level === SOL_RDMA) {
    if (t.state >= RsState.opening) throw rsErr('EINVAL', op, 'SOL_RDMA options must be set before connecting');
    const v = Math.min(num >>> 0, RS_QP_MAX_SIZE);
    switch (name) {
      case RDMA_SQSIZE:
        t.cfg.sqSize = v;
        return;
      case RDMA_RQSIZE:
        t.cfg.rqSize = v;
        return;
      case RDMA_INLINE:
        t.cfg.sqInline = v;
        return;
      case RDMA_IOMAPSIZE:
        t.cfg.targetIomapSize = roundIomapSize(num);
        return;
      case RDMA_ROUTE:
        // Path records are an InfiniBand concept; an iWARP route is the IP route.
        return;
      default:
        throw rsErr('EOPNOTSUPP', op);
    }
  }
  throw rsErr('EOPNOTSUPP', op);
}
