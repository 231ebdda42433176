/**
 * What the synchronous-API examples rdma_client and rdma_server (`librdmacm/examples/
 * rdma_client.c`, `rdma_server.c`) have in common: the command line and the message exchange
 * on an endpoint, which differ only in who connects and who sends first.
 */
import {
  SendFlags,
  deregMr,
  getRecvComp,
  getSendComp,
  postRecv,
  postSend,
  regMsgs,
  type CmId,
  type Mr,
} from './rdma.js';
import { out, perror, runMain } from './c-compat.js';
import { Getopt, getoptComplaint } from './getopt.js';

/**
 * The command line of the synchronous-API examples (rdma_client, rdma_server): `-s
 * server_address` (default `server`), `-p port_number` (default 7471); `<prog>: start`, the
 * exchange, `<prog>: end N`, exit status N. A bad option: getopt's complaint, the usage, status 1.
 */
export function runExample(prog: string, server: string, run: (server: string, port: string) => Promise<number>): void {
  const optstring = 's:p:';
  const usage = (): number => {
    out(`usage: ${prog}\n`);
    out('\t[-s server_address]\n');
    out('\t[-p port_number]\n');
    return 1;
  };
  runMain(prog, async (argv) => {
    let port = '7471';
    const g = new Getopt(argv, optstring);
    for (let it = g.next(); it; it = g.next()) {
      switch (it.opt) {
        case 's':
          server = it.optarg ?? '';
          break;
        case 'p':
          port = it.optarg ?? '';
          break;
        default:
          getoptComplaint(prog, it, optstring);
          return usage();
      }
    }
    out(`${prog}: start\n`);
    const ret = await run(server, port);
    out(`${prog}: end ${ret}\n`);
    return ret;
  });
}

/**
 * The exchange on a created endpoint `id`: a 16-byte receive buffer registered and posted, the
 * send buffer registered unless `sendFlags` has INLINE, then the client connects, sends and
 * waits for the reply, the server accepts, waits for the message and replies; a disconnect once
 * connected, the buffers deregistered. Each failing step is reported with perror. 0 or -1.
 */
export async function exampleExchange(id: CmId, sendFlags: number, role: 'client' | 'server'): Promise<number> {
  const sendMsg = Buffer.alloc(16);
  const recvMsg = Buffer.alloc(16);
  let mr: Mr;
  try {
    mr = regMsgs(id, recvMsg);
  } catch (e) {
    perror('rdma_reg_msgs for recv_msg', e);
    return -1;
  }
  let ret = -1;
  let sendMr: Mr | null = null;
  deregSend: {
    if ((sendFlags & SendFlags.INLINE) === 0) {
      try {
        sendMr = regMsgs(id, sendMsg);
      } catch (e) {
        perror('rdma_reg_msgs for send_msg', e);
        break deregSend;
      }
    }
    try {
      postRecv(id, null, recvMsg, 16, mr);
    } catch (e) {
      perror('rdma_post_recv', e);
      break deregSend;
    }
    try {
      if (role === 'client') await id.connect();
      else await id.accept();
    } catch (e) {
      perror(role === 'client' ? 'rdma_connect' : 'rdma_accept', e);
      break deregSend;
    }
    const send = (): void => postSend(id, null, sendMsg, 16, sendMr, sendFlags);
    const steps: [string, () => unknown][] = [
      ['rdma_post_send', send],
      ['rdma_get_send_comp', () => getSendComp(id)],
      ['rdma_get_recv_comp', () => getRecvComp(id)],
    ];
    // The server first waits for the client's message, then replies.
    if (role === 'server') steps.unshift(steps.pop() as [string, () => unknown]);
    ret = 0;
    for (const [what, step] of steps) {
      try {
        await step();
      } catch (e) {
        perror(what, e);
        ret = -1;
        break;
      }
    }
    await id.disconnect().catch(() => {});
  }
  if (sendMr) deregMr(sendMr);
  deregMr(mr);
  return ret;
}
