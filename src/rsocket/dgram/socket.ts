/**
 * A datagram rsocket (rsocket.c's `struct rsocket` for SOCK_DGRAM, its `ds_*` functions): UDP
 * semantics over UD QPs, wire-compatible with rdma-core's.
 *
 * Each rsocket has a UDP socket — its address is the rsocket's address — and one UD QP per local
 * IP address it sends from ({@link DsQp}, qp.ts). A destination ({@link DsDest}, dest.ts) is
 * first sent to over UDP with a ds_udp_header; the peer's UDP service (svc.ts) forwards that
 * payload to its application and answers with its QP number, and from then on datagrams go as UD
 * SENDs starting with a ds_header naming the sender. Every datagram is at most one 2 KiB slot.
 *
 * The calls are rsocket's, non-blocking and promise-shaped for Node, like {@link RsConn}:
 * - {@link DsSocket.bind}, {@link DsSocket.connect} (rbind, rconnect: the default destination);
 * - {@link DsSocket.sendto} / {@link DsSocket.send} / {@link DsSocket.sendmsg}: resolve to the
 *   byte count, or {@link RS_EAGAIN} when every send slot is in flight (the first send to an
 *   address resolves it and may create a QP, so these are async);
 * - {@link DsSocket.recvfrom} / {@link DsSocket.recv} / {@link DsSocket.recvmsg}: synchronous,
 *   a datagram or {@link RS_EAGAIN};
 * - {@link DsSocket.poll} (rpoll: POLLIN when a datagram waits, POLLOUT when a send slot is free);
 * - {@link DsSocket.setsockopt} / {@link DsSocket.getsockopt}, {@link DsSocket.close}.
 */
import { isIP } from 'node:net';
import { RDMA_UDP_QKEY, type SockAddr } from '../../cm/index.js';
import { SendFlags, WcStatus, WrOpcode, type Wc } from '../../verbs/index.js';
import { RdmaError } from '../../errors.js';
import { isAnyIp, isLoopbackIp } from '../../util/ip.js';
import { PollWaiters } from '../../util/poll-waiters.js';
import { microtask } from '../../util/microtask.js';
import { StateCell } from '../../util/state.js';
import { trace } from '../../trace.js';
import { RS_EAGAIN, rsErr } from '../errors.js';
import { IPPROTO_UDP, MSG_PEEK, POLLIN, POLLOUT } from '../options.js';
import { RsState, describeState } from '../state.js';
import { DS_SLOT_SIZE, DsUdpOp, GRH_LEN, decodeDsHeader, encodeDsUdpHeader, type IpVersion } from './protocol.js';
import { DsQp, DS_WR_RECV, type DsQpSizes } from './qp.js';
import { DsDestMap, destKey, type DsDest } from './dest.js';
import { DsUdpService, type DsSvcHost } from './svc.js';
import { DsUdpSocket, routeSourceFor } from './udp.js';
import { DsOptions } from './options.js';
import { checkAddrPort } from '../args.js';

let dsSeq = 0;

/** A received datagram waiting to be read (`struct ds_rmsg`). */
interface DsRmsg {
  qp: DsQp;
  /** Its slot in the QP's receive buffer. */
  offset: number;
  /** Bytes after the GRH: ds_header and payload. */
  length: number;
}

/** What {@link DsSocket.recvfrom} returns for a datagram. */
export interface DsDatagram {
  /** Bytes copied (the datagram's length, or the buffer's when shorter: the rest is lost, as UDP). */
  n: number;
  /** The datagram's full length. */
  size: number;
  /** The sender, as its ds_header names it. */
  from: SockAddr;
}

/** How long close waits for sends in flight (ds_shutdown waits for all of them). */
const CLOSE_DRAIN_MS = 2000;

/** A datagram rsocket: `rsocket(AF_INET | AF_INET6, SOCK_DGRAM, 0)`. */
export class DsSocket implements DsSvcHost {
  readonly tag = `DS[${++dsSeq}]`;
  /** 4 (AF_INET) or 6 (AF_INET6). */
  readonly family: IpVersion;
  /** Called after every progress step (datagrams arrived, sends completed, closed). */
  onNotify: (() => void) | null = null;

  private readonly st = new StateCell<number>('rs', () => this.tag, RsState.init, describeState);
  private readonly udp: DsUdpSocket;
  private readonly svc = new DsUdpService(this);
  private closed = false;

