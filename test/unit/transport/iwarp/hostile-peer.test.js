// A hostile or broken iWARP peer, played by a raw TCP socket that speaks hand-built MPA frames and
// FPDUs, against our passive side. Every violation must end in a TERMINATE with the right
// layer/etype/ecode (siw_qp_rx.c) or a clean close — never a crash, a hang, or a byte written
// outside a registered region.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createId, PortSpace, Access, WcStatus, QpState, CmEventType } from '../../../../dist/index.js';
import { encodeMpaStartFrame, decodeMpaStartFrame, encodeFpdu, decodeTerminateFpdu, RdmapOpcode } from '../../../../dist/wire/index.js';
import { PAGE, server, rawClient, expectTerminate, teardown, guardsIntact, rtr } from '../../../lib/raw-peer.js';
import { replyThenClose, garbageForRtr } from '../../../lib/raw-mpa.js';
import { listenLoop } from '../../../lib/listener.js';

/** A sync listener on an ephemeral loopback port and a raw TCP socket connected to it. */
async function listenerAndRawSocket() {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const sock = net.connect({ host: '127.0.0.1', port: listen.srcPort });
  sock.on('error', () => {});
  await new Promise((r) => sock.once('connect', r));
  const got = [];
  sock.on('data', (d) => got.push(d));
  return { listen, sock, got };
}

test('MPA Reply echoes the request and negotiates P2P Write RTR and IRD/ORD', async () => {
  const s = await server({ ird: 2 });
  const c = await rawClient(s.port, { ird: 4, ord: 3 });
  assert.equal(c.reply.rev, 2);
  assert.equal(c.reply.enhanced, true);
  assert.equal(c.reply.crc, false);
  assert.equal(c.reply.p2p, true);
  assert.equal(c.reply.rtrWrite, true);
  // Responder IRD raised to the initiator's ORD (3); ORD clamped to the initiator's IRD (4) — siw rules.
  assert.equal(c.reply.ird, 3);
  assert.equal(c.reply.ord, 2);
  c.send(rtr());
  await s.ready;
  c.sock.destroy();
  await teardown(s);
});

test('RDMA Write to an unknown STag: TERMINATE DDP/tagged/0x00, memory untouched', async () => {
  const s = await server();
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: (s.mr.rkey ^ 0x100) >>> 0, to: s.mr.addr }, Buffer.alloc(32, 0x41)));
  await expectTerminate(c, 1, 1, 0x00);
  assert.ok(s.region.every((b) => b === 0));
  assert.ok(guardsIntact(s));
  await teardown(s);
});

test('RDMA Write past the end of the region: TERMINATE DDP/tagged/0x01, guard bytes intact', async () => {
  const s = await server();
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: s.mr.rkey, to: s.mr.addr + PAGE - 16 }, Buffer.alloc(32, 0x42)));
  await expectTerminate(c, 1, 1, 0x01);
  assert.ok(s.region.every((b) => b === 0));
  assert.ok(guardsIntact(s));
  await teardown(s);
});

test('RDMA Write below the region start (TO underflow) is refused', async () => {
  const s = await server();
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: s.mr.rkey, to: s.mr.addr - 8 }, Buffer.alloc(16, 0x43)));
  await expectTerminate(c, 1, 1, 0x01);
  assert.ok(guardsIntact(s));
  await teardown(s);
});

test('RDMA Write without REMOTE_WRITE access: TERMINATE, nothing placed', async () => {
  const s = await server({ access: Access.LOCAL_WRITE | Access.REMOTE_READ });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: s.mr.rkey, to: s.mr.addr }, Buffer.alloc(16, 0x44)));
  await expectTerminate(c, 1, 1, 0x00);
  assert.ok(s.region.every((b) => b === 0));
  await teardown(s);
});

test('a valid RDMA Write lands exactly in place', async () => {
  const s = await server();
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: s.mr.rkey, to: s.mr.addr + 100 }, Buffer.from('placed')));
  // A Read Request of those bytes back proves the placement over the wire.
  c.send(encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: 1, sinkStag: 0x1234, sinkTo: 0, readSize: 6, srcStag: s.mr.rkey, srcTo: s.mr.addr + 100 }));
  await c.until(() => c.after().length >= 16 + 6);
  const resp = c.after();
  assert.equal(resp[3] & 0x0f, RdmapOpcode.READ_RESP);
  assert.equal(resp.readUInt32BE(4), 0x1234);
  assert.equal(resp.subarray(16, 22).toString(), 'placed');
  assert.equal(s.region.subarray(100, 106).toString(), 'placed');
  c.sock.destroy();
  await teardown(s);
});

