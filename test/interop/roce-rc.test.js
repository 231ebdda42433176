// The connected tools on our soft RoCEv2 device (RC QPs, the IB CM on QP1) against the Linux
// kernel's rdma_rxe and rdma-core's real tools in the reference VM. Tap network: our side runs on
// the host inside the `refvm` netns (10.77.0.1, device rxe_rvbr0, pinned with RDMACM_DEVICE since
// RDMA_PS_TCP would otherwise pick iWARP), the guest is 10.77.0.2 on rxe0. The kernel rxe sends to
// UDP port 4791, so our side uses the real port. One VM boot serves every scenario, in order; each
// scenario is one of two shapes:
//   K  the kernel's tool is the server (guest), ours the client (host)
//   O  ours is the server (host), the kernel's tool the client (guest)
// Scenarios: rping -V -v at several sizes (26 .. 65535), ucmatose -c 10 and with multi-packet
// SENDs, rstream and riostream (custom sizes, the -T modes that apply to rsockets),
// rdma_server/rdma_client, a closed port (REJECTED, reason 8: invalid service ID) each way, the
// kernel's cmtime client (rdma-core 44, the legacy CLI: it only needs a peer that accepts) against
// our ucmatose server, a kernel peer killed mid-run, loss, the datagrams arriving at another
// process of ours, and IPv6 (unique local addresses the test adds on both sides).
// Every scenario checks both sides' exit codes and their stdout, exactly where the tools print
// deterministic lines and line by line in shape where they print timings.
// After each scenario the guest saves rxe0's hw counters (counters-<scenario> in the job folder,
// quoted in failures), and after a lossy one its qdisc statistics (tc-<scenario>: what netem
// dropped, and how many DREQs went round it); the host captures the bridge (roce.pcap) for
// diagnosis.
//
// Env: ROCE_RC_TIMEOUT_SEC (deadline of one host-side run, default 90); ROCE_RC_ONLY (a regular
// expression: run only the scenarios whose name matches, e.g. `^rping`).
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { withGuest, requireRefvm, requireBuilt, netnsRun, REPO_ROOT, HOST_IP, REFVM_HOME, run, log, settle, saveRun as save, hangOf } from './lib/refvm.js';
import { rpingStdout, assertRpingStdout, unexpectedStderr } from './lib/rping-pattern.js';
import { netemSparingDreq } from '../lib/tools.js';

