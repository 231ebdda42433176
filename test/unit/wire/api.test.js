// Pins the public surface of rdmacm/wire (dist/wire/index.js) so accidental removals show up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as wire from '../../../dist/wire/index.js';

test('wire index exports the documented API', () => {
  const functions = [
    'crc32c', 'crc32cJs', 'crc32cBitwise', 'crc32cRange',
    'encodeMpaStartFrame', 'decodeMpaStartFrame', 'validateMpaRequest', 'validateMpaReply', 'mpaHasV2Word',
    'fpduPad', 'fpduLength', 'fpduMaxPayload', 'writeFpduTrailer', 'readCrcLE',
    'writeTaggedHdr', 'writeUntaggedHdr', 'writeReadRequest', 'encodeFpdu', 'fpduCrc',
    'decodeFpduHeader', 'checkFpduCtrl', 'parseFpduHeader', 'createFpduHeader', 'isSendOpcode',
    'encodeTerminate', 'decodeTerminate', 'decodeTerminateFpdu', 'decodeTerminateMessage', 'termName', 'isValidTermCode',
    'FpduDecoder', 'TerminateError',
  ];
  for (const f of functions) assert.equal(typeof wire[f], 'function', f);
  assert.equal(wire.MPA_HDR_LEN, 20);
  assert.equal(wire.MPA_MAX_PD, 256);
  assert.equal(wire.MPA_KEY_REQ, 'MPA ID Req Frame');
  assert.equal(wire.MPA_KEY_REP, 'MPA ID Rep Frame');
  assert.deepEqual(wire.RdmapOpcode, { WRITE: 0, READ_REQ: 1, READ_RESP: 2, SEND: 3, SEND_INV: 4, SEND_SE: 5, SEND_SE_INV: 6, TERMINATE: 7 });
  assert.deepEqual(wire.DdpQn, { SEND: 0, READ: 1, TERM: 2 });
  assert.deepEqual([wire.DdpCtrl.TAGGED, wire.DdpCtrl.LAST, wire.DdpCtrl.VERSION], [0x80, 0x40, 0x03]);
  assert.deepEqual([wire.RdmapCtrl.VERSION, wire.RdmapCtrl.OPCODE], [0xc0, 0x0f]);
  assert.deepEqual(
    [wire.MpaFlag.MARKERS, wire.MpaFlag.CRC, wire.MpaFlag.REJECT, wire.MpaFlag.ENHANCED],
    [0x80, 0x40, 0x20, 0x10],
  );
  assert.deepEqual(wire.IWARP_OPCODES.map((i) => i.hdrLen), [16, 48, 16, 20, 20, 20, 20, 24]);
  assert.ok(['native', 'js'].includes(wire.crc32cBackend));
  assert.deepEqual([wire.TermLayer.RDMAP, wire.TermLayer.DDP, wire.TermLayer.LLP], [0, 1, 2]);
  assert.equal(wire.TO_OVERFLOW, -1);
});

test('both wire families: iWARP flat and as `iwarp`, RoCE as `roce`', () => {
  assert.equal(wire.iwarp.encodeMpaStartFrame, wire.encodeMpaStartFrame);
  assert.equal(wire.iwarp.FpduDecoder, wire.FpduDecoder);
  assert.equal(typeof wire.roce, 'object');
  assert.notEqual(wire.roce, null);
});
