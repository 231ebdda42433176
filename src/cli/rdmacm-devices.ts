#!/usr/bin/env node
/**
 * rdmacm-devices: the RDMA devices this package sees, as `ibv_devices` lists them, with the
 * backend of each — `native` for the kernel's devices reached through rdma-core (the optional
 * addon), `soft` for this package's own — and the state of the native addon.
 *
 *   rdmacm-devices          device, node GUID, backend, transport, network interface
 *   rdmacm-devices -v       also each device's addresses and, for native devices, vendor and port state
 *   rdmacm-devices -j       the same as JSON
 *
 * Exit status 0; 1 for a bad option.
 */
import './startup.js';
import { PortState, TransportType, backendSelection, getDeviceList, native, portStateStr, type Device } from '../index.js';
import { exit, installTopLevelHandlers, out } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';

const PROG = 'rdmacm-devices';

function usage(): void {
  out(`Usage: ${PROG} [-v] [-j]\n  -v  verbose: addresses, vendor and port state\n  -j  JSON output\n`);
}

function transportName(t: TransportType): string {
  return t === TransportType.IWARP ? 'iWARP' : t === TransportType.IB ? 'InfiniBand' : 'unknown';
}

interface Row {
  device: string;
  nodeGuid: string;
  backend: 'native' | 'soft';
  transport: string;
  netdev: string;
  addresses: string[];
  vendorId?: number;
  vendorPartId?: number;
  portState?: string;
}

function rowOf(dev: Device, verbose: boolean): Row {
  const kernel = dev.provider === native.PROVIDER;
  const row: Row = {
    device: dev.name,
    nodeGuid: BigInt.asUintN(64, dev.guid).toString(16).padStart(16, '0'),
    backend: kernel ? 'native' : 'soft',
    transport: transportName(dev.transportType),
    netdev: dev.ifname,
    addresses: dev.info.addresses.map((a) => a.address),
  };
  if (verbose) {
    try {
      const ctx = dev.open();
      const a = ctx.queryDevice();
      row.vendorId = a.vendorId;
      row.vendorPartId = a.vendorPartId;
      row.portState = portStateStr(ctx.queryPort(1).state as PortState);
    } catch (e) {
      row.portState = `(${e instanceof Error ? e.message : String(e)})`;
    }
  }
  return row;
}

function main(): void {
  let verbose = false;
  let json = false;
  const g = new Getopt(process.argv.slice(2), 'vjh');
  for (let o = g.next(); o !== null; o = g.next()) {
    switch (o.opt) {
      case 'v':
        verbose = true;
        break;
      case 'j':
        json = true;
        break;
      case 'h':
        usage();
        exit(0);
        return;
      default:
        getoptComplaint(PROG, o, 'vjh');
        usage();
        exit(1);
        return;
    }
  }
  const st = native.addonStatus();
  const rows = getDeviceList().map((d) => rowOf(d, verbose));
  if (json) {
    out(`${JSON.stringify({ backend: backendSelection(), native: { loaded: st.loaded, reason: st.reason, path: st.path }, devices: rows }, null, 2)}\n`);
    exit(0);
    return;
  }
  const nNative = rows.filter((r) => r.backend === 'native').length;
  const kernel = st.loaded && nNative === 0 ? '; the kernel reports no RDMA device' : '';
  out(`native addon: ${st.loaded ? `loaded (${st.path})${kernel}` : `not loaded: ${st.reason}`}\n`);
  out(`backend selection: ${backendSelection()} (RDMACM_BACKEND)\n`);
  out(`    ${'device'.padEnd(16)}\t${'   node GUID'.padEnd(16)}\tbackend\ttransport \tnetdev\n`);
  out(`    ${'------'.padEnd(16)}\t${'----------------'}\t-------\t--------- \t------\n`);
  for (const r of rows) {
    out(`    ${r.device.padEnd(16)}\t${r.nodeGuid}\t${r.backend.padEnd(7)}\t${r.transport.padEnd(10)}\t${r.netdev || '-'}\n`);
    if (verbose) {
      out(`        addresses: ${r.addresses.join(' ') || '-'}\n`);
      if (r.vendorId !== undefined) out(`        vendor_id: 0x${r.vendorId.toString(16)}  vendor_part_id: ${r.vendorPartId}\n`);
      if (r.portState !== undefined) out(`        port 1: ${r.portState}\n`);
    }
  }
  exit(0);
}

installTopLevelHandlers(PROG);
main();
