#!/usr/bin/env node
/**
 * rping: RDMA CM connection and RDMA ping-pong test — a port of rdma-core's
 * `librdmacm/examples/rping.c` (same options, protocol, messages and exit codes) onto this
 * package's CM and verbs.
 *
 * Each ping (client side view):
 *   1. the client fills its start buffer with "rdma-ping-N: " and a run of letters, and SENDs its
 *      address/rkey/length (16 bytes: be64 addr, be32 rkey, be32 len) — the "source" advert;
 *   2. the server RDMA READs the buffer, then SENDs a "go ahead";
 *   3. the client SENDs the advert of its sink buffer;
 *   4. the server RDMA WRITEs the data back into it, then SENDs a "go ahead";
 *   5. the client compares (-V) and prints (-v) what came back.
 *
 * Threads become async tasks: the CM "thread" reads the event channel and runs the event handler
 * (a handler error ends the process with status 255, like the C `exit(ret)`); the main flow waits
 * on a semaphore that the CM handler and the CQ handler post to, and checks the shared test state,
 * whose numbers (IDLE=1 ... ERROR=11) appear in messages. The CQ "thread" (completion channel →
 * re-arm → drain) runs in the waiting main flow: a completion event wakes it, it handles the
 * completions and goes on to the next post in the same turn (see PingSem). `-P` runs one task
 * per accepted connection.
 */
import { deferOptimization, idleBackgroundThreads, setInterruptBudget } from './startup.js';
import {
  Errno,
  Access,
  CmEventType,
  PortSpace,
  QpAttrMask,
  QpState,
  QpType,
  RdmaError,
  SendFlags,
  WcOpcode,
  WcStatus,
  WrOpcode,
  createId,
  rdmaEventStr,
  type CmEvent,
  type CmId,
  type CompChannel,
  type ConnParam,
  type Cq,
  type EventChannel,
  type Mr,
  type Pd,
  type Qp,
  type QpAttr,
  type SendWr,
  type RecvWr,
  type Wc,
} from './rdma.js';
import { atoi, errnoFrom, errOut, exit, objId, out, perror, runMain, Semaphore } from './c-compat.js';
import { Getopt, takeLongOptions } from './getopt.js';
import { anyAddr, eaiOf, gaiMessage, resolveHost, sockAddr, type HostAddr } from './addresses.js';
import { createFirstEventChannel } from './common.js';
import { copyBytes } from './api.js';

/** Test states (rping.c `enum test_state`); the numbers appear in messages. */
enum TestState {
  IDLE = 1,
  CONNECT_REQUEST = 2,
  ADDR_RESOLVED = 3,
  ROUTE_RESOLVED = 4,
  CONNECTED = 5,
  RDMA_READ_ADV = 6,
  RDMA_READ_COMPLETE = 7,
  RDMA_WRITE_ADV = 8,
  RDMA_WRITE_COMPLETE = 9,
  DISCONNECTED = 10,
  ERROR = 11,
}

/** Largest buffer + 1 (RPING_BUFSIZE): sizes up to 65535 are accepted. */
const RPING_BUFSIZE = 64 * 1024;
/** sizeof("2147483647") + sizeof("rdma-ping-%d: ") = 11 + 15. */
const RPING_MIN_BUFSIZE = 26;
const RPING_SQ_DEPTH = 16;
/** struct rping_rdma_info: be64 buf, be32 rkey, be32 size. */
const INFO_SIZE = 16;
const DEFAULT_PORT = 7174;

let debug = false;
function DEBUG_LOG(s: string): void {
  if (debug) out(s);
}

/**
 * rping's semaphore (`cb->sem`), which the CM thread and the CQ thread post to and the main flow
 * waits on. The CQ thread is no task of its own: its work (read the completion channel's event,
 * re-arm, drain the CQ) is done by the waiting main flow when it wakes ({@link semTake}), so a
 * completion costs one wake-up of the main flow and one promise, not a wake-up of a CQ task
 * followed by one of the main flow. The main flow waits with
 * `while (!semTake(cb)) await cb.sem.park();`.
 */
class PingSem {
  private count: number;
  private wake: (() => void) | null = null;
  private readonly setWake = (resolve: () => void): void => {
    this.wake = resolve;
  };

  constructor(initial: number) {
    this.count = initial;
  }

  /** sem_getvalue(). */
  get value(): number {
    return this.count;
  }

  /** sem_post(). */
  post(): void {
    this.count++;
    this.kick();
  }

  /** Wake the parked main flow, if any, to look again (a completion event came, or a post). */
  readonly kick = (): void => {
    const w = this.wake;
    if (w !== null) {
      this.wake = null;
      w();
    }
  };

  /** sem_trywait(). */
  take(): boolean {
    if (this.count > 0) {
      this.count--;
      return true;
    }
    return false;
  }

  /** Wait for the next {@link kick} (one waiter at a time: each connection has one main flow). */
  park(): Promise<void> {
    return new Promise<void>(this.setWake);
  }
}

/** The data path's work requests, made once per connection and reused by every post. */
interface DataWrs {
  recv: RecvWr;
  send: SendWr;
  /** The RDMA READ / WRITE of rdma_buf: opcode, length and the remote buffer set per post. */
  rdma: SendWr & { rdma: { remoteAddr: number; rkey: number } };
  rdmaSge: { addr: number; length: number; lkey: number };
  /** The 16-byte adverts of start_buf and rdma_buf (rping_format_send's result, made once). */
  startInfo: Buffer | null;
  rdmaInfo: Buffer;
}

/** The control block (`struct rping_cb`): options, shared state and per-connection resources. */
interface Cb {
  server: number; // -1 unset, 0 client, 1 server
  /** `-P`: the server serves one connection after another; a connection's error ends only it. */
  persistent: boolean;
  state: TestState;
  sem: PingSem;
  acceptReady: Semaphore;

  sin: HostAddr;
  ssource: HostAddr | null;
  port: number;
  verbose: boolean;
  selfCreateQp: boolean;
  count: number;
  size: number;
  validate: boolean;
  /**
   * `--json` (this port's): the client prints its pings' timing as one JSON line; the server, when
   * the client leaves, the CPU time of the pings it served after the first `--warmup`.
   */
  json: boolean;
  /** `--warmup N` (this port's): N untimed pings before the `-C count` timed ones. */
  warmup: number;

  cmChannel: EventChannel | null;
  cmId: CmId | null;
  childCmId: CmId | null;

  pd: Pd | null;
  channel: CompChannel | null;
  cq: Cq | null;
  qp: Qp | null;
  /** The id whose rdma_create_qp made the QP (null with -q). */
  qpId: CmId | null;

