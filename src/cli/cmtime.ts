#!/usr/bin/env node
/**
 * cmtime: RDMA CM connection-setup timing — a port of the current rdma-core
 * `librdmacm/examples/cmtime.c` (the multi-peer version with an out-of-band controller, v60+):
 * same options, progress lines, timing table and exit codes.
 *
 * Peers meet over TCP at the controller address (`-C addr`, port `-p`, default 7471; oob.ts): the
 * first process that can listen there becomes the OOB root, the others connect to it. Every peer
 * sends its role and (listeners) the address of its RDMA listener, 136-byte `struct peer_info`
 * records as the C tool lays them out; one-byte barriers separate the steps. Connecting peers then time
 * every step of setting up `-c` connections per listener — create id, bind, resolve address and
 * route, create the QP and move it to INIT, connect, disconnect, destroy — and print the table:
 *
 * ```
 * qp_conn               100
 * threads                 1
 * step             avg/conn  total(us)    us/conn    sum(us)    max(us)    min(us)
 * full connect          ...
 * ```
 *
 * Threads become async tasks: the event "thread" handles CM events as they come, `-n` workers take
 * the queued work items. On iWARP the kernel reports ESTABLISHED instead of CONNECT_RESPONSE (the
 * iWARP CM moves the QP to RTS itself), so the rtr/rts/establish rows have no per-connection data
 * there, as with rdma-core on siw; and the "no QPs" run that follows with two peers fails in
 * rdma_connect (EINVAL: iWARP needs a real QP number), also as on siw.
 */
import { deferOptimization } from './startup.js';
import net from 'node:net';
import os from 'node:os';
import {
  CmEventType,
  PortSpace,
  QpState,
  QpType,
  RAI,
  createId,
  getaddrinfo,
  Errno,
  gaiStrerror,
  rdmaEventStr,
  type CmEvent,
  type CmId,
  type Cq,
  type EventChannel,
  type Pd,
  type Qp,
  type RdmaAddrinfo,
  type SockAddr,
} from './rdma.js';
import { atoi, cAllocOk, errOut, exit, installTopLevelHandlers, out, perror, sizeT, u32 } from './c-compat.js';
import { Getopt, getoptComplaint, takeLongOptions } from './getopt.js';
import { eaiOf } from './addresses.js';
import { createFirstEventChannel } from './common.js';
import { OobStar } from './oob.js';

const PROG = 'cmtime';
const OPTSTRING = 'B:b:C:c:Lm:n:P:p:q:r:St:';
const EXIT_FAILURE = 1;
/** The server gives clients this long to disconnect before disconnecting the rest itself. */
const SRV_MAX_DISCONNECT_TIME_US = 60_000_000;

/**
 * Connections (made or accepted by this process, warm-up included, counted at the end of each
 * round) before TurboFan starts on a machine with few CPUs: a one-shot run does without its
 * compile jobs, which in a fresh process there cost more than they save (see deferOptimization in
 * cli/startup.ts).
 */
export const CMTIME_JIT_DEFER = 1000;
const jitConns = deferOptimization(CMTIME_JIT_DEFER);

enum Step {
  FULL_CONNECT,
  CREATE_ID,
  BIND,
  RESOLVE_ADDR,
  RESOLVE_ROUTE,
  CREATE_QP,
  INIT_QP_ATTR,
  INIT_QP,
  RTR_QP_ATTR,
  RTR_QP,
  RTS_QP_ATTR,
  RTS_QP,
  CONNECT,
  ESTABLISH,
  DISCONNECT,
  DESTROY_ID,
  DESTROY_QP,
  CNT,
}

const STEP_STR = [
  'full connect',
  'create id',
  'bind addr',
  'resolve addr',
  'resolve route',
  'create qp',
  'init qp attr',
  'init qp',
  'rtr qp attr',
  'rtr qp',
  'rts qp attr',
  'rts qp',
  'cm connect',
  'establish',
  'disconnect',
  'destroy id',
  'destroy qp',
];

enum Role {
  CONNECT = 0,
  LISTEN = 1,
}

interface PeerInfo {
  sa: SockAddr | null;
  role: Role;
}

interface Conn {
  id: CmId | null;
  sock: net.Socket | null;
  peerId: number;
  qp: Qp | null;
  nextQps: QpState;
  nextStep: Step;
  /** Start and end (µs) of every step: [2 * step] and [2 * step + 1]. */
  times: Float64Array;
  retries: number;
  serverDisconnected: boolean;
}

// -- options and shared state ---------------------------------------------------------------------

let oobPort = '7471';
let ctrlAddr: string | null = null;
let srcAddr: string | null = null;
/** `-t` as the C int; rdma_resolve_addr/route carry it as a `__u32` (so -1 is a very long wait). */
let timeoutMs = 2000;
let retries = 2;
let baseQpn = 1000;
let curQpn = 0;
let mimicQpDelay = 0;
let mimic = false;
let role: Role = Role.CONNECT;
let numPeers = 2;
let numListeners = 0;
let peers: PeerInfo[] = [];
let conns: Conn[] = [];
let connIndex = 0;
let numConns = 100;
let numThreads = 1;
/**
 * `--warmup N` (this port's): untimed warm-up connections per peer pair before the test, in rounds
 * of at most `-c`. Unset: rdma-core's warmup, one connection per listener (none for `-S`).
 */
