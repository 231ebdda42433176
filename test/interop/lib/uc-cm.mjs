// A UC connection through rdma_cm on RDMA_PS_IB (rdma_create_id2's qp_type UC), for the interop
// suite:
//   node uc-cm.mjs <package dir> server <address> <port>
//   node uc-cm.mjs <package dir> client <address> <port>
// The server's accept carries its buffer's address and rkey in the private data; the client
// RDMA WRITEs into it and then SENDs; the server checks both arrived on its UC QP. Each side
// prints one JSON line; exit 0 when its checks pass, else 1.
// Env: READY_FILE (the server creates it once it listens), PEER_DEADLINE_SEC (default 150).
import { writeFileSync } from 'node:fs';
import { pollUntil, sleep } from './guest-cq.mjs';

const [root, role, address, portStr] = process.argv.slice(2);
const lib = await import(`${root}/dist/index.js`);
const { createId, PortSpace, QpType, WrOpcode, SendFlags, Access, WcStatus } = lib;
const port = Number(portStr);
const deadline = Date.now() + Number(process.env.PEER_DEADLINE_SEC || 150) * 1000;
const cap = { maxSendWr: 4, maxRecvWr: 4, maxSendSge: 1, maxRecvSge: 1 };

const drain = (cq, n) => pollUntil(cq, n, deadline);

if (role === 'server') {
  const listen = createId(null, null, PortSpace.IB, { qpType: QpType.UC });
  listen.bindAddr({ address, port });
  await listen.listen(1);
  if (process.env.READY_FILE) writeFileSync(process.env.READY_FILE, '');
  const id = await listen.getRequest();
  id.createQp(null, { cap });
  const buf = Buffer.alloc(128);
  const mr = id.pd.regMr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  id.qp.postRecv({ wrId: 1, sgList: [{ addr: mr.addr + 64, length: 64, lkey: mr.lkey }] });
  await id.accept({ privateData: Buffer.from(JSON.stringify({ a: mr.addr, k: mr.rkey })) });
  const [wc] = await drain(id.recvCq, 1);
  const out = {
    device: id.qp.context.device.name,
    idQpType: listen.qpType,
    qpType: id.qp.qpType,
    recv: wc ? { status: wc.status, byteLen: wc.byteLen } : null,
    sent: buf.subarray(64, 64 + (wc?.byteLen ?? 0)).toString(),
    written: buf.subarray(0, 11).toString(),
  };
  console.log(JSON.stringify(out));
  await id.disconnect().catch(() => {});
  process.exit(out.recv?.status === WcStatus.SUCCESS && out.sent === 'uc cm send' && out.written === 'uc cm write' && out.qpType === QpType.UC ? 0 : 1);
} else {
  const id = createId(null, null, PortSpace.IB, { qpType: QpType.UC });
  await id.resolveAddr(null, { address, port });
  await id.resolveRoute();
  id.createQp(null, { cap });
  await id.connect({});
  const peer = JSON.parse(Buffer.from(id.event.param.conn.privateData).toString().replace(/\0+$/, ''));
  const buf = Buffer.from('uc cm writeuc cm send');
  const mr = id.pd.regMr(buf, Access.LOCAL_WRITE);
  id.qp.postSend([
    { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: 11, lkey: mr.lkey }], rdma: { remoteAddr: peer.a, rkey: peer.k } },
    { wrId: 2, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr + 11, length: 10, lkey: mr.lkey }] },
  ]);
  const wcs = await drain(id.sendCq, 2);
  const out = { device: id.qp.context.device.name, qpType: id.qp.qpType, statuses: wcs.map((w) => w.status) };
  console.log(JSON.stringify(out));
  // UC has no acknowledgements: give the server time to take the messages before leaving.
  await sleep(2000);
  await id.disconnect().catch(() => {});
  process.exit(out.statuses.length === 2 && out.statuses.every((s) => s === WcStatus.SUCCESS) && out.qpType === QpType.UC ? 0 : 1);
}
