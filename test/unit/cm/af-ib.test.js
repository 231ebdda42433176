// AF_IB addresses (RAI_FAMILY with family 'IB'): rdma_getaddrinfo reads a numeric address as a
// GID (librdmacm's ucma_convert_in6), and the CM, whose devices are not addressed by GID,
// refuses them where the kernel finds no device: rdma_resolve_addr and a bind of a GID fail with
// ENODEV; the zero GID binds the wildcard.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getaddrinfo, createId, PortSpace, RAI, RdmaError, CmState } from '../../../dist/index.js';

const AF_IB = { flags: RAI.NUMERICHOST | RAI.FAMILY, family: 'IB' };
const enodev = (e) => e instanceof RdmaError && e.code === 'ENODEV';

test('rdma_getaddrinfo with AF_IB: an IPv6 address is the GID, an IPv4 one the zero GID; without both flags the IP answer', async () => {
  let r = await getaddrinfo('fe80::1', '7471', AF_IB);
  assert.deepEqual([r.family, r.dstAddr], ['IB', { address: 'fe80::1', port: 7471, family: 'IB' }]);
  r = await getaddrinfo('127.0.0.1', '7471', AF_IB);
  assert.deepEqual(r.dstAddr, { address: '::', port: 7471, family: 'IB' });
  r = await getaddrinfo(null, '7471', { ...AF_IB, flags: AF_IB.flags | RAI.PASSIVE });
  assert.deepEqual([r.family, r.srcAddr, r.dstAddr], ['IB', { address: '::', port: 7471, family: 'IB' }, null]);
  r = await getaddrinfo('127.0.0.1', '7471', { flags: RAI.NUMERICHOST, family: 'IB' });
  assert.deepEqual(r.dstAddr, { address: '127.0.0.1', port: 7471, family: 'IPv4' });
});

test('rdma_resolve_addr to or from an AF_IB address: ENODEV, the id unchanged', async () => {
  const id = createId(null, null, PortSpace.TCP);
  await assert.rejects(id.resolveAddr(null, { address: '::', port: 7471, family: 'IB' }), enodev);
  await assert.rejects(id.resolveAddr({ address: '::', port: 0, family: 'IB' }, { address: '127.0.0.1', port: 7471 }), enodev);
  assert.equal(id.state, CmState.IDLE);
  await id.destroy();
});

test('rdma_bind_addr of an AF_IB address: a GID no device has is ENODEV; the zero GID binds the wildcard', async () => {
  const id = createId(null, null, PortSpace.TCP);
  assert.throws(() => id.bindAddr({ address: 'fe80::1', port: 0, family: 'IB' }), enodev);
  assert.equal(id.state, CmState.IDLE);
  id.bindAddr({ address: '::', port: 0, family: 'IB' });
  assert.equal(id.state, CmState.ADDR_BOUND);
  assert.equal(id.localAddr.address, '0.0.0.0');
  await id.destroy();
});
