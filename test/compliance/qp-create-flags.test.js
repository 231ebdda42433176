// QP create flags (`ibv_qp_init_attr_ex.create_flags`, through ibv_create_qp_ex and
// rdma_create_qp_ex) on every device: a flag the device lacks is refused with
// EOPNOTSUPP, as rxe (provider check_qp_init_attr, kernel rxe_create_qp) and siw (no
// create_qp_ex: libibverbs answers EOPNOTSUPP) refuse them all; a mask that is not 32 bits is
// EINVAL. A device that reports IB_DEVICE_BLOCK_MULTICAST_LOOPBACK in `device_cap_flags` honours
// IBV_QP_CREATE_BLOCK_SELF_MCAST_LB: what such a QP sends to a group reaches no QP of this host —
// not itself, not another QP of the group in this process — while the sends complete, and the
// other members' sends still reach it (mckey -l's test, librdmacm/examples/mckey.c). Other
// processes of the host: test/e2e/mckey.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createId, PortSpace, QpType, QpCreateFlags, QpInitAttrMask, Access, WrOpcode, SendFlags, WcStatus, WcOpcode,
  DEVICE_BLOCK_MULTICAST_LOOPBACK,
} from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { until, sleep } from '../lib/wait.js';

const QP_TYPES = [
  [QpType.RC, Cap.RC],
  [QpType.UC, Cap.UC],
  [QpType.UD, Cap.UD],
];
/** ibv_qp_create_flags bits no soft device has. */
const OTHER_FLAGS = [QpCreateFlags.SCATTER_FCS, QpCreateFlags.CVLAN_STRIPPING, QpCreateFlags.SOURCE_QPN, QpCreateFlags.PCI_WRITE_END_PADDING, 1 << 0];
const SLOT = 256;
const COUNT = 4;

forEachDevice([], (d) => {
  test('create flags: EOPNOTSUPP for those the device lacks, EINVAL for a mask that is not 32 bits', () => {
    const ctx = d.device.open();
    const blocks = (ctx.queryDevice().deviceCapFlags & DEVICE_BLOCK_MULTICAST_LOOPBACK) !== 0;
    const pd = ctx.allocPd();
    const cq = ctx.createCq(4);
    try {
      for (const [type, cap] of QP_TYPES) {
        if (!d.caps.has(cap)) continue;
        const init = { qpType: type, sendCq: cq, recvCq: cq, cap: { maxSendWr: 1, maxRecvWr: 1 } };
        // ibv_create_qp_ex with comp_mask PD | CREATE_FLAGS
        const make = (createFlags) => ctx.createQpEx({ ...init, pd, compMask: QpInitAttrMask.PD | QpInitAttrMask.CREATE_FLAGS, createFlags });
        for (const f of OTHER_FLAGS) assert.throws(() => make(f), { code: 'EOPNOTSUPP' }, `${QpType[type]} flag 0x${f.toString(16)}`);
        for (const f of [-1, 2 ** 32, 0.5]) assert.throws(() => pd.createQp({ ...init, createFlags: f }), { code: 'EINVAL' }, `${QpType[type]} create_flags ${f}`);
        if (blocks) make(QpCreateFlags.BLOCK_SELF_MCAST_LB).destroy();
        else assert.throws(() => make(QpCreateFlags.BLOCK_SELF_MCAST_LB), { code: 'EOPNOTSUPP' }, `${QpType[type]}: no IB_DEVICE_BLOCK_MULTICAST_LOOPBACK`);
        pd.createQp(init).destroy();
      }
    } finally {
      cq.destroy();
      pd.dealloc();
    }
  });
});

