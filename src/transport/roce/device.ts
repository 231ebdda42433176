/**
 * One soft RoCE device in this process: the port of one network interface (rxe's `rxe_dev` +
 * `rxe_port`). It owns the GID table, the counters, the QP and multicast-group tables the receive
 * path looks up, and the sockets (through the process's {@link PortAgent}).
 *
 * Role split as rxe: the device and recv.ts are rxe_recv.c (checks every packet and finds its
 * QP), ud-qp.ts holds the requester (rxe_req.c: send queue to packets) and the responder
 * (rxe_resp.c: packets into receive buffers); a connected QP adds a completer later.
 */
import { err } from '../../errors.js';
import { codeOf, type ErrnoCode } from '../../errno.js';
import { trace, tracing } from '../../trace.js';
import { netdevs, type DeviceInfo } from '../../verbs/device.js';
import type { AhAttr } from '../../verbs/ah.js';
import { ICRC_LEN, icrcCompute, parseRocePacket, RocePacket, rxePortMtu, ibMtuToBytes, iboePathMtu, useCrc32Backend, writeIcrcValue } from '../../wire/roce/index.js';
import { netopt } from '../../util/netopt.js';
import { RoceCounters, C } from './counters.js';
import { buildGidTable, mergeGidTable, gidEqual, gidKey, ipFromGid, isMulticastGid, isV4MappedGid, type GidEntry } from './gid.js';
import { PortAgent } from './udp.js';
import { setLocalDrainProbe } from './fwd-tx.js';
import type { FwdEvent, RxMeta, RxSink } from './datagram.js';
import { ipBytes } from './ip-addr.js';
import { rxeReceive } from './recv.js';
import { impairedSend, impairing } from './impair.js';
import { captureOn } from '../../verbs/capture.js';
import { CaptureNote, captureDatagram } from './capture.js';
import { routeHopLimit } from './route-ttl.js';
import { expandTrain, trainSegmentLength } from './train.js';
import type { RoceUdQp } from './ud-qp.js';
import type { RoceIpUdpHeaders } from '../../wire/roce/index.js';
import type { RxNet } from './recv.js';

/** What an address handle resolves to (kept in `ah._provider`). */
export interface RoceAv {
  /** Source GID entry (its address is the IP source). */
  sgid: GidEntry;
  /** Destination address (dotted quad or IPv6 text) and its 4/16 bytes. */
  dst: string;
  dstBytes: Uint8Array;
  /** Source address bytes. */
  srcBytes: Uint8Array;
  family: 4 | 6;
  /** IPv4 TTL / IPv6 hop limit. */
  hopLimit: number;
  /** IPv4 ToS / IPv6 traffic class (not settable from a UDP socket here: recorded only). */
  trafficClass: number;
  /** The destination is a multicast group. */
  multicast: boolean;
  /** The IP/UDP headers the ICRC of a packet sent on this path covers (ports: the device's). */
  net: RoceIpUdpHeaders;
}

/**
 * What the receive path needs of a QP of the device. UD QPs are checked by the device itself
 * (recv.ts); a connected QP brings its own checks ({@link RoceQp._accepts}).
 */
export interface RoceQp {
  readonly qpNum: number;
  readonly tag: string;
  /** Whether the QP holds the event loop (verbs qp.ts): while some QP does, the sockets do. */
  readonly _holdsLoop: boolean;
  /** Deliver a packet that passed every check. */
  _respond(p: RocePacket, net: RxNet): void;
  /** Connected QPs: the QP-level checks (opcode class, state, addresses); false drops (counted). */
  _accepts?(p: RocePacket, meta: RxMeta): boolean;
  /**
   * Connected QPs: a train (train.ts) whose first packet `p` passed every check: its
   * `meta.train` segments of `seg` bytes, each checked and delivered as a packet of its own.
   */
  _respondTrain?(p: RocePacket, meta: RxMeta, seg: number): void;
}

/** The bytes of an address (ip-addr.ts), as the connection manager builds its headers with. */
export { ipBytes };

/** A handler of the datagrams for QP1 (the CM's GSI agent); returns nothing, never throws. */
export type GsiHandler = (pkt: Buffer, meta: RxMeta, dev: RoceDevice) => void;

/**
 * The errno of a failed group join: the socket's own when this package knows it, else ENOMEM
 * (what rxe_attach_mcast returns when it cannot allocate the group).
 */
function joinErrno(e: unknown): ErrnoCode {
  const n = (e as { errno?: unknown } | null)?.errno;
  return (typeof n === 'number' ? codeOf(n) : undefined) ?? 'ENOMEM';
}

