/**
 * How a CM id's events reach the application: posted on the id's event channel — the one it was
 * created on, or, for a synchronous id (created with `channel = null`), a private one that the
 * id's own calls read (librdmacm's `ucma_complete()`: each call waits for its event, and an error
 * event becomes an errno-coded {@link RdmaError}, REJECTED → ECONNREFUSED, status s → errno |s|).
 * It also counts the id's events not yet acknowledged, which rdma_destroy_id and rdma_migrate_id
 * wait for.
 */
import { RdmaError, err } from '../errors.js';
import { Errno } from '../errno.js';
import { traceEvent, tracing } from '../trace.js';
import type { AhAttr } from '../verbs/ah.js';
import { EventChannel } from './event-channel.js';
import { CmEventType, rdmaEventStr, type CmEvent, type CmEventCommon, type EventConnParam, type UdParam } from './events.js';
import type { CmId } from './cm-id.js';

/** The private data of an event that carries none (a shared empty view: it cannot be written). */
export const NO_PRIVATE_DATA = new Uint8Array(0);

/** `param.ud` of an event that is not about UD (shared and frozen). */
const NO_UD_PARAM: UdParam = Object.freeze({
  privateData: NO_PRIVATE_DATA,
  ahAttr: Object.freeze({ isGlobal: false, portNum: 0 }) as AhAttr,
  qpNum: 0,
  qkey: 0,
});

/** Synchronous calls wait on these outcomes (and reject on the error ones). */
const ERROR_EVENTS = new Set([
  CmEventType.ADDR_ERROR,
  CmEventType.ROUTE_ERROR,
  CmEventType.CONNECT_ERROR,
  CmEventType.UNREACHABLE,
  CmEventType.REJECTED,
  CmEventType.DEVICE_REMOVAL,
]);

/** `param.conn` of an event: what the transport reported over the defaults (zeros, no private data). */
function eventConnParam(c: Partial<EventConnParam> | undefined): EventConnParam {
  if (c === undefined) return { privateData: NO_PRIVATE_DATA, responderResources: 0, initiatorDepth: 0, flowControl: 0, retryCount: 0, rnrRetryCount: 0, srq: 0, qpNum: 0 };
  return {
    privateData: c.privateData ?? NO_PRIVATE_DATA,
    responderResources: c.responderResources ?? 0,
    initiatorDepth: c.initiatorDepth ?? 0,
    flowControl: c.flowControl ?? 0,
    retryCount: c.retryCount ?? 0,
    rnrRetryCount: c.rnrRetryCount ?? 0,
    srq: c.srq ?? 0,
    qpNum: c.qpNum ?? 0,
  };
}

/**
 * A posted CM event. `_report` runs when the channel hands it to the application
 * (rdma_get_cm_event); `ack` may be called once.
 */
class PostedEvent implements CmEventCommon {
  private acked = false;
  private wasReported = false;
  readonly param: { conn: EventConnParam; ud: UdParam };
  constructor(
    private readonly of: IdEvents,
    readonly id: CmId,
    readonly listenId: CmId | null,
    readonly event: CmEventType,
    readonly status: number,
    conn: EventConnParam,
    ud: UdParam,
    readonly mcContext: unknown,
  ) {
    this.param = { conn, ud };
  }
  ack(): void {
    if (this.acked) throw err('EINVAL', 'rdma_ack_cm_event', 'event already acknowledged');
    this.acked = true;
    this.of.acked(this, this.wasReported);
  }
  _report(): void {
    if (this.wasReported) return;
    this.wasReported = true;
    this.of.reported(this);
  }
}

/** The events of one id: its channel, its last synchronous event, its unacknowledged count. */
export class IdEvents {
  private ch: EventChannel;
  private isSync: boolean;
  /** Synchronous mode: the last event, acknowledged by the next call. */
  last: CmEvent | null = null;
  /** Events posted for the id and not acknowledged (queued or handed out). */
  private unacked = 0;
  /** Events handed to the application (rdma_get_cm_event) and not acknowledged. */
  private reportedUnacked = 0;
  /** Those events, for disposal (which acknowledges them before destroying the id). */
  private readonly handedOut = new Set<CmEventCommon>();
  private ackWaiters: (() => void)[] = [];

  /** `channel` null: a synchronous id, on a private channel. */
  constructor(
    private readonly id: CmId,
    private readonly tag: string,
    channel: EventChannel | null,
  ) {
    this.isSync = channel === null;
    this.ch = channel ?? new EventChannel(true);
    this.ch._ids.add(id);
  }

  /** The channel the id's events are posted on (a private one in synchronous mode). */
  get channel(): EventChannel {
    return this.ch;
  }
  /** Whether the id is synchronous. */
  get sync(): boolean {
    return this.isSync;
  }

