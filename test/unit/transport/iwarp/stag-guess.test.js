// Guessing another connection's memory on a server whose connections share one PD (librdmacm's
// default PD: rsockets, rdma_server-style servers). Each connection of the server below gets a
// region with remote read/write on the shared PD and is told its own STag and address in the
// accept's private data, as rsockets tell theirs. An attacker that knows its own region tries the
// neighbourhood a sequential allocator would have put the first connection's region in — the
// TERMINATE codes tell a wrong STag (DDP tagged 0x00) from a wrong address (0x01) — and must find
// neither the STag nor the address, while the probe itself demonstrably works on its own region.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getDeviceList, Access, CmEventType } from '../../../../dist/index.js';
import { encodeFpdu, decodeTerminateFpdu, RdmapOpcode } from '../../../../dist/wire/index.js';
import { rawClient, rtrWrite } from '../../../lib/raw-mpa.js';
import { listenLoop } from '../../../lib/listener.js';

const PAGE = 4096;
const RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;

/** The server: every connection on the default PD, a 4 KiB region each, (addr, rkey) in the Reply. */
async function sharedPdServer() {
  const conns = [];
  const l = await listenLoop(0, async (ev) => {
    const id = ev.id;
    const kind = ev.event;
    ev.ack();
    if (kind !== CmEventType.CONNECT_REQUEST) return;
    id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
    const mem = Buffer.alloc(PAGE, 0x5a);
    const mr = id.pd.regMr(mem, RW);
    conns.push({ id, mr, mem });
    const pdata = Buffer.alloc(12);
    pdata.writeBigUInt64BE(BigInt(mr.addr), 0);
    pdata.writeUInt32BE(mr.rkey, 8);
    await id.accept({ privateData: pdata });
  });
  const close = () =>
    l.close(async () => {
      for (const c of conns) {
        c.id.destroyQp();
        c.mr.dereg();
        await c.id.destroy().catch(() => {});
      }
    });
  return { port: l.port, conns, close };
}

/** A raw connection to the server: its own region (addr, rkey) from the Reply, RTR sent. */
async function attacker(port) {
  const c = await rawClient(port);
  const pd = Buffer.from(c.reply.privateData);
  c.own = { addr: Number(pd.readBigUInt64BE(0)), rkey: pd.readUInt32BE(8) };
  c.send(rtrWrite());
  return c;
}

/** One probe: an RDMA Write of one byte at (stag, to). Resolves with the TERMINATE's DDP ecode, or 'ok'. */
async function probe(port, pick) {
  const c = await attacker(port);
  const { stag, to } = pick(c.own);
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag, to }, Buffer.from([0xa5])));
  // A write that lands is followed by nothing: end with a zero-length Read as a barrier.
  c.send(encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: 1, sinkStag: 0x77, sinkTo: 0, readSize: 0, srcStag: 0, srcTo: 0 }));
  // The answer: the Read's zero-length response (the write landed) or a TERMINATE.
  await c.until(() => c.after().length >= 4 || c.isClosed(), 3000);
  if ((c.after()[3] & 0x0f) === RdmapOpcode.READ_RESP) {
    c.sock.destroy();
    return 'ok';
  }
  await c.until(() => c.after().length >= 28 || c.isClosed(), 3000);
  const bytes = c.after();
  c.sock.destroy();
  const t = decodeTerminateFpdu(bytes, 0);
  assert.deepEqual([t.layer, t.etype], [1, 1], 'a DDP tagged-buffer error');
  return t.ecode;
}

test('a second connection on a shared PD cannot find the first one\'s region in a neighbourhood search', async () => {
  const s = await sharedPdServer();
  try {
    // The victim: the first connection, its region filled with 0x5a.
    const victimPeer = await attacker(s.port);
    const t0 = Date.now();
    while (s.conns.length < 1 && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 5));
    const victim = s.conns[0];
    assert.equal(victimPeer.own.rkey, victim.mr.rkey);

    // The probe works: on its own region, a good write lands, a wrong address is a bounds error.
    assert.equal(await probe(s.port, (own) => ({ stag: own.rkey, to: own.addr + 1 })), 'ok');
    assert.equal(await probe(s.port, (own) => ({ stag: own.rkey, to: own.addr - 2 * PAGE })), 0x01);
    const landed = s.conns.filter((c) => c.mem[1] === 0xa5);
    assert.equal(landed.length, 1, 'the good write landed in its own region only');

    // The search, from the attacker's first region: the STag indices just below its own with key
    // 0 and the addresses just below its own, 8 KiB apart — where a sequential allocator with a
    // guard page after each region puts the regions registered before (the victim is 3 back).
    const base = await attacker(s.port);
    base.sock.destroy();
    const ecodes = [];
    for (let d = 1; d <= 16; d++) {
      const stag = ((((base.own.rkey >>> 8) - d) & 0xffffff) << 8) >>> 0;
      ecodes.push(await probe(s.port, () => ({ stag, to: base.own.addr - d * 2 * PAGE })));
    }
    assert.equal(new Set(s.conns.map((c) => c.id.pd)).size, 1, 'all connections share one PD');
    assert.deepEqual(new Set(ecodes), new Set([0x00]), 'every guessed STag is unknown (not even the STag was found)');
    assert.ok(victim.mem.every((b) => b === 0x5a), 'the victim region is untouched');
    victimPeer.sock.destroy();
  } finally {
    await s.close();
  }
});

test('neither the STags nor the addresses of one PD\'s regions can be derived from each other', async () => {
  const ctx = getDeviceList().find((d) => d.name === 'siw_lo').open();
  const pd = ctx.allocPd();
  const victim = pd.regMr(Buffer.alloc(PAGE), RW);
  // The attacker's own regions, registered right after the victim's (8 connections' worth).
  const own = Array.from({ length: 8 }, () => pd.regMr(Buffer.alloc(PAGE), RW));
  // Every STag within 8 indices of any of its own, with every key: 8 × 17 × 256 guesses, each
  // checked the way a TERMINATE answers it (unknown STag or not). A uniform 32-bit STag is among
  // them with probability below 1e-5 per run; a sequential allocator's always is.
  let stagHits = 0;
  for (const m of own) {
    for (let d = -8; d <= 8; d++) {
      for (let key = 0; key < 256; key++) {
        const stag = ((((m.handle + d) & 0xffffff) << 8) | key) >>> 0;
        if (stag === victim.rkey) stagHits++;
      }
    }
  }
  assert.equal(stagHits, 0, 'the victim STag is not near any of the attacker\'s');
  // Addresses: the victim region is not within 64 MiB of any of the attacker's regions
  // (probability below 2^-21 for uniform placement in a 2^52-byte space).
  const near = own.filter((m) => Math.abs(m.addr - victim.addr) < 64 * 2 ** 20);
  assert.equal(near.length, 0, 'the victim address is not near any of the attacker\'s');
  for (const m of [victim, ...own]) m.dereg();
  pd.dealloc();
});
