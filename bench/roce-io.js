// The soft RoCE device's two UDP I/O paths side by side in one run (docs/design/roce-io.md):
// the netopt addon's batched sockets (RDMACM_ROCE_IO=mmsg: recvmmsg/sendmmsg) and Node's dgram
// (RDMACM_ROCE_IO=dgram), each beside plain Node dgram moving the same datagrams.
//
//   UD 4 KiB send      a UD QP on rxe_lo sends 4 KiB SENDs to a UDP peer at 127.0.0.2 (a host
//                      the device does not own: every packet leaves by the device's socket);
//                      baseline: a dgram socket sending the same datagrams to the same peer
//   UD 4 KiB receive   a peer at 127.0.0.2 blasts valid 4 KiB UD SENDs at a UD QP on rxe_lo;
//                      baseline: a dgram socket receiving the same blast
//   multicast, 1 rcvr  UD SENDs of 4 KiB to a group, one receiver process with a QP attached;
//                      baseline: a dgram group blast to a dgram group receiver
//
// Each row gives messages/s (sends: posted by the sender over its sending time; receives and
// multicast: at the receiving end, first to last arrival), the fraction the receiver got (the
// kernel drops what overflows a socket buffer, capped by net.core.rmem_max), and the CPU time per
// message of the process under test (the sender for sends, the receiver for receives; both summed
// for multicast), from process.cpuUsage(). On a machine other work loads, compare the CPU per
// message and the ratios of one run, not rates across runs. Traffic between two of our own
// processes on one host goes over their Unix sockets, not UDP (docs/design/roce-device.md), which
// is why these rows use a plain UDP peer.
//
//   node bench/roce-io.js [--json FILE] [--reps N] [--count N] [--quick]
//
// Every measuring process is a child of this one (the path is chosen per process); the peer at
// 127.0.0.2 uses the addon's batched socket when built, so it is never the bottleneck.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { compare, fmtCompare, fx, median } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const MTU = 4096;
const QKEY = 0x22222222;
const argv = process.argv.slice(2);
const opt = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};

// -- roles of the child processes ----------------------------------------------------------------

/** One JSON line to the parent. */
const say = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const cpuUs = (c) => c.user + c.system;

/** Counts datagrams or completions: rate over first-to-last arrival, reported after `idleMs` quiet. */
function counter(expect, idleMs = 400) {
  let n = 0;
  let first = 0n;
  let last = 0n;
  let cpu0 = null;
  let done;
  const finished = new Promise((r) => (done = r));
  let timer = null;
  const settle = () => {
    clearTimeout(timer);
    timer = setTimeout(() => done(), idleMs);
  };
  return {
    add(k = 1) {
      if (n === 0) {
        first = process.hrtime.bigint();
        cpu0 = process.cpuUsage();
      }
      n += k;
      last = process.hrtime.bigint();
      if (n >= expect) done();
      else settle();
    },
    async report() {
      await finished;
      clearTimeout(timer);
      const cpu = cpu0 ? cpuUs(process.cpuUsage(cpu0)) : 0;
      const secs = Number(last - first) / 1e9;
      return { count: n, secs, rate: secs > 0 ? n / secs : 0, cpuUsPerMsg: n > 0 ? cpu / n : 0 };
    },
  };
}

async function roleSink([port, count, group]) {
  const { MmsgEndpoint, mmsgAvailable } = await import('../dist/transport/roce/udp-mmsg.js');
  const c = counter(Number(count));
  const bindIp = group ?? '127.0.0.2';
  let close;
  if (mmsgAvailable() && !group) {
    const ep = MmsgEndpoint.open({ family: 4, bindIp, port: Number(port), bufSize: 16 << 20, onDatagram: () => c.add(), onError: () => {} }, true);
    close = () => ep.close();
  } else {
    const s = dgram.createSocket({ type: 'udp4', reuseAddr: true, recvBufferSize: 16 << 20 });
    s.on('message', () => c.add());
    s.bind(Number(port), bindIp);
    await once(s, 'listening');
    if (group) s.addMembership(group, '127.0.0.1');
    close = () => s.close();
  }
  say({ ready: true });
  say(await c.report());
  close();
}

