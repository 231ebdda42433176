/**
 * ibv_rc_pingpong and ibv_uc_pingpong (libibverbs/examples/rc_pingpong.c, uc_pingpong.c): one
 * connected QP per side, set up from the addresses traded on the side channel (pingpong.ts), then
 * `-n` round trips of a `-s`-byte SEND each way. The two tools differ in the QP type, the RC-only
 * attributes of RTR and RTS, rc_pingpong's extra options (ODP, timestamps, device memory, the new
 * send API) and one line after a failed completion; a {@link ConnKind} says which.
 *
 * On a device without the QP type (UC on iWARP) QP creation fails ("Couldn't create QP"); on an
 * iWARP device an RC QP reaches RTR but not RTS without a connection of the CM, so the server
 * prints "Failed to modify QP to RTS" and "Couldn't connect to remote QP" and the client's read
 * of the server's address fails, as rdma-core's tools on siw do.
 */
import { Access, LinkLayer, QpState, QpType, SendFlags, WrOpcode, type CompChannel, type Cq, type Mr, type Pd, type Qp } from './api.js';
import { errOut, out, progName, strtolInt, strtoulUint } from './c-compat.js';
import { parseOptions, type LongOption } from './getopt.js';
import { PP_RECV_WRID, PP_SEND_WRID, ppClientExchange, ppFindDevice, ppServerExchange, printDest, printRate, randomPsn, usecSince } from './pingpong.js';
import { ppAhAttr, ppClose, ppLongOptions, ppPingpong, ppUsageHead } from './pingpong-loop.js';
import { PP_DEFAULT_PORT, ppMtuToEnum, type PpDest } from './pingpong-wire.js';

/** Which of the two tools runs. */
export interface ConnKind {
  /** The C tool's name (argv[0] when not run under another name). */
  name: string;
  qpType: QpType.RC | QpType.UC;
  /** rc_pingpong's getopt string; uc_pingpong's lacks the ODP, timestamp, DM and new-send flags. */
  optstring: string;
  long: readonly LongOption[];
  /** The usage lines after `-g`. */
  usageTail: readonly string[];
}

/** rc_pingpong.c. */
export const RC_KIND: ConnKind = {
  name: 'ibv_rc_pingpong',
  qpType: QpType.RC,
  optstring: 'p:d:i:s:m:r:n:l:eg:oOPtcjN',
  long: ppLongOptions('p:d:i:s:m:r:n:l:eg:oOPtcjN'),
  usageTail: [
    '  -o, --odp\t\t    use on demand paging',
    '  -O, --iodp\t\t    use implicit on demand paging',
    '  -P, --prefetch\t    prefetch an ODP MR',
    '  -t, --ts\t            get CQE with timestamp',
    '  -c, --chk\t            validate received buffer',
    '  -j, --dm\t            use device memory',
    '  -N, --new_send            use new post send WR API',
  ],
};

/** uc_pingpong.c. */
export const UC_KIND: ConnKind = {
  name: 'ibv_uc_pingpong',
  qpType: QpType.UC,
  optstring: 'p:d:i:s:m:r:n:l:eg:c',
  long: ppLongOptions('p:d:i:s:m:r:n:l:eg:c'),
  usageTail: ['  -c, --chk              validate received buffer'],
};

function usage(kind: ConnKind, argv0: string): void {
  out(
    [
      ...ppUsageHead(argv0),
      '  -s, --size=<size>      size of message to exchange (default 4096)',
      '  -m, --mtu=<size>       path MTU (default 1024)',
      '  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)',
      '  -n, --iters=<iters>    number of exchanges (default 1000)',
      '  -l, --sl=<sl>          service level value',
      '  -e, --events           sleep on CQ events (default poll)',
      '  -g, --gid-idx=<gid index> local port gid index',
      ...kind.usageTail,
      '',
    ].join('\n'),
  );
}

/** The options of main(), with the C tools' defaults. */
interface ConnOpts {
  port: number;
  ibDev: string | null;
  ibPort: number;
  size: number;
  mtu: number;
  rxDepth: number;
  iters: number;
  sl: number;
  useEvent: boolean;
  gidx: number;
  odp: boolean;
  implicitOdp: boolean;
  prefetch: boolean;
  ts: boolean;
  validate: boolean;
  dm: boolean;
  server: string | null;
}

