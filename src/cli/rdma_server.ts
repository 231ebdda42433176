#!/usr/bin/env node
/**
 * rdma_server: the minimal synchronous-API example of librdmacm (`librdmacm/examples/
 * rdma_server.c`): rdma_getaddrinfo + rdma_create_ep, rdma_listen, rdma_get_request, one 16-byte
 * receive and one 16-byte (inline) send, then disconnect. Prints `rdma_server: start` and
 * `rdma_server: end N`; the exit status is N (mod 256).
 */
import './startup.js';
import {
  Errno,
  RAI,
  PortSpace,
  SendFlags,
  createEp,
  destroyEp,
  gaiStrerror,
  getaddrinfo,
  type CmId,
  type CmQpInitAttr,
  type RdmaAddrinfo,
} from './rdma.js';
import { out, perror } from './c-compat.js';
import { eaiOf } from './addresses.js';
import { exampleExchange, runExample } from './rdma-example.js';

async function run(server: string, port: string): Promise<number> {
  let res: RdmaAddrinfo;
  try {
    res = await getaddrinfo(server, port, { flags: RAI.PASSIVE, portSpace: PortSpace.TCP });
  } catch (e) {
    const ret = eaiOf(e);
    out(`rdma_getaddrinfo: ${gaiStrerror(ret)}\n`);
    return ret;
  }
  const initAttr: CmQpInitAttr = { cap: { maxSendWr: 1, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 16 }, sqSigAll: true };
  let listenId: CmId;
  try {
    listenId = await createEp(res, null, initAttr);
  } catch (e) {
    perror('rdma_create_ep', e);
    return -1;
  }
  let ret = 0;
  let id: CmId | null = null;
  let sendFlags = 0;
  body: {
    try {
      await listenId.listen(0);
    } catch (e) {
      perror('rdma_listen', e);
      ret = -1;
      break body;
    }
    try {
      id = await listenId.getRequest();
    } catch (e) {
      perror('rdma_get_request', e);
      ret = -1;
      break body;
    }
    acceptEp: {
      let maxInline: number;
      try {
        const qp = id.qp;
        if (!qp) throw Object.assign(new Error('no QP'), { errno: Errno.EINVAL });
        maxInline = qp.query().cap?.maxInlineData ?? 0;
      } catch (e) {
        perror('ibv_query_qp', e);
        ret = -1;
        break acceptEp;
      }
      if (maxInline >= 16) sendFlags = SendFlags.INLINE;
      else out("rdma_server: device doesn't support IBV_SEND_INLINE, using sge sends\n");
      ret = await exampleExchange(id, sendFlags, 'server');
    }
    await destroyEp(id).catch(() => {});
  }
  await destroyEp(listenId).catch(() => {});
  return ret;
}

runExample('rdma_server', '0.0.0.0', run);
