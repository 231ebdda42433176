// Shared by the transport tests that play an iWARP peer by hand: a listener (sync id) whose
// accepted connection has a QP with receives posted and a guarded MR; the raw TCP initiator that
// speaks hand-built MPA frames and FPDUs is raw-mpa.js's.
import { createId, PortSpace, Access } from '../../dist/index.js';
export { rawClient, expectTerminate, rtrWrite as rtr } from './raw-mpa.js';

export const PAGE = 4096;

/** A listener (sync id) whose accepted connection has a QP with `recvs` receives posted and an MR. */
export async function server({ recvs = 1, access = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ, ird = 2 } = {}) {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(4);
  const port = listen.srcPort;
  // Guard bytes around the registered region must never change.
  const backing = Buffer.alloc(3 * PAGE, 0xee);
  const region = backing.subarray(PAGE, 2 * PAGE);
  region.fill(0);
  const state = { listen, port, backing, region, child: null, mr: null, qp: null };
  state.ready = (async () => {
    const child = await listen.getRequest();
    const qp = child.createQp(null, { cap: { maxSendWr: 8, maxRecvWr: 8 } });
    const mr = child.pd.regMr(region, access);
    for (let i = 0; i < recvs; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
    await child.accept({ responderResources: ird, initiatorDepth: 2 });
    Object.assign(state, { child, qp, mr });
    return state;
  })();
  return state;
}

export async function teardown(s) {
  if (s.child) {
    s.child.destroyQp();
    await s.child.destroy();
  }
  await s.listen.destroy();
}

export function guardsIntact(s) {
  const b = s.backing;
  for (const [from, to] of [[0, PAGE], [2 * PAGE, 3 * PAGE]]) {
    for (let i = from; i < to; i++) if (b[i] !== 0xee) return false;
  }
  return true;
}