let warmup: number | null = null;
let discEvents = 0;
let rai: RdmaAddrinfo;
let channel: EventChannel;
let pd: Pd | null = null;
let cq: Cq | null = null;
const times = newTimes();

function newTimes(): Float64Array {
  return new Float64Array(2 * Step.CNT);
}

/** The process's time origin in µs (constant; its getter is not free, and it is read per step). */
const TIME_ORIGIN_US = performance.timeOrigin * 1000;
/** gettime_us(): microseconds of a monotonic clock (never 0). */
function gettimeUs(): number {
  return Math.floor(TIME_ORIGIN_US + performance.now() * 1000);
}
const startPerf = (c: Conn, s: Step): void => {
  c.times[2 * s] = gettimeUs();
};
const endPerf = (c: Conn, s: Step): void => {
  c.times[2 * s + 1] = gettimeUs();
};
const startTime = (s: Step): void => {
  times[2 * s] = gettimeUs();
};
const endTime = (s: Step): void => {
  times[2 * s + 1] = gettimeUs();
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const sleepUs = (us: number): Promise<void> => (us > 0 ? sleep(us / 1000) : Promise.resolve());

/** The `completed[]` counters, with waiters for "at least n" (the C code spins on sched_yield). */
class Counters {
  private readonly v = new Array<number>(Step.CNT).fill(0);
  private readonly waiters: { s: Step; n: number; resolve: () => void }[] = [];
  get(s: Step): number {
    return this.v[s] as number;
  }
  /** atomic_fetch_add(&completed[s], 1): returns the value before. */
  inc(s: Step): number {
    const before = this.v[s] as number;
    this.v[s] = before + 1;
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i] as { s: Step; n: number; resolve: () => void };
      if (w.s === s && before + 1 >= w.n) {
        this.waiters.splice(i, 1);
        w.resolve();
      } else i++;
    }
    return before;
  }
  reset(): void {
    this.v.fill(0);
  }
  /** Resolves once completed[s] >= n (or after `ms`, resolving false). */
  atLeast(s: Step, n: number, ms?: number): Promise<boolean> {
    if ((this.v[s] as number) >= n) return Promise.resolve(true);
    return new Promise((resolve) => {
      let t: NodeJS.Timeout | undefined;
      const w = {
        s,
        n,
        resolve: () => {
          if (t) clearTimeout(t);
          resolve(true);
        },
      };
      this.waiters.push(w);
      if (ms !== undefined) {
        t = setTimeout(() => {
          const i = this.waiters.indexOf(w);
          if (i >= 0) this.waiters.splice(i, 1);
          resolve(false);
        }, ms);
      }
    });
  }
}
const completed = new Counters();

/** The work queue (`struct work_queue` with `-n` threads): FIFO items run by n async workers. */
class WorkQueue {
  private readonly items: (() => void | Promise<void>)[] = [];
  private running = 0;
  constructor(private readonly threads: number) {}
  insert(fn: () => void | Promise<void>): void {
    this.items.push(fn);
    if (this.running < Math.max(this.threads, 1)) {
      this.running++;
      setImmediate(() => void this.worker());
    }
  }
  private async worker(): Promise<void> {
    // An item that finished synchronously (no promise) is not awaited: a connection's steps
    // that are synchronous calls in C cost no promise and no microtask turn here either.
    for (let fn = this.items.shift(); fn; fn = this.items.shift()) {
      const p = fn();
      if (p) await p;
    }
    this.running--;
  }
}
let wq: WorkQueue;

function die(): never {
  exit(EXIT_FAILURE);
  throw new Exiting();
}
/** Unwinds the async stack after {@link exit} (the process is ending). */
class Exiting extends Error {}

// -- the table ------------------------------------------------------------------------------------

const u = (v: number, w = 10): string => String(Math.max(0, Math.trunc(v))).padStart(w);

function showPerf(): void {
  const max = new Array<number>(Step.CNT).fill(0);
  const min = new Array<number>(Step.CNT).fill(0xffffffff);
  const sum = new Array<number>(Step.CNT).fill(0);
  for (let i = 0; i < Step.CNT; i++) {
    for (let c = 0; c < numConns; c++) {
      const t = (conns[c] as Conn).times;
      const t0 = t[2 * i] as number;
      const t1 = t[2 * i + 1] as number;
      if (t0 && t1) {
        const diff = u32(t1 - t0);
        sum[i] = (sum[i] as number) + diff;
        if (diff > (max[i] as number)) max[i] = diff;
        if (diff < (min[i] as number)) min[i] = diff;
      }
    }
    if (min[i] === 0xffffffff) min[i] = 0;
  }
  // Reporting the 'sum' of the full connect is meaningless.
  sum[Step.FULL_CONNECT] = 0;
  if (curQpn === 0) out(`qp_conn        ${u(numConns)}\n`);
  else out(`cm_conn        ${u(numConns)}\n`);
  out(`threads        ${u(numThreads)}\n`);
  out('step             avg/conn  total(us)    us/conn    sum(us)    max(us)    min(us)\n');
  for (let i = 0; i < Step.CNT; i++) {
    const diff = (times[2 * i + 1] as number) - (times[2 * i] as number);
    const n = numConns || 1;
    out(
      `${(STEP_STR[i] as string).padEnd(13)}  ${u(Math.trunc(diff / n))} ${u(diff)} ${u(Math.trunc((sum[i] as number) / n))} ` +
        `${u(sum[i] as number)} ${u(max[i] as number)} ${u(min[i] as number)}\n`,
    );
  }
}

