// The frames in which a process hands datagrams to the owner of their QPN (fwd-tx.ts, fwd-rx.ts):
// what the sender writes (length, family, source port, both addresses, the datagram, for IPv4 and
// IPv6 pairs, repeated pairs included), and what the owner delivers when the stream arrives cut at
// random places — every datagram once, in order, byte for byte, with its addresses and port.
// The port is private to this file (test/lib/roce.js).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { PORT } from '../../../lib/roce.js';
import { PortAgent } from '../../../../dist/transport/roce/udp.js';

const agent = PortAgent.get(PORT);
after(() => agent.close());

/** A sink that records what the agent gives it. */
function recorder(name) {
  const got = [];
  return {
    got,
    ins: 0,
    outs: [],
    events: [],
    name,
    rxDatagram(buf, meta) {
      got.push({ bytes: Buffer.from(buf), meta: { ...meta } });
    },
    fwdCount(e) {
      if (e === 'fwd_sent') this.outs.push(true);
      else if (e === 'fwd_failed_drop') this.outs.push(false);
      else if (e === 'fwd_rcvd') this.ins++;
      else this.events.push(e);
    },
  };
}

/** A datagram for QPN `qpn`: a BTH-shaped head then `len - 12` pattern bytes. */
function datagram(qpn, len, seed) {
  const b = Buffer.alloc(len);
  b[0] = 0x64;
  b.writeUIntBE(qpn, 5, 3);
  for (let i = 12; i < len; i++) b[i] = (i * 7 + seed) & 0xff;
  return b;
}

/** The frame of `msg` from `src`:`sport` to `dst` with flags byte `flags` (the layout of docs/design/roce-device.md). */
function frameOf(msg, family, sport, srcBytes, dstBytes, flags = 0) {
  const f = Buffer.alloc(4 + 36 + msg.length);
  f.writeUInt32BE(36 + msg.length, 0);
  f[4] = family;
  f[5] = flags;
  f.writeUInt16BE(sport, 6);
  Buffer.from(srcBytes).copy(f, 8);
  Buffer.from(dstBytes).copy(f, 24);
  msg.copy(f, 40);
  return f;
}

const v4 = (a, b, c, d) => [a, b, c, d, ...new Array(12).fill(0)];
const v6 = (words) => words.flatMap((w) => [w >> 8, w & 0xff]);

