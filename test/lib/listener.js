// An asynchronous rdma_cm listener for the tests that attack our passive side: RDMA_PS_TCP on
// 127.0.0.1 (a free port), every event handed to the test's handler until the listener closes.
import { createEventChannel, createId, PortSpace } from '../../dist/index.js';

/**
 * Listen with `backlog` and hand every event to `onEvent(ev)` (which acks it), one at a time.
 * `close(teardown)` stops taking events, waits for the handler, runs `teardown()` (the test's
 * connections), then destroys the listening id and the channel.
 */
export async function listenLoop(backlog, onEvent) {
  const ch = createEventChannel();
  const listen = createId(ch, null, PortSpace.TCP);
  listen.bindAddr({ address: '127.0.0.1', port: 0 });
  await listen.listen(backlog);
  const stop = new AbortController();
  const loop = (async () => {
    for (;;) {
      let ev;
      try {
        ev = await ch.getEvent(stop.signal);
      } catch {
        return;
      }
      await onEvent(ev);
    }
  })();
  const close = async (teardown) => {
    stop.abort();
    await loop;
    await teardown();
    await listen.destroy();
    ch.destroy();
  };
  return { port: listen.srcPort, close };
}
