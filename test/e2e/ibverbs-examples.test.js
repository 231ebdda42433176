// libibverbs' examples end to end on every device under test: ibv_rc/uc/ud/srq_pingpong as two
// processes (server, then the client once the server's side channel listens), their output
// lines and exit statuses; on a device whose QPs reach RTS only through a connection of the CM
// (iWARP) the failures rdma-core's tools print on siw. Bad options, a server that is not there
// and a peer that speaks garbage, stops mid-message or says nothing on the side channel; and
// ibv_devices / ibv_devinfo against the layout and device-type facts of rdma-core 44's own output
// on the kernel's rxe and siw.
import test from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { join } from 'node:path';
import { TransportType, getDeviceList } from '../../dist/index.js';
import { REPO_ROOT, startCli, runCli, describeRun, waitListening } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { testDevices } from '../lib/devices.js';
import { assertSameFields, MACHINE_FIELDS } from '../lib/devinfo.js';
import { KERNEL_RXE_V, KERNEL_SIW_V } from '../fixtures/ibverbs/devinfo-kernel.js';

const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
const ROCE_PORT = String(40000 + Math.floor(Math.random() * 20000));
const ENV = { RDMACM_ROCE_PORT: ROCE_PORT, RDMACM_PP_TIMEOUT_MS: '3000' };
const STALE = 'No space left on device';

/** The index of a GID of `dev` holding `::ffff:127.0.0.1`, or of any non-zero one; -1 without. */
function loopbackGidIndex(dev) {
  const ctx = dev.open();
  const n = ctx.queryPort(1).gidTblLen;
  let any = -1;
  for (let i = 0; i < n; i++) {
    const g = Buffer.from(ctx.queryGid(1, i));
    if (g.equals(Buffer.from('00000000000000000000ffff7f000001', 'hex'))) return i;
    if (any < 0 && g.subarray(8).some((x) => x !== 0)) any = i;
  }
  return any;
}

