// Waiting for completions in the benchmarks' hand-written verbs loops (both sides of each pair).

/** The next completions of `cq` (armed), waiting on its channel; null once the channel is gone. */
export async function nextWcs(cq, ch, max) {
  for (;;) {
    const wcs = cq.poll(max);
    if (wcs.length) return wcs;
    try {
      await ch.getCqEvent();
    } catch {
      return null;
    }
    cq.ackEvents(1);
    cq.reqNotify();
  }
}

/** The next completions of `cq` (up to 32): poll, arm, poll again, then wait on its channel. */
export async function waitCq(cq, ch) {
  for (;;) {
    const wcs = cq.poll(32);
    if (wcs.length) return wcs;
    cq.reqNotify();
    const again = cq.poll(32);
    if (again.length) return again;
    await ch.getCqEvent();
    cq.ackEvents(1);
  }
}
