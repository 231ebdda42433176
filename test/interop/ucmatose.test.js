// Our ucmatose and rdma_server/rdma_client against the Linux kernel's siw and rdma-core's real
// tools in the reference VM (tap network; our side runs on the host inside the `refvm` netns):
//   A. kernel servers in the guest (10.77.0.2)   <-  our clients on the host
//   B. our servers on the host (10.77.0.1)       <-  kernel clients in the guest
// One VM boot per direction. Each scenario checks both sides' exit codes and stdout lines, which
// are the same for the kernel's tools and ours (cmatose.c prints nothing else on success).
// Plus, in B's boot, the address-resolution failure side by side: both the kernel's ucmatose (in
// the guest) and ours (in the netns) dial an address on their link that nobody answers ARP for
// and must report `cmatose: event: RDMA_CM_EVENT_ADDR_ERROR, error: -110`.
//
// Env: UCMATOSE_TIMEOUT_SEC (deadline of one host-side run, default 120).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, netnsRun, REPO_ROOT, HOST_IP, hangOf } from './lib/refvm.js';

const UCMATOSE = join(REPO_ROOT, 'dist', 'cli', 'ucmatose.js');
const RDMA_SERVER = join(REPO_ROOT, 'dist', 'cli', 'rdma_server.js');
const RDMA_CLIENT = join(REPO_ROOT, 'dist', 'cli', 'rdma_client.js');
const HOST_TIMEOUT_MS = Number(process.env.UCMATOSE_TIMEOUT_SEC || 120) * 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const lines = (...l) => l.map((x) => `${x}\n`).join('');

const SERVER_OK = (migrate) =>
  lines('cmatose: starting server', 'initiating data transfers', 'completing sends', 'receiving data transfers', 'data transfers complete',
    ...(migrate ? ['migrating to new event channel'] : []), 'cmatose: disconnecting', 'disconnected', 'test complete', 'return status 0');
const CLIENT_OK = (migrate) =>
  lines('cmatose: starting client', 'cmatose: connecting', 'receiving data transfers', 'sending replies', 'data transfers complete',
    ...(migrate ? ['migrating to new event channel'] : []), 'test complete', 'return status 0');
const ADDR_ERROR_OUT = lines('cmatose: starting client', 'cmatose: connecting', 'cmatose: event: RDMA_CM_EVENT_ADDR_ERROR, error: -110', 'test complete', 'return status -110');

/** The scenarios: tool, arguments common to both sides, port. */
const UCM = [
  { title: 'ucmatose -c 10 -C 10', args: ['-c', '10', '-C', '10'], port: 7481 },
  { title: 'ucmatose -c 10 -C 10 -S 1000 -m (migrate before disconnect)', args: ['-c', '10', '-C', '10', '-S', '1000', '-m'], port: 7482, migrate: true },
];
const RDMA = { title: 'rdma_server / rdma_client', port: 7483 };
/** On the bridge, answered by nobody (no ARP reply). */
const NOBODY = '10.77.0.99';

const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const hostDesc = (what, r) => `host ${what}: exit ${r.code}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n  stderr: ${tailOf(r.stderr)}\n  stdout: ${tailOf(r.stdout)}`;
const guestDesc = (what, g) => `guest ${what}: exit ${g.rc}\n  stderr: ${tailOf(g.err)}\n  stdout: ${tailOf(g.out)}${hangOf(g)}`;

const built = (t) => requireBuilt(t, [UCMATOSE, RDMA_SERVER, RDMA_CLIENT], 'npm run build');

// ------------------------------------------------------------------ A: kernel servers, our clients
const jobA = `
mark ready
${UCM.map((s, i) => `
gstart usrv-${i} 240 ucmatose -b $REFVM_IP -p ${s.port} ${s.args.join(' ')}; sp=$GPID
waitlisten ${s.port} 60 || glog "usrv-${i}: no listener"
mark ready-u${i}
waitfile $H/hdone-u${i} 300; g=0
while kill -0 $sp 2>/dev/null && [ $g -lt 100 ]; do sleep 0.2; g=$((g+1)); done
kill $sp 2>/dev/null
gwait usrv-${i} $sp`).join('\n')}
gstart rsrv 240 rdma_server -s $REFVM_IP -p ${RDMA.port}; sp=$GPID
waitlisten ${RDMA.port} 60 || glog "rsrv: no listener"
mark ready-r
waitfile $H/hdone-r 300; g=0
while kill -0 $sp 2>/dev/null && [ $g -lt 100 ]; do sleep 0.2; g=$((g+1)); done
kill $sp 2>/dev/null
gwait rsrv $sp
`;

test('interop A: kernel ucmatose / rdma_server (guest, siw) <- our ucmatose / rdma_client (host)', async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const res = await withGuest({ name: 'ucmatose-kernel-server', rdma: 'siw', job: jobA, timeoutSec: 1200 }, async (ctx) => {
    for (const [i, s] of UCM.entries()) {
      await t.test(`A${i}: ${s.title}`, async () => {
        let r;
        try {
          await ctx.waitFile(`ready-u${i}`, 180_000);
          r = await ctx.hostRun(process.execPath, [UCMATOSE, '-s', ctx.guestIp, '-p', String(s.port), ...s.args], { timeoutMs: HOST_TIMEOUT_MS });
        } finally {
          ctx.touch(`hdone-u${i}`);
        }
        await ctx.waitFile(`usrv-${i}.rc`, 60_000);
        const g = ctx.result(`usrv-${i}`);
        const both = `${hostDesc('ucmatose client', r)}\n${guestDesc('kernel ucmatose server', g)}`;
        assert.equal(r.code, 0, both);
        assert.equal(r.stdout, CLIENT_OK(s.migrate), both);
        assert.equal(r.stderr, '', both);
        assert.equal(g.rc, 0, both);
        assert.equal(g.out, SERVER_OK(s.migrate), both);
      });
    }
    await t.test(`A${UCM.length}: ${RDMA.title}`, async () => {
      let r;
      try {
        await ctx.waitFile('ready-r', 180_000);
        r = await ctx.hostRun(process.execPath, [RDMA_CLIENT, '-s', ctx.guestIp, '-p', String(RDMA.port)], { timeoutMs: HOST_TIMEOUT_MS });
      } finally {
        ctx.touch('hdone-r');
      }
      await ctx.waitFile('rsrv.rc', 60_000);
      const g = ctx.result('rsrv');
      const both = `${hostDesc('rdma_client', r)}\n${guestDesc('kernel rdma_server', g)}`;
      assert.equal(r.code, 0, both);
      assert.equal(r.stdout, 'rdma_client: start\nrdma_client: end 0\n', both);
      assert.equal(g.rc, 0, both);
      assert.equal(g.out, 'rdma_server: start\nrdma_server: end 0\n', both);
    });
  });
  t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});

