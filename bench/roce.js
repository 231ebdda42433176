// The RoCE section of `npm run bench`: the soft RoCEv2 device (rxe_lo, UD and RC QPs) beside plain
// Node `dgram`, measured in the same run on loopback, two processes per test (this process and
// bench/roce-peer.js; three for the two-receiver multicast row):
//
//   64 B ping-pong RTT      UD SEND/RECV against a dgram echo             target <= 1.2 x dgram
//   UD messages/s at MTU    UD SENDs of the path MTU (4096 B) against     target >= 1.5 x dgram
//                           a dgram blast of as many bytes
//   multicast, 1 receiver   UD SENDs to a group (QPN 0xFFFFFF) against    target >= 1.0 x dgram
//                           a dgram group blast
//   multicast, 2 receivers  the same, two receiver processes (deliveries/s, both summed)
//   udaddy -c 100           SIDR resolution of 100 UD ids (our udaddy,    target <= 3 x dgram
//                           server and client), beside 100 dgram request/replies at once from a
//                           fresh process
//   RC 64 B ping-pong RTT   SEND/RECV over an RC connection (rdma_cm,     target <= 1.2 x dgram
//                           IB CM over rxe_lo) against a dgram echo
//   1 MiB RDMA WRITE        bytes/s of 1 MiB WRITEs, 8 in flight, against target >= 1.0 x iWARP
//                           the same WRITEs over siw_lo (iWARP), and beside a dgram blast of
//                           4096 B datagrams (the payload of each RoCE packet)
//   cmtime                  our cmtime's connect rate over rxe_lo beside siw_lo
//
// Beside the UD and multicast rows: the kernel's UDP limit (bench/kernel-udp.js: a C
// sendmmsg/recvmmsg blast of the same datagrams, built with cc; iperf3 / sockperf where installed).
// Every row prints the spread of each side's rounds and the CPU time per operation of every
// process of each side (this process through process.cpuUsage(), its peers through /proc).
//
//   node bench/roce.js [--json FILE] [--reps N] [--quick]
//                      [--only pingpong,mtu,mcast1,mcast2,udaddy,rcpp,write,cmtime]
//
// --json FILE  also write every run, the medians and the ratios as JSON
// --only       run only these rows (default: all)
// --reps N     interleaved rounds (each figure the median of its rounds); default 3
// --quick      short counts and one round: a smoke test of the bench itself, not figures to keep
//
// Each test first runs an untimed warm-up as long as its timed part (BENCH_WARMUP=0: none); the
// two processes of a pair run on one CPU each (bench/lib.js; BENCH_PIN=0: not). The device
// uses a private UDP port (RDMACM_ROCE_PORT), so the bench never meets another user of rxe_lo.
// As a section of a larger bench, run this file as a process of its own (`--json FILE`, then read
// `sections.roce`) rather than importing roceBench(): the device's UDP port is fixed when the
// package first opens a RoCE device in a process, so it must be chosen before anything else does.
// See docs/bench-roce.md for what each row means. Numbers are noisy on a shared machine: compare
// the ratios of one run, never absolute figures across runs.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

// What the bench's scripts share (CPU pinning, medians).
import { compare, cpuMeter, fmtCompare, fmtSpread, freePort, median, pinCpus, pinned, pinSelf, procCpuUs, reapedCpuUs, run } from './lib.js';
import { udpBlast, udpBlastTool, udpToolLimits } from './kernel-udp.js';
import { waitCq } from './cq-wait.js';

const PEER = fileURLToPath(new URL('./roce-peer.js', import.meta.url));
const UDADDY = fileURLToPath(new URL('../dist/cli/udaddy.js', import.meta.url));
const CMTIME = fileURLToPath(new URL('../dist/cli/cmtime.js', import.meta.url));
const WARMUP = process.env.BENCH_WARMUP !== '0';
/** Node options for the peer processes (`BENCH_ROCE_PEER_FLAGS`, e.g. `--cpu-prof --cpu-prof-dir=DIR` to profile them). */
const PEER_FLAGS = (process.env.BENCH_ROCE_PEER_FLAGS ?? '').split(' ').filter(Boolean);
const PIN = pinCpus();
const QKEY = 0x11111111;
const MTU = 4096;

/** A UDP port nobody has bound on 127.0.0.1 now, below the kernel's ephemeral range. */
async function freeUdpPort() {
  for (;;) {
    const p = 20000 + Math.floor(Math.random() * 12000);
    const s = dgram.createSocket('udp4');
    const ok = await new Promise((r) => {
      s.once('error', () => r(false));
      s.bind({ port: p, address: '0.0.0.0', exclusive: true }, () => r(true));
    });
    s.close();
    if (ok) return p;
  }
}

// The device's UDP port, private to this run: set before the package is loaded.
if (!process.env.RDMACM_ROCE_PORT) process.env.RDMACM_ROCE_PORT = String(await freeUdpPort());
const ROCE_PORT = Number(process.env.RDMACM_ROCE_PORT);
const { getDeviceList, QpType, QpState, Access, WrOpcode, SendFlags, WcStatus, createId, PortSpace } = await import('../dist/index.js');