  /** Sizes and option flags (rs_alloc's defaults, then rsetsockopt, then ds_set_qp_size). */
  private readonly opts: DsOptions;

  // ds_init_ep
  private sbuf: Buffer | null = null;
  private freeSlots: number[] = [];
  private sqeAvail = 0;
  private rqeAvail = 0;
  private readonly rmsgs: DsRmsg[] = [];
  private rmsgHead = 0;

  private readonly qps: DsQp[] = [];
  private qpMaking = new Map<string, Promise<DsQp>>();
  private readonly dests = new DsDestMap();
  private destMaking = new Map<string, Promise<DsDest>>();
  /** `rs->conn_dest`: rconnect's destination (rsend sends there). */
  private connDest: DsDest | null = null;

  private readonly polls = new PollWaiters(this as DsSocket, DsSocket.prototype.pollEvents);
  private readonly slotWaiters: (() => void)[] = [];
  private cqTaskQueued = false;
  private notifyQueued = false;

  /**
   * rsocket(domain, SOCK_DGRAM, protocol): `protocol` 0 or IPPROTO_UDP (else ENOTSUP, as
   * rsocket()).
   */
  constructor(family: IpVersion = 4, protocol = 0) {
    if ((family !== 4 && family !== 6) || (protocol !== 0 && protocol !== IPPROTO_UDP)) {
      throw rsErr('EOPNOTSUPP', 'rsocket', `domain AF_INET${family === 6 ? '6' : ''}, protocol ${protocol}`);
    }
    this.family = family;
    this.opts = new DsOptions(family);
    this.udp = new DsUdpSocket(family, (data, from) => this.svc.receive(data, from));
  }

  /** The rsocket state bits ({@link RsState}: readable | writable once bound or used). */
  get state(): number {
    return this.st.state;
  }

  /** `rgetsockname`: the UDP socket's address, null before it has one. */
  get localAddress(): SockAddr | null {
    return this.udp.address;
  }

  /** `rgetpeername`: rconnect's destination, null without one. */
  get remoteAddress(): SockAddr | null {
    return this.connDest ? { ...this.connDest.addr } : null;
  }

  /**
   * Whether datagrams to `addr` go over UD (the peer's UDP service has named its QP), not over
   * UDP (where a datagram carries at most 2 KiB less the 16- or 28-byte ds_udp_header: the peer's
   * service reads 2 KiB and cuts the rest, as rsocket.c's).
   */
  sendsOverUd(addr: SockAddr): boolean {
    return !!this.dests.find(addr)?.ah;
  }

  /** Datagrams received and not read yet. */
  get pendingDatagrams(): number {
    return this.rmsgs.length - this.rmsgHead;
  }

  /** The QPs (one per local address sent from). */
  get qpCount(): number {
    return this.qps.length;
  }

  /** @internal DsSvcHost: the service runs until close. */
  get serving(): boolean {
    return !this.closed;
  }

  // -- setup ---------------------------------------------------------------------------------

  /**
   * ds_set_qp_size + ds_init_ep: the send buffer as sq_size 2 KiB slots, the receive bookkeeping,
   * the UDP service; the socket becomes readable and writable.
   */
  private initEp(): void {
    this.opts.fitQueues();
    this.sbuf = Buffer.alloc(this.opts.sqSize * DS_SLOT_SIZE);
    this.freeSlots = [];
    for (let i = this.opts.sqSize - 1; i >= 0; i--) this.freeSlots.push(i * DS_SLOT_SIZE);
    this.sqeAvail = this.opts.sqSize;
    this.rqeAvail = this.opts.rqSize;
    this.st.move(RsState.readable | RsState.writable, 'endpoint ready');
  }

  private ensureEp(op: string): void {
    if (this.closed) throw rsErr('EBADF', op, 'closed');
    if (this.st.state === RsState.init) this.initEp();
  }

  /** rbind(): ds_init_ep, then bind the UDP socket (EADDRINUSE, EADDRNOTAVAIL …). */
  async bind(addr: SockAddr): Promise<void> {
    checkAddrPort(addr, 'rbind');
    this.ensureEp('rbind');
    await this.udp.bind(addr, 'rbind');
  }

