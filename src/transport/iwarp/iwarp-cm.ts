/**
 * The iWARP connection manager (the kernel's iw_cm + siw_cm.c roles behind cma.c): the CM
 * transport of the software iWARP device. A connection is a TCP connection whose MPA exchange
 * (cep.ts) carries the private data and the IRD/ORD negotiation; once negotiated, the socket is
 * handed to the QP (`IwarpQp.attachLlp`) with the FPDU size of the path, and the QP is in RTS.
 *
 * Events reported to the CM (see `CmUpcall`): ESTABLISHED (active: on the MPA Reply; passive: on
 * accept, or on the initiator's first FPDU in peer-to-peer mode), REJECTED (the peer's MPA reject
 * -104, markers -111 ...), UNREACHABLE (no Reply in time, -110), CONNECT_ERROR (bad Reply),
 * DISCONNECTED (FIN, RST, TERMINATE or rdma_disconnect; a peer-to-peer accept whose connection
 * closed before its RTR gets ESTABLISHED first, as from the kernel). iWARP has no CONNECT_RESPONSE, TIMEWAIT_EXIT, SIDR or multicast.
 */
import net from 'node:net';
import { RdmaError, err } from '../../errors.js';
import { Errno, type ErrnoCode } from '../../errno.js';
import { isAnyIp, unmapV4 } from '../../util/ip.js';
import { Access, QpState } from '../../verbs/types.js';
import { QpAttrMask, type QpAttr } from '../../verbs/qp-attr.js';
import {
  CmEventType,
  PortSpace,
  registerCmTransport,
  type AcceptRequest,
  type CmEndpoint,
  type CmHost,
  type CmListener,
  type CmTransport,
  type ConnectRequest,
  type IncomingRequest,
  type ListenRequest,
  type SockAddr,
} from '../../cm/transport.js';
import { Cep, CepState, type MpaResult } from './cep.js';
import { acceptLlps, type Llp } from './llp.js';
import { IwarpQp, type LlpDownInfo, type LlpParams } from './iwarp-qp.js';
import { iwarpConfig } from './config.js';
import { SIW_PROVIDER } from './provider.js';
import { iwarpFaultsWantCrc } from './faults.js';

/** Private data limit on iWARP (256-byte MPA limit minus the 4-byte IRD/ORD word). */
export const IWARP_MAX_PRIVATE_DATA = 252;

/** What rdma_init_qp_attr sets for INIT and RTR on iWARP: state and access flags (iw_cm), port (cma.c). */
const INIT_MASK = QpAttrMask.STATE | QpAttrMask.ACCESS_FLAGS | QpAttrMask.PORT;
/** The QP access iw_cm grants at INIT and RTR: local write, remote write, remote read. */
const INIT_ACCESS = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;

/** IPv4 + TCP header bytes per segment. */
const IPV4_TCP_HEADERS = 40;
/** IPv6 + TCP header bytes per segment. */
const IPV6_TCP_HEADERS = 60;
/** The TCP timestamp option every Linux segment carries (`mss_cache`: 1500-byte MTU → 1448). */
const TCP_TIMESTAMP_OPTION = 12;
/** The largest FPDU (a 16-bit ULPDU length plus the MPA length field and CRC). */
const MAX_FPDU = 65535 + 6;

/**
 * The FPDU size of a connection on an interface of MTU `mtu`: siw's `tcp_seglen`, the TCP MSS
 * rounded down to a multiple of 8 (siw_update_tcpseg), so that every full FPDU is one segment.
 */
export function fpduMaxFor(mtu: number, v6: boolean): number {
  return Math.min(mtu - (v6 ? IPV6_TCP_HEADERS : IPV4_TCP_HEADERS) - TCP_TIMESTAMP_OPTION, MAX_FPDU) & ~7;
}