  recvBuf: Buffer;
  recvMr: Mr | null;
  sendBuf: Buffer;
  sendMr: Mr | null;
  rdmaBuf: Buffer | null;
  rdmaMr: Mr | null;
  startBuf: Buffer | null;
  startMr: Mr | null;

  remoteRkey: number;
  /** The peer's buffer address (a number, as the RDMA WRs take it). */
  remoteAddr: number;
  remoteLen: number;

  /** The CQ thread runs (handles the completion channel's events when the main flow waits). */
  cqLive: boolean;
  /** The CQ thread's `struct ibv_wc`, filled in place by each poll. */
  wcs: Wc[];
  /** The work requests of the data path, made once the buffers are registered. */
  wr: DataWrs | null;
}

function newCb(): Cb {
  return {
    server: -1,
    persistent: false,
    state: TestState.IDLE,
    sem: new PingSem(0),
    acceptReady: new Semaphore(1),
    sin: anyAddr('IPv4'),
    ssource: null,
    port: DEFAULT_PORT,
    verbose: false,
    selfCreateQp: false,
    count: 0,
    size: 64,
    validate: false,
    json: false,
    warmup: 0,
    cmChannel: null,
    cmId: null,
    childCmId: null,
    pd: null,
    channel: null,
    cq: null,
    qp: null,
    qpId: null,
    recvBuf: Buffer.alloc(INFO_SIZE),
    recvMr: null,
    sendBuf: Buffer.alloc(INFO_SIZE),
    sendMr: null,
    rdmaBuf: null,
    rdmaMr: null,
    startBuf: null,
    startMr: null,
    remoteRkey: 0,
    remoteAddr: 0,
    remoteLen: 0,
    cqLive: false,
    wcs: [],
    wr: null,
  };
}

/** clone_cb(): a copy of the listening block for one connection (own buffers and semaphore). */
function cloneCb(l: Cb): Cb {
  const cb: Cb = {
    ...l,
    sem: new PingSem(l.sem.value),
    recvBuf: Buffer.from(l.recvBuf),
    sendBuf: Buffer.from(l.sendBuf),
    cqLive: false,
    wcs: [],
    wr: null,
  };
  if (cb.childCmId) {
    cb.childCmId.context = cb;
    if (endedEarly.delete(cb.childCmId)) {
      cb.state = TestState.ERROR;
      cb.sem.post();
    }
  }
  return cb;
}

/** `-P` connections whose error event came before their thread had its own block. */
const endedEarly = new WeakSet<CmId>();

/** The shared state, read fresh (other tasks change it while we wait). */
const stateOf = (cb: Cb): TestState => cb.state;
/** `%x` / `%PRIx64`. */
const hex = (v: number | bigint): string =>
  (typeof v === 'bigint' ? v : BigInt(Number.isSafeInteger(v) && v >= 0 ? v : v >>> 0)).toString(16);
/** `%d` of a 32-bit value. */
const int32 = (v: number): number => v | 0;
/** `%s` of a C string: the bytes up to the first NUL. */
function cstr(buf: Buffer): Buffer {
  const z = buf.indexOf(0);
  return z < 0 ? buf : buf.subarray(0, z);
}
/** strlen(). */
function cstrLen(buf: Buffer): number {
  const z = buf.indexOf(0);
  return z < 0 ? buf.length : z;
}

// -- CM events ------------------------------------------------------------------------------------

async function cmaEventHandler(cmaId: CmId, event: CmEvent): Promise<number> {
  let ret = 0;
  const cb = cmaId.context as Cb;

  DEBUG_LOG(`cma_event type ${rdmaEventStr(event.event)} cma_id ${objId(cmaId)} (${cmaId === cb.cmId ? 'parent' : 'child'})\n`);

  switch (event.event) {
    case CmEventType.ADDR_RESOLVED:
      cb.state = TestState.ADDR_RESOLVED;
      try {
        await cmaId.resolveRoute(2000);
      } catch (e) {
        cb.state = TestState.ERROR;
        perror('rdma_resolve_route', e);
        cb.sem.post();
      }
      break;

    case CmEventType.ROUTE_RESOLVED:
      cb.state = TestState.ROUTE_RESOLVED;
      cb.sem.post();
      break;

    case CmEventType.CONNECT_REQUEST:
      await cb.acceptReady.wait();
      cb.state = TestState.CONNECT_REQUEST;
      cb.childCmId = cmaId;
      DEBUG_LOG(`child cma ${objId(cb.childCmId)}\n`);
      cb.sem.post();
      break;

    case CmEventType.CONNECT_RESPONSE:
      DEBUG_LOG('CONNECT_RESPONSE\n');
      cb.state = TestState.CONNECTED;
      cb.sem.post();
      break;

    case CmEventType.ESTABLISHED:
      DEBUG_LOG('ESTABLISHED\n');
      // The server wakes up when the first RECV completes.
      if (!cb.server) cb.state = TestState.CONNECTED;
      cb.sem.post();
      break;

    case CmEventType.ADDR_ERROR:
    case CmEventType.ROUTE_ERROR:
    case CmEventType.CONNECT_ERROR:
    case CmEventType.UNREACHABLE:
    case CmEventType.REJECTED:
      errOut(`cma event ${rdmaEventStr(event.event)}, error ${event.status}\n`);
      if (cb.persistent && cmaId !== cb.cmId) {
        // A connection of the persistent server: its error ends that connection (its thread
        // sees ERROR), not the process, which rping.c's cm_thread would exit. One peer that
        // leaves a handshake unfinished (UNREACHABLE -110) or rejects our REP (REJECTED)
        // cannot stop the server.
        if (cb === (cb.cmId as CmId).context) {
          // Its thread has not started (the id still has the listening block): the block is
          // the listener's and must not change; the thread starts in ERROR instead.
          endedEarly.add(cmaId);
          break;
        }
        cb.state = TestState.ERROR;
        cb.sem.post();
        break;
      }
      cb.sem.post();
      ret = -1;
      break;

    case CmEventType.DISCONNECTED:
      errOut(`${cb.server ? 'server' : 'client'} DISCONNECT EVENT...\n`);
      cb.state = TestState.DISCONNECTED;
      cb.sem.post();
      break;

    case CmEventType.DEVICE_REMOVAL:
      errOut('cma detected device removal!!!!\n');
      cb.state = TestState.ERROR;
      cb.sem.post();
      ret = -1;
      break;

    default:
      errOut(`unhandled event: ${rdmaEventStr(event.event)}, ignoring\n`);
      break;
  }
  return ret;
}

