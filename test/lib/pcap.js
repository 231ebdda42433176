// Minimal pcap reader for the kernel captures in test/fixtures/captures: classic pcap (24-byte
// global header, 16-byte record headers), Ethernet / IPv4 / TCP only. Reassembles each TCP
// direction into one byte stream and keeps the real segment boundaries, so a decoder can be fed
// exactly the chunks the kernel sent.
import { readFileSync } from 'node:fs';

/**
 * @typedef {{ ts: number, data: Buffer }} PcapRecord
 * @typedef {{
 *   key: string, src: string, dst: string, sport: number, dport: number,
 *   bytes: Buffer, segments: Buffer[], first: number
 * }} TcpStream
 */

/** Parse a classic pcap file into its records. Throws on truncated (snaplen-cut) records. */
export function readPcap(path) {
  const f = readFileSync(path);
  const magic = f.readUInt32LE(0);
  let le;
  if (magic === 0xa1b2c3d4 || magic === 0xa1b23c4d) le = true;
  else if (magic === 0xd4c3b2a1 || magic === 0x4d3cb2a1) le = false;
  else throw new Error(`${path}: not a pcap file`);
  const u32 = (o) => (le ? f.readUInt32LE(o) : f.readUInt32BE(o));
  const linktype = u32(20);
  if (linktype !== 1) throw new Error(`${path}: link type ${linktype}, expected Ethernet`);
  /** @type {PcapRecord[]} */
  const out = [];
  let o = 24;
  while (o + 16 <= f.length) {
    const ts = u32(o) + u32(o + 4) / 1e6;
    const incl = u32(o + 8);
    const orig = u32(o + 12);
    if (incl !== orig) throw new Error(`${path}: record at ${o} truncated (${incl} of ${orig} bytes)`);
    out.push({ ts, data: f.subarray(o + 16, o + 16 + incl) });
    o += 16 + incl;
  }
  return out;
}

const ip4 = (b, o) => `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`;

/** Reassemble every TCP direction of a pcap, in order of first payload. */
export function tcpStreams(path) {
  /** @type {Map<string, {src:string,dst:string,sport:number,dport:number,isn:number|undefined,parts:{rel:number,data:Buffer}[],first:number}>} */
  const flows = new Map();
  let index = 0;
  for (const rec of readPcap(path)) {
    const d = rec.data;
    let o = 12;
    let type = d.readUInt16BE(o);
    if (type === 0x8100) {
      o += 4;
      type = d.readUInt16BE(o);
    }
    o += 2;
    if (type !== 0x0800) continue;
    const ihl = (d[o] & 0x0f) * 4;
    const totalLen = d.readUInt16BE(o + 2);
    if (d[o + 9] !== 6) continue;
    const src = ip4(d, o + 12);
    const dst = ip4(d, o + 16);
    const ipEnd = o + totalLen; // ignores Ethernet padding of short frames
    const t = o + ihl;
    const sport = d.readUInt16BE(t);
    const dport = d.readUInt16BE(t + 2);
    const seq = d.readUInt32BE(t + 4);
    const doff = (d[t + 12] >> 4) * 4;
    const flags = d[t + 13];
    const key = `${src}:${sport}>${dst}:${dport}`;
    let fl = flows.get(key);
    if (!fl) {
      fl = { src, dst, sport, dport, isn: undefined, parts: [], first: Infinity };
      flows.set(key, fl);
    }
    if (flags & 0x02) fl.isn = seq; // SYN
    const payload = d.subarray(t + doff, ipEnd);
    if (payload.length === 0) continue;
    if (fl.isn === undefined) throw new Error(`${key}: data before SYN`);
    const rel = (seq - fl.isn - 1) >>> 0;
    fl.parts.push({ rel, data: payload });
    if (fl.first === Infinity) fl.first = index++;
  }
  /** @type {TcpStream[]} */
  const streams = [];
  for (const [key, fl] of flows) {
    if (fl.parts.length === 0) continue;
    const len = Math.max(...fl.parts.map((p) => p.rel + p.data.length));
    const bytes = Buffer.alloc(len);
    const have = new Uint8Array(len);
    const segments = [];
    for (const p of fl.parts) {
      const prev = bytes.subarray(p.rel, p.rel + p.data.length);
      const seen = have.subarray(p.rel, p.rel + p.data.length);
      if (seen.every((x) => x === 1)) {
        if (!prev.equals(p.data)) throw new Error(`${key}: retransmission differs at ${p.rel}`);
        continue; // pure retransmission
      }
      if (seen.some((x) => x === 1)) throw new Error(`${key}: partial overlap at ${p.rel} not supported`);
      p.data.copy(bytes, p.rel);
      seen.fill(1);
      segments.push({ rel: p.rel, data: p.data });
    }
    if (!have.every((x) => x === 1)) throw new Error(`${key}: hole in the stream`);
    segments.sort((a, b) => a.rel - b.rel);
    streams.push({
      key,
      src: fl.src,
      dst: fl.dst,
      sport: fl.sport,
      dport: fl.dport,
      bytes,
      segments: segments.map((s) => s.data),
      first: fl.first,
    });
  }
  streams.sort((a, b) => a.first - b.first);
  return streams;
}

/**
 * @typedef {{
 *   index: number, ts: number, family: 4 | 6, ipHeader: Buffer, src: Buffer, dst: Buffer,
 *   sport: number, dport: number, udpLength: number, udpChecksum: number, payload: Buffer
 * }} UdpDatagram
 */

/**
 * Every UDP datagram of a pcap (Ethernet, optional VLAN tag, IPv4 without fragmentation or IPv6
 * without extension headers), with its real IP header: what a RoCEv2 ICRC check needs.
 * @returns {UdpDatagram[]}
 */
export function udpDatagrams(path) {
  /** @type {UdpDatagram[]} */
  const out = [];
  readPcap(path).forEach((rec, index) => {
    const d = rec.data;
    let o = 12;
    let type = d.readUInt16BE(o);
    if (type === 0x8100) {
      o += 4;
      type = d.readUInt16BE(o);
    }
    o += 2;
    let family;
    let ipLen;
    let u;
    if (type === 0x0800) {
      if (d[o + 9] !== 17) return;
      family = 4;
      ipLen = (d[o] & 0x0f) * 4;
      if ((d.readUInt16BE(o + 6) & 0x3fff) !== 0) throw new Error(`record ${index}: IPv4 fragment`);
      u = o + ipLen;
    } else if (type === 0x86dd) {
      if (d[o + 6] !== 17) return;
      family = 6;
      ipLen = 40;
      u = o + 40;
    } else {
      return;
    }
    const udpLength = d.readUInt16BE(u + 4);
    out.push({
      index,
      ts: rec.ts,
      family,
      ipHeader: d.subarray(o, o + ipLen),
      src: family === 4 ? d.subarray(o + 12, o + 16) : d.subarray(o + 8, o + 24),
      dst: family === 4 ? d.subarray(o + 16, o + 20) : d.subarray(o + 24, o + 40),
      sport: d.readUInt16BE(u),
      dport: d.readUInt16BE(u + 2),
      udpLength,
      udpChecksum: d.readUInt16BE(u + 6),
      payload: d.subarray(u + 8, u + udpLength),
    });
  });
  return out;
}
