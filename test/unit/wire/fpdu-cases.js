// Shared FPDU test cases (not a test file itself).
import { TerminateError } from '../../../dist/errors.js';
import { encodeFpdu } from '../../../dist/wire/index.js';
export { prng } from '../../lib/prng.js';

/** Malformed headers and the TERMINATE each must raise (siw_qp_rx.c; fpdu.ts checkFpduCtrl docs). */
export const MALFORMED = [
  ['DDP version 0, tagged', () => patch(encodeFpdu({ opcode: 0 }), 2, 0xc0), [1, 1, 0x04], 16],
  ['DDP version 2, tagged', () => patch(encodeFpdu({ opcode: 2 }), 2, 0xc2), [1, 1, 0x04], 16],
  ['DDP version 0, untagged', () => patch(encodeFpdu({ opcode: 3 }, Buffer.alloc(8)), 2, 0x40), [1, 2, 0x06], 16],
  ['DDP version 3, untagged', () => patch(encodeFpdu({ opcode: 1 }), 2, 0x43), [1, 2, 0x06], 16],
  ['DDP version checked before RDMAP version', () => patch(patch(encodeFpdu({ opcode: 3 }), 2, 0x42), 3, 0x83), [1, 2, 0x06], 16],
  ['RDMAP version 0', () => patch(encodeFpdu({ opcode: 3 }), 3, 0x03), [0, 2, 0x05], 16],
  ['RDMAP version 2', () => patch(encodeFpdu({ opcode: 0 }), 3, 0x80), [0, 2, 0x05], 16],
  ['RDMAP version 3', () => patch(encodeFpdu({ opcode: 7 }, Buffer.alloc(4)), 3, 0xc7), [0, 2, 0x05], 16],
  ['opcode 8 (RFC 7306 immediate)', () => patch(encodeFpdu({ opcode: 3 }), 3, 0x48), [0, 2, 0x06], 16],
  ['opcode 0xA (RFC 7306 atomic)', () => patch(encodeFpdu({ opcode: 3 }), 3, 0x4a), [0, 2, 0x06], 16],
  ['opcode 15', () => patch(encodeFpdu({ opcode: 0 }), 3, 0x4f), [0, 2, 0x06], 16],
  ['T set on a Send', () => patch(encodeFpdu({ opcode: 3 }, Buffer.alloc(4)), 2, 0xc1), [1, 1, 0x00], 16],
  ['T set on a Read Request', () => patch(encodeFpdu({ opcode: 1 }), 2, 0xc1), [1, 1, 0x00], 16],
  ['T clear on a Write', () => patch(encodeFpdu({ opcode: 0 }, Buffer.alloc(8)), 2, 0x41), [1, 2, 0x01], 16],
  ['T clear on a Read Response', () => patch(encodeFpdu({ opcode: 2 }, Buffer.alloc(8)), 2, 0x41), [1, 2, 0x01], 16],
  ['Write ULPDU_Length 13 < 14', () => setLen(encodeFpdu({ opcode: 0 }, Buffer.alloc(8)), 13), [1, 0, 0x00], 16],
  ['Send ULPDU_Length 17 < 18', () => setLen(encodeFpdu({ opcode: 3 }, Buffer.alloc(8)), 17), [1, 0, 0x00], 16],
  ['Read Request ULPDU_Length 18 < 46', () => setLen(encodeFpdu({ opcode: 1 }), 18), [1, 0, 0x00], 16],
  ['Terminate ULPDU_Length 18 < 22', () => setLen(encodeFpdu({ opcode: 7 }, Buffer.alloc(4)), 18), [1, 0, 0x00], 16],
  ['Send on QN 1', () => encodeFpdu({ opcode: 3, qn: 1 }, Buffer.alloc(4)), [1, 2, 0x01], 20],
  ['Send with SE on QN 2', () => encodeFpdu({ opcode: 5, qn: 2 }), [1, 2, 0x01], 20],
  ['Read Request on QN 0', () => encodeFpdu({ opcode: 1, qn: 0 }), [1, 2, 0x01], 48],
  ['Terminate on QN 0', () => encodeFpdu({ opcode: 7, qn: 0 }, Buffer.alloc(4)), [1, 2, 0x01], 24],
  ['Read Request with payload', () => rreqWithPayload(4), [1, 2, 0x05], 48],
];

function patch(b, off, v) {
  b[off] = v;
  return b;
}

function setLen(b, len) {
  b.writeUInt16BE(len, 0);
  return b;
}

