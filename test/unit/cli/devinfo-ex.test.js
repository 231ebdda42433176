// ibv_devinfo -v's extended-attribute lines (libibverbs/examples/devinfo.c of rdma-core 44) from
// non-zero ibv_query_device_ex answers: the whole tool over the stand-in native addon
// (test/fixtures/native/fake-addon.cjs, whose fake0 reports ODP, timestamps, TSO, RSS, pacing,
// tag matching, CQ moderation and device memory), and the printer alone for the bits the C tool
// reports as unknown and the conditions under which it leaves a block out.
import test from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { runCli, describeRun } from '../../lib/tools.js';
import { cli } from '../../lib/pingpong.js';
import { printDeviceAttrEx } from '../../../dist/cli/devinfo-ex.js';

const FAKE_ADDON = fileURLToPath(new URL('../../fixtures/native/fake-addon.cjs', import.meta.url));

/** What rdma-core 44 prints for fake0's extended attributes, between local_ca_ack_delay and num_comp_vectors. */
const FAKE0_EX = [
  '\tgeneral_odp_caps:',
  '\t\t\t\t\tODP_SUPPORT',
  '\trc_odp_caps:',
  '\t\t\t\t\tSUPPORT_SEND',
  '\t\t\t\t\tSUPPORT_RECV',
  '\t\t\t\t\tSUPPORT_WRITE',
  '\t\t\t\t\tSUPPORT_READ',
  '\t\t\t\t\tSUPPORT_ATOMIC',
  '\tuc_odp_caps:',
  '\t\t\t\t\tNO SUPPORT',
  '\tud_odp_caps:',
  '\t\t\t\t\tSUPPORT_SEND',
  '\t\t\t\t\tSUPPORT_RECV',
  '\txrc_odp_caps:',
  '\t\t\t\t\tSUPPORT_SEND',
  '\t\t\t\t\tSUPPORT_RECV',
  '\t\t\t\t\tSUPPORT_WRITE',
  '\t\t\t\t\tSUPPORT_READ',
  '\t\t\t\t\tSUPPORT_ATOMIC',
  '\tcompletion timestamp_mask:\t\t\t0x0000ffffffffffff',
  '\thca_core_clock:\t\t\t156250kHZ',
  '\traw packet caps:',
  '\t\t\t\t\tC-VLAN stripping offload',
  '\t\t\t\t\tScatter FCS offload',
  '\t\t\t\t\tIP csum offload',
  '\t\t\t\t\tDelay drop',
  '\tdevice_cap_flags_ex:\t\t0x1000020000',
  '\t\t\t\t\tPCI_WRITE_END_PADDING',
  '\ttso_caps:',
  '\t\tmax_tso:\t\t\t262144',
  '\t\tsupported_qp:',
  '\t\t\t\t\tSUPPORT_RAW_PACKET',
  '\trss_caps:',
  '\t\tmax_rwq_indirection_tables:\t\t\t64',
  '\t\tmax_rwq_indirection_table_size:\t\t\t2048',
  '\t\trx_hash_function:\t\t\t\t0x1',
  '\t\trx_hash_fields_mask:\t\t\t\t0x3F',
  '\t\tsupported_qp:',
  '\t\t\t\t\tSUPPORT_RAW_PACKET',
  '\tmax_wq_type_rq:\t\t\t512',
  '\tpacket_pacing_caps:',
  '\t\tqp_rate_limit_min:\t1000kbps',
  '\t\tqp_rate_limit_max:\t100000000kbps',
  '\t\tsupported_qp:',
  '\t\t\t\t\tSUPPORT_RAW_PACKET',
  '\tmax_rndv_hdr_size:\t\t64',
  '\tmax_num_tags:\t\t\t4096',
  '\tmax_ops:\t\t\t32',
  '\tmax_sge:\t\t\t1',
  '\tflags:',
  '\t\t\t\t\tIBV_TM_CAP_RC',
  '',
  '\tcq moderation caps:',
  '\t\tmax_cq_count:\t65535',
  '\t\tmax_cq_period:\t4095 us',
  '',
  '\tmaximum available device memory:\t131072Bytes',
  '',
].join('\n');

test('ibv_devinfo -v on a native device with extended attributes: devinfo.c\'s lines for each, in its order', async () => {
  const env = { RDMACM_NATIVE_PATH: FAKE_ADDON, RDMACM_BACKEND: '', RDMACM_NATIVE: '' };
  const r = await runCli(cli('ibv_devinfo'), ['-v', '-d', 'fake0'], { env });
  assert.equal(r.code, 0, describeRun('ibv_devinfo -v -d fake0', r));
  const m = /\tlocal_ca_ack_delay:\t\t0\n([\s\S]*)\n\tnum_comp_vectors:\t\t\d+\n/.exec(r.stdout);
  assert.ok(m, r.stdout);
  assert.equal(m[1], FAKE0_EX);
  assert.match(r.stdout, /\tphys_port_cnt:\t\t\t1\n\tmax_mr_size:\t\t\t0xffffffffffffffff\n/, 'orig_attr of ibv_query_device_ex');
});