const devices = new Map<string, RoceDevice>();

/** Datagrams this process sends to its own host (see {@link RoceDevice.deliverLocal}). */
let localQueue: { dev: RoceDevice; buf: Buffer; meta: RxMeta }[] = [];
let localSpare: { dev: RoceDevice; buf: Buffer; meta: RxMeta }[] = [];
let localScheduled = false;
/** The scheduled drain is a microtask (the queue's first datagram leaves the process). */
let localMicrotask = false;
setLocalDrainProbe(() => localScheduled && localMicrotask);
function drainLocal(): void {
  localScheduled = false;
  // Swap in the spare array: what routing queues meanwhile waits for the next turn.
  const list = localQueue;
  localQueue = localSpare;
  for (let i = 0; i < list.length; i++) {
    const l = list[i] as { dev: RoceDevice; buf: Buffer; meta: RxMeta };
    l.dev.agent.route(l.dev, l.buf, l.meta);
  }
  list.length = 0;
  localSpare = list;
}

/** Entries of a device's {@link RoceDevice.ownsIp} cache before it starts over. */
const OWNS_CACHE_MAX = 1024;

/** The GSI agent every device gets (set by the connection manager module when it loads). */
let defaultGsi: GsiHandler | null = null;

/** Install the GSI agent of every soft RoCE device of this process, present and future. */
export function setGsiHandler(h: GsiHandler | null): void {
  defaultGsi = h;
  for (const d of devices.values()) d.gsi = h;
}

/** The soft RoCE device of this process named `name`, if it was opened. */
export function roceDevice(name: string): RoceDevice | undefined {
  return devices.get(name);
}

/**
 * The device's interface was unregistered: it carries nothing more, and a device made later for
 * an interface of that name starts afresh.
 */
export function removeRoceDevice(name: string): void {
  const d = devices.get(name);
  if (d === undefined) return;
  d.portUp = false;
  devices.delete(name);
}

/** All soft RoCE devices opened in this process. */
export function roceDevices(): RoceDevice[] {
  return [...devices.values()];
}

let crcChosen = false;
/**
 * The ICRC of every packet sent and received: the netopt addon's carry-less multiplication
 * CRC-32 where it is built for a CPU that has PCLMULQDQ (chosen when the first device opens; the
 * addon's `crc32Impl` names the width of its lanes).
 */
function chooseCrc(): void {
  if (crcChosen) return;
  crcChosen = true;
  const fn = netopt()?.crc32;
  if (fn !== undefined) useCrc32Backend(fn);
}

/** A soft RoCE device (one per interface and process). */
export class RoceDevice implements RxSink {
  readonly name: string;
  readonly counters = new RoceCounters();
  /** The process's agent for the RoCE UDP port. */
  readonly agent: PortAgent;
  /** Live QPs of this device by QP number. */
  readonly qps = new Map<number, RoceQp>();
  /** Multicast groups by GID key: the attached QPs. */
  readonly mcast = new Map<string, Set<RoceUdQp>>();
  /** The CM's GSI agent (QP1), when one is loaded. */
  gsi: GsiHandler | null = null;
  /**
   * The port is ACTIVE (its interface running with a carrier, as the port watch last saw it):
   * a port that is down carries no packet, as a NIC whose link is down.
   */
  portUp = true;
  private _info: DeviceInfo;
  private _gids: GidEntry[];
  private active = false;
  /** {@link ownsIp} answers by address text (emptied whenever the GID table is rebuilt). */
  private readonly owns = new Map<string, boolean>();

  /** The interface is the loopback one: every receiver of a datagram it sends is on this host. */
  private loopbackLink: boolean;

  private constructor(info: DeviceInfo, agent: PortAgent) {
    this.name = info.name;
    this._info = info;
    this.loopbackLink = isLoopbackIf(info.ifname);
    this._gids = buildGidTable(info.ifname, info.mac ?? '00:00:00:00:00:00', info.addresses);
    this.agent = agent;
    this.gsi = defaultGsi;
    chooseCrc();
  }

  /** The device of `info` in this process (created on first use). */
  static of(info: DeviceInfo): RoceDevice {
    let d = devices.get(info.name);
    if (d === undefined) {
      d = new RoceDevice(info, PortAgent.get());
      devices.set(info.name, d);
    } else d.update(info);
    return d;
  }

  /** The interface description the device was built from. */
  get info(): DeviceInfo {
    return this._info;
  }

