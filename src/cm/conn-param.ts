/**
 * The checks and defaults of the connection parameters rdma_connect, rdma_accept and rdma_reject
 * take (`struct rdma_conn_param`): responder resources and initiator depth within the device's
 * `max_qp_rd_atom` (0xff: the maximum, librdmacm's `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH`),
 * private data within the transport's limit for the message that carries it.
 */
import { err } from '../errors.js';
import type { Context } from '../verbs/context.js';
import { QpType } from '../verbs/types.js';
import type { ConnParam } from './events.js';
import { NO_PRIVATE_DATA } from './id-events.js';
import type { PrivateDataLimits } from './transport.js';

/** max_qp_rd_atom of the device (asked on every connect/accept); siw's 128 without one. */
export function deviceMaxRd(ctx: Context | null): number {
  return ctx ? ctx._attr.maxQpRdAtom : 128;
}

/** A responder resources / initiator depth value: `d` (capped at `max`) for unset or 0xff, else `v` within [0, max]. */
function pickRd(v: number | undefined, d: number, max: number, what: string, op: string): number {
  if (v === undefined || v === 0xff) return Math.min(d, max);
  if (!Number.isInteger(v) || v < 0 || v > max) throw err('EINVAL', op, `${what} ${v} exceeds the device maximum ${max}`);
  return v;
}

/** IRD and ORD of `param` on `ctx`'s device, `dflt` where unset (EINVAL beyond the device maximum). */
export function rdLimits(ctx: Context | null, param: ConnParam | undefined, op: string, dflt: { ird: number; ord: number }): { ird: number; ord: number } {
  const max = deviceMaxRd(ctx);
  return { ird: pickRd(param?.responderResources, dflt.ird, max, 'responder_resources', op), ord: pickRd(param?.initiatorDepth, dflt.ord, max, 'initiator_depth', op) };
}

/** Private data within the transport's limit (`lim`) for `kind` on an id of `qpType` (EINVAL beyond it). */
export function checkPrivateData(pd: Uint8Array | undefined, lim: PrivateDataLimits | undefined, qpType: QpType, op: string, kind: 'connect' | 'accept' | 'reject'): Uint8Array {
  if (!pd) return NO_PRIVATE_DATA;
  const ud = qpType === QpType.UD;
  const max = lim === undefined ? Infinity : kind === 'reject' ? lim.reject : kind === 'connect' ? (ud ? lim.udConnect : lim.connect) : ud ? lim.udAccept : lim.accept;
  if (pd.length > max) throw err('EINVAL', op, `private data ${pd.length} > ${max} bytes`);
  return pd;
}
