/**
 * IPv4 identification and UDP checksum of the datagrams this device sends, and IPv6 datagrams
 * with UDP checksum 0.
 *
 * The RoCEv2 ICRC covers the IPv4 header including its 16-bit identification field, which the
 * kernel fills in after userspace has handed over the UDP payload. Linux writes 0 there only for
 * a datagram with DF set from a socket whose path-MTU mode is `IP_PMTUDISC_DO` or
 * `IP_PMTUDISC_PROBE` (include/net/ip.h `ip_select_ident_segs`); a default UDP socket
 * (`IP_PMTUDISC_WANT`) gets a hashed, changing identification. Node offers no way to set
 * `IP_MTU_DISCOVER`, so this module does it through the package's small native addon
 * native/build/netopt.node (native/src/netopt.c, built at install wherever a C compiler and
 * Node's headers exist: `setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_PROBE)` on the
 * socket's descriptor).
 *
 * With it, every IPv4 datagram leaves with identification 0 and DF, the values the sender's ICRC
 * was computed with, so a kernel rxe peer accepts it. The same sockets send with UDP checksum 0
 * (`SO_NO_CHECK`), as rxe does (rxe_net.c `prepare_udp_hdr`: the ICRC covers the packet), so
 * that the IP and UDP headers of an IPv4 datagram are field for field the ones rxe sends. Without it the device still works between
 * processes of this package (receivers recover the identification from the ICRC, see
 * icrc-ipid.ts) but a kernel rxe peer drops its IPv4 datagrams as ICRC errors.
 * `RDMACM_ROCE_SOCKOPT=off` disables the call; `RDMACM_NETOPT_PATH` loads the addon from another
 * file.
 */
import type dgram from 'node:dgram';
import { netopt } from '../../util/netopt.js';

const IP_PMTUDISC_PROBE = 3;

type SetMtuDiscover = (fd: number, mode: number) => number;
type SetNoCheck6Rx = (fd: number) => number;

let setMtuDiscover: SetMtuDiscover | null | undefined;
let setNoCheck6Rx: SetNoCheck6Rx | null = null;
let setNoCheck: SetNoCheck6Rx | null = null;
/** Whether an IPv4 socket of this process was set to send UDP checksum 0. */
let noCheck4 = false;

function load(): SetMtuDiscover | null {
  if (setMtuDiscover !== undefined) return setMtuDiscover;
  setMtuDiscover = null;
  if (process.env['RDMACM_ROCE_SOCKOPT'] === 'off') return null;
  const mod = netopt();
  if (typeof mod?.setMtuDiscover === 'function') setMtuDiscover = mod.setMtuDiscover;
  if (typeof mod?.setNoCheck6Rx === 'function') setNoCheck6Rx = mod.setNoCheck6Rx;
  if (typeof mod?.setNoCheck === 'function') setNoCheck = mod.setNoCheck;
  return setMtuDiscover;
}

/** The file descriptor of a bound dgram socket (Node keeps it on an internal handle). */
function fdOf(sock: dgram.Socket): number {
  for (const k of Object.getOwnPropertySymbols(sock)) {
    const st = (sock as unknown as Record<symbol, unknown>)[k] as { handle?: { fd?: unknown } } | undefined;
    const fd = st?.handle?.fd;
    if (typeof fd === 'number' && fd >= 0) return fd;
  }
  return -1;
}

/**
 * Put a bound IPv4 socket in `IP_PMTUDISC_PROBE` mode (DF set, IP identification 0) and have it
 * send UDP checksum 0 (`SO_NO_CHECK`, best effort: a checksum is valid too).
 * @returns whether the path-MTU mode was set.
 */
export function setPmtuProbe(sock: dgram.Socket): boolean {
  return setPmtuProbeFd(fdOf(sock));
}

/** {@link setPmtuProbe} on a socket's descriptor (the addon's batched sockets). */
export function setPmtuProbeFd(fd: number): boolean {
  const f = load();
  if (!f || fd < 0) return false;
  if (f(fd, IP_PMTUDISC_PROBE) !== 0) return false;
  if (setNoCheck && setNoCheck(fd) === 0) noCheck4 = true;
  return true;
}

/** Whether this process's IPv4 RoCE datagrams leave with UDP checksum 0 (for a packet capture). */
export function zeroChecksum4(): boolean {
  return noCheck4;
}

/**
 * Let a bound IPv6 socket receive UDP datagrams whose checksum is 0 (`UDP_NO_CHECK6_RX`). A
 * kernel rxe sends every datagram so (udp_tunnel_xmit_skb with the checksum off: the ICRC covers
 * the packet); IPv6 forbids that unless the receiver allows it (RFC 6936), so without this
 * option Linux drops everything a kernel rxe sends over IPv6 before the socket sees it.
 * @returns whether it worked.
 */
export function allowZeroChecksum6(sock: dgram.Socket): boolean {
  return allowZeroChecksum6Fd(fdOf(sock));
}

/** {@link allowZeroChecksum6} on a socket's descriptor (the addon's batched sockets). */
export function allowZeroChecksum6Fd(fd: number): boolean {
  load();
  if (!setNoCheck6Rx || fd < 0) return false;
  return setNoCheck6Rx(fd) === 0;
}

/** Whether the addon is available (for the documentation of a device's state). */
export function pmtuProbeAvailable(): boolean {
  return load() !== null;
}
