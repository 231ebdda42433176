// libibverbs' examples against rdma-core's own build of them (rdma-core 44 in the reference VM).
// One boot with both kernel devices on the guest's eth0 (siw0, rxe0): our tools run on the host
// inside the `refvm` netns (10.77.0.1, the soft RoCE device rxe_rvbr0), the kernel's in the guest
// (10.77.0.2, rxe0). Scenarios, in order:
//   <tool>-K  the kernel's pingpong is the server (guest), ours the client (host)
//   <tool>-O  ours is the server (host), the kernel's the client (guest)
// for ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong (all with -g, the
// GID index of each side's IPv4 address; RoCE needs a GRH), and ibv_ud_pingpong without -g (both
// sides fail alike: no AH without a GRH on RoCE). Both sides must exit as expected and print the
// C tool's lines (timings left free). Then ibv_devinfo -v: ours on rxe_rvbr0 against the
// kernel's on rxe0, field by field (names, GUIDs, GIDs and the comp vectors are the machine's;
// ours has rxe's capabilities plus BLOCK_MULTICAST_LOOPBACK, test/lib/devinfo.js withSoftRoceCaps);
// and in the guest, ours under the native backend against the kernel's on rxe0 and siw0 (equal
// but for the machine's lines: the native backend reports the kernel's values), and ours on siw0
// (native) failing as rdma-core's ibv_rc_pingpong does there. Our tools in the guest load the
// package over 9p under emulation (minutes per run): they come last.
//
// Env: IBV_EXAMPLES_ONLY (a regular expression over scenario names).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { assertSameFields, MACHINE_FIELDS, withSoftRoceCaps } from '../lib/devinfo.js';
import { withGuest, requireRefvm, requireBuilt, REPO_ROOT, REFVM_HOME, run, log, settle, saveRun as save, hangOf, vmSlot } from './lib/refvm.js';

const HOST_IP = '10.77.0.1';
const GUEST_IP = '10.77.0.2';
const DEV = 'rxe_rvbr0';
const ITERS = 100;
const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
const NETOPT = join(REPO_ROOT, 'native', 'build', 'netopt.node');
const ADDON = join(REPO_ROOT, 'native', 'build', 'rdmacm.node');
const ONLY = process.env.IBV_EXAMPLES_ONLY ? new RegExp(process.env.IBV_EXAMPLES_ONLY) : null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const hostDesc = (r) => (r ? `host: exit ${r.code}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n  stderr: ${tailOf(r.stderr)}\n  stdout: ${tailOf(r.stdout)}` : 'host: not run');
const guestDesc = (g) => `guest: exit ${g.rc}${g.rc === 124 ? ' (TIMED OUT)' : ''}\n  stderr: ${tailOf(g.err)}\n  stdout: ${tailOf(g.out)}${hangOf(g)}`;

/** What a pingpong prints for `iters` exchanges of `size` bytes over `n` QPs (srq), figures free. */
function outputRe({ size, iters, n = 1, ud = false }) {
  const addr = (what, sep) => ` {2}${what} address:${what === 'local' ? ' {2}' : ' '}LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}${sep} GID ::ffff:10\\.77\\.0\\.[12]\\n`;
  const bytes = size * iters * 2;
  return new RegExp(
    `^(${addr('local', ud ? ':' : ',')}){${n}}(${addr('remote', ',')}){${n}}` +
      `${bytes} bytes in \\d+\\.\\d\\d seconds = [\\d.]+ Mbit/sec\\n${iters} iters in \\d+\\.\\d\\d seconds = [\\d.]+ usec/iter\\n$`,
  );
}

