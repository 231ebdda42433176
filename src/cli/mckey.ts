#!/usr/bin/env node
/**
 * mckey: RDMA CM multicast setup and simple data transfer test — a port of rdma-core's
 * `librdmacm/examples/mckey.c` (same options, defaults, messages, return status and exit code)
 * onto this package's CM and verbs.
 *
 * Every one of the `-c` ids resolves the group address (`-m`, an IP multicast address; `-M`, a
 * transport-specific MGID, which needs `-b`), makes a UD QP and joins the group (as a send-only
 * full member with `-o`); the MULTICAST_JOIN event gives the address handle of the group. After
 * three seconds for the fabric to settle, a sender (`-s`) posts `-C` datagrams of `-S` bytes to
 * the group on each QP, a receiver waits until each QP has received `-C` of them (for ever if
 * they never come, as mckey does). Then every id leaves the group. Both print `test complete` and
 * `return status N`, where N is the result of the last leave, and exit with N (mod 256).
 *
 * `-l` creates the QPs with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB (rdma_create_qp_ex): the group's
 * datagrams this process sends reach no QP of this host, its own included. The soft RoCE device
 * has it; rxe (and so the native backend on rxe) refuses it: `mckey: unable to create QP:
 * Operation not supported`, status -1.
 */
import './startup.js';
import { CmEventType, McJoinFlag, PortSpace, QpCreateFlags, rdmaEventStr, type CmEvent, type CmId, type EventChannel, type SockAddr, type UdParam } from './rdma-ud.js';
import { atoi, errnoFrom, out, perror, runMain } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';
import { eaiOf, gaiMessage, inetNtop6, inetPton6, resolveHost } from './addresses.js';
import { allocCmNodes, createFirstEventChannel } from './common.js';
import { PORT_SPACE_USAGE, UdTest, newUdNode, portSpaceArg, type UdNode } from './ud-test.js';

const PROG = 'mckey';
const OPTSTRING = 'm:M:sb:c:C:S:p:ol';
/** The pause after the joins, "to give the SM a chance to configure switches" (mckey.c: sleep(3)). */
const SETTLE_MS = 3000;

/** `struct cmatest`. */
const test = {
  channel: null as EventChannel | null,
  nodes: [] as UdNode[],
  connectsLeft: 0,
  /** The group: an IP address, or with `-M` the AF_IB address of an MGID (`struct sockaddr_ib`). */
  dst: null as SockAddr | null,
  src: null as SockAddr | null,
};

const ud = new UdTest(PROG);
let connections = 1;
let isSender = false;
let sendOnly = false;
let loopback = true;
let unmappedAddr = false;
let dstAddr: string | null = null;
let srcAddr: string | null = null;
let portSpace: number = PortSpace.UDP;

function connectError(): void {
  test.connectsLeft--;
}

/** rdma_join_multicast_ex. */
async function join(node: UdNode): Promise<void> {
  const id = node.cmaId as CmId;
  const joinFlags = sendOnly ? McJoinFlag.SENDONLY_FULLMEMBER : McJoinFlag.FULLMEMBER;
  await id.joinMulticastEx({ addr: test.dst as SockAddr, joinFlags, context: node });
}

/** ADDR_RESOLVED (or, with `-M`, straight after the bind): QP, receives, join. */
async function addrHandler(node: UdNode): Promise<number> {
  let ret = ud.verifyTestParams(node);
  if (!ret) ret = ud.initNode(node, loopback ? 0 : QpCreateFlags.BLOCK_SELF_MCAST_LB);
  if (!ret && !isSender) ret = ud.postRecvs(node);
  if (!ret) {
    try {
      await join(node);
    } catch (e) {
      ud.perror('mckey: failure joining', e);
      ret = -1;
    }
  }
  if (ret) connectError();
  return ret;
}

