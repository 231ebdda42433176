// A peer that breaks the rsocket protocol, built from raw rdma_cm + verbs calls, against our
// rsockets: bad versions, credits never granted, data beyond the advertised buffer, writes outside
// it, unknown message types, wrong-size messages. Each must end the connection with an error on
// our stream — no crash, no hang, and nothing delivered out of order or twice.
import test from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createId, PortSpace, Access, WrOpcode, SendFlags, CmEventType } from '../../../dist/index.js';
import * as rs from '../../../dist/rsocket/index.js';
import { rawClient, replyThenClose, junkRequests, rtrWrite, expectTerminateAmong } from '../../lib/raw-mpa.js';
import { encodeFpdu, RdmapOpcode } from '../../../dist/wire/index.js';

const P = rs.protocol;
const T = { timeout: 20_000 };

/** Our server: each accepted socket records its data and how it ended. */
async function ourServer(opts = {}, { read = true } = {}) {
  const conns = [];
  const clientErrors = [];
  const server = rs.createServer(opts, (s) => {
    const rec = { s, data: [], events: [], closed: null };
    rec.closed = new Promise((resolve) => {
      // Not reading means no 'data' listener at all: one added and then paused still makes the
      // stream read ahead (resume() schedules a read(0)), so the socket would consume messages
      // and grant credits behind the test's back.
      if (read) s.on('data', (d) => rec.data.push(Buffer.from(d)));
      s.on('end', () => rec.events.push('end'));
      s.on('error', (e) => rec.events.push(`error ${e.code}`));
      s.on('close', () => resolve(rec));
    });
    conns.push(rec);
  });
  server.on('clientError', (e) => clientErrors.push(e));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const next = async () => {
    for (let i = 0; i < 400 && conns.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    return conns.shift();
  };
  return { server, port: server.address().port, next, queued: () => conns.length, clientErrors, close: () => new Promise((r) => server.close(r)) };
}

/**
 * A raw rsocket client: rdma_cm connect with hand-made rs_conn_data, receives posted for the
 * server's messages, functions to post RDMA WRITEs and 4-byte message SENDs as it pleases.
 */
async function rawPeer(port, { version = 1, credits = 64, rbuf = 65536, connData } = {}) {
  const id = createId(null, null, PortSpace.TCP);
  await id.resolveAddr(null, { address: '127.0.0.1', port });
  await id.resolveRoute();
  const qp = id.createQp(null, { cap: { maxSendWr: 512, maxRecvWr: 64, maxSendSge: 2, maxInlineData: 64 }, sqSigAll: true });
  const pd = id.pd;
  const tgt = pd.regMr(Buffer.alloc(64), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const rmem = pd.regMr(Buffer.alloc(rbuf), Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const msgs = pd.regMr(Buffer.alloc(64 * 4), Access.LOCAL_WRITE);
  const src = pd.regMr(Buffer.alloc(1 << 20), Access.LOCAL_WRITE);
  for (let i = 0; i < 64; i++) qp.postRecv({ wrId: i, sgList: [{ addr: msgs.addr + 4 * i, length: 4, lkey: msgs.lkey }] });
  const cd =
    connData ??
    P.encodeConnData({
      version,
      flags: P.RS_CONN_FLAG_IOMAP,
      credits,
      targetIomapSize: 0,
      targetSgl: { addr: tgt.addr, key: tgt.rkey, length: 2 },
      dataBuf: { addr: rmem.addr, key: rmem.rkey, length: rbuf / 2 },
    });
  let connectError = null;
  try {
    await id.connect({ privateData: cd, initiatorDepth: 1, responderResources: 0 });
  } catch (e) {
    connectError = e;
  }
  const peer = connectError ? null : P.decodeConnData(id.event.param.conn.privateData);
  let woff = 0;
  const p = {
    id,
    qp,
    peer,
    connectError,
    /** RDMA WRITE `bytes` at `addr` (default: the next bytes of the peer's first half) + DATA msg. */
    data(bytes, { addr, msgLen } = {}) {
      Buffer.from(src.buf.buffer, src.buf.byteOffset).set(bytes, 0);
      const to = addr ?? peer.dataBuf.addr + woff;
      if (addr === undefined) woff += bytes.length;
      const wrs = [
        { wrId: 1, opcode: WrOpcode.RDMA_WRITE, sgList: [{ addr: src.addr, length: bytes.length, lkey: src.lkey }], rdma: { remoteAddr: to, rkey: peer.dataBuf.key } },
      ];
      qp.postSend(wrs);
      p.msg(P.rsMsgSet(P.RsOp.DATA, msgLen ?? bytes.length));
    },
    /** A raw message SEND of `bytes` (default: the 4-byte little-endian form of `msg`). */
    msg(msg, bytes) {
      const b = bytes ?? P.encodeMsg(msg);
      Buffer.from(src.buf.buffer, src.buf.byteOffset).set(b, 65536);
      qp.postSend({ wrId: 2, opcode: WrOpcode.SEND, sgList: [{ addr: src.addr + 65536, length: b.length, lkey: src.lkey }], sendFlags: SendFlags.INLINE });
      id.sendCq.poll(64);
      id.recvCq.poll(64);
    },
    /** Resolves once the connection is gone (the CM reports it, or the QP went to error). */
    async gone(ms = 5000) {
      const t0 = Date.now();
      while (Date.now() - t0 < ms) {
        if (id.channel.pending > 0) {
          const ev = id.channel.tryGetEvent();
          ev.ack();
          if (ev.event === CmEventType.DISCONNECTED) return true;
        }
        if (qp.state === 'ERR') return true;
        await new Promise((r) => setTimeout(r, 10));
      }
      return false;
    },
    async close() {
      try {
        id.destroyQp();
      } catch {
        /* gone */
      }
      try {
        await id.destroy();
      } catch {
        /* gone */
      }
    },
  };
  return p;
}

test('a client speaking rsocket version 2 is refused; the server goes on accepting', T, async () => {
  const srv = await ourServer();
  const bad = await rawPeer(srv.port, { version: 2 });
  assert.equal(bad.connectError?.code, 'ECONNREFUSED');
  await bad.close();
  assert.equal(srv.clientErrors.length, 1);
  assert.equal(srv.clientErrors[0].code, 'EOPNOTSUPP');
  // a proper client still gets through
  const c = rs.connect({ port: srv.port, host: '127.0.0.1' });
  await once(c, 'connect');
  c.end('fine');
  const rec = await srv.next();
  await rec.closed;
  assert.equal(Buffer.concat(rec.data).toString(), 'fine');
  await srv.close();
});

test('short connection data (not 40 bytes of rs_conn_data) is refused', T, async () => {
  const srv = await ourServer();
  const bad = await rawPeer(srv.port, { connData: new Uint8Array(12) });
  assert.equal(bad.connectError?.code, 'ECONNREFUSED');
  await bad.close();
  assert.equal(srv.clientErrors[0]?.code, 'EPROTO');
  await srv.close();
});

test('a server answering with another version: connect fails with EOPNOTSUPP', T, async () => {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(2);
  const served = (async () => {
    const child = await listen.getRequest();
    child.createQp(null, { cap: { maxSendWr: 8, maxRecvWr: 8 } });
    const cd = P.encodeConnData({ version: 7, flags: 2, credits: 16, targetIomapSize: 0, targetSgl: { addr: 0x10000000, key: 1, length: 2 }, dataBuf: { addr: 0x10000000, key: 1, length: 4096 } });
    await child.accept({ privateData: cd });
    return child;
  })();
  const c = rs.connect({ port: listen.srcPort, host: '127.0.0.1' });
  const [e] = await once(c, 'error');
  assert.equal(e.code, 'EOPNOTSUPP');
  const child = await served;
  child.destroyQp();
  await child.destroy();
  await listen.destroy();
});

test('credits it never granted: message rq_size + 1 without a credit update is EPROTO', T, async () => {
  const srv = await ourServer({ rqSize: 16 }, { read: false });
  const p = await rawPeer(srv.port);
  assert.equal(p.peer.credits, 16);
  const rec = await srv.next();
  for (let i = 0; i < 17; i++) p.data(Buffer.from([i]));
  const done = await rec.closed;
  assert.deepEqual(done.events, ['error EPROTO']);
  assert.match(done.s.errored?.message ?? '', /credits granted/);
  assert.equal(await p.gone(), true, 'the connection was closed');
  await p.close();
  await srv.close();
});

test('data beyond the advertised receive buffer (DATA longer than the window) is EPROTO', T, async () => {
  const srv = await ourServer();
  const p = await rawPeer(srv.port);
  const rec = await srv.next();
  const half = p.peer.dataBuf.length;
  p.data(Buffer.from('ok'));
  // both halves (the second was advertised by our first credit update) hold 2 * half bytes
  p.data(Buffer.alloc(8, 1), { msgLen: 2 * half });
  const done = await rec.closed;
  assert.equal(Buffer.concat(done.data).toString(), 'ok', 'what came before the violation, once');
  assert.deepEqual(done.events, ['error EPROTO']);
  assert.match(done.s.errored.message, /advertised/);
  assert.equal(await p.gone(), true);
  await p.close();
  await srv.close();
});

test('an RDMA WRITE outside the advertised buffer: TERMINATE, the stream errors (ECONNRESET)', T, async () => {
  const srv = await ourServer();
  const p = await rawPeer(srv.port);
  const rec = await srv.next();
  p.data(Buffer.from('abc'));
  // 2 halves of the receive buffer: 2 * dataBuf.length bytes from its start; write right after
  p.data(Buffer.alloc(16, 7), { addr: p.peer.dataBuf.addr + 2 * p.peer.dataBuf.length });
  const done = await rec.closed;
  assert.equal(Buffer.concat(done.data).toString(), 'abc');
  assert.deepEqual(done.events, ['error ECONNRESET']);
  assert.equal(await p.gone(), true);
  await p.close();
  await srv.close();
});

for (const [what, msg] of [
  ['reserved op 5', P.rsMsgSet(5, 0)],
  ['op WRITE (local bookkeeping, never on the wire)', P.rsMsgSet(P.RsOp.WRITE, 10)],
  ['reserved op 1 (DATA_MORE)', P.rsMsgSet(1, 1)],
  ['an unknown control value', P.rsMsgSet(P.RsOp.CTRL, 9)],
  ['IOMAP_SGL with no iomap table', P.rsMsgSet(P.RsOp.IOMAP_SGL, 0)],
]) {
  test(`unknown message type: ${what} is EPROTO`, T, async () => {
    const srv = await ourServer();
    const p = await rawPeer(srv.port);
    const rec = await srv.next();
    p.data(Buffer.from('before'));
    p.msg(msg);
    p.data(Buffer.from('after'));
    const done = await rec.closed;
    assert.equal(Buffer.concat(done.data).toString(), 'before');
    assert.deepEqual(done.events, ['error EPROTO']);
    assert.equal(await p.gone(), true);
    await p.close();
    await srv.close();
  });
}

test('a message SEND of the wrong size (2 bytes) is EPROTO; 8 bytes overflow the receive (TERMINATE)', T, async () => {
  for (const [len, code] of [
    [2, 'EPROTO'],
    [8, 'ECONNRESET'],
  ]) {
    const srv = await ourServer();
    const p = await rawPeer(srv.port);
    const rec = await srv.next();
    p.msg(0, Buffer.alloc(len));
    const done = await rec.closed;
    assert.deepEqual(done.events, [`error ${code}`], `${len}-byte message`);
    assert.equal(await p.gone(), true);
    await p.close();
    await srv.close();
  }
});

test('a peer that vanishes without an rsocket DISCONNECT: queued data first, then ECONNRESET', T, async () => {
  const srv = await ourServer();
  const p = await rawPeer(srv.port);
  const rec = await srv.next();
  p.data(Buffer.from('last words'));
  await new Promise((r) => setTimeout(r, 50));
  await p.id.disconnect();
  const done = await rec.closed;
  assert.equal(Buffer.concat(done.data).toString(), 'last words');
  assert.deepEqual(done.events, ['error ECONNRESET']);
  await p.close();
  await srv.close();
});

test('a well-behaved raw peer: DATA, SHUTDOWN, then our side answers and disconnects', T, async () => {
  const srv = await ourServer({ allowHalfOpen: true });
  const p = await rawPeer(srv.port);
  const rec = await srv.next();
  rec.s.on('end', () => rec.s.end('bye'));
  p.data(Buffer.from('hello '));
  p.data(Buffer.from('world'));
  p.msg(P.rsMsgSet(P.RsOp.CTRL, P.RsCtrl.SHUTDOWN));
  const done = await rec.closed;
  assert.equal(Buffer.concat(done.data).toString(), 'hello world');
  assert.deepEqual(done.events, ['end']);
  assert.equal(await p.gone(), true, 'our side closed after its DISCONNECT');
  await p.close();
  await srv.close();
});

test('raw peers that leave or stall mid-handshake or send junk do not stop the server; a proper client still gets through', T, async () => {
  const srv = await ourServer();
  const cd = P.encodeConnData({
    version: 1,
    flags: P.RS_CONN_FLAG_IOMAP,
    credits: 64,
    targetIomapSize: 0,
    targetSgl: { addr: 0x10000, key: 0x1234, length: 2 },
    dataBuf: { addr: 0x20000, key: 0x5678, length: 32768 },
  });
  const serverErrors = [];
  srv.server.on('error', (e) => serverErrors.push(e));
  // Valid rsocket connection data, then gone before the RTR: by FIN, by RST; a partial FPDU.
  const a = await rawClient(srv.port, { privateData: cd });
  a.sock.end();
  const b = await rawClient(srv.port, { privateData: cd });
  b.sock.resetAndDestroy();
  const g = await rawClient(srv.port, { privateData: cd });
  g.send(Buffer.from('\xff\xff\x00\x00not an FPDU', 'latin1'));
  // And one that stays, silent, after the Reply: it holds up nobody.
  const idle = await rawClient(srv.port, { privateData: cd });
  // No rsocket connection data at all, then gone.
  await replyThenClose(srv.port, '127.0.0.1');
  await junkRequests(srv.port, '127.0.0.1');
  // The three that left each became a socket that closes at once, or a refused request
  // (clientError: which one depends on whether the peer was gone before the accept).
  const t0 = Date.now();
  while (srv.queued() + srv.clientErrors.length < 3 && Date.now() - t0 < 4000) await new Promise((r) => setTimeout(r, 10));
  assert.equal(srv.queued() + srv.clientErrors.length, 3);
  while (srv.queued() > 0) await (await srv.next()).closed;
  assert.ok(srv.clientErrors.some((e) => e.code === 'EPROTO'), 'the request without connection data is refused');
  const c = rs.connect({ port: srv.port, host: '127.0.0.1' });
  await once(c, 'connect');
  c.end('still serving');
  const rec = await srv.next();
  await rec.closed;
  assert.equal(Buffer.concat(rec.data).toString(), 'still serving');
  assert.deepEqual(serverErrors, []);
  for (const x of [a, b, g, idle]) x.sock.destroy();
  await srv.close();
});

test('4 GiB RDMA Reads of the buffers the server advertises (write-only): TERMINATE, the server goes on', T, async () => {
  const srv = await ourServer();
  const cd = P.encodeConnData({
    version: 1,
    flags: P.RS_CONN_FLAG_IOMAP,
    credits: 64,
    targetIomapSize: 0,
    targetSgl: { addr: 0x10000, key: 0x1234, length: 2 },
    dataBuf: { addr: 0x20000, key: 0x5678, length: 32768 },
  });
  const c = await rawClient(srv.port, { privateData: cd });
  const theirs = P.decodeConnData(c.reply.privateData);
  assert.equal(typeof theirs, 'object');
  c.send(rtrWrite());
  c.send(encodeFpdu({ opcode: RdmapOpcode.READ_REQ, msn: 1, sinkStag: 0x99, sinkTo: 0, readSize: 0xffffffff, srcStag: theirs.dataBuf.key, srcTo: theirs.dataBuf.addr }));
  await expectTerminateAmong(c, 0, 1, 0x02); // RDMAP remote protection: access rights (no REMOTE_READ)
  const rec = await srv.next();
  await rec.closed;
  const ok = rs.connect({ port: srv.port, host: '127.0.0.1' });
  await once(ok, 'connect');
  ok.end('after');
  const r2 = await srv.next();
  await r2.closed;
  assert.equal(Buffer.concat(r2.data).toString(), 'after');
  await srv.close();
});
