// libibverbs' pingpong examples end to end on every device under test: ibv_rc/uc/ud/srq_pingpong
// as two processes, their output lines and exit statuses; on a device whose QPs reach RTS only
// through a connection of the CM (iWARP) the failures rdma-core's tools print on siw.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TransportType } from '../../dist/index.js';
import { runCli, describeRun } from '../lib/tools.js';
import { testDevices } from '../lib/devices.js';
import { cli, ENV, STALE, loopbackGidIndex, pair, outputRe } from '../lib/pingpong.js';

const TOOLS = [
  { tool: 'ibv_rc_pingpong', args: ['-n', '15'], size: 4096, iters: 15 },
  { tool: 'ibv_rc_pingpong', args: ['-n', '20', '-e', '-s', '100', '-c'], size: 100, iters: 20, what: 'events, -c' },
  { tool: 'ibv_uc_pingpong', args: ['-n', '15', '-s', '2048', '-m', '512'], size: 2048, iters: 15 },
  { tool: 'ibv_ud_pingpong', args: ['-n', '15', '-s', '512'], size: 512, iters: 15, ud: true },
  { tool: 'ibv_srq_pingpong', args: ['-n', '16', '-q', '4', '-s', '256'], size: 256, iters: 16, n: 4 },
];

for (const d of testDevices()) {
  const dev = d.device;
  const iwarp = d.transportType === TransportType.IWARP;
  const base = ['-d', dev.name];
  if (!iwarp) {
    const gidx = loopbackGidIndex(dev);
    for (const t of TOOLS) {
      test(`[${dev.name}] ${t.tool} ${t.args.join(' ')}${t.what ? ` (${t.what})` : ''}: the exchange and the ping-pong, both sides' lines, exit 0/0`, async () => {
        const r = await pair(t.tool, [...base, '-g', String(gidx), ...t.args]);
        assert.equal(r.cli.code, 0, r.both);
        assert.equal(r.srv.code, 0, r.both);
        const want = outputRe(t);
        assert.match(r.cli.stdout, want, r.both);
        assert.match(r.srv.stdout, want, r.both);
        assert.equal(r.cli.stderr + r.srv.stderr, '', r.both);
      });
    }
    test(`[${dev.name}] ibv_ud_pingpong without -g: no AH without a GRH on RoCE ("Failed to create AH"), the client's read fails; exit 1/1`, async () => {
      const r = await pair('ibv_ud_pingpong', [...base, '-n', '5']);
      assert.equal(r.srv.code, 1, r.both);
      assert.equal(r.srv.stderr, "Failed to create AH\nCouldn't connect to remote QP\n", r.both);
      assert.equal(r.cli.code, 1, r.both);
      assert.equal(r.cli.stderr, `client read/write: ${STALE}\nCouldn't read/write remote address\n`, r.both);
    });
    test(`[${dev.name}] ibv_ud_pingpong -s beyond the port's MTU: refused before anything else`, async () => {
      const mtu = 256 << (dev.open().queryPort(1).activeMtu - 1);
      const r = await runCli(cli('ibv_ud_pingpong'), [...base, '-s', String(mtu + 1)], { env: ENV });
      assert.equal(r.code, 1, describeRun('ud', r));
      assert.equal(r.stderr, `Requested size larger than port MTU (${mtu})\n`);
    });
  } else {
    test(`[${dev.name}] ibv_rc_pingpong on iWARP: RTS needs a connection — the server fails at RTS, the client's read fails, exit 1/1 (rdma-core's on siw)`, async () => {
      const r = await pair('ibv_rc_pingpong', [...base, '-n', '5']);
      assert.equal(r.srv.code, 1, r.both);
      assert.equal(r.srv.stderr, "Failed to modify QP to RTS\nCouldn't connect to remote QP\n", r.both);
      assert.match(r.srv.stdout, /^ {2}local address: {2}LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::\n$/, r.both);
      assert.equal(r.cli.code, 1, r.both);
      assert.equal(r.cli.stderr, `client read/write: ${STALE}\nCouldn't read/write remote address\n`, r.both);
    });
    test(`[${dev.name}] ibv_srq_pingpong on iWARP: "Failed to modify QP[0] to RTS"; the client's read ends (exit 1/1, where rdma-core's client spins)`, async () => {
      const r = await pair('ibv_srq_pingpong', [...base, '-n', '5', '-q', '2']);
      assert.equal(r.srv.code, 1, r.both);
      assert.equal(r.srv.stderr, "Failed to modify QP[0] to RTS\nCouldn't connect to remote QP\n", r.both);
      assert.equal(r.cli.code, 1, r.both);
      assert.equal(r.cli.stderr, "0/52: Couldn't read remote address [0]\n", r.both);
    });
    for (const tool of ['ibv_uc_pingpong', 'ibv_ud_pingpong']) {
      test(`[${dev.name}] ${tool} on iWARP: no such QP type, "Couldn't create QP", exit 1`, async () => {
        const r = await runCli(cli(tool), [...base, '-n', '5', '127.0.0.1'], { env: ENV });
        assert.equal(r.code, 1, describeRun(tool, r));
        assert.equal(r.stderr, "Couldn't create QP\n");
        assert.equal(r.stdout, '');
      });
    }
  }
}