/** cm_thread(): handle CM events until `stop` (the eventfd) fires; a handler error exits. */
async function cmThread(cb: Cb, stop: AbortSignal): Promise<void> {
  const channel = cb.cmChannel as EventChannel;
  for (;;) {
    if (stop.aborted) return;
    let event: CmEvent;
    try {
      event = await channel.getEvent(stop);
    } catch (e) {
      if (stop.aborted) return;
      perror('rdma_get_cm_event', e);
      exit(-1);
      return;
    }
    const ret = await cmaEventHandler(event.id, event);
    event.ack();
    if (ret) {
      // exit(ret). The C main thread, woken by the handler's sem_post, races this exit and
      // usually still prints its own failure lines ("wait for CONNECTED state 4",
      // "connect error -1"): let it, then end the process.
      setImmediate(() => exit(ret));
      return;
    }
  }
}

// -- completions ----------------------------------------------------------------------------------

function serverRecv(cb: Cb, byteLen: number): number {
  if (byteLen !== INFO_SIZE) {
    errOut(`Received bogus data, size ${int32(byteLen)}\n`);
    return -1;
  }
  const r = cb.recvBuf;
  cb.remoteRkey = r.readUInt32BE(8);
  // be64 as a number (what the RDMA WR takes): hi * 2^32 + lo rounds as Number(BigInt) does.
  cb.remoteAddr = r.readUInt32BE(0) * 0x1_0000_0000 + r.readUInt32BE(4);
  cb.remoteLen = r.readUInt32BE(12);
  if (debug) DEBUG_LOG(`Received rkey ${hex(cb.remoteRkey)} addr ${hex(r.readBigUInt64BE(0))} len ${int32(cb.remoteLen)} from peer\n`);

  if (cb.state <= TestState.CONNECTED || cb.state === TestState.RDMA_WRITE_COMPLETE) cb.state = TestState.RDMA_READ_ADV;
  else cb.state = TestState.RDMA_WRITE_ADV;
  return 0;
}

function clientRecv(cb: Cb, byteLen: number): number {
  if (byteLen !== INFO_SIZE) {
    errOut(`Received bogus data, size ${int32(byteLen)}\n`);
    return -1;
  }
  if (cb.state === TestState.RDMA_READ_ADV) cb.state = TestState.RDMA_WRITE_ADV;
  else cb.state = TestState.RDMA_WRITE_COMPLETE;
  return 0;
}

/** The handler's failure: the test is in error and the main flow is woken. */
function cqFail(cb: Cb, r: number): number {
  cb.state = TestState.ERROR;
  cb.sem.post();
  return r;
}

/** rping_cq_event_handler(): drain the CQ; returns 1 if a flushed completion was seen. */
function cqEventHandler(cb: Cb): number {
  const cq = cb.cq as Cq;
  const wcs = cb.wcs;
  let ret = 0;
  let flushed = 0;

  for (;;) {
    let n: number;
    try {
      n = cq.pollInto(wcs, 1);
    } catch (e) {
      ret = -errnoFrom(e);
      break;
    }
    if (n === 0) break;
    const wc = wcs[0] as Wc;
    ret = 0;

    if (wc.status !== WcStatus.SUCCESS) {
      if (wc.status === WcStatus.WR_FLUSH_ERR) {
        flushed = 1;
        continue;
      }
      errOut(`cq completion failed status ${wc.status}\n`);
      return cqFail(cb, -1);
    }

    switch (wc.opcode) {
      case WcOpcode.SEND:
        DEBUG_LOG('send completion\n');
        break;

      case WcOpcode.RDMA_WRITE:
        DEBUG_LOG('rdma write completion\n');
        cb.state = TestState.RDMA_WRITE_COMPLETE;
        cb.sem.post();
        break;

      case WcOpcode.RDMA_READ:
        DEBUG_LOG('rdma read completion\n');
        cb.state = TestState.RDMA_READ_COMPLETE;
        cb.sem.post();
        break;

      case WcOpcode.RECV: {
        DEBUG_LOG('recv completion\n');
        ret = cb.server ? serverRecv(cb, wc.byteLen) : clientRecv(cb, wc.byteLen);
        if (ret) {
          errOut(`recv wc error: ${ret}\n`);
          return cqFail(cb, ret);
        }
        ret = postRecv(cb);
        if (ret) {
          errOut(`post recv error: ${ret}\n`);
          return cqFail(cb, ret);
        }
        cb.sem.post();
        break;
      }

      default:
        DEBUG_LOG('unknown!!!!! completion\n');
        return cqFail(cb, -1);
    }
  }
  if (ret) {
    errOut(`poll error ${ret}\n`);
    return cqFail(cb, ret);
  }
  return flushed;
}

/**
 * One pass of cq_thread(): the completion events queued on the channel, each read, re-armed,
 * drained and acknowledged, until none is left or the thread ends (an error or a flush, as the C
 * thread returns).
 */
function cqEvents(cb: Cb): void {
  const channel = cb.channel as CompChannel;
  while (cb.cqLive) {
    let evCq: Cq | undefined;
    try {
      evCq = channel.tryGetCqEvent();
    } catch {
      errOut('Failed to get cq event!\n');
      endCqThread(cb);
      return;
    }
    if (evCq === undefined) return;
    if (evCq !== cb.cq) {
      errOut('Unknown CQ!\n');
      endCqThread(cb);
      return;
    }
    try {
      evCq.reqNotify();
    } catch {
      errOut('Failed to set notify!\n');
      endCqThread(cb);
      return;
    }
    const ret = cqEventHandler(cb);
    try {
      evCq.ackEvents(1);
    } catch {
      /* the CQ went away under us */
    }
    if (ret) endCqThread(cb);
  }
}

/** sem_trywait() on `cb->sem`, after the CQ thread has handled the completion events queued. */
function semTake(cb: Cb): boolean {
  if (cb.cqLive && (cb.channel as CompChannel).pending > 0) cqEvents(cb);
  return cb.sem.take();
}

/** The CQ thread starts: completion events wake the main flow, which handles them. */
function startCqThread(cb: Cb): void {
  DEBUG_LOG('cq_thread started.\n');
  cb.cqLive = true;
  (cb.channel as CompChannel)._sink = { cqEventQueued: cb.sem.kick };
}

/** The CQ thread returns (or is cancelled): its events are no longer read. */
function endCqThread(cb: Cb): void {
  cb.cqLive = false;
  if (cb.channel) cb.channel._sink = null;
  cb.sem.kick();
}

