/**
 * The UDP sockets of a RoCE port in this process: one per local address of its devices, bound
 * with SO_REUSEADDR beside the other processes of the host, and one per multicast group it
 * receives.
 *
 * - **Unicast.** Linux hands each unicast datagram to one of the sockets bound to its address and
 *   port (the most recently bound one that is still open); whichever process gets it routes it
 *   by destination QPN (udp.ts). One socket per address tells the destination address of each.
 * - **Multicast.** A process with a QP attached to a group binds a socket to the group address
 *   and joins the group on the interface: the kernel gives every such socket its own copy, so
 *   multicast needs no forwarding and goes to the device straight away. A group datagram leaves
 *   by the local address's socket, which loops it back to this host's receivers (IP_MULTICAST_LOOP);
 *   one of a QP created with `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB` leaves by a second socket on the
 *   same address and port with the loopback off, so that no process of this host receives it.
 *   That socket receives unicast as the first does (being the newest on the port, the kernel
 *   gives it the unicast datagrams of the address).
 */
import dgram from 'node:dgram';
import { trace, tracing } from '../../trace.js';
import { allowZeroChecksum6, setPmtuProbe } from './sockopt.js';
import { impairedSend, impairing } from './impair.js';
import { ipKey } from './ip-addr.js';
import type { RxMeta, RxSink } from './datagram.js';

/**
 * SO_RCVBUF and SO_SNDBUF asked for every RoCE socket: `RDMACM_ROCE_SOCKBUF` bytes, else 4 MiB.
 * Linux's default (about 208 KiB) holds only some 25 datagrams of 4 KiB: a burst of UD sends
 * overflows it and the kernel drops the rest. The kernel caps the request at
 * `net.core.rmem_max` / `wmem_max` (setsockopt SO_RCVBUF / SO_SNDBUF, no error).
 */
export function roceSockBufSize(): number {
  const v = Number(process.env['RDMACM_ROCE_SOCKBUF'] ?? '');
  return Number.isInteger(v) && v > 0 ? v : 4 << 20;
}

/** Takes a unicast datagram the kernel handed to this process, for the device of its address. */
export type UnicastHandler = (sink: RxSink, msg: Buffer, meta: RxMeta) => void;

/** A socket bound to a local address and the port, and what was set on it. */
interface BoundSock {
  sock: dgram.Socket;
  /** The multicast interface (and loopback) is set: group sends may go. */
  mcastIf: boolean;
  ttl: number;
  mcastTtl: number;
}

interface LocalSock {
  /** The socket that receives, and sends all but the group sends kept from this host. */
  main: BoundSock;
  family: 4 | 6;
  ip: string;
  /** `ip` with the IPv6 zone the bind names. */
  bindIp: string;
  zone: string;
  sinks: Set<RxSink>;
  /** The socket for group sends without multicast loopback, opened at the first such send. */
  noLoop: BoundSock | null;
}

interface GroupSock {
  sock: dgram.Socket;
  refs: number;
  sink: RxSink;
}

/** Datagrams a socket holds that the kernel has not taken yet (a closed socket: none). */
function sendQueued(s: dgram.Socket): boolean {
  try {
    return s.getSendQueueCount() > 0;
  } catch {
    return false;
  }
}

/** The sockets of one RoCE UDP port in this process. */
export class UdpSockets {
  /** Whether the sockets send IPv4 datagrams with IP ID 0 (see sockopt.ts). */
  ipIdZero = false;
  private readonly locals = new Map<string, LocalSock>();
  private readonly groups = new Map<string, GroupSock>();
  private readonly sinksByIp = new Map<string, RxSink>();
  /** Live QPs of this process: while there are some, the sockets keep the process alive. */
  private liveQps = 0;

  /**
   * @param port the UDP port bound and sent to
   * @param onUnicast takes every unicast datagram that arrives
   */
  constructor(
    readonly port: number,
    private readonly onUnicast: UnicastHandler,
  ) {}

  /** The device that receives on local address `key` ({@link ipKey}), if any. */
  sinkOf(key: string): RxSink | undefined {
    return this.sinksByIp.get(key);
  }

  /** Multicast groups this process receives. */
  get groupCount(): number {
    return this.groups.size;
  }

  /** The addresses `sink` receives on: its local addresses and its groups. */
  addressesOf(sink: RxSink): string[] {
    const out: string[] = [];
    for (const ls of this.locals.values()) if (ls.sinks.has(sink)) out.push(ls.ip);
    for (const [key, g] of this.groups) if (g.sink === sink) out.push(key);
    return out;
  }