function rreqWithPayload(n) {
  const base = encodeFpdu({ opcode: 1, srcStag: 1 });
  const ulpdu = 46 + n;
  const out = Buffer.alloc(2 + ulpdu + (-(ulpdu + 2) & 3) + 4);
  base.copy(out, 0, 0, 48);
  out.writeUInt16BE(ulpdu, 0);
  return out;
}

/** Field names compared between the generator, the reference decoder and the FpduDecoder. */
export const FIELDS = [
  'ulpduLen', 'opcode', 'tagged', 'last', 'hdrLen', 'stag', 'to', 'invStag', 'qn', 'msn', 'mo',
  'sinkStag', 'sinkTo', 'readSize', 'srcStag', 'srcTo', 'payloadLen',
];

const HDR = [16, 48, 16, 20, 20, 20, 20, 24];
const TAGGED = [true, false, true, false, false, false, false, false];
const QN = [0, 1, 0, 0, 0, 0, 0, 2];

/**
 * A random stream of complete messages, each split into FPDUs of at most 65535 ULPDU bytes, as a
 * well-behaved sender would emit them (segments of one message back to back, MSN per queue from
 * 1, MO / TO advancing). Returns the bytes and the expected FPDU records (fields + payload).
 */
export function genStream(rnd, { crc, maxMessages = 12, maxLen = 70000 }) {
  const u32 = () => (rnd() * 0x100000000) >>> 0;
  const int = (n) => Math.floor(rnd() * n);
  const msn = [1, 1, 1];
  const parts = [];
  const expected = [];
  const nMsg = 1 + int(maxMessages);
  for (let m = 0; m < nMsg; m++) {
    const r = rnd();
    const op = r < 0.25 ? 0 : r < 0.4 ? 2 : r < 0.75 ? 3 + int(4) : r < 0.92 ? 1 : 7;
    const q = rnd();
    let len = q < 0.4 ? int(65) : q < 0.7 ? int(4097) : q < 0.95 ? int(20001) : int(maxLen + 1);
    if (op === 1) len = 0;
    if (op === 7) len = [0, 16, 20, 48][int(4)];
    const words = new Uint32Array((len + 3) >> 2);
    for (let k = 0; k < words.length; k++) words[k] = u32();
    const payload = Buffer.from(words.buffer, 0, len);
    const hdrLen = HDR[op];
    const limit = 65535 + 2 - hdrLen;
    const seg = op === 1 || op === 7 ? limit : rnd() < 0.5 ? ((1448 & ~7) - hdrLen - 4) : 1 + int(limit);
    const stag = u32();
    const to = int(2 ** 40);
    const invStag = op === 4 || op === 6 ? u32() : 0;
    const qn = QN[op];
    const thisMsn = TAGGED[op] ? 0 : msn[qn]++;
    let off = 0;
    do {
      const n = Math.min(seg, len - off);
      const last = off + n === len;
      const f = { opcode: op, last, stag, to: to + off, invStag, msn: thisMsn, mo: off };
      if (op === 1) Object.assign(f, { sinkStag: u32(), sinkTo: int(2 ** 50), readSize: u32(), srcStag: u32(), srcTo: int(2 ** 52) });
      let body = payload.subarray(off, off + n);
      if (op === 7) body = Buffer.concat([Buffer.from([0x20, 0x02, 0x80, 0x00]), body]);
      const bytes = encodeFpdu(f, body, { crc });
      parts.push(bytes);
      const rec = {
        ulpduLen: bytes.readUInt16BE(0),
        opcode: op,
        tagged: TAGGED[op],
        last,
        hdrLen,
        stag: TAGGED[op] ? stag : 0,
        to: TAGGED[op] ? to + off : 0,
        invStag: TAGGED[op] ? 0 : invStag,
        qn: TAGGED[op] ? 0 : qn,
        msn: TAGGED[op] ? 0 : thisMsn,
        mo: TAGGED[op] ? 0 : off,
        sinkStag: f.sinkStag ?? 0,
        sinkTo: f.sinkTo ?? 0,
        readSize: f.readSize ?? 0,
        srcStag: f.srcStag ?? 0,
        srcTo: f.srcTo ?? 0,
        payloadLen: n,
        raw: new Uint8Array(bytes.subarray(0, hdrLen)),
        payload: Buffer.from(payload.subarray(off, off + n)),
        crcOk: true,
      };
      expected.push(rec);
      off += n;
    } while (off < len);
  }
  return { bytes: Buffer.concat(parts), expected, sizes: parts.map((p) => p.length) };
}

