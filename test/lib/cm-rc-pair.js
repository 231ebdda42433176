// Shared by the QP and transport tests: a connected pair of RC QPs over loopback, CQ reaping with a
// deadline, and an initiator for tests that play the responder by hand.
import { createEventChannel, createId, PortSpace } from '../../dist/index.js';

/**
 * A connected pair of QPs over loopback (sync ids): `a` connected to `b`. `close()` destroys both
 * and the listener. `createQp(id, cap)` makes each id's QP (default: rdma_create_qp with `cap`).
 */
export async function rcPair({ send = 16, recv = 16, sge = 4, ird = 4, ord = 4, inline = 64, createQp = (id, cap) => id.createQp(null, { cap }) } = {}) {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const cap = { maxSendWr: send, maxRecvWr: recv, maxSendSge: sge, maxRecvSge: sge, maxInlineData: inline };
  const srv = (async () => {
    const child = await listen.getRequest();
    createQp(child, cap);
    await child.accept({ responderResources: ird, initiatorDepth: ord });
    return child;
  })();
  const a = createId(null, null, PortSpace.TCP);
  await a.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
  await a.resolveRoute();
  createQp(a, cap);
  await a.connect({ responderResources: ird, initiatorDepth: ord });
  const b = await srv;
  const close = async () => {
    for (const x of [a, b]) {
      x.destroyQp();
      await x.destroy();
    }
    await listen.destroy();
  };
  return { a, b, close };
}

/** Wait until `n` completions are on `cq` (polling with a deadline). */
export async function reap(cq, n, ms = 5000) {
  const out = [];
  const t0 = Date.now();
  while (out.length < n) {
    out.push(...cq.poll(n - out.length));
    if (out.length >= n) break;
    if (Date.now() - t0 > ms) throw new Error(`only ${out.length}/${n} completions`);
    await new Promise((r) => setImmediate(r));
  }
  return out;
}

/**
 * An async-mode initiator against `port` on 127.0.0.1 (a raw responder, typically): resolves,
 * connects with `param`, and returns the first connection event (not yet acked) with a `close()`.
 */
export async function activeConnect(port, param = {}) {
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port });
  (await ch.getEvent()).ack();
  await id.resolveRoute();
  (await ch.getEvent()).ack();
  id.createQp(null, {});
  await id.connect(param);
  const ev = await ch.getEvent(AbortSignal.timeout(5000));
  const close = async () => {
    id.destroyQp();
    await id.destroy();
    ch.destroy();
  };
  return { id, ev, close };
}