  /**
   * rconnect(): ds_init_ep, then the destination of every {@link send} (ds_get_dest, which may
   * create the QP of the local address that reaches `addr`: the errors of that, as rsocket.c's
   * rconnect reports them — EOPNOTSUPP on a device without UD QPs, ENODEV without a device).
   */
  async connect(addr: SockAddr): Promise<void> {
    if (isIP(addr.address) === 0) throw rsErr('EINVAL', 'rconnect', `not an IP address: ${addr.address}`);
    checkAddrPort(addr, 'rconnect');
    this.ensureEp('rconnect');
    await this.udp.bind(null, 'rconnect');
    // connect(rs->udp_sock): from now on the UDP socket exchanges datagrams with `addr` only.
    await this.udp.connect(addr, destKey(addr), 'rconnect');
    this.connDest = await this.getDest(addr, 'rconnect');
  }

  // -- destinations --------------------------------------------------------------------------

  /**
   * ds_get_src_addr: the local address datagrams to `dst` leave from — the UDP socket's when it
   * is bound to one, else (bound to the wildcard or loopback) the address the kernel's routing
   * picks for `dst` (a UDP socket connected to it), with our port.
   */
  private async srcAddrFor(dst: SockAddr): Promise<SockAddr> {
    const own = this.localAddress;
    if (!own) throw rsErr('EINVAL', 'rsendto', 'not bound');
    if (!isAnyIp(own.address) && !isLoopbackIp(own.address)) return own;
    const address = await routeSourceFor(dst);
    return { address, port: own.port, family: address.includes(':') ? 'IPv6' : 'IPv4' };
  }

  private holds = true;

  /**
   * @internal Whether the socket holds the Node event loop (`RDgramSocket.ref()` / `unref()`):
   * its UDP service socket and its QPs ({@link Qp._setHoldsLoop}).
   */
  _setHoldsLoop(on: boolean): void {
    this.holds = on;
    this.udp.holdLoop(on);
    for (const q of this.qps) q.qp._setHoldsLoop(on);
  }

  /** ds_get_qp: the QP bound to `src`, created on first use. */
  private getQp(src: SockAddr): Promise<DsQp> {
    const k = destKey(src);
    const have = this.qps.find((q) => destKey(q.localAddr) === k);
    if (have) return Promise.resolve(have);
    const making = this.qpMaking.get(k);
    if (making) return making;
    const p = (async (): Promise<DsQp> => {
      const sizes: DsQpSizes = { sqSize: this.opts.sqSize, rqSize: this.opts.rqSize, sqInline: this.opts.sqInline, rbufSize: this.opts.rbufSize };
      const qp = DsQp.create(src, sizes, this.sbuf as Buffer, this);
      this.opts.sqInline = sizes.sqInline;
      if (this.closed) {
        await qp.destroy();
        throw rsErr('EBADF', 'rsendto', 'closed');
      }
      this.qps.unshift(qp); // ds_insert_qp: at the head
      qp.qp._setHoldsLoop(this.holds);
      trace('rs', this.tag, `QP ${qp.qp.qpNum} on ${src.address}:${src.port}`);
      return qp;
    })();
    this.qpMaking.set(k, p);
    const forget = (): void => {
      this.qpMaking.delete(k);
    };
    p.then(forget, forget);
    return p;
  }

  /** @internal ds_get_dest: the destination of `addr`, made (with its QP) on first use. */
  getDest(addr: SockAddr, op = 'rsendto'): Promise<DsDest> {
    const have = this.dests.find(addr);
    if (have) return Promise.resolve(have);
    const k = destKey(addr);
    const making = this.destMaking.get(k);
    if (making) return making;
    const p = (async (): Promise<DsDest> => {
      try {
        const src = await this.srcAddrFor(addr);
        const qp = await this.getQp(src);
        return this.dests.insert({ key: k, addr: { ...addr }, qp, ah: null, qpn: 0 });
      } catch (e) {
        if (e instanceof RdmaError && e.op !== op) throw new RdmaError(e.code, { op, detail: e.message, cause: e });
        throw e;
      }
    })();
    this.destMaking.set(k, p);
    const forget = (): void => {
      this.destMaking.delete(k);
    };
    p.then(forget, forget);
    return p;
  }

  // -- sending -------------------------------------------------------------------------------