/** An FpduSink that records what it is handed, checking the call protocol as it goes. */
export class RecordingSink {
  constructor() {
    this.records = [];
    this.pieces = [];
    this.inFpdu = false;
    this.header = null;
    this.views = 0;
    this.onChunk = null; // set by tests to verify zero-copy views
  }
  onHeader(h) {
    if (this.inFpdu) throw new Error('onHeader inside an FPDU');
    if (this.header !== null && this.header !== h) throw new Error('header object not reused');
    this.header = h;
    this.inFpdu = true;
    const rec = {};
    for (const k of FIELDS) rec[k] = h[k];
    rec.raw = new Uint8Array(h.raw);
    if (h.raw.length !== h.hdrLen) throw new Error('raw length');
    this.cur = rec;
    this.pieces = [];
    this.got = 0;
  }
  onPayload(src, start, end) {
    if (!this.inFpdu) throw new Error('onPayload outside an FPDU');
    if (!(end > start)) throw new Error('empty payload piece');
    if (this.onChunk) this.onChunk(src, start, end);
    this.pieces.push(Buffer.from(src.subarray(start, end)));
    this.got += end - start;
    this.views++;
    if (this.got > this.cur.payloadLen) throw new Error('too much payload');
  }
  onEnd(h, crcOk) {
    if (!this.inFpdu || h !== this.header) throw new Error('onEnd protocol');
    if (this.got !== this.cur.payloadLen) throw new Error(`payload ${this.got} != ${this.cur.payloadLen}`);
    this.inFpdu = false;
    this.cur.payload = Buffer.concat(this.pieces);
    this.cur.crcOk = crcOk;
    this.records.push(this.cur);
  }
}

/**
 * Naive reference decoder: whole buffer in, DataView reads, BigInt offsets, the
 * bitwise CRC. No validation beyond what is needed to walk the stream.
 */
export function refDecode(buf, { crc, crcFn }) {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const out = [];
  let o = 0;
  const big = (at) => {
    const v = dv.getBigUint64(at);
    return v < 2n ** 53n ? Number(v) : -1;
  };
  while (o < buf.length) {
    const ulpduLen = dv.getUint16(o);
    const ddp = dv.getUint8(o + 2);
    const rdmap = dv.getUint8(o + 3);
    const opcode = rdmap & 0x0f;
    const tagged = (ddp & 0x80) !== 0;
    const hdrLen = HDR[opcode];
    const rec = {
      ulpduLen, opcode, tagged, last: (ddp & 0x40) !== 0, hdrLen,
      stag: tagged ? dv.getUint32(o + 4) : 0,
      to: tagged ? big(o + 8) : 0,
      invStag: tagged ? 0 : dv.getUint32(o + 4),
      qn: tagged ? 0 : dv.getUint32(o + 8),
      msn: tagged ? 0 : dv.getUint32(o + 12),
      mo: tagged ? 0 : dv.getUint32(o + 16),
      sinkStag: opcode === 1 ? dv.getUint32(o + 20) : 0,
      sinkTo: opcode === 1 ? big(o + 24) : 0,
      readSize: opcode === 1 ? dv.getUint32(o + 32) : 0,
      srcStag: opcode === 1 ? dv.getUint32(o + 36) : 0,
      srcTo: opcode === 1 ? big(o + 40) : 0,
      payloadLen: ulpduLen + 2 - hdrLen,
      raw: new Uint8Array(buf.subarray(o, o + hdrLen)),
      payload: Buffer.from(buf.subarray(o + hdrLen, o + 2 + ulpduLen)),
      crcOk: true,
    };
    const padEnd = o + 2 + ulpduLen + ((4 - ((2 + ulpduLen) % 4)) % 4);
    if (crc) rec.crcOk = crcFn(buf.subarray(o, padEnd)) === dv.getUint32(padEnd, true);
    out.push(rec);
    o = padEnd + 4;
  }
  return out;
}

/** Assertion predicate for a TerminateError with the given layer/etype/ecode. */
export function isTerm(layer, etype, ecode) {
  return (e) => {
    if (!(e instanceof TerminateError)) throw new Error(`expected TerminateError, got ${e && e.stack}`);
    if (e.layer !== layer || e.etype !== etype || e.ecode !== ecode) {
      throw new Error(`expected ${layer}/${etype}/${ecode}, got ${e.layer}/${e.etype}/${e.ecode}: ${e.message}`);
    }
    return true;
  };
}
