// Run in the reference VM (node native-stat.mjs <package dir> <device> <address>): the native
// backend's counters and resources of a kernel device next to the kernel's own, in one process:
//  - a PD, a CQ, a registered buffer and two RC QPs; on a RoCE device (rxe) the two QPs are
//    connected to each other by hand (INIT/RTR/RTS with the RoCE v2 GID of <address>) and carry
//    8 SENDs, 2 RDMA WRITEs and 1 RDMA READ, so that the counters move;
//  - Context.queryCounters(1), then `rdma -j statistic show link DEV/1`, then queryCounters(1)
//    again: every kernel value must lie between our two readings;
//  - listResources() and kernelResources('qp'), and `rdma -j resource show qp|cq|mr|pd` read
//    while every object is alive.
// Prints one JSON line.
import { spawnSync } from 'node:child_process';
import { codeOf, pollUntil } from './guest-cq.mjs';

const [root, device, address] = process.argv.slice(2);
const lib = await import(`${root}/dist/index.js`);
const { getDeviceList, QpType, QpState, WrOpcode, SendFlags, Access, listResources, kernelResources } = lib;

const drain = async (cq, n, ms = 20_000) => (await pollUntil(cq, n, Date.now() + ms)).map((w) => ({ wrId: Number(w.wrId), status: w.status }));
/** iproute2's rdma tool with JSON output: the parsed answer, its exit status and stderr. */
function rdma(...args) {
  const r = spawnSync('rdma', ['-j', ...args], { encoding: 'utf8', timeout: 30_000 });
  let json = null;
  try {
    json = r.stdout.trim() === '' ? null : JSON.parse(r.stdout);
  } catch {
    json = null;
  }
  return { rc: r.status, json, out: r.stdout, err: r.stderr };
}

const ctx = getDeviceList().find((d) => d.name === device).open();
const pd = ctx.allocPd();
const cq = ctx.createCq(64);
const buf = Buffer.alloc(4096);
const mr = pd.regMr(buf, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
const cap = { maxSendWr: 16, maxRecvWr: 16, maxSendSge: 1, maxRecvSge: 1 };
const A = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap });
const B = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap });
const out = { device, pid: process.pid, qpns: [A.qpNum, B.qpNum], cqe: cq.cqe, mr: { rkey: mr.rkey, lkey: mr.lkey, length: mr.length } };

// RoCE: the GID of <address> (::ffff:a.b.c.d, RoCE v2), the two QPs connected to each other.
const want = Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...address.split('.').map(Number)]);
let sgid = -1;
for (let i = 0; i < ctx.queryPort(1).gidTblLen; i++) {
  const g = codeOf(() => ctx.queryGid(1, i));
  if (g.code === 'ok' && Buffer.from(g.v).equals(want) && ctx.queryGidType?.(1, i) !== 0) sgid = i;
}
out.sgidIndex = sgid;
const RDMA_ACCESS = Access.REMOTE_WRITE | Access.REMOTE_READ;
if (sgid >= 0) {
  const ah = { isGlobal: true, portNum: 1, dlid: 0, sl: 0, srcPathBits: 0, staticRate: 0, grh: { dgid: want, sgidIndex: sgid, hopLimit: 64, flowLabel: 0, trafficClass: 0 } };
  const psn = { [A.qpNum]: 0x100, [B.qpNum]: 0x200 };
  for (const [q, peer] of [[A, B], [B, A]]) {
    q.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qpAccessFlags: RDMA_ACCESS });
    q.modify({ qpState: QpState.RTR, pathMtu: 3, destQpNum: peer.qpNum, rqPsn: psn[peer.qpNum], ahAttr: ah, maxDestRdAtomic: 1, minRnrTimer: 12 });
    q.modify({ qpState: QpState.RTS, sqPsn: psn[q.qpNum], timeout: 14, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 1 });
  }
  const SENDS = 8;
  for (let i = 0; i < SENDS; i++) B.postRecv({ wrId: 100 + i, sgList: [{ addr: mr.addr + 2048 + i * 64, length: 64, lkey: mr.lkey }] });
  const sge = (off, length) => [{ addr: mr.addr + off, length, lkey: mr.lkey }];
  const wrs = [];
  for (let i = 0; i < SENDS; i++) wrs.push({ wrId: i, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sge(0, 32) });
  wrs.push({ wrId: 20, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, sgList: sge(64, 64), rdma: { remoteAddr: mr.addr + 1024, rkey: mr.rkey } });
  wrs.push({ wrId: 21, opcode: WrOpcode.RDMA_WRITE, sendFlags: SendFlags.SIGNALED, sgList: sge(128, 1500), rdma: { remoteAddr: mr.addr + 1100, rkey: mr.rkey } });
  wrs.push({ wrId: 22, opcode: WrOpcode.RDMA_READ, sendFlags: SendFlags.SIGNALED, sgList: sge(3000, 64), rdma: { remoteAddr: mr.addr, rkey: mr.rkey } });
  A.postSend(wrs);
  const wcs = await drain(cq, wrs.length + SENDS);
  out.completions = wcs.length;
  out.allOk = wcs.every((w) => w.status === 0);
}

// Counters: ours, the kernel's through its tool, ours again.
const c1 = codeOf(() => ctx.queryCounters(1));
const k = rdma('statistic', 'show', 'link', `${device}/1`);
const c2 = codeOf(() => ctx.queryCounters(1));
out.counters = { before: c1.code === 'ok' ? c1.v : c1.code, rdma: k, after: c2.code === 'ok' ? c2.v : c2.code };

// Resources: ours, the kernel's through our API and through the tool, all objects alive.
out.resources = { ours: listResources(), api: await kernelResources('qp'), rdma: {} };
for (const kind of ['qp', 'cq', 'mr', 'pd']) out.resources.rdma[kind] = rdma('resource', 'show', kind);
// The same QPs' kernel records as rdma's text output prints them (its default view).
out.resources.text = spawnSync('rdma', ['resource', 'show', 'qp'], { encoding: 'utf8' }).stdout;
console.log(JSON.stringify(out));
process.exit(0);
