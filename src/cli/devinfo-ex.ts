/**
 * The verbose lines ibv_devinfo prints from `struct ibv_device_attr_ex` past `orig_attr`
 * (libibverbs/examples/devinfo.c of rdma-core 44: `print_odp_caps`, the completion timestamp and
 * core clock lines, `print_raw_packet_caps`, `print_device_cap_flags_ex`, `print_tso_caps`,
 * `print_rss_caps`, `print_packet_pacing_caps`, `print_tm_caps`, `print_cq_moderation_caps`,
 * the device memory line), in its order and with its conditions. rdma-core 44 prints neither
 * `pci_atomic_caps` nor `phys_port_cnt_ex`.
 */
import type { DeviceAttrEx } from '../index.js';
import { out } from './c-compat.js';

/** `enum ibv_odp_general_caps`. */
const ODP_SUPPORT = 1n << 0n;
const ODP_SUPPORT_IMPLICIT = 1n << 1n;

/** `enum ibv_odp_transport_cap_bits`, with the names `print_odp_trans_caps` gives them. */
const ODP_TRANSPORT_CAPS: readonly (readonly [number, string])[] = Object.freeze([
  [1 << 0, 'SUPPORT_SEND'],
  [1 << 1, 'SUPPORT_RECV'],
  [1 << 2, 'SUPPORT_WRITE'],
  [1 << 3, 'SUPPORT_READ'],
  [1 << 4, 'SUPPORT_ATOMIC'],
  [1 << 5, 'SUPPORT_SRQ'],
] as const);

/** `IBV_DEVICE_RAW_SCATTER_FCS` and `IBV_DEVICE_PCI_WRITE_END_PADDING`: the named bits above 32. */
const DEVICE_CAP_FLAGS_EX: readonly (readonly [bigint, string])[] = Object.freeze([
  [1n << 34n, 'RAW_SCATTER_FCS'],
  [1n << 36n, 'PCI_WRITE_END_PADDING'],
] as const);
const LOW_32_BITS = 0xffffffffn;

/** `enum ibv_raw_packet_caps`, with `print_raw_packet_caps`' texts. */
const RAW_PACKET_CAPS: readonly (readonly [number, string])[] = Object.freeze([
  [1 << 0, 'C-VLAN stripping offload'],
  [1 << 1, 'Scatter FCS offload'],
  [1 << 2, 'IP csum offload'],
  [1 << 3, 'Delay drop'],
] as const);

/** `IBV_QPT_UD` and `IBV_QPT_RAW_PACKET`: the QP types the TSO, RSS and pacing caps name. */
const QPT_UD = 4;
const QPT_RAW_PACKET = 8;
const QPT_NAMED = (1 << QPT_RAW_PACKET) | (1 << QPT_UD);

/** `IBV_TM_CAP_RC`. */
const TM_CAP_RC = 1 << 0;

const FLAG_INDENT = '\t\t\t\t\t';
const hex = (v: number | bigint): string => v.toString(16).toUpperCase();

/** `print_odp_trans_caps`. */
function printOdpTransCaps(trans: number): void {
  if (trans === 0) {
    out(`${FLAG_INDENT}NO SUPPORT\n`);
    return;
  }
  let known = 0;
  for (const [bit, name] of ODP_TRANSPORT_CAPS) {
    known |= bit;
    if (trans & bit) out(`${FLAG_INDENT}${name}\n`);
  }
  const unknown = (trans & ~known) >>> 0;
  if (unknown) out(`${FLAG_INDENT}Unknown flags: 0x${hex(unknown)}\n`);
}

/** `print_odp_caps`: the general bits, then each transport's (XRC from `xrc_odp_caps`). */
function printOdpCaps(x: DeviceAttrEx): void {
  const general = BigInt.asUintN(64, x.odpCaps.generalCaps);
  out('\tgeneral_odp_caps:\n');
  if (general & ODP_SUPPORT) out(`${FLAG_INDENT}ODP_SUPPORT\n`);
  if (general & ODP_SUPPORT_IMPLICIT) out(`${FLAG_INDENT}ODP_SUPPORT_IMPLICIT\n`);
  const unknown = general & ~(ODP_SUPPORT | ODP_SUPPORT_IMPLICIT);
  if (unknown) out(`${FLAG_INDENT}Unknown flags: 0x${hex(unknown)}\n`);
  const t = x.odpCaps.perTransportCaps;
  for (const [name, caps] of [['rc', t.rcOdpCaps], ['uc', t.ucOdpCaps], ['ud', t.udOdpCaps], ['xrc', x.xrcOdpCaps]] as const) {
    out(`\t${name}_odp_caps:\n`);
    printOdpTransCaps(caps >>> 0);
  }
}

/** `print_device_cap_flags_ex`: the bits above 32 only (the low ones are device_cap_flags'). */
function printDeviceCapFlagsEx(flags: bigint): void {
  const ex = flags & ~LOW_32_BITS;
  let known = 0n;
  for (const [bit, name] of DEVICE_CAP_FLAGS_EX) {
    known |= bit;
    if (ex & bit) out(`${FLAG_INDENT}${name}\n`);
  }
  const unknown = ex & ~known;
  if (unknown) out(`${FLAG_INDENT}Unknown flags: 0x${hex(unknown)}\n`);
}

