#!/usr/bin/env node
/**
 * ibv_devices: libibverbs' device_list example — every RDMA device this package sees with its
 * node GUID, in rdma-core's format. It takes no options (any argument is ignored, as the C tool
 * ignores them) and exits 0. `rdmacm-devices` is the richer listing (backend, transport,
 * interface). docs/man/ibv_devices.1.md.
 */
import './startup.js';
import { getDeviceList } from '../index.js';
import { out, runMain } from './c-compat.js';

runMain('ibv_devices', async () => {
  const devs = getDeviceList();
  out(`    ${'device'.padEnd(16)}\t   node GUID\n`);
  out(`    ${'------'.padEnd(16)}\t----------------\n`);
  for (const d of devs) out(`    ${d.name.padEnd(16)}\t${BigInt.asUintN(64, d.guid).toString(16).padStart(16, '0')}\n`);
  return 0;
});