test('more Read Requests than the negotiated IRD: TERMINATE RDMAP/remote op/0x07', async () => {
  const s = await server({ ird: 1 });
  const c = await rawClient(s.port, { ord: 1 });
  assert.equal(c.reply.ird, 1);
  c.send(rtr());
  await s.ready;
  // Three reads in one burst while the first is still queued (no read response sent yet: held TX).
  const rr = (msn) => encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn, sinkStag: 9, sinkTo: 0, readSize: 8, srcStag: s.mr.rkey, srcTo: s.mr.addr });
  c.send(Buffer.concat([rr(1), rr(2), rr(3)]));
  await c.until(() => c.isClosed());
  const bytes = c.after();
  // Skip the read responses that went out before the overflow was seen; the last FPDU is the TERMINATE.
  let off = 0;
  let term = null;
  while (off + 2 <= bytes.length) {
    const ulpdu = bytes.readUInt16BE(off);
    const len = 2 + ulpdu + ((4 - ((ulpdu + 2) % 4)) % 4) + 4;
    if ((bytes[off + 3] & 0x0f) === RdmapOpcode.TERMINATE) term = decodeTerminateFpdu(bytes, off);
    off += len;
  }
  assert.ok(term, 'a TERMINATE was sent');
  assert.deepEqual([term.layer, term.etype, term.ecode], [0, 2, 0x07]);
  await teardown(s);
});

test('Read Request of a region without REMOTE_READ: TERMINATE RDMAP/remote protection', async () => {
  const s = await server({ access: Access.LOCAL_WRITE | Access.REMOTE_WRITE });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: 1, sinkStag: 9, sinkTo: 0, readSize: 8, srcStag: s.mr.rkey, srcTo: s.mr.addr }));
  await expectTerminate(c, 0, 1, 0x02);
  await teardown(s);
});

test('Send with no receive posted: TERMINATE DDP/untagged/0x02, receive queue flushed', async () => {
  const s = await server({ recvs: 1 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.from('one')));
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 2 }, Buffer.from('two')));
  await expectTerminate(c, 1, 2, 0x02);
  const wc = s.child.recvCq.poll(4);
  assert.equal(wc.length, 1);
  assert.equal(wc[0].status, WcStatus.SUCCESS);
  assert.equal(wc[0].byteLen, 3);
  assert.equal(s.qp.state, QpState.ERR);
  await teardown(s);
});

test('Send larger than the posted receive: TERMINATE, nothing beyond the buffer', async () => {
  const s = await server({ recvs: 1 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.alloc(100, 0x45)));
  await expectTerminate(c, 1, 2, 0x02);
  assert.ok(s.region.every((b) => b === 0));
  await teardown(s);
});

test('Send with a wrong MSN: TERMINATE DDP/untagged/0x03', async () => {
  const s = await server({ recvs: 2 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.send(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 5 }, Buffer.from('x')));
  await expectTerminate(c, 1, 2, 0x03);
  await teardown(s);
});

test('RDMAP opcode 8 (RFC 7306) and a bad DDP version are refused with TERMINATE', async () => {
  for (const [bytes, code] of [
    [Buffer.from('000e c148 00000001 0000000000000000 00000000'.replace(/ /g, ''), 'hex'), [0, 2, 0x06]],
    [Buffer.from('000e c240 00000001 0000000000000000 00000000'.replace(/ /g, ''), 'hex'), [1, 1, 0x04]],
  ]) {
    const s = await server();
    const c = await rawClient(s.port);
    c.send(rtr());
    await s.ready;
    c.send(bytes);
    await expectTerminate(c, ...code);
    await teardown(s);
  }
});

test('CRC negotiated and a corrupted FPDU: TERMINATE LLP/MPA/0x02', async () => {
  const s = await server({ recvs: 2 });
  const c = await rawClient(s.port, { crc: true });
  assert.equal(c.reply.crc, true, 'reply echoes C');
  c.send(encodeFpdu({ opcode: RdmapOpcode.WRITE, stag: 1, to: 0 }, undefined, { crc: true }));
  await s.ready;
  const good = encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.from('ok'), { crc: true });
  c.send(good);
  const bad = encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 2 }, Buffer.from('no'), { crc: true });
  bad[21] ^= 0xff;
  c.send(bad);
  await expectTerminate(c, 2, 0, 0x02);
  const wc = s.child.recvCq.poll(4);
  assert.equal(wc[0].status, WcStatus.SUCCESS);
  await teardown(s);
});

