/**
 * Multicast joins of datagram ids over RoCE (cma.c `cma_iboe_join_multicast`). A join never
 * leaves the host: the MGID is the group's address (`::ffff:<group>`), and the IGMP join is made
 * when the CM id attaches its QP to the group, so MULTICAST_JOIN follows at once with the group's
 * address handle, QPN 0xFFFFFF and Q_Key 0x01234567. Leaving is the QP's detach, which the CM id
 * undoes itself.
 */
import { err } from '../../../errors.js';
import { Errno } from '../../../errno.js';
import { CmEventType, RDMA_UDP_QKEY, type CmHost, type McJoin, type UdParam } from '../../../cm/transport.js';
import { IB_MULTICAST_QPN, cmaIboeMgid } from '../../../wire/roce/index.js';
import { ipBytes } from '../ip-addr.js';
import { HOP_LIMIT, devOf, familyOf, isAnyAddr } from './addr.js';

/**
 * rdma_join_multicast on the id of `host`: MULTICAST_JOIN (or MULTICAST_ERROR) is upcalled on a
 * later turn, unless `alive()` is false by then.
 * @throws RdmaError EINVAL for the zero address, ENOTSUPP for a group not of IPv4 (IPv6, or the
 *   MGID of an AF_IB address), EADDRNOTAVAIL when the device has no IPv4 address.
 */
export function joinMulticast(host: CmHost, join: McJoin, alive: () => boolean): void {
  const op = 'rdma_join_multicast';
  const dev = devOf(host.context, op);
  const family = familyOf(join.addr);
  // cma_iboe_join_multicast: the zero address is refused first, then a group not of AF_INET
  // (IPv6, AF_IB) on a RoCEv2 port (the only GID type here) with the kernel's ENOTSUPP; both
  // before anything is queued.
  if (isAnyAddr(join.addr.address)) throw err('EINVAL', op, 'zero multicast address');
  if (family === 6) throw err('ENOTSUPP', op, 'IPv6 multicast groups on a RoCEv2 port');
  const first = Number(join.addr.address.split('.')[0]);
  const local = host.localAddr?.address;
  if (!(first >= 224 && first <= 239)) {
    setImmediate(() => host.upcall({ event: CmEventType.MULTICAST_ERROR, status: -Errno.EINVAL, mcContext: join.context }));
    return;
  }
  const mgid = cmaIboeMgid(ipBytes(join.addr.address, 4));
  const sg = (local && !isAnyAddr(local) ? dev.gidOfIp(local, 4) : undefined) ?? dev.gids.find((e) => e.family === 4 && e.index > 0);
  if (!sg) throw err('EADDRNOTAVAIL', op, `${dev.name} has no IPv4 address`);
  const tos = host.options.tos;
  const ud: UdParam = {
    privateData: new Uint8Array(0),
    ahAttr: { isGlobal: true, portNum: 1, grh: { dgid: mgid, flowLabel: 0, sgidIndex: sg.index, hopLimit: HOP_LIMIT, trafficClass: tos > 0 ? tos : 0 } },
    qpNum: IB_MULTICAST_QPN,
    qkey: RDMA_UDP_QKEY,
  };
  dev.activate();
  setImmediate(() => {
    if (alive()) host.upcall({ event: CmEventType.MULTICAST_JOIN, ud, mcContext: join.context });
  });
}
