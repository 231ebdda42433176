/**
 * InfiniBand Communication Manager messages (IBTA vol. 1 chapter 12; Linux `ib_cm` with the field
 * positions of `include/rdma/ibta_vol1_c12.h`), as rdma_cm uses them over RoCE: REQ, MRA, REJ, REP,
 * RTU, DREQ, DREP, SIDR_REQ and SIDR_REP, encoded to and decoded from whole 256-byte MADs.
 *
 * Field positions are written as IBTA does, `byte[bit]:width`, counted from the start of the CM
 * message (MAD offset 24) with bit 0 the most significant bit of the byte; a field may span bytes.
 * Every field is big-endian. Private data always runs to the end of the MAD; a decoded message
 * carries all of it (the receiver cannot tell how much the sender meant), an encoded one is
 * zero-padded.
 *
 * Decoders of peer bytes throw only `RdmaError` with code `EBADMSG` (too short, not a CM MAD,
 * unknown attribute); policy (class version 2, method Send) is the CM's, see
 * {@link cmMadHeaderProblem}.
 *
 * @module
 */
import { err } from '../../errors.js';
import {
  MAD_BASE_VERSION,
  MAD_HDR_LEN,
  MAD_SIZE,
  MadMethod,
  MgmtClass,
  decodeMadHeader,
  writeMadHeader,
  type MadHeader,
} from './mad.js';

/** Class version of the CM; Linux ignores CM MADs with any other. */
export const CM_CLASS_VERSION = 2;

/** CM attribute IDs, i.e. message types (IBTA table 103; Linux `CM_*_ATTR_ID`). */
export const CmAttrId = {
  CLASS_PORT_INFO: 0x0001,
  REQ: 0x0010,
  MRA: 0x0011,
  REJ: 0x0012,
  REP: 0x0013,
  RTU: 0x0014,
  DREQ: 0x0015,
  DREP: 0x0016,
  SIDR_REQ: 0x0017,
  SIDR_REP: 0x0018,
  LAP: 0x0019,
  APR: 0x001a,
} as const;

/** Private data bytes of each message (IBTA chapter 12; what rdma_cm offers users is less for REQ/SIDR_REQ). */
export const CmPrivateDataLen = {
  REQ: 92,
  MRA: 222,
  REJ: 148,
  REP: 196,
  RTU: 224,
  DREQ: 220,
  DREP: 224,
  SIDR_REQ: 216,
  SIDR_REP: 136,
} as const;

/** Offset of the private data in each message body. */
export const CmPrivateDataOff = {
  REQ: 140,
  MRA: 10,
  REJ: 84,
  REP: 36,
  RTU: 8,
  DREQ: 12,
  DREP: 8,
  SIDR_REQ: 16,
  SIDR_REP: 96,
} as const;

/** Length of the REJ Additional Rejection Information field and of SIDR_REP's additional information. */
export const CM_ARI_LEN = 72;

/** Which message an MRA or REJ refers to (IBTA `MessageMRAed` / `MessageRejected`). */
export const CmMsgRef = {
  REQ: 0,
  REP: 1,
  OTHER: 2,
} as const;

/** REQ transport service type (IBTA table 106). XRC is 3 with extended transport type 1 (Linux). */
export const CmTransportType = {
  RC: 0,
  UC: 1,
  RD: 2,
  XRC: 3,
} as const;

/** REJ reason codes (IBTA table 109; Linux `enum ib_cm_rej_reason`). */
export const CmRejReason = {
  NO_QP: 1,
  NO_EEC: 2,
  NO_RESOURCES: 3,
  TIMEOUT: 4,
  UNSUPPORTED: 5,
  INVALID_COMM_ID: 6,
  INVALID_COMM_INSTANCE: 7,
  INVALID_SERVICE_ID: 8,
  INVALID_TRANSPORT_TYPE: 9,
  STALE_CONN: 10,
  RDC_NOT_EXIST: 11,
  INVALID_GID: 12,
  INVALID_LID: 13,
  INVALID_SL: 14,
  INVALID_TRAFFIC_CLASS: 15,
  INVALID_HOP_LIMIT: 16,
  INVALID_PACKET_RATE: 17,
  INVALID_ALT_GID: 18,
  INVALID_ALT_LID: 19,
  INVALID_ALT_SL: 20,
  INVALID_ALT_TRAFFIC_CLASS: 21,
  INVALID_ALT_HOP_LIMIT: 22,
  INVALID_ALT_PACKET_RATE: 23,
  PORT_CM_REDIRECT: 24,
  PORT_REDIRECT: 25,
  INVALID_MTU: 26,
  INSUFFICIENT_RESP_RESOURCES: 27,
  /** What `rdma_reject()` sends. */
  CONSUMER_DEFINED: 28,
  INVALID_RNR_RETRY: 29,
  DUPLICATE_LOCAL_COMM_ID: 30,
  INVALID_CLASS_VERSION: 31,
  INVALID_FLOW_LABEL: 32,
  INVALID_ALT_FLOW_LABEL: 33,
  VENDOR_OPTION_NOT_SUPPORTED: 35,
} as const;

