/**
 * One UDP socket of a RoCE port, bound to an address and the port beside the other processes of
 * the host (SO_REUSEADDR), behind one interface with two implementations:
 *
 * - **mmsg** (udp-mmsg.ts): the socket of the package's netopt addon, which receives with
 *   `recvmmsg` and sends with `sendmmsg`, many datagrams per system call and one call into
 *   JavaScript per batch. Where the addon is built (Linux with a C compiler and Node's headers).
 * - **dgram** (this file): Node's `dgram` socket, one system call and one callback per datagram.
 *   Everywhere.
 *
 * `RDMACM_ROCE_IO=dgram|mmsg` chooses one; by default mmsg where the addon has it. Both bind with
 * the same options (reuse, IPv6 only, SO_RCVBUF/SO_SNDBUF) and so share a port with each other.
 * docs/design/roce-io.md describes the batched path.
 */
import dgram from 'node:dgram';
import { netopt } from '../../util/netopt.js';
import { allowZeroChecksum6, setPmtuProbe } from './sockopt.js';
import { MmsgEndpoint, mmsgAvailable } from './udp-mmsg.js';

/** A datagram arrived: its UDP payload, the source address as the socket reports it, and the source port. */
export type OnDatagram = (msg: Buffer, src: string, srcPort: number) => void;

/** What opening an endpoint needs. */
export interface EndpointOptions {
  family: 4 | 6;
  /** The address bound (an IPv6 one may carry its `%zone`). */
  bindIp: string;
  port: number;
  /** SO_RCVBUF and SO_SNDBUF asked for. */
  bufSize: number;
  onDatagram: OnDatagram;
  /** An error of the socket after it was opened (traced by the caller). */
  onError: (e: Error) => void;
}

/** One bound UDP socket of a RoCE port. */
export interface UdpEndpoint {
  /** Which implementation (see the module comment). */
  readonly kind: RoceIoKind;
  /** The bind completed: options may be set and datagrams sent. */
  readonly bound: boolean;
  /** Send `buf[0, len)` to `dst` (an IP literal), port `port`; it leaves by the end of the current task. */
  send(buf: Buffer, len: number, dst: string, port: number): void;
  /** IP TTL / hop limit of unicast; false when the socket refused it. */
  setTtl(ttl: number): boolean;
  /** TTL / hop limit of multicast; false when the socket refused it. */
  setMulticastTtl(ttl: number): boolean;
  /**
   * Group sends leave by the interface of local address `ip` (IPv4) or interface `zone`
   * (IPv6, `lo` when empty), looped back to this host's receivers or not.
   * @throws Error when the interface has no multicast.
   */
  setMulticast(ip: string, zone: string, loop: boolean): void;
  /**
   * Join group `group` on the interface of `ifaceIp` (IPv4; IPv6: the kernel's choice).
   * @throws Error (with the errno name in `code`) when the kernel refuses.
   */
  addMembership(group: string, ifaceIp: string | undefined): void;
  /** IPv4: IP_PMTUDISC_PROBE (identification 0, see sockopt.ts); whether it worked. */
  pmtuProbe(): boolean;
  /** IPv6: accept UDP checksum 0 (see sockopt.ts); whether it worked. */
  zeroChecksum6(): boolean;
  /** Hold the event loop open (true) or not. */
  ref(on: boolean): void;
  /** Whether datagrams sent are still waiting for the kernel to take them. */
  unsent(): boolean;
  /** Close: datagrams the kernel can take now go, the socket is closed. */
  close(): void;
}

/** The two UDP I/O paths of the soft RoCE device: `mmsg`, the netopt addon's batched sockets, or `dgram`, Node's. */
export type RoceIoKind = 'dgram' | 'mmsg';

/**
 * The UDP I/O path of this process's soft RoCE devices: `RDMACM_ROCE_IO` when set to `dgram`, or
 * to `mmsg` where the addon has it; otherwise mmsg where the addon has it, else dgram.
 */
export function roceIoKind(): RoceIoKind {
  const want = process.env['RDMACM_ROCE_IO'];
  if (want === 'dgram') return 'dgram';
  return mmsgAvailable() ? 'mmsg' : 'dgram';
}

/**
 * Open and bind an endpoint of the chosen kind. A bind that fails leaves an endpoint that is
 * not {@link UdpEndpoint.bound} (the failure went to `onError`); `throwOnBindError` throws it
 * instead (Node's Error, errno name in `code`), the socket closed.
 */