/** pthread_join() on the CQ thread: handle its events until it ends (a flush or an error). */
async function joinCqThread(cb: Cb): Promise<void> {
  while (cb.cqLive) {
    if ((cb.channel as CompChannel).pending > 0) cqEvents(cb);
    else await cb.sem.park();
  }
}

/** pthread_cancel() + pthread_join() on the CQ thread. */
function cancelCqThread(cb: Cb): void {
  if (cb.cqLive) endCqThread(cb);
}

// -- QP and buffers -------------------------------------------------------------------------------

function connParam(cb: Cb): ConnParam {
  const p: ConnParam = { responderResources: 1, initiatorDepth: 1, retryCount: 7, rnrRetryCount: 7 };
  if (cb.selfCreateQp) p.qpNum = (cb.qp as Qp).qpNum;
  return p;
}

/**
 * rping_self_modify_qp(): INIT, RTR and RTS with rdma_init_qp_attr()'s attributes. `ret` is 0,
 * -1 when rdma_init_qp_attr fails, or the errno ibv_modify_qp returns; `errno` what perror shows.
 */
function selfModifyQp(cb: Cb, id: CmId): { ret: number; errno: number } {
  for (const s of [QpState.INIT, QpState.RTR, QpState.RTS]) {
    let a: { attr: QpAttr; mask: number };
    try {
      a = id.initQpAttr(s);
    } catch (e) {
      return { ret: -1, errno: errnoFrom(e) };
    }
    try {
      (cb.qp as Qp).modify(a.attr, a.mask);
    } catch (e) {
      const errno = errnoFrom(e);
      return { ret: errno, errno };
    }
  }
  return { ret: 0, errno: 0 };
}

function setupBuffers(cb: Cb): number {
  const pd = cb.pd as Pd;
  DEBUG_LOG(`rping_setup_buffers called on cb ${objId(cb)}\n`);

  try {
    cb.recvMr = pd.regMr(cb.recvBuf, Access.LOCAL_WRITE);
  } catch (e) {
    errOut('recv_buf reg_mr failed\n');
    return errnoFrom(e);
  }

  let ret: number;
  try {
    cb.sendMr = pd.regMr(cb.sendBuf, 0);
  } catch (e) {
    errOut('send_buf reg_mr failed\n');
    ret = errnoFrom(e);
    return unwind(1, ret);
  }

  // malloc(size): a negative size (which the -S check lets through) cannot be allocated.
  if (cb.size < 0) {
    errOut('rdma_buf malloc failed\n');
    return unwind(2, -Errno.ENOMEM);
  }
  cb.rdmaBuf = Buffer.alloc(cb.size);

  try {
    cb.rdmaMr = pd.regMr(cb.rdmaBuf, Access.LOCAL_WRITE | Access.REMOTE_READ | Access.REMOTE_WRITE);
  } catch (e) {
    errOut('rdma_buf reg_mr failed\n');
    return unwind(3, errnoFrom(e));
  }

  if (!cb.server) {
    cb.startBuf = Buffer.alloc(cb.size);
    try {
      cb.startMr = pd.regMr(cb.startBuf, Access.LOCAL_WRITE | Access.REMOTE_READ | Access.REMOTE_WRITE);
    } catch (e) {
      errOut('start_buf reg_mr failed\n');
      return unwind(5, errnoFrom(e));
    }
  }

  cb.wr = dataWrs(cb);
  DEBUG_LOG('allocated & registered buffers...\n');
  return 0;

  function unwind(level: number, r: number): number {
    if (level >= 5) cb.startBuf = null;
    if (level >= 4) deregQuiet(cb.rdmaMr);
    if (level >= 4) cb.rdmaMr = null;
    if (level >= 3) cb.rdmaBuf = null;
    if (level >= 2) {
      deregQuiet(cb.sendMr);
      cb.sendMr = null;
    }
    deregQuiet(cb.recvMr);
    cb.recvMr = null;
    return r;
  }
}

function deregQuiet(mr: Mr | null): void {
  if (!mr) return;
  try {
    mr.dereg();
  } catch {
    /* ignored, as the C code ignores ibv_dereg_mr's result */
  }
}

function freeBuffers(cb: Cb): void {
  DEBUG_LOG(`rping_free_buffers called on cb ${objId(cb)}\n`);
  deregQuiet(cb.recvMr);
  deregQuiet(cb.sendMr);
  deregQuiet(cb.rdmaMr);
  cb.recvMr = cb.sendMr = cb.rdmaMr = null;
  cb.rdmaBuf = null;
  cb.wr = null;
  if (!cb.server) {
    deregQuiet(cb.startMr);
    cb.startMr = null;
    cb.startBuf = null;
  }
}

function quiet(f: () => void): void {
  try {
    f();
  } catch {
    /* destroy errors are ignored, as in rping.c */
  }
}

function destroyQp(cb: Cb): void {
  const qp = cb.qp;
  if (!qp) return;
  if (cb.qpId && cb.qpId.qp === qp) quiet(() => (cb.qpId as CmId).destroyQp());
  else quiet(() => qp.destroy());
  cb.qp = null;
  cb.qpId = null;
}

/** rping_free_qp(): QP, CQ, completion channel, PD. */
function freeQp(cb: Cb): void {
  destroyQp(cb);
  const { cq, channel, pd } = cb;
  if (cq) quiet(() => cq.destroy());
  if (channel) quiet(() => channel.destroy());
  if (pd) quiet(() => pd.dealloc());
  cb.cq = null;
  cb.channel = null;
  cb.pd = null;
}

function createQp(cb: Cb): number {
  const id = (cb.server ? cb.childCmId : cb.cmId) as CmId;
  const cq = cb.cq as Cq;
  const cap = { maxSendWr: RPING_SQ_DEPTH, maxRecvWr: 2, maxRecvSge: 1, maxSendSge: 1 };

  if (cb.selfCreateQp) {
    try {
      cb.qp = (cb.pd as Pd).createQp({ qpType: QpType.RC, sendCq: cq, recvCq: cq, cap }) as Qp;
    } catch (e) {
      perror('ibv_create_qp', e);
      return -1;
    }
    cb.qpId = null;
    try {
      cb.qp.modify(
        { qpState: QpState.INIT, pkeyIndex: 0, portNum: id.portNum, qpAccessFlags: 0 },
        QpAttrMask.STATE | QpAttrMask.PKEY_INDEX | QpAttrMask.PORT | QpAttrMask.ACCESS_FLAGS,
      );
    } catch (e) {
      perror('ibv_modify_qp', e);
      quiet(() => (cb.qp as Qp).destroy());
      return -1;
    }
    return 0;
  }

  try {
    cb.qp = id.createQp(cb.pd, { qpType: QpType.RC, sendCq: cq, recvCq: cq, cap });
    cb.qpId = id;
  } catch (e) {
    perror('rdma_create_qp', e);
    return -1;
  }
  return 0;
}