/** Name of a REJ reason (`'CONSUMER_DEFINED'`), or `'REASON_<n>'` for an unknown one. */
export function cmRejReasonName(reason: number): string {
  for (const [k, v] of Object.entries(CmRejReason)) if (v === reason) return k;
  return `REASON_${reason}`;
}

/** SIDR_REP status codes (IBTA table 120; Linux `enum ib_cm_sidr_status`). */
export const CmSidrStatus = {
  SUCCESS: 0,
  UNSUPPORTED: 1,
  /** What `rdma_reject()` on a UD id sends. */
  REJECT: 2,
  NO_QP: 3,
  REDIRECT: 4,
  UNSUPPORTED_VERSION: 5,
} as const;

/** Duration of a CM / local ACK timeout code `t`: 4.096 µs × 2^t, in milliseconds. */
export function cmTimeoutMs(t: number): number {
  return 4.096e-3 * 2 ** t;
}

// ---- bit fields -------------------------------------------------------------------------------

/** Read `width` (<= 32) bits starting at bit `bit` (0 = MSB) of byte `byte` of the message at `o`. */
function getBits(b: Uint8Array, o: number, byte: number, bit: number, width: number): number {
  let v = 0;
  let pos = byte * 8 + bit;
  for (let i = 0; i < width; i++, pos++) v = v * 2 + ((b[o + (pos >>> 3)]! >>> (7 - (pos & 7))) & 1);
  return v;
}

/** Write the low `width` bits of `v` at the position {@link getBits} reads. */
function setBits(b: Uint8Array, o: number, byte: number, bit: number, width: number, v: number): void {
  let pos = byte * 8 + bit + width - 1;
  let x = v;
  for (let i = 0; i < width; i++, pos--) {
    const idx = o + (pos >>> 3);
    const m = 1 << (7 - (pos & 7));
    b[idx] = x % 2 === 1 ? b[idx]! | m : b[idx]! & ~m;
    x = Math.floor(x / 2);
  }
}

const get64 = (b: Uint8Array, o: number): bigint => (BigInt(getBits(b, o, 0, 0, 32)) << 32n) | BigInt(getBits(b, o, 4, 0, 32));
const set64 = (b: Uint8Array, o: number, v: bigint): void => {
  const m = BigInt.asUintN(64, v);
  setBits(b, o, 0, 0, 32, Number(m >> 32n));
  setBits(b, o, 4, 0, 32, Number(m & 0xffffffffn));
};
const getBytes = (b: Uint8Array, o: number, n: number): Uint8Array => new Uint8Array(b.subarray(o, o + n));
function putBytes(b: Uint8Array, o: number, n: number, src: Uint8Array, what: string): void {
  if (src.length > n) throw err('EINVAL', 'encodeCmMad', `${what} is ${src.length} bytes, at most ${n}`);
  b.set(src, o);
  b.fill(0, o + src.length, o + n);
}

// ---- messages ---------------------------------------------------------------------------------

/** One path of a REQ (primary at body offset 52, alternate at 96; 44 bytes each). */
export interface CmPath {
  /** Local port LID; 0xFFFF on RoCEv2 (hop limit > 1). Alternate path: non-zero means present. */
  localLid: number;
  /** Remote port LID; 0xFFFF on RoCEv2. */
  remoteLid: number;
  /** Local port GID (16 bytes; an IPv4 address as ::ffff:a.b.c.d). */
  localGid: Uint8Array;
  /** Remote port GID (16 bytes). */
  remoteGid: Uint8Array;
  /** Flow label, `[36]:20` (rdma_cm: (src port × 31 + dst port) mod 2^20 on RoCEv2). */
  flowLabel: number;
  /** Packet rate (IB rate enum), `[39.2]:6`. */
  packetRate: number;
  /** Traffic class (the IP ToS), `[40]:8`. */
  trafficClass: number;
  /** Hop limit (the IP TTL; 64 on RoCEv2 routes), `[41]:8`. */
  hopLimit: number;
  /** Service level, `[42]:4`. */
  sl: number;
  /** Subnet local: 1 iff hop limit <= 1, so false on RoCEv2, `[42.4]:1`. */
  subnetLocal: boolean;
  /** Local ACK timeout code, `[43]:5`. */
  localAckTimeout: number;
}

