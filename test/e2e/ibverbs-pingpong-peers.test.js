// libibverbs' pingpong examples given bad options, a server that is not there, and a peer that
// speaks garbage, stops mid-message or says nothing on the side channel: rdma-core's messages and
// exit statuses, never a hang.
import test from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { TransportType } from '../../dist/index.js';
import { startCli, runCli, describeRun, waitListening } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { testDevices } from '../lib/devices.js';
import { cli, ENV, STALE, loopbackGidIndex, pair, outputRe } from '../lib/pingpong.js';

const roce = testDevices().find((d) => d.transportType !== TransportType.IWARP);
const roceArgs = roce ? ['-d', roce.name, '-g', String(loopbackGidIndex(roce.device))] : [];

for (const tool of ['ibv_rc_pingpong', 'ibv_uc_pingpong', 'ibv_ud_pingpong', 'ibv_srq_pingpong']) {
  test(`${tool}: a bad option — getopt's message, the usage on stdout, exit 1; a second operand or a bad --long option too`, async () => {
    for (const [args, err] of [
      [['-z'], `${tool}: invalid option -- 'z'\n`],
      [['--help'], `${tool}: unrecognized option '--help'\n`],
      [['-p'], `${tool}: option requires an argument -- 'p'\n`],
      [['a', 'b'], ''],
      [['-i', '0'], ''],
    ]) {
      const r = await runCli(cli(tool), args, { env: ENV });
      assert.equal(r.code, 1, describeRun(args.join(' '), r));
      assert.equal(r.stderr, err, args.join(' '));
      assert.match(r.stdout, new RegExp(`^Usage:\\n {2}${tool} {12}start a server and wait for connection\\n`), args.join(' '));
    }
  });
  test(`${tool}: an unknown device — "IB device nosuch not found", exit 1`, async () => {
    const r = await runCli(cli(tool), ['-d', 'nosuch'], { env: ENV });
    assert.equal(r.code, 1);
    assert.equal(r.stderr, 'IB device nosuch not found\n');
  });
}

test('ibv_rc_pingpong: the rc-only flags refused as on a device without them (ODP, timestamps, DM), their combinations as rdma-core', async () => {
  for (const [args, err] of [
    [['-o'], "The device isn't ODP capable or does not support RC send and receive with ODP\n"],
    [['-t'], "The device isn't completion timestamp capable\n"],
    [['-j'], "Device doesn't support dm allocation\n"],
    [['-o', '-j'], "DM memory region can't be on demand\n"],
    [['-P'], 'prefetch is valid only with on-demand memory region\n'],
  ]) {
    const r = await runCli(cli('ibv_rc_pingpong'), [...roceArgs, ...args], { env: ENV });
    assert.equal(r.code, 1, describeRun(args.join(' '), r));
    assert.equal(r.stderr, err);
  }
});

test('ibv_rc_pingpong -m 100: not an IB MTU, usage, exit 1; --mtu=512 --iters 3 accepted', { skip: !roce && 'no RoCE device' }, async () => {
  const bad = await runCli(cli('ibv_rc_pingpong'), ['-m', '100'], { env: ENV });
  assert.equal(bad.code, 1);
  assert.match(bad.stdout, /^Usage:/);
  const r = await pair('ibv_rc_pingpong', [...roceArgs, '--mtu=512', '--iters', '3', '--size=64']);
  assert.equal(r.cli.code, 0, r.both);
  assert.match(r.cli.stdout, outputRe({ size: 64, iters: 3 }), r.both);
});

test('a server that is not there: "Couldn\'t connect to 127.0.0.1:<port>", exit 1', { skip: !roce && 'no RoCE device' }, async () => {
  const port = await freePort();
  for (const tool of ['ibv_rc_pingpong', 'ibv_ud_pingpong', 'ibv_srq_pingpong']) {
    const r = await runCli(cli(tool), [...roceArgs, '-p', String(port), '127.0.0.1'], { env: ENV });
    assert.equal(r.code, 1, describeRun(tool, r));
    assert.equal(r.stderr, `Couldn't connect to 127.0.0.1:${port}\n`, tool);
  }
});

/** A fake server that answers a connection's first bytes with `reply` and closes; null: says nothing. */
async function fakeServer(reply) {
  const srv = net.createServer((s) => {
    s.on('error', () => {});
    s.once('data', () => (reply === null ? undefined : s.end(reply)));
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { port: srv.address().port, close: () => srv.close() };
}

test('a peer that speaks garbage, stops mid-message or says nothing: a clear message and exit 1, never a hang', { skip: !roce && 'no RoCE device' }, async () => {
  const gid = '00000000000000000000ffff7f000001';
  for (const [reply, err] of [
    [Buffer.alloc(52, 'z'), /^Couldn't parse remote address: "z{52}"\n$/],
    [Buffer.from(`0000:1000000:000002:${gid}`), /^Couldn't parse remote address: "0000:1000000:/],
    [Buffer.from('0000:000001:000002:'), new RegExp(`^client read/write: ${STALE}\\nCouldn't read/write remote address\\n$`)],
    [null, new RegExp(`^client read/write: ${STALE}\\nCouldn't read/write remote address\\n$`)],
  ]) {
    const f = await fakeServer(reply);
    try {
      const r = await runCli(cli('ibv_rc_pingpong'), [...roceArgs, '-p', String(f.port), '127.0.0.1'], { env: ENV, timeoutMs: 20_000 });
      assert.equal(r.timedOut, false, describeRun('client', r));
      assert.equal(r.code, 1, describeRun('client', r));
      assert.match(r.stderr, err, describeRun('client', r));
    } finally {
      f.close();
    }
  }
  // our server, a client that sends 3 bytes and closes / sends nothing
  for (const [bytes, err] of [
    [Buffer.from('abc'), `server read: ${STALE}\n3/52: Couldn't read remote address\n`],
    [null, `server read: ${STALE}\n0/52: Couldn't read remote address\n`],
  ]) {
    const port = await freePort();
    const srv = startCli(cli('ibv_rc_pingpong'), [...roceArgs, '-p', String(port)], { env: ENV, timeoutMs: 20_000 });
    await waitListening(port, { exited: srv.done });
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    if (bytes !== null) s.end(bytes);
    const r = await srv.done;
    s.destroy();
    assert.equal(r.code, 1, describeRun('server', r));
    assert.equal(r.stderr, err, describeRun('server', r));
  }
});

