// interop lane: guest (every tool of this file runs inside the guest; see scripts/interop-lanes.js)
// The native backend's UD side in the reference VM: our udaddy and mckey run inside the guest with
// RDMACM_BACKEND=native, on the kernel's rxe0 through rdma-core's libibverbs and librdmacm (the
// addon built here, the package shared at /mnt/src), against rdma-core's udaddy and mckey on the
// same device, both directions. One boot (--rdma rxe), every scenario in order:
//   U1  kernel `udaddy` server            <-  our `udaddy -s` client
//   U2  our `udaddy` server               <-  kernel `udaddy -s` client
//   U3  as U1 with `-c 2`;  U4  as U2 with `-c 2`
//   M1  kernel `mckey -s` sender          ->  our `mckey` receiver
//   M2  our `mckey -s` sender             ->  kernel `mckey` receiver
//   M3  as M1 with `-c 2` on both sides;  M4  as M2 with `-c 2`
//   M5  our sender    -> a kernel receiver and one of ours, in one group
//   M6  kernel sender -> a kernel receiver and one of ours, in one group
//   M7  our `mckey -s -o` (send-only full member) -> kernel receiver
//   M8  kernel `mckey -s -o`                      -> our receiver
//   L   `mckey -l`, kernel and ours: rxe takes no QP create flags (rdma-core's provider refuses
//       IBV_QP_CREATE_BLOCK_SELF_MCAST_LB with EOPNOTSUPP), so both end alike, exit 255
//   H   `mckey -h`, kernel and ours: the same usage text and exit status
// Every tool runs `-C 10` with a deadline; both sides must exit 0 and print exactly the lines of a
// clean run (rdma-core's tools and ours print the same ones), with nothing on stderr. While our
// receiver of M1 waits, the guest lists the kernel's QPs: ours is a UD QP of the node process,
// made by the kernel (the native backend, not a soft device).
//
// A tool that crashes leaves its core in the job folder (core.<pid>; the guest's libraries are
// those of the VM image's rootfs, for gdb's sysroot).
// Needs, besides the VM: native/build/rdmacm.node (npm run build:native).
// Env: REFVM_VM (the VM slot, default 0).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, REPO_ROOT, vmSlot } from './lib/refvm.js';

const ADDON = join(REPO_ROOT, 'native', 'build', 'rdmacm.node');
const VM = vmSlot(0);
const COUNT = 10;
const lines = (...l) => l.map((x) => `${x}\n`).join('');

const UD_SERVER_OK = lines('udaddy: starting server', 'receiving data transfers', 'sending replies', 'data transfers complete', 'test complete', 'return status 0');
const UD_CLIENT_OK = lines('udaddy: starting client', 'udaddy: connecting', 'initiating data transfers', 'receiving data transfers', 'data transfers complete', 'test complete', 'return status 0');
const joinedLine = (group) => `mckey: joined dgid: ::ffff:${group} mlid 0x0 sl 0`;
const MC_RECEIVER_OK = (group, joins = 1) =>
  lines('mckey: starting server', 'mckey: joining', ...Array(joins).fill(joinedLine(group)), 'receiving data transfers', 'data transfers complete', 'test complete', 'return status 0');
const MC_SENDER_OK = (group, joins = 1) =>
  lines('mckey: starting client', 'mckey: joining', ...Array(joins).fill(joinedLine(group)), 'initiating data transfers', 'data transfers complete', 'test complete', 'return status 0');
const NO_LOOPBACK_OUT = lines('mckey: starting server', 'mckey: joining', 'test complete', 'return status -1');
const NO_LOOPBACK_ERR = 'mckey: unable to create QP: Operation not supported\nmckey: failure leaving: Cannot assign requested address\n';

