/**
 * A perftest run's verbs objects (perftest_resources.c `ctx_init`, `create_qp`, `ctx_modify_qp_to_init`,
 * `ctx_connect`; perftest_communication.c `check_link`, `set_up_connection`, `get_best_gid_index`):
 * one device context, a PD, one MR over a buffer with a send half and a receive half per QP, a
 * send CQ and a receive CQ, and the QPs, moved to RTS against the peer's keys.
 */
import { randomInt } from 'node:crypto';
import {
  Access,
  LinkLayer,
  PortState,
  QpState,
  QpType,
  TransportType,
  getDeviceList,
  type Ah,
  type CompChannel,
  type Context,
  type Cq,
  type Mr,
  type Pd,
  type Qp,
  type PortAttr,
} from '../api.js';
import { errOut, out } from '../c-compat.js';
import type { PerfDest } from './exchange.js';
import { Verb, type PerfParams } from './params.js';

/** `MIN_RNR_TIMER`. */
const MIN_RNR_TIMER = 12;
/** `DEF_QP_TIME`: the local ACK timeout exponent. */
const DEF_QP_TIME = 14;
/** `DEF_RETRY_COUNT`; the RNR retry count too (7: retry forever). */
const DEF_RETRY_COUNT = 7;
/** `DEF_QKEY`. */
export const DEF_QKEY = 0x11111111;
/** `UD_ADDITION`: the GRH in front of a UD receive. */
export const UD_ADDITION = 40;
/** `DEF_PAGE_SIZE`: the cycle buffer (`sysconf(_SC_PAGESIZE)`). */
export const DEF_PAGE_SIZE = 4096;
/** `DEF_CACHE_LINE_SIZE`. */
export const DEF_CACHE_LINE_SIZE = 64;
/** `MTU_FIX`: `MTU_SIZE(mtu) = 1 << (MTU_FIX + mtu)`. */
const MTU_FIX = 7;
const PORT_STATES = ['Nop', 'Down', 'Init', 'Armed', '', 'Active Defer'];

export const mtuBytes = (mtu: number): number => 1 << (MTU_FIX + mtu);

/**
 * `ctx_set_max_inline`: perftest knows the inline limits of the vendors' devices it lists
 * (`ib_dev_name`); on any other device, the soft ones and the kernel's rxe and siw among them, it
 * uses no inline data and says so when `-I` asked for some.
 */
function maxInline(p: PerfParams): number {
  if (p.inlineSize !== -1) {
    out('---------------------------------------------------------------------------------------\n');
    errOut('Device not recognized to implement inline feature. Disabling it\n');
  }
  return 0;
}

/**
 * `ctx_set_out_reads`: `-o` when given and within the device's `max_qp_rd_atom`, else that
 * maximum (with perftest's lines when `-o` asked for more).
 */
export function setOutReads(p: PerfParams, max: number): number {
  if (p.outReads > max) {
    out('---------------------------------------------------------------------------------------\n');
    errOut(` Number of outstanding reads is above max = ${max}\n`);
    errOut(' Changing to that max value\n');
    return max;
  }
  return p.outReads > 0 ? p.outReads : max;
}

/** `BUFF_SIZE(size, cycle_buffer)`: one half of a QP's buffer. */
export function buffSize(size: number, cycle: number): number {
  return size < cycle ? cycle : size;
}

/** `ipv6_addr_v4mapped`. */
export function v4Mapped(g: Uint8Array): boolean {
  return g.subarray(0, 10).every((x) => x === 0) && g[10] === 0xff && g[11] === 0xff;
}

/** The device, its port and what the run uses of them, before the QPs exist. */
export interface Device {
  ctx: Context;
  name: string;
  port: PortAttr;
  transport: string;
  linkLayer: string;
  gidIndex: number;
  maxQpRdAtom: number;
}

