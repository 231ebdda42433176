// Our rcopy against rdma-core 44's on the Linux kernel's siw and rxe, both directions, in the
// reference VM (tap network; ours runs on the host inside the `refvm` namespace, 10.77.0.1):
//   A. the kernel's `rcopy` server in the guest  <-  our client on the host
//   B. our server on the host                    <-  the kernel's `rcopy` client in the guest
// One boot per device type (siw: ours on siw_rvbr0, the default for RDMA_PS_TCP; rxe: ours pinned
// to rxe_rvbr0 with RDMACM_DEVICE, real UDP port 4791). Each direction copies a large file of
// random bytes (not a multiple of any buffer size) and checks it byte for byte (SHA-256 of both
// ends), both exit statuses and the progress lines both tools print; then a destination the
// server cannot open (a missing directory), which both servers answer with ENOENT, so the client
// exits 2 after `opening...`.
//
// Env: RCOPY_INTEROP_BYTES (file size, default 8 MiB + 4097), RCOPY_INTEROP_DEVICES ("siw,rxe"),
//      REFVM_VM (the guest slot / tap, default 1), RCOPY_TIMEOUT_SEC (one copy, default 600).
import test from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, readFileSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { withGuest, requireRefvm, requireBuilt, REPO_ROOT, HOST_IP, hangOf, vmSlot } from './lib/refvm.js';

const RCOPY = join(REPO_ROOT, 'dist', 'cli', 'rcopy.js');
const BYTES = Number(process.env.RCOPY_INTEROP_BYTES || 8 * 1024 * 1024 + 4097);
const DEVICES = (process.env.RCOPY_INTEROP_DEVICES || 'siw,rxe').split(',');
const VM = vmSlot(1);
const TIMEOUT_SEC = Number(process.env.RCOPY_TIMEOUT_SEC || 600);
const ENV = { siw: {}, rxe: { RDMACM_ROCE_PORT: '', RDMACM_DEVICE: 'rxe_rvbr0' } };
const PORT_A = 7427; // rcopy's default: the kernel's server runs without -p
const PORT_B = 7437;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sha = (b) => createHash('sha256').update(b).digest('hex');
const PERF = new RegExp(`^${BYTES} bytes in \\d+\\.\\d\\d seconds = (\\d+\\.\\d\\d|inf) Gb/sec$`);
const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const hostDesc = (what, r) => `host ${what}: exit ${r.code}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n  stderr: ${tailOf(r.stderr)}\n  stdout: ${tailOf(r.stdout)}`;
const guestDesc = (what, g) => `guest ${what}: exit ${g.rc}${g.rc === 124 ? ' (TIMED OUT)' : ''}\n  stderr: ${tailOf(g.err)}\n  stdout: ${tailOf(g.out)}${hangOf(g)}`;

const built = (t) => requireBuilt(t, [RCOPY], 'npm run build');

/** A client's stdout for a copy that worked. */
function assertCopied(stdout, who, both) {
  const lines = stdout.split('\n');
  assert.equal(lines[0], 'opening...transferring...closing...done', `${who}\n${both}`);
  assert.match(lines[1] ?? '', PERF, `${who}\n${both}`);
  assert.equal(lines.length, 3, `${who}\n${both}`);
}

/**
 * The guest's part: A with the kernel's server in /tmp/rc (the host names each step's end with
 * hdone-A<n>; the guest then records the received file's SHA-256), B with a file of random bytes
 * sent by the kernel's client once the host says go-B<n>.
 */
function job() {
  return `
cmlisten() { local i=0; until rdma res show cm_id 2>/dev/null | grep LISTEN | grep -qE ":$1( |$)"; do sleep 0.2; i=$((i+1)); [ $i -ge $(($2*5)) ] && return 1; done; return 0; }
mkdir -p /tmp/rc && cd /tmp/rc
head -c ${BYTES} /dev/urandom > /tmp/src.bin
sha256sum < /tmp/src.bin | cut -d' ' -f1 > $H/B.srcsha.tmp; mv -f $H/B.srcsha.tmp $H/B.srcsha
mark ready
# A: the kernel's server
gstart ksrv ${TIMEOUT_SEC * 3} stdbuf -oL rcopy; sp=$GPID
cmlisten ${PORT_A} 60 || glog "ksrv: nothing listens on ${PORT_A} after 60 s"
mark ready-A
waitfile $H/hdone-A1 ${TIMEOUT_SEC + 120}
{ sha256sum < /tmp/rc/copied.bin | cut -d' ' -f1; stat -c %a /tmp/rc/copied.bin; } > $H/A1.sha.tmp 2>&1; mv -f $H/A1.sha.tmp $H/A1.sha
waitfile $H/hdone-A2 ${TIMEOUT_SEC}
sleep 1; kill $sp; gwait ksrv $sp
# B: the kernel's client
if waitfile $H/go-B1 300 && [ "$(cat $H/go-B1)" = run ]; then gtool kcli1 ${TIMEOUT_SEC} rcopy /tmp/src.bin ${HOST_IP}:$(cat $H/B1.dst) -p ${PORT_B}; else putrc kcli1 253; fi
if waitfile $H/go-B2 300 && [ "$(cat $H/go-B2)" = run ]; then gtool kcli2 120 rcopy /tmp/src.bin ${HOST_IP}:/nonexistent/dir/x -p ${PORT_B}; else putrc kcli2 253; fi
true
`;
}

