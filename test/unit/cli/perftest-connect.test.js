// How perftest's QPs are moved to RTR and RTS (src/cli/perftest/resources.ts connectQps, after
// perftest_resources.c ctx_modify_qp_to_rtr / ctx_modify_qp_to_rts) and how many reads it keeps
// in flight (setOutReads, after perftest_parameters.c ctx_set_out_reads).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectQps, setOutReads } from '../../../dist/cli/perftest/resources.js';
import { parsePerfArgs, Verb, Test } from '../../../dist/cli/perftest/params.js';
import { QpState } from '../../../dist/cli/api.js';

const dest = (outReads, qpn, psn) => ({ lid: 0, outReads, qpn, psn, rkey: 1, vaddr: 0n, gid: new Uint8Array(16), srqn: 0 });

/** A QP that records what it is moved with. */
function recordingQp() {
  const calls = [];
  return { calls, modify: (a) => calls.push(a) };
}

function connect(tool, verb, tst, args, mine, rem) {
  const { params } = parsePerfArgs(tool, verb, tst, args);
  const qp = recordingQp();
  const ok = connectQps(params, { gidIndex: -1 }, { qps: [qp], ahs: [], pd: null }, [mine], [rem], 3);
  return { ok, calls: qp.calls };
}

test('RC: the responder takes our OUT (max_dest_rd_atomic), the requester keeps the peer\'s OUT in flight (max_rd_atomic)', () => {
  const { ok, calls } = connect('ib_read_bw', Verb.READ, Test.BW, [], dest(16, 0x11, 0x100), dest(128, 0x22, 0x200));
  assert.equal(ok, true);
  assert.equal(calls.length, 2);
  const [rtr, rts] = calls;
  assert.equal(rtr.qpState, QpState.RTR);
  assert.equal(rtr.maxDestRdAtomic, 16);
  assert.equal(rtr.destQpNum, 0x22);
  assert.equal(rtr.rqPsn, 0x200);
  assert.equal(rts.qpState, QpState.RTS);
  assert.equal(rts.maxRdAtomic, 128);
  assert.equal(rts.sqPsn, 0x100);
});

test('UC and UD: no read or atomic attributes', () => {
  const uc = connect('ib_write_bw', Verb.WRITE, Test.BW, ['-c', 'UC'], dest(1, 1, 2), dest(1, 3, 4));
  assert.equal(uc.ok, true);
  for (const a of uc.calls) {
    assert.equal(a.maxRdAtomic, undefined);
    assert.equal(a.maxDestRdAtomic, undefined);
  }
});

test('a failing modify: false after perftest\'s message', (t) => {
  const { params } = parsePerfArgs('ib_write_bw', Verb.WRITE, Test.BW, []);
  const qp = { modify: () => { throw new Error('EINVAL'); } };
  const err = [];
  t.mock.method(process.stderr, 'write', (s) => { err.push(String(s)); return true; });
  const ok = connectQps(params, { gidIndex: -1 }, { qps: [qp], ahs: [], pd: null }, [dest(1, 1, 2)], [dest(1, 3, 4)], 3);
  t.mock.restoreAll();
  assert.equal(ok, false);
  assert.match(err.join(''), /Failed to modify QP to RTR\n Unable to Connect the HCA's through the link\n/);
});

test('-o: the device\'s max_qp_rd_atom when not given; the value when within it; the max, with perftest\'s lines, when above', (t) => {
  const p = (args) => parsePerfArgs('ib_read_bw', Verb.READ, Test.BW, args).params;
  assert.equal(setOutReads(p([]), 128), 128);
  assert.equal(setOutReads(p(['-o', '4']), 128), 4);
  const err = [];
  const outp = [];
  t.mock.method(process.stderr, 'write', (s) => { err.push(String(s)); return true; });
  t.mock.method(process.stdout, 'write', (s) => { outp.push(String(s)); return true; });
  const v = setOutReads(p(['-o', '200']), 128);
  t.mock.restoreAll();
  assert.equal(v, 128);
  assert.equal(err.join(''), ' Number of outstanding reads is above max = 128\n Changing to that max value\n');
  assert.equal(outp.join(''), `${'-'.repeat(87)}\n`);
});