/** REQ (IBTA table 106): body 232 bytes, private data 92 at 140. */
export interface CmReq {
  /** Message type. */
  kind: 'REQ';
  /** Local communication ID, `[0]:32`. */
  localCommId: number;
  /** ECE vendor ID, `[5]:24` (0 unless ECE is used). */
  vendorId: number;
  /** Service ID, `[8]:64` (rdma_cm: {@link cmaServiceId}). */
  serviceId: bigint;
  /** Local CA GUID (node GUID), `[16]:64`. */
  localCaGuid: bigint;
  /** Local Q_Key, `[28]:32` (unused for RC). */
  localQkey: number;
  /** Local QPN, `[32]:24`. */
  localQpn: number;
  /** Responder resources (the sender's IRD), `[35]:8`. */
  responderResources: number;
  /** Local EECN, `[36]:24`. */
  localEecn: number;
  /** Initiator depth (the sender's ORD), `[39]:8`. */
  initiatorDepth: number;
  /** Remote EECN, `[40]:24`. */
  remoteEecn: number;
  /** Remote CM response timeout code, `[43]:5` (rdma_cm: 20). */
  remoteCmResponseTimeout: number;
  /** Transport service type ({@link CmTransportType}), `[43.5]:2`. */
  transportType: number;
  /** End-to-end flow control, `[43.7]:1`. */
  e2eFlowControl: boolean;
  /**
   * Starting PSN, `[44]:24`: the PSN the sender (active side) expects to **receive** first, i.e.
   * the passive side's send-queue starting PSN (Linux: active `rq_psn`, passive `sq_psn`; seen in
   * captures: the passive side's first request carries it).
   */
  startingPsn: number;
  /** Local CM response timeout code, `[47]:5` (rdma_cm: 20). */
  localCmResponseTimeout: number;
  /** Retry count, `[47.5]:3`. */
  retryCount: number;
  /** Partition key, `[48]:16`. */
  pkey: number;
  /** Path packet payload MTU (IB MTU enum), `[50]:4`. */
  pathMtu: number;
  /** RDC exists, `[50.4]:1`. */
  rdcExists: boolean;
  /** RNR retry count, `[50.5]:3`. */
  rnrRetryCount: number;
  /** Max CM retries, `[51]:4` (rdma_cm: 15). */
  maxCmRetries: number;
  /** SRQ, `[51.4]:1`. */
  srq: boolean;
  /** Extended transport type, `[51.5]:3` (1 for XRC). */
  extendedTransportType: number;
  /** Primary path, `[52..95]`. */
  primaryPath: CmPath;
  /** Alternate path, `[96..139]`; all zero when there is none (see {@link cmReqHasAltPath}). */
  alternatePath: CmPath;
  /** SAP supported, `[139.5]:1`. */
  sapSupported: boolean;
  /** Private data, `[140..231]` (rdma_cm: CMA header + up to 56 user bytes). */
  privateData: Uint8Array;
}

/** MRA (IBTA table 107): private data 222 at 10. */
export interface CmMra {
  /** Message type. */
  kind: 'MRA';
  /** Sender's communication ID, `[0]:32`. */
  localCommId: number;
  /** Receiver's communication ID, `[4]:32`. */
  remoteCommId: number;
  /** Message MRAed ({@link CmMsgRef}), `[8]:2`. */
  messageMraed: number;
  /** Service timeout code, `[9]:5` (rdma_cm: 24 ≈ 68.7 s). */
  serviceTimeout: number;
  /** Private data, `[10..231]`. */
  privateData: Uint8Array;
}

/** REJ (IBTA table 108): ARI 72 at 12, private data 148 at 84. */
export interface CmRej {
  /** Message type. */
  kind: 'REJ';
  /** Sender's communication ID, `[0]:32`. */
  localCommId: number;
  /** Receiver's communication ID (0 if unknown), `[4]:32`. */
  remoteCommId: number;
  /** Message rejected ({@link CmMsgRef}), `[8]:2`. */
  messageRejected: number;
  /** Length of the valid part of {@link ari}, `[9]:7`. */
  ariLength: number;
  /** Reason ({@link CmRejReason}), `[10]:16`. */
  reason: number;
  /** Additional rejection information, `[12..83]` (72 bytes). */
  ari: Uint8Array;
  /** Private data, `[84..231]`. */
  privateData: Uint8Array;
}