  /**
   * A QP was created (`+1`) or destroyed (`-1`). While QPs exist the UDP sockets hold the event
   * loop open, as a connection does for iWARP; without any the process may end.
   */
  holdQp(delta: 1 | -1): void {
    const before = this.liveQps;
    this.liveQps = Math.max(0, before + delta);
    if ((before === 0) === (this.liveQps === 0)) return;
    for (const ls of this.locals.values()) {
      this.applyRef(ls.main.sock);
      if (ls.noLoop) this.applyRef(ls.noLoop.sock);
    }
    for (const g of this.groups.values()) this.applyRef(g.sock);
  }

  private applyRef(s: dgram.Socket): void {
    try {
      if (this.liveQps > 0) s.ref();
      else s.unref();
    } catch {
      // closed socket
    }
  }

  /**
   * A UDP socket sharing the port (SO_REUSEADDR). Addresses here are always IP literals, so the
   * socket's lookup answers at once: Node's default (`dns.lookup`) answers an IP literal on the
   * next tick, which would make every bind and every send wait for it — a process posting a send
   * and exiting at once would lose the datagram. With it, `bind` completes and `send` reaches the
   * kernel (libuv sends at once when nothing is queued) before `ibv_post_send` returns.
   */
  private socket(family: 4 | 6): dgram.Socket {
    const lookup = (address: string, _opts: unknown, cb: (e: Error | null, address: string, family: number) => void): void => cb(null, address, family);
    const size = roceSockBufSize();
    return dgram.createSocket({
      type: family === 4 ? 'udp4' : 'udp6',
      reuseAddr: true,
      ipv6Only: family === 6,
      lookup: lookup as never,
      recvBufferSize: size,
      sendBufferSize: size,
    });
  }

  /**
   * Receive datagrams for `sink` on local address `ip` (binds the port on it unless this process
   * already has). The bind completes before this returns (see {@link socket}); a failure is traced,
   * not thrown (the address may have gone away).
   */
  bindLocal(sink: RxSink, ip: string, family: 4 | 6, zone: string): void {
    const key = ipKey(ip);
    this.sinksByIp.set(key, sink);
    let ls = this.locals.get(key);
    if (ls) {
      ls.sinks.add(sink);
      return;
    }
    const bindIp = family === 6 && zone !== '' ? `${key}%${zone}` : key;
    ls = { main: this.openLocal(key, bindIp, family, zone, true), family, ip: key, bindIp, zone, sinks: new Set([sink]), noLoop: null };
    this.locals.set(key, ls);
  }

  /**
   * A socket on local address `key` and the port, its datagrams given to the device of the
   * address; group sends leave by the address's interface and loop back to this host or not.
   */
  private openLocal(key: string, bindIp: string, family: 4 | 6, zone: string, loop: boolean): BoundSock {
    const sock = this.socket(family);
    const b: BoundSock = { sock, mcastIf: false, ttl: 64, mcastTtl: 1 };
    sock.on('message', (msg, rinfo) => {
      const to = this.sinksByIp.get(key);
      if (to) this.onUnicast(to, msg, { family, src: ipKey(rinfo.address), dst: key, srcPort: rinfo.port, forwarded: false });
    });
    sock.on('error', (e) => {
      if (tracing('roce')) trace('roce', `roce:${this.port}`, `socket ${bindIp}: ${e.message}`);
    });
    sock.bind({ port: this.port, address: bindIp, exclusive: false }, () => {
      if (family === 4 && setPmtuProbe(sock)) this.ipIdZero = true;
      if (family === 6) allowZeroChecksum6(sock);
      // Multicast leaves by this address's interface, looped back to this host's other
      // receivers or not; set before any send queued during the bind goes out.
      try {
        sock.setMulticastInterface(family === 4 ? key : `::%${zone || 'lo'}`);
        sock.setMulticastLoopback(loop);
        b.mcastIf = true;
      } catch {
        // an interface without multicast: group sends fail, unicast is unaffected
      }
    });
    this.applyRef(sock);
    return b;
  }

  /** Stop receiving for `sink` (sockets no other device uses are closed). */
  unbindSink(sink: RxSink): void {
    for (const [key, ls] of this.locals) {
      ls.sinks.delete(sink);
      if (ls.sinks.size === 0) {
        this.locals.delete(key);
        ls.main.sock.close();
        ls.noLoop?.sock.close();
      }
    }
    for (const [k, s] of this.sinksByIp) if (s === sink) this.sinksByIp.delete(k);
  }

