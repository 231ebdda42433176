/**
 * Taking the datagrams other processes of this host hand over on the abstract Unix names this
 * process holds (qpn-blocks.ts), in frames (fwd-frame.ts), to the device of their destination
 * address.
 *
 * Who may hand over what: a process of this user or root's, any datagram; a process of another
 * user, only datagrams from this host's own addresses (what it could send over UDP itself),
 * checked by the credentials of its connection (SO_PEERCRED, through the netopt addon; without
 * the addon every connection counts as another user's). A datagram from another user's process
 * that names a remote source is dropped and counted (`fwd_forged_drop`).
 */
import net from 'node:net';
import { networkInterfaces } from 'node:os';
import { formatIpv4 } from '../../util/ip.js';
import { bthQpn, GSI_QPN } from '../../wire/roce/index.js';
import { FWD_HDR, FwdFlag, FwdFrameSplitter, FwdOff, fwdFamily, fwdFlags, fwdSrcPort, fwdTrain } from './fwd-frame.js';
import { ipKey, ipSlotText, writeIpSlot } from './ip-addr.js';
import { peerUid, trustedUid } from './unix-names.js';
import type { RxSink } from './datagram.js';

/** Bytes of the buffer reads of forwarding connections land in (up to 60 frames of 4 KiB). */
const FWD_READ_SIZE = 256 * 1024;
/** How long the list of this host's addresses is kept before it is read again (ms). */
const HOST_ADDRS_MS = 5000;
/** The shortest time between two reads of this host's addresses for an address not in the list (ms). */
const HOST_ADDRS_REREAD_MS = 250;
/** IPv4 address texts kept ({@link FwdRx.frameAddrText}) before the cache starts over. */
const V4_TEXT_MAX = 1024;
/** Bytes of a BTH up to the end of its destination QPN. */
const BTH_QPN_END = 8;
/** The first byte of IPv4 loopback addresses (127.0.0.0/8). */
const IPV4_LOOPBACK_NET = 127;

/** This host's addresses as hex keys (4 bytes for IPv4, 16 for IPv6; `::1` included). */
function hostAddressKeys(): Set<string> {
  const out = new Set<string>(['00000000000000000000000000000001']);
  const scratch = Buffer.alloc(16);
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      const fam = a.family === 'IPv4' || (a.family as unknown) === 4 ? 4 : 6;
      writeIpSlot(ipKey(a.address), fam, scratch, 0);
      out.add(scratch.toString('hex', 0, fam === 4 ? 4 : 16));
    }
  }
  return out;
}

/** The receiving side of the forwarding of one RoCE port. */
export class FwdRx {
  /** This host's addresses, as hex keys ({@link isHostAddress}), and when they were read. */
  private hostAddrs = new Set<string>();
  private hostAddrsAt = -Infinity;
  /** IPv4 address texts by value ({@link frameAddrText}). */
  private readonly v4Text = new Map<number, string>();
  /** The buffer every read of a forwarding connection lands in ({@link accept}). */
  private readBuf: Buffer | null = null;

  /** @param sinkOf the device that receives on a local address ({@link ipKey}), if any */
  constructor(private readonly sinkOf: (key: string) => RxSink | undefined) {}

  /**
   * A connection from another process carrying forwarded datagrams. Accepted paused, it is
   * re-wrapped on its handle so that every read lands in one buffer ({@link FWD_READ_SIZE},
   * `onread`) instead of a new buffer per read. Frames are delivered from the read they arrived in
   * (the receive path keeps nothing of a data packet; a MAD is copied); only a frame split across
   * reads is put together, in the splitter's own buffer (fwd-frame.ts). A malformed frame closes the
   * connection. Who is at the other end decides what it may hand over ({@link trustedUid}).
   */
  accept(c0: net.Socket): void {
    const uid = peerUid(c0);
    const trusted = uid !== null && trustedUid(uid);
    let c = c0;
    const splitter = new FwdFrameSplitter((f) => {
      if (!this.deliver(f, trusted)) splitter.fail();
    });
    const onChunk = (chunk: Buffer): void => {
      if (!splitter.push(chunk)) c.destroy();
    };
    const handle = (c0 as unknown as { _handle?: object | null })._handle;
    if (handle && !c0.destroyed) {
      const rx = (this.readBuf ??= Buffer.allocUnsafe(FWD_READ_SIZE));
      c = new net.Socket({ handle, onread: { buffer: rx, callback: (n: number, b: Buffer) => (onChunk(b.subarray(0, n)), true) } } as net.SocketConstructorOpts);
    } else c0.on('data', onChunk);
    c.unref();
    c.on('error', () => {});
    c.resume();
  }

  /**
   * One forwarded frame (after its length word; a view valid during the call); `trusted`:
   * from a process that may name any source address. False for a frame that is malformed (the
   * connection is closed).
   */
  private deliver(f: Buffer, trusted: boolean): boolean {
    const family = fwdFamily(f);
    const flags = fwdFlags(f);
    if (family === 0 || flags < 0) return false;
    const dst = this.frameAddrText(f, FwdOff.DST, family);
    const sink = this.sinkOf(dst);
    if (!sink) return true;
    sink.fwdCount('fwd_rcvd');
    if (!trusted && !this.isHostAddress(f, FwdOff.SRC, family)) {
      sink.fwdCount('fwd_forged_drop');
      return true;
    }
    const src = this.frameAddrText(f, FwdOff.SRC, family);
    // The receive path reads a data packet while it runs and keeps nothing, so it gets the view;
    // a MAD (QPN 1) may be kept by the connection manager, so it gets a copy of its own.
    let pkt = f.subarray(FWD_HDR);
    if (pkt.length >= BTH_QPN_END && bthQpn(pkt, 0) === GSI_QPN) pkt = Buffer.from(pkt);
    sink.rxDatagram(pkt, { family, src, dst, srcPort: fwdSrcPort(f), forwarded: true, icrcOffload: (flags & FwdFlag.ICRC_OFFLOAD) !== 0, train: fwdTrain(flags) });
    return true;
  }

  /**
   * Whether the 16 address bytes at `off` of `b` are one of this host's addresses (any
   * interface, loopback included: 127.0.0.0/8, ::1), which any local process could send from
   * over UDP itself. The host's addresses are read again every {@link HOST_ADDRS_MS}.
   */
  private isHostAddress(b: Buffer, off: number, family: 4 | 6): boolean {
    if (family === 4 && b[off] === IPV4_LOOPBACK_NET) return true;
    const key = b.toString('hex', off, off + (family === 4 ? 4 : 16));
    const now = performance.now();
    if (now - this.hostAddrsAt >= HOST_ADDRS_MS || (!this.hostAddrs.has(key) && now - this.hostAddrsAt >= HOST_ADDRS_REREAD_MS)) {
      this.hostAddrs = hostAddressKeys();
      this.hostAddrsAt = now;
    }
    return this.hostAddrs.has(key);
  }

  /** The text of a frame's address, IPv4 ones kept by value (a busy peer's is formatted once). */
  private frameAddrText(b: Buffer, off: number, family: 4 | 6): string {
    if (family === 6) return ipSlotText(b, off, 6);
    const v = b.readUInt32BE(off);
    let t = this.v4Text.get(v);
    if (t === undefined) {
      t = formatIpv4(v);
      if (this.v4Text.size >= V4_TEXT_MAX) this.v4Text.clear();
      this.v4Text.set(v, t);
    }
    return t;
  }
}
