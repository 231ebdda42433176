// The peer half of the RoCE bench, run as a child process by bench/roce.js (which sets a private
// RDMACM_ROCE_PORT for both processes):
//
//   node bench/roce-peer.js dgram-echo <port>         answer every datagram to its sender
//   node bench/roce-peer.js ud-echo                   a UD QP on rxe_lo that answers every
//                                                     message to its source QP
//   node bench/roce-peer.js dgram-sink <port> [group] count datagrams (joined to <group> if given)
//   node bench/roce-peer.js ud-sink [group]           count UD messages (attached to <group>)
//   node bench/roce-peer.js dgram-resolve <port> <n>  n request/reply exchanges at once with a
//                                                     dgram-echo peer, from a fresh process
//                                                     ({"ms":M,"cpuUs":U}: its time and CPU)
//   node bench/roce-peer.js rc-echo <port> <device>   an RC connection (rdma_cm, TCP port space,
//                                                     pinned to <device>: rxe_lo or siw_lo) that
//                                                     answers every 64 B SEND with one
//   node bench/roce-peer.js rc-write <port> <device>  an RC connection exposing a 1 MiB RDMA WRITE
//                                                     target (address and rkey in the accept's
//                                                     private data); answers each SEND with one
//
// Each prints one JSON line once ready ({"ready":true}, with "qpn" for the UD modes). A sink
// prints {"count":N,"secs":S,"cpuUsPerMsg":U} for each burst (arrivals ended by 150 ms of
// silence; S from the first to the last arrival, U the receiver's CPU time per message). The
// peer ends when its stdin closes (the bench closes it), or after two minutes whatever happens.
import dgram from 'node:dgram';
import { once } from 'node:events';
import { nextWcs } from './cq-wait.js';

const [kind, ...args] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
setTimeout(() => process.exit(3), 120_000).unref();
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();

/** Counts arrivals; a burst ends after IDLE_MS without any, and is reported on stdout. */
const IDLE_MS = 150;
function burstCounter(extra = () => ({})) {
  let count = 0;
  let first = 0;
  let last = 0;
  let cpu0 = process.cpuUsage();
  setInterval(() => {
    if (count > 0 && performance.now() - last >= IDLE_MS) {
      // CPU time (user + system) of this process from the first arrival to now, per message:
      // load from other processes moves it much less than the wall-clock rate.
      const c = process.cpuUsage(cpu0);
      out({ count, secs: count > 1 ? (last - first) / 1000 : 0, cpuUsPerMsg: (c.user + c.system) / count, ...extra() });
      count = 0;
    }
  }, 50);
  return () => {
    last = performance.now();
    if (count++ === 0) {
      first = last;
      cpu0 = process.cpuUsage();
    }
  };
}

/** `::ffff:a.b.c.d`, the GID of an IPv4 address. */
export function gidOfIpv4(ip) {
  const g = new Uint8Array(16);
  g[10] = 0xff;
  g[11] = 0xff;
  ip.split('.').forEach((x, i) => (g[12 + i] = Number(x)));
  return g;
}

/** rxe_lo opened, with a PD, a receive CQ on a completion channel, and a UD QP in RTS. */
async function udSetup(depth, qkey) {
  const { getDeviceList, QpType, QpState, Access } = await import('../dist/index.js');
  const dev = getDeviceList().find((d) => d.name === 'rxe_lo');
  if (!dev) throw new Error('no rxe_lo device');
  const ctx = dev.open();
  const pd = ctx.allocPd();
  const ch = ctx.createCompChannel();
  const rcq = ctx.createCq(depth * 2, ch);
  const scq = ctx.createCq(depth * 2);
  const qp = pd.createQp({ qpType: QpType.UD, sendCq: scq, recvCq: rcq, cap: { maxSendWr: depth, maxRecvWr: depth, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 64 } });
  qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: 1, qkey });
  qp.modify({ qpState: QpState.RTR });
  qp.modify({ qpState: QpState.RTS, sqPsn: 0 });
  let sgid = -1;
  for (let i = 0; i < 8 && sgid < 0; i++) {
    const g = ctx.queryGid(1, i);
    if (g[10] === 0xff && g[11] === 0xff && g[12] === 127) sgid = i;
  }
  const ahTo = (gid) => pd.createAh({ isGlobal: true, portNum: 1, grh: { dgid: gid, flowLabel: 0, sgidIndex: sgid, hopLimit: 64, trafficClass: 0 } });
  const slot = 40 + 4096;
  const buf = Buffer.alloc(slot * depth);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  const sgl = Array.from({ length: depth }, (_, i) => [{ addr: mr.addr + i * slot, length: slot, lkey: mr.lkey }]);
  for (let i = 0; i < depth; i++) qp.postRecv({ wrId: i, sgList: sgl[i] });
  /** Every receive completion, in order, to `fn(wc)`, the WQE reposted after it (never ends). */
  const loop = async (fn) => {
    rcq.reqNotify();
    for (;;) {
      const wcs = rcq.poll(64);
      if (wcs.length === 0) {
        await ch.getCqEvent();
        rcq.ackEvents(1);
        rcq.reqNotify();
        continue;
      }
      for (const wc of wcs) {
        fn(wc);
        qp.postRecv({ wrId: wc.wrId, sgList: sgl[wc.wrId] });
      }
    }
  };
  return { qp, scq, buf, mr, slot, ahTo, loop, sgid };
}

