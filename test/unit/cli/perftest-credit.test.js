// send_bw's receive credits over iWARP (credit.ts, perftest's send_rcredit): the keys name the
// credit word, the receiver's count goes out every rx_depth/3 messages from its own word, the
// sender's window closes rx_depth messages beyond the count the peer wrote. And the SEND tests'
// odd rx depth, which perftest makes even.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { endianness } from 'node:os';
import { Credits } from '../../../dist/cli/perftest/credit.js';
import { parsePerfArgs, Verb, Test } from '../../../dist/cli/perftest/params.js';
import { WrOpcode, SendFlags, Access } from '../../../dist/index.js';

/** A PD whose regMr records the buffer and access, at a fixed address and keys. */
function fakePd() {
  const pd = {
    regMr(buf, access) {
      pd.buf = buf;
      pd.access = access;
      return { addr: 0x10000, lkey: 0x11, rkey: 0x22 };
    },
  };
  return pd;
}
const word = (v) => {
  const b = Buffer.alloc(4);
  if (endianness() === 'LE') b.writeUInt32LE(v);
  else b.writeUInt32BE(v);
  return b;
};

test('two QPs: the keys name each QP\'s credit word, after the words the counts are sent from', () => {
  const pd = fakePd();
  const c = Credits.alloc(2, pd, 200);
  assert.equal(pd.buf.length, 16);
  assert.equal(pd.access, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const dests = [0, 1].map((i) => {
    const d = { rkey: 0, vaddr: 0n };
    c.advertise(d, i);
    return d;
  });
  assert.deepEqual(dests, [{ rkey: 0x22, vaddr: 0x10008n }, { rkey: 0x22, vaddr: 0x1000cn }]);
});

test('the receiver writes its count from its own word to the peer\'s, signaled, every rx_depth/3 messages', () => {
  const pd = fakePd();
  const c = Credits.alloc(2, pd, 200);
  c.setWrs([{ rkey: 0x99, vaddr: 0x5008n }, { rkey: 0x99, vaddr: 0x500cn }]);
  assert.equal(c.every, 66);
  assert.deepEqual([1, 65, 66, 67, 132, 198, 199, 200].map((n) => c.due(n, 200)), [false, false, true, false, true, true, false, true]);
  const wr = c.wr(1, 132);
  assert.deepEqual(wr, { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: 0x10004, length: 4, lkey: 0x11 }], sendFlags: SendFlags.SIGNALED, rdma: { remoteAddr: 0x500c, rkey: 0x99 } });
  assert.deepEqual(pd.buf.subarray(4, 8), word(132));
  // rx_depth below 3: a count after every message (perftest would divide by zero).
  assert.equal(Credits.alloc(1, fakePd(), 2).every, 1);
});

test('the sender\'s window: fewer than rx_depth messages beyond the count the peer wrote; reset forgets the counts', () => {
  const pd = fakePd();
  const c = Credits.alloc(1, pd, 16);
  assert.equal(c.open(0, 14, 16), true);
  assert.equal(c.open(0, 15, 16), false, 'the 16th message waits for a count');
  pd.buf.set(word(5), 4);
  assert.equal(c.peer(0), 5);
  assert.equal(c.open(0, 15, 16), true);
  assert.equal(c.open(0, 20, 16), false);
  c.reset();
  assert.equal(c.peer(0), 0);
  assert.equal(c.open(0, 15, 16), false);
});

test('a SEND test\'s odd rx depth is made even (not with -a, not for the other verbs)', () => {
  const rx = (tool, verb, tst, args) => parsePerfArgs(tool, verb, tst, args).params.rxDepth;
  assert.equal(rx('ib_send_bw', Verb.SEND, Test.BW, ['-n', '5']), 6);
  assert.equal(rx('ib_send_bw', Verb.SEND, Test.BW, ['-r', '7']), 8);
  assert.equal(rx('ib_send_bw', Verb.SEND, Test.BW, ['-n', '200']), 200);
  assert.equal(rx('ib_send_lat', Verb.SEND, Test.LAT, ['-n', '5']), 6);
  assert.equal(rx('ib_send_bw', Verb.SEND, Test.BW, ['-r', '7', '-a']), 7);
  assert.equal(rx('ib_write_bw', Verb.WRITE, Test.BW, ['-n', '5']), 1);
});
