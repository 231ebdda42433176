// A hand-made IB CM peer for the soft RoCE device tests: a UDP socket at 127.0.0.2 on a RoCE UDP
// port that decodes what our side sends to it (MADs on QP1, RC packets) and sends MADs and packets
// it builds with the wire codecs (src/wire/roce/), the REQ and SIDR_REQ Linux's rdma_cm sends, and
// the hostile clients the tool tests play against a server in another process: a REQ left without
// its RTU, a REQ whose REP is rejected, garbage on QP1, a client that vanishes.
import dgram from 'node:dgram';
import { once } from 'node:events';
import { arrivals } from './arrivals.js';

const wire = await import('../../dist/wire/roce/index.js');
const { serviceId, PortSpace } = await import('../../dist/index.js');

/** Our side's address, and the raw peer's. */
export const LOCAL = '127.0.0.1';
export const PEER = '127.0.0.2';
export const V4 = (s) => Uint8Array.from(s.split('.').map(Number));
/** The RoCEv2 GID (IPv4-mapped) of an IPv4 address. */
export const GID = (s) => Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...V4(s)]);
const randomId = () => 0x1000 + Math.floor(Math.random() * 0x7fff0000);
const EMPTY = new Uint8Array(0);
/** The process's RoCE UDP port (RDMACM_ROCE_PORT, which the RoCE unit tests set first), else 4791. */
const processPort = () => Number(process.env.RDMACM_ROCE_PORT || 4791);

/**
 * The peer at `peer` bound to RoCE UDP port `port` (default: this process's), talking to the
 * device at `local`. Returns `next(pred)`, `mad(kind)` (the next MAD of that kind, removed from
 * the inbox), `count(kind)`, `sendMad(msg, tid, opts)`, `sendMadFromQp(srcQp, msg, tid)`, `sendGsi(mad)`, `sendRaw(bytes)` (a
 * datagram to the device's port), `sendRc(spec)` and `close()`. Inbox items: `{ spec, from, mad?,
 * madBytes? }`.
 */
export async function rawCmPeer(port = processPort(), { peer = PEER, local = LOCAL } = {}) {
  const sock = dgram.createSocket('udp4');
  sock.bind(port, peer);
  await once(sock, 'listening');
  const box = arrivals((items) => `inbox: ${items.map((x) => x.mad?.msg.kind ?? x.spec.opcode).join(',')}`);
  const inbox = box.items;
  let closed = false;
  sock.on('message', (msg, rinfo) => {
    const net = { family: 4, src: V4(rinfo.address), dst: V4(peer), sport: rinfo.port, dport: port };
    const d = wire.decodeRocePacket(msg, { net });
    if (!d.ok) return;
    const item = { spec: d.spec, from: rinfo.address };
    if (d.spec.destQp === 1) {
      const g = wire.decodeGsiPacket(msg, { net });
      if (g.ok) {
        item.madBytes = Buffer.from(g.gsi.mad);
        try {
          item.mad = wire.decodeCmMad(g.gsi.mad);
        } catch {
          // not a CM MAD: kept as a packet
        }
      }
    }
    box.push(item);
  });
  const out = { family: 4, src: V4(peer), dst: V4(local), sport: port, dport: port };
  let gsiPsn = 0;
  return {
    inbox,
    /** The next item matching `pred` (removed from the inbox), or an error after `ms`. */
    next: (pred, ms = 3000, what = 'a packet') => box.next(pred, ms, what),
    mad(kind, ms) {
      return this.next((x) => x.mad?.msg.kind === kind, ms, kind);
    },
    /** MADs of `kind` in the inbox (left there). */
    count(kind) {
      return inbox.filter((x) => x.mad?.msg.kind === kind).length;
    },
    sendMad(msg, tid, opts) {
      const mad = wire.encodeCmMad(msg, tid, opts);
      sock.send(wire.encodeGsiPacket(mad, out, { psn: gsiPsn++ }), port, local);
    },
    /** A MAD to our QP1 from QP `srcQp` of the peer (not its GSI QP). */
    sendMadFromQp(srcQp, msg, tid) {
      const mad = wire.encodeCmMad(msg, tid);
      sock.send(wire.encodeRocePacket({ opcode: wire.IbOpcode.UD_SEND_ONLY, destQp: 1, psn: gsiPsn++, ackReq: true, deth: { qkey: wire.GSI_QKEY, srcQp }, payload: mad }, out), port, local);
    },
    /** A GSI packet (QP1) carrying `mad`, any 256 bytes, well framed. */
    sendGsi(mad) {
      sock.send(wire.encodeGsiPacket(mad, out, { psn: gsiPsn++ }), port, local);
    },
    sendRaw(bytes) {
      sock.send(bytes, port, local);
    },
    /** An RC packet (a `wire.encodeRocePacket` spec: opcode, destQp, psn, payload...). */
    sendRc(spec) {
      sock.send(wire.encodeRocePacket(spec, out), port, local);
    },
    close() {
      if (closed) return;
      closed = true;
      sock.close();
    },
  };
}