if (kind === 'dgram-echo') {
  const s = dgram.createSocket('udp4');
  s.on('message', (m, r) => s.send(m, r.port, r.address));
  s.bind(Number(args[0]), '127.0.0.1');
  await once(s, 'listening');
  out({ ready: true });
} else if (kind === 'dgram-sink') {
  const [port, group] = args;
  const hit = burstCounter();
  const s = dgram.createSocket({ type: 'udp4', reuseAddr: true });
  s.on('message', hit);
  s.bind(Number(port), group ?? '127.0.0.1');
  await once(s, 'listening');
  if (group) s.addMembership(group, '127.0.0.1');
  out({ ready: true });
} else if (kind === 'ud-echo') {
  const { WrOpcode, SendFlags, WcStatus } = await import('../dist/index.js');
  const u = await udSetup(64, 0x11111111);
  const ah = u.ahTo(gidOfIpv4('127.0.0.1'));
  out({ ready: true, qpn: u.qp.qpNum });
  let n = 0;
  await u.loop((wc) => {
    if (wc.status !== WcStatus.SUCCESS) process.exit(4);
    const at = u.mr.addr + Number(wc.wrId) * u.slot + 40;
    u.qp.postSend({ wrId: 0, opcode: WrOpcode.SEND, sendFlags: SendFlags.INLINE | ((++n & 31) === 0 ? SendFlags.SIGNALED : 0), sgList: [{ addr: at, length: wc.byteLen - 40, lkey: u.mr.lkey }], ud: { ah, remoteQpn: wc.srcQp, remoteQkey: 0x11111111 } });
    u.scq.poll(64);
  });
} else if (kind === 'ud-sink') {
  const { WcStatus, roce } = await import('../dist/index.js');
  const [group] = args;
  // The device's drops, for the JSON: datagrams that reached this process but no receive WQE.
  const hit = burstCounter(() => {
    const c = roce.counters('rxe_lo');
    return { rcvdPkts: c.rcvd_pkts, noRecvWqe: c.rcvd_no_recv_wqe_drop };
  });
  const u = await udSetup(1024, 0x11111111);
  if (group) u.qp.attachMcast(gidOfIpv4(group), 0);
  out({ ready: true, qpn: u.qp.qpNum });
  await u.loop((wc) => {
    if (wc.status === WcStatus.SUCCESS) hit();
  });
} else if (kind === 'dgram-resolve') {
  const [port, n] = args.map(Number);
  const s = dgram.createSocket('udp4');
  s.bind(0, '127.0.0.1');
  await once(s, 'listening');
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  let left = n;
  const done = new Promise((r) => s.on('message', () => --left === 0 && r()));
  for (let i = 0; i < n; i++) s.send(Buffer.alloc(64, i), port, '127.0.0.1');
  await done;
  const cpu = process.cpuUsage(cpu0);
  out({ ms: performance.now() - t0, cpuUs: cpu.user + cpu.system });
  process.exit(0);
} else if (kind === 'rc-echo' || kind === 'rc-write') {
  const { createId, PortSpace, Access, WrOpcode, SendFlags } = await import('../dist/index.js');
  const [port, device] = args;
  const listen = createId(null, null, PortSpace.TCP, { device });
  listen.bindAddr({ address: '127.0.0.1', port: Number(port) });
  await listen.listen(1);
  out({ ready: true });
  const child = await listen.getRequest();
  const qp = child.createQp(null, { cap: { maxSendWr: 64, maxRecvWr: 64, maxInlineData: 64 } });
  const cq = child.recvCq;
  const ch = child.recvCqChannel;
  // The client's disconnect (DISCONNECTED, the next event of the accepted id once accept() has
  // returned) is answered (DREP on RoCE) and ends the peer; the bench also closes stdin.
  const end = async () => {
    await child.disconnect().catch(() => {});
    process.exit(0);
  };
  const onDisconnect = () => child.channel.getEvent().then(end, end);
  if (kind === 'rc-echo') {
    const mr = child.pd.regMr(Buffer.alloc(64 * 64), Access.LOCAL_WRITE);
    const sgl = Array.from({ length: 64 }, (_, i) => [{ addr: mr.addr + i * 64, length: 64, lkey: mr.lkey }]);
    for (let i = 0; i < 64; i++) qp.postRecv({ wrId: i, sgList: sgl[i] });
    await child.accept();
    onDisconnect();
    cq.reqNotify();
    let n = 0;
    for (let wcs; (wcs = await nextWcs(cq, ch, 16)); ) {
      for (const wc of wcs) {
        if (wc.status !== 0) await end();
        const i = Number(wc.wrId);
        qp.postRecv({ wrId: i, sgList: sgl[i] });
        qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: sgl[i], sendFlags: SendFlags.INLINE | ((++n & 31) === 0 ? SendFlags.SIGNALED : 0) });
      }
      child.sendCq.poll(64);
    }
  } else {
    const target = child.pd.regMr(Buffer.alloc(1 << 20), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const msg = child.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    qp.postRecv({ wrId: 0, sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
    const pd = Buffer.alloc(12);
    pd.writeBigUInt64BE(BigInt(target.addr), 0);
    pd.writeUInt32BE(target.rkey, 8);
    await child.accept({ privateData: pd });
    onDisconnect();
    cq.reqNotify();
    for (let wcs; (wcs = await nextWcs(cq, ch, 1)); ) {
      if (wcs[0].status !== 0) await end();
      qp.postRecv({ wrId: 0, sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
      qp.postSend({ wrId: 1, opcode: WrOpcode.SEND, sgList: [{ addr: msg.addr, length: 1, lkey: msg.lkey }], sendFlags: SendFlags.SIGNALED });
      child.sendCq.poll(16);
    }
  }
} else {
  process.stderr.write(`unknown mode ${kind}\n`);
  process.exit(2);
}
