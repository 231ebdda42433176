#!/usr/bin/env node
/**
 * ibv_devinfo: libibverbs' devinfo example (libibverbs/examples/devinfo.c) — each device's
 * attributes and its ports', `-v` every attribute, `-l` only the names, `-d` one device, `-i` one
 * port, with rdma-core's layout, messages and exit statuses (255 for a bad option or an unknown
 * device, 4 for a port the device lacks). docs/man/ibv_devinfo.1.md.
 *
 * Everything comes from `ibv_query_device_ex`, as the C tool asks it: `orig_attr` for the
 * attributes of `ibv_query_device`, the extended ones for the `-v` lines devinfo-ex.ts prints.
 */
import './startup.js';
import { readFileSync } from 'node:fs';
import { GidType, LinkLayer, TransportType, formatGuid, getDeviceList, native, type Device, type DeviceAttrEx, type PortAttr } from '../index.js';
import { errOut, out, progName, runMain, strtolInt } from './c-compat.js';
import { inetNtop6 } from './addresses.js';
import { parseOptions } from './getopt.js';
import { printDeviceAttrEx } from './devinfo-ex.js';
import { DEVICE_CAP_FLAGS, atomicCapStr, linkLayerStr, mtuStr, portPhyStateStr, portStateStr, speedStr, transportStr, vlStr, widthStr } from './devinfo-strings.js';

const LONG = [
  { name: 'ib-dev', hasArg: true, val: 'd' },
  { name: 'ib-port', hasArg: true, val: 'i' },
  { name: 'list', hasArg: false, val: 'l' },
  { name: 'verbose', hasArg: false, val: 'v' },
];

function usage(argv0: string): void {
  out(`Usage: ${argv0}             print the ca attributes\n\n`);
  out('Options:\n');
  out('  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n');
  out('  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n');
  out('  -l, --list             print only the IB devices names\n');
  out('  -v, --verbose          print all the attributes of the IB device(s)\n');
}

/** `print_device_cap_flags`: one line per known bit, then the unknown ones. */
function printDeviceCapFlags(flags: number): void {
  let known = 0;
  for (const [bit, name] of DEVICE_CAP_FLAGS) {
    known |= bit;
    if (flags & bit) out(`\t\t\t\t\t${name}\n`);
  }
  const unknown = (flags & ~known) >>> 0;
  if (unknown) out(`\t\t\t\t\tUnknown flags: 0x${unknown.toString(16).toUpperCase()}\n`);
}

/** The verbose lines of `struct ibv_device_attr_ex`: `orig_attr`, then the extended attributes. */
function printVerboseDevice(x: DeviceAttrEx, numCompVectors: number): void {
  const a = x.origAttr;
  const l = (s: string): void => out(`\t${s}\n`);
  l(`max_mr_size:\t\t\t0x${BigInt.asUintN(64, a.maxMrSize).toString(16)}`);
  l(`page_size_cap:\t\t\t0x${BigInt.asUintN(64, a.pageSizeCap).toString(16)}`);
  l(`max_qp:\t\t\t\t${a.maxQp}`);
  l(`max_qp_wr:\t\t\t${a.maxQpWr}`);
  l(`device_cap_flags:\t\t0x${(a.deviceCapFlags >>> 0).toString(16).padStart(8, '0')}`);
  printDeviceCapFlags(a.deviceCapFlags >>> 0);
  l(`max_sge:\t\t\t${a.maxSge}`);
  l(`max_sge_rd:\t\t\t${a.maxSgeRd}`);
  l(`max_cq:\t\t\t\t${a.maxCq}`);
  l(`max_cqe:\t\t\t${a.maxCqe}`);
  l(`max_mr:\t\t\t\t${a.maxMr}`);
  l(`max_pd:\t\t\t\t${a.maxPd}`);
  l(`max_qp_rd_atom:\t\t\t${a.maxQpRdAtom}`);
  l(`max_ee_rd_atom:\t\t\t${a.maxEeRdAtom}`);
  l(`max_res_rd_atom:\t\t${a.maxResRdAtom}`);
  l(`max_qp_init_rd_atom:\t\t${a.maxQpInitRdAtom}`);
  l(`max_ee_init_rd_atom:\t\t${a.maxEeInitRdAtom}`);
  l(`atomic_cap:\t\t\t${atomicCapStr(a.atomicCap)} (${a.atomicCap})`);
  l(`max_ee:\t\t\t\t${a.maxEe}`);
  l(`max_rdd:\t\t\t${a.maxRdd}`);
  l(`max_mw:\t\t\t\t${a.maxMw}`);
  l(`max_raw_ipv6_qp:\t\t${a.maxRawIpv6Qp}`);
  l(`max_raw_ethy_qp:\t\t${a.maxRawEthyQp}`);
  l(`max_mcast_grp:\t\t\t${a.maxMcastGrp}`);
  l(`max_mcast_qp_attach:\t\t${a.maxMcastQpAttach}`);
  l(`max_total_mcast_qp_attach:\t${a.maxTotalMcastQpAttach}`);
  l(`max_ah:\t\t\t\t${a.maxAh}`);
  l(`max_fmr:\t\t\t${a.maxFmr}`);
  if (a.maxFmr) l(`max_map_per_fmr:\t\t${a.maxMapPerFmr}`);
  l(`max_srq:\t\t\t${a.maxSrq}`);
  if (a.maxSrq) {
    l(`max_srq_wr:\t\t\t${a.maxSrqWr}`);
    l(`max_srq_sge:\t\t\t${a.maxSrqSge}`);
  }
  l(`max_pkeys:\t\t\t${a.maxPkeys}`);
  l(`local_ca_ack_delay:\t\t${a.localCaAckDelay}`);
  printDeviceAttrEx(x);
  l(`num_comp_vectors:\t\t${numCompVectors}`);
}

