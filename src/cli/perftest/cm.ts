/**
 * perftest's `-R` (perftest_communication.c `create_rdma_cm_connection`,
 * `rdma_cm_client_connection`, `rdma_cm_server_connection`, `rdma_cm_route_handler`,
 * `rdma_cm_connection_request_handler`): the test's QPs are made and connected by rdma_cm on the
 * side channel's port number, in RDMA_PS_TCP (UD QPs: RDMA_PS_UDP, cm-ud.ts), while the side
 * channel carries the rest as without `-R`. This is how perftest runs over iWARP, whose QPs
 * connect only through the CM. The client retries its connection up to ten times, 100 ms apart
 * (the server may not listen yet).
 */
import { CmEventType, PortSpace, createId, type CmId, type ConnParam, type Context, type Pd, type Qp } from '../api.js';
import { errOut } from '../c-compat.js';
import { Verb, type PerfParams } from './params.js';
import { addQp, createResources, releaseResources, type QpInit, type Resources } from './resources.js';
import { udClientEstablished, udServerAccepted, udServerPrepare } from './cm-ud.js';

/** `DEF_RETRY_COUNT`: the CM's retry and RNR retry counts. */
const DEF_RETRY_COUNT = 7;
/** `MIN_RNR_TIMER`, set on the server's RC QPs after accept. */
const MIN_RNR_TIMER = 12;
/** How long the teardown waits for each test connection's DISCONNECTED (perftest: for ever). */
const DISCONNECT_TIMEOUT_MS = 10_000;
/** The address and route resolution timeout perftest passes (ms). */
const RESOLVE_TIMEOUT_MS = 2000;
const CLIENT_RETRIES = 10;
const CLIENT_RETRY_DELAY_MS = 100;
/** How long the server waits for the client's connection requests. */
const REQUEST_TIMEOUT_MS = 60_000;

/** The QPs' CM ids and the resources on their device. */
export interface CmLink {
  ids: CmId[];
  r: Resources;
}

/**
 * perftest_communication.c rdma_client_connect / rdma_server_connect: a zeroed rdma_conn_param,
 * the outstanding reads as responder resources and initiator depth for READ and ATOMIC tests
 * only; the other tests connect with 0 and 0 (not the device maximum a NULL parameter gives).
 */
function connParam(p: PerfParams, r: Resources): ConnParam {
  const rd = p.verb === Verb.READ || p.verb === Verb.ATOMIC ? r.outReads : 0;
  return { retryCount: DEF_RETRY_COUNT, rnrRetryCount: DEF_RETRY_COUNT, responderResources: rd, initiatorDepth: rd };
}

function withTimeout<T>(pr: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms);
    pr.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e: unknown) => (clearTimeout(t), reject(e)),
    );
  });
}

/**
 * `rdma_cm_disconnect_nodes`: disconnect each test connection and wait for its DISCONNECTED
 * (rdma_disconnect on a synchronous id waits for it); UD ids have nothing to disconnect.
 */
export async function cmDisconnect(p: PerfParams, link: CmLink): Promise<void> {
  if (p.conn === 'UD') return;
  await Promise.all(link.ids.map((id) => withTimeout(id.disconnect(), DISCONNECT_TIMEOUT_MS, 'rdma_disconnect').catch(() => {})));
}

/**
 * The server's end of a run: wait, at most `ms` in all, for the client to disconnect each test
 * connection itself, reading the DISCONNECTED from each synchronous id's own event channel (as a
 * librdmacm user reads `id->channel` of a synchronous id). perftest's client disconnects them
 * (`destroy_ctx` → `rdma_cm_disconnect_nodes`) only after its last side-channel SEND has
 * completed and the server's answer has arrived, so once every DISCONNECTED is in, nothing of the
 * client's is still in flight on the side channel and the server can tear everything down. On
 * iWARP the DISCONNECTED of a server-initiated close proves nothing of the kind: the client's
 * kernel answers the TCP close by itself. Returns whether every connection was closed by the
 * client within the bound; the server then disconnects ({@link cmDisconnect}) either way, which
 * for a closed connection only answers it (RoCE: the DREP the client's DISCONNECTED waits for).
 */
export async function cmAwaitPeerDisconnect(p: PerfParams, link: CmLink, ms: number): Promise<boolean> {
  if (p.conn === 'UD') return true;
  const signal = AbortSignal.timeout(ms);
  const closed = await Promise.all(link.ids.map((id) => peerDisconnected(id, signal)));
  return closed.every(Boolean);
}

/**
 * Wait for synchronous id `id`'s DISCONNECTED, read (and acknowledged, with every event before
 * it) from the id's own event channel; false once `signal` aborts first.
 */
export async function peerDisconnected(id: CmId, signal: AbortSignal): Promise<boolean> {
  try {
    for (;;) {
      const ev = await id.channel.getEvent(signal);
      const type = ev.event;
      ev.ack();
      if (type === CmEventType.DISCONNECTED) return true;
    }
  } catch {
    return false; // the signal aborted
  }
}

/** `rdma_cm_allocate_nodes`: UD QPs on RDMA_PS_UDP ids (SIDR), the others on RDMA_PS_TCP. */
const portSpace = (p: PerfParams): PortSpace => (p.conn === 'UD' ? PortSpace.UDP : PortSpace.TCP);

