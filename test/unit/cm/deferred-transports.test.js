// Deferred transports (src/cm/transport.ts `deferTransports`): a process may register a loader
// for transports it has not loaded (the connection tools defer the soft RoCE transport); the CM
// runs it once, before the first rdma_listen on a wildcard address, which listens through every
// transport serving the port space. Ids bound to a device never run it. Fake transports only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { registerProvider } from '../../../dist/verbs/provider.js';
import { siwDeviceAttr, siwPortAttr } from '../../../dist/transport/iwarp/attrs.js';
import { TransportType, Access } from '../../../dist/verbs/types.js';
import { createId, createEventChannel, registerCmTransport, deferTransports, loadDeferredTransports, CmState, PortSpace } from '../../../dist/cm/index.js';
import { RdmaError } from '../../../dist/errors.js';

const ADDR = '198.51.100.40';

function provider(name) {
  return {
    name,
    listDevices: () => [
      { name: `${name}0`, provider: name, transport: TransportType.IWARP, ifname: 'test0', mtu: 1500, mac: '02:00:00:00:00:40', addresses: [{ address: ADDR, family: 'IPv4', netmask: '255.255.255.0' }], nodeGuid: 0x40n },
    ],
    queryDevice: siwDeviceAttr,
    queryPort: siwPortAttr,
    queryGid: () => new Uint8Array(16),
    accessMask: () => Access.LOCAL_WRITE,
    createQp: () => {
      throw new RdmaError('EOPNOTSUPP', { op: 'ibv_create_qp' });
    },
  };
}

function transport(name, providerName) {
  const t = {
    name,
    provider: providerName,
    portSpaces: [PortSpace.TCP],
    privateDataLimits: { connect: 16, accept: 16, reject: 16, udConnect: 16, udAccept: 16 },
    listens: [],
    createEndpoint: (host) => ({
      host,
      connect: async () => {},
      accept: async () => {},
      reject: () => {},
      disconnect: () => false,
      initQpAttr: (state) => ({ attr: { qpState: state }, mask: 0 }),
      destroy: () => {},
    }),
    async listen(host, req) {
      const l = { req, port: req.addr.port || 18515, close: () => {} };
      t.listens.push(l);
      return l;
    },
  };
  return t;
}

registerProvider(provider('eageriw'));
const EAGER = transport('eagercm', 'eageriw');
registerCmTransport(EAGER);
const LATE = transport('latecm', 'lateprov');
let loads = 0;
deferTransports(async () => {
  loads++;
  await new Promise((r) => setTimeout(r, 5));
  registerCmTransport(LATE);
});

test('an id bound to a device listens through its transport and leaves the deferred loader alone', async () => {
  const id = createId(createEventChannel(), null, PortSpace.TCP);
  id.bindAddr({ address: ADDR, port: 7001 });
  await id.listen(1);
  assert.equal(loads, 0);
  assert.equal(EAGER.listens.length, 1);
  assert.equal(LATE.listens.length, 0);
  await id.destroy();
});

test('the first wildcard listen runs the loader once; its transports listen on the same port', async () => {
  const id = createId(createEventChannel(), null, PortSpace.TCP);
  id.bindAddr({ address: '0.0.0.0', port: 7002 });
  await id.listen(1);
  assert.equal(loads, 1);
  assert.equal(id.state, CmState.LISTEN);
  assert.deepEqual([EAGER.listens.at(-1).req.addr.port, LATE.listens.length, LATE.listens[0].req.addr.port], [7002, 1, 7002]);
  const again = createId(createEventChannel(), null, PortSpace.TCP);
  await again.listen(1);
  assert.equal(loads, 1, 'a loader runs once');
  assert.equal(LATE.listens.length, 2);
  await loadDeferredTransports();
  assert.equal(loads, 1);
  await id.destroy();
  await again.destroy();
});

test('an id destroyed while the deferred transports load: listen fails instead of listening', async () => {
  let release;
  deferTransports(() => new Promise((r) => (release = r)));
  const id = createId(createEventChannel(), null, PortSpace.TCP);
  id.bindAddr({ address: '0.0.0.0', port: 7003 });
  const before = EAGER.listens.length;
  const p = id.listen(1);
  await new Promise((r) => setImmediate(r));
  await id.destroy();
  release();
  await assert.rejects(p, (e) => e instanceof RdmaError);
  assert.equal(EAGER.listens.length, before);
});
