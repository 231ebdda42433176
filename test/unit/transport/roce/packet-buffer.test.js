// The packet slabs of the soft RoCE device (packet-buffer.ts): a slab is carved again only once
// every packet of it was handed back once; a pinned packet keeps its slab; and RC WRITEs to
// another process, whose frames hand their packets back, deliver every byte as written while the
// source changes between rounds; and UD SENDs through the device's UDP socket, whose batches hand
// their packets back once flushed, arrive exactly as well.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { PORT, lib, WrOpcode, SendFlags, WcStatus, Access, pollN, loDevice, udQp, ahTo, v4GidIndex } from '../../../lib/roce.js';
import { freePort } from '../../../lib/ports.js';
import { packetBuffer, releasePacket, pinPacket, withHeadroom, PACKET_HEADROOM } from '../../../../dist/transport/roce/packet-buffer.js';

const PEER = fileURLToPath(new URL('./rc-write-peer.js', import.meta.url));
/** Packets of 4096 B fill a 64 KiB slab after 15 (4096 + headroom + mark each). */
const PER_SLAB = 15;

/** A fresh slab's packets: carve until the slab changes, then `n` packets of the new one. */
function freshSlab(n) {
  let b = packetBuffer(4096);
  const first = b.buffer;
  while (b.buffer === first) b = packetBuffer(4096);
  const pkts = [b];
  for (let i = 1; i < n; i++) pkts.push(packetBuffer(4096));
  assert.ok(pkts.every((p) => p.buffer === b.buffer), 'one slab');
  return pkts;
}

/** Carve packets until a slab other than the current one is used; its buffer (or null after `max`). */
function nextSlabBuffers(max) {
  const seen = new Set();
  for (let i = 0; i < max; i++) seen.add(packetBuffer(4096).buffer);
  return seen;
}

test('a slab whose packets were all handed back is carved again; one still held, pinned or released twice keeps it out', () => {
  const a = freshSlab(PER_SLAB);
  const slabA = a[0].buffer;
  // the headroom is still in front of each packet
  assert.equal(withHeadroom(a[0]).byteOffset, a[0].byteOffset - PACKET_HEADROOM);
  for (const p of a) releasePacket(p);
  // slab A is done (full) and free: it is among the next slabs carved
  assert.ok(nextSlabBuffers(4 * PER_SLAB).has(slabA), 'released slab reused');

  const b = freshSlab(PER_SLAB);
  const slabB = b[0].buffer;
  for (const p of b.slice(1)) releasePacket(p);
  releasePacket(b[1]); // a second release of the same packet counts nothing
  assert.ok(!nextSlabBuffers(8 * PER_SLAB).has(slabB), 'slab with a held packet not reused');
  releasePacket(b[0]);
  assert.ok(nextSlabBuffers(4 * PER_SLAB).has(slabB), 'reused once its last packet is back');

  const c = freshSlab(PER_SLAB);
  pinPacket(c[3]);
  for (const p of c) releasePacket(p);
  assert.ok(!nextSlabBuffers(8 * PER_SLAB).has(c[0].buffer), 'slab with a pinned packet not reused');
  // buffers not carved here are left alone
  releasePacket(Buffer.alloc(64));
  pinPacket(Buffer.alloc(64));
  assert.equal(withHeadroom(Buffer.alloc(64)), null);
});

test('RC WRITEs to another process: 3 rounds of 4 MiB from a source rewritten between rounds arrive exactly', { timeout: 60_000 }, async () => {
  const port = await freePort();
  const peer = spawn(process.execPath, [PEER, String(port)], { env: { ...process.env, RDMACM_ROCE_PORT: String(PORT) }, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: peer.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value);
  try {
    assert.deepEqual(await next(), { listening: true });
    const id = lib.createId(null, null, lib.PortSpace.TCP, { device: 'rxe_lo' });
    await id.resolveAddr(null, { address: '127.0.0.1', port });
    await id.resolveRoute();
    id.createQp(null, { cap: { maxSendWr: 16, maxRecvWr: 16 } });
    await id.connect();
    assert.deepEqual(await next(), { ready: true });
    const pd = Buffer.from(id.event.param.conn.privateData);
    const raddr = Number(pd.readBigUInt64BE(0));
    const rkey = pd.readUInt32BE(8);
    const size = 4 << 20;
    const src = Buffer.alloc(size);
    const mr = id.pd.regMr(src, 0);
    const msg = id.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < size; i += 4) src.writeUInt32LE((i * 2654435761 + round * 97) >>> 0, i);
      const want = createHash('sha256').update(src).digest('hex');
      id.qp.postRecv({ wrId: 0, sgList: [{ addr: msg.addr, length: 16, lkey: msg.lkey }] });
      for (let k = 0; k < 4; k++) {
        id.qp.postSend({
          wrId: k,
          opcode: WrOpcode.RDMA_WRITE,
          sgList: [{ addr: mr.addr + k * (1 << 20), length: 1 << 20, lkey: mr.lkey }],
          sendFlags: SendFlags.SIGNALED,
          rdma: { remoteAddr: raddr + k * (1 << 20), rkey },
        });
      }
      const wcs = await pollN(id.sendCq, 4, 20_000);
      assert.deepEqual(wcs.map((w) => w.status), [0, 0, 0, 0].map(() => WcStatus.SUCCESS));
      id.qp.postSend({ wrId: 9, opcode: WrOpcode.SEND, sgList: [{ addr: msg.addr, length: 1, lkey: msg.lkey }], sendFlags: SendFlags.SIGNALED });
      // Every packet arrived once and in order: a frame overwritten before it left would show as a
      // gap or a duplicate, which retransmission would then hide in the data.
      assert.deepEqual(await next(), { sha256: want, outOfSeq: 0, duplicate: 0 }, `round ${round}`);
      await pollN(id.recvCq, 1, 10_000);
      await pollN(id.sendCq, 1, 10_000);
    }
    const c = lib.roce.counters('rxe_lo');
    assert.deepEqual([c.fwd_failed_drop, c.rcvd_seq_err, c.completer_retry_err], [0, 0, 0]);
    await id.disconnect().catch(() => {});
    id.destroyQp();
    await id.destroy();
  } finally {
    peer.stdin.end();
    peer.kill();
  }
});

