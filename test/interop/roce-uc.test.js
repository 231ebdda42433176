// UC QPs of the soft RoCEv2 device against the Linux kernel's rdma_rxe: rdma-core's
// ibv_uc_pingpong in the reference VM (guest 10.77.0.2, rxe0) and test/lib/uc-pingpong.js, the
// same tool over this package, on the host (netns `refvm`, 10.77.0.1, rxe_rvbr0). One VM boot:
//   P1  kernel ibv_uc_pingpong server (guest)   <-  our client (host)
//   P2  our server (host)                       <-  kernel ibv_uc_pingpong client (guest)
// Each runs 200 round trips of 4096-byte SENDs (4 UC packets each at path MTU 1024) and of
// 100-byte ones; both sides must exit 0 and print the C tool's lines. UC has no recovery: the
// link is the clean tap bridge (a lost message would stall both sides until their deadlines).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, REPO_ROOT, HOST_IP, REFVM_HOME, run, log, settle, saveRun as save, hangOf } from './lib/refvm.js';

const PINGPONG = join(REPO_ROOT, 'test', 'lib', 'uc-pingpong.js');
const NETOPT = join(REPO_ROOT, 'native', 'build', 'netopt.node');
const DEV = 'rxe_rvbr0';
const ITERS = 200;
const SCENARIOS = [
  { n: 'P1', size: 4096, kernel: 'server' },
  { n: 'P2', size: 4096, kernel: 'client' },
  { n: 'P3', size: 100, kernel: 'server' },
  { n: 'P4', size: 100, kernel: 'client' },
];
const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const hostDesc = (r) => `host: exit ${r.code}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n  stderr: ${tailOf(r.stderr)}\n  stdout: ${tailOf(r.stdout)}`;
const guestDesc = (g) => `guest: exit ${g.rc}${g.rc === 124 ? ' (TIMED OUT)' : ''}\n  stderr: ${tailOf(g.err)}\n  stdout: ${tailOf(g.out)}${hangOf(g)}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The C tool's output for `iters` round trips of `size` bytes (the figures left free). */
const outputRe = (size, iters) =>
  new RegExp(
    `^ {2}local address: {2}LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:10\\.77\\.0\\.\\d\\n` +
      ` {2}remote address: LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:10\\.77\\.0\\.\\d\\n` +
      `${size * iters * 2} bytes in \\d+\\.\\d\\d seconds = [\\d.]+ Mbit/sec\\n${iters} iters in \\d+\\.\\d\\d seconds = [\\d.]+ usec/iter\\n$`,
  );

const built = (t) => requireBuilt(t, [NETOPT, join(REPO_ROOT, 'dist', 'index.js')], 'npm run build / node native/build.mjs');

// The guest's GID index of its IPv4 address (sysfs), then each scenario in order.
const job = `
GIDX=-1; for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
  [ "$(cat $f)" = "0000:0000:0000:0000:0000:ffff:0a4d:0002" ] && { GIDX=\${f##*/}; break; }; done
glog "rxe0 GID index of 10.77.0.2: $GIDX"
mark ready
${SCENARIOS.map((s) => (s.kernel === 'server'
    ? `gstart ${s.n}-k 120 ibv_uc_pingpong -d rxe0 -g $GIDX -s ${s.size} -n ${ITERS}; P=$GPID
waitlisten 18515 60 || glog "${s.n}: no listener on 18515"
mark ready-${s.n}
gwait ${s.n}-k $P`
    : `if waitfile $H/go-${s.n} 300 && [ "$(cat $H/go-${s.n})" = run ]; then gtool ${s.n}-k 120 ibv_uc_pingpong -d rxe0 -g $GIDX -s ${s.size} -n ${ITERS} ${HOST_IP}
else glog "${s.n}: not run, the host's server is not up"; putrc ${s.n}-k 253; fi`)).join('\n')}
rdma statistic show link rxe0/1 > $H/rdma-statistic 2>&1
true
`;

test('interop: UC, our ibv_uc_pingpong (host, soft RoCE) <-> the kernel\'s (guest, rxe)', { timeout: 600_000 }, async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const up = await run(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { timeoutMs: 30_000 });
  assert.equal(up.code, 0, `refvm-netns.sh up: ${up.stderr}`);
  // The real RoCE port: the kernel sends everything to 4791.
  const env = { RDMACM_ROCE_PORT: '' };
  let stopCapture = null;
  const res = await withGuest({ name: 'roce-uc', rdma: 'rxe', job, timeoutSec: 540 }, async (ctx) => {
    stopCapture = await ctx.capture('roce.pcap', 'udp port 4791 or tcp port 18515', { snap: 256, timeoutMs: 560_000 });
    const ours = (args) => ctx.hostStart(process.execPath, [PINGPONG, '-d', DEV, '-G', HOST_IP, '-n', String(ITERS), ...args], { timeoutMs: 120_000, env });
    for (const s of SCENARIOS) {
      await t.test(`${s.n}: ${s.kernel === 'server' ? 'kernel server <- our client' : 'our server <- kernel client'}, ${s.size}-byte SENDs`, async () => {
        let r;
        if (s.kernel === 'server') {
          await ctx.waitFile(`ready-${s.n}`, 180_000);
          r = await ours(['-s', String(s.size), ctx.guestIp]).done;
        } else {
          const p = ours(['-s', String(s.size)]);
          let ok = false;
          try {
            // Our server prints its local address, then listens on 18515.
            for (let i = 0; i < 300 && !ok; i++) {
              ok = /local address/.test(p.output());
              if (!ok) await sleep(100);
            }
            await sleep(500);
          } finally {
            ctx.touch(`go-${s.n}`, ok ? 'run' : 'skip');
          }
          r = await settle(p, 150_000);
        }
        save(ctx, `${s.n}-h`, r);
        await ctx.waitFile(`${s.n}-k.rc`, 150_000).catch(() => {});
        const g = ctx.result(`${s.n}-k`);
        const both = `${hostDesc(r)}\n${guestDesc(g)}\n${ctx.read('rdma-statistic') || ''}`;
        assert.equal(r.code, 0, both);
        assert.match(r.stdout, outputRe(s.size, ITERS), both);
        assert.equal(g.rc, 0, both);
        assert.match(g.out, outputRe(s.size, ITERS), both);
      });
    }
    await stopCapture();
  }).finally(() => stopCapture?.());
  log(`roce-uc: job folder ${res.jobDir} (roce.pcap, *-h.* / *-k.* outputs)`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