/**
 * A REQ as Linux's rdma_cm sends it for an RDMA_PS_TCP connection from `peer` to `local`:`port`.
 * `ackTimeout`: the path's local ACK timeout (4.096 µs × 2^n), which the passive side's QP takes;
 * `gid`: the remote GID the REQ names (default `local`'s); `cma`: CMA private data in place of the
 * header built from the addresses and `pd`.
 */
export function reqFrom(port, { commId = randomId(), qpn = 0x4242, psn = 0x1234, pd = EMPTY, ird = 1, ord = 1, peer = PEER, local = LOCAL, gid = GID(local), transportType = 0, ackTimeout = 19, retryCount = 7, rnrRetryCount = 7, trafficClass = 0, flowLabel = 1234, cma } = {}) {
  const hdr = cma ?? wire.encodeCmaPrivateData({ version: 0, ipVersion: 4, srcPort: 5555, src: V4(peer), dst: V4(local) }, pd);
  return {
    kind: 'REQ',
    localCommId: commId,
    vendorId: 0,
    serviceId: serviceId(PortSpace.TCP, port),
    localCaGuid: 0x0200000000000001n,
    localQkey: 0,
    localQpn: qpn,
    responderResources: ird,
    localEecn: 0,
    initiatorDepth: ord,
    remoteEecn: 0,
    remoteCmResponseTimeout: 20,
    transportType,
    e2eFlowControl: false,
    startingPsn: psn,
    localCmResponseTimeout: 20,
    retryCount,
    pkey: 0xffff,
    pathMtu: 3,
    rdcExists: false,
    rnrRetryCount,
    maxCmRetries: 15,
    srq: false,
    extendedTransportType: 0,
    primaryPath: { ...wire.emptyCmPath(), localLid: 0xffff, remoteLid: 0xffff, localGid: GID(peer), remoteGid: gid, flowLabel, hopLimit: 64, trafficClass, localAckTimeout: ackTimeout },
    alternatePath: wire.emptyCmPath(),
    sapSupported: false,
    privateData: hdr,
  };
}

/** A SIDR_REQ as rdma_cm sends it for an RDMA_PS_UDP id from `peer` to `local`:`port`. */
export function cmSidrReq(port, { requestId = randomId(), peer = PEER, local = LOCAL, pd = EMPTY } = {}) {
  return {
    kind: 'SIDR_REQ',
    requestId,
    pkey: 0xffff,
    reserved: 0,
    serviceId: serviceId(PortSpace.UDP, port),
    privateData: wire.encodeCmaPrivateData({ version: 0, ipVersion: 4, srcPort: 5555, src: V4(peer), dst: V4(local) }, pd),
  };
}

