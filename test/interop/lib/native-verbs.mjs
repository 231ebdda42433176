// Run in the reference VM (node native-verbs.mjs <package dir> <device> <address>): what the
// native backend reports and does on the kernel's device for shared receive queues, memory
// windows and UC QPs, without a peer:
//  - the device's attributes (max_srq, max_srq_wr, max_srq_sge, max_mw, the MEM_WINDOW bits);
//  - ibv_alloc_mw of each type, ibv_create_qp of a UC QP: the kernel's answer (error code or ok);
//  - where a UC QP can be made: two UC QPs of this process connected to each other by hand
//    (INIT/RTR/RTS with the RoCE v2 GID of <address>), a SEND and an RDMA WRITE from one to the
//    other, and an RDMA READ, which UC does not carry (the post's error code, or the status it
//    completes with when the provider takes the post).
// Prints one JSON line.
import { codeOf, pollUntil } from './guest-cq.mjs';

const [root, device, address] = process.argv.slice(2);
const lib = await import(`${root}/dist/index.js`);
const { getDeviceList, QpType, QpState, WrOpcode, SendFlags, Access, MwType, WcStatus, DEVICE_MEM_WINDOW, DEVICE_MEM_WINDOW_TYPE_2A, DEVICE_MEM_WINDOW_TYPE_2B } = lib;

const drain = (cq, n, ms = 20_000) => pollUntil(cq, n, Date.now() + ms);

const ctx = getDeviceList().find((d) => d.name === device).open();
const a = ctx.queryDevice();
const out = {
  device,
  attr: {
    maxSrq: a.maxSrq,
    maxSrqWr: a.maxSrqWr,
    maxSrqSge: a.maxSrqSge,
    maxMw: a.maxMw,
    memWindow: (a.deviceCapFlags & DEVICE_MEM_WINDOW) !== 0,
    type2a: (a.deviceCapFlags & DEVICE_MEM_WINDOW_TYPE_2A) !== 0,
    type2b: (a.deviceCapFlags & DEVICE_MEM_WINDOW_TYPE_2B) !== 0,
  },
};
const pd = ctx.allocPd();
const mws = [MwType.TYPE_1, MwType.TYPE_2].map((t) => codeOf(() => pd.allocMw(t)));
out.allocMw = mws.map((r) => r.code);
for (const r of mws) if (r.v) r.v.dealloc();
const cq = ctx.createCq(16);
const cap = { maxSendWr: 4, maxRecvWr: 4, maxSendSge: 1, maxRecvSge: 1 };
const qa = codeOf(() => pd.createQp({ qpType: QpType.UC, sendCq: cq, recvCq: cq, cap }));
out.createUc = qa.code;
if (qa.v) {
  const A = qa.v;
  const B = pd.createQp({ qpType: QpType.UC, sendCq: cq, recvCq: cq, cap });
  // The GID of <address>: ::ffff:a.b.c.d, RoCE v2 (rxe lists a v1 and a v2 entry for it).
  const want = Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...address.split('.').map(Number)]);
  const n = ctx.queryPort(1).gidTblLen;
  let sgid = -1;
  for (let i = 0; i < n; i++) {
    if (Buffer.from(ctx.queryGid(1, i)).equals(want) && ctx.queryGidType?.(1, i) !== 0) sgid = i;
  }
  out.sgidIndex = sgid;
  const ah = { isGlobal: true, portNum: 1, dlid: 0, sl: 0, srcPathBits: 0, staticRate: 0, grh: { dgid: want, sgidIndex: sgid, hopLimit: 64, flowLabel: 0, trafficClass: 0 } };
  for (const [q, peer] of [[A, B], [B, A]]) {
    q.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: Access.REMOTE_WRITE });
    q.modify({ qpState: QpState.RTR, pathMtu: 3, destQpNum: peer.qpNum, rqPsn: 0, ahAttr: ah });
    q.modify({ qpState: QpState.RTS, sqPsn: 0 });
  }
  const buf = Buffer.alloc(256);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  buf.write('uc send', 0);
  buf.write('uc write', 64);
  B.postRecv({ wrId: 1, sgList: [{ addr: mr.addr + 128, length: 64, lkey: mr.lkey }] });
  A.postSend([
    { wrId: 2, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: 7, lkey: mr.lkey }] },
    { wrId: 3, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr + 64, length: 8, lkey: mr.lkey }], rdma: { remoteAddr: mr.addr + 192, rkey: mr.rkey } },
  ]);
  const wcs = await drain(cq, 3);
  out.ucCompletions = wcs.map((w) => ({ wrId: Number(w.wrId), status: w.status, opcode: w.opcode, byteLen: w.byteLen, qp: w.qpNum === A.qpNum ? 'A' : w.qpNum === B.qpNum ? 'B' : w.qpNum })).sort((x, y) => x.wrId - y.wrId);
  out.ucReceived = buf.subarray(128, 135).toString();
  out.ucWritten = buf.subarray(192, 200).toString();
  out.ucRead = codeOf(() => A.postSend({ wrId: 4, opcode: WrOpcode.RDMA_READ, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: 8, lkey: mr.lkey }], rdma: { remoteAddr: mr.addr + 64, rkey: mr.rkey } })).code;
  // Posted (the provider took it): how it completes.
  if (out.ucRead === 'ok') out.ucReadStatus = (await drain(cq, 1, 10_000)).map((w) => w.status)[0] ?? null;
  out.ucOk = out.ucCompletions.length === 3 && out.ucCompletions.every((w) => w.status === WcStatus.SUCCESS);
}
console.log(JSON.stringify(out));
process.exit(0);
