/**
 * Service ID resolution, the IB CM's datagram exchange (cm.c `ib_send_cm_sidr_req`,
 * `cm_sidr_req_handler`, `ib_send_cm_sidr_rep`, `cm_sidr_rep_handler`), as rdma_cm uses it over
 * RoCE for UD ids.
 *
 * Requester ({@link SidrQuery}): a SIDR_REQ to QP1 of the peer, service ID
 * `(port space << 16) | port`, P_Key 0xFFFF, TID and request ID from ids.ts; sent again every
 * `sidrTimeoutMs` up to `sidrRetries` times, then the query times out. A SIDR_REP is taken only
 * from the address and the GSI QP its SIDR_REQ went to; one from anywhere else is dropped and
 * counted (`rcvd_mad_src_drop`), so a third host that learns or guesses a request ID cannot
 * point the requester at a QP of its choice; one for no query of ours is dropped and counted
 * (`rcvd_mad_unroutable_drop`).
 *
 * Responder ({@link sidrRequestIn}): a SIDR_REQ for a service nobody here listens to is refused
 * (status 1, unsupported service); one for a listener goes to rdma_cm's handler, which holds it
 * against the listener's backlog or refuses it. A held request is remembered a while, and a
 * duplicate answered with the SIDR_REP it got; a refusal is not remembered (a duplicate is
 * refused again the same way), so forged requests for unknown services leave nothing behind.
 * Answers no application gave go within the device's reply budget (reply-limit.ts).
 */
import { CmSidrStatus, encodeCmMad, type CmSidrRep, type CmSidrReq } from '../../../wire/roce/index.js';
import type { CmHost } from '../../../cm/transport.js';
import type { RoceDevice } from '../device.js';
import type { RxMeta } from '../datagram.js';
import { sidrConfig } from './config.js';
import { newRequestId, releaseRequestId, sidrTid } from './ids.js';
import { findListener, sidrBacklog, type Listener } from './listeners.js';
import { dropForeign, dropMad, fromPeer, sendMad } from './mad-agent.js';
import { mayReply } from './reply-limit.js';

// -- requester ------------------------------------------------------------------------------------

/** What a query reports, once: the SIDR_REP, or that the resends ran out. */
export interface SidrQueryEvents {
  reply(rep: CmSidrRep): void;
  timeout(): void;
}

/** Queries waiting for a SIDR_REP, by request ID. */
const waiting = new Map<number, SidrQuery>();

/** One SIDR_REQ in flight, from `local` to QP1 at `remote`, until answered, timed out or cancelled. */
export class SidrQuery {
  readonly requestId: number;
  private timer: NodeJS.Timeout | null = null;
  private done = false;

  constructor(
    readonly dev: RoceDevice,
    readonly local: string,
    readonly remote: string,
    readonly family: 4 | 6,
    serviceId: bigint,
    privateData: Uint8Array,
    private readonly on: SidrQueryEvents,
  ) {
    const requestId = newRequestId(dev.agent);
    this.requestId = requestId;
    const mad = encodeCmMad({ kind: 'SIDR_REQ', requestId, pkey: 0xffff, reserved: 0, serviceId, privateData }, sidrTid(dev.agent, requestId));
    waiting.set(requestId, this);
    let tries = 0;
    const sendOnce = (): void => {
      if (this.done) return;
      if (tries > sidrConfig.sidrRetries) {
        this.cancel();
        this.on.timeout();
        return;
      }
      tries++;
      sendMad(dev, mad, local, remote, family);
      this.timer = setTimeout(sendOnce, sidrConfig.sidrTimeoutMs);
    };
    sendOnce();
  }

  /** The SIDR_REP for this query (its source checked): it is over. */
  answered(rep: CmSidrRep): void {
    this.cancel();
    this.on.reply(rep);
  }

  /** No more resends, no report; the request ID is free again. */
  cancel(): void {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (waiting.get(this.requestId) === this) {
      waiting.delete(this.requestId);
      releaseRequestId(this.requestId);
    }
  }
}

