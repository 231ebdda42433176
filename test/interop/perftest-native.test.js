// interop lane: guest (every tool of this file runs inside the guest; see scripts/interop-lanes.js)
// perftest on the native backend in the reference VM: our ib_* tools run inside the guest with RDMACM_BACKEND=native (the addon built here, the package shared at
// /mnt/src), on the kernel's own device through rdma-core's libibverbs and librdmacm, against
// Debian's perftest on the same device, both directions. Two boots:
//   rxe  (rxe0, QPs connected by their keys over perftest's TCP side channel)
//     WK / WO  ib_write_bw -s 4096: kernel server <- our client / our server <- kernel client
//     LK / LO  ib_send_lat
//     RK / RO  ib_read_lat
//     SK / SO, WLK / WLO, RBK / RBO  ib_send_bw -s 4096, ib_write_lat, ib_read_bw -s 4096
//     ALK / ALO, ABK / ABO  ib_atomic_lat -A CMP_AND_SWAP, ib_atomic_bw (FETCH_AND_ADD)
//     URK / URO  ib_send_lat -R -c UD (UD QPs met by SIDR through rdma_cm)
//   siw  (siw0, -R: the side channel and the QPs made and connected by rdma_cm, the only way
//        perftest runs over iWARP): W, L, R and S (send_bw with the receiver's credits) with -R.
// Every run is small (-n 20): node in the emulated guest is slow, and only correctness counts.
// Both sides must exit 0 and print their row (read_lat's and atomic_lat's servers print none; a
// write_bw, read_bw or atomic_bw server prints the row its client sent in the report exchange). Our side prints the kernel's device
// name in its banner (`Device : rxe0`), which only the native backend can open.
// PERFTEST_NATIVE_BOOTS=rxe (or siw) runs one boot; PERFTEST_NATIVE_SCENARIOS=WK,LO some
// scenarios only. Env: REFVM_VM (the VM slot, default 0).
// Needs, besides the VM: native/build/rdmacm.node (npm run build:native) and dist/.
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, banner, REPO_ROOT, vmSlot } from './lib/refvm.js';
import { bwRowRe, latRowRe, infWithoutReason } from './lib/perftest-rows.js';

const ADDON = join(REPO_ROOT, 'native', 'build', 'rdmacm.node');
const VM = vmSlot(0);
const ITERS = 20;
const N = ['-n', String(ITERS)];
const TOOLS = {
  W: { tool: 'ib_write_bw', args: ['-s', '4096', ...N], size: 4096 },
  L: { tool: 'ib_send_lat', args: N, size: 2 },
  R: { tool: 'ib_read_lat', args: N, size: 2 },
  S: { tool: 'ib_send_bw', args: ['-s', '4096', ...N], size: 4096 },
  WL: { tool: 'ib_write_lat', args: N, size: 2 },
  RB: { tool: 'ib_read_bw', args: ['-s', '4096', ...N], size: 4096 },
  AL: { tool: 'ib_atomic_lat', args: ['-A', 'CMP_AND_SWAP', ...N], size: 8 },
  AB: { tool: 'ib_atomic_bw', args: N, size: 8 },
  // UD QPs through rdma_cm (RDMA_PS_UDP ids, SIDR) on a device whose other rows connect by keys.
  UR: { tool: 'ib_send_lat', args: ['-R', '-c', 'UD', ...N], size: 2 },
};
// rxe0 has atomics; siw0 none (perftest's atomics need them). On siw0, send_bw runs with the
// receiver's credits (credit.ts), which only iWARP uses.
const BOOTS = [
  { rdma: 'rxe', dev: 'rxe0', cm: false, port0: 18600, tools: ['W', 'L', 'R', 'S', 'WL', 'RB', 'AL', 'AB', 'UR'] },
  { rdma: 'siw', dev: 'siw0', cm: true, port0: 18700, tools: ['W', 'L', 'R', 'S'] },
];
/** Servers that only wait for their client and print no row. */
const SILENT_SERVERS = new Set(['ib_read_lat', 'ib_atomic_lat']);


function scenarios(boot) {
  const list = [];
  let port = boot.port0;
  for (const k of boot.tools) {
    const t = TOOLS[k];
    for (const ours of ['cli', 'srv']) {
      const args = [...(boot.cm ? ['-R'] : []), '-d', boot.dev, '-F', '-p', String(port), ...t.args].join(' ');
      list.push({ n: `${k}${ours === 'cli' ? 'K' : 'O'}`, tool: t.tool, size: t.size, ours, port, args, cm: boot.cm || t.args.includes('-R') });
      port++;
    }
  }
  return list;
}

const built = (t) => requireBuilt(t, [ADDON, join(REPO_ROOT, 'dist', 'cli', 'ib_write_bw.js')], 'npm run build; npm run build:native needs libibverbs-dev and librdmacm-dev');