for (const rdma of DEVICES) {
  test(`interop rcopy on ${rdma}: kernel server <- our client, our server <- kernel client, ${BYTES} bytes byte for byte`, { timeout: (TIMEOUT_SEC * 4 + 600) * 1000 }, async (t) => {
    if (!(await requireRefvm(t)) || !built(t)) return;
    const env = ENV[rdma];
    const hostDir = mkdtempSync(join(tmpdir(), 'rcopy-interop-'));
    chmodSync(hostDir, 0o755);
    t.after(() => rmSync(hostDir, { recursive: true, force: true }));
    const data = randomBytes(BYTES);
    const src = join(hostDir, 'source.bin');
    writeFileSync(src, data, { mode: 0o640 });
    chmodSync(src, 0o640);

    const res = await withGuest({ name: `rcopy-${rdma}`, rdma, vm: VM, job: job(), timeoutSec: TIMEOUT_SEC * 4 + 300 }, async (ctx) => {
      // ---- A: the kernel's server, our client
      await t.test(`A ${rdma}: our client -> kernel rcopy server: the file byte for byte, its mode`, async () => {
        let r;
        try {
          await ctx.waitFile('ready-A', 180_000);
          r = await ctx.hostRun(process.execPath, [RCOPY, src, `${ctx.guestIp}:copied.bin`], { timeoutMs: TIMEOUT_SEC * 1000, env });
        } finally {
          ctx.touch('hdone-A1');
        }
        await ctx.waitFile('A1.sha', 120_000);
        const [got, mode] = (ctx.read('A1.sha') ?? '').trim().split('\n');
        const both = hostDesc('rcopy client', r);
        assert.equal(r.code, 0, both);
        assert.equal(r.stderr, '', both);
        assertCopied(r.stdout, 'our client', both);
        assert.equal(got, sha(data), `the kernel server's copy differs\n${both}`);
        assert.equal(mode, '640', 'the source mode, under the guest umask 022');
      });
      await t.test(`A ${rdma}: a destination the kernel server cannot open: our client exits 2 (ENOENT)`, async () => {
        let r;
        try {
          r = await ctx.hostRun(process.execPath, [RCOPY, src, `${ctx.guestIp}:/nonexistent/dir/x`], { timeoutMs: 120_000, env });
        } finally {
          ctx.touch('hdone-A2');
        }
        await ctx.waitFile('ksrv.rc', 60_000);
        const g = ctx.result('ksrv');
        const both = `${hostDesc('rcopy client', r)}\n${guestDesc('kernel rcopy server', g)}`;
        assert.equal(r.code, 2, both);
        assert.equal(r.stdout, 'opening...', both);
        assert.equal(g.out, `waiting for connection...client: ${HOST_IP}\nopening: copied.bin, transferring...${BYTES} bytes...closing...done\n` +
          `waiting for connection...client: ${HOST_IP}\nopening: /nonexistent/dir/x, unable to open destination file\nwaiting for connection...`, both);
      });

      // ---- B: our server, the kernel's client
      const srv = ctx.hostStart(process.execPath, [RCOPY, '-p', String(PORT_B)], { timeoutMs: TIMEOUT_SEC * 3 * 1000, env, cwd: hostDir });
      try {
        const t0 = Date.now();
        while (!srv.output().includes('waiting for connection...') && Date.now() - t0 < 60_000) {
          if (await Promise.race([srv.done.then(() => true), sleep(200).then(() => false)])) break;
        }
        const up = srv.output().includes('waiting for connection...');
        const dst = join(hostDir, 'from-kernel.bin');
        ctx.touch('B1.dst', dst);
        await t.test(`B ${rdma}: kernel rcopy client -> our server: the file byte for byte`, async () => {
          ctx.touch('go-B1', up ? 'run' : 'skip');
          assert.ok(up, `our server did not start: ${srv.output()}`);
          await ctx.waitFile('kcli1.rc', (TIMEOUT_SEC + 120) * 1000);
          const g = ctx.result('kcli1');
          const both = `${guestDesc('kernel rcopy client', g)}\n  our server so far: ${JSON.stringify(srv.output())}`;
          assert.equal(g.rc, 0, both);
          assert.equal(g.err, '', both);
          assertCopied(g.out, 'the kernel client', both);
          assert.equal(sha(readFileSync(dst)), (ctx.read('B.srcsha') ?? '').trim(), `our copy differs\n${both}`);
        });
        await t.test(`B ${rdma}: a destination our server cannot open: the kernel client exits 2 (ENOENT)`, async () => {
          ctx.touch('go-B2', up ? 'run' : 'skip');
          await ctx.waitFile('kcli2.rc', 180_000);
          const g = ctx.result('kcli2');
          const both = `${guestDesc('kernel rcopy client', g)}\n  our server: ${JSON.stringify(srv.output())}`;
          assert.equal(g.rc, 2, both);
          assert.equal(g.out, 'opening...', both);
          // The server goes on; its lines for the two clients:
          await sleep(1000);
          assert.equal(srv.output(), `waiting for connection...client: ${ctx.guestIp}\nopening: ${dst}, transferring...${BYTES} bytes...closing...done\n` +
            `waiting for connection...client: ${ctx.guestIp}\nopening: /nonexistent/dir/x, unable to open destination file\nwaiting for connection...`, both);
        });
      } finally {
        await srv.kill();
      }
    });
    t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
    assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
  });
}
