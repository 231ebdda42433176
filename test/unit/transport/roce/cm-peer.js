// A UD rdma_cm server in its own process (udaddy's server side, reduced), for the multi-process
// tests: node cm-peer.js <port> <count> [bind address]
//   listens on 127.0.0.1:<port> (or <bind address>:<port>, e.g. 0.0.0.0) (RDMA_PS_UDP), prints {"listening":true}, accepts one SIDR
//   request (private data "hi from server"), receives <count> datagrams and answers each with
//   "echo <text>" through the AH built from the completion, prints {"got":[...]} and exits.
import { lib, pollN, WrOpcode, SendFlags, Access, WcStatus } from '../../../lib/roce.js';

const { createEventChannel, createId, PortSpace, CmEventType, createAhFromWc, RDMA_UDP_QKEY } = lib;
const [portS, countS, bindS] = process.argv.slice(2);
const count = Number(countS);
const guard = setTimeout(() => process.exit(3), 15000);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const ch = createEventChannel();
const listener = createId(ch, null, PortSpace.UDP);
listener.bindAddr({ address: bindS ?? '127.0.0.1', port: Number(portS) });
await listener.listen(1);
out({ listening: true });
const req = await ch.getEvent();
if (req.event !== CmEventType.CONNECT_REQUEST) process.exit(4);
const id = req.id;
const qp = id.createQp(null, { cap: { maxSendWr: count + 1, maxRecvWr: count + 1 } });
const pd = qp.pd;
const buf = Buffer.alloc(512 * (count + 1));
const mr = pd.regMr(buf, Access.LOCAL_WRITE);
for (let i = 0; i < count; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + 512 * i, length: 512, lkey: mr.lkey }] });
await id.accept({ privateData: Buffer.from('hi from server') });
req.ack();
const got = [];
for (let n = 0; n < count; n++) {
  const [wc] = await pollN(qp.recvCq, 1, 10000);
  if (!wc || wc.status !== WcStatus.SUCCESS) break;
  const i = Number(wc.wrId);
  const text = buf.subarray(512 * i + 40, 512 * i + wc.byteLen).toString();
  got.push(text);
  const ah = createAhFromWc(pd, wc, buf.subarray(512 * i, 512 * i + 40), 1);
  const at = 512 * count;
  const reply = Buffer.from(`echo ${text}`);
  reply.copy(buf, at);
  qp.postSend({ wrId: 'r', opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr + at, length: reply.length, lkey: mr.lkey }], ud: { ah, remoteQpn: wc.srcQp, remoteQkey: RDMA_UDP_QKEY } });
  await pollN(qp.sendCq, 1);
  ah.destroy();
}
out({ got });
id.destroyQp();
await id.destroy();
await listener.destroy();
ch.destroy();
clearTimeout(guard);
