// The stream section of `npm run bench`: rstream's tests over the soft iWARP device (rstream and
// riostream) and over Node TCP (our `rstream -T s`), each beside the strongest baselines the same
// run can measure:
//
//   Node net   bench/node-net.js: the same test written directly on Node's `net`, reading into one
//              reused `onread` buffer, no copy, no promise on the path — the limit of what Node
//              can do, and what every headline ratio is taken against;
//   Node bp    the same with `--busy-poll 10` (latency rows only): each wait keeps the event loop
//              from sleeping for 10 µs, as an rsocket's wait does (rsocket.c's polling_time), so
//              rsockets' latency is also compared with a Node ping-pong that waits the same way;
//   C -T s     rdma-core's rstream -T s (kernel TCP, no RDMA), where Debian's rdmacm-utils is
//              installed (bench/setup.sh installs it);
//   qperf      qperf tcp_lat / tcp_bw (kernel TCP) where qperf is installed.
//
// Steady rows: every run of ours and of Node net first does `--warmup N` untimed messages each way
// (N = the timed count), so the timed part measures code V8 has compiled. C and qperf need no
// warm-up. Cold rows: one-shot runs of the default rstream series (no options: what a user who
// types `rstream` once sees), compared with the steady rows of the same size.
//
// Each figure is the median of `reps` runs; the implementations of a row run interleaved, round
// after round, so that machine noise hits all alike. Server and client are two processes, pinned
// to one CPU each (bench/lib.js).
import { fileURLToPath, pathToFileURL } from 'node:url';
import { compare, fmtCompare, fx, jsonLines, lastJson, median, pair, pairTimedCpuUs, run, which, freePort, listening, PIN } from './lib.js';

const RSTREAM = fileURLToPath(new URL('../dist/cli/rstream.js', import.meta.url));
const RIOSTREAM = fileURLToPath(new URL('../dist/cli/riostream.js', import.meta.url));
const NODE_NET = fileURLToPath(new URL('./node-net.js', import.meta.url));
const NODE = process.execPath;

/** rsockets' default busy-poll before a wait sleeps (rsocket.c's polling_time, µs). */
const RS_POLLING_US = 10;
const num = (name, dflt) => Number(process.env[name] ?? dflt);

/** The implementations a row is measured with; `id` keys the JSON. */
const IMPLS = [
  { id: 'soft', label: 'rstream soft' },
  { id: 'rio', label: 'riostream soft' },
  { id: 'tcs', label: 'rstream -T s' },
  { id: 'node', label: 'Node net' },
  { id: 'nodebp', label: 'Node bp' },
  { id: 'c', label: 'C -T s' },
  { id: 'qperf', label: 'qperf' },
];

function steadyRows(scale) {
  const lat = Math.round(num('BENCH_LAT_ITERS', 30_000) * scale);
  const bw64 = Math.round(num('BENCH_BW64_COUNT', 20_000) * scale);
  const bw1m = Math.round(num('BENCH_BW1M_COUNT', 1500) * scale);
  const B = ['-B', String(4 << 20)];
  return [
    { id: 'lat64', name: '64 B latency', unit: 'usec/xfer', metric: 'usec_per_xfer', better: 'lower', size: 64, args: ['-S', '64', '-C', '1', '-I', String(lat)], warm: lat },
    { id: 'bw64k', name: '64 KiB bandwidth', unit: 'Gb/s', metric: 'gbps', better: 'higher', size: 65536, args: ['-S', '65536', '-C', String(bw64)], warm: bw64 },
    { id: 'bw1m', name: '1 MiB bandwidth', unit: 'Gb/s', metric: 'gbps', better: 'higher', size: 1 << 20, args: ['-S', String(1 << 20), '-C', String(bw1m)], warm: bw1m },
    { id: 'bw64k-B4M', name: '64 KiB bw, -B 4M', unit: 'Gb/s', metric: 'gbps', better: 'higher', size: 65536, args: ['-S', '65536', '-C', String(bw64)], extra: B, warm: bw64 },
    { id: 'bw1m-B4M', name: '1 MiB bw, -B 4M', unit: 'Gb/s', metric: 'gbps', better: 'higher', size: 1 << 20, args: ['-S', String(1 << 20), '-C', String(bw1m)], extra: B, warm: bw1m },
  ];
}

