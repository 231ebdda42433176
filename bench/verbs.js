// The verbs section of `npm run bench`: the soft iWARP device through the verbs API beside plain
// Node TCP and kernel TCP, measured in the same run (two processes per test, loopback):
//
//   64 B ping-pong RTT   SEND/RECV over the soft device (this process and bench/peer.js)
//                        against a Node `net` ping-pong and qperf tcp_lat (one-way x 2);
//   1 MiB stream         RDMA WRITEs of 1 MiB, 8 in flight, against a Node `net` stream read into
//                        one reused `onread` buffer, and qperf tcp_bw.
//
// Headline ratios against Node: RTT(soft)/RTT(net) (target <= 1.15), BW(soft)/BW(net onread)
// (target >= 0.9). Each test first runs an untimed warm-up as long as its timed part
// (BENCH_WARMUP=0: none), so that both sides measure compiled code; the bench process and its
// peer run on one CPU each (bench/lib.js; BENCH_PIN=0: not).
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createId, PortSpace, Access, WrOpcode, SendFlags } from '../dist/index.js';
import { compare, cpuMeter, fmtCompare, fx, median, PIN, pinned, pinSelf, run, which, freePort, listening } from './lib.js';
import { waitCq } from './cq-wait.js';

const PEER = fileURLToPath(new URL('./peer.js', import.meta.url));
const PP_ITERS = Number(process.env.BENCH_PP_ITERS ?? 20000);
const BW_BYTES = Number(process.env.BENCH_BW_BYTES ?? 2 ** 31);
const WARMUP = process.env.BENCH_WARMUP !== '0';
// Below the kernel's ephemeral range (32768-60999 by default), where a port may be some connection's.
let nextPort = 20000 + (process.pid % 10000);

async function withPeer(kind, fn) {
  const port = nextPort++;
  const child = spawn(...pinned(PIN?.[0] ?? null, process.execPath, [PEER, kind, String(port)]), { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    child.stdout.once('data', resolve);
    child.once('exit', (c) => reject(new Error(`${kind} peer exited ${c}`)));
  });
  const kill = setTimeout(() => child.kill('SIGKILL'), 120_000);
  try {
    return await fn(port, cpuMeter([process.pid, child.pid]));
  } finally {
    clearTimeout(kill);
    await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
  }
}

/** Each test: { value, cpu } — its figure and the CPU µs per operation of both processes (`cpu` meter). */
async function netPingPong(port, cpu) {
  const s = net.connect({ port, host: '127.0.0.1', noDelay: true });
  await new Promise((r) => s.once('connect', r));
  const msg = Buffer.alloc(64, 1);
  let left = PP_ITERS + (WARMUP ? PP_ITERS : 0);
  let have = 0;
  let t0 = process.hrtime.bigint();
  cpu.start();
  await new Promise((resolve) => {
    s.on('data', (d) => {
      have += d.length;
      while (have >= 64) {
        have -= 64;
        if (--left === 0) return resolve();
        if (left === PP_ITERS) {
          t0 = process.hrtime.bigint();
          cpu.start();
        }
        s.write(msg);
      }
    });
    s.write(msg);
  });
  const ns = Number(process.hrtime.bigint() - t0);
  const used = cpu.stop();
  s.destroy();
  return { value: ns / PP_ITERS / 1000, cpu: used === null ? null : used / PP_ITERS };
}

async function netStream(port, cpu) {
  const s = net.connect({ port, host: '127.0.0.1', noDelay: true });
  await new Promise((r) => s.once('connect', r));
  const chunk = Buffer.alloc(1 << 20, 7);
  const hdr = Buffer.alloc(8);
  hdr.writeBigUInt64BE(BigInt(BW_BYTES));
  // One phase: a header with the byte count, the bytes, the peer's one-byte answer.
  const phase = async () => {
    const done = new Promise((r) => s.once('data', r));
    s.write(hdr);
    let sent = 0;
    while (sent < BW_BYTES) {
      sent += chunk.length;
      if (!s.write(chunk)) await new Promise((r) => s.once('drain', r));
    }
    await done;
  };
  if (WARMUP) await phase();
  const t0 = process.hrtime.bigint();
  cpu.start();
  await phase();
  const ns = Number(process.hrtime.bigint() - t0);
  const used = cpu.stop();
  s.destroy();
  return { value: BW_BYTES / ns, cpu: used === null ? null : used / (BW_BYTES / (1 << 20)) }; // GB/s, µs per MiB
}

