// The soft iWARP QP reuses the send and receive WQE objects of completed work requests for later
// posts. A reused WQE must carry nothing of its previous WR: every completion reports its own
// wr_id, opcode and byte count, every message lands in the receive it was posted into, every
// RDMA WRITE at its own remote address, whatever mix of opcodes, SGE counts and flags comes in
// between.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Access, WrOpcode, SendFlags, WcOpcode, WcStatus } from '../../../../dist/index.js';
import { rcPair, reap } from '../../../lib/cm-rc-pair.js';

test('reused WQEs carry only their own WR: wr_id, opcode, lengths, SGEs, remote address', async () => {
  const { a, b, close } = await rcPair({ send: 16, recv: 16, sge: 3 });
  try {
    const sb = Buffer.alloc(4096);
    const db = Buffer.alloc(8192);
    const src = a.pd.regMr(sb, Access.LOCAL_WRITE);
    const dst = b.pd.regMr(db, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const rounds = 40;
    for (let r = 0; r < rounds; r++) {
      // A receive of 1, 2 or 3 SGEs (the same count two rounds in a row, so that a completed
      // receive's WQE is reused with the same SGE count) at offsets that change every round.
      const nsge = 1 + ((r >> 1) % 3);
      const base = 4096 + (r % 7) * 300;
      const rsg = [];
      for (let j = 0; j < nsge; j++) rsg.push({ addr: dst.addr + base + j * 100, length: 40, lkey: dst.lkey });
      b.qp.postRecv({ wrId: `recv-${r}`, sgList: rsg });

      const len = 1 + ((r * 37) % (nsge * 40)); // fits the receive
      for (let i = 0; i < len; i++) sb[i] = (r * 7 + i) & 0xff;
      const woff = (r % 5) * 512;
      for (let i = 0; i < 200; i++) sb[1000 + i] = (r + i * 3) & 0xff;
      // Every second round a signaled WRITE ahead of the SEND, inline or not; signaled or not.
      const wrs = [];
      if (r % 2 === 0) {
        wrs.push({ wrId: `write-${r}`, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr + 1000, length: 200, lkey: src.lkey }], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: dst.addr + woff, rkey: dst.rkey } });
      }
      wrs.push({ wrId: `send-${r}`, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr, length: len, lkey: src.lkey }], sendFlags: (r % 3 === 0 ? SendFlags.INLINE : 0) | (r % 4 !== 1 ? SendFlags.SIGNALED : 0) });
      a.qp.postSend(wrs.length === 1 ? wrs[0] : wrs);

      const [rc] = await reap(b.recvCq, 1);
      assert.equal(rc.status, WcStatus.SUCCESS);
      assert.equal(rc.wrId, `recv-${r}`);
      assert.equal(rc.opcode, WcOpcode.RECV);
      assert.equal(rc.byteLen, len);
      const got = Buffer.alloc(len);
      let at = 0;
      for (const s of rsg) {
        const k = Math.min(s.length, len - at);
        if (k <= 0) break;
        db.subarray(s.addr - dst.addr, s.addr - dst.addr + k).copy(got, at);
        at += k;
      }
      assert.deepEqual(got, Buffer.from(sb.subarray(0, len)), `round ${r}: message placed into its receive's SGEs`);
      if (r % 2 === 0) assert.deepEqual(Buffer.from(db.subarray(woff, woff + 200)), Buffer.from(sb.subarray(1000, 1200)), `round ${r}: WRITE at its own address`);

      const want = [];
      if (r % 2 === 0) want.push([`write-${r}`, WcOpcode.RDMA_WRITE]);
      if (r % 4 !== 1) want.push([`send-${r}`, WcOpcode.SEND]);
      const scs = want.length > 0 ? await reap(a.sendCq, want.length) : [];
      assert.deepEqual(scs.map((w) => [w.wrId, w.opcode, w.status, w.byteLen]), want.map(([id, op]) => [id, op, WcStatus.SUCCESS, 0]), `round ${r}: send completions`);
    }
    assert.equal(a.sendCq.poll(16).length, 0);
    assert.equal(b.recvCq.poll(16).length, 0);
  } finally {
    await close();
  }
});

test('a receive reposted from inside the completion loop gets its own buffer each time', async () => {
  const { a, b, close } = await rcPair({ send: 16, recv: 4 });
  try {
    const sb = Buffer.alloc(64);
    const db = Buffer.alloc(4 * 64);
    const src = a.pd.regMr(sb, Access.LOCAL_WRITE);
    const dst = b.pd.regMr(db, Access.LOCAL_WRITE);
    for (let i = 0; i < 4; i++) b.qp.postRecv({ wrId: i, sgList: [{ addr: dst.addr + i * 64, length: 64, lkey: dst.lkey }] });
    const seen = [];
    for (let m = 0; m < 24; m++) {
      sb.fill(m + 1);
      a.qp.postSend({ wrId: m, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr, length: 8 + m, lkey: src.lkey }], sendFlags: 0 });
      const [wc] = await reap(b.recvCq, 1);
      const slot = Number(wc.wrId);
      assert.equal(slot, m % 4, 'receives complete in posting order');
      assert.equal(wc.byteLen, 8 + m);
      assert.ok(db.subarray(slot * 64, slot * 64 + 8 + m).every((x) => x === m + 1), `message ${m} in slot ${slot}`);
      seen.push(slot);
      b.qp.postRecv({ wrId: slot, sgList: [{ addr: dst.addr + slot * 64, length: 64, lkey: dst.lkey }] });
    }
    assert.equal(seen.length, 24);
  } finally {
    await close();
  }
});
