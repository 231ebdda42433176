// Every address argument of every CM call is checked one way (src/cm/addr-check.ts) before the
// call changes or sends anything: a bad value is an RdmaError EINVAL saying what was wrong, never
// a TypeError or a port truncated to 16 bits; an unknown device pin is ENODEV naming the device,
// at createId. Run on every device whose CM connects RDMA_PS_TCP ids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createId, createEventChannel, createEp, getaddrinfo, PortSpace, CmState, RdmaError, RAI } from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';

/** Values that are no address, and what the error must name. */
const BAD = [
  [null, /not null/],
  [undefined, /not undefined/],
  ['127.0.0.1', /address object/],
  [7471, /address object/],
  [[], /address object/],
  [{}, /address must be a string/],
  [{ address: 127, port: 1 }, /address must be a string/],
  [{ address: 'localhost', port: 1 }, /not an IP address/],
  [{ address: '127.0.0.1' }, /port undefined/],
  [{ address: '127.0.0.1', port: 70000 }, /port 70000 \(an integer in 0\.\.65535\)/],
  [{ address: '127.0.0.1', port: 65536 }, /port 65536/],
  [{ address: '127.0.0.1', port: -1 }, /port -1/],
  [{ address: '127.0.0.1', port: 1.5 }, /port 1\.5/],
  [{ address: '127.0.0.1', port: NaN }, /port NaN/],
  [{ address: '127.0.0.1', port: Infinity }, /port Infinity/],
  [{ address: '127.0.0.1', port: '7471' }, /port "7471"/],
  [{ address: '127.0.0.1', port: 1, family: 'IPv5' }, /family "IPv5"/],
  [{ address: '127.0.0.1', port: 1, family: 'IPv6' }, /is not IPv6/],
  [{ address: '::1', port: 1, family: 'IPv4' }, /is not IPv4/],
  [{ address: '127.0.0.1', port: 1, family: 'IB' }, /GID in IPv6 notation/],
];

function einval(op, re) {
  return (e) => {
    assert.ok(e instanceof RdmaError, `expected an RdmaError, got ${e?.name}: ${e?.message}`);
    assert.equal(e.code, 'EINVAL');
    assert.equal(e.errno, 22);
    assert.equal(e.op, op);
    assert.match(e.message, re);
    return true;
  };
}

forEachDevice([Cap.CM_TCP], () => {
  test('rdma_bind_addr: every bad address is EINVAL naming what is wrong; the id stays IDLE', async () => {
    for (const [a, re] of BAD) {
      const id = createId(null, null, PortSpace.TCP);
      assert.throws(() => id.bindAddr(a), einval('rdma_bind_addr', re), String(JSON.stringify(a)));
      assert.equal(id.state, CmState.IDLE);
      await id.destroy();
    }
  });

  test('rdma_resolve_addr: every bad destination and source is EINVAL before anything is sent; the id stays as it was', async () => {
    const ch = createEventChannel();
    for (const [a, re] of BAD) {
      const id = createId(ch, null, PortSpace.TCP);
      await assert.rejects(id.resolveAddr(null, a), einval('rdma_resolve_addr', re), `dst ${JSON.stringify(a)}`);
      assert.equal(id.state, CmState.IDLE);
      if (a !== null && a !== undefined) {
        await assert.rejects(id.resolveAddr(a, { address: '127.0.0.1', port: 1 }), einval('rdma_resolve_addr', re), `src ${JSON.stringify(a)}`);
        assert.equal(id.state, CmState.IDLE);
      }
      assert.equal(ch.pending, 0, 'no event');
      await id.destroy();
    }
    ch.destroy();
  });

  test('a destination port of 70000 is refused, not wrapped to 4464 and connected to a listener there', async () => {
    const ch = createEventChannel();
    const listen = createId(ch, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 70000 - 65536 });
    await listen.listen();
    const id = createId(null, null, PortSpace.TCP);
    await assert.rejects(id.resolveAddr(null, { address: '127.0.0.1', port: 70000 }), einval('rdma_resolve_addr', /port 70000/));
    assert.equal(id.state, CmState.IDLE);
    assert.equal(ch.pending, 0, 'no connect request reached the listener');
    await id.destroy();
    await listen.destroy();
    ch.destroy();
  });

  test('rdma_join_multicast / rdma_leave_multicast: a bad group address is EINVAL (a missing port is 0)', async () => {
    for (const [a, re] of BAD) {
      if (a !== null && typeof a === 'object' && !Array.isArray(a) && a.address === '127.0.0.1' && a.port === undefined) continue;
      const id = createId(null, null, PortSpace.UDP);
      await assert.rejects(id.joinMulticast(a), einval('rdma_join_multicast', re), JSON.stringify(a));
      await assert.rejects(id.joinMulticastEx({ addr: a, joinFlags: 0 }), einval('rdma_join_multicast', re));
      await assert.rejects(id.leaveMulticast(a), einval('rdma_leave_multicast', re));
      await id.destroy();
    }
    const id = createId(null, null, PortSpace.UDP);
    await assert.rejects(id.joinMulticastEx(null), einval('rdma_join_multicast', /not undefined/));
    // No port: port 0; the id is not bound, so the state check refuses it next (EINVAL, state IDLE).
    await assert.rejects(id.joinMulticast({ address: '239.1.2.3' }), einval('rdma_join_multicast', /state IDLE/));
    await assert.rejects(id.leaveMulticast({ address: '239.1.2.3' }), (e) => e.code === 'EADDRNOTAVAIL');
    await id.destroy();
  });

  test('rdma_getaddrinfo: bad hints and a bad numeric service are EINVAL', async () => {
    for (const [a, re] of BAD) {
      if (a === undefined) continue;
      await assert.rejects(getaddrinfo('127.0.0.1', '7471', { srcAddr: a }), einval('rdma_getaddrinfo', re), JSON.stringify(a));
    }
    await assert.rejects(getaddrinfo('127.0.0.1', 70000), einval('rdma_getaddrinfo', /service port 70000/));
    await assert.rejects(getaddrinfo('127.0.0.1', -1), einval('rdma_getaddrinfo', /service port -1/));
    await assert.rejects(getaddrinfo('127.0.0.1', 1.5), einval('rdma_getaddrinfo', /service port 1\.5/));
    await assert.rejects(getaddrinfo('127.0.0.1', '7471', null), einval('rdma_getaddrinfo', /hints must be an object/));
    await assert.rejects(getaddrinfo(42, '7471'), einval('rdma_getaddrinfo', /node must be a string/));
    await assert.rejects(getaddrinfo('127.0.0.1', '7471', { family: 'IPv5' }), einval('rdma_getaddrinfo', /hints family IPv5/));
    // glibc's reading of a service string is kept: "70000" is port 4464.
    assert.equal((await getaddrinfo('127.0.0.1', '70000')).dstAddr.port, 4464);
  });

  test('rdma_create_ep: a bad address in the rdma_addrinfo is EINVAL before an id is made', async () => {
    const res = await getaddrinfo('127.0.0.1', '7471');
    await assert.rejects(createEp({ ...res, dstAddr: { address: '127.0.0.1', port: 70000 } }), einval('rdma_create_ep', /destination port 70000/));
    await assert.rejects(createEp({ ...res, flags: RAI.PASSIVE, srcAddr: { address: 'x', port: 1 } }), einval('rdma_create_ep', /source address "x"/));
    await assert.rejects(createEp(null), einval('rdma_create_ep', /no rdma_addrinfo/));
  });
});