// ------------------------------------------------------------------ the guest job
// `pair NAME PORT SRV CLI`: the server in the background until it listens (a TCP listener for
// perftest's side channel, an rdma_cm id in LISTEN with -R), then the client; the server gets
// 60 s to end on its own. Each side: NAME-srv / NAME-cli .out .err .rc.
const tool = (who, name) => (who === 'kernel' ? name : `env RDMACM_BACKEND=native $H/node /mnt/src/dist/cli/${name}.js`);
const PRELUDE = `
IP=$REFVM_IP
ulimit -c unlimited; echo "$H/core.%p" > /proc/sys/kernel/core_pattern
pair() { local n=$1 port=$2 wait=$3 srv=$4 cli=$5 g=0
  gstart $n-srv 300 $srv; local sp=$GPID
  if $wait $port 240; then gtool $n-cli 300 $cli; else glog "$n: no listener on $port"; putrc $n-cli 250; fi
  while kill -0 $sp 2>/dev/null && [ $g -lt 300 ]; do sleep 0.2; g=$((g+1)); done
  kill $sp 2>/dev/null; gwait $n-srv $sp; }
`;

function jobOf(boot, list) {
  return `${PRELUDE}
ib_write_bw --version > $H/perftest-version 2>&1
mark ready
${list.map((s) => {
    const srv = `${tool(s.ours === 'srv' ? 'ours' : 'kernel', s.tool)} ${s.args}`;
    const cli = `${tool(s.ours === 'cli' ? 'ours' : 'kernel', s.tool)} ${s.args} $IP`;
    return `pair ${s.n} ${s.port} ${s.cm ? 'waitcm' : 'waitlisten'} "${srv}" "${cli}"`;
  }).join('\n')}
mark finished
`;
}

// ------------------------------------------------------------------ checks
const tailOf = (s, n = 14) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const desc = (who, r) => `${who}: exit ${r.rc}${r.rc === 124 ? ' (TIMED OUT)' : ''}\n  stderr: ${tailOf(r.err)}\n  stdout: ${tailOf(r.out)}${r.hang ? `\n  still running near its deadline:\n${tailOf(r.hang, 30)}` : ''}`;

const onlyBoots = (process.env.PERFTEST_NATIVE_BOOTS ?? '').split(',').filter(Boolean);
const picked = (process.env.PERFTEST_NATIVE_SCENARIOS ?? '').split(',').filter(Boolean);
for (const boot of BOOTS.filter((b) => onlyBoots.length === 0 || onlyBoots.includes(b.rdma))) {
  const list = scenarios(boot).filter((s) => picked.length === 0 || picked.includes(s.n));
  if (list.length === 0) continue;
  test(`native backend on the kernel's ${boot.dev}${boot.cm ? ' (-R)' : ''}: our ${[...new Set(boot.tools.map((k) => TOOLS[k].tool))].join(' / ')} <-> Debian's perftest, both directions`, { timeout: 2_400_000 }, async (t) => {
    if (!(await requireRefvm(t)) || !built(t)) return;
    const res = await withGuest({ name: `perftest-native-${boot.rdma}`, rdma: boot.rdma, vm: VM, job: jobOf(boot, list), timeoutSec: 2200, src: REPO_ROOT, node: true }, async (ctx) => {
      await ctx.waitFile('finished', 2_150_000);
    });
    t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
    const result = (n) => {
      const rc = res.read(`${n}.rc`);
      return { rc: rc === null ? null : Number(rc.trim()), out: res.read(`${n}.out`) ?? '', err: res.read(`${n}.err`) ?? '', hang: res.read(`${n}.hang`) ?? '' };
    };
    for (const s of list) {
      const title = s.ours === 'cli' ? 'kernel server <- our client' : 'our server <- kernel client';
      await t.test(`${s.n}: ${s.tool}${s.cm ? ' -R' : ''}${/-c UD/.test(s.args) ? ' -c UD' : ''}, ${title}`, () => {
        const srv = result(`${s.n}-srv`);
        const cli = result(`${s.n}-cli`);
        const whoSrv = s.ours === 'srv' ? 'our server' : 'kernel server';
        const whoCli = s.ours === 'cli' ? 'our client' : 'kernel client';
        const both = `${desc(whoSrv, srv)}\n${desc(whoCli, cli)}\n${res.read('perftest-version') ?? ''}`;
        assert.equal(cli.rc, 0, both);
        assert.equal(srv.rc, 0, both);
        const row = s.tool.endsWith('_bw') ? bwRowRe(s.size, ITERS) : latRowRe(s.size, ITERS);
        for (const side of [srv, cli]) assert.equal(infWithoutReason(side.out, side.err), null, both);
        assert.match(cli.out, row, both);
        if (SILENT_SERVERS.has(s.tool)) assert.doesNotMatch(srv.out, row, both);
        else assert.match(srv.out, row, both);
        // Ours opened the kernel's device itself: the native backend.
        const mine = s.ours === 'srv' ? srv : cli;
        assert.match(mine.out, new RegExp(`\\tDevice {9}: ${boot.dev}$`, 'm'), both);
      });
    }
    assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
  });
}