/** REP (IBTA table 110): private data 196 at 36. */
export interface CmRep {
  /** Message type. */
  kind: 'REP';
  /** Responder's communication ID, `[0]:32`. */
  localCommId: number;
  /** The REQ's local communication ID, `[4]:32`. */
  remoteCommId: number;
  /** Local Q_Key, `[8]:32`. */
  localQkey: number;
  /** Local QPN, `[12]:24`. */
  localQpn: number;
  /** ECE vendor ID, high byte `[15]`, middle `[19]`, low `[23]`, as one 24-bit value. */
  vendorId: number;
  /** Local EE context number, `[16]:24`. */
  localEecn: number;
  /**
   * Starting PSN, `[20]:24`: the PSN the passive side expects to receive first, i.e. the active
   * side's send-queue starting PSN.
   */
  startingPsn: number;
  /** Responder resources, `[24]:8`. */
  responderResources: number;
  /** Initiator depth, `[25]:8`. */
  initiatorDepth: number;
  /** Target ACK delay code, `[26]:5`. */
  targetAckDelay: number;
  /** Failover accepted, `[26.5]:2`. */
  failoverAccepted: number;
  /** End-to-end flow control, `[26.7]:1`. */
  e2eFlowControl: boolean;
  /** RNR retry count, `[27]:3`. */
  rnrRetryCount: number;
  /** SRQ, `[27.3]:1`. */
  srq: boolean;
  /** Local CA GUID, `[28]:64`. */
  localCaGuid: bigint;
  /** Private data, `[36..231]` (rdma_cm: user data, no CMA header). */
  privateData: Uint8Array;
}

/** RTU (IBTA table 111): private data 224 at 8. */
export interface CmRtu {
  /** Message type. */
  kind: 'RTU';
  /** Sender's communication ID, `[0]:32`. */
  localCommId: number;
  /** Receiver's communication ID, `[4]:32`. */
  remoteCommId: number;
  /** Private data, `[8..231]`. */
  privateData: Uint8Array;
}

/** DREQ (IBTA table 112): private data 220 at 12. */
export interface CmDreq {
  /** Message type. */
  kind: 'DREQ';
  /** Sender's communication ID, `[0]:32`. */
  localCommId: number;
  /** Receiver's communication ID, `[4]:32`. */
  remoteCommId: number;
  /** The receiver's QPN (or EECN), `[8]:24`. */
  remoteQpn: number;
  /** Private data, `[12..231]`. */
  privateData: Uint8Array;
}

/** DREP (IBTA table 113): private data 224 at 8. */
export interface CmDrep {
  /** Message type. */
  kind: 'DREP';
  /** Sender's communication ID, `[0]:32`. */
  localCommId: number;
  /** Receiver's communication ID, `[4]:32`. */
  remoteCommId: number;
  /** Private data, `[8..231]`. */
  privateData: Uint8Array;
}

/** SIDR_REQ (IBTA table 119): private data 216 at 16. */
export interface CmSidrReq {
  /** Message type. */
  kind: 'SIDR_REQ';
  /** Request ID, `[0]:32`. */
  requestId: number;
  /** Partition key, `[4]:16`. */
  pkey: number;
  /** Reserved `[6]:16`, kept for a faithful re-encode. */
  reserved: number;
  /** Service ID, `[8]:64`. */
  serviceId: bigint;
  /** Private data, `[16..231]` (rdma_cm: CMA header + up to 180 user bytes). */
  privateData: Uint8Array;
}

/** SIDR_REP (IBTA table 120): additional information 72 at 24, private data 136 at 96. */
export interface CmSidrRep {
  /** Message type. */
  kind: 'SIDR_REP';
  /** The SIDR_REQ's request ID, `[0]:32`. */
  requestId: number;
  /** Status ({@link CmSidrStatus}), `[4]:8`. */
  status: number;
  /** Additional information length, `[5]:8`. */
  addInfoLength: number;
  /** ECE vendor ID, high 16 bits `[6]:16` and low byte `[11]:8`, as one 24-bit value. */
  vendorId: number;
  /** QPN of the service, `[8]:24`. */
  qpn: number;
  /** Service ID, `[12]:64`. */
  serviceId: bigint;
  /** Q_Key of the service, `[20]:32` (rdma_cm: 0x01234567). */
  qkey: number;
  /** Additional information (ClassPortInfo on redirect), `[24..95]` (72 bytes). */
  addInfo: Uint8Array;
  /** Private data, `[96..231]` (rdma_cm: user data directly). */
  privateData: Uint8Array;
}

/** Any CM message this module encodes and decodes. */
export type CmMessage = CmReq | CmMra | CmRej | CmRep | CmRtu | CmDreq | CmDrep | CmSidrReq | CmSidrRep;
/** Message type names. */
export type CmKind = CmMessage['kind'];

/** A decoded CM MAD. */
export interface CmMad {
  /** The MAD header (class, version, method, TID, attribute). */
  hdr: MadHeader;
  /** The message. */
  msg: CmMessage;
}

