/**
 * Splits one direction of an iWARP TCP stream into the units a capture writes as TCP segments:
 * the MPA start frame (request or reply, RFC 5044 §7.1: 20 header bytes and PD_Length bytes of
 * private data), then one FPDU each (RFC 5044 §4: ULPDU_LENGTH, the ULPDU, padding to 4 bytes
 * and the 4-byte CRC field, present whether or not CRC is in use). Wireshark's MPA dissector
 * reads one FPDU from the start of a segment, so a capture whose segments start at FPDU
 * boundaries decodes whatever chunks TCP delivered. Incremental and I/O-free: fed arbitrary
 * chunks, it hands out whole units, as views when a chunk holds them, else as copies.
 *
 * A stream that does not start with an MPA key (a capture started mid-connection), or whose start
 * frame asks for markers (which move FPDU boundaries), is passed through chunk by chunk: the
 * splitter is then `raw`.
 */

/** RFC 5044 §7.1 field sizes. */
const KEY_LEN = 16;
const START_HDR_LEN = 20;
const PD_LENGTH_OFF = 18;
const FLAGS_OFF = 16;
/** M flag: markers. */
const FLAG_MARKERS = 0x80;
/** ULPDU_LENGTH field and CRC field of an FPDU. */
const ULPDU_LEN_FIELD = 2;
const CRC_LEN = 4;

const KEY_REQ = Buffer.from('MPA ID Req Frame', 'latin1');
const KEY_REP = Buffer.from('MPA ID Rep Frame', 'latin1');

/** Whole length of the FPDU whose ULPDU_LENGTH is `ulpduLen`. */
export function fpduWireLength(ulpduLen: number): number {
  return ((ULPDU_LEN_FIELD + ulpduLen + 3) & ~3) + CRC_LEN;
}

/** What the splitter hands out: bytes `[start, end)` of `buf` are one unit (or a raw chunk). */
export type UnitSink = (buf: Uint8Array, start: number, end: number) => void;

/** Where a stream direction's splitter stands. */
export const SplitMode = Object.freeze({ START: 'start', FPDU: 'fpdu', RAW: 'raw' } as const);
export type SplitMode = (typeof SplitMode)[keyof typeof SplitMode];

/** The splitter of one stream direction. */
export class MpaSplitter {
  mode: SplitMode = SplitMode.START;
  /** Whether the start frame seen was a request, a reply; null before it (or raw from the start). */
  startKey: 'request' | 'reply' | null = null;
  /** Bytes of a unit not complete yet. */
  private held: Buffer = Buffer.alloc(0);

  /** Feed stream bytes `buf[start, end)`; whole units go to `out` in order. */
  push(buf: Uint8Array, start: number, end: number, out: UnitSink): void {
    if (this.mode === SplitMode.RAW) {
      if (end > start) out(buf, start, end);
      return;
    }
    let b = buf;
    let o = start;
    let e = end;
    if (this.held.length > 0) {
      const joined = Buffer.concat([this.held, buf.subarray(start, end)]);
      this.held = Buffer.alloc(0);
      b = joined;
      o = 0;
      e = joined.length;
    }
    while (o < e) {
      const need = this.unitLength(b, o, e);
      if ((this.mode as SplitMode) === SplitMode.RAW) {
        out(b, o, e);
        return;
      }
      if (need < 0 || o + need > e) {
        this.held = Buffer.from(b.subarray(o, e));
        return;
      }
      out(b, o, o + need);
      if (this.mode === SplitMode.START) this.mode = SplitMode.FPDU;
      o += need;
    }
  }

  /**
   * Length of the unit at `b[o]`: -1 when more bytes are needed to tell. Switches to raw when the
   * stream starts without a key or its start frame asks for markers.
   */
  private unitLength(b: Uint8Array, o: number, e: number): number {
    if (this.mode === SplitMode.FPDU) {
      if (e - o < ULPDU_LEN_FIELD) return -1;
      return fpduWireLength(((b[o] as number) << 8) | (b[o + 1] as number));
    }
    // The start frame: the key tells as soon as its bytes differ.
    const have = Math.min(e - o, KEY_LEN);
    const isReq = keyPrefix(b, o, have, KEY_REQ);
    const isRep = keyPrefix(b, o, have, KEY_REP);
    if (!isReq && !isRep) {
      this.mode = SplitMode.RAW;
      return e - o;
    }
    if (e - o < START_HDR_LEN) return -1;
    this.startKey = isReq ? 'request' : 'reply';
    if (((b[o + FLAGS_OFF] as number) & FLAG_MARKERS) !== 0) {
      this.mode = SplitMode.RAW;
      return e - o;
    }
    return START_HDR_LEN + (((b[o + PD_LENGTH_OFF] as number) << 8) | (b[o + PD_LENGTH_OFF + 1] as number));
  }
}

function keyPrefix(b: Uint8Array, o: number, n: number, key: Buffer): boolean {
  for (let i = 0; i < n; i++) if (b[o + i] !== key[i]) return false;
  return true;
}
