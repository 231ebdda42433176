// A listener under a flood of half-open connections (TCP connected, no whole MPA Request: nothing
// sent, a partial Request, or one trickled a byte at a time) keeps serving others, and closes each
// half-open connection when the MPA Request timer (siw: 5 s, shortened here) runs out.
import { test } from 'node:test';
import assert from 'node:assert/strict';

process.env.RDMACM_MPA_REQUEST_TIMEOUT_MS = '1000';
const { createEventChannel, createId, PortSpace, CmEventType } = await import('../../../../dist/index.js');
const { activeConnect } = await import('../../../lib/cm-rc-pair.js');
const { halfOpenFlood, rawSocket, mpaRequest } = await import('../../../lib/raw-mpa.js');

test('half-open flood: a real initiator is still accepted, every half-open connection is closed by the MPA Request timer', async () => {
  const ch = createEventChannel();
  const listen = createId(ch, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(0);
  const port = listen.srcPort;
  const t0 = Date.now();
  const flood = await halfOpenFlood(port, '127.0.0.1', 60);
  // A slow sender: the Request a byte every 100 ms never completes in time, and bytes do not
  // restart the timer.
  const slow = await rawSocket(port);
  const req = mpaRequest();
  let i = 0;
  const trickle = setInterval(() => i < req.length && slow.send(req.subarray(i, ++i)), 100);
  try {
    // Meanwhile a real connection goes through.
    const requests = [];
    const served = (async () => {
      for (;;) {
        const ev = await ch.getEvent(AbortSignal.timeout(3000));
        if (ev.event === CmEventType.CONNECT_REQUEST) {
          requests.push(ev.id);
          ev.id.createQp(null, { cap: { maxSendWr: 1, maxRecvWr: 1 } });
          ev.ack();
          await ev.id.accept();
          continue;
        }
        const e = ev.event;
        ev.ack();
        if (e === CmEventType.ESTABLISHED) return;
      }
    })();
    const { ev, close } = await activeConnect(port);
    assert.equal(ev.event, CmEventType.ESTABLISHED);
    ev.ack();
    await served;
    assert.equal(requests.length, 1, 'only the real initiator reached the listener');
    assert.ok(Date.now() - t0 < 1000, 'served before the timer released the flood');
    // The timer closes the flood (and the slow sender) about 1000 ms after each connection.
    await flood.socks[0].until(() => flood.closed() === 60 && slow.isClosed(), 3000);
    assert.ok(Date.now() - t0 >= 980, `released after ${Date.now() - t0} ms, not before the timer`);
    assert.ok(i < req.length, 'the slow Request was still incomplete when closed');
    assert.equal(ch.pending, 0, 'no event for any half-open connection');
    for (const id of requests) {
      id.destroyQp();
      await id.destroy();
    }
    await close();
  } finally {
    clearInterval(trickle);
    flood.destroy();
    slow.sock.destroy();
    await listen.destroy();
    ch.destroy();
  }
});