/** A group member as mckey makes one: a UDP-port-space id, its UD QP (with `flags`), receives posted, joined. */
async function member(group, flags) {
  const id = createId(null, null, PortSpace.UDP);
  id.bindAddr({ address: '127.0.0.1', port: 0 });
  await id.resolveAddr({ address: '127.0.0.1', port: 0 }, { address: group, port: 0 }, 2000);
  const pd = id.verbs.allocPd();
  const cq = id.verbs.createCq(4 * COUNT);
  const init = { qpType: QpType.UD, sendCq: cq, recvCq: cq, cap: { maxSendWr: COUNT, maxRecvWr: 2 * COUNT, maxSendSge: 1, maxRecvSge: 1 } };
  const qp = flags ? id.createQpEx({ ...init, compMask: QpInitAttrMask.PD | QpInitAttrMask.CREATE_FLAGS, pd, createFlags: flags }) : id.createQp(pd, init);
  const mr = pd.regMr(Buffer.alloc(SLOT * 2 * COUNT), Access.LOCAL_WRITE);
  for (let i = 0; i < 2 * COUNT; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + i * SLOT, length: SLOT, lkey: mr.lkey }] });
  await id.joinMulticast({ address: group, port: 0 });
  const ud = id.event.param.ud;
  const ah = pd.createAh(ud.ahAttr);
  const got = [];
  const m = {
    qp, cq,
    /** Post COUNT sends of `text i` to the group; resolves with their completions. */
    async send(text) {
      const src = pd.regMr(Buffer.alloc(SLOT * COUNT), Access.LOCAL_WRITE);
      for (let i = 0; i < COUNT; i++) {
        const msg = Buffer.from(`${text} ${i}`);
        msg.copy(src.buf, i * SLOT);
        qp.postSend({ wrId: 100 + i, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, ud: { ah, remoteQpn: ud.qpNum, remoteQkey: ud.qkey }, sgList: [{ addr: src.addr + i * SLOT, length: msg.length, lkey: src.lkey }] });
      }
      const wcs = [];
      await until(() => { m.poll(wcs); return wcs.filter((w) => w.opcode === WcOpcode.SEND).length === COUNT; }, 3000, 'send completions');
      src.dereg();
      return wcs.filter((w) => w.opcode === WcOpcode.SEND);
    },
    /** Drain the CQ: receive completions become texts in `got`; others go to `into`. */
    poll(into = []) {
      for (const w of cq.poll(16)) {
        if (w.opcode === WcOpcode.RECV) {
          assert.equal(w.status, WcStatus.SUCCESS);
          got.push(Buffer.from(mr.buf.subarray(w.wrId * SLOT + 40, w.wrId * SLOT + w.byteLen)).toString());
        } else into.push(w);
      }
      return got;
    },
    got,
    async close() {
      await id.leaveMulticast({ address: group, port: 0 });
      ah.destroy();
      id.destroyQp();
      mr.dereg();
      cq.destroy();
      pd.dealloc();
      await id.destroy();
    },
  };
  return m;
}

const texts = (t) => Array.from({ length: COUNT }, (_, i) => `${t} ${i}`);

forEachDevice([Cap.UD, Cap.MCAST, Cap.CM_UDP], (d) => {
  const blocks = (d.device.open().queryDevice().deviceCapFlags & DEVICE_BLOCK_MULTICAST_LOOPBACK) !== 0;
  test('IBV_QP_CREATE_BLOCK_SELF_MCAST_LB: the QP\'s group sends reach no QP of this host (itself included); the others\' reach it', { skip: !blocks && 'the device has no IB_DEVICE_BLOCK_MULTICAST_LOOPBACK' }, async () => {
    const group = '239.3.3.7';
    const quiet = await member(group, QpCreateFlags.BLOCK_SELF_MCAST_LB);
    const other = await member(group, 0);
    try {
      const sent = await quiet.send('blocked');
      assert.deepEqual(sent.map((w) => w.status), Array(COUNT).fill(WcStatus.SUCCESS), 'the sends complete');
      // The other member's sends loop back to every member, the sender included: once they are
      // in, the blocked ones (sent first) would have been too.
      await other.send('looped');
      await until(() => other.poll().length >= COUNT && quiet.poll().length >= COUNT, 3000, 'the looped datagrams');
      await sleep(200);
      assert.deepEqual(other.poll().sort(), texts('looped'), 'the other member: its own, none of the blocked QP\'s');
      assert.deepEqual(quiet.poll().sort(), texts('looped'), 'the blocked QP: the other\'s, none of its own');
    } finally {
      await quiet.close();
      await other.close();
    }
  });
});
