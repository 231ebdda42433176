// The processes of local-users.test.js, inside the network namespace the test made. Modes:
// - `root`: the orchestrator (root): runs the others, owns a UD QP, reports what it received;
// - `squat`: (nobody) listens on every QPN block name of its own user's namespace;
// - `forge`: (nobody) connects to a block's socket and hands over two UD packets for a QP, one
//   claiming a remote source address and one from 127.0.0.1;
// - `udqp`: (nobody) owns a UD QP and reports what it receives;
// - `frame`: like `forge`, from a process of the QP owner's own user.
// Each writes JSON lines on stdout.
import net from 'node:net';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const [mode, ...args] = process.argv.slice(2);
const PORT = Number(process.env.RDMACM_ROCE_PORT);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const guard = setTimeout(() => {
  out({ error: `${mode}: timed out` });
  process.exit(3);
}, 100000);
guard.unref();

const lib = await import('../../../../dist/index.js');
const wire = await import('../../../../dist/wire/roce/index.js');
const { getDeviceList, QpType, QpState, Access, WcStatus, roce } = lib;
const QKEY = 0x11110000;

/** Run this script as `nobody` in mode `m`; resolves with its first JSON line and keeps it running. */
function asNobody(m, extra = [], { nofile } = {}) {
  const argv = [fileURLToPath(import.meta.url), m, ...extra.map(String)];
  const cmd = nofile ? ['sh', ['-c', `ulimit -n ${nofile} && exec "$0" "$@"`, process.execPath, ...argv]] : [process.execPath, argv];
  const c = spawn(cmd[0], cmd[1], { uid: Number(args[0]), gid: Number(args[1]), env: process.env, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = [];
  let wake = null;
  let buf = '';
  c.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buf.slice(0, i)));
      buf = buf.slice(i + 1);
      wake?.();
    }
  });
  return {
    proc: c,
    async next() {
      while (lines.length === 0) await new Promise((r) => (wake = r));
      wake = null;
      const l = lines.shift();
      if (l.error) throw new Error(l.error);
      return l;
    },
    exited: new Promise((r) => c.on('exit', (code) => r(code))),
  };
}

/** A UD QP on rxe_lo in RTS with receive WQEs posted. */
function udQp(n = 4) {
  const ctx = getDeviceList().find((d) => d.name === 'rxe_lo').open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(16);
  const buf = Buffer.alloc(256 * (n + 1)); // n receive slots, then a send slot
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  const qp = pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 4, maxRecvWr: n, maxSendSge: 1, maxRecvSge: 1 } });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: QKEY });
  qp.modify({ qpState: QpState.RTR });
  qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
  for (let i = 0; i < n; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + 256 * i, length: 256, lkey: mr.lkey }] });
  return { ctx, pd, qp, cq, buf, mr, n };
}

/** Send `text` (inline) from QP `q` to QPN `qpn` at 127.0.0.1 over rxe_lo. */
function sendTo(q, qpn, text) {
  let sgid = 0;
  for (let i = 0; i < 8; i++) {
    const g = q.ctx.queryGid(1, i);
    if (g[10] === 0xff && g[11] === 0xff && g[12] === 127) sgid = i;
  }
  const ah = q.pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: q.ctx.queryGid(1, sgid), flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } });
  const at = 256 * q.n;
  const len = q.buf.write(text, at);
  q.qp.postSend({ wrId: 's', opcode: lib.WrOpcode.SEND, sgList: [{ addr: q.mr.addr + at, length: len, lkey: q.mr.lkey }], ud: { ah, remoteQpn: qpn, remoteQkey: QKEY } });
}

/** What a QP received within `ms`: the payload texts. */
async function received(q, ms) {
  const end = Date.now() + ms;
  const got = [];
  while (Date.now() < end) {
    for (const wc of q.cq.poll(8)) if (wc.status === WcStatus.SUCCESS) got.push(q.buf.toString('utf8', 256 * Number(wc.wrId) + 40, 256 * Number(wc.wrId) + wc.byteLen));
    await new Promise((r) => setTimeout(r, 10));
  }
  return got;
}

