// The forwarding frame codec (src/transport/roce/fwd-frame.ts): the header bytes for IPv4 and
// IPv6, the splitter over a stream cut everywhere, and its refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FwdFlag, FwdFrameSplitter, FWD_HDR, FWD_MAX, FWD_FRAME_HEAD, encodeFwdHeader, fwdFamily, fwdFlags, fwdFlagsByte, fwdSrcPort, fwdTrain } from '../../../../dist/transport/roce/fwd-frame.js';

test('the flags byte: ICRC offload (bit 0) and a train\'s segment count (bits 4-7); a reserved bit, a count of 1 or a train without the offload is malformed (-1)', () => {
  const f = Buffer.alloc(FWD_FRAME_HEAD);
  const addrs = Buffer.alloc(32);
  assert.equal(FwdFlag.ICRC_OFFLOAD, 1);
  encodeFwdHeader(f, 0, 4, 1, addrs, 0, fwdFlagsByte(true, 0));
  assert.equal(f[5], 0x01);
  assert.equal(fwdFlags(f.subarray(4)), FwdFlag.ICRC_OFFLOAD);
  encodeFwdHeader(f, 0, 4, 1, addrs, 0, fwdFlagsByte(true, 15));
  assert.equal(f[5], 0xf1);
  assert.equal(fwdTrain(fwdFlags(f.subarray(4))), 15);
  encodeFwdHeader(f, 0, 4, 1, addrs, 0);
  assert.equal(fwdFlags(f.subarray(4)), 0, 'no flags by default');
  encodeFwdHeader(f, 0, 4, 1, addrs, 0, 0xff);
  assert.equal(f[5], 0xf1, 'reserved bits are not written');
  let valid = 0;
  for (let v = 0; v < 256; v++) {
    f[5] = v;
    const n = v >> 4;
    const ok = (v & 0x0e) === 0 && (n === 0 || (n >= 2 && (v & 1) === 1));
    assert.equal(fwdFlags(f.subarray(4)), ok ? v : -1, `flags 0x${v.toString(16)}`);
    if (ok) {
      valid++;
      assert.equal(fwdTrain(v), n);
    }
  }
  assert.equal(valid, 2 + 14, 'one packet with or without the offload, and trains of 2 .. 15');
});

test('the header: length, family, flags, source port, both addresses (the layout of docs/design/roce-device.md)', () => {
  const addrs = Buffer.alloc(32);
  Buffer.from([10, 1, 2, 3]).copy(addrs, 0);
  Buffer.from([127, 0, 0, 1]).copy(addrs, 16);
  const f = Buffer.alloc(FWD_FRAME_HEAD + 3, 0xee);
  encodeFwdHeader(f, 0, 4, 4791, addrs, 3);
  assert.equal(FWD_FRAME_HEAD, 40);
  assert.equal(f.toString('hex', 0, FWD_FRAME_HEAD),
    '00000027' + '04' + '00' + '12b7' + '0a010203' + '00'.repeat(12) + '7f000001' + '00'.repeat(12));
  assert.equal(f.toString('hex', FWD_FRAME_HEAD), 'eeeeee', 'the payload is left alone');
  const v6 = Buffer.alloc(32);
  v6[15] = 1;
  v6[16] = 0xfe;
  v6[17] = 0x80;
  const g = Buffer.alloc(FWD_FRAME_HEAD);
  encodeFwdHeader(g, 0, 6, 7, v6, 0);
  assert.equal(g.toString('hex'), '00000024' + '06' + '00' + '0007' + '00'.repeat(15) + '01' + 'fe80' + '00'.repeat(14));
  assert.equal(fwdFamily(g.subarray(4)), 6);
  assert.equal(fwdSrcPort(g.subarray(4)), 7);
  g[4] = 5;
  assert.equal(fwdFamily(g.subarray(4)), 0, 'a family other than 4 or 6');
});

/** `n` frames of assorted sizes (the largest allowed among them). */
function stream(n) {
  const frames = [];
  for (let i = 0; i < n; i++) {
    const len = i === 3 ? FWD_MAX - FWD_HDR : (i * 97) % 700;
    const f = Buffer.alloc(FWD_FRAME_HEAD + len);
    encodeFwdHeader(f, 0, i % 2 ? 6 : 4, i, Buffer.alloc(32, i), len);
    for (let k = 0; k < len; k++) f[FWD_FRAME_HEAD + k] = (k * 31 + i) & 0xff;
    frames.push(f);
  }
  return { frames, all: Buffer.concat(frames) };
}

test('the splitter gives every frame once, in order, whether the stream comes whole, byte by byte or cut at random', () => {
  const { frames, all } = stream(12);
  const want = frames.map((f) => f.subarray(4));
  const cuts = [[all.length], Array(all.length).fill(1)];
  for (let r = 0; r < 50; r++) {
    const c = [];
    for (let left = all.length; left > 0; ) {
      const n = Math.min(left, 1 + Math.floor(Math.random() * (Math.random() < 0.5 ? 16 : 20000)));
      c.push(n);
      left -= n;
    }
    cuts.push(c);
  }
  for (const c of cuts) {
    const got = [];
    const split = new Set();
    const s = new FwdFrameSplitter((f) => {
      got.push(Buffer.from(f));
      // A frame inside one chunk is a view of the stream's memory; one put together lives in the
      // splitter's buffer.
      if (f.buffer !== all.buffer) split.add(f.buffer);
    });
    let off = 0;
    for (const n of c) {
      assert.equal(s.push(all.subarray(off, off + n)), true);
      off += n;
    }
    assert.deepEqual(got, want);
    if (c.length === 1) assert.equal(split.size, 0, 'frames inside one chunk are views of it');
    assert.ok(split.size <= 1, 'frames split across chunks are put together in one buffer, reused');
  }
});

test('a length outside the bounds stops the splitter: false, and nothing after it', () => {
  for (const bad of [0, FWD_HDR - 1, FWD_MAX + 1, 0xffffffff]) {
    const { all } = stream(2);
    const tail = Buffer.alloc(8);
    tail.writeUInt32BE(bad >>> 0, 0);
    const more = stream(2).all;
    for (const cut of [1, 3, 4, 5]) {
      const bytes = Buffer.concat([all, tail, more]);
      const got = [];
      const s = new FwdFrameSplitter((f) => got.push(f.length));
      const first = s.push(bytes.subarray(0, all.length + cut));
      const second = s.push(bytes.subarray(all.length + cut));
      assert.equal(first && second, false, `length ${bad} refused (cut ${cut})`);
      assert.equal(got.length, 2, 'the frames before it were handed on');
      assert.equal(s.push(more), false, 'and nothing after it');
      assert.equal(got.length, 2);
    }
  }
});