/** Attribute ID of each message type. */
export const CM_KIND_ATTR: { readonly [K in CmKind]: number } = Object.freeze({
  REQ: CmAttrId.REQ,
  MRA: CmAttrId.MRA,
  REJ: CmAttrId.REJ,
  REP: CmAttrId.REP,
  RTU: CmAttrId.RTU,
  DREQ: CmAttrId.DREQ,
  DREP: CmAttrId.DREP,
  SIDR_REQ: CmAttrId.SIDR_REQ,
  SIDR_REP: CmAttrId.SIDR_REP,
});

/** An all-zero path (what a REQ without an alternate path carries). */
export function emptyCmPath(): CmPath {
  return {
    localLid: 0,
    remoteLid: 0,
    localGid: new Uint8Array(16),
    remoteGid: new Uint8Array(16),
    flowLabel: 0,
    packetRate: 0,
    trafficClass: 0,
    hopLimit: 0,
    sl: 0,
    subnetLocal: false,
    localAckTimeout: 0,
  };
}

/** Whether a REQ carries an alternate path (Linux `cm_req_has_alt_path`: non-zero alternate LID). */
export function cmReqHasAltPath(req: CmReq): boolean {
  return req.alternatePath.localLid !== 0;
}

function readPath(b: Uint8Array, o: number): CmPath {
  return {
    localLid: getBits(b, o, 0, 0, 16),
    remoteLid: getBits(b, o, 2, 0, 16),
    localGid: getBytes(b, o + 4, 16),
    remoteGid: getBytes(b, o + 20, 16),
    flowLabel: getBits(b, o, 36, 0, 20),
    packetRate: getBits(b, o, 39, 2, 6),
    trafficClass: getBits(b, o, 40, 0, 8),
    hopLimit: getBits(b, o, 41, 0, 8),
    sl: getBits(b, o, 42, 0, 4),
    subnetLocal: getBits(b, o, 42, 4, 1) === 1,
    localAckTimeout: getBits(b, o, 43, 0, 5),
  };
}

function writePath(b: Uint8Array, o: number, p: CmPath): void {
  setBits(b, o, 0, 0, 16, p.localLid);
  setBits(b, o, 2, 0, 16, p.remoteLid);
  putBytes(b, o + 4, 16, p.localGid, 'localGid');
  putBytes(b, o + 20, 16, p.remoteGid, 'remoteGid');
  setBits(b, o, 36, 0, 20, p.flowLabel);
  setBits(b, o, 39, 2, 6, p.packetRate);
  setBits(b, o, 40, 0, 8, p.trafficClass);
  setBits(b, o, 41, 0, 8, p.hopLimit);
  setBits(b, o, 42, 0, 4, p.sl);
  setBits(b, o, 42, 4, 1, p.subnetLocal ? 1 : 0);
  setBits(b, o, 43, 0, 5, p.localAckTimeout);
}

const bit = (v: boolean): number => (v ? 1 : 0);

