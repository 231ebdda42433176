// Shared receive queues, memory windows and UC QPs through the native backend in the reference VM,
// and SRQ and memory-window traffic between our soft devices (host, `refvm` netns) and the
// kernel's devices driven by the native backend (guest), both directions:
//   siw boot: the device's attributes (SRQs, no windows) and its refusals (ibv_alloc_mw, a UC
//             QP: the kernel's errno); many QPs on one SRQ with its limit event, server and client
//             in the guest; then our soft iWARP device's client against a native SRQ server on
//             siw0, and a native client on siw0 against our soft iWARP SRQ server.
//   rxe boot: the same SRQ runs on rxe0 and against our soft RoCE device; UC QPs (SEND, RDMA
//             WRITE, an RDMA READ refused); memory windows in the guest (a type 1 window bound by
//             ibv_bind_mw, type 2 windows by BIND_MW work requests, RDMA WRITEs through them,
//             SEND_WITH_INV and LOCAL_INV, a write through an invalidated window failing with
//             the status rxe gives) and the same between our soft RoCE device and rxe0, each side
//             binding in turn; a UC connection through rdma_cm (RDMA_PS_IB, both ends native).
// Programs: test/interop/lib/native-verbs.mjs, srq-peer.mjs, mw-peer.mjs, uc-cm.mjs (one JSON
// line each).
// Needs native/build/rdmacm.node (npm run build:native) besides the VM.
// Env: NATIVE_SRQ_DEVICES (default "siw,rxe").
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, REPO_ROOT, HOST_IP, guestIp, vmSlot } from './lib/refvm.js';
import { WcOpcode, WcStatus } from '../../dist/verbs/index.js';

const ADDON = join(REPO_ROOT, 'native', 'build', 'rdmacm.node');
const DEVICES = (process.env.NATIVE_SRQ_DEVICES || 'siw,rxe').split(',');
const VM = vmSlot(0);
const GUEST_IP = guestIp(VM);
const LIB = join(REPO_ROOT, 'test', 'interop', 'lib');
const CONNS = 4;
const MSGS = 8;
const PORTS = { srq: 7801, mw: 7802, xsrqGuest: 7803, xsrqHost: 7804, xmwGuest: 7805, xmwHost: 7806, uc: 7807 };
const HOST_TIMEOUT_MS = 240_000;
/** Our soft device on the host's side of the tap: siw_rvbr0 is what RDMA_PS_TCP finds there; RoCE is pinned. */
const HOST_ENV = { siw: { RDMACM_BACKEND: 'soft' }, rxe: { RDMACM_BACKEND: 'soft', RDMACM_DEVICE: 'rxe_rvbr0', RDMACM_ROCE_PORT: '' } };

const built = (t) => requireBuilt(t, [ADDON], 'npm run build:native needs libibverbs-dev and librdmacm-dev');

// ------------------------------------------------------------------ the guest job
function jobFor(dev) {
  const k = `${dev}0`;
  const run = `env RDMACM_DEVICE=${k} PEER_DEADLINE_SEC=280 $H/node`;
  const L = '/mnt/src/test/interop/lib';
  const srq = (role, addr, port) => `${run} ${L}/srq-peer.mjs /mnt/src ${role} ${addr} ${port} ${CONNS} ${MSGS}`;
  const mw = (role, addr, port) => `${run} ${L}/mw-peer.mjs /mnt/src ${role} ${addr} ${port}`;
  const uc = (role, addr, port) => `${run} ${L}/uc-cm.mjs /mnt/src ${role} ${addr} ${port}`;
  // pair NAME SRV CLI: the server in the background (READY_FILE: it listens), then the client.
  return `
IP=$REFVM_IP
pair() { local n=$1; rm -f $H/$n-up
  gstart $n-srv 300 env READY_FILE=$H/$n-up $2; local sp=$GPID
  if waitfile $H/$n-up 240; then gtool $n-cli 300 $3; else glog "$n: server not up"; putrc $n-cli 250; fi
  gwait $n-srv $sp; }
mark ready
gtool verbs 120 ${run} ${L}/native-verbs.mjs /mnt/src ${k} $IP
pair srq "${srq('server', '$IP', PORTS.srq)}" "${srq('client', '$IP', PORTS.srq)}"
${dev === 'rxe' ? `pair mw "${mw('target', '$IP', PORTS.mw)}" "${mw('initiator', '$IP', PORTS.mw)}"
pair uc "${uc('server', '$IP', PORTS.uc)}" "${uc('client', '$IP', PORTS.uc)}"` : ''}
# Our soft client on the host -> the native SRQ server here.
gstart xsrq-srv 400 env READY_FILE=$H/xsrq-up ${srq('server', '$IP', PORTS.xsrqGuest)}; sp=$GPID
gwait xsrq-srv $sp
# The native client here -> our soft SRQ server on the host.
waitfile $H/hsrq-up 300 && gtool xsrq-cli 300 ${srq('client', HOST_IP, PORTS.xsrqHost)}
${dev === 'rxe' ? `gstart xmw-tgt 400 env READY_FILE=$H/xmw-up ${mw('target', '$IP', PORTS.xmwGuest)}; sp=$GPID
gwait xmw-tgt $sp
waitfile $H/hmw-up 300 && gtool xmw-ini 300 ${mw('initiator', HOST_IP, PORTS.xmwHost)}` : ''}
mark finished
`;
}

