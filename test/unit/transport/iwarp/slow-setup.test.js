// Connection setup when one side is slow. A process that is busy (a saturated CPU, a long
// synchronous task) reads its sockets late: the MPA Request or Reply that came in time must still
// win over the timer that expired meanwhile, as in a kernel, which reads a socket when the bytes
// arrive. A responder that reads late gets the initiator's RTR and first Send in one read; an
// initiator that is slow sends its RTR late. Every case must end in a working connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { sleep } from '../../../lib/wait.js';

// Short MPA timers, so that a stall of a few hundred ms outlasts them (read when the library loads).
process.env.RDMACM_MPA_REPLY_TIMEOUT_MS = '150';
process.env.RDMACM_MPA_REQUEST_TIMEOUT_MS = '150';
const { createId, PortSpace, CmEventType, Access, WcStatus } = await import('../../../../dist/index.js');
const { activeConnect, reap } = await import('../../../lib/cm-rc-pair.js');
const { encodeMpaStartFrame, decodeMpaStartFrame } = await import('../../../../dist/wire/index.js');
const { mpaRequest, rtrWrite } = await import('../../../lib/raw-mpa.js');
const { encodeFpdu, RdmapOpcode } = await import('../../../../dist/wire/index.js');

/** Keep this process (and every socket in it) busy for `ms`: nothing is read meanwhile. */
function stall(ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline);
}
const p2pReply = () => encodeMpaStartFrame({ type: 'reply', markers: false, crc: false, reject: false, enhanced: true, rev: 2, ird: 1, ord: 1, p2p: true, rtrSend: false, rtrWrite: true, rtrRead: false, privateData: new Uint8Array(0) });

test('initiator busy past the MPA Reply timeout while the Reply arrives in time: ESTABLISHED, not UNREACHABLE', async () => {
  let peer = null;
  let rtrSeen = false;
  const srv = net.createServer((s) => {
    peer = s;
    s.on('error', () => {});
    let acc = Buffer.alloc(0);
    let replied = false;
    s.on('data', (d) => {
      acc = Buffer.concat([acc, d]);
      if (!replied) {
        const r = decodeMpaStartFrame(acc, 'request');
        if (!('frame' in r)) return;
        replied = true;
        acc = acc.subarray(r.length);
        s.write(p2pReply());
        // The Reply is on its way; the initiator (this process) now stalls past its 150 ms timer.
        setImmediate(() => stall(400));
      }
      if (replied && acc.length >= 20) rtrSeen = true; // the 20-byte zero-length Write
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { ev, close } = await activeConnect(srv.address().port);
  assert.equal(ev.event, CmEventType.ESTABLISHED, `event ${ev.event} status ${ev.status}`);
  ev.ack();
  await sleep(50);
  assert.ok(rtrSeen, 'the RTR followed the Reply');
  peer?.destroy();
  await close();
  srv.close();
});

test('responder busy past the MPA Request timeout while the Request arrives in time: the request is served', async () => {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const sock = net.connect({ host: '127.0.0.1', port: listen.srcPort });
  sock.on('error', () => {});
  const got = [];
  sock.on('data', (d) => got.push(d));
  await new Promise((r) => sock.once('connect', r));
  // Let the listener accept (its 150 ms Request timer starts), then send the Request and stall.
  await sleep(30);
  sock.write(mpaRequest());
  stall(400);
  const child = await Promise.race([listen.getRequest(), sleep(3000).then(() => null)]);
  assert.ok(child, 'CONNECT_REQUEST delivered: the Request was read, not timed out');
  child.createQp(null, {});
  // A synchronous accept resolves on ESTABLISHED, which waits for our RTR (P2P).
  const accepted = child.accept({ responderResources: 1, initiatorDepth: 1 });
  while (!('frame' in decodeMpaStartFrame(Buffer.concat(got), 'reply'))) await sleep(5);
  const reply = decodeMpaStartFrame(Buffer.concat(got), 'reply');
  assert.ok(!reply.frame.reject, 'an accepting MPA Reply');
  sock.write(rtrWrite());
  await accepted;
  sock.destroy();
  child.destroyQp();
  await child.destroy();
  await listen.destroy();
});

test('a responder that reads late gets the RTR and the first Send together: ESTABLISHED, the receive completes', async () => {
  const listen = createId(null, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(1);
  const buf = Buffer.alloc(64);
  const server = (async () => {
    const child = await listen.getRequest();
    const qp = child.createQp(null, { cap: { maxSendWr: 4, maxRecvWr: 4 } });
    const mr = child.pd.regMr(buf, Access.LOCAL_WRITE);
    qp.postRecv({ wrId: 5, sgList: [{ addr: mr.addr, length: 64, lkey: mr.lkey }] });
    await child.accept({ responderResources: 1, initiatorDepth: 1 });
    return child;
  })();
  const sock = net.connect({ host: '127.0.0.1', port: listen.srcPort });
  sock.on('error', () => {});
  const got = [];
  sock.on('data', (d) => got.push(d));
  await new Promise((r) => sock.once('connect', r));
  sock.write(mpaRequest());
  while (!('frame' in decodeMpaStartFrame(Buffer.concat(got), 'reply'))) await sleep(5);
  // The RTR and a Send back to back, read by the responder in one go.
  sock.write(Buffer.concat([rtrWrite(), encodeFpdu({ opcode: RdmapOpcode.SEND, msn: 1 }, Buffer.from('first words'))]));
  const child = await server;
  // accept() of a synchronous id waits for ESTABLISHED (the RTR): it resolved.
  const [wc] = await reap(child.recvCq, 1);
  assert.equal(wc.status, WcStatus.SUCCESS);
  assert.equal(buf.toString('latin1', 0, wc.byteLen), 'first words');
  sock.destroy();
  child.destroyQp();
  await child.destroy();
  await listen.destroy();
});
