// The soft RoCE device's fault injection on its real data path (two RC QPs of rxe_lo in this
// process, through the device's sockets): a corrupted datagram is dropped by the receiver as an
// ICRC error (rxe's rcvd_icrc_err_drop) and the requester's retry recovers; a partition shorter
// than the retry budget delays the message and loses nothing; the counters show what was done.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roce, until } from '../../../lib/roce.js';
import { wiredRcPair, destroyPairs, drain, WcStatus, WrOpcode, SendFlags } from '../../../lib/roce-rc.js';
import { Access } from '../../../lib/roce.js';

test.after(() => {
  roce.configureImpairment(null);
  destroyPairs();
});

/** Send `text` from a to b once the impairment `cfg` is on; what each side completed. */
async function sendThrough(cfg, text, { until: off } = {}) {
  const { ctx, pd, a, b, cqA, cqB } = wiredRcPair({ timeout: 12, retryCnt: 7 });
  const src = Buffer.from(text);
  const dst = Buffer.alloc(64);
  const smr = pd.regMr(src, Access.LOCAL_WRITE);
  const dmr = pd.regMr(dst, Access.LOCAL_WRITE);
  b.postRecv({ wrId: 1, sgList: [{ addr: dmr.addr, length: dst.length, lkey: dmr.lkey }] });
  const before = ctx.queryCounters();
  roce.configureImpairment(cfg);
  a.postSend({ wrId: 2, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: smr.addr, length: src.length, lkey: smr.lkey }] });
  if (off) {
    await until(() => off(ctx.queryCounters(), before), 3000);
    roce.configureImpairment(null);
  }
  const got = { a: [], b: [] };
  await until(() => ((got.a.push(...drain(cqA)), got.b.push(...drain(cqB))), got.a.length > 0 && got.b.length > 0), 5000);
  roce.configureImpairment(null);
  const after = ctx.queryCounters();
  const d = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]));
  return { got, d, data: dst.subarray(0, src.length).toString() };
}

test('corrupt: the receiver drops the datagram as an ICRC error, the requester resends, the message arrives intact', async () => {
  const r = await sendThrough({ corrupt: 1, seed: 4 }, 'corrupted once', { until: (c, b) => c.rcvd_icrc_err_drop > b.rcvd_icrc_err_drop });
  assert.equal(r.got.a[0].status, WcStatus.SUCCESS);
  assert.equal(r.got.b[0].status, WcStatus.SUCCESS);
  assert.equal(r.data, 'corrupted once');
  assert.ok(r.d.inject_corrupt >= 1);
  assert.equal(r.d.rcvd_icrc_err_drop, r.d.inject_corrupt, 'every corrupted datagram was dropped for its ICRC');
});

test('partition shorter than the retry budget: the message arrives after it, nothing lost', async () => {
  const t0 = Date.now();
  // timeout 12 (16.8 ms) and retry_cnt 7: the first send and its 7 resends span about 120 ms, so a
  // partition of 60 ms ends well within them.
  const r = await sendThrough({ partitionMs: 60, partitionAt: 1 }, 'after the partition');
  assert.equal(r.got.a[0].status, WcStatus.SUCCESS);
  assert.equal(r.got.b[0].status, WcStatus.SUCCESS);
  assert.equal(r.data, 'after the partition');
  assert.ok(Date.now() - t0 >= 55, 'not before the partition ended');
  assert.ok(r.d.inject_partition_drop >= 1);
  assert.equal(r.d.rcvd_icrc_err_drop, 0);
});

test('latency and jitter: delivered, later, counted', async () => {
  const t0 = Date.now();
  const r = await sendThrough({ latencyMs: 30, jitterMs: 10, seed: 2 }, 'late');
  assert.equal(r.got.b[0].status, WcStatus.SUCCESS);
  assert.equal(r.data, 'late');
  assert.ok(Date.now() - t0 >= 55, 'the SEND and its ACK each waited at least latency');
  assert.ok(r.d.inject_delay >= 2);
});
