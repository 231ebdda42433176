/**
 * The package's small socket addon, native/build/netopt.node (native/src/netopt.c): the socket
 * calls the soft devices need and Node does not offer. It is built at install wherever a C
 * compiler and Node's headers exist and is absent elsewhere; every caller has a fallback.
 * Linux only. `RDMACM_NETOPT_PATH` loads it from another file.
 */
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Netopt {
  /** setsockopt(IPPROTO_IP, IP_MTU_DISCOVER, mode): 0, or a negative errno. */
  setMtuDiscover?: (fd: number, mode: number) => number;
  /** setsockopt(SOL_SOCKET, SO_NO_CHECK, 1): 0, or a negative errno. */
  setNoCheck?: (fd: number) => number;
  /** setsockopt(IPPROTO_UDP, UDP_NO_CHECK6_RX, 1): 0, or a negative errno. */
  setNoCheck6Rx?: (fd: number) => number;
  /** ioctl(SIOCOUTQNSD): a TCP socket's bytes written and not yet sent, or a negative errno. */
  unsentBytes?: (fd: number) => number;
  /** getsockopt(SO_PEERCRED) of a Unix socket: `[pid, uid, gid]` of its peer, or a negative errno. */
  peerCred?: (fd: number) => [number, number, number] | number;
  /**
   * The soft RoCE device's batched UDP sockets (native/src/udpio.c): open and bind a
   * non-blocking socket watched on Node's loop; `onBatch(buf, n)` gets each recvmmsg round.
   * A handle, or a negative errno.
   */
  udpOpen?: (family: 4 | 6, bindAddr: Buffer, rcvbuf: number, sndbuf: number, onBatch: (buf: Buffer, n: number) => void) => UdpHandle | number;
  /** Queue one datagram (`buf[off, off + len)` to the sockaddr `to`): the datagrams queued, or a negative errno. */
  udpSend?: (h: UdpHandle, buf: Buffer, off: number, len: number, to: Buffer) => number;
  /** sendmmsg the queue: the datagrams still queued (waiting for writability), or a negative errno. */
  udpFlush?: (h: UdpHandle) => number;
  /** setsockopt with an int or the bytes of a struct: 0, or a negative errno. */
  udpSetsockopt?: (h: UdpHandle, level: number, name: number, value: number | Uint8Array) => number;
  udpRef?: (h: UdpHandle, on: boolean) => number;
  udpClose?: (h: UdpHandle) => number;
  udpFd?: (h: UdpHandle) => number;
  /** The endpoint's counters, indexed by `udpConst.ST_*`. */
  udpStats?: (h: UdpHandle) => Float64Array;
  /** Testing: at most `maxPerCall` datagrams per sendmmsg (0: no cap); EAGAIN once after `eagainAfter` more (-1: never). */
  udpFault?: (h: UdpHandle, maxPerCall: number, eagainAfter: number) => number;
  /** The sockaddr of `ip` (IPv6 with an optional `%zone`) and `port`, or a negative errno. */
  udpAddr?: (family: 4 | 6, ip: string, port: number) => Buffer | number;
  /**
   * Give the receive rounds their description array, and optionally the area datagrams are read
   * into (at least `BATCH * SLOT` bytes; each round then passes it instead of a new buffer): the
   * datagrams per round, or a negative errno.
   */
  udpSetup?: (meta: Int32Array, area?: Uint8Array) => number;
  udpIfName?: (index: number) => string | number;
  udpIfIndex?: (name: string) => number;
  udpConst?: Record<string, number>;
  /**
   * The CRC-32 of `data[start, end)` continuing from `prev`, as zlib's (native/src/crc32.c, by
   * carry-less multiplication; absent on CPUs without PCLMULQDQ). Throws a RangeError on bad
   * arguments.
   */
  crc32?: (data: Uint8Array, start: number, end: number, prev: number) => number;
  /**
   * The path `crc32` runs, chosen when the addon loads from what the CPU and OS allow: 512-bit
   * VPCLMULQDQ lanes (AVX-512F; not on the Intel models that slow down under them), 256-bit ones
   * (AVX2), or 128-bit PCLMULQDQ. `RDMACM_NETOPT_CRC=pclmul`, `=vpclmul256` or `=vpclmul512`
   * (read at load) asks for that path where the CPU has it.
   */
  crc32Impl?: 'vpclmul512' | 'vpclmul256' | 'pclmul';
}

/** An open endpoint of the addon's batched UDP sockets (opaque). */
export type UdpHandle = { readonly __udpHandle: unique symbol };

let mod: Netopt | null | undefined;

/** The addon's functions, or null where it is not built (or not Linux). Loaded once. */
export function netopt(): Netopt | null {
  if (mod !== undefined) return mod;
  mod = null;
  if (process.platform !== 'linux') return null;
  const file = process.env['RDMACM_NETOPT_PATH'] ?? resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'native', 'build', 'netopt.node');
  try {
    mod = createRequire(import.meta.url)(file) as Netopt;
  } catch {
    mod = null;
  }
  return mod;
}
