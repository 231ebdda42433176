/**
 * The connection manager of the soft RoCE device, built from its parts as the kernel splits its
 * own (drivers/infiniband/core): the MAD agent on QP1 (mad.c: mad-agent.ts, with the IDs and TIDs
 * of ids.ts and the reply budget of reply-limit.ts), the IB CM (cm.c: SIDR in sidr.ts, connections
 * in conn.ts and conn-rx.ts, their peers on this host in peer-watch.ts) and rdma_cm's endpoints
 * (cma.c: ud-endpoint.ts with multicast.ts for datagram ids, rc-endpoint.ts for connected ids,
 * listeners.ts for rdma_listen).
 *
 * This module wires them together once, when the transport loads: the MAD agent hands SIDR
 * requests to the SIDR responder with the UD endpoint's request handler, SIDR replies to the
 * SIDR requester, and every other CM MAD to the connections with the RC endpoint's request
 * handler; and the `rxe` provider's CM transport makes a UD endpoint for a UD id and an RC
 * endpoint for any other.
 */
import { QpType } from '../../../verbs/types.js';
import { PortSpace, registerCmTransport, type CmTransport } from '../../../cm/transport.js';
import { CMA_REQ_USER_PD, CMA_SIDR_USER_PD, CmPrivateDataLen } from '../../../wire/roce/index.js';
import { RXE_PROVIDER } from '../provider.js';
import { connectionMad } from './conn-rx.js';
import { listen, rcBacklog } from './listeners.js';
import { installMadAgent } from './mad-agent.js';
import { RcEndpoint, rcConnectRequest } from './rc-endpoint.js';
import { sidrReplyIn, sidrRequestIn } from './sidr.js';
import { UdEndpoint, udConnectRequest } from './ud-endpoint.js';

export { configureRoceCm, roceCmConfig, configureRoceRcCm, roceRcCmConfig, type RoceCmConfig, type RoceRcCmConfig } from './config.js';

/** The half-open passive connections of this process, over every listener (for tests and tools). */
export function roceRcHalfOpen(): number {
  return rcBacklog.total();
}

/** The RoCE CM (the kernel's ib_cm as rdma_cm drives it): SIDR for UD ids, connections for RC ids. */
export const roceCmTransport: CmTransport = {
  name: 'ibcm',
  provider: RXE_PROVIDER,
  portSpaces: [PortSpace.UDP, PortSpace.IPOIB, PortSpace.TCP, PortSpace.IB],
  privateDataLimits: {
    connect: CMA_REQ_USER_PD,
    accept: CmPrivateDataLen.REP,
    reject: CmPrivateDataLen.REJ,
    udConnect: CMA_SIDR_USER_PD,
    udAccept: CmPrivateDataLen.SIDR_REP,
  },
  createEndpoint: (host) => (host.qpType === QpType.UD ? new UdEndpoint(host) : new RcEndpoint(host)),
  listen,
};

registerCmTransport(roceCmTransport);
installMadAgent({
  sidrRequest: (dev, m, tid, meta) => sidrRequestIn(dev, m, tid, meta, udConnectRequest),
  sidrReply: sidrReplyIn,
  connection: (dev, mad, meta, srcQp) => connectionMad(dev, mad, meta, srcQp, rcConnectRequest),
});
