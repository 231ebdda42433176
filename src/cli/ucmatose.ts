#!/usr/bin/env node
/**
 * ucmatose: RDMA CM connection and simple ping-pong test — a port of rdma-core's
 * `librdmacm/examples/cmatose.c` (same options, defaults, messages, return status and exit code)
 * onto this package's CM and verbs.
 *
 * The server listens, accepts `-c` connections, sends `-C` messages of `-S` bytes on each, waits
 * for as many replies, then disconnects. The client resolves, connects `-c` ids at once on one
 * event channel, receives the messages, sends the replies and waits for the server's disconnect.
 * Both print `test complete` and `return status N`, and exit with N (mod 256).
 *
 * The C tool busy-polls CQs that have no completion channel; here an empty poll yields to the
 * event loop (setImmediate) before polling again, so sockets keep being served.
 */
import './startup.js';
import {
  Errno,
  Access,
  CmEventType,
  PortSpace,
  QpType,
  RAI,
  RdmaOption,
  WrOpcode,
  createEventChannel,
  createId,
  gaiStrerror,
  rdmaEventStr,
  type CmEvent,
  type CmId,
  type Cq,
  type EventChannel,
  type Mr,
  type Pd,
  type RdmaAddrinfo,
  type RdmaAddrinfoHints,
} from './rdma.js';
import { atoi, cMalloc, errnoFrom, errOut, out, perror, runMain, strtoul, u8 } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';
import { addressFormatArg, allocCmNodes, cmEventLoop, getRdmaAddr, prefixIs } from './common.js';

const PROG = 'ucmatose';
const OPTSTRING = 's:b:f:P:c:C:S:t:p:a:m';

enum CqIndex {
  SEND = 0,
  RECV = 1,
}

/** `struct cmatest_node`. */
interface Node {
  id: number;
  cmaId: CmId | null;
  connected: boolean;
  pd: Pd | null;
  cq: [Cq | null, Cq | null];
  mr: Mr | null;
  mem: Buffer | null;
}

/** `struct cmatest`. */
const test = {
  channel: null as EventChannel | null,
  nodes: [] as Node[],
  connIndex: 0,
  connectsLeft: 0,
  disconnectsLeft: 0,
  rai: null as RdmaAddrinfo | null,
};

let connections = 1;
let messageSize = 100;
let messageCount = 10;
let port = '7471';
let setTos = false;
let tos = 0;
let setTimeoutOpt = false;
let ackTimeout = 0;
let migrate = false;
let dstAddr: string | null = null;
let srcAddr: string | null = null;
const hints: RdmaAddrinfoHints & { portSpace: number } = { portSpace: PortSpace.TCP };
/** Ids rejected with "failing connection request" (never destroyed by the C tool either). */
const rejected: CmId[] = [];

function createMessage(node: Node): number {
  if (!messageSize) messageCount = 0;
  if (!messageCount) return 0;
  const mem = cMalloc(messageSize); // a negative -S cannot be allocated
  if (!mem) {
    out('failed message allocation\n');
    return -1;
  }
  node.mem = mem;
  try {
    node.mr = (node.pd as Pd).regMr(node.mem, Access.LOCAL_WRITE);
  } catch {
    out('failed to reg MR\n');
    node.mem = null;
    return -1;
  }
  return 0;
}

function initNode(node: Node): number {
  const id = node.cmaId as CmId;
  const ctx = id.verbs;
  try {
    if (!ctx) throw new Error('no device');
    node.pd = ctx.allocPd();
  } catch {
    out('cmatose: unable to allocate PD\n');
    return -Errno.ENOMEM;
  }
  const cqe = messageCount ? messageCount : 1;
  try {
    node.cq[CqIndex.SEND] = ctx.createCq(cqe, null, 0, node);
    node.cq[CqIndex.RECV] = ctx.createCq(cqe, null, 0, node);
  } catch {
    out('cmatose: unable to create CQ\n');
    return -Errno.ENOMEM;
  }
  try {
    id.createQp(node.pd, {
      cap: { maxSendWr: cqe, maxRecvWr: cqe, maxSendSge: 1, maxRecvSge: 1 },
      qpContext: node,
      sqSigAll: true,
      qpType: QpType.RC,
      sendCq: node.cq[CqIndex.SEND] as Cq,
      recvCq: node.cq[CqIndex.RECV] as Cq,
    });
  } catch (e) {
    perror('cmatose: unable to create QP', e);
    return -1;
  }
  const ret = createMessage(node);
  if (ret) out(`cmatose: failed to create messages: ${ret}\n`);
  return ret;
}