async function rdmaConnect(port, maxSendWr) {
  const id = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port });
  await id.resolveRoute();
  id.createQp(null, { cap: { maxSendWr, maxRecvWr: 64 } });
  await id.connect();
  return id;
}

async function rdmaPingPong(port, cpu) {
  const id = await rdmaConnect(port, 64);
  const qp = id.qp;
  const mr = id.pd.regMr(Buffer.alloc(128), Access.LOCAL_WRITE);
  const sge = [{ addr: mr.addr, length: 64, lkey: mr.lkey }];
  const rsge = [{ addr: mr.addr + 64, length: 64, lkey: mr.lkey }];
  qp.postRecv({ wrId: 0, sgList: rsge });
  const warm = WARMUP ? PP_ITERS : 0;
  const total = warm + PP_ITERS;
  let t0 = process.hrtime.bigint();
  cpu.start();
  qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sgList: sge, sendFlags: SendFlags.INLINE });
  for (let done = 0; done < total; ) {
    const wcs = await waitCq(id.recvCq, id.recvCqChannel);
    for (const wc of wcs) {
      if (wc.status !== 0) throw new Error(`completion status ${wc.status}`);
      done++;
      qp.postRecv({ wrId: 0, sgList: rsge });
      if (done === warm) {
        t0 = process.hrtime.bigint();
        cpu.start();
      }
      if (done < total) qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sgList: sge, sendFlags: SendFlags.INLINE });
    }
  }
  const ns = Number(process.hrtime.bigint() - t0);
  const used = cpu.stop();
  id.sendCq.poll(64);
  await id.disconnect();
  id.destroyQp();
  await id.destroy();
  return { value: ns / PP_ITERS / 1000, cpu: used === null ? null : used / PP_ITERS };
}

