/**
 * Who is at the other end of a local Unix socket (SO_PEERCRED through the package's netopt
 * addon), and the rule the counter and resource listing follows: a process answers processes of
 * its own user and root's, nobody else (docs/security.md, *Local users*).
 */
import type net from 'node:net';
import { netopt } from '../util/netopt.js';

/** This process's user ID (0 where the platform has none). */
export const MY_UID: number = typeof process.getuid === 'function' ? process.getuid() : 0;

/** The superuser's user ID. */
export const ROOT_UID = 0;

/** `[pid, uid]` of the process at the other end of connected Unix socket `sock`; null where unknown (no addon). */
export function peerCred(sock: net.Socket): { pid: number; uid: number } | null {
  const fn = netopt()?.peerCred;
  if (fn === undefined) return null;
  const fd = (sock as unknown as { _handle?: { fd?: number } | null })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return null;
  const r = fn(fd);
  return Array.isArray(r) ? { pid: r[0], uid: r[1] } : null;
}

/** Whether a reader of user `uid` may see this process's counters and resources. */
export function mayRead(uid: number): boolean {
  return uid === MY_UID || uid === ROOT_UID;
}
