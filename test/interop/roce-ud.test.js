// Our udaddy and mckey on the soft RoCEv2 device against the Linux kernel's rdma_rxe and
// rdma-core's real tools in the reference VM (tap network: RoCEv2, SIDR and multicast need real
// IP/UDP between the two; our side runs on the host inside the `refvm` netns, 10.77.0.1, on
// rxe_rvbr0; the guest is 10.77.0.2 on rxe0). One VM boot serves every scenario, in order:
//   U2  our `udaddy` server (host)              <-  kernel `udaddy -s` client (guest)     SIDR + UD
//   M1  kernel `mckey -s` sender (guest)        ->  our `mckey` receiver (host)
//   M2  our `mckey -s` sender (host)            ->  kernel `mckey` receiver (guest)
//   M3  as M1 with `-c 2` on both sides (two QPs joined to the group on each side)
//   M4  as M2 with `-c 2`
//   M5  our sender (host) -> a kernel receiver (guest) and our receiver (host) in the group at once
//   M6  kernel sender (guest) -> a kernel receiver (same guest) and our receiver (host) at once
//   M9  our `mckey -s -l` (host, multicast loopback blocked) -> a kernel receiver (guest), which
//       gets everything, and our receiver (host), which gets nothing
//   U1  kernel `udaddy` server (guest)          <-  our `udaddy -s` client (host)
// Every tool runs `-C 10` with a deadline; every scenario checks both sides' exit codes and their
// exact stdout (the kernel's tools and ours print the same lines). The kernel rxe sends to UDP
// port 4791 whatever the source port, so our side uses the real port (RDMACM_ROCE_PORT unset).
// After each scenario the guest saves rxe0's hw counters (counters-<scenario> in the job folder,
// quoted in failures) and the host captures the bridge (roce.pcap) for diagnosis.
//
// Env: ROCE_UD_TIMEOUT_SEC (deadline of one host-side run, default 90), REFVM_VM (VM slot, default 0).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, netnsRun, REPO_ROOT, HOST_IP, REFVM_HOME, run, log, settle, saveRun as save, hangOf, vmSlot } from './lib/refvm.js';

const UDADDY = join(REPO_ROOT, 'dist', 'cli', 'udaddy.js');
const MCKEY = join(REPO_ROOT, 'dist', 'cli', 'mckey.js');
const NETOPT = join(REPO_ROOT, 'native', 'build', 'netopt.node');
const HOST_TIMEOUT_MS = Number(process.env.ROCE_UD_TIMEOUT_SEC || 90) * 1000;
const VM = vmSlot(0);
const COUNT = 10;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const lines = (...l) => l.map((x) => `${x}\n`).join('');

const UD_SERVER_OK = lines('udaddy: starting server', 'receiving data transfers', 'sending replies', 'data transfers complete', 'test complete', 'return status 0');
const UD_CLIENT_OK = lines('udaddy: starting client', 'udaddy: connecting', 'initiating data transfers', 'receiving data transfers', 'data transfers complete', 'test complete', 'return status 0');
const joinedLine = (group) => `mckey: joined dgid: ::ffff:${group} mlid 0x0 sl 0`;
const MC_RECEIVER_OK = (group, joins = 1) =>
  lines('mckey: starting server', 'mckey: joining', ...Array(joins).fill(joinedLine(group)), 'receiving data transfers', 'data transfers complete', 'test complete', 'return status 0');
const MC_SENDER_OK = (group, joins = 1) =>
  lines('mckey: starting client', 'mckey: joining', ...Array(joins).fill(joinedLine(group)), 'initiating data transfers', 'data transfers complete', 'test complete', 'return status 0');

/** The multicast scenarios: a group each, -c, which side sends. */
const MC = {
  M1: { group: '239.77.0.1', conns: 1, sender: 'kernel' },
  M2: { group: '239.77.0.2', conns: 1, sender: 'ours' },
  M3: { group: '239.77.0.3', conns: 2, sender: 'kernel' },
  M4: { group: '239.77.0.4', conns: 2, sender: 'ours' },
  M5: { group: '239.77.0.5', conns: 1, sender: 'ours', alsoOurs: true },
  // -l: the kernel (another host) receives everything, our receiver on the sender's host nothing
  M9: { group: '239.77.0.9', conns: 1, sender: 'ours', alsoOurs: true, noLoop: true },
};
/** A kernel sender, with a kernel receiver in the same guest and ours on the host. */
const M6 = { group: '239.77.0.6' };
const mcArgs = (s) => ['-m', s.group, '-C', String(COUNT), ...(s.conns > 1 ? ['-c', String(s.conns)] : [])];

