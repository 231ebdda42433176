// Prepared work-request lists (qp.prepareSend / prepareRecv, posted by qp.postPrepared) on every
// device that connects RC QPs: each post delivers what was checked and completes each WR once;
// the list is a snapshot of the WRs; a WR refused at preparation names its index; a list belongs
// to its QP; a post has postSend's rules (queue room, QP state).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Access, WrOpcode, SendFlags, WcStatus, WcOpcode, PostError, PreparedWrs } from '../../dist/index.js';
import { rcPair, reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, Cap } from '../lib/devices.js';

const sg = (mr, off, len) => [{ addr: mr.addr + off, length: len, lkey: mr.lkey }];

forEachDevice([Cap.RC, Cap.CM_TCP], () => {
  test('a prepared list posted many times: every message delivered, every WR completed once', async () => {
    const { a, b, close } = await rcPair({ send: 8, recv: 8 });
    try {
      const src = Buffer.alloc(256);
      const dst = Buffer.alloc(256);
      const ma = a.pd.regMr(src, Access.LOCAL_WRITE);
      const mb = b.pd.regMr(dst, Access.LOCAL_WRITE);
      const recvWrs = [0, 1, 2, 3].map((i) => ({ wrId: 10 + i, sgList: sg(mb, i * 64, 64) }));
      const sendWrs = [0, 1, 2, 3].map((i) => ({ wrId: 20 + i, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: sg(ma, i * 64, 16 + i) }));
      const recvs = b.qp.prepareRecv(recvWrs);
      const sends = a.qp.prepareSend(sendWrs);
      assert.ok(recvs instanceof PreparedWrs && sends instanceof PreparedWrs);
      assert.equal(sends.length, 4);
      assert.equal(sends.kind, 'send');
      assert.equal(recvs.kind, 'recv');
      // A snapshot: what the WR objects say afterwards changes nothing.
      sendWrs[0].sgList = sg(ma, 0, 1);
      sendWrs[1].wrId = 99;
      recvWrs[2].sgList[0].length = 1;
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 4; i++) src.fill(round * 4 + i + 1, i * 64, i * 64 + 64);
        b.qp.postPrepared(recvs);
        a.qp.postPrepared(sends);
        const got = await reap(b.recvCq, 4);
        assert.deepEqual(got.map((w) => [w.wrId, w.status, w.opcode, w.byteLen]), [0, 1, 2, 3].map((i) => [10 + i, WcStatus.SUCCESS, WcOpcode.RECV, 16 + i]), `round ${round}`);
        const sent = await reap(a.sendCq, 4);
        assert.deepEqual(sent.map((w) => [w.wrId, w.status, w.opcode]), [0, 1, 2, 3].map((i) => [20 + i, WcStatus.SUCCESS, WcOpcode.SEND]));
        for (let i = 0; i < 4; i++) assert.deepEqual([...dst.subarray(i * 64, i * 64 + 16 + i)], Array(16 + i).fill(round * 4 + i + 1), `message ${i} of round ${round}`);
        assert.deepEqual(a.sendCq.poll(4), [], 'nothing more');
        assert.deepEqual(b.recvCq.poll(4), [], 'nothing more');
      }
      ma.dereg();
      mb.dereg();
    } finally {
      await close();
    }
  });

  test('preparing checks as posting does; a list is posted by its own QP only; a post has postSend\'s rules', async () => {
    const { a, b, close } = await rcPair({ send: 4, recv: 16 });
    try {
      const m = a.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
      const good = { wrId: 1, opcode: WrOpcode.SEND, sgList: sg(m, 0, 8) };
      const tooMany = Array.from({ length: a.qp.cap.maxSendSge + 1 }, (_, i) => sg(m, i, 1)[0]);
      assert.throws(() => a.qp.prepareSend([good, good, { ...good, sgList: tooMany }]), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 2 && e.op === 'ibv_post_send');
      assert.throws(() => a.qp.prepareSend({ ...good, opcode: 77 }), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 0);
      const tooManyRecv = Array.from({ length: a.qp.cap.maxRecvSge + 1 }, (_, i) => sg(m, i, 1)[0]);
      assert.throws(() => a.qp.prepareRecv([{ wrId: 1, sgList: [] }, { wrId: 2, sgList: tooManyRecv }]), (e) => e instanceof PostError && e.code === 'EINVAL' && e.badWrIndex === 1 && e.op === 'ibv_post_recv');
      const p = a.qp.prepareSend(good);
      assert.throws(() => b.qp.postPrepared(p), (e) => e instanceof PostError && e.code === 'EINVAL' && /another QP/.test(e.message));
      assert.throws(() => a.qp.postPrepared({ kind: 'send', qp: a.qp, wrs: [good] }), (e) => e instanceof PostError && e.code === 'EINVAL');
      // The send queue's room: a list longer than it is refused where postSend refuses it.
      const depth = a.qp.cap.maxSendWr;
      assert.ok(b.qp.cap.maxRecvWr >= depth, 'the peer holds a receive for each');
      const long = a.qp.prepareSend(Array.from({ length: depth + 1 }, (_, i) => ({ ...good, wrId: 100 + i, sendFlags: SendFlags.SIGNALED })));
      const mb = b.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
      b.qp.postRecv(Array.from({ length: b.qp.cap.maxRecvWr }, (_, i) => ({ wrId: 200 + i, sgList: sg(mb, 0, 64) })));
      assert.throws(() => a.qp.postPrepared(long), (e) => e instanceof PostError && e.code === 'ENOMEM' && e.badWrIndex === depth);
      const first = await reap(a.sendCq, 1);
      assert.deepEqual(first.map((w) => [w.wrId, w.status]), [[100, WcStatus.SUCCESS]], 'the WRs before the one refused were posted');
      m.dereg();
      mb.dereg();
    } finally {
      await close();
    }
  });
});