/** rping_setup_qp(): PD, completion channel, CQ (armed), QP on the id's device. */
function setupQp(cb: Cb, cmId: CmId): number {
  const verbs = cmId.verbs;
  let ret: number;
  try {
    if (!verbs) throw new RdmaError('ENODEV', { op: 'ibv_alloc_pd' });
    cb.pd = verbs.allocPd();
  } catch (e) {
    errOut('ibv_alloc_pd failed\n');
    return errnoFrom(e);
  }
  DEBUG_LOG(`created pd ${objId(cb.pd)}\n`);

  try {
    cb.channel = verbs.createCompChannel();
  } catch (e) {
    errOut('ibv_create_comp_channel failed\n');
    ret = errnoFrom(e);
    quiet(() => (cb.pd as Pd).dealloc());
    cb.pd = null;
    return ret;
  }
  DEBUG_LOG(`created channel ${objId(cb.channel)}\n`);

  try {
    cb.cq = verbs.createCq(RPING_SQ_DEPTH * 2, cb.channel, 0, cb);
  } catch (e) {
    errOut('ibv_create_cq failed\n');
    return undo(errnoFrom(e), false);
  }
  DEBUG_LOG(`created cq ${objId(cb.cq)}\n`);

  try {
    cb.cq.reqNotify(false);
  } catch (e) {
    errOut('ibv_create_cq failed\n');
    return undo(errnoFrom(e), true);
  }

  ret = createQp(cb);
  if (ret) return undo(ret, true);
  DEBUG_LOG(`created qp ${objId(cb.qp)}\n`);
  return 0;

  function undo(r: number, withCq: boolean): number {
    if (withCq && cb.cq) quiet(() => (cb.cq as Cq).destroy());
    quiet(() => (cb.channel as CompChannel).destroy());
    quiet(() => (cb.pd as Pd).dealloc());
    cb.qp = null;
    cb.cq = null;
    cb.channel = null;
    cb.pd = null;
    return r;
  }
}

/** ibv_post_send of one WR: 0, or the errno after `post send error <errno>` on stderr. */
function postSend(cb: Cb, wr: SendWr): number {
  try {
    (cb.qp as Qp).postSend(wr);
    return 0;
  } catch (e) {
    const ret = errnoFrom(e);
    errOut(`post send error ${ret}\n`);
    return ret;
  }
}

/** Whether the test is in state `want` after a wait; if not, `wait for <WANT> state <n>` on stderr. */
function inState(cb: Cb, want: TestState): boolean {
  if (stateOf(cb) === want) return true;
  errOut(`wait for ${TestState[want]} state ${cb.state}\n`);
  return false;
}

// -- server ---------------------------------------------------------------------------------------

async function rpingAccept(cb: Cb): Promise<number> {
  const child = cb.childCmId as CmId;
  DEBUG_LOG('accepting client connection request\n');

  try {
    if (cb.selfCreateQp) {
      const r = selfModifyQp(cb, child).ret;
      if (r) return r;
      await child.accept(connParam(cb));
    } else {
      await child.accept();
    }
  } catch (e) {
    perror('rdma_accept', e);
    return -1;
  }

  while (!semTake(cb)) await cb.sem.park();
  if (stateOf(cb) === TestState.ERROR) {
    errOut(`wait for CONNECTED state ${cb.state}\n`);
    return -1;
  }
  return 0;
}

async function rpingDisconnect(cb: Cb, id: CmId): Promise<number> {
  if (cb.selfCreateQp) {
    try {
      (cb.qp as Qp).modify({ qpState: QpState.ERR }, QpAttrMask.STATE);
    } catch (e) {
      return errnoFrom(e);
    }
  }
  try {
    await id.disconnect();
  } catch {
    return -1;
  }
  return 0;
}

/** The 16-byte advert of `mr` (rping_format_send): be64 addr, be32 rkey, be32 size. */
function advert(cb: Cb, mr: Mr): Buffer {
  const b = Buffer.alloc(INFO_SIZE);
  b.writeUInt32BE(Math.floor(mr.addr / 0x1_0000_0000), 0);
  b.writeUInt32BE(mr.addr >>> 0, 4);
  b.writeUInt32BE(mr.rkey >>> 0, 8);
  b.writeUInt32BE(cb.size >>> 0, 12);
  return b;
}

/** The data path's WRs and adverts of a connection whose buffers are registered. */
function dataWrs(cb: Cb): DataWrs {
  const recvMr = cb.recvMr as Mr;
  const sendMr = cb.sendMr as Mr;
  const rdmaMr = cb.rdmaMr as Mr;
  const rdmaSge = { addr: rdmaMr.addr, length: 0, lkey: rdmaMr.lkey };
  return {
    recv: { wrId: 0, sgList: [{ addr: recvMr.addr, length: INFO_SIZE, lkey: recvMr.lkey }] },
    send: { wrId: 0, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: sendMr.addr, length: INFO_SIZE, lkey: sendMr.lkey }] },
    rdma: { wrId: 0, opcode: WrOpcode.RDMA_READ, sendFlags: SendFlags.SIGNALED, sgList: [rdmaSge], rdma: { remoteAddr: 0, rkey: 0 } },
    rdmaSge,
    startInfo: cb.startMr ? advert(cb, cb.startMr) : null,
    rdmaInfo: advert(cb, rdmaMr),
  };
}

/** Put the advert `info` of a buffer into send_buf (rping_format_send). */
function formatSend(cb: Cb, info: Buffer): void {
  const s = cb.sendBuf;
  for (let i = 0; i < INFO_SIZE; i++) s[i] = info[i] as number;
  if (debug) DEBUG_LOG(`RDMA addr ${hex(s.readBigUInt64BE(0))} rkey ${hex(s.readUInt32BE(8))} len ${int32(s.readUInt32BE(12))}\n`);
}

/** The RDMA READ or WRITE of `length` bytes of rdma_buf, from or to the peer's advertised buffer. */
function rdmaWr(cb: Cb, opcode: WrOpcode, length: number): SendWr {
  const w = (cb.wr as DataWrs).rdma;
  w.opcode = opcode;
  (cb.wr as DataWrs).rdmaSge.length = length;
  w.rdma.remoteAddr = cb.remoteAddr;
  w.rdma.rkey = cb.remoteRkey;
  return w;
}