/** `ctx_find_dev`, `ctx_open_device`, `check_link`: null after printing perftest's message. */
export function openDevice(p: PerfParams): Device | null {
  const list = getDeviceList();
  if (list.length === 0) {
    errOut(' Did not detect devices \n If device exists, check if driver is up\n');
    errOut(' Unable to find the Infiniband/RoCE device\n');
    return null;
  }
  const dev = p.ibDevname === null ? list[0] : list.find((d) => d.name === p.ibDevname);
  if (!dev) {
    errOut(` IB device ${p.ibDevname} not found\n`);
    errOut(' Unable to find the Infiniband/RoCE device\n');
    return null;
  }
  const ctx = dev.open();
  let port: PortAttr;
  try {
    port = ctx.queryPort(p.ibPort);
  } catch {
    errOut(` Unable to query port ${p.ibPort} attributes\n`);
    errOut(" Couldn't get context for the device\n");
    return null;
  }
  if (port.state !== PortState.ACTIVE) {
    errOut(` Port number ${p.ibPort} state is ${PORT_STATES[port.state] ?? ''}\n`);
    errOut(" Couldn't get context for the device\n");
    return null;
  }
  const attr = ctx.queryDevice();
  let gidIndex = p.gidIndex;
  if (port.linkLayer === LinkLayer.ETHERNET && gidIndex === -1) gidIndex = bestGidIndex(ctx, p.ibPort, port.gidTblLen);
  if (gidIndex >= 0) {
    try {
      ctx.queryGid(p.ibPort, gidIndex);
    } catch {
      errOut(` Failed to query GID index ${gidIndex}\n`);
      return null;
    }
  }
  return {
    ctx,
    name: dev.name,
    port,
    transport: dev.transportType === TransportType.IB ? 'IB' : dev.transportType === TransportType.IWARP ? 'IW' : 'Unknown',
    linkLayer: port.linkLayer === LinkLayer.ETHERNET ? 'Ethernet' : 'IB',
    gidIndex,
    maxQpRdAtom: attr.maxQpRdAtom,
  };
}

/** `get_best_gid_index` (IPv4 runs): the first IPv4-mapped GID wins over others. */
function bestGidIndex(ctx: Context, port: number, len: number): number {
  const gidAt = (i: number): Uint8Array | null => {
    try {
      return ctx.queryGid(port, i);
    } catch {
      return null;
    }
  };
  let best = 0;
  for (let i = 1; i < len; i++) {
    const cur = gidAt(best);
    const rival = gidAt(i);
    if (rival === null || rival.every((x) => x === 0)) continue;
    if (cur === null || cur.every((x) => x === 0) || (v4Mapped(rival) && !v4Mapped(cur))) best = i;
  }
  return best;
}

/** The verbs objects of a run. */
export interface Resources {
  pd: Pd;
  buf: Buffer;
  mr: Mr;
  sendCq: Cq;
  recvCq: Cq;
  /** The completion channels of the CQs (a loop waits there once it has spun a while). */
  sendCh: CompChannel;
  recvCh: CompChannel;
  qps: Qp[];
  /** What each QP is created with. */
  qpInit: QpInit;
  /** Bytes of one half of a QP's buffer. */
  half: number;
  inlineSize: number;
  outReads: number;
  /** UD: the address handles to each peer QP. */
  ahs: Ah[];
  /** UD with `-R`: each peer QP's number and Q_Key as the CM gave them (cm-ud.ts); else empty. */
  udPeers: { qpn: number; qkey: number }[];
}

const QP_TYPES = { RC: QpType.RC, UC: QpType.UC, UD: QpType.UD } as const;

/** What a QP is created with (`struct ibv_qp_init_attr`, the fields used). */
export interface QpInit {
  qpType: QpType;
  sendCq: Cq;
  recvCq: Cq;
  cap: { maxSendWr: number; maxRecvWr: number; maxSendSge: number; maxRecvSge: number; maxInlineData: number };
}