test('garbage instead of an MPA Request: closed without a CONNECT_REQUEST', async () => {
  const { listen, sock, got } = await listenerAndRawSocket();
  sock.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
  await new Promise((r) => sock.once('close', r));
  assert.equal(listen.channel.pending, 0, 'no event reached the listener');
  await listen.destroy();
});

test('MPA Request asking for markers gets a reject reply', async () => {
  const { listen, sock, got } = await listenerAndRawSocket();
  sock.write(encodeMpaStartFrame({ type: 'request', markers: true, crc: false, reject: false, enhanced: false, rev: 1, privateData: new Uint8Array(0) }));
  await new Promise((r) => sock.once('close', r));
  const rep = decodeMpaStartFrame(Buffer.concat(got), 'reply');
  assert.ok('frame' in rep);
  assert.equal(rep.frame.reject, true);
  assert.equal(rep.frame.markers, false);
  assert.equal(listen.channel.pending, 0);
  await listen.destroy();
});

test('peer closing the TCP connection: DISCONNECTED, posted receives flushed', async () => {
  const s = await server({ recvs: 3 });
  const c = await rawClient(s.port);
  c.send(rtr());
  await s.ready;
  c.sock.end();
  const ev = await s.child.channel.getEvent();
  assert.equal(ev.event, CmEventType.DISCONNECTED);
  ev.ack();
  const wc = s.child.recvCq.poll(8);
  assert.equal(wc.length, 3);
  assert.ok(wc.every((w) => w.status === WcStatus.WR_FLUSH_ERR));
  await teardown(s);
});

test('MPA Request with PD_Length above 256 is dropped silently (siw)', async () => {
  const { listen, sock, got } = await listenerAndRawSocket();
  const hdr = Buffer.from('MPA ID Req Frame\x10\x02\x01\x2c', 'latin1'); // PD_Length 300
  sock.write(Buffer.concat([hdr, Buffer.alloc(300)]));
  await new Promise((r) => sock.once('close', r));
  assert.equal(Buffer.concat(got).length, 0, 'no reply');
  assert.equal(listen.channel.pending, 0);
  await listen.destroy();
});

test('MPA rev 1 initiator (no enhanced word, no P2P): accepted, we stay silent until its first FPDU', async () => {
  const { listen, sock, got } = await listenerAndRawSocket();
  sock.write(encodeMpaStartFrame({ type: 'request', markers: false, crc: false, reject: false, enhanced: false, rev: 1, privateData: Buffer.from('v1') }));
  const child = await listen.getRequest();
  assert.equal(Buffer.from(child.event.param.conn.privateData).toString(), 'v1');
  const qp = child.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
  const m = child.pd.regMr(Buffer.from('server-first'), Access.LOCAL_WRITE);
  const r = child.pd.regMr(Buffer.alloc(16), Access.LOCAL_WRITE);
  qp.postRecv({ wrId: 1, sgList: [{ addr: r.addr, length: r.length, lkey: r.lkey }] });
  await child.accept();
  qp.postSend({ wrId: 2, opcode: 2 /* SEND */, sgList: [{ addr: m.addr, length: 12, lkey: m.lkey }] });
  await new Promise((r) => setTimeout(r, 50));
  const rep = decodeMpaStartFrame(Buffer.concat(got), 'reply');
  assert.ok('frame' in rep);
  assert.equal(rep.frame.rev, 1);
  assert.equal(rep.frame.enhanced, false);
  assert.equal(Buffer.concat(got).length, rep.length, 'nothing behind the MPA Reply before the initiator speaks');
  sock.write(encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.from('hi')));
  const t0 = Date.now();
  while (Buffer.concat(got).length < rep.length + 36 && Date.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 5));
  const after = Buffer.concat(got).subarray(rep.length);
  assert.equal(after[3] & 0x0f, RdmapOpcode.SEND);
  assert.equal(after.subarray(20, 32).toString(), 'server-first');
  sock.destroy();
  child.destroyQp();
  await child.destroy();
  await listen.destroy();
});

/**
 * An async listener that accepts every request (QP with two receives posted) and records each
 * connection's events; `events(n)` waits for `n` events of the accepted ids.
 */