const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const hostDesc = (what, r) => `host ${what}: exit ${r.code}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n  stderr: ${tailOf(r.stderr)}\n  stdout: ${tailOf(r.stdout)}`;
const guestDesc = (what, g) => `guest ${what}: exit ${g.rc}${g.rc === 124 ? ' (TIMED OUT)' : ''}\n  stderr: ${tailOf(g.err)}\n  stdout: ${tailOf(g.out)}${hangOf(g)}`;

// Without netopt.node our IPv4 datagrams leave with varying IDs and rxe drops them (bad ICRC).
const built = (t) => requireBuilt(t, [UDADDY, MCKEY, NETOPT], 'npm ci / npm run build / node native/build.mjs');

// ------------------------------------------------------------------ the guest's sequence
// counters NAME: rxe0's hw counters as `name value` lines (drops show up as non-zero *_err etc.)
// waitout FILE REGEX N SECS: until FILE has N lines matching REGEX (1 on timeout)
const guestHelpers = `
counters() { for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "\${f##*/} $(cat $f)"; done > $H/counters-$1 2>&1; }
waitout() { local i=0; while [ "$(grep -cE "$2" "$1" 2>/dev/null)" -lt "$3" ]; do sleep 0.2; i=$((i+1)); [ $i -ge $(($4*5)) ] && return 1; done; return 0; }
# gbg NAME SECS CMD...: CMD in the background with a deadline, stdout line-buffered (the host
# waits for its lines); NAME.rc is written when it has exited, whenever that is
gbg() { local n=$1 t=$2; shift 2; glog "$n (background): $*"
  ( timeout -k 5 "$t" stdbuf -oL "$@" > "$H/$n.out" 2> "$H/$n.err"; rc=$?; putrc "$n" $rc; glog "$n: exit $rc" ) & }
# finish SCENARIO: after the host's hdone-SCENARIO, give the kernel tool (SCENARIO-k) 20 s to end
# on its own; if it has not, note where it waits in the kernel (SCENARIO-k-stack, written in the
# background so that a blocked read cannot stall the sequence) and go on: its deadline ends it
finish() { waitfile $H/hdone-$1 300; local g=0 c
  while [ ! -e $H/$1-k.rc ] && [ $g -lt 100 ]; do sleep 0.2; g=$((g+1)); done
  [ -e $H/$1-k.rc ] && return 0
  glog "$1-k: still running 20 s after the host's side ended (see $1-k-stack)"
  ( for c in $(pgrep -x mckey; pgrep -x udaddy); do echo "pid $c state $(cut -d' ' -f3 /proc/$c/stat) wchan $(cat /proc/$c/wchan)"; timeout 5 cat /proc/$c/stack; done > $H/$1-k-stack 2>&1 ) & }
`;
const mcGuest = (name, s) => {
  const args = `-b $REFVM_IP ${mcArgs(s).join(' ')}`;
  if (s.sender === 'kernel') {
    // the host's receiver joins first and then says go
    return `
if waitfile $H/go-${name} 300 && [ "$(cat $H/go-${name})" = run ]; then gtool ${name}-k 120 mckey ${args} -s
else glog "${name}: not run, the host's receiver did not join"; putrc ${name}-k 253; fi
counters ${name}`;
  }
  return `
gbg ${name}-k 150 mckey ${args}
waitout $H/${name}-k.out '^mckey: joined' ${s.conns} 90 || glog "${name}: the kernel receiver did not join within 90 s"
mark ready-${name}
finish ${name}
counters ${name}`;
};
const job = `${guestHelpers}
counters boot
mark ready
# U2: our udaddy server <- kernel client
if waitfile $H/go-U2 300 && [ "$(cat $H/go-U2)" = run ]; then gtool U2-k 120 udaddy -s ${HOST_IP} -b $REFVM_IP -C ${COUNT}
else glog "U2: not run, the host's server is not up"; putrc U2-k 253; fi
counters U2
${Object.entries(MC).map(([n, s]) => mcGuest(n, s)).join('\n')}
# M6: kernel sender -> a kernel receiver (same guest) and our receiver
gbg M6r-k 150 mckey -b $REFVM_IP -m ${M6.group} -C ${COUNT}
waitout $H/M6r-k.out '^mckey: joined' 1 90 || glog "M6: the kernel receiver did not join within 90 s"
mark ready-M6
if waitfile $H/go-M6 300 && [ "$(cat $H/go-M6)" = run ]; then gtool M6-k 120 mckey -b $REFVM_IP -m ${M6.group} -C ${COUNT} -s
else glog "M6: not run, the host's receiver did not join"; putrc M6-k 253; fi
finish M6r
counters M6
# U1: kernel udaddy server <- our client
gbg U1-k 150 udaddy -b $REFVM_IP -C ${COUNT}
i=0; until rdma res show cm_id 2>/dev/null | grep -q LISTEN; do sleep 0.2; i=$((i+1)); [ $i -ge 300 ] && { glog "U1: no listening cm_id after 60 s"; break; }; done
mark ready-U1
finish U1
counters U1
rdma statistic show link rxe0/1 > $H/rdma-statistic 2>&1; dmesg > $H/dmesg 2>&1
# the host checks every exit status: wait for those still running (their deadlines end them)
for n in ${[...Object.entries(MC).filter(([, s]) => s.sender !== 'kernel').map(([n]) => `${n}-k`), 'M6r-k', 'U1-k'].join(' ')}; do waitfile $H/$n.rc 160 || glog "$n: no exit status"; done
true
`;