/** `print_formated_gid`: RoCE v2 GIDs as IPv6 text, the others as eight groups of four digits. */
function printGid(gid: Uint8Array, i: number, type: GidType, linkLayer: LinkLayer): void {
  const v2 = type === GidType.ROCE_V2;
  const suffix = linkLayer === LinkLayer.ETHERNET ? `, ${v2 ? 'RoCE v2' : 'RoCE v1'}` : '';
  const text = v2 ? inetNtop6(gid) : Array.from({ length: 8 }, (_, k) => Buffer.from(gid.subarray(2 * k, 2 * k + 2)).toString('hex')).join(':');
  out(`\t\t\tGID[${String(i).padStart(3)}]:\t\t${text}${suffix}\n`);
}

/** The verbose lines of `struct ibv_port_attr`, then the port's GIDs. Returns false after a failed query. */
function printVerbosePort(dev: Device, p: PortAttr, port: number): boolean {
  const l = (s: string): void => out(`\t\t\t${s}\n`);
  l(`max_msg_sz:\t\t0x${(p.maxMsgSz >>> 0).toString(16)}`);
  l(`port_cap_flags:\t\t0x${(p.portCapFlags >>> 0).toString(16).padStart(8, '0')}`);
  l(`port_cap_flags2:\t0x${p.portCapFlags2.toString(16).padStart(4, '0')}`);
  l(`max_vl_num:\t\t${vlStr(p.maxVlNum)} (${p.maxVlNum})`);
  l(`bad_pkey_cntr:\t\t0x${p.badPkeyCntr.toString(16)}`);
  l(`qkey_viol_cntr:\t\t0x${p.qkeyViolCntr.toString(16)}`);
  l(`sm_sl:\t\t\t${p.smSl}`);
  l(`pkey_tbl_len:\t\t${p.pkeyTblLen}`);
  l(`gid_tbl_len:\t\t${p.gidTblLen}`);
  l(`subnet_timeout:\t\t${p.subnetTimeout}`);
  l(`init_type_reply:\t${p.initTypeReply}`);
  l(`active_width:\t\t${widthStr(p.activeWidth)}X (${p.activeWidth})`);
  l(`active_speed:\t\t${speedStr(p.activeSpeed)} (${p.activeSpeed})`);
  if (dev.transportType === TransportType.IB) l(`phys_state:\t\t${portPhyStateStr(p.physState)} (${p.physState})`);
  const ctx = dev.open();
  const iwarp = dev.transportType === TransportType.IWARP;
  for (let i = 0; i < p.gidTblLen; i++) {
    let gid: Uint8Array;
    try {
      gid = ctx.queryGid(port, i);
    } catch {
      errOut(`Failed to query gid to port ${port}, index ${i}\n`);
      return false;
    }
    // null_gid: an entry whose interface id (last 8 bytes) is zero is not printed
    if (!gid.subarray(8, 16).some((x) => x !== 0)) continue;
    let type: GidType;
    try {
      type = iwarp ? GidType.IB : ctx.queryGidType(port, i);
    } catch {
      type = GidType.IB;
    }
    printGid(gid, i, type, p.linkLayer);
  }
  return true;
}

/** A native device's `board_id` (sysfs), as the C tool reads it; none for the soft devices. */
function boardId(dev: Device): string | null {
  if (dev.provider !== native.PROVIDER) return null;
  try {
    const s = readFileSync(`/sys/class/infiniband/${dev.name}/board_id`, 'utf8').replace(/\n$/, '');
    return s.length > 0 ? s : null;
  } catch {
    return null;
  }
}

