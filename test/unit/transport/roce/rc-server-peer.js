// An RC rdma_cm server in its own process, for psn-prediction.test.js (a Math.random of its own,
// as a real server's): node rc-server-peer.js <port>
//   listens on 127.0.0.1:<port> (RDMA_PS_TCP, rxe_lo) and prints {"listening":true}; accepts every
//   request with a QP that has receives posted, prints {"qpn":N,"msg":"<text>"} for every message
//   a QP receives, destroys each connection when its peer disconnects. Exits when its stdin closes
//   (or after 30 s).
import { lib, Access, WcStatus } from '../../../lib/roce.js';

const { createEventChannel, createId, PortSpace, CmEventType } = lib;
setTimeout(() => process.exit(3), 30_000).unref();
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const RECVS = 8;
const SLOT = 256;

const ch = createEventChannel();
const listener = createId(ch, null, PortSpace.TCP, { device: 'rxe_lo' });
listener.bindAddr({ address: '127.0.0.1', port: Number(process.argv[2]) });
await listener.listen(16);
out({ listening: true });

/** Live connections: id → { buf, mr }. */
const live = new Map();
setInterval(() => {
  for (const [id, c] of live) {
    if (!id.qp) continue;
    for (const wc of id.qp.recvCq.poll(RECVS)) {
      if (wc.status !== WcStatus.SUCCESS) continue;
      const i = Number(wc.wrId);
      out({ qpn: id.qp.qpNum, msg: c.buf.subarray(SLOT * i, SLOT * i + wc.byteLen).toString() });
      id.qp.postRecv({ wrId: i, sgList: [{ addr: c.mr.addr + SLOT * i, length: SLOT, lkey: c.mr.lkey }] });
    }
  }
}, 2);

for (;;) {
  const ev = await ch.getEvent();
  const id = ev.id;
  const type = ev.event;
  ev.ack();
  if (type === CmEventType.CONNECT_REQUEST) {
    id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: RECVS } });
    const buf = Buffer.alloc(SLOT * RECVS);
    const mr = id.pd.regMr(buf, Access.LOCAL_WRITE);
    for (let i = 0; i < RECVS; i++) id.qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + SLOT * i, length: SLOT, lkey: mr.lkey }] });
    live.set(id, { buf, mr });
    await id.accept();
  } else if (type === CmEventType.DISCONNECTED) {
    live.delete(id);
    id.destroyQp();
    id.destroy().catch(() => {});
  }
}
