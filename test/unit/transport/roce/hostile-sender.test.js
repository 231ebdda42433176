// A hostile sender sprays random bytes (and corrupted RoCE packets, some aimed at live and at
// foreign QPNs) at the device's UDP port for a bounded time; the device drops and counts them
// all, delivers nothing, does not crash, and still serves a real exchange afterwards.
// ROCE_HOSTILE_MS sets the duration (default 3 s; the acceptance run uses 60000).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { loDevice, v4GidIndex, udQp, ahTo, pollN, rawSender, WrOpcode, SendFlags, Access, WcStatus, roce } from '../../../lib/roce.js';

const MS = Number(process.env.ROCE_HOSTILE_MS ?? 3000);

test(`random datagrams at the RoCE port for ${MS} ms leave the device serving`, { timeout: MS + 30000 }, async (t) => {
  const ctx = loDevice().open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(64);
  const buf = Buffer.alloc(8192);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  const sgid = v4GidIndex(ctx);
  const a = udQp(pd, cq, 0x42);
  const b = udQp(pd, cq, 0x42);
  // Live QPs hold the process: release them whatever the outcome.
  t.after(() => {
    a.destroy();
    b.destroy();
  });
  for (let i = 0; i < 8; i++) b.postRecv({ wrId: `b${i}`, sgList: [{ addr: mr.addr + 4096, length: 1024, lkey: mr.lkey }] });
  const raw = await rawSender();
  after(() => raw.close());
  const template = Buffer.from(raw.ud({ destQp: b.qpNum, qkey: 0x42, payload: Buffer.alloc(32, 1) }));
  let seed = (Date.now() & 0xffff) | 1;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8);
  const before = roce.counters('rxe_lo');
  const end = Date.now() + MS;
  let sent = 0;
  while (Date.now() < end) {
    const batch = [];
    for (let k = 0; k < 64; k++) {
      let p;
      const kind = rnd() % 4;
      if (kind === 0) {
        p = Buffer.alloc(rnd() % 1400);
        for (let i = 0; i < p.length; i++) p[i] = rnd();
      } else if (kind === 1) {
        // random bytes addressed to a live QP, a foreign block, QP1 or multicast
        p = Buffer.alloc(16 + (rnd() % 300));
        for (let i = 0; i < p.length; i++) p[i] = rnd();
        const dq = [b.qpNum, (rnd() % 16000) << 10, 1, 0xffffff][rnd() % 4];
        p.writeUIntBE(dq, 5, 3);
      } else {
        // Flips anywhere but BTH byte 4 (FECN, BECN and reserved bits): the ICRC masks that byte
        // (rxe ignores it too), so a packet changed only there is still a valid packet.
        p = Buffer.from(template);
        for (let f = 1 + (rnd() % 4); f > 0; f--) {
          let at = rnd() % (p.length - 1);
          if (at >= 4) at++;
          p[at] ^= 1 << (rnd() % 8);
        }
        if (kind === 3) p = p.subarray(0, rnd() % p.length);
      }
      batch.push(raw.send(p));
    }
    await Promise.all(batch);
    sent += batch.length;
  }
  await new Promise((r) => setTimeout(r, 200));
  const mid = roce.counters('rxe_lo');
  assert.ok(sent > 100, `sent ${sent}`);
  // Nothing garbled reached a receive buffer (a corrupted packet passes the 16 remaining ICRC
  // bits with probability 2^-16 per packet; allow for that, never more than a few).
  const delivered = mid.rdma_recvs - before.rdma_recvs;
  assert.ok(delivered <= Math.max(1, Math.ceil(sent / 20000)), `delivered ${delivered} of ${sent} hostile datagrams`);
  assert.deepEqual(
    cq.poll(64).filter((w) => w.status !== WcStatus.SUCCESS),
    [],
    'no error completions',
  );
  // The device still serves.
  const ah = ahTo(pd, ctx.queryGid(1, sgid), sgid);
  buf.write('still here', 0);
  a.postSend({ wrId: 'ok', opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr, length: 10, lkey: mr.lkey }], ud: { ah, remoteQpn: b.qpNum, remoteQkey: 0x42 } });
  const wcs = await pollN(cq, 2);
  const r = wcs.find((w) => String(w.wrId).startsWith('b'));
  assert.ok(r && r.status === WcStatus.SUCCESS, 'a real datagram is received after the storm');
  assert.equal(buf.subarray(4096 + 40, 4096 + 50).toString(), 'still here');
});
