// Memory windows over an RC connection (rdma_cm, RDMA_PS_TCP), for the interop suite:
//   node mw-peer.mjs <package dir> target <address> <port>
//   node mw-peer.mjs <package dir> initiator <address> <port>
// The target registers an MR with MW_BIND and binds three windows on it: a type 1 window by
// ibv_bind_mw, two type 2 windows by BIND_MW work requests on the connection's QP; it sends their
// addresses and rkeys in a SEND. The initiator RDMA WRITEs through each window, invalidates the
// second with a SEND_WITH_INV and says so; the target checks the bytes landed in each window,
// reports how its receive of the SEND_WITH_INV completed (flags, rkey), invalidates the third
// with LOCAL_INV and says
// so; the initiator then writes through the third window again, which must fail (its completion
// status is reported: the kernel's rxe answers IBV_WC_REM_ACCESS_ERR) and must not touch the
// target's memory. Each side prints one JSON line; exit 0 when its checks pass, else 1.
// Runs on whatever backend the environment selects (RDMACM_BACKEND, RDMACM_DEVICE). Env:
// READY_FILE (the target creates it once it listens), PEER_DEADLINE_SEC (default 150).
import { writeFileSync } from 'node:fs';
import { pollUntil } from './guest-cq.mjs';

const [root, role, address, portStr] = process.argv.slice(2);
const lib = await import(`${root}/dist/index.js`);
const { createId, PortSpace, WrOpcode, SendFlags, Access, MwType, WcStatus, WcFlags, WcOpcode } = lib;

const port = Number(portStr);
const SLOT = 256;
const WIN = 256;
const deadline = Date.now() + Number(process.env.PEER_DEADLINE_SEC || 150) * 1000;
const incRkey = (k) => ((k & ~0xff) | ((k + 1) & 0xff)) >>> 0;
const cap = { maxSendWr: 16, maxRecvWr: 8, maxSendSge: 1, maxRecvSge: 1 };
const conn = { responderResources: 1, initiatorDepth: 1, rnrRetryCount: 7, retryCount: 7 };

const drain = (cq, n, until = deadline) => pollUntil(cq, n, until);

/** Messages: SENDs of JSON text into receive slots of `rbuf`. */
function messenger(id) {
  const sbuf = Buffer.alloc(SLOT);
  const smr = id.pd.regMr(sbuf, Access.LOCAL_WRITE);
  const rbuf = Buffer.alloc(SLOT * 8);
  const rmr = id.pd.regMr(rbuf, Access.LOCAL_WRITE);
  const post = (k) => id.qp.postRecv({ wrId: k, sgList: [{ addr: rmr.addr + k * SLOT, length: SLOT, lkey: rmr.lkey }] });
  for (let k = 0; k < 8; k++) post(k);
  return {
    async send(obj, extra = {}) {
      const n = sbuf.write(JSON.stringify(obj));
      id.qp.postSend({ wrId: 100, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: smr.addr, length: n, lkey: smr.lkey }], ...extra });
      const [w] = await drain(id.sendCq, 1);
      return w?.status ?? null;
    },
    async recv() {
      const [w] = await drain(id.recvCq, 1);
      if (w === undefined) return { wc: null, msg: null };
      const k = Number(w.wrId);
      const msg = w.status === WcStatus.SUCCESS ? JSON.parse(rbuf.subarray(k * SLOT, k * SLOT + w.byteLen).toString()) : null;
      post(k);
      return { wc: w, msg };
    },
  };
}

