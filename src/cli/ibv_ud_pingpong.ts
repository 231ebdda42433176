#!/usr/bin/env node
/**
 * ibv_ud_pingpong: libibverbs' ud_pingpong example (libibverbs/examples/ud_pingpong.c) — a
 * ping-pong of `-s`-byte SENDs between two UD QPs (Q_Key 0x11111111), each side sending through
 * an address handle built from the address the other sent on the TCP side channel (rdma-core's
 * text format, port 18515). Receives take the 40-byte GRH before the payload. On RoCE the address
 * handle needs the peer's GID (`-g` on both sides), else "Failed to create AH"; on iWARP there
 * are no UD QPs ("Couldn't create QP"), as with rdma-core's tool on siw.
 * docs/man/ibv_ud_pingpong.1.md.
 */
import './startup.js';
import { Access, QpState, QpType, SendFlags, WrOpcode, type Ah, type CompChannel } from '../index.js';
import { errOut, out, progName, runMain, strtolInt, strtoulUint } from './c-compat.js';
import { parseOptions } from './getopt.js';
import { PP_RECV_WRID, PP_SEND_WRID, ppClientExchange, ppFindDevice, ppServerExchange, printDest, printRate, randomPsn, usecSince } from './pingpong.js';
import { ppAhAttr, ppClose, ppLongOptions, ppPingpong, ppStep as step, ppUsageHead } from './pingpong-loop.js';
import { PP_DEFAULT_PORT, type PpDest } from './pingpong-wire.js';

/** The Q_Key both sides use. */
const PP_QKEY = 0x11111111;
/** Room for the GRH a UD receive starts with. */
const GRH_LEN = 40;
const PAGE_SIZE = 4096;

const OPTSTRING = 'p:d:i:s:r:n:l:eg:c';

function usage(argv0: string): void {
  out(
    [
      ...ppUsageHead(argv0),
      '  -s, --size=<size>      size of message to exchange (default 2048)',
      '  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)',
      '  -n, --iters=<iters>    number of exchanges (default 1000)',
      '  -l, --sl=<SL>          send messages with service level <SL> (default 0)',
      '  -e, --events           sleep on CQ events (default poll)',
      '  -g, --gid-idx=<gid index> local port gid index',
      '  -c, --chk              validate received buffer',
      '',
    ].join('\n'),
  );
}