// -- out-of-band controller -----------------------------------------------------------------------

let oob: OobStar;

/** oob_syncdown / oob_syncup: a one-byte barrier through the root. */
function doSync(val: number): Promise<void> {
  return oob.sync(val);
}

/** `struct peer_info` as laid out by the C tool: sockaddr_storage (128) + enum (4) + padding. */
const PEER_INFO_SIZE = 136;

function encodePeer(p: PeerInfo): Buffer {
  const b = Buffer.alloc(PEER_INFO_SIZE);
  const sa = p.sa;
  if (sa) {
    if (net.isIPv6(sa.address)) {
      b.writeUInt16LE(10, 0); // AF_INET6
      b.writeUInt16BE(sa.port, 2);
      const words = ipv6Words(sa.address);
      for (let i = 0; i < 8; i++) b.writeUInt16BE(words[i] ?? 0, 8 + i * 2);
    } else {
      b.writeUInt16LE(2, 0); // AF_INET
      b.writeUInt16BE(sa.port, 2);
      sa.address.split('.').forEach((o, i) => b.writeUInt8(Number(o) & 0xff, 4 + i));
    }
  }
  b.writeInt32LE(p.role, 128);
  return b;
}

function decodePeer(b: Buffer): PeerInfo {
  const fam = b.readUInt16LE(0);
  const port = b.readUInt16BE(2);
  let sa: SockAddr | null = null;
  if (fam === 2) sa = { address: `${b[4]}.${b[5]}.${b[6]}.${b[7]}`, port, family: 'IPv4' };
  else if (fam === 10) {
    const w: string[] = [];
    for (let i = 0; i < 8; i++) w.push(b.readUInt16BE(8 + i * 2).toString(16));
    sa = { address: canonical6(w.join(':')), port, family: 'IPv6' };
  }
  return { sa, role: b.readInt32LE(128) === Role.LISTEN ? Role.LISTEN : Role.CONNECT };
}

