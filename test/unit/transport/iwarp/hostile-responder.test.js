// Our initiator against a broken or hostile responder, played by a raw TCP server: every bad MPA
// Reply ends the attempt with the CM event rdma-core reports, never a crash or a hang.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

process.env.RDMACM_MPA_REPLY_TIMEOUT_MS = '300';
const { CmEventType } = await import('../../../../dist/index.js');
const { activeConnect } = await import('../../../lib/cm-rc-pair.js');
const { encodeMpaStartFrame, decodeMpaStartFrame, decodeTerminateFpdu } = await import('../../../../dist/wire/index.js');

/** A raw responder: `answer(requestFrame, socket)` decides what to send back. */
async function rawServer(answer) {
  const got = [];
  const srv = net.createServer((s) => {
    s.on('error', () => {});
    let acc = Buffer.alloc(0);
    s.on('data', (d) => {
      acc = Buffer.concat([acc, d]);
      got.push(d);
      const r = decodeMpaStartFrame(acc, 'request');
      if ('frame' in r && !s.answered) {
        s.answered = true;
        answer(r.frame, s);
      }
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { port: srv.address().port, got, close: () => srv.close() };
}

async function connectAndWait(port) {
  const { ev, close } = await activeConnect(port, { privateData: Buffer.from('req') });
  const out = { event: ev.event, status: ev.status, pd: Buffer.from(ev.param.conn.privateData) };
  ev.ack();
  await close();
  return out;
}

/** Once we closed: layer, etype and ecode of the TERMINATE we sent after our MPA Request. */
async function terminateAfterRequest(s, sock) {
  await new Promise((res) => (sock.destroyed ? res() : sock.once('close', res)));
  const all = Buffer.concat(s.got);
  const t = decodeTerminateFpdu(all, decodeMpaStartFrame(all, 'request').length);
  return [t.layer, t.etype, t.ecode];
}

const reply = (req, extra) => encodeMpaStartFrame({ type: 'reply', markers: false, crc: false, reject: false, enhanced: true, rev: 2, ird: 1, ord: 1, p2p: false, rtrSend: false, rtrWrite: false, rtrRead: false, privateData: new Uint8Array(0), ...extra });

test('the request we send is siw-shaped: rev 2, enhanced, P2P with Write+Read RTR, our private data', async () => {
  let seen;
  const s = await rawServer((req, sock) => {
    seen = req;
    sock.end(reply(req, { reject: true, privateData: Buffer.from('no') }));
  });
  const r = await connectAndWait(s.port);
  assert.equal(seen.rev, 2);
  assert.equal(seen.enhanced, true);
  assert.equal(seen.markers, false);
  assert.equal(seen.p2p, true);
  assert.equal(seen.rtrWrite, true);
  assert.equal(seen.rtrRead, true);
  assert.equal(Buffer.from(seen.privateData).toString(), 'req');
  assert.deepEqual([r.event, r.status, r.pd.toString()], [CmEventType.REJECTED, -104, 'no']);
  s.close();
});

test('a reply with a bad key: TERMINATE LLP/MPA/0x04, CONNECT_ERROR -EINVAL (as siw)', async () => {
  let sockRef;
  const s = await rawServer((req, sock) => {
    sockRef = sock;
    const b = reply(req);
    b[0] = 0x58;
    sock.write(b);
  });
  const r = await connectAndWait(s.port);
  assert.deepEqual([r.event, r.status], [CmEventType.CONNECT_ERROR, -22]);
  assert.deepEqual(await terminateAfterRequest(s, sockRef), [2, 0, 0x04]);
  s.close();
});

test('a reply of revision 3: CONNECT_ERROR -EINVAL, no TERMINATE (as siw)', async () => {
  const s = await rawServer((req, sock) => {
    const b = reply(req);
    b[17] = 3; // the revision byte
    sock.write(b);
  });
  const r = await connectAndWait(s.port);
  assert.deepEqual([r.event, r.status], [CmEventType.CONNECT_ERROR, -22]);
  const all = Buffer.concat(s.got);
  assert.equal(all.length, decodeMpaStartFrame(all, 'request').length, 'nothing after our request');
  s.close();
});

test('a reply asking for markers: REJECTED -ECONNREFUSED (as siw)', async () => {
  const s = await rawServer((req, sock) => sock.write(reply(req, { markers: true })));
  const r = await connectAndWait(s.port);
  assert.deepEqual([r.event, r.status], [CmEventType.REJECTED, -111]);
  s.close();
});

test('P2P reply selecting no RTR we offered: TERMINATE LLP/MPA/0x07, CONNECT_ERROR', async () => {
  let sockRef;
  const s = await rawServer((req, sock) => {
    sockRef = sock;
    sock.write(reply(req, { p2p: true, rtrSend: true }));
  });
  const r = await connectAndWait(s.port);
  assert.deepEqual([r.event, r.status], [CmEventType.CONNECT_ERROR, -22]);
  assert.deepEqual(await terminateAfterRequest(s, sockRef), [2, 0, 0x07]);
  s.close();
});

test('a non-enhanced reply to our enhanced request: REJECTED -ECONNRESET (as siw)', async () => {
  const s = await rawServer((req, sock) => sock.write(encodeMpaStartFrame({ type: 'reply', markers: false, crc: false, reject: false, enhanced: false, rev: 1, privateData: new Uint8Array(0) })));
  const r = await connectAndWait(s.port);
  assert.deepEqual([r.event, r.status], [CmEventType.REJECTED, -104]);
  s.close();
});

test('no reply at all: UNREACHABLE with -ETIMEDOUT after the MPA reply timer', async () => {
  const s = await rawServer(() => {});
  const t0 = Date.now();
  const r = await connectAndWait(s.port);
  assert.deepEqual([r.event, r.status], [CmEventType.UNREACHABLE, -110]);
  assert.ok(Date.now() - t0 >= 250);
  s.close();
});

test('the responder closes instead of replying: REJECTED (connection reset)', async () => {
  const s = await rawServer((req, sock) => sock.destroy());
  const r = await connectAndWait(s.port);
  assert.equal(r.event, CmEventType.REJECTED);
  s.close();
});
