// What datagrams to QPN blocks, services and communication IDs no process holds cost the process
// that receives them, measured by the device's counters (not by time): 2,000 of them — UD packets
// to random QPNs, SIDR_REQs for random services, DREQs naming random communication IDs — open at
// most the forwarding connect budget's Unix connections (fwd-tx.ts: 32 at once, 16 a second), where
// each used to cost a connect(), and every one of them still ends in exactly one receive counter.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { PORT, lib, wire, loDevice, udQp, rawSender, roce, until } from '../../../lib/roce.js';
import { rawCmPeer } from '../../../lib/raw-cm.js';

const { serviceId, PortSpace } = lib;
const ctx = loDevice().open();
const pd = ctx.allocPd();
const cq = ctx.createCq(8);
const qp = udQp(pd, cq, 0x01234567); // the process owns a QPN block, as any RoCE process does
const raw = await rawSender();
const peer = await rawCmPeer(PORT);
after(() => {
  raw.close();
  peer.close();
  qp.destroy();
  cq.destroy();
  pd.dealloc();
  ctx.close();
});

/** Every datagram the receive path took, whatever became of it. */
const landed = (c) => Object.entries(c).reduce((n, [k, v]) => n + (k === 'rcvd_pkts' || (k.startsWith('rcvd_') && k.endsWith('_drop')) ? v : 0), 0);

test('2,000 datagrams to random blocks, services and communication IDs: a bounded number of connects, each datagram counted once', async () => {
  const own = qp.qpNum >>> 10;
  const randomBlock = () => {
    let b;
    do b = 1 + Math.floor(Math.random() * 16382);
    while (b === own);
    return b;
  };
  const before = roce.counters('rxe_lo');
  const t0 = performance.now();
  let n = 0;
  for (let i = 0; i < 2000; i++) {
    const kind = i % 3;
    if (kind === 0) {
      await raw.send(raw.ud({ destQp: (randomBlock() << 10) | Math.floor(Math.random() * 1024), qkey: 0x01234567 }));
    } else if (kind === 1) {
      const sid = serviceId(PortSpace.UDP, 1024 + Math.floor(Math.random() * 60000));
      peer.sendMad({ kind: 'SIDR_REQ', requestId: (randomBlock() << 18) | i, pkey: 0xffff, reserved: 0, serviceId: sid, privateData: wire.encodeCmaPrivateData({ version: 0, ipVersion: 4, srcPort: 5555, src: Uint8Array.of(127, 0, 0, 2), dst: Uint8Array.of(127, 0, 0, 1) }, new Uint8Array(0)) }, BigInt(i));
    } else {
      peer.sendMad({ kind: 'DREQ', localCommId: 0x1000 + i, remoteCommId: ((randomBlock() << 18) | i) >>> 0, remoteQpn: 0x4242, privateData: new Uint8Array(0) }, BigInt(i));
    }
    n++;
    if (i % 50 === 49) await new Promise((r) => setImmediate(r));
  }
  await until(() => landed(roce.counters('rxe_lo')) - landed(before) >= n, 10000, () => `every datagram to reach a receive counter (${landed(roce.counters('rxe_lo')) - landed(before)} of ${n})`);
  const secs = (performance.now() - t0) / 1000;
  await new Promise((r) => setTimeout(r, 200));
  const after2 = roce.counters('rxe_lo');
  assert.equal(landed(after2) - landed(before), n, 'each datagram counted exactly once');
  const connects = after2.fwd_connect - before.fwd_connect;
  const bound = 32 + Math.ceil(16 * (secs + 0.2)) + 2;
  assert.ok(connects <= bound, `${connects} forwarding connects for ${n} datagrams in ${secs.toFixed(2)} s (at most ${bound})`);
  assert.equal(after2.fwd_sent - before.fwd_sent, 0, 'nothing was handed to a process that does not exist');
  assert.equal(after2.rcvd_unknown_qpn_drop - before.rcvd_unknown_qpn_drop, Math.ceil(n / 3), 'the UD ones: unknown QPN');
});
