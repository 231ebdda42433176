// interop lane: guest (every tool of this file runs inside the guest; see scripts/interop-lanes.js)
// The native backend in the reference VM: the addon built on this machine, our tools run inside
// the guest on the kernel's own RDMA device (through rdma-core's libibverbs and librdmacm), against
// the kernel's tools on the same device, both directions:
//   siw boot: rdmacm-devices; the addon given stale and wrong-kind handles directly; rping -V -v
//             at 26 B, 64 B and 4 KiB; ucmatose; rstream (64 B and 4 KiB -T v); a process killed
//             with resources open leaves none in the kernel; the data-path bench (JS through the
//             addon against the same verbs in a C loop).
//   rxe boot: the same less rstream, rping at 64 B and 4 KiB.
// The guest runs everything in one job (one boot per device), writing each side's output and
// exit status to the job folder; the host then checks them as for the other interop tests: the
// same stdout lines as rdma-core's tools print, exit 0 both sides.
//
// Needs, besides the VM: native/build/rdmacm.node (npm run build:native with rdma-core's headers
// installed here). The guest has rdma-core 44's libraries, the same sonames.
// Env: NATIVE_INTEROP_DEVICES (default "siw,rxe"), NATIVE_BENCH_ITERS (round trips per bench
// round, default 1000; nine rounds).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, REPO_ROOT } from './lib/refvm.js';
import { rpingStdout, assertRpingStdout, unexpectedStderr } from './lib/rping-pattern.js';
import { sizeStr, cntStr } from '../../dist/cli/common.js';
import { AtomicCap, WcOpcode, WcStatus } from '../../dist/verbs/index.js';

const ADDON = join(REPO_ROOT, 'native', 'build', 'rdmacm.node');
const DEVICES = (process.env.NATIVE_INTEROP_DEVICES || 'siw,rxe').split(',');
const BENCH_ITERS = Number(process.env.NATIVE_BENCH_ITERS || 1000);

const built = (t) => requireBuilt(t, [ADDON, join(REPO_ROOT, 'dist', 'cli', 'rping.js')], 'npm run build; npm run build:native needs libibverbs-dev and librdmacm-dev');

// ------------------------------------------------------------------ the guest job
// Our tools: $H/node on the package shared at /mnt/src. `pair` runs a server in the background,
// waits until its rdma_cm id listens (rdma res: siw's and rxe's listeners alike), runs the client,
// then gives the server 20 s to end. Each side: NAME-srv / NAME-cli .out .err .rc.
//
// siw's initiator fails a connection whose responder's first FPDU is already in its socket when
// its CM work reads the MPA reply (siw_recv_mpa_rr: with no private data it reads one word more
// and calls any byte "extra data", -EPROTO; iw_cm reports CONNECT_ERROR with status -EINVAL).
// Kernel against kernel hits it as well: ucmatose's server sends as soon as it is established,
// and under emulation the client's CM work can run after that. \`pairOnce\` turns on siw's debug
// line for that one function and runs a pair again, once, only when the pair failed and the
// kernel printed that line meanwhile; the first run is kept as NAME-race-srv / NAME-race-cli.
const PRELUDE = `
OUR="$H/node /mnt/src/dist/cli"
IP=$REFVM_IP
cmlisten() { rdma res show cm_id 2>/dev/null | grep "state LISTEN" | grep -q ":$1 "; }
waitcm() { local i=0; until cmlisten "$1"; do sleep 0.2; i=$((i+1)); [ $i -ge 300 ] && return 1; done; return 0; }
pair() { local n=$1 port=$2 srv=$3 cli=$4 g=0
  gstart $n-srv 150 $srv; local sp=$GPID
  if waitcm $port; then gtool $n-cli 120 $cli; else glog "$n: no listener on $port"; putrc $n-cli 250; fi
  while kill -0 $sp 2>/dev/null && [ $g -lt 100 ]; do sleep 0.2; g=$((g+1)); done
  kill $sp 2>/dev/null; gwait $n-srv $sp; }
mount -t debugfs none /sys/kernel/debug 2>/dev/null
echo 'func siw_recv_mpa_rr +p' > /sys/kernel/debug/dynamic_debug/control 2>/dev/null || glog "siw's debug lines are off"
mparaces() { dmesg | grep -c "peer sent extra data"; }
pairOnce() { local n=$1 before; before=$(mparaces)
  pair "$@"
  if [ "$(cat $H/$n-cli.rc)$(cat $H/$n-srv.rc)" != 00 ] && [ "$(mparaces)" != "$before" ]; then
    glog "$n: siw's MPA reply race (dmesg: peer sent extra data); once more"
    for w in cli srv; do for e in out err rc; do mv $H/$n-$w.$e $H/$n-race-$w.$e 2>/dev/null; done; done
    pair "$@"
  fi; }
`;

