// A frozen RC peer on rxe_lo, in real time: every datagram the device sends is dropped (the
// impairment of impair.ts), so the responder never answers. The requester's SEND completes with
// RETRY_EXC_ERR after retry_cnt + 1 local ACK timeouts of 4.096 µs × 2^timeout, with exactly
// retry_cnt retransmissions — counted by the device (completer_retry_err, retry_exceeded_err,
// sent_pkts) and by the impairment (datagrams dropped), over several runs.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Access, roce, QpState } from '../../../lib/roce.js';
import { wiredRcPair, destroyPairs, drain, WcStatus, WrOpcode } from '../../../lib/roce-rc.js';

after(() => {
  roce.configureImpairment(null);
  destroyPairs();
});

/** The local ACK timeout of QP attribute `timeout` in ms: 4.096 µs × 2^timeout in whole 4 ms jiffies, as rxe arms it. */
const rtoMs = (timeout) => Math.max(1, Math.floor((4096 * 2 ** timeout) / 4e6)) * 4;

/** Wait until `cq` holds a completion; polls at 1 ms. Resolves with it and when it was seen. */
async function firstCompletion(cq, limitMs) {
  const end = performance.now() + limitMs;
  for (;;) {
    const w = cq.poll(1);
    if (w.length > 0) return { wc: w[0], at: performance.now() };
    if (performance.now() > end) return { wc: undefined, at: performance.now() };
    await new Promise((r) => setTimeout(r, 1));
  }
}

for (const [timeout, retryCnt, runs] of [
  [14, 3, 3], // 67.1 ms → 64 ms: RETRY_EXC_ERR at 4 × 64 = 256 ms
  [12, 7, 2], // 16.8 ms → 16 ms: 8 × 16 = 128 ms (retry_cnt 7 is seven retries)
  [14, 0, 2], // no retry: one timeout
]) {
  test(`timeout ${timeout}, retry_cnt ${retryCnt}: RETRY_EXC_ERR after ${retryCnt + 1} timeouts and ${retryCnt} retransmissions, every run`, { timeout: 60_000 }, async () => {
    const rto = rtoMs(timeout);
    for (let run = 0; run < runs; run++) {
      const { pd, a, b, cqA, cqB } = wiredRcPair({ timeout, retryCnt });
      const buf = Buffer.alloc(64);
      const mr = pd.regMr(buf, Access.LOCAL_WRITE);
      b.postRecv({ wrId: 'r', sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
      roce.configureImpairment({ loss: 1, seed: 1 });
      const c0 = roce.counters('rxe_lo');
      const t0 = performance.now();
      a.postSend({ wrId: run, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr, length: 16, lkey: mr.lkey }] });
      // Generous: the event loop of a loaded machine may be late, never early.
      const limit = (retryCnt + 1) * rto * 4 + 5000;
      const { wc, at } = await firstCompletion(cqA, limit);
      const dropped = roce.impairmentCounts().dropped;
      roce.configureImpairment(null);
      const c1 = roce.counters('rxe_lo');
      assert.ok(wc !== undefined, `run ${run}: a completion within ${limit} ms`);
      assert.equal(wc.status, WcStatus.RETRY_EXC_ERR, `run ${run}: status`);
      assert.equal(wc.wrId, run);
      assert.equal(a.state, QpState.ERR);
      // The retries, counted by the device and the link.
      assert.equal(c1.completer_retry_err - c0.completer_retry_err, retryCnt, `run ${run}: retransmissions`);
      assert.equal(c1.retry_exceeded_err - c0.retry_exceeded_err, 1, `run ${run}: retry_exceeded_err`);
      assert.equal(c1.sent_pkts - c0.sent_pkts, retryCnt + 1, `run ${run}: the SEND went out ${retryCnt + 1} times`);
      assert.equal(dropped, retryCnt + 1, `run ${run}: every one of them dropped`);
      // The time: (retry_cnt + 1) timeouts, each at least the attribute's (a timer fires late, not
      // early; 1 ms for Node's timer rounding).
      const elapsed = at - t0;
      assert.ok(elapsed >= (retryCnt + 1) * rto - 1, `run ${run}: ${elapsed.toFixed(1)} ms ≥ ${((retryCnt + 1) * rto).toFixed(1)} ms`);
      assert.ok(elapsed <= limit, `run ${run}: ${elapsed.toFixed(1)} ms`);
      assert.deepEqual(drain(cqB), [], 'the frozen responder completed nothing');
      a.destroy();
      b.destroy();
      mr.dereg();
    }
  });
}
