/**
 * The batched {@link UdpEndpoint}: a UDP socket of the netopt addon (native/src/udpio.c) that
 * receives with `recvmmsg` and sends with `sendmmsg` on Node's own event loop.
 *
 * - **Receive.** Whenever the socket is readable the addon drains it in rounds of up to
 *   `udpConst.BATCH` datagrams, read straight into one receive area this module gives it
 *   ({@link area}: a slot of `udpConst.SLOT` bytes per datagram), and calls {@link onBatch} once
 *   per round with that area; offsets, lengths and source addresses are in the shared
 *   {@link meta} array. Nothing is copied or allocated per round. Each datagram is handed on as
 *   a view of the area that is valid until the call returns, as a read of a forwarding
 *   connection is (fwd-rx.ts): the receive path keeps nothing of a data packet, and a MAD
 *   (QPN 1), which the connection manager may keep, is copied here first. An addon without
 *   `SLOT` copies each round into a new buffer of its own instead.
 * - **Send.** {@link MmsgEndpoint.send} queues the datagram in the addon (a pointer into `buf`,
 *   which this endpoint keeps alive) and the queue goes out in one `sendmmsg` once the current
 *   task is done (a microtask), so a burst — an RC requester's window, a UD post list — leaves in
 *   one call. A full batch goes at once; the process's `exit` flushes what is queued, so a
 *   process that posts a send and exits at once loses nothing, as with dgram. A short sendmmsg
 *   resumes at the first datagram not sent; on EAGAIN the addon copies the rest and sends it when
 *   the socket is writable.
 */
import { constants as osConstants } from 'node:os';
import { trace, tracing } from '../../trace.js';
import { formatIpv4 } from '../../util/ip.js';
import { GSI_QPN, bthQpn } from '../../wire/roce/bth.js';
import { netopt, type Netopt, type UdpHandle } from '../../util/netopt.js';
import { formatIpv6 } from './gid.js';
import { releasePacket } from './packet-buffer.js';
import { allowZeroChecksum6Fd as zeroChecksum6Fd, setPmtuProbeFd as pmtuProbeFd } from './sockopt.js';
import type { EndpointOptions, UdpEndpoint } from './udp-endpoint.js';

type Addon = Required<Netopt>;

let addon: Addon | null | undefined;
/** Per datagram of a round: offset, length, source port, IPv6 scope, 16 source address bytes. */
let meta = new Int32Array(0);
let metaBytes = new Uint8Array(0);
let batch = 0;
let words = 8;
/** The receive area the addon reads datagrams into, or null when it copies each round into a new buffer. */
let area: Buffer | null = null;
/** Bytes of a BTH up to the end of its destination QPN. */
const BTH_QPN_END = 8;

/** The addon with its batched sockets set up, or null. */
function load(): Addon | null {
  if (addon !== undefined) return addon;
  addon = null;
  const m = netopt();
  if (typeof m?.udpOpen !== 'function' || typeof m.udpSetup !== 'function' || m.udpConst === undefined) return null;
  const c = m.udpConst;
  batch = c['BATCH'] ?? 0;
  words = c['META_WORDS'] ?? 8;
  meta = new Int32Array(batch * words);
  metaBytes = new Uint8Array(meta.buffer);
  const slot = c['SLOT'] ?? 0;
  // Untouched pages of the area cost nothing: a page is backed once a datagram reaches it.
  area = batch > 0 && slot > 0 ? Buffer.allocUnsafeSlow(batch * slot) : null;
  if (batch <= 0 || m.udpSetup(meta, area ?? undefined) !== batch) return null;
  addon = m as Addon;
  return addon;
}

/** Whether the addon offers batched sockets here. */
export function mmsgAvailable(): boolean {
  return load() !== null;
}

/** A constant of the addon (a socket option's level or name). */
function k(name: string): number {
  const v = addon?.udpConst[name];
  if (v === undefined) throw new Error(`netopt: no constant ${name}`);
  return v;
}