function ipv6Words(a: string): number[] {
  const s = a.split('%')[0] as string;
  const [head, tail] = s.includes('::') ? (s.split('::') as [string, string]) : [s, null];
  const h = head ? head.split(':').map((x) => parseInt(x, 16)) : [];
  if (tail === null) return h;
  const t = tail ? tail.split(':').map((x) => parseInt(x, 16)) : [];
  return [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
}

function canonical6(a: string): string {
  try {
    return new URL(`http://[${a}]/`).hostname.slice(1, -1);
  } catch {
    return a;
  }
}

/** setup_mesh(): exchange peer_info through the root; size `conns`. */
async function setupMesh(): Promise<number> {
  try {
    if (oob.isRoot) {
      const leaves = await oob.gather(PEER_INFO_SIZE);
      leaves.forEach((b, i) => (peers[i + 1] = decodePeer(b)));
      oob.broadcast(Buffer.concat(peers.map(encodePeer)));
    } else {
      oob.send(encodePeer(peers[0] as PeerInfo));
      const all = await oob.recv(PEER_INFO_SIZE * numPeers);
      for (let i = 0; i < numPeers; i++) peers[i] = decodePeer(all.subarray(i * PEER_INFO_SIZE, (i + 1) * PEER_INFO_SIZE));
    }
  } catch {
    return -1;
  }
  countListeners();
  // uint32_t arithmetic, then conns = calloc(num_conns, sizeof *conns), which may fail.
  if (role === Role.CONNECT) numConns = Math.imul(numConns, numListeners) >>> 0;
  else numConns = Math.imul(numConns, numPeers - numListeners) >>> 0;
  if (!cAllocOk(numConns, CONN_SIZE)) return -Errno.ENOMEM;
  conns = Array.from({ length: numConns }, newConn);
  return 0;
}

/** About sizeof(struct conn) in cmtime.c (a work item, pointers, the per-step times). */
const CONN_SIZE = 312;

function newConn(): Conn {
  return { id: null, sock: null, peerId: 0, qp: null, nextQps: QpState.INIT, nextStep: Step.INIT_QP_ATTR, times: newTimes(), retries: 0, serverDisconnected: false };
}

function countListeners(): void {
  numListeners = peers.filter((p) => p.role === Role.LISTEN).length;
  if (numListeners === numPeers) {
    out('cannot have all listeners\n');
    die();
  }
  if (!numListeners) {
    out('need at least 1 listener\n');
    die();
  }
}

function assignListeners(): void {
  let p = 0;
  for (let i = 0; i < numConns; i++) {
    while ((peers[p] as PeerInfo).role !== Role.LISTEN) if (++p >= numPeers) p = 0;
    (conns[i] as Conn).peerId = p;
    if (++p >= numPeers) p = 0;
  }
}

async function resetTest(): Promise<void> {
  connIndex = 0;
  discEvents = 0;
  times.fill(0);
  for (let i = 0; i < numConns; i++) conns[i] = newConn();
  if (role === Role.CONNECT) assignListeners();
  completed.reset();
  await doSync(0);
}

// -- verbs and CM steps ---------------------------------------------------------------------------

function openVerbs(id: CmId): void {
  out('\tAllocating verbs resources\n');
  try {
    pd = (id.verbs as NonNullable<CmId['verbs']>).allocPd();
  } catch (e) {
    perror('ibv_alloc_pd', e);
    die();
  }
  try {
    cq = (id.verbs as NonNullable<CmId['verbs']>).createCq(1);
  } catch (e) {
    perror('ibv_create_cq', e);
    die();
  }
}

/** The QP capabilities of every connection (one object, as the C code's one init attr). */
const QP_CAP = { maxSendWr: 1, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 0 };

/**
 * Create the connection's QP: synchronous (as ibv_create_qp) unless QPs are simulated (`-q`,
 * and the "no QPs" run), whose delay is a promise.
 */
function createQp(c: Conn): Promise<void> | undefined {
  if (!pd) openVerbs(c.id as CmId);
  startPerf(c, Step.CREATE_QP);
  if (curQpn !== 0) return sleepUs(mimicQpDelay).then(() => stepDone(c, Step.CREATE_QP));
  try {
    c.qp = (pd as Pd).createQp({ qpType: QpType.RC, sendCq: cq as Cq, recvCq: cq as Cq, sqSigAll: true, qpContext: c, cap: QP_CAP });
  } catch (e) {
    perror('ibv_create_qp', e);
    die();
  }
  stepDone(c, Step.CREATE_QP);
  return undefined;
}

function stepDone(c: Conn, step: Step): void {
  endPerf(c, step);
  completed.inc(step);
}

/** rdma_init_qp_attr + ibv_modify_qp: synchronous unless the QP is simulated (then a promise). */
function modifyQp(c: Conn, state: QpState, attrStep: Step): Promise<void> | undefined {
  startPerf(c, attrStep);
  let a: ReturnType<CmId['initQpAttr']>;
  try {
    a = (c.id as CmId).initQpAttr(state);
  } catch (e) {
    perror('rdma_init_qp_attr', e);
    die();
  }
  endPerf(c, attrStep);
  const step = attrStep + 1;
  startPerf(c, step);
  if (!c.qp) return sleepUs(mimicQpDelay).then(() => stepDone(c, step));
  try {
    c.qp.modify(a.attr, a.mask);
  } catch (e) {
    perror('ibv_modify_qp', e);
    die();
  }
  stepDone(c, step);
  return undefined;
}

function connParam(c: Conn): { responderResources: number; initiatorDepth: number; flowControl: number; retryCount: number; rnrRetryCount: number; srq: number; qpNum: number } {
  return { responderResources: 1, initiatorDepth: 1, flowControl: 0, retryCount: 0, rnrRetryCount: 0, srq: 0, qpNum: c.qp ? c.qp.qpNum : curQpn++ };
}

async function connectQp(c: Conn): Promise<void> {
  const p = connParam(c);
  startPerf(c, Step.CONNECT);
  try {
    await (c.id as CmId).connect(p);
  } catch (e) {
    perror('rdma_connect', e);
    die();
  }
}

async function resolveAddr(c: Conn): Promise<void> {
  c.retries = retries;
  startPerf(c, Step.RESOLVE_ADDR);
  try {
    await (c.id as CmId).resolveAddr(rai.srcAddr, (peers[c.peerId] as PeerInfo).sa as SockAddr, u32(timeoutMs));
  } catch (e) {
    perror('rdma_resolve_addr', e);
    die();
  }
}

async function resolveRoute(c: Conn): Promise<void> {
  c.retries = retries;
  startPerf(c, Step.RESOLVE_ROUTE);
  try {
    await (c.id as CmId).resolveRoute(u32(timeoutMs));
  } catch (e) {
    perror('rdma_resolve_route', e);
    die();
  }
}

async function connectResponse(c: Conn): Promise<void> {
  await modifyQp(c, QpState.RTR, Step.RTR_QP_ATTR);
  await modifyQp(c, QpState.RTS, Step.RTS_QP_ATTR);
  startPerf(c, Step.ESTABLISH);
  try {
    (c.id as CmId).establish();
  } catch {
    /* rdma_establish's result is not checked */
  }
  endPerf(c, Step.ESTABLISH);
  endPerf(c, Step.CONNECT);
  endPerf(c, Step.FULL_CONNECT);
  completed.inc(Step.CONNECT);
}

/** A connect request: QP, INIT, RTR, RTS, accept (the QP steps synchronous with a real QP). */
function reqHandler(c: Conn): Promise<void> {
  if (curQpn !== 0) return reqHandlerSimulated(c);
  createQp(c);
  modifyQp(c, QpState.INIT, Step.INIT_QP_ATTR);
  modifyQp(c, QpState.RTR, Step.RTR_QP_ATTR);
  modifyQp(c, QpState.RTS, Step.RTS_QP_ATTR);
  return acceptConn(c);
}

async function reqHandlerSimulated(c: Conn): Promise<void> {
  await createQp(c);
  await modifyQp(c, QpState.INIT, Step.INIT_QP_ATTR);
  await modifyQp(c, QpState.RTR, Step.RTR_QP_ATTR);
  await modifyQp(c, QpState.RTS, Step.RTS_QP_ATTR);
  await acceptConn(c);
}

async function acceptConn(c: Conn): Promise<void> {
  try {
    await (c.id as CmId).accept(connParam(c));
  } catch (e) {
    perror('failure accepting', e);
    die();
  }
}

async function clientDisconnect(c: Conn): Promise<void> {
  startPerf(c, Step.DISCONNECT);
  await (c.id as CmId).disconnect().catch(() => {});
  endPerf(c, Step.DISCONNECT);
  completed.inc(Step.DISCONNECT);
}

async function serverDisconnect(c: Conn): Promise<void> {
  c.serverDisconnected = true;
  startPerf(c, Step.DISCONNECT);
  await (c.id as CmId).disconnect().catch(() => {});
  endPerf(c, Step.DISCONNECT);
  if (discEvents >= numConns) endTime(Step.DISCONNECT);
  completed.inc(Step.DISCONNECT);
}

/** ADDR_ERROR / ROUTE_ERROR: retry (`-r`) while retries are left, else report and exit. */
async function retryOrDie(c: Conn, event: CmEvent, retry: () => Promise<void>, what: string): Promise<void> {
  if (c.retries--) {
    try {
      await retry();
      event.ack();
      return;
    } catch {
      /* reported below */
    }
  }
  out(`${what}, error: ${event.status}\n`);
  die();
}

/** One CM event; a promise only when it must be waited for (a retry) before the next one. */
function cmaHandler(id: CmId, event: CmEvent): Promise<void> | undefined {
  let c = id.context as Conn;
  switch (event.event) {
    case CmEventType.ADDR_RESOLVED:
      endPerf(c, Step.RESOLVE_ADDR);
      completed.inc(Step.RESOLVE_ADDR);
      break;
    case CmEventType.ROUTE_RESOLVED:
      endPerf(c, Step.RESOLVE_ROUTE);
      completed.inc(Step.RESOLVE_ROUTE);
      break;
    case CmEventType.CONNECT_REQUEST:
      if (connIndex === 0) {
        out('\tAccepting\n');
        startTime(Step.CONNECT);
      }
      c = conns[connIndex++] ?? newConn();
      c.id = id;
      c.serverDisconnected = false;
      id.context = c;
      {
        const cc = c;
        wq.insert(() => reqHandler(cc));
      }
      break;
    case CmEventType.CONNECT_RESPONSE: {
      const cc = c;
      wq.insert(() => connectResponse(cc));
      break;
    }
    case CmEventType.ESTABLISHED:
      if (completed.inc(Step.CONNECT) >= numConns - 1) endTime(Step.CONNECT);
      break;
    case CmEventType.ADDR_ERROR:
      return retryOrDie(c, event, () => id.resolveAddr(rai.srcAddr, (peers[c.peerId] as PeerInfo).sa as SockAddr, u32(timeoutMs)), 'RDMA_CM_EVENT_ADDR_ERROR');
    case CmEventType.ROUTE_ERROR:
      return retryOrDie(c, event, () => id.resolveRoute(u32(timeoutMs)), 'RDMA_CM_EVENT_ROUTE_ERROR');
    case CmEventType.CONNECT_ERROR:
    case CmEventType.UNREACHABLE:
    case CmEventType.REJECTED:
      out(`event: ${rdmaEventStr(event.event)}, error: ${event.status}\n`);
      die();
      break;
    case CmEventType.DISCONNECTED:
      if (role === Role.LISTEN) {
        if (discEvents++ === 0) {
          out('\tDisconnecting\n');
          startTime(Step.DISCONNECT);
        }
        const cc = c;
        wq.insert(() => serverDisconnect(cc));
      }
      break;
    case CmEventType.TIMEWAIT_EXIT:
      break;
    default:
      out(`Unhandled event: ${event.event} (${rdmaEventStr(event.event)})\n`);
      die();
  }
  event.ack();
  return undefined;
}

/** The event thread: handle every CM event as it comes. */
async function processEvents(): Promise<void> {
  for (;;) {
    let ev: CmEvent;
    try {
      // What is queued is taken without a promise per event.
      ev = channel.pending > 0 ? channel.tryGetEvent() : await channel.getEvent();
    } catch (e) {
      perror('rdma_get_cm_event', e);
      die();
    }
    const wait = cmaHandler(ev.id, ev);
    if (wait) await wait;
  }
}

function createIds(): void {
  out('\tCreating IDs\n');
  startTime(Step.CREATE_ID);
  for (let i = 0; i < numConns; i++) {
    const c = conns[i] as Conn;
    startPerf(c, Step.FULL_CONNECT);
    startPerf(c, Step.CREATE_ID);
    try {
      c.id = createId(channel, c, PortSpace.TCP);
    } catch (e) {
      perror('rdma_create_id', e);
      die();
    }
    endPerf(c, Step.CREATE_ID);
  }
  endTime(Step.CREATE_ID);
}

async function destroyIds(): Promise<void> {
  startTime(Step.DESTROY_ID);
  for (let i = 0; i < numConns; i++) {
    const c = conns[i] as Conn;
    startPerf(c, Step.DESTROY_ID);
    if (c.id) await c.id.destroy().catch(() => {});
    endPerf(c, Step.DESTROY_ID);
  }
  endTime(Step.DESTROY_ID);
}

function destroyQps(): void {
  startTime(Step.DESTROY_QP);
  for (let i = 0; i < numConns; i++) {
    const c = conns[i] as Conn;
    startPerf(c, Step.DESTROY_QP);
    if (c.qp) {
      try {
        c.qp.destroy();
      } catch {
        /* ignored */
      }
    }
    endPerf(c, Step.DESTROY_QP);
  }
  endTime(Step.DESTROY_QP);
}

async function serverListen(): Promise<CmId> {
  let listenId: CmId;
  try {
    listenId = createId(channel, null, PortSpace.TCP);
  } catch (e) {
    perror('rdma_create_id', e);
    die();
  }
  try {
    listenId.bindAddr(rai.srcAddr as SockAddr);
  } catch (e) {
    perror('rdma_bind_addr', e);
    die();
  }
  try {
    await listenId.listen(0);
  } catch (e) {
    perror('rdma_listen', e);
    die();
  }
  return listenId;
}

async function serverConnect(): Promise<void> {
  await resetTest();
  await doSync(Step.INIT_QP);
  await completed.atLeast(Step.CONNECT, numConns);
  await doSync(Step.CONNECT);
  while (!(await completed.atLeast(Step.DISCONNECT, numConns, SRV_MAX_DISCONNECT_TIME_US / 1000))) {
    errOut(`Timeout waiting for clients to disconnect (got ${completed.get(Step.DISCONNECT)}/${numConns})\n`);
    for (let i = 0; i < numConns; i++) {
      const c = conns[i] as Conn;
      if (c.serverDisconnected || !c.id) continue;
      wq.insert(() => serverDisconnect(c));
    }
  }
  await doSync(Step.DISCONNECT);
  destroyQps();
  await destroyIds();
  jitConns(numConns);
}

async function clientConnect(): Promise<void> {
  await resetTest();
  startTime(Step.FULL_CONNECT);
  createIds();

  out('\tBinding addresses\n');
  startTime(Step.BIND);
  for (let i = 0; i < numConns; i++) {
    const c = conns[i] as Conn;
    startPerf(c, Step.BIND);
    try {
      (c.id as CmId).bindAddr(rai.srcAddr as SockAddr);
    } catch (e) {
      perror('rdma_bind_addr', e);
      die();
    }
    endPerf(c, Step.BIND);
  }
  endTime(Step.BIND);

  const phase = async (title: string, step: Step, fn: (c: Conn) => Promise<void> | undefined): Promise<void> => {
    out(title);
    startTime(step);
    for (let i = 0; i < numConns; i++) {
      const c = conns[i] as Conn;
      wq.insert(() => fn(c));
    }
    await completed.atLeast(step, numConns);
    endTime(step);
  };
  await phase('\tResolving addresses\n', Step.RESOLVE_ADDR, resolveAddr);
  await phase('\tResolving routes\n', Step.RESOLVE_ROUTE, resolveRoute);
  await phase('\tCreating QPs\n', Step.CREATE_QP, createQp);
  await phase('\tModify QPs to INIT\n', Step.INIT_QP, (c) => modifyQp(c, QpState.INIT, Step.INIT_QP_ATTR));

  await doSync(Step.INIT_QP);

  out('\tConnecting\n');
  startTime(Step.CONNECT);
  for (let i = 0; i < numConns; i++) {
    // rdma_connect returns once TCP is connected (siw connects inside the call); on loopback the
    // kernel completes the handshake within connect(2), but Node reports it only in a later loop
    // turn, so the connects are issued without waiting for each (a failure still ends the run in
    // connectQp). In C the event thread runs while this loop does: every 16 connects, let the
    // connections made so far move on (their MPA exchange needs the event loop).
    void connectQp(conns[i] as Conn);
    if ((i & 15) === 15) await new Promise((r) => setImmediate(r));
  }
  await completed.atLeast(Step.CONNECT, numConns);
  endTime(Step.CONNECT);
  endTime(Step.FULL_CONNECT);

  await doSync(Step.CONNECT);

  out('\tDisconnecting\n');
  startTime(Step.DISCONNECT);
  for (let i = 0; i < numConns; i++) {
    const c = conns[i] as Conn;
    wq.insert(() => clientDisconnect(c));
  }
  await completed.atLeast(Step.DISCONNECT, numConns);
  endTime(Step.DISCONNECT);

  await doSync(Step.DISCONNECT);

  out('\tDestroying QPs\n');
  destroyQps();
  out('\tDestroying IDs\n');
  await destroyIds();
  jitConns(numConns);
}

/**
 * The warmup: `warmup` connections per peer pair (`unset` when no --warmup was given), in rounds
 * of at most `-c` each (`perPair` is the number of pairs this peer is part of). Unset for the RDMA
 * tests it is one round of one connection per listener, as in rdma-core. Every peer runs the same
 * rounds (their barriers keep them in step), so every peer must be given the same `--warmup` and
 * `-c`.
 */
async function warmupRounds(perPair: number, unset: number, round: () => Promise<void>): Promise<void> {
  const save = numConns;
  const most = Math.max(save / perPair, 1);
  for (let left = warmup ?? unset; left > 0; left -= most) {
    numConns = Math.min(left, most) * perPair;
    await round();
  }
  numConns = save;
}

async function runClient(): Promise<void> {
  peers[0] = { sa: null, role: Role.CONNECT };
  if (await setupMesh()) die();

  out('Client warmup\n');
  await warmupRounds(numListeners, 1, clientConnect);

  if (!mimic) out(`Connect (${numConns}) QPs test\n`);
  else {
    out(`Connect (${numConns}) simulated QPs test (delay ${mimicQpDelay} us)\n`);
    curQpn = baseQpn;
  }
  await clientConnect();
  showPerf();

  if (numPeers === 2) {
    out(`Connect (${numConns}) test - no QPs\n`);
    curQpn = baseQpn;
    mimicQpDelay = 0;
    await clientConnect();
    showPerf();
  }
}

async function runServer(): Promise<void> {
  // Configure RDMA prior to setting up the mesh.
  const listenId = await serverListen();
  peers[0] = { sa: listenId.localAddr, role: Role.LISTEN };
  if (await setupMesh()) die();

  out('Server warmup\n');
  await warmupRounds(numPeers - numListeners, 1, serverConnect);

  if (!mimic) out(`Accept (${numConns}) QPs test\n`);
  else {
    out(`Accept (${numConns}) simulated QPs test (delay ${mimicQpDelay} us)\n`);
    curQpn = baseQpn;
  }
  await serverConnect();
  showPerf();

  if (numPeers === 2) {
    out(`Accept (${numConns}) test - no QPs\n`);
    curQpn = baseQpn;
    mimicQpDelay = 0;
    await serverConnect();
    showPerf();
  }
  await listenId.destroy().catch(() => {});
}

// -- socket baseline (-S) -------------------------------------------------------------------------

/**
 * The socket baseline: with `--warmup N`, untimed rounds (nothing printed) before the timed one;
 * rdma-core's baseline has no warmup.
 */
async function sockRounds(round: (timed: boolean) => Promise<void>): Promise<void> {
  await warmupRounds(1, 0, async () => {
    await round(false);
    jitConns(numConns);
  });
  await round(true);
}

async function sockServer(timed: boolean): Promise<void> {
  const say = timed ? out : (): void => {};
  say('Server baseline socket setup\n');
  conns = Array.from({ length: numConns }, newConn);
  const server = net.createServer({ noDelay: true, pauseOnConnect: true });
  await new Promise<void>((resolve) => {
    server.once('error', (e) => {
      perror('bind', e);
      die();
    });
    server.listen({ host: (rai.srcAddr as SockAddr).address, port: oob.port, backlog: numConns }, () => resolve());
  });
  // The C tool has no barrier here (its client may connect before this listen); one OOB sync
  // makes the client wait for it. Nothing is printed for it.
  await doSync(0);
  say('Accept sockets\n');
  await new Promise<void>((resolve) => {
    let i = 0;
    if (numConns === 0) resolve();
    server.on('connection', (s: net.Socket) => {
      s.on('error', () => {});
      if (i >= numConns) {
        s.destroy();
        return;
      }
      (conns[i] as Conn).sock = s;
      if (i === 0) startTime(Step.FULL_CONNECT);
      if (++i === numConns) resolve();
    });
  });
  endTime(Step.FULL_CONNECT);
  say('Closing sockets\n');
  startTime(Step.DESTROY_ID);
  for (let i = 0; i < numConns; i++) (conns[i] as Conn).sock?.destroy();
  endTime(Step.DESTROY_ID);
  server.close();
  // The client's sockets may all be connected (in our backlog) and closed before we have
  // accepted them: a last OOB sync keeps it from exiting, and closing the OOB link, before we are
  // done (the C server blocks in accept() and never looks at the OOB link meanwhile).
  await doSync(0);
  say('Server baseline socket results:\n');
  if (timed) showPerf();
}

async function sockClient(timed: boolean): Promise<void> {
  const say = timed ? out : (): void => {};
  say('Client baseline socket setup\n');
  conns = Array.from({ length: numConns }, newConn);
  let host: string;
  try {
    host = ((await getaddrinfo(ctrlAddr, oobPort, {})).dstAddr as SockAddr).address;
  } catch (e) {
    perror('getaddrinfo', e);
    die();
  }
  const port = oob.port;
  startTime(Step.FULL_CONNECT);
  say('Creating sockets\n');
  startTime(Step.CREATE_ID);
  for (let i = 0; i < numConns; i++) {
    const c = conns[i] as Conn;
    wq.insert(() => {
      startPerf(c, Step.CREATE_ID);
      c.sock = new net.Socket();
      c.sock.on('error', () => {});
      endPerf(c, Step.CREATE_ID);
      completed.inc(Step.CREATE_ID);
    });
  }
  await completed.atLeast(Step.CREATE_ID, numConns);
  endTime(Step.CREATE_ID);
  await doSync(0);
  say('Connecting sockets\n');
  startTime(Step.CONNECT);
  for (let i = 0; i < numConns; i++) {
    const c = conns[i] as Conn;
    // connect() blocks in the worker thread of the C tool.
    wq.insert(async () => {
      startPerf(c, Step.CONNECT);
      const e = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
        const s = c.sock as net.Socket;
        const onErr = (x: NodeJS.ErrnoException): void => resolve(x);
        s.once('error', onErr);
        s.connect({ host, port, noDelay: true }, () => {
          s.off('error', onErr);
          resolve(null);
        });
      });
      if (e) {
        perror('connect', e);
        die();
      }
      endPerf(c, Step.CONNECT);
      completed.inc(Step.CONNECT);
    });
  }
  await completed.atLeast(Step.CONNECT, numConns);
  endTime(Step.CONNECT);
  endTime(Step.FULL_CONNECT);
  say('Closing sockets\n');
  startTime(Step.DESTROY_ID);
  for (let i = 0; i < numConns; i++) (conns[i] as Conn).sock?.destroy();
  endTime(Step.DESTROY_ID);
  await doSync(0);
  say('Client baseline socket results:\n');
  if (timed) showPerf();
}