// ------------------------------------------------------------------ checks
const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).join('\n');
const desc = (who, r) => `${who}: exit ${r.rc}\n  stderr: ${tailOf(r.err)}\n  stdout: ${tailOf(r.out, 6)}`;
const jsonOf = (r) => JSON.parse((r.out || '').trim().split('\n').at(-1) || 'null');

/**
 * What the kernel's devices do next with an SRQ, through rdma-core 44 (srq-peer.mjs's probes):
 * rxe (6.1) resizes it (reporting the queue's 2^k - 1), sets the limit back to 0 after the event
 * and raises no QP_LAST_WQE_REACHED; siw arms the limit but answers ibv_query_srq and a resize
 * with EOPNOTSUPP (rdma-core 44's siw provider), and raises no QP_LAST_WQE_REACHED either.
 */
const KERNEL_SRQ = {
  rxe: { limitAfterEvent: 0, resize: 'ok', maxWrAfter: 127, rearm: 'ok', limitRearmed: 1, lastWqe: null },
  siw: { limitAfterEvent: 'EOPNOTSUPP', resize: 'EOPNOTSUPP', maxWrAfter: 'EOPNOTSUPP', rearm: 'ok', limitRearmed: 'EOPNOTSUPP', lastWqe: null },
};

/** An SRQ run: the server's traffic checks and the client's completions. */
function checkSrq(srv, cli, what) {
  const both = `${desc('server', srv)}\n${desc('client', cli)}`;
  assert.equal(cli.rc, 0, `${what}: client\n${both}`);
  assert.equal(srv.rc, 0, `${what}: server\n${both}`);
  const s = jsonOf(srv);
  const c = jsonOf(cli);
  assert.deepEqual(s.problems, [], both);
  assert.equal(s.completions, CONNS * MSGS, 'every receive completed once');
  assert.deepEqual(s.limitEvent, { srqIsOurs: true }, 'SRQ_LIMIT_REACHED, for this SRQ');
  assert.equal(s.destroyAfter, 'ok', 'rdma_destroy_srq once its QPs are gone');
  assert.equal(s.probes.destroyWhileUsed, 'EBUSY', 'not while QPs use it');
  assert.equal(s.probes.postRecvOnSrqQp, 'EINVAL', 'ibv_post_recv on a QP of an SRQ');
  assert.deepEqual(c.statuses, Array.from({ length: CONNS }, () => Array(MSGS).fill(WcStatus.SUCCESS)));
  return s;
}

/**
 * rdma-core 44's rxe hands the kernel's completion flags to the application as they are
 * (rxe_poll_cq copies struct ib_uverbs_wc): the kernel's IB_WC_WITH_INVALIDATE is 1 << 2, which
 * is IBV_WC_IP_CSUM_OK in libibverbs, so a C program on rxe0 sees a SEND_WITH_INV receive without
 * IBV_WC_WITH_INV. Our soft device reports IBV_WC_WITH_INV and the rkey.
 */
const KERNEL_WC_WITH_INVALIDATE = 1 << 2;