const GUEST_IP = '10.77.0.2';
const HOST_IP6 = 'fd77::1';
const GUEST_IP6 = 'fd77::2';
const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
const NETOPT = join(REPO_ROOT, 'native', 'build', 'netopt.node');
const HOST_TIMEOUT_MS = Number(process.env.ROCE_RC_TIMEOUT_SEC || 90) * 1000;
const GUEST_TIMEOUT_SEC = 120;
const ENV = { RDMACM_ROCE_PORT: '', RDMACM_DEVICE: 'rxe_rvbr0' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const lines = (...l) => l.map((x) => `${x}\n`).join('');
const tailOf = (s, n = 12) => (s || '').trimEnd().split('\n').slice(-n).map((l) => (l.length > 200 ? `${l.slice(0, 200)}…(${l.length} bytes)` : l)).join('\n');
const hostDesc = (what, r) => r ? `host ${what}: exit ${r.code}${r.timedOut ? ' TIMED OUT' : ''} in ${r.ms} ms\n  stderr: ${tailOf(r.stderr)}\n  stdout: ${tailOf(r.stdout)}` : `host ${what}: not run`;
const guestDesc = (what, g) => `guest ${what}: exit ${g.rc}${g.rc === 124 ? ' (TIMED OUT)' : ''}\n  stderr: ${tailOf(g.err)}\n  stdout: ${tailOf(g.out)}${hangOf(g)}`;

// ------------------------------------------------------------------ what the tools print
const UCM_SERVER_OK = lines('cmatose: starting server', 'initiating data transfers', 'completing sends', 'receiving data transfers',
  'data transfers complete', 'cmatose: disconnecting', 'disconnected', 'test complete', 'return status 0');
const UCM_SERVER_NODATA_OK = lines('cmatose: starting server', 'cmatose: disconnecting', 'disconnected', 'test complete', 'return status 0');
const UCM_CLIENT_OK = lines('cmatose: starting client', 'cmatose: connecting', 'receiving data transfers', 'sending replies',
  'data transfers complete', 'test complete', 'return status 0');
const UCM_CLIENT_REJECTED = lines('cmatose: starting client', 'cmatose: connecting', 'cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8',
  'test complete', 'return status 8');
const RSTREAM_HEADER = 'name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer';
// rstream's size_str (one decimal below 10 units) and cnt_str (integer division)
function sizeStr(n) {
  const [base, mag] = n >= 2 ** 30 ? [2 ** 30, 'g'] : n >= 2 ** 20 ? [2 ** 20, 'm'] : n >= 2 ** 10 ? [2 ** 10, 'k'] : [1, ''];
  const whole = Math.floor(n / base), fraction = whole < 10 ? Math.floor(((n % base) * 10) / base) : 0;
  return fraction ? `${whole}.${fraction}${mag}` : `${whole}${mag}`;
}
const cntStr = (n) => (n >= 1e9 ? `${Math.floor(n / 1e9)}b` : n >= 1e6 ? `${Math.floor(n / 1e6)}m` : n >= 1e3 ? `${Math.floor(n / 1e3)}k` : `${n}`);
function assertStreamOut(out, size, count, iters, what, both) {
  const rows = out.split('\n');
  assert.equal(rows.at(-1), '', `${what}: stdout ends with a newline\n${both}`);
  assert.equal(rows[0], RSTREAM_HEADER, `${what}: header\n${both}`);
  assert.equal(rows.length, 3, `${what}: one result row\n${both}`);
  const re = new RegExp(`^custom    ${sizeStr(size).padEnd(8)}${cntStr(count).padEnd(8)}${cntStr(iters).padEnd(8)}${sizeStr(2 * size * count * iters).replace('.', '\\.').padEnd(8)}\\s*\\d+\\.\\d\\ds\\s*\\d+\\.\\d\\d\\s*\\d+\\.\\d\\d$`);
  assert.match(rows[1], re, `${what}: result row\n${both}`);
}

// ------------------------------------------------------------------ the scenarios
// kind K: kernel server `kernel`, our client `ours`; kind O: our server `ours`, kernel client `kernel`.
// `port`: the RDMA_PS_TCP port the server listens on (null: nothing listens). `check(r, g, both)`
// with r = our result, g = the kernel's {rc, out, err}.
const SCEN = [];
let nextPort = 18000;
const add = (s) => SCEN.push({ port: nextPort++, ...s });

function addRping({ size, count, prefix = '', env, guestNetem, what = '', hostIp = HOST_IP, guestIp = GUEST_IP }) {
  const a = (ip, port) => ['-a', ip, '-p', String(port), '-C', String(count), '-S', String(size), '-V', '-v'];
  add({
    name: `${prefix}rping-S${size}-C${count}-K`, kind: 'K', env, guestNetem, title: `rping -S ${size} -C ${count} -V -v: kernel server <- our client${what}`,
    kernel: (p) => ['rping', '-s', ...a(guestIp, p)], ours: (p) => [cli('rping'), '-c', ...a(guestIp, p)],
    check(r, g, both) {
      assert.equal(r.code, 0, `our rping client\n${both}`);
      assert.equal(g.rc, 0, `kernel rping server\n${both}`);
      assertRpingStdout(r.stdout, rpingStdout({ count, size, role: 'client' }), 'our rping -c (the data the kernel server wrote back)');
      assertRpingStdout(g.out, rpingStdout({ count, size, role: 'server' }), 'kernel rping -s (the data it read from our client)');
      assert.deepEqual(unexpectedStderr(g.err, 'server'), [], `kernel rping -s stderr\n${both}`);
      assert.match(r.stderr, /^(client DISCONNECT EVENT\.\.\.\n)?$/, `our rping -c stderr\n${both}`);
    },
  });
  add({
    name: `${prefix}rping-S${size}-C${count}-O`, kind: 'O', env, guestNetem, title: `rping -S ${size} -C ${count} -V -v: our server <- kernel client${what}`,
    ours: (p) => [cli('rping'), '-s', ...a(hostIp, p)], kernel: (p) => ['rping', '-c', ...a(hostIp, p)],
    check(r, g, both) {
      assert.equal(g.rc, 0, `kernel rping client\n${both}`);
      assert.equal(r.code, 0, `our rping server\n${both}`);
      assertRpingStdout(g.out, rpingStdout({ count, size, role: 'client' }), 'kernel rping -c (the data our server wrote back)');
      assertRpingStdout(r.stdout, rpingStdout({ count, size, role: 'server' }), 'our rping -s (the data it read from the kernel client)');
      assert.deepEqual(unexpectedStderr(g.err, 'client'), [], `kernel rping -c stderr\n${both}`);
      assert.equal(r.stderr, 'server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n', `our rping -s stderr\n${both}`);
    },
  });
}
for (const x of [{ size: 26, count: 3 }, { size: 1024, count: 3 }, { size: 4096, count: 3 }, { size: 65535, count: 3 }, { size: 64, count: 10 }]) addRping(x);

add({
  name: 'ucmatose-c10-K', kind: 'K', title: 'ucmatose -c 10: kernel server <- our client',
  kernel: (p) => ['ucmatose', '-b', GUEST_IP, '-p', String(p), '-c', '10'],
  ours: (p) => [cli('ucmatose'), '-s', GUEST_IP, '-b', HOST_IP, '-p', String(p), '-c', '10'],
  check(r, g, both) {
    assert.equal(r.code, 0, both); assert.equal(r.stdout, UCM_CLIENT_OK, both); assert.equal(r.stderr, '', both);
    assert.equal(g.rc, 0, both); assert.equal(g.out, UCM_SERVER_OK, both); assert.equal(g.err, '', both);
  },
});
add({
  name: 'ucmatose-c10-O', kind: 'O', title: 'ucmatose -c 10: our server <- kernel client',
  ours: (p) => [cli('ucmatose'), '-b', HOST_IP, '-p', String(p), '-c', '10'],
  kernel: (p) => ['ucmatose', '-s', HOST_IP, '-b', GUEST_IP, '-p', String(p), '-c', '10'],
  check(r, g, both) {
    assert.equal(g.rc, 0, both); assert.equal(g.out, UCM_CLIENT_OK, both); assert.equal(g.err, '', both);
    assert.equal(r.code, 0, both); assert.equal(r.stdout, UCM_SERVER_OK, both); assert.equal(r.stderr, '', both);
  },
});
add({
  name: 'closed-port-K', kind: 'K', port: null, title: 'a closed port on the kernel side: our ucmatose client is REJECTED (8)',
  kernel: null, ours: () => [cli('ucmatose'), '-s', GUEST_IP, '-b', HOST_IP, '-p', '18999'],
  check(r, g, both) {
    assert.equal(r.code, 8, both); assert.equal(r.stdout, UCM_CLIENT_REJECTED, both); assert.equal(r.stderr, '', both);
    assert.ok(r.ms < 20_000, `the REJ comes at once\n${both}`);
  },
});
add({
  name: 'closed-port-rping-K', kind: 'K', port: null, title: 'a closed port on the kernel side: our rping client is REJECTED (8)',
  kernel: null, ours: () => [cli('rping'), '-c', '-a', GUEST_IP, '-p', '18999', '-C', '1'],
  check(r, g, both) {
    assert.equal(r.code, 255, both); assert.equal(r.stdout, '', both);
    assert.equal(r.stderr, 'cma event RDMA_CM_EVENT_REJECTED, error 8\nwait for CONNECTED state 4\nconnect error -1\n', both);
  },
});
// Our side answers CM MADs only while one of our processes runs on the device: a REQ for a port
// nobody listens on is refused by the process that receives it (here a listening rping -s).
add({
  name: 'closed-port-O', kind: 'O', serverStays: true, title: 'a closed port on our side: the kernel ucmatose client is REJECTED (8)',
  ours: (p) => [cli('rping'), '-s', '-a', HOST_IP, '-p', String(p)], kernel: () => ['ucmatose', '-s', HOST_IP, '-b', GUEST_IP, '-p', '18998'],
  check(r, g, both) {
    assert.equal(g.rc, 8, both); assert.equal(g.out, UCM_CLIENT_REJECTED, both); assert.equal(g.err, '', both);
    assert.equal(r.stdout, '', `our rping -s saw no connection\n${both}`);
  },
});
add({
  name: 'rdma_server-K', kind: 'K', title: 'kernel rdma_server <- our rdma_client',
  kernel: (p) => ['rdma_server', '-s', GUEST_IP, '-p', String(p)], ours: (p) => [cli('rdma_client'), '-s', GUEST_IP, '-p', String(p)],
  check(r, g, both) {
    assert.equal(r.code, 0, both); assert.equal(r.stdout, 'rdma_client: start\nrdma_client: end 0\n', both);
    assert.equal(g.rc, 0, both); assert.equal(g.out, 'rdma_server: start\nrdma_server: end 0\n', both);
  },
});
add({
  name: 'rdma_server-O', kind: 'O', title: 'our rdma_server <- kernel rdma_client',
  ours: (p) => [cli('rdma_server'), '-s', HOST_IP, '-p', String(p)], kernel: (p) => ['rdma_client', '-s', HOST_IP, '-p', String(p)],
  check(r, g, both) {
    assert.equal(g.rc, 0, both); assert.equal(g.out, 'rdma_client: start\nrdma_client: end 0\n', both);
    assert.equal(r.code, 0, both); assert.equal(r.stdout, 'rdma_server: start\nrdma_server: end 0\n', both);
  },
});

// rstream / riostream: custom tests (one connection, one row); the -T modes that apply to rsockets.
// Not `rstream -T a`: its do_poll() fails on POLLHUP even when data is still buffered, and
// rsocket.c marks a socket disconnected as soon as it processes the peer's DISCONNECT control
// message, which follows the last data at once; so whichever side still has data to read when
// the other closes exits 16, kernel against kernel alike.
const streamRuns = {
  rstream: [
    { size: 4096, count: 100, T: [] },
    { size: 64, count: 1, iters: 500, T: [] },
    { size: 64, count: 200, T: ['-T', 'b'] },
    { size: 1000, count: 100, T: ['-T', 'n'] },
    { size: 1048576, count: 4, T: ['-T', 'v'] },
    { size: 16384, count: 50, T: ['-T', 'r'] },
  ],
  riostream: [
    { size: 4096, count: 100, T: [] },
    { size: 65536, count: 50, T: ['-T', 'b'] },
    { size: 100000, count: 20, T: ['-T', 'v'] },
    { size: 8192, count: 100, T: ['-T', 'a'] },
    { size: 1000, count: 100, T: ['-T', 'n'] },
  ],
};
function addStream(tool, { size, count, T, iters, prefix = '', env, guestNetem, what = '', hostIp = HOST_IP, guestIp = GUEST_IP }) {
  const opts = ['-S', String(size), '-C', String(count), ...(iters ? ['-I', String(iters)] : []), ...T];
  const tag = `${prefix}${tool}-S${size}${iters ? `-I${iters}` : ''}${T.length ? `-T${T[1]}` : ''}`;
  const check = (r, g, both) => {
    assert.equal(r.code, 0, `ours\n${both}`); assert.equal(g.rc, 0, `kernel\n${both}`);
    assertStreamOut(r.stdout, size, count, iters ?? 1, 'ours', both);
    assertStreamOut(g.out, size, count, iters ?? 1, 'kernel', both);
    assert.equal(r.stderr, '', both); assert.equal(g.err, '', both);
  };
  add({
    name: `${tag}-K`, kind: 'K', env, guestNetem, title: `${tool} ${opts.join(' ')}: kernel server <- our client${what}`,
    kernel: (p) => [tool, '-b', guestIp, '-p', String(p), ...opts], ours: (p) => [cli(tool), '-s', guestIp, '-b', hostIp, '-p', String(p), ...opts], check,
  });
  add({
    name: `${tag}-O`, kind: 'O', env, guestNetem, title: `${tool} ${opts.join(' ')}: our server <- kernel client${what}`,
    ours: (p) => [cli(tool), '-b', hostIp, '-p', String(p), ...opts], kernel: (p) => [tool, '-s', hostIp, '-b', guestIp, '-p', String(p), ...opts], check,
  });
}
for (const [tool, runs] of Object.entries(streamRuns)) for (const x of runs) addStream(tool, x);

// Loss: our side's sends through the device's own impairment (seeded); for rping the kernel's
// too, through netem on the guest. Both responders NAK sequence errors and answer duplicates,
// both requesters go back on NAKs and on timeouts. (Not for rstream with loss both ways: the
// kernel's requester then mostly recovers by its 2 s timeout, since rxe ignores a second
// sequence NAK until a whole work request is acknowledged, and a run takes minutes.) The CM's
// DREQs pass untouched both ways: rping's client sends its DREQ once and exits (the kernel's CM
// cancels the resend when the id is destroyed), so a lost one leaves the server waiting for a
// message that never comes, or ending in RETRY_EXC_ERR on a SEND whose ACK was lost too.
const lossy = (seed, both = true) => ({
  prefix: 'lossy-', what: both ? ' (3% of the datagrams each way lost, 1% duplicated, 2% reordered)' : ' (3% of our datagrams lost, 1% duplicated, 2% reordered)',
  env: { RDMACM_ROCE_IMPAIR: `loss=0.03,dup=0.01,reorder=0.02,delay=1,seed=${seed},spare=dreq` },
  guestNetem: both ? 'loss 3% duplicate 1% delay 1ms reorder 98%' : undefined,
});
addRping({ size: 4096, count: 10, ...lossy(1) });
addStream('rstream', { size: 65536, count: 50, T: ['-T', 'v'], ...lossy(2, false) });

// Multi-packet SENDs (first/middle/last) both ways, on two connections.
add({
  name: 'ucmatose-S100000-K', kind: 'K', title: 'ucmatose -c 2 -C 20 -S 100000: kernel server <- our client',
  kernel: (p) => ['ucmatose', '-b', GUEST_IP, '-p', String(p), '-c', '2', '-C', '20', '-S', '100000'],
  ours: (p) => [cli('ucmatose'), '-s', GUEST_IP, '-b', HOST_IP, '-p', String(p), '-c', '2', '-C', '20', '-S', '100000'],
  check(r, g, both) {
    assert.equal(r.code, 0, both); assert.equal(r.stdout, UCM_CLIENT_OK, both); assert.equal(r.stderr, '', both);
    assert.equal(g.rc, 0, both); assert.equal(g.out, UCM_SERVER_OK, both); assert.equal(g.err, '', both);
  },
});
add({
  name: 'ucmatose-S100000-O', kind: 'O', title: 'ucmatose -c 2 -C 20 -S 100000: our server <- kernel client',
  ours: (p) => [cli('ucmatose'), '-b', HOST_IP, '-p', String(p), '-c', '2', '-C', '20', '-S', '100000'],
  kernel: (p) => ['ucmatose', '-s', HOST_IP, '-b', GUEST_IP, '-p', String(p), '-c', '2', '-C', '20', '-S', '100000'],
  check(r, g, both) {
    assert.equal(g.rc, 0, both); assert.equal(g.out, UCM_CLIENT_OK, both); assert.equal(g.err, '', both);
    assert.equal(r.code, 0, both); assert.equal(r.stdout, UCM_SERVER_OK, both); assert.equal(r.stderr, '', both);
  },
});

// The kernel's rping server killed (SIGKILL) mid-run: its kernel destroys the id and sends a
// DREQ; our client sees DISCONNECTED and ends on its own with the pings so far intact.
add({
  name: 'rping-killed-K', kind: 'K', killAfter: { re: '^server ping data', n: 20 }, title: 'the kernel rping server killed mid-run: our client is DISCONNECTED, exits 0',
  kernel: (p) => ['rping', '-s', '-a', GUEST_IP, '-p', String(p), '-v'], ours: (p) => [cli('rping'), '-c', '-a', GUEST_IP, '-p', String(p), '-v'],
  check(r, g, both) {
    assert.equal(g.rc, 137, `the kernel rping was killed\n${both}`);
    assert.equal(r.code, 0, both);
    assert.match(r.stderr, /^client DISCONNECT EVENT\.\.\.\nwait for RDMA_(READ|WRITE)_(ADV|COMPLETE) state 10\n$/, both);
    const n = r.stdout.split('\n').length - 1;
    assert.ok(n >= 20, both);
    assertRpingStdout(r.stdout, rpingStdout({ count: n, role: 'client' }), 'our rping -c');
  },
});

// The kernel's rping client killed mid-run: its DREQ ends our server's loop (exit 0). Or, when
// our server's RDMA READ of the client's buffer is in flight as the process dies: the kernel
// releases a dead process's verbs objects newest first, so the client's MRs go before its QP, and
// for that moment the QP answers the READ with a remote access error NAK. Our server then ends as
// rdma-core's rping server does on a failed completion: "cq completion failed status 10"
// (IBV_WC_REM_ACCESS_ERR), the READ wait's state ERROR (11), exit 255.
const KILLED_O_REM_ACCESS = 'cq completion failed status 10\nwait for RDMA_READ_COMPLETE state 11\nrping server failed: -1\n';
add({
  name: 'rping-killed-O', kind: 'O', killAfter: { re: '^ping data', n: 20 }, title: 'the kernel rping client killed mid-run: our server is DISCONNECTED, exits 0 (or, its READ caught by the teardown, ends on the remote access error with 255)',
  ours: (p) => [cli('rping'), '-s', '-a', HOST_IP, '-p', String(p), '-v'], kernel: (p) => ['rping', '-c', '-a', HOST_IP, '-p', String(p), '-v'],
  check(r, g, both) {
    assert.equal(g.rc, 137, `the kernel rping was killed\n${both}`);
    if (r.code === 255) assert.equal(r.stderr, KILLED_O_REM_ACCESS, both);
    else {
      assert.equal(r.code, 0, both);
      assert.match(r.stderr, /^server DISCONNECT EVENT\.\.\.\nwait for RDMA_(READ|WRITE)_(ADV|COMPLETE) state 10\n$/, both);
    }
    const n = r.stdout.split('\n').length - 1;
    assert.ok(n >= 19, both);
    assertRpingStdout(r.stdout, rpingStdout({ count: n, role: 'server' }), 'our rping -s');
  },
});

// Our server's process is not the one whose socket receives the datagrams (see bystander above).
for (const base of ['rping-S65535-C3-O', 'ucmatose-c10-O', 'rstream-S1048576-Tv-O']) {
  const o = SCEN.find((x) => x.name === base);
  add({ ...o, name: `fwd-${base}`, bystander: true, title: `${o.title}, through another process of ours` });
}

// IPv6 (RoCEv2 over IPv6: GIDs, CMA header, ICRC with the IPv6 header's masked fields), on
// unique local addresses the test adds to both sides.
const v6 = { prefix: 'v6-', what: ' (IPv6)', hostIp: HOST_IP6, guestIp: GUEST_IP6 };
addRping({ size: 4096, count: 3, ...v6 });
addRping({ size: 65535, count: 3, ...v6 });
addStream('rstream', { size: 65536, count: 50, T: ['-T', 'v'], ...v6 });
add({
  name: 'v6-ucmatose-c10-K', kind: 'K', title: 'ucmatose -c 10: kernel server <- our client (IPv6)',
  kernel: (p) => ['ucmatose', '-b', GUEST_IP6, '-p', String(p), '-c', '10'],
  ours: (p) => [cli('ucmatose'), '-s', GUEST_IP6, '-b', HOST_IP6, '-p', String(p), '-c', '10'],
  check(r, g, both) {
    assert.equal(r.code, 0, both); assert.equal(r.stdout, UCM_CLIENT_OK, both); assert.equal(r.stderr, '', both);
    assert.equal(g.rc, 0, both); assert.equal(g.out, UCM_SERVER_OK, both); assert.equal(g.err, '', both);
  },
});
add({
  name: 'v6-ucmatose-c10-O', kind: 'O', title: 'ucmatose -c 10: our server <- kernel client (IPv6)',
  ours: (p) => [cli('ucmatose'), '-b', HOST_IP6, '-p', String(p), '-c', '10'],
  kernel: (p) => ['ucmatose', '-s', HOST_IP6, '-b', GUEST_IP6, '-p', String(p), '-c', '10'],
  check(r, g, both) {
    assert.equal(g.rc, 0, both); assert.equal(g.out, UCM_CLIENT_OK, both); assert.equal(g.err, '', both);
    assert.equal(r.code, 0, both); assert.equal(r.stdout, UCM_SERVER_OK, both); assert.equal(r.stderr, '', both);
  },
});

// The guest's cmtime is rdma-core 44's (legacy CLI: `-s server`, a plain rdma_cm client that
// connects -c RC QPs, then disconnects them); ours has the current CLI with its TCP controller,
// so the two cmtimes cannot meet. Our ucmatose server with -S 0 accepts and disconnects.
add({
  name: 'cmtime-c20-O', kind: 'O', title: 'kernel cmtime (legacy) -c 20 -> our ucmatose server -c 20 -S 0',
  ours: (p) => [cli('ucmatose'), '-b', HOST_IP, '-p', String(p), '-c', '20', '-S', '0'],
  kernel: (p) => ['cmtime', '-s', HOST_IP, '-b', GUEST_IP, '-p', String(p), '-c', '20'],
  check(r, g, both) {
    assert.equal(g.rc, 0, both); assert.equal(g.err, '', both);
    const steps = ['create id', 'bind addr', 'resolve addr', 'resolve route', 'create qp', 'connect', 'disconnect', 'destroy'];
    const expect = ['creating id', 'binding source address', 'resolving address', 'resolving route', 'creating qp', 'connecting',
      'disconnecting', 'destroying id', 'step              total ms     max ms     min us  us / conn'];
    const out = g.out.trimEnd().split('\n');
    assert.deepEqual(out.slice(0, expect.length), expect, both);
    assert.equal(out.length, expect.length + steps.length, both);
    steps.forEach((s, i) => assert.match(out[expect.length + i], new RegExp(`^${s.padEnd(13)}:(\\s+-?\\d+\\.\\d\\d){4}$`), both));
    assert.equal(r.code, 0, both); assert.equal(r.stdout, UCM_SERVER_NODATA_OK, both); assert.equal(r.stderr, '', both);
  },
});

const ONLY = process.env.ROCE_RC_ONLY ? new RegExp(process.env.ROCE_RC_ONLY) : null;
const RUN = ONLY ? SCEN.filter((s) => ONLY.test(s.name)) : SCEN;

// ------------------------------------------------------------------ the guest's sequence
const q = (a) => a.map((x) => (/^[\w./:-]+$/.test(x) ? x : `'${x.replace(/'/g, `'\\''`)}'`)).join(' ');
const guestHelpers = `
counters() { for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "\${f##*/} $(cat $f)"; done > $H/counters-$1 2>&1; }
# gbg NAME SECS CMD...: CMD in the background with a deadline; NAME.rc is written when it has exited
gbg() { local n=$1 t=$2; shift 2; glog "$n (background): $*"
  ( timeout -k 5 "$t" stdbuf -oL "$@" > "$H/$n.out" 2> "$H/$n.err"; rc=$?; putrc "$n" $rc; glog "$n: exit $rc" ) & }
# waitout FILE REGEX N SECS: until FILE has N lines matching REGEX (1 on timeout)
waitout() { local i=0; while [ "$(grep -cE "$2" "$1" 2>/dev/null)" -lt "$3" ]; do sleep 0.2; i=$((i+1)); [ $i -ge $(($4*5)) ] && return 1; done; return 0; }
# cmlisten PORT SECS: an rdma_cm id listens on PORT
cmlisten() { local i=0; until rdma res show cm_id 2>/dev/null | grep LISTEN | grep -qE ":$1( |$)"; do sleep 0.2; i=$((i+1)); [ $i -ge $(($2*5)) ] && return 1; done; return 0; }
# finish SCENARIO TOOL: after the host's hdone-SCENARIO, give the kernel's tool 15 s to end on its
# own; if it has not, note where it is in the kernel (SCENARIO-k-stack) and end it
finish() { waitfile $H/hdone-$1 300; local g=0 c
  while [ ! -e $H/$1-k.rc ] && [ $g -lt 75 ]; do sleep 0.2; g=$((g+1)); done
  [ -e $H/$1-k.rc ] && return 0
  glog "$1-k: still running 15 s after the host's side ended (see $1-k-stack); ending it"
  for c in $(pgrep -x $2); do echo "pid $c state $(cut -d' ' -f3 /proc/$c/stat) wchan $(cat /proc/$c/wchan)"; timeout 5 cat /proc/$c/stack; done > $H/$1-k-stack 2>&1
  pkill -x $2; waitfile $H/$1-k.rc 15; }
`;
function guestStep(s) {
  const step = guestStepBody(s);
  if (!s.guestNetem) return step;
  // The kernel's datagrams impaired too (netem on the guest's egress, sparing the CM's DREQs as
  // our side's impairment does), for this scenario only.
  const tcSteps = netemSparingDreq('eth0', s.guestNetem.split(' ')).map((a) => `tc ${a.join(' ')}`).join(' && ');
  return `
modprobe -a sch_prio sch_netem cls_u32 2>/dev/null; { ${tcSteps}; } || glog "${s.name}: netem not available"
${step}
{ tc -s class show dev eth0; tc -s qdisc show dev eth0; } > $H/tc-${s.name} 2>&1
tc qdisc del dev eth0 root 2>/dev/null`;
}
function guestStepBody(s) {
  const n = s.name;
  if (s.kind === 'K') {
    if (!s.kernel) return `mark ready-${n}; waitfile $H/hdone-${n} 300; putrc ${n}-k 0; counters ${n}`;
    const cmd = s.kernel(s.port);
    return `
gbg ${n}-k ${GUEST_TIMEOUT_SEC} ${q(cmd)}
cmlisten ${s.port} 60 || glog "${n}: nothing listens on ${s.port} after 60 s"
mark ready-${n}${s.killAfter ? `
waitout $H/${n}-k.out '${s.killAfter.re}' ${s.killAfter.n} 60 || glog "${n}: the kernel's tool did not get that far"
pkill -9 -x ${cmd[0]}; glog "${n}: killed ${cmd[0]}"` : ''}
finish ${n} ${cmd[0]}
counters ${n}`;
  }
  const cmd = s.kernel(s.port);
  const run = s.killAfter
    ? `gbg ${n}-k ${GUEST_TIMEOUT_SEC} ${q(cmd)}
  waitout $H/${n}-k.out '${s.killAfter.re}' ${s.killAfter.n} 60 || glog "${n}: the kernel's tool did not get that far"
  pkill -9 -x ${cmd[0]}; glog "${n}: killed ${cmd[0]}"; waitfile $H/${n}-k.rc 30`
    : `gtool ${n}-k ${GUEST_TIMEOUT_SEC} ${q(cmd)}`;
  return `
if waitfile $H/go-${n} 300 && [ "$(cat $H/go-${n})" = run ]; then ${run}
else glog "${n}: not run, our server is not up"; putrc ${n}-k 253; fi
counters ${n}`;
}
const job = `${guestHelpers}
ip -6 addr add ${GUEST_IP6}/64 dev eth0 nodad || glog "could not add ${GUEST_IP6}"
i=0; until rdma res show 2>/dev/null >/dev/null && grep -q "fd77" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null; do sleep 0.2; i=$((i+1)); [ $i -ge 50 ] && { glog "no fd77 GID on rxe0"; break; }; done
counters boot
mark ready
${RUN.map(guestStep).join('\n')}
rdma statistic show link rxe0/1 > $H/rdma-statistic 2>&1; dmesg > $H/dmesg 2>&1
true
`;

// ------------------------------------------------------------------ host side helpers
/** Our server listens once its service ID is published (an abstract Unix socket in the netns). */
async function serverUp(p, port, ms = 60_000) {
  const sid = (0x01060000 + port).toString(16).padStart(16, '0');
  let gone = false;
  p.done.then(() => { gone = true; });
  const t0 = Date.now();
  while (!gone && Date.now() - t0 < ms) {
    const ss = await netnsRun('ss', ['-Hxl'], { timeoutMs: 10_000 });
    if (ss.stdout.includes(`@rdmacm-roce-4791-svc-${sid}`)) return true;
    await sleep(150);
  }
  return false;
}

const counters = (ctx, n) => `guest rxe0 hw counters after ${n} (non-zero, cumulative):\n  ${(ctx.read(`counters-${n}`) || '(none)').trim().split('\n').filter((l) => !/ 0$/.test(l)).join('\n  ')}`;

const built = (t) => requireBuilt(t, [cli('rping'), NETOPT], 'npm ci / npm run build / node native/build.mjs');

test('interop: RC tools, ours (host, soft RoCE) <-> kernel (guest, rxe)', { timeout: 900_000 }, async (t) => {
  if (!(await requireRefvm(t)) || !built(t)) return;
  const up = await run(join(REFVM_HOME, 'refvm-netns.sh'), ['up'], { timeoutMs: 30_000 });
  assert.equal(up.code, 0, `refvm-netns.sh up: ${up.stderr}`);
  // The IPv6 scenarios' address on our side (removed at the end).
  await netnsRun('ip', ['-6', 'addr', 'add', `${HOST_IP6}/64`, 'dev', 'rvbr0', 'nodad'], { timeoutMs: 10_000 });
  t.after(() => netnsRun('ip', ['-6', 'addr', 'del', `${HOST_IP6}/64`, 'dev', 'rvbr0'], { timeoutMs: 10_000 }));
  let stopCapture = null;
  const res = await withGuest({ name: 'roce-rc', rdma: 'rxe', job, timeoutSec: 840 }, async (ctx) => {
    stopCapture = await ctx.capture('roce.pcap', 'udp port 4791 or (ip6 and udp port 4791)', { snap: 400, timeoutMs: 860_000 });
    const host = (argv, timeoutMs = HOST_TIMEOUT_MS, env = {}) => ctx.hostStart(process.execPath, argv, { timeoutMs, env: { ...ENV, ...env } });

    for (const s of RUN) {
      await t.test(`${s.name}: ${s.title}`, async () => {
        let r = null;
        if (s.kind === 'K') {
          try {
            await ctx.waitFile(`ready-${s.name}`, 120_000);
            r = await host(s.ours(s.port), HOST_TIMEOUT_MS, s.env).done;
          } finally {
            ctx.touch(`hdone-${s.name}`);
          }
          await ctx.waitFile(`${s.name}-k.rc`, 60_000).catch(() => {});
        } else {
          let srv = null, bys = null, b = null, ok = !s.ours;
          try {
            if (s.ours) {
              srv = host(s.ours(s.port), HOST_TIMEOUT_MS + 60_000, s.env);
              ok = await serverUp(srv, s.port);
            }
            if (ok && s.bystander) {
              // Another process of ours on the device, started last: its socket receives the
              // datagrams to UDP 4791 and hands them on to the server's process.
              bys = host([cli('rping'), '-s', '-a', HOST_IP, '-p', String(s.port + 500)], HOST_TIMEOUT_MS + 60_000);
              ok = await serverUp(bys, s.port + 500);
            }
          } finally {
            ctx.touch(`go-${s.name}`, ok ? 'run' : 'skip');
          }
          try {
            await ctx.waitFile(`${s.name}-k.rc`, (GUEST_TIMEOUT_SEC + 30) * 1000);
          } finally {
            if (srv) r = await settle(srv, s.serverStays ? 0 : 20_000);
            if (bys) b = await settle(bys, 0);
          }
          if (!ok) assert.fail(`our server did not come up\n${hostDesc('server', r)}${b ? `\n${hostDesc('bystander', b)}` : ''}`);
          if (b) assert.equal(b.stdout, '', `the bystander saw no connection\n${hostDesc('bystander', b)}`);
        }
        save(ctx, `${s.name}-h`, r);
        const g = ctx.result(`${s.name}-k`);
        const stack = ctx.read(`${s.name}-k-stack`);
        const both = `${hostDesc('ours', r)}\n${guestDesc('kernel', g)}\n${counters(ctx, s.name)}${stack ? `\nkernel tool 15 s after ours ended:\n${stack}` : ''}`;
        s.check(r, g, both);
      });
    }
    await stopCapture();
  }).finally(() => stopCapture?.());
  log(`roce-rc: job folder ${res.jobDir} (roce.pcap, counters-*, *-h.* / *-k.* outputs)`);
  t.diagnostic(`VM: ready after ${(res.bootMs / 1000).toFixed(1)} s, total ${(res.wallMs / 1000).toFixed(1)} s; ${res.jobDir}`);
  assert.equal(res.jobRc, 0, `guest job exit ${res.jobRc}`);
});
