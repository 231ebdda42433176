/**
 * Prepared work requests: a list of send or receive WRs checked once against a QP
 * (`qp.prepareSend` / `qp.prepareRecv`) and posted as many times as the application likes
 * (`qp.postPrepared`), what a C program does when it builds its `ibv_send_wr` chain once and
 * hands the same chain to every `ibv_post_send`. Each post has the semantics of posting the same
 * WRs with `postSend` / `postRecv` (the queue's room, the QP's state, the provider's errno and
 * the index of the first WR not posted); what a prepared list spares is the work per WR in
 * JavaScript: a provider may keep the list in its own form (the native backend keeps the words
 * its addon reads, and a post copies them into the buffer it shares with the addon).
 *
 * The list is a snapshot: changing the WR objects afterwards changes nothing of it, so a post
 * always sends what was checked. SGEs name memory by address and key, as in C: the memory must
 * stay registered while WRs naming it are posted.
 */
import { PostError } from '../errors.js';
import type { RecvWr, SendWr, Sge } from './types.js';

/** What a prepared list holds: send or receive WRs. */
export type PreparedKind = 'send' | 'recv';

/**
 * Work requests checked once for one QP; post them with `qp.postPrepared(p)`. Made by
 * `qp.prepareSend(wrs)` / `qp.prepareRecv(wrs)`.
 */
export class PreparedWrs<T extends SendWr | RecvWr = SendWr | RecvWr> {
  /** The QP they were checked for: the only one that posts them. */
  readonly qp: object;
  /** Send or receive WRs. */
  readonly kind: PreparedKind;
  /** Private copies of the WRs as they were checked (the list frozen; the objects nobody else holds). */
  readonly wrs: readonly T[];
  /** @internal The provider's own form of the list (the native backend's encoded words), or null. */
  _provider: unknown = null;

  /** @internal Use `qp.prepareSend()` / `qp.prepareRecv()`. */
  constructor(qp: object, kind: PreparedKind, wrs: readonly T[]) {
    this.qp = qp;
    this.kind = kind;
    this.wrs = Object.freeze(wrs.slice());
  }

  /** How many WRs one post posts. */
  get length(): number {
    return this.wrs.length;
  }
}

/** The op a prepared list's errors name. */
export function preparedOp(kind: PreparedKind): string {
  return kind === 'send' ? 'ibv_post_send' : 'ibv_post_recv';
}

/**
 * Check each of `wrs` with `check` (a reason string refuses it: PostError EINVAL naming its
 * index; nothing is prepared then) and return private copies of them all.
 */
export function checkedCopies<T extends SendWr | RecvWr>(kind: PreparedKind, wrs: T | readonly T[], check: (wr: T) => string | null, copy: (wr: T) => T): T[] {
  const list = Array.isArray(wrs) ? (wrs as readonly T[]) : [wrs as T];
  const out: T[] = [];
  for (let i = 0; i < list.length; i++) {
    const wr = list[i] as T;
    const bad = check(wr);
    if (bad !== null) throw new PostError('EINVAL', preparedOp(kind), i, bad);
    out.push(copy(wr));
  }
  return out;
}

const copySges = (sgl: readonly Sge[]): Sge[] => sgl.map((s) => ({ addr: s.addr, length: s.length, lkey: s.lkey }));

/** A private copy of a checked send WR: its own SGE list and operand objects. */
export function copySendWr(wr: SendWr): SendWr {
  const c: SendWr = { ...wr, sgList: copySges(wr.sgList) };
  if (wr.rdma !== undefined) c.rdma = { ...wr.rdma };
  if (wr.atomic !== undefined) c.atomic = { ...wr.atomic };
  if (wr.ud !== undefined) c.ud = { ...wr.ud };
  if (wr.bindMw !== undefined) c.bindMw = { ...wr.bindMw, bindInfo: { ...wr.bindMw.bindInfo } };
  return c;
}

/** A private copy of a checked receive WR. */
export function copyRecvWr(wr: RecvWr): RecvWr {
  return { ...wr, sgList: copySges(wr.sgList) };
}

/** Refuse a list prepared for another QP, or not a prepared list at all (EINVAL, index 0). */
export function checkPreparedFor(p: PreparedWrs, qp: object): void {
  if (!(p instanceof PreparedWrs)) throw new PostError('EINVAL', 'ibv_post_send', 0, 'not a prepared work request list (qp.prepareSend / qp.prepareRecv)');
  if (p.qp !== qp) throw new PostError('EINVAL', preparedOp(p.kind), 0, 'work requests prepared for another QP');
}
