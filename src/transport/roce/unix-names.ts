/**
 * The abstract Unix socket names through which the processes sharing a soft RoCE device's UDP
 * port find each other (udp.ts), who is at the other end of such a socket, and which QPN blocks
 * the network namespace's processes hold (read afresh for a claim, at most so often for a lookup:
 * {@link DirectoryView}).
 *
 * - A QPN block is held by listening on `@rdmacm-roce-<port>-u<uid>-qpn-<block>`: every user has a
 *   namespace of block names of its own, so no user can take another's by claiming names (the
 *   names of a namespace are claimed only by that user's processes; one that is held by a process
 *   of another user is a squatter, found by its credentials and never used).
 * - A service (a listening CM id) is published as `@rdmacm-roce-<port>-svc-<service id>`, one name
 *   for all users, as a TCP port is one for all users.
 * - Abstract names are unique per network namespace and vanish with their process.
 */
import type net from 'node:net';
import { readFileSync } from 'node:fs';
import { netopt } from '../../util/netopt.js';

/** This process's user ID (0 where the platform has none). */
export const PROCESS_UID: number = typeof process.getuid === 'function' ? process.getuid() : 0;

/** The user ID of the superuser. */
export const ROOT_UID = 0;

/** The abstract name of QPN block `block` of user `uid` on RoCE port `port`. */
export function blockSocketName(port: number, uid: number, block: number): string {
  return `\0rdmacm-roce-${port}-u${uid}-qpn-${block}`;
}

/** The abstract name of a published service on RoCE port `port`. */
export function serviceSocketName(port: number, key: string): string {
  return `\0rdmacm-roce-${port}-svc-${key}`;
}

/** The user ID in a block name made by {@link blockSocketName} (-1 if it is none). */
export function uidOfBlockName(name: string): number {
  const m = /-u(\d+)-qpn-\d+$/.exec(name);
  return m ? Number(m[1]) : -1;
}

/**
 * The user ID of the process at the other end of a connected Unix socket (SO_PEERCRED: for an
 * accepted connection the process that connected, for a connection we made the process that
 * listens), or null where it cannot be known (no netopt addon).
 */
export function peerUid(sock: net.Socket): number | null {
  const fn = netopt()?.peerCred;
  if (fn === undefined) return null;
  const fd = (sock as unknown as { _handle?: { fd?: number } | null })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return null;
  const r = fn(fd);
  return Array.isArray(r) ? r[1] : null;
}

/**
 * Whether a process of user `uid` may hand this process datagrams with any source address:
 * processes of the same user, and root's. (A process of another user may hand over only
 * datagrams from this host's own addresses, which it could send over UDP itself.)
 */
export function trustedUid(uid: number): boolean {
  return uid === PROCESS_UID || uid === ROOT_UID;
}

/** What the network namespace's processes hold on one RoCE port ({@link readDirectory}). */
export interface RoceDirectory {
  /** QPN blocks, by block: the user IDs whose namespace has a socket of that name. */
  blocks: Map<number, number[]>;
  /** Published service keys. */
  services: Set<string>;
}

/**
 * The QPN blocks and services the processes of this network namespace hold on RoCE port `port`
 * (`/proc/net/unix` lists every abstract name of the namespace). Empty where /proc cannot be read.
 */
export function readDirectory(port: number): RoceDirectory {
  const out: RoceDirectory = { blocks: new Map(), services: new Set() };
  let text: string;
  try {
    text = readFileSync('/proc/net/unix', 'latin1');
  } catch {
    return out;
  }
  const prefix = `@rdmacm-roce-${port}-`;
  let at = text.indexOf(prefix);
  while (at >= 0) {
    const eol = text.indexOf('\n', at);
    // Node binds an abstract name padded with NULs to the whole sun_path, which /proc/net/unix
    // shows as trailing '@'s (no name of ours has one).
    const name = text.slice(at + prefix.length, eol < 0 ? text.length : eol).replace(/@+$/, '');
    const m = /^u(\d+)-qpn-(\d+)$/.exec(name);
    if (m) {
      const uid = Number(m[1]);
      const block = Number(m[2]);
      const list = out.blocks.get(block);
      if (list === undefined) out.blocks.set(block, [uid]);
      else if (!list.includes(uid)) list.push(uid);
    } else if (name.startsWith('svc-')) out.services.add(name.slice(4));
    at = text.indexOf(prefix, at + prefix.length);
  }
  return out;
}

/** How long a read of the directory answers lookups (ms). */
export const DIRECTORY_FRESH_MS = 1000;
/** The shortest time between two reads of the directory asked for by lookups (ms). */
export const DIRECTORY_REREAD_MS = 250;

/**
 * The last read of the namespace's directory ({@link readDirectory}) on one port, shared by the
 * claims of QPN blocks (which read it afresh) and the forwarding's lookups (which read it at most
 * every {@link DIRECTORY_REREAD_MS} and trust a read for {@link DIRECTORY_FRESH_MS}).
 */
export class DirectoryView {
  private last: RoceDirectory = { blocks: new Map(), services: new Set() };
  /** When {@link last} was read (performance.now() ms; -Infinity: never). */
  private at = -Infinity;

  constructor(private readonly port: number) {}

  /** Read the directory now (time `now`, performance.now() ms). */
  read(now: number): RoceDirectory {
    this.last = readDirectory(this.port);
    this.at = now;
    return this.last;
  }

  /** The last read when it is fresh at `now`, else null. */
  fresh(now: number): RoceDirectory | null {
    return now - this.at < DIRECTORY_FRESH_MS ? this.last : null;
  }

  /** A new read unless the last was made less than {@link DIRECTORY_REREAD_MS} before `now` (then null). */
  reread(now: number): RoceDirectory | null {
    return now - this.at < DIRECTORY_REREAD_MS ? null : this.read(now);
  }
}