/** A SIDR_REP: for the query it names, and only from where that query went. */
export function sidrReplyIn(dev: RoceDevice, m: CmSidrRep, meta: RxMeta, srcQp: number): void {
  const q = waiting.get(m.requestId);
  if (q === undefined) return dropMad(dev, dev.name, `SIDR_REP for unknown request 0x${m.requestId.toString(16)}`);
  if (!fromPeer(q.remote, meta, srcQp)) return dropForeign(dev, dev.name, `SIDR_REP 0x${m.requestId.toString(16)} from ${meta.src} QP ${srcQp}: not where the request went`);
  q.answered(m);
}

// -- responder ------------------------------------------------------------------------------------

/** A SIDR_REQ this side received, until answered (and kept a while to answer duplicates). */
export interface SidrRequest {
  requestId: number;
  tid: bigint;
  serviceId: bigint;
  /** Our address the request reached, the requester's address. */
  local: string;
  remote: string;
  family: 4 | 6;
  dev: RoceDevice;
  /** The SIDR_REP sent, resent for a duplicate request. */
  lastRep: Uint8Array | null;
  /** The listener whose backlog this unanswered request holds a place of. */
  backlogOf: CmHost | null;
}

/** rdma_cm's handler of a SIDR_REQ for listener `l`: hold it ({@link holdSidr}) and report it, or refuse it. */
export type SidrRequestHandler = (req: SidrRequest, m: CmSidrReq, l: Listener, meta: RxMeta) => void;

/** The fields of a SIDR_REP its sender chooses. */
export type SidrAnswer = Pick<CmSidrRep, 'status' | 'qpn' | 'qkey' | 'privateData'>;

/** Requests held, by `remote/requestId`, to answer duplicates. */
const received = new Map<string, SidrRequest>();
/** How long a held request is remembered for duplicates (ms). */
const RECEIVED_KEEP_MS = 30_000;

/** A SIDR_REQ: a duplicate gets its answer again; one for a listener goes to `handler`. */
export function sidrRequestIn(dev: RoceDevice, m: CmSidrReq, tid: bigint, meta: RxMeta, handler: SidrRequestHandler): void {
  const dup = received.get(receivedKey(meta.src, m.requestId));
  if (dup) {
    if (dup.lastRep && mayReply(dev)) sendMad(dev, dup.lastRep, dup.local, dup.remote, dup.family);
    return;
  }
  const req: SidrRequest = { requestId: m.requestId, tid, serviceId: m.serviceId, local: meta.dst, remote: meta.src, family: meta.family, dev, lastRep: null, backlogOf: null };
  const l = findListener(m.serviceId);
  if (l === undefined) return refuseSidr(req, CmSidrStatus.UNSUPPORTED);
  handler(req, m, l, meta);
}

/** Refuse `req` with `status`, within the reply budget, without remembering it. */
export function refuseSidr(req: SidrRequest, status: number): void {
  answerSidr(req, { status, qpn: 0, qkey: 0, privateData: new Uint8Array(0) }, true);
}

/** `req` is reported to listener `host`: it holds a place of its backlog, and is remembered for duplicates. */
export function holdSidr(req: SidrRequest, host: CmHost): void {
  req.backlogOf = host;
  sidrBacklog.take(host);
  const key = receivedKey(req.remote, req.requestId);
  received.set(key, req);
  setTimeout(() => {
    if (received.get(key) === req) received.delete(key);
  }, RECEIVED_KEEP_MS).unref();
}

/** `req` is answered (or dropped): its place in the listener's backlog is free again. */
export function releaseSidr(req: SidrRequest): void {
  const h = req.backlogOf;
  if (!h) return;
  req.backlogOf = null;
  sidrBacklog.leave(h);
}

/** Answer `req`; an answer no application gave (`unsolicited`) goes within the reply budget. */
export function answerSidr(req: SidrRequest, answer: SidrAnswer, unsolicited = false): void {
  const msg: CmSidrRep = {
    kind: 'SIDR_REP',
    requestId: req.requestId,
    addInfoLength: 0,
    vendorId: 0,
    addInfo: new Uint8Array(72),
    serviceId: req.serviceId,
    ...answer,
  };
  releaseSidr(req);
  req.lastRep = encodeCmMad(msg, req.tid);
  if (!unsolicited || mayReply(req.dev)) sendMad(req.dev, req.lastRep, req.local, req.remote, req.family);
}

function receivedKey(remote: string, requestId: number): string {
  return `${remote}/${requestId}`;
}