function postRecvs(node: Node): number {
  if (!messageCount) return 0;
  const mr = node.mr as Mr;
  const wr = { wrId: node.id, sgList: [{ addr: mr.addr, length: messageSize, lkey: mr.lkey }] };
  for (let i = 0; i < messageCount; i++) {
    try {
      node.cmaId?.qp?.postRecv(wr);
    } catch (e) {
      const ret = errnoFrom(e);
      out(`failed to post receives: ${ret}\n`);
      return ret;
    }
  }
  return 0;
}

function postSends(node: Node): number {
  if (!node.connected || !messageCount) return 0;
  const mr = node.mr as Mr;
  const wr = { wrId: node.id, opcode: WrOpcode.SEND, sendFlags: 0, sgList: [{ addr: mr.addr, length: messageSize, lkey: mr.lkey }] };
  for (let i = 0; i < messageCount; i++) {
    try {
      node.cmaId?.qp?.postSend(wr);
    } catch (e) {
      const ret = errnoFrom(e);
      out(`failed to post sends: ${ret}\n`);
      return ret;
    }
  }
  return 0;
}

function connectError(): void {
  test.connectsLeft--;
}

async function addrHandler(node: Node): Promise<number> {
  const id = node.cmaId as CmId;
  if (setTos) {
    try {
      id.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_TOS, tos);
    } catch (e) {
      perror('cmatose: set TOS option failed', e);
    }
  }
  if (setTimeoutOpt) {
    try {
      id.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_ACK_TIMEOUT, ackTimeout);
    } catch (e) {
      perror('cmatose: set ack timeout option failed', e);
    }
  }
  try {
    await id.resolveRoute(2000);
  } catch (e) {
    perror('cmatose: resolve route failed', e);
    connectError();
    return -1;
  }
  return 0;
}

async function routeHandler(node: Node): Promise<number> {
  let ret = initNode(node);
  if (!ret) ret = postRecvs(node);
  if (!ret) {
    try {
      await (node.cmaId as CmId).connect({
        responderResources: 1,
        initiatorDepth: 1,
        retryCount: 5,
        rnrRetryCount: 0,
        privateData: new Uint8Array(0),
      });
    } catch (e) {
      perror('cmatose: failure connecting', e);
      ret = -1;
    }
  }
  if (ret) connectError();
  return ret;
}

async function connectHandler(cmaId: CmId): Promise<number> {
  let ret: number;
  if (test.connIndex === connections) {
    ret = -Errno.ENOMEM;
  } else {
    const node = test.nodes[test.connIndex++] as Node;
    node.cmaId = cmaId;
    cmaId.context = node;
    if (setTimeoutOpt) {
      try {
        cmaId.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_ACK_TIMEOUT, ackTimeout);
      } catch (e) {
        perror('cmatose: set ack timeout option failed', e);
      }
    }
    ret = initNode(node);
    if (!ret) ret = postRecvs(node);
    if (!ret) {
      try {
        await cmaId.accept();
        return 0;
      } catch (e) {
        perror('cmatose: failure accepting', e);
        ret = -1;
      }
    }
    node.cmaId = null;
    connectError();
  }
  out('cmatose: failing connection request\n');
  try {
    cmaId.reject();
  } catch {
    /* ignored, as in cmatose.c */
  }
  rejected.push(cmaId);
  return ret;
}

async function cmaHandler(cmaId: CmId, event: CmEvent): Promise<number> {
  let ret = 0;
  switch (event.event) {
    case CmEventType.ADDR_RESOLVED:
      ret = await addrHandler(cmaId.context as Node);
      break;
    case CmEventType.ROUTE_RESOLVED:
      ret = await routeHandler(cmaId.context as Node);
      break;
    case CmEventType.CONNECT_REQUEST:
      ret = await connectHandler(cmaId);
      break;
    case CmEventType.ESTABLISHED:
      (cmaId.context as Node).connected = true;
      test.connectsLeft--;
      test.disconnectsLeft++;
      break;
    case CmEventType.ADDR_ERROR:
    case CmEventType.ROUTE_ERROR:
    case CmEventType.CONNECT_ERROR:
    case CmEventType.UNREACHABLE:
    case CmEventType.REJECTED:
      out(`cmatose: event: ${rdmaEventStr(event.event)}, error: ${event.status}\n`);
      connectError();
      ret = event.status;
      break;
    case CmEventType.DISCONNECTED:
      cmaId.disconnect().catch(() => {});
      test.disconnectsLeft--;
      break;
    case CmEventType.DEVICE_REMOVAL:
      // Cleanup happens after the test completes.
      break;
    default:
      break;
  }
  return ret;
}