async function target() {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address, port });
  await listen.listen(1);
  if (process.env.READY_FILE) writeFileSync(process.env.READY_FILE, '');
  const id = await listen.getRequest();
  id.createQp(null, { cap });
  const m = messenger(id);
  await id.accept(conn);
  const pd = id.pd;
  const buf = Buffer.alloc(4096);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.MW_BIND);
  const out = { device: pd.context.device.name, problems: [] };
  // Type 1: ibv_bind_mw.
  const mw1 = pd.allocMw(MwType.TYPE_1);
  id.qp.bindMw(mw1, { wrId: 101, sendFlags: SendFlags.SIGNALED, bindInfo: { mr, addr: mr.addr, length: WIN, mwAccessFlags: Access.REMOTE_WRITE } });
  const [b1] = await drain(id.sendCq, 1);
  // Type 2: BIND_MW work requests on this QP.
  const bind2 = async (mw, off) => {
    const rkey = incRkey(mw.rkey);
    id.qp.postSend({ wrId: 102 + off, opcode: WrOpcode.BIND_MW, sendFlags: SendFlags.SIGNALED, sgList: [], bindMw: { mw, rkey, bindInfo: { mr, addr: mr.addr + off, length: WIN, mwAccessFlags: Access.REMOTE_WRITE } } });
    const [w] = await drain(id.sendCq, 1);
    if (w?.status === WcStatus.SUCCESS) mw.rkey = rkey;
    return w;
  };
  const mw2 = pd.allocMw(MwType.TYPE_2);
  const mw3 = pd.allocMw(MwType.TYPE_2);
  const b2 = await bind2(mw2, 1024);
  const b3 = await bind2(mw3, 2048);
  out.binds = [b1, b2, b3].map((w) => (w ? { status: w.status, opcode: w.opcode } : null));
  for (const w of [b1, b2, b3]) if (w?.status !== WcStatus.SUCCESS || w.opcode !== WcOpcode.BIND_MW) out.problems.push(`bind: ${JSON.stringify(w)}`);
  const keys = { a1: mr.addr, k1: mw1.rkey, a2: mr.addr + 1024, k2: mw2.rkey, a3: mr.addr + 2048, k3: mw3.rkey };
  await m.send(keys);
  // SEND_WITH_INV of the second window, then "wrote".
  const inv = await m.recv();
  out.sendWithInv = inv.wc ? { status: inv.wc.status, wcFlags: inv.wc.wcFlags, withInv: (inv.wc.wcFlags & WcFlags.WITH_INV) !== 0, rkeyIsK2: inv.wc.invalidatedRkey === keys.k2 } : null;
  const wrote = await m.recv();
  if (wrote.msg?.wrote !== true) out.problems.push(`no "wrote": ${JSON.stringify(wrote)}`);
  out.landed = [0, 1024, 2048].map((off, i) => buf.subarray(off, off + 16).toString() === `window ${i + 1}`.padEnd(16, '.'));
  // LOCAL_INV of the third window, then "invalidated".
  id.qp.postSend({ wrId: 103, opcode: WrOpcode.LOCAL_INV, sendFlags: SendFlags.SIGNALED, sgList: [], invalidateRkey: keys.k3 });
  const [li] = await drain(id.sendCq, 1);
  out.localInv = li ? { status: li.status, opcode: li.opcode } : null;
  await m.send({ invalidated: true });
  // The initiator's write through the invalidated window fails on this side too (the responder
  // NAKs it and its QP goes to ERR: a posted receive flushes); the memory stays as it was.
  const [flushed] = await drain(id.recvCq, 1, Date.now() + 30_000);
  out.afterInvalidation = flushed ? flushed.status : null;
  out.untouched = buf.subarray(2048, 2064).toString() === 'window 3'.padEnd(16, '.');
  if (!out.landed.every(Boolean)) out.problems.push('a write through a window did not land');
  if (!out.untouched) out.problems.push('the write through the invalidated window changed memory');
  if (out.localInv?.status !== WcStatus.SUCCESS) out.problems.push('LOCAL_INV failed');
  if (out.sendWithInv?.status !== WcStatus.SUCCESS) out.problems.push('SEND_WITH_INV receive');
  console.log(JSON.stringify(out));
  process.exit(out.problems.length === 0 ? 0 : 1);
}

async function initiator() {
  const id = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, { address, port });
  await id.resolveRoute();
  id.createQp(null, { cap });
  const m = messenger(id);
  await id.connect(conn);
  const out = { device: id.qp.context.device.name, problems: [] };
  const { msg: k } = await m.recv();
  const src = Buffer.alloc(64);
  const smr = id.pd.regMr(src, Access.LOCAL_WRITE);
  const write = async (i, addr, rkey, text) => {
    src.write(text.padEnd(16, '.'), i * 16);
    id.qp.postSend({ wrId: 110 + i, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: smr.addr + i * 16, length: 16, lkey: smr.lkey }], rdma: { remoteAddr: addr, rkey } });
    const [w] = await drain(id.sendCq, 1);
    return w?.status ?? null;
  };
  out.writes = [await write(0, k.a1, k.k1, 'window 1'), await write(1, k.a2, k.k2, 'window 2'), await write(2, k.a3, k.k3, 'window 3')];
  out.sendWithInv = await m.send({ inv: true }, { opcode: WrOpcode.SEND_WITH_INV, invalidateRkey: k.k2 });
  out.wrote = await m.send({ wrote: true });
  const { msg } = await m.recv();
  if (msg?.invalidated !== true) out.problems.push(`no "invalidated": ${JSON.stringify(msg)}`);
  out.afterInvalidation = await write(3, k.a3, k.k3, 'overwritten');
  if (!out.writes.every((s) => s === WcStatus.SUCCESS)) out.problems.push('a write through a window failed');
  if (out.sendWithInv !== WcStatus.SUCCESS) out.problems.push('SEND_WITH_INV failed');
  if (out.afterInvalidation === WcStatus.SUCCESS || out.afterInvalidation === null) out.problems.push('the write through the invalidated window did not fail');
  console.log(JSON.stringify(out));
  process.exit(out.problems.length === 0 ? 0 : 1);
}

await (role === 'target' ? target() : initiator());