/** Write the body of `m` at `b[o]` (232 bytes, all of them: reserved bits zero). */
function writeBody(b: Uint8Array, o: number, m: CmMessage): void {
  b.fill(0, o, o + MAD_SIZE - MAD_HDR_LEN);
  switch (m.kind) {
    case 'REQ':
      setBits(b, o, 0, 0, 32, m.localCommId);
      setBits(b, o, 5, 0, 24, m.vendorId);
      set64(b, o + 8, m.serviceId);
      set64(b, o + 16, m.localCaGuid);
      setBits(b, o, 28, 0, 32, m.localQkey);
      setBits(b, o, 32, 0, 24, m.localQpn);
      setBits(b, o, 35, 0, 8, m.responderResources);
      setBits(b, o, 36, 0, 24, m.localEecn);
      setBits(b, o, 39, 0, 8, m.initiatorDepth);
      setBits(b, o, 40, 0, 24, m.remoteEecn);
      setBits(b, o, 43, 0, 5, m.remoteCmResponseTimeout);
      setBits(b, o, 43, 5, 2, m.transportType);
      setBits(b, o, 43, 7, 1, bit(m.e2eFlowControl));
      setBits(b, o, 44, 0, 24, m.startingPsn);
      setBits(b, o, 47, 0, 5, m.localCmResponseTimeout);
      setBits(b, o, 47, 5, 3, m.retryCount);
      setBits(b, o, 48, 0, 16, m.pkey);
      setBits(b, o, 50, 0, 4, m.pathMtu);
      setBits(b, o, 50, 4, 1, bit(m.rdcExists));
      setBits(b, o, 50, 5, 3, m.rnrRetryCount);
      setBits(b, o, 51, 0, 4, m.maxCmRetries);
      setBits(b, o, 51, 4, 1, bit(m.srq));
      setBits(b, o, 51, 5, 3, m.extendedTransportType);
      writePath(b, o + 52, m.primaryPath);
      writePath(b, o + 96, m.alternatePath);
      setBits(b, o, 139, 5, 1, bit(m.sapSupported));
      putBytes(b, o + CmPrivateDataOff.REQ, CmPrivateDataLen.REQ, m.privateData, 'REQ private data');
      return;
    case 'MRA':
      setBits(b, o, 0, 0, 32, m.localCommId);
      setBits(b, o, 4, 0, 32, m.remoteCommId);
      setBits(b, o, 8, 0, 2, m.messageMraed);
      setBits(b, o, 9, 0, 5, m.serviceTimeout);
      putBytes(b, o + CmPrivateDataOff.MRA, CmPrivateDataLen.MRA, m.privateData, 'MRA private data');
      return;
    case 'REJ':
      setBits(b, o, 0, 0, 32, m.localCommId);
      setBits(b, o, 4, 0, 32, m.remoteCommId);
      setBits(b, o, 8, 0, 2, m.messageRejected);
      setBits(b, o, 9, 0, 7, m.ariLength);
      setBits(b, o, 10, 0, 16, m.reason);
      putBytes(b, o + 12, CM_ARI_LEN, m.ari, 'REJ ARI');
      putBytes(b, o + CmPrivateDataOff.REJ, CmPrivateDataLen.REJ, m.privateData, 'REJ private data');
      return;
    case 'REP':
      setBits(b, o, 0, 0, 32, m.localCommId);
      setBits(b, o, 4, 0, 32, m.remoteCommId);
      setBits(b, o, 8, 0, 32, m.localQkey);
      setBits(b, o, 12, 0, 24, m.localQpn);
      setBits(b, o, 15, 0, 8, m.vendorId >>> 16);
      setBits(b, o, 16, 0, 24, m.localEecn);
      setBits(b, o, 19, 0, 8, m.vendorId >>> 8);
      setBits(b, o, 20, 0, 24, m.startingPsn);
      setBits(b, o, 23, 0, 8, m.vendorId);
      setBits(b, o, 24, 0, 8, m.responderResources);
      setBits(b, o, 25, 0, 8, m.initiatorDepth);
      setBits(b, o, 26, 0, 5, m.targetAckDelay);
      setBits(b, o, 26, 5, 2, m.failoverAccepted);
      setBits(b, o, 26, 7, 1, bit(m.e2eFlowControl));
      setBits(b, o, 27, 0, 3, m.rnrRetryCount);
      setBits(b, o, 27, 3, 1, bit(m.srq));
      set64(b, o + 28, m.localCaGuid);
      putBytes(b, o + CmPrivateDataOff.REP, CmPrivateDataLen.REP, m.privateData, 'REP private data');
      return;
    case 'RTU':
    case 'DREP':
      setBits(b, o, 0, 0, 32, m.localCommId);
      setBits(b, o, 4, 0, 32, m.remoteCommId);
      putBytes(b, o + 8, CmPrivateDataLen[m.kind], m.privateData, `${m.kind} private data`);
      return;
    case 'DREQ':
      setBits(b, o, 0, 0, 32, m.localCommId);
      setBits(b, o, 4, 0, 32, m.remoteCommId);
      setBits(b, o, 8, 0, 24, m.remoteQpn);
      putBytes(b, o + CmPrivateDataOff.DREQ, CmPrivateDataLen.DREQ, m.privateData, 'DREQ private data');
      return;
    case 'SIDR_REQ':
      setBits(b, o, 0, 0, 32, m.requestId);
      setBits(b, o, 4, 0, 16, m.pkey);
      setBits(b, o, 6, 0, 16, m.reserved);
      set64(b, o + 8, m.serviceId);
      putBytes(b, o + CmPrivateDataOff.SIDR_REQ, CmPrivateDataLen.SIDR_REQ, m.privateData, 'SIDR_REQ private data');
      return;
    case 'SIDR_REP':
      setBits(b, o, 0, 0, 32, m.requestId);
      setBits(b, o, 4, 0, 8, m.status);
      setBits(b, o, 5, 0, 8, m.addInfoLength);
      setBits(b, o, 6, 0, 16, m.vendorId >>> 8);
      setBits(b, o, 8, 0, 24, m.qpn);
      setBits(b, o, 11, 0, 8, m.vendorId);
      set64(b, o + 12, m.serviceId);
      setBits(b, o, 20, 0, 32, m.qkey);
      putBytes(b, o + 24, CM_ARI_LEN, m.addInfo, 'SIDR_REP additional information');
      putBytes(b, o + CmPrivateDataOff.SIDR_REP, CmPrivateDataLen.SIDR_REP, m.privateData, 'SIDR_REP private data');
      return;
  }
}