async function rpingTestServer(cb: Cb): Promise<number> {
  let ret = 0;
  // --json: the CPU time of the pings after the first --warmup ones, printed when the client leaves.
  let pings = 0;
  let cpu = process.cpuUsage();

  for (;;) {
    jitPing();
    if (pings++ === cb.warmup && cb.warmup > 0) cpu = process.cpuUsage();
    // Wait for the client's source advert.
    while (!semTake(cb)) await cb.sem.park();
    if (!inState(cb, TestState.RDMA_READ_ADV)) {
      ret = -1;
      break;
    }
    DEBUG_LOG('server received sink adv\n');

    ret = postSend(cb, rdmaWr(cb, WrOpcode.RDMA_READ, cb.remoteLen));
    if (ret) break;
    DEBUG_LOG('server posted rdma read req \n');

    while (!semTake(cb)) await cb.sem.park();
    if (!inState(cb, TestState.RDMA_READ_COMPLETE)) {
      ret = -1;
      break;
    }
    DEBUG_LOG('server received read complete\n');

    if (cb.verbose) out(Buffer.concat([Buffer.from('server ping data: '), cstr(cb.rdmaBuf as Buffer), Buffer.from('\n')]));

    // Tell the client to continue.
    ret = postSend(cb, (cb.wr as DataWrs).send);
    if (ret) break;
    DEBUG_LOG('server posted go ahead\n');

    // Wait for the client's sink advert.
    while (!semTake(cb)) await cb.sem.park();
    if (!inState(cb, TestState.RDMA_WRITE_ADV)) {
      ret = -1;
      break;
    }
    DEBUG_LOG('server received sink adv\n');

    // RDMA WRITE the data back: strlen(rdma_buf) + 1 bytes.
    const len = cstrLen(cb.rdmaBuf as Buffer) + 1;
    const wr = rdmaWr(cb, WrOpcode.RDMA_WRITE, len);
    if (debug) {
      const sge = wr.sgList[0] as { addr: number; lkey: number; length: number };
      DEBUG_LOG(`rdma write from lkey ${hex(sge.lkey)} laddr ${hex(sge.addr)} len ${int32(sge.length)}\n`);
    }
    ret = postSend(cb, wr);
    if (ret) break;

    while (!semTake(cb)) await cb.sem.park();
    if (!inState(cb, TestState.RDMA_WRITE_COMPLETE)) {
      ret = -1;
      break;
    }
    DEBUG_LOG('server rdma write complete \n');

    // Tell the client to begin again.
    ret = postSend(cb, (cb.wr as DataWrs).send);
    if (ret) break;
    DEBUG_LOG('server posted go ahead\n');
  }

  if (cb.json) {
    const used = process.cpuUsage(cpu);
    // The last turn of the loop waited for a ping that did not come.
    out(JSON.stringify({ tool: 'rping', role: 'server', pings: Math.max(0, pings - 1 - cb.warmup), warmup: cb.warmup, cpu_user_usec: used.user, cpu_sys_usec: used.system }) + '\n');
  }
  return stateOf(cb) === TestState.DISCONNECTED ? 0 : ret;
}

async function rpingBindServer(cb: Cb): Promise<number> {
  const id = cb.cmId as CmId;
  try {
    id.bindAddr(sockAddr(cb.sin, cb.port));
  } catch (e) {
    perror('rdma_bind_addr', e);
    return -1;
  }
  DEBUG_LOG('rdma_bind_addr successful\n');

  DEBUG_LOG('rdma_listen\n');
  try {
    await id.listen(3);
  } catch (e) {
    perror('rdma_listen', e);
    return -1;
  }
  return 0;
}

function postRecv(cb: Cb): number {
  try {
    (cb.qp as Qp).postRecv((cb.wr as DataWrs).recv);
    return 0;
  } catch (e) {
    return errnoFrom(e);
  }
}

/**
 * One connection of the persistent server (rping_persistent_server_thread). Every way out
 * destroys the connection's id, also after a failure (rping.c leaves it, one per failed
 * connection, for the life of the server).
 */
async function persistentServerThread(cb: Cb): Promise<void> {
  const child = cb.childCmId as CmId;
  await persistentServe(cb, child);
  try {
    await child.destroy();
  } catch {
    /* ignored */
  }
}

async function persistentServe(cb: Cb, child: CmId): Promise<void> {
  let ret = setupQp(cb, child);
  if (ret) {
    errOut(`setup_qp failed: ${ret}\n`);
    return;
  }

  ret = setupBuffers(cb);
  if (ret) {
    errOut(`rping_setup_buffers failed: ${ret}\n`);
    freeQp(cb);
    return;
  }

  ret = postRecv(cb);
  if (ret) {
    errOut(`ibv_post_recv failed: ${ret}\n`);
    freeBuffers(cb);
    freeQp(cb);
    return;
  }

  startCqThread(cb);

  ret = await rpingAccept(cb);
  if (ret) {
    errOut(`connect error ${ret}\n`);
    cancelCqThread(cb);
    freeBuffers(cb);
    freeQp(cb);
    return;
  }

  await rpingTestServer(cb);
  await rpingDisconnect(cb, child);
  await joinCqThread(cb);
  freeBuffers(cb);
  freeQp(cb);
}

async function rpingRunPersistentServer(listening: Cb): Promise<number> {
  const ret = await rpingBindServer(listening);
  if (ret) return ret;

  for (;;) {
    while (!semTake(listening)) await listening.sem.park();
    if (listening.state !== TestState.CONNECT_REQUEST) {
      errOut(`wait for CONNECT_REQUEST state ${listening.state}\n`);
      return -1;
    }

    const cb = cloneCb(listening);
    listening.acceptReady.post();

    // A detached "thread" per connection (an unexpected throw reaches the top-level handler).
    void persistentServerThread(cb);
  }
}

async function rpingRunServer(cb: Cb): Promise<number> {
  let ret = await rpingBindServer(cb);
  if (ret) return ret;

  while (!semTake(cb)) await cb.sem.park();
  if (!inState(cb, TestState.CONNECT_REQUEST)) return -1;
  const child = cb.childCmId as CmId;

  ret = setupConnection(cb, child);
  if (ret) return ret;

  ret = await rpingAccept(cb);
  if (ret) return connectFailed(cb, ret);

  ret = await rpingTestServer(cb);
  if (ret) errOut(`rping server failed: ${ret}\n`);
  else ret = 0;

  await rpingDisconnect(cb, child);
  await joinCqThread(cb);
  try {
    await child.destroy();
  } catch {
    /* ignored */
  }
  freeBuffers(cb);
  freeQp(cb);
  return ret;
}

// -- client ---------------------------------------------------------------------------------------