/** Node's shape of a failed system call: `code` the errno name, `errno` negative, `syscall`. */
function sysError(syscall: string, rc: number, what: string): Error {
  const name = Object.entries(osConstants.errno).find(([, v]) => v === -rc)?.[0] ?? 'EIO';
  return Object.assign(new Error(`${syscall} ${name} ${what}`), { code: name, errno: rc, syscall });
}

// -- sending: one flush per task ------------------------------------------------------------------

const dirty: MmsgEndpoint[] = [];
let flushScheduled = false;
let exitHooked = false;

function flushAll(): void {
  flushScheduled = false;
  for (let i = 0; i < dirty.length; i++) dirty[i]?.flush();
  dirty.length = 0;
}

// -- receiving: source address text ---------------------------------------------------------------

/** IPv4 source text by address value, so a busy peer's is made once. */
const v4Text = new Map<number, string>();
const ADDR_CACHE_MAX = 1024;
let lastV6Key = '';
let lastV6Text = '';
const ifNames = new Map<number, string>();

function v4Source(at: number): string {
  const v = ((metaBytes[at]! << 24) | (metaBytes[at + 1]! << 16) | (metaBytes[at + 2]! << 8) | metaBytes[at + 3]!) >>> 0;
  let s = v4Text.get(v);
  if (s === undefined) {
    s = formatIpv4(v);
    if (v4Text.size >= ADDR_CACHE_MAX) v4Text.clear();
    v4Text.set(v, s);
  }
  return s;
}

/** IPv6 source text as Node reports it: link-local with `%interface` when the scope is known. */
function v6Source(at: number, scope: number): string {
  const w = at >> 2;
  const key = `${meta[w]},${meta[w + 1]},${meta[w + 2]},${meta[w + 3]},${scope}`;
  if (key === lastV6Key) return lastV6Text;
  let s = formatIpv6(metaBytes.slice(at, at + 16));
  if (scope > 0 && metaBytes[at] === 0xfe && (metaBytes[at + 1]! & 0xc0) === 0x80) {
    let name = ifNames.get(scope);
    if (name === undefined) {
      const n = addon?.udpIfName(scope);
      name = typeof n === 'string' ? n : String(scope);
      ifNames.set(scope, name);
    }
    s += `%${name}`;
  }
  lastV6Key = key;
  lastV6Text = s;
  return s;
}

/** {@link UdpEndpoint} over the addon's batched socket. */
export class MmsgEndpoint implements UdpEndpoint {
  readonly kind = 'mmsg';
  /** The buffers of the datagrams queued in the addon since the last flush. */
  private held: Buffer[] = [];
  /** Destination sockaddrs, by port and then address text (a device sends to few ports). */
  private readonly to = new Map<number, Map<string, Buffer>>();
  private cached = 0;
  private queued = false;

  private constructor(
    private h: UdpHandle | null,
    private readonly o: EndpointOptions,
  ) {}

  get bound(): boolean {
    return this.h !== null;
  }

  /** The addon's handle (tests: its counters and fault injection). */
  get handle(): UdpHandle | null {
    return this.h;
  }

  static open(o: EndpointOptions, throwOnBindError: boolean): MmsgEndpoint {
    const a = load();
    if (a === null) throw new Error('netopt: no batched UDP sockets');
    const bindAddr = a.udpAddr(o.family, o.bindIp, o.port);
    let rc: UdpHandle | number = typeof bindAddr === 'number' ? bindAddr : -22;
    const ep = new MmsgEndpoint(null, o);
    if (typeof bindAddr !== 'number') rc = a.udpOpen(o.family, bindAddr, o.bufSize, o.bufSize, (buf, n) => ep.onBatch(buf, n));
    if (typeof rc === 'number') {
      const e = sysError('bind', rc, `${o.bindIp}:${o.port}`);
      if (throwOnBindError) throw e;
      o.onError(e);
      return ep;
    }
    ep.h = rc;
    return ep;
  }

