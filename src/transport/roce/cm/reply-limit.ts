/**
 * The budget of CM MADs a device sends that no application asked for: answers to MADs that
 * match nothing or repeat something (a DREP for an unknown DREQ, REJs of refused REQs, a SIDR_REP
 * for an unknown service, a duplicate's answer again, an MRA or RTU again, a DREP in TIMEWAIT)
 * and the resends of a REP. Their source address is whatever the MAD claims, so without a budget
 * a stream of forged MADs turns this device into a reflector at the rate it arrives.
 *
 * One token bucket per device: {@link CM_REPLY_BURST} tokens, refilled at
 * {@link CM_REPLY_RATE_PER_S} a second; a MAD that finds the bucket empty is not sent and is
 * counted as `cm_reply_suppressed`. A connection in progress only meets the limit while such
 * traffic is being forged at more than the refill rate.
 */
import type { RoceDevice } from '../device.js';
import { C } from '../counters.js';
import { TokenBucket } from '../../../util/token-bucket.js';

/** Tokens a quiet device holds: the answers it sends back to back. */
export const CM_REPLY_BURST = 64;
/** Tokens a second added back (the sustained rate of unsolicited answers and resends). */
export const CM_REPLY_RATE_PER_S = 32;

const buckets = new WeakMap<RoceDevice, TokenBucket>();

/**
 * Whether `dev` may send one more unsolicited CM MAD now (a token is taken if so); if not, the
 * MAD is counted as suppressed and the caller drops it.
 */
export function mayReply(dev: RoceDevice): boolean {
  let b = buckets.get(dev);
  if (b === undefined) {
    b = new TokenBucket(CM_REPLY_BURST, CM_REPLY_RATE_PER_S);
    buckets.set(dev, b);
  }
  if (b.take()) return true;
  dev.counters.inc(C.cm_reply_suppressed);
  return false;
}
