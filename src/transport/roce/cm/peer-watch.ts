/**
 * Connections whose peer is another process of this host, watched through the socket of the QPN
 * block the peer's communication ID names (it goes away with the process). The kernel's CM sends
 * a DREQ for every connection of a process that dies; a CM inside the process cannot, so its
 * peers on this host act on the socket closing instead, as if that DREQ had come.
 *
 * One socket serves every connection to the same block; it is dropped when the last of them is
 * no longer watched.
 */
import net from 'node:net';
import type { RoceDevice } from '../device.js';
import { blockOfId } from './ids.js';

/** What the watch needs of a connection. */
export interface WatchedConn {
  readonly dev: RoceDevice;
  readonly remote: string;
  readonly family: 4 | 6;
  readonly remoteCommId: number;
  /** The peer process's socket name this connection is watched through ('' if none). */
  watch: string;
  /** The peer's process is gone. */
  peerDied(): void;
}

const watched = new Map<string, { sock: net.Socket; conns: Set<WatchedConn> }>();

/** Watch the peer of `c` if it is a process of this host other than this one (once). */
export function watchPeer(c: WatchedConn): void {
  const agent = c.dev.agent;
  // The peer's communication ID names a QPN block its process holds (`block << 18 | sequence`).
  const block = blockOfId(c.remoteCommId);
  if (c.watch !== '' || !c.dev.ownsIp(c.remote, c.family) || agent.ownedBlocks().includes(block)) return;
  const name = agent.blockHolderName(block);
  let w = watched.get(name);
  if (w === undefined) {
    const sock = net.connect(name);
    const entry = { sock, conns: new Set<WatchedConn>() };
    w = entry;
    watched.set(name, entry);
    sock.unref();
    sock.on('data', () => {});
    sock.on('error', () => {});
    sock.on('close', () => {
      if (watched.get(name) === entry) watched.delete(name);
      for (const x of entry.conns) x.peerDied();
      entry.conns.clear();
    });
  }
  w.conns.add(c);
  c.watch = name;
}

/** Stop watching the peer of `c`. */
export function unwatchPeer(c: WatchedConn): void {
  const name = c.watch;
  if (name === '') return;
  c.watch = '';
  const w = watched.get(name);
  if (w === undefined) return;
  w.conns.delete(c);
  if (w.conns.size === 0) {
    watched.delete(name);
    w.sock.destroy();
  }
}
