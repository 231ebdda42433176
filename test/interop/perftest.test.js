// perftest against the Linux kernel: Debian's perftest in the reference VM (guest 10.77.0.2) and
// this package's tools on the host (netns `refvm`, 10.77.0.1), over perftest's TCP side channel
// (port 18515). Two boots:
//   rxe  (guest rxe0, host rxe_rvbr0): RC QPs connected by their keys
//     W1  kernel ib_write_bw server (guest)  <-  our ib_write_bw client (host)
//     W2  our ib_write_bw server (host)      <-  kernel ib_write_bw client (guest)
//     L1  kernel ib_send_lat server (guest)  <-  our ib_send_lat client (host)
//     L2  our ib_send_lat server (host)      <-  kernel ib_send_lat client (guest)
//     S1/S2, WL1/WL2, RL1/RL2: the same for ib_send_bw, ib_write_lat, ib_read_lat
//     RB1/RB2, AL1/AL2, AB1/AB2: ib_read_bw, ib_atomic_lat (-A CMP_AND_SWAP), ib_atomic_bw
//       (rxe0 and our RoCE device have atomics; perftest's atomics are 8 bytes)
//     UL1/UL2, UB1/UB2: ib_send_lat and ib_send_bw with -c UD (UD QPs, address handles from the
//       peer's GID; ib_send_bw's messages as large as the path MTU)
//     Q1/Q2: ib_write_bw -q 2 (two QPs, each connected by its own keys; the row counts both)
//     URL1/URL2, URB1/URB2: ib_send_lat and ib_send_bw with -R -c UD (UD QPs on RDMA_PS_UDP ids,
//       met by SIDR; the side channel an rdma_cm RC connection)
//   siw  (guest siw0, host siw_rvbr0), with -R (QPs made and connected by rdma_cm, the only way
//        perftest runs over iWARP): ib_write_bw RW1/RW2, ib_send_lat RS1/RS2, ib_send_bw
//        RSB1/RSB2 (the receiver's credits, credit.ts), ib_write_lat RWL1/RWL2, ib_read_lat
//        RRL1/RRL2, ib_read_bw RRB1/RRB2, ib_send_bw -q 2 RQ1/RQ2 (two rdma_cm connections, a
//        credit word each)
// PERFTEST_INTEROP_BOOTS=rxe or =siw runs one boot only; PERFTEST_INTEROP_SCENARIOS=W1,L2 some
// scenarios only.
// Both sides must exit 0 and print their result row; the server of a bandwidth pair prints the
// client's row, which is how the report exchange is checked across. Under emulation the figures
// mean nothing: correctness only.
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, REPO_ROOT, HOST_IP, REFVM_HOME, run, log, settle, saveRun as save, hangOf, vmSlot } from './lib/refvm.js';
import { bwRowRe, latRowRe, infWithoutReason } from './lib/perftest-rows.js';