async function destroyNode(node: Node): Promise<void> {
  const id = node.cmaId;
  if (!id) return;
  const quiet = (f: () => void): void => {
    try {
      f();
    } catch {
      /* as the C tool, destroy errors are not reported */
    }
  };
  if (id.qp) quiet(() => id.destroyQp());
  for (const cq of node.cq) if (cq) quiet(() => cq.destroy());
  if (node.mem && node.mr) quiet(() => (node.mr as Mr).dereg());
  if (node.pd) quiet(() => (node.pd as Pd).dealloc());
  // The id after all device resources.
  await id.destroy().catch(() => {});
}

function allocNodes(): number {
  const newNode = (i: number): Node => ({ id: i, cmaId: null, connected: false, pd: null, cq: [null, null], mr: null, mem: null });
  const r = allocCmNodes('cmatose', connections, newNode, test.channel, dstAddr ? (hints.portSpace as PortSpace) : null);
  test.nodes = r.nodes;
  return r.ret;
}

async function destroyNodes(): Promise<void> {
  for (const node of test.nodes) await destroyNode(node);
  for (const id of rejected) await id.destroy().catch(() => {});
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

async function pollCqs(index: CqIndex): Promise<number> {
  for (const node of test.nodes) {
    if (!node.connected) continue;
    const cq = node.cq[index] as Cq;
    for (let done = 0; done < messageCount; ) {
      let n: number;
      try {
        n = cq.poll(8).length;
      } catch (e) {
        const ret = -errnoFrom(e);
        out(`cmatose: failed polling CQ: ${ret}\n`);
        return ret;
      }
      if (n === 0) await tick();
      done += n;
    }
  }
  return 0;
}

function eventLoop(left: () => number, what: string): Promise<number> {
  return cmEventLoop(
    test.channel as EventChannel,
    left,
    (event) => cmaHandler(event.id, event),
    (e) => {
      perror(`cmatose: failure in rdma_get_cm_event in ${what} events`, e);
      return errnoFrom(e);
    },
  );
}

const connectEvents = (): Promise<number> => eventLoop(() => test.connectsLeft, 'connect');
const disconnectEvents = (): Promise<number> => eventLoop(() => test.disconnectsLeft, 'disconnect');

async function migrateChannel(listenId: CmId | null): Promise<number> {
  out('migrating to new event channel\n');
  let channel: EventChannel;
  try {
    channel = createEventChannel();
  } catch (e) {
    perror('cmatose: failed to create event channel', e);
    return -1;
  }
  let ret = 0;
  let failure: unknown = null;
  const move = async (id: CmId | null): Promise<void> => {
    try {
      if (!id) throw Object.assign(new Error('no id'), { errno: Errno.EINVAL });
      await id.migrate(channel);
    } catch (e) {
      failure = e;
      ret = -1;
    }
  };
  if (listenId) await move(listenId);
  for (let i = 0; i < connections && !ret; i++) await move((test.nodes[i] as Node).cmaId);
  if (!ret) {
    try {
      test.channel?.destroy();
    } catch {
      /* rdma_destroy_event_channel cannot fail */
    }
    test.channel = channel;
  } else perror('cmatose: failure migrating to channel', failure);
  return ret;
}

async function runServer(): Promise<number> {
  out('cmatose: starting server\n');
  let listenId: CmId;
  try {
    listenId = createId(test.channel, test, hints.portSpace as PortSpace);
  } catch (e) {
    perror('cmatose: listen request failed', e);
    return -1;
  }
  let ret: number;
  run: {
    const r = await getRdmaAddr(srcAddr, dstAddr, port, hints);
    ret = r.ret;
    if (ret) {
      out(`cmatose: getrdmaaddr error: ${gaiStrerror(ret)}\n`);
      break run;
    }
    test.rai = r.rai;
    try {
      listenId.bindAddr((r.rai as RdmaAddrinfo).srcAddr as NonNullable<RdmaAddrinfo['srcAddr']>);
    } catch (e) {
      perror('cmatose: bind address failed', e);
      ret = -1;
      break run;
    }
    try {
      await listenId.listen(0);
    } catch (e) {
      perror('cmatose: failure trying to listen', e);
      ret = -1;
      break run;
    }
    ret = await connectEvents();
    if (ret) break run;
    if (messageCount) {
      out('initiating data transfers\n');
      for (const node of test.nodes) {
        ret = postSends(node);
        if (ret) break run;
      }
      out('completing sends\n');
      ret = await pollCqs(CqIndex.SEND);
      if (ret) break run;
      out('receiving data transfers\n');
      ret = await pollCqs(CqIndex.RECV);
      if (ret) break run;
      out('data transfers complete\n');
    }
    if (migrate) {
      ret = await migrateChannel(listenId);
      if (ret) break run;
    }
    out('cmatose: disconnecting\n');
    for (const node of test.nodes) {
      if (!node.connected) continue;
      node.connected = false;
      (node.cmaId as CmId).disconnect().catch(() => {});
    }
    ret = await disconnectEvents();
    out('disconnected\n');
  }
  await listenId.destroy().catch(() => {});
  return ret;
}

async function runClient(): Promise<number> {
  out('cmatose: starting client\n');
  const r = await getRdmaAddr(srcAddr, dstAddr, port, hints);
  if (r.ret) {
    out(`cmatose: getaddrinfo error: ${gaiStrerror(r.ret)}\n`);
    return r.ret;
  }
  const rai = r.rai as RdmaAddrinfo;
  test.rai = rai;
  out('cmatose: connecting\n');
  for (const node of test.nodes) {
    try {
      await (node.cmaId as CmId).resolveAddr(rai.srcAddr, rai.dstAddr as NonNullable<RdmaAddrinfo['dstAddr']>, 2000);
    } catch (e) {
      perror('cmatose: failure getting addr', e);
      connectError();
      return -1;
    }
  }
  let ret = await connectEvents();
  disc: {
    if (ret) break disc;
    if (messageCount) {
      out('receiving data transfers\n');
      ret = await pollCqs(CqIndex.RECV);
      if (ret) break disc;
      out('sending replies\n');
      for (const node of test.nodes) {
        ret = postSends(node);
        if (ret) break disc;
      }
      out('data transfers complete\n');
    }
    ret = 0;
    if (migrate) {
      ret = await migrateChannel(null);
      if (ret) return ret;
    }
  }
  const ret2 = await disconnectEvents();
  if (ret2) ret = ret2;
  return ret;
}

function usage(): number {
  out(`usage: ${PROG}\n`);
  out('\t[-s server_address]\n');
  out('\t[-b bind_address]\n');
  out('\t[-f address_format]\n');
  out('\t    name, ip, ipv6, or gid\n');
  out('\t[-P port_space]\n');
  out('\t    tcp or ib\n');
  out('\t[-c connections]\n');
  out('\t[-C message_count]\n');
  out('\t[-S message_size]\n');
  out('\t[-t type_of_service]\n');
  out('\t[-p port_number]\n');
  out('\t[-m(igrate)]\n');
  out('\t[-a ack_timeout]\n');
  return 1;
}

async function main(argv: string[]): Promise<number> {
  const g = new Getopt(argv, OPTSTRING);
  for (let it = g.next(); it; it = g.next()) {
    const optarg = it.optarg ?? '';
    switch (it.opt) {
      case 's':
        dstAddr = optarg;
        break;
      case 'b':
        srcAddr = optarg;
        break;
      case 'f':
        addressFormatArg(optarg, hints);
        break;
      case 'P':
        if (prefixIs(optarg, 'ib', 2)) hints.portSpace = PortSpace.IB;
        else if (!prefixIs(optarg, 'tcp', 3)) errOut('Warning: unknown port space format\n');
        break;
      case 'c':
        connections = atoi(optarg);
        break;
      case 'C':
        messageCount = atoi(optarg);
        break;
      case 'S':
        messageSize = atoi(optarg);
        break;
      case 't':
        setTos = true;
        tos = u8(strtoul(optarg, 0));
        break;
      case 'p':
        port = optarg;
        break;
      case 'a':
        setTimeoutOpt = true;
        ackTimeout = u8(strtoul(optarg, 0));
        break;
      case 'm':
        migrate = true;
        break;
      default:
        getoptComplaint(PROG, it, OPTSTRING);
        return usage();
    }
  }

  test.connectsLeft = connections;
  try {
    test.channel = createEventChannel();
  } catch {
    out('failed to create event channel\n');
    return 1;
  }
  if (allocNodes()) return 1;
  let ret: number;
  if (dstAddr) ret = await runClient();
  else {
    hints.flags = (hints.flags ?? 0) | RAI.PASSIVE;
    ret = await runServer();
  }
  out('test complete\n');
  await destroyNodes();
  try {
    test.channel?.destroy();
  } catch {
    /* ids of failed connection attempts may remain; the C tool closes the fd regardless */
  }
  out(`return status ${ret}\n`);
  return ret;
}

runMain(PROG, main);