/** A peer process on CPU PIN[0]; `next()` resolves its next JSON line. Stopped by `stop()`. */
function peer(...args) {
  const c = spawn(...pinned(PIN?.[0] ?? null, process.execPath, [...PEER_FLAGS, PEER, ...args.map(String)]), { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  const waiters = [];
  let ended = false;
  createInterface({ input: c.stdout }).on('line', (l) => {
    const v = JSON.parse(l);
    const w = waiters.shift();
    if (w) w.resolve(v);
    else lines.push(v);
  });
  c.on('exit', (code) => {
    ended = true;
    for (const w of waiters.splice(0)) w.reject(new Error(`peer ${args.join(' ')} exited ${code}`));
  });
  const kill = setTimeout(() => c.kill('SIGKILL'), 120_000);
  return {
    pid: c.pid,
    next: (ms = 20_000) =>
      lines.length
        ? Promise.resolve(lines.shift())
        : new Promise((resolve, reject) => {
            if (ended) return reject(new Error(`peer ${args.join(' ')} has ended`));
            const t = setTimeout(() => reject(new Error(`peer ${args.join(' ')}: nothing after ${ms} ms`)), ms);
            waiters.push({ resolve: (v) => (clearTimeout(t), resolve(v)), reject: (e) => (clearTimeout(t), reject(e)) });
          }),
    async stop() {
      clearTimeout(kill);
      if (c.exitCode === null) {
        const gone = once(c, 'exit');
        c.stdin.end();
        await gone;
      }
    },
  };
}

const tick = () => new Promise((r) => setImmediate(r));

// -- the soft device on this side --------------------------------------------------------------

/** `::ffff:a.b.c.d`. */
function gidOfIpv4(ip) {
  const g = new Uint8Array(16);
  g[10] = 0xff;
  g[11] = 0xff;
  ip.split('.').forEach((x, i) => (g[12 + i] = Number(x)));
  return g;
}

/** rxe_lo, a PD, CQs (the receive CQ on a completion channel), a UD QP in RTS, one MR. */
function udSide(depth) {
  const dev = getDeviceList().find((d) => d.name === 'rxe_lo');
  if (!dev) throw new Error('no rxe_lo device');
  const ctx = dev.open();
  const pd = ctx.allocPd();
  const ch = ctx.createCompChannel();
  const rcq = ctx.createCq(depth * 2, ch);
  const scq = ctx.createCq(depth * 2);
  const qp = pd.createQp({ qpType: QpType.UD, sendCq: scq, recvCq: rcq, cap: { maxSendWr: depth, maxRecvWr: depth, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 64 } });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey: QKEY });
  qp.modify({ qpState: QpState.RTR });
  qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
  let sgid = -1;
  for (let i = 0; i < 8 && sgid < 0; i++) {
    const g = ctx.queryGid(1, i);
    if (g[10] === 0xff && g[11] === 0xff && g[12] === 127) sgid = i;
  }
  const ahs = [];
  const ahTo = (ip) => {
    const ah = pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: gidOfIpv4(ip), flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } });
    ahs.push(ah);
    return ah;
  };
  const mr = pd.regMr(Buffer.alloc(2 * (40 + MTU), 7), Access.LOCAL_WRITE);
  /** Next receive completions (armed, waiting on the channel). */
  const recvWcs = async () => {
    for (;;) {
      const wcs = rcq.poll(32);
      if (wcs.length) return wcs;
      rcq.reqNotify();
      const again = rcq.poll(32);
      if (again.length) return again;
      await ch.getCqEvent();
      rcq.ackEvents(1);
    }
  };
  const close = () => {
    qp.destroy();
    for (const ah of ahs) ah.destroy();
    rcq.destroy();
    scq.destroy();
    ch.destroy();
    mr.dereg();
    pd.dealloc();
    ctx.close();
  };
  return { qp, scq, mr, ahTo, recvWcs, close };
}

// -- 64 B ping-pong ------------------------------------------------------------------------------

async function dgramPingPong(iters) {
  const port = await freeUdpPort();
  const p = peer('dgram-echo', port);
  await p.next();
  const s = dgram.createSocket('udp4');
  s.bind(0, '127.0.0.1');
  await once(s, 'listening');
  s.connect(port, '127.0.0.1');
  await once(s, 'connect');
  const msg = Buffer.alloc(64, 1);
  const warm = WARMUP ? iters : 0;
  let left = warm + iters;
  const cpu = cpuMeter([process.pid, p.pid]);
  let t0 = process.hrtime.bigint();
  cpu.start();
  await new Promise((resolve) => {
    s.on('message', () => {
      if (--left === 0) return resolve();
      if (left === iters) {
        t0 = process.hrtime.bigint();
        cpu.start();
      }
      s.send(msg);
    });
    s.send(msg);
  });
  const ns = Number(process.hrtime.bigint() - t0);
  const used = cpu.stop();
  s.close();
  await p.stop();
  return { rtt: ns / iters / 1000, cpu: used === null ? null : used / iters };
}

async function udPingPong(iters) {
  const p = peer('ud-echo');
  const { qpn } = await p.next();
  const u = udSide(64);
  const ah = u.ahTo('127.0.0.1');
  const sge = [{ addr: u.mr.addr, length: 64, lkey: u.mr.lkey }];
  const rsge = [{ addr: u.mr.addr + 40 + MTU, length: 40 + MTU, lkey: u.mr.lkey }];
  const send = { wrId: 0, opcode: WrOpcode.SEND, sgList: sge, sendFlags: SendFlags.INLINE, ud: { ah, remoteQpn: qpn, remoteQkey: QKEY } };
  u.qp.postRecv({ wrId: 0, sgList: rsge });
  const warm = WARMUP ? iters : 0;
  const total = warm + iters;
  const cpu = cpuMeter([process.pid, p.pid]);
  let t0 = process.hrtime.bigint();
  cpu.start();
  u.qp.postSend(send);
  for (let done = 0; done < total; ) {
    for (const wc of await u.recvWcs()) {
      if (wc.status !== WcStatus.SUCCESS) throw new Error(`receive status ${wc.status}`);
      done++;
      u.qp.postRecv({ wrId: 0, sgList: rsge });
      if (done === warm) {
        t0 = process.hrtime.bigint();
        cpu.start();
      }
      if (done < total) {
        send.sendFlags = (done & 31) === 0 ? SendFlags.INLINE | SendFlags.SIGNALED : SendFlags.INLINE;
        u.qp.postSend(send);
        u.scq.poll(64);
      }
    }
  }
  const ns = Number(process.hrtime.bigint() - t0);
  const used = cpu.stop();
  u.close();
  await p.stop();
  return { rtt: ns / iters / 1000, cpu: used === null ? null : used / iters };
}

