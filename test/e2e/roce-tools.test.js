// The tools over the soft RoCE device: server and client as two processes pinned to rxe_lo
// (RDMACM_DEVICE), RC connections through the IB CM (REQ/REP/RTU, DREQ/DREP) and the RC
// transport of the device. Output lines and exit codes are rdma-core's, as over iWARP, except
// where the transport shows: a closed port is REJECTED with the IB CM's "invalid service ID"
// (status 8) instead of a refused TCP connect.
import test from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, describeRun, rpingLines, waitRoceListening } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { sleep } from '../lib/wait.js';

const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
// A private RoCE UDP port: other tests on this host never see these datagrams.
const ROCE_PORT = String(40000 + Math.floor(Math.random() * 20000));
const ENV = { RDMACM_DEVICE: 'rxe_lo', RDMACM_ROCE_PORT: ROCE_PORT };


/** Start `tool` as server, wait until it listens, run the client; both results. */
async function pair(tool, serverArgs, clientArgs, port, { env = {}, clientTool = tool, timeoutMs = 60_000 } = {}) {
  const srv = startCli(cli(tool), serverArgs, { env: { ...ENV, ...env }, timeoutMs });
  try {
    await waitRoceListening(ROCE_PORT, port, srv.done);
    const c = await runCli(cli(clientTool), clientArgs, { env: { ...ENV, ...env }, timeoutMs });
    const s = await srv.done;
    return { cli: c, srv: s, both: `${describeRun('client', c)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

test('rping -C 20 -v -V over RoCE: the ping data both ways, DISCONNECT, exit 0/0', async () => {
  const port = await freePort();
  const args = ['-a', '127.0.0.1', '-p', String(port), '-C', '20', '-v', '-V', '-S', '2000'];
  const r = await pair('rping', ['-s', ...args], ['-c', ...args], port);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.cli.stdout, rpingLines({ count: 20, size: 2000, role: 'client' }), r.both);
  assert.equal(r.srv.stdout, rpingLines({ count: 20, size: 2000, role: 'server' }), r.both);
  // The client exits right after its rdma_disconnect: over IB its DISCONNECTED comes with the
  // server's DREP, usually after it has gone (it is printed when it comes first).
  assert.match(r.cli.stderr, /^(client DISCONNECT EVENT\.\.\.\n)?$/, r.both);
  assert.equal(r.srv.stderr, 'server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n', r.both);
});

test('rping -q over RoCE: both sides move their own QPs with rdma_init_qp_attr, the client completes with rdma_establish; the pings run', async () => {
  const port = await freePort();
  const args = ['-q', '-a', '127.0.0.1', '-p', String(port), '-C', '5', '-v', '-V'];
  const r = await pair('rping', ['-s', ...args], ['-c', ...args], port);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.equal(r.cli.stdout, rpingLines({ count: 5, role: 'client' }), r.both);
  assert.equal(r.srv.stdout, rpingLines({ count: 5, role: 'server' }), r.both);
});

test('rping -c to a port nobody listens on: REJECTED with status 8 (invalid service ID), exit 255', async () => {
  const port = await freePort();
  const r = await runCli(cli('rping'), ['-c', '-a', '127.0.0.1', '-p', String(port), '-C', '1'], { env: ENV, timeoutMs: 20_000 });
  assert.equal(r.code, 255, describeRun('rping', r));
  assert.equal(r.stderr, 'cma event RDMA_CM_EVENT_REJECTED, error 8\nwait for CONNECTED state 4\nconnect error -1\n', describeRun('rping', r));
  assert.ok(r.ms < 5000, 'the REJ comes at once');
});

test('rping: the server process killed mid-ping, the client sees DISCONNECTED at once and exits 0', async () => {
  const port = await freePort();
  const base = ['-a', '127.0.0.1', '-p', String(port), '-v'];
  const srv = startCli(cli('rping'), ['-s', ...base], { env: ENV, timeoutMs: 30_000 });
  let c = null;
  try {
    await waitRoceListening(ROCE_PORT, port, srv.done);
    c = startCli(cli('rping'), ['-c', ...base], { env: ENV, timeoutMs: 30_000 });
    const t0 = Date.now();
    while ((c.stdout().match(/\n/g) ?? []).length < 20 && Date.now() - t0 < 10_000) await sleep(10);
    srv.kill('SIGKILL');
    const tk = Date.now();
    const r = await c.done;
    assert.ok(Date.now() - tk < 5000, describeRun('client', r));
    assert.equal(r.code, 0, describeRun('client', r));
    assert.match(r.stderr, /^client DISCONNECT EVENT\.\.\.\nwait for RDMA_(READ|WRITE)_(ADV|COMPLETE) state 10\n$/, describeRun('client', r));
    const n = r.stdout.split('\n').length - 1;
    assert.ok(n >= 20);
    assert.equal(r.stdout, rpingLines({ count: n, role: 'client' }));
  } finally {
    srv.kill('SIGKILL');
    c?.kill('SIGKILL');
    await srv.done;
    await c?.done;
  }
});

test('ucmatose over RoCE: two connections, 10 messages of 4000 bytes each way, return status 0 on both sides', async () => {
  const port = await freePort();
  const opts = ['-c', '2', '-C', '10', '-S', '4000'];
  const r = await pair('ucmatose', ['-p', String(port), ...opts], ['-s', '127.0.0.1', '-p', String(port), ...opts], port);
  assert.equal(r.cli.code, 0, r.both);
  assert.equal(r.srv.code, 0, r.both);
  assert.match(r.cli.stdout, /data transfers complete\ntest complete\nreturn status 0\n$/, r.both);
  assert.match(r.srv.stdout, /test complete\nreturn status 0\n$/, r.both);
  assert.equal(r.cli.stderr + r.srv.stderr, '', r.both);
});

test('rdma_server / rdma_client over RoCE: start / end 0 on both sides', async () => {
  const port = await freePort();
  const r = await pair('rdma_server', ['-s', '127.0.0.1', '-p', String(port)], ['-s', '127.0.0.1', '-p', String(port)], port, { clientTool: 'rdma_client' });
  assert.equal(r.srv.stdout, 'rdma_server: start\nrdma_server: end 0\n', r.both);
  assert.equal(r.cli.stdout, 'rdma_client: start\nrdma_client: end 0\n', r.both);
  assert.equal(r.srv.code + r.cli.code, 0, r.both);
});

for (const tool of ['rstream', 'riostream']) {
  test(`${tool} over RoCE: a custom bandwidth and latency test, one result row each, exit 0/0`, async () => {
    const port = await freePort();
    for (const mode of [[], ['-T', 'b']]) {
      const custom = ['-S', '65536', '-C', '200', ...mode];
      const r = await pair(tool, ['-b', '127.0.0.1', '-p', String(port), ...custom], ['-s', '127.0.0.1', '-p', String(port), ...custom], port);
      assert.equal(r.cli.code, 0, r.both);
      assert.equal(r.srv.code, 0, r.both);
      const rows = r.cli.stdout.trim().split('\n');
      assert.equal(rows[0], 'name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer', r.both);
      assert.equal(rows.length, 2, r.both);
      assert.match(rows[1], /^custom\s+64k\s+200\s+1\s+/, r.both);
      assert.equal(r.cli.stderr + r.srv.stderr, '', r.both);
    }
  });
}

test('cmtime over RoCE: 50 connections set up and torn down, the timing table on both sides, exit 0/0', async () => {
  const port = await freePort();
  const base = ['-b', '127.0.0.1', '-C', '127.0.0.1', '-p', String(port), '-c', '50'];
  const srv = startCli(cli('cmtime'), [...base, '-L'], { env: ENV, timeoutMs: 60_000 });
  try {
    await sleep(300);
    const c = await runCli(cli('cmtime'), base, { env: ENV, timeoutMs: 60_000 });
    const s = await srv.done;
    const both = `${describeRun('client', c)}\n${describeRun('server', s)}`;
    assert.equal(c.code, 0, both);
    assert.equal(s.code, 0, both);
    assert.match(c.stdout, /^cm_conn\s+50$/m, both);
    assert.match(c.stdout, /^full connect\s+\d+/m, both);
    assert.match(c.stdout, /^disconnect\s+\d+/m, both);
  } finally {
    srv.kill('SIGKILL');
  }
});
