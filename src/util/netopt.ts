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
  /** setsockopt(IPPROTO_UDP, UDP_NO_CHECK6_RX, 1): 0, or a negative errno. */
  setNoCheck6Rx?: (fd: number) => number;
  /** ioctl(SIOCOUTQNSD): a TCP socket's bytes written and not yet sent, or a negative errno. */
  unsentBytes?: (fd: number) => number;
  /** getsockopt(SO_PEERCRED) of a Unix socket: `[pid, uid, gid]` of its peer, or a negative errno. */
  peerCred?: (fd: number) => [number, number, number] | number;
}

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