// -- blasts: a sender here, counting receivers in peer processes ------------------------------------

/**
 * Send `count` messages through `sendBatch(n)` (64 per turn of the event loop), after as many
 * untimed ones; each receiver reports each burst it saw. Returns deliveries/s summed over the
 * receivers (each receiver's count over its own first-to-last arrival time), the fraction
 * delivered, the receivers' mean CPU µs per message they got (`rxCpu`) and the CPU µs per
 * delivery of every process (`cpu`: this sender's over the timed phase and the receivers').
 */
async function blast(receivers, count, sendBatch) {
  const phase = async () => {
    for (let sent = 0; sent < count; ) {
      const n = Math.min(64, count - sent);
      sendBatch(n);
      sent += n;
      await tick();
    }
    return Promise.all(receivers.map((r) => r.next(30_000)));
  };
  if (WARMUP) await phase();
  const cpu0 = procCpuUs();
  const reports = await phase();
  const senderUs = procCpuUs() - cpu0;
  const got = reports.reduce((a, r) => a + r.count, 0);
  const rate = reports.reduce((a, r) => a + (r.secs > 0 ? r.count / r.secs : 0), 0);
  const delivered = got / (count * receivers.length);
  const rxCpu = reports.reduce((a, r) => a + r.cpuUsPerMsg, 0) / reports.length;
  const cpu = got ? (senderUs + reports.reduce((a, r) => a + r.cpuUsPerMsg * r.count, 0)) / got : null;
  return { rate, delivered, rxCpu, cpu, reports };
}

async function dgramBlast(count, size, group, nrecv) {
  const port = await freeUdpPort();
  const recv = Array.from({ length: nrecv }, () => peer('dgram-sink', port, ...(group ? [group] : [])));
  for (const r of recv) await r.next();
  const s = dgram.createSocket('udp4');
  s.bind(0, '127.0.0.1');
  await once(s, 'listening');
  if (group) {
    s.setMulticastInterface('127.0.0.1');
    s.setMulticastLoopback(true);
  }
  s.connect(port, group ?? '127.0.0.1');
  await once(s, 'connect');
  const msg = Buffer.alloc(size, 3);
  try {
    return await blast(recv, count, (n) => {
      for (let i = 0; i < n; i++) s.send(msg);
    });
  } finally {
    s.close();
    for (const r of recv) await r.stop();
  }
}

async function udBlast(count, size, group, nrecv) {
  const recv = Array.from({ length: nrecv }, () => peer('ud-sink', ...(group ? [group] : [])));
  const qpns = [];
  for (const r of recv) qpns.push((await r.next()).qpn);
  const u = udSide(128);
  const ah = u.ahTo(group ?? '127.0.0.1');
  const wr = { wrId: 0, opcode: WrOpcode.SEND, sgList: [{ addr: u.mr.addr, length: size, lkey: u.mr.lkey }], sendFlags: 0, ud: { ah, remoteQpn: group ? 0xffffff : qpns[0], remoteQkey: QKEY } };
  try {
    // A group socket of a receiver is bound and joined in the background: let it settle.
    if (group) await new Promise((r) => setTimeout(r, 100));
    return await blast(recv, count, (n) => {
      for (let i = 0; i < n; i++) {
        wr.sendFlags = i === n - 1 ? SendFlags.SIGNALED : 0;
        u.qp.postSend(wr);
      }
      u.scq.poll(64);
    });
  } finally {
    u.close();
    for (const r of recv) await r.stop();
  }
}

// -- RC: rdma_cm connections over rxe_lo (and siw_lo beside it) -------------------------------------

/** An RC connection from this process to a roce-peer `rc-*` listener on `port`, pinned to `device`. */
async function rcConnect(port, device, maxSendWr) {
  const id = createId(null, null, PortSpace.TCP, { device });
  await id.resolveAddr(null, { address: '127.0.0.1', port });
  await id.resolveRoute();
  id.createQp(null, { cap: { maxSendWr, maxRecvWr: 64, maxInlineData: 64 } });
  await id.connect();
  return id;
}

async function rcClose(id, p) {
  // Teardown is not measured; a disconnect the peer does not answer in time still ends the test.
  await id.disconnect().catch(() => {});
  id.destroyQp();
  await id.destroy();
  await p.stop();
}

