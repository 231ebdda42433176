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
 *
 * Each socket is a {@link UdpEndpoint} (udp-endpoint.ts): the netopt addon's batched one
 * (recvmmsg/sendmmsg) where it is built, else Node's dgram; `RDMACM_ROCE_IO` chooses.
 */
import { trace, tracing } from '../../trace.js';
import { impairedSend, impairing } from './impair.js';
import type { RoceCounters } from './counters.js';
import { openEndpoint, type UdpEndpoint } from './udp-endpoint.js';
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
  sock: UdpEndpoint;
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
  sock: UdpEndpoint;
  refs: number;
  sink: RxSink;
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

  private applyRef(s: UdpEndpoint): void {
    s.ref(this.liveQps > 0);
  }

  /**
   * Receive datagrams for `sink` on local address `ip` (binds the port on it unless this process
   * already has). The bind completes before this returns (udp-endpoint.ts); a failure is traced,
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
    const sock = openEndpoint({
      family,
      bindIp,
      port: this.port,
      bufSize: roceSockBufSize(),
      onDatagram: (msg, src, srcPort) => {
        const to = this.sinksByIp.get(key);
        if (to) this.onUnicast(to, msg, { family, src: ipKey(src), dst: key, srcPort, forwarded: false, icrcOffload: false, train: 0 });
      },
      onError: (e) => {
        if (tracing('roce')) trace('roce', `roce:${this.port}`, `socket ${bindIp}: ${e.message}`);
      },
    });
    const b: BoundSock = { sock, mcastIf: false, ttl: 64, mcastTtl: 1 };
    if (sock.bound) {
      if (family === 4 && sock.pmtuProbe()) this.ipIdZero = true;
      if (family === 6) sock.zeroChecksum6();
      // Multicast leaves by this address's interface, looped back to this host's other
      // receivers or not; set before any group send goes out.
      try {
        sock.setMulticast(key, zone, loop);
        b.mcastIf = true;
      } catch {
        // an interface without multicast: group sends fail, unicast is unaffected
      }
    }
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
   * `loop` false keeps it from this host's receivers (no IP_MULTICAST_LOOP). `ctr`: the sending
   * device's counters, where fault injection counts what it did (impair.ts).
   * @returns false when `src` is not a bound local address of this process.
   */
  send(buf: Buffer, len: number, src: string, dst: string, ttl: number, multicast: boolean, loop = true, ctr?: RoceCounters): boolean {
    const ls = this.locals.get(ipKey(src));
    if (!ls) return false;
    let b = ls.main;
    if (multicast) {
      if (!loop) b = ls.noLoop ??= this.openLocal(ls.ip, ls.bindIp, ls.family, ls.zone, false);
      if (!b.mcastIf) return false;
      // Unset before the bind: the default stays.
      if (b.mcastTtl !== ttl && b.sock.setMulticastTtl(ttl)) b.mcastTtl = ttl;
    } else if (b.ttl !== ttl && b.sock.setTtl(ttl)) b.ttl = ttl;
    const sock = b.sock;
    if (impairing()) impairedSend(buf.subarray(0, len), (b) => (b ? sock.send(b, b.length, dst, this.port) : sock.send(buf, len, dst, this.port)), ctr);
    else sock.send(buf, len, dst, this.port);
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
   * The group's socket is opened, bound and joined before this returns (udp-endpoint.ts).
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
    let sink0: RxSink | null = null;
    // Opened, bound and joined before this returns; a failure closes the socket and throws.
    const sock = openEndpoint(
      {
        family,
        bindIp: key,
        port: this.port,
        bufSize: roceSockBufSize(),
        onDatagram: (msg, src, srcPort) => sink0?.rxDatagram(msg, { family, src, dst: key, srcPort, forwarded: false, icrcOffload: false, train: 0 }),
        onError: (e) => {
          if (tracing('roce')) trace('roce', `roce:${this.port}`, `group ${key}: ${e.message}`);
        },
      },
      true,
    );
    try {
      if (family === 6) sock.zeroChecksum6();
      sock.addMembership(key, family === 4 ? ifaceIp : undefined);
    } catch (e) {
      sock.close();
      if (tracing('roce')) trace('roce', `roce:${this.port}`, `join ${key}: ${(e as Error).message}`);
      throw e;
    }
    sink0 = sink;
    this.groups.set(key, { sock, refs: 1, sink });
    this.applyRef(sock);
  }

  /** Drop one reference to group `group`; the last one leaves it (closing its socket). */
  leaveGroup(group: string): void {
    const key = ipKey(group);
    const g = this.groups.get(key);
    if (!g) return;
    if (--g.refs > 0) return;
    this.groups.delete(key);
    g.sock.close();
  }

  /** Whether some datagram is still queued in a socket (the kernel has not taken it yet). */
  unsent(): boolean {
    for (const ls of this.locals.values()) if (ls.main.sock.unsent() || ls.noLoop?.sock.unsent()) return true;
    for (const g of this.groups.values()) if (g.sock.unsent()) return true;
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