/** A forwarding frame of a UD packet for `qpn`, claiming to come from `src` (IPv4) to 127.0.0.1. */
function frame(qpn, src, text) {
  const s = Uint8Array.from(src.split('.').map(Number));
  const d = Uint8Array.of(127, 0, 0, 1);
  const pkt = Buffer.from(wire.encodeRocePacket({ opcode: wire.IbOpcode.UD_SEND_ONLY, destQp: qpn, psn: 0, deth: { qkey: QKEY, srcQp: 0x77 }, payload: Buffer.from(text) }, { family: 4, src: s, dst: d, sport: PORT, dport: PORT, ipId: 0 }));
  const f = Buffer.alloc(40 + pkt.length);
  f.writeUInt32BE(36 + pkt.length, 0);
  f[4] = 4;
  f.writeUInt16BE(PORT, 6);
  Buffer.from(s).copy(f, 8);
  Buffer.from(d).copy(f, 24);
  pkt.copy(f, 40);
  return f;
}

/** Hand `frames` to the process listening on abstract name `name`. */
async function handOver(name, frames) {
  const c = net.connect(name);
  await new Promise((res, rej) => {
    c.once('connect', res);
    c.once('error', rej);
  });
  for (const f of frames) c.write(f);
  await new Promise((r) => c.end(r));
}

const blockName = (uid, b) => `\0rdmacm-roce-${PORT}-u${uid}-qpn-${b}`;

if (mode === 'root') {
  spawnSync('ip', ['link', 'set', 'lo', 'up']);
  const nobodyUid = Number(args[0]);
  // 1. Another user holds every QPN block name of its namespace (as a process of it creating
  //    16 million QPs would): this user's QP creation must not starve.
  const squat = asNobody('squat', [], { nofile: 17000 });
  const s = await squat.next();
  const q = udQp();
  const block = q.qp.qpNum >>> 10;
  // 2. That user's process hands over a datagram claiming a remote source, and one from this host.
  const forge = asNobody('forge', [0, block, q.qp.qpNum]);
  await forge.next();
  const got = await received(q, 500);
  const c = roce.counters('rxe_lo');
  // 3. Two processes of that user share the device: one hands the other a datagram with a remote
  //    source (its own user: taken). Its names are free again first.
  squat.proc.kill();
  await squat.exited;
  const a = asNobody('udqp');
  const { qpn, block: bBlock } = await a.next();
  // Root's QP sends to that user's QP on this host: its block is found under that user's name.
  sendTo(q, qpn, 'from root');
  const f = asNobody('frame', [nobodyUid, bBlock, qpn]);
  await f.next();
  const same = await a.next();
  out({ squatted: s.squatted, qpn: q.qp.qpNum, got, fwd_forged_drop: c.fwd_forged_drop, fwd_rcvd: c.fwd_rcvd, same, exits: await Promise.all([forge.exited, f.exited, a.exited]) });
  q.qp.destroy();
  clearTimeout(guard);
  process.exit(0);
} else if (mode === 'squat') {
  const servers = [];
  let n = 0;
  for (let b = 1; b <= 16382; b++) {
    const srv = net.createServer();
    srv.on('error', () => {});
    srv.listen(blockName(process.getuid(), b));
    if (srv.listening) n++;
    servers.push(srv);
  }
  out({ squatted: n });
  await new Promise(() => {}); // held until killed
} else if (mode === 'forge' || mode === 'frame') {
  const [uid, block, qpn] = args.map(Number);
  await handOver(blockName(uid, block), [frame(Number(qpn), '10.9.9.9', `${mode}: remote`), frame(Number(qpn), '127.0.0.1', `${mode}: local`)]);
  out({ handed: 2 });
  clearTimeout(guard);
} else if (mode === 'udqp') {
  const q = udQp();
  out({ qpn: q.qp.qpNum, block: q.qp.qpNum >>> 10 });
  const got = await received(q, 800);
  const c = roce.counters('rxe_lo');
  out({ got, fwd_forged_drop: c.fwd_forged_drop, fwd_rcvd: c.fwd_rcvd });
  q.qp.destroy();
  clearTimeout(guard);
  process.exit(0);
}
