/**
 * The UDP socket of a datagram rsocket (rsocket.c's `rs->udp_sock`): its address is the
 * rsocket's address, the UDP service receives on it, and datagrams go out on it until a peer's QP
 * is known. Here a Node `dgram` socket, with the calls made promise-shaped and their failures
 * {@link RdmaError}s named after the rsocket call; plus ds_get_src_addr's route probe.
 */
import { createSocket, type Socket } from 'node:dgram';
import type { SockAddr } from '../../cm/index.js';
import { RdmaError } from '../../errors.js';
import { isErrnoCode, type ErrnoCode } from '../../errno.js';
import { rsErr } from '../errors.js';

/** The errno name of a Node socket error (EINVAL when it has none this package knows). */
export function errnoCodeOf(e: NodeJS.ErrnoException): ErrnoCode {
  const c = e.code;
  return typeof c === 'string' && isErrnoCode(c) ? c : 'EINVAL';
}

const wrap = (e: Error, op: string): RdmaError => new RdmaError(errnoCodeOf(e as NodeJS.ErrnoException), { op, detail: e.message, cause: e });
const sockAddr = (a: { address: string; port: number; family: string }): SockAddr => ({ address: a.address, port: a.port, family: a.family === 'IPv6' ? 'IPv6' : 'IPv4' });

export class DsUdpSocket {
  private readonly sock: Socket;
  private bound: Promise<void> | null = null;
  /** The key of the address the socket is connected to (rconnect), or null. */
  private peer: string | null = null;

  /** `socket(domain, SOCK_DGRAM, 0)`; `onMessage` gets every datagram (the UDP service). */
  constructor(family: 4 | 6, onMessage: (data: Buffer, from: SockAddr) => void) {
    this.sock = createSocket({ type: family === 6 ? 'udp6' : 'udp4' });
    this.sock.on('message', (msg, rinfo) => onMessage(msg, sockAddr(rinfo)));
    // ICMP errors on a connected socket: the service's recvfrom takes and ignores them in rsocket.c.
    this.sock.on('error', () => {});
  }

  /** Whether the socket holds the event loop (`dgram.Socket.ref()` / `unref()`). */
  holdLoop(on: boolean): void {
    if (on) this.sock.ref();
    else this.sock.unref();
  }

  /** getsockname(), null before the socket has an address. */
  get address(): SockAddr | null {
    try {
      return sockAddr(this.sock.address());
    } catch {
      return null;
    }
  }

  /** bind() to `addr`, or (null) to the wildcard and a free port unless bound already. */
  bind(addr: SockAddr | null, op: string): Promise<void> {
    if (this.bound) return addr ? Promise.reject(rsErr('EINVAL', op, 'already bound')) : this.bound;
    const p = new Promise<void>((resolve, reject) => {
      const onErr = (e: Error): void => {
        this.sock.off('listening', onOk);
        reject(wrap(e, op));
      };
      const onOk = (): void => {
        this.sock.off('error', onErr);
        resolve();
      };
      this.sock.once('error', onErr);
      this.sock.once('listening', onOk);
      try {
        this.sock.bind(addr ? { port: addr.port, address: addr.address, exclusive: true } : { port: 0, exclusive: true });
      } catch (e) {
        this.sock.off('error', onErr);
        this.sock.off('listening', onOk);
        reject(wrap(e as Error, op));
      }
    });
    this.bound = p;
    p.catch(() => {
      if (this.bound === p) this.bound = null;
    });
    return p;
  }

  /** connect(): from now on the socket exchanges datagrams with `addr` (key `key`) only. */
  async connect(addr: SockAddr, key: string, op: string): Promise<void> {
    if (this.peer) this.sock.disconnect();
    this.peer = null;
    await new Promise<void>((resolve, reject) => {
      this.sock.connect(addr.port, addr.address, (e?: Error) => (e ? reject(wrap(e, op)) : resolve()));
    });
    this.peer = key;
  }

  /** sendmsg() of `parts` to `addr` (key `key`); a connected socket sends to its peer only. */
  send(parts: Uint8Array[], addr: SockAddr, key: string, op: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = (e: Error | null): void => (e ? reject(wrap(e, op)) : resolve());
      if (this.peer === null) this.sock.send(parts, addr.port, addr.address, done);
      else if (this.peer === key) this.sock.send(parts, done);
      else reject(rsErr('EISCONN', op, 'the UDP socket is connected to another address'));
    });
  }

  close(): void {
    try {
      this.sock.close();
    } catch {
      /* never bound */
    }
  }
}

/**
 * ds_get_src_addr's probe: the local address the kernel's routing picks for `dst` (a UDP socket
 * connected to it, then getsockname).
 */
export async function routeSourceFor(dst: SockAddr): Promise<string> {
  const probe = createSocket({ type: dst.address.includes(':') ? 'udp6' : 'udp4' });
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.connect(dst.port, dst.address, () => resolve());
    });
    return probe.address().address;
  } finally {
    probe.close();
  }
}