function parse(kind: ConnKind, argv0: string, argv: readonly string[]): ConnOpts | null {
  const o: ConnOpts = {
    port: PP_DEFAULT_PORT, ibDev: null, ibPort: 1, size: 4096, mtu: ppMtuToEnum(1024), rxDepth: 500, iters: 1000, sl: 0,
    useEvent: false, gidx: -1, odp: false, implicitOdp: false, prefetch: false, ts: false, validate: false, dm: false, server: null,
  };
  const operands = parseOptions(argv0, argv, kind.optstring, kind.long, (it) => {
    const v = it.optarg ?? '';
    switch (it.opt) {
      case 'p':
        o.port = strtoulUint(v);
        return o.port <= 65535;
      case 'd': o.ibDev = v; return true;
      case 'i':
        o.ibPort = strtolInt(v);
        return o.ibPort >= 1;
      case 's': o.size = strtoulUint(v); return true;
      case 'm':
        o.mtu = ppMtuToEnum(strtolInt(v));
        return o.mtu !== 0;
      case 'r': o.rxDepth = strtoulUint(v); return true;
      case 'n': o.iters = strtoulUint(v); return true;
      case 'l': o.sl = strtolInt(v); return true;
      case 'e': o.useEvent = true; return true;
      case 'g': o.gidx = strtolInt(v); return true;
      case 'o': o.odp = true; return true;
      case 'P': o.prefetch = true; return true;
      case 'O': o.odp = true; o.implicitOdp = true; return true;
      case 't': o.ts = true; return true;
      case 'c': o.validate = true; return true;
      case 'j': o.dm = true; return true;
      case 'N': return true;
      default: return false;
    }
  });
  if (operands === null || operands.length > 1) return null;
  o.server = operands[0] ?? null;
  return o;
}

/** `struct pingpong_context`. */
interface Ctx {
  channel: CompChannel | null;
  pd: Pd;
  mr: Mr;
  buf: Buffer;
  cq: Cq;
  qp: Qp;
  sendFlags: number;
  /** The wr_ids still to complete in the current exchange. */
  pending: number;
}

/** `pp_connect_ctx`: RTR with the peer's address, then RTS. False after printing why. */
function connectCtx(kind: ConnKind, c: Ctx, o: ConnOpts, myPsn: number, dest: PpDest): boolean {
  const rc = kind.qpType === QpType.RC;
  const ahAttr = ppAhAttr(dest, dest.gid, o.sl, o.ibPort, o.gidx);
  try {
    c.qp.modify({ qpState: QpState.RTR, pathMtu: o.mtu, destQpNum: dest.qpn, rqPsn: dest.psn, ahAttr, ...(rc ? { maxDestRdAtomic: 1, minRnrTimer: 12 } : {}) });
  } catch {
    errOut('Failed to modify QP to RTR\n');
    return false;
  }
  try {
    c.qp.modify({ qpState: QpState.RTS, sqPsn: myPsn, ...(rc ? { timeout: 14, retryCnt: 7, rnrRetry: 7, maxRdAtomic: 1 } : {}) });
  } catch {
    errOut('Failed to modify QP to RTS\n');
    return false;
  }
  return true;
}

/** `pp_init_ctx`: null after printing why. */
function initCtx(kind: ConnKind, o: ConnOpts, dev: ReturnType<typeof ppFindDevice> & object): Ctx | null {
  const buf = Buffer.alloc(o.size, 0x7b);
  let ctx;
  try {
    ctx = dev.open();
  } catch {
    errOut(`Couldn't get context for ${dev.name}\n`);
    return null;
  }
  let channel: CompChannel | null = null;
  if (o.useEvent) {
    try {
      channel = ctx.createCompChannel();
    } catch {
      errOut("Couldn't create completion channel\n");
      return null;
    }
  }
  let pd: Pd;
  try {
    pd = ctx.allocPd();
  } catch {
    errOut("Couldn't allocate PD\n");
    return null;
  }
  // No device here has on-demand paging, completion timestamps or device memory (their
  // ibv_query_device_ex fields are 0), so the C tool's checks refuse them.
  if (o.odp) {
    errOut('The device isn\'t ODP capable or does not support RC send and receive with ODP\n');
    return null;
  }
  if (o.ts) {
    errOut("The device isn't completion timestamp capable\n");
    return null;
  }
  if (o.dm) {
    errOut("Device doesn't support dm allocation\n");
    return null;
  }
  let mr: Mr;
  try {
    mr = pd.regMr(buf, Access.LOCAL_WRITE);
  } catch {
    errOut("Couldn't register MR\n");
    return null;
  }
  let cq: Cq;
  try {
    cq = ctx.createCq(o.rxDepth + 1, channel, 0);
  } catch {
    errOut("Couldn't create CQ\n");
    return null;
  }
  let qp: Qp;
  try {
    qp = pd.createQp({ qpType: kind.qpType, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: o.rxDepth, maxSendSge: 1, maxRecvSge: 1 } });
  } catch {
    errOut("Couldn't create QP\n");
    return null;
  }
  let sendFlags = SendFlags.SIGNALED;
  if (qp.cap.maxInlineData >= o.size) sendFlags |= SendFlags.INLINE;
  try {
    qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: o.ibPort, qpAccessFlags: 0 });
  } catch {
    errOut('Failed to modify QP to INIT\n');
    return null;
  }
  return { channel, pd, mr, buf, cq, qp, sendFlags, pending: 0 };
}

