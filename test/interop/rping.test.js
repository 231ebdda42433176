// Our rping against the Linux kernel's siw and rdma-core's rping, both directions, in the
// reference VM (tap network; our side runs on the host inside the `refvm` namespace):
//   A. kernel `rping -s` in the guest (10.77.0.2)  <-  our `rping -c` on the host
//   B. our `rping -s` on the host (10.77.0.1)     <-  kernel `rping -c` in the guest
// One VM boot per direction serves all its scenarios (boot is the slow part, ≈20 s under TCG).
// Each scenario checks both exit codes (0) and both sides' exact `-v` lines, generated from
// rping's buffer pattern (lib/rping-pattern.js, itself checked against the kernel by
// plumbing.test.js).
//
// Env:
//   RPING_HOST_CMD      host-side rping command line (default: node <repo>/dist/cli/rping.js)
//   RPING_HOST_ADDR     address our server binds and the guest client dials (default 10.77.0.1)
//   RPING_SERVER_READY  how to tell our server listens: listen (default: a TCP listener on the
//                       port in the namespace) | output:REGEX (its stdout/stderr) | delay:SECONDS
//   RPING_TIMEOUT_SEC   deadline of one host-side rping run (default 90)
//   RPING_SCENARIOS     only these scenario numbers, e.g. "0,3" (default: all; same in A and B)
// scripts/refvm/vm-rping.sh stands in for our rping with the kernel's in a second VM, to prove
// this harness without our tool (see test/interop/NOTES.md).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, netnsRun, REPO_ROOT, HOST_IP, hangOf } from './lib/refvm.js';
import { rpingStdout, assertRpingStdout, unexpectedStderr, RPING_DEFAULT_PORT } from './lib/rping-pattern.js';

const HOST_CMD = process.env.RPING_HOST_CMD
  ? process.env.RPING_HOST_CMD.trim().split(/\s+/)
  : [process.execPath, join(REPO_ROOT, 'dist', 'cli', 'rping.js')];
const HOST_ADDR = process.env.RPING_HOST_ADDR || HOST_IP;
const SERVER_READY = process.env.RPING_SERVER_READY || 'listen';
const HOST_TIMEOUT_MS = Number(process.env.RPING_TIMEOUT_SEC || 90) * 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const SCENARIOS = [
  { title: '-S 26 (minimum size)', size: 26, count: 3, verbose: true },
  { title: '-S 64', size: 64, count: 3, verbose: true },
  { title: '-S 4096', size: 4096, count: 3, verbose: true },
  { title: '-S 65535 (maximum size)', size: 65535, count: 3, verbose: true },
  { title: 'default size, -C 60 -v (the start letter wraps)', count: 60, verbose: true },
  { title: 'default size and port, -C 10 -V only (no output)', count: 10, verbose: false, defaultPort: true },
];
const ONLY = process.env.RPING_SCENARIOS ? new Set(process.env.RPING_SCENARIOS.split(',').map(Number)) : null;
const RUN = SCENARIOS.map((s, i) => [i, s]).filter(([i]) => !ONLY || ONLY.has(i));
const portOf = (s, base, i) => (s.defaultPort ? RPING_DEFAULT_PORT : base + i);
/** rping options after -s/-c and -a ADDR, in the order the brief's examples use. */
function rpingArgs(s, port) {
  const a = ['-C', String(s.count), '-V'];
  if (s.verbose) a.push('-v');
  if (s.size) a.push('-S', String(s.size));
  if (port !== RPING_DEFAULT_PORT) a.push('-p', String(port));
  return a;
}
const expectOut = (s, role) => (s.verbose ? rpingStdout({ count: s.count, size: s.size, role }) : '');
const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).map((l) => (l.length > 200 ? `${l.slice(0, 200)}…` : l)).join('\n');
const hostDesc = (r) => `host: ${HOST_CMD.join(' ')} -> exit ${r.code}${r.signal ? ` (${r.signal})` : ''}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n  stderr: ${tailOf(r.stderr)}\n  stdout: ${tailOf(r.stdout, 4)}`;
const GUEST_RC = { 124: ' (TIMED OUT: killed by timeout)', 143: ' (killed: SIGTERM)', 253: ' (not run: our server was not up)', 254: ' (not run: no go from the host)' };
const guestDesc = (g, what) => `guest ${what}: exit ${g.rc}${GUEST_RC[g.rc] || ''}\n  stderr: ${tailOf(g.err)}\n  stdout: ${tailOf(g.out, 4)}${hangOf(g)}`;