// -- qperf ----------------------------------------------------------------------------------------

/** A qperf server on PIN[0] (it serves clients until killed). */
async function qperfServer(qperf) {
  const port = await freePort();
  const srv = run(qperf, ['-lp', String(port)], { side: 0, timeoutMs: 3_600_000 });
  await listening(port);
  return { port, close: () => srv.kill() };
}

/** One qperf test: tcp_lat gives one-way latency (= usec/xfer), tcp_bw one-way bandwidth (Gb/s). */
async function qperfRun(qperf, srv, row) {
  const test = row.metric === 'gbps' ? 'tcp_bw' : 'tcp_lat';
  const args = ['127.0.0.1', '-lp', String(srv.port), '-t', String(num('BENCH_QPERF_SECS', 2)), '-m', String(row.size)];
  if (row.extra) args.push('-sb', String(4 << 20));
  const r = await run(qperf, [...args, test], { side: 1, timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`qperf ${args.join(' ')} ${test}: exit ${r.code}\n${r.err}${r.out}`);
  if (test === 'tcp_lat') {
    const m = /latency\s*=\s*([\d.]+)\s*(ns|us|ms|sec)/.exec(r.out);
    if (!m) throw new Error(`qperf: no latency in ${r.out}`);
    return Number(m[1]) * { ns: 1e-3, us: 1, ms: 1e3, sec: 1e6 }[m[2]];
  }
  const m = /bw\s*=\s*([\d.]+)\s*(bytes|KB|MB|GB)\/sec/.exec(r.out);
  if (!m) throw new Error(`qperf: no bandwidth in ${r.out}`);
  return (Number(m[1]) * { bytes: 1, KB: 1e3, MB: 1e6, GB: 1e9 }[m[2]] * 8) / 1e9;
}

// -- one run of each implementation ------------------------------------------------------------------

/** The client's row of C rstream's table: { gbps, usec_per_xfer }. */
function cRow(text) {
  const c = text.trim().split('\n').pop().trim().split(/\s+/);
  return { name: c[0], gbps: Number(c[6]), usec_per_xfer: Number(c[7]) };
}

/** Every row of C rstream's table (a series run). */
function cRows(text) {
  return text
    .trim()
    .split('\n')
    .filter((l) => /^\d+[kmg]?_(lat|bw)\s/.test(l))
    .map((l) => {
      const c = l.trim().split(/\s+/);
      return { name: c[0], gbps: Number(c[6]), usec_per_xfer: Number(c[7]) };
    });
}

/**
 * CPU µs per operation of a row (per message one way for the latency row, per MiB moved for the
 * bandwidth rows), from the µs both ends used over `n` iterations of the row's shape.
 */
function cpuPerOp(row, us, iters) {
  if (us === null) return null;
  const msgs = iters * Number(row.args[row.args.indexOf('-C') + 1]) * 2;
  return row.better === 'lower' ? us / msgs : us / ((msgs * row.size) / (1 << 20));
}

/**
 * One run of `impl` on `row`: { value, cpu } — the row's figure, and the CPU µs per operation of
 * the client and the server (the timed parts both report with --json; the C tool's whole lives,
 * which have no warm-up; none for qperf, which runs for a time).
 */
async function once(impl, row, tools, qsrv) {
  const args = [...row.args, ...(row.extra ?? [])];
  const warm = ['--warmup', String(row.warm)];
  const iters = Number(row.args.includes('-I') ? row.args[row.args.indexOf('-I') + 1] : 1);
  const ours = (r) => ({ value: lastJson(r.out)[row.metric], cpu: cpuPerOp(row, pairTimedCpuUs(r), iters) });
  switch (impl) {
    case 'soft':
      return ours(await pair(NODE, [RSTREAM], [...args, '--json', ...warm]));
    case 'rio':
      return ours(await pair(NODE, [RIOSTREAM], [...args, '--json', ...warm]));
    case 'tcs':
      return ours(await pair(NODE, [RSTREAM], [...args, '-T', 's', '--json', ...warm]));
    case 'node':
      // Node cannot size a TCP socket's kernel buffers: the -B rows run with the defaults.
      return ours(await pair(NODE, [NODE_NET], [...row.args, ...warm]));
    case 'nodebp':
      if (row.better !== 'lower') return { value: null, cpu: null };
      return ours(await pair(NODE, [NODE_NET], [...row.args, ...warm, '--busy-poll', String(RS_POLLING_US)]));
    case 'c': {
      if (!tools.rstream) return { value: null, cpu: null };
      const r = await pair(tools.rstream, [], [...args, '-T', 's']);
      return { value: cRow(r.out)[row.metric], cpu: cpuPerOp(row, r.cpuUs, iters) };
    }
    case 'qperf':
      return { value: tools.qperf ? await qperfRun(tools.qperf, qsrv, row) : null, cpu: null };
  }
  throw new Error(impl);
}

/** One one-shot default-series run: { name: { gbps, usec_per_xfer } } and the client's wall time. */
async function series(impl, tools) {
  let r;
  let rows;
  if (impl === 'soft' || impl === 'tcs' || impl === 'rio') {
    const tool = impl === 'rio' ? RIOSTREAM : RSTREAM;
    r = await pair(NODE, [tool], [...(impl === 'tcs' ? ['-T', 's'] : []), '--json']);
    rows = jsonLines(r.out);
  } else if (impl === 'node') {
    r = await pair(NODE, [NODE_NET], ['--series']);
    rows = jsonLines(r.out);
  } else if (impl === 'c') {
    if (!tools.rstream) return null;
    r = await pair(tools.rstream, [], ['-T', 's']);
    rows = cRows(r.out);
  } else return null;
  // cpuS: the CPU seconds both processes used in their whole lives (the series is all they do).
  return { rows: Object.fromEntries(rows.map((x) => [x.name, { gbps: x.gbps, usec_per_xfer: x.usec_per_xfer }])), wallMs: r.ms, cpuS: r.cpuUs === null ? null : r.cpuUs / 1e6 };
}

/** The median of a[k] / b[k] over the rounds where both were measured (null if none). */
function roundRatio(a, b) {
  return median((a ?? []).map((x, k) => (typeof x === 'number' && b[k] ? x / b[k] : null)));
}

/** The cold rows: a series row set against a steady row. */
const COLD = [
  { id: 'cold-lat64', name: '64 B latency', series: '64_lat', steady: 'lat64', metric: 'usec_per_xfer', unit: 'usec/xfer', better: 'lower' },
  { id: 'cold-bw64k', name: '64 KiB bandwidth', series: '64k_bw', steady: 'bw64k', metric: 'gbps', unit: 'Gb/s', better: 'higher' },
  { id: 'cold-bw1m', name: '1 MiB bandwidth', series: '1m_bw', steady: 'bw1m', metric: 'gbps', unit: 'Gb/s', better: 'higher' },
];

/** A progress line on stderr (the tables go to stdout at the end of the section). */
function progress(text) {
  if (process.env.BENCH_QUIET !== '1') process.stderr.write(`  stream: ${text}\n`);
}

export function streamTools() {
  return { rstream: which('rstream'), qperf: which('qperf') };
}

/**
 * Run the section: `reps` rounds; `scale` multiplies the steady counts; `cold`: the one-shot rows
 * too; `only`: a list of row ids. Returns the JSON-ready result.
 */
export async function streamBench({ reps = 3, scale = 1, cold = true, only = null, log = console.log } = {}) {
  const tools = streamTools();
  const rows = steadyRows(scale).filter((r) => !only || only.includes(r.id));
  const impls = IMPLS.filter((i) => (i.id !== 'c' || tools.rstream) && (i.id !== 'qperf' || tools.qperf)).map((i) => i.id);
  const qsrv = tools.qperf ? await qperfServer(tools.qperf) : null;
  const runs = Object.fromEntries(rows.map((r) => [r.id, Object.fromEntries(impls.map((i) => [i, []]))]));
  const cpuRuns = Object.fromEntries(rows.map((r) => [r.id, Object.fromEntries(impls.map((i) => [i, []]))]));
  const coldRuns = Object.fromEntries(['soft', 'rio', 'tcs', 'node', 'c'].filter((i) => impls.includes(i)).map((i) => [i, []]));
  try {
    for (let k = 0; k < reps; k++) {
      for (const row of rows) {
        for (const i of impls) {
          const r = await once(i, row, tools, qsrv);
          runs[row.id][i].push(r.value);
          cpuRuns[row.id][i].push(r.cpu);
        }
        progress(`round ${k + 1}/${reps}: ${row.name} done`);
      }
      if (cold) {
        for (const i of Object.keys(coldRuns)) coldRuns[i].push(await series(i, tools));
        progress(`round ${k + 1}/${reps}: one-shot series done`);
      }
    }
  } finally {
    qsrv?.close();
  }
  const result = { tools, reps, steady: [], cold: [] };
  for (const row of rows) {
    const m = Object.fromEntries(impls.map((i) => [i, median(runs[row.id][i])]));
    // The median of the rounds' ratios: the runs of one round are back to back, under the same
    // conditions, so a round slowed down by something else moves both sides of its ratio.
    const ratio = (x) => roundRatio(runs[row.id][x], runs[row.id].node);
    result.steady.push({
      id: row.id,
      name: row.name,
      unit: row.unit,
      better: row.better,
      args: [...row.args, ...(row.extra ?? [])],
      warmup: row.warm,
      median: m,
      vsNode: { soft: ratio('soft'), rio: ratio('rio'), tcs: ratio('tcs'), c: ratio('c'), qperf: ratio('qperf') },
      // rsockets busy-poll before they sleep; Node net with the same wait (latency rows only).
      vsNodeBusyPoll: row.better === 'lower' ? { soft: roundRatio(runs[row.id].soft, runs[row.id].nodebp), rio: roundRatio(runs[row.id].rio, runs[row.id].nodebp) } : null,
      target: row.better === 'lower' ? '<= 1.15 x Node net' : '>= 0.9 x Node net',
      // Each of ours against Node net: spreads, the ratio's range, CPU per operation (cpuUnit).
      cpuUnit: row.better === 'lower' ? 'us/xfer' : 'us/MiB',
      cmp: Object.fromEntries(['soft', 'rio', 'tcs', 'c'].filter((i) => impls.includes(i)).map((i) => [i, compare({ ours: runs[row.id][i], base: runs[row.id].node, oursCpu: cpuRuns[row.id][i], baseCpu: cpuRuns[row.id].node })])),
      runs: runs[row.id],
      cpuRuns: cpuRuns[row.id],
    });
  }
  if (cold) {
    for (const c of COLD) {
      const coldOf = (i) => coldRuns[i].map((x) => x?.rows[c.series]?.[c.metric] ?? null);
      const med = {};
      const vsWarm = {};
      for (const i of Object.keys(coldRuns)) {
        med[i] = median(coldOf(i));
        // Per round: that round's one-shot run against the same round's steady run.
        vsWarm[i] = runs[c.steady]?.[i] ? roundRatio(coldOf(i), runs[c.steady][i]) : null;
      }
      // Each round's cold/warm of ours against the same round's cold/warm of Node net.
      const coldWarm = (i) => coldOf(i).map((x, k) => (typeof x === 'number' && runs[c.steady]?.[i]?.[k] ? x / runs[c.steady][i][k] : null));
      const cmp = runs[c.steady] ? Object.fromEntries(['soft', 'rio', 'tcs'].filter((i) => i in coldRuns).map((i) => [i, compare({ ours: coldWarm(i), base: coldWarm('node') })])) : null;
      result.cold.push({ id: c.id, name: c.name, series: c.series, unit: c.unit, better: c.better, median: med, vsWarm, vsNodeCold: Object.fromEntries(Object.keys(med).map((i) => [i, roundRatio(coldOf(i), coldOf('node'))])), target: c.better === 'lower' ? 'cold <= 1.25 x warm' : 'cold >= warm / 1.25', cmp });
    }
    result.coldWallMs = Object.fromEntries(Object.entries(coldRuns).map(([i, v]) => [i, median(v.filter(Boolean).map((s) => s.wallMs))]));
    // The one-shot series against Node net's: client wall time (s) and both processes' CPU seconds.
    const wallS = (i) => coldRuns[i].map((s) => (s ? s.wallMs / 1000 : null));
    const cpuS = (i) => coldRuns[i].map((s) => s?.cpuS ?? null);
    result.series = Object.fromEntries(['soft', 'rio', 'tcs', 'c'].filter((i) => i in coldRuns).map((i) => [i, compare({ ours: wallS(i), base: wallS('node'), oursCpu: cpuS(i), baseCpu: cpuS('node') })]));
  }
  print(result, impls, log);
  return result;
}

function print(r, impls, log) {
  const head = IMPLS.filter((i) => impls.includes(i.id));
  log(`stream: rstream's tests, ${r.reps} run(s) each, median${PIN ? `; server on CPU ${PIN[0]}, client on CPU ${PIN[1]}` : '; unpinned'}; steady rows after an untimed warm-up as long as the timed part`);
  if (!r.tools.rstream) log('  (rdma-core rstream not installed: no C column; bench/setup.sh installs rdmacm-utils)');
  if (!r.tools.qperf) log('  (qperf not installed: no qperf column; bench/setup.sh installs it)');
  const w = 15;
  log(`${'test'.padEnd(18)}${'unit'.padEnd(10)}${head.map((i) => i.label.padStart(w)).join('')}   to Node net, median of the rounds' ratios (soft / rio / -T s; C)`);
  for (const s of r.steady) {
    const v = s.vsNode;
    const bp = s.vsNodeBusyPoll ? `; to Node bp ${fx(s.vsNodeBusyPoll.soft)} / ${fx(s.vsNodeBusyPoll.rio)}` : '';
    log(`${s.name.padEnd(18)}${s.unit.padEnd(10)}${head.map((i) => fx(s.median[i.id]).padStart(w)).join('')}   ${fx(v.soft)} / ${fx(v.rio)} / ${fx(v.tcs)}; C ${fx(v.c)}${bp}   (target ${s.target}, ${s.better} is better)`);
    for (const [i, c] of Object.entries(s.cmp)) log(`    ${IMPLS.find((x) => x.id === i).label.padEnd(15)} to Node net ${fx(c.ratio)}: ${fmtCompare(c, { cpuUnit: s.cpuUnit, cpuD: s.cpuUnit === 'us/MiB' ? 0 : 1 })}`);
  }
  if (r.cold.length) {
    log(`cold: one-shot default series (\`rstream\`, \`riostream\`, \`rstream -T s\`, C \`rstream -T s\`, Node net --series), its rows against the steady rows; client wall time ${Object.entries(r.coldWallMs).map(([i, ms]) => `${i} ${fx(ms / 1000, 1)} s`).join(', ')}`);
    log(`${'test'.padEnd(18)}${'unit'.padEnd(10)}${head.filter((i) => i.id in r.cold[0].median).map((i) => i.label.padStart(w)).join('')}   cold/warm (soft / rio / -T s / Node)`);
    for (const c of r.cold) {
      const v = c.vsWarm;
      log(`${`${c.series} (cold)`.padEnd(18)}${c.unit.padEnd(10)}${head.filter((i) => i.id in c.median).map((i) => fx(c.median[i.id]).padStart(w)).join('')}   ${fx(v.soft)} / ${fx(v.rio)} / ${fx(v.tcs)} / ${fx(v.node)}   (target ${c.target})`);
      if (c.cmp) for (const [i, x] of Object.entries(c.cmp)) log(`    ${IMPLS.find((y) => y.id === i).label.padEnd(15)} cold/warm to Node net's own ${fx(x.ratio)}: ${fmtCompare(x)}`);
    }
    for (const [i, x] of Object.entries(r.series)) log(`  series wall time ${IMPLS.find((y) => y.id === i).label.padEnd(15)} to Node net's ${fx(x.ratio)} (target <= 1.25): ${fmtCompare(x, { cpuUnit: 's/run', cpuD: 2 })}`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  await streamBench({ reps: num('BENCH_REPS', 3), scale: num('BENCH_SCALE', 1), cold: process.env.BENCH_COLD !== '0', only: process.env.BENCH_ONLY?.split(',') ?? null });
}