/** rxe_lo with a UD QP in RTS, its CQs and an MR of `slots` MTU-sized slots. */
async function udQp(slots) {
  const { getDeviceList, QpType, QpState, Access } = await import('../dist/index.js');
  const ctx = getDeviceList().find((d) => d.name === 'rxe_lo').open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(slots * 2);
  const scq = ctx.createCq(slots * 2);
  const qp = pd.createQp({ qpType: QpType.UD, sendCq: scq, recvCq: cq, cap: { maxSendWr: slots, maxRecvWr: slots, maxSendSge: 1, maxRecvSge: 1 } });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: QKEY });
  qp.modify({ qpState: QpState.RTR });
  qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
  const mr = pd.regMr(Buffer.alloc(slots * (40 + MTU)), Access.LOCAL_WRITE);
  let sgid = 0;
  for (let i = 0; i < 8; i++) {
    const g = ctx.queryGid(1, i);
    if (g[10] === 0xff && g[11] === 0xff && g[12] === 127) sgid = i;
  }
  const ahTo = (ip) => {
    const gid = new Uint8Array(16);
    gid[10] = 0xff;
    gid[11] = 0xff;
    ip.split('.').forEach((x, i) => (gid[12 + i] = Number(x)));
    return pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: gid, flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } });
  };
  return { ctx, qp, cq, scq, mr, ahTo };
}

/** Send `count` messages in bursts of 64 per turn of the loop through `burst(n)`; the sender's CPU per message. */
async function sendAll(count, burst) {
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let sent = 0; sent < count; ) {
    const n = Math.min(64, count - sent);
    burst(n);
    sent += n;
    await new Promise((r) => setImmediate(r));
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return { cpu: cpuUs(process.cpuUsage(cpu0)) / count, rate: count / secs };
}

async function roleUdSend([count, dst]) {
  const { WrOpcode, SendFlags, IB_MULTICAST_QPN } = { ...(await import('../dist/index.js')), IB_MULTICAST_QPN: 0xffffff };
  const u = await udQp(128);
  const ah = u.ahTo(dst);
  const wr = { wrId: 0, opcode: WrOpcode.SEND, sgList: [{ addr: u.mr.addr, length: MTU, lkey: u.mr.lkey }], sendFlags: 0, ud: { ah, remoteQpn: dst.startsWith('2') ? IB_MULTICAST_QPN : 0x11, remoteQkey: QKEY } };
  const { cpu, rate } = await sendAll(Number(count), (n) => {
    for (let i = 0; i < n; i++) {
      wr.sendFlags = i === n - 1 ? SendFlags.SIGNALED : 0;
      u.qp.postSend(wr);
    }
    u.scq.poll(64);
  });
  const { roce } = await import('../dist/index.js');
  say({ cpuUsPerMsg: cpu, rate, path: roce.ioPath() });
  u.qp.destroy();
}

async function roleNodeSend([count, dst, port]) {
  const s = dgram.createSocket({ type: 'udp4', sendBufferSize: 4 << 20 });
  s.bind(0, '127.0.0.1');
  await once(s, 'listening');
  if (dst.startsWith('2')) {
    s.setMulticastInterface('127.0.0.1');
    s.setMulticastLoopback(true);
  }
  s.connect(Number(port), dst);
  await once(s, 'connect');
  const msg = Buffer.alloc(MTU + 32, 3); // a UD packet of 4 KiB: BTH, DETH, payload, ICRC
  const { cpu, rate } = await sendAll(Number(count), (n) => {
    for (let i = 0; i < n; i++) s.send(msg);
  });
  say({ cpuUsPerMsg: cpu, rate, path: 'node' });
  s.close();
}

async function roleUdRecv([count, group]) {
  const { WcStatus } = await import('../dist/index.js');
  const slots = 1024;
  const u = await udQp(slots);
  if (group) {
    const gid = new Uint8Array(16);
    gid[10] = 0xff;
    gid[11] = 0xff;
    group.split('.').forEach((x, i) => (gid[12 + i] = Number(x)));
    u.qp.attachMcast(gid, 0);
  }
  const post = (i) => u.qp.postRecv({ wrId: i, sgList: [{ addr: u.mr.addr + (i % slots) * (40 + MTU), length: 40 + MTU, lkey: u.mr.lkey }] });
  for (let i = 0; i < slots; i++) post(i);
  const c = counter(Number(count));
  const poll = setInterval(() => {
    for (;;) {
      const wcs = u.cq.poll(256);
      if (wcs.length === 0) break;
      for (const wc of wcs) {
        if (wc.status === WcStatus.SUCCESS) c.add();
        post(Number(wc.wrId));
      }
    }
  }, 0);
  say({ ready: true, qpn: u.qp.qpNum });
  const r = await c.report();
  clearInterval(poll);
  const { roce } = await import('../dist/index.js');
  say({ ...r, path: roce.ioPath(), drops: roce.counters('rxe_lo').udp_rcvbuf_drop ?? 0 });
  u.qp.destroy();
}

