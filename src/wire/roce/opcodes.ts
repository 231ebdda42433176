/**
 * InfiniBand transport opcodes as RoCEv2 carries them (IBTA vol. 1 §9.2, table 38; Linux
 * `include/rdma/ib_pack.h`), and the per-opcode table in the style of rdma_rxe's
 * `rxe_opcode[256]` (`drivers/infiniband/sw/rxe/rxe_opcode.c`): which headers follow the BTH and at
 * which offsets, the total header length, and what kind of packet it is (request / ack, send /
 * write / read / atomic, first / middle / last).
 *
 * The opcode byte is `transport class (3 bits) | operation (5 bits)`: RC 0x00, UC 0x20, RD 0x40,
 * UD 0x60, CNP 0x80. rxe implements RC, UC and UD (plus the GSI QP, which speaks UD); RD rows are
 * in the table for completeness (rxe has them too) but no QP type here accepts them.
 *
 * Also here: the AETH syndrome codes, the AETH credit-count encoding and the RNR NAK timer table.
 *
 * @module
 */

/** Transport class bases, the top three bits of the opcode (ib_pack.h `IB_OPCODE_RC` ...). */
export const IbTransport = {
  /** Reliable Connected. */
  RC: 0x00,
  /** Unreliable Connected. */
  UC: 0x20,
  /** Reliable Datagram (not implemented by rxe). */
  RD: 0x40,
  /** Unreliable Datagram (also the GSI QP1 that carries CM MADs). */
  UD: 0x60,
  /** Congestion Notification Packet (RoCEv2 annex A17.9). */
  CNP: 0x80,
  /** Manufacturer specific opcodes 0xE0-0xFF. */
  MSP: 0xe0,
} as const;

/** Mask of the transport class bits of an opcode. */
export const IB_OPCODE_CLASS_MASK = 0xe0;

/** Transport class of an opcode (`opcode & 0xE0`), one of {@link IbTransport}. */
export function ibOpcodeClass(opcode: number): number {
  return opcode & IB_OPCODE_CLASS_MASK;
}

