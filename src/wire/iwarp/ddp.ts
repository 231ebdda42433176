/**
 * DDP (Direct Data Placement, RFC 5041) as carried in MPA FPDUs (RFC 5041 §4): control-byte masks,
 * header sizes, queue numbers and the DDP TERMINATE error types/codes. Every ULPDU is exactly one
 * DDP segment; its first two bytes are the DDP control byte and the RDMAP control byte.
 *
 * Offsets named `FPDU_OFF_*` count from the start of the FPDU, i.e. they include the 2-byte MPA
 * ULPDU_Length field (siw's convention, used by every header writer and by the decoder).
 *
 * @module
 */

/** DDP version carried in the DV bits; anything else is rejected (RFC 5041 §4.2). */
export const DDP_VERSION = 1;

/** DDP control byte masks (RFC 5041 §4.2). */
export const DdpCtrl = {
  /** T: tagged buffer model. */
  TAGGED: 0x80,
  /** L: last segment of the DDP message. */
  LAST: 0x40,
  /** Reserved, sent as 0 and ignored on receive. */
  RESERVED: 0x3c,
  /** DV: DDP version (must be 1). */
  VERSION: 0x03,
} as const;

/** Tagged DDP header length, control bytes through TO (RFC 5041 §4.3). */
export const DDP_TAGGED_HDR_LEN = 14;
/** Untagged DDP header length, control bytes through MO (RFC 5041 §4.4). */
export const DDP_UNTAGGED_HDR_LEN = 18;

/** FPDU offsets of the fields shared by both header forms (RFC 5041 §4.3, §4.4). */
export const FPDU_OFF_DDP_CTRL = 2;
/** FPDU offset of the RDMAP control byte (DDP RsvdULP). */
export const FPDU_OFF_RDMAP_CTRL = 3;
/** Tagged: STag; untagged: RsvdULP2 (the STag to invalidate for Send-with-Invalidate). */
export const FPDU_OFF_STAG = 4;
/** Tagged: 64-bit TO, big-endian (RFC 5041 §4.3). */
export const FPDU_OFF_TO = 8;
/** Untagged: QN (RFC 5041 §4.4). */
export const FPDU_OFF_QN = 8;
/** Untagged: MSN (RFC 5041 §4.4). */
export const FPDU_OFF_MSN = 12;
/** Untagged: MO (RFC 5041 §4.4). */
export const FPDU_OFF_MO = 16;

/**
 * Untagged queue numbers used by RDMAP (RFC 5040 §5.1). MSN starts at 1 on each
 * queue and advances by one per message.
 */
export const DdpQn = {
  /** Send, Send with Invalidate, Send with SE, Send with SE and Invalidate. */
  SEND: 0,
  /** RDMA Read Request. */
  READ: 1,
  /** Terminate. */
  TERM: 2,
} as const;

/** DDP TERMINATE error types (RFC 5041 §7.2). */
export const DdpEtype = {
  CATASTROPHIC: 0,
  TAGGED: 1,
  UNTAGGED: 2,
} as const;

/** DDP catastrophic error code (etype 0; RFC 5041 §7.2). */
export const DDP_ECODE_CATASTROPHIC = 0x00;

/** DDP tagged-buffer error codes (etype 1; RFC 5041 §7.2). */
export const DdpTaggedEcode = {
  INVALID_STAG: 0x00,
  BASE_BOUNDS: 0x01,
  STAG_NOT_ASSOCIATED: 0x02,
  TO_WRAP: 0x03,
  VERSION: 0x04,
} as const;

/** DDP untagged-buffer error codes (etype 2; RFC 5041 §7.2). */
export const DdpUntaggedEcode = {
  INVALID_QN: 0x01,
  INVALID_MSN_NO_BUFFER: 0x02,
  INVALID_MSN_RANGE: 0x03,
  INVALID_MO: 0x04,
  MSG_TOO_LONG: 0x05,
  VERSION: 0x06,
} as const;
