/**
 * The identifiers of the RoCE CM's transactions: request IDs (SIDR) and communication IDs
 * (connections), the TIDs of the MADs that carry them, and the name of a service ID.
 *
 * A request or communication ID is `block << 18 | 18 bits from the CSPRNG`: the QPN block of this
 * process in the high bits (the GSI router of the host finds the process by it, so every reply
 * naming the ID reaches the process that holds it) and low bits a peer cannot foresee, unique
 * among the IDs this process still holds.
 */
import { err } from '../../../errors.js';
import { random } from '../../../util/random.js';
import type { PortAgent } from '../udp.js';

/** Request and communication IDs: `block << 18 | 18 random bits`. */
export const REQ_ID_SHIFT = 18;
/** Random draws for a free ID before the IDs of the block are searched in order. */
const REQ_ID_DRAWS = 32;
/** The agent ID Linux puts in the top of a CM TID (the CM's MAD agent on rxe ports). */
const TID_AGENT = 2n;

/** The request IDs (SIDR) and communication IDs (connected CM) this process holds. */
const liveIds = new Set<number>();

/**
 * A new request or communication ID: none of them an ID this process still holds, so a peer
 * cannot foresee the next one from those it has seen (Linux's cm.c XORs a cyclic counter with
 * one word drawn at boot, `random_id_operand`: hidden from a peer until it has seen one ID,
 * sequential after). Held until {@link releaseRequestId}.
 */
export function newRequestId(agent: PortAgent): number {
  const hi = agent.anyBlock() << REQ_ID_SHIFT;
  const span = 1 << REQ_ID_SHIFT;
  for (let i = 0; i < REQ_ID_DRAWS; i++) {
    const id = (hi | random.below(span)) >>> 0;
    if (!liveIds.has(id)) {
      liveIds.add(id);
      return id;
    }
  }
  const start = random.below(span);
  for (let i = 0; i < span; i++) {
    const id = (hi | ((start + i) % span)) >>> 0;
    if (!liveIds.has(id)) {
      liveIds.add(id);
      return id;
    }
  }
  throw err('ENOMEM', 'rdma_connect', 'every request ID of the QPN block is in use');
}

/** An ID from {@link newRequestId} is no longer in use. */
export function releaseRequestId(id: number): void {
  liveIds.delete(id);
}

/** The QPN block an ID names. */
export function blockOfId(id: number): number {
  return id >>> REQ_ID_SHIFT;
}

/** The TID of a SIDR_REQ: a QPN block of this process in the high word, the request ID below. */
export function sidrTid(agent: PortAgent, requestId: number): bigint {
  return (BigInt(agent.anyBlock()) << 32n) | BigInt(requestId);
}

/**
 * The TID of every message of a connection this side starts: the CM's MAD agent in the high word
 * and the local communication ID byte-swapped below, as Linux (the passive side reuses the REQ's).
 */
export function connTid(localCommId: number): bigint {
  return (TID_AGENT << 32n) | BigInt(bswap32(localCommId));
}

function bswap32(v: number): number {
  return (((v & 0xff) << 24) | ((v & 0xff00) << 8) | ((v >>> 8) & 0xff00) | (v >>> 24)) >>> 0;
}

/** A service ID as the name its listener publishes (16 hex digits). */
export function sidKey(sid: bigint): string {
  return BigInt.asUintN(64, sid).toString(16).padStart(16, '0');
}
