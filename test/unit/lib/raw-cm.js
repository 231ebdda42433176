// A hand-made IB CM peer for the soft RoCE device tests: a UDP socket at 127.0.0.2 on the
// process's RoCE port that decodes what our side sends to it (MADs on QP1, RC packets) and sends
// MADs and packets it builds with the wire codecs, and the REQ Linux's rdma_cm sends.
import dgram from 'node:dgram';
import { once } from 'node:events';
import { PORT, lib, wire } from '../transport/roce/roce-helpers.js';

const { PortSpace, serviceId } = lib;

/** Our side's address, and the raw peer's. */
export const LOCAL = '127.0.0.1';
export const PEER = '127.0.0.2';
export const V4 = (s) => Uint8Array.from(s.split('.').map(Number));
/** The RoCEv2 GID of an IPv4 address. */
export const GID = (s) => Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...V4(s)]);

/** The hand-made peer at 127.0.0.2: MADs and RC packets in and out; `close()` when done. */
export async function rawCmPeer() {
  const sock = dgram.createSocket('udp4');
  let closed = false;
  sock.bind(PORT, PEER);
  await once(sock, 'listening');
  const inbox = [];
  let waiter = null;
  sock.on('message', (msg, rinfo) => {
    const net = { family: 4, src: V4(rinfo.address), dst: V4(PEER), sport: rinfo.port, dport: PORT };
    const d = wire.decodeRocePacket(msg, { net });
    if (!d.ok) return;
    const item = { spec: d.spec, from: rinfo.address };
    if (d.spec.destQp === 1) {
      const g = wire.decodeGsiPacket(msg, { net });
      if (g.ok) {
        item.mad = wire.decodeCmMad(g.gsi.mad);
        item.madBytes = Buffer.from(g.gsi.mad);
      }
    }
    inbox.push(item);
    waiter?.();
  });
  const out = { family: 4, src: V4(PEER), dst: V4(LOCAL), sport: PORT, dport: PORT };
  let gsiPsn = 0;
  const peer = {
    inbox,
    /** The next item matching `pred` (removed from the inbox), or an error after `ms`. */
    async next(pred, ms = 3000, what = 'a packet') {
      const end = Date.now() + ms;
      for (;;) {
        const i = inbox.findIndex(pred);
        if (i >= 0) return inbox.splice(i, 1)[0];
        const left = end - Date.now();
        if (left <= 0) throw new Error(`no ${what} within ${ms} ms (inbox: ${inbox.map((x) => x.mad?.msg.kind ?? x.spec.opcode).join(',')})`);
        await new Promise((r) => {
          const t = setTimeout(r, left);
          waiter = () => {
            clearTimeout(t);
            r();
          };
        });
        waiter = null;
      }
    },
    mad(kind, ms) {
      return this.next((x) => x.mad?.msg.kind === kind, ms, kind);
    },
    /** MADs of `kind` seen so far (left in the inbox). */
    count(kind) {
      return inbox.filter((x) => x.mad?.msg.kind === kind).length;
    },
    sendMad(msg, tid, opts) {
      const mad = wire.encodeCmMad(msg, tid, opts);
      sock.send(wire.encodeGsiPacket(mad, out, { psn: gsiPsn++ }), PORT, LOCAL);
    },
    sendRaw(bytes) {
      sock.send(bytes, PORT, LOCAL);
    },
    sendRc(spec) {
      sock.send(wire.encodeRocePacket(spec, out), PORT, LOCAL);
    },
    close() {
      if (closed) return;
      closed = true;
      sock.close();
    },
  };
  return peer;
}

/** A REQ as Linux's rdma_cm sends it, from the peer to `port` on 127.0.0.1. */
export function reqFrom(port, { commId = 0x1000 + Math.floor(Math.random() * 1e6), qpn = 0x4242, psn = 0x1234, pd = Buffer.alloc(0), ird = 1, ord = 1, gid = GID(LOCAL), transportType = 0, ackTimeout = 19, retryCount = 7, rnrRetryCount = 7, trafficClass = 0, cma } = {}) {
  const hdr = cma ?? wire.encodeCmaPrivateData({ version: 0, ipVersion: 4, srcPort: 5555, src: V4(PEER), dst: V4(LOCAL) }, pd);
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
    primaryPath: { ...wire.emptyCmPath(), localLid: 0xffff, remoteLid: 0xffff, localGid: GID(PEER), remoteGid: gid, flowLabel: 1234, hopLimit: 64, trafficClass, localAckTimeout: ackTimeout },
    alternatePath: wire.emptyCmPath(),
    sapSupported: false,
    privateData: hdr,
  };
}

