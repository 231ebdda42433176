// udpong against the Linux kernel's rdma_rxe and rdma-core 44's udpong in the reference VM (guest
// on rxe0, our tool on the host in netns `refvm` on rxe_rvbr0). rdma-core 44's datagram rsockets
// cannot create a QP on rxe — ds_add_qp_dest makes the QP's own address handle without a GRH, which
// the kernel refuses on a RoCE port (EINVAL) — so no exchange is possible either way, kernel
// against kernel included. This file pins those facts (docs/interop.md, "Datagram rsockets"):
//   K   the kernel's udpong client against the kernel's server in the guest: `rconnect: No such
//       file or directory` (the EINVAL's errno overwritten by ds_free_qp's epoll_ctl), exit 255,
//       the header only; the server prints nothing
//   A   our client (host) -> the kernel's server (guest): our login datagrams reach its UDP service,
//       which cannot make its QP and never answers: our client keeps resending (header only), the
//       server prints nothing
//   B   the kernel's client (guest) -> our server (host): the kernel fails in rconnect before
//       sending anything (exit 255), our server sees no login
//   N   our udpong, both ends in the guest over the native backend on the kernel's rxe0 (through
//       rdma-core's libraries): it runs (our QP's own address handle has the GRH the kernel
//       requires) — when the addon is built (native/build/rdmacm.node), else skipped loudly
import test from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, banner, REPO_ROOT, HOST_IP, REFVM_HOME, run, log, saveRun as save, settle, vmSlot } from './lib/refvm.js';
import { udpDatagrams } from '../lib/pcap.js';
import { decodeDsUdpHeader, DsUdpOp } from '../../dist/rsocket/dgram/protocol.js';

const UDPONG = join(REPO_ROOT, 'dist', 'cli', 'udpong.js');
const HEADER = 'name      bytes   xfers   total       time     Gb/sec    usec/xfer\n';
const VM = vmSlot(1);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const built = (t) => requireBuilt(t, [UDPONG], 'npm run build');

const ADDON = join(REPO_ROOT, 'native', 'build', 'rdmacm.node');
const HAVE_ADDON = existsSync(ADDON);

const job = (gip) => `
mark ready
${HAVE_ADDON ? `export RDMACM_BACKEND=native
gstart N-srv 200 $H/node /mnt/src/dist/cli/udpong.js -b ${gip} -p 7180; P=$GPID
sleep 8
gtool N-cli 150 $H/node /mnt/src/dist/cli/udpong.js -s ${gip} -p 7180 -C 50 -S 100
kill $P; gwait N-srv $P
unset RDMACM_BACKEND` : 'glog "N: no addon"'}
mark N-done
gstart K-srv 120 udpong -b ${gip} -p 7174; P=$GPID
sleep 2
gtool K-cli 60 udpong -s ${gip} -p 7174 -C 10 -S 100
mark K-done
waitfile $H/A-done 200
kill $P; gwait K-srv $P
waitfile $H/B-go 200
gtool B-cli 60 udpong -s ${HOST_IP} -p 7175 -C 10 -S 100
true
`;

