// Connection setup and the first data with this process stalled (kept busy, reading nothing) at
// each of the first turns of its event loop, on both sides of a loopback pair, with the default
// MPA timers: whatever the moment, the connection comes up and carries data. (Stalls longer than
// the MPA timers: slow-setup.test.js; stopped processes: test/e2e/slow-peer.test.js.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Access, WrOpcode, SendFlags, WcStatus } from '../../../../dist/index.js';
import { rcPair, reap } from '../../../lib/cm-rc-pair.js';

/** Keep this process (and every socket in it) busy for `ms`: nothing is read meanwhile. */
function stall(ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline);
}

test('both sides stalled at every step of the setup: the pair connects and exchanges data', async () => {
  // A stall of 300 ms injected at each turn of the event loop for
  // the first turns of the setup, one offset per round: whatever the moment, nothing is lost.
  for (let turn = 0; turn < 8; turn++) {
    let n = 0;
    const tick = () => {
      if (n++ === turn) stall(300);
      else if (n < 12) setImmediate(tick);
    };
    setImmediate(tick);
    const { a, b, close } = await rcPair({ send: 4, recv: 4 });
    const src = Buffer.from(`round ${turn}`);
    const dst = Buffer.alloc(32);
    const smr = a.pd.regMr(src, Access.LOCAL_WRITE);
    const dmr = b.pd.regMr(dst, Access.LOCAL_WRITE);
    b.qp.postRecv({ wrId: 1, sgList: [{ addr: dmr.addr, length: 32, lkey: dmr.lkey }] });
    a.qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: smr.addr, length: src.length, lkey: smr.lkey }] });
    const [r] = await reap(b.recvCq, 1);
    const [s] = await reap(a.sendCq, 1);
    assert.equal(r.status, WcStatus.SUCCESS, `round ${turn}`);
    assert.equal(s.status, WcStatus.SUCCESS, `round ${turn}`);
    assert.equal(dst.toString('latin1', 0, r.byteLen), `round ${turn}`);
    await close();
  }
});