const RPING_SIZES = { siw: [26, 64, 4096], rxe: [64, 4096] };
const UCM_ARGS = ['-c', '4', '-C', '10'];
const RSTREAM = [
  { size: 64, count: 10, iters: 5, verify: false },
  { size: 4096, count: 10, iters: 2, verify: true },
];
const rstreamArgs = (s, port) => ['-p', String(port), '-S', String(s.size), '-C', String(s.count), '-I', String(s.iters), ...(s.verify ? ['-T', 'v'] : [])];

function scenarios(dev) {
  const list = [];
  let port = 7700;
  for (const size of RPING_SIZES[dev]) {
    const a = `-a $IP -p ${port} -C 10 -S ${size} -V -v`;
    list.push({ kind: 'rping', name: `rping-k${size}`, title: `kernel rping server <- our rping client, -S ${size}`, size, ours: 'cli', port, srv: `rping -s ${a}`, cli: `$OUR/rping.js -c ${a}` });
    port++;
    const b = `-a $IP -p ${port} -C 10 -S ${size} -V -v`;
    list.push({ kind: 'rping', name: `rping-o${size}`, title: `our rping server <- kernel rping client, -S ${size}`, size, ours: 'srv', port, srv: `$OUR/rping.js -s ${b}`, cli: `rping -c ${b}` });
    port++;
  }
  list.push({ kind: 'ucmatose', name: 'ucm-k', title: `kernel ucmatose server <- our client (${UCM_ARGS.join(' ')})`, ours: 'cli', port, srv: `ucmatose -b $IP -p ${port} ${UCM_ARGS.join(' ')}`, cli: `$OUR/ucmatose.js -s $IP -p ${port} ${UCM_ARGS.join(' ')}` });
  port++;
  list.push({ kind: 'ucmatose', name: 'ucm-o', title: `our ucmatose server <- kernel client (${UCM_ARGS.join(' ')})`, ours: 'srv', port, srv: `$OUR/ucmatose.js -b $IP -p ${port} ${UCM_ARGS.join(' ')}`, cli: `ucmatose -s $IP -p ${port} ${UCM_ARGS.join(' ')}` });
  port++;
  if (dev === 'siw') {
    for (const [i, s] of RSTREAM.entries()) {
      const a = rstreamArgs(s, port).join(' ');
      list.push({ kind: 'rstream', name: `rs-k${i}`, title: `kernel rstream server <- our client (${a})`, rs: s, ours: 'cli', port, srv: `rstream ${a}`, cli: `$OUR/rstream.js -s $IP ${a}` });
      port++;
      const b = rstreamArgs(s, port).join(' ');
      list.push({ kind: 'rstream', name: `rs-o${i}`, title: `our rstream server <- kernel client (${b})`, rs: s, ours: 'srv', port, srv: `$OUR/rstream.js -b $IP ${b}`, cli: `rstream -s $IP ${b}` });
      port++;
    }
  }
  return list;
}

function jobFor(dev) {
  const sc = scenarios(dev);
  return `${PRELUDE}
mark ready
gtool devices 60 $OUR/rdmacm-devices.js -j
gtool misuse 60 $H/node /mnt/src/test/interop/lib/native-misuse.mjs /mnt/src
gtool atomics 90 $H/node /mnt/src/test/interop/lib/native-atomics.mjs /mnt/src ${dev}0 $IP 7790
${sc.map((s) => `pairOnce ${s.name} ${s.port} "${s.srv}" "${s.cli}"`).join('\n')}
# A process that ends with resources open (killed mid-run): the kernel keeps nothing of it.
gstart leak-srv 120 rping -s -a $IP -p 7799 -C 0; lp=$GPID
waitcm 7799 || glog "leak: no listener"
$H/node /mnt/src/dist/cli/rping.js -c -a $IP -p 7799 -C 0 > $H/leak-cli.out 2>&1 & cp=$!
i=0; until rdma res show qp 2>/dev/null | grep -q "comm node"; do sleep 0.2; i=$((i+1)); [ $i -ge 150 ] && break; done
res() { rdma res show; for o in cm_id qp cq mr pd; do rdma res show $o; done; }
res > $H/leak-during.txt 2>&1
kill -9 $cp; wait $cp 2>/dev/null
sleep 3
kill $lp 2>/dev/null; gwait leak-srv $lp
res > $H/leak-after.txt 2>&1
# The data path: JS through the addon against the same verbs in C, on this device.
gtool bench 300 env BENCH_JSON=1 BENCH_NATIVE_ITERS=${BENCH_ITERS} BENCH_NATIVE_ROUNDS=9 $H/node /mnt/src/bench/native.js
mark finished
`;
}

