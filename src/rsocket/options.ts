/**
 * Socket-level constants of the rsocket API (Linux values, as `<sys/socket.h>`,
 * `<netinet/tcp.h>` and `<rdma/rsocket.h>` define them) and the library defaults
 * (rsocket.c `def_*`, overridable in librdmacm by files under /etc/rdma/rsocket/).
 */

/** Option levels. */
export const SOL_SOCKET = 1;
/** `IPPROTO_TCP`: the level of the TCP_* options. */
export const IPPROTO_TCP = 6;
/** `IPPROTO_UDP`: the IP protocol number, defined once with the RoCEv2 headers. */
export { IPPROTO_UDP } from '../ib-numbers.js';
/** `IPPROTO_IPV6`: the level of IPV6_V6ONLY. */
export const IPPROTO_IPV6 = 41;
/** `SOL_RDMA` of `<rdma/rsocket.h>`. */
export const SOL_RDMA = 0x10000;

/** SOL_SOCKET options. */
export const SO_REUSEADDR = 2;
/** `SO_ERROR`: the pending error, read and cleared (a non-blocking connect's result). */
export const SO_ERROR = 4;
/** `SO_BROADCAST`: a flag of datagram rsockets (EOPNOTSUPP on a stream rsocket). */
export const SO_BROADCAST = 6;
/** `SO_SNDBUF`: the send buffer's size in bytes (set before connecting). */
export const SO_SNDBUF = 7;
/** `SO_RCVBUF`: the receive buffer's size in bytes (set before connecting). */
export const SO_RCVBUF = 8;
/** `SO_KEEPALIVE`: keep-alive messages on an idle connection (rsocket.c's keepalive service). */
export const SO_KEEPALIVE = 9;
/** `SO_OOBINLINE`: a flag kept and read back (rsockets have no out-of-band data). */
export const SO_OOBINLINE = 10;
/** `SO_LINGER`: a `{ onoff, linger }` pair; only `onoff` is kept, as rsocket.c. */
export const SO_LINGER = 13;

/** IPPROTO_TCP options. */
export const TCP_NODELAY = 1;
/** `TCP_MAXSEG`: accepted and ignored on set; reads 2048, as rsocket.c. */
export const TCP_MAXSEG = 2;
/** `TCP_KEEPIDLE`: seconds of idleness before the first keep-alive. */
export const TCP_KEEPIDLE = 4;
/** `TCP_KEEPINTVL`: accepted and ignored on set; reads 1, as rsocket.c. */
export const TCP_KEEPINTVL = 5;
/** `TCP_KEEPCNT`: accepted and ignored on set; reads 1, as rsocket.c. */
export const TCP_KEEPCNT = 6;

/** IPPROTO_IPV6 options. */
export const IPV6_V6ONLY = 26;

/** SOL_RDMA options (`enum` in rsocket.h). */
export const RDMA_SQSIZE = 0;
/** `RDMA_RQSIZE`: the receive queue's depth (set before connecting). */
export const RDMA_RQSIZE = 1;
/** `RDMA_INLINE`: the inline data size asked of the QP (set before connecting). */
export const RDMA_INLINE = 2;
/** `RDMA_IOMAPSIZE`: how many riomap() regions the peer may write to (set before connecting). */
export const RDMA_IOMAPSIZE = 3;
/** `RDMA_ROUTE`: a path record instead of a resolved route (accepted and ignored: IP routes here). */
export const RDMA_ROUTE = 4;

/** `shutdown()` directions. */
export const SHUT_RD = 0;
/** `SHUT_WR`: stop sending (the peer reads end of file). */
export const SHUT_WR = 1;
/** `SHUT_RDWR`: stop both directions. */
export const SHUT_RDWR = 2;

/** `poll()` events. */
export const POLLIN = 0x001;
/** `POLLOUT`: writable. */
export const POLLOUT = 0x004;
/** `POLLERR`: an error is pending. */
export const POLLERR = 0x008;
/** `POLLHUP`: the peer closed or the connection ended. */
export const POLLHUP = 0x010;
/** poll(2)'s answer for a descriptor that is not open (an rsocket after rclose). */
export const POLLNVAL = 0x020;

/** send/recv flags. */
export const MSG_PEEK = 0x2;
/** `MSG_DONTWAIT`: return EAGAIN instead of waiting, for this call only. */
export const MSG_DONTWAIT = 0x40;
/** `MSG_WAITALL`: wait until the whole length has arrived. */
export const MSG_WAITALL = 0x100;

/** riomap protections. */
export const PROT_NONE = 0;
/** `PROT_WRITE`: the peer may write into the mapped region. */
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
