// Fault injection with the tools, two processes each run (docs/faults.md). Where the protocol
// recovers, the run completes with every byte intact: RC over the soft RoCE device (rping on
// rxe_lo) with loss, duplication, reordering, latency and jitter, corruption and a partition
// shorter than the retry budget; rping over the soft iWARP device with latency, jitter and
// stalls (TCP delivers late, never wrong). Where it cannot, the tools fail as rdma-core's do: a
// TCP reset or a wrong MPA CRC ends an rstream run on both sides with rsend/rrecv's error and
// exit status 255; on UD (udaddy over rxe_lo) a lost message is not resent, and udaddy, which
// polls its CQ until every message has come (udaddy.c poll_cqs), waits until it is killed.
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT, startCli, runCli, describeRun, rpingLines, waitListening, waitRoceListening, PS_UDP } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';

const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
// A private RoCE UDP port: other tests on this host never see these datagrams.
const ROCE_PORT = String(40000 + Math.floor(Math.random() * 20000));
// Local ACK timeout 14 (67 ms): a lost packet costs little, and 7 retries (8 × 67 ms) outlast
// the partition below.
const ROCE = { RDMACM_DEVICE: 'rxe_lo', RDMACM_ROCE_PORT: ROCE_PORT, RDMACM_ROCE_ACK_TIMEOUT: '14' };
const IWARP = { RDMACM_DEVICE: 'siw_lo' };