  /** The GID table: its entries in use, in index order (an index may be unused). */
  get gids(): readonly GidEntry[] {
    return this._gids;
  }

  /**
   * The interface changed (addresses, MAC, MTU): update the GID table (entries keep their
   * indices: {@link mergeGidTable}), bind new addresses.
   */
  update(info: DeviceInfo): void {
    // Every verbs call on the device passes its description: one that says what the table was
    // built from changes nothing.
    const was = this._info;
    this._info = info;
    if (sameInterface(info, was)) return;
    if (info.ifname !== was.ifname) this.loopbackLink = isLoopbackIf(info.ifname);
    this._gids = mergeGidTable(this._gids, buildGidTable(info.ifname, info.mac ?? '00:00:00:00:00:00', info.addresses));
    this.owns.clear();
    if (this.active) this.bindAll();
  }

  /** The port's active MTU (IB enum) and its size in bytes: rxe's UD message limit. */
  get activeMtu(): number {
    return rxePortMtu(this._info.mtu);
  }

  /** Bytes of {@link activeMtu}. */
  get mtuBytes(): number {
    return ibMtuToBytes(this.activeMtu);
  }

  /** The path MTU the connection manager uses over this port (`iboe_get_mtu`), IB enum. */
  get pathMtu(): number {
    return iboePathMtu(this._info.mtu);
  }

  /** Start receiving: bind the RoCE port on every address of the interface. Idempotent. */
  activate(): void {
    if (this.active) return;
    this.active = true;
    this.bindAll();
  }

  private bindAll(): void {
    for (const a of this._info.addresses) {
      const family = a.family === 'IPv4' ? 4 : 6;
      const ip = a.address.split('%')[0] ?? a.address;
      const g = family === 4 ? null : ip.toLowerCase();
      const linkLocal = g !== null && g.startsWith('fe80:');
      this.agent.bindLocal(this, ip, family, linkLocal ? this._info.ifname : '');
    }
  }

  /** GID `index` (zeros for an unused entry, as the kernel reports). */
  gid(index: number): Uint8Array {
    const e = this.gidEntry(index);
    return e ? Uint8Array.from(e.gid) : new Uint8Array(16);
  }

  /** The entry at GID index `index`, if that index is in use. */
  gidEntry(index: number): GidEntry | undefined {
    const e = this._gids[index];
    // Without unused indices below it, an entry sits at its own index.
    if (e !== undefined && e.index === index) return e;
    return this._gids.find((x) => x.index === index);
  }

  /** Whether `g` is one of this port's GIDs. */
  ownsGid(g: Uint8Array): boolean {
    return this._gids.some((e) => gidEqual(e.gid, g));
  }

  /** Whether IP `ip` (as the UDP layer reports it) is an address of this port. */
  ownsIp(ip: string, family: 4 | 6): boolean {
    let yes = this.owns.get(ip);
    if (yes === undefined) {
      yes = this.ownsIpUncached(ip, family);
      if (this.owns.size >= OWNS_CACHE_MAX) this.owns.clear();
      this.owns.set(ip, yes);
    }
    return yes;
  }

  private ownsIpUncached(ip: string, family: 4 | 6): boolean {
    const b = ipBytes(ip, family);
    for (const e of this._gids) {
      if (family === 4 && isV4MappedGid(e.gid) && e.gid[12] === b[0] && e.gid[13] === b[1] && e.gid[14] === b[2] && e.gid[15] === b[3]) return true;
      if (family === 6 && gidEqual(e.gid, b)) return true;
    }
    return false;
  }