// ------------------------------------------------------------------ checks

const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const desc = (who, r) => `${who}: exit ${r.rc}\n  stderr: ${tailOf(r.err)}\n  stdout: ${tailOf(r.out, 6)}`;

const UCM_SERVER = 'cmatose: starting server\ninitiating data transfers\ncompleting sends\nreceiving data transfers\ndata transfers complete\ncmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0\n';
const UCM_CLIENT = 'cmatose: starting client\ncmatose: connecting\nreceiving data transfers\nsending replies\ndata transfers complete\ntest complete\nreturn status 0\n';
const RSTREAM_HEADER = 'name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer';

function rstreamRow(s) {
  const head = 'custom'.padEnd(10) + sizeStr(s.size).padEnd(8) + cntStr(s.count).padEnd(8) + cntStr(s.iters).padEnd(8) + sizeStr(s.iters * s.count * s.size * 2).padEnd(8);
  return new RegExp(`^${head.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} *\\d+\\.\\d\\ds *\\d+\\.\\d\\d *\\d+\\.\\d\\d$`);
}

function checkScenario(s, srv, cli) {
  const both = `${desc('server', srv)}\n${desc('client', cli)}`;
  assert.equal(cli.rc, 0, `client failed\n${both}`);
  assert.equal(srv.rc, 0, `server failed\n${both}`);
  const ours = s.ours === 'cli' ? cli : srv;
  const kernel = s.ours === 'cli' ? srv : cli;
  switch (s.kind) {
    case 'rping':
      assertRpingStdout(cli.out, rpingStdout({ count: 10, size: s.size, role: 'client' }), `client (${s.ours === 'cli' ? 'ours' : 'kernel'})`);
      assertRpingStdout(srv.out, rpingStdout({ count: 10, size: s.size, role: 'server' }), `server (${s.ours === 'srv' ? 'ours' : 'kernel'})`);
      assert.deepEqual(unexpectedStderr(kernel.err, s.ours === 'cli' ? 'server' : 'client'), [], `kernel rping stderr\n${both}`);
      break;
    case 'ucmatose':
      assert.equal(srv.out, UCM_SERVER, `server stdout\n${both}`);
      assert.equal(cli.out, UCM_CLIENT, `client stdout\n${both}`);
      assert.equal(ours.err, '', `our ucmatose wrote to stderr\n${both}`);
      break;
    case 'rstream':
      for (const [who, r] of [['server', srv], ['client', cli]]) {
        const lines = r.out.replace(/\n$/, '').split('\n');
        assert.equal(lines[0], RSTREAM_HEADER, `${who} header\n${both}`);
        assert.equal(lines.length, 2, `${who}: one row\n${both}`);
        assert.match(lines[1], rstreamRow(s.rs), `${who} row\n${both}`);
        assert.doesNotMatch(r.out, /verification failed/);
      }
      assert.equal(ours.err, '', `our rstream wrote to stderr\n${both}`);
      break;
    default:
      assert.fail(`unknown scenario ${s.kind}`);
  }
}

