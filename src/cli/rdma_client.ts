#!/usr/bin/env node
/**
 * rdma_client: the minimal synchronous-API example of librdmacm (`librdmacm/examples/
 * rdma_client.c`): rdma_getaddrinfo + rdma_create_ep (address and route resolved, QP created),
 * one 16-byte receive posted, rdma_connect, one 16-byte (inline) send, wait for the send and the
 * server's reply, disconnect. Prints `rdma_client: start` and `rdma_client: end N`; the exit
 * status is N (mod 256).
 */
import './startup.js';
import {
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
    res = await getaddrinfo(server, port, { portSpace: PortSpace.TCP });
  } catch (e) {
    const ret = eaiOf(e);
    out(`rdma_getaddrinfo: ${gaiStrerror(ret)}\n`);
    return ret;
  }
  const attr: CmQpInitAttr = { cap: { maxSendWr: 1, maxRecvWr: 1, maxSendSge: 1, maxRecvSge: 1, maxInlineData: 16 }, sqSigAll: true };
  let id: CmId | null = null;
  let failure: unknown = null;
  try {
    id = await createEp(res, null, attr);
  } catch (e) {
    failure = e;
  }
  // As the C tool, the inline check looks at the attributes before the result of rdma_create_ep.
  let sendFlags = 0;
  if ((attr.cap?.maxInlineData ?? 0) >= 16) sendFlags = SendFlags.INLINE;
  else out("rdma_client: device doesn't support IBV_SEND_INLINE, using sge sends\n");
  if (!id) {
    perror('rdma_create_ep', failure);
    return -1;
  }
  const ret = await exampleExchange(id, sendFlags, 'client');
  await destroyEp(id).catch(() => {});
  return ret;
}

runExample('rdma_client', '127.0.0.1', run);
