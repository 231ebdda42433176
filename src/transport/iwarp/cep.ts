/**
 * The iWARP connection endpoint (siw_cm.c's role): TCP connection plus the MPA start-frame
 * exchange (RFC 5044 §7.1, RFC 6581), then hand-off of the connection to a QP.
 *
 * Active side: TCP connect → send MPA Request (rev 2, enhanced IRD/ORD word, P2P with Write and
 * Read RTR offered) → wait ≤10 s for the Reply → negotiate CRC (on iff the Reply's C bit), IRD/ORD,
 * RTR → hand off. Nothing is sent behind the Request until the Reply is in (siw rejects extra
 * bytes behind a start frame).
 * Passive side: wait ≤5 s for the Request (then close, as siw) → validate (markers/bad key/
 * revision/oversized private data: drop or reject as siw does) → report to the CM → accept (Reply
 * echoing rev/C/enhanced, one RTR type if P2P) or reject (Reply with R and private data).
 *
 * Every socket callback and timer is turned into one call of {@link Cep.handle} with a typed work
 * item (siw's CM work queue), which acts on it by the endpoint's state. The state is a
 * {@link StateCell}: every change goes through `move` or `exch` and is traced under `mpa`.
 */
import { TerminateError, TermLayer } from '../../errors.js';
import { Errno } from '../../errno.js';
import { LLP_ETYPE_MPA, MpaEcode, decodeMpaStartFrame, mpaKeyMatches, encodeMpaStartFrame, encodeTerminate, validateMpaReply, validateMpaRequest, type MpaStartFrame } from '../../wire/iwarp/index.js';
import { Llp } from './llp.js';
import { trace, traceEvent, tracing } from '../../trace.js';
import { StateCell } from '../../util/state.js';
import { armDeadline, cancelDeadline, type Deadline, type DeadlineTarget } from '../../util/deadlines.js';

/** siw's hard maximum IRD/ORD. */
export const MAX_IRD_ORD = 128;

/** CEP states (siw's SIW_EPSTATE_*). */
export enum CepState {
  CONNECTING = 'CONNECTING',
  AWAIT_MPAREP = 'AWAIT_MPAREP',
  AWAIT_MPAREQ = 'AWAIT_MPAREQ',
  RECVD_MPAREQ = 'RECVD_MPAREQ',
  RDMA_MODE = 'RDMA_MODE',
  CLOSED = 'CLOSED',
}

/** The states {@link Cep.fail} closes from: all but CLOSED. */
const OPEN_STATES: readonly CepState[] = [CepState.CONNECTING, CepState.AWAIT_MPAREP, CepState.AWAIT_MPAREQ, CepState.RECVD_MPAREQ, CepState.RDMA_MODE];

/** What the active side offers. */
export interface MpaOffer {
  ird: number;
  ord: number;
  privateData: Uint8Array;
  /** Ask for MPA CRC (siw default: no). */
  crc: boolean;
  /** Request peer-to-peer mode with an RTR (default: yes). */
  p2p: boolean;
  /** How long to wait for the MPA Reply (ms; siw: 10 s, MPAREQ_TIMEOUT). */
  replyTimeoutMs: number;
}

/** Result of a successful negotiation, for the QP hand-off. */
export interface MpaResult {
  crc: boolean;
  /** Our IRD and ORD after negotiation. */
  ird: number;
  ord: number;
  /** Active side: the RTR to send; passive side: whether one is expected. */
  rtr: 'write' | 'read' | null;
  p2p: boolean;
  /** The peer's private data (user bytes). */
  privateData: Uint8Array;
  /** Bytes read past the start frame. */
  leftover: Buffer;
}

/** Events a CEP reports to the CM. */
export type CepEvent =
  | { type: 'reply'; result: MpaResult }
  | { type: 'rejected'; privateData: Uint8Array; status: number }
  | { type: 'request'; frame: MpaStartFrame }
  | { type: 'failed'; status: number; reason: string };