/** udaddy scenarios: who serves, -c. */
const UD = [
  { name: 'U1', server: 'kernel', conns: 1 },
  { name: 'U2', server: 'ours', conns: 1 },
  { name: 'U3', server: 'kernel', conns: 2 },
  { name: 'U4', server: 'ours', conns: 2 },
];
/** mckey scenarios: a group each; who sends; the receivers (each 'kernel' or 'ours'); -c; -o. */
const MC = [
  { name: 'M1', group: '239.79.0.1', sender: 'kernel', receivers: ['ours'], conns: 1 },
  { name: 'M2', group: '239.79.0.2', sender: 'ours', receivers: ['kernel'], conns: 1 },
  { name: 'M3', group: '239.79.0.3', sender: 'kernel', receivers: ['ours'], conns: 2 },
  { name: 'M4', group: '239.79.0.4', sender: 'ours', receivers: ['kernel'], conns: 2 },
  { name: 'M5', group: '239.79.0.5', sender: 'ours', receivers: ['kernel', 'ours'], conns: 1 },
  { name: 'M6', group: '239.79.0.6', sender: 'kernel', receivers: ['kernel', 'ours'], conns: 1 },
  { name: 'M7', group: '239.79.0.7', sender: 'ours', receivers: ['kernel'], conns: 1, sendOnly: true },
  { name: 'M8', group: '239.79.0.8', sender: 'kernel', receivers: ['ours'], conns: 1, sendOnly: true },
];

const built = (t) => requireBuilt(t, [ADDON, join(REPO_ROOT, 'dist', 'cli', 'mckey.js')], 'npm run build; npm run build:native needs libibverbs-dev and librdmacm-dev');

// ------------------------------------------------------------------ the guest job
// tool WHO TOOL: the command line of rdma-core's tool or of ours on the native backend.
const tool = (who, name) => (who === 'kernel' ? name : `env RDMACM_BACKEND=native $H/node /mnt/src/dist/cli/${name}.js`);
const PRELUDE = `
IP=$REFVM_IP
# a process that crashes leaves its core in the job folder (core.<pid>)
ulimit -c unlimited; echo "$H/core.%p" > /proc/sys/kernel/core_pattern
waitout() { local i=0; while [ "$(grep -cE "$2" "$1" 2>/dev/null)" -lt "$3" ]; do sleep 0.2; i=$((i+1)); [ $i -ge $(($4*5)) ] && return 1; done; return 0; }
udlisten() { local i=0; until rdma res show cm_id 2>/dev/null | grep -q LISTEN; do sleep 0.2; i=$((i+1)); [ $i -ge 300 ] && return 1; done; return 0; }
# ends NAME PID: give a background run 30 s to end on its own, then end it; NAME.rc
ends() { local g=0; while kill -0 $2 2>/dev/null && [ $g -lt 150 ]; do sleep 0.2; g=$((g+1)); done
  kill $2 2>/dev/null; gwait $1 $2; }
`;

function udJob(s) {
  const c = s.conns > 1 ? ` -c ${s.conns}` : '';
  const client = s.server === 'kernel' ? 'ours' : 'kernel';
  return `
gstart ${s.name}-srv 180 stdbuf -oL ${tool(s.server, 'udaddy')} -b $IP -C ${COUNT}${c}; sp=$GPID
if udlisten; then gtool ${s.name}-cli 150 ${tool(client, 'udaddy')} -s $IP -b $IP -C ${COUNT}${c}
else glog "${s.name}: no listening cm_id"; putrc ${s.name}-cli 250; fi
ends ${s.name}-srv $sp`;
}

function mcJob(s) {
  const args = `-m ${s.group} -b $IP -C ${COUNT}${s.conns > 1 ? ` -c ${s.conns}` : ''}`;
  const rcv = s.receivers.map((who, i) => `
gstart ${s.name}-r${i} 400 stdbuf -oL ${tool(who, 'mckey')} ${args}; r${i}=$GPID
waitout $H/${s.name}-r${i}.out '^mckey: joined' ${s.conns} 300 || glog "${s.name}-r${i}: not joined within 300 s"`).join('');
  const listQps = s.name === 'M1' ? '\nrdma res show qp > $H/M1-qps.txt 2>&1' : '';
  return `${rcv}${listQps}
gtool ${s.name}-s 150 ${tool(s.sender, 'mckey')} ${args} -s${s.sendOnly ? ' -o' : ''}
${s.receivers.map((_, i) => `ends ${s.name}-r${i} $r${i}`).join('\n')}`;
}

const job = `${PRELUDE}
mark ready
${UD.map(udJob).join('\n')}
${MC.map(mcJob).join('\n')}
gtool L-kernel 60 ${tool('kernel', 'mckey')} -m 239.79.0.9 -b $IP -l
gtool L-ours 90 ${tool('ours', 'mckey')} -m 239.79.0.9 -b $IP -l
gtool H-kernel 30 ${tool('kernel', 'mckey')} -h
gtool H-ours 90 ${tool('ours', 'mckey')} -h
mark finished
`;