/** Every opcode this table knows (ib_pack.h names without the `IB_OPCODE_` prefix). */
export const IbOpcode = {
  RC_SEND_FIRST: 0x00,
  RC_SEND_MIDDLE: 0x01,
  RC_SEND_LAST: 0x02,
  RC_SEND_LAST_WITH_IMMEDIATE: 0x03,
  RC_SEND_ONLY: 0x04,
  RC_SEND_ONLY_WITH_IMMEDIATE: 0x05,
  RC_RDMA_WRITE_FIRST: 0x06,
  RC_RDMA_WRITE_MIDDLE: 0x07,
  RC_RDMA_WRITE_LAST: 0x08,
  RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: 0x09,
  RC_RDMA_WRITE_ONLY: 0x0a,
  RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: 0x0b,
  RC_RDMA_READ_REQUEST: 0x0c,
  RC_RDMA_READ_RESPONSE_FIRST: 0x0d,
  RC_RDMA_READ_RESPONSE_MIDDLE: 0x0e,
  RC_RDMA_READ_RESPONSE_LAST: 0x0f,
  RC_RDMA_READ_RESPONSE_ONLY: 0x10,
  RC_ACKNOWLEDGE: 0x11,
  RC_ATOMIC_ACKNOWLEDGE: 0x12,
  RC_COMPARE_SWAP: 0x13,
  RC_FETCH_ADD: 0x14,
  RC_SEND_LAST_WITH_INVALIDATE: 0x16,
  RC_SEND_ONLY_WITH_INVALIDATE: 0x17,
  /** RDMA FLUSH (IBTA 1.5; rxe since Linux 6.2): FETH + RETH, no payload. */
  RC_FLUSH: 0x1c,
  /** RDMA ATOMIC WRITE (IBTA 1.5; rxe since Linux 6.2): RETH + 8-byte payload. */
  RC_ATOMIC_WRITE: 0x1d,

  UC_SEND_FIRST: 0x20,
  UC_SEND_MIDDLE: 0x21,
  UC_SEND_LAST: 0x22,
  UC_SEND_LAST_WITH_IMMEDIATE: 0x23,
  UC_SEND_ONLY: 0x24,
  UC_SEND_ONLY_WITH_IMMEDIATE: 0x25,
  UC_RDMA_WRITE_FIRST: 0x26,
  UC_RDMA_WRITE_MIDDLE: 0x27,
  UC_RDMA_WRITE_LAST: 0x28,
  UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: 0x29,
  UC_RDMA_WRITE_ONLY: 0x2a,
  UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: 0x2b,

  RD_SEND_FIRST: 0x40,
  RD_SEND_MIDDLE: 0x41,
  RD_SEND_LAST: 0x42,
  RD_SEND_LAST_WITH_IMMEDIATE: 0x43,
  RD_SEND_ONLY: 0x44,
  RD_SEND_ONLY_WITH_IMMEDIATE: 0x45,
  RD_RDMA_WRITE_FIRST: 0x46,
  RD_RDMA_WRITE_MIDDLE: 0x47,
  RD_RDMA_WRITE_LAST: 0x48,
  RD_RDMA_WRITE_LAST_WITH_IMMEDIATE: 0x49,
  RD_RDMA_WRITE_ONLY: 0x4a,
  RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE: 0x4b,
  RD_RDMA_READ_REQUEST: 0x4c,
  RD_RDMA_READ_RESPONSE_FIRST: 0x4d,
  RD_RDMA_READ_RESPONSE_MIDDLE: 0x4e,
  RD_RDMA_READ_RESPONSE_LAST: 0x4f,
  RD_RDMA_READ_RESPONSE_ONLY: 0x50,
  RD_ACKNOWLEDGE: 0x51,
  RD_ATOMIC_ACKNOWLEDGE: 0x52,
  RD_COMPARE_SWAP: 0x53,
  RD_FETCH_ADD: 0x54,

  UD_SEND_ONLY: 0x64,
  UD_SEND_ONLY_WITH_IMMEDIATE: 0x65,

  /** RoCEv2 Congestion Notification Packet: BTH + 16 reserved bytes (annex A17.9.3). */
  CNP: 0x81,
} as const;

// ---- header lengths ---------------------------------------------------------------------------

/** Base Transport Header. */
export const BTH_LEN = 12;
/** Reliable Datagram ETH (EE context). */
export const RDETH_LEN = 4;
/** Datagram ETH: Q_Key, source QP. */
export const DETH_LEN = 8;
/** RDMA ETH: VA, R_Key, DMA length. */
export const RETH_LEN = 16;
/** Flush ETH: selectivity level and placement type. */
export const FETH_LEN = 4;
/** ACK ETH: syndrome, MSN. */
export const AETH_LEN = 4;
/** Atomic ETH: VA, R_Key, swap-or-add, compare. */
export const ATMETH_LEN = 28;
/** Atomic Acknowledge ETH: original remote value. */
export const ATMACK_LEN = 8;
/** Immediate data. */
export const IMMDT_LEN = 4;
/** Invalidate ETH: R_Key to invalidate. */
export const IETH_LEN = 4;
/** Reserved bytes after the BTH of a CNP. */
export const CNP_RSVD_LEN = 16;
/** Invariant CRC trailer. */
export const ICRC_LEN = 4;
/** Longest header of any opcode in the table (RD atomic: BTH+RDETH+DETH+AtomicETH = 52). */
export const IB_MAX_HDR_LEN = 52;

/**
 * Header kinds, the index into {@link IbOpcodeInfo.offset} (rxe `enum rxe_hdr_type`). The order
 * is the order in which headers follow each other on the wire.
 */