function readBody(b: Uint8Array, o: number, attrId: number): CmMessage {
  const pd = (kind: keyof typeof CmPrivateDataLen): Uint8Array =>
    getBytes(b, o + CmPrivateDataOff[kind], CmPrivateDataLen[kind]);
  switch (attrId) {
    case CmAttrId.REQ:
      return {
        kind: 'REQ',
        localCommId: getBits(b, o, 0, 0, 32),
        vendorId: getBits(b, o, 5, 0, 24),
        serviceId: get64(b, o + 8),
        localCaGuid: get64(b, o + 16),
        localQkey: getBits(b, o, 28, 0, 32),
        localQpn: getBits(b, o, 32, 0, 24),
        responderResources: getBits(b, o, 35, 0, 8),
        localEecn: getBits(b, o, 36, 0, 24),
        initiatorDepth: getBits(b, o, 39, 0, 8),
        remoteEecn: getBits(b, o, 40, 0, 24),
        remoteCmResponseTimeout: getBits(b, o, 43, 0, 5),
        transportType: getBits(b, o, 43, 5, 2),
        e2eFlowControl: getBits(b, o, 43, 7, 1) === 1,
        startingPsn: getBits(b, o, 44, 0, 24),
        localCmResponseTimeout: getBits(b, o, 47, 0, 5),
        retryCount: getBits(b, o, 47, 5, 3),
        pkey: getBits(b, o, 48, 0, 16),
        pathMtu: getBits(b, o, 50, 0, 4),
        rdcExists: getBits(b, o, 50, 4, 1) === 1,
        rnrRetryCount: getBits(b, o, 50, 5, 3),
        maxCmRetries: getBits(b, o, 51, 0, 4),
        srq: getBits(b, o, 51, 4, 1) === 1,
        extendedTransportType: getBits(b, o, 51, 5, 3),
        primaryPath: readPath(b, o + 52),
        alternatePath: readPath(b, o + 96),
        sapSupported: getBits(b, o, 139, 5, 1) === 1,
        privateData: pd('REQ'),
      };
    case CmAttrId.MRA:
      return {
        kind: 'MRA',
        localCommId: getBits(b, o, 0, 0, 32),
        remoteCommId: getBits(b, o, 4, 0, 32),
        messageMraed: getBits(b, o, 8, 0, 2),
        serviceTimeout: getBits(b, o, 9, 0, 5),
        privateData: pd('MRA'),
      };
    case CmAttrId.REJ:
      return {
        kind: 'REJ',
        localCommId: getBits(b, o, 0, 0, 32),
        remoteCommId: getBits(b, o, 4, 0, 32),
        messageRejected: getBits(b, o, 8, 0, 2),
        ariLength: getBits(b, o, 9, 0, 7),
        reason: getBits(b, o, 10, 0, 16),
        ari: getBytes(b, o + 12, CM_ARI_LEN),
        privateData: pd('REJ'),
      };
    case CmAttrId.REP:
      return {
        kind: 'REP',
        localCommId: getBits(b, o, 0, 0, 32),
        remoteCommId: getBits(b, o, 4, 0, 32),
        localQkey: getBits(b, o, 8, 0, 32),
        localQpn: getBits(b, o, 12, 0, 24),
        vendorId: (getBits(b, o, 15, 0, 8) << 16) | (getBits(b, o, 19, 0, 8) << 8) | getBits(b, o, 23, 0, 8),
        localEecn: getBits(b, o, 16, 0, 24),
        startingPsn: getBits(b, o, 20, 0, 24),
        responderResources: getBits(b, o, 24, 0, 8),
        initiatorDepth: getBits(b, o, 25, 0, 8),
        targetAckDelay: getBits(b, o, 26, 0, 5),
        failoverAccepted: getBits(b, o, 26, 5, 2),
        e2eFlowControl: getBits(b, o, 26, 7, 1) === 1,
        rnrRetryCount: getBits(b, o, 27, 0, 3),
        srq: getBits(b, o, 27, 3, 1) === 1,
        localCaGuid: get64(b, o + 28),
        privateData: pd('REP'),
      };
    case CmAttrId.RTU:
      return { kind: 'RTU', localCommId: getBits(b, o, 0, 0, 32), remoteCommId: getBits(b, o, 4, 0, 32), privateData: pd('RTU') };
    case CmAttrId.DREQ:
      return {
        kind: 'DREQ',
        localCommId: getBits(b, o, 0, 0, 32),
        remoteCommId: getBits(b, o, 4, 0, 32),
        remoteQpn: getBits(b, o, 8, 0, 24),
        privateData: pd('DREQ'),
      };
    case CmAttrId.DREP:
      return { kind: 'DREP', localCommId: getBits(b, o, 0, 0, 32), remoteCommId: getBits(b, o, 4, 0, 32), privateData: pd('DREP') };
    case CmAttrId.SIDR_REQ:
      return {
        kind: 'SIDR_REQ',
        requestId: getBits(b, o, 0, 0, 32),
        pkey: getBits(b, o, 4, 0, 16),
        reserved: getBits(b, o, 6, 0, 16),
        serviceId: get64(b, o + 8),
        privateData: pd('SIDR_REQ'),
      };
    case CmAttrId.SIDR_REP:
      return {
        kind: 'SIDR_REP',
        requestId: getBits(b, o, 0, 0, 32),
        status: getBits(b, o, 4, 0, 8),
        addInfoLength: getBits(b, o, 5, 0, 8),
        vendorId: (getBits(b, o, 6, 0, 16) << 8) | getBits(b, o, 11, 0, 8),
        qpn: getBits(b, o, 8, 0, 24),
        serviceId: get64(b, o + 12),
        qkey: getBits(b, o, 20, 0, 32),
        addInfo: getBytes(b, o + 24, CM_ARI_LEN),
        privateData: pd('SIDR_REP'),
      };
    default:
      throw err('EBADMSG', 'decodeCmMad', `CM attribute 0x${attrId.toString(16).padStart(4, '0')} not supported`);
  }
}