/** A server run, then the client once the side channel listens; both results. */
async function pair(tool, args, { serverArgs = args, port, timeoutMs = 60_000 } = {}) {
  const p = port ?? (await freePort());
  const srv = startCli(cli(tool), ['-p', String(p), ...serverArgs], { env: ENV, timeoutMs });
  try {
    await waitListening(p, { exited: srv.done, timeoutMs: 30_000 }).catch(() => {});
    const c = await runCli(cli(tool), ['-p', String(p), ...args, '127.0.0.1'], { env: ENV, timeoutMs });
    const s = await srv.done;
    return { cli: c, srv: s, both: `${describeRun('client', c)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

/** The C tools' lines for `iters` exchanges of `size` bytes over `n` QPs (figures left free). */
function outputRe({ size, iters, n = 1, ud = false }) {
  const addr = (what, sep) => ` {2}${what} address:${what === 'local' ? ' {2}' : ' '}LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}${sep} GID ::ffff:127\\.0\\.0\\.1\\n`;
  return new RegExp(
    `^(${addr('local', ud ? ':' : ',')}){${n}}(${addr('remote', ',')}){${n}}` +
      `${size * iters * 2} bytes in \\d+\\.\\d\\d seconds = [\\d.]+ Mbit/sec\\n${iters} iters in \\d+\\.\\d\\d seconds = [\\d.]+ usec/iter\\n$`,
  );
}

const TOOLS = [
  { tool: 'ibv_rc_pingpong', args: ['-n', '30'], size: 4096, iters: 30 },
  { tool: 'ibv_rc_pingpong', args: ['-n', '20', '-e', '-s', '100', '-c'], size: 100, iters: 20, what: 'events, -c' },
  { tool: 'ibv_uc_pingpong', args: ['-n', '30', '-s', '2048', '-m', '512'], size: 2048, iters: 30 },
  { tool: 'ibv_ud_pingpong', args: ['-n', '30', '-s', '512'], size: 512, iters: 30, ud: true },
  { tool: 'ibv_srq_pingpong', args: ['-n', '40', '-q', '4', '-s', '256'], size: 256, iters: 40, n: 4 },
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

// ------------------------------------------------------------------ options and peers
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

// ------------------------------------------------------------------ ibv_devices, ibv_devinfo
test('ibv_devices: the header and each device with its node GUID (16 hex digits), exit 0; arguments ignored', async () => {
  const want = ['    device          \t   node GUID', '    ------          \t----------------', ...getDeviceList().map((d) => `    ${d.name.padEnd(16)}\t${BigInt.asUintN(64, d.guid).toString(16).padStart(16, '0')}`)];
  for (const args of [[], ['-z', 'x']]) {
    const r = await runCli(cli('ibv_devices'), args, { env: ENV });
    assert.equal(r.code, 0);
    assert.equal(r.stdout, `${want.join('\n')}\n`);
  }
});

test('ibv_devinfo -l; -v -d of each device shaped and valued as rdma-core\'s on the kernel\'s device of its type', async () => {
  const names = getDeviceList().map((d) => d.name);
  const l = await runCli(cli('ibv_devinfo'), ['-l'], { env: ENV });
  assert.equal(l.code, 0);
  assert.equal(l.stdout, `${names.length} HCA${names.length !== 1 ? 's' : ''} found:\n${names.map((n) => `\t${n}\n`).join('')}\n`);
  for (const d of testDevices()) {
    const r = await runCli(cli('ibv_devinfo'), ['-v', '-d', d.name], { env: ENV });
    assert.equal(r.code, 0, describeRun('ibv_devinfo', r));
    const iwarp = d.transportType === TransportType.IWARP;
    // The interface's MTU is the machine's (the kernel's dumps: 1500); on iWARP max_mtu follows it.
    const skip = [...MACHINE_FIELDS, /active_mtu/, ...(iwarp ? [/max_mtu/] : [])];
    assertSameFields(r.stdout, iwarp ? KERNEL_SIW_V : KERNEL_RXE_V, skip, `ibv_devinfo -v -d ${d.name}`);
    assert.match(r.stdout, /^hca_id:\t\S+\n/);
    const plain = await runCli(cli('ibv_devinfo'), ['-d', d.name, '-i', '1'], { env: ENV });
    assert.equal(plain.code, 0);
    assert.ok(r.stdout.startsWith(plain.stdout.split('\tphys_port_cnt')[0]), 'the same head without -v');
  }
});

test('ibv_devinfo: bad option and -h → usage, 255; unknown device → 255; port beyond the device → 4; -i 0 → usage, 1', async () => {
  const dev = getDeviceList()[0].name;
  for (const [args, code, err, usage] of [
    [['-z'], 255, "ibv_devinfo: invalid option -- 'z'\n", true],
    [['-h'], 255, "ibv_devinfo: invalid option -- 'h'\n", true],
    [['-d', 'nosuch'], 255, "IB device 'nosuch' wasn't found\n", false],
    [['-d', dev, '-i', '2'], 4, 'Invalid port requested for device\n', false],
    [['-i', '0'], 1, '', true],
  ]) {
    const r = await runCli(cli('ibv_devinfo'), args, { env: ENV });
    assert.equal(r.code, code, describeRun(args.join(' '), r));
    assert.equal(r.stderr, err, args.join(' '));
    if (usage) assert.match(r.stdout, /^Usage: ibv_devinfo {13}print the ca attributes\n/);
  }
});

test('ibv_asyncwatch: the device line, then it waits for events until killed; -h → usage, 0; a bad option → usage, 1; an unknown device → 1', async () => {
  const dev = getDeviceList()[0].name;
  const p = startCli(cli('ibv_asyncwatch'), ['-d', dev], { env: ENV, timeoutMs: 20_000 });
  const t0 = Date.now();
  while (!p.stdout().includes('\n') && Date.now() - t0 < 15_000) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(p.child.exitCode, null, 'still waiting for events');
  p.kill('SIGTERM');
  const r = await p.done;
  assert.equal(r.stdout, `${dev}: async event FD -1\n`, describeRun('asyncwatch', r));
  assert.equal(r.signal, 'SIGTERM');
  const usage = /^Usage:\n {2}ibv_asyncwatch {12}start an asyncwatch process\n\nOptions:\n/;
  for (const [args, code, err] of [
    [['-h'], 0, ''],
    [['--help'], 0, ''],
    [['-z'], 1, "ibv_asyncwatch: invalid option -- 'z'\n"],
  ]) {
    const u = await runCli(cli('ibv_asyncwatch'), args, { env: ENV });
    assert.equal(u.code, code, args.join(' '));
    assert.equal(u.stderr, err);
    assert.match(u.stdout, usage);
  }
  const nodev = await runCli(cli('ibv_asyncwatch'), ['-d', 'nosuch'], { env: ENV });
  assert.equal(nodev.code, 1);
  assert.equal(nodev.stderr, 'IB device nosuch not found\n');
});
