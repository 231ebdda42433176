// Shared by the transport tests that play an iWARP peer by hand: a listener (sync id) whose
// accepted connection has a QP with receives posted and a guarded MR, and a raw TCP initiator
// that speaks hand-built MPA frames and FPDUs.
import assert from 'node:assert/strict';
import net from 'node:net';
import { createId, PortSpace, Access } from '../../../dist/index.js';
import { encodeMpaStartFrame, decodeMpaStartFrame, encodeFpdu, decodeTerminateFpdu, RdmapOpcode } from '../../../dist/wire/index.js';

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

/** A raw initiator: connects, sends an MPA Request (rev 2, enhanced, P2P Write RTR), reads the Reply. */
export async function rawClient(port, { crc = false, p2p = true, ird = 4, ord = 4 } = {}) {
  const sock = net.connect({ host: '127.0.0.1', port });
  await new Promise((r, j) => sock.once('connect', r).once('error', j));
  const chunks = [];
  let ended = false;
  sock.on('data', (d) => chunks.push(d));
  sock.on('close', () => (ended = true));
  sock.on('error', () => {});
  sock.write(encodeMpaStartFrame({ type: 'request', markers: false, crc, reject: false, enhanced: true, rev: 2, ird, ord, p2p, rtrSend: false, rtrWrite: p2p, rtrRead: false, privateData: new Uint8Array(0) }));
  const all = () => Buffer.concat(chunks);
  const until = async (pred, ms = 3000) => {
    const t0 = Date.now();
    while (!pred()) {
      if (Date.now() - t0 > ms) throw new Error('timeout waiting for the peer');
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  await until(() => all().length >= 24);
  const rep = decodeMpaStartFrame(all(), 'reply');
  assert.ok('frame' in rep, 'got an MPA Reply');
  const after = () => all().subarray(rep.length);
  return { sock, reply: rep.frame, after, until, isClosed: () => ended, send: (b) => sock.write(b) };
}

export async function expectTerminate(c, layer, etype, ecode) {
  await c.until(() => c.after().length >= 28 || c.isClosed());
  const bytes = c.after();
  assert.ok(bytes.length >= 28, `expected a TERMINATE, got ${bytes.length} bytes then close`);
  const t = decodeTerminateFpdu(bytes, 0);
  assert.deepEqual([t.layer, t.etype, t.ecode], [layer, etype, ecode], 'TERMINATE layer/etype/ecode');
  await c.until(() => c.isClosed());
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

/** The initiator's P2P RTR: a zero-length RDMA Write with STag 1. */
export const rtr = () => encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1, to: 0 });