// -- main -----------------------------------------------------------------------------------------

function getSrcAddr(ifname: string): string {
  const list = os.networkInterfaces()[ifname];
  const a = list?.find((x) => x.family === 'IPv4' || x.family === 'IPv6');
  if (!a) {
    errOut(`Failed to find IP address for interface: ${ifname}\n`);
    die();
  }
  out(`Picking source address ${a.address} for interface ${ifname}\n`);
  return a.address;
}

function usage(): number {
  out(`usage: ${PROG}\n`);
  out('\t-B bind_interface (only one of -B or -b accepted)\n');
  out('\t-b bind_address (only one of -B or -b accepted)\n');
  out('\t-C controller_address\n');
  out('\t[-c num_conns] connections per listener\n');
  out('\t[-L] run as listening server\n');
  out('\t[-m mimic_qp_delay_us]\n');
  out('\t[-n num_threads]\n');
  out('\t[-P num_peers] total number of peers\n');
  out('\t[-p oob_port]\n');
  out('\t[-q base_qpn]\n');
  out('\t[-r retries]\n');
  out('\t[-S] run socket baseline test, 2 peers only\n');
  out('\t[-t timeout_ms]\n');
  return EXIT_FAILURE;
}

async function main(argv: string[]): Promise<number> {
  let socktest = false;
  // `--warmup N` / `--warmup=N` (this port's; the rest is rdma-core's getopt string).
  const long = takeLongOptions(argv, [], ['warmup']);
  if (long.bad) {
    errOut(`${PROG}: --warmup needs a number of connections\n`);
    return usage();
  }
  warmup = long.values.get('warmup') ?? null;
  const g = new Getopt(long.args, OPTSTRING);
  for (let it = g.next(); it; it = g.next()) {
    const optarg = it.optarg ?? '';
    switch (it.opt) {
      case 'B':
        if (srcAddr) return usage();
        srcAddr = getSrcAddr(optarg);
        break;
      case 'b':
        if (srcAddr) return usage();
        srcAddr = optarg;
        break;
      case 'C':
        ctrlAddr = optarg;
        break;
      case 'c':
        numConns = u32(atoi(optarg));
        break;
      case 'L':
        role = Role.LISTEN;
        break;
      case 'm':
        mimicQpDelay = u32(atoi(optarg));
        mimic = true;
        break;
      case 'n':
        numThreads = u32(atoi(optarg)) | 0;
        break;
      case 'P':
        numPeers = u32(atoi(optarg));
        if (numPeers < 2) return usage();
        break;
      case 'p':
        oobPort = optarg;
        break;
      case 'q':
        baseQpn = u32(atoi(optarg));
        break;
      case 'r':
        retries = atoi(optarg);
        break;
      case 'S':
        socktest = true;
        curQpn = 1;
        break;
      case 't':
        timeoutMs = atoi(optarg);
        break;
      default:
        getoptComplaint(PROG, it, OPTSTRING);
        return usage();
    }
  }
  if (!srcAddr || !ctrlAddr || (socktest && numPeers > 2)) return usage();

  try {
    rai = await getaddrinfo(srcAddr, null, { portSpace: PortSpace.TCP, qpType: QpType.RC, flags: RAI.PASSIVE });
  } catch (e) {
    errOut(`rdma_getaddrinfo: ${gaiStrerror(eaiOf(e))}\n`);
    return EXIT_FAILURE;
  }
  const ch = createFirstEventChannel();
  if (!ch.channel) {
    errOut(`create_event_channel: ${(ch.errno === Errno.ENODEV ? 'No such device' : 'Input/output error')}\n`);
    return EXIT_FAILURE;
  }
  channel = ch.channel;
  void processEvents().catch((e: unknown) => {
    if (!(e instanceof Exiting)) throw e;
  });
  // peers = calloc(num_peers, ...) and wq_init's calloc(thread_cnt, sizeof(pthread_t)): when
  // they fail (-P or -n negative or huge), cmtime.c exits with EXIT_FAILURE and says nothing.
  if (!cAllocOk(numPeers, PEER_INFO_SIZE) || !cAllocOk(sizeT(numThreads), 8)) return EXIT_FAILURE;
  peers = Array.from({ length: numPeers }, () => ({ sa: null, role: Role.CONNECT }));
  wq = new WorkQueue(numThreads);
  const star = await OobStar.setup(ctrlAddr, oobPort, numPeers, (e) => {
    // The C tool would spin forever waiting for a peer that is gone; end instead.
    errOut(`${PROG}: OOB connection lost (${e.message})\n`);
    die();
  });
  if (typeof star === 'number') return EXIT_FAILURE;
  oob = star;

  if (role === Role.CONNECT) {
    if (socktest) await sockRounds(sockClient);
    else await runClient();
  } else if (socktest) await sockRounds(sockServer);
  else await runServer();

  oob.close();
  return 0;
}

installTopLevelHandlers(PROG);
process.removeAllListeners('unhandledRejection');
process.on('unhandledRejection', (e) => {
  if (e instanceof Exiting) return;
  process.stderr.write(`${PROG}: unexpected error: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}\n`);
  exit(1);
});
main(process.argv.slice(2)).then(
  (code) => exit(code),
  (e: unknown) => {
    if (e instanceof Exiting) return;
    process.stderr.write(`${PROG}: unexpected error: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}\n`);
    exit(1);
  },
);
