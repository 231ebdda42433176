/**
 * The statistics of this process's RoCE UDP sockets that only the kernel keeps: datagrams it
 * dropped because a socket's receive buffer was full (the "drops" column of /proc/net/udp and
 * /proc/net/udp6), read for a device's `udp_rcvbuf_drop` counter.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { endianness } from 'node:os';
import { ipSlotText } from './ip-addr.js';

/** The inodes of the sockets among this process's descriptors (null where /proc cannot be read). */
function ownSocketInodes(): Set<string> | null {
  const mine = new Set<string>();
  try {
    for (const fd of readdirSync('/proc/self/fd')) {
      try {
        const l = readlinkSync(`/proc/self/fd/${fd}`);
        if (l.startsWith('socket:[')) mine.add(l.slice(8, -1));
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    return null;
  }
  return mine;
}

/**
 * Datagrams the kernel dropped on this process's UDP sockets of port `port`, by local address (the
 * address each socket is bound to: a local address or a group). Sockets are told apart from other
 * processes' by their inode among this process's descriptors. Empty where /proc cannot be read.
 */
export function udpDrops(port: number): Map<string, number> {
  const out = new Map<string, number>();
  const mine = ownSocketInodes();
  if (mine === null) return out;
  const little = endianness() === 'LE';
  for (const [file, family] of [['/proc/net/udp', 4], ['/proc/net/udp6', 6]] as const) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      const local = f[1];
      const inode = f[9];
      const drops = Number(f[12]);
      if (!local || !inode || !mine.has(inode) || !Number.isFinite(drops)) continue;
      const [hex, portHex] = local.split(':');
      if (!hex || parseInt(portHex ?? '', 16) !== port) continue;
      // The address is printed as 32-bit words in the host's byte order.
      const b = Buffer.alloc(16);
      for (let w = 0; w < hex.length / 8; w++) {
        for (let k = 0; k < 4; k++) b[w * 4 + k] = parseInt(hex.slice(w * 8 + (little ? 6 - 2 * k : 2 * k), w * 8 + (little ? 8 - 2 * k : 2 * k + 2)), 16);
      }
      const key = ipSlotText(b, 0, family);
      out.set(key, (out.get(key) ?? 0) + drops);
    }
  }
  return out;
}