  /**
   * Resolve an address handle (rxe `rxe_av_chk_attr` / `rxe_av_from_attr`): port 1, a GRH (RoCE
   * has no LIDs), a source GID that exists, a destination GID of the same IP family.
   * @throws RdmaError EINVAL otherwise.
   */
  resolveAv(attr: AhAttr, op = 'ibv_create_ah'): RoceAv {
    if (attr.portNum !== 1) throw err('EINVAL', op, `port ${attr.portNum}`);
    if (!attr.isGlobal || !attr.grh) throw err('EINVAL', op, 'RoCE address handles need a GRH (is_global)');
    const g = attr.grh;
    const sgid = this.gidEntry(g.sgidIndex);
    if (!sgid) throw err('EINVAL', op, `sgid_index ${g.sgidIndex} is not in the GID table`);
    const dst = ipFromGid(g.dgid);
    if (dst.family !== sgid.family) throw err('EINVAL', op, `destination GID is IPv${dst.family}, source GID ${g.sgidIndex} IPv${sgid.family}`);
    if (dst.family === 4 ? g.dgid[12] === 0 && g.dgid[13] === 0 && g.dgid[14] === 0 && g.dgid[15] === 0 : g.dgid.every((x) => x === 0)) {
      throw err('EINVAL', op, 'destination GID is unspecified');
    }
    const dstBytes = ipBytes(dst.ip, dst.family);
    const srcBytes = ipBytes(sgid.ip, sgid.family);
    const port = this.agent.port;
    const multicast = isMulticastGid(g.dgid);
    return {
      sgid,
      dst: dst.ip,
      dstBytes,
      srcBytes,
      net: { family: dst.family, src: srcBytes, dst: dstBytes, sport: port, dport: port },
      family: dst.family,
      // unicast: the route's hop limit, as the kernel writes it into a RoCE GRH (route-ttl.ts)
      hopLimit: multicast ? g.hopLimit : routeHopLimit(dst.family, this._info.ifname),
      trafficClass: g.trafficClass,
      multicast,
    };
  }

  // -- QPs and groups ---------------------------------------------------------------------------

  /** @internal A QP of this device was created. */
  _addQp(qp: RoceQp): void {
    this.activate();
    this.qps.set(qp.qpNum, qp);
    if (qp._holdsLoop) this.agent.holdQp(1);
  }

  /**
   * @internal A live QP's {@link Qp._holdsLoop} changed: the sockets hold the event loop while
   * some QP that holds it exists (an unref'd rsocket's QP does not count).
   */
  _qpHoldsLoop(qp: RoceQp, on: boolean): void {
    if (this.qps.get(qp.qpNum) === qp) this.agent.holdQp(on ? 1 : -1);
  }

  /** @internal A QP of this device was destroyed (detached from its groups first). */
  _removeQp(qp: RoceQp): void {
    if (this.qps.get(qp.qpNum) !== qp) return;
    for (const [k, set] of this.mcast) {
      if (set.delete(qp as RoceUdQp) && set.size === 0) this.dropGroup(k);
    }
    this.qps.delete(qp.qpNum);
    this.agent.releaseQpn(qp.qpNum);
    if (qp._holdsLoop) this.agent.holdQp(-1);
  }

  /**
   * `ibv_attach_mcast` (rxe_attach_mcast): the QP receives datagrams sent to `gid`. The first QP
   * of a group joins the IP group on the interface.
   * @throws RdmaError EINVAL for a GID that is not multicast or a QP already attached; ENOMEM
   *   beyond the group and attachment limits; the errno of the group's socket (EMFILE, ENFILE,
   *   ENOBUFS, …; ENOMEM when it has none known here, as rxe fails an allocation) when the first
   *   QP of a group cannot join it — nothing is attached then.
   */
  attach(qp: RoceUdQp, gid: Uint8Array, limits: { maxMcastGrp: number; maxMcastQpAttach: number }): void {
    const op = 'ibv_attach_mcast';
    if (!isMulticastGid(gid)) throw err('EINVAL', op, 'not a multicast GID');
    const key = gidKey(gid);
    let set = this.mcast.get(key);
    if (set?.has(qp)) throw err('EINVAL', op, 'QP already attached to this group');
    if (!set) {
      if (this.mcast.size >= limits.maxMcastGrp) throw err('ENOMEM', op, 'too many multicast groups');
      const { ip, family } = ipFromGid(gid);
      const iface = this._gids.find((e) => e.family === family && e.index > 0) ?? this._gids[0];
      this.activate();
      try {
        this.agent.joinGroup(this, ip, family, iface?.ip ?? '');
      } catch (e) {
        throw err(joinErrno(e), op, `group ${ip}: ${(e as Error).message}`);
      }
      set = new Set();
      this.mcast.set(key, set);
    }
    if (set.size >= limits.maxMcastQpAttach) throw err('ENOMEM', op, 'too many QPs attached to this group');
    set.add(qp);
    if (tracing('qp')) trace('qp', qp.tag, `attached to ${ipFromGid(gid).ip}`);
  }

  /**
   * `ibv_detach_mcast`. The last QP of a group leaves the IP group.
   * @throws RdmaError EINVAL when the QP is not attached.
   */
  detach(qp: RoceUdQp, gid: Uint8Array): void {
    const key = gidKey(gid);
    const set = this.mcast.get(key);
    if (!set || !set.delete(qp)) throw err('EINVAL', 'ibv_detach_mcast', 'QP not attached to this group');
    if (set.size === 0) this.dropGroup(key);
  }