export const Hdr = {
  BTH: 0,
  RDETH: 1,
  DETH: 2,
  FETH: 3,
  RETH: 4,
  ATMETH: 5,
  AETH: 6,
  ATMACK: 7,
  IMMDT: 8,
  IETH: 9,
  CNP_RSVD: 10,
  PAYLOAD: 11,
} as const;
/** One of {@link Hdr}. */
export type Hdr = (typeof Hdr)[keyof typeof Hdr];
/** Number of {@link Hdr} kinds (length of every `offset` array). */
export const HDR_KINDS = 12;

/** Byte length of each header kind, indexed by {@link Hdr} (payload: 0, it has no fixed size). */
export const HDR_LEN: readonly number[] = Object.freeze([
  BTH_LEN,
  RDETH_LEN,
  DETH_LEN,
  FETH_LEN,
  RETH_LEN,
  ATMETH_LEN,
  AETH_LEN,
  ATMACK_LEN,
  IMMDT_LEN,
  IETH_LEN,
  CNP_RSVD_LEN,
  0,
]);

/**
 * Bits of {@link IbOpcodeInfo.mask} (rxe `enum rxe_hdr_mask`): one bit per header present (bit
 * number = its {@link Hdr} index), then what kind of packet the opcode is.
 */
export const OpMask = {
  BTH: 1 << Hdr.BTH,
  RDETH: 1 << Hdr.RDETH,
  DETH: 1 << Hdr.DETH,
  FETH: 1 << Hdr.FETH,
  RETH: 1 << Hdr.RETH,
  ATMETH: 1 << Hdr.ATMETH,
  AETH: 1 << Hdr.AETH,
  ATMACK: 1 << Hdr.ATMACK,
  IMMDT: 1 << Hdr.IMMDT,
  IETH: 1 << Hdr.IETH,
  CNP_RSVD: 1 << Hdr.CNP_RSVD,
  /** The packet carries payload bytes (possibly zero of them). */
  PAYLOAD: 1 << Hdr.PAYLOAD,
  /** Request: handled by the responder of the destination QP. */
  REQ: 1 << 12,
  /** Response (ACK, read response, atomic ACK): handled by the completer. */
  ACK: 1 << 13,
  /** Part of a Send message. */
  SEND: 1 << 14,
  /** Part of an RDMA Write message. */
  WRITE: 1 << 15,
  /** RDMA Read request or response. */
  READ: 1 << 16,
  /** Atomic compare-and-swap or fetch-and-add request. */
  ATOMIC: 1 << 17,
  /** Consumes a receive WQE at the responder (first packet of a Send, Write with immediate). */
  RWR: 1 << 18,
  /** Completes a receive WQE at the responder (last packet of a Send, Write with immediate). */
  COMP: 1 << 19,
  /** First packet of a message (FIRST or ONLY). */
  START: 1 << 20,
  /** Middle packet of a message. */
  MIDDLE: 1 << 21,
  /** Last packet of a message (LAST or ONLY). */
  END: 1 << 22,
  /** RDMA FLUSH request. */
  FLUSH: 1 << 23,
  /** RDMA ATOMIC WRITE request. */
  ATOMIC_WRITE: 1 << 24,
  /** Congestion notification. */
  CNP: 1 << 25,
} as const;

/** Static facts about one opcode (rxe `struct rxe_opcode_info`). */
export interface IbOpcodeInfo {
  /** The opcode byte (index in {@link IB_OPCODES}). */
  readonly opcode: number;
  /** ib_pack.h name without `IB_OPCODE_` (`'UD_SEND_ONLY'`); `'RESERVED_0xNN'` when invalid. */
  readonly name: string;
  /** Whether the opcode is defined here; reserved opcodes have `mask` 0 and `length` 0. */
  readonly valid: boolean;
  /** {@link OpMask} bits: headers present and packet kind. */
  readonly mask: number;
  /** BTH plus every extension header, in bytes (the payload starts at this offset). */
  readonly length: number;
  /** Offset of each header from the BTH start, indexed by {@link Hdr}; -1 when absent. */
  readonly offset: readonly number[];
}