/** The iWARP half of one rdma_cm_id. */
class IwarpEndpoint implements CmEndpoint {
  /** The MPA endpoint while connecting or while a request waits for accept/reject. */
  private cep: Cep | null = null;
  /** The QP carrying the connection (the id's, or one the application created: `qpNum`). */
  private qp: IwarpQp | null = null;
  /** The QP has the connection. */
  private connected = false;
  /** The ESTABLISHED of a peer-to-peer accept, reported on the initiator's RTR or at the connection's end. */
  private pendingEstablished: (() => void) | null = null;
  private dead = false;
  /**
   * The id has its iw_cm id: from rdma_connect (unless the call itself fails), or from the
   * connect request it was made for. Before that rdma_init_qp_attr grants no access (cma.c).
   */
  private iwId = false;

  constructor(private readonly host: CmHost) {}

  /** A listener's request becomes this endpoint's (passive side). */
  takeRequest(cep: Cep): void {
    this.cep = cep;
    this.iwId = true;
    // The requester going away before accept/reject is reported to nobody (siw_cm.c: a peer
    // close in RECVD_MPAREQ waits for the ULP); the endpoint keeps the request, so that
    // rdma_accept and rdma_reject fail with ECONNRESET, as siw_accept / siw_reject do.
  }

  async connect(req: ConnectRequest): Promise<void> {
    const op = 'rdma_connect';
    const qp = iwarpQp(req.qp, op);
    const cfg = iwarpConfig(this.host.context?.device.name);
    const opts: { host: string; port: number; localAddress?: string; localPort?: number } = { host: req.dst.address, port: req.dst.port };
    if (req.bind.address !== undefined) opts.localAddress = req.bind.address;
    if (req.bind.port !== undefined) opts.localPort = req.bind.port;
    const src = req.src;
    const cep = Cep.connect(opts, { ird: req.responderResources, ord: req.initiatorDepth, privateData: req.privateData, crc: cfg.crc || iwarpFaultsWantCrc(), p2p: cfg.p2p, replyTimeoutMs: cfg.mpaReplyTimeoutMs });
    this.cep = cep;
    this.iwId = true;
    cep.onEvent = (ev) => {
      if (this.dead) return;
      switch (ev.type) {
        case 'reply': {
          this.cep = null;
          const r = ev.result;
          const llp = cep.llp;
          const localAddr: SockAddr = { address: unmapV4(llp.localAddress ?? src.address), port: llp.localPort ?? src.port, family: src.family ?? 'IPv4' };
          this.goLive(qp, llp, r, true, localAddr);
          this.host.upcall({ event: CmEventType.ESTABLISHED, conn: { privateData: r.privateData, responderResources: r.ird, initiatorDepth: r.ord }, localAddr });
          return;
        }
        case 'rejected':
          this.cep = null;
          this.host.upcall({ event: CmEventType.REJECTED, status: ev.status, conn: { privateData: ev.privateData } });
          return;
        case 'failed': {
          this.cep = null;
          const t = ev.status === -Errno.ECONNREFUSED || ev.status === -Errno.ECONNRESET ? CmEventType.REJECTED : ev.status === -Errno.ETIMEDOUT ? CmEventType.UNREACHABLE : CmEventType.CONNECT_ERROR;
          this.host.upcall({ event: t, status: ev.status });
          return;
        }
        default:
          return;
      }
    };
    const tcp = await cep.tcpConnected;
    if (tcp !== 0) {
      // The TCP connect failed: rdma_connect itself fails with that errno (siw connects inside
      // the call) and no event follows.
      if (this.cep === cep) this.cep = null;
      this.iwId = false;
      throw RdmaError.fromErrno(-tcp, { op });
    }
  }

  async accept(req: AcceptRequest): Promise<void> {
    const op = 'rdma_accept';
    const cep = this.cep;
    if (!cep || this.connected) throw err('EINVAL', op, 'no pending connect request');
    const qp = iwarpQp(req.qp, op);
    if (cep.state !== CepState.RECVD_MPAREQ) {
      this.cep = null;
      throw err('ECONNRESET', op, 'the requester closed the connection');
    }
    const r = cep.accept(req.responderResources, req.initiatorDepth, req.privateData);
    this.cep = null;
    const conn = { responderResources: r.ird, initiatorDepth: r.ord };
    const established = (): void => this.host.upcall({ event: CmEventType.ESTABLISHED, conn });
    this.pendingEstablished = r.p2p ? established : null;
    this.goLive(qp, cep.llp, r, false, this.host.localAddr, r.p2p ? () => this.flushEstablished() : undefined);
    if (!r.p2p) established();
  }