async function rdmaWrite(port, cpu) {
  const id = await rdmaConnect(port, 16);
  const pd = Buffer.from(id.event.param.conn.privateData);
  const raddr = Number(pd.readBigUInt64BE(0));
  const rkey = pd.readUInt32BE(8);
  const qp = id.qp;
  const src = id.pd.regMr(Buffer.alloc(1 << 20, 9), 0);
  const msg = id.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
  const n = Math.ceil(BW_BYTES / (1 << 20));
  const depth = 8;
  // One phase: n 1 MiB Writes, 8 in flight, then a Send/reply pair (the completion of a Write
  // means "handed to TCP": the reply proves arrival).
  const phase = async () => {
    qp.postRecv({ wrId: 'fin', sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
    let posted = 0;
    let completed = 0;
    const post = () => {
      qp.postSend({ wrId: posted++, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr, length: 1 << 20, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: raddr, rkey } });
    };
    while (posted < Math.min(depth, n)) post();
    while (completed < n) {
      const wcs = await waitCq(id.sendCq, id.sendCqChannel);
      for (const wc of wcs) {
        if (wc.status !== 0) throw new Error(`write status ${wc.status}`);
        if (wc.wrId === 'fin') continue; // the previous phase's Send
        completed++;
        if (posted < n) post();
      }
    }
    qp.postSend({ wrId: 'fin', opcode: WrOpcode.SEND, sgList: [{ addr: msg.addr, length: 1, lkey: msg.lkey }], sendFlags: SendFlags.SIGNALED });
    await waitCq(id.recvCq, id.recvCqChannel);
  };
  if (WARMUP) await phase();
  const t0 = process.hrtime.bigint();
  cpu.start();
  await phase();
  const ns = Number(process.hrtime.bigint() - t0);
  const used = cpu.stop();
  await id.disconnect();
  id.destroyQp();
  await id.destroy();
  return { value: (n * (1 << 20)) / ns, cpu: used === null ? null : used / n };
}

/** qperf tcp_lat (one-way, usec) or tcp_bw (GB/s) of `size`-byte messages, server on PIN[0]. */
async function qperf(bin, test, size) {
  const port = await freePort();
  const srv = run(bin, ['-lp', String(port)], { side: 0, timeoutMs: 120_000 });
  try {
    await listening(port);
    const r = await run(bin, ['127.0.0.1', '-lp', String(port), '-t', String(process.env.BENCH_QPERF_SECS ?? 2), '-m', String(size), test], { side: 1, timeoutMs: 60_000 });
    if (test === 'tcp_lat') {
      const m = /latency\s*=\s*([\d.]+)\s*(ns|us|ms|sec)/.exec(r.out);
      return m ? Number(m[1]) * { ns: 1e-3, us: 1, ms: 1e3, sec: 1e6 }[m[2]] : null;
    }
    const m = /bw\s*=\s*([\d.]+)\s*(bytes|KB|MB|GB)\/sec/.exec(r.out);
    return m ? (Number(m[1]) * { bytes: 1, KB: 1e3, MB: 1e6, GB: 1e9 }[m[2]]) / 1e9 : null;
  } finally {
    srv.kill();
    await srv;
  }
}

/** The section: `reps` interleaved rounds of the tests; each figure the median of its runs. */
export async function verbsBench({ reps = 3, log = console.log } = {}) {
  pinSelf(PIN?.[1] ?? null);
  const q = which('qperf');
  const runs = { netRtt: [], rdmaRtt: [], qperfRtt: [], netBw: [], rdmaBw: [], qperfBw: [] };
  // CPU µs per round trip / per MiB of both processes (ours and Node's; qperf runs for a time).
  const cpuRuns = { netRtt: [], rdmaRtt: [], netBw: [], rdmaBw: [] };
  const push = (k, r) => {
    runs[k].push(r.value);
    cpuRuns[k].push(r.cpu);
  };
  for (let i = 0; i < reps; i++) {
    push('netRtt', await withPeer('net-pingpong', netPingPong));
    push('rdmaRtt', await withPeer('rdma-pingpong', rdmaPingPong));
    if (q) runs.qperfRtt.push(2 * (await qperf(q, 'tcp_lat', 64)));
    push('netBw', await withPeer('net-stream', netStream));
    push('rdmaBw', await withPeer('rdma-write', rdmaWrite));
    if (q) runs.qperfBw.push(await qperf(q, 'tcp_bw', 1 << 20));
  }
  pinSelf(null);
  const r = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]));
  // The headline ratios: the median of the rounds' ratios (a round's runs are back to back).
  const cmp = {
    rtt: compare({ ours: runs.rdmaRtt, base: runs.netRtt, oursCpu: cpuRuns.rdmaRtt, baseCpu: cpuRuns.netRtt }),
    bw: compare({ ours: runs.rdmaBw, base: runs.netBw, oursCpu: cpuRuns.rdmaBw, baseCpu: cpuRuns.netBw }),
  };
  const rtt = cmp.rtt.ratio;
  const bw = cmp.bw.ratio;
  log(`verbs: ${reps} run(s) each, median; ${PP_ITERS} round trips, ${BW_BYTES} bytes${WARMUP ? ', each after as long an untimed warm-up' : ', no warm-up'}${PIN ? `; peer on CPU ${PIN[0]}, this process on CPU ${PIN[1]}` : '; unpinned'}${q ? '' : '; qperf not installed (bench/setup.sh installs it)'}`);
  log(`64 B ping-pong RTT   soft-iWARP SEND/RECV ${fx(r.rdmaRtt, 1)} us   Node net ${fx(r.netRtt, 1)} us   qperf tcp_lat x2 ${fx(r.qperfRtt, 1)} us   soft/Node ${fx(rtt)} (target <= 1.15)`);
  log(`      ${fmtCompare(cmp.rtt, { d: 1, cpuUnit: 'us/RT' })}`);
  log(`1 MiB stream         soft-iWARP RDMA WRITE ${fx(r.rdmaBw)} GB/s   Node net onread ${fx(r.netBw)} GB/s   qperf tcp_bw ${fx(r.qperfBw)} GB/s   soft/Node ${fx(bw)} (target >= 0.9)`);
  log(`      ${fmtCompare(cmp.bw, { cpuUnit: 'us/MiB', cpuD: 0 })}`);
  return {
    reps,
    rtt: { unit: 'usec', soft: r.rdmaRtt, node: r.netRtt, qperf: r.qperfRtt, vsNode: rtt, target: '<= 1.15 x Node net', cpuUnit: 'us/RT', cmp: cmp.rtt },
    bw: { unit: 'GB/s', soft: r.rdmaBw, node: r.netBw, qperf: r.qperfBw, vsNode: bw, target: '>= 0.9 x Node net', cpuUnit: 'us/MiB', cmp: cmp.bw },
    runs,
    cpuRuns,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await verbsBench({ reps: Number(process.env.BENCH_REPS ?? 3) });
  process.exit(0);
}