async function asyncAcceptor() {
  const seen = [];
  const children = [];
  const l = await listenLoop(8, async (ev) => {
    if (ev.event === CmEventType.CONNECT_REQUEST) {
      const child = ev.id;
      children.push(child);
      const qp = child.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
      const mr = child.pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE);
      child.context = { mr };
      for (let i = 0; i < 2; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr, length: 32, lkey: mr.lkey }] });
      ev.ack();
      await child.accept();
      return;
    }
    seen.push({ id: ev.id, event: ev.event, status: ev.status });
    ev.ack();
    if (ev.event === CmEventType.DISCONNECTED) await ev.id.disconnect().catch(() => {});
  });
  const events = async (n) => {
    const t0 = Date.now();
    while (seen.length < n && Date.now() - t0 < 4000) await new Promise((r) => setTimeout(r, 5));
    return seen.map((e) => [e.event, e.status]);
  };
  const close = () =>
    l.close(async () => {
      for (const c of children) {
        c.destroyQp();
        c.context?.mr.dereg();
        await c.destroy();
      }
    });
  return { port: l.port, events, children, close };
}

test('P2P peer closing after the MPA Reply, before its RTR: ESTABLISHED then DISCONNECTED (as the kernel), receives flushed', async () => {
  const a = await asyncAcceptor();
  const rep = await replyThenClose(a.port);
  assert.equal(rep.p2p, true);
  assert.deepEqual(await a.events(2), [[CmEventType.ESTABLISHED, 0], [CmEventType.DISCONNECTED, 0]]);
  const wc = a.children[0].recvCq.poll(4);
  assert.equal(wc.length, 2);
  assert.ok(wc.every((w) => w.status === WcStatus.WR_FLUSH_ERR));
  await a.close();
});

test('P2P peer resetting after the Reply, or sending garbage for its RTR: ESTABLISHED then DISCONNECTED, never CONNECT_ERROR', async () => {
  const a = await asyncAcceptor();
  const c = await rawClient(a.port);
  c.sock.resetAndDestroy();
  assert.deepEqual(await a.events(2), [[CmEventType.ESTABLISHED, 0], [CmEventType.DISCONNECTED, 0]]);
  const g = await garbageForRtr(a.port);
  assert.ok(decodeTerminateFpdu(g.after(), 0), 'a TERMINATE for the undecodable FPDU');
  assert.deepEqual((await a.events(4)).slice(2), [[CmEventType.ESTABLISHED, 0], [CmEventType.DISCONNECTED, 0]]);
  await a.close();
});

test('sync accept of a P2P peer that closes before its RTR resolves (ESTABLISHED); the next call sees DISCONNECTED', async () => {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const p = rawClient(listen.srcPort);
  const c = await listen.getRequest();
  c.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
  const accepted = c.accept();
  (await p).sock.end();
  await accepted;
  assert.equal(c.event.event, CmEventType.ESTABLISHED);
  await c.disconnect();
  assert.equal(c.event.event, CmEventType.DISCONNECTED);
  c.destroyQp();
  await c.destroy();
  await listen.destroy();
});

test('a flood of zero-length Read Requests from a peer that reads nothing: the IRD bounds the queue, then TERMINATE RDMAP/remote op/0x07', async () => {
  const s = await server({ ird: 2 });
  const c = await rawClient(s.port, { ord: 2 });
  c.send(rtr());
  await s.ready;
  c.sock.pause(); // read nothing: our responses back up in the kernel, then in the TX
  let msn = 1;
  let maxQueued = 0;
  const chunk = () => {
    const reads = [];
    for (let i = 0; i < 2000; i++) reads.push(encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: msn++, sinkStag: 9, sinkTo: 0, readSize: 0, srcStag: 0, srcTo: 0 }));
    return Buffer.concat(reads);
  };
  while (s.qp.state !== QpState.ERR && msn < 400_000 && !c.isClosed()) {
    if (!c.sock.write(chunk())) await new Promise((r) => c.sock.once('drain', r));
    await new Promise((r) => setImmediate(r));
    maxQueued = Math.max(maxQueued, s.qp.tx.irq.length);
  }
  assert.equal(s.qp.state, QpState.ERR, `the connection survived ${msn - 1} Read Requests`);
  assert.ok(maxQueued <= 2, `${maxQueued} Read Requests queued with IRD 2`);
  c.sock.destroy();
  await teardown(s);
});