  /** One recvmmsg round: `n` datagrams in `buf` (see {@link meta}). */
  private onBatch(buf: Buffer, n: number): void {
    const v4 = this.o.family === 4;
    const deliver = this.o.onDatagram;
    // Once given an area the addon reads every round into one (this module's, or the one a
    // second copy of the package loaded in this thread gave it since).
    const inPlace = area !== null;
    let failure: unknown = null;
    for (let i = 0; i < n; i++) {
      const w = i * words;
      const off = meta[w]!;
      const len = meta[w + 1]!;
      const port = meta[w + 2]!;
      const src = v4 ? v4Source((w + 4) * 4) : v6Source((w + 4) * 4, meta[w + 3]!);
      let msg = buf.subarray(off, off + len);
      // The next round reads into the same slots: a MAD the connection manager may keep gets a
      // buffer of its own.
      if (inPlace && len >= BTH_QPN_END && bthQpn(buf, off) === GSI_QPN) msg = Buffer.from(msg);
      // One throwing receiver must not cost the rest of the round their delivery.
      try {
        deliver(msg, src, port);
      } catch (e) {
        failure ??= e;
      }
    }
    if (failure !== null) throw failure;
  }

  send(buf: Buffer, len: number, dst: string, port: number): void {
    const a = addon;
    const h = this.h;
    if (a === null || a === undefined || h === null) return;
    let byAddr = this.to.get(port);
    let to = byAddr?.get(dst);
    if (to === undefined) {
      const r = a.udpAddr(this.o.family, dst, port);
      if (typeof r === 'number') {
        this.o.onError(sysError('send', r, dst));
        return;
      }
      if (this.cached >= ADDR_CACHE_MAX) {
        this.to.clear();
        this.cached = 0;
        byAddr = undefined;
      }
      if (byAddr === undefined) this.to.set(port, (byAddr = new Map()));
      byAddr.set(dst, (to = r));
      this.cached++;
    }
    const n = a.udpSend(h, buf, 0, len, to);
    if (n < 0) {
      this.o.onError(sysError('send', n, dst));
      return;
    }
    this.held.push(buf);
    if (n >= batch) {
      this.flush();
      return;
    }
    if (!this.queued) {
      this.queued = true;
      dirty.push(this);
      if (!flushScheduled) {
        flushScheduled = true;
        queueMicrotask(flushAll);
        if (!exitHooked) {
          exitHooked = true;
          process.on('exit', flushAll);
        }
      }
    }
  }

  /** Hand the queue to sendmmsg; the addon keeps (copies) whatever waits for writability. */
  flush(): void {
    this.queued = false;
    const h = this.h;
    if (h === null || addon === null || addon === undefined) return;
    if (this.held.length === 0) return;
    const left = addon.udpFlush(h);
    // The kernel has the datagrams sent, and the addon copies of the rest: the packets built in
    // slabs go back to them (packet-buffer.ts) instead of taking fresh memory for the next ones.
    const held = this.held;
    for (let i = 0; i < held.length; i++) releasePacket(held[i] as Buffer);
    held.length = 0;
    if (left > 0 && tracing('roce')) trace('roce', `roce:${this.o.port}`, `${this.o.bindIp}: ${left} datagrams wait for the socket`);
  }

  private setInt(level: string, name: string, v: number): number {
    const h = this.h;
    if (h === null || !addon) return -9;
    return addon.udpSetsockopt(h, k(level), k(name), v);
  }

  setTtl(ttl: number): boolean {
    return this.o.family === 4 ? this.setInt('IPPROTO_IP', 'IP_TTL', ttl) === 0 : this.setInt('IPPROTO_IPV6', 'IPV6_UNICAST_HOPS', ttl) === 0;
  }