for (const dev of DEVICES) {
  test(`native backend on the kernel's ${dev}: our tools <-> rdma-core's, both directions`, async (t) => {
    if (!(await requireRefvm(t)) || !built(t)) return;
    const kernelDev = `${dev}0`;
    const res = await withGuest({ name: `native-${dev}`, rdma: dev, job: jobFor(dev), timeoutSec: 1500, src: REPO_ROOT, node: true }, async (ctx) => {
      await ctx.waitFile('finished', 1_400_000);
    });
    t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
    const result = (n) => {
      const rc = res.read(`${n}.rc`);
      return { rc: rc === null ? null : Number(rc.trim()), out: res.read(`${n}.out`) ?? '', err: res.read(`${n}.err`) ?? '' };
    };

    await t.test(`rdmacm-devices lists ${kernelDev} as native beside the soft devices`, () => {
      const r = result('devices');
      assert.equal(r.rc, 0, desc('rdmacm-devices', r));
      const j = JSON.parse(r.out);
      assert.equal(j.native.loaded, true, r.out);
      const k = j.devices.find((d) => d.device === kernelDev);
      assert.ok(k, `${kernelDev} listed\n${r.out}`);
      assert.equal(k.backend, 'native');
      assert.equal(k.netdev, 'eth0', 'bound to the interface the kernel linked it to');
      assert.ok(k.addresses.length > 0, 'with its addresses');
      assert.equal(k.transport, dev === 'siw' ? 'iWARP' : 'InfiniBand');
      assert.equal(j.devices[0].device, kernelDev, 'native devices first');
      assert.ok(j.devices.some((d) => d.backend === 'soft' && d.device === 'siw_eth0'), 'soft devices beside it');
    });

    await t.test('stale and wrong-kind handles given to the addon directly: -EINVAL, no crash', () => {
      const r = result('misuse');
      assert.equal(r.rc, 0, desc('native-misuse.mjs', r));
      const j = JSON.parse(r.out);
      assert.equal(j.device, kernelDev);
      assert.ok(j.results.length >= 19);
      assert.deepEqual(j.results.filter(([, v]) => v !== -22), [], 'every call answered EINVAL');
    });

    await t.test(dev === 'rxe' ? 'atomics through the native backend: compare-and-swap and fetch-and-add land in the peer\'s memory and return the old values' : 'atomics through the native backend on a device without them (atomic_cap NONE): the post is refused as rdma-core refuses it', () => {
      const r = result('atomics');
      assert.equal(r.rc, 0, desc('native-atomics.mjs', r));
      const j = JSON.parse(r.out.trim().split('\n').at(-1));
      assert.equal(j.device, kernelDev);
      if (dev === 'rxe') {
        assert.notEqual(j.atomicCap, AtomicCap.NONE, r.out);
        assert.deepEqual(j.completions, [
          { wrId: 1, opcode: WcOpcode.COMP_SWAP, status: WcStatus.SUCCESS, byteLen: 8, old: '5' },
          { wrId: 2, opcode: WcOpcode.FETCH_ADD, status: WcStatus.SUCCESS, byteLen: 8, old: '100' },
        ], r.out);
        assert.deepEqual(j.remote, ['42', '107'], 'swapped, and added to');
      } else {
        assert.equal(j.atomicCap, AtomicCap.NONE, r.out);
        // rdma-core 44's siw provider answers an opcode it does not carry with EIO
        assert.equal(j.refused, 'EIO', r.out);
      }
    });

    for (const s of scenarios(dev)) {
      await t.test(s.title, (tt) => {
        const race = result(`${s.name}-race-cli`);
        if (race.rc !== null) tt.diagnostic(`run twice: the first run met siw's MPA reply race (dmesg "peer sent extra data"); its client exited ${race.rc}: ${tailOf(race.out, 3)}`);
        checkScenario(s, result(`${s.name}-srv`), result(`${s.name}-cli`));
      });
    }

    await t.test('a process killed with resources open leaves nothing in the kernel', () => {
      const during = res.read('leak-during.txt') ?? '';
      const after = res.read('leak-after.txt') ?? '';
      assert.match(during, /cm-idn .*comm node/, `our client held a cm_id while it ran:\n${during}`);
      assert.match(during, /lqpn .*comm node/, `and a QP:\n${during}`);
      assert.match(during, /mrn .*comm node/, `and MRs:\n${during}`);
      assert.doesNotMatch(after, /comm node/, `after kill -9:\n${after}`);
      // The kernel rping server has exited too: what is left belongs to the kernel itself
      // (rxe's GSI QP, its CQ and PD: `comm [ib_core]`), no process holds anything.
      assert.doesNotMatch(after, /comm [^[\s]/, `objects of a process remain:\n${after}`);
      assert.match(after, new RegExp(`${kernelDev}: pd \\d+ cq \\d+ qp \\d+ cm_id 0 mr 0 `), after);
    });

    // The bench runs and reports on the kernel's device; its figure is measured, not asserted:
    // the guest's kernel runs under emulation, where timings are noise (docs/native.md).
    await t.test('data path: JS through the addon against the same verbs in C (measured)', (tt) => {
      const r = result('bench');
      assert.equal(r.rc, 0, desc('bench/native.js', r));
      const j = JSON.parse(r.out.trim().split('\n').at(-1));
      assert.equal(j.device, kernelDev);
      assert.equal(j.jsNs.length, j.rounds);
      assert.equal(j.cNs.length, j.rounds);
      assert.ok(j.jsMedianNs > 0 && j.cMedianNs > 0 && j.ratio > 0, r.out);
      const st = j.rows.verbsStream;
      assert.ok(st.medianNs > 0 && st.ratio > 0 && j.rows.cStream.medianNs > 0, r.out);
      tt.diagnostic(`${kernelDev} ${j.size} B ping-pong: JS ${(j.jsMedianNs / 1000).toFixed(1)} us, C ${(j.cMedianNs / 1000).toFixed(1)} us per round trip (medians), JS/C ${j.ratio.toFixed(2)}; stream in lists of ${j.batch}: JS/C ${st.ratio.toFixed(2)} per message (medians of the rounds' ratios; not checked: the guest runs under emulation)`);
    });
    assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
  });
}
