#!/usr/bin/env node
/**
 * udaddy: RDMA CM datagram setup and simple ping-pong test — a port of rdma-core's
 * `librdmacm/examples/udaddy.c` (same options, defaults, messages, return status and exit code)
 * onto this package's CM and verbs.
 *
 * The server listens on port 7174 of the UDP port space (the port is fixed: `-p` selects the port
 * space), answers `-c` service requests (SIDR) with a UD QP each, waits for `-C` datagrams of
 * `-S` bytes on each, builds the reply address handle from the first one, and sends as many
 * back. The client resolves and "connects" `-c` ids at once on one event channel (the SIDR reply
 * carries the server's QP number and Q_Key and the address handle attributes), sends its
 * datagrams (SEND_WITH_IMM, the immediate data being its QP number) and waits for the replies.
 * Both print `test complete` and `return status N`, and exit with N (mod 256).
 */
import './startup.js';
import {
  Errno,
  CmEventType,
  PortSpace,
  RAI,
  QpAttrMask,
  RdmaOption,
  GRH_AREA_LEN,
  createAhFromWc,
  createId,
  rdmaEventStr,
  type CmEvent,
  type CmId,
  type EventChannel,
  type RdmaAddrinfo,
  type RdmaAddrinfoHints,
  type Wc,
} from './rdma-ud.js';
import { atoi, errnoFrom, errOut, out, runMain, strtoul, u8 } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';
import { addressFormatArg, allocCmNodes, createFirstEventChannel, getRdmaAddr, prefixIs } from './common.js';
import { PORT_SPACE_USAGE, UdTest, newUdNode, portSpaceArg, type UdNode } from './ud-test.js';

const PROG = 'udaddy';
const OPTSTRING = 's:b:c:C:S:t:p:P:f:';

/** `struct cmatest`. */
const test = {
  channel: null as EventChannel | null,
  nodes: [] as UdNode[],
  connIndex: 0,
  connectsLeft: 0,
  rai: null as RdmaAddrinfo | null,
};

const ud = new UdTest(PROG);
let connections = 1;
/** Fixed: udaddy has no option for the port. */
const port = '7174';
let setTos = false;
let tos = 0;
let dstAddr: string | null = null;
let srcAddr: string | null = null;
const hints: RdmaAddrinfoHints & { portSpace: number } = { portSpace: PortSpace.UDP };
/** Ids refused with "failing connection request" (never destroyed by the C tool either). */
const rejected: CmId[] = [];

function connectError(): void {
  test.connectsLeft--;
}

async function addrHandler(node: UdNode): Promise<number> {
  const id = node.cmaId as CmId;
  if (setTos) {
    try {
      id.setOption(RdmaOption.LEVEL_ID, RdmaOption.ID_TOS, tos);
    } catch (e) {
      ud.perror('udaddy: set TOS option failed', e);
    }
  }
  try {
    await id.resolveRoute(2000);
  } catch (e) {
    ud.perror('udaddy: resolve route failed', e);
    connectError();
    return -1;
  }
  return 0;
}

