/**
 * What a packet capture (verbs/capture.ts, docs/capture.md) sees of a soft RoCE device: each
 * datagram the device hands to the UDP side or takes from it, as the Ethernet/IP/UDP frame it is
 * on a wire (RoCEv2, UDP port 4791 or the device's), so that Wireshark's InfiniBand dissector
 * decodes BTH, extension headers and ICRC. Hooked where the device hands datagrams out (send,
 * delivery to this host) and in (its receive entry, forwarded ones included), above the socket
 * implementation, so every way the sockets read and write is covered.
 */
import { captureFrame, capturing, type CaptureDirection } from '../../verbs/capture.js';
import { udpFrameHeaders, type FrameEnds } from '../../wire/capture/frames.js';
import { icrcSolveIpv4Id } from '../../wire/roce/icrc.js';
import { ipBytes } from './ip-addr.js';
import { zeroChecksum4 } from './sockopt.js';

/** The IPv4 TTL / IPv6 hop limit of a frame whose real one is not known here (a received one). */
const HOP_LIMIT_UNKNOWN = 64;

/** Comments on frames that did not cross a UDP socket of this process. */
export const CaptureNote = Object.freeze({
  /** Received from another process of this host over the device's Unix socket. */
  FORWARDED_IN: 'forwarded: handed over by another process of this host (Unix socket), not read from UDP',
  /** Read from UDP by this process, then handed to the process that holds its QPN. */
  FORWARDED_OUT: 'forwarded: read from UDP by this process and handed to the process holding its destination QPN (Unix socket)',
  /** Sent to an address of this host: handed to its owner directly, not through UDP. */
  LOCAL: 'local: sent to this host, handed to its owner directly, not written to UDP',
  /** A group datagram with multicast loopback blocked on the loopback link: goes nowhere. */
  NOT_SENT: 'not sent: multicast loopback blocked on the loopback interface',
});

const ZERO_MAC = new Uint8Array(6);
const macCache = new Map<string, Uint8Array>();

/** The 6 bytes of MAC text `aa:bb:…` (zeros when absent or malformed). */
function macBytes(mac: string | undefined): Uint8Array {
  if (mac === undefined) return ZERO_MAC;
  let b = macCache.get(mac);
  if (b === undefined) {
    const parts = mac.split(':').map((x) => parseInt(x, 16));
    b = parts.length === 6 && parts.every((x) => x >= 0 && x < 256) ? Uint8Array.from(parts) : ZERO_MAC;
    macCache.set(mac, b);
  }
  return b;
}

/** The bytes of the addresses met lately, by text (a device talks to a few). */
const addrCache = new Map<string, Uint8Array>();
const ADDR_CACHE_MAX = 256;

/** The bytes of address `ip` (its IPv6 zone, as in `fe80::1%lo`, left out). */
function addrBytes(ip: string, family: 4 | 6): Uint8Array {
  let b = addrCache.get(ip);
  if (b === undefined) {
    if (addrCache.size >= ADDR_CACHE_MAX) addrCache.clear();
    b = ipBytes(ip.split('%')[0] ?? ip, family);
    addrCache.set(ip, b);
  }
  return b;
}

/** One datagram of the device. */
export interface CapturedDatagram {
  /** Device name (the capture's interface). */
  device: string;
  /** The device's MAC (its interface's). */
  mac: string | undefined;
  family: 4 | 6;
  src: string;
  dst: string;
  sport: number;
  dport: number;
  hopLimit?: number;
}

/**
 * The IPv4 identification of a captured datagram: sent, the 0 its ICRC was computed with (and
 * that the socket's path-MTU mode puts on the wire, see sockopt.ts); received, the one its ICRC
 * names (icrc.ts `icrcSolveIpv4Id`; 0 when none fits, a corrupted packet).
 */
function ipv4IdOf(e: FrameEnds, dir: CaptureDirection, buf: Uint8Array, start: number, end: number): number {
  if (dir === 'out') return 0;
  const id = icrcSolveIpv4Id({ family: 4, src: e.src, dst: e.dst, sport: e.sport, dport: e.dport }, buf, start, end);
  return id < 0 ? 0 : id;
}

/** Capture UDP payload `buf[start, end)` of datagram `d` going `dir`; never throws. */
export function captureDatagram(d: CapturedDatagram, buf: Uint8Array, start: number, end: number, dir: CaptureDirection, comment?: string): void {
  if (!capturing(d.device)) return;
  try {
    const own = macBytes(d.mac);
    const e: FrameEnds = {
      family: d.family,
      // The peer's MAC is not known to a UDP socket: zeros stand for it.
      srcMac: dir === 'out' ? own : ZERO_MAC,
      dstMac: dir === 'out' ? ZERO_MAC : own,
      src: addrBytes(d.src, d.family),
      dst: addrBytes(d.dst, d.family),
      sport: d.sport,
      dport: d.dport,
      hopLimit: d.hopLimit ?? HOP_LIMIT_UNKNOWN,
      // IPv4 as rxe sends it and as this device does with its socket options: UDP checksum 0;
      // a received datagram's checksum is not known here, and is written as 0 too.
      zeroUdpChecksum: d.family === 4 && (dir === 'in' || zeroChecksum4()),
    };
    if (d.family === 4) e.ipId = ipv4IdOf(e, dir, buf, start, end);
    captureFrame(d.device, udpFrameHeaders(e, buf, start, end), buf, start, end, dir, comment);
  } catch {
    // A frame that cannot be built is left out: the data path goes on.
  }
}
