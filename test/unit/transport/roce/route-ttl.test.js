// The hop limit of unicast RoCE datagrams: the route's (the system default), as the kernel writes
// it into a RoCE GRH, whatever the address handle asks; multicast keeps the handle's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { routeHopLimit } from '../../../../dist/transport/roce/route-ttl.js';
import { getDeviceList } from '../../../../dist/index.js';

const sysctl = (p) => {
  try {
    return Number(readFileSync(p, 'utf8').trim());
  } catch {
    return 64;
  }
};

test('routeHopLimit: net.ipv4.ip_default_ttl for IPv4, the interface\'s hop_limit for IPv6', () => {
  assert.equal(routeHopLimit(4, 'lo'), sysctl('/proc/sys/net/ipv4/ip_default_ttl'));
  assert.equal(routeHopLimit(6, 'lo'), sysctl('/proc/sys/net/ipv6/conf/lo/hop_limit'));
  assert.equal(routeHopLimit(6, 'no-such-if0'), 64, 'the default where nothing can be read');
});

test('an address handle of hop limit 1 sends unicast with the route\'s TTL, multicast with its own', () => {
  const ctx = getDeviceList().find((d) => d.name === 'rxe_lo').open();
  try {
    const n = ctx.queryPort(1).gidTblLen;
    let idx = -1;
    for (let i = 0; i < n && idx < 0; i++) if (Buffer.from(ctx.queryGid(1, i)).subarray(10, 12).equals(Buffer.from([0xff, 0xff]))) idx = i;
    assert.ok(idx >= 0, 'an IPv4 GID');
    const av = (hex) => ({ isGlobal: true, portNum: 1, grh: { dgid: Buffer.from(hex, 'hex'), sgidIndex: idx, hopLimit: 1, flowLabel: 0, trafficClass: 0 } });
    const pd = ctx.allocPd();
    const uni = pd.createAh(av('00000000000000000000ffff7f000001'));
    const mc = pd.createAh(av('00000000000000000000ffffef010101'));
    // the handle keeps what the application gave; the device's resolution is what leaves
    assert.equal(uni.attr.grh.hopLimit, 1);
    assert.equal(uni._provider.hopLimit, routeHopLimit(4, 'lo'));
    assert.equal(mc._provider.hopLimit, 1);
    uni.destroy();
    mc.destroy();
    pd.dealloc();
  } finally {
    ctx.close();
  }
});
