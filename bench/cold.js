// Cold start, A/B: one-shot runs of rping and cmtime (a fresh server and client process each),
// cold and warm, under variants of the process settings the tools choose for themselves
// (src/cli/startup.ts), in interleaved rounds so that every variant sees the same load.
//
//   node bench/cold.js [--rounds N] [--tool rping|cmtime] [--variant NAME=ENV ...] [--node-flags "..."]
//
//   --rounds N      rounds (default 6); each round runs every variant cold, then warm
//   --tool          rping (default): `rping -C 1000` cold, `-C 5000 --warmup 5000` warm, µs/ping;
//                   cmtime: `cmtime -c 1000` cold (its one-connection warm-up), `--warmup 4000`
//                   warm, µs per connection of the "full connect" row
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
if (tool !== 'rping' && tool !== 'cmtime') throw new Error(`unknown tool ${tool}`);

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
  if (cli.code !== 0 && tool === 'rping') srv.kill();
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
  const common = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', port, '-c', '1000', ...(warm ? ['--warmup', '4000'] : [])];
  const cli = await pairRun(v, [CMTIME, ...common, '-L'], [CMTIME, ...common]);
  // The "full connect" row of the first table after "Connect (1000) QPs test": avg/conn in µs.
  const at = cli.out.indexOf('Connect (1000) QPs test');
  const m = at < 0 ? null : /\nfull connect\s+(\d+)\s+(\d+)/.exec(cli.out.slice(at));
  return m ? Number(m[2]) / 1000 : null;
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
