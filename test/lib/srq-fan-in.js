// Many connections into QPs on one shared receive queue: `n` clients (each an RC QP of its own)
// connected over loopback to `n` server QPs that all take their receives from one SRQ and
// complete them on one receive CQ. Used by the SRQ compliance tests.
import { createId, PortSpace } from '../../dist/index.js';

/**
 * Listen on 127.0.0.1 and connect `n` sync-mode clients. The server side's QPs are made in `pd`
 * with `srq` and `recvCq` (sizes from `cap`), the clients' with their own CQs.
 * Returns `{ clients, servers, close }`: `clients[i]` is connected to `servers[i]`.
 */
export async function srqFanIn({ n, pd, srq, recvCq, sendCq = recvCq, cap = { maxSendWr: 8, maxRecvWr: 8, maxSendSge: 1, maxRecvSge: 1 } }) {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(n);
  const clients = [];
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const srv = (async () => {
        const child = await listen.getRequest();
        child.createQp(pd, { cap, srq, recvCq, sendCq });
        await child.accept({ responderResources: 1, initiatorDepth: 1 });
        return child;
      })();
      const c = createId(null, null, PortSpace.TCP);
      clients.push(c);
      await c.resolveAddr(null, { address: '127.0.0.1', port: listen.srcPort });
      await c.resolveRoute();
      c.createQp(null, { cap });
      await c.connect({ responderResources: 1, initiatorDepth: 1 });
      servers.push(await srv);
    }
  } catch (e) {
    await closeAll(clients, servers, listen);
    throw e;
  }
  return { clients, servers, close: () => closeAll(clients, servers, listen) };
}

async function closeAll(clients, servers, listen) {
  for (const x of [...clients, ...servers]) {
    try {
      x.destroyQp();
      await x.destroy();
    } catch {
      /* already gone */
    }
  }
  await listen.destroy();
}