/** One attempt of `_rdma_cm_client_connection`. */
async function clientAttempt(p: PerfParams, maxSize: number, cycle: number): Promise<CmLink> {
  const ids: CmId[] = [];
  let r: Resources | null = null;
  try {
    for (let i = 0; i < p.numQps; i++) {
      const id = createId(null, null, portSpace(p));
      ids.push(id);
      await id.resolveAddr(null, { address: p.servername as string, port: p.port }, RESOLVE_TIMEOUT_MS);
      await id.resolveRoute(RESOLVE_TIMEOUT_MS);
    }
    r = createResources(p, ids[0]!.verbs as Context, maxSize, cycle, (pd, init, i) => ids[i]!.createQp(pd, init));
    if (r === null) throw new Error('resources');
    if (p.conn === 'UD') {
      await Promise.all(ids.map((id) => id.connect(connParam(p, r!))));
      await udClientEstablished(p, r, ids);
    } else {
      // One connection after the other, as perftest's client makes them: it connects each id
      // from its ROUTE_RESOLVED in turn, and over siw (whose siw_connect makes the TCP connection
      // in blocking mode, as in Linux 6.1) rdma_connect returns only once the TCP connection is up, a refused one
      // failing the call, so a server that does not listen yet refuses the first connection and
      // sees no other. Here the next connection starts once the one before is ESTABLISHED.
      // Started together, the first could be refused and the second accepted, then dropped with
      // the failed attempt.
      for (const id of ids) await id.connect(connParam(p, r));
    }
    return { ids, r };
  } catch (e) {
    // rdma_cm_destroy_cma: the attempt's ids go, with their QPs, and what was made for them.
    for (const id of ids) {
      try {
        if (id.qp) id.destroyQp();
      } catch {
        // the id goes regardless
      }
      await id.destroy().catch(() => {});
    }
    if (r) releaseResources(r);
    throw e;
  }
}

/** `rdma_cm_client_connection`; null after perftest's message. */
export async function cmClient(p: PerfParams, maxSize: number, cycle: number): Promise<CmLink | null> {
  for (let i = 0; i < CLIENT_RETRIES; i++) {
    try {
      return await clientAttempt(p, maxSize, cycle);
    } catch {
      await new Promise((res) => setTimeout(res, CLIENT_RETRY_DELAY_MS));
    }
  }
  errOut(`Failed to connect RDMA CM client, tried ${CLIENT_RETRIES} times.\n`);
  return null;
}

/**
 * The listening half of `rdma_cm_server_connection`: bind the port and listen; null after
 * perftest's message. perftest's server listens only after the hand shake that precedes the CM
 * connection, and its client connects right after that hand shake; a client that finds no
 * listener over iWARP (the TCP connection refused) retries, and perftest 6.06's client crashes on
 * that retry. So this server listens before the hand shake: the client can connect no earlier.
 */
export async function cmListen(p: PerfParams): Promise<CmId | null> {
  const listenId = createId(null, null, portSpace(p));
  try {
    listenId.bindAddr({ address: '0.0.0.0', port: p.port });
  } catch {
    errOut('Failed to bind RDMA CM address on the server.\n');
    await listenId.destroy().catch(() => {});
    return null;
  }
  try {
    await listenId.listen(p.numQps);
  } catch {
    errOut('Failed to listen on RDMA CM server listen ID.\n');
    await listenId.destroy().catch(() => {});
    return null;
  }
  return listenId;
}

/** `rdma_cm_server_connection` on `listenId` ({@link cmListen}): take `-q` requests, accept them; null after the message. */
export async function cmServer(p: PerfParams, listenId: CmId, maxSize: number, cycle: number): Promise<CmLink | null> {
  const ids: CmId[] = [];
  const maker = (pd: Pd, init: QpInit, i: number): Qp => ids[i]!.createQp(pd, init);
  const refuse = (id: CmId): void => {
    try {
      id.reject();
    } catch {
      // the client sees the connection fail either way
    }
  };
  try {
    let r: Resources | null = null;
    if (p.conn === 'UD') {
      // SIDR: every request is answered once all are in (cm-ud.ts).
      for (let i = 0; i < p.numQps; i++) ids.push(await withTimeout(listenId.getRequest(), REQUEST_TIMEOUT_MS, 'rdma_get_request'));
      r = createResources(p, ids[0]!.verbs as Context, maxSize, cycle, maker);
      if (r === null) {
        ids.forEach(refuse);
        return null;
      }
      udServerPrepare(p, r);
      await Promise.all(ids.map((id) => id.accept(connParam(p, r!))));
      await udServerAccepted(p, r, ids);
      return { ids, r };
    }
    // rdma_cm_connection_request_handler: each request gets its QP (the first one the context's
    // resources too) and is accepted as it comes, which a client that connects one QP after the
    // other (cmClient) needs.
    for (let i = 0; i < p.numQps; i++) {
      const id = await withTimeout(listenId.getRequest(), REQUEST_TIMEOUT_MS, 'rdma_get_request');
      ids.push(id);
      r = r === null ? createResources(p, id.verbs as Context, maxSize, cycle, maker, 1) : addQp(p, r, maker) ? r : null;
      if (r === null) {
        refuse(id);
        return null;
      }
      await id.accept(connParam(p, r));
    }
    if (p.conn === 'RC') {
      for (const qp of r!.qps) {
        try {
          qp.modify({ minRnrTimer: MIN_RNR_TIMER });
        } catch {
          // ibv_modify_qp's result is not checked by perftest either
        }
      }
    }
    return { ids, r: r! };
  } catch (e) {
    errOut(`RDMA CM event error:\n${(e as Error).message}\n`);
    return null;
  } finally {
    await listenId.destroy().catch(() => {});
  }
}