/**
 * A client that sends a REQ for `port`, receives the server's REP and never sends its RTU: the
 * server's CM resends the REP until its retries run out. `pd`: the REQ's private data after the
 * CMA header (an rsocket's rs_conn_data, say). Resolves with the REP's MAD.
 */
export async function reqWithoutRtu(peer, port, { ms = 15000, pd } = {}) {
  const req = reqFrom(port, { pd });
  peer.sendMad(req, BigInt(req.localCommId));
  const { mad } = await peer.mad('REP', ms);
  return mad;
}

/** A client that sends a REQ for `port`, then rejects the server's REP (consumer defined). */
export async function reqThenRej(peer, port, { ms = 15000, pd } = {}) {
  const req = reqFrom(port, { pd });
  peer.sendMad(req, BigInt(req.localCommId));
  const { mad } = await peer.mad('REP', ms);
  peer.sendMad(
    { kind: 'REJ', localCommId: req.localCommId, remoteCommId: mad.msg.localCommId, messageRejected: wire.CmMsgRef.REP, ariLength: 0, reason: wire.CmRejReason.CONSUMER_DEFINED, ari: EMPTY, privateData: EMPTY },
    mad.hdr.tid,
  );
  return mad;
}

/**
 * A client that completes the handshake (REQ, REP, RTU) and then is never heard of again: no
 * DREQ, no packet on its QP. Resolves with the REP's MAD.
 */
export async function establishThenVanish(peer, port, { ms = 15000, pd } = {}) {
  const req = reqFrom(port, { pd });
  peer.sendMad(req, BigInt(req.localCommId));
  const { mad } = await peer.mad('REP', ms);
  peer.sendMad({ kind: 'RTU', localCommId: req.localCommId, remoteCommId: mad.msg.localCommId, privateData: EMPTY }, mad.hdr.tid);
  return mad;
}

/**
 * Garbage on QP1: `n` CM MADs of random bytes, a REQ for `port` with a bad class version, MADs
 * of unknown attributes, and truncated datagrams. None of them is a connection.
 */
export function garbageMads(peer, port, n = 20) {
  for (let i = 0; i < n; i++) {
    const mad = new Uint8Array(256);
    for (let j = 0; j < mad.length; j++) mad[j] = Math.floor(Math.random() * 256);
    if (i % 2) {
      mad[0] = 1; // base version
      mad[1] = 7; // the CM class
      mad[2] = 2; // class version
    }
    peer.sendGsi(mad);
  }
  const req = reqFrom(port);
  const bad = wire.encodeCmMad(req, 0x99n);
  bad[2] = 9; // class version
  peer.sendGsi(bad);
  const unknown = wire.encodeCmMad(req, 0x9an);
  unknown[16] = 0x7f; // attribute ID high byte
  peer.sendGsi(unknown);
  peer.sendRaw(Buffer.from('not a RoCE packet'));
  peer.sendRaw(Buffer.alloc(12));
}

/**
 * A client that completes the handshake, sends one message (`payload`, an RC SEND_ONLY to the
 * server's QP) and is never heard of again: what the server sends it next is never acknowledged,
 * so the server's QP runs out of retries (`ackTimeout` sets how fast). Resolves with the REP's MAD.
 */
export async function sendThenVanish(peer, port, payload, { ms = 15000, ackTimeout = 19 } = {}) {
  const req = reqFrom(port, { ackTimeout });
  peer.sendMad(req, BigInt(req.localCommId));
  const { mad } = await peer.mad('REP', ms);
  peer.sendMad({ kind: 'RTU', localCommId: req.localCommId, remoteCommId: mad.msg.localCommId, privateData: EMPTY }, mad.hdr.tid);
  // A starting PSN is the one its sender expects to receive (docs/design/roce-rc-cm.md): the REP's.
  peer.sendRc({ opcode: wire.IbOpcode.RC_SEND_ONLY, destQp: mad.msg.localQpn, psn: mad.msg.startingPsn, ackReq: true, payload });
  return mad;
}