  reject(privateData: Uint8Array): void {
    const cep = this.cep;
    if (!cep) throw err('EINVAL', 'rdma_reject', 'no pending connect request');
    this.cep = null;
    if (cep.state !== CepState.RECVD_MPAREQ) throw err('ECONNRESET', 'rdma_reject', 'the requester closed the connection');
    cep.reject(privateData);
  }

  /** iWARP connections are established by rdma_connect itself: the kernel refuses it (EINVAL). */
  establish(): void {
    throw err('EINVAL', 'rdma_establish', 'not used on iWARP');
  }

  /**
   * rdma_notify: nothing to do on iWARP (cma.c `rdma_notify` passes events to the IB CM only);
   * EINVAL before the id has its iw_cm id, as the kernel's `!id_priv->cm_id.iw` check.
   */
  notify(_event: number): void {
    if (!this.iwId) throw err('EINVAL', 'rdma_notify', 'no connection yet');
  }

  disconnect(): boolean {
    if (this.connected && this.qp) {
      // Queued sends go out, then FIN; the QP goes to ERR; llpDown reports DISCONNECTED.
      this.qp.disconnect();
      return true;
    }
    if (this.cep) {
      this.cep.close(true);
      this.cep = null;
    }
    return false;
  }

  /**
   * The kernel's answer (cma.c rdma_init_qp_attr over iw_cm_init_qp_attr), the port always
   * included: before the id has its iw_cm id, the state with no access whatever the state; then
   * INIT and RTR give the state with local write, remote write and remote read access, RTS only
   * the port (the CM moves the QP to RTS itself), any other state EINVAL.
   */
  initQpAttr(state: QpState): { attr: QpAttr; mask: number } {
    const portNum = this.host.portNum || 1;
    if (!this.iwId) return { attr: { qpState: state, qpAccessFlags: 0, portNum }, mask: INIT_MASK };
    if (state === QpState.INIT || state === QpState.RTR) return { attr: { qpState: state, qpAccessFlags: INIT_ACCESS, portNum }, mask: INIT_MASK };
    if (state === QpState.RTS) return { attr: { qpState: state, portNum }, mask: QpAttrMask.PORT };
    throw err('EINVAL', 'rdma_init_qp_attr', `state ${state}`);
  }

  destroy(): void {
    this.dead = true;
    if (this.cep) {
      // A connect request never accepted: iw_cm rejects it on destroy (the peer gets REJECTED);
      // an active connect in progress is aborted.
      if (this.cep.state === CepState.RECVD_MPAREQ) this.cep.reject(new Uint8Array(0));
      else this.cep.close(false);
      this.cep = null;
    }
    if (this.connected && this.qp) {
      this.connected = false;
      this.qp.abort();
    }
    this.qp = null;
  }

