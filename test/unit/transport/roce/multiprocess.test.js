// Several processes on one host share the soft RoCE device and its UDP port: unicast reaches the
// process that owns the destination QPN whichever process the kernel hands it to (forwarding
// over the QPN block's Unix socket), and multicast reaches every attached process. The port is
// private to this test file (test/lib/roce.js), so other tests on the host see none of it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import {
  PORT,
  lib,
  loDevice,
  v4GidIndex,
  udQp,
  ahTo,
  pollN,
  WrOpcode,
  SendFlags,
  Access,
  WcStatus,
  roce,
  rawSender,
} from '../../../lib/roce.js';

const PEER = fileURLToPath(new URL('./ud-peer.js', import.meta.url));
const children = new Set();
after(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** Start ud-peer.js; `next()` resolves with its next JSON line. */
function peer(...args) {
  const c = spawn(process.execPath, [PEER, ...args.map(String)], { env: { ...process.env, RDMACM_ROCE_PORT: String(PORT) }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(c);
  c.on('exit', () => children.delete(c));
  const lines = [];
  const waiters = [];
  createInterface({ input: c.stdout }).on('line', (l) => {
    const v = JSON.parse(l);
    const w = waiters.shift();
    if (w) w(v);
    else lines.push(v);
  });
  return {
    proc: c,
    next: () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((r) => waiters.push(r))),
    exited: new Promise((r) => c.on('exit', (code) => r(code))),
  };
}

test('Linux gives each unicast datagram to exactly one of the sockets sharing the port (the last bound)', async () => {
  const port = PORT + 1;
  const socks = [];
  const got = [0, 0, 0];
  for (let i = 0; i < 3; i++) {
    const s = dgram.createSocket({ type: 'udp4', reuseAddr: true });
    s.on('message', () => got[i]++);
    s.bind(port, '127.0.0.1');
    await once(s, 'listening');
    socks.push(s);
  }
  const tx = dgram.createSocket('udp4');
  for (let i = 0; i < 20; i++) await new Promise((r) => tx.send('x', port, '127.0.0.1', r));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(got.reduce((a, b) => a + b, 0), 20, 'no datagram duplicated or lost');
  assert.deepEqual(got, [0, 0, 20], 'the most recently bound socket gets them all');
  socks[2].close();
  for (let i = 0; i < 10; i++) await new Promise((r) => tx.send('x', port, '127.0.0.1', r));
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(got, [0, 10, 20], 'then the one bound before it');
  tx.close();
  socks[0].close();
  socks[1].close();
});

test('two processes exchange UD datagrams (each hands its datagrams to the other directly)', async () => {
  const echo = peer('echo', 0x1234, 3);
  const { qpn } = await echo.next();
  // This process binds the port after the peer did, so the kernel hands it the datagrams for
  // both processes: those for the peer's QPN must be forwarded.
  const ctx = loDevice().open();
  const pd = ctx.allocPd();
  const cq = ctx.createCq(32);
  const buf = Buffer.alloc(4096);
  const mr = pd.regMr(buf, Access.LOCAL_WRITE);
  const sgid = v4GidIndex(ctx);
  const qp = udQp(pd, cq, 0x1234);
  for (let i = 0; i < 3; i++) qp.postRecv({ wrId: `r${i}`, sgList: [{ addr: mr.addr + 1024 + 256 * i, length: 256, lkey: mr.lkey }] });
  const ah = ahTo(pd, ctx.queryGid(1, sgid), sgid);
  await new Promise((r) => setTimeout(r, 50)); // let the bind finish
  const before = roce.counters('rxe_lo');
  for (let i = 0; i < 3; i++) {
    buf.write(`ping ${i}`, 100 * i);
    qp.postSend({ wrId: `s${i}`, opcode: WrOpcode.SEND, sendFlags: SendFlags.SIGNALED, sgList: [{ addr: mr.addr + 100 * i, length: 6, lkey: mr.lkey }], ud: { ah, remoteQpn: qpn, remoteQkey: 0x1234 } });
  }
  const wcs = await pollN(cq, 6, 8000);
  const recvs = wcs.filter((w) => String(w.wrId).startsWith('r'));
  assert.equal(recvs.length, 3);
  for (const w of recvs) assert.equal(w.status, WcStatus.SUCCESS);
  const texts = recvs.map((w) => buf.subarray(1024 + 256 * Number(String(w.wrId).slice(1)) + 40, 1024 + 256 * Number(String(w.wrId).slice(1)) + w.byteLen).toString());
  assert.deepEqual(texts.sort(), ['echo ping 0', 'echo ping 1', 'echo ping 2']);
  assert.equal(recvs[0].srcQp, qpn);
  const res = await echo.next();
  assert.deepEqual(res.got.sort(), ['ping 0', 'ping 1', 'ping 2']);
  const after = roce.counters('rxe_lo');
  // Datagrams to another process of this host go straight to its QPN block's Unix socket.
  assert.equal(after.fwd_sent - before.fwd_sent, 3);
  assert.equal(after.fwd_rcvd - before.fwd_rcvd, 3);
  assert.equal(res.counters.fwd_rcvd, 3);
  assert.equal(res.counters.fwd_sent, 3);
  assert.equal(await echo.exited, 0);
  qp.destroy();
});

test('multicast: one sender and two receivers in three processes', async () => {
  const group = `239.255.${(PORT >> 8) & 0xff}.${PORT & 0xff}`;
  const r1 = peer('recv', 0x01234567, 5, group);
  const r2 = peer('recv', 0x01234567, 5, group);
  await r1.next();
  await r2.next();
  await new Promise((r) => setTimeout(r, 100)); // the joins are done once their binds are
  const s = peer('send', 0x01234567, 5, group);
  const sent = await s.next();
  assert.equal(sent.sent, 5);
  const a = await r1.next();
  const b = await r2.next();
  const want = ['msg 0', 'msg 1', 'msg 2', 'msg 3', 'msg 4'];
  assert.deepEqual(a.got, want);
  assert.deepEqual(b.got, want);
  assert.equal(await s.exited, 0);
  assert.equal(await r1.exited, 0);
  assert.equal(await r2.exited, 0);
});

test('a sender and a receiver process, this process idle: delivered whoever binds last', async () => {
  const r = peer('recv', 0x77, 4);
  const { qpn } = await r.next();
  const s = peer('send', 0x77, 4, qpn);
  assert.equal((await s.next()).sent, 4);
  const got = await r.next();
  assert.deepEqual(got.got, ['msg 0', 'msg 1', 'msg 2', 'msg 3']);
  assert.equal(await r.exited, 0);
});

test('a datagram the kernel hands to the wrong process is forwarded to the QPN owner', async () => {
  const r = peer('recv', 0x99, 2);
  const { qpn } = await r.next();
  // A second process binds the port after the first, so the kernel hands it the datagrams.
  const other = peer('recv', 0x97, 1);
  const { qpn: otherQpn } = await other.next();
  await new Promise((res) => setTimeout(res, 50));
  const raw = await rawSender();
  try {
    await raw.send(raw.ud({ destQp: qpn, qkey: 0x99, payload: Buffer.from('via kernel 0') }));
    await raw.send(raw.ud({ destQp: qpn, qkey: 0x99, payload: Buffer.from('via kernel 1') }));
    const got = await r.next();
    assert.deepEqual(got.got, ['via kernel 0', 'via kernel 1']);
    assert.equal(got.counters.fwd_rcvd, 2, 'the owner got both from the other process');
    await raw.send(raw.ud({ destQp: otherQpn, qkey: 0x97, payload: Buffer.from('done') }));
    const o = await other.next();
    assert.deepEqual(o.got, ['done']);
    assert.equal(o.counters.fwd_sent, 2, 'the last-bound process forwarded both');
  } finally {
    raw.close();
  }
});

test('a sender that exits right after posting still gets its datagram to a process of this host', async () => {
  const r = peer('recv', 0x98, 1);
  const { qpn } = await r.next();
  const s = peer('send1', 0x98, 1, qpn);
  assert.equal(await s.exited, 0);
  const got = await r.next();
  assert.deepEqual(got.got, ['msg 0']);
});

for (const [bind, what] of [
  ['127.0.0.1', ''],
  ['0.0.0.0', '; the server listens on the wildcard address before it has opened any device'],
]) {
  test(`udaddy-style: SIDR between two processes (service and replies routed by the GSI router), then UD data${what}`, async () => {
    const CM_PEER = fileURLToPath(new URL('./cm-peer.js', import.meta.url));
    const port = 30000 + (PORT % 20000) + (bind === '0.0.0.0' ? 1 : 0);
    const c = spawn(process.execPath, [CM_PEER, port, 2, bind], { env: { ...process.env, RDMACM_ROCE_PORT: String(PORT) }, stdio: ['ignore', 'pipe', 'inherit'] });
    children.add(c);
    const lines = createInterface({ input: c.stdout });
    const it = lines[Symbol.asyncIterator]();
    assert.deepEqual(JSON.parse((await it.next()).value), { listening: true });
    const { createEventChannel, createId, PortSpace, CmEventType } = lib;
    const ch = createEventChannel();
    const id = createId(ch, null, PortSpace.UDP);
    await id.resolveAddr(null, { address: '127.0.0.1', port }, 2000);
    (await ch.getEvent()).ack();
    await id.resolveRoute(2000);
    (await ch.getEvent()).ack();
    const qp = id.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
    const pd = qp.pd;
    const buf = Buffer.alloc(4096);
    const mr = pd.regMr(buf, Access.LOCAL_WRITE);
    for (let i = 0; i < 2; i++) qp.postRecv({ wrId: i, sgList: [{ addr: mr.addr + 1024 + 512 * i, length: 512, lkey: mr.lkey }] });
    await id.connect({ privateData: Buffer.from('hi from client') });
    const est = await ch.getEvent();
    assert.equal(lib.rdmaEventStr(est.event), 'RDMA_CM_EVENT_ESTABLISHED', `status ${est.status} ${JSON.stringify(roce.counters('rxe_lo'))}`);
    assert.equal(Buffer.from(est.param.ud.privateData.subarray(0, 14)).toString(), 'hi from server');
    const ah = pd.createAh(est.param.ud.ahAttr);
    for (let i = 0; i < 2; i++) {
      buf.write(`ping ${i}`, 100 * i);
      qp.postSend({ wrId: `s${i}`, opcode: WrOpcode.SEND, sgList: [{ addr: mr.addr + 100 * i, length: 6, lkey: mr.lkey }], ud: { ah, remoteQpn: est.param.ud.qpNum, remoteQkey: est.param.ud.qkey } });
    }
    est.ack();
    const wcs = await pollN(qp.recvCq, 2, 8000);
    assert.equal(wcs.length, 2);
    const texts = wcs.map((w) => buf.subarray(1024 + 512 * Number(w.wrId) + 40, 1024 + 512 * Number(w.wrId) + w.byteLen).toString());
    assert.deepEqual(texts.sort(), ['echo ping 0', 'echo ping 1']);
    assert.deepEqual(JSON.parse((await it.next()).value).got.sort(), ['ping 0', 'ping 1']);
    ah.destroy();
    id.destroyQp();
    await id.destroy();
    ch.destroy();
  });
}