const PING_PREFIX = Buffer.from('rdma-ping-', 'latin1');
const LETTERS = 122 - 65 + 1;

/** The letter run 'A'..'z', 'A'.. long enough to cut any ping's run of a `size`-byte buffer from. */
function letterRun(size: number): Buffer {
  const b = Buffer.alloc(Math.max(size, 0) + LETTERS);
  for (let i = 0; i < b.length; i++) b[i] = 65 + (i % LETTERS);
  return b;
}

/**
 * Put "rdma-ping-N: " and the letter run from `start` into start_buf (`pattern` is
 * {@link letterRun}'s).
 */
function fillStartBuf(buf: Buffer, size: number, ping: number, start: number, pattern: Buffer): void {
  // snprintf(buf, size, "rdma-ping-%d: ", ping); the run starts after the untruncated length.
  let p = PING_PREFIX.length;
  for (let i = 0; i < p; i++) buf[i] = PING_PREFIX[i] as number;
  let v = ping;
  if (v < 0) {
    buf[p++] = 0x2d; // '-'
    v = -v;
  }
  let digits = 1;
  for (let t = v; t >= 10; t = Math.floor(t / 10)) digits++;
  for (let k = p + digits - 1; k >= p; k--) {
    buf[k] = 0x30 + (v % 10);
    v = Math.floor(v / 10);
  }
  p += digits;
  buf[p++] = 0x3a; // ':'
  buf[p++] = 0x20; // ' '
  if (p < size) {
    const from = start - 65;
    copyBytes(pattern, from, buf, p, size - p);
  }
  buf[size - 1] = 0;
}

async function rpingTestClient(cb: Cb): Promise<number> {
  let ret = 0;
  let start = 65;
  const startBuf = cb.startBuf as Buffer;
  const rdmaBuf = cb.rdmaBuf as Buffer;
  const wrs = cb.wr as DataWrs;
  const pattern = letterRun(cb.size);
  const total = cb.count ? cb.count + cb.warmup : 0;
  let t0 = process.hrtime.bigint();
  let cpu = process.cpuUsage();

  for (let ping = 0; !total || ping < total; ping = (ping + 1) | 0) {
    jitPing();
    if (ping === cb.warmup && cb.warmup > 0) {
      t0 = process.hrtime.bigint();
      cpu = process.cpuUsage();
    }
    cb.state = TestState.RDMA_READ_ADV;

    // Put some ascii text in the buffer.
    fillStartBuf(startBuf, cb.size, ping, start, pattern);
    start++;
    if (start > 122) start = 65;

    formatSend(cb, wrs.startInfo as Buffer);
    ret = postSend(cb, wrs.send);
    if (ret) break;

    // Wait for the server's go ahead.
    while (!semTake(cb)) await cb.sem.park();
    if (!inState(cb, TestState.RDMA_WRITE_ADV)) {
      ret = -1;
      break;
    }

    formatSend(cb, wrs.rdmaInfo);
    ret = postSend(cb, wrs.send);
    if (ret) break;

    // Wait for the server to say the RDMA Write is complete.
    while (!semTake(cb)) await cb.sem.park();
    if (!inState(cb, TestState.RDMA_WRITE_COMPLETE)) {
      ret = -1;
      break;
    }

    // Both buffers are cb.size bytes long.
    if (cb.validate && !startBuf.equals(rdmaBuf)) {
      errOut('data mismatch!\n');
      ret = -1;
      break;
    }

    if (cb.verbose) out(Buffer.concat([Buffer.from('ping data: '), cstr(rdmaBuf), Buffer.from('\n')]));
  }
  if (cb.json && ret === 0 && cb.count) {
    const usec = Number((process.hrtime.bigint() - t0) / 1000n);
    const used = process.cpuUsage(cpu);
    out(JSON.stringify({ tool: 'rping', size: cb.size, pings: cb.count, warmup: cb.warmup, usec, usec_per_ping: usec / cb.count, cpu_user_usec: used.user, cpu_sys_usec: used.system }) + '\n');
  }

  return stateOf(cb) === TestState.DISCONNECTED ? 0 : ret;
}

async function rpingConnectClient(cb: Cb): Promise<number> {
  const id = cb.cmId as CmId;
  try {
    await id.connect(connParam(cb));
  } catch (e) {
    perror('rdma_connect', e);
    return -1;
  }

  while (!semTake(cb)) await cb.sem.park();
  if (!inState(cb, TestState.CONNECTED)) return -1;

  if (cb.selfCreateQp) {
    const { ret, errno } = selfModifyQp(cb, id);
    if (ret) {
      perror('rping_modify_qp', RdmaError.fromErrno(errno));
      return ret;
    }
    try {
      id.establish();
    } catch (e) {
      perror('rdma_establish', e);
      return -1;
    }
  }

  DEBUG_LOG('rdma_connect successful\n');
  return 0;
}

async function rpingBindClient(cb: Cb): Promise<number> {
  const id = cb.cmId as CmId;
  const dst = sockAddr(cb.sin, cb.port);
  try {
    if (cb.ssource) await id.resolveAddr(sockAddr(cb.ssource, 0), dst, 2000);
    else await id.resolveAddr(null, dst, 2000);
  } catch (e) {
    perror('rdma_resolve_addr', e);
    return -1;
  }

  while (!semTake(cb)) await cb.sem.park();
  if (stateOf(cb) !== TestState.ROUTE_RESOLVED) {
    errOut(`waiting for addr/route resolution state ${cb.state}\n`);
    return -1;
  }

  DEBUG_LOG('rdma_resolve_addr - rdma_resolve_route successful\n');
  return 0;
}

/**
 * `connect error N` and the undoing of {@link setupConnection}. rping.c frees with the CQ thread
 * still running (server) or joins it (client) — a join that never returns when the connection
 * stays up (`-q`) — so the CQ task is cancelled first.
 */
async function connectFailed(cb: Cb, ret: number): Promise<number> {
  errOut(`connect error ${ret}\n`);
  cancelCqThread(cb);
  freeBuffers(cb);
  freeQp(cb);
  return ret;
}

/**
 * The per-connection setup both sides share (rping.c repeats it in the server and the client):
 * QP, buffers, the first receive, the CQ thread. Prints rping's message and undoes what was done
 * on failure.
 */
function setupConnection(cb: Cb, id: CmId): number {
  let ret = setupQp(cb, id);
  if (ret) {
    errOut(`setup_qp failed: ${ret}\n`);
    return ret;
  }
  ret = setupBuffers(cb);
  if (ret) {
    errOut(`rping_setup_buffers failed: ${ret}\n`);
    freeQp(cb);
    return ret;
  }
  ret = postRecv(cb);
  if (ret) {
    errOut(`ibv_post_recv failed: ${ret}\n`);
    freeBuffers(cb);
    freeQp(cb);
    return ret;
  }
  startCqThread(cb);
  return 0;
}

