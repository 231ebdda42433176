// Pins the public surface of rdmacm/wire's `roce` namespace, which the soft RoCE device and the
// IB CM build on, so accidental removals or renames show up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as wire from '../../../../dist/wire/index.js';

test('roce namespace exports the documented API, next to the iWARP names', () => {
  const { roce } = wire;
  const functions = [
    // opcodes
    'ibOpcodeInfo', 'ibOpcodeName', 'ibOpcodeClass', 'aethCreditCode', 'aethCredits',
    // BTH / headers / PSN
    'bthOpcode', 'bthSe', 'bthMig', 'bthPad', 'bthTver', 'bthPkey', 'bthFecn', 'bthBecn', 'bthQpn', 'bthAckReq', 'bthPsn',
    'setBthOpcode', 'setBthSe', 'setBthMig', 'setBthPad', 'setBthTver', 'setBthPkey', 'setBthFecn', 'setBthBecn', 'setBthQpn',
    'setBthAckReq', 'setBthPsn', 'writeBth', 'readBth', 'pkeyMatch',
    'dethQkey', 'dethSrcQp', 'writeDeth', 'rethVa', 'rethVaBig', 'rethRkey', 'rethLen', 'writeReth', 'aethSyndrome', 'aethMsn',
    'writeAeth', 'atmethVa', 'atmethVaBig', 'atmethRkey', 'atmethSwapAdd', 'atmethCompare', 'writeAtmeth', 'atmackOrig',
    'writeAtmack', 'immDt', 'writeImmDt', 'iethRkey', 'writeIeth', 'fethPlacementType', 'fethSelectivity', 'writeFeth',
    'rdethEecn', 'writeRdeth', 'psnAdd', 'psnNext', 'psnDiff', 'psnCompare', 'psnBefore', 'psnAfter',
    // ICRC and IP headers
    'crc32', 'crc32Js', 'crc32Bitwise', 'crc32Range', 'useCrc32Backend', 'icrcCompute', 'icrcWrite', 'icrcVerify', 'icrcSolveIpv4Id',
    'readIcrcValue', 'writeIcrcValue', 'ipChecksum', 'writeIpv4Header', 'writeIpv6Header', 'writeUdpHeader', 'writeGrhArea',
    // packets
    'parseRocePacket', 'writeRoceHeaders', 'finishRocePacket', 'encodeRocePacket', 'decodeRocePacket', 'rocePad',
    'rocePacketLength', 'opcodeFitsQp', 'roceUdpSrcPort', 'rdmaGetUdpSport', 'rdmaFlowLabelToUdpSport', 'rdmaCalcFlowLabel',
    'hash32', 'ibMtuToBytes', 'ibMtuFromBytes', 'rxePortMtu', 'iboePathMtu', 'RocePacket',
    // MADs, CM, rdma_cm
    'writeMadHeader', 'decodeMadHeader', 'encodeGsiPacket', 'decodeGsiPacket', 'encodeCmMad', 'decodeCmMad',
    'cmMadHeaderProblem', 'cmRejReasonName', 'cmTimeoutMs', 'emptyCmPath', 'cmReqHasAltPath',
    'cmaServiceId', 'cmaServiceIdParts', 'writeCmaHeader', 'encodeCmaPrivateData', 'decodeCmaHeader', 'gidFromIpv4',
    'gidFromIp', 'ipFromGid', 'isIpv4MappedGid', 'cmaIboeMgid', 'cmaRoceFlowLabel', 'parseIp', 'formatIp', 'formatGid',
  ];
  for (const f of functions) assert.equal(typeof roce[f], 'function', f);
  assert.equal(roce.IB_OPCODES.length, 256);
  assert.deepEqual(
    [roce.ROCE_V2_UDP_PORT, roce.GSI_QPN, roce.GSI_QKEY, roce.IB_MULTICAST_QPN, roce.BTH_DEF_PKEY, roce.ICRC_LEN, roce.BTH_LEN],
    [4791, 1, 0x80010000, 0xffffff, 0xffff, 4, 12],
  );
  assert.deepEqual([roce.MAD_SIZE, roce.MAD_HDR_LEN, roce.CM_CLASS_VERSION, roce.MgmtClass.CM, roce.MadMethod.SEND], [256, 24, 2, 7, 3]);
  assert.deepEqual([roce.RDMA_UDP_QKEY, roce.CMA_HDR_LEN, roce.GRH_AREA_LEN], [0x01234567, 36, 40]);
  assert.ok(['native', 'js', 'range'].includes(roce.crc32Backend));
  // the iWARP surface is untouched and does not collide
  assert.equal(typeof wire.crc32c, 'function');
  assert.equal(wire.crc32, undefined);
});
