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
import { fx, lastJson, listening, median, pair, run, freePort } from './lib.js';

const NODE = process.execPath;
const tool = (name) => fileURLToPath(new URL(`../dist/cli/${name}.js`, import.meta.url));
const NODE_NET = fileURLToPath(new URL('./node-net.js', import.meta.url));
const BW_ROW = /^ (\d+)\s+(\d+)\s+(\d+\.\d\d)\s+(\d+\.\d\d) *\t\t   (\d+\.\d{6})$/m;
const LAT_ROW = /^ (\d+)\s+(\d+)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+(\d+\.\d\d)/m;

/** One server + client run of a perftest tool on rxe_lo; the client's stdout. */
async function perftest(name, args) {
  const port = await freePort();
  const env = { RDMACM_BACKEND: 'soft', RDMACM_ROCE_PORT: String(40000 + Math.floor(Math.random() * 20000)) };
  const all = ['-d', 'rxe_lo', '-p', String(port), ...args];
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
  return cli.out;
}

export async function perftestBench({ reps = 3, quick = false, log = console.log } = {}) {
  const bwN = quick ? 500 : Number(process.env.BENCH_PERFTEST_BW_ITERS ?? 5000);
  const latN = quick ? 500 : Number(process.env.BENCH_PERFTEST_LAT_ITERS ?? 5000);
  const runs = { writeBwGbps: [], nodeBwGbps: [], sendLatUsec: [], nodeLatUsec: [] };
  for (let i = 0; i < reps; i++) {
    const w = BW_ROW.exec(await perftest('ib_write_bw', ['-s', '65536', '-n', String(bwN)]));
    runs.writeBwGbps.push((Number(w[4]) * 1048576 * 8) / 1e9);
    runs.nodeBwGbps.push(lastJson((await pair(NODE, [NODE_NET], ['-S', '65536', '-C', String(bwN), '-I', '1'])).out).gbps);
    const l = LAT_ROW.exec(await perftest('ib_send_lat', ['-s', '2', '-n', String(latN)]));
    runs.sendLatUsec.push(Number(l[5]));
    runs.nodeLatUsec.push(lastJson((await pair(NODE, [NODE_NET], ['-S', '2', '-C', '1', '-I', String(latN)])).out).usec_per_xfer);
  }
  const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]));
  const bwVsNode = median(runs.writeBwGbps.map((x, k) => x / runs.nodeBwGbps[k]));
  const latVsNode = median(runs.sendLatUsec.map((x, k) => x / runs.nodeLatUsec[k]));
  log(`perftest over rxe_lo: ${reps} run(s) each, median; fresh processes per run`);
  log(`  ib_write_bw -s 65536 -n ${bwN}  ${fx(m.writeBwGbps, 3)} Gb/s   Node net 64 KiB stream ${fx(m.nodeBwGbps, 3)} Gb/s   ours/Node ${fx(bwVsNode)}`);
  log(`  ib_send_lat -s 2 -n ${latN}      ${fx(m.sendLatUsec, 1)} usec (t_typical)   Node net 2 B ping-pong ${fx(m.nodeLatUsec, 1)} usec   ours/Node ${fx(latVsNode)}`);
  return { reps, bwIters: bwN, latIters: latN, ...m, bwVsNode, latVsNode, runs };
}

if (import.meta.url === `file://${process.argv[1]}`) await perftestBench({ reps: Number(process.argv[2] ?? 1), quick: process.argv.includes('--quick') });