/** MULTICAST_JOIN: print the group, make its address handle. */
function joinHandler(node: UdNode, param: UdParam): number {
  const ah = param.ahAttr;
  const dgid = ah.grh ? inetNtop6(ah.grh.dgid) : '::';
  out(`mckey: joined dgid: ${dgid} mlid 0x${(ah.dlid ?? 0).toString(16)} sl ${ah.sl ?? 0}\n`);
  if (ud.setRemote(node, param)) {
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
    case CmEventType.MULTICAST_JOIN:
      ret = joinHandler(cmaId.context as UdNode, event.param.ud);
      break;
    case CmEventType.ADDR_ERROR:
    case CmEventType.ROUTE_ERROR:
    case CmEventType.MULTICAST_ERROR:
      out(`mckey: event: ${rdmaEventStr(event.event)}, error: ${event.status}\n`);
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

const stopCmaThread = new AbortController();
let cmaThreadDone: Promise<void> | null = null;

/**
 * mckey.c's `cma_thread`: once joined, keep taking events, reporting MULTICAST_ERROR and
 * ADDR_CHANGE, until the test is over (`quit`).
 */
async function cmaThread(quit: AbortSignal): Promise<void> {
  const ch = test.channel as EventChannel;
  for (;;) {
    let event: CmEvent;
    try {
      event = await ch.getEvent(quit);
    } catch (e) {
      if (!quit.aborted) perror('rdma_get_cm_event', e);
      return;
    }
    if (event.event === CmEventType.MULTICAST_ERROR || event.event === CmEventType.ADDR_CHANGE) {
      out(`mckey: event: ${rdmaEventStr(event.event)}, status: ${event.status}\n`);
    }
    event.ack();
  }
}

function allocNodes(): number {
  const r = allocCmNodes(PROG, connections, newUdNode, test.channel, portSpace as PortSpace);
  test.nodes = r.nodes;
  return r.ret;
}

function connectEvents(): Promise<number> {
  return ud.connectEvents(test.channel as EventChannel, () => test.connectsLeft, cmaHandler);
}

/**
 * mckey.c `get_addr()`: getaddrinfo(name, NULL, NULL) and the first answer. Failure prints
 * `getaddrinfo failed (<gai_strerror>) - invalid hostname or IP address` and returns the EAI code.
 */
async function getAddr(name: string | null): Promise<{ ret: number; addr: SockAddr | null }> {
  try {
    // getaddrinfo(NULL, NULL, ...) fails as an empty name does (EAI_NONAME).
    const h = await resolveHost(name ?? '');
    return { ret: 0, addr: { address: h.address, port: 0, family: h.family } };
  } catch (e) {
    out(`getaddrinfo failed (${gaiMessage(e)}) - invalid hostname or IP address\n`);
    return { ret: eaiOf(e), addr: null };
  }
}

/** `get_dst_addr()`: `-M` is parsed as an IPv6 literal (inet_pton; anything else gives MGID 0). */
async function getDstAddr(name: string | null): Promise<number> {
  if (!unmappedAddr) {
    const r = await getAddr(name);
    if (r.addr) test.dst = r.addr;
    return r.ret;
  }
  const mgid = inetPton6(name ?? '') ?? new Uint8Array(16);
  test.dst = { address: inetNtop6(mgid), port: 0, family: 'IB' };
  return 0;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function run(): Promise<number> {
  out(`mckey: starting ${isSender ? 'client' : 'server'}\n`);
  if (srcAddr !== null) {
    const r = await getAddr(srcAddr);
    if (r.ret) return r.ret;
    test.src = r.addr;
  }
  let ret = await getDstAddr(dstAddr);
  if (ret) return ret;

  out('mckey: joining\n');
  for (const node of test.nodes) {
    const id = node.cmaId as CmId;
    if (test.src) {
      try {
        id.bindAddr(test.src);
      } catch (e) {
        ud.perror('mckey: addr bind failure', e);
        connectError();
        return -1;
      }
    }
    const dst = test.dst as SockAddr;
    if (dst.family === 'IB') ret = await addrHandler(node);
    else {
      try {
        await id.resolveAddr(test.src, dst, 2000);
        ret = 0;
      } catch (e) {
        ud.errno = errnoFrom(e);
        ret = -1;
      }
    }
    if (ret) {
      ud.perrorLast('mckey: resolve addr failure');
      connectError();
      return ret;
    }
  }

  data: {
    ret = await connectEvents();
    if (ret) break data;
    cmaThreadDone = cmaThread(stopCmaThread.signal);
    await sleep(SETTLE_MS);
    if (ud.messageCount) {
      if (isSender) {
        out('initiating data transfers\n');
        for (const node of test.nodes) {
          ret = ud.postSends(node, false);
          if (ret) break data;
        }
      } else {
        out('receiving data transfers\n');
        ret = await ud.pollCqs(test.nodes);
        if (ret) break data;
      }
      out('data transfers complete\n');
    }
  }
  for (const node of test.nodes) {
    try {
      await (node.cmaId as CmId).leaveMulticast(test.dst as SockAddr);
      ret = 0;
    } catch (e) {
      ud.perror('mckey: failure leaving', e);
      ret = -1;
    }
  }
  return ret;
}

/** The usage text (stdout), then exit status 1. */
function usage(): number {
  out(`usage: ${PROG}\n`);
  out('\t-m multicast_address\n');
  out('\t[-M unmapped_multicast_address]\n\t replaces -m and requires -b\n');
  out('\t[-s(ender)]\n');
  out('\t[-b bind_address]\n');
  out('\t[-c connections]\n');
  out('\t[-C message_count]\n');
  out('\t[-S message_size]\n');
  out(PORT_SPACE_USAGE);
  out('\t[-o join as a send-only full-member]\n');
  out('\t[-l join without multicast loopback]\n');
  return 1;
}

async function main(argv: string[]): Promise<number> {
  const g = new Getopt(argv, OPTSTRING);
  for (let it = g.next(); it; it = g.next()) {
    const optarg = it.optarg ?? '';
    switch (it.opt) {
      case 'm':
        dstAddr = optarg;
        break;
      case 'M':
        unmappedAddr = true;
        dstAddr = optarg;
        break;
      case 's':
        isSender = true;
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
      case 'p':
        portSpace = portSpaceArg(optarg);
        break;
      case 'o':
        sendOnly = true;
        break;
      case 'l':
        loopback = false;
        break;
      default:
        getoptComplaint(PROG, it, OPTSTRING);
        return usage();
    }
  }
  if (unmappedAddr && srcAddr === null) {
    out('unmapped multicast address requires binding to source address\n');
    return 1;
  }

  test.connectsLeft = connections;
  const ch = createFirstEventChannel();
  if (!ch.channel) return 1;
  test.channel = ch.channel;
  if (allocNodes()) return 1;
  const ret = await run();
  out('test complete\n');
  // The CM thread lives on until the ids are gone (it acknowledges their last events).
  for (const node of test.nodes) await ud.destroyNode(node);
  stopCmaThread.abort();
  await cmaThreadDone;
  try {
    test.channel.destroy();
  } catch {
    /* the C tool closes the channel regardless */
  }
  out(`return status ${ret}\n`);
  return ret;
}

runMain(PROG, main);
