// A second process on the soft RoCE device rxe_lo, driven by the multi-process tests.
//   node ud-peer.js recv <qkey> <count> [group]   print {"qpn":N}, receive <count> datagrams
//                                                  (attached to multicast group <group> if
//                                                  given), print {"got":[...texts]}, exit
//   node ud-peer.js send <qkey> <count> <qpn|group> send <count> datagrams "msg <i>", exit
//   node ud-peer.js send1 <qkey> 1 <qpn>           post one send and end at once
//   node ud-peer.js echo <qkey> <count>             print {"qpn":N}, answer each datagram with
//                                                  "echo <text>" to its sender (AH from the
//                                                  GRH area), exit after <count>
// The RoCE port comes from RDMACM_ROCE_PORT (set by the parent). Every run stops by itself.
import {
  loDevice,
  v4GidIndex,
  ahTo,
  pollN,
  WrOpcode,
  SendFlags,
  Access,
  WcStatus,
  roce,
} from '../../../lib/roce.js';
import { gidFromIp } from '../../../../dist/transport/roce/gid.js';
import { QpType, QpState, lib } from '../../../lib/roce.js';
const { createAhFromWc } = lib;

/** A UD QP in RTS with separate send and receive CQs. */
function udQpSplit(pd, sendCq, recvCq, qkey, depth) {
  const q = pd.createQp({ qpType: QpType.UD, sendCq, recvCq, cap: { maxSendWr: depth, maxRecvWr: depth, maxSendSge: 1, maxRecvSge: 1 } });
  q.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey });
  q.modify({ qpState: QpState.RTR });
  q.modify({ qpState: QpState.RTS, sqPsn: 0 });
  return q;
}

const [mode, qkeyS, countS, target] = process.argv.slice(2);
const qkey = Number(qkeyS);
const count = Number(countS);
const guard = setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: 'timeout' }) + '\n');
  process.exit(3);
}, 15000);

const ctx = loDevice().open();
const pd = ctx.allocPd();
const cq = ctx.createCq(4 * count + 8);
const buf = Buffer.alloc(256 * (count + 2));
const mr = pd.regMr(buf, Access.LOCAL_WRITE);
const sgid = v4GidIndex(ctx);
const scq = ctx.createCq(4 * count + 8);
const qp = udQpSplit(pd, scq, cq, qkey, count + 1);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const counters = () => {
  const c = roce.counters('rxe_lo');
  return { fwd_sent: c.fwd_sent, fwd_rcvd: c.fwd_rcvd, rcvd_pkts: c.rcvd_pkts, sent_pkts: c.sent_pkts };
};

if (mode === 'recv' || mode === 'echo') {
  for (let i = 0; i < count; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + 256 * i, length: 256, lkey: mr.lkey }] });
  if (target) qp.attachMcast(gidFromIp(target), 0);
  out({ qpn: qp.qpNum });
  const got = [];
  for (let n = 0; n < count; n++) {
    const [wc] = await pollN(cq, 1, 14000);
    if (!wc || wc.status !== WcStatus.SUCCESS) break;
    const i = Number(wc.wrId);
    const text = buf.subarray(256 * i + 40, 256 * i + wc.byteLen).toString();
    got.push(text);
    if (mode === 'echo') {
      // the reply AH from the completion and the received GRH area (ibv_create_ah_from_wc)
      const ah = createAhFromWc(pd, wc, buf.subarray(256 * i, 256 * i + 40), 1);
      const at = 256 * (count + 1);
      const reply = Buffer.from(`echo ${text}`);
      reply.copy(buf, at);
      qp.postSend({ wrId: 'e', opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr + at, length: reply.length, lkey: mr.lkey }], ud: { ah, remoteQpn: wc.srcQp, remoteQkey: qkey } });
      const [s] = await pollN(scq, 1);
      if (!s || s.status !== WcStatus.SUCCESS) break;
    }
  }
  if (target) qp.detachMcast(gidFromIp(target), 0);
  // Forwarded datagrams count as sent once their connection is made and its holder checked.
  await lib.settleConnections(2000);
  out({ got, counters: counters() });
} else if (mode === 'send1') {
  // post one send and leave at once: no wait for anything
  const ah = ahTo(pd, ctx.queryGid(1, sgid), sgid);
  Buffer.from('msg 0').copy(buf, 0);
  qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 5, lkey: mr.lkey }], ud: { ah, remoteQpn: Number(target), remoteQkey: qkey } });
} else if (mode === 'send') {
  const group = target.includes('.');
  const ah = ahTo(pd, group ? gidFromIp(target) : ctx.queryGid(1, sgid), sgid);
  for (let i = 0; i < count; i++) {
    const m = Buffer.from(`msg ${i}`);
    m.copy(buf, 256 * i);
    qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr + 256 * i, length: m.length, lkey: mr.lkey }], ud: { ah, remoteQpn: group ? 0xffffff : Number(target), remoteQkey: qkey } });
    await new Promise((r) => setTimeout(r, 5));
  }
  const wcs = await pollN(scq, count);
  out({ sent: wcs.filter((w) => w.status === WcStatus.SUCCESS).length, counters: counters() });
}
qp.destroy();
clearTimeout(guard);