// ------------------------------------------------------------------ host side helpers
/** Resolve when `p`'s stdout matched `re` n times; false when it ended first or after ms. */
async function waitOutput(p, re, n = 1, ms = 60_000) {
  let gone = false;
  p.done.then(() => { gone = true; });
  const t0 = Date.now();
  for (;;) {
    if (p.output().split('\n').filter((l) => re.test(l)).length >= n) return true;
    if (gone || Date.now() - t0 > ms) return false;
    await sleep(100);
  }
}

/** Our udaddy server is ready once its service is published (the abstract socket it listens on). */
async function udServerUp(p, ms = 60_000) {
  if (!(await waitOutput(p, /^udaddy: starting server/, 1, ms))) return false;
  let gone = false;
  p.done.then(() => { gone = true; });
  const t0 = Date.now();
  while (!gone && Date.now() - t0 < ms) {
    const ss = await netnsRun('ss', ['-Hxl'], { timeoutMs: 10_000 });
    if (/@rdmacm-roce-4791-svc-/.test(ss.stdout)) return true;
    await sleep(200);
  }
  return false;
}

const counters = (ctx, n) => `guest rxe0 hw counters after ${n} (non-zero):\n  ${(ctx.read(`counters-${n}`) || '(none)').trim().split('\n').filter((l) => !/ 0$/.test(l)).join('\n  ')}`;

