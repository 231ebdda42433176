// Cold start, A/B: one-shot runs of rping, cmtime, rstream and riostream (a fresh server and client process each),
// cold and warm, under variants of the process settings the tools choose for themselves
// (src/cli/startup.ts), in interleaved rounds so that every variant sees the same load.
//
//   node bench/cold.js [--rounds N] [--tool rping|cmtime|rstream|riostream] [--variant NAME=ENV ...] [--scale F]
//
//   --rounds N      rounds (default 6); each round runs every variant cold, then warm
//   --tool          rping (default): `rping -C 1000` cold, `-C 5000 --warmup 5000` warm, µs/ping;
//                   net: plain Node in cmtime's shape (bench/net-connect.js: 1000 TCP connections at
//                   once, a 24-byte request and reply on each), one warm-up connection cold,
//                   `--warmup 4000` warm, µs per connection — Node's own cold/warm limit;
//                   cmtime: `cmtime -c 1000` cold (its one-connection warm-up), `--warmup 4000`
//                   warm, µs per connection of the "full connect" row;
//                   rstream / riostream: the default series once (`--json`) cold, its `64_lat`,
//                   `64k_bw` and `1m_bw` rows against the steady rows warm (`-S 64 -C 1 -I 30000`,
//                   `-S 65536 -C 20000`, `-S 1048576 -C 1500`, each with `--warmup` of its count);
//                   per row µs per transfer or Gb/s, and cold/warm as a time ratio (1.25: the
//                   cold row takes 1.25 × the warm row's time per transfer)
//   --scale F       rstream / riostream: the warm rows' counts times F (default 1)
//   --variant       NAME=VAR=value,VAR=value (default: `before` = RDMACM_JIT_NICE=0,RDMACM_JIT_BUDGET=0,RDMACM_JIT_IDLE=0
//                   and `after` = the tools' defaults); a variant `NAME=flags:--maglev` passes V8
//                   flags on node's command line instead, and `NAME=dir:/path/to/tree` runs the
//                   tools of another built tree (A/B of two builds)
//   --cold-only     no warm runs
//
// Prints, per variant, the median cold and warm figures and the median of the rounds' cold/warm
// ratios (the figures of one round share the machine's conditions). Run on an otherwise idle
// machine; on a shared one expect single runs to move by 2× and read only the medians.
import { fileURLToPath } from 'node:url';
import { fx, freePort, listening, median, run } from './lib.js';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
const rounds = Number(opt('--rounds', 6));
const tool = opt('--tool', 'rping');
const coldOnly = argv.includes('--cold-only');
const variants = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] !== '--variant') continue;
  const [name, spec = ''] = argv[i + 1].split(/=(.*)/s);
  if (spec.startsWith('flags:')) variants.push({ name, env: {}, flags: spec.slice(6).split(' ').filter(Boolean) });
  else if (spec.startsWith('dir:')) variants.push({ name, env: {}, flags: [], dir: spec.slice(4) });
  else variants.push({ name, env: Object.fromEntries(spec.split(',').filter(Boolean).map((kv) => kv.split('='))), flags: [] });
}
if (!variants.length) {
  variants.push({ name: 'before', env: { RDMACM_JIT_NICE: '0', RDMACM_JIT_BUDGET: '0', RDMACM_JIT_IDLE: '0' }, flags: [] });
  variants.push({ name: 'after', env: {}, flags: [] });
}
if (!['rping', 'cmtime', 'net', 'rstream', 'riostream'].includes(tool)) throw new Error(`unknown tool ${tool}`);
const stream = tool === 'rstream' || tool === 'riostream';
const scale = Number(opt('--scale', 1));

const NODE = process.execPath;
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const cliOf = (v, name) => `${v.dir ?? ROOT}/dist/cli/${name}.js`;

async function pairRun(v, serverArgs, clientArgs) {
  const srv = run(NODE, [...v.flags, ...serverArgs], { side: 0, timeoutMs: 300_000, env: v.env });
  try {
    await listening(Number(serverArgs[serverArgs.indexOf('-p') + 1]));
  } catch (e) {
    srv.kill();
    throw e;
  }
  const cli = await run(NODE, [...v.flags, ...clientArgs], { side: 1, timeoutMs: 300_000, env: v.env });
  if (cli.code !== 0 && tool !== 'cmtime') srv.kill();
  await srv;
  return cli;
}