const A = OpMask;

/** Build one row from the headers that follow the BTH (in wire order) and the kind bits. */
function row(opcode: number, name: string, hdrs: readonly Hdr[], kind: number): IbOpcodeInfo {
  const offset = new Array<number>(HDR_KINDS).fill(-1);
  offset[Hdr.BTH] = 0;
  let len = BTH_LEN;
  let mask = A.BTH | kind;
  for (const h of hdrs) {
    offset[h] = len;
    len += HDR_LEN[h]!;
    mask |= 1 << h;
  }
  if (kind & A.PAYLOAD) offset[Hdr.PAYLOAD] = len;
  return Object.freeze({ opcode, name, valid: true, mask, length: len, offset: Object.freeze(offset) });
}

function reserved(opcode: number): IbOpcodeInfo {
  const name = `RESERVED_0x${opcode.toString(16).padStart(2, '0')}`;
  return Object.freeze({ opcode, name, valid: false, mask: 0, length: 0, offset: Object.freeze(new Array<number>(HDR_KINDS).fill(-1)) });
}

// kind bits shared by RC/UC/RD send and write rows (rxe_opcode.c masks)
const P = A.PAYLOAD;
const SEND_FIRST = P | A.REQ | A.RWR | A.SEND | A.START;
const SEND_MIDDLE = P | A.REQ | A.SEND | A.MIDDLE;
const SEND_LAST = P | A.REQ | A.COMP | A.SEND | A.END;
const SEND_ONLY = P | A.REQ | A.COMP | A.RWR | A.SEND | A.START | A.END;
const WRITE_FIRST = P | A.REQ | A.WRITE | A.START;
const WRITE_MIDDLE = P | A.REQ | A.WRITE | A.MIDDLE;
const WRITE_LAST = P | A.REQ | A.WRITE | A.END;
const WRITE_LAST_IMM = P | A.REQ | A.WRITE | A.COMP | A.RWR | A.END;
const WRITE_ONLY = P | A.REQ | A.WRITE | A.START | A.END;
const WRITE_ONLY_IMM = P | A.REQ | A.WRITE | A.COMP | A.RWR | A.START | A.END;
const READ_REQ = A.REQ | A.READ | A.START | A.END;
const ATOMIC_REQ = A.REQ | A.ATOMIC | A.START | A.END;

/** Send and Write rows of RC, UC and RD (`pre` = headers before the operation's own, RD: RDETH+DETH). */
function sendWriteRows(base: number, tag: string, pre: readonly Hdr[]): IbOpcodeInfo[] {
  const H = Hdr;
  return [
    row(base + 0x00, `${tag}_SEND_FIRST`, pre, SEND_FIRST),
    row(base + 0x01, `${tag}_SEND_MIDDLE`, pre, SEND_MIDDLE),
    row(base + 0x02, `${tag}_SEND_LAST`, pre, SEND_LAST),
    row(base + 0x03, `${tag}_SEND_LAST_WITH_IMMEDIATE`, [...pre, H.IMMDT], SEND_LAST),
    row(base + 0x04, `${tag}_SEND_ONLY`, pre, SEND_ONLY),
    row(base + 0x05, `${tag}_SEND_ONLY_WITH_IMMEDIATE`, [...pre, H.IMMDT], SEND_ONLY),
    row(base + 0x06, `${tag}_RDMA_WRITE_FIRST`, [...pre, H.RETH], WRITE_FIRST),
    row(base + 0x07, `${tag}_RDMA_WRITE_MIDDLE`, pre, WRITE_MIDDLE),
    row(base + 0x08, `${tag}_RDMA_WRITE_LAST`, pre, WRITE_LAST),
    row(base + 0x09, `${tag}_RDMA_WRITE_LAST_WITH_IMMEDIATE`, [...pre, H.IMMDT], WRITE_LAST_IMM),
    row(base + 0x0a, `${tag}_RDMA_WRITE_ONLY`, [...pre, H.RETH], WRITE_ONLY),
    row(base + 0x0b, `${tag}_RDMA_WRITE_ONLY_WITH_IMMEDIATE`, [...pre, H.RETH, H.IMMDT], WRITE_ONLY_IMM),
  ];
}

