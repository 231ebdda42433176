// The rping section of `npm run bench`: rping's ping loop over the soft iWARP device, warm and
// cold, beside Node's limit for the same exchange.
//
// One rping iteration is three round trips of small messages (the client's SEND advertising its
// buffer, the server's RDMA READ of it and its SEND back; the client's second SEND, the server's
// RDMA WRITE and SEND back). The Node reference is three round trips of a 64 B Node `net`
// ping-pong (bench/node-net.js, measured in the same run): what the same exchange of messages
// costs at Node's limit, with no RDMA semantics.
//
//   warm   rping -c -C N --warmup N --json: N timed pings after N untimed ones;
//   cold   rping -c -C 1000 --json: a fresh process's first 1000 pings (what `rping -C 1000` sees).
// Node's own cold/warm in the same shape is measured beside it: 3000 round trips in a fresh pair of
// node-net.js processes against 3N after 3N untimed ones — how far a one-shot run of any tool on
// Node falls behind its warm figure here, with no RDMA code at all.
import { fileURLToPath, pathToFileURL } from 'node:url';
import { compare, fmtCompare, fx, jsonCpuUs, lastJson, median, run, freePort, listening, pair, pairTimedCpuUs } from './lib.js';

const RPING = fileURLToPath(new URL('../dist/cli/rping.js', import.meta.url));
const NODE_NET = fileURLToPath(new URL('./node-net.js', import.meta.url));
const NODE = process.execPath;

/**
 * One rping client run (`args`) against a fresh server: the client's JSON line, its wall time, and
 * the CPU µs per timed ping of both processes (each reports its own with --json; the server is
 * given the client's --warmup, so that both leave the same pings out).
 */
async function rping(args) {
  const port = await freePort();
  const w = args.indexOf('--warmup');
  const srv = run(NODE, [RPING, '-s', '-a', '127.0.0.1', '-p', String(port), '--json', ...(w >= 0 ? args.slice(w, w + 2) : [])], { side: 0, timeoutMs: 300_000 });
  try {
    await listening(port);
  } catch (e) {
    srv.kill();
    throw e;
  }
  const cli = await run(NODE, [RPING, '-c', '-a', '127.0.0.1', '-p', String(port), '--json', ...args], { side: 1, timeoutMs: 300_000 });
  if (cli.code !== 0) srv.kill();
  const s = await srv;
  if (cli.code !== 0 || s.code !== 0) throw new Error(`rping ${args.join(' ')}: client exit ${cli.code}, server exit ${s.code}\n${cli.err}${s.err}`);
  const c = lastJson(cli.out);
  const sv = jsonCpuUs(lastJson(s.out));
  return { ...c, wallMs: cli.ms, cpuUsPerPing: sv === null || jsonCpuUs(c) === null ? null : (jsonCpuUs(c) + sv) / c.pings };
}

export async function rpingBench({ reps = 3, log = console.log } = {}) {
  const N = Number(process.env.BENCH_RPING_PINGS ?? 5000);
  const runs = { warm: [], cold: [], coldWallMs: [], node: [], nodeCold: [] };
  // CPU µs per ping (Node: per 3 round trips) of both processes' timed parts.
  const cpuRuns = { warm: [], cold: [], node: [], nodeCold: [] };
  /** Node's 64 B ping-pong of 3n round trips (after as many untimed when `warm`): usec and CPU per 3 RTTs. */
  const nodeRef = async (n, warm) => {
    const r = await pair(NODE, [NODE_NET], ['-S', '64', '-C', '1', '-I', String(3 * n), ...(warm ? ['--warmup', String(3 * n)] : [])]);
    const cpu = pairTimedCpuUs(r);
    return { usec: 6 * lastJson(r.out).usec_per_xfer, cpu: cpu === null ? null : cpu / n };
  };
  for (let i = 0; i < reps; i++) {
    const w = await rping(['-C', String(N), '--warmup', String(N)]);
    runs.warm.push(w.usec_per_ping);
    cpuRuns.warm.push(w.cpuUsPerPing);
    const c = await rping(['-C', '1000']);
    runs.cold.push(c.usec_per_ping);
    cpuRuns.cold.push(c.cpuUsPerPing);
    runs.coldWallMs.push(c.wallMs);
    const n = await nodeRef(N, true);
    runs.node.push(n.usec);
    cpuRuns.node.push(n.cpu);
    const nc = await nodeRef(1000, false);
    runs.nodeCold.push(nc.usec);
    cpuRuns.nodeCold.push(nc.cpu);
  }
  const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]));
  const perRound = (a, b) => a.map((x, k) => (typeof x === 'number' && b[k] ? x / b[k] : null));
  const cmp = {
    warm: compare({ ours: runs.warm, base: runs.node, oursCpu: cpuRuns.warm, baseCpu: cpuRuns.node }),
    // Each round's cold/warm against Node's own in the same round.
    coldWarm: compare({ ours: perRound(runs.cold, runs.warm), base: perRound(runs.nodeCold, runs.node) }),
  };
  // Ratios: the median of the rounds' ratios (a round's runs are back to back).
  const warmVsNode = median(runs.warm.map((x, k) => x / runs.node[k]));
  const coldVsWarm = median(runs.cold.map((x, k) => x / runs.warm[k]));
  const nodeColdVsWarm = median(runs.nodeCold.map((x, k) => x / runs.node[k]));
  const r = { reps, pings: N, unit: 'usec/ping', warm: m.warm, cold: m.cold, node: m.node, nodeCold: m.nodeCold, coldWallMs: m.coldWallMs, warmVsNode, coldVsWarm, nodeColdVsWarm, targets: { warmVsNode: '<= 1.15', coldVsWarm: '<= 1.25', coldVsWarmToNode: "<= 1.15 x Node's own" }, cpuUnit: 'us/ping', cmp, runs, cpuRuns };
  log(`rping: 64 B pings, ${reps} run(s) each, median; warm: -C ${N} after --warmup ${N}; cold: -C 1000 in a fresh process (client wall time ${fx(m.coldWallMs / 1000, 2)} s)`);
  log(`  warm ${fx(m.warm, 1)} usec/ping   Node net 3 RTTs ${fx(m.node, 1)} usec   warm/Node ${fx(r.warmVsNode)} (target <= 1.15)`);
  log(`      ${fmtCompare(cmp.warm, { d: 1, cpuUnit: 'us/ping' })}`);
  log(`  cold ${fx(m.cold, 1)} usec/ping   cold/warm ${fx(r.coldVsWarm)} (target <= 1.25)   Node net cold ${fx(m.nodeCold, 1)} usec, its own cold/warm ${fx(nodeColdVsWarm)}   ours/Node's ${fx(cmp.coldWarm.ratio)} (target <= 1.15)`);
  log(`      cold/warm ${fmtCompare(cmp.coldWarm)}; cold CPU us/ping ours ${fx(median(cpuRuns.cold), 1)} Node ${fx(median(cpuRuns.nodeCold), 1)}`);
  return r;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await rpingBench({ reps: Number(process.env.BENCH_REPS ?? 3) });
}
