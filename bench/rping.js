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
import { fx, lastJson, median, run, freePort, listening, pair } from './lib.js';

const RPING = fileURLToPath(new URL('../dist/cli/rping.js', import.meta.url));
const NODE_NET = fileURLToPath(new URL('./node-net.js', import.meta.url));
const NODE = process.execPath;

async function rping(args) {
  const port = await freePort();
  const srv = run(NODE, [RPING, '-s', '-a', '127.0.0.1', '-p', String(port)], { side: 0, timeoutMs: 300_000 });
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
  return { ...lastJson(cli.out), wallMs: cli.ms };
}

export async function rpingBench({ reps = 3, log = console.log } = {}) {
  const N = Number(process.env.BENCH_RPING_PINGS ?? 5000);
  const runs = { warm: [], cold: [], coldWallMs: [], node: [], nodeCold: [] };
  for (let i = 0; i < reps; i++) {
    runs.warm.push((await rping(['-C', String(N), '--warmup', String(N)])).usec_per_ping);
    const c = await rping(['-C', '1000']);
    runs.cold.push(c.usec_per_ping);
    runs.coldWallMs.push(c.wallMs);
    const n = await pair(NODE, [NODE_NET], ['-S', '64', '-C', '1', '-I', String(3 * N), '--warmup', String(3 * N)]);
    runs.node.push(6 * lastJson(n.out).usec_per_xfer);
    const nc = await pair(NODE, [NODE_NET], ['-S', '64', '-C', '1', '-I', '3000']);
    runs.nodeCold.push(6 * lastJson(nc.out).usec_per_xfer);
  }
  const m = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)]));
  // Ratios: the median of the rounds' ratios (a round's runs are back to back).
  const warmVsNode = median(runs.warm.map((x, k) => x / runs.node[k]));
  const coldVsWarm = median(runs.cold.map((x, k) => x / runs.warm[k]));
  const nodeColdVsWarm = median(runs.nodeCold.map((x, k) => x / runs.node[k]));
  const r = { reps, pings: N, unit: 'usec/ping', warm: m.warm, cold: m.cold, node: m.node, nodeCold: m.nodeCold, coldWallMs: m.coldWallMs, warmVsNode, coldVsWarm, nodeColdVsWarm, targets: { warmVsNode: '<= 1.15', coldVsWarm: '<= 1.25' }, runs };
  log(`rping: 64 B pings, ${reps} run(s) each, median; warm: -C ${N} after --warmup ${N}; cold: -C 1000 in a fresh process (client wall time ${fx(m.coldWallMs / 1000, 2)} s)`);
  log(`  warm ${fx(m.warm, 1)} usec/ping   Node net 3 RTTs ${fx(m.node, 1)} usec   warm/Node ${fx(r.warmVsNode)} (target <= 1.15)`);
  log(`  cold ${fx(m.cold, 1)} usec/ping   cold/warm ${fx(r.coldVsWarm)} (target <= 1.25)   Node net cold ${fx(m.nodeCold, 1)} usec, its own cold/warm ${fx(nodeColdVsWarm)}`);
  return r;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await rpingBench({ reps: Number(process.env.BENCH_REPS ?? 3) });
}
