/**
 * Socket-level constants of the rsocket API (Linux values, as `<sys/socket.h>`,
 * `<netinet/tcp.h>` and `<rdma/rsocket.h>` define them) and the library defaults
 * (rsocket.c `def_*`, overridable in librdmacm by files under /etc/rdma/rsocket/).
 */

/** Option levels. */
export const SOL_SOCKET = 1;
export const IPPROTO_TCP = 6;
/** `IPPROTO_UDP`: the IP protocol number, defined once with the RoCEv2 headers. */
export { IPPROTO_UDP } from '../wire/roce/icrc.js';
export const IPPROTO_IPV6 = 41;
/** `SOL_RDMA` of `<rdma/rsocket.h>`. */
export const SOL_RDMA = 0x10000;

/** SOL_SOCKET options. */
export const SO_REUSEADDR = 2;
export const SO_ERROR = 4;
export const SO_BROADCAST = 6;
export const SO_SNDBUF = 7;
export const SO_RCVBUF = 8;
export const SO_KEEPALIVE = 9;
export const SO_OOBINLINE = 10;
export const SO_LINGER = 13;

/** IPPROTO_TCP options. */
export const TCP_NODELAY = 1;
export const TCP_MAXSEG = 2;
export const TCP_KEEPIDLE = 4;
export const TCP_KEEPINTVL = 5;
export const TCP_KEEPCNT = 6;

/** IPPROTO_IPV6 options. */
export const IPV6_V6ONLY = 26;

/** SOL_RDMA options (`enum` in rsocket.h). */
export const RDMA_SQSIZE = 0;
export const RDMA_RQSIZE = 1;
export const RDMA_INLINE = 2;
export const RDMA_IOMAPSIZE = 3;
export const RDMA_ROUTE = 4;

/** `shutdown()` directions. */
export const SHUT_RD = 0;
export const SHUT_WR = 1;
export const SHUT_RDWR = 2;

/** `poll()` events. */
export const POLLIN = 0x001;
export const POLLOUT = 0x004;
export const POLLERR = 0x008;
export const POLLHUP = 0x010;
/** poll(2)'s answer for a descriptor that is not open (an rsocket after rclose). */
export const POLLNVAL = 0x020;

/** send/recv flags. */
export const MSG_PEEK = 0x2;
export const MSG_DONTWAIT = 0x40;
export const MSG_WAITALL = 0x100;

/** riomap protections. */
export const PROT_NONE = 0;
export const PROT_WRITE = 2;

/** `O_NONBLOCK` (rfcntl F_SETFL). */
export const O_NONBLOCK = 0o4000;

/** Library defaults (rsocket.c). */
export const RS_DEFAULTS = Object.freeze({
  /** Receive buffer (`def_mem`). */
  mem: 1 << 17,
  /** Send buffer (`def_wmem`). */
  wmem: 1 << 17,
  /** Send queue size (`def_sqsize`). */
  sqSize: 384,
  /** Receive queue size (`def_rqsize`). */
  rqSize: 384,
  /** Inline size (`def_inline`). */
  inline: 64,
  /** iomap entries (`def_iomap_size`). */
  iomapSize: 0,
  /** Microseconds a wait busy-polls before it sleeps (`polling_time`). */
  pollingTime: 10,
});