  setMulticastTtl(ttl: number): boolean {
    return this.o.family === 4 ? this.setInt('IPPROTO_IP', 'IP_MULTICAST_TTL', ttl) === 0 : this.setInt('IPPROTO_IPV6', 'IPV6_MULTICAST_HOPS', ttl) === 0;
  }

  setMulticast(ip: string, zone: string, loop: boolean): void {
    const h = this.h;
    const a = addon;
    if (h === null || !a) throw sysError('setsockopt', -9, 'closed');
    let r: number;
    if (this.o.family === 4) {
      const to = a.udpAddr(4, ip, 0);
      if (typeof to === 'number') throw sysError('setsockopt', to, ip);
      // struct sockaddr_in: the address is bytes 4..8.
      r = a.udpSetsockopt(h, k('IPPROTO_IP'), k('IP_MULTICAST_IF'), new Uint8Array(to.subarray(4, 8)));
      if (r === 0) r = this.setInt('IPPROTO_IP', 'IP_MULTICAST_LOOP', loop ? 1 : 0);
    } else {
      const idx = a.udpIfIndex(zone || 'lo');
      if (idx < 0) throw sysError('setsockopt', idx, zone || 'lo');
      r = this.setInt('IPPROTO_IPV6', 'IPV6_MULTICAST_IF', idx);
      if (r === 0) r = this.setInt('IPPROTO_IPV6', 'IPV6_MULTICAST_LOOP', loop ? 1 : 0);
    }
    if (r !== 0) throw sysError('setsockopt', r, `multicast interface ${ip}`);
  }

  addMembership(group: string, ifaceIp: string | undefined): void {
    const h = this.h;
    const a = addon;
    if (h === null || !a) throw sysError('setsockopt', -9, 'closed');
    let r: number;
    const g = a.udpAddr(this.o.family, group, 0);
    if (typeof g === 'number') throw sysError('setsockopt', g, group);
    if (this.o.family === 4) {
      // struct ip_mreq: the group, then the interface's address (INADDR_ANY: the kernel's choice).
      const mreq = new Uint8Array(8);
      mreq.set(g.subarray(4, 8), 0);
      if (ifaceIp !== undefined) {
        const i = a.udpAddr(4, ifaceIp, 0);
        if (typeof i === 'number') throw sysError('setsockopt', i, ifaceIp);
        mreq.set(i.subarray(4, 8), 4);
      }
      r = a.udpSetsockopt(h, k('IPPROTO_IP'), k('IP_ADD_MEMBERSHIP'), mreq);
    } else {
      // struct ipv6_mreq: the group (bytes 8..24 of sockaddr_in6), then interface index 0.
      const mreq = new Uint8Array(k('SIZEOF_IPV6_MREQ'));
      mreq.set(g.subarray(8, 24), 0);
      r = a.udpSetsockopt(h, k('IPPROTO_IPV6'), k('IPV6_JOIN_GROUP'), mreq);
    }
    if (r !== 0) throw sysError('addMembership', r, group);
  }

  pmtuProbe(): boolean {
    const h = this.h;
    if (h === null || !addon) return false;
    return pmtuProbeFd(addon.udpFd(h));
  }

  zeroChecksum6(): boolean {
    const h = this.h;
    if (h === null || !addon) return false;
    return zeroChecksum6Fd(addon.udpFd(h));
  }

  ref(on: boolean): void {
    if (this.h !== null) addon?.udpRef(this.h, on);
  }

  unsent(): boolean {
    if (this.held.length > 0) return true;
    const h = this.h;
    if (h === null || !addon) return false;
    return (addon.udpStats(h)[k('ST_TX_QUEUED')] ?? 0) > 0;
  }

  close(): void {
    const h = this.h;
    if (h === null || !addon) return;
    this.flush();
    addon.udpClose(h);
    this.h = null;
    this.held.length = 0;
  }
}