  /**
   * rsendto(): one datagram to `addr` (or, without one, to rconnect's destination: rsend).
   * Resolves to the byte count, or {@link RS_EAGAIN} when every send slot is in flight. Errors:
   * EMSGSIZE beyond one slot (2 KiB less the ds_header; rsocket.c does not check and overruns
   * its slot), EDESTADDRREQ without an address or a connected destination, and those of creating
   * the destination's QP.
   */
  async sendto(buf: Uint8Array, addr?: SockAddr | null, flags = 0): Promise<number> {
    const op = addr ? 'rsendto' : 'rsend';
    void flags;
    this.ensureEp(op);
    let dest = this.connDest;
    if (addr && isIP(addr.address) === 0) throw rsErr('EINVAL', op, `not an IP address: ${addr.address}`);
    if (addr) checkAddrPort(addr, op);
    if (addr) {
      if (!dest || dest.key !== destKey(addr)) {
        await this.udp.bind(null, op);
        dest = await this.getDest(addr, op);
      }
    }
    if (!dest) throw rsErr('EDESTADDRREQ', op, 'no destination');
    return this.dsend(dest, buf, op);
  }

  /** rsend() on a connected datagram socket. */
  send(buf: Uint8Array, flags = 0): Promise<number> {
    return this.sendto(buf, null, flags);
  }

  /**
   * rsendmsg(): the vectors as one datagram to `name` (or rconnect's destination). rsocket.c
   * routes a datagram socket's rsendmsg into its stream code (rsendv), which cannot send it;
   * here it is rsendto of the vectors joined. Control data: ENOTSUP, as rsendmsg.
   */
  sendmsg(msg: { iov: readonly Uint8Array[]; name?: SockAddr | null; control?: Uint8Array | null }, flags = 0): Promise<number> {
    if (msg.control && msg.control.length) return Promise.reject(rsErr('EOPNOTSUPP', 'rsendmsg', 'control data'));
    return this.sendto(Buffer.concat(msg.iov), msg.name ?? null, flags);
  }

  /** dsend: over UDP until the peer's QP is known, else one UD SEND from a free slot. */
  private async dsend(dest: DsDest, buf: Uint8Array, op: string): Promise<number> {
    const hlen = dest.qp.hdr.length;
    if (buf.length + hlen > DS_SLOT_SIZE) throw rsErr('EMSGSIZE', op, `${buf.length} bytes; a datagram carries at most ${DS_SLOT_SIZE - hlen}`);
    if (!dest.ah) return this.sendUdp(dest, DsUdpOp.DATA, buf, op);
    if (this.sqeAvail === 0) this.progress();
    if (this.sqeAvail === 0) return RS_EAGAIN;
    this.postDatagram(dest, dest.qp.hdr, buf, op);
    return buf.length;
  }

  /** Copy header and payload into a free slot and post them to `dest` (ds_post_send). */
  private postDatagram(dest: DsDest, hdr: Uint8Array, payload: Uint8Array, op: string): void {
    const sbuf = this.sbuf as Buffer;
    const off = this.freeSlots.pop() as number;
    this.sqeAvail--;
    sbuf.set(hdr, off);
    sbuf.set(payload, off + hdr.length);
    const length = hdr.length + payload.length;
    try {
      dest.qp.qp.postSend({
        wrId: off,
        opcode: WrOpcode.SEND,
        sendFlags: length <= this.opts.sqInline ? SendFlags.INLINE : 0,
        sgList: [{ addr: dest.qp.smr.addr + off, length, lkey: dest.qp.smr.lkey }],
        ud: { ah: dest.ah as NonNullable<DsDest['ah']>, remoteQpn: dest.qpn, remoteQkey: RDMA_UDP_QKEY },
      });
    } catch (e) {
      this.freeSlots.push(off);
      this.sqeAvail++;
      throw e instanceof RdmaError ? new RdmaError(e.code, { op, detail: e.message, cause: e }) : e;
    }
  }

  /**
   * @internal ds_sendv_udp: `payload` with a ds_udp_header of `op` naming the QP of `dest`, to
   * `dest` over UDP. Resolves to the payload bytes sent.
   */
  async sendUdp(dest: DsDest, op: number, payload: Uint8Array | null, call = 'rsendto'): Promise<number> {
    const hdr = encodeDsUdpHeader(op, dest.qp.qp.qpNum, dest.qp.localAddr.address);
    await this.udp.bind(null, call);
    const parts = payload && payload.length ? [hdr, payload] : [hdr];
    await this.udp.send(parts, dest.addr, dest.key, call);
    return payload ? payload.length : 0;
  }

  /** @internal udp_svc_forward: post once a send slot is free (waits for one, as rsocket.c). */
  async forward(dest: DsDest, hdr: Uint8Array, payload: Uint8Array): Promise<void> {
    if (hdr.length + payload.length > DS_SLOT_SIZE) return;
    while (this.sqeAvail === 0 && !this.closed) {
      this.progress();
      if (this.sqeAvail > 0) break;
      await new Promise<void>((r) => this.slotWaiters.push(r));
    }
    if (this.closed || !dest.ah) return;
    try {
      this.postDatagram(dest, hdr, payload, 'rsendto');
    } catch {
      /* dropped, as rsocket.c ignores ds_post_send's result here */
    }
  }