test('UD SENDs through the UDP socket (a group looped back to this process): 4 rounds of 96 distinct 4 KiB messages arrive exactly', { timeout: 60_000 }, async () => {
  // A group goes out through the device's batched UDP socket (not the forwarding sockets of
  // unicast to this host) and comes back through the kernel's multicast loopback: each batch of
  // 96 packets spans several slabs, handed back when the batch is flushed and carved again by the
  // next; a packet handed back before the kernel had it would arrive with the next one's bytes.
  const MSG = 4096;
  const BATCH = 96;
  const GRH = 40;
  const ctx = loDevice().open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(4 * BATCH);
  const qkey = 0x11111111;
  const rx = udQp(pd, cq, qkey, { maxRecvWr: BATCH, maxSendWr: 1 });
  const tx = udQp(pd, cq, qkey, { maxSendWr: BATCH, maxRecvWr: 1 });
  const group = `239.77.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
  const gid = Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...group.split('.').map(Number)]);
  rx.attachMcast(gid, 0);
  const ah = ahTo(pd, gid, v4GidIndex(ctx));
  const src = Buffer.alloc(BATCH * MSG);
  const dst = Buffer.alloc(BATCH * (GRH + MSG));
  const smr = pd.regMr(src, 0);
  const dmr = pd.regMr(dst, Access.LOCAL_WRITE);
  try {
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < BATCH; i++) rx.postRecv({ wrId: i, sgList: [{ addr: dmr.addr + i * (GRH + MSG), length: GRH + MSG, lkey: dmr.lkey }] });
      // Every message different, in every round: word k of message i holds a mix of i, k and round.
      for (let i = 0; i < BATCH; i++) for (let k = 0; k < MSG; k += 4) src.writeUInt32LE((Math.imul(i + 1, 2654435761) ^ Math.imul(k + 7, 40503) ^ (round << 24)) >>> 0, i * MSG + k);
      // Payload i also names its index, so a message that arrives in another's receive is told apart.
      for (let i = 0; i < BATCH; i++) src.writeUInt32LE(i, i * MSG);
      for (let i = 0; i < BATCH; i++) {
        tx.postSend({ wrId: 1000 + i, opcode: WrOpcode.SEND, sgList: [{ addr: smr.addr + i * MSG, length: MSG, lkey: smr.lkey }], sendFlags: i === BATCH - 1 ? SendFlags.SIGNALED : 0, ud: { ah, remoteQpn: 0xffffff, remoteQkey: qkey } });
      }
      const wcs = await pollN(cq, BATCH + 1, 20_000);
      const recvs = wcs.filter((w) => w.wrId < 1000);
      assert.equal(recvs.length, BATCH, `round ${round}: every message received (${JSON.stringify(lib.roce.counters('rxe_lo'))})`);
      assert.ok(recvs.every((w) => w.status === WcStatus.SUCCESS && w.byteLen === GRH + MSG), `round ${round}: completions`);
      const seen = new Set();
      for (const w of recvs) {
        const got = dst.subarray(w.wrId * (GRH + MSG) + GRH, (w.wrId + 1) * (GRH + MSG));
        const i = got.readUInt32LE(0);
        assert.ok(i < BATCH && !seen.has(i), `round ${round}: message ${i} once`);
        seen.add(i);
        assert.ok(got.equals(src.subarray(i * MSG, (i + 1) * MSG)), `round ${round}: message ${i} arrived as sent`);
      }
    }
  } finally {
    rx.detachMcast(gid, 0);
    rx.destroy();
    tx.destroy();
    ah.destroy();
    smr.dereg();
    dmr.dereg();
    cq.destroy();
    pd.dealloc();
    ctx.close();
  }
});
