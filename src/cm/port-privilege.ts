/**
 * Who may bind a low port: the rule of the kernel's `inet_bind` (a port below
 * `net.ipv4.ip_unprivileged_port_start` needs CAP_NET_BIND_SERVICE, else EACCES), applied by
 * rdma_bind_addr to every port space and device. rdma_cm has the same rule for its own port
 * spaces (cma.c `cma_use_port`: a port below PROT_SOCK without CAP_NET_BIND_SERVICE is
 * EACCES), and an iWARP device meets it anyway when it binds the TCP port; checking it here
 * makes the RoCE device, whose ports are only names, refuse the same ports.
 */
import { readFileSync } from 'node:fs';
import { err } from '../errors.js';

/** The kernel's PROT_SOCK: the first unprivileged port when the sysctl cannot be read. */
export const PROT_SOCK = 1024;
/** The capability bit that allows binding a privileged port (linux/capability.h). */
export const CAP_NET_BIND_SERVICE = 10;

const PORT_START_FILE = '/proc/sys/net/ipv4/ip_unprivileged_port_start';
const STATUS_FILE = '/proc/self/status';

/**
 * `net.ipv4.ip_unprivileged_port_start` of this process's network namespace (read at each call:
 * binds are rare and the value may change), or {@link PROT_SOCK} where it cannot be read.
 */
export function unprivilegedPortStart(): number {
  try {
    const v = Number.parseInt(readFileSync(PORT_START_FILE, 'latin1').trim(), 10);
    return Number.isInteger(v) && v >= 0 ? v : PROT_SOCK;
  } catch {
    return PROT_SOCK;
  }
}

/**
 * Whether this process holds CAP_NET_BIND_SERVICE in its effective set (`CapEff` of
 * /proc/self/status). Without /proc: whether it runs as root.
 */
export function canBindPrivileged(): boolean {
  let status: string;
  try {
    status = readFileSync(STATUS_FILE, 'latin1');
  } catch {
    return typeof process.getuid === 'function' && process.getuid() === 0;
  }
  const m = /^CapEff:\s*([0-9a-fA-F]+)/m.exec(status);
  if (m === null) return false;
  return ((BigInt(`0x${m[1]}`) >> BigInt(CAP_NET_BIND_SERVICE)) & 1n) === 1n;
}

/**
 * Throw EACCES for `op` if `port` (non-zero) is below the unprivileged start and the process
 * may not bind privileged ports.
 */
export function checkPortPrivilege(port: number, op: string): void {
  if (port === 0 || port >= unprivilegedPortStart() || canBindPrivileged()) return;
  throw err('EACCES', op, `port ${port} is privileged (below ${unprivilegedPortStart()}) and CAP_NET_BIND_SERVICE is not held`);
}