function checkMw(tgt, ini, what, kernelTarget) {
  const both = `${desc('target', tgt)}\n${desc('initiator', ini)}`;
  assert.equal(tgt.rc, 0, `${what}: target\n${both}`);
  assert.equal(ini.rc, 0, `${what}: initiator\n${both}`);
  const t = jsonOf(tgt);
  const i = jsonOf(ini);
  assert.deepEqual(t.binds, [1, 2, 3].map(() => ({ status: WcStatus.SUCCESS, opcode: WcOpcode.BIND_MW })), both);
  assert.deepEqual(t.landed, [true, true, true], 'the writes through the three windows landed');
  if (kernelTarget) {
    assert.equal(t.sendWithInv.status, WcStatus.SUCCESS, both);
    assert.equal(t.sendWithInv.withInv, false, 'rxe0 through rdma-core 44: no IBV_WC_WITH_INV');
    assert.equal(t.sendWithInv.wcFlags & KERNEL_WC_WITH_INVALIDATE, KERNEL_WC_WITH_INVALIDATE, 'the kernel\'s IB_WC_WITH_INVALIDATE bit, passed through');
  } else {
    assert.deepEqual(t.sendWithInv, { status: WcStatus.SUCCESS, wcFlags: t.sendWithInv.wcFlags, withInv: true, rkeyIsK2: true }, 'the receive of SEND_WITH_INV names the rkey');
  }
  assert.deepEqual(t.localInv, { status: WcStatus.SUCCESS, opcode: WcOpcode.LOCAL_INV });
  assert.equal(t.untouched, true, 'nothing written through the invalidated window');
  assert.deepEqual(i.writes, [WcStatus.SUCCESS, WcStatus.SUCCESS, WcStatus.SUCCESS]);
  // rxe_resp.c check_rkey: an invalidated window's rkey is a remote access error, NAKed.
  assert.equal(i.afterInvalidation, WcStatus.REM_ACCESS_ERR, `the write through the invalidated window\n${both}`);
  assert.equal(t.afterInvalidation, WcStatus.WR_FLUSH_ERR, 'the target\'s QP went to ERR: its receives flush');
}