/** The printer's output for `x`, stdout captured. */
function printed(x) {
  const chunks = [];
  const write = process.stdout.write;
  process.stdout.write = (s) => (chunks.push(String(s)), true);
  try {
    printDeviceAttrEx(x);
  } finally {
    process.stdout.write = write;
  }
  return chunks.join('');
}

function attrEx(over = {}) {
  return {
    compMask: 0,
    odpCaps: { generalCaps: 0n, perTransportCaps: { rcOdpCaps: 0, ucOdpCaps: 0, udOdpCaps: 0 } },
    completionTimestampMask: 0n,
    hcaCoreClock: 0n,
    deviceCapFlagsEx: 0n,
    tsoCaps: { maxTso: 0, supportedQpts: 0 },
    rssCaps: { supportedQpts: 0, maxRwqIndirectionTables: 0, maxRwqIndirectionTableSize: 0, rxHashFieldsMask: 0n, rxHashFunction: 0 },
    maxWqTypeRq: 0,
    packetPacingCaps: { qpRateLimitMin: 0, qpRateLimitMax: 0, supportedQpts: 0 },
    rawPacketCaps: 0,
    tmCaps: { maxRndvHdrSize: 0, maxNumTags: 0, flags: 0, maxOps: 0, maxSge: 0 },
    cqModCaps: { maxCqCount: 0, maxCqPeriod: 0 },
    maxDmSize: 0n,
    pciAtomicCaps: { fetchAdd: 0, swap: 0, compareSwap: 0 },
    xrcOdpCaps: 0,
    physPortCntEx: 1,
    ...over,
  };
}

test('devinfo extended lines: unknown ODP, QP-type and flag bits as "Unknown flags", low 32 bits of device_cap_flags_ex not named', () => {
  const s = printed(attrEx({
    odpCaps: { generalCaps: (1n << 1n) | (1n << 40n), perTransportCaps: { rcOdpCaps: (1 << 5) | (1 << 9), ucOdpCaps: 0, udOdpCaps: 0 } },
    deviceCapFlagsEx: (1n << 34n) | (1n << 41n) | (1n << 22n) | 0x1223c76n,
    tsoCaps: { maxTso: 65536, supportedQpts: (1 << 4) | (1 << 2) },
    packetPacingCaps: { qpRateLimitMin: 0, qpRateLimitMax: 10, supportedQpts: 1 << 4 },
  }));
  const lines = s.split('\n');
  const after = (head, n) => lines.slice(lines.indexOf(head) + 1, lines.indexOf(head) + 1 + n);
  assert.deepEqual(after('\tgeneral_odp_caps:', 2), ['\t\t\t\t\tODP_SUPPORT_IMPLICIT', '\t\t\t\t\tUnknown flags: 0x10000000000']);
  assert.deepEqual(after('\trc_odp_caps:', 3), ['\t\t\t\t\tSUPPORT_SRQ', '\t\t\t\t\tUnknown flags: 0x200', '\tuc_odp_caps:']);
  assert.deepEqual(after('\tdevice_cap_flags_ex:\t\t0x20401623C76', 3), ['\t\t\t\t\tRAW_SCATTER_FCS', '\t\t\t\t\tUnknown flags: 0x20000000000', '\ttso_caps:']);
  assert.deepEqual(after('\t\tmax_tso:\t\t\t65536', 3), ['\t\tsupported_qp:', '\t\t\t\t\tSUPPORT_UD', '\t\t\t\t\tUnknown flags: 0x4']);
  assert.deepEqual(after('\t\tqp_rate_limit_max:\t10kbps', 3), ['\t\tsupported_qp:', '\t\t\t\t\tSUPPORT_UD', '\ttag matching not supported']);
  assert.ok(!s.includes('raw packet caps') && !s.includes('cq moderation') && !s.includes('device memory'), s);
});

test('devinfo extended lines: RSS QP types printed even without tables; CQ moderation only with both bounds', () => {
  const s = printed(attrEx({
    rssCaps: { supportedQpts: 1 << 8, maxRwqIndirectionTables: 0, maxRwqIndirectionTableSize: 0, rxHashFieldsMask: 0n, rxHashFunction: 0 },
    cqModCaps: { maxCqCount: 16, maxCqPeriod: 0 },
  }));
  assert.ok(s.includes('\t\trx_hash_fields_mask:\t\t\t\t0x0\n\t\tsupported_qp:\n\t\t\t\t\tSUPPORT_RAW_PACKET\n\tmax_wq_type_rq:'), s);
  assert.ok(s.includes('\t\tmax_tso:\t\t\t0\n\trss_caps:\n'), 'no supported_qp without max_tso');
  assert.ok(!s.includes('cq moderation'), s);
});
