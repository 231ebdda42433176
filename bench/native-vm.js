// bench/native.js inside the reference VM, on the guest kernel's own RDMA device: boots the VM
// (test/interop/lib/refvm.js, docs/interop.md), runs the bench there with this machine's node,
// the package's dist/ and its native addon, and prints its rows (verbs API, bare addon calls, C
// loop: time per round trip, spread, CPU per round trip, ratio to C).
//
//   npm run build && npm run build:native
//   node bench/native-vm.js [--rdma rxe|siw] [--iters N] [--rounds N] [--warmup N] [--json FILE]
//
// The guest's kernel runs under emulation (20-300x slower than this machine, and noisy): only the
// ratios within one run mean anything. Defaults: rxe, 2000 round trips x 9 rounds after 10000
// warm-up round trips. REFVM_VM picks the VM slot (default 0). Exits 2 when the VM or the build
// is missing (saying which), 1 when the bench fails in the guest.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, refvmAvailable, vmSlot, withGuest } from '../test/interop/lib/refvm.js';
import { formatNative } from './native.js';

const argv = process.argv.slice(2);
const opt = (name, d) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : d;
};
const KNOWN = ['--rdma', '--iters', '--rounds', '--warmup', '--json'];
for (const a of argv) if (a.startsWith('--') && !KNOWN.includes(a)) throw new Error(`unknown option ${a} (options: ${KNOWN.join(' ')})`);
const rdma = opt('--rdma', 'rxe');
if (!['rxe', 'siw'].includes(rdma)) throw new Error(`--rdma ${rdma}: rxe or siw`);
const iters = Number(opt('--iters', 2000));
const rounds = Number(opt('--rounds', 9));
const warmup = Number(opt('--warmup', 10000));
const json = opt('--json');

const missing = [join(REPO_ROOT, 'native', 'build', 'rdmacm.node'), join(REPO_ROOT, 'dist', 'index.js')].filter((f) => !existsSync(f));
if (missing.length) {
  console.error(`bench/native-vm.js: not built: ${missing.join(', ')} (npm run build; npm run build:native)`);
  process.exit(2);
}
const avail = await refvmAvailable();
if (!avail.ok) {
  console.error(`bench/native-vm.js: reference VM unavailable: ${avail.reason}`);
  process.exit(2);
}

const env = `BENCH_JSON=1 BENCH_NATIVE_DEVICE=${rdma}0 BENCH_NATIVE_ITERS=${iters} BENCH_NATIVE_ROUNDS=${rounds} BENCH_NATIVE_WARMUP=${warmup}`;
const job = `mark ready
gtool bench 1200 env ${env} $H/node /mnt/src/bench/native.js
mark finished
`;
const res = await withGuest({ name: `bench-native-${rdma}`, rdma, vm: vmSlot(0), job, timeoutSec: 1500, src: REPO_ROOT, node: true }, async (ctx) => {
  await ctx.waitFile('finished', 1_400_000);
  return ctx.result('bench');
});
const r = res.value;
const line = r.out.trim().split('\n').at(-1) ?? '';
if (r.rc !== 0 || !line.startsWith('{')) {
  console.error(`bench/native.js in the guest: exit ${r.rc}\n${r.err.trimEnd()}\n${r.out.trimEnd()}\n(job folder ${res.jobDir})`);
  process.exit(1);
}
const j = JSON.parse(line);
if (!j.rows) {
  console.log(line);
  process.exit(1);
}
for (const l of formatNative(j)) console.log(l);
console.log(`(reference VM ${vmSlot(0)}, guest kernel under emulation; job folder ${res.jobDir})`);
if (json) writeFileSync(json, JSON.stringify({ vm: vmSlot(0), rdma, ...j }, null, 2) + '\n');