for (const dev of DEVICES) {
  test(`native backend on the kernel's ${dev}: SRQ${dev === 'rxe' ? ', UC and memory windows' : ''}, and SRQ${dev === 'rxe' ? '/MW' : ''} traffic with our soft ${dev === 'rxe' ? 'RoCE' : 'iWARP'} device both ways`, async (t) => {
    if (!(await requireRefvm(t)) || !built(t)) return;
    const k = `${dev}0`;
    const node = process.execPath;
    const hostEnv = { ...HOST_ENV[dev], PEER_DEADLINE_SEC: '200' };
    const host = {};
    const res = await withGuest({ name: `native-srq-${dev}`, rdma: dev, vm: VM, job: jobFor(dev), timeoutSec: 2400, src: REPO_ROOT, node: true }, async (ctx) => {
      const hostRun = (name, args) => ctx.hostRun(node, args, { timeoutMs: HOST_TIMEOUT_MS, env: hostEnv }).then((r) => (host[name] = r));
      await ctx.waitFile('xsrq-up', 1_500_000);
      await hostRun('xsrq-cli', [join(LIB, 'srq-peer.mjs'), REPO_ROOT, 'client', GUEST_IP, String(PORTS.xsrqGuest), String(CONNS), String(MSGS)]);
      const ready = join(ctx.jobDir, 'hsrq-up');
      const srv = ctx.hostStart(node, [join(LIB, 'srq-peer.mjs'), REPO_ROOT, 'server', HOST_IP, String(PORTS.xsrqHost), String(CONNS), String(MSGS)], { timeoutMs: HOST_TIMEOUT_MS + 300_000, env: { ...hostEnv, READY_FILE: ready } });
      host['xsrq-srv'] = await srv.done;
      if (dev === 'rxe') {
        await ctx.waitFile('xmw-up', 600_000);
        await hostRun('xmw-ini', [join(LIB, 'mw-peer.mjs'), REPO_ROOT, 'initiator', GUEST_IP, String(PORTS.xmwGuest)]);
        const tgt = ctx.hostStart(node, [join(LIB, 'mw-peer.mjs'), REPO_ROOT, 'target', HOST_IP, String(PORTS.xmwHost)], { timeoutMs: HOST_TIMEOUT_MS + 300_000, env: { ...hostEnv, READY_FILE: join(ctx.jobDir, 'hmw-up') } });
        host['xmw-tgt'] = await tgt.done;
      }
      await ctx.waitFile('finished', 900_000);
    });
    t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
    const guest = (n) => {
      const rc = res.read(`${n}.rc`);
      return { rc: rc === null ? null : Number(rc.trim()), out: res.read(`${n}.out`) ?? '', err: res.read(`${n}.err`) ?? '' };
    };
    const hostR = (n) => {
      const r = host[n];
      return r ? { rc: r.code, out: r.stdout, err: `${r.stderr}${r.timedOut ? '\n(TIMED OUT)' : ''}` } : { rc: null, out: '', err: 'not run' };
    };

    await t.test(`${k}'s attributes, and what it refuses`, () => {
      const r = guest('verbs');
      assert.equal(r.rc, 0, desc('native-verbs.mjs', r));
      const j = jsonOf(r);
      assert.equal(j.device, k);
      assert.ok(j.attr.maxSrq > 0 && j.attr.maxSrqWr > 0 && j.attr.maxSrqSge > 0, `the kernel's SRQ limits, not zeroes: ${r.out}`);
      if (dev === 'siw') {
        // siw has no memory windows (no alloc_mw: libibverbs' EOPNOTSUPP) and only RC QPs
        // (siw_create_qp: EOPNOTSUPP).
        assert.deepEqual(j.attr, { ...j.attr, maxMw: 0, memWindow: false, type2a: false, type2b: false });
        assert.deepEqual(j.allocMw, ['EOPNOTSUPP', 'EOPNOTSUPP']);
        assert.equal(j.createUc, 'EOPNOTSUPP');
      } else {
        assert.ok(j.attr.maxMw > 0 && j.attr.memWindow && j.attr.type2b, `rxe's windows: ${r.out}`);
        assert.deepEqual(j.allocMw, ['ok', 'ok']);
        assert.equal(j.createUc, 'ok');
        assert.equal(j.ucOk, true, r.out);
        assert.deepEqual(j.ucCompletions, [
          { wrId: 1, status: WcStatus.SUCCESS, opcode: WcOpcode.RECV, byteLen: 7, qp: 'B' },
          { wrId: 2, status: WcStatus.SUCCESS, opcode: WcOpcode.SEND, byteLen: j.ucCompletions[1].byteLen, qp: 'A' },
          { wrId: 3, status: WcStatus.SUCCESS, opcode: WcOpcode.RDMA_WRITE, byteLen: j.ucCompletions[2].byteLen, qp: 'A' },
        ]);
        assert.equal(j.ucReceived, 'uc send');
        assert.equal(j.ucWritten, 'uc write');
        // UC carries no RDMA READ: rdma-core 44's rxe takes the post, the kernel's requester
        // completes it in error (rxe_req.c: no next opcode for it, IB_WC_LOC_QP_OP_ERR).
        assert.equal(j.ucRead, 'ok', r.out);
        assert.equal(j.ucReadStatus, WcStatus.LOC_QP_OP_ERR, r.out);
      }
    });

    await t.test(`${CONNS} QPs on one SRQ of ${k}, the limit event (both ends native)`, () => {
      const s = checkSrq(guest('srq-srv'), guest('srq-cli'), 'native <-> native');
      t.diagnostic(`${k} SRQ probes: ${JSON.stringify(s.probes)}`);
      assert.deepEqual(s.probes, { ...s.probes, ...KERNEL_SRQ[dev] }, `what ${k} does with the SRQ`);
    });

    await t.test(`our soft ${dev === 'rxe' ? 'RoCE' : 'iWARP'} client (host) -> native SRQ server on ${k}`, () => {
      checkSrq(guest('xsrq-srv'), hostR('xsrq-cli'), 'host client -> guest SRQ server');
    });

    await t.test(`native client on ${k} -> our soft ${dev === 'rxe' ? 'RoCE' : 'iWARP'} SRQ server (host)`, () => {
      checkSrq(hostR('xsrq-srv'), guest('xsrq-cli'), 'guest client -> host SRQ server');
    });

    if (dev === 'rxe') {
      await t.test('memory windows on rxe0, both ends native: bind, write through, SEND_WITH_INV, LOCAL_INV, the write after it fails', () => {
        checkMw(guest('mw-srv'), guest('mw-cli'), 'native <-> native', true);
      });
      await t.test('a UC connection through rdma_cm on RDMA_PS_IB, both ends native: an RDMA WRITE and a SEND arrive', () => {
        const srv = guest('uc-srv');
        const cli = guest('uc-cli');
        const both = `${desc('server', srv)}\n${desc('client', cli)}`;
        assert.equal(cli.rc, 0, both);
        assert.equal(srv.rc, 0, both);
        const j = jsonOf(srv);
        assert.equal(j.qpType, 3, 'IBV_QPT_UC');
        assert.equal(j.written, 'uc cm write');
        assert.equal(j.sent, 'uc cm send');
      });
      await t.test('windows bound on rxe0 (native), written through by our soft RoCE device', () => {
        checkMw(guest('xmw-tgt'), hostR('xmw-ini'), 'host initiator -> guest target', true);
      });
      await t.test('windows bound by our soft RoCE device, written through by rxe0 (native)', () => {
        checkMw(hostR('xmw-tgt'), guest('xmw-ini'), 'guest initiator -> host target', false);
      });
    }
    assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
  });
}
