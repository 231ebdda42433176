// CM steps the rdma_cm suites share (test/compliance/cm.test.js and the iWARP-only
// test/unit/cm/cm.test.js).
import { createId, PortSpace } from '../../../dist/index.js';

/** The next event on `ch`, or a failure after `ms` milliseconds without one. */
export async function nextEvent(ch, ms = 3000) {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(new Error('no event within ' + ms + ' ms')), ms);
  try {
    return await ch.getEvent(ac.signal);
  } finally {
    clearTimeout(t);
  }
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
