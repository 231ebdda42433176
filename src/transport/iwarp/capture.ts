/**
 * What a packet capture (verbs/capture.ts, docs/capture.md) sees of the soft iWARP device: each
 * TCP connection of an endpoint as the segments it would be on a wire, built from its real
 * addresses and ports — SYN, SYN-ACK and ACK when the capture sees the stream from its first
 * byte, then the MPA request or reply and one FPDU per segment in each direction (mpa-split.ts),
 * with sequence and acknowledgement numbers that follow the bytes, then FIN (or RST). Wireshark
 * recognises iWARP on a TCP connection by the MPA keys of its first bytes ("MPA ID Req Frame",
 * "MPA ID Rep Frame"), then decodes MPA, DDP and RDMAP. A capture started while a connection was
 * open sees the rest of it as plain TCP, said in the first frame's comment.
 */
import { networkInterfaces } from 'node:os';
import { captureFrame, capturing, type CaptureDirection } from '../../verbs/capture.js';
import { IPV4_MAX_PAYLOAD, TCP_HEADER_LEN, TcpFlag, tcpFrameHeaders, type FrameEnds } from '../../wire/capture/frames.js';
import { MpaSplitter, SplitMode } from '../../wire/capture/mpa-split.js';
import { parseIpv4, parseIpv6 } from '../../util/ip.js';

/** The window every synthesized segment advertises. */
const WINDOW = 0xffff;
/** IPv4 TTL / IPv6 hop limit of the frames (what Linux sends on loopback). */
const HOP_LIMIT = 64;
/** Longest payload of one synthesized segment (fits the IPv4 total length). */
const MAX_SEGMENT = IPV4_MAX_PAYLOAD - TCP_HEADER_LEN;

/** The comment of the first frame of a connection whose start the capture did not see. */
export const MID_CONNECTION_NOTE = 'capture started mid-connection: the MPA start frames were not seen, the segments carry the stream as TCP delivered it';

const ZERO_MAC = new Uint8Array(6);

/** An address without an IPv4-mapped prefix or IPv6 zone, and its family. */
function plainAddress(a: string): { ip: string; family: 4 | 6 } {
  const noZone = a.split('%')[0] ?? a;
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(noZone);
  if (m) return { ip: m[1] as string, family: 4 };
  return { ip: noZone, family: noZone.includes(':') ? 6 : 4 };
}

function addressBytes(ip: string, family: 4 | 6): Uint8Array {
  if (family === 4) {
    const v = parseIpv4(ip) ?? 0;
    return Uint8Array.of(v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff);
  }
  const w = parseIpv6(ip) ?? [];
  const b = new Uint8Array(16);
  for (let k = 0; k < 8; k++) {
    b[2 * k] = (w[k] ?? 0) >>> 8;
    b[2 * k + 1] = (w[k] ?? 0) & 0xff;
  }
  return b;
}

/** The interface that holds local address `ip` (the device is `siw_<ifname>`) and its MAC. */
function interfaceOf(ip: string): { ifname: string; mac: Uint8Array } | null {
  for (const [name, infos] of Object.entries(networkInterfaces())) {
    for (const i of infos ?? []) {
      if ((i.address.split('%')[0] ?? '').toLowerCase() !== ip.toLowerCase()) continue;
      const mac = i.mac.split(':').map((x) => parseInt(x, 16));
      return { ifname: name, mac: mac.length === 6 && mac.every((x) => x >= 0 && x < 256) ? Uint8Array.from(mac) : ZERO_MAC };
    }
  }
  return null;
}

/** The connections being captured, by `local ip|port|remote ip|port`. */
const open = new Map<string, ConnectionCapture>();

/** An initial sequence number from a direction's key (FNV-1a). */
function isnOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** One direction of the connection. */
class Half {
  seq: number;
  fin = false;
  readonly split = new MpaSplitter();
  constructor(
    readonly dir: CaptureDirection,
    readonly ends: FrameEnds,
    isn: number,
  ) {
    this.seq = isn;
  }
}

/** The frames of one TCP connection of the soft iWARP device. */
export class ConnectionCapture {
  readonly device: string;
  private readonly out: Half;
  private readonly in: Half;
  /** Whether the stream was seen from its start (the handshake has been written). */
  private started = false;
  private note: string | undefined;

  /** The other end of the connection, when it is in this process too. */
  private peer: ConnectionCapture | null = null;

  private constructor(device: string, out: Half, inb: Half, private readonly initiator: boolean, private readonly key: string) {
    this.device = device;
    this.out = out;
    this.in = inb;
  }

  /**
   * The capture of a connection between `local` and `remote` (its device: `siw_<interface of the
   * local address>`), `initiator` when this side connected; null when the addresses are not known.
   */
  static open(local: { address?: string | undefined; port?: number | undefined }, remote: { address?: string | undefined; port?: number | undefined }, id: number, initiator: boolean): ConnectionCapture | null {
    if (local.address === undefined || remote.address === undefined || local.port === undefined || remote.port === undefined) return null;
    const l = plainAddress(local.address);
    const r = plainAddress(remote.address);
    const ifc = interfaceOf(l.ip);
    const device = `siw_${ifc?.ifname ?? 'unknown'}`;
    const mac = ifc?.mac ?? ZERO_MAC;
    const lb = addressBytes(l.ip, l.family);
    const rb = addressBytes(r.ip, r.family);
    // Initial sequence numbers from the direction's addresses and ports: both ends of a
    // connection in one process number a direction alike.
    const outKey = `${l.ip}|${local.port}|${r.ip}|${remote.port}`;
    const inKey = `${r.ip}|${remote.port}|${l.ip}|${local.port}`;
    const out = new Half('out', { family: l.family, srcMac: mac, dstMac: ZERO_MAC, src: lb, dst: rb, sport: local.port, dport: remote.port, hopLimit: HOP_LIMIT }, isnOf(outKey));
    const inb = new Half('in', { family: l.family, srcMac: ZERO_MAC, dstMac: mac, src: rb, dst: lb, sport: remote.port, dport: local.port, hopLimit: HOP_LIMIT }, isnOf(inKey));
    const c = new ConnectionCapture(device, out, inb, initiator, outKey);
    // The other end in this process: what this end receives is what that one sent, captured
    // there already; this end writes only what it sends.
    const peer = open.get(inKey);
    if (peer !== undefined) {
      c.peer = peer;
      peer.peer = c;
    }
    open.set(outKey, c);
    return c;
  }

