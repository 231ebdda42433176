// Device counters (`Context.queryCounters`, `rdma statistic show link DEV/1`) on every device
// that connects RC QPs: the message, packet and byte counters after N Sends of S bytes, and the
// error counters after an RDMA Write with an rkey the peer never registered. What each device
// counts comes from its transport (docs/counters.md): iWARP counts RDMAP messages, FPDUs and
// their bytes, RoCE rxe's hw counters.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Access, WrOpcode, SendFlags, WcStatus, TransportType } from '../../dist/index.js';
import { rcPair, reap } from '../lib/cm-rc-pair.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { until } from '../lib/wait.js';

const sg = (mr, off = 0, len = mr.length - off) => [{ addr: mr.addr + off, length: len, lkey: mr.lkey }];

/** `after - before` for every counter. */
function delta(before, after) {
  const out = {};
  for (const k of Object.keys(after)) out[k] = after[k] - (before[k] ?? 0);
  return out;
}

/** Bytes of one FPDU carrying an untagged (Send) segment of `n` bytes: MPA length, DDP/RDMAP header, payload, pad, CRC. */
const sendFpduBytes = (n) => 20 + n + (-(20 + n) & 3) + 4;

forEachDevice([Cap.RC, Cap.CM_TCP], (d) => {
  const iwarp = d.transportType === TransportType.IWARP;

  test('queryCounters: names and non-negative values; EINVAL for a port the device lacks', () => {
    const ctx = d.device.open();
    try {
      const c = ctx.queryCounters();
      assert.ok(Object.keys(c).length > 0);
      for (const [k, v] of Object.entries(c)) assert.ok(Number.isInteger(v) && v >= 0, `${k} = ${v}`);
      assert.deepEqual(Object.keys(ctx.queryCounters(1)), Object.keys(c), 'the same names every time');
      assert.throws(() => ctx.queryCounters(2), { code: 'EINVAL' });
      for (const name of iwarp ? ['iwOutRdmaSends', 'mpaOutOctets', 'iwTerminatesSent', 'mpaCrcErrors'] : ['sent_pkts', 'rcvd_pkts', 'rdma_sends', 'rdma_recvs']) {
        assert.ok(name in c, name);
      }
    } finally {
      ctx.close();
    }
  });

  test('N Sends of S bytes move the message, packet and byte counters by what went out', async () => {
    const N = 7;
    const S = 101;
    const { a, b, close } = await rcPair({ send: N, recv: N });
    try {
      const src = a.pd.regMr(Buffer.alloc(S, 0x5a), 0);
      const dst = b.pd.regMr(Buffer.alloc(S * N), Access.LOCAL_WRITE);
      const ctx = a.qp.context;
      // Let the connection's own first packets (RTR, ACKs) go before counting.
      await new Promise((r) => setTimeout(r, 50));
      const before = ctx.queryCounters();
      for (let i = 0; i < N; i++) b.qp.postRecv({ wrId: i, sgList: sg(dst, i * S, S) });
      for (let i = 0; i < N; i++) a.qp.postSend({ wrId: i, opcode: WrOpcode.SEND, sgList: sg(src), sendFlags: SendFlags.SIGNALED });
      const s = await reap(a.sendCq, N);
      const r = await reap(b.recvCq, N);
      assert.ok([...s, ...r].every((w) => w.status === WcStatus.SUCCESS));
      const dl = delta(before, ctx.queryCounters());
      if (iwarp) {
        assert.equal(dl.iwOutRdmaSends, N);
        assert.equal(dl.iwInRdmaSends, N);
        assert.equal(dl.mpaOutFpdus, N);
        assert.equal(dl.mpaInFpdus, N);
        assert.equal(dl.mpaOutOctets, N * sendFpduBytes(S));
        assert.equal(dl.mpaInOctets, N * sendFpduBytes(S));
        for (const k of ['iwOutRdmaWrites', 'iwInRdmaWrites', 'iwOutRdmaReads', 'iwInRdmaReads', 'iwTerminatesSent', 'mpaCrcErrors']) assert.equal(dl[k], 0, k);
      } else {
        assert.equal(dl.rdma_sends, N);
        assert.equal(dl.rdma_recvs, N);
        // Each Send is one packet (S below the MTU); the responder's ACKs are packets too.
        assert.ok(dl.sent_pkts >= N && dl.sent_pkts <= 2 * N, `sent_pkts +${dl.sent_pkts}`);
        assert.ok(dl.rcvd_pkts >= N && dl.rcvd_pkts <= 2 * N, `rcvd_pkts +${dl.rcvd_pkts}`);
        assert.equal(dl.rkey_violation_err, 0);
      }
    } finally {
      await close();
    }
  });

  test('an RDMA Write with an unregistered rkey is counted as the error it is', async () => {
    const { a, close } = await rcPair();
    try {
      const ctx = a.qp.context;
      const src = a.pd.regMr(Buffer.alloc(16, 1), 0);
      const before = ctx.queryCounters();
      a.qp.postSend({ wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: sg(src), rdma: { rkey: 0x7fff_ff00, remoteAddr: 0x1000 }, sendFlags: SendFlags.SIGNALED });
      const [w] = await reap(a.sendCq, 1);
      // An iWARP Write completes once handed to TCP; the peer's TERMINATE comes after.
      if (!iwarp) assert.notEqual(w.status, WcStatus.SUCCESS);
      if (iwarp) {
        // siw: the responder refuses the tagged segment (DDP, invalid STag) with a TERMINATE.
        await until(() => delta(before, ctx.queryCounters()).iwTerminatesRcvd === 1, 3000);
        const dl = delta(before, ctx.queryCounters());
        assert.equal(dl.ddpErrors, 1);
        assert.equal(dl.iwTerminatesSent, 1);
        assert.equal(dl.iwOutRdmaWrites, 1);
        assert.equal(dl.iwInRdmaWrites, 0, 'a refused Write is not a Write received');
      } else {
        const dl = delta(before, ctx.queryCounters());
        assert.equal(dl.rkey_violation_err, 1);
      }
    } finally {
      await close();
    }
  });
});