// ------------------------------------------------------------------ the pingpong scenarios
const SCEN = [];
let nextPort = 18520;
for (const [tool, extra, size, n] of [
  ['rc', [], 4096, 1],
  ['uc', [], 4096, 1],
  ['ud', ['-s', '1024'], 1024, 1],
  ['srq', ['-q', '4'], 4096, 4],
]) {
  for (const kind of ['K', 'O']) {
    SCEN.push({
      name: `${tool}-${kind}`, kind, port: nextPort++, tool: `ibv_${tool}_pingpong`, args: ['-n', String(ITERS), ...extra],
      gid: true,
      check(r, g, both) {
        assert.equal(r.code, 0, `ours\n${both}`);
        assert.equal(g.rc, 0, `the kernel's\n${both}`);
        const want = outputRe({ size, iters: ITERS, n: tool === 'srq' ? n : 1, ud: tool === 'ud' });
        assert.match(r.stdout, want, `our stdout\n${both}`);
        assert.match(g.out, want, `the kernel's stdout\n${both}`);
        assert.equal(r.stderr, '', `our stderr\n${both}`);
        assert.equal(g.err, '', `the kernel's stderr\n${both}`);
      },
    });
  }
}
// ud without -g: the server fails to create its AH (no GRH on RoCE), the client's read fails.
SCEN.push({
  name: 'ud-noG-K', kind: 'K', port: nextPort++, tool: 'ibv_ud_pingpong', args: ['-n', '5'], gid: false,
  check(r, g, both) {
    assert.equal(g.rc, 1, both);
    assert.equal(g.err, 'Failed to create AH\nCouldn\'t connect to remote QP\n', both);
    assert.equal(r.code, 1, both);
    assert.equal(r.stderr, 'client read/write: No space left on device\nCouldn\'t read/write remote address\n', both);
  },
});
SCEN.push({
  name: 'ud-noG-O', kind: 'O', port: nextPort++, tool: 'ibv_ud_pingpong', args: ['-n', '5'], gid: false,
  check(r, g, both) {
    assert.equal(r.code, 1, both);
    assert.equal(r.stderr, 'Failed to create AH\nCouldn\'t connect to remote QP\n', both);
    assert.equal(g.rc, 1, both);
    assert.equal(g.err, 'client read/write: No space left on device\nCouldn\'t read/write remote address\n', both);
  },
});
const RUN = SCEN.filter((s) => !ONLY || ONLY.test(s.name));

// ------------------------------------------------------------------ the guest job
const OURS_IN_GUEST = 'RDMACM_BACKEND=native $H/node /mnt/src/dist/cli';
const job = `
GIDX=-1; for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
  [ "$(cat $f)" = "0000:0000:0000:0000:0000:ffff:0a4d:0002" ] && { GIDX=\${f##*/}; break; }; done
glog "rxe0 GID index of ${GUEST_IP}: $GIDX"
for d in rxe0 siw0; do gtool devinfo-k-$d 60 ibv_devinfo -v -d $d; done
mark ready
${RUN.map((s) => {
    const g = s.gid ? '-g $GIDX' : '';
    const cmd = `${s.tool} -d rxe0 ${g} -p ${s.port} ${s.args.join(' ')}`;
    return s.kind === 'K'
      ? `gstart ${s.name}-k 150 ${cmd}; P=$GPID
waitlisten ${s.port} 60 || glog "${s.name}: no listener on ${s.port}"
mark ready-${s.name}
gwait ${s.name}-k $P`
      : `if waitfile $H/go-${s.name} 300 && [ "$(cat $H/go-${s.name})" = run ]; then gtool ${s.name}-k 150 ${cmd} ${HOST_IP}
else glog "${s.name}: not run, the host's server is not up"; putrc ${s.name}-k 253; fi`;
  }).join('\n')}
# ours in the guest, native backend (each run loads the package over 9p: minutes under emulation)
for d in rxe0 siw0; do gtool devinfo-n-$d 300 env ${OURS_IN_GUEST}/ibv_devinfo.js -v -d $d; done
# rc_pingpong on siw0: ours (native backend) against itself, as rdma-core's fails there
gstart siw-rc-n-srv 400 env ${OURS_IN_GUEST}/ibv_rc_pingpong.js -d siw0 -g 0 -n 5 -p 18600; P=$GPID
waitlisten 18600 300 || glog "siw-rc: no listener"
gtool siw-rc-n-cli 300 env ${OURS_IN_GUEST}/ibv_rc_pingpong.js -d siw0 -g 0 -n 5 -p 18600 ${GUEST_IP}; gwait siw-rc-n-srv $P
mark native-done
true
`;

const built = (t) => requireBuilt(t, [NETOPT, ADDON, cli('ibv_srq_pingpong')], 'npm run build; npm run build:native');

