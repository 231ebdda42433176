/**
 * Packet capture of the soft devices (docs/capture.md): what a device sends and receives, as
 * Ethernet frames in a pcapng file that Wireshark and tshark read — ibdump/tcpdump for devices
 * the kernel never sees. Transport-neutral: a soft device builds each frame's headers (wire/
 * capture/frames.ts) and hands them here with the payload; this module stamps the time, writes
 * one Interface Description Block per device and capture, and queues Enhanced Packet Blocks in a
 * bounded buffer (capture-writer.ts) that is written asynchronously. Nothing here blocks or
 * throws into a data path.
 *
 * - `RDMA_PCAP=file.pcapng` in the environment: every soft device of the process, into that file
 *   (`%p` in the name becomes the process id, so that several processes can share the setting).
 * - {@link startCapture}: one device (by name or context) or every device (`'*'`), into a file or
 *   a Node writable stream; the {@link Capture} handle counts and stops it.
 */
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { EpbDirection, LINKTYPE_ETHERNET, TSRESOL_MICROSECONDS, enhancedPacketLength, encodeInterfaceDescription, encodeSectionHeader, writeEnhancedPacket, type EnhancedPacket } from '../wire/capture/pcapng.js';
import { CaptureWriter, type CaptureStream } from './capture-writer.js';
import type { Context } from './context.js';

/** Direction of a captured frame, as the device saw it. */
export type CaptureDirection = 'in' | 'out';

/** Default bound of a capture's queue (bytes). */
export const CAPTURE_BUFFER_DEFAULT = 8 * 1024 * 1024;

/** Longest frame kept whole by default (a RoCE datagram or a TCP segment on loopback fits). */
export const CAPTURE_SNAPLEN_DEFAULT = 0x40000;

/** Options of {@link startCapture}. */
export interface CaptureOptions {
  /** Most bytes queued before frames are dropped (default 8 MiB). */
  bufferBytes?: number;
  /** Longest part of a frame kept (default 256 KiB: whole frames). */
  snapLen?: number;
}

/** What a capture counted so far. */
export interface CaptureStats {
  /** Frames queued for the file. */
  packets: number;
  /** Bytes of those frames (as captured). */
  bytes: number;
  /** Frames dropped: the queue was full, or the file could not be written. */
  dropped: number;
  /** Bytes written to the file or stream. */
  written: number;
  /** The error that stopped the writing, if one did. */
  error: Error | null;
}

let captures: Capture[] = [];

/**
 * Whether any capture runs in this process: a device checks it before building a frame (a live
 * binding, one load on the data path when no capture runs).
 */
export let captureOn = false;

function refresh(): void {
  captureOn = captures.length > 0;
}