test('interop: udaddy and mckey, ours (host, soft RoCE) <-> kernel (guest, rxe)', { timeout: 600_000 }, async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  // The namespace first: the host's processes and the capture of the bridge run in it.
  const up = await run(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { timeoutMs: 30_000 });
  assert.equal(up.code, 0, `refvm-netns.sh up: ${up.stderr}`);
  // The real RoCE port: the kernel sends everything to 4791 (an empty value means the default).
  const env = { RDMACM_ROCE_PORT: '' };
  let stopCapture = null;
  const res = await withGuest({ name: 'roce-ud', rdma: 'rxe', vm: VM, job, timeoutSec: 540 }, async (ctx) => {
    stopCapture = await ctx.capture('roce.pcap', 'udp port 4791 or igmp', { snap: 256, timeoutMs: 560_000 });
    const host = (tool, args, timeoutMs = HOST_TIMEOUT_MS) => ctx.hostStart(process.execPath, [tool, ...args], { timeoutMs, env });

    await t.test('U2: our udaddy server <- kernel udaddy client (rxe)', async () => {
      const srv = host(UDADDY, ['-b', HOST_IP, '-C', String(COUNT)], HOST_TIMEOUT_MS + 60_000);
      let r, ok = false;
      try {
        ok = await udServerUp(srv);
      } finally {
        ctx.touch('go-U2', ok ? 'run' : 'skip');
      }
      try {
        await ctx.waitFile('U2-k.rc', 180_000);
      } finally {
        r = await settle(srv);
        save(ctx, 'U2-h', r);
      }
      const g = ctx.result('U2-k');
      const both = `${hostDesc('udaddy server', r)}\n${guestDesc('kernel udaddy client', g)}\n${counters(ctx, 'U2')}`;
      assert.ok(ok, `our server did not come up\n${both}`);
      assert.equal(g.rc, 0, both);
      assert.equal(g.out, UD_CLIENT_OK, both);
      assert.equal(r.code, 0, both);
      assert.equal(r.stdout, UD_SERVER_OK, both);
    });

    for (const [n, s] of Object.entries(MC)) {
      const title = s.sender === 'kernel'
        ? `${n}: kernel mckey -s (rxe) -> our mckey receiver${s.conns > 1 ? `, -c ${s.conns}` : ''}`
        : s.noLoop
          ? `${n}: our mckey -s -l -> kernel mckey receiver (rxe, another host) gets everything, our receiver (the sender's host) nothing`
          : `${n}: our mckey -s -> kernel mckey receiver (rxe)${s.alsoOurs ? ' and our receiver, in one group' : ''}${s.conns > 1 ? `, -c ${s.conns}` : ''}`;
      await t.test(title, async () => {
        const args = ['-b', HOST_IP, ...mcArgs(s)];
        let results = [];
        if (s.sender === 'kernel') {
          const rcv = host(MCKEY, args, HOST_TIMEOUT_MS + 60_000);
          let r, ok = false;
          try {
            ok = await waitOutput(rcv, /^mckey: joined/, s.conns);
          } finally {
            ctx.touch(`go-${n}`, ok ? 'run' : 'skip');
          }
          try {
            await ctx.waitFile(`${n}-k.rc`, 180_000);
          } finally {
            r = await settle(rcv);
            save(ctx, `${n}-h`, r);
          }
          const g = ctx.result(`${n}-k`);
          const both = `${hostDesc('mckey receiver', r)}\n${guestDesc('kernel mckey sender', g)}\n${counters(ctx, n)}`;
          results = [() => assert.ok(ok, `our receiver did not join\n${both}`),
            () => assert.equal(g.rc, 0, both), () => assert.equal(g.out, MC_SENDER_OK(s.group, s.conns), both),
            () => assert.equal(r.code, 0, both), () => assert.equal(r.stdout, MC_RECEIVER_OK(s.group, s.conns), both)];
        } else {
          let r, r2, rcv2 = null;
          try {
            await ctx.waitFile(`ready-${n}`, 180_000);
            if (s.alsoOurs) {
              rcv2 = host(MCKEY, args, HOST_TIMEOUT_MS + 60_000);
              if (!(await waitOutput(rcv2, /^mckey: joined/, s.conns))) throw new Error(`our receiver did not join:\n${rcv2.output()}`);
            }
            r = await host(MCKEY, [...args, '-s', ...(s.noLoop ? ['-l'] : [])]).done;
          } finally {
            ctx.touch(`hdone-${n}`);
            // -l: our receiver gets nothing and waits; end it once the kernel's receiver is done
            if (rcv2 && s.noLoop) await ctx.waitFile(`${n}-k.rc`, 60_000).catch(() => {});
            if (rcv2) r2 = await settle(rcv2, s.noLoop ? 2_000 : undefined);
          }
          save(ctx, `${n}-h`, r);
          save(ctx, `${n}-h2`, r2);
          await ctx.waitFile(`${n}-k.rc`, 45_000).catch(() => {});
          const g = ctx.result(`${n}-k`);
          const stack = ctx.read(`${n}-k-stack`);
          const both = `${hostDesc('mckey sender', r)}\n${r2 ? `${hostDesc('mckey receiver', r2)}\n` : ''}${guestDesc('kernel mckey receiver', g)}\n${counters(ctx, n)}${stack ? `\nkernel mckey receiver, 20 s after our sender ended:\n${stack}` : ''}`;
          results = [() => assert.equal(r.code, 0, both), () => assert.equal(r.stdout, MC_SENDER_OK(s.group, s.conns), both),
            () => assert.equal(g.rc, 0, both), () => assert.equal(g.out, MC_RECEIVER_OK(s.group, s.conns), both)];
          if (r2 && s.noLoop) {
            results.push(() => assert.equal(r2.stdout, lines('mckey: starting server', 'mckey: joining', joinedLine(s.group), 'receiving data transfers'), `our receiver on the sender's host got nothing\n${both}`),
              () => assert.match(r2.stderr, /killed: still running/, `and was still waiting\n${both}`));
          } else if (r2) results.push(() => assert.equal(r2.code, 0, both), () => assert.equal(r2.stdout, MC_RECEIVER_OK(s.group, s.conns), both));
        }
        for (const check of results) check();
      });
    }
    await t.test('M6: kernel mckey -s (rxe) -> a kernel receiver (same guest) and our receiver, in one group', async () => {
      const args = ['-b', HOST_IP, '-m', M6.group, '-C', String(COUNT)];
      let r, ok = false, rcv = null;
      try {
        await ctx.waitFile('ready-M6', 180_000);
        rcv = host(MCKEY, args, HOST_TIMEOUT_MS + 60_000);
        ok = await waitOutput(rcv, /^mckey: joined/, 1);
      } finally {
        ctx.touch('go-M6', ok ? 'run' : 'skip');
      }
      try {
        await ctx.waitFile('M6-k.rc', 180_000);
      } finally {
        ctx.touch('hdone-M6r');
        if (rcv) { r = await settle(rcv); save(ctx, 'M6-h', r); }
      }
      await ctx.waitFile('M6r-k.rc', 45_000).catch(() => {});
      const g = ctx.result('M6-k'), gr = ctx.result('M6r-k');
      const stack = ctx.read('M6r-k-stack');
      const both = `${hostDesc('mckey receiver', r)}\n${guestDesc('kernel mckey sender', g)}\n${guestDesc('kernel mckey receiver', gr)}\n${counters(ctx, 'M6')}${stack ? `\nkernel mckey receiver, 20 s after the sender ended:\n${stack}` : ''}`;
      assert.ok(ok, `our receiver did not join\n${both}`);
      assert.equal(g.rc, 0, both);
      assert.equal(g.out, MC_SENDER_OK(M6.group), both);
      assert.equal(r.code, 0, both);
      assert.equal(r.stdout, MC_RECEIVER_OK(M6.group), both);
      assert.equal(gr.rc, 0, both);
      assert.equal(gr.out, MC_RECEIVER_OK(M6.group), both);
    });

    await t.test('U1: kernel udaddy server (rxe) <- our udaddy client', async () => {
      let r;
      try {
        await ctx.waitFile('ready-U1', 120_000);
        r = await host(UDADDY, ['-s', ctx.guestIp, '-b', HOST_IP, '-C', String(COUNT)]).done;
      } finally {
        ctx.touch('hdone-U1');
      }
      save(ctx, 'U1-h', r);
      await ctx.waitFile('U1-k.rc', 45_000).catch(() => {});
      const g = ctx.result('U1-k');
      const stack = ctx.read('U1-k-stack');
      const both = `${hostDesc('udaddy client', r)}\n${guestDesc('kernel udaddy server', g)}\n${counters(ctx, 'U1')}${stack ? `\nkernel udaddy server, 20 s after its peer ended:\n${stack}` : ''}`;
      assert.equal(r.code, 0, both);
      assert.equal(r.stdout, UD_CLIENT_OK, both);
      assert.equal(g.rc, 0, both);
      assert.equal(g.out, UD_SERVER_OK, both);
    });

    await stopCapture();
  }).finally(() => stopCapture?.());
  log(`roce-ud: job folder ${res.jobDir} (roce.pcap, counters-*, *-h.* / *-k.* outputs)`);
  t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
