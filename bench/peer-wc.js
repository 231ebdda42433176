// What the benchmark peers (bench/peer.js, bench/roce-peer.js) share.

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
