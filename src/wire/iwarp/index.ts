/**
 * The iWARP wire formats Linux siw speaks, as pure codecs (no sockets, no timers, no QP objects):
 * RFC 5040 (RDMAP), RFC 5041 (DDP), RFC 5044 (MPA), RFC 6581 (enhanced MPA). See
 * `rdmacm/wire` (src/wire/index.ts) for the list; receive-side protocol errors are thrown as
 * `TerminateError` carrying the TERMINATE layer / etype / ecode to send.
 *
 * @packageDocumentation
 */
export {
  CRC32C_NATIVE_MIN,
  CRC32C_POLY,
  crc32c,
  crc32cBackend,
  crc32cBitwise,
  crc32cJs,
  crc32cNative,
  crc32cRange,
} from './crc32c.js';
export type { Crc32cBackend, Crc32cFn } from './crc32c.js';

export {
  LLP_ETYPE_MPA,
  MPA_CRC_LEN,
  MPA_HDR_LEN,
  MPA_KEY_LEN,
  MPA_KEY_REP,
  mpaKeyMatches,
  MPA_KEY_REQ,
  MPA_LEN_FIELD,
  MPA_MAX_PD,
  MPA_MAX_ULPDU,
  MPA_REV_MAX,
  MPA_V2_WORD_LEN,
  MpaEcode,
  MpaFlag,
  MpaV2,
  decodeMpaStartFrame,
  encodeMpaStartFrame,
  fpduLength,
  fpduMaxPayload,
  fpduPad,
  mpaHasV2Word,
  readCrcLE,
  validateMpaReply,
  validateMpaRequest,
  writeFpduTrailer,
} from './mpa.js';
export type { MpaDecodeResult, MpaReplyVerdict, MpaRequestVerdict, MpaStartFrame } from './mpa.js';

export {
  DDP_ECODE_CATASTROPHIC,
  DDP_TAGGED_HDR_LEN,
  DDP_UNTAGGED_HDR_LEN,
  DDP_VERSION,
  DdpCtrl,
  DdpEtype,
  DdpQn,
  DdpTaggedEcode,
  DdpUntaggedEcode,
  FPDU_OFF_DDP_CTRL,
  FPDU_OFF_MO,
  FPDU_OFF_MSN,
  FPDU_OFF_QN,
  FPDU_OFF_RDMAP_CTRL,
  FPDU_OFF_STAG,
  FPDU_OFF_TO,
} from './ddp.js';

export {
  CTRL_LAST_BIT,
  FPDU_MAX_HDR_LEN,
  FPDU_MIN_HDR_LEN,
  IWARP_OPCODES,
  RDMAP_OPCODE_MAX,
  RDMAP_READ_REQ_LEN,
  RDMAP_VERSION,
  READ_REQ_HDR_LEN,
  RdmapCtrl,
  RdmapEcode,
  RdmapEtype,
  RdmapOpcode,
  ReadReqOff,
  SEND_HDR_LEN,
  TAGGED_HDR_LEN,
  TERMINATE_HDR_LEN,
  isSendOpcode,
} from './rdmap.js';
export type { IwarpOpcodeInfo } from './rdmap.js';

export {
  TO_OVERFLOW,
  checkFpduCtrl,
  createFpduHeader,
  decodeFpduHeader,
  encodeFpdu,
  fpduCrc,
  parseFpduHeader,
  writeReadRequest,
  writeTaggedHdr,
  writeUntaggedHdr,
} from './fpdu.js';
export type { FpduFields, FpduHeader } from './fpdu.js';

export { FpduDecoder, wholeFpdu } from './fpdu-decoder.js';
export type { FpduDecoderOptions, FpduDecoderState, FpduSink } from './fpdu-decoder.js';

export {
  SiwTermFlag,
  TERM_CTRL_LEN,
  TermFlag,
  decodeTerminate,
  decodeTerminateFpdu,
  decodeTerminateMessage,
  encodeTerminate,
  isValidTermCode,
  termName,
} from './terminate.js';
export type { TerminateEncodeOptions, TerminateInfo, TerminateSpec } from './terminate.js';
