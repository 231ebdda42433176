#!/usr/bin/env node
/**
 * ibv_srq_pingpong: libibverbs' srq_pingpong example (libibverbs/examples/srq_pingpong.c) — `-q`
 * RC QPs per side (default 16) whose receives all come from one shared receive queue, a ping-pong
 * of SENDs on each QP, `-n` exchanges in all. The side channel carries 256 address messages each
 * way (rdma-core's MAX_QP, whatever `-q` is; those past the QPs are read and not parsed, as the C
 * tool never sets them). On iWARP the RC QPs reach RTR but not RTS without a connection of the CM:
 * "Failed to modify QP[0] to RTS", as rdma-core's tool on siw. docs/man/ibv_srq_pingpong.1.md.
 */
import './startup.js';
import { Access, LinkLayer, QpState, QpType, SendFlags, WrOpcode, type CompChannel, type Qp } from '../index.js';
import { errOut, out, progName, runMain, strtolInt, strtoulUint } from './c-compat.js';
import { parseOptions } from './getopt.js';
import { PP_RECV_WRID, PP_SEND_WRID, ppClientExchange, ppFindDevice, ppServerExchange, printDest, printRate, randomPsn, usecSince } from './pingpong.js';
import { ppAhAttr, ppClose, ppLongOptions, ppPingpong, ppStep as step, ppUsageHead } from './pingpong-loop.js';
import { PP_DEFAULT_PORT, ppMtuToEnum, type PpDest } from './pingpong-wire.js';

/** srq_pingpong.c `MAX_QP`: the number of address messages each side sends. */
const MAX_QP = 256;
const PAGE_SIZE = 4096;

const OPTSTRING = 'p:d:i:s:m:q:r:n:l:eog:c';

function usage(argv0: string): void {
  out(
    [
      ...ppUsageHead(argv0),
      '  -s, --size=<size>      size of message to exchange (default 4096)',
      '  -m, --mtu=<size>       path MTU (default 1024)',
      '  -q, --num-qp=<num>     number of QPs to use (default 16)',
      '  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)',
      '  -n, --iters=<iters>    number of exchanges per QP(default 1000)',
      '  -l, --sl=<sl>          service level value',
      '  -e, --events           sleep on CQ events (default poll)',
      '  -g, --gid-idx=<gid index> local port gid index',
      '  -o, --odp\t\t    use on demand paging',
      '  -c, --chk              validate received buffer',
      '',
    ].join('\n'),
  );
}