  /**
   * Send one datagram from local address `src` to `dst` (port {@link port}). `ttl` is the IP TTL
   * / hop limit; for a multicast destination the multicast TTL, on the interface of `src`, and
   * `loop` false keeps it from this host's receivers (no IP_MULTICAST_LOOP).
   * @returns false when `src` is not a bound local address of this process.
   */
  send(buf: Buffer, len: number, src: string, dst: string, ttl: number, multicast: boolean, loop = true): boolean {
    const ls = this.locals.get(ipKey(src));
    if (!ls) return false;
    let b = ls.main;
    if (multicast) {
      if (!loop) b = ls.noLoop ??= this.openLocal(ls.ip, ls.bindIp, ls.family, ls.zone, false);
      if (!b.mcastIf && b.sock.listenerCount('listening') === 0) return false;
      if (b.mcastTtl !== ttl) {
        try {
          b.sock.setMulticastTTL(ttl);
          b.mcastTtl = ttl;
        } catch {
          // before bind: keep the default
        }
      }
    } else if (b.ttl !== ttl) {
      try {
        b.sock.setTTL(ttl);
        b.ttl = ttl;
      } catch {
        // before bind: keep the default
      }
    }
    const sock = b.sock;
    if (impairing()) impairedSend(buf, () => sock.send(buf, 0, len, this.port, dst));
    else sock.send(buf, 0, len, this.port, dst);
    return true;
  }

  /** Whether local address `src` has its socket in this process. */
  bound(src: string): boolean {
    return this.locals.has(ipKey(src));
  }

  /**
   * Receive the multicast group `group` (dotted quad or IPv6 text) for `sink`, joined on the
   * interface of local address `ifaceIp`. Reference counted with {@link leaveGroup}.
   *
   * The group's socket is opened, bound and joined before this returns: its lookup answers at
   * once (see {@link socket}), so Node runs the bind — where libuv creates the socket — and the
   * `listening` callback within `bind()`, and reports a failure there as an `error` event.
   * @throws Error (Node's, with the errno name in `code`: EMFILE, ENFILE, ENOMEM, ENOBUFS,
   *   EADDRNOTAVAIL, …) when the socket cannot be opened, bound or joined to the group; the socket
   *   is closed and nothing of the group is kept.
   */
  joinGroup(sink: RxSink, group: string, family: 4 | 6, ifaceIp: string): void {
    const key = ipKey(group);
    const g = this.groups.get(key);
    if (g) {
      g.refs++;
      return;
    }
    const sock = this.socket(family);
    let failure: Error | null = null;
    let joined = false;
    const onBindError = (e: Error): void => {
      failure ??= e;
    };
    sock.on('error', onBindError);
    try {
      sock.bind({ port: this.port, address: key, exclusive: false }, () => {
        if (family === 6) allowZeroChecksum6(sock);
        try {
          sock.addMembership(key, family === 4 ? ifaceIp : undefined);
          joined = true;
        } catch (e) {
          failure ??= e as Error;
        }
      });
    } catch (e) {
      // Node throws (rather than emits) for some failures of the socket's options at bind.
      failure ??= e as Error;
    }
    sock.off('error', onBindError);
    if (!joined) {
      try {
        sock.close();
      } catch {
        // never bound: nothing to close
      }
      const e = failure ?? Object.assign(new Error(`join ${key}: the bind did not complete`), { code: 'EIO' });
      if (tracing('roce')) trace('roce', `roce:${this.port}`, `join ${key}: ${e.message}`);
      throw e;
    }
    this.groups.set(key, { sock, refs: 1, sink });
    sock.on('message', (msg, rinfo) => {
      sink.rxDatagram(msg, { family, src: rinfo.address, dst: key, srcPort: rinfo.port, forwarded: false });
    });
    sock.on('error', (e) => {
      if (tracing('roce')) trace('roce', `roce:${this.port}`, `group ${key}: ${e.message}`);
    });
    this.applyRef(sock);
  }

  /** Drop one reference to group `group`; the last one leaves it (closing its socket). */
  leaveGroup(group: string): void {
    const key = ipKey(group);
    const g = this.groups.get(key);
    if (!g) return;
    if (--g.refs > 0) return;
    this.groups.delete(key);
    try {
      g.sock.close();
    } catch {
      // closed already
    }
  }

  /** Whether some datagram is still queued in a socket (the kernel has not taken it yet). */
  unsent(): boolean {
    for (const ls of this.locals.values()) if (sendQueued(ls.main.sock) || (ls.noLoop && sendQueued(ls.noLoop.sock))) return true;
    for (const g of this.groups.values()) if (sendQueued(g.sock)) return true;
    return false;
  }

  /** Close every socket. */
  close(): void {
    for (const ls of this.locals.values()) {
      ls.main.sock.close();
      ls.noLoop?.sock.close();
    }
    for (const g of this.groups.values()) g.sock.close();
    this.locals.clear();
    this.groups.clear();
    this.sinksByIp.clear();
  }
}