export function openEndpoint(o: EndpointOptions, throwOnBindError = false): UdpEndpoint {
  if (roceIoKind() === 'mmsg') return MmsgEndpoint.open(o, throwOnBindError);
  return DgramEndpoint.open(o, throwOnBindError);
}

/** Datagrams a socket holds that the kernel has not taken yet (a closed socket: none). */
function sendQueued(s: dgram.Socket): boolean {
  try {
    return s.getSendQueueCount() > 0;
  } catch {
    return false;
  }
}

/** {@link UdpEndpoint} over Node's `dgram`. */
export class DgramEndpoint implements UdpEndpoint {
  readonly kind = 'dgram';
  bound = false;

  private constructor(
    readonly sock: dgram.Socket,
    private readonly family: 4 | 6,
  ) {}

  /**
   * Addresses here are always IP literals, so the socket's lookup answers at once: Node's
   * default (`dns.lookup`) answers an IP literal on the next tick, which would make every bind
   * and every send wait for it — a process posting a send and exiting at once would lose the
   * datagram. With it, `bind` completes (libuv creates the socket and `listening` runs within
   * `bind()`) and `send` reaches the kernel (libuv sends at once when nothing is queued) before
   * `ibv_post_send` returns.
   */
  static open(o: EndpointOptions, throwOnBindError: boolean): DgramEndpoint {
    const lookup = (address: string, _opts: unknown, cb: (e: Error | null, address: string, family: number) => void): void => cb(null, address, o.family);
    const sock = dgram.createSocket({
      type: o.family === 4 ? 'udp4' : 'udp6',
      reuseAddr: true,
      ipv6Only: o.family === 6,
      lookup: lookup as never,
      recvBufferSize: o.bufSize,
      sendBufferSize: o.bufSize,
    });
    const ep = new DgramEndpoint(sock, o.family);
    let failure: Error | null = null;
    const onBindError = (e: Error): void => {
      failure ??= e;
    };
    sock.on('error', throwOnBindError ? onBindError : o.onError);
    try {
      sock.bind({ port: o.port, address: o.bindIp, exclusive: false }, () => {
        ep.bound = true;
      });
    } catch (e) {
      // Node throws (rather than emits) for some failures of the socket's options at bind.
      failure ??= e as Error;
      if (!throwOnBindError) o.onError(e as Error);
    }
    if (throwOnBindError) {
      sock.off('error', onBindError);
      if (!ep.bound) {
        try {
          sock.close();
        } catch {
          // never bound: nothing to close
        }
        throw failure ?? Object.assign(new Error(`bind ${o.bindIp}: the bind did not complete`), { code: 'EIO' });
      }
      sock.on('error', o.onError);
    }
    sock.on('message', (msg, rinfo) => o.onDatagram(msg, rinfo.address, rinfo.port));
    return ep;
  }

  send(buf: Buffer, len: number, dst: string, port: number): void {
    this.sock.send(buf, 0, len, port, dst);
  }

  setTtl(ttl: number): boolean {
    try {
      this.sock.setTTL(ttl);
      return true;
    } catch {
      return false; // before bind: keep the default
    }
  }

  setMulticastTtl(ttl: number): boolean {
    try {
      this.sock.setMulticastTTL(ttl);
      return true;
    } catch {
      return false;
    }
  }

  setMulticast(ip: string, zone: string, loop: boolean): void {
    this.sock.setMulticastInterface(this.family === 4 ? ip : `::%${zone || 'lo'}`);
    this.sock.setMulticastLoopback(loop);
  }

  addMembership(group: string, ifaceIp: string | undefined): void {
    this.sock.addMembership(group, ifaceIp);
  }

  pmtuProbe(): boolean {
    return setPmtuProbe(this.sock);
  }

  zeroChecksum6(): boolean {
    return allowZeroChecksum6(this.sock);
  }

  ref(on: boolean): void {
    try {
      if (on) this.sock.ref();
      else this.sock.unref();
    } catch {
      // closed socket
    }
  }

  unsent(): boolean {
    return sendQueued(this.sock);
  }

  close(): void {
    try {
      this.sock.close();
    } catch {
      // closed already
    }
  }
}

/** Whether the netopt addon offers the batched sockets (for the documentation of a device's state). */
export function mmsgBuilt(): boolean {
  return typeof netopt()?.udpOpen === 'function';
}
