// ibv_devices and ibv_devinfo end to end: the device list, ibv_devinfo -v against the layout and
// device-type facts of rdma-core 44's own output on the kernel's rxe and siw (the soft RoCE
// device with its extra BLOCK_MULTICAST_LOOPBACK bit, test/lib/devinfo.js withSoftRoceCaps), and
// each tool's bad options and exit statuses.
import test from 'node:test';
import assert from 'node:assert/strict';
import { TransportType, getDeviceList } from '../../dist/index.js';
import { runCli, describeRun } from '../lib/tools.js';
import { testDevices } from '../lib/devices.js';
import { assertSameFields, MACHINE_FIELDS, withSoftRoceCaps } from '../lib/devinfo.js';
import { cli, ENV } from '../lib/pingpong.js';
import { KERNEL_RXE_V, KERNEL_SIW_V } from '../fixtures/ibverbs/devinfo-kernel.js';

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
    // The soft RoCE device: rxe's values but for its one documented extra capability bit.
    assertSameFields(r.stdout, iwarp ? KERNEL_SIW_V : withSoftRoceCaps(KERNEL_RXE_V), skip, `ibv_devinfo -v -d ${d.name}`);
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