  /**
   * Queue event `type` of the id on its channel (`on`: the listener's, for CONNECT_REQUEST),
   * with the transport's connection and UD parameters over the defaults. Nothing once the id is
   * destroyed.
   */
  post(type: CmEventType, status = 0, conn?: Partial<EventConnParam>, ud?: UdParam, mcContext?: unknown, listenId: CmId | null = null, on: EventChannel = this.ch): void {
    if (this.id.destroyed) return;
    this.unacked++;
    if (tracing('cm')) traceEvent('cm', this.tag, 'event', { event: rdmaEventStr(type), status });
    // The fields match `event` by construction (CONNECT_REQUEST: listenId; multicast: mcContext).
    on._post(new PostedEvent(this, this.id, listenId, type, status, eventConnParam(conn), ud ?? NO_UD_PARAM, mcContext) as CmEvent);
  }

  /** An event of the id was acknowledged. */
  acked(e: CmEventCommon, wasReported: boolean): void {
    this.unacked--;
    this.handedOut.delete(e);
    if (wasReported) this.reportedUnacked--;
    if (this.ackWaiters.length === 0) return;
    const ws = this.ackWaiters;
    this.ackWaiters = [];
    for (const w of ws) w();
  }

  /** An event of the id was handed to the application (rdma_get_cm_event). */
  reported(e: CmEventCommon): void {
    this.reportedUnacked++;
    this.handedOut.add(e);
  }

  /** Acknowledge every event of the id handed to the application (disposal: librdmacm's destroy order acks first). */
  ackHandedOut(): void {
    this.last = null;
    for (const e of [...this.handedOut]) e.ack();
  }

  /** Resolve once `done()` holds; re-checked after every acknowledgement of the id's events. */
  private async waitAcks(done: () => boolean): Promise<void> {
    while (!done()) await new Promise<void>((r) => this.ackWaiters.push(r));
  }

  /** Synchronous mode: acknowledge the last event, as the id's next call does. */
  ackLast(): void {
    const e = this.last;
    if (!e) return;
    this.last = null;
    e.ack();
  }

  /**
   * Synchronous mode: acknowledge the previous event, wait for the next one of the id and map
   * an error event to an RdmaError (ucma_complete()). `signal` aborts the wait (AbortError).
   */
  async complete(op: string, signal?: AbortSignal): Promise<CmEvent> {
    this.ackLast();
    const ev = await this.ch.getEvent(signal);
    this.last = ev;
    if (ev.event === CmEventType.REJECTED) throw new RdmaError('ECONNREFUSED', { op, detail: `${rdmaEventStr(ev.event)} status ${ev.status}` });
    if (ev.status !== 0 || ERROR_EVENTS.has(ev.event)) {
      throw RdmaError.fromErrno(ev.status === 0 ? Errno.EIO : Math.abs(ev.status), { op, detail: rdmaEventStr(ev.event) });
    }
    return ev;
  }

  /**
   * A synchronous listener's next event (rdma_get_request): a CONNECT_REQUEST is returned; as
   * librdmacm, an event that is not a usable request stays the last event (acknowledged by the
   * next call or by rdma_destroy_id) and the call fails — ECONNREFUSED for REJECTED, the status's
   * errno, else EINVAL.
   */
  async nextRequest(op: string, signal?: AbortSignal): Promise<CmEvent> {
    this.ackLast();
    const ev = await this.ch.getEvent(signal);
    if (ev.event === CmEventType.REJECTED) {
      this.last = ev;
      throw err('ECONNREFUSED', op);
    }
    if (ev.status !== 0) {
      this.last = ev;
      throw RdmaError.fromErrno(Math.abs(ev.status), { op });
    }
    if (ev.event !== CmEventType.CONNECT_REQUEST) {
      this.last = ev;
      throw err('EINVAL', op, rdmaEventStr(ev.event));
    }
    return ev;
  }

  /**
   * rdma_migrate_id's part: move the id and its queued events to `channel` (`null`: a new
   * private one, the id becomes synchronous); resolves once the events already reported on the
   * old channel are acknowledged, as librdmacm blocks.
   */
  async migrate(channel: EventChannel | null): Promise<void> {
    if (this.isSync) this.ackLast();
    const target = channel ?? new EventChannel(true);
    const moved = this.ch._takeEventsOf(this.id);
    this.ch._ids.delete(this.id);
    const old = this.ch;
    this.ch = target;
    target._ids.add(this.id);
    this.isSync = channel === null;
    for (const e of moved) target._post(e);
    if (old._sync && old._ids.size === 0) old.destroy();
    await this.waitAcks(() => this.reportedUnacked <= 0);
  }

  /**
   * rdma_destroy_id's part: drop the events not yet retrieved (the kernel's
   * ucma_cleanup_ctx_events); a listener's queued connect requests go with them, their new ids
   * destroyed (the requesters are rejected). Resolves once every event reported for the id is
   * acknowledged, then leaves the channel (and destroys a private one).
   */
  async close(wasListening: boolean): Promise<void> {
    this.ch._dropEventsOf(this.id);
    if (wasListening) {
      for (const e of this.ch._takeWhere((x) => x.listenId === this.id && x.event === CmEventType.CONNECT_REQUEST)) {
        e.ack();
        void e.id.destroy().catch(() => {});
      }
    }
    await this.waitAcks(() => this.unacked <= 0);
    this.ch._ids.delete(this.id);
    if (this.isSync) this.ch.destroy();
  }
}