/** Read, ACK and atomic rows of RC and RD (`req` = request prefix, `rsp` = response prefix). */
function readAtomicRows(base: number, tag: string, req: readonly Hdr[], rsp: readonly Hdr[]): IbOpcodeInfo[] {
  const H = Hdr;
  return [
    row(base + 0x0c, `${tag}_RDMA_READ_REQUEST`, [...req, H.RETH], READ_REQ),
    row(base + 0x0d, `${tag}_RDMA_READ_RESPONSE_FIRST`, [...rsp, H.AETH], P | A.ACK | A.START),
    row(base + 0x0e, `${tag}_RDMA_READ_RESPONSE_MIDDLE`, rsp, P | A.ACK | A.MIDDLE),
    row(base + 0x0f, `${tag}_RDMA_READ_RESPONSE_LAST`, [...rsp, H.AETH], P | A.ACK | A.END),
    row(base + 0x10, `${tag}_RDMA_READ_RESPONSE_ONLY`, [...rsp, H.AETH], P | A.ACK | A.START | A.END),
    row(base + 0x11, `${tag}_ACKNOWLEDGE`, [...rsp, H.AETH], A.ACK | A.START | A.END),
    row(base + 0x12, `${tag}_ATOMIC_ACKNOWLEDGE`, [...rsp, H.AETH, H.ATMACK], A.ACK | A.START | A.END),
    row(base + 0x13, `${tag}_COMPARE_SWAP`, [...req, H.ATMETH], ATOMIC_REQ),
    row(base + 0x14, `${tag}_FETCH_ADD`, [...req, H.ATMETH], ATOMIC_REQ),
  ];
}

function buildTable(): readonly IbOpcodeInfo[] {
  const H = Hdr;
  const t: IbOpcodeInfo[] = [];
  for (let op = 0; op < 256; op++) t.push(reserved(op));
  const put = (rows: IbOpcodeInfo[]): void => {
    for (const r of rows) t[r.opcode] = r;
  };
  put(sendWriteRows(IbTransport.RC, 'RC', []));
  put(readAtomicRows(IbTransport.RC, 'RC', [], []));
  put([
    row(IbOpcode.RC_SEND_LAST_WITH_INVALIDATE, 'RC_SEND_LAST_WITH_INVALIDATE', [H.IETH], SEND_LAST),
    row(IbOpcode.RC_SEND_ONLY_WITH_INVALIDATE, 'RC_SEND_ONLY_WITH_INVALIDATE', [H.IETH], SEND_ONLY),
    row(IbOpcode.RC_FLUSH, 'RC_FLUSH', [H.FETH, H.RETH], A.REQ | A.FLUSH | A.START | A.END),
    row(IbOpcode.RC_ATOMIC_WRITE, 'RC_ATOMIC_WRITE', [H.RETH], P | A.REQ | A.ATOMIC_WRITE | A.START | A.END),
  ]);
  put(sendWriteRows(IbTransport.UC, 'UC', []));
  put(sendWriteRows(IbTransport.RD, 'RD', [H.RDETH, H.DETH]));
  put(readAtomicRows(IbTransport.RD, 'RD', [H.RDETH, H.DETH], [H.RDETH]));
  put([
    row(IbOpcode.UD_SEND_ONLY, 'UD_SEND_ONLY', [H.DETH], SEND_ONLY),
    row(IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE, 'UD_SEND_ONLY_WITH_IMMEDIATE', [H.DETH, H.IMMDT], SEND_ONLY),
    row(IbOpcode.CNP, 'CNP', [H.CNP_RSVD], A.CNP),
  ]);
  return Object.freeze(t);
}