/** Header fields of an encoded CM MAD that callers may set. */
export interface CmMadOptions {
  /** Class version; default {@link CM_CLASS_VERSION}. */
  classVersion?: number;
  /** Method; default Send. */
  method?: number;
  /** Status; default 0. */
  status?: number;
  /** Attribute modifier; default 0. */
  attrMod?: number;
}

/**
 * Encode a CM message as a 256-byte MAD with transaction ID `tid` (into `out` at `off` when given,
 * else a new buffer). Fields are masked to their widths; private data, ARI or additional
 * information longer than its field throws `EINVAL`.
 */
export function encodeCmMad(msg: CmMessage, tid: bigint, opts: CmMadOptions = {}, out?: Uint8Array, off = 0): Uint8Array {
  const b = out ?? new Uint8Array(MAD_SIZE);
  if (b.length - off < MAD_SIZE) throw err('EINVAL', 'encodeCmMad', 'output buffer too small');
  writeMadHeader(b, off, {
    baseVersion: MAD_BASE_VERSION,
    mgmtClass: MgmtClass.CM,
    classVersion: opts.classVersion ?? CM_CLASS_VERSION,
    method: opts.method ?? MadMethod.SEND,
    status: opts.status ?? 0,
    classSpecific: 0,
    tid,
    attrId: CM_KIND_ATTR[msg.kind],
    reserved: 0,
    attrMod: opts.attrMod ?? 0,
  });
  writeBody(b, off + MAD_HDR_LEN, msg);
  return out === undefined ? b : b.subarray(off, off + MAD_SIZE);
}

/**
 * Decode a 256-byte CM MAD. Throws `RdmaError` `EBADMSG` when it is shorter than 256 bytes, not
 * base version 1 / class CM, or carries an attribute this module does not decode (ClassPortInfo,
 * LAP, APR, unknown). Extra bytes after 256 are ignored.
 */
export function decodeCmMad(mad: Uint8Array, off = 0): CmMad {
  if (off < 0 || mad.length - off < MAD_SIZE) throw err('EBADMSG', 'decodeCmMad', `${mad.length - off} bytes, a MAD is ${MAD_SIZE}`);
  const hdr = decodeMadHeader(mad, off);
  if (hdr.baseVersion !== MAD_BASE_VERSION || hdr.mgmtClass !== MgmtClass.CM) {
    throw err('EBADMSG', 'decodeCmMad', `base version ${hdr.baseVersion} class 0x${hdr.mgmtClass.toString(16)} is not a CM MAD`);
  }
  return { hdr, msg: readBody(mad, off + MAD_HDR_LEN, hdr.attrId) };
}

/**
 * What Linux's CM would object to in a decoded header, or `null`: a class version other than 2 or
 * a method other than Send (ib_cm drops such MADs silently).
 */
export function cmMadHeaderProblem(hdr: MadHeader): string | null {
  if (hdr.classVersion !== CM_CLASS_VERSION) return `class version ${hdr.classVersion}`;
  if (hdr.method !== MadMethod.SEND) return `method 0x${hdr.method.toString(16)}`;
  return null;
}
