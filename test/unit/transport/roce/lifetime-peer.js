// A process using the soft RoCE device in one way, for lifetime.test.js. Every mode stops by itself
// (a guard timer, unref'd so it keeps nothing alive).
//   node lifetime-peer.js listen <port> [ms]        a UDP-port-space id listening on 127.0.0.1:<port>;
//                                                 prints {"listening":true}; destroys it after
//                                                 <ms> when given, then nothing is left to wait for
//   node lifetime-peer.js qp [ms]                   a UD QP (nothing posted); destroyed after <ms>
//   node lifetime-peer.js exit-now <ip> <count>     posts <count> UD sends of 64 bytes to <ip>
//                                                 (QPN 0x1234) and calls process.exit() at once
//   node lifetime-peer.js settle-exit <qpn> <qkey> <count>  posts <count> sends "msg <i>" to QPN <qpn>
//                                                 on 127.0.0.1, then settleConnections() and exit
//   node lifetime-peer.js sink <ms>                 a UD QP; prints {"qpn":N}, then blocks the event
//                                                 loop for <ms> (datagrams pile up in the socket's
//                                                 receive buffer), lets them in and prints the
//                                                 counters
import { lib, loDevice, v4GidIndex, udQp, ahTo, WrOpcode, Access, roce } from '../../../lib/roce.js';
import { gidFromIp } from '../../../../dist/transport/roce/gid.js';

const { createEventChannel, createId, PortSpace, settleConnections } = lib;
setTimeout(() => process.exit(3), 15_000).unref();
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const [mode, ...args] = process.argv.slice(2);

if (mode === 'listen') {
  const ch = createEventChannel();
  const id = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
  id.bindAddr({ address: '127.0.0.1', port: Number(args[0]) });
  await id.listen(4);
  out({ listening: true });
  if (args[1] !== undefined) setTimeout(() => id.destroy(), Number(args[1])).unref();
} else {
  const ctx = loDevice().open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(256);
  const qp = udQp(pd, cq, 0x77, { maxSendWr: 64, maxRecvWr: 4, maxInlineData: 0 });
  const buf = Buffer.alloc(4096);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  const sgid = v4GidIndex(ctx);
  if (mode === 'qp') {
    out({ qpn: qp.qpNum });
    if (args[0] !== undefined) setTimeout(() => qp.destroy(), Number(args[0])).unref();
  } else if (mode === 'exit-now') {
    const ah = ahTo(pd, gidFromIp(args[0]), sgid);
    for (let i = 0; i < Number(args[1]); i++) {
      qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }], ud: { ah, remoteQpn: 0x1234, remoteQkey: 0x77 } });
    }
    process.exit(0);
  } else if (mode === 'settle-exit') {
    const ah = ahTo(pd, ctx.queryGid(1, sgid), sgid);
    for (let i = 0; i < Number(args[2]); i++) {
      Buffer.from(`msg ${i}`).copy(buf, 64 * i);
      qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr + 64 * i, length: `msg ${i}`.length, lkey: mr.lkey }], ud: { ah, remoteQpn: Number(args[0]), remoteQkey: Number(args[1]) } });
    }
    await settleConnections(3000);
    process.exit(0);
  } else if (mode === 'sink') {
    out({ qpn: qp.qpNum });
    const end = Date.now() + Number(args[0]);
    while (Date.now() < end);
    setTimeout(() => {
      out({ counters: roce.counters('rxe_lo') });
      qp.destroy();
    }, 300);
  }
}