const VM = vmSlot(0);
const BW = ['-s', '4096', '-n', '200'];
const LAT = ['-n', '100'];
const ATOMIC_LAT = ['-A', 'CMP_AND_SWAP', '-n', '100'];
const ATOMIC_BW = ['-n', '200'];
/** One boot per device: rxe without -R (QPs connected by their keys), siw with -R (rdma_cm). */
const BOOTS = [
  {
    rdma: 'rxe',
    kdev: 'rxe0',
    hdev: 'rxe_rvbr0',
    scenarios: [
      { n: 'W1', tool: 'ib_write_bw', args: BW, kernel: 'server' },
      { n: 'W2', tool: 'ib_write_bw', args: BW, kernel: 'client' },
      { n: 'L1', tool: 'ib_send_lat', args: LAT, kernel: 'server' },
      { n: 'L2', tool: 'ib_send_lat', args: LAT, kernel: 'client' },
      { n: 'S1', tool: 'ib_send_bw', args: BW, kernel: 'server' },
      { n: 'S2', tool: 'ib_send_bw', args: BW, kernel: 'client' },
      { n: 'WL1', tool: 'ib_write_lat', args: LAT, kernel: 'server' },
      { n: 'WL2', tool: 'ib_write_lat', args: LAT, kernel: 'client' },
      { n: 'RL1', tool: 'ib_read_lat', args: LAT, kernel: 'server' },
      { n: 'RL2', tool: 'ib_read_lat', args: LAT, kernel: 'client' },
      { n: 'RB1', tool: 'ib_read_bw', args: BW, kernel: 'server' },
      { n: 'RB2', tool: 'ib_read_bw', args: BW, kernel: 'client' },
      { n: 'AL1', tool: 'ib_atomic_lat', args: ATOMIC_LAT, kernel: 'server', size: 8 },
      { n: 'AL2', tool: 'ib_atomic_lat', args: ATOMIC_LAT, kernel: 'client', size: 8 },
      { n: 'AB1', tool: 'ib_atomic_bw', args: ATOMIC_BW, kernel: 'server', size: 8 },
      { n: 'AB2', tool: 'ib_atomic_bw', args: ATOMIC_BW, kernel: 'client', size: 8 },
      { n: 'UL1', tool: 'ib_send_lat', args: ['-c', 'UD', ...LAT], kernel: 'server' },
      { n: 'UL2', tool: 'ib_send_lat', args: ['-c', 'UD', ...LAT], kernel: 'client' },
      { n: 'UB1', tool: 'ib_send_bw', args: ['-c', 'UD', '-n', '200'], kernel: 'server', size: 'mtu' },
      { n: 'UB2', tool: 'ib_send_bw', args: ['-c', 'UD', '-n', '200'], kernel: 'client', size: 'mtu' },
      { n: 'Q1', tool: 'ib_write_bw', args: ['-q', '2', ...BW], kernel: 'server', iters: 400 },
      { n: 'Q2', tool: 'ib_write_bw', args: ['-q', '2', ...BW], kernel: 'client', iters: 400 },
      { n: 'URL1', tool: 'ib_send_lat', args: ['-R', '-c', 'UD', ...LAT], kernel: 'server' },
      { n: 'URL2', tool: 'ib_send_lat', args: ['-R', '-c', 'UD', ...LAT], kernel: 'client' },
      { n: 'URB1', tool: 'ib_send_bw', args: ['-R', '-c', 'UD', '-n', '200'], kernel: 'server', size: 'mtu' },
      { n: 'URB2', tool: 'ib_send_bw', args: ['-R', '-c', 'UD', '-n', '200'], kernel: 'client', size: 'mtu' },
    ],
  },
  {
    rdma: 'siw',
    kdev: 'siw0',
    hdev: 'siw_rvbr0',
    scenarios: [
      { n: 'RW1', tool: 'ib_write_bw', args: ['-R', ...BW], kernel: 'server' },
      { n: 'RW2', tool: 'ib_write_bw', args: ['-R', ...BW], kernel: 'client' },
      { n: 'RS1', tool: 'ib_send_lat', args: ['-R', ...LAT], kernel: 'server' },
      { n: 'RS2', tool: 'ib_send_lat', args: ['-R', ...LAT], kernel: 'client' },
      { n: 'RSB1', tool: 'ib_send_bw', args: ['-R', ...BW, '-r', '16'], kernel: 'server' },
      { n: 'RSB2', tool: 'ib_send_bw', args: ['-R', ...BW, '-r', '16'], kernel: 'client' },
      { n: 'RWL1', tool: 'ib_write_lat', args: ['-R', ...LAT], kernel: 'server' },
      { n: 'RWL2', tool: 'ib_write_lat', args: ['-R', ...LAT], kernel: 'client' },
      { n: 'RRL1', tool: 'ib_read_lat', args: ['-R', ...LAT], kernel: 'server' },
      { n: 'RRL2', tool: 'ib_read_lat', args: ['-R', ...LAT], kernel: 'client' },
      { n: 'RRB1', tool: 'ib_read_bw', args: ['-R', ...BW], kernel: 'server' },
      { n: 'RRB2', tool: 'ib_read_bw', args: ['-R', ...BW], kernel: 'client' },
      { n: 'RQ1', tool: 'ib_send_bw', args: ['-R', '-q', '2', ...BW, '-r', '16'], kernel: 'server', iters: 400 },
      { n: 'RQ2', tool: 'ib_send_bw', args: ['-R', '-q', '2', ...BW, '-r', '16'], kernel: 'client', iters: 400 },
    ],
  },
];
const tailOf = (s, n = 14) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const hostDesc = (r) => `host: exit ${r.code}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n  stderr: ${tailOf(r.stderr)}\n  stdout: ${tailOf(r.stdout)}`;
const guestDesc = (g) => `guest: exit ${g.rc}${g.rc === 124 ? ' (TIMED OUT)' : ''}\n  stderr: ${tailOf(g.err)}\n  stdout: ${tailOf(g.out)}${hangOf(g)}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The row of scenario `s`: its size (bandwidth 4096, latency 2, atomics 8; UD bandwidth the path
 * MTU, 256 .. 4096) and its iterations (bandwidth 200, latency 100; a bandwidth row of `-q 2`
 * counts the iterations of both QPs).
 */
function rowOf(s) {
  const bw = s.tool.endsWith('_bw');
  const size = s.size === 'mtu' ? '(256|512|1024|2048|4096)' : String(s.size ?? (bw ? 4096 : 2));
  return bw ? bwRowRe(size, s.iters ?? 200) : latRowRe(size, 100);
}
/** read_lat's and atomic_lat's servers only wait for their client and print no row. */
const serverRows = (s) => s.tool !== 'ib_read_lat' && s.tool !== 'ib_atomic_lat';

const built = (t) => requireBuilt(t, [join(REPO_ROOT, 'dist', 'cli', 'ib_write_bw.js')], 'npm run build');

const jobOf = (boot) => `
ib_write_bw --version > $H/perftest-version 2>&1
mark ready
${boot.scenarios.map((s) => (s.kernel === 'server'
    ? `gstart ${s.n}-k 240 ${s.tool} -d ${boot.kdev} -F ${s.args.join(' ')}; P=$GPID
${boot.rdma === 'rxe' && s.args.includes('-R') ? 'waitcm' : 'waitlisten'} 18515 60 || glog "${s.n}: no listener on 18515"
mark ready-${s.n}
gwait ${s.n}-k $P`
    : `if waitfile $H/go-${s.n} 300 && [ "$(cat $H/go-${s.n})" = run ]; then gtool ${s.n}-k 240 ${s.tool} -d ${boot.kdev} -F ${s.args.join(' ')} ${HOST_IP}
else glog "${s.n}: not run, the host's server is not up"; putrc ${s.n}-k 253; fi`)).join('\n')}
true
`;

// PERFTEST_INTEROP_BOOTS=siw (or rxe): only those boots.
const only = (process.env.PERFTEST_INTEROP_BOOTS ?? '').split(',').filter(Boolean);
// PERFTEST_INTEROP_SCENARIOS=WL1,WL2: only those scenarios of the boots run.
const picked = (process.env.PERFTEST_INTEROP_SCENARIOS ?? '').split(',').filter(Boolean);
for (const b of BOOTS) b.scenarios = b.scenarios.filter((s) => picked.length === 0 || picked.includes(s.n));
for (const boot of BOOTS.filter((b) => (only.length === 0 || only.includes(b.rdma)) && b.scenarios.length > 0)) {
test(`interop: perftest on ${boot.rdma}${boot.rdma === 'siw' ? ' (-R)' : ''}, our ib_* tools (host, ${boot.hdev}) <-> the kernel's (guest, ${boot.kdev})`, { timeout: 900_000 }, async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const up = await run(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { timeoutMs: 30_000 });
  assert.equal(up.code, 0, `refvm-netns.sh up: ${up.stderr}`);
  // The real RoCE port: the kernel sends everything to 4791.
  const env = { RDMACM_ROCE_PORT: '', RDMACM_BACKEND: 'soft', RDMACM_DEVICE: boot.hdev };
  let stopCapture = null;
  const res = await withGuest({ name: `perftest-${boot.rdma}`, rdma: boot.rdma, vm: VM, job: jobOf(boot), timeoutSec: 840 }, async (ctx) => {
    stopCapture = await ctx.capture('perftest.pcap', 'udp port 4791 or tcp port 18515', { snap: 256, timeoutMs: 860_000 });
    const ours = (s, extra) => ctx.hostStart(process.execPath, [join(REPO_ROOT, 'dist', 'cli', `${s.tool}.js`), '-d', boot.hdev, ...s.args, ...extra], { timeoutMs: 240_000, env });
    for (const s of boot.scenarios) {
      await t.test(`${s.n}: ${s.tool}, ${s.kernel === 'server' ? 'kernel server <- our client' : 'our server <- kernel client'}`, async () => {
        let r;
        if (s.kernel === 'server') {
          await ctx.waitFile(`ready-${s.n}`, 300_000);
          r = await ours(s, [ctx.guestIp]).done;
        } else {
          const p = ours(s, []);
          let ok = false;
          try {
            for (let i = 0; i < 300 && !ok; i++) {
              ok = /Waiting for client to connect/.test(p.output());
              if (!ok) await sleep(100);
            }
            await sleep(500);
          } finally {
            ctx.touch(`go-${s.n}`, ok ? 'run' : 'skip');
          }
          r = await settle(p, 300_000);
        }
        save(ctx, `${s.n}-h`, r);
        await ctx.waitFile(`${s.n}-k.rc`, 300_000).catch(() => {});
        const g = ctx.result(`${s.n}-k`);
        const both = `${hostDesc(r)}\n${guestDesc(g)}\n${ctx.read('perftest-version') || ''}`;
        assert.equal(r.code, 0, both);
        assert.equal(g.rc, 0, both);
        assert.equal(infWithoutReason(g.out, g.err), null, both);
        assert.equal(infWithoutReason(r.stdout, r.stderr), null, both);
        // A latency server prints its own row (read_lat's none); a bandwidth server the client's
        // (write_bw) or its own (send_bw).
        const hostIsServer = s.kernel === 'client';
        for (const [out, server] of [[g.out, !hostIsServer], [r.stdout, hostIsServer]]) {
          if (!server || serverRows(s)) assert.match(out, rowOf(s), both);
          else assert.doesNotMatch(out, rowOf(s), both);
        }
      });
    }
    await stopCapture();
  }).finally(() => stopCapture?.());
  log(`perftest-${boot.rdma}: job folder ${res.jobDir} (perftest.pcap, *-h.* / *-k.* outputs)`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
}