  // -- receiving -----------------------------------------------------------------------------

  /**
   * rrecvfrom(): the next datagram into `dst` (at most `dst.length` bytes; the rest of a longer
   * datagram is lost, as with UDP), or {@link RS_EAGAIN}. MSG_PEEK leaves it queued. EINVAL
   * before the socket is bound or used (ds_recvfrom: not readable).
   */
  recvfrom(dst: Uint8Array, flags = 0): DsDatagram | typeof RS_EAGAIN {
    if (!(this.st.state & RsState.readable)) throw rsErr('EINVAL', 'rrecvfrom', 'not bound');
    if (this.pendingDatagrams === 0) this.progress();
    if (this.pendingDatagrams === 0) return RS_EAGAIN;
    const m = this.rmsgs[this.rmsgHead] as DsRmsg;
    const hdr = decodeDsHeader(m.qp.rbuf, m.offset, m.length);
    if (typeof hdr === 'string') throw new Error('unchecked receive');
    const size = m.length - hdr.length;
    const n = Math.min(size, dst.length);
    m.qp.rbuf.copy(dst, 0, m.offset + hdr.length, m.offset + hdr.length + n);
    const from: SockAddr = { address: hdr.address, port: hdr.port, family: hdr.version === 6 ? 'IPv6' : 'IPv4' };
    if (!(flags & MSG_PEEK)) {
      this.rmsgHead++;
      if (this.rmsgHead > 64 && this.rmsgHead * 2 > this.rmsgs.length) {
        this.rmsgs.splice(0, this.rmsgHead);
        this.rmsgHead = 0;
      }
      this.rqeAvail++;
      this.repost(m.qp, m.offset);
      // Receives left in the CQ while the queue was full can now be taken.
      this.progress();
    }
    return { n, size, from };
  }

  /** rrecv(). */
  recv(dst: Uint8Array, flags = 0): number {
    const r = this.recvfrom(dst, flags);
    return r === RS_EAGAIN ? r : r.n;
  }

  /**
   * rrecvmsg(): the next datagram into the vectors in order, and its sender. rsocket.c reads into
   * the first vector only and leaves `msg_name` unset. Control buffers: ENOTSUP, as rrecvmsg.
   */
  recvmsg(msg: { iov: readonly Uint8Array[]; control?: Uint8Array | null }, flags = 0): { n: number; size: number; name: SockAddr } | typeof RS_EAGAIN {
    if (msg.control && msg.control.length) throw rsErr('EOPNOTSUPP', 'rrecvmsg', 'control data');
    const total = msg.iov.reduce((s, v) => s + v.length, 0);
    const tmp = Buffer.alloc(total);
    const r = this.recvfrom(tmp, flags);
    if (r === RS_EAGAIN) return r;
    let pos = 0;
    for (const v of msg.iov) {
      if (pos >= r.n) break;
      const k = Math.min(v.length, r.n - pos);
      v.set(tmp.subarray(pos, pos + k));
      pos += k;
    }
    return { n: r.n, size: r.size, name: r.from };
  }

  private repost(qp: DsQp, offset: number): void {
    try {
      qp.postRecv(offset);
    } catch {
      /* the QP is gone (closing) */
    }
  }

  // -- progress ------------------------------------------------------------------------------

  /** @internal CqEventSink: a completion event was queued on one of the QPs' channels. */
  cqEventQueued(): void {
    if (this.cqTaskQueued) return;
    this.cqTaskQueued = true;
    microtask(this.cqTask);
  }

  private readonly cqTask = (): void => {
    this.cqTaskQueued = false;
    if (this.closed) return;
    for (const q of this.qps) {
      let n = 0;
      while (q.compCh.tryGetCqEvent() !== undefined) n++;
      if (n > 0) {
        q.cq.ackEvents(n);
        q.cq.reqNotify();
      }
    }
    this.progress();
  };