/** One run: µs per ping (rping) or per connection (cmtime), or null when it failed. */
async function once(v, warm) {
  const port = String(await freePort());
  const RPING = cliOf(v, 'rping');
  const CMTIME = cliOf(v, 'cmtime');
  if (tool === 'rping') {
    const count = warm ? ['-C', '5000', '--warmup', '5000'] : ['-C', '1000'];
    const cli = await pairRun(v, [RPING, '-s', '-a', '127.0.0.1', '-p', port], [RPING, '-c', '-a', '127.0.0.1', '-p', port, '--json', ...count]);
    const line = cli.out.trim().split('\n').filter((l) => l.startsWith('{')).pop();
    return cli.code === 0 && line ? JSON.parse(line).usec_per_ping : null;
  }
  if (tool === 'net') {
    const NETC = fileURLToPath(new URL('net-connect.js', import.meta.url));
    const args = ['-p', port, '-c', '1000', '--warmup', warm ? '4000' : '1'];
    const cli = await pairRun(v, [NETC, 'server', ...args], [NETC, 'client', ...args]);
    const line = cli.out.trim().split('\n').filter((l) => l.startsWith('{')).pop();
    return cli.code === 0 && line ? JSON.parse(line).usec_per_conn : null;
  }
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', port, '-c', '1000', ...(warm ? ['--warmup', '4000'] : [])];
  const cli = await pairRun(v, [CMTIME, ...common, '-L'], [CMTIME, ...common]);
  // The "full connect" row of the first table after "Connect (1000) QPs test": avg/conn in µs.
  const at = cli.out.indexOf('Connect (1000) QPs test');
  const m = at < 0 ? null : /\nfull connect\s+(\d+)\s+(\d+)/.exec(cli.out.slice(at));
  return m ? Number(m[2]) / 1000 : null;
}

/** The rows of the stream tools: the series row, the steady arguments, the metric (true: Gb/s). */
const STREAM_ROWS = [
  { name: '64_lat', args: ['-S', '64', '-C', '1', '-I', String(Math.round(30_000 * scale))], count: Math.round(30_000 * scale), bw: false },
  { name: '64k_bw', args: ['-S', '65536', '-C', String(Math.round(20_000 * scale))], count: Math.round(20_000 * scale), bw: true },
  { name: '1m_bw', args: ['-S', '1048576', '-C', String(Math.round(1500 * scale))], count: Math.round(1500 * scale), bw: true },
];
const jsonRows = (out) => out.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const metric = (row, j) => (row.bw ? j.gbps : j.usec_per_xfer);

/** rstream / riostream: { row name: figure } of one cold series, or of the warm steady rows. */
async function onceStream(v, warm) {
  const cli = cliOf(v, tool);
  const pairOf = async (args) => {
    const port = String(await freePort());
    const r = await pairRun(v, [cli, '-p', port, '--json', ...args], [cli, '-s', '127.0.0.1', '-p', port, '--json', ...args]);
    return r.code === 0 ? jsonRows(r.out) : [];
  };
  const got = {};
  if (!warm) {
    const rows = await pairOf([]);
    for (const row of STREAM_ROWS) {
      const j = rows.find((x) => x.name === row.name);
      got[row.name] = j ? metric(row, j) : null;
    }
    return got;
  }
  for (const row of STREAM_ROWS) {
    const j = (await pairOf([...row.args, '--warmup', String(row.count)])).pop();
    got[row.name] = j ? metric(row, j) : null;
  }
  return got;
}

if (stream) {
  const sres = Object.fromEntries(variants.map((v) => [v.name, { cold: [], warm: [] }]));
  for (let r = 0; r < rounds; r++) {
    for (const v of variants) {
      sres[v.name].cold.push(await onceStream(v, false));
      sres[v.name].warm.push(coldOnly ? {} : await onceStream(v, true));
    }
    process.stderr.write(`round ${r + 1}/${rounds} done\n`);
  }
  console.log(`${tool}: ${rounds} interleaved rounds, medians (64_lat usec/xfer, bandwidth Gb/s); cold/warm: median of the rounds' time ratios (target <= 1.25)`);
  for (const v of variants) {
    const { cold, warm } = sres[v.name];
    const cols = STREAM_ROWS.map((row) => {
      const c = cold.map((x) => x[row.name] ?? null);
      const w = warm.map((x) => x[row.name] ?? null);
      const ratio = median(c.map((x, k) => (x && w[k] ? (row.bw ? w[k] / x : x / w[k]) : null)));
      return `${row.name} cold ${fx(median(c), 1)} warm ${fx(median(w), 1)} (${fx(ratio)}) [${c.map((x) => fx(x, 1)).join(' ')} | ${w.map((x) => fx(x, 1)).join(' ')}]`;
    });
    console.log(`  ${v.name.padEnd(10)} ${cols.join('   ')}`);
  }
  process.exit(0);
}

const res = Object.fromEntries(variants.map((v) => [v.name, { cold: [], warm: [] }]));
for (let r = 0; r < rounds; r++) {
  for (const v of variants) {
    res[v.name].cold.push(await once(v, false));
    res[v.name].warm.push(coldOnly ? null : await once(v, true));
  }
  process.stderr.write(`round ${r + 1}/${rounds} done\n`);
}
const unit = tool === 'rping' ? 'usec/ping' : 'usec/conn';
console.log(`${tool}: ${rounds} interleaved rounds, medians (${unit}); cold/warm: median of the rounds' ratios`);
for (const v of variants) {
  const { cold, warm } = res[v.name];
  const ratio = median(cold.map((c, k) => (c && warm[k] ? c / warm[k] : null)));
  console.log(`  ${v.name.padEnd(10)} cold ${fx(median(cold), 1).padStart(8)}   warm ${fx(median(warm), 1).padStart(8)}   cold/warm ${fx(ratio)}   runs cold ${cold.map((x) => fx(x, 0)).join(' ')}`);
}
process.exit(0);