// ------------------------------------------------------------------ checks
const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const desc = (who, r) => `${who}: exit ${r.rc}${r.rc === 124 ? ' (TIMED OUT)' : ''}\n  stderr: ${tailOf(r.err)}\n  stdout: ${tailOf(r.out)}${r.hang ? `\n  still running near its deadline:\n${tailOf(r.hang, 30)}` : ''}`;

test('native backend on the kernel\'s rxe0: our udaddy and mckey <-> rdma-core\'s, both directions', { timeout: 1_800_000 }, async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const res = await withGuest({ name: 'native-ud', rdma: 'rxe', vm: VM, job, timeoutSec: 1500, src: REPO_ROOT, node: true }, async (ctx) => {
    await ctx.waitFile('finished', 1_400_000);
  });
  t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
  const result = (n) => {
    const rc = res.read(`${n}.rc`);
    return { rc: rc === null ? null : Number(rc.trim()), out: res.read(`${n}.out`) ?? '', err: res.read(`${n}.err`) ?? '', hang: res.read(`${n}.hang`) ?? '' };
  };
  const whose = (who) => (who === 'kernel' ? 'kernel' : 'our');

  for (const s of UD) {
    const c = s.conns > 1 ? ` -c ${s.conns}` : '';
    const title = s.server === 'kernel' ? `${s.name}: kernel udaddy server <- our client${c}` : `${s.name}: our udaddy server <- kernel client${c}`;
    await t.test(title, () => {
      const srv = result(`${s.name}-srv`);
      const cli = result(`${s.name}-cli`);
      const both = `${desc(`${whose(s.server)} server`, srv)}\n${desc(`${whose(s.server === 'kernel' ? 'ours' : 'kernel')} client`, cli)}`;
      assert.equal(cli.rc, 0, both);
      assert.equal(cli.out, UD_CLIENT_OK, both);
      assert.equal(srv.rc, 0, both);
      assert.equal(srv.out, UD_SERVER_OK, both);
      assert.equal(cli.err + srv.err, '', both);
    });
  }

  for (const s of MC) {
    const opts = `${s.conns > 1 ? `, -c ${s.conns}` : ''}${s.sendOnly ? ', the sender send-only (-o)' : ''}`;
    await t.test(`${s.name}: ${whose(s.sender)} mckey -s -> ${s.receivers.map((w) => `${whose(w)} receiver`).join(' and ')}${opts}`, () => {
      const snd = result(`${s.name}-s`);
      const rcv = s.receivers.map((_, i) => result(`${s.name}-r${i}`));
      const all = [desc(`${whose(s.sender)} sender`, snd), ...rcv.map((r, i) => desc(`${whose(s.receivers[i])} receiver`, r))].join('\n');
      assert.equal(snd.rc, 0, all);
      assert.equal(snd.out, MC_SENDER_OK(s.group, s.conns), all);
      for (const r of rcv) {
        assert.equal(r.rc, 0, all);
        assert.equal(r.out, MC_RECEIVER_OK(s.group, s.conns), all);
      }
      assert.equal([snd, ...rcv].map((r) => r.err).join(''), '', all);
    });
  }

  await t.test('our receiver runs on the kernel\'s device: a UD QP of the node process in rdma res', () => {
    const qps = res.read('M1-qps.txt') ?? '';
    assert.match(qps, /rxe0\/1 lqpn \d+ type UD state RTS .*comm node/, qps);
  });

  await t.test('L: mckey -l, kernel and ours alike: rxe refuses the create flag (EOPNOTSUPP), status -1, exit 255', () => {
    const k = result('L-kernel');
    const o = result('L-ours');
    const both = `${desc('kernel', k)}\n${desc('ours', o)}`;
    for (const r of [k, o]) {
      assert.equal(r.rc, 255, both);
      assert.equal(r.out, NO_LOOPBACK_OUT, both);
      assert.equal(r.err, NO_LOOPBACK_ERR, both);
    }
  });

  await t.test('H: mckey -h prints rdma-core\'s usage (with -l) and exits 1, as the kernel side\'s', () => {
    const k = result('H-kernel');
    const o = result('H-ours');
    const both = `${desc('kernel', k)}\n${desc('ours', o)}`;
    assert.equal(k.rc, 1, both);
    assert.match(k.out, /\[-l join without multicast loopback\]/, both);
    assert.equal(o.rc, k.rc, both);
    assert.equal(o.out, k.out, both);
    assert.equal(o.err, k.err, both);
  });
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