  /**
   * ds_poll_cqs: take the completions of every QP. A receive is queued when there is room for it
   * (rqe_avail) and it is a valid datagram (ds_valid_recv), else its slot is reposted (dropped);
   * with no room, receives stay in their CQ until the application reads. A send's slot returns.
   */
  progress(): void {
    let took = false;
    for (const q of this.qps) {
      for (;;) {
        if (this.rqeAvail === 0 && this.sqeAvail === this.opts.sqSize) break;
        const wcs = q.cq.poll(1);
        const wc = wcs[0];
        if (!wc) break;
        took = true;
        this.completion(q, wc);
        if (this.rqeAvail === 0 && this.sqeAvail > 0) break;
      }
    }
    if (took) this.notifySoon();
  }

  private completion(q: DsQp, wc: Wc): void {
    const id = Number(wc.wrId);
    if (id & DS_WR_RECV) {
      const offset = id & ~DS_WR_RECV;
      const length = wc.byteLen - GRH_LEN;
      const ok = this.rqeAvail > 0 && wc.status === WcStatus.SUCCESS && wc.byteLen >= GRH_LEN && typeof decodeDsHeader(q.rbuf, offset, Math.min(length, DS_SLOT_SIZE)) !== 'string';
      if (ok) {
        this.rqeAvail--;
        this.rmsgs.push({ qp: q, offset, length: Math.min(length, DS_SLOT_SIZE) });
      } else if (wc.status !== WcStatus.WR_FLUSH_ERR) this.repost(q, offset);
      return;
    }
    this.freeSlots.push(id);
    this.sqeAvail++;
    const w = this.slotWaiters.shift();
    if (w) w();
  }

  private notifySoon(): void {
    if (this.notifyQueued) return;
    this.notifyQueued = true;
    microtask(this.notifyTask);
  }

  private readonly notifyTask = (): void => {
    this.notifyQueued = false;
    this.polls.wake();
    this.onNotify?.();
  };

  // -- poll ----------------------------------------------------------------------------------

  /** rs_poll_rs for a datagram socket: POLLIN with a datagram queued, POLLOUT with a send slot free. */
  pollEvents(events: number): number {
    let r = 0;
    if (events & POLLIN && this.pendingDatagrams > 0) r |= POLLIN;
    if (events & POLLOUT && this.sqeAvail > 0) r |= POLLOUT;
    return r;
  }

  /** rpoll() on this socket: the revents once ready, 0 after `timeoutMs` (negative: none). */
  poll(events: number, timeoutMs = -1): Promise<number> {
    if (!this.closed) this.progress();
    const now = this.pollEvents(events);
    if (now !== 0 || timeoutMs === 0 || this.closed) return Promise.resolve(now);
    return this.polls.wait(events, timeoutMs);
  }

  // -- options -------------------------------------------------------------------------------

  /**
   * rsetsockopt(), as rsocket.c's ds_setsockopt: SO_RCVBUF and SO_SNDBUF (doubled), the SOL_SOCKET
   * flags, IPV6_V6ONLY, the SOL_RDMA sizes before the socket is used (EINVAL after); ENOPROTOOPT for
   * an option a UDP socket does not have.
   */
  setsockopt(level: number, name: number, value: number): void {
    this.opts.set(level, name, value, { inUse: this.st.state !== RsState.init, hasQp: this.qps.length > 0, hasSbuf: this.sbuf !== null });
  }

  /** rgetsockopt(): the sizes in use, SO_ERROR (read and cleared), the flags, the SOL_RDMA sizes. */
  getsockopt(level: number, name: number): number {
    return this.opts.get(level, name);
  }

  // -- close ---------------------------------------------------------------------------------

  /**
   * rclose(): stop the UDP service, wait for the sends in flight (ds_shutdown; at most 2 s),
   * then release the QPs, address handles and the UDP socket.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    const end = Date.now() + CLOSE_DRAIN_MS;
    while (this.sqeAvail < this.opts.sqSize && this.sbuf && Date.now() < end) {
      this.progress();
      if (this.sqeAvail >= this.opts.sqSize) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    this.closed = true;
    if (this.st.state !== RsState.init) this.st.move(RsState.init, 'closed');
    for (const w of this.slotWaiters.splice(0)) w();
    this.udp.close();
    for (const d of this.dests.values()) {
      try {
        d.ah?.destroy();
      } catch {
        /* gone */
      }
      d.ah = null;
    }
    this.dests.clear();
    this.connDest = null;
    for (const q of this.qps.splice(0)) await q.destroy();
    this.polls.wake(true);
    this.onNotify?.();
  }

  /** Whether {@link close} ran. */
  get isClosed(): boolean {
    return this.closed;
  }
}
