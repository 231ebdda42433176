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
  deregMr,
  gaiStrerror,
  getRecvComp,
  getSendComp,
  getaddrinfo,
  postRecv,
  postSend,
  regMsgs,
  type CmId,
  type CmQpInitAttr,
  type Mr,
  type RdmaAddrinfo,
} from '../index.js';
import { eaiOf, out, perror, runExample } from './common.js';

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
  let ret = 0;
  let mr: Mr | null = null;
  let sendMr: Mr | null = null;
  const sendMsg = Buffer.alloc(16);
  const recvMsg = Buffer.alloc(16);
  destroy: {
    try {
      mr = regMsgs(id, recvMsg);
    } catch (e) {
      perror('rdma_reg_msgs for recv_msg', e);
      ret = -1;
      break destroy;
    }
    deregSend: {
      if ((sendFlags & SendFlags.INLINE) === 0) {
        try {
          sendMr = regMsgs(id, sendMsg);
        } catch (e) {
          perror('rdma_reg_msgs for send_msg', e);
          ret = -1;
          break deregSend;
        }
      }
      try {
        postRecv(id, null, recvMsg, 16, mr);
      } catch (e) {
        perror('rdma_post_recv', e);
        ret = -1;
        break deregSend;
      }
      try {
        await id.connect();
      } catch (e) {
        perror('rdma_connect', e);
        ret = -1;
        break deregSend;
      }
      disconnect: {
        try {
          postSend(id, null, sendMsg, 16, sendMr, sendFlags);
        } catch (e) {
          perror('rdma_post_send', e);
          ret = -1;
          break disconnect;
        }
        try {
          await getSendComp(id);
        } catch (e) {
          perror('rdma_get_send_comp', e);
          ret = -1;
          break disconnect;
        }
        try {
          await getRecvComp(id);
          ret = 0;
        } catch (e) {
          perror('rdma_get_recv_comp', e);
          ret = -1;
        }
      }
      await id.disconnect().catch(() => {});
    }
    if (sendMr) deregMr(sendMr);
    if (mr) deregMr(mr);
  }
  await destroyEp(id).catch(() => {});
  return ret;
}

runExample('rdma_client', '127.0.0.1', run);
