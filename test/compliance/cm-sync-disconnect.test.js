// A synchronous id (created without a channel) whose peer disconnects first, on every device that
// connects RDMA_PS_TCP ids: as with librdmacm, the DISCONNECTED is read from the id's own event
// channel (`id->channel`), within a bound given by an AbortSignal; rdma_disconnect afterwards
// answers the peer at once, as CmId.disconnect documents for a call after the peer's (IB: the
// DREP the peer's synchronous rdma_disconnect waits for; iWARP: the connection is already down),
// instead of waiting for the event that was taken. perftest's server
// ends a `-R` run this way (src/cli/perftest/cm.ts cmAwaitPeerDisconnect).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createId, PortSpace, CmEventType, CmState, rdmaEventStr } from '../../dist/index.js';
import { forEachDevice, Cap } from '../lib/devices.js';
import { syncPair } from '../lib/cm.js';
import { aborted } from '../lib/fake-provider.js';

/** `p`, or a failure naming `what` after `ms`. */
function within(p, ms, what) {
  let t;
  const late = new Promise((_, reject) => (t = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(t));
}

forEachDevice([Cap.RC, Cap.CM_TCP], () => {
  test('sync mode: the peer\'s DISCONNECTED read from id.channel within a bound; rdma_disconnect then answers it at once', async () => {
    const listen = createId(null, null, PortSpace.TCP);
    listen.bindAddr({ address: '127.0.0.1', port: 0 });
    await listen.listen(1);
    const { id, child } = await syncPair(listen, '127.0.0.1');
    await listen.destroy();
    try {
      // Nothing yet: the bound passes, the wait rejects with the AbortError, no event is taken.
      const quiet = AbortSignal.timeout(50);
      await assert.rejects(child.channel.getEvent(quiet), aborted('rdma_get_cm_event', quiet.reason));
      assert.equal(child.state, CmState.CONNECT);
      // The client disconnects first; its synchronous call returns once the server answers (IB).
      const clientDone = id.disconnect();
      const ev = await child.channel.getEvent(AbortSignal.timeout(5000));
      assert.equal(rdmaEventStr(ev.event), rdmaEventStr(CmEventType.DISCONNECTED));
      assert.equal(ev.id, child);
      assert.equal(ev.status, 0);
      ev.ack();
      assert.equal(child.state, CmState.DISCONNECT);
      await within(child.disconnect(), 2000, 'the server\'s rdma_disconnect after the peer\'s');
      await within(clientDone, 5000, 'the client\'s rdma_disconnect');
      assert.equal(id.state, CmState.DISCONNECT);
      // Nothing else is owed to the server's id: no second DISCONNECTED.
      const after = child.channel.pending === 0 ? null : child.channel.tryGetEvent();
      assert.notEqual(after?.event, CmEventType.DISCONNECTED);
      after?.ack();
    } finally {
      for (const x of [id, child]) {
        x.destroyQp();
        await x.destroy();
      }
    }
  });
});