/** A blast of valid 4 KiB UD SENDs to `qpn` on 127.0.0.1, from 127.0.0.2 (the addon's socket where built). */
async function roleBlast([count, qpn, port]) {
  const { encodeRocePacket, IbOpcode } = await import('../dist/wire/roce/index.js');
  const { MmsgEndpoint, mmsgAvailable } = await import('../dist/transport/roce/udp-mmsg.js');
  const net = { family: 4, src: Uint8Array.of(127, 0, 0, 2), dst: Uint8Array.of(127, 0, 0, 1), sport: Number(port), dport: Number(port), ipId: 0 };
  const pkt = Buffer.from(encodeRocePacket({ opcode: IbOpcode.UD_SEND_ONLY, destQp: Number(qpn), psn: 0, deth: { qkey: QKEY, srcQp: 0x33 }, payload: Buffer.alloc(MTU, 5) }, net));
  let send;
  let close;
  if (mmsgAvailable()) {
    const ep = MmsgEndpoint.open({ family: 4, bindIp: '127.0.0.2', port: Number(port), bufSize: 16 << 20, onDatagram: () => {}, onError: () => {} }, true);
    send = () => ep.send(pkt, pkt.length, '127.0.0.1', Number(port));
    close = () => ep.close();
  } else {
    const s = dgram.createSocket({ type: 'udp4', reuseAddr: true });
    s.bind(Number(port), '127.0.0.2');
    await once(s, 'listening');
    send = () => s.send(pkt, Number(port), '127.0.0.1');
    close = () => s.close();
  }
  // Paced a little (32 per turn): a receiver's 4 MiB buffer holds some 1000 of them.
  await sendAll(Number(count), (n) => {
    for (let i = 0; i < n; i++) send();
  });
  say({ sent: Number(count) });
  close();
}

async function roleNodeRecv([port, count]) {
  const c = counter(Number(count));
  const s = dgram.createSocket({ type: 'udp4', reuseAddr: true, recvBufferSize: 4 << 20 });
  s.on('message', () => c.add());
  s.bind(Number(port), '127.0.0.1');
  await once(s, 'listening');
  say({ ready: true });
  say({ ...(await c.report()), path: 'node' });
  s.close();
}

const ROLES = { sink: roleSink, 'ud-send': roleUdSend, 'node-send': roleNodeSend, 'ud-recv': roleUdRecv, blast: roleBlast, 'node-recv': roleNodeRecv };

// -- the parent: rows, rounds, table --------------------------------------------------------------

/** A child in role `role` with RDMACM_ROCE_IO=`io`; `next()` resolves its next JSON line. */
function child(role, args, io, port) {
  const env = { ...process.env, RDMACM_ROCE_PORT: String(port) };
  if (io) env.RDMACM_ROCE_IO = io;
  const c = spawn(process.execPath, [SELF, '--role', role, ...args.map(String)], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = [];
  const waiters = [];
  createInterface({ input: c.stdout }).on('line', (l) => {
    const v = JSON.parse(l);
    const w = waiters.shift();
    if (w) w(v);
    else lines.push(v);
  });
  const kill = setTimeout(() => c.kill('SIGKILL'), 120_000);
  c.on('exit', () => clearTimeout(kill));
  return {
    next: () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((r) => waiters.push(r))),
    exited: once(c, 'exit'),
  };
}

let nextPort = 30000 + Math.floor(Math.random() * 2000) * 2;
const port = () => (nextPort += 2);

/** UD 4 KiB send: sender under test, sink at 127.0.0.2. */
async function rowSend(io, count) {
  const p = port();
  const sink = child('sink', [p, count], null, p);
  await sink.next();
  const s = io === 'node' ? child('node-send', [count, '127.0.0.2', p], null, p) : child('ud-send', [count, '127.0.0.2'], io, p);
  const sent = await s.next();
  const got = await sink.next();
  await Promise.all([s.exited, sink.exited]);
  return { rate: sent.rate, delivered: got.count / count, cpu: sent.cpuUsPerMsg, path: sent.path };
}

/** UD 4 KiB receive: receiver under test, blaster at 127.0.0.2. */
async function rowRecv(io, count) {
  const p = port();
  const r = io === 'node' ? child('node-recv', [p, count], null, p) : child('ud-recv', [count], io, p);
  const { qpn = 0 } = await r.next();
  const b = child('blast', [count, qpn, p], null, p);
  await b.next();
  const got = await r.next();
  await Promise.all([r.exited, b.exited]);
  return { rate: got.rate, delivered: got.count / count, cpu: got.cpuUsPerMsg, path: got.path };
}