test('a channel that is no EventChannel, options that are no object, a signal that is no AbortSignal: EINVAL, nothing changed', async () => {
  const inval = (op, re) => (e) => e instanceof RdmaError && e.code === 'EINVAL' && e.op === op && re.test(e.message);
  assert.throws(() => createId('ch'), inval('rdma_create_id', /channel must be an EventChannel or null/));
  assert.throws(() => createId({}), inval('rdma_create_id', /channel must be an EventChannel or null/));
  assert.throws(() => createId(null, null, PortSpace.TCP, 'siw_lo'), inval('rdma_create_id', /options must be an object/));
  const id = createId(null, null, PortSpace.TCP, null);
  await assert.rejects(id.migrate('ch'), inval('rdma_migrate_id', /channel must be an EventChannel/));
  assert.equal(id.isSync, true, 'still synchronous on its own channel');
  await assert.rejects(id.resolveAddr(null, { address: '127.0.0.1', port: 1 }, 2000, 'signal'), inval('rdma_resolve_addr', /signal must be an AbortSignal/));
  await assert.rejects(id.connect(undefined, {}), inval('rdma_connect', /signal must be an AbortSignal/));
  assert.equal(id.state, CmState.IDLE);
  await assert.rejects(createEventChannel().getEvent('signal'), inval('rdma_get_cm_event', /signal must be an AbortSignal/));
  await id.destroy();
});

test('createId: an unknown device is ENODEV naming it, where it is given (option or RDMACM_DEVICE)', () => {
  assert.throws(
    () => createId(null, null, PortSpace.TCP, { device: 'nosuchdev' }),
    (e) => e instanceof RdmaError && e.code === 'ENODEV' && e.op === 'rdma_create_id' && /"nosuchdev" \(device\)/.test(e.message),
  );
  assert.throws(() => createId(null, null, PortSpace.TCP, { device: 7 }), (e) => e instanceof RdmaError && e.code === 'EINVAL' && /device must be a device name, not 7/.test(e.message));
  const saved = process.env.RDMACM_DEVICE;
  process.env.RDMACM_DEVICE = 'nosuchdev';
  try {
    assert.throws(() => createId(null, null, PortSpace.TCP), (e) => e.code === 'ENODEV' && /"nosuchdev" \(RDMACM_DEVICE\)/.test(e.message));
  } finally {
    if (saved === undefined) delete process.env.RDMACM_DEVICE;
    else process.env.RDMACM_DEVICE = saved;
  }
});