async function main(argv: readonly string[]): Promise<number> {
  const argv0 = progName('ibv_ud_pingpong');
  const o = { port: PP_DEFAULT_PORT, ibDev: null as string | null, ibPort: 1, size: 1024, rxDepth: 500, iters: 1000, sl: 0, useEvent: false, gidx: -1, validate: false };
  const operands = parseOptions(argv0, argv, OPTSTRING, ppLongOptions(OPTSTRING), (it) => {
    const v = it.optarg ?? '';
    switch (it.opt) {
      case 'p':
        o.port = strtolInt(v);
        return o.port >= 0 && o.port <= 65535;
      case 'd': o.ibDev = v; return true;
      case 'i':
        o.ibPort = strtolInt(v);
        return o.ibPort >= 1;
      case 's': o.size = strtoulUint(v); return true;
      case 'r': o.rxDepth = strtoulUint(v); return true;
      case 'n': o.iters = strtoulUint(v); return true;
      case 'l': o.sl = strtolInt(v); return true;
      case 'e': o.useEvent = true; return true;
      case 'g': o.gidx = strtolInt(v); return true;
      case 'c': o.validate = true; return true;
      default: return false;
    }
  });
  if (operands === null || operands.length > 1) {
    usage(argv0);
    return 1;
  }
  const server = operands[0] ?? null;
  const dev = ppFindDevice(o.ibDev);
  if (dev === null) return 1;

  // pp_init_ctx
  const buf = Buffer.alloc(o.size + GRH_LEN, 0x7b);
  let ctx;
  try {
    ctx = dev.open();
  } catch {
    errOut(`Couldn't get context for ${dev.name}\n`);
    return 1;
  }
  try {
    const mtu = 1 << (ctx.queryPort(o.ibPort).activeMtu + 7);
    if (o.size > mtu) {
      errOut(`Requested size larger than port MTU (${mtu})\n`);
      return 1;
    }
  } catch {
    errOut(`Unable to query port info for port ${o.ibPort}\n`);
    return 1;
  }
  let channel: CompChannel | null = null;
  if (o.useEvent) {
    try {
      channel = ctx.createCompChannel();
    } catch {
      errOut("Couldn't create completion channel\n");
      return 1;
    }
  }
  const pd = step(() => ctx.allocPd(), "Couldn't allocate PD");
  if (pd === null) return 1;
  const mr = step(() => pd.regMr(buf, Access.LOCAL_WRITE), "Couldn't register MR");
  if (mr === null) return 1;
  const cq = step(() => ctx.createCq(o.rxDepth + 1, channel, 0), "Couldn't create CQ");
  if (cq === null) return 1;
  const qp = step(() => pd.createQp({ qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: o.rxDepth, maxSendSge: 1, maxRecvSge: 1 } }), "Couldn't create QP");
  if (qp === null) return 1;
  let sendFlags = SendFlags.SIGNALED;
  if (qp.cap.maxInlineData >= o.size) sendFlags |= SendFlags.INLINE;
  if (step(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: o.ibPort, qkey: PP_QKEY }), 'Failed to modify QP to INIT') === null) return 1;

  const recvWr = { wrId: PP_RECV_WRID, sgList: [{ addr: mr.addr, length: o.size + GRH_LEN, lkey: mr.lkey }] };
  const postRecv = (n: number): number => {
    let i = 0;
    try {
      for (; i < n; i++) qp.postRecv(recvWr);
    } catch {
      // i were posted
    }
    return i;
  };
  const routs = postRecv(o.rxDepth);
  if (routs < o.rxDepth) {
    errOut(`Couldn't post receive (${routs})\n`);
    return 1;
  }
  if (channel !== null) cq.reqNotify();
  let port;
  try {
    port = ctx.queryPort(o.ibPort);
  } catch {
    errOut("Couldn't get port info\n");
    return 1;
  }
  const me: PpDest = { lid: port.lid, qpn: qp.qpNum, psn: randomPsn(), gid: new Uint8Array(16) };
  if (o.gidx >= 0) {
    try {
      me.gid = ctx.queryGid(o.ibPort, o.gidx);
    } catch {
      errOut(`Could not get local gid for gid index ${o.gidx}\n`);
      return 1;
    }
  }
  printDest('local', me, ': ');

  // pp_connect_ctx: RTR, RTS, then the AH to the peer
  let ah: Ah | null = null;
  const connect = (dest: PpDest): boolean => {
    if (step(() => qp.modify({ qpState: QpState.RTR }), 'Failed to modify QP to RTR') === null) return false;
    if (step(() => qp.modify({ qpState: QpState.RTS, sqPsn: me.psn }), 'Failed to modify QP to RTS') === null) return false;
    ah = step(() => pd.createAh(ppAhAttr(dest, dest.gid, o.sl, o.ibPort, o.gidx)), 'Failed to create AH');
    return ah !== null;
  };
  const rem = server !== null ? await ppClientExchange(server, o.port, [me]) : await ppServerExchange(o.port, 1, (r) => connect(r[0] as PpDest), () => [me]);
  if (rem === null) return 1;
  const dest = rem[0] as PpDest;
  printDest('remote', dest);
  if (server !== null && !connect(dest)) return 1;

  const sendWr = () => ({
    wrId: PP_SEND_WRID, opcode: WrOpcode.SEND, sendFlags, sgList: [{ addr: mr.addr + GRH_LEN, length: o.size, lkey: mr.lkey }],
    ud: { ah: ah as unknown as Ah, remoteQpn: dest.qpn, remoteQkey: PP_QKEY },
  });
  const postSend = (): boolean => step(() => (qp.postSend(sendWr()), true), "Couldn't post send") !== null;
  const pending = [PP_RECV_WRID];
  if (server !== null) {
    if (o.validate) for (let i = 0; i < o.size; i += PAGE_SIZE) buf[i + GRH_LEN] = 0;
    if (!postSend()) return 1;
    pending[0] = PP_RECV_WRID | PP_SEND_WRID;
  }
  const t0 = process.hrtime.bigint();
  const done = await ppPingpong({ cq, channel, maxWc: 2, iters: o.iters, rxDepth: o.rxDepth, routs, refillAt: 1, pending, postRecv, postSend, qpIndex: () => 0 });
  if (!done) return 1;
  printRate(o.size * o.iters * 2, o.iters, usecSince(t0));
  if (server === null && o.validate) {
    for (let i = 0; i < o.size; i += PAGE_SIZE) if (buf[i + GRH_LEN] !== 0) out(`invalid data in page ${i / PAGE_SIZE}\n`);
  }
  // pp_close_ctx
  const closed = ppClose([
    [() => qp.destroy(), "Couldn't destroy QP"],
    [() => cq.destroy(), "Couldn't destroy CQ"],
    [() => mr.dereg(), "Couldn't deregister MR"],
    [() => (ah as Ah | null)?.destroy(), "Couldn't destroy AH"],
    [() => pd.dealloc(), "Couldn't deallocate PD"],
    [() => channel?.destroy(), "Couldn't destroy completion channel"],
  ]);
  return closed ? 0 : 1;
}

runMain('ibv_ud_pingpong', main);