  private dropGroup(key: string): void {
    this.mcast.delete(key);
    const g = new Uint8Array(16);
    for (let k = 0; k < 16; k++) g[k] = parseInt(key.slice(2 * k, 2 * k + 2), 16);
    this.agent.leaveGroup(ipFromGid(g).ip);
  }

  // -- datagrams ---------------------------------------------------------------------------------

  /**
   * Send one packet (`buf[0, len)`, ICRC included) from the source GID of `av`; to a group with
   * `mcastLoop` false, none of this host's QPs receives it (a QP created with
   * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB): it leaves without multicast loopback, and on the loopback
   * interface, whose every receiver is on this host, it is counted as sent and goes nowhere.
   * @returns false when the source address has no socket (the interface lost it).
   */
  transmit(buf: Buffer, len: number, av: RoceAv, mcastLoop = true): boolean {
    if (!this.portUp) {
      this.counters.inc(C.send_err);
      return false;
    }
    const blocked = !mcastLoop && av.multicast && this.loopbackLink;
    const ok = blocked ? this.agent.bound(av.sgid.ip) : this.agent.send(buf, len, av.sgid.ip, av.dst, av.hopLimit, av.multicast, mcastLoop, this.counters);
    if (captureOn && ok) this.captureOut(buf, len, av.sgid.ip, av.dst, av.family, av.hopLimit, blocked ? CaptureNote.NOT_SENT : undefined);
    if (ok) {
      this.counters.inc(C.sent_pkts);
      if (av.multicast) this.counters.inc(C.sent_mcast_pkts);
    } else this.counters.inc(C.send_err);
    return ok;
  }

  /**
   * Send a datagram that is not a QP's (GSI MADs) from local address `src` to `dst`: to its owner
   * on this host directly when `dst` is this port's, else through the socket.
   */
  transmitFrom(buf: Buffer, src: string, dst: string, family: 4 | 6, ttl: number): boolean {
    if (!this.portUp) {
      this.counters.inc(C.send_err);
      return false;
    }
    if (this.ownsIp(dst, family)) {
      this.deliverLocal(buf, src, dst, family);
      return true;
    }
    this.counters.inc(C.sent_pkts);
    const ok = this.agent.send(buf, buf.length, src, dst, ttl, false, true, this.counters);
    if (!ok) this.counters.inc(C.send_err);
    else if (captureOn) this.captureOut(buf, buf.length, src, dst, family, ttl);
    return ok;
  }

  /**
   * A datagram from this process to an address of this port: to its owner on this host (this
   * process or another), once the current task is done. One queue for MADs and connected QPs'
   * packets keeps their order (an ACK a QP sent before its application disconnected arrives
   * before the DREQ). The queue is drained on the next turn of the event loop (`setImmediate`)
   * when its first datagram stays in this process (a MAD, a QP of this process), so that two QPs
   * of one process exchanging a burst never starve timers and sockets; when it goes to another
   * process's QPN block it is drained in a microtask, which only writes it to that process's
   * socket (a request and the answer it prompts leave in one turn, as through a UDP socket).
   */
  deliverLocal(buf: Buffer, src: string, dst: string, family: 4 | 6, icrcOffload = false, train = 0): void {
    if (train > 0) {
      // A train (train.ts) is sent only when neither a capture nor an impairment runs here.
      this.counters.add(C.sent_pkts, train);
      this.queueLocal(buf, src, dst, family, true, train);
      return;
    }
    this.counters.inc(C.sent_pkts);
    if (captureOn) this.captureOut(buf, buf.length, src, dst, family, undefined, CaptureNote.LOCAL);
    if (impairing()) impairedSend(buf, (b) => this.queueLocal(b ?? buf, src, dst, family, icrcOffload, 0), this.counters);
    else this.queueLocal(buf, src, dst, family, icrcOffload, 0);
  }

  /**
   * Whether a QP's packet for this host may leave its ICRC uncomputed (fwd-frame.ts
   * `FwdFlag.ICRC_OFFLOAD`): not while a packet capture runs in this process (it records the
   * packet as the wire would carry it) or a link impairment (a corrupted copy must fail the
   * receiver's check).
   */
  icrcOffload(): boolean {
    return !captureOn && !impairing();
  }