/** The 256-entry opcode table (rxe `rxe_opcode[]`); reserved opcodes have `valid: false`. */
export const IB_OPCODES: readonly IbOpcodeInfo[] = buildTable();

/** Table row of an opcode byte (masked to 8 bits). */
export function ibOpcodeInfo(opcode: number): IbOpcodeInfo {
  return IB_OPCODES[opcode & 0xff]!;
}

/** Name of an opcode byte (`'RC_SEND_ONLY'`, `'RESERVED_0x15'`). */
export function ibOpcodeName(opcode: number): string {
  return ibOpcodeInfo(opcode).name;
}

// ---- AETH -------------------------------------------------------------------------------------

/**
 * AETH syndrome byte (IBTA §9.7.5.2.1 table 44; rxe_hdr.h `enum aeth_syndrome`). Bits 7..5 are
 * the type, bits 4..0 the credit count (ACK), RNR timer (RNR NAK) or NAK code.
 */
export const AethSyndrome = {
  /** Mask of the type bits. */
  TYPE_MASK: 0xe0,
  /** Mask of the value bits (credits, timer or NAK code). */
  VALUE_MASK: 0x1f,
  /** Type: ACK; value = credit count code ({@link AETH_CREDIT_TABLE}). */
  ACK: 0x00,
  /** Type: RNR NAK; value = RNR timer code ({@link RNR_TIMER_USEC}). */
  RNR_NAK: 0x20,
  /** Type: reserved. */
  RESERVED: 0x40,
  /** Type: NAK; value = NAK code. */
  NAK: 0x60,
  /** ACK with the "invalid / unlimited" credit code 31 (what rxe always sends). */
  ACK_UNLIMITED: 0x1f,
  /** NAK: PSN sequence error. */
  NAK_PSN_SEQ_ERROR: 0x60,
  /** NAK: invalid request. */
  NAK_INVALID_REQUEST: 0x61,
  /** NAK: remote access error. */
  NAK_REMOTE_ACCESS_ERROR: 0x62,
  /** NAK: remote operational error. */
  NAK_REMOTE_OPERATIONAL_ERROR: 0x63,
  /** NAK: invalid RD request. */
  NAK_INVALID_RD_REQUEST: 0x64,
} as const;

/** The credit count code that means "no credit information / unlimited" (IBTA table 45). */
export const AETH_CREDIT_INVALID = 31;

/**
 * AETH credit count codes 0..30 → number of receive credits (IBTA §9.7.7.2.6 table 45; the same
 * table as Linux rdmavt's `credit_table`). Code 31 is {@link AETH_CREDIT_INVALID}.
 */
export const AETH_CREDIT_TABLE: readonly number[] = Object.freeze([
  0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144,
  8192, 12288, 16384, 24576, 32768,
]);

/** Credit code for a number of available receive WQEs: the largest code whose count is <= n. */
export function aethCreditCode(n: number): number {
  let lo = 0;
  for (let c = 1; c < AETH_CREDIT_TABLE.length; c++) if (AETH_CREDIT_TABLE[c]! <= n) lo = c;
  return lo;
}

/** Number of credits a code stands for; `Infinity` for {@link AETH_CREDIT_INVALID}. */
export function aethCredits(code: number): number {
  return code >= AETH_CREDIT_INVALID ? Infinity : AETH_CREDIT_TABLE[code & 0x1f]!;
}

/**
 * RNR NAK timer codes 0..31 → microseconds (IBTA §9.7.5.2.8 table 46; rxe `rnrnak_usec`). Code 0
 * is the longest (655.36 ms). rxe's table has 61410 for code 25 where IBTA says 61.44 ms; this
 * table follows IBTA.
 */
export const RNR_TIMER_USEC: readonly number[] = Object.freeze([
  655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360,
  20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
]);