/** 64 B SEND/RECV ping-pong over an RC connection of `device`: RTT in us and CPU us per round trip. */
async function rcPingPong(device, iters) {
  const port = await freePort();
  const p = peer('rc-echo', port, device);
  await p.next();
  const id = await rcConnect(port, device, 64);
  const qp = id.qp;
  const mr = id.pd.regMr(Buffer.alloc(128), Access.LOCAL_WRITE);
  const send = { wrId: 0, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }], sendFlags: SendFlags.INLINE };
  const recv = { wrId: 0, sgList: [{ addr: mr.addr + 64, length: 64, lkey: mr.lkey }] };
  qp.postRecv(recv);
  const warm = WARMUP ? iters : 0;
  const total = warm + iters;
  const cpu = cpuMeter([process.pid, p.pid]);
  let t0 = process.hrtime.bigint();
  cpu.start();
  qp.postSend(send);
  for (let done = 0; done < total; ) {
    for (const wc of await waitCq(id.recvCq, id.recvCqChannel)) {
      if (wc.status !== WcStatus.SUCCESS) throw new Error(`RC receive status ${wc.status}`);
      done++;
      qp.postRecv(recv);
      if (done === warm) {
        t0 = process.hrtime.bigint();
        cpu.start();
      }
      if (done < total) {
        send.sendFlags = (done & 31) === 0 ? SendFlags.INLINE | SendFlags.SIGNALED : SendFlags.INLINE;
        qp.postSend(send);
        id.sendCq.poll(64);
      }
    }
  }
  const ns = Number(process.hrtime.bigint() - t0);
  const used = cpu.stop();
  id.sendCq.poll(64);
  await rcClose(id, p);
  return { rtt: ns / iters / 1000, cpu: used === null ? null : used / iters };
}

/**
 * `mib` RDMA WRITEs of 1 MiB over an RC connection of `device`, 8 in flight, then a SEND the
 * peer answers (a WRITE's completion on RC means acknowledged; the reply closes the phase).
 * Bytes/s of the timed phase, after an untimed one as long.
 */
async function rcWrite(device, mib) {
  const port = await freePort();
  const p = peer('rc-write', port, device);
  await p.next();
  const id = await rcConnect(port, device, 16);
  const pd = Buffer.from(id.event.param.conn.privateData);
  const raddr = Number(pd.readBigUInt64BE(0));
  const rkey = pd.readUInt32BE(8);
  const qp = id.qp;
  const src = id.pd.regMr(Buffer.alloc(1 << 20, 9), 0);
  const msg = id.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
  const wr = { wrId: 0, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr, length: 1 << 20, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: raddr, rkey } };
  const depth = 8;
  const phase = async () => {
    qp.postRecv({ wrId: 0, sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
    let posted = 0;
    let completed = 0;
    while (posted < Math.min(depth, mib)) (qp.postSend(wr), posted++);
    while (completed < mib) {
      for (const wc of await waitCq(id.sendCq, id.sendCqChannel)) {
        if (wc.status !== WcStatus.SUCCESS) throw new Error(`RDMA WRITE status ${wc.status}`);
        if (wc.wrId === 'fin') continue;
        completed++;
        if (posted < mib) (qp.postSend(wr), posted++);
      }
    }
    qp.postSend({ wrId: 'fin', opcode: WrOpcode.SEND, sgList: [{ addr: msg.addr, length: 1, lkey: msg.lkey }], sendFlags: SendFlags.SIGNALED });
    await waitCq(id.recvCq, id.recvCqChannel);
  };
  if (WARMUP) await phase();
  const cpu = cpuMeter([process.pid, p.pid]);
  const t0 = process.hrtime.bigint();
  cpu.start();
  await phase();
  const ns = Number(process.hrtime.bigint() - t0);
  const used = cpu.stop();
  id.sendCq.poll(64);
  await rcClose(id, p);
  return { rate: (mib * (1 << 20) * 1e9) / ns, cpu: used === null ? null : used / mib };
}

/** The "full connect" total (us) of cmtime's "Connect (N) QPs test" table, or null. */
function cmtimeFullConnect(text, conns) {
  const at = text.indexOf(`Connect (${conns}) QPs test`);
  if (at < 0) return null;
  for (const line of text.slice(at).split('\n')) {
    const m = /^full connect\s+(\d+)\s+(\d+)/.exec(line);
    if (m) return Number(m[2]);
  }
  return null;
}

/**
 * Our cmtime over `device` (server -L and client, two processes, -c `conns`, `--warmup` as many
 * untimed connections first): connections/s from the client's "full connect" row.
 */
async function cmtimeRate(device, conns) {
  const port = await freePort();
  const env = { RDMACM_DEVICE: device };
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(port), '-c', String(conns), '--warmup', String(WARMUP ? conns : 0)];
  const srv = run(process.execPath, [CMTIME, ...common, '-L'], { side: 0, timeoutMs: 120_000, env });
  await new Promise((r) => setTimeout(r, 300));
  const cli = await run(process.execPath, [CMTIME, ...common], { side: 1, timeoutMs: 120_000, env });
  // cmtime ends with status 1 on iWARP after its table (its "no QPs" run needs IB's
  // CONNECT_RESPONSE): the table is what counts.
  const us = cmtimeFullConnect(cli.out, conns);
  if (us === null || cli.code !== 0) srv.kill();
  const s = await srv;
  if (us === null) throw new Error(`cmtime over ${device}: client exit ${cli.code}, server exit ${s.code}\n${cli.out}\n${cli.err}${s.err}`);
  return conns / (us / 1e6);
}

// -- udaddy -c N -----------------------------------------------------------------------------------