/** Microseconds since the epoch, now. */
function nowUs(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

/** A running capture: counters, `stop()`, and an 'error' event for a file that cannot be written. */
export class Capture extends EventEmitter {
  /** The device captured, or `'*'` for every soft device of the process. */
  readonly device: string;
  private readonly writer: CaptureWriter;
  private readonly snapLen: number;
  /** Interface index in this file of each device seen. */
  private readonly ifaces = new Map<string, number>();
  private packets = 0;
  private bytes = 0;
  private dropped = 0;
  private stopped: Promise<void> | null = null;

  /** @internal Use {@link startCapture}. */
  constructor(device: string, dest: string | CaptureStream, opts: CaptureOptions) {
    super();
    this.device = device;
    this.snapLen = opts.snapLen ?? CAPTURE_SNAPLEN_DEFAULT;
    this.writer = new CaptureWriter(dest, opts.bufferBytes ?? CAPTURE_BUFFER_DEFAULT, (e) => {
      // Reported once; the device keeps working and later frames are counted as dropped.
      if (this.listenerCount('error') > 0) this.emit('error', e);
      else process.stderr.write(`rdmacm: packet capture${typeof dest === 'string' ? ` to ${dest}` : ''} stopped: ${e.message}\n`);
    });
    this.writer.push(encodeSectionHeader(`rdmacm (pid ${process.pid})`), true);
  }

  /** Whether frames of device `name` belong in this capture. */
  wants(name: string): boolean {
    return this.device === '*' || this.device === name;
  }

  /** @internal Queue one frame of device `name`: `headers` then `payload[start, end)`. */
  _frame(name: string, headers: Uint8Array, payload: Uint8Array, start: number, end: number, dir: CaptureDirection, comment: string | undefined, ts: number): void {
    let id = this.ifaces.get(name);
    if (id === undefined) {
      id = this.ifaces.size;
      this.ifaces.set(name, id);
      this.writer.push(
        encodeInterfaceDescription({ linkType: LINKTYPE_ETHERNET, snapLen: this.snapLen, name, description: `rdmacm soft device ${name}, pid ${process.pid}`, tsresol: TSRESOL_MICROSECONDS }),
        true,
      );
    }
    const total = headers.length + end - start;
    const keep = Math.min(end, start + Math.max(0, this.snapLen - headers.length));
    const p: EnhancedPacket = {
      interfaceId: id,
      timestamp: ts,
      parts: [headers, payload.subarray(start, keep)],
      originalLength: total,
      flags: dir === 'in' ? EpbDirection.INBOUND : EpbDirection.OUTBOUND,
    };
    if (comment !== undefined) p.comment = comment;
    const w = this.writer;
    if (w.reserve(enhancedPacketLength(p))) {
      writeEnhancedPacket(w.slab, w.slabAt, p);
      this.packets++;
      this.bytes += total;
    } else this.dropped++;
  }

  /** What this capture counted so far. */
  get stats(): CaptureStats {
    return { packets: this.packets, bytes: this.bytes, dropped: this.dropped, written: this.writer.writtenBytes, error: this.writer.error };
  }

  /** Stop capturing; resolves once every frame queued is written and a file is closed. Idempotent. */
  stop(): Promise<void> {
    if (this.stopped === null) {
      captures = captures.filter((c) => c !== this);
      refresh();
      this.stopped = this.writer.close();
    }
    return this.stopped;
  }
}

/**
 * Start capturing what device `target` (a name such as `rxe_lo`, a context, or `'*'` for every
 * soft device of this process) sends and receives into `dest` (a file path, created or
 * truncated, or a Node writable stream, which is left open). Frames are queued in memory up to
 * `opts.bufferBytes` and written asynchronously; what does not fit is dropped and counted. A
 * destination that cannot be written emits 'error' on the handle (or warns once on stderr when
 * nobody listens); the device keeps working either way. Devices of the native backend are the
 * kernel's: capture those with ibdump or tcpdump.
 */
export function startCapture(target: string | Context, dest: string | CaptureStream, opts: CaptureOptions = {}): Capture {
  const device = typeof target === 'string' ? target : target.device.name;
  const c = new Capture(device, dest, opts);
  captures.push(c);
  refresh();
  return c;
}

/** The captures running in this process. */
export function activeCaptures(): readonly Capture[] {
  return captures;
}

/** Whether a capture takes frames of device `name` (check {@link captureOn} first). */
export function capturing(name: string): boolean {
  for (let i = 0; i < captures.length; i++) if ((captures[i] as Capture).wants(name)) return true;
  return false;
}

/**
 * Hand one frame of device `name` to every capture that takes it: `headers` (Ethernet/IP/UDP or
 * TCP, wire/capture/frames.ts) then `payload[start, end)`, copied before this returns; `comment`
 * goes into the packet's `opt_comment`. Never throws.
 */
export function captureFrame(name: string, headers: Uint8Array, payload: Uint8Array, start: number, end: number, dir: CaptureDirection, comment?: string): void {
  const ts = nowUs();
  for (let i = 0; i < captures.length; i++) {
    const c = captures[i] as Capture;
    if (!c.wants(name)) continue;
    try {
      c._frame(name, headers, payload, start, end, dir, comment, ts);
    } catch {
      // A capture never takes the data path down.
    }
  }
}

/** `RDMA_PCAP`: the file every soft device of the process is captured into (`%p`: the pid). */
function fromEnvironment(): void {
  const v = process.env['RDMA_PCAP'];
  if (v === undefined || v === '') return;
  captures.push(new Capture('*', v.replace(/%p/g, String(process.pid)), {}));
  refresh();
}
fromEnvironment();
