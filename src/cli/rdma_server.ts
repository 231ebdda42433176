#!/usr/bin/env node
/**
 * rdma_server: the minimal synchronous-API example of librdmacm (`librdmacm/examples/
 * rdma_server.c`): rdma_getaddrinfo + rdma_create_ep, rdma_listen, rdma_get_request, one 16-byte
 * receive and one 16-byte (inline) send, then disconnect. Prints `rdma_server: start` and
 * `rdma_server: end N`; the exit status is N (mod 256).
 */
import './startup.js';
import {
  RAI,
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
  let mr: Mr | null = null;
  let sendMr: Mr | null = null;
  let sendFlags = 0;
  const sendMsg = Buffer.alloc(16);
  const recvMsg = Buffer.alloc(16);
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
        if (!qp) throw Object.assign(new Error('no QP'), { errno: 22 });
        maxInline = qp.query().cap?.maxInlineData ?? 0;
      } catch (e) {
        perror('ibv_query_qp', e);
        ret = -1;
        break acceptEp;
      }
      if (maxInline >= 16) sendFlags = SendFlags.INLINE;
      else out("rdma_server: device doesn't support IBV_SEND_INLINE, using sge sends\n");
      try {
        mr = regMsgs(id, recvMsg);
      } catch (e) {
        perror('rdma_reg_msgs for recv_msg', e);
        ret = -1;
        break acceptEp;
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
          await id.accept();
        } catch (e) {
          perror('rdma_accept', e);
          ret = -1;
          break deregSend;
        }
        disconnect: {
          try {
            await getRecvComp(id);
          } catch (e) {
            perror('rdma_get_recv_comp', e);
            ret = -1;
            break disconnect;
          }
          try {
            postSend(id, null, sendMsg, 16, sendMr, sendFlags);
          } catch (e) {
            perror('rdma_post_send', e);
            ret = -1;
            break disconnect;
          }
          try {
            await getSendComp(id);
            ret = 0;
          } catch (e) {
            perror('rdma_get_send_comp', e);
            ret = -1;
          }
        }
        await id.disconnect().catch(() => {});
      }
      if (sendMr) deregMr(sendMr);
      if (mr) deregMr(mr);
    }
    await destroyEp(id).catch(() => {});
  }
  await destroyEp(listenId).catch(() => {});
  return ret;
}

runExample('rdma_server', '0.0.0.0', run);