  /** Hand the negotiated connection to the QP and watch for its end. */
  private goLive(qp: IwarpQp, llp: Llp, r: MpaResult, active: boolean, local: SockAddr | null, onFirst?: () => void): void {
    const ctx = this.host.context;
    const cfg = iwarpConfig(ctx?.device.name);
    this.qp = qp;
    qp.ird = r.ird;
    qp.ord = r.ord;
    qp.onLlpDown = (info) => this.llpDown(info);
    if (qp.state === QpState.INIT) qp.modify({ qpState: QpState.RTR });
    // Both ends of a TCP connection are of one family; our side is known without a getsockname(2)
    // (the address is unmapped: a v4-mapped local address counts as IPv4, as its MSS does).
    const v6 = (local?.address ?? '').includes(':');
    const p: LlpParams = {
      crc: r.crc,
      fpduMax: fpduMaxFor(ctx?.device.info.mtu ?? 1500, v6),
      holdTx: !active && !r.p2p,
      holdGraceMs: cfg.holdGraceMs,
    };
    if (active && r.rtr) p.rtr = r.rtr;
    let nudge: NodeJS.Timeout | null = null;
    const base = cfg.rtrNudgeMs;
    // Peers on this host (loopback or a local address) only when this kernel runs siw: siw
    // attaches to `lo` as well (loopback_enabled), and its race is a window between two of its
    // own steps, whatever the link.
    if (active && r.rtr === 'write' && base > 0 && (!this.peerIsLocal() || cfg.nudgeLocalPeers())) {
      // Linux siw as a P2P responder installs its RTR reader only after sending the MPA Reply
      // (siw_accept: siw_send_mpareqrep, then siw_sk_assign_rtr_upcalls): bytes landing in
      // between sit unread until more bytes arrive, and the responder never reports ESTABLISHED
      // (seen with kernel 6.1 under emulation: `cm_llp_data_ready: cep state 7`; the gap lasted
      // over 50 ms there, and destroying such an id later hit the kernel's BUG at iwcm.c:969).
      // While the peer has sent nothing, another zero-length RDMA Write (no placement, no
      // completion) makes siw read the socket again: after 50 ms, then 4 times the previous wait
      // (50, 250, 1050, 4250 ms), so an idle connection costs at most four 20-byte writes.
      let wait = base;
      const again = (): void => {
        nudge = null;
        if (qp.llp !== llp || llp.isClosed) return;
        if (qp.sqDepth === 0 && qp.tx.pendingCb === 0) qp.tx.sendRtr('write');
        wait *= 4;
        if (wait > base * 64) return;
        nudge = setTimeout(again, wait);
        nudge.unref();
      };
      nudge = setTimeout(again, wait);
      nudge.unref();
    }
    if (onFirst || nudge) {
      p.onFirstFpdu = () => {
        if (nudge) clearTimeout(nudge);
        nudge = null;
        onFirst?.();
      };
    }
    this.connected = true;
    qp.attachLlp(llp, p, r.leftover);
  }

  /** The peer is this host (loopback or one of our addresses): its stack runs in this kernel. */
  private peerIsLocal(): boolean {
    const d = this.host.peerAddr?.address;
    return d !== undefined && this.host.isLocalAddress(d);
  }

  private llpDown(_info: LlpDownInfo): void {
    if (!this.connected) return;
    this.connected = false;
    // A P2P accept whose connection ended before the RTR: ESTABLISHED, then DISCONNECTED, as the
    // kernel delivers (siw's RTR reader reports ESTABLISHED on the peer's FIN, then its
    // peer-close work DISCONNECT and CLOSE; iw_cm promises ESTABLISHED before CLOSE on the
    // passive side). An error event here would end servers that exit on any CM error (rping).
    this.flushEstablished();
    this.host.upcall({ event: CmEventType.DISCONNECTED, status: 0 });
  }

  /** Reports the ESTABLISHED of a P2P accept, once: on the first FPDU, or when the connection ends. */
  private flushEstablished(): void {
    const f = this.pendingEstablished;
    this.pendingEstablished = null;
    f?.();
  }
}

/** The QP a connect/accept uses: an iWARP QP is required (iw_cm_connect: `iw_get_qp`). */
function iwarpQp(qp: unknown, op: string): IwarpQp {
  if (qp instanceof IwarpQp) return qp;
  throw err('EINVAL', op, 'no QP (iWARP needs a QP to connect)');
}

/**
 * rdma_listen on iWARP: a TCP listener on the bound address (a wildcard: every interface). Each
 * accepted connection gets an MPA endpoint; its request becomes CONNECT_REQUEST on the device
 * owning the address the requester reached.
 */
