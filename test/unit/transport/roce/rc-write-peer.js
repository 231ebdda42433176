// An RC rdma_cm server in its own process, for packet-buffer.test.js: node rc-write-peer.js <port>
//   listens on 127.0.0.1:<port> (RDMA_PS_TCP, rxe_lo), accepts one connection exposing a 4 MiB
//   region for RDMA WRITE (address and rkey in the accept's private data) and prints
//   {"ready":true}; for every SEND it receives, prints {"sha256":"<hex of the region>","outOfSeq":N,"duplicate":N} (its
//   device's counters) and
//   answers with a SEND. Exits once the client disconnects, when its stdin closes, or after 60 s.
import { createHash } from 'node:crypto';
import { lib, Access, WrOpcode, SendFlags, WcStatus } from '../../../lib/roce.js';

const { createId, PortSpace } = lib;
setTimeout(() => process.exit(3), 60_000).unref();
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const SIZE = 4 << 20;

const listener = createId(null, null, PortSpace.TCP, { device: 'rxe_lo' });
listener.bindAddr({ address: '127.0.0.1', port: Number(process.argv[2]) });
await listener.listen(1);
out({ listening: true });
const id = await listener.getRequest();
const qp = id.createQp(null, { cap: { maxSendWr: 16, maxRecvWr: 16 } });
const region = Buffer.alloc(SIZE);
const target = id.pd.regMr(region, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
const msg = id.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
const recv = { wrId: 0, sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] };
qp.postRecv(recv);
const pd = Buffer.alloc(12);
pd.writeBigUInt64BE(BigInt(target.addr), 0);
pd.writeUInt32BE(target.rkey, 8);
await id.accept({ privateData: pd });
out({ ready: true });
// The client's disconnect (DISCONNECTED) is answered, and ends the peer.
const end = async () => {
  await id.disconnect().catch(() => {});
  process.exit(0);
};
id.channel.getEvent().then(end, end);
setInterval(() => {
  for (const wc of id.recvCq.poll(4)) {
    if (wc.status !== WcStatus.SUCCESS) process.exit(2);
    const c = lib.roce.counters('rxe_lo');
    out({ sha256: createHash('sha256').update(region).digest('hex'), outOfSeq: c.out_of_seq_request, duplicate: c.duplicate_request });
    qp.postRecv(recv);
    qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: msg.addr, length: 1, lkey: msg.lkey }], sendFlags: SendFlags.SIGNALED });
  }
  id.sendCq.poll(16);
}, 2);