test('interop: libibverbs examples, ours (host rxe_rvbr0; guest native) <-> rdma-core 44\'s (guest rxe0, siw0)', { timeout: 2_500_000 }, async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const up = await run(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { timeoutMs: 30_000 });
  assert.equal(up.code, 0, `refvm-netns.sh up: ${up.stderr}`);
  const env = { RDMACM_ROCE_PORT: '', RDMACM_BACKEND: 'soft' };
  const res = await withGuest({ name: 'ibverbs-examples', rdma: 'siw,rxe', vm: vmSlot(), job, timeoutSec: 2400, src: REPO_ROOT, node: true }, async (ctx) => {
    // Our GID index of 10.77.0.1, from our ibv_devinfo -v.
    const dv = await ctx.hostRun(process.execPath, [cli('ibv_devinfo'), '-v', '-d', DEV], { timeoutMs: 60_000, env });
    save(ctx, 'devinfo-h', dv);
    const gidx = /GID\[\s*(\d+)\]:\t\t::ffff:10\.77\.0\.1, RoCE v2/.exec(dv.stdout)?.[1];
    await ctx.waitFile('ready', 600_000);

    await t.test('ibv_devinfo -v: ours on the soft RoCE device, the kernel\'s on rxe0: the same fields', () => {
      assert.equal(dv.code, 0, hostDesc(dv));
      assert.ok(gidx !== undefined, `our GID of ${HOST_IP}\n${dv.stdout}`);
      const k = ctx.result('devinfo-k-rxe0');
      assert.equal(k.rc, 0, guestDesc(k));
      assertSameFields(dv.stdout, withSoftRoceCaps(k.out), MACHINE_FIELDS, 'ibv_devinfo -v: rxe_rvbr0 (ours) vs rxe0 (the kernel\'s, with our extra capability)');
    });
    for (const s of RUN) {
      await t.test(`${s.name}: ${s.tool} ${s.kind === 'K' ? 'kernel server <- our client' : 'our server <- kernel client'}`, async () => {
        const args = [cli(s.tool), '-d', DEV, ...(s.gid ? ['-g', gidx ?? '-1'] : []), '-p', String(s.port), ...s.args];
        let r;
        if (s.kind === 'K') {
          await ctx.waitFile(`ready-${s.name}`, 200_000);
          r = await ctx.hostStart(process.execPath, [...args, GUEST_IP], { timeoutMs: 150_000, env }).done;
        } else {
          const p = ctx.hostStart(process.execPath, args, { timeoutMs: 150_000, env });
          let ok = false;
          try {
            for (let i = 0; i < 300 && !ok; i++) {
              ok = /local address/.test(p.output());
              if (!ok) await sleep(100);
            }
            await sleep(500);
          } finally {
            ctx.touch(`go-${s.name}`, ok ? 'run' : 'skip');
          }
          r = await settle(p, 170_000);
        }
        save(ctx, `${s.name}-h`, r);
        await ctx.waitFile(`${s.name}-k.rc`, 170_000).catch(() => {});
        const g = ctx.result(`${s.name}-k`);
        s.check(r, g, `${hostDesc(r)}\n${guestDesc(g)}`);
      });
    }
    await ctx.waitFile('native-done', 1_000_000).catch(() => {});
    for (const d of ['rxe0', 'siw0']) {
      await t.test(`ibv_devinfo -v -d ${d} in the guest: ours (native backend) and the kernel's`, () => {
        const k = ctx.result(`devinfo-k-${d}`);
        const n = ctx.result(`devinfo-n-${d}`);
        assert.equal(n.rc, 0, guestDesc(n));
        assert.equal(n.err, '', guestDesc(n));
        assertSameFields(n.out, k.out, MACHINE_FIELDS, `ibv_devinfo -v -d ${d}: ours (native) vs the kernel's`);
      });
    }
    await t.test('ibv_rc_pingpong on siw0 (ours, native backend): fails as rdma-core\'s on siw', () => {
      const s = ctx.result('siw-rc-n-srv');
      const c = ctx.result('siw-rc-n-cli');
      assert.equal(s.rc, 1, guestDesc(s));
      assert.equal(s.err, 'Failed to modify QP to RTS\nCouldn\'t connect to remote QP\n', guestDesc(s));
      assert.equal(c.rc, 1, guestDesc(c));
      assert.equal(c.err, 'client read/write: No space left on device\nCouldn\'t read/write remote address\n', guestDesc(c));
    });

  });
  log(`ibverbs-examples: job folder ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