/** Work items (socket callbacks and timers become one of these). */
type Work =
  | { w: 'connected' }
  | { w: 'bytes'; buf: Buffer; start: number; end: number }
  | { w: 'closed'; err: Error | undefined }
  | { w: 'timeout' };

let cepIds = 0;

/** No bytes (the empty accumulator of every endpoint). */
const NO_BYTES = Buffer.alloc(0);
const noEvent = (_ev: CepEvent): void => {};
/** The passive side's {@link Cep.tcpConnected}: it is connected from the start. */
const CONNECTED = Promise.resolve(0);

/** One endpoint: a TCP connection during the MPA exchange. */
export class Cep implements DeadlineTarget {
  readonly id = ++cepIds;
  readonly llp: Llp;
  /** The endpoint's state; changed only by `move` and `exch`. */
  private readonly cell: StateCell<CepState>;
  /** Receives the endpoint's events. */
  onEvent: (ev: CepEvent) => void = noEvent;
  private acc: Buffer = NO_BYTES;
  private timer: Deadline | null = null;
  private offer: MpaOffer | null = null;
  private request: MpaStartFrame | null = null;
  private sentRequest: MpaStartFrame | null = null;
  private requestRtr: 'write' | 'read' | null = null;
  private requestTimeoutMs = 0;

  private constructor(llp: Llp, state: CepState) {
    this.llp = llp;
    this.cell = new StateCell<CepState>('mpa', () => `CEP[${this.id}]`, state);
    llp.onClose = (err) => this.handle({ w: 'closed', err });
    llp.setConsumer((buf, start, end) => this.handle({ w: 'bytes', buf, start, end }));
  }

  /** The endpoint's state (siw's SIW_EPSTATE_*). */
  get state(): CepState {
    return this.cell.state;
  }

  private tcpDone: ((status: number) => void) | null = null;
  /** Active side: 0 once TCP is connected (the MPA Request is then on its way), or -errno. */
  tcpConnected: Promise<number> = CONNECTED;

  /** Active open: connect and send the MPA Request. */
  static connect(opts: { host: string; port: number; localAddress?: string; localPort?: number }, offer: MpaOffer): Cep {
    let cep: Cep | null = null;
    const llp = Llp.connect(opts, () => cep?.handle({ w: 'connected' }));
    const c = new Cep(llp, CepState.CONNECTING);
    c.tcpConnected = new Promise((r) => (c.tcpDone = r));
    c.offer = offer;
    cep = c;
    return c;
  }

  /** Passive open on an accepted TCP connection: wait for the MPA Request `timeoutMs` (siw: 5 s). */
  static accepted(llp: Llp, timeoutMs: number): Cep {
    const cep = new Cep(llp, CepState.AWAIT_MPAREQ);
    cep.requestTimeoutMs = timeoutMs;
    cep.arm(timeoutMs);
    return cep;
  }

  /**
   * Time out in `ms`. The expiry waits for one pass of socket reads first: Node runs due timers
   * before it polls sockets, so after this process was busy past the deadline (a saturated CPU, a
   * long synchronous task) the Request or Reply that came in time is still unread when the timer
   * fires — it must win, as it does in a kernel, which reads the socket when the bytes arrive.
   */
  private arm(ms: number): void {
    this.disarm();
    this.timer = armDeadline(ms, this);
  }
  private disarm(): void {
    if (this.timer) cancelDeadline(this.timer);
    this.timer = null;
  }
  /** @internal The deadline of {@link arm} passed (one pass of socket reads after it). */
  deadlineExpired(d: Deadline): void {
    if (this.timer !== d) return;
    this.timer = null;
    this.handle({ w: 'timeout' });
  }

  private trace(msg: string): void {
    if (tracing('mpa')) trace('mpa', `CEP[${this.id}]`, `${this.state}: ${msg}`);
  }