/** Start `tool` as server, wait until it listens (`listening(srv)`), run the client; both results. */
async function pair(tool, serverArgs, clientArgs, listening, { env = {}, serverEnv = env, clientEnv = env, timeoutMs = 40_000 } = {}) {
  const srv = startCli(cli(tool), serverArgs, { env: serverEnv, timeoutMs });
  try {
    await listening(srv);
    const c = await runCli(cli(tool), clientArgs, { env: clientEnv, timeoutMs });
    const s = await srv.done;
    return { cli: c, srv: s, both: `${describeRun('client', c)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

/** rping -C `count` -v between two processes with `env` on both; asserts a clean, complete run. */
async function rpingCompletes(base, impair, count, listening) {
  const port = await freePort();
  const args = ['-a', '127.0.0.1', '-p', String(port), '-C', String(count), '-v', '-V', '-S', '1000'];
  const env = { ...base, ...impair };
  const r = await pair('rping', ['-s', ...args], ['-c', ...args], (srv) => listening(port, srv), { env });
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.cli.stdout, rpingLines({ count, size: 1000, role: 'client' }), r.both);
  assert.equal(r.srv.stdout, rpingLines({ count, size: 1000, role: 'server' }), r.both);
  assert.doesNotMatch(r.cli.stderr + r.srv.stderr, /mismatch|completion failed/, r.both);
  return r;
}

const roceListening = (port, srv) => waitRoceListening(ROCE_PORT, port, srv.done);
const iwarpListening = (port, srv) => waitListening(port, { exited: srv.done });

// Every kind on RoCE RC: the CM's DREQ is spared (rping's client sends it once and exits).
for (const [kind, spec] of [
  ['loss', 'loss=0.05,seed=11'],
  ['duplication', 'dup=0.1,seed=12'],
  ['reordering', 'reorder=0.1,delay=4,seed=13'],
  ['latency and jitter', 'latency=3,jitter=4,seed=14'],
  ['corruption', 'corrupt=0.05,seed=15'],
  ['a 300 ms partition', 'partition=300,partition_at=40'],
]) {
  test(`RoCE RC, ${kind} (RDMACM_ROCE_IMPAIR=${spec}): rping -C 30 -V completes, every ping intact`, async () => {
    const t0 = Date.now();
    await rpingCompletes(ROCE, { RDMACM_ROCE_IMPAIR: `${spec},spare=dreq` }, 30, roceListening);
    if (kind.includes('partition')) assert.ok(Date.now() - t0 >= 300, 'the run took the partition');
  });
}

test('RoCE UD, loss (RDMACM_ROCE_IMPAIR=partition=10000,partition_at=2 on the client: every data message lost): udaddy is not resent anything and waits until killed', async () => {
  const srv = startCli(cli('udaddy'), ['-b', '127.0.0.1'], { env: ROCE, timeoutMs: 6000 });
  try {
    await waitRoceListening(ROCE_PORT, 7174, srv.done, 10_000, PS_UDP);
    // Datagram 1 is the SIDR REQ (resolution succeeds); from 2 on, the 10 messages are lost.
    const c = await runCli(cli('udaddy'), ['-s', '127.0.0.1'], { env: { ...ROCE, RDMACM_ROCE_IMPAIR: 'partition=10000,partition_at=2' }, timeoutMs: 4000 });
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    assert.equal(c.timedOut, true, both);
    assert.equal(s.timedOut, true, both);
    assert.equal(c.stdout, 'udaddy: starting client\nudaddy: connecting\ninitiating data transfers\nreceiving data transfers\n', both);
    assert.equal(s.stdout, 'udaddy: starting server\nreceiving data transfers\n', both);
  } finally {
    srv.kill('SIGKILL');
  }
});

test('RoCE UD, loss: the same run without the fault completes (the control)', async () => {
  const srv = startCli(cli('udaddy'), ['-b', '127.0.0.1'], { env: ROCE, timeoutMs: 20_000 });
  try {
    await waitRoceListening(ROCE_PORT, 7174, srv.done, 10_000, PS_UDP);
    const c = await runCli(cli('udaddy'), ['-s', '127.0.0.1'], { env: ROCE, timeoutMs: 20_000 });
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    assert.equal(c.code, 0, both);
    assert.equal(s.code, 0, both);
    assert.match(s.stdout, /sending replies\ndata transfers complete\n/, both);
  } finally {
    srv.kill('SIGKILL');
  }
});

for (const [kind, spec, atLeastMs] of [
  ['latency and jitter', 'latency=4,jitter=4,seed=21', 30 * 4],
  ['a 400 ms stall every 25 FPDUs', 'stall=400,stall_at=10,stall_every=25', 400],
]) {
  test(`iWARP, ${kind} (RDMACM_IWARP_FAULTS=${spec}): rping -C 30 -V completes, every ping intact`, async () => {
    const t0 = Date.now();
    await rpingCompletes(IWARP, { RDMACM_IWARP_FAULTS: spec }, 30, iwarpListening);
    assert.ok(Date.now() - t0 >= atLeastMs, `the run took at least ${atLeastMs} ms`);
  });
}

/** rstream -S 64k -C 40 with `clientEnv` on the client: both results. */
async function rstream(clientEnv) {
  const port = await freePort();
  const args = ['-p', String(port), '-S', '65536', '-C', '40', '-T', 'b'];
  return pair('rstream', ['-b', '127.0.0.1', ...args], ['-s', '127.0.0.1', ...args], (srv) => iwarpListening(port, srv), { serverEnv: IWARP, clientEnv: { ...IWARP, ...clientEnv } });
}

const HEADER = 'name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n';

test('iWARP, reset=30 on the client: the connection is reset mid-transfer; rsend and rrecv report it, both exit 255', async () => {
  const r = await rstream({ RDMACM_IWARP_FAULTS: 'reset=30' });
  assert.equal(r.cli.code, 255, r.both);
  assert.equal(r.srv.code, 255, r.both);
  assert.equal(r.cli.stdout, HEADER, r.both);
  // The client's own QP errs (its queued sends flush): rsocket's EIO; the peer sees the RST.
  assert.equal(r.cli.stderr, 'rsend: Input/output error\n', r.both);
  assert.equal(r.srv.stderr, 'rrecv: Connection reset by peer\n', r.both);
});

test('iWARP, crc=30 on the client: the server gets a wrong MPA CRC and ends the connection (TERMINATE: test/unit/transport/iwarp/faults.test.js); both exit 255', async () => {
  const r = await rstream({ RDMACM_IWARP_FAULTS: 'crc=30' });
  assert.equal(r.cli.code, 255, r.both);
  assert.equal(r.srv.code, 255, r.both);
  // The client fails in whichever call it is in when the connection goes (-T b sends, then reads):
  // ECONNRESET when the reset reaches it first, EIO when the server's TERMINATE does (its QP errs
  // and its queued sends flush, as in the reset case above).
  assert.match(r.cli.stderr, /^r(send|recv): (Connection reset by peer|Input\/output error)\n$/, r.both);
  assert.equal(r.srv.stderr, 'rrecv: Connection reset by peer\n', r.both);
});

test('iWARP: the same rstream run without faults completes (the control)', async () => {
  const r = await rstream({});
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.match(r.cli.stdout, /\ncustom\s+64k\s+40\s+1\s+/, r.both);
});

// ---- the counters, read from outside the process ------------------------------------------------

const HOLDER = fileURLToPath(new URL('../lib/stat-holder.js', import.meta.url));

/** A stat-holder (N Sends over a connected RC pair on `env`'s device), once ready: `{ pid, end() }`. */
function holder(n, env) {
  const c = spawn(process.execPath, [HOLDER, 'hold', String(n), '64'], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, RDMACM_BACKEND: 'soft', ...env } });
  return new Promise((resolve, reject) => {
    let text = '';
    const t = setTimeout(() => (c.kill('SIGKILL'), reject(new Error('stat-holder not ready'))), 30_000);
    c.stdout.on('data', (b) => {
      text += b;
      if (!text.includes('\n')) return;
      clearTimeout(t);
      resolve({ pid: JSON.parse(text.slice(0, text.indexOf('\n'))).pid, end: () => c.stdin.end() });
    });
    c.on('exit', (code) => reject(new Error(`stat-holder exited ${code}`)));
  });
}

test('rdmacm-stat statistic show: the inject_* counters of a process with faults configured, on each device', async () => {
  const N = 6;
  const rxe = await holder(N, { ...ROCE, RDMACM_ROCE_IMPAIR: 'latency=1' });
  const siw = await holder(N, { ...IWARP, RDMACM_IWARP_FAULTS: 'latency=1' });
  try {
    const read = async (link, pid) => {
      const r = await runCli(cli('rdmacm-stat'), ['-j', 'statistic', 'show', 'link', link], { timeoutMs: 20_000 });
      assert.equal(r.code, 0, describeRun('rdmacm-stat', r));
      const mine = JSON.parse(r.stdout).find((x) => x.pid === pid);
      assert.ok(mine, r.stdout);
      return mine;
    };
    const r = await read('rxe_lo/1', rxe.pid);
    // Every datagram of the process went through the delay line: the Sends, their ACKs, the CM's MADs.
    assert.ok(r.inject_delay >= 2 * N, JSON.stringify(r));
    assert.equal(r.inject_delay, r.sent_pkts, 'every datagram sent was delayed');
    assert.deepEqual([r.inject_drop, r.inject_dup, r.inject_reorder, r.inject_corrupt, r.inject_partition_drop], [0, 0, 0, 0, 0]);
    const s = await read('siw_lo/1', siw.pid);
    assert.equal(s.inject_delay, s.mpaOutFpdus, 'every FPDU sent was delayed');
    assert.ok(s.inject_delay >= N + 1, JSON.stringify(s));
    assert.deepEqual([s.inject_stall, s.inject_reset, s.inject_crc], [0, 0, 0]);
  } finally {
    rxe.end();
    siw.end();
  }
});