// ------------------------------------------------------------------ B: our servers, kernel clients
const jobB = `
mark ready
${UCM.map((s, i) => `
if ! waitfile $H/go-u${i} 300; then putrc ucli-${i} 254
elif [ "$(cat $H/go-u${i})" = skip ]; then putrc ucli-${i} 253
else gtool ucli-${i} ${HOST_TIMEOUT_MS / 1000} ucmatose -s ${HOST_IP} -p ${s.port} ${s.args.join(' ')}; fi`).join('\n')}
if ! waitfile $H/go-r 300; then putrc rcli 254
elif [ "$(cat $H/go-r)" = skip ]; then putrc rcli 253
else gtool rcli ${HOST_TIMEOUT_MS / 1000} rdma_client -s ${HOST_IP} -p ${RDMA.port}; fi
gtool unreach 60 ucmatose -s ${NOBODY} -p 7489 || true  # expected to fail: exit 146
`;

async function listening(port, srv) {
  let exited = false;
  srv.done.then(() => (exited = true));
  const t0 = Date.now();
  while (Date.now() - t0 < 60_000 && !exited) {
    const ss = await netnsRun('ss', ['-Hltn', `sport = :${port}`], { timeoutMs: 10_000 });
    if (ss.stdout.trim()) return true;
    await sleep(200);
  }
  return false;
}

async function hostServer(ctx, goFile, argv, port) {
  const srv = ctx.hostStart(process.execPath, argv, { timeoutMs: HOST_TIMEOUT_MS + 30_000 });
  let up = false;
  try {
    up = await listening(port, srv);
  } finally {
    ctx.touch(goFile, up ? 'run' : 'skip');
  }
  return srv;
}

async function finish(srv) {
  const r = await Promise.race([srv.done, sleep(30_000).then(() => null)]);
  if (r) return r;
  await srv.kill();
  return srv.done;
}

test('interop B: our ucmatose / rdma_server (host) <- kernel ucmatose / rdma_client (guest, siw); ADDR_ERROR side by side', async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const res = await withGuest({ name: 'ucmatose-kernel-client', rdma: 'siw', job: jobB, timeoutSec: 1200 }, async (ctx) => {
    for (const [i, s] of UCM.entries()) {
      await t.test(`B${i}: ${s.title}`, async () => {
        const srv = await hostServer(ctx, `go-u${i}`, [UCMATOSE, '-b', HOST_IP, '-p', String(s.port), ...s.args], s.port);
        await ctx.waitFile(`ucli-${i}.rc`, HOST_TIMEOUT_MS + 60_000).catch(() => {});
        const r = await finish(srv);
        const g = ctx.result(`ucli-${i}`);
        const both = `${hostDesc('ucmatose server', r)}\n${guestDesc('kernel ucmatose client', g)}`;
        assert.equal(g.rc, 0, both);
        assert.equal(g.out, CLIENT_OK(s.migrate), both);
        assert.equal(r.code, 0, both);
        assert.equal(r.stdout, SERVER_OK(s.migrate), both);
        assert.equal(r.stderr, '', both);
      });
    }
    await t.test(`B${UCM.length}: ${RDMA.title}`, async () => {
      const srv = await hostServer(ctx, 'go-r', [RDMA_SERVER, '-s', HOST_IP, '-p', String(RDMA.port)], RDMA.port);
      await ctx.waitFile('rcli.rc', HOST_TIMEOUT_MS + 60_000).catch(() => {});
      const r = await finish(srv);
      const g = ctx.result('rcli');
      const both = `${hostDesc('rdma_server', r)}\n${guestDesc('kernel rdma_client', g)}`;
      assert.equal(g.rc, 0, both);
      assert.equal(g.out, 'rdma_client: start\nrdma_client: end 0\n', both);
      assert.equal(r.code, 0, both);
      assert.equal(r.stdout, 'rdma_server: start\nrdma_server: end 0\n', both);
    });
    await t.test(`B${UCM.length + 1}: nobody answers ARP for ${NOBODY}: ADDR_ERROR -110 from the kernel and from us`, async () => {
      const r = await ctx.hostRun(process.execPath, [UCMATOSE, '-s', NOBODY, '-p', '7489'], { timeoutMs: 60_000 });
      await ctx.waitFile('unreach.rc', 120_000);
      const g = ctx.result('unreach');
      const both = `${hostDesc('ucmatose client', r)}\n${guestDesc('kernel ucmatose client', g)}`;
      assert.equal(g.out, ADDR_ERROR_OUT, both);
      assert.equal(g.rc, 146, both);
      assert.equal(r.stdout, ADDR_ERROR_OUT, both);
      assert.equal(r.code, 146, both);
    });
  });
  t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