  private queueLocal(buf: Buffer, src: string, dst: string, family: 4 | 6, icrcOffload: boolean, train: number): void {
    localQueue.push({ dev: this, buf, meta: { family, src, dst, srcPort: this.agent.port, forwarded: false, icrcOffload, train } });
    if (!localScheduled) {
      localScheduled = true;
      localMicrotask = this.agent.leavesProcess(buf);
      if (localMicrotask) queueMicrotask(drainLocal);
      else setImmediate(drainLocal);
    }
  }

  /** The GID table entry of local address `ip`, if it is one of this port's. */
  gidOfIp(ip: string, family: 4 | 6): GidEntry | undefined {
    const b = ipBytes(ip, family);
    return this._gids.find((e) =>
      family === 4 ? isV4MappedGid(e.gid) && e.gid[12] === b[0] && e.gid[13] === b[1] && e.gid[14] === b[2] && e.gid[15] === b[3] : e.family === 6 && gidEqual(e.gid, b),
    );
  }

  /** {@link RxSink}: a datagram for this device. Never throws. */
  rxDatagram(buf: Buffer, meta: RxMeta): void {
    if (captureOn) this.captureIn(buf, meta, meta.forwarded ? CaptureNote.FORWARDED_IN : undefined);
    try {
      rxeReceive(this, buf, meta);
    } catch (e) {
      // A receive-path bug must not take the process down: count it as a malformed packet.
      this.counters.inc(C.rcvd_bad_length_drop);
      if (tracing('roce')) trace('roce', this.name, `receive error: ${(e as Error).stack ?? String(e)}`);
    }
  }

  /** A datagram this device sends (`buf[0, len)`), for a running packet capture. */
  private captureOut(buf: Buffer, len: number, src: string, dst: string, family: 4 | 6, hopLimit?: number, note?: string): void {
    const port = this.agent.port;
    const d = { device: this.name, mac: this._info.mac, family, src, dst, sport: port, dport: port, ...(hopLimit !== undefined ? { hopLimit } : {}) };
    captureDatagram(d, buf, 0, len, 'out', note);
  }

  /** {@link RxSink}: a datagram for this host, received here, for a running packet capture. */
  captureIn(buf: Buffer, meta: RxMeta, note?: string): void {
    if (meta.icrcOffload && buf.length >= ICRC_LEN) {
      // A packet whose sender left the ICRC to the host path is recorded with it, as on the wire;
      // a train as the packets it stands for (a malformed one as it came).
      const net = { family: meta.family, src: ipBytes(meta.src, meta.family), dst: ipBytes(meta.dst, meta.family), sport: meta.srcPort, dport: this.agent.port };
      const p = new RocePacket();
      const seg = meta.train > 0 && parseRocePacket(buf, 0, buf.length, p, { pkey: null }) === null ? trainSegmentLength(p, meta.train) : -1;
      const pkts = seg > 0 ? expandTrain(p, meta.train, seg) : meta.train > 0 ? [] : [Buffer.from(buf)];
      for (const b of pkts) {
        writeIcrcValue(b, b.length - ICRC_LEN, icrcCompute(net, b, 0, b.length - ICRC_LEN));
        this.captureInOne(b, meta, note);
      }
      if (pkts.length > 0) return;
    }
    this.captureInOne(buf, meta, note);
  }

  private captureInOne(buf: Buffer, meta: RxMeta, note?: string): void {
    captureDatagram({ device: this.name, mac: this._info.mac, family: meta.family, src: meta.src, dst: meta.dst, sport: meta.srcPort, dport: this.agent.port }, buf, 0, buf.length, 'in', note);
  }

  /** {@link RxSink}. */
  fwdCount(e: FwdEvent): void {
    this.counters.inc(C[e]);
  }
}

/** Whether `ifname` is the loopback interface (Node's `internal`). */
function isLoopbackIf(ifname: string): boolean {
  return netdevs().some((n) => n.name === ifname && n.loopback);
}

/**
 * Whether two descriptions of an interface give the same device: name, MAC, MTU and addresses
 * (in order, what the GID table is built from).
 */
function sameInterface(a: DeviceInfo, b: DeviceInfo): boolean {
  if (a === b) return true;
  if (a.ifname !== b.ifname || a.mac !== b.mac || a.mtu !== b.mtu) return false;
  const x = a.addresses;
  const y = b.addresses;
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) {
    const p = x[i] as DeviceInfo['addresses'][number];
    const q = y[i] as DeviceInfo['addresses'][number];
    if (p.address !== q.address || p.family !== q.family || p.scopeid !== q.scopeid) return false;
  }
  return true;
}