test('interop: udpong on rxe — rdma-core 44 cannot make its datagram QP on RoCE (kernel vs kernel, ours vs kernel both ways)', { timeout: 600_000 }, async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const up = await run(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { timeoutMs: 30_000 });
  assert.equal(up.code, 0, `refvm-netns.sh up: ${up.stderr}`);
  const env = { RDMACM_ROCE_PORT: '', RDMACM_BACKEND: 'soft' };
  let stopCapture = null;
  const res = await withGuest({ name: 'udpong', rdma: 'rxe', vm: VM, job: job(`10.77.0.${2 + VM}`), timeoutSec: 700, src: REPO_ROOT, node: true }, async (ctx) => {
    await ctx.waitFile('N-done', 400_000);
    if (!HAVE_ADDON) {
      banner(`INTEROP SCENARIO SKIPPED: N (udpong over the native backend in the guest)\nnot built: ${ADDON}\nThis is NOT a pass.`);
    } else {
      const n = ctx.result('N-cli');
      const ns = ctx.result('N-srv');
      await t.test('N: our udpong, both ends over the native backend on the kernel\'s rxe0', () => {
        assert.equal(n.rc, 0, `${n.out}\n${n.err}`);
        assert.match(n.out, new RegExp(`^${HEADER}custom {4}100 {5}50 {6}4\\.8k {6}[ \\d.]+s +[\\d.]+ +[\\d.]+\\n$`));
        assert.equal(n.err, '');
        // Under emulation the first answer can take more than the client's 1 s: it logs in again.
        assert.match(ns.out, new RegExp(`^(client login from 10\\.77\\.0\\.${2 + VM}\\n)+$`));
      });
    }
    stopCapture = await ctx.capture('udpong.pcap', 'udp port 7174 or udp port 7175', { snap: 256, timeoutMs: 560_000 });
    await ctx.waitFile('K-done', 180_000);
    const k = ctx.result('K-cli');
    await t.test('K: the kernel\'s client against its own server fails in rconnect', () => {
      assert.equal(k.rc, 255, `${k.out}\n${k.err}`);
      assert.equal(k.out, HEADER);
      assert.equal(k.err, 'rconnect: No such file or directory\n');
    });
    // A: our client against the kernel's server, 4 s.
    const c = ctx.hostStart(process.execPath, [UDPONG, '-s', ctx.guestIp, '-p', '7174', '-C', '10', '-S', '100'], { timeoutMs: 30_000, env });
    await sleep(4000);
    await c.kill();
    const a = await settle(c, 10_000);
    save(ctx, 'A-h', a);
    ctx.touch('A-done');
    await ctx.waitFile('K-srv.rc', 60_000);
    const srv = ctx.result('K-srv');
    await stopCapture();
    const grams = udpDatagrams(join(ctx.jobDir, 'udpong.pcap'));
    const ip = (b) => [...b].join('.');
    const toKernel = grams.filter((g) => ip(g.src) === HOST_IP && ip(g.dst) === ctx.guestIp && g.dport === 7174);
    const fromKernel = grams.filter((g) => ip(g.src) === ctx.guestIp && g.sport === 7174);
    await t.test('A: our client\'s logins reach the kernel\'s server, which never answers', () => {
      assert.equal(a.stdout, HEADER, a.stderr);
      assert.equal(a.stderr, '');
      assert.equal(srv.out, '', 'the kernel server saw no login');
      // Our logins, once a second: ds_udp_header DATA from our QP, then udpong's 16-byte login.
      const logins = toKernel.map((g) => ({ h: decodeDsUdpHeader(g.payload, 4), g })).filter(({ h, g }) => typeof h === 'object' && h.op === DsUdpOp.DATA && h.address === HOST_IP && g.payload.length === h.length + 16 && g.payload[h.length] === 0);
      assert.ok(logins.length >= 3, `our logins on the wire: ${logins.length} of ${toKernel.length} datagrams to the kernel server`);
      assert.equal(fromKernel.length, 0, 'the kernel server never answered');
    });
    // B: the kernel's client against our server.
    const s = ctx.hostStart(process.execPath, [UDPONG, '-b', HOST_IP, '-p', '7175'], { timeoutMs: 200_000, env });
    await sleep(1500);
    ctx.touch('B-go');
    await ctx.waitFile('B-cli.rc', 120_000);
    await sleep(1000);
    await s.kill();
    const b = await settle(s, 10_000);
    save(ctx, 'B-h', b);
    const g = ctx.result('B-cli');
    await t.test('B: the kernel\'s client fails in rconnect before sending; our server sees no login', () => {
      assert.equal(g.rc, 255, `${g.out}\n${g.err}`);
      assert.equal(g.err, 'rconnect: No such file or directory\n');
      assert.equal(b.stdout, '');
    });
  }).finally(() => stopCapture?.());
  log(`udpong: job folder ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
