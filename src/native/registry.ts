/**
 * The native objects the addon names by key, and the routing of its event callbacks to them. The
 * addon hands back a number where libibverbs hands back a pointer (a CQ's `cq_context`, a QP's
 * `qp_context`, the context of an async event): {@link newKey} makes those numbers, the maps below
 * find the object again, and the handlers installed here deliver completion events to their
 * channel and async events to their context.
 */
import { AsyncEventType } from '../verbs/types.js';
import { AsyncElement } from './abi.js';
import { dispatch } from './binding.js';
import type { NativeCompChannel } from './comp-channel.js';
import type { NativeContext } from './context.js';
import type { NativeCq } from './cq.js';
import type { NativeQp } from './qp.js';
import type { NativeSrq } from './srq.js';

let nextKey = 1;
/** A process-unique key naming an object to the addon (a CQ's cq_context, a QP's qp_context ...). */
export function newKey(): number {
  const k = nextKey;
  nextKey = nextKey >= 0x7fff_fffe ? 1 : nextKey + 1;
  return k;
}

/** Live contexts, completion channels, CQs, QPs and SRQs by key (each removes itself when it goes). */
export const contexts = new Map<number, NativeContext>();
export const channels = new Map<number, NativeCompChannel>();
export const cqs = new Map<number, NativeCq>();
export const qps = new Map<number, NativeQp>();
export const srqs = new Map<number, NativeSrq>();

/** A completion event read in C (ibv_get_cq_event): counted on its CQ, queued on its channel. */
dispatch.cqEvent = (chanKey, cqKey) => {
  const cq = cqs.get(cqKey);
  if (cq === undefined) return;
  cq._cGot++;
  const ch = channels.get(chanKey);
  if (ch !== undefined && !ch.destroyed) ch._enqueue(cq);
};

/** An async event (ibv_get_async_event, acknowledged in C): raised on its context with its element. */
dispatch.asyncEvent = (ctxKey, type, kind, key) => {
  const ctx = contexts.get(ctxKey);
  if (ctx === undefined) return;
  if (kind === AsyncElement.QP) {
    const qp = qps.get(key);
    if (qp !== undefined) ctx._raiseAsyncEvent({ type, qp });
  } else if (kind === AsyncElement.CQ) {
    const cq = cqs.get(key);
    if (cq !== undefined) ctx._raiseAsyncEvent({ type: AsyncEventType.CQ_ERR, cq });
  } else if (kind === AsyncElement.SRQ) {
    const srq = srqs.get(key);
    if (srq !== undefined) ctx._raiseAsyncEvent({ type, srq });
  } else if (kind === AsyncElement.PORT) ctx._raiseAsyncEvent({ type, portNum: key });
  else ctx._raiseAsyncEvent({ type });
};
