// The port watch of the soft devices (verbs/port-watch.ts, netdev.ts): it runs only while
// something listens — an async event reader waiting, a QP, a CM id bound to the device — at the
// transport's configured interval, never keeps a process alive; what it reads of /proc; and the
// RoCE GID table keeping its indices across changes. The events themselves:
// test/compliance/port-events.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { getDeviceList, createId, PortSpace, QpType, iwarp, roce } from '../../../dist/index.js';
import { getProvider } from '../../../dist/verbs/provider.js';
import { portWatchState } from '../../../dist/verbs/port-watch.js';
import { parseIfInet6, readNetdevs } from '../../../dist/verbs/netdev.js';
import { buildGidTable, mergeGidTable } from '../../../dist/transport/roce/gid.js';

/** The loopback device of each soft provider (those whose port follows an interface). */
const softLo = getDeviceList().filter((d) => getProvider(d.provider)?.netdevPolicy !== undefined && d.info.addresses.some((a) => a.address === '127.0.0.1'));

test('/proc/net/if_inet6 lines: address text, prefix as netmask, the zone of link-local addresses', () => {
  const m = parseIfInet6(
    [
      'fe80000000000000f0e672fffe4e937f 03 40 20 80       v0',
      'fd000000000000000000000000000001 03 40 00 80       v0',
      '00000000000000000000000000000001 01 80 10 80       lo',
      'not a line',
      'zz000000000000000000000000000001 01 80 10 80       lo',
    ].join('\n'),
  );
  assert.deepEqual(m.get('v0'), [
    { address: 'fe80::f0e6:72ff:fe4e:937f', family: 'IPv6', netmask: 'ffff:ffff:ffff:ffff::', scopeid: 3 },
    { address: 'fd00::1', family: 'IPv6', netmask: 'ffff:ffff:ffff:ffff::' },
  ]);
  assert.deepEqual(m.get('lo'), [{ address: '::1', family: 'IPv6', netmask: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff' }]);
});

test('the loopback interface reads as present, up and running', () => {
  const lo = readNetdevs(new Set(['lo'])).get('lo');
  assert.ok(lo, 'lo is in /proc/net/dev');
  assert.equal(lo.up, true);
  assert.equal(lo.running, true);
  assert.ok(lo.addresses.some((a) => a.address === '127.0.0.1'));
});

test('RoCE GID table: entries keep their index, a freed index is reused by the next new GID, the default GID stays at 0', () => {
  const mac = '02:00:00:00:00:01';
  const t0 = buildGidTable('e', mac, [
    { address: '10.0.0.1', family: 'IPv4' },
    { address: '10.0.0.2', family: 'IPv4' },
    { address: '10.0.0.3', family: 'IPv4' },
  ]);
  const idx = (t) => t.map((e) => `${e.index}:${e.ip}`);
  assert.deepEqual(idx(t0), ['0:fe80::ff:fe00:1', '1:10.0.0.1', '2:10.0.0.2', '3:10.0.0.3']);
  // 10.0.0.2 goes: index 2 is free, the others stay where they were.
  const t1 = mergeGidTable(t0, buildGidTable('e', mac, [{ address: '10.0.0.1', family: 'IPv4' }, { address: '10.0.0.3', family: 'IPv4' }]));
  assert.deepEqual(idx(t1), ['0:fe80::ff:fe00:1', '1:10.0.0.1', '3:10.0.0.3']);
  // A new address takes the lowest free index.
  const t2 = mergeGidTable(
    t1,
    buildGidTable('e', mac, [
      { address: '10.0.0.9', family: 'IPv4' },
      { address: '10.0.0.1', family: 'IPv4' },
      { address: '10.0.0.3', family: 'IPv4' },
    ]),
  );
  assert.deepEqual(idx(t2), ['0:fe80::ff:fe00:1', '1:10.0.0.1', '2:10.0.0.9', '3:10.0.0.3']);
  // A new MAC: a new default GID, at index 0.
  const t3 = mergeGidTable(t2, buildGidTable('e', '02:00:00:00:00:02', [{ address: '10.0.0.3', family: 'IPv4' }]));
  assert.deepEqual(idx(t3), ['0:fe80::ff:fe00:2', '3:10.0.0.3']);
});

test('the poll interval is the transports\' portPollMs, checked', () => {
  assert.throws(() => iwarp.configure({ portPollMs: 0 }), { code: 'EINVAL' });
  assert.throws(() => roce.configureDevice({ portPollMs: 0.5 }), { code: 'EINVAL' });
  assert.throws(() => roce.configureDevice({ pollMs: 10 }), { code: 'EINVAL' });
  assert.equal(roce.deviceConfig().portPollMs, 1000);
  assert.equal(iwarp.config().portPollMs, 1000);
});

for (const dev of softLo) {
  test(`${dev.name}: the watch runs while a QP, a waiting async reader or a bound CM id is there, and only then`, async () => {
    const watched = () => portWatchState().ifnames.includes(dev.ifname);
    const ms = dev.transportType === 1 ? 1234 : 1235;
    if (dev.transportType === 1) iwarp.configure({ portPollMs: ms }, dev.name);
    else roce.configureDevice({ portPollMs: ms }, dev.name);
    const ctx = dev.open();
    assert.equal(watched(), false, 'nothing listens yet');
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4);
    const qp = pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } });
    assert.equal(watched(), true, 'a QP');
    assert.equal(portWatchState().intervalMs, ms);
    qp.destroy();
    assert.equal(watched(), false, 'the QP gone');
    const ac = new AbortController();
    const wait = ctx.getAsyncEvent(ac.signal).catch((e) => e.code);
    assert.equal(watched(), true, 'an async reader waiting');
    ac.abort();
    assert.equal(await wait, 'ABORT_ERR');
    assert.equal(watched(), false, 'the reader gone');
    const id = createId(null, null, PortSpace.TCP, { device: dev.name });
    id.bindAddr({ address: '127.0.0.1', port: 0 });
    assert.equal(watched(), true, 'a bound CM id');
    await id.destroy();
    assert.equal(watched(), false, 'the id gone');
    assert.equal(portWatchState().intervalMs, 0, 'no timer');
    cq.destroy();
    pd.dealloc();
  });

  test(`${dev.name}: a process that listens to the port still ends by itself`, () => {
    const script = `
      import * as p from ${JSON.stringify(new URL('../../../dist/index.js', import.meta.url).href)};
      const dev = p.getDeviceList().find((d) => d.name === ${JSON.stringify(dev.name)});
      const ctx = dev.open();
      const pd = ctx.allocPd();
      const cq = ctx.createCq(4);
      const qp = pd.createQp({ qpType: p.QpType.RC, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } });
      ctx.getAsyncEvent();
      const id = p.createId(null, null, p.PortSpace.TCP, { device: dev.name });
      id.bindAddr({ address: '127.0.0.1', port: 0 });
      const w = await import(${JSON.stringify(new URL('../../../dist/verbs/port-watch.js', import.meta.url).href)});
      // The QP's own resources (a soft RoCE QP's sockets) are not the watch's: the QP goes, the
      // reader and the id stay, and so does the watch.
      qp.destroy();
      console.log('watching ' + w.portWatchState().intervalMs);
    `;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 15_000, env: { ...process.env, RDMACM_BACKEND: 'soft', RDMACM_PORT_POLL_MS: '50' } });
    assert.equal(r.error, undefined, 'the process ended by itself');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'watching 50');
  });
}