/** The `supported_qp:` block of the TSO, RSS and packet pacing caps (`ibv_is_qpt_supported`). */
function printSupportedQpts(qpts: number): void {
  out('\t\tsupported_qp:\n');
  if (qpts & (1 << QPT_RAW_PACKET)) out(`${FLAG_INDENT}SUPPORT_RAW_PACKET\n`);
  if (qpts & (1 << QPT_UD)) out(`${FLAG_INDENT}SUPPORT_UD\n`);
  const unknown = (qpts & ~QPT_NAMED) >>> 0;
  if (unknown) out(`${FLAG_INDENT}Unknown flags: 0x${hex(unknown)}\n`);
}

/** `print_tm_caps`. */
function printTmCaps(tm: DeviceAttrEx['tmCaps']): void {
  if (tm.maxNumTags === 0) {
    out('\ttag matching not supported\n');
    return;
  }
  out(`\tmax_rndv_hdr_size:\t\t${tm.maxRndvHdrSize >>> 0}\n`);
  out(`\tmax_num_tags:\t\t\t${tm.maxNumTags >>> 0}\n`);
  out(`\tmax_ops:\t\t\t${tm.maxOps >>> 0}\n`);
  out(`\tmax_sge:\t\t\t${tm.maxSge >>> 0}\n`);
  out('\tflags:\n');
  if (tm.flags & TM_CAP_RC) out(`${FLAG_INDENT}IBV_TM_CAP_RC\n`);
}

/**
 * The lines devinfo.c prints after `local_ca_ack_delay` and before `num_comp_vectors`. A device
 * with nothing past `device_cap_flags_ex` (siw, rxe) gets the "not supported" and zero lines.
 */
export function printDeviceAttrEx(x: DeviceAttrEx): void {
  printOdpCaps(x);
  const tsMask = BigInt.asUintN(64, x.completionTimestampMask);
  if (tsMask) out(`\tcompletion timestamp_mask:\t\t\t0x${tsMask.toString(16).padStart(16, '0')}\n`);
  else out('\tcompletion_timestamp_mask not supported\n');
  const clock = BigInt.asUintN(64, x.hcaCoreClock);
  if (clock) out(`\thca_core_clock:\t\t\t${clock}kHZ\n`);
  else out('\tcore clock not supported\n');
  if (x.rawPacketCaps) {
    out('\traw packet caps:\n');
    for (const [bit, text] of RAW_PACKET_CAPS) if (x.rawPacketCaps & bit) out(`${FLAG_INDENT}${text}\n`);
  }
  const flagsEx = BigInt.asUintN(64, x.deviceCapFlagsEx);
  out(`\tdevice_cap_flags_ex:\t\t0x${hex(flagsEx)}\n`);
  printDeviceCapFlagsEx(flagsEx);
  // print_tso_caps: max_tso is printed with %d
  out('\ttso_caps:\n');
  out(`\t\tmax_tso:\t\t\t${x.tsoCaps.maxTso | 0}\n`);
  if (x.tsoCaps.maxTso) printSupportedQpts(x.tsoCaps.supportedQpts);
  const rss = x.rssCaps;
  out('\trss_caps:\n');
  out(`\t\tmax_rwq_indirection_tables:\t\t\t${rss.maxRwqIndirectionTables >>> 0}\n`);
  out(`\t\tmax_rwq_indirection_table_size:\t\t\t${rss.maxRwqIndirectionTableSize >>> 0}\n`);
  out(`\t\trx_hash_function:\t\t\t\t0x${(rss.rxHashFunction >>> 0).toString(16)}\n`);
  out(`\t\trx_hash_fields_mask:\t\t\t\t0x${hex(BigInt.asUintN(64, rss.rxHashFieldsMask))}\n`);
  if (rss.supportedQpts) printSupportedQpts(rss.supportedQpts);
  out(`\tmax_wq_type_rq:\t\t\t${x.maxWqTypeRq >>> 0}\n`);
  const pp = x.packetPacingCaps;
  out('\tpacket_pacing_caps:\n');
  out(`\t\tqp_rate_limit_min:\t${pp.qpRateLimitMin >>> 0}kbps\n`);
  out(`\t\tqp_rate_limit_max:\t${pp.qpRateLimitMax >>> 0}kbps\n`);
  if (pp.qpRateLimitMax) printSupportedQpts(pp.supportedQpts);
  printTmCaps(x.tmCaps);
  // print_cq_moderation_caps: both bounds or nothing
  if (x.cqModCaps.maxCqCount && x.cqModCaps.maxCqPeriod) {
    out('\n\tcq moderation caps:\n');
    out(`\t\tmax_cq_count:\t${x.cqModCaps.maxCqCount >>> 0}\n`);
    out(`\t\tmax_cq_period:\t${x.cqModCaps.maxCqPeriod >>> 0} us\n\n`);
  }
  const dm = BigInt.asUintN(64, x.maxDmSize);
  if (dm) out(`\tmaximum available device memory:\t${dm}Bytes\n\n`);
}