/** A process's output lines as they come, with the time each arrived and the CPU µs it had used. */
function watch(args, env) {
  const c = spawn(...pinned(args.side ?? null, process.execPath, args.argv), { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const seen = [];
  let err = '';
  c.stderr.on('data', (d) => (err += d));
  createInterface({ input: c.stdout }).on('line', (l) => seen.push({ l, t: performance.now(), cpu: procCpuUs(c.pid) }));
  const kill = setTimeout(() => c.kill('SIGKILL'), 60_000);
  const done = new Promise((r) => c.on('close', (code) => (clearTimeout(kill), r({ code, seen, err }))));
  return { pid: c.pid, done, seen, kill: () => c.kill('SIGKILL') };
}

/** Whether something listens on the SIDR service of udaddy's port (RDMA_PS_UDP << 16 | 7174). */
function udaddyListening() {
  const name = new RegExp(`@rdmacm-roce-${ROCE_PORT}-svc-(0x)?0*1111c06\\b`, 'i');
  return readFileSync('/proc/net/unix', 'utf8').split('\n').some((l) => name.test(l));
}

/**
 * ms from the client's "udaddy: connecting" to its "test complete" (-C 0: no data), and the CPU ms
 * the client and the server used from then to their exit: their whole lives' CPU (this process's
 * reaped children's time, in clock ticks) less what the client had used when it printed
 * "connecting" and the server when it listened (start-up, loading the package, opening the device).
 */
async function udaddyResolve(conns) {
  const common = ['-c', String(conns), '-C', '0'];
  const env = { RDMACM_DEVICE: 'rxe_lo' };
  const reaped0 = reapedCpuUs();
  const srv = watch({ argv: [UDADDY, '-b', '127.0.0.1', ...common], side: PIN?.[0] ?? null }, env);
  try {
    const t0 = Date.now();
    while (!udaddyListening()) {
      if (Date.now() - t0 > 20_000) throw new Error('udaddy server does not listen');
      await new Promise((r) => setTimeout(r, 10));
    }
    const srvStart = procCpuUs(srv.pid);
    const cli = await watch({ argv: [UDADDY, '-s', '127.0.0.1', ...common], side: PIN?.[1] ?? null }, env).done;
    const s = await srv.done;
    const at = (r, text) => r.seen.find((x) => x.l === text)?.t;
    const a = at(cli, 'udaddy: connecting');
    const b = at(cli, 'test complete');
    if (cli.code !== 0 || s.code !== 0 || a === undefined || b === undefined) {
      throw new Error(`udaddy -c ${conns}: client exit ${cli.code}, server exit ${s.code}\n${cli.seen.map((x) => x.l).join('\n')}\n${cli.err}${s.err}`);
    }
    const cliStart = cli.seen.find((x) => x.l === 'udaddy: connecting')?.cpu ?? null;
    const reaped = reapedCpuUs();
    const cpuMs = [reaped0, reaped, srvStart, cliStart].includes(null) ? null : (reaped - reaped0 - srvStart - cliStart) / 1000;
    return { ms: b - a, cpuMs };
  } finally {
    srv.kill();
  }
}

async function dgramResolve(conns) {
  const port = await freeUdpPort();
  const p = peer('dgram-echo', port);
  await p.next();
  // The echo does nothing but answer between its ready line and the end of the client.
  const echo0 = procCpuUs(p.pid);
  const c = spawn(...pinned(PIN?.[1] ?? null, process.execPath, [PEER, 'dgram-resolve', String(port), String(conns)]), { stdio: ['pipe', 'pipe', 'inherit'] });
  let text = '';
  c.stdout.on('data', (d) => (text += d));
  const kill = setTimeout(() => c.kill('SIGKILL'), 30_000);
  await once(c, 'close');
  clearTimeout(kill);
  const echo = procCpuUs(p.pid);
  await p.stop();
  const r = JSON.parse(text.trim().split('\n').pop());
  return { ms: r.ms, cpuMs: echo0 === null || echo === null ? null : (r.cpuUs + echo - echo0) / 1000 };
}

// -- the section ---------------------------------------------------------------------------------

const fx = (x, d = 2) => (x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d));
const kfmt = (x) => (Number.isFinite(x) ? `${(x / 1000).toFixed(1)}k/s` : '-');

/** The rows, by the names --only takes. */
export const ROWS = ['pingpong', 'mtu', 'mcast1', 'mcast2', 'udaddy', 'rcpp', 'write', 'cmtime'];

/** The kernel UDP limit's figures of a row: { rate, sendRate, delivered, cpu } per round. */
function kernelRow(runs) {
  if (!runs?.length) return null;
  const pick = (k) => runs.map((r) => r[k]);
  return { rate: median(pick('rate')), sendRate: median(pick('sendRate')), delivered: median(pick('delivered')), cpuUsPerMsg: median(pick('cpu')), runs };
}

/** The section: `reps` interleaved rounds; each figure the median of its rounds. */
export async function roceBench({ reps = 3, quick = false, only = ROWS, log = console.log } = {}) {
  const PP = Number(process.env.BENCH_ROCE_PP_ITERS ?? (quick ? 1000 : 10000));
  const N = Number(process.env.BENCH_ROCE_BLAST ?? (quick ? 2000 : 20000));
  const CONNS = Number(process.env.BENCH_ROCE_CONNS ?? 100);
  const WRITE_MIB = Number(process.env.BENCH_ROCE_WRITE_MIB ?? (quick ? 4 : 64));
  const CM_CONNS = Number(process.env.BENCH_ROCE_CM_CONNS ?? (quick ? 20 : 200));
  // The kernel's blast: five times the datagrams (the C sender is that much faster).
  const KN = 5 * N;
  const group = `239.255.${1 + Math.floor(Math.random() * 254)}.${1 + Math.floor(Math.random() * 254)}`;
  const on = (r) => only.includes(r);
  const kernel = on('mtu') || on('mcast1') || on('mcast2') ? udpBlastTool() : null;
  pinSelf(PIN?.[1] ?? null);
  const keys = ['ppDgram', 'ppUd', 'mtuDgram', 'mtuUd', 'mc1Dgram', 'mc1Ud', 'mc2Dgram', 'mc2Ud', 'resDgram', 'resUdaddy', 'rcppDgram', 'rcppRc', 'wrDgram', 'wrRoce', 'wrIwarp', 'cmRoce', 'cmIwarp'];
  const runs = Object.fromEntries(keys.map((k) => [k, []]));
  const lossRuns = { mtuDgram: [], mtuUd: [], mc1Dgram: [], mc1Ud: [], mc2Dgram: [], mc2Ud: [], wrDgram: [] };
  const reports = {};
  // CPU µs per operation of every process of a run (the ping-pongs, blasts, WRITEs, resolutions).
  const cpuRuns = Object.fromEntries(keys.map((k) => [k, []]));
  // The receivers' own CPU µs per message (the blasts).
  const rxCpuRuns = {};
  const kernelRuns = { mtu: [], mc1: [], mc2: [] };
  const push = (k, r) => {
    runs[k].push(r.rate);
    lossRuns[k].push(r.delivered);
    cpuRuns[k].push(r.cpu);
    (rxCpuRuns[k] ??= []).push(r.rxCpu);
    (reports[k] ??= []).push(r.reports);
  };
  const kernelBlast = async (k, group, receivers) => {
    if (!kernel?.cmd) return;
    kernelRuns[k].push(await udpBlast(kernel.cmd, { count: KN, size: MTU, group, receivers, port: await freeUdpPort(), pin: PIN }));
  };
  // An untimed udaddy pair first: the one test whose processes are fresh every run.
  if (WARMUP && on('udaddy')) await udaddyResolve(CONNS);
  for (let i = 0; i < reps; i++) {
    if (on('pingpong')) {
      for (const [k, r] of [['ppDgram', await dgramPingPong(PP)], ['ppUd', await udPingPong(PP)]]) {
        runs[k].push(r.rtt);
        cpuRuns[k].push(r.cpu);
      }
    }
    if (on('mtu')) {
      push('mtuDgram', await dgramBlast(N, MTU, null, 1));
      push('mtuUd', await udBlast(N, MTU, null, 1));
      await kernelBlast('mtu', null, 1);
    }
    if (on('mcast1')) {
      push('mc1Dgram', await dgramBlast(N, MTU, group, 1));
      push('mc1Ud', await udBlast(N, MTU, group, 1));
      await kernelBlast('mc1', group, 1);
    }
    if (on('mcast2')) {
      push('mc2Dgram', await dgramBlast(N, MTU, group, 2));
      push('mc2Ud', await udBlast(N, MTU, group, 2));
      await kernelBlast('mc2', group, 2);
    }
    if (on('udaddy')) {
      for (const [k, r] of [['resDgram', await dgramResolve(CONNS)], ['resUdaddy', await udaddyResolve(CONNS)]]) {
        runs[k].push(r.ms);
        cpuRuns[k].push(r.cpuMs);
      }
    }
    if (on('rcpp')) {
      for (const [k, r] of [['rcppDgram', await dgramPingPong(PP)], ['rcppRc', await rcPingPong('rxe_lo', PP)]]) {
        runs[k].push(r.rtt);
        cpuRuns[k].push(r.cpu);
      }
    }
    if (on('write')) {
      // The baseline: as many bytes in datagrams of the path MTU's payload (what a WRITE's packets carry).
      const dg = await dgramBlast((WRITE_MIB << 20) / MTU, MTU, null, 1);
      runs.wrDgram.push(dg.rate * MTU);
      lossRuns.wrDgram.push(dg.delivered);
      cpuRuns.wrDgram.push(dg.cpu === null ? null : (dg.cpu * (1 << 20)) / MTU);
      for (const [k, dev] of [['wrRoce', 'rxe_lo'], ['wrIwarp', 'siw_lo']]) {
        const r = await rcWrite(dev, WRITE_MIB);
        runs[k].push(r.rate);
        cpuRuns[k].push(r.cpu);
      }
    }
    if (on('cmtime')) {
      runs.cmRoce.push(await cmtimeRate('rxe_lo', CM_CONNS));
      runs.cmIwarp.push(await cmtimeRate('siw_lo', CM_CONNS));
    }
  }
  const tools = kernel && !quick ? await udpToolLimits({ size: MTU, port: await freeUdpPort(), pin: PIN }) : [];
  pinSelf(null);
  const m = Object.fromEntries(keys.map((k) => [k, median(runs[k])]));
  const d = Object.fromEntries(Object.keys(lossRuns).map((k) => [k, median(lossRuns[k])]));
  const c = Object.fromEntries(keys.map((k) => [k, median(cpuRuns[k])]));
  const rx = Object.fromEntries(Object.keys(rxCpuRuns).map((k) => [k, median(rxCpuRuns[k])]));
  const cmp = (ours, base) => compare({ ours: runs[ours], base: runs[base], oursCpu: cpuRuns[ours], baseCpu: cpuRuns[base] });
  const cmps = {
    pingpong: cmp('ppUd', 'ppDgram'),
    mtu: cmp('mtuUd', 'mtuDgram'),
    mcast1: cmp('mc1Ud', 'mc1Dgram'),
    mcast2: cmp('mc2Ud', 'mc2Dgram'),
    udaddy: cmp('resUdaddy', 'resDgram'),
    rcpp: cmp('rcppRc', 'rcppDgram'),
    write: cmp('wrRoce', 'wrDgram'),
    writeIwarp: cmp('wrRoce', 'wrIwarp'),
    cmtime: compare({ ours: runs.cmRoce, base: runs.cmIwarp }),
  };
  const kern = { mtu: kernelRow(kernelRuns.mtu), mc1: kernelRow(kernelRuns.mc1), mc2: kernelRow(kernelRuns.mc2) };
  const pct = (x) => `${fx(100 * x, 0)}%`;
  const side = (k) => `${kfmt(m[k])} (${pct(d[k])} delivered, rx CPU ${fx(rx[k], 1)} us/msg)`;
  const kline = (k) => {
    if (kernel?.skipped) return `      kernel UDP limit: skipped (${kernel.skipped})`;
    const r = kern[k];
    if (!r) return null;
    const others = tools.map((t) => `; ${t.tool} ${t.error ? `failed (${t.error})` : `${t.rate ? `${kfmt(t.rate)} received, ` : ''}${kfmt(t.sendRate)} sent`}`).join('');
    return `      kernel UDP limit: C sendmmsg/recvmmsg ${MTU} B ${kfmt(r.rate)} received (${pct(r.delivered)} delivered, sender ${kfmt(r.sendRate)}; CPU ${fx(r.cpuUsPerMsg, 1)} us/msg)${others}`;
  };
  log(`roce: soft RoCEv2 rxe_lo (UD, RC) beside Node dgram, loopback; ${reps} round(s), median; ${PP} round trips, ${N} messages of ${MTU} B per blast, ${WRITE_MIB} x 1 MiB RDMA WRITEs, cmtime -c ${CM_CONNS}${WARMUP ? ', each after as long an untimed warm-up' : ', no warm-up'}${PIN ? `; peer on CPU ${PIN[0]}, this process on CPU ${PIN[1]}` : '; unpinned'}; RoCE UDP port ${ROCE_PORT}`);
  log(`  each row: ratio = median of the rounds' ratios; "rounds": median [min–max] of each side's rounds; CPU: time per operation (unit on the line) of every process of each side (this process and its peers)`);
  const ran = (r, line, cmpLine, ...more) => {
    if (!on(r)) return;
    log(line);
    if (cmpLine) log(`      ${cmpLine}`);
    for (const x of more) if (x) log(x);
  };
  ran('pingpong', `64 B ping-pong RTT          UD SEND/RECV ${fx(m.ppUd, 1)} us   Node dgram ${fx(m.ppDgram, 1)} us   UD/dgram ${fx(cmps.pingpong.ratio)} (target <= 1.2)`, fmtCompare(cmps.pingpong, { d: 1, cpuUnit: 'us/RT' }));
  ran('mtu', `${MTU} B messages/s           UD SEND ${side('mtuUd')}   Node dgram ${side('mtuDgram')}   UD/dgram ${fx(cmps.mtu.ratio)} (target >= 1.5)`, fmtCompare(cmps.mtu, { d: 0, cpuUnit: 'us/msg' }), kline('mtu'));
  ran('mcast1', `multicast, 1 receiver       UD SEND ${side('mc1Ud')}   Node dgram ${side('mc1Dgram')}   UD/dgram ${fx(cmps.mcast1.ratio)} (target >= 1.0)`, fmtCompare(cmps.mcast1, { d: 0, cpuUnit: 'us/msg' }), kline('mc1'));
  ran('mcast2', `multicast, 2 receivers      UD SEND ${side('mc2Ud')}   Node dgram ${side('mc2Dgram')}   UD/dgram ${fx(cmps.mcast2.ratio)} (target >= 1.0)`, fmtCompare(cmps.mcast2, { d: 0, cpuUnit: 'us/msg' }), kline('mc2'));
  ran('udaddy', `udaddy -c ${CONNS} resolution    udaddy ${fx(m.resUdaddy, 1)} ms   Node dgram ${CONNS} request/replies ${fx(m.resDgram, 1)} ms   udaddy/dgram ${fx(cmps.udaddy.ratio)} (target <= 3)`, fmtCompare(cmps.udaddy, { d: 1, cpuUnit: 'ms/run', cpuD: 2 }));
  const mbs = (x) => `${fx(x / 1e6, 0)} MB/s`;
  ran('rcpp', `RC 64 B ping-pong RTT       RC SEND/RECV ${fx(m.rcppRc, 1)} us   Node dgram ${fx(m.rcppDgram, 1)} us   RC/dgram ${fx(cmps.rcpp.ratio)} (target <= 1.2)`, fmtCompare(cmps.rcpp, { d: 1, cpuUnit: 'us/RT' }));
  const mbRuns = (x) => ({ ...x, median: x.median / 1e6, min: x.min / 1e6, max: x.max / 1e6 });
  const inMB = (x) => ({ ...x, ours: x.ours && mbRuns(x.ours), base: x.base && mbRuns(x.base) });
  ran(
    'write',
    `1 MiB RDMA WRITE bandwidth  RoCE ${mbs(m.wrRoce)}   iWARP ${mbs(m.wrIwarp)}   RoCE/iWARP ${fx(cmps.writeIwarp.ratio)} (target >= 1.0)   Node dgram ${MTU} B blast ${mbs(m.wrDgram)} (${pct(d.wrDgram)} delivered)   RoCE/dgram ${fx(cmps.write.ratio)}`,
    `vs iWARP (MB/s) ${fmtCompare(inMB(cmps.writeIwarp), { d: 0, cpuUnit: 'us/MiB', cpuD: 0 })}`,
    `      vs dgram (MB/s) ${fmtCompare(inMB(cmps.write), { d: 0, cpuUnit: 'us/MiB', cpuD: 0 })}`,
  );
  ran('cmtime', `cmtime -c ${CM_CONNS} connect rate    RoCE ${fx(m.cmRoce, 0)} conn/s   iWARP ${fx(m.cmIwarp, 0)} conn/s   RoCE/iWARP ${fx(cmps.cmtime.ratio)}   rounds RoCE ${fmtSpread(cmps.cmtime.ours, 0)} iWARP ${fmtSpread(cmps.cmtime.base, 0)}`);
  const row = (unit, soft, node, extra) => ({ unit, soft, node, vsNode: soft / node, ...extra });
  const rate = (k, extra) =>
    row('msg/s', m[`${k}Ud`], m[`${k}Dgram`], {
      size: MTU,
      count: N,
      delivered: { soft: d[`${k}Ud`], node: d[`${k}Dgram`] },
      rxCpuUsPerMsg: { soft: rx[`${k}Ud`], node: rx[`${k}Dgram`] },
      cpuUsPerMsg: { soft: c[`${k}Ud`], node: c[`${k}Dgram`] },
      kernel: kern[k] ?? (kernel?.skipped ? { skipped: kernel.skipped } : null),
      ...extra,
      runs: { soft: runs[`${k}Ud`], node: runs[`${k}Dgram`], deliveredSoft: lossRuns[`${k}Ud`], deliveredNode: lossRuns[`${k}Dgram`], rxCpuSoft: rxCpuRuns[`${k}Ud`], rxCpuNode: rxCpuRuns[`${k}Dgram`], cpuSoft: cpuRuns[`${k}Ud`], cpuNode: cpuRuns[`${k}Dgram`], receiversSoft: reports[`${k}Ud`], receiversNode: reports[`${k}Dgram`] },
    });
  const section = { reps, quick, warmup: WARMUP, pinned: PIN, rocePort: ROCE_PORT, kernelUdpTools: tools };
  if (on('pingpong')) section.rtt = row('usec', m.ppUd, m.ppDgram, { size: 64, iters: PP, target: '<= 1.2 x Node dgram', cpuUsPerRt: { soft: c.ppUd, node: c.ppDgram }, cmp: cmps.pingpong, runs: { soft: runs.ppUd, node: runs.ppDgram, cpuSoft: cpuRuns.ppUd, cpuNode: cpuRuns.ppDgram } });
  if (on('mtu')) section.mtuRate = rate('mtu', { receivers: 1, target: '>= 1.5 x Node dgram', cmp: cmps.mtu });
  if (on('mcast1')) section.mcast1 = rate('mc1', { receivers: 1, target: '>= 1.0 x Node dgram', cmp: cmps.mcast1 });
  if (on('mcast2')) section.mcast2 = rate('mc2', { receivers: 2, target: '>= 1.0 x Node dgram', cmp: cmps.mcast2 });
  if (on('rcpp')) section.rcRtt = row('usec', m.rcppRc, m.rcppDgram, { size: 64, iters: PP, target: '<= 1.2 x Node dgram', cpuUsPerRt: { soft: c.rcppRc, node: c.rcppDgram }, cmp: cmps.rcpp, runs: { soft: runs.rcppRc, node: runs.rcppDgram, cpuSoft: cpuRuns.rcppRc, cpuNode: cpuRuns.rcppDgram } });
  if (on('write')) {
    section.rcWrite = row('B/s', m.wrRoce, m.wrDgram, {
      size: 1 << 20,
      count: WRITE_MIB,
      inFlight: 8,
      datagram: MTU,
      target: '>= 1.0 x soft iWARP',
      iwarp: m.wrIwarp,
      vsIwarp: cmps.writeIwarp.ratio,
      delivered: { node: d.wrDgram },
      cpuUsPerMiB: { soft: c.wrRoce, iwarp: c.wrIwarp, node: c.wrDgram },
      cmp: cmps.write,
      cmpIwarp: cmps.writeIwarp,
      runs: { soft: runs.wrRoce, node: runs.wrDgram, iwarp: runs.wrIwarp, deliveredNode: lossRuns.wrDgram, cpuSoft: cpuRuns.wrRoce, cpuIwarp: cpuRuns.wrIwarp, cpuNode: cpuRuns.wrDgram },
    });
  }
  if (on('cmtime')) section.cmtime = { unit: 'conn/s', soft: m.cmRoce, iwarp: m.cmIwarp, vsIwarp: cmps.cmtime.ratio, connections: CM_CONNS, warmup: WARMUP ? CM_CONNS : 0, cmp: cmps.cmtime, runs: { soft: runs.cmRoce, iwarp: runs.cmIwarp } };
  if (on('udaddy')) section.udaddy = row('ms', m.resUdaddy, m.resDgram, { connections: CONNS, target: '<= 3 x Node dgram', cpuMsPerRun: { soft: c.resUdaddy, node: c.resDgram }, cmp: cmps.udaddy, runs: { soft: runs.resUdaddy, node: runs.resDgram } });
  return section;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const argv = process.argv.slice(2);
  const opt = (name) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--json' || argv[i] === '--reps' || argv[i] === '--only') i++;
    else if (argv[i] !== '--quick') throw new Error(`unknown option ${argv[i]}`);
  }
  const quick = argv.includes('--quick');
  const reps = Number(opt('--reps') ?? process.env.BENCH_REPS ?? (quick ? 1 : 3));
  const json = opt('--json');
  const started = new Date().toISOString();
  const t0 = performance.now();
  const only = opt('--only')?.split(',') ?? ROWS;
  for (const r of only) if (!ROWS.includes(r)) throw new Error(`unknown row ${r} (rows: ${ROWS.join(', ')})`);
  const section = await roceBench({ reps, quick, only });
  if (json) {
    const cpus = os.cpus();
    const machine = { node: process.version, v8: process.versions.v8, platform: `${os.platform()} ${os.release()}`, cpu: cpus[0]?.model ?? null, cpus: os.availableParallelism(), loadavg: os.loadavg(), pinned: PIN };
    writeFileSync(json, JSON.stringify({ machine, started, reps, quick, seconds: (performance.now() - t0) / 1000, sections: { roce: section } }, null, 2) + '\n');
    console.log(`\nresults written to ${json}`);
  }
  process.exit(0);
}