async function routeHandler(node: UdNode): Promise<number> {
  let ret = ud.verifyTestParams(node);
  if (!ret) ret = ud.initNode(node);
  if (!ret) ret = ud.postRecvs(node);
  if (!ret) {
    try {
      // conn_param zeroed but for the private data (rdma_getaddrinfo's ai_connect: none here).
      await (node.cmaId as CmId).connect({ privateData: new Uint8Array(0), responderResources: 0, initiatorDepth: 0, retryCount: 0, rnrRetryCount: 0 });
    } catch (e) {
      ud.perror('udaddy: failure connecting', e);
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
    const node = test.nodes[test.connIndex++] as UdNode;
    node.cmaId = cmaId;
    cmaId.context = node;
    ret = ud.verifyTestParams(node);
    if (!ret) ret = ud.initNode(node);
    if (!ret) ret = ud.postRecvs(node);
    if (!ret) {
      try {
        // A UD accept answers the SIDR request at once; conn_param carries only our QP number.
        await cmaId.accept({ privateData: new Uint8Array(0), qpNum: cmaId.qp?.qpNum ?? 0 });
        node.connected = true;
        test.connectsLeft--;
        return 0;
      } catch (e) {
        ud.perror('udaddy: failure accepting', e);
        ret = -1;
      }
    }
    node.cmaId = null;
    connectError();
  }
  out('udaddy: failing connection request\n');
  try {
    cmaId.reject();
  } catch {
    /* ignored, as in udaddy.c */
  }
  rejected.push(cmaId);
  return ret;
}

/** ESTABLISHED on the client: the SIDR reply's QP number, Q_Key and address handle. */
function resolvedHandler(node: UdNode, event: CmEvent): number {
  if (ud.setRemote(node, event.param.ud)) {
    connectError();
    return -1;
  }
  node.connected = true;
  test.connectsLeft--;
  return 0;
}

async function cmaHandler(cmaId: CmId, event: CmEvent): Promise<number> {
  let ret = 0;
  switch (event.event) {
    case CmEventType.ADDR_RESOLVED:
      ret = await addrHandler(cmaId.context as UdNode);
      break;
    case CmEventType.ROUTE_RESOLVED:
      ret = await routeHandler(cmaId.context as UdNode);
      break;
    case CmEventType.CONNECT_REQUEST:
      ret = await connectHandler(cmaId);
      break;
    case CmEventType.ESTABLISHED:
      ret = resolvedHandler(cmaId.context as UdNode, event);
      break;
    case CmEventType.ADDR_ERROR:
    case CmEventType.ROUTE_ERROR:
    case CmEventType.CONNECT_ERROR:
    case CmEventType.UNREACHABLE:
    case CmEventType.REJECTED:
      out(`udaddy: event: ${rdmaEventStr(event.event)}, error: ${event.status}\n`);
      connectError();
      ret = event.status;
      break;
    case CmEventType.DEVICE_REMOVAL:
      // Cleanup happens after the test completes.
      break;
    default:
      break;
  }
  return ret;
}

function allocNodes(): number {
  const r = allocCmNodes(PROG, connections, newUdNode, test.channel, dstAddr !== null ? (hints.portSpace as PortSpace) : null);
  test.nodes = r.nodes;
  return r.ret;
}

async function destroyNodes(): Promise<void> {
  for (const node of test.nodes) await ud.destroyNode(node);
  for (const id of rejected) await id.destroy().catch(() => {});
}

/**
 * `create_reply_ah()`: the server answers the sender of the first datagram: an address handle
 * from its completion and GRH, the QP number it put in the immediate data, our own Q_Key.
 */
function createReplyAh(node: UdNode, wc: Wc): number {
  const id = node.cmaId as CmId;
  try {
    node.ah = createAhFromWc(node.pd as NonNullable<UdNode['pd']>, wc, (node.mem as Buffer).subarray(0, GRH_AREA_LEN), id.portNum);
  } catch (e) {
    ud.errno = errnoFrom(e);
    return -1;
  }
  node.remoteQpn = wc.immData >>> 0;
  try {
    node.remoteQkey = (id.qp as NonNullable<CmId['qp']>).query(QpAttrMask.QKEY).qkey ?? 0;
  } catch (e) {
    ud.errno = errnoFrom(e);
    return -1;
  }
  return 0;
}

function pollCqs(): Promise<number> {
  return ud.pollCqs(test.nodes, (node, wcs) => {
    if (node.ah) return 0;
    const rc = createReplyAh(node, wcs[0] as Wc);
    if (rc) out('udaddy: failed to create reply AH\n');
    return rc;
  });
}

function connectEvents(): Promise<number> {
  return ud.connectEvents(test.channel as EventChannel, () => test.connectsLeft, cmaHandler);
}

async function runServer(): Promise<number> {
  out('udaddy: starting server\n');
  let listenId: CmId;
  try {
    listenId = createId(test.channel, test, hints.portSpace as PortSpace);
  } catch (e) {
    ud.perror('udaddy: listen request failed', e);
    return -1;
  }
  let ret: number;
  run: {
    const r = await getRdmaAddr(srcAddr, dstAddr, port, hints);
    ret = r.ret;
    if (ret) break run;
    test.rai = r.rai;
    try {
      listenId.bindAddr((r.rai as RdmaAddrinfo).srcAddr as NonNullable<RdmaAddrinfo['srcAddr']>);
    } catch (e) {
      ud.perror('udaddy: bind address failed', e);
      ret = -1;
      break run;
    }
    try {
      await listenId.listen(0);
    } catch (e) {
      ud.perror('udaddy: failure trying to listen', e);
      ret = -1;
      break run;
    }
    // udaddy.c ignores what connect_events() returns: a failed request ends the wait, and the
    // nodes connected so far still run the test.
    await connectEvents();
    if (ud.messageCount) {
      out('receiving data transfers\n');
      ret = await pollCqs();
      if (ret) break run;
      out('sending replies\n');
      for (const node of test.nodes) {
        ret = ud.postSends(node, true);
        if (ret) break run;
      }
      ret = await pollCqs();
      if (ret) break run;
      out('data transfers complete\n');
    }
  }
  await listenId.destroy().catch(() => {});
  return ret;
}

async function runClient(): Promise<number> {
  out('udaddy: starting client\n');
  const r = await getRdmaAddr(srcAddr, dstAddr, port, hints);
  if (r.ret) return r.ret;
  const rai = r.rai as RdmaAddrinfo;
  test.rai = rai;
  out('udaddy: connecting\n');
  for (const node of test.nodes) {
    try {
      await (node.cmaId as CmId).resolveAddr(rai.srcAddr, rai.dstAddr as NonNullable<RdmaAddrinfo['dstAddr']>, 2000);
    } catch (e) {
      ud.perror('udaddy: failure getting addr', e);
      connectError();
      return -1;
    }
  }
  let ret = await connectEvents();
  if (ret) return ret;
  if (ud.messageCount) {
    out('initiating data transfers\n');
    for (const node of test.nodes) {
      ret = ud.postSends(node, false);
      if (ret) return ret;
    }
    out('receiving data transfers\n');
    ret = await pollCqs();
    if (ret) return ret;
    out('data transfers complete\n');
  }
  return ret;
}

/** The usage text (stdout), then exit status 1. */
function usage(): number {
  out(`usage: ${PROG}\n`);
  out('\t[-s server_address]\n');
  out('\t[-b bind_address]\n');
  out('\t[-f address_format]\n');
  out('\t    name, ip, ipv6, or gid\n');
  out('\t[-P port_space]\n');
  out('\t    udp or ipoib\n');
  out('\t[-c connections]\n');
  out('\t[-C message_count]\n');
  out('\t[-S message_size]\n');
  out('\t[-t type_of_service]\n');
  out(PORT_SPACE_USAGE);
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
      case 'c':
        connections = atoi(optarg);
        break;
      case 'C':
        ud.messageCount = atoi(optarg);
        break;
      case 'S':
        ud.messageSize = atoi(optarg);
        break;
      case 't':
        setTos = true;
        tos = u8(strtoul(optarg, 0));
        break;
      case 'p':
        // Kept for backwards compatibility (udaddy.c: "use -P").
        hints.portSpace = portSpaceArg(optarg);
        break;
      case 'f':
        addressFormatArg(optarg, hints);
        break;
      case 'P':
        if (prefixIs(optarg, 'ipoib', 5)) hints.portSpace = PortSpace.IPOIB;
        else if (!prefixIs(optarg, 'udp', 3)) errOut('Warning: unknown port space format\n');
        break;
      default:
        getoptComplaint(PROG, it, OPTSTRING);
        return usage();
    }
  }

  test.connectsLeft = connections;
  const ch = createFirstEventChannel();
  if (!ch.channel) return 1;
  test.channel = ch.channel;
  if (allocNodes()) return 1;
  let ret: number;
  if (dstAddr !== null) ret = await runClient();
  else {
    hints.flags = (hints.flags ?? 0) | RAI.PASSIVE;
    ret = await runServer();
  }
  out('test complete\n');
  await destroyNodes();
  try {
    test.channel.destroy();
  } catch {
    /* ids of failed attempts may remain; the C tool closes the channel regardless */
  }
  out(`return status ${ret}\n`);
  return ret;
}

runMain(PROG, main);