/** Keep our side's output next to the guest's, in the job folder. */
function saveHost(ctx, name, r) {
  if (!r) return;
  ctx.touch(`${name}.out`, r.stdout);
  ctx.touch(`${name}.err`, r.stderr);
  ctx.touch(`${name}.rc`, `${r.code}${r.timedOut ? ' timed out' : ''}\n`);
}

/** Skip loudly when our rping is not built (the default command) — never pass silently. */
/** Our rping is built (or RPING_HOST_CMD names another): the test may go on. */
const built = (t) => Boolean(process.env.RPING_HOST_CMD) || requireBuilt(t, [HOST_CMD[1]], 'npm run build; or set RPING_HOST_CMD');

// ------------------------------------------------------------------ A: kernel server, our client
const A_BASE = 7200;
const jobA = `
mark ready
${RUN.map(([i, s]) => {
  const p = portOf(s, A_BASE, i);
  return `
gstart srv-${i} 300 rping -s -a $REFVM_IP ${rpingArgs(s, p).join(' ')}; sp=$GPID
waitlisten ${p} 60 || glog "srv-${i}: no listener on ${p} after 60 s"
mark ready-${i}
g=0; while kill -0 $sp 2>/dev/null; do
  if [ -e $H/hdone-${i} ]; then g=$((g+1)); if [ $g -gt 100 ]; then glog "srv-${i}: still running 20 s after the host's client ended: stopping it"; kill $sp; break; fi; fi
  sleep 0.2
done
gwait srv-${i} $sp`;
}).join('\n')}
true
`;

test('interop A: kernel rping -s (guest, siw) <- our rping -c (host)', async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const res = await withGuest({ name: 'rping-kernel-server', rdma: 'siw', job: jobA, timeoutSec: 1050 }, async (ctx) => {
    for (const [i, s] of RUN) {
      const port = portOf(s, A_BASE, i);
      await t.test(`A${i}: ${s.title}`, async (tt) => {
        let r;
        try {
          await ctx.waitFile(`ready-${i}`, 120_000);
          const args = ['-c', '-a', ctx.guestIp, ...rpingArgs(s, port)];
          tt.diagnostic(`host$ ${HOST_CMD.join(' ')} ${args.join(' ')}`);
          r = await ctx.hostRun(HOST_CMD[0], [...HOST_CMD.slice(1), ...args], { timeoutMs: HOST_TIMEOUT_MS });
        } finally {
          ctx.touch(`hdone-${i}`);
        }
        saveHost(ctx, `host-cli-${i}`, r);
        await ctx.waitFile(`srv-${i}.rc`, 60_000);
        const g = ctx.result(`srv-${i}`);
        const both = `${hostDesc(r)}\n${guestDesc(g, 'kernel rping -s')}`;
        tt.diagnostic(`our client ${r.ms} ms; kernel server exit ${g.rc}`);
        assert.equal(r.code, 0, `our rping client failed\n${both}`);
        assert.equal(g.rc, 0, `kernel rping server failed\n${both}`);
        assertRpingStdout(r.stdout, expectOut(s, 'client'), 'our rping -c (data the kernel server wrote back)');
        assertRpingStdout(g.out, expectOut(s, 'server'), 'kernel rping -s (data it read from our client)');
        assert.deepEqual(unexpectedStderr(g.err, 'server'), [], `kernel rping -s printed what a clean run does not\n${both}`);
      });
    }
  });
  t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});