async function listen(host: CmHost, req: ListenRequest): Promise<CmListener> {
  const op = 'rdma_listen';
  const src = req.addr;
  const server = net.createServer({ noDelay: true, pauseOnConnect: true });
  let closed = false;
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      const code = (e.code ?? 'EIO') as ErrnoCode;
      reject(e.code === 'EADDRINUSE' || e.code === 'EADDRNOTAVAIL' || e.code === 'EACCES' ? err(code, op, `${src.address}:${src.port}`) : new RdmaError('EIO', { op, cause: e }));
    });
    const lo: net.ListenOptions = { port: src.port, backlog: req.backlog };
    const afOnly = host.options.afOnly;
    if (!(src.address === '::' && !afOnly)) lo.host = src.address;
    if (src.address === '::') lo.ipv6Only = afOnly;
    server.listen(lo, () => {
      acceptLlps(server, (llp) => {
        if (closed) llp.abort();
        else incoming(host, llp, () => closed);
      });
      const a = server.address();
      resolve(a && typeof a === 'object' ? a.port : src.port);
    });
  });
  server.on('error', () => {});
  return {
    port,
    close: () => {
      closed = true;
      server.close();
    },
    holdLoop: (on) => {
      if (on) server.ref();
      else server.unref();
    },
  };
}

/** A TCP connection reached a listener: wait for its MPA Request, then report it. */
function incoming(host: CmHost, llp: Llp, isClosed: () => boolean): void {
  // The device is known once the request says which address it reached: the listener's device
  // (bound to one address) or the defaults set the request timeout.
  const cep = Cep.accepted(llp, iwarpConfig(host.context?.device.name).mpaRequestTimeoutMs);
  const ts = llp.socket;
  cep.onEvent = (ev) => {
    if (ev.type !== 'request') return;
    if (isClosed()) {
      cep.close(false);
      return;
    }
    const f = ev.frame;
    // Bound to one address, the listener's address and port are the connection's: no
    // getsockname(2) (the wildcard asks which of ours the peer reached).
    const ls = host.localAddr as SockAddr;
    const specific = !isAnyIp(ls.address);
    const local = unmapV4(specific ? ls.address : (ts.localAddress ?? ''));
    const dev = host.deviceFor(local);
    if (!dev) {
      cep.close(false);
      return;
    }
    const remote = unmapV4(ts.remoteAddress ?? '');
    let adopted = false;
    const request: IncomingRequest = {
      context: dev.open(),
      portNum: 1,
      local: { address: local, port: specific ? ls.port : (ts.localPort ?? 0), family: local.includes(':') ? 'IPv6' : 'IPv4' },
      remote: { address: remote, port: ts.remotePort ?? 0, family: remote.includes(':') ? 'IPv6' : 'IPv4' },
      // The requester's IRD/ORD seen from our side: its ORD is what we must answer (our
      // responder resources), its IRD bounds our initiator depth (cma.c iw handler).
      conn: {
        privateData: f.privateData,
        responderResources: f.enhanced ? (f.ord ?? 0) : 1,
        initiatorDepth: f.enhanced ? (f.ird ?? 0) : 1,
      },
      adopt: (child) => {
        if (adopted) throw err('EINVAL', 'rdma_listen', 'request already adopted');
        adopted = true;
        const ep = new IwarpEndpoint(child);
        ep.takeRequest(cep);
        return ep;
      },
      refuse: () => cep.close(false),
    };
    host.upcall({ event: CmEventType.CONNECT_REQUEST, request });
  };
}

/** The iWARP CM transport of the `siw` provider. */
export const iwarpCmTransport: CmTransport = {
  name: 'iwcm',
  provider: SIW_PROVIDER,
  portSpaces: [PortSpace.TCP, PortSpace.IB],
  privateDataLimits: {
    connect: IWARP_MAX_PRIVATE_DATA,
    accept: IWARP_MAX_PRIVATE_DATA,
    reject: IWARP_MAX_PRIVATE_DATA,
    udConnect: 0,
    udAccept: 0,
  },
  createEndpoint: (host) => new IwarpEndpoint(host),
  listen,
};

registerCmTransport(iwarpCmTransport);