  /** The one place work comes in: what a work item does depends on the state. */
  private handle(work: Work): void {
    switch (this.cell.state) {
      case CepState.CONNECTING:
        if (work.w === 'connected') {
          const o = this.offer as MpaOffer;
          const f: MpaStartFrame = {
            type: 'request',
            markers: false,
            crc: o.crc,
            reject: false,
            enhanced: true,
            rev: 2,
            ird: o.ird,
            ord: o.ord,
            p2p: o.p2p,
            rtrSend: false,
            rtrWrite: o.p2p,
            rtrRead: o.p2p,
            privateData: o.privateData,
          };
          this.llp.write(encodeMpaStartFrame(f));
          this.sentRequest = f;
          this.cell.move(CepState.AWAIT_MPAREP, 'MPA Request sent');
          this.arm(o.replyTimeoutMs);
          this.tcpDone?.(0);
        } else if (work.w === 'closed') {
          // Linux siw connects TCP inside rdma_connect: a refused or failed connect is the
          // call's own error, not an event (measured against the kernel).
          this.cell.move(CepState.CLOSED, `connect failed: ${work.err?.message ?? 'closed'}`);
          this.tcpDone?.(errnoStatus(work.err));
        }
        return;
      case CepState.AWAIT_MPAREP:
        if (work.w === 'bytes') this.gotReplyBytes(work.buf, work.start, work.end);
        else if (work.w === 'timeout') {
          this.fail(-Errno.ETIMEDOUT, `no MPA Reply within ${(this.offer as MpaOffer).replyTimeoutMs} ms`);
          this.llp.abort();
        } else if (work.w === 'closed') this.fail(work.err ? errnoStatus(work.err) : -Errno.ECONNRESET, 'connection closed before the MPA Reply');
        return;
      case CepState.AWAIT_MPAREQ:
        if (work.w === 'bytes') this.gotRequestBytes(work.buf, work.start, work.end);
        else if (work.w === 'timeout') {
          this.trace(`no MPA Request within ${this.requestTimeoutMs} ms: closing`);
          this.close(true);
        } else if (work.w === 'closed') this.close(false);
        return;
      case CepState.RECVD_MPAREQ:
        // RFC 5044: the initiator sends nothing until it has the Reply; bytes now are a protocol error.
        if (work.w === 'bytes') {
          this.trace('data before the MPA Reply: closing');
          this.fail(-Errno.EPROTO, 'peer sent data before the MPA Reply');
          this.llp.abort();
        } else if (work.w === 'closed') this.fail(-Errno.ECONNRESET, 'peer closed while the request was pending');
        return;
      default:
        return;
    }
  }

  /**
   * The bytes of the start frame so far: a frame that comes in one read is decoded where it lies
   * (the decoder copies what it keeps); {@link keepPartial} copies a part that must wait for more.
   */
  private accumulate(buf: Buffer, start: number, end: number): Buffer {
    const piece = buf.subarray(start, end);
    return this.acc.length === 0 ? piece : (this.acc = Buffer.concat([this.acc, piece]));
  }
  private keepPartial(acc: Buffer): void {
    if (acc !== this.acc) this.acc = Buffer.from(acc);
  }

