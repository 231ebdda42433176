// listResources() — `rdma resource show` of this process — on every device that connects RC QPs:
// after known objects are made, each is listed with what it is (QP numbers, type and state, the
// peer's QP number and PSNs on RoCE, MSNs and the TCP peer on iWARP; CM ids with state, port space
// and addresses; MRs with length, keys and rights and nothing of their memory; CQs with their
// size and users; PDs with theirs), and an object destroyed is no longer listed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { listResources, Access, WrOpcode, SendFlags, TransportType } from '../../dist/index.js';
import { rcPair, reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const mine = (list, dev) => list.filter((r) => r.ifname === dev && r.pid === process.pid);

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  const iwarp = d.transportType === TransportType.IWARP;

  test('a connected pair, its CM ids, an MR, CQs and the PD are listed as they are', async () => {
    const { a, b, close } = await rcPair({ send: 4, recv: 4 });
    const qpns = [a.qp.qpNum, b.qp.qpNum];
    const srcPort = a.srcPort;
    let mr;
    try {
      mr = a.pd.regMr(Buffer.alloc(8192, 0x41), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const dst = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
      b.qp.postRecv({ wrId: 1, sgList: [{ addr: dst.addr, length: 64, lkey: dst.lkey }] });
      b.qp.postRecv({ wrId: 2, sgList: [{ addr: dst.addr, length: 64, lkey: dst.lkey }] });
      for (let i = 0; i < 2; i++) a.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 16, lkey: mr.lkey }], sendFlags: SendFlags.SIGNALED });
      await reap(a.sendCq, 2);
      await reap(b.recvCq, 2);
      const r = listResources();

      const qa = mine(r.qp, d.name).find((q) => q.lqpn === a.qp.qpNum);
      const qb = mine(r.qp, d.name).find((q) => q.lqpn === b.qp.qpNum);
      assert.ok(qa && qb, JSON.stringify(r.qp));
      for (const [q, id] of [[qa, a], [qb, b]]) {
        assert.equal(q.type, 'RC');
        assert.equal(q.state, 'RTS');
        assert.equal(q.port, 1);
        assert.equal(q.pdn, id.pd.handle);
      }
      if (iwarp) {
        assert.equal(qa['sq-msn'], 2, 'two Sends sent');
        assert.equal(qb['rq-msn'], 3, 'the next Send expected');
        assert.equal(qa['dst-addr'], qb['src-addr']);
        assert.ok(!('rqpn' in qa) && !('sq-psn' in qa), 'siw reports neither');
      } else {
        assert.equal(qa.rqpn, b.qp.qpNum);
        assert.equal(qb.rqpn, a.qp.qpNum);
        assert.equal(qa['sq-psn'], qb['rq-psn'], 'both ends at the same PSN once everything is acknowledged');
        assert.equal(qa['dst-addr'], '127.0.0.1');
        assert.equal(qa['src-addr'], '127.0.0.1');
      }

      const ids = mine(r.cm_id, d.name);
      const ia = ids.find((i) => i.lqpn === a.qp.qpNum);
      assert.equal(ia.state, 'CONNECT');
      assert.equal(ia.ps, 'TCP');
      assert.equal(ia['qp-type'], 'RC');
      assert.equal(ia['src-addr'], `127.0.0.1:${a.srcPort}`);
      assert.equal(ia['dst-addr'], `127.0.0.1:${a.dstPort}`);
      assert.ok(ids.some((i) => i.state === 'LISTEN' && i['src-addr'] === `127.0.0.1:${a.dstPort}`), 'the listener');

      const m = mine(r.mr, d.name).find((x) => x.lkey === mr.lkey.toString(16));
      assert.deepEqual(m, { ifname: d.name, mrn: mr.handle, rkey: mr.rkey.toString(16), lkey: mr.lkey.toString(16), mrlen: 8192, access: ['LOCAL_WRITE', 'REMOTE_WRITE'], pdn: a.pd.handle, pid: process.pid, comm: m.comm });
      assert.ok(!JSON.stringify(r).includes('AAAA'), 'no memory contents anywhere');

      const cq = mine(r.cq, d.name).find((c) => c.cqn === a.sendCq.handle);
      assert.equal(cq.cqe, a.sendCq.cqe);
      assert.equal(cq.users, 1);
      const pd = mine(r.pd, d.name).find((p) => p.pdn === a.pd.handle);
      assert.ok(pd.users >= 2 + 2, `PD users ${pd.users}`); // two QPs, two MRs of this test at least

      mr.dereg();
      const after = listResources();
      assert.ok(!mine(after.mr, d.name).some((x) => x.lkey === mr.lkey.toString(16)), 'a deregistered MR is gone');
    } finally {
      if (mr?.registered) mr.dereg();
      await close();
    }
    const gone = listResources();
    assert.ok(!mine(gone.qp, d.name).some((q) => qpns.includes(q.lqpn)), 'destroyed QPs are gone');
    assert.ok(!gone.cm_id.some((i) => i['src-addr'] === `127.0.0.1:${srcPort}`), 'destroyed ids are gone');
  });
});