/**
 * How QP `i` is made: by the PD itself, then moved to INIT here (`ctx_modify_qp_to_init`); or,
 * with `-R`, by its rdma_cm id (`rdma_create_qp`, which moves it to INIT itself): `cm` returns it.
 */
export type QpMaker = ((pd: Pd, init: QpInit, i: number) => Qp) | null;

/** The access rights of the test's buffer and QPs. */
function accessOf(p: PerfParams): number {
  return Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | (p.verb === Verb.ATOMIC ? Access.REMOTE_ATOMIC : 0);
}

/**
 * `ctx_init` and `ctx_modify_qp_to_init` on device context `ctx` (with `-R`, the one the CM id
 * is bound to). `maxSize`: the largest message of the run. `qpsNow` of the `-q` QPs are made
 * here, the others later by {@link addQp} (a `-R` server makes each QP as its connection request
 * comes, as perftest's `rdma_cm_connection_request_handler` does).
 */
export function createResources(p: PerfParams, ctx: Context, maxSize: number, cycle: number, cm: QpMaker = null, qpsNow = p.numQps): Resources | null {
  const half = buffSize(maxSize + (p.conn === 'UD' ? UD_ADDITION : 0), cycle);
  const buf = Buffer.alloc(half * 2 * p.numQps);
  const pd = ctx.allocPd();
  let mr: Mr;
  try {
    mr = pd.regMr(buf, accessOf(p));
  } catch {
    errOut(" Couldn't allocate MR\n");
    return null;
  }
  const sendCh = ctx.createCompChannel();
  const recvCh = p.verb === Verb.SEND ? ctx.createCompChannel() : sendCh;
  const sendCq = ctx.createCq(p.txDepth * p.numQps, sendCh);
  const recvCq = p.verb === Verb.SEND ? ctx.createCq(p.rxDepth * p.numQps, recvCh) : sendCq;
  const inlineSize = maxInline(p);
  // check_link: READ and ATOMIC use `-o` up to the device's limit (ctx_set_out_reads), the others 1.
  const outReads = p.verb === Verb.READ || p.verb === Verb.ATOMIC ? setOutReads(p, ctx.queryDevice().maxQpRdAtom) : 1;
  const qpInit: QpInit = {
    qpType: QP_TYPES[p.conn],
    sendCq,
    recvCq,
    cap: { maxSendWr: p.txDepth, maxRecvWr: p.verb === Verb.SEND ? p.rxDepth : 1, maxSendSge: 1, maxRecvSge: 1, maxInlineData: inlineSize },
  };
  const r: Resources = { pd, buf, mr, sendCq, recvCq, sendCh, recvCh, qps: [], qpInit, half, inlineSize, outReads, ahs: [], udPeers: [] };
  for (let i = 0; i < qpsNow; i++) if (!addQp(p, r, cm)) return null;
  return r;
}

/** The next QP of `r` (`create_qp_main`, then `ctx_modify_qp_to_init` unless its CM id made it); false after perftest's messages. */
export function addQp(p: PerfParams, r: Resources, cm: QpMaker): boolean {
  const i = r.qps.length;
  let qp: Qp;
  try {
    qp = cm ? cm(r.pd, r.qpInit, i) : r.pd.createQp(r.qpInit);
  } catch (e) {
    errOut(`Couldn't create QP - ${(e as Error).message}\n`);
    errOut(' Unable to create QP.\n');
    errOut(" Couldn't create IB resources\n");
    return false;
  }
  if (!cm) {
    try {
      if (p.conn === 'UD') qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: p.ibPort, qkey: DEF_QKEY });
      else qp.modify({ qpState: QpState.INIT, pkeyIndex: 0, portNum: p.ibPort, qpAccessFlags: accessOf(p) });
    } catch {
      errOut(' Failed to modify QP to INIT\n');
      errOut(" Couldn't create IB resources\n");
      return false;
    }
  }
  r.qps.push(qp);
  return true;
}