  /**
   * The first bytes the capture sees start with an MPA key (`fromStart`): write the three-way
   * handshake, the initiator sending the SYN. Otherwise note that the capture came in late.
   */
  private begin(fromStart: boolean): void {
    const initiator = this.initiator;
    if (!fromStart) {
      this.started = true;
      this.note = MID_CONNECTION_NOTE;
      return;
    }
    if (this.peer !== null && !initiator) {
      // The initiator's capture wrote the handshake.
      this.out.seq = (this.out.seq + 1) >>> 0;
      this.in.seq = (this.in.seq + 1) >>> 0;
      this.started = true;
      return;
    }
    const [a, b] = initiator ? [this.out, this.in] : [this.in, this.out];
    this.segment(a, TcpFlag.SYN, EMPTY, 0, 0, 0);
    a.seq = (a.seq + 1) >>> 0;
    this.segment(b, TcpFlag.SYN | TcpFlag.ACK, EMPTY, 0, 0, a.seq);
    b.seq = (b.seq + 1) >>> 0;
    this.segment(a, TcpFlag.ACK, EMPTY, 0, 0, b.seq);
    this.started = true;
  }

  /** Stream bytes `buf[start, end)` went `dir`. */
  data(dir: CaptureDirection, buf: Uint8Array, start: number, end: number): void {
    const h = dir === 'out' ? this.out : this.in;
    if (h.fin || !capturing(this.device)) return;
    if (dir === 'in' && this.peer !== null) return;
    if (!this.started) this.begin(looksLikeMpaStart(buf, start, end));
    h.split.push(buf, start, end, (b, s, e) => {
      for (let o = s; o < e; o += MAX_SEGMENT) {
        const n = Math.min(MAX_SEGMENT, e - o);
        this.segment(h, TcpFlag.PSH | TcpFlag.ACK, b, o, o + n, this.ackFor(h));
        h.seq = (h.seq + n) >>> 0;
      }
    });
  }

  /** Whether the bytes of direction `dir` passed as raw chunks (no MPA start seen). */
  raw(dir: CaptureDirection): boolean {
    return (dir === 'out' ? this.out : this.in).split.mode === SplitMode.RAW;
  }

  /** Direction `dir` ended with a FIN. */
  fin(dir: CaptureDirection): void {
    const h = dir === 'out' ? this.out : this.in;
    if (h.fin || !this.started || !capturing(this.device)) return;
    h.fin = true;
    if (dir === 'in' && this.peer !== null) return;
    this.segment(h, TcpFlag.FIN | TcpFlag.ACK, EMPTY, 0, 0, this.ackFor(h));
    h.seq = (h.seq + 1) >>> 0;
  }

  /** This side reset the connection. */
  reset(): void {
    if (this.out.fin || !this.started || !capturing(this.device)) return;
    this.out.fin = true;
    this.segment(this.out, TcpFlag.RST | TcpFlag.ACK, EMPTY, 0, 0, this.ackFor(this.out));
  }

  /** The connection is gone: forget it (a later one may reuse its addresses and ports). */
  close(): void {
    if (open.get(this.key) === this) open.delete(this.key);
    if (this.peer !== null) this.peer.peer = null;
    this.peer = null;
  }

  /** What a segment going `h` acknowledges: the next byte of the other direction. */
  private ackFor(h: Half): number {
    if (h === this.out && this.peer !== null) return this.peer.out.seq;
    return this.other(h).seq;
  }

  private other(h: Half): Half {
    return h === this.out ? this.in : this.out;
  }

  private segment(h: Half, flags: number, b: Uint8Array, s: number, e: number, ack: number): void {
    try {
      const hdr = tcpFrameHeaders(h.ends, { seq: h.seq, ack: ack >>> 0, flags, window: WINDOW }, b, s, e);
      const note = this.note;
      this.note = undefined;
      captureFrame(this.device, hdr, b, s, e, h.dir, note);
    } catch {
      // A frame that cannot be built is left out: the connection goes on.
    }
  }
}

const EMPTY = new Uint8Array(0);

const KEYS = [Buffer.from('MPA ID Req Frame', 'latin1'), Buffer.from('MPA ID Rep Frame', 'latin1')];

/** Whether `buf[start, end)` starts as an MPA start frame does (as far as its bytes go, up to the key's 16). */
export function looksLikeMpaStart(buf: Uint8Array, start: number, end: number): boolean {
  const n = Math.min(end - start, 16);
  if (n <= 0) return false;
  return KEYS.some((k) => {
    for (let i = 0; i < n; i++) if (buf[start + i] !== k[i]) return false;
    return true;
  });
}