/** Multicast, one receiver: sender and receiver both under test (CPU summed). */
async function rowMcast(io, count) {
  const p = port();
  const group = '239.7.7.7';
  const r = io === 'node' ? child('sink', [p, count, group], null, p) : child('ud-recv', [count, group], io, p);
  await r.next();
  await new Promise((res) => setTimeout(res, 100));
  const s = io === 'node' ? child('node-send', [count, group, p], null, p) : child('ud-send', [count, group], io, p);
  const sent = await s.next();
  const got = await r.next();
  await Promise.all([s.exited, r.exited]);
  return { rate: got.rate, delivered: got.count / count, cpu: sent.cpuUsPerMsg + got.cpuUsPerMsg, path: sent.path };
}

const ROWS = [
  ['UD 4 KiB send to a UDP peer', rowSend],
  ['UD 4 KiB receive from a UDP peer', rowRecv],
  ['multicast 4 KiB, 1 receiver', rowMcast],
];

export async function roceIoBench({ reps = 3, count = 20000 } = {}) {
  const { mmsgAvailable } = await import('../dist/transport/roce/udp-mmsg.js');
  const paths = mmsgAvailable() ? ['node', 'mmsg', 'dgram'] : ['node', 'dgram'];
  const runs = {};
  for (let rep = 0; rep < reps; rep++) {
    for (const [name, fn] of ROWS) {
      for (const io of paths) {
        const r = await fn(io, count);
        ((runs[name] ??= {})[io] ??= []).push(r);
      }
    }
  }
  const rows = [];
  const line = (a) => console.log(a.map((x, i) => String(x).padEnd(i === 0 ? 34 : 18)).join(''));
  console.log(`\nRoCE UDP I/O paths (${count} messages of 4 KiB per round, median of ${reps}; CPU µs per message of the process(es) under test)`);
  line(['row', ...paths.map((p) => `${p === 'node' ? 'Node dgram' : p} msg/s`), ...paths.filter((p) => p !== 'node').map((p) => `${p}/Node`), ...paths.map((p) => `${p === 'node' ? 'Node' : p} CPU/msg`)]);
  for (const [name] of ROWS) {
    const m = {};
    for (const io of paths) {
      const rs = runs[name][io];
      m[io] = { rate: median(rs.map((r) => r.rate)), cpu: median(rs.map((r) => r.cpu)), delivered: median(rs.map((r) => r.delivered)), spread: [Math.min(...rs.map((r) => r.rate)), Math.max(...rs.map((r) => r.rate))] };
    }
    line([name, ...paths.map((p) => `${fx(m[p].rate / 1000, 1)}k`), ...paths.filter((p) => p !== 'node').map((p) => fx(m[p].rate / m.node.rate)), ...paths.map((p) => fx(m[p].cpu, 2))]);
    // Each path against plain Node: the rounds of both, the median of the rounds' ratios, CPU per message.
    const of = (io, k) => runs[name][io].map((r) => r[k]);
    const cmp = Object.fromEntries(paths.filter((p) => p !== 'node').map((p) => [p, compare({ ours: of(p, 'rate'), base: of('node', 'rate'), oursCpu: of(p, 'cpu'), baseCpu: of('node', 'cpu') })]));
    for (const [p, c] of Object.entries(cmp)) console.log(`    ${p}/Node ${fx(c.ratio)}: ${fmtCompare(c, { d: 0, cpuUnit: 'us/msg', cpuD: 2 })}`);
    rows.push({ name, ...m, cmp, runs: runs[name] });
  }
  console.log('delivered fraction (median): ' + rows.map((r) => `${r.name}: ${paths.map((p) => `${p} ${fx(r[p].delivered, 3)}`).join(' ')}`).join('; '));
  return { paths, rows };
}

if (argv[0] === '--role') {
  await ROLES[argv[1]](argv.slice(2));
} else if (process.argv[1] === SELF) {
  const quick = argv.includes('--quick');
  const out = await roceIoBench({ reps: quick ? 1 : Number(opt('--reps') ?? 3), count: quick ? 2000 : Number(opt('--count') ?? 20000) });
  const file = opt('--json');
  if (file) writeFileSync(file, JSON.stringify({ sections: { roceIo: out } }, null, 2));
}
