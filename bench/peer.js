// Server half of each benchmark, run as a child process by bench/verbs.js:
//   node bench/peer.js <net-pingpong|net-stream|rdma-pingpong|rdma-write> <port>
// Prints "ready" once listening, serves one client, exits.
import net from 'node:net';
import { createId, PortSpace, Access, WrOpcode, SendFlags } from '../dist/index.js';
import { nextWcs } from './cq-wait.js';

const [kind, portArg] = process.argv.slice(2);
const port = Number(portArg);
const ready = () => process.stdout.write('ready\n');

setTimeout(() => process.exit(3), 120_000).unref();

if (kind === 'net-pingpong') {
  const srv = net.createServer({ noDelay: true }, (s) => {
    s.setNoDelay(true);
    let have = 0;
    s.on('data', (d) => {
      have += d.length;
      while (have >= 64) {
        have -= 64;
        s.write(d.subarray(0, 64));
      }
    });
    s.on('close', () => process.exit(0));
  });
  srv.listen(port, '127.0.0.1', ready);
} else if (kind === 'net-stream') {
  const buf = Buffer.allocUnsafe(1 << 20);
  let total = 0;
  let want = -1;
  const server = net.createServer({ pauseOnConnect: true });
  server.on('connection', (sock) => {
    // Re-wrap the handle so that reads go into one reused buffer (onread), as the fast path.
    // Phases: an 8-byte count, that many bytes, a one-byte answer; the client sends the next
    // phase's header only after the answer, so a read never spans two phases.
    const s = new net.Socket({ handle: sock._handle, onread: { buffer: buf, callback: (n, b) => {
      let off = 0;
      if (want < 0) {
        want = Number(b.readBigUInt64BE(0));
        off = 8;
      }
      total += n - off;
      if (total >= want) {
        want = -1;
        total = 0;
        s.write(Buffer.from([1]));
      }
      return true;
    } } });
    s.on('close', () => process.exit(0));
    s.on('error', () => process.exit(0));
    s.resume();
  });
  server.listen(port, '127.0.0.1', ready);
} else {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port });
  await listen.listen(1);
  ready();
  const child = await listen.getRequest();
  const qp = child.createQp(null, { cap: { maxSendWr: 64, maxRecvWr: 64 } });
  const cq = child.recvCq;
  const ch = child.recvCqChannel;
  if (kind === 'rdma-pingpong') {
    const mr = child.pd.regMr(Buffer.alloc(64 * 64), Access.LOCAL_WRITE);
    for (let i = 0; i < 64; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + i * 64, length: 64, lkey: mr.lkey }] });
    await child.accept();
    cq.reqNotify();
    for (let wcs; (wcs = await nextWcs(cq, ch, 16)); ) {
      for (const wc of wcs) {
        if (wc.status !== 0) process.exit(0);
        const i = Number(wc.wrId);
        qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + i * 64, length: 64, lkey: mr.lkey }] });
        qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr + i * 64, length: 64, lkey: mr.lkey }], sendFlags: SendFlags.INLINE });
      }
      child.sendCq.poll(64);
    }
  } else {
    // rdma-write: expose a 1 MiB target; answer the client's final SEND.
    const target = child.pd.regMr(Buffer.alloc(1 << 20), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const msg = child.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    qp.postRecv({ wrId: 0, sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
    const pd = Buffer.alloc(12);
    pd.writeBigUInt64BE(BigInt(target.addr), 0);
    pd.writeUInt32BE(target.rkey, 8);
    await child.accept({ privateData: pd });
    // Answer each of the client's phase-ending Sends (a warm-up phase, then the timed one) until
    // it disconnects.
    cq.reqNotify();
    for (let wcs; (wcs = await nextWcs(cq, ch, 1)); ) {
      if (wcs[0].status !== 0) process.exit(0);
      qp.postRecv({ wrId: 0, sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
      qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: msg.addr, length: 1, lkey: msg.lkey }] });
      child.sendCq.poll(16);
    }
  }
  child.channel.getEvent().then(() => process.exit(0), () => process.exit(0));
}