// ------------------------------------------------------------------ B: our server, kernel client
const B_BASE = 7210;
const jobB = `
mark ready
${RUN.map(([i, s]) => `
if ! waitfile $H/go-${i} 300; then glog "cli-${i}: no go from the host"; putrc cli-${i} 254
elif [ "$(cat $H/go-${i})" = skip ]; then glog "cli-${i}: not run, the host's server is not up"; putrc cli-${i} 253
else gtool cli-${i} ${HOST_TIMEOUT_MS / 1000} rping -c -a ${HOST_ADDR} ${rpingArgs(s, portOf(s, B_BASE, i)).join(' ')}; fi`).join('\n')}
true
`;

async function serverReady(srv, port) {
  const t0 = Date.now();
  let exited = false;
  srv.done.then(() => { exited = true; });
  if (SERVER_READY.startsWith('delay:')) { await sleep(Number(SERVER_READY.slice(6)) * 1000); return `waited ${SERVER_READY.slice(6)} s`; }
  const re = SERVER_READY.startsWith('output:') ? new RegExp(SERVER_READY.slice(7)) : null;
  while (Date.now() - t0 < 90_000 && !exited) {
    if (re) { if (re.test(srv.output())) return `output matched after ${Date.now() - t0} ms`; }
    else {
      const ss = await netnsRun('ss', ['-Hltn', `sport = :${port}`], { timeoutMs: 10_000 });
      if (ss.stdout.trim()) return `listening after ${Date.now() - t0} ms`;
    }
    await sleep(250);
  }
  return exited ? 'the server exited before it was seen listening' : `NOT seen listening within 90 s (${SERVER_READY})`;
}

test('interop B: our rping -s (host) <- kernel rping -c (guest, siw)', async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const res = await withGuest({ name: 'rping-kernel-client', rdma: 'siw', job: jobB, timeoutSec: 1050 }, async (ctx) => {
    for (const [i, s] of RUN) {
      const port = portOf(s, B_BASE, i);
      await t.test(`B${i}: ${s.title}`, async (tt) => {
        const args = ['-s', '-a', HOST_ADDR, ...rpingArgs(s, port)];
        tt.diagnostic(`host$ ${HOST_CMD.join(' ')} ${args.join(' ')}`);
        const srv = ctx.hostStart(HOST_CMD[0], [...HOST_CMD.slice(1), ...args], { timeoutMs: HOST_TIMEOUT_MS + 30_000 });
        let r, killed = false, up = 'unknown';
        try {
          up = await serverReady(srv, port);
          tt.diagnostic(`our server: ${up}`);
        } finally {
          // the kernel's rping client hangs after "Connection refused": don't start it for nothing
          ctx.touch(`go-${i}`, /exited before/.test(up) ? 'skip' : 'run');
        }
        try {
          await ctx.waitFile(`cli-${i}.rc`, HOST_TIMEOUT_MS + 60_000);
        } finally {
          // the client is done (or gone): our server has 20 s to finish on its own
          r = await Promise.race([srv.done, sleep(20_000).then(() => null)]);
          if (!r) { killed = true; await srv.kill(); r = await srv.done; }
        }
        saveHost(ctx, `host-srv-${i}`, r);
        const g = ctx.result(`cli-${i}`);
        const both = `${hostDesc(r)}\n  our server: ${up}${killed ? '; still running 20 s after the kernel client ended: killed' : ''}\n${guestDesc(g, 'kernel rping -c')}`;
        tt.diagnostic(`our server ${r.ms} ms; kernel client exit ${g.rc}`);
        assert.equal(r.code, 0, `our rping server failed\n${both}`);
        assert.equal(g.rc, 0, `kernel rping client failed\n${both}`);
        assertRpingStdout(g.out, expectOut(s, 'client'), 'kernel rping -c (data our server wrote back)');
        assertRpingStdout(r.stdout, expectOut(s, 'server'), 'our rping -s (data it read from the kernel client)');
        assert.deepEqual(unexpectedStderr(g.err, 'client'), [], `kernel rping -c printed what a clean run does not\n${both}`);
      });
    }
  });
  t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
