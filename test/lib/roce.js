// Shared helpers of the soft RoCE device tests. Import this module *first*: it gives the process a
// private RoCE UDP port (RDMACM_ROCE_PORT) so tests running at the same time on this host never
// see each other's datagrams, then loads the package.
import dgram from 'node:dgram';
import { once } from 'node:events';
export { until } from './wait.js';

if (!process.env.RDMACM_ROCE_PORT) process.env.RDMACM_ROCE_PORT = String(20000 + Math.floor(Math.random() * 30000));
export const PORT = Number(process.env.RDMACM_ROCE_PORT);

export const lib = await import('../../dist/index.js');
export const wire = await import('../../dist/wire/roce/index.js');
export const { getDeviceList, QpType, QpState, WrOpcode, SendFlags, Access, WcStatus, WcFlags, WcOpcode, roce } = lib;

/** rxe_lo, opened. */
export function loDevice() {
  const dev = getDeviceList().find((d) => d.name === 'rxe_lo');
  if (!dev) throw new Error('no rxe_lo device');
  return dev;
}

/** An errno-code matcher for assert.throws. */
export const code = (c) => (e) => e && e.code === c;

/** The GID index of 127.0.0.1 on rxe_lo. */
export function v4GidIndex(ctx) {
  for (let i = 0; i < 8; i++) {
    const g = ctx.queryGid(1, i);
    if (g[10] === 0xff && g[11] === 0xff && g[12] === 127) return i;
  }
  throw new Error('no IPv4 GID');
}

/** A UD QP moved to RTS with Q_Key `qkey`. */
export function udQp(pd, cq, qkey = 0x11111111, cap = {}) {
  const qp = pd.createQp({
    qpType: QpType.UD,
    sendCq: cq,
    recvCq: cq,
    cap: { maxSendWr: 16, maxRecvWr: 16, maxSendSge: 2, maxRecvSge: 2, maxInlineData: 64, ...cap },
  });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey });
  qp.modify({ qpState: QpState.RTR });
  qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
  return qp;
}

/** An address handle to `gid` (16 bytes) from GID index `sgid`. */
export function ahTo(pd, gid, sgid) {
  return pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: gid, flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } });
}

/** Poll `cq` until `n` completions arrived or `ms` passed. */
export async function pollN(cq, n, ms = 3000) {
  const out = [];
  const end = Date.now() + ms;
  while (out.length < n && Date.now() < end) {
    out.push(...cq.poll(n - out.length));
    if (out.length < n) await new Promise((r) => setTimeout(r, 2));
  }
  return out;
}

/** A plain UDP socket on 127.0.0.1 that sends hand-made RoCE packets to the device port. */
export async function rawSender() {
  const s = dgram.createSocket('udp4');
  s.bind(0, '127.0.0.1');
  await once(s, 'listening');
  const sport = s.address().port;
  const net = { family: 4, src: Uint8Array.of(127, 0, 0, 1), dst: Uint8Array.of(127, 0, 0, 1), sport, dport: PORT };
  return {
    sock: s,
    sport,
    net,
    /** Send bytes to the device port; resolves once handed to the kernel. */
    send(bytes) {
      return new Promise((res, rej) => s.send(bytes, PORT, '127.0.0.1', (e) => (e ? rej(e) : res())));
    },
    /** A valid UD packet (ICRC over IPv4 identification `ipId`). */
    ud({ destQp, qkey, srcQp = 0x123, payload = new Uint8Array(0), imm, pkey, tver, psn = 0, ipId = 0 }) {
      const spec = {
        opcode: imm === undefined ? wire.IbOpcode.UD_SEND_ONLY : wire.IbOpcode.UD_SEND_ONLY_WITH_IMMEDIATE,
        destQp,
        psn,
        deth: { qkey, srcQp },
        payload,
      };
      if (imm !== undefined) spec.immDt = imm;
      if (pkey !== undefined) spec.pkey = pkey;
      if (tver !== undefined) spec.tver = tver;
      return wire.encodeRocePacket(spec, { ...net, ipId });
    },
    close() {
      s.close();
    },
  };
}


const fwdFrameLib = await import('../../dist/transport/roce/fwd-frame.js');
const qpnBlocksLib = await import('../../dist/transport/roce/qpn-blocks.js');
const unixNamesLib = await import('../../dist/transport/roce/unix-names.js');
const netMod = await import('node:net');

/** The IP/UDP headers of a packet from 127.0.0.1 to 127.0.0.1 on this process's RoCE port (its ICRC's). */
export const LO_HEADERS = { family: 4, src: Uint8Array.of(127, 0, 0, 1), dst: Uint8Array.of(127, 0, 0, 1), sport: PORT, dport: PORT, ipId: 0 };

/**
 * A forwarding frame (src/transport/roce/fwd-frame.ts) of packet `pkt` from 127.0.0.1 to
 * 127.0.0.1 on this process's RoCE port, its flags byte written raw (`flags`).
 */
export function fwdFrame(pkt, flags = 0) {
  const f = Buffer.alloc(fwdFrameLib.FWD_FRAME_HEAD + pkt.length);
  const addrs = Buffer.alloc(32);
  addrs.set(LO_HEADERS.src, 0);
  addrs.set(LO_HEADERS.dst, 16);
  fwdFrameLib.encodeFwdHeader(f, 0, 4, PORT, addrs, pkt.length);
  f[5] = flags;
  Buffer.from(pkt).copy(f, fwdFrameLib.FWD_FRAME_HEAD);
  return f;
}

/**
 * Hand `frames` to this process's QPN block of `qpn` over its Unix socket, as another process of
 * this user would; resolves once the connection has ended (either side closing it).
 */
export async function handOver(qpn, frames) {
  const c = netMod.connect(unixNamesLib.blockSocketName(PORT, process.getuid(), qpnBlocksLib.blockOfQpn(qpn)));
  await new Promise((res, rej) => {
    c.once('connect', res);
    c.once('error', rej);
  });
  for (const f of frames) c.write(f);
  c.end();
  await new Promise((r) => c.once('close', r));
}