/** `pp_post_recv`: how many of `n` receives were posted. */
function postRecv(c: Ctx, n: number): number {
  const wr = { wrId: PP_RECV_WRID, sgList: [{ addr: c.mr.addr, length: c.buf.length, lkey: c.mr.lkey }] };
  let i = 0;
  try {
    for (; i < n; i++) c.qp.postRecv(wr);
  } catch {
    // ibv_post_recv failed: i were posted
  }
  return i;
}

/** `pp_post_send`: false if ibv_post_send failed. */
function postSend(c: Ctx): boolean {
  try {
    c.qp.postSend({ wrId: PP_SEND_WRID, opcode: WrOpcode.SEND, sendFlags: c.sendFlags, sgList: [{ addr: c.mr.addr, length: c.buf.length, lkey: c.mr.lkey }] });
    return true;
  } catch {
    return false;
  }
}

/** `pp_close_ctx`. */
function closeCtx(c: Ctx): boolean {
  return ppClose([
    [() => c.qp.destroy(), "Couldn't destroy QP"],
    [() => c.cq.destroy(), "Couldn't destroy CQ"],
    [() => c.mr.dereg(), "Couldn't deregister MR"],
    [() => c.pd.dealloc(), "Couldn't deallocate PD"],
    [() => c.channel?.destroy(), "Couldn't destroy completion channel"],
  ]);
}

/** Page size for `-c` (the pages whose first byte the client sets and the server checks). */
const PAGE_SIZE = 4096;

/** main() of rc_pingpong.c / uc_pingpong.c: the exit status. */
export async function connPingpong(kind: ConnKind, argv: readonly string[]): Promise<number> {
  const argv0 = progName(kind.name);
  const o = parse(kind, argv0, argv);
  if (o === null) {
    usage(kind, argv0);
    return 1;
  }
  if (o.odp && o.dm) {
    errOut("DM memory region can't be on demand\n");
    return 1;
  }
  if (!o.odp && o.prefetch) {
    errOut('prefetch is valid only with on-demand memory region\n');
    return 1;
  }
  const dev = ppFindDevice(o.ibDev);
  if (dev === null) return 1;
  const c = initCtx(kind, o, dev);
  if (c === null) return 1;
  const routs = postRecv(c, o.rxDepth);
  if (routs < o.rxDepth) {
    errOut(`Couldn't post receive (${routs})\n`);
    return 1;
  }
  if (c.channel !== null) c.cq.reqNotify();
  const ctx = dev.open();
  let port;
  try {
    port = ctx.queryPort(o.ibPort);
  } catch {
    errOut("Couldn't get port info\n");
    return 1;
  }
  const me: PpDest = { lid: port.lid, qpn: c.qp.qpNum, psn: randomPsn(), gid: new Uint8Array(16) };
  if (port.linkLayer !== LinkLayer.ETHERNET && me.lid === 0) {
    errOut("Couldn't get local LID\n");
    return 1;
  }
  if (o.gidx >= 0) {
    try {
      me.gid = ctx.queryGid(o.ibPort, o.gidx);
    } catch {
      errOut(`can't read sgid of index ${o.gidx}\n`);
      return 1;
    }
  }
  printDest('local', me);
  const rem =
    o.server !== null
      ? await ppClientExchange(o.server, o.port, [me])
      : await ppServerExchange(o.port, 1, (r) => connectCtx(kind, c, o, me.psn, r[0] as PpDest), () => [me]);
  if (rem === null) return 1;
  const dest = rem[0] as PpDest;
  printDest('remote', dest);
  if (o.server !== null && !connectCtx(kind, c, o, me.psn, dest)) return 1;

  c.pending = PP_RECV_WRID;
  if (o.server !== null) {
    if (o.validate) for (let i = 0; i < o.size; i += PAGE_SIZE) c.buf[i] = 0;
    if (!postSend(c)) {
      errOut("Couldn't post send\n");
      return 1;
    }
    c.pending |= PP_SEND_WRID;
  }
  const t0 = process.hrtime.bigint();
  const done = await ppPingpong({
    cq: c.cq, channel: c.channel, maxWc: 2, iters: o.iters, rxDepth: o.rxDepth, routs, refillAt: 1, pending: [c.pending],
    postRecv: (n) => postRecv(c, n),
    postSend: () => {
      if (postSend(c)) return true;
      errOut("Couldn't post send\n");
      return false;
    },
    qpIndex: () => 0,
    ...(kind.qpType === QpType.RC ? { failedTail: (wcs: readonly unknown[]) => `parse WC failed ${wcs.length}\n` } : {}),
  });
  if (!done) return 1;
  printRate(o.size * o.iters * 2, o.iters, usecSince(t0));
  if (o.server === null && o.validate) {
    for (let i = 0; i < o.size; i += PAGE_SIZE) if (c.buf[i] !== 0) out(`invalid data in page ${i / PAGE_SIZE}\n`);
  }
  return closeCtx(c) ? 0 : 1;
}