test('a datagram for another process QPN block leaves in a frame with its addresses and source port', async () => {
  const sink = recorder('fwd-out');
  // Stand in for another process: listen on the name of a block this process does not own.
  const own = new Set(agent.ownedBlocks());
  let block = 4000 + Math.floor(Math.random() * 4000);
  while (own.has(block)) block++;
  const frames = [];
  const srv = net.createServer((c) => c.on('data', (d) => frames.push(d)));
  srv.listen(agent.blockName(block));
  await once(srv, 'listening');
  try {
    const qpn = (block << 10) | 5;
    const cases = [
      { meta: { family: 4, src: '127.0.0.1', dst: '127.0.0.1', srcPort: PORT, forwarded: false, icrcOffload: true, train: 0 }, src: v4(127, 0, 0, 1), dst: v4(127, 0, 0, 1) },
      { meta: { family: 4, src: '127.0.0.1', dst: '127.0.0.1', srcPort: PORT, forwarded: false, icrcOffload: true, train: 15 }, src: v4(127, 0, 0, 1), dst: v4(127, 0, 0, 1) },
      { meta: { family: 4, src: '10.1.2.3', dst: '127.0.0.1', srcPort: 4791, forwarded: false }, src: v4(10, 1, 2, 3), dst: v4(127, 0, 0, 1) },
      { meta: { family: 4, src: '127.0.0.1', dst: '127.0.0.1', srcPort: 1234, forwarded: false }, src: v4(127, 0, 0, 1), dst: v4(127, 0, 0, 1) },
      { meta: { family: 6, src: '::1', dst: 'fe80::200:ff:fe00:0', srcPort: 4791, forwarded: false }, src: v6([0, 0, 0, 0, 0, 0, 0, 1]), dst: v6([0xfe80, 0, 0, 0, 0x200, 0xff, 0xfe00, 0]) },
      { meta: { family: 4, src: '10.1.2.3', dst: '127.0.0.1', srcPort: 4791, forwarded: false }, src: v4(10, 1, 2, 3), dst: v4(127, 0, 0, 1) },
      { meta: { family: 6, src: '::1', dst: 'fe80::200:ff:fe00:0', srcPort: 7, forwarded: false }, src: v6([0, 0, 0, 0, 0, 0, 0, 1]), dst: v6([0xfe80, 0, 0, 0, 0x200, 0xff, 0xfe00, 0]) },
    ];
    const want = [];
    cases.forEach((k, i) => {
      const msg = datagram(qpn, 28 + 333 * i, i);
      agent.route(sink, msg, k.meta);
      want.push(frameOf(msg, k.meta.family, k.meta.srcPort, k.src, k.dst, (k.meta.icrcOffload ? 1 : 0) | ((k.meta.train ?? 0) << 4)));
    });
    const all = Buffer.concat(want);
    const end = Date.now() + 5000;
    while (Buffer.concat(frames).length < all.length && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(Buffer.concat(frames), all);
    assert.deepEqual(sink.outs, cases.map(() => true));
    assert.equal(sink.got.length, 0, 'nothing delivered here');
  } finally {
    srv.close();
  }
});

test('frames arriving cut at random places are delivered whole, once each, in order (data and MADs)', async () => {
  const sink = recorder('fwd-in');
  agent.bindLocal(sink, '127.0.0.1', 4, '');
  const qpn = agent.allocQpn();
  const block = qpn >> 10;
  try {
    const sent = [];
    const frames = [];
    for (let i = 0; i < 300; i++) {
      const len = i % 7 === 0 ? 4096 + 28 + 4 : 12 + Math.floor(Math.random() * 2000);
      const dest = i % 11 === 0 ? 1 : qpn; // QPN 1: a MAD
      const msg = datagram(dest, len, i);
      const srcIp = [10, 0, i % 5, 1 + (i % 3)];
      const sport = 1000 + i;
      // Every third one's sender left its ICRC to the host path (flag 0x01), every fifth of
      // those as a train of 2 .. 15 segments (the flags' high nibble).
      const icrcOffload = i % 3 === 1;
      const train = icrcOffload && i % 5 === 1 ? 2 + (i % 14) : 0;
      sent.push({ msg, src: srcIp.join('.'), sport, icrcOffload, train });
      frames.push(frameOf(msg, 4, sport, v4(...srcIp), v4(127, 0, 0, 1), (icrcOffload ? 1 : 0) | (train << 4)));
    }
    const stream = Buffer.concat(frames);
    const c = net.connect(agent.blockName(block));
    await once(c, 'connect');
    // Pieces from 1 byte to several frames long, each written on its own turn so that most
    // arrive as chunks of their own.
    for (let off = 0; off < stream.length; ) {
      const r = Math.random();
      const n = Math.min(stream.length - off, r < 0.3 ? 1 + Math.floor(Math.random() * 8) : r < 0.7 ? 1 + Math.floor(Math.random() * 3000) : 1 + Math.floor(Math.random() * 20000));
      c.write(stream.subarray(off, off + n));
      off += n;
      await new Promise((res) => setImmediate(res));
    }
    const end = Date.now() + 5000;
    while (sink.got.length < sent.length && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    assert.equal(sink.got.length, sent.length);
    assert.equal(sink.ins, sent.length);
    sent.forEach((s, i) => {
      const g = sink.got[i];
      assert.ok(g.bytes.equals(s.msg), `datagram ${i} byte for byte`);
      assert.deepEqual(g.meta, { family: 4, src: s.src, dst: '127.0.0.1', srcPort: s.sport, forwarded: true, icrcOffload: s.icrcOffload, train: s.train }, `datagram ${i} meta`);
    });
    c.destroy();
  } finally {
    agent.releaseQpn(qpn);
    agent.unbindSink(sink);
  }
});

test('a frame with an impossible length, or a flag bit the format does not define, ends that connection; the next connection is served', async () => {
  const sink = recorder('fwd-bad');
  agent.bindLocal(sink, '127.0.0.1', 4, '');
  const qpn = agent.allocQpn();
  const name = agent.blockName(qpn >> 10);
  try {
    const bad = net.connect(name);
    await once(bad, 'connect');
    const good = frameOf(datagram(qpn, 40, 1), 4, 9, v4(127, 0, 0, 1), v4(127, 0, 0, 1));
    const tooShort = Buffer.alloc(8);
    tooShort.writeUInt32BE(10, 0);
    // The bad length word comes split from the good frame before it.
    bad.write(Buffer.concat([good, tooShort.subarray(0, 2)]));
    await new Promise((r) => setTimeout(r, 20));
    bad.write(tooShort.subarray(2));
    await Promise.race([once(bad, 'close'), new Promise((_, rej) => setTimeout(() => rej(new Error('connection not closed')), 3000))]);
    assert.equal(sink.got.length, 1, 'the good frame before it was delivered');
    const next = net.connect(name);
    await once(next, 'connect');
    next.write(good);
    const end = Date.now() + 3000;
    while (sink.got.length < 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    assert.equal(sink.got.length, 2);
    assert.ok(sink.got[1].bytes.equals(good.subarray(40)));
    // A flag bit the format does not define (0x02) is malformed too: nothing of it, nor after it.
    const flagged = net.connect(name);
    await once(flagged, 'connect');
    flagged.write(Buffer.concat([frameOf(datagram(qpn, 40, 2), 4, 9, v4(127, 0, 0, 1), v4(127, 0, 0, 1), 0x02), good]));
    await Promise.race([once(flagged, 'close'), new Promise((_, rej) => setTimeout(() => rej(new Error('connection not closed')), 3000))]);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(sink.got.length, 2, 'neither the frame with the undefined flag nor the one after it was delivered');
    next.write(good);
    const end2 = Date.now() + 3000;
    while (sink.got.length < 3 && Date.now() < end2) await new Promise((r) => setTimeout(r, 10));
    assert.equal(sink.got.length, 3, 'the other connection is still served');
    next.destroy();
  } finally {
    agent.releaseQpn(qpn);
    agent.unbindSink(sink);
  }
});