/** `print_hca_cap`: 0, or the C tool's status (1 open, 2 query, 4 bad port) after its message. */
function printHcaCap(dev: Device, ibPort: number, verbose: boolean): number {
  let ctx;
  try {
    ctx = dev.open();
  } catch {
    errOut('Failed to open device\n');
    return 1;
  }
  let x: DeviceAttrEx;
  try {
    x = ctx.queryDeviceEx();
  } catch {
    errOut('Failed to query device props\n');
    return 2;
  }
  const a = x.origAttr;
  if (ibPort && ibPort > a.physPortCnt) {
    errOut('Invalid port requested for device\n');
    return 4;
  }
  out(`hca_id:\t${dev.name}\n`);
  out(`\ttransport:\t\t\t${transportStr(dev.transportType)} (${dev.transportType})\n`);
  if (a.fwVer.length > 0) out(`\tfw_ver:\t\t\t\t${a.fwVer}\n`);
  out(`\tnode_guid:\t\t\t${formatGuid(a.nodeGuid)}\n`);
  out(`\tsys_image_guid:\t\t\t${formatGuid(a.sysImageGuid)}\n`);
  out(`\tvendor_id:\t\t\t0x${a.vendorId.toString(16).padStart(4, '0')}\n`);
  out(`\tvendor_part_id:\t\t\t${a.vendorPartId}\n`);
  out(`\thw_ver:\t\t\t\t0x${a.hwVer.toString(16).toUpperCase()}\n`);
  const board = boardId(dev);
  if (board !== null) out(`\tboard_id:\t\t\t${board}\n`);
  out(`\tphys_port_cnt:\t\t\t${a.physPortCnt}\n`);
  if (verbose) printVerboseDevice(x, ctx.numCompVectors);
  for (let port = 1; port <= a.physPortCnt; port++) {
    if (ibPort && port !== ibPort) continue;
    let p: PortAttr;
    try {
      p = ctx.queryPort(port);
    } catch {
      errOut(`Failed to query port ${port} props\n`);
      return 1;
    }
    out(`\t\tport:\t${port}\n`);
    out(`\t\t\tstate:\t\t\t${portStateStr(p.state)} (${p.state})\n`);
    out(`\t\t\tmax_mtu:\t\t${mtuStr(p.maxMtu)} (${p.maxMtu})\n`);
    out(`\t\t\tactive_mtu:\t\t${mtuStr(p.activeMtu)} (${p.activeMtu})\n`);
    out(`\t\t\tsm_lid:\t\t\t${p.smLid}\n`);
    out(`\t\t\tport_lid:\t\t${p.lid}\n`);
    out(`\t\t\tport_lmc:\t\t0x${p.lmc.toString(16).padStart(2, '0')}\n`);
    out(`\t\t\tlink_layer:\t\t${linkLayerStr(p.linkLayer)}\n`);
    if (verbose && !printVerbosePort(dev, p, port)) return 1;
    out('\n');
  }
  return 0;
}

runMain('ibv_devinfo', async (argv) => {
  const argv0 = progName('ibv_devinfo');
  let devName: string | null = null;
  let ibPort = 0;
  let verbose = false;
  let listed = false;
  let badPort = false;
  const operands = parseOptions(argv0, argv, 'd:i:lv', LONG, (o) => {
    switch (o.opt) {
      case 'd': devName = o.optarg ?? ''; return true;
      case 'i':
        ibPort = strtolInt(o.optarg ?? '');
        badPort = ibPort <= 0;
        return !badPort;
      case 'v': verbose = true; return true;
      case 'l': {
        // rdma-core prints the list and exits from inside its option loop
        if (listed) return true;
        listed = true;
        const devs = getDeviceList();
        out(`${devs.length} HCA${devs.length !== 1 ? 's' : ''} found:\n`);
        for (const d of devs) out(`\t${d.name}\n`);
        out('\n');
        return false;
      }
      default: return false;
    }
  });
  if (listed) return 0;
  if (operands === null) {
    usage(argv0);
    return badPort ? 1 : -1;
  }
  const devs = getDeviceList();
  if (devName !== null) {
    const name: string = devName;
    const dev = devs.find((d) => d.name === name);
    if (dev === undefined) {
      errOut(`IB device '${name}' wasn't found\n`);
      return -1;
    }
    return printHcaCap(dev, ibPort, verbose);
  }
  if (devs.length === 0) {
    errOut('No IB devices found\n');
    return -1;
  }
  let ret = 0;
  for (const d of devs) ret |= printHcaCap(d, ibPort, verbose);
  return ret;
});