  private gotReplyBytes(buf: Buffer, start: number, end: number): void {
    const acc = this.accumulate(buf, start, end);
    let d;
    try {
      d = decodeMpaStartFrame(acc, 'reply');
    } catch (e) {
      // As siw (siw_proc_mpareply): a bad key gets a TERMINATE LLP/MPA/0x04; a revision above 2
      // or private data over 512 bytes just ends the attempt. Both are CONNECT_ERROR -EINVAL.
      const term = !mpaKeyMatches(acc, 'reply') && e instanceof TerminateError ? e : undefined;
      this.refuseReply(-Errno.EINVAL, `bad MPA Reply: ${(e as Error).message}`, term, false);
      return;
    }
    if ('needMore' in d) {
      this.keepPartial(acc);
      return;
    }
    this.disarm();
    const f = d.frame;
    const leftover = Buffer.from(acc.subarray(d.length));
    this.acc = NO_BYTES;
    const o = this.offer as MpaOffer;
    if (tracing('mpa')) traceEvent('mpa', `CEP[${this.id}]`, 'mpa-reply', { state: this.state, rev: f.rev, crc: f.crc, reject: f.reject, enhanced: f.enhanced, ird: f.ird, ord: f.ord, p2p: f.p2p });
    const v = validateMpaReply(f, this.sentRequest as MpaStartFrame, { maxIrd: MAX_IRD_ORD });
    if (v.action === 'rejected') {
      this.cell.move(CepState.CLOSED, 'MPA Reply rejects');
      // Linux siw reports a peer's MPA reject as REJECTED with -ECONNRESET (measured).
      this.onEvent({ type: 'rejected', privateData: f.privateData, status: -Errno.ECONNRESET });
      this.llp.end();
      return;
    }
    if (v.action === 'fail') {
      // siw sends a TERMINATE (LLP/MPA) for insufficient IRD and no matching RTR, else just closes.
      this.refuseReply(v.status, v.reason, v.terminate, f.crc);
      return;
    }
    const ird = v.ird ?? o.ird;
    const ord = Math.min(v.ord ?? o.ord, MAX_IRD_ORD);
    const rtr = v.rtr;
    this.cell.move(CepState.RDMA_MODE, 'MPA Reply accepted');
    this.llp.onClose = null;
    this.llp.setConsumer(null);
    this.onEvent({ type: 'reply', result: { crc: v.crc, ird, ord, rtr, p2p: rtr !== null, privateData: f.privateData, leftover } });
  }

  private gotRequestBytes(buf: Buffer, start: number, end: number): void {
    const acc = this.accumulate(buf, start, end);
    let d;
    try {
      d = decodeMpaStartFrame(acc, 'request');
    } catch (e) {
      if (tracing('mpa')) this.trace(`bad MPA Request (${(e as Error).message}): dropping`);
      this.close(true);
      return;
    }
    if ('needMore' in d) {
      this.keepPartial(acc);
      return;
    }
    this.disarm();
    if (d.length < acc.length) {
      // siw: bytes queued behind the start frame are a protocol error.
      this.trace('data behind the MPA Request: dropping');
      this.close(true);
      return;
    }
    this.acc = NO_BYTES;
    const f = d.frame;
    const verdict = validateMpaRequest(f);
    this.request = f;
    if (verdict.action === 'reject') {
      if (tracing('mpa')) this.trace(`MPA Request refused (${verdict.reason}): replying with reject`);
      this.sendRejectFrame(new Uint8Array(0));
      return;
    }
    this.requestRtr = verdict.rtr;
    this.cell.move(CepState.RECVD_MPAREQ, 'MPA Request valid');
    if (tracing('mpa')) traceEvent('mpa', `CEP[${this.id}]`, 'mpa-request', { state: this.state, rev: f.rev, crc: f.crc, ird: f.ird, ord: f.ord, p2p: f.p2p, privateDataLength: f.privateData.length });
    this.onEvent({ type: 'request', frame: f });
  }

  /** The request as received (passive side). */
  get peerRequest(): MpaStartFrame | null {
    return this.request;
  }