/**
 * `destroy_ctx`'s part for a failed `-R` connection attempt: the QPs must be gone already (their
 * CM ids' rdma_destroy_qp); the CQs, their channels, the MR and the PD go here.
 */
export function releaseResources(r: Resources): void {
  for (const cq of new Set([r.sendCq, r.recvCq])) cq.destroy();
  for (const ch of new Set([r.sendCh, r.recvCh])) ch.destroy();
  r.mr.dereg();
  r.pd.dealloc();
}

/** `set_up_connection`: this side's keys for QP `i`. The peer writes into this QP's receive half. */
export function localDest(p: PerfParams, d: Device, r: Resources, i: number): PerfDest {
  const qp = r.qps[i] as Qp;
  return {
    lid: d.port.lid ?? 0,
    outReads: r.outReads,
    qpn: qp.qpNum,
    psn: randomInt(0x1000000),
    rkey: r.mr.rkey,
    vaddr: BigInt(r.mr.addr + (p.numQps + i) * r.half),
    gid: d.gidIndex >= 0 ? d.ctx.queryGid(p.ibPort, d.gidIndex) : new Uint8Array(16),
    srqn: 0,
  };
}

/** `ctx_connect` (`ctx_modify_qp_to_rtr`, `ctx_modify_qp_to_rts`); false after its message. */
export function connectQps(p: PerfParams, d: Device, r: Resources, mine: PerfDest[], rem: PerfDest[], mtu: number): boolean {
  for (let i = 0; i < r.qps.length; i++) {
    const qp = r.qps[i] as Qp;
    const me = mine[i] as PerfDest;
    const peer = rem[i] as PerfDest;
    const ahAttr =
      d.gidIndex >= 0
        ? { isGlobal: true, portNum: p.ibPort, dlid: peer.lid, sl: 0, srcPathBits: 0, grh: { dgid: peer.gid, flowLabel: 0, sgidIndex: d.gidIndex, hopLimit: 0xff, trafficClass: 0 } }
        : { isGlobal: false, portNum: p.ibPort, dlid: peer.lid, sl: 0, srcPathBits: 0 };
    try {
      if (p.conn === 'UD') qp.modify({ qpState: QpState.RTR });
      else if (p.conn === 'UC') qp.modify({ qpState: QpState.RTR, ahAttr, pathMtu: mtu, destQpNum: peer.qpn, rqPsn: peer.psn });
      else {
        qp.modify({
          qpState: QpState.RTR,
          ahAttr,
          pathMtu: mtu,
          destQpNum: peer.qpn,
          rqPsn: peer.psn,
          maxDestRdAtomic: me.outReads,
          minRnrTimer: MIN_RNR_TIMER,
        });
      }
    } catch {
      errOut('Failed to modify QP to RTR\n');
      errOut(' Unable to Connect the HCA\'s through the link\n');
      return false;
    }
    try {
      if (p.conn === 'RC') {
        // ctx_modify_qp_to_rts: the reads in flight are as many as the peer's responder takes
        // (its OUT), as the responder resources here are ours (max_dest_rd_atomic above).
        qp.modify({ qpState: QpState.RTS, sqPsn: me.psn, timeout: DEF_QP_TIME, retryCnt: DEF_RETRY_COUNT, rnrRetry: DEF_RETRY_COUNT, maxRdAtomic: peer.outReads });
      } else qp.modify({ qpState: QpState.RTS, sqPsn: me.psn });
    } catch {
      errOut('Failed to modify QP to RTS\n');
      errOut(' Unable to Connect the HCA\'s through the link\n');
      return false;
    }
    if (p.conn === 'UD') {
      try {
        r.ahs.push(r.pd.createAh(ahAttr));
      } catch {
        errOut('Failed to create AH for UD\n');
        errOut(' Unable to Connect the HCA\'s through the link\n');
        return false;
      }
    }
  }
  return true;
}