async function rpingRunClient(cb: Cb): Promise<number> {
  const id = cb.cmId as CmId;
  let ret = await rpingBindClient(cb);
  if (ret) return ret;

  ret = setupConnection(cb, id);
  if (ret) return ret;

  ret = await rpingConnectClient(cb);
  if (ret) return connectFailed(cb, ret);

  ret = await rpingTestClient(cb);
  if (ret) errOut(`rping client failed: ${ret}\n`);
  else ret = 0;

  await rpingDisconnect(cb, id);
  await joinCqThread(cb);
  freeBuffers(cb);
  freeQp(cb);
  return ret;
}

// -- main -----------------------------------------------------------------------------------------

function usage(name: string): void {
  out(
    `${name} -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n` +
      `${name} -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n` +
      '\t-c\t\tclient side\n' +
      '\t-I\t\tSource address to bind to for client.\n' +
      '\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n' +
      '\t-v\t\tdisplay ping data to stdout\n' +
      '\t-V\t\tvalidate ping data\n' +
      '\t-d\t\tdebug printfs\n' +
      '\t-S size \tping data size\n' +
      '\t-C count\tping count times\n' +
      '\t-a addr\t\taddress\n' +
      '\t-p port\t\tport\n' +
      '\t-P\t\tpersistent server mode allowing multiple connections\n' +
      '\t-q\t\tuse self-created, self-modified QP\n',
  );
}

/** get_addr(): resolve -a/-I; prints the getaddrinfo failure on stdout and returns the EAI code. */
async function getAddr(dst: string): Promise<{ ret: number; addr?: HostAddr }> {
  try {
    return { ret: 0, addr: await resolveHost(dst) };
  } catch (e) {
    out(`getaddrinfo failed (${gaiMessage(e)}) - invalid hostname or IP address\n`);
    return { ret: eaiOf(e) };
  }
}

async function main(argv: readonly string[]): Promise<number> {
  const cb = newCb();
  let ret = 0;
  let persistentServer = false;

  const long = takeLongOptions(argv, ['json'], ['warmup']);
  if (long.bad) {
    errOut('rping: --warmup needs a number of pings\n');
    usage('rping');
    return Errno.EINVAL;
  }
  cb.json = long.flags.has('json');
  cb.warmup = long.values.get('warmup') ?? 0;
  const g = new Getopt(long.args, 'a:I:Pp:C:S:t:scvVdq');
  for (let o = g.next(); o; o = g.next()) {
    const optarg = o.optarg ?? '';
    switch (o.opt) {
      case 'a': {
        const r = await getAddr(optarg);
        ret = r.ret;
        if (r.addr) cb.sin = r.addr;
        break;
      }
      case 'I': {
        const r = await getAddr(optarg);
        ret = r.ret;
        if (r.addr) cb.ssource = r.addr;
        break;
      }
      case 'P':
        persistentServer = true;
        cb.persistent = true;
        break;
      case 'p':
        cb.port = atoi(optarg) & 0xffff;
        DEBUG_LOG(`port ${atoi(optarg)}\n`);
        break;
      case 's':
        cb.server = 1;
        DEBUG_LOG('server\n');
        break;
      case 'c':
        cb.server = 0;
        DEBUG_LOG('client\n');
        break;
      case 'S':
        cb.size = atoi(optarg);
        // The C test compares an int with a size_t: a negative size passes it.
        if ((cb.size >= 0 && cb.size < RPING_MIN_BUFSIZE) || cb.size > RPING_BUFSIZE - 1) {
          errOut(`Invalid size ${cb.size} (valid range is ${RPING_MIN_BUFSIZE} to ${RPING_BUFSIZE})\n`);
          ret = Errno.EINVAL;
        } else DEBUG_LOG(`size ${atoi(optarg)}\n`);
        break;
      case 'C':
        cb.count = atoi(optarg);
        if (cb.count < 0) {
          errOut(`Invalid count ${cb.count}\n`);
          ret = Errno.EINVAL;
        } else DEBUG_LOG(`count ${cb.count}\n`);
        break;
      case 'v':
        cb.verbose = true;
        DEBUG_LOG('verbose\n');
        break;
      case 'V':
        cb.validate = true;
        DEBUG_LOG('validate data\n');
        break;
      case 'd':
        debug = true;
        break;
      case 'q':
        cb.selfCreateQp = true;
        break;
      default:
        // Unknown option, missing argument, and -t (in the option string, never handled).
        usage('rping');
        return Errno.EINVAL;
    }
  }
  if (ret) return ret;

  if (cb.server === -1) {
    usage('rping');
    return Errno.EINVAL;
  }

  const ch = createFirstEventChannel();
  if (!ch.channel) return ch.errno;
  cb.cmChannel = ch.channel;

  try {
    cb.cmId = createId(cb.cmChannel, cb, PortSpace.TCP);
  } catch (e) {
    perror('rdma_create_id', e);
    quiet(() => ch.channel?.destroy());
    return -1;
  }
  DEBUG_LOG(`created cm_id ${objId(cb.cmId)}\n`);

  // The eventfd that tells the CM thread to leave.
  const cmStop = new AbortController();
  const cmTask = cmThread(cb, cmStop.signal);

  if (cb.server) {
    if (persistentServer) ret = await rpingRunPersistentServer(cb);
    else ret = await rpingRunServer(cb);
  } else {
    ret = await rpingRunClient(cb);
  }

  DEBUG_LOG(`destroy cm_id ${objId(cb.cmId)}\n`);
  try {
    await cb.cmId.destroy();
  } catch {
    /* ignored */
  }

  cmStop.abort();
  await cmTask;
  quiet(() => cb.cmChannel?.destroy());
  return ret;
}

/**
 * How many pings (counted by the client and the server alike, warm-up included) run before TurboFan
 * starts on a machine with few CPUs: a shorter run does without its compile jobs (see
 * deferOptimization in cli/startup.ts).
 */
export const RPING_JIT_DEFER = 1000;

// TurboFan starts after the first RPING_JIT_DEFER pings (with few CPUs); from then on the ping
// path reaches it sooner than with V8's interrupt budget, and the compile jobs run only while the
// tool's thread waits for the peer (see cli/startup.ts).
const jitPing = deferOptimization(RPING_JIT_DEFER);
setInterruptBudget(16384);
void idleBackgroundThreads();
runMain('rping', main);
