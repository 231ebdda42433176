// The perftest section of `npm run bench`: our ib_write_bw and ib_send_lat (two processes over the
// soft RoCE device rxe_lo, perftest's own figures as they print them) beside Node's limit for the
// same shape of exchange, in the same run (bench/node-net.js over `net` on loopback):
//
//   ib_write_bw   -s 65536 -n N: the client's BW average   vs  Node net, 64 KiB messages, rstream's
//                 (one-way WRITEs, 128 in flight)                bandwidth shape (a stream each way)
//   ib_send_lat   -s 2 -n N: t_typical, half a round trip  vs  Node net, 2 B ping-pong, half a
//                                                               round trip (usec_per_xfer)
//
// Each tool run is a fresh pair of processes (perftest has no warm-up for these tests): what a
// user running the tool sees. The device's UDP port is private to each pair (RDMACM_ROCE_PORT).
import { fileURLToPath } from 'node:url';
import { compare, fmtCompare, fx, lastJson, listening, median, pair, reapedCpuUs, run, freePort } from './lib.js';

const NODE = process.execPath;
const tool = (name) => fileURLToPath(new URL(`../dist/cli/${name}.js`, import.meta.url));
const NODE_NET = fileURLToPath(new URL('./node-net.js', import.meta.url));
const BW_ROW = /^ (\d+)\s+(\d+)\s+(\d+\.\d\d)\s+(\d+\.\d\d) *\t\t   (\d+\.\d{6})$/m;
const LAT_ROW = /^ (\d+)\s+(\d+)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+(\d+\.\d\d)/m;

/**
 * One server + client run of a perftest tool on rxe_lo: the client's stdout and the CPU µs both
 * processes used in their whole lives (start-up included: perftest has no warm-up to leave out).
 */
async function perftest(name, args) {
  const port = await freePort();
  const env = { RDMACM_BACKEND: 'soft', RDMACM_ROCE_PORT: String(40000 + Math.floor(Math.random() * 20000)) };
  const all = ['-d', 'rxe_lo', '-p', String(port), ...args];
  const reaped0 = reapedCpuUs();
  const srv = run(NODE, [tool(name), ...all], { side: 0, timeoutMs: 300_000, env });
  try {
    await listening(port);
  } catch (e) {
    srv.kill();
    throw e;
  }
  const cli = await run(NODE, [tool(name), ...all, '127.0.0.1'], { side: 1, timeoutMs: 300_000, env });
  if (cli.code !== 0) srv.kill();
  const s = await srv;
  if (cli.code !== 0 || s.code !== 0) throw new Error(`${name} ${args.join(' ')}: client exit ${cli.code}, server exit ${s.code}\n${cli.err}${s.err}`);
  const reaped = reapedCpuUs();
  return { out: cli.out, cpuUs: reaped === null || reaped0 === null ? null : reaped - reaped0 };
}

export async function perftestBench({ reps = 3, quick = false, log = console.log } = {}) {
  const bwN = quick ? 500 : Number(process.env.BENCH_PERFTEST_BW_ITERS ?? 5000);
  const latN = quick ? 500 : Number(process.env.BENCH_PERFTEST_LAT_ITERS ?? 5000);
  const runs = { writeBwGbps: [], nodeBwGbps: [], sendLatUsec: [], nodeLatUsec: [] };
  // CPU µs per iteration (a 64 KiB message, a round trip) of both processes' whole lives.
  const cpuRuns = { writeBwGbps: [], nodeBwGbps: [], sendLatUsec: [], nodeLatUsec: [] };
  const perIter = (us, n) => (us === null ? null : us / n);
  for (let i = 0; i < reps; i++) {
    const wr = await perftest('ib_write_bw', ['-s', '65536', '-n', String(bwN)]);
    const w = BW_ROW.exec(wr.out);
    runs.writeBwGbps.push((Number(w[4]) * 1048576 * 8) / 1e9);
    cpuRuns.writeBwGbps.push(perIter(wr.cpuUs, bwN));
    const nb = await pair(NODE, [NODE_NET], ['-S', '65536', '-C', String(bwN), '-I', '1']);
    runs.nodeBwGbps.push(lastJson(nb.out).gbps);
    cpuRuns.nodeBwGbps.push(perIter(nb.cpuUs, bwN));
    const lr = await perftest('ib_send_lat', ['-s', '2', '-n', String(latN)]);
    const l = LAT_ROW.exec(lr.out);
    runs.sendLatUsec.push(Number(l[5]));
    cpuRuns.sendLatUsec.push(perIter(lr.cpuUs, latN));
    const nl = await pair(NODE, [NODE_NET], ['-S', '2', '-C', '1', '-I', String(latN)]);
    runs.nodeLatUsec.push(lastJson(nl.out).usec_per_xfer);
    cpuRuns.nodeLatUsec.push(perIter(nl.cpuUs, latN));
  }
  const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]));
  const cmp = {
    bw: compare({ ours: runs.writeBwGbps, base: runs.nodeBwGbps, oursCpu: cpuRuns.writeBwGbps, baseCpu: cpuRuns.nodeBwGbps }),
    lat: compare({ ours: runs.sendLatUsec, base: runs.nodeLatUsec, oursCpu: cpuRuns.sendLatUsec, baseCpu: cpuRuns.nodeLatUsec }),
  };
  const bwVsNode = cmp.bw.ratio;
  const latVsNode = cmp.lat.ratio;
  log(`perftest over rxe_lo: ${reps} run(s) each, median; fresh processes per run; CPU: both processes' whole lives (start-up included) per iteration`);
  log(`  ib_write_bw -s 65536 -n ${bwN}  ${fx(m.writeBwGbps, 3)} Gb/s   Node net 64 KiB stream ${fx(m.nodeBwGbps, 3)} Gb/s   ours/Node ${fx(bwVsNode)}`);
  log(`      ${fmtCompare(cmp.bw, { d: 3, cpuUnit: 'us/msg' })}`);
  log(`  ib_send_lat -s 2 -n ${latN}      ${fx(m.sendLatUsec, 1)} usec (t_typical)   Node net 2 B ping-pong ${fx(m.nodeLatUsec, 1)} usec   ours/Node ${fx(latVsNode)}`);
  log(`      ${fmtCompare(cmp.lat, { d: 1, cpuUnit: 'us/RT' })}`);
  return { reps, bwIters: bwN, latIters: latN, ...m, bwVsNode, latVsNode, cmp, runs, cpuRuns };
}

if (import.meta.url === `file://${process.argv[1]}`) await perftestBench({ reps: Number(process.argv[2] ?? 1), quick: process.argv.includes('--quick') });