  /**
   * Passive accept: compute the final IRD/ORD as siw does, send the Reply echoing the request's
   * rev/C/enhanced bits, and return the negotiated parameters for the QP hand-off.
   */
  accept(ulpIrd: number, ulpOrd: number, privateData: Uint8Array): MpaResult {
    const req = this.request;
    if (!req || !this.cell.is(CepState.RECVD_MPAREQ)) throw new TerminateError(TermLayer.LLP, LLP_ETYPE_MPA, MpaEcode.LOCAL_CATASTROPHIC, 'accept without a pending request');
    let ird = ulpIrd;
    let ord = ulpOrd;
    let rtr: 'write' | 'read' | null = null;
    if (req.enhanced) {
      const peerIrd = Math.min(req.ird ?? 0, MAX_IRD_ORD);
      const peerOrd = Math.min(req.ord ?? 0, MAX_IRD_ORD);
      if (ord > peerIrd) ord = peerIrd;
      if (ird < peerOrd) ird = peerOrd;
      rtr = this.requestRtr;
    }
    const rep: MpaStartFrame = {
      type: 'reply',
      markers: false,
      crc: req.crc,
      reject: false,
      enhanced: req.enhanced,
      rev: req.rev,
      privateData,
    };
    if (req.enhanced) {
      rep.ird = ird;
      rep.ord = ord;
      rep.p2p = rtr !== null;
      rep.rtrSend = false;
      rep.rtrWrite = rtr === 'write';
      rep.rtrRead = rtr === 'read';
    }
    this.llp.write(encodeMpaStartFrame(rep));
    this.cell.move(CepState.RDMA_MODE, 'accept');
    this.llp.onClose = null;
    this.llp.setConsumer(null);
    if (tracing('mpa')) traceEvent('mpa', `CEP[${this.id}]`, 'mpa-reply-sent', { state: this.state, ird, ord, rtr });
    return { crc: req.crc, ird, ord, rtr, p2p: rtr !== null, privateData: req.privateData, leftover: NO_BYTES };
  }

  /** Passive reject: Reply with R set and the private data (request rev ≥ 1), then close. */
  reject(privateData: Uint8Array): void {
    if (!this.cell.is(CepState.RECVD_MPAREQ)) return;
    this.sendRejectFrame(privateData);
  }

  private sendRejectFrame(privateData: Uint8Array): void {
    const req = this.request;
    const rep: MpaStartFrame = {
      type: 'reply',
      markers: false,
      crc: false,
      reject: true,
      enhanced: req?.enhanced ?? false,
      rev: req?.rev ?? 1,
      privateData,
    };
    if (rep.enhanced) {
      rep.ird = 0;
      rep.ord = 0;
      rep.p2p = false;
    }
    this.llp.write(encodeMpaStartFrame(rep));
    this.close(true);
  }

  /**
   * Give up on an MPA Reply we refuse: with `term`, siw's TERMINATE goes out first and the
   * connection closes gracefully behind it; without, it is aborted.
   */
  private refuseReply(status: number, reason: string, term: TerminateError | undefined, crc: boolean): void {
    if (term) this.llp.write(encodeTerminate(term, { crc }));
    this.fail(status, reason);
    if (term) this.llp.end();
    else this.llp.abort();
  }

  private fail(status: number, reason: string): void {
    if (!this.cell.exch(OPEN_STATES, CepState.CLOSED, `failed: ${reason}`)) return;
    this.disarm();
    this.onEvent({ type: 'failed', status, reason });
  }

  /** Close the endpoint (graceful FIN or not). */
  close(graceful: boolean): void {
    this.disarm();
    const was = this.cell.move(CepState.CLOSED, graceful ? 'closed' : 'aborted');
    if (graceful) this.llp.end();
    else this.llp.abort();
    if (was === CepState.RECVD_MPAREQ) this.onEvent({ type: 'failed', status: -Errno.ECONNRESET, reason: 'closed' });
  }
}

/** Map a socket error to a negative errno status (as the kernel reports in CM events). */
export function errnoStatus(e: Error | undefined): number {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ECONNREFUSED':
      return -Errno.ECONNREFUSED;
    case 'ETIMEDOUT':
      return -Errno.ETIMEDOUT;
    case 'ECONNRESET':
      return -Errno.ECONNRESET;
    case 'EHOSTUNREACH':
      return -Errno.EHOSTUNREACH;
    case 'ENETUNREACH':
      return -Errno.ENETUNREACH;
    case 'EADDRINUSE':
      return -Errno.EADDRINUSE;
    case 'EADDRNOTAVAIL':
      return -Errno.EADDRNOTAVAIL;
    default:
      return e ? -Errno.EIO : -Errno.ECONNRESET;
  }
}