async function main(argv: readonly string[]): Promise<number> {
  const argv0 = progName('ibv_srq_pingpong');
  const o = {
    port: PP_DEFAULT_PORT, ibDev: null as string | null, ibPort: 1, size: 4096, mtu: ppMtuToEnum(1024), numQp: 16, rxDepth: 500, iters: 1000,
    sl: 0, useEvent: false, gidx: -1, odp: false, validate: false,
  };
  const operands = parseOptions(argv0, argv, OPTSTRING, ppLongOptions(OPTSTRING), (it) => {
    const v = it.optarg ?? '';
    switch (it.opt) {
      case 'p':
        o.port = strtoulUint(v);
        return o.port <= 65535;
      case 'd': o.ibDev = v; return true;
      case 'i':
        o.ibPort = strtolInt(v);
        return o.ibPort >= 1;
      case 's':
        o.size = strtoulUint(v);
        return o.size >= 1;
      case 'm':
        o.mtu = ppMtuToEnum(strtolInt(v));
        return o.mtu !== 0;
      case 'q': o.numQp = strtoulUint(v); return true;
      case 'r': o.rxDepth = strtoulUint(v); return true;
      case 'n': o.iters = strtoulUint(v); return true;
      case 'l': o.sl = strtolInt(v); return true;
      case 'e': o.useEvent = true; return true;
      case 'g': o.gidx = strtolInt(v); return true;
      case 'o': o.odp = true; return true;
      case 'c': o.validate = true; return true;
      default: return false;
    }
  });
  if (operands === null || operands.length > 1) {
    usage(argv0);
    return 1;
  }
  const server = operands[0] ?? null;
  if (o.numQp > o.rxDepth) {
    errOut(`rx_depth ${o.rxDepth} is too small for ${o.numQp} QPs -- must have at least one receive per QP.\n`);
    return 1;
  }
  if (o.numQp >= MAX_QP) {
    errOut(`num_qp ${o.numQp} must be less than ${MAX_QP - 1}\n`);
    return 1;
  }
  const numWc = o.numQp + o.rxDepth;
  const dev = ppFindDevice(o.ibDev);
  if (dev === null) return 1;

  // pp_init_ctx
  const buf = Buffer.alloc(o.size, 0x7b);
  const ctx = step(() => dev.open(), `Couldn't get context for ${dev.name}`);
  if (ctx === null) return 1;
  if (o.odp) {
    errOut('The device isn\'t ODP capable or does not support RC send, receive and srq with ODP\n');
    return 1;
  }
  let channel: CompChannel | null = null;
  if (o.useEvent) {
    channel = step(() => ctx.createCompChannel(), "Couldn't create completion channel");
    if (channel === null) return 1;
  }
  const pd = step(() => ctx.allocPd(), "Couldn't allocate PD");
  if (pd === null) return 1;
  const mr = step(() => pd.regMr(buf, Access.LOCAL_WRITE), "Couldn't register MR");
  if (mr === null) return 1;
  const cq = step(() => ctx.createCq(o.rxDepth + o.numQp, channel, 0), "Couldn't create CQ");
  if (cq === null) return 1;
  const srq = step(() => pd.createSrq({ attr: { maxWr: o.rxDepth, maxSge: 1 } }), "Couldn't create SRQ");
  if (srq === null) return 1;
  const qps: Qp[] = [];
  let sendFlags = SendFlags.SIGNALED;
  for (let i = 0; i < o.numQp; i++) {
    const qp = step(() => pd.createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, srq, cap: { maxSendWr: 1, maxSendSge: 1, maxRecvWr: 0, maxRecvSge: 0 } }), `Couldn't create QP[${i}]`);
    if (qp === null) return 1;
    if (qp.cap.maxInlineData >= o.size) sendFlags |= SendFlags.INLINE;
    qps.push(qp);
  }
  for (let i = 0; i < o.numQp; i++) {
    const qp = qps[i] as Qp;
    if (step(() => qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: o.ibPort, qpAccessFlags: 0 }), `Failed to modify QP[${i}] to INIT`) === null) return 1;
  }

  const recvWr = { wrId: PP_RECV_WRID, sgList: [{ addr: mr.addr, length: o.size, lkey: mr.lkey }] };
  const postRecv = (n: number): number => {
    let i = 0;
    try {
      for (; i < n; i++) srq.postRecv(recvWr);
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
  const port = step(() => ctx.queryPort(o.ibPort), "Couldn't get port info");
  if (port === null) return 1;
  const mine: PpDest[] = [];
  for (let i = 0; i < o.numQp; i++) {
    const d: PpDest = { lid: port.lid, qpn: (qps[i] as Qp).qpNum, psn: randomPsn(), gid: new Uint8Array(16) };
    if (port.linkLayer !== LinkLayer.ETHERNET && d.lid === 0) {
      errOut("Couldn't get local LID\n");
      return 1;
    }
    if (o.gidx >= 0) {
      const g = step(() => ctx.queryGid(o.ibPort, o.gidx), `Could not get local gid for gid index ${o.gidx}`);
      if (g === null) return 1;
      d.gid = g;
    }
    printDest('local', d);
    mine.push(d);
  }
  // The 256 messages: ours, then zeros where the C tool sends what its array held.
  const wire = [...mine, ...Array.from({ length: MAX_QP - mine.length }, () => ({ lid: 0, qpn: 0, psn: 0, gid: new Uint8Array(16) }))];

  // pp_connect_ctx: the GRH decision follows the first remote address, as the C tool's
  const connect = (rem: PpDest[]): boolean => {
    for (let i = 0; i < o.numQp; i++) {
      const dest = rem[i] as PpDest;
      const ahAttr = ppAhAttr(dest, (rem[0] as PpDest).gid, o.sl, o.ibPort, o.gidx);
      const qp = qps[i] as Qp;
      if (step(() => qp.modify({ qpState: QpState.RTR, pathMtu: o.mtu, destQpNum: dest.qpn, rqPsn: dest.psn, maxDestRdAtomic: 1, minRnrTimer: 12, ahAttr }), `Failed to modify QP[${i}] to RTR`) === null) return false;
      const sq = (mine[i] as PpDest).psn;
      if (step(() => qp.modify({ qpState: QpState.RTS, timeout: 14, retryCnt: 7, rnrRetry: 7, sqPsn: sq, maxRdAtomic: 1 }), `Failed to modify QP[${i}] to RTS`) === null) return false;
    }
    return true;
  };
  const rem =
    server !== null
      ? await ppClientExchange(server, o.port, wire, true, o.numQp)
      : await ppServerExchange(o.port, MAX_QP, connect, () => wire, true, o.numQp);
  if (rem === null) return 1;
  for (const d of rem) printDest('remote', d);
  if (server !== null && !connect(rem)) return 1;

  const sendSge = [{ addr: mr.addr, length: o.size, lkey: mr.lkey }];
  const postSend = (i: number): boolean => step(() => ((qps[i] as Qp).postSend({ wrId: PP_SEND_WRID, opcode: WrOpcode.SEND, sendFlags, sgList: sendSge }), true), "Couldn't post send") !== null;
  const pending = new Array<number>(o.numQp).fill(PP_RECV_WRID);
  if (server !== null) {
    if (o.validate) for (let i = 0; i < o.size; i += PAGE_SIZE) buf[i] = 0;
    for (let i = 0; i < o.numQp; i++) {
      if (!postSend(i)) return 1;
      pending[i] = PP_SEND_WRID | PP_RECV_WRID;
    }
  }
  const byQpn = new Map(qps.map((q, i) => [q.qpNum, i]));
  const t0 = process.hrtime.bigint();
  const done = await ppPingpong({
    cq, channel, maxWc: numWc, iters: o.iters, rxDepth: o.rxDepth, routs, refillAt: o.numQp, pending, postRecv, postSend,
    qpIndex: (wc) => {
      const qi = byQpn.get(wc.qpNum);
      if (qi === undefined) errOut(`Couldn't find QPN ${wc.qpNum.toString(16).padStart(6, '0')}\n`);
      return qi ?? null;
    },
  });
  if (!done) return 1;
  printRate(o.size * o.iters * 2, o.iters, usecSince(t0));
  if (server === null && o.validate) {
    for (let i = 0; i < o.size; i += PAGE_SIZE) if (buf[i] !== 0) out(`invalid data in page ${i / PAGE_SIZE}\n`);
  }
  // pp_close_ctx
  for (let i = 0; i < o.numQp; i++) if (step(() => (qps[i] as Qp).destroy(), `Couldn't destroy QP[${i}]`) === null) return 1;
  const closed = ppClose([
    [() => srq.destroy(), "Couldn't destroy SRQ"],
    [() => cq.destroy(), "Couldn't destroy CQ"],
    [() => mr.dereg(), "Couldn't deregister MR"],
    [() => pd.dealloc(), "Couldn't deallocate PD"],
    [() => channel?.destroy(), "Couldn't destroy completion channel"],
  ]);
  return closed ? 0 : 1;
}

runMain('ibv_srq_pingpong', main);
