// CM steps the tests share: the next event of a channel, an expected event, a synchronous
// connection.
import assert from 'node:assert/strict';
import { createId, PortSpace, rdmaEventStr } from '../../dist/index.js';

/** The next event on `ch`, or a failure after `ms` milliseconds without one. */
export async function nextEvent(ch, ms = 3000) {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(new Error('no event within ' + ms + ' ms')), ms);
  try {
    return await ch.getEvent(ac.signal);
  } catch (e) {
    // The wait ran out: say so (the AbortError carries the reason as its cause).
    throw e?.name === 'AbortError' && e.cause instanceof Error ? e.cause : e;
  } finally {
    clearTimeout(t);
  }
}

/**
 * The next event on `ch`, which must be of `type` (else it is acked, so that its id can be
 * destroyed, and the test fails), or a failure after `ms`. `ack` acks the expected one too;
 * `seen(ev)` sees every event first.
 */
export async function expectEvent(ch, type, ms = 5000, { ack = false, seen = undefined } = {}) {
  let ev;
  try {
    ev = await nextEvent(ch, ms);
  } catch {
    throw new Error(`no ${rdmaEventStr(type)} within ${ms} ms`);
  }
  seen?.(ev);
  if (ev.event !== type || ack) ev.ack();
  assert.equal(rdmaEventStr(ev.event), rdmaEventStr(type), `got ${rdmaEventStr(ev.event)} status ${ev.status}`);
  return ev;
}

/** A synchronous listener's next request, with a QP, accepted. */
export async function syncAccept(listen) {
  const child = await listen.getRequest();
  child.createQp(null, {});
  await child.accept();
  return child;
}

/** A synchronous connection to `to` on `listen`'s port (from `bindFrom` when given): { id, child }. */
export async function syncPair(listen, to, bindFrom) {
  const server = syncAccept(listen);
  const id = createId(null, null, PortSpace.TCP);
  if (bindFrom) id.bindAddr({ address: bindFrom, port: 0 });
  await id.resolveAddr(null, { address: to, port: listen.srcPort });
  await id.resolveRoute();
  id.createQp(null, {});
  await id.connect();
  return { id, child: await server };
}
