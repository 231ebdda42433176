// A process that attaches one UD QP of rxe_lo to multicast groups 239.3.<i/256>.<i%256> until an
// attach fails, run by mcast-attach.test.js under a low RLIMIT_NOFILE (each group is one
// socket). It prints one JSON line: how many groups were attached, the error of the failing
// attach, what the device and port agent hold afterwards, which groups still receive, and
// whether the failed group can be attached once a descriptor is free again.
// The RoCE port comes from RDMACM_ROCE_PORT (set by the parent), the number of descriptors to hold
// before the attaches from FILL_FDS (see below). It stops by itself.
import dgram from 'node:dgram';
import { once } from 'node:events';
import { openSync, readdirSync } from 'node:fs';
import { wire, loDevice, udQp, pollN, Access, WcStatus, lib } from '../../../lib/roce.js';
import { roceDevice } from '../../../../dist/transport/roce/device.js';
import { PortAgent } from '../../../../dist/transport/roce/udp.js';
import { gidKey } from '../../../../dist/transport/roce/gid.js';

const guard = setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: 'timeout' }) + '\n');
  process.exit(3);
}, 60_000);

const PORT = Number(process.env.RDMACM_ROCE_PORT);
const QKEY = 0x4242;
const MAX_GROUPS = 4096;
const groupIp = (i) => `239.3.${i >> 8}.${i & 0xff}`;
const groupGid = (i) => Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 3, i >> 8, i & 0xff]);
const fds = () => readdirSync('/proc/self/fd').length;
const turn = () => new Promise((r) => setImmediate(r));

const ctx = loDevice().open();
const pd = ctx.allocPd();
const cq = ctx.createCq(64);
const buf = Buffer.alloc(8192);
const mr = pd.regMr(buf, Access.LOCAL_WRITE);
const qp = udQp(pd, cq, QKEY);
// An rdma_cm UD id with its QP, made while descriptors are free (rdma_join_multicast below).
const { createEventChannel, createId, PortSpace, CmEventType } = lib;
const ch = createEventChannel();
const id = createId(ch, null, PortSpace.UDP, { device: 'rxe_lo' });
id.bindAddr({ address: '127.0.0.1', port: 0 });
id.createQp(null, { cap: { maxRecvWr: 4 } });
// The sender of the test datagrams holds its descriptor before the groups take the rest.
const tx = dgram.createSocket('udp4');
tx.bind(0, '127.0.0.1');
await once(tx, 'listening');
tx.setMulticastInterface('127.0.0.1');
tx.setMulticastLoopback(true);

/** Send one UD datagram to group `i`; true when the QP completes a receive of it. */
async function receives(i) {
  qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr, length: 512, lkey: mr.lkey }] });
  const net = { family: 4, src: Uint8Array.of(127, 0, 0, 1), dst: Uint8Array.of(239, 3, i >> 8, i & 0xff), sport: tx.address().port, dport: PORT, ipId: 0 };
  const pkt = wire.encodeRocePacket({ opcode: wire.IbOpcode.UD_SEND_ONLY, destQp: wire.IB_MULTICAST_QPN, psn: 0, deth: { qkey: QKEY, srcQp: 7 }, payload: Buffer.from(`group ${i}`) }, net);
  tx.send(pkt, PORT, groupIp(i));
  const [w] = await pollN(cq, 1, 3000);
  return w !== undefined && w.status === WcStatus.SUCCESS && w.wrId === i && buf.subarray(40, 40 + w.byteLen - 40).toString() === `group ${i}`;
}

// Descriptors held open so that only a few are left for the groups. The limit itself is set
// higher: the module loader reads many files at once while the package loads, and a limit that
// tight would fail the import instead of the attach under test.
const fillers = [];
while (fds() < Number(process.env.FILL_FDS ?? 0)) fillers.push(openSync('/dev/null', 'r'));

const fds0 = fds();
let failed = null;
let attached = 0;
for (let i = 0; i < MAX_GROUPS; i++) {
  try {
    qp.attachMcast(groupGid(i), 0);
    attached++;
  } catch (e) {
    failed = { code: e.code, errno: e.errno, rdmaError: e instanceof lib.RdmaError, message: e.message };
    break;
  }
}
const dev = roceDevice('rxe_lo');
const agent = PortAgent.get();
const out = { attached, failed, mcastGroups: dev.mcast.size, agentGroups: agent.sockets.groupCount, failedKept: dev.mcast.has(gidKey(groupGid(attached))) };
out.failedHeld = [...dev.mcast.values()].some((s) => s.size === 0);
// The same group again, still no descriptor: fails again (no reference left behind by the first try).
try {
  qp.attachMcast(groupGid(attached), 0);
  out.again = 'attached';
} catch (e) {
  out.again = e.code;
}
// rdma_join_multicast of that group: the attach of the id's QP fails, reported as
// MULTICAST_ERROR with the negative errno.
await id.joinMulticast({ address: groupIp(attached), port: 0 }, 'cm-join');
const ev = await Promise.race([ch.getEvent(), new Promise((r) => setTimeout(() => r(null), 5000).unref())]);
out.cmEvent = ev === null ? 'none' : lib.rdmaEventStr(ev.event);
out.cmStatus = ev?.status;
out.cmContext = ev?.mcContext;
ev?.ack();
out.cmKept = dev.mcast.has(gidKey(groupGid(attached)));
// The groups attached before the failure receive.
out.firstReceives = attached > 0 && (await receives(0));
out.lastReceives = attached > 0 && (await receives(attached - 1));
// Free one descriptor: the failed group attaches and receives.
qp.detachMcast(groupGid(0), 0);
await turn();
await turn();
try {
  qp.attachMcast(groupGid(attached), 0);
  out.afterFree = 'attached';
  out.afterFreeReceives = await receives(attached);
} catch (e) {
  out.afterFree = e.code;
}
// Detach everything: every descriptor the groups took comes back.
for (let i = 1; i <= attached; i++) qp.detachMcast(groupGid(i), 0);
await turn();
await turn();
out.fdsLeaked = fds() - fds0;
out.agentGroupsAfter = agent.sockets.groupCount;
out.mcastGroupsAfter = dev.mcast.size;
qp.destroy();
id.destroyQp();
await id.destroy();
ch.destroy();
tx.close();
clearTimeout(guard);
process.stdout.write(JSON.stringify(out) + '\n');
